//! Several managers, continued: what one manager starts in a session can be used through any
//! other. An execution's output (`exec_runs`, its newest chunks in `exec_chunks`) is copied to
//! the database by the manager running it, input for it waits in `exec_inputs` until that
//! manager writes it to the program; an app started in a session (`app_routes`) keeps its
//! per-launch token here so every manager serves it on a port of its own; a session being
//! committed to an image (`session_commits`) is claimed here, so no two managers commit it at
//! once and images under way count against the owner's quota wherever they are made.
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{
    big_integer, big_integer_null, boolean, pk_auto, string, text, timestamp_with_time_zone, uuid,
    uuid_null,
};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261126_000002_shared_runs_and_apps"
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
                    .table(a("exec_runs"))
                    .col(uuid(a("id")).primary_key())
                    .col(uuid(a("session_id")))
                    .col(uuid(a("owner")))
                    .col(string(a("manager")))
                    // The first chunk still kept, the next one to come, and where the next
                    // poll (Backend.AI's `continue`) reads on.
                    .col(big_integer(a("first_seq")))
                    .col(big_integer(a("next_seq")))
                    .col(big_integer(a("polled")))
                    .col(boolean(a("finished")))
                    .col(big_integer_null(a("exit_code")))
                    .col(timestamp_with_time_zone(a("updated_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(a("exec_chunks"))
                    .col(uuid(a("run_id")))
                    .col(big_integer(a("seq")))
                    .col(string(a("stream")))
                    .col(text(a("data")))
                    .col(big_integer_null(a("exit_code")))
                    .primary_key(Index::create().col(a("run_id")).col(a("seq")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(a("exec_inputs"))
                    .col(pk_auto(a("id")))
                    .col(uuid(a("run_id")))
                    .col(text(a("data")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("exec_inputs_run")
                    .table(a("exec_inputs"))
                    .col(a("run_id"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(a("session_commits"))
                    .col(uuid(a("session_id")).primary_key())
                    .col(uuid_null(a("adds_for")))
                    .col(string(a("manager")))
                    .col(timestamp_with_time_zone(a("started_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(a("app_routes"))
                    .col(uuid(a("session_id")))
                    .col(string(a("app")))
                    .col(string(a("token")))
                    .col(boolean(a("public")))
                    .primary_key(Index::create().col(a("session_id")).col(a("app")))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            "session_commits",
            "app_routes",
            "exec_inputs",
            "exec_chunks",
            "exec_runs",
        ] {
            manager
                .drop_table(Table::drop().table(a(t)).to_owned())
                .await?;
        }
        Ok(())
    }
}
