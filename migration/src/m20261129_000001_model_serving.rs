//! Model serving the Backend.AI way: an endpoint keeps `replicas` inference sessions of one
//! model folder (`endpoints`), each replica a route that traffic may reach (`routings`), and
//! the tokens a private endpoint takes (`endpoint_tokens`: the token's claims, never the
//! token; it is signed again from them with the endpoint's key). A keypair resource policy
//! bounds the replicas of one endpoint (`max_session_count_per_model_session`).
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{
    boolean, double, integer, integer_null, json, json_null, string_len, string_len_null,
    text_null, timestamp_with_time_zone, timestamp_with_time_zone_null, uuid, uuid_null,
};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261129_000001_model_serving"
    }
}

fn a(name: &str) -> Alias {
    Alias::new(name)
}

fn fk(
    from: &str,
    col: &str,
    table: &str,
    to: &str,
    on_delete: ForeignKeyAction,
) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .name(format!("fk_{from}_{col}"))
        .from(a(from), a(col))
        .to(a(table), a(to))
        .on_delete(on_delete)
        .on_update(ForeignKeyAction::Cascade)
        .to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        use ForeignKeyAction::{Cascade, SetNull};
        manager
            .create_table(
                Table::create()
                    .table(a("endpoints"))
                    .col(uuid(a("id")).primary_key())
                    .col(string_len(a("name"), 64))
                    .col(string_len(a("domain_name"), 64))
                    .col(uuid(a("project")))
                    .col(string_len(a("resource_group"), 64))
                    .col(uuid(a("created_user")))
                    .col(uuid(a("session_owner")))
                    .col(string_len(a("owner_access_key"), 64))
                    .col(string_len(a("image"), 512))
                    .col(string_len(a("architecture"), 32))
                    .col(uuid_null(a("model")))
                    .col(string_len(a("model_mount_destination"), 1024))
                    .col(string_len_null(a("model_definition_path"), 1024))
                    .col(json(a("model_definition")))
                    .col(string_len(a("runtime_variant"), 32))
                    .col(json(a("resources")))
                    .col(json(a("resource_opts")))
                    .col(json(a("environ")))
                    .col(string_len(a("cluster_mode"), 16))
                    .col(integer(a("cluster_size")))
                    .col(integer(a("replicas")))
                    .col(boolean(a("open_to_public")))
                    .col(string_len(a("lifecycle_stage"), 16))
                    .col(integer(a("retries")))
                    .col(integer_null(a("port")))
                    .col(string_len(a("token_key"), 64))
                    .col(string_len_null(a("tag"), 256))
                    .col(text_null(a("startup_command")))
                    .col(text_null(a("bootstrap_script")))
                    .col(string_len_null(a("callback_url"), 2048))
                    .col(timestamp_with_time_zone(a("created_at")))
                    .col(timestamp_with_time_zone_null(a("destroyed_at")))
                    .foreign_key(&mut fk("endpoints", "project", "groups", "id", Cascade))
                    .foreign_key(&mut fk(
                        "endpoints",
                        "session_owner",
                        "users",
                        "uuid",
                        Cascade,
                    ))
                    .foreign_key(&mut fk("endpoints", "model", "vfolders", "id", SetNull))
                    .to_owned(),
            )
            .await?;
        // One live service of a name per owner, one live service per port (a destroyed one
        // gives its port up): partial unique indexes, as SQLite and PostgreSQL both have them.
        let db = manager.get_connection();
        db.execute_unprepared(
            "CREATE UNIQUE INDEX ux_endpoints_owner_name ON endpoints (session_owner, name) WHERE lifecycle_stage <> 'destroyed'",
        )
        .await?;
        db.execute_unprepared(
            "CREATE UNIQUE INDEX ux_endpoints_port ON endpoints (port) WHERE port IS NOT NULL",
        )
        .await?;
        for col in ["session_owner", "project", "lifecycle_stage"] {
            manager
                .create_index(
                    Index::create()
                        .name(format!("ix_endpoints_{col}"))
                        .table(a("endpoints"))
                        .col(a(col))
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(a("routings"))
                    .col(uuid(a("id")).primary_key())
                    .col(uuid(a("endpoint")))
                    .col(uuid_null(a("session")))
                    .col(string_len(a("status"), 32))
                    .col(double(a("traffic_ratio")))
                    .col(integer(a("health_failures")))
                    .col(timestamp_with_time_zone_null(a("service_started_at")))
                    .col(timestamp_with_time_zone_null(a("healthy_at")))
                    .col(json_null(a("error_data")))
                    .col(timestamp_with_time_zone(a("created_at")))
                    .foreign_key(&mut fk("routings", "endpoint", "endpoints", "id", Cascade))
                    .to_owned(),
            )
            .await?;
        for col in ["endpoint", "session"] {
            manager
                .create_index(
                    Index::create()
                        .name(format!("ix_routings_{col}"))
                        .table(a("routings"))
                        .col(a(col))
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(a("endpoint_tokens"))
                    .col(uuid(a("id")).primary_key())
                    .col(uuid(a("endpoint")))
                    .col(string_len(a("domain_name"), 64))
                    .col(uuid(a("project")))
                    .col(uuid(a("session_owner")))
                    .col(timestamp_with_time_zone(a("created_at")))
                    .col(timestamp_with_time_zone(a("valid_until")))
                    .foreign_key(&mut fk(
                        "endpoint_tokens",
                        "endpoint",
                        "endpoints",
                        "id",
                        Cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_endpoint_tokens_endpoint")
                    .table(a("endpoint_tokens"))
                    .col(a("endpoint"))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(a("keypair_resource_policies"))
                    .add_column(integer(a("max_session_count_per_model_session")).default(10))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(a("keypair_resource_policies"))
                    .drop_column(a("max_session_count_per_model_session"))
                    .to_owned(),
            )
            .await?;
        for t in ["endpoint_tokens", "routings", "endpoints"] {
            manager
                .drop_table(Table::drop().table(a(t)).to_owned())
                .await?;
        }
        Ok(())
    }
}
