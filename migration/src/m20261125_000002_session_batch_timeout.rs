//! Batch sessions as Backend.AI runs them: `batch_timeout`, the seconds a batch job may run
//! before it is ended (NULL: no limit).
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::big_integer_null;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000002_session_batch_timeout"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("sessions"))
                    .add_column(big_integer_null(Alias::new("batch_timeout")))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("sessions"))
                    .drop_column(Alias::new("batch_timeout"))
                    .to_owned(),
            )
            .await
    }
}
