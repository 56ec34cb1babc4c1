//! "Preferred SSH port" (the guide's user settings, §9.1 note): the port of the app port pool a
//! user's SSH/SFTP app asks for first; empty = a random free one.
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::integer_null;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261127_000002_preferred_ssh_port"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("users"))
                    .add_column(integer_null(Alias::new("preferred_ssh_port")))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Alias::new("users"))
                    .drop_column(Alias::new("preferred_ssh_port"))
                    .to_owned(),
            )
            .await
    }
}
