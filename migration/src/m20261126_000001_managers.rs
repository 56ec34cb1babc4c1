//! Several managers on one database: each `bai serve` says it is alive (`managers`), the work
//! only one may do at a time is held by a lease (`leases`: the leader's, each engine's), a
//! session's in-flight work names the process doing it (`sessions.owner`), and an event too
//! large for PostgreSQL's NOTIFY travels by the id of its row (`event_outbox`).
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{
    big_integer, pk_auto, string, string_null, text, timestamp_with_time_zone,
};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261126_000001_managers"
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
                    .table(a("managers"))
                    .col(string(a("id")).primary_key())
                    .col(string(a("addr")))
                    .col(timestamp_with_time_zone(a("started_at")))
                    .col(timestamp_with_time_zone(a("seen_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(a("leases"))
                    .col(string(a("name")).primary_key())
                    .col(string(a("holder")))
                    .col(timestamp_with_time_zone(a("expires_at")))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(a("event_outbox"))
                    .col(pk_auto(a("id")))
                    .col(text(a("payload")))
                    .col(timestamp_with_time_zone(a("created_at")))
                    .to_owned(),
            )
            .await?;
        // Shared limits: a request counter per key and clock-aligned window, and the HMAC
        // signatures already used (kept until their window has passed).
        manager
            .create_table(
                Table::create()
                    .table(a("limit_windows"))
                    .col(string(a("key")))
                    .col(big_integer(a("window")))
                    .col(big_integer(a("count")))
                    .col(timestamp_with_time_zone(a("expires_at")))
                    .primary_key(Index::create().col(a("key")).col(a("window")))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(a("sessions"))
                    .add_column(string_null(a("owner")))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(a("sessions"))
                    .drop_column(a("owner"))
                    .to_owned(),
            )
            .await?;
        for t in ["limit_windows", "event_outbox", "leases", "managers"] {
            manager
                .drop_table(Table::drop().table(a(t)).to_owned())
                .await?;
        }
        Ok(())
    }
}
