//! Folders the Backend.AI way: invitations to share a folder with a user (`vfolder_invitations`,
//! as Backend.AI keeps them: pending until accepted, rejected or canceled), and when a
//! folder's usage figure was last measured (`vfolders.usage_at`: lists show the kept figure,
//! never a walk per request).
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{
    string_len, timestamp_with_time_zone, timestamp_with_time_zone_null, uuid,
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
            .drop_table(Table::drop().table(a("vfolder_invitations")).to_owned())
            .await
    }
}
