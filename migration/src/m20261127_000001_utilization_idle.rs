//! Idle by utilization: a keypair policy may end sessions whose CPU and GPU use stay below a
//! threshold (percent of what they were allocated) for a window of time; each session keeps
//! when its use last fell (and stayed) below it, and when it was last measured (an end is
//! never decided on old figures).
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{big_integer, integer, timestamp_with_time_zone_null};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261127_000001_utilization_idle"
    }
}

fn a(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per ALTER TABLE.
        for col in [
            integer(a("idle_utilization_pct")).default(0).to_owned(),
            big_integer(a("idle_utilization_secs"))
                .default(0)
                .to_owned(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(a("keypair_resource_policies"))
                        .add_column(col)
                        .to_owned(),
                )
                .await?;
        }
        for col in ["utilization_idle_since", "utilization_sampled_at"] {
            manager
                .alter_table(
                    Table::alter()
                        .table(a("sessions"))
                        .add_column(timestamp_with_time_zone_null(a(col)))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for col in ["utilization_sampled_at", "utilization_idle_since"] {
            manager
                .alter_table(
                    Table::alter()
                        .table(a("sessions"))
                        .drop_column(a(col))
                        .to_owned(),
                )
                .await?;
        }
        for col in ["idle_utilization_secs", "idle_utilization_pct"] {
            manager
                .alter_table(
                    Table::alter()
                        .table(a("keypair_resource_policies"))
                        .drop_column(a(col))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
