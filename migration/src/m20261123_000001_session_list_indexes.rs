//! Indexes for the session list's default order (most recent change first) under each
//! visibility filter: everything (superadmin), a domain, a project, one user.
use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261123_000001_session_list_indexes"
    }
}

const INDEXES: &[&[&str]] = &[
    &["status_changed"],
    &["user_uuid", "status_changed"],
    &["domain_name", "status_changed"],
    &["group_id", "status_changed"],
];

fn name(cols: &[&str]) -> String {
    format!("ix_sessions_{}", cols.join("_"))
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for cols in INDEXES {
            let mut idx = Index::create();
            idx.name(name(cols)).table(Alias::new("sessions"));
            for c in *cols {
                idx.col(Alias::new(*c));
            }
            manager.create_index(idx.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for cols in INDEXES {
            manager
                .drop_index(
                    Index::drop()
                        .name(name(cols))
                        .table(Alias::new("sessions"))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
