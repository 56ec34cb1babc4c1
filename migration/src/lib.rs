//! Schema migrations. The server runs them on start (`bai migrate` runs them alone).
pub use sea_orm_migration::prelude::*;

mod m20261121_000001_init;
mod m20261123_000001_session_list_indexes;
mod m20261125_000001_agent_storage_hosts;
mod m20261125_000002_session_batch_timeout;
mod m20261125_000003_session_dependencies;
mod m20261125_000004_session_templates;
mod m20261125_000005_customized_images;
mod m20261126_000001_managers;
mod m20261126_000002_shared_runs_and_apps;
mod m20261126_000003_folder_sharing;
mod m20261126_000004_dotfiles;
mod m20261127_000001_utilization_idle;
mod m20261127_000002_preferred_ssh_port;
mod m20261127_000003_email_tokens;
mod m20261127_000004_usage_series;
mod m20261129_000001_model_serving;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261121_000001_init::Migration),
            Box::new(m20261123_000001_session_list_indexes::Migration),
            Box::new(m20261125_000001_agent_storage_hosts::Migration),
            Box::new(m20261125_000002_session_batch_timeout::Migration),
            Box::new(m20261125_000003_session_dependencies::Migration),
            Box::new(m20261125_000004_session_templates::Migration),
            Box::new(m20261125_000005_customized_images::Migration),
            Box::new(m20261126_000001_managers::Migration),
            Box::new(m20261126_000002_shared_runs_and_apps::Migration),
            Box::new(m20261126_000003_folder_sharing::Migration),
            Box::new(m20261126_000004_dotfiles::Migration),
            Box::new(m20261127_000001_utilization_idle::Migration),
            Box::new(m20261127_000002_preferred_ssh_port::Migration),
            Box::new(m20261127_000003_email_tokens::Migration),
            Box::new(m20261127_000004_usage_series::Migration),
            Box::new(m20261129_000001_model_serving::Migration),
        ]
    }
}
