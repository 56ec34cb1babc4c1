//! Folders the Backend.AI way: invitations to share a folder with a user (`vfolder_invitations`,
//! as Backend.AI keeps them: pending until accepted, rejected or canceled), transfers under way
//! (`vfolder_transfers`: an upload or download token, kept by its hash, bound to its folder,
//! path and user, with its expiry; any manager serves it), and when a
//! folder's usage figure was last measured (`vfolders.usage_at`: lists show the kept figure,
//! never a walk per request).
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{
    big_integer, string_len, timestamp_with_time_zone, timestamp_with_time_zone_null, uuid,
};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261126_000003_folder_sharing"
    }
}

fn a(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let fk = |col: &str, table: &str, to: &str| {
            ForeignKey::create()
                .name(format!("fk_vfolder_invitations_{col}"))
                .from(a("vfolder_invitations"), a(col))
                .to(a(table), a(to))
                .on_delete(ForeignKeyAction::Cascade)
                .on_update(ForeignKeyAction::Cascade)
                .to_owned()
        };
        manager
            .create_table(
                Table::create()
                    .table(a("vfolder_invitations"))
                    .col(uuid(a("id")).primary_key())
                    .col(uuid(a("vfolder")))
                    .col(uuid(a("inviter")))
                    .col(uuid(a("invitee")))
                    .col(string_len(a("permission"), 32))
                    .col(string_len(a("state"), 32))
                    .col(timestamp_with_time_zone(a("created_at")))
                    .col(timestamp_with_time_zone_null(a("modified_at")))
                    .foreign_key(&mut fk("vfolder", "vfolders", "id"))
                    .foreign_key(&mut fk("inviter", "users", "uuid"))
                    .foreign_key(&mut fk("invitee", "users", "uuid"))
                    .to_owned(),
            )
            .await?;
        for col in ["invitee", "vfolder"] {
            manager
                .create_index(
                    Index::create()
                        .name(format!("ix_vfolder_invitations_{col}"))
                        .table(a("vfolder_invitations"))
                        .col(a(col))
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(a("vfolder_transfers"))
                    .col(string_len(a("token_hash"), 64).primary_key())
                    .col(string_len(a("op"), 16))
                    .col(uuid(a("vfolder")))
                    .col(uuid(a("user")))
                    .col(string_len(a("path"), 4096))
                    .col(big_integer(a("size")))
                    .col(timestamp_with_time_zone(a("created_at")))
                    .col(timestamp_with_time_zone(a("expires_at")))
                    .foreign_key(
                        &mut ForeignKey::create()
                            .name("fk_vfolder_transfers_vfolder")
                            .from(a("vfolder_transfers"), a("vfolder"))
                            .to(a("vfolders"), a("id"))
                            .on_delete(ForeignKeyAction::Cascade)
                            .to_owned(),
                    )
                    .foreign_key(
                        &mut ForeignKey::create()
                            .name("fk_vfolder_transfers_user")
                            .from(a("vfolder_transfers"), a("user"))
                            .to(a("users"), a("uuid"))
                            .on_delete(ForeignKeyAction::Cascade)
                            .to_owned(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(a("vfolders"))
                    .add_column(timestamp_with_time_zone_null(a("usage_at")))
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(a("vfolders"))
                    .drop_column(a("usage_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .drop_table(Table::drop().table(a("vfolder_transfers")).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(a("vfolder_invitations")).to_owned())
            .await
    }
}
