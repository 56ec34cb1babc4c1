//! Usage over time (Statistics): per session, user, project, resource group and domain, in
//! 1-minute, 1-hour and 1-day buckets. Each row holds sums (session-seconds, core-seconds,
//! byte-seconds, GPU-seconds), so coarser buckets and several managers' samples simply add up.
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{
    big_integer, double, integer, string_len, string_len_null, uuid_null,
};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261127_000004_usage_series"
    }
}

fn a(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let mut t = Table::create();
        t.table(a("usage_series"))
            .col(string_len(a("scope"), 16))
            .col(string_len(a("scope_id"), 256))
            .col(integer(a("res")))
            .col(big_integer(a("ts")))
            .col(string_len_null(a("domain_name"), 64))
            .col(uuid_null(a("owner")));
        for c in [
            "secs",
            "cpu_alloc",
            "cpu_used",
            "mem_alloc",
            "mem_used",
            "gpu_alloc",
            "gpu_used",
        ] {
            t.col(double(a(c)));
        }
        t.primary_key(
            Index::create()
                .col(a("scope"))
                .col(a("scope_id"))
                .col(a("res"))
                .col(a("ts")),
        );
        manager.create_table(t.to_owned()).await?;
        // Totals of a scope over a period (the admin's lists), and pruning by age.
        manager
            .create_index(
                Index::create()
                    .name("ix_usage_series_scope_res_ts")
                    .table(a("usage_series"))
                    .col(a("scope"))
                    .col(a("res"))
                    .col(a("ts"))
                    .to_owned(),
            )
            .await?;
        // A user's own lists (sessions, itself) and a domain admin's (its domain's).
        for (name, col) in [
            ("ix_usage_series_owner", "owner"),
            ("ix_usage_series_domain", "domain_name"),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(a("usage_series"))
                        .col(a("scope"))
                        .col(a(col))
                        .col(a("res"))
                        .col(a("ts"))
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_index(
                Index::create()
                    .name("ix_usage_series_res_ts")
                    .table(a("usage_series"))
                    .col(a("res"))
                    .col(a("ts"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(a("usage_series")).to_owned())
            .await
    }
}
