//! Session templates (Backend.AI's `session_templates`): a stored task template with its
//! owner, project and who may use it (`scope`: the owner, the project, the domain). Deleting
//! one only marks it inactive, as Backend.AI does.
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{
    boolean, json, string_len, timestamp_with_time_zone, uuid, uuid_null,
};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000004_session_templates"
    }
}

fn a(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let fk = |col: &str, table: &str, to: &str, on_delete: ForeignKeyAction| {
            ForeignKey::create()
                .name(format!("fk_session_templates_{col}"))
                .from(a("session_templates"), a(col))
                .to(a(table), a(to))
                .on_delete(on_delete)
                .on_update(ForeignKeyAction::Cascade)
                .to_owned()
        };
        manager
            .create_table(
                Table::create()
                    .table(a("session_templates"))
                    .col(uuid(a("id")).primary_key())
                    .col(timestamp_with_time_zone(a("created_at")))
                    .col(timestamp_with_time_zone(a("modified_at")))
                    .col(boolean(a("is_active")))
                    .col(string_len(a("domain_name"), 64))
                    .col(uuid_null(a("group_id")))
                    .col(uuid(a("user_uuid")))
                    .col(string_len(a("type"), 32))
                    .col(string_len(a("scope"), 32))
                    .col(string_len(a("name"), 128))
                    .col(json(a("template")))
                    .foreign_key(&mut fk(
                        "domain_name",
                        "domains",
                        "name",
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut fk(
                        "group_id",
                        "groups",
                        "id",
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut fk(
                        "user_uuid",
                        "users",
                        "uuid",
                        ForeignKeyAction::Cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        for col in ["user_uuid", "domain_name"] {
            manager
                .create_index(
                    Index::create()
                        .name(format!("ix_session_templates_{col}"))
                        .table(a("session_templates"))
                        .col(a(col))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(a("session_templates")).to_owned())
            .await
    }
}
