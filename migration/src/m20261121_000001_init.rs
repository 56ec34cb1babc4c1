//! The whole first data model, shaped after Backend.AI's tables (see entity/).
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn a(name: &str) -> Alias {
    Alias::new(name)
}

/// An enum column: Backend.AI's string values, at most 32 characters.
fn enum_col(name: &str) -> ColumnDef {
    string_len(a(name), 32)
}

fn ts(name: &str) -> ColumnDef {
    timestamp_with_time_zone(a(name))
}

fn ts_null(name: &str) -> ColumnDef {
    timestamp_with_time_zone_null(a(name))
}

fn fk(
    from_table: &str,
    from_col: &str,
    to_table: &str,
    to_col: &str,
    on_delete: ForeignKeyAction,
) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .name(format!("fk_{from_table}_{from_col}"))
        .from(a(from_table), a(from_col))
        .to(a(to_table), a(to_col))
        .on_delete(on_delete)
        .on_update(ForeignKeyAction::Cascade)
        .to_owned()
}

fn index(table: &str, cols: &[&str], unique: bool) -> IndexCreateStatement {
    let mut idx = Index::create();
    idx.name(format!("ix_{table}_{}", cols.join("_")))
        .table(a(table));
    for c in cols {
        idx.col(a(c));
    }
    if unique {
        idx.unique();
    }
    idx.to_owned()
}

fn tables() -> Vec<TableCreateStatement> {
    use ForeignKeyAction::{Cascade, Restrict};
    vec![
        Table::create()
            .table(a("domains"))
            .col(string_len(a("name"), 64).primary_key())
            .col(text_null(a("description")))
            .col(boolean(a("is_active")))
            .col(ts("created_at"))
            .col(ts("modified_at"))
            .col(json(a("total_resource_slots")))
            .col(json(a("allowed_vfolder_hosts")))
            .col(json(a("allowed_docker_registries")))
            .col(string_null(a("integration_id")))
            .to_owned(),
        Table::create()
            .table(a("keypair_resource_policies"))
            .col(string_len(a("name"), 256).primary_key())
            .col(ts("created_at"))
            .col(enum_col("default_for_unspecified"))
            .col(json(a("total_resource_slots")))
            .col(big_integer(a("max_session_lifetime")))
            .col(integer(a("max_concurrent_sessions")))
            .col(integer_null(a("max_pending_session_count")))
            .col(integer(a("max_containers_per_session")))
            .col(big_integer(a("idle_timeout")))
            .col(json(a("allowed_vfolder_hosts")))
            .col(integer(a("max_vfolder_count")))
            .col(big_integer(a("max_vfolder_size")))
            .to_owned(),
        Table::create()
            .table(a("groups"))
            .col(uuid(a("id")).primary_key())
            .col(string_len(a("name"), 64))
            .col(text_null(a("description")))
            .col(boolean(a("is_active")))
            .col(ts("created_at"))
            .col(ts("modified_at"))
            .col(string_len(a("domain_name"), 64))
            .col(json(a("total_resource_slots")))
            .col(json(a("allowed_vfolder_hosts")))
            .col(string_null(a("integration_id")))
            .col(enum_col("type"))
            .foreign_key(&mut fk(
                "groups",
                "domain_name",
                "domains",
                "name",
                Restrict,
            ))
            .to_owned(),
        Table::create()
            .table(a("users"))
            .col(uuid(a("uuid")).primary_key())
            .col(string_len_uniq(a("username"), 64))
            .col(string_len_uniq(a("email"), 64))
            .col(text(a("password")))
            .col(boolean(a("need_password_change")))
            .col(string_len_null(a("full_name"), 64))
            .col(text_null(a("description")))
            .col(enum_col("status"))
            .col(text_null(a("status_info")))
            .col(ts("created_at"))
            .col(ts("modified_at"))
            .col(ts_null("password_changed_at"))
            .col(string_len(a("domain_name"), 64))
            .col(enum_col("role"))
            .col(json_null(a("allowed_client_ip")))
            .col(string_len_null(a("main_access_key"), 20))
            .foreign_key(&mut fk("users", "domain_name", "domains", "name", Restrict))
            .to_owned(),
        Table::create()
            .table(a("association_groups_users"))
            .col(uuid(a("user_id")))
            .col(uuid(a("group_id")))
            .primary_key(Index::create().col(a("user_id")).col(a("group_id")))
            .foreign_key(&mut fk(
                "association_groups_users",
                "user_id",
                "users",
                "uuid",
                Cascade,
            ))
            .foreign_key(&mut fk(
                "association_groups_users",
                "group_id",
                "groups",
                "id",
                Cascade,
            ))
            .to_owned(),
        Table::create()
            .table(a("keypairs"))
            .col(string_len(a("access_key"), 20).primary_key())
            .col(string_len(a("secret_key"), 40))
            .col(string_len(a("user_id"), 256))
            .col(uuid(a("user")))
            .col(boolean(a("is_active")))
            .col(boolean(a("is_admin")))
            .col(ts("created_at"))
            .col(ts("modified_at"))
            .col(ts_null("last_used"))
            .col(integer(a("rate_limit")))
            .col(big_integer(a("num_queries")))
            .col(text_null(a("ssh_public_key")))
            .col(text_null(a("ssh_private_key")))
            .col(string_len(a("resource_policy"), 256))
            .col(blob_null(a("dotfiles")))
            .col(text_null(a("bootstrap_script")))
            .foreign_key(&mut fk("keypairs", "user", "users", "uuid", Restrict))
            .foreign_key(&mut fk(
                "keypairs",
                "resource_policy",
                "keypair_resource_policies",
                "name",
                Restrict,
            ))
            .to_owned(),
        Table::create()
            .table(a("scaling_groups"))
            .col(string_len(a("name"), 64).primary_key())
            .col(text_null(a("description")))
            .col(boolean(a("is_active")))
            .col(boolean(a("is_public")))
            .col(ts("created_at"))
            .col(string_null(a("wsproxy_addr")))
            .col(string_len(a("driver"), 64))
            .col(json(a("driver_opts")))
            .col(enum_col("scheduler"))
            .col(json(a("scheduler_opts")))
            .col(boolean(a("use_host_network")))
            .to_owned(),
        Table::create()
            .table(a("sgroups_for_domains"))
            .col(string_len(a("scaling_group"), 64))
            .col(string_len(a("domain"), 64))
            .primary_key(Index::create().col(a("scaling_group")).col(a("domain")))
            .foreign_key(&mut fk(
                "sgroups_for_domains",
                "scaling_group",
                "scaling_groups",
                "name",
                Cascade,
            ))
            .foreign_key(&mut fk(
                "sgroups_for_domains",
                "domain",
                "domains",
                "name",
                Cascade,
            ))
            .to_owned(),
        Table::create()
            .table(a("sgroups_for_groups"))
            .col(string_len(a("scaling_group"), 64))
            .col(uuid(a("group")))
            .primary_key(Index::create().col(a("scaling_group")).col(a("group")))
            .foreign_key(&mut fk(
                "sgroups_for_groups",
                "scaling_group",
                "scaling_groups",
                "name",
                Cascade,
            ))
            .foreign_key(&mut fk(
                "sgroups_for_groups",
                "group",
                "groups",
                "id",
                Cascade,
            ))
            .to_owned(),
        Table::create()
            .table(a("sgroups_for_keypairs"))
            .col(string_len(a("scaling_group"), 64))
            .col(string_len(a("access_key"), 20))
            .primary_key(Index::create().col(a("scaling_group")).col(a("access_key")))
            .foreign_key(&mut fk(
                "sgroups_for_keypairs",
                "scaling_group",
                "scaling_groups",
                "name",
                Cascade,
            ))
            .foreign_key(&mut fk(
                "sgroups_for_keypairs",
                "access_key",
                "keypairs",
                "access_key",
                Cascade,
            ))
            .to_owned(),
        Table::create()
            .table(a("agents"))
            .col(string_len(a("id"), 64).primary_key())
            .col(enum_col("status"))
            .col(ts_null("status_changed"))
            .col(string_len(a("region"), 64))
            .col(string_len(a("scaling_group"), 64))
            .col(boolean(a("schedulable")))
            .col(json(a("available_slots")))
            .col(json(a("occupied_slots")))
            .col(string_len(a("addr"), 128))
            .col(string_null(a("public_host")))
            .col(ts("first_contact"))
            .col(ts_null("lost_at"))
            .col(ts_null("last_heartbeat"))
            .col(string_len(a("version"), 64))
            .col(string_len(a("architecture"), 32))
            .col(json(a("compute_plugins")))
            .col(json_null(a("live_stat")))
            .to_owned(),
        Table::create()
            .table(a("sessions"))
            .col(uuid(a("id")).primary_key())
            .col(string_len(a("name"), 64))
            .col(enum_col("session_type"))
            .col(integer(a("priority")))
            .col(enum_col("cluster_mode"))
            .col(integer(a("cluster_size")))
            .col(json(a("agent_ids")))
            .col(string_len_null(a("scaling_group_name"), 64))
            .col(string_len(a("domain_name"), 64))
            .col(uuid(a("group_id")))
            .col(uuid(a("user_uuid")))
            .col(string_len(a("access_key"), 20))
            .col(json(a("images")))
            .col(string_null(a("tag")))
            .col(json(a("occupying_slots")))
            .col(json(a("requested_slots")))
            .col(json(a("vfolder_mounts")))
            .col(json(a("environ")))
            .col(json(a("resource_opts")))
            .col(text_null(a("bootstrap_script")))
            .col(text_null(a("startup_command")))
            .col(ts("created_at"))
            .col(ts_null("terminated_at"))
            .col(ts_null("starts_at"))
            .col(enum_col("status"))
            .col(ts("status_changed"))
            .col(text_null(a("status_info")))
            .col(json_null(a("status_data")))
            .col(json(a("status_history")))
            .col(text_null(a("callback_url")))
            .col(enum_col("result"))
            .col(big_integer(a("num_queries")))
            .col(json_null(a("last_stat")))
            .col(ts_null("last_activity"))
            .to_owned(),
        Table::create()
            .table(a("kernels"))
            .col(uuid(a("id")).primary_key())
            .col(uuid(a("session_id")))
            .col(enum_col("cluster_role"))
            .col(integer(a("cluster_idx")))
            .col(integer(a("local_rank")))
            .col(string_len(a("cluster_hostname"), 64))
            .col(string_len_null(a("agent"), 64))
            .col(string_null(a("agent_addr")))
            .col(string_len(a("image"), 512))
            .col(string_len(a("architecture"), 32))
            .col(string_len(a("registry"), 512))
            .col(string_len_null(a("container_id"), 64))
            .col(json(a("occupied_slots")))
            .col(json(a("requested_slots")))
            .col(json(a("mounts")))
            .col(json(a("resource_opts")))
            .col(json(a("service_ports")))
            .col(string_len(a("domain_name"), 64))
            .col(uuid(a("group_id")))
            .col(uuid(a("user_uuid")))
            .col(string_len(a("access_key"), 20))
            .col(enum_col("status"))
            .col(ts("status_changed"))
            .col(text_null(a("status_info")))
            .col(json_null(a("status_data")))
            .col(json(a("status_history")))
            .col(ts("created_at"))
            .col(ts_null("terminated_at"))
            .col(integer_null(a("exit_code")))
            .col(text_null(a("container_log")))
            .col(json_null(a("last_stat")))
            .foreign_key(&mut fk("kernels", "session_id", "sessions", "id", Cascade))
            .to_owned(),
        Table::create()
            .table(a("images"))
            .col(uuid(a("id")).primary_key())
            .col(string_len(a("name"), 512))
            .col(string_len(a("image"), 512))
            .col(string_len(a("tag"), 128))
            .col(string_len(a("registry"), 256))
            .col(string_len(a("architecture"), 32))
            .col(string_len(a("config_digest"), 128))
            .col(big_integer(a("size_bytes")))
            .col(boolean(a("is_local")))
            .col(enum_col("type"))
            .col(string_null(a("accelerators")))
            .col(json(a("labels")))
            .col(json(a("resources")))
            .col(ts("created_at"))
            .col(json(a("installed_agents")))
            .to_owned(),
        Table::create()
            .table(a("image_aliases"))
            .col(uuid(a("id")).primary_key())
            .col(string_len_uniq(a("alias"), 256))
            .col(uuid(a("image")))
            .foreign_key(&mut fk("image_aliases", "image", "images", "id", Cascade))
            .to_owned(),
        Table::create()
            .table(a("container_registries"))
            .col(uuid(a("id")).primary_key())
            .col(string_len_uniq(a("hostname"), 256))
            .col(string_len(a("url"), 512))
            .col(enum_col("type"))
            .col(string_null(a("project")))
            .col(string_null(a("username")))
            .col(text_null(a("password")))
            .col(boolean(a("ssl_verify")))
            .col(boolean(a("is_global")))
            .col(ts("created_at"))
            .col(ts("modified_at"))
            .to_owned(),
        Table::create()
            .table(a("resource_presets"))
            .col(string_len(a("name"), 256).primary_key())
            .col(json(a("resource_slots")))
            .col(big_integer_null(a("shared_memory")))
            .col(ts("created_at"))
            .to_owned(),
        Table::create()
            .table(a("vfolders"))
            .col(uuid(a("id")).primary_key())
            .col(string_len(a("host"), 128))
            .col(string_len(a("domain_name"), 64))
            .col(string_len(a("name"), 64))
            .col(enum_col("usage_mode"))
            .col(enum_col("permission"))
            .col(integer(a("max_files")))
            .col(big_integer_null(a("max_size")))
            .col(big_integer(a("num_files")))
            .col(big_integer(a("cur_size")))
            .col(enum_col("ownership_type"))
            .col(uuid_null(a("user")))
            .col(uuid_null(a("group")))
            .col(string_null(a("creator")))
            .col(boolean(a("cloneable")))
            .col(enum_col("status"))
            .col(ts("created_at"))
            .col(ts_null("last_used"))
            .foreign_key(&mut fk("vfolders", "user", "users", "uuid", Restrict))
            .foreign_key(&mut fk("vfolders", "group", "groups", "id", Restrict))
            .to_owned(),
        Table::create()
            .table(a("vfolder_permissions"))
            .col(uuid(a("vfolder")))
            .col(uuid(a("user")))
            .col(enum_col("permission"))
            .primary_key(Index::create().col(a("vfolder")).col(a("user")))
            .foreign_key(&mut fk(
                "vfolder_permissions",
                "vfolder",
                "vfolders",
                "id",
                Cascade,
            ))
            .foreign_key(&mut fk(
                "vfolder_permissions",
                "user",
                "users",
                "uuid",
                Cascade,
            ))
            .to_owned(),
        Table::create()
            .table(a("login_sessions"))
            .col(uuid(a("id")).primary_key())
            .col(string_len_uniq(a("token_hash"), 64))
            .col(uuid(a("user_uuid")))
            .col(ts("created_at"))
            .col(ts("expires_at"))
            .col(ts("last_seen"))
            .col(text_null(a("user_agent")))
            .foreign_key(&mut fk(
                "login_sessions",
                "user_uuid",
                "users",
                "uuid",
                Cascade,
            ))
            .to_owned(),
        Table::create()
            .table(a("system_settings"))
            .col(string_len(a("key"), 128).primary_key())
            .col(json(a("value")))
            .col(ts("modified_at"))
            .to_owned(),
        Table::create()
            .table(a("audit_logs"))
            .col(big_integer(a("id")).primary_key().auto_increment())
            .col(ts("created_at"))
            .col(string_len(a("actor"), 256))
            .col(string_len(a("action"), 64))
            .col(string_len(a("target_type"), 64))
            .col(string_len(a("target"), 256))
            .col(json(a("detail")))
            .to_owned(),
    ]
}

fn indexes() -> Vec<IndexCreateStatement> {
    vec![
        index("groups", &["domain_name", "name"], true),
        index("users", &["domain_name"], false),
        index("keypairs", &["user"], false),
        index("sessions", &["access_key", "status"], false),
        index("sessions", &["status", "status_changed"], false),
        index("kernels", &["session_id"], false),
        index("kernels", &["agent", "status"], false),
        index("images", &["name", "architecture"], true),
        index("vfolders", &["user"], false),
        index("vfolders", &["group"], false),
        index("login_sessions", &["user_uuid"], false),
        index("audit_logs", &["created_at"], false),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in tables() {
            manager.create_table(t).await?;
        }
        for i in indexes() {
            manager.create_index(i).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in tables().iter().rev() {
            let name = t
                .get_table_name()
                .cloned()
                .ok_or_else(|| DbErr::Migration("table without name".into()))?;
            manager
                .drop_table(Table::drop().table(name).to_owned())
                .await?;
        }
        Ok(())
    }
}
