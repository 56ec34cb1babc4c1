//! Dotfiles of projects and domains (Backend.AI's `/group-config/dotfiles` and
//! `/domain-config/dotfiles`), kept on their rows as the keypair's are (`keypairs.dotfiles`):
//! one encoded list per owner, changed by compare-and-set.
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::blob_null;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261126_000004_dotfiles"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["groups", "domains"] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Alias::new(table))
                        .add_column(blob_null(Alias::new("dotfiles")))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["groups", "domains"] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Alias::new(table))
                        .drop_column(Alias::new("dotfiles"))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
