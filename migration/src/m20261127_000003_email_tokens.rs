//! Links sent by e-mail ("Forgot password?", signup verification): one row per link, the
//! token's hash only, removed when used, expired, or when its user goes.
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{string_len, timestamp_with_time_zone, uuid};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261127_000003_email_tokens"
    }
}

fn a(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(a("email_tokens"))
                    .col(string_len(a("token_hash"), 64).primary_key())
                    .col(string_len(a("purpose"), 32))
                    .col(uuid(a("user_uuid")))
                    .col(string_len(a("email"), 256))
                    .col(timestamp_with_time_zone(a("created_at")))
                    .col(timestamp_with_time_zone(a("expires_at")))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_email_tokens_user_uuid")
                            .from(a("email_tokens"), a("user_uuid"))
                            .to(a("users"), a("uuid"))
                            .on_delete(ForeignKeyAction::Cascade)
                            .on_update(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_email_tokens_user_uuid")
                    .table(a("email_tokens"))
                    .col(a("user_uuid"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(a("email_tokens")).to_owned())
            .await
    }
}
