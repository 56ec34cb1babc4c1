//! Agents on several hosts: which storage hosts each agent's host sees (NULL: every one, as
//! the manager's own host does), for the scheduler's storage-host predicate.
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::json_null;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000001_agent_storage_hosts"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("agents"))
                    .add_column(json_null(Alias::new("storage_hosts")))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("agents"))
                    .drop_column(Alias::new("storage_hosts"))
                    .to_owned(),
            )
            .await
    }
}
