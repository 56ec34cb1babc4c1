//! Session dependencies as Backend.AI keeps them: a session starts only after the sessions it
//! depends on ended in success (`session_dependencies`, one row per edge). Both ends go with
//! their session.
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::uuid;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000003_session_dependencies"
    }
}

fn a(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let fk = |col: &str| {
            ForeignKey::create()
                .name(format!("fk_session_dependencies_{col}"))
                .from(a("session_dependencies"), a(col))
                .to(a("sessions"), a("id"))
                .on_delete(ForeignKeyAction::Cascade)
                .on_update(ForeignKeyAction::Cascade)
                .to_owned()
        };
        manager
            .create_table(
                Table::create()
                    .table(a("session_dependencies"))
                    .col(uuid(a("session_id")))
                    .col(uuid(a("depends_on")))
                    .primary_key(Index::create().col(a("session_id")).col(a("depends_on")))
                    .foreign_key(&mut fk("session_id"))
                    .foreign_key(&mut fk("depends_on"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_session_dependencies_depends_on")
                    .table(a("session_dependencies"))
                    .col(a("depends_on"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(a("session_dependencies")).to_owned())
            .await
    }
}
