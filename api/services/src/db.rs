//! Database connection, migrations and the first-start seed.
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use entity::enums::{DefaultForUnspecified, GroupType, SchedulerKind, UserRole, UserStatus};
use entity::slots::ResourceSlots;
use entity::{
    domains, groups, keypair_resource_policies, resource_presets, scaling_groups,
    sgroups_for_domains, users,
};
use migration::{Migrator, MigratorTrait};
use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectOptions, Database, DatabaseConnection, EntityTrait,
    PaginatorTrait, QueryFilter, Set, SqlxSqliteConnector, TransactionTrait,
};
use serde_json::json;
use uuid::Uuid;

pub mod counts;
pub use counts::CountCache;

use crate::auth::{password, tokens};
use crate::config::Config;
use crate::error::ApiError;
use bai_core::clock::Clock;

/// How long a request waits for a PostgreSQL connection before it answers 503.
pub const DB_WAIT: Duration = Duration::from_secs(5);

/// Connects (SQLite with WAL and a busy timeout, or PostgreSQL) and runs pending migrations.
pub async fn connect_and_migrate(url: &str) -> anyhow::Result<DatabaseConnection> {
    let db = if url.starts_with("sqlite:") {
        let opts = SqliteConnectOptions::from_str(url)
            .with_context(|| format!("invalid SQLite URL {url}"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // One connection: SQLite serialises writers anyway, and a deferred transaction that
        // meets another writer fails with SQLITE_BUSY instead of waiting. No code path opens a
        // second connection while it holds a transaction.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(opts)
            .await
            .with_context(|| format!("opening SQLite database {url}"))?;
        SqlxSqliteConnector::from_sqlx_sqlite_pool(pool)
    } else {
        let mut opts = ConnectOptions::new(url.to_string());
        // A request waits at most this long for the database before it answers 503
        // `database unavailable` (PostgreSQL stopped or out of reach).
        opts.max_connections(16)
            .sqlx_logging(false)
            .acquire_timeout(DB_WAIT)
            .connect_timeout(DB_WAIT);
        Database::connect(opts)
            .await
            .context("connecting to PostgreSQL (DATABASE_URL)")?
    };
    migrate(&db).await?;
    Ok(db)
}

/// Applies the pending migrations one at a time, with a log line each, after refusing a
/// database that a newer bai migrated (it holds migrations this binary does not know: running
/// on it could lose what that version wrote).
pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    use sea_orm::ConnectionTrait;
    Migrator::install(db)
        .await
        .context("creating the migrations table")?;
    let known: std::collections::HashSet<String> = Migrator::migrations()
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    let backend = db.get_database_backend();
    let rows = db
        .query_all(sea_orm::Statement::from_string(
            backend,
            "SELECT version FROM seaql_migrations ORDER BY version",
        ))
        .await
        .context("reading the applied migrations")?;
    let mut newer = Vec::new();
    for row in rows {
        let version: String = row
            .try_get("", "version")
            .context("reading a migration row")?;
        if !known.contains(&version) {
            newer.push(version);
        }
    }
    anyhow::ensure!(
        newer.is_empty(),
        "this database was migrated by a newer bai than this one ({} {}; this binary knows migrations up to {}): run that version, or restore a backup made with this one",
        if newer.len() == 1 {
            "migration"
        } else {
            "migrations"
        },
        newer.join(", "),
        known.iter().max().map(String::as_str).unwrap_or("none"),
    );
    let pending = Migrator::get_pending_migrations(db)
        .await
        .context("listing pending migrations")?;
    for m in pending {
        let name = m.name().to_string();
        let started = std::time::Instant::now();
        Migrator::up(db, Some(1))
            .await
            .with_context(|| format!("applying database migration {name}"))?;
        tracing::info!(migration = %name, ms = started.elapsed().as_millis() as u64, "applied database migration");
    }
    Ok(())
}

/// The statements this process's database connections ran, counted by the table each names
/// first (`FROM "t"`, `INTO "t"`, `UPDATE "t"`; a subquery's table when the outer `FROM` reads
/// a subquery): how many round trips a request costs, for `/metrics`
/// (`bai_db_statements_total`), `bai bench` and the tests. Per process, in memory, counts
/// only: no statement text or value is kept.
#[derive(Default)]
pub struct StatementCounts {
    by_table: parking_lot::Mutex<std::collections::HashMap<String, u64>>,
}

impl StatementCounts {
    /// Counts statements run on `db` from now on (installed once per connection, at start).
    pub fn watch(self: &std::sync::Arc<Self>, db: &mut DatabaseConnection) {
        let counts = self.clone();
        db.set_metric_callback(move |info| counts.note(&info.statement.sql));
    }

    fn note(&self, sql: &str) {
        let table = table_of(sql).unwrap_or("other");
        let mut by = self.by_table.lock();
        match by.get_mut(table) {
            Some(n) => *n += 1,
            None => {
                by.insert(table.to_string(), 1);
            }
        }
    }

    /// Statements so far, by table.
    pub fn snapshot(&self) -> std::collections::HashMap<String, u64> {
        self.by_table.lock().clone()
    }
}

/// The table a statement names first (quoted, as sea-query writes it for both databases).
fn table_of(sql: &str) -> Option<&str> {
    let at = ["FROM \"", "INTO \"", "UPDATE \""]
        .iter()
        .filter_map(|p| sql.find(p).map(|i| i + p.len()))
        .min()?;
    let rest = &sql[at..];
    Some(&rest[..rest.find('"')?])
}

/// The read pool beside `writer`: for SQLite, read-only connections to the same file (WAL
/// lets them read while the writer writes); for PostgreSQL, the writer's own pool.
pub async fn connect_readers(
    url: &str,
    writer: &DatabaseConnection,
) -> anyhow::Result<DatabaseConnection> {
    if !url.starts_with("sqlite:") {
        return Ok(writer.clone());
    }
    let opts = SqliteConnectOptions::from_str(url)
        .with_context(|| format!("invalid SQLite URL {url}"))?
        .read_only(true)
        .busy_timeout(Duration::from_secs(10));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(60))
        .connect_with(opts)
        .await
        .with_context(|| format!("opening SQLite readers for {url}"))?;
    Ok(SqlxSqliteConnector::from_sqlx_sqlite_pool(pool))
}

/// Connects without migrating (tools and tests that manage databases).
pub async fn connect_raw(url: &str) -> anyhow::Result<DatabaseConnection> {
    let mut opts = ConnectOptions::new(url.to_string());
    opts.max_connections(2)
        .sqlx_logging(false)
        .connect_timeout(Duration::from_secs(10));
    Database::connect(opts)
        .await
        .with_context(|| "connecting to the database".to_string())
}

/// Ensures the directory of an SQLite database file exists.
pub fn prepare_data_dir(config: &Config) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data directory {}", config.data_dir.display()))
}

fn gib(n: i64) -> i64 {
    n * 1024 * 1024 * 1024
}

fn preset(
    now: DateTime<Utc>,
    order: i64,
    name: &str,
    cpu: &str,
    mem_gib: i64,
    shares: Option<&str>,
    shm_gib: Option<i64>,
) -> anyhow::Result<resource_presets::ActiveModel> {
    let mem = gib(mem_gib).to_string();
    let mut pairs = vec![("cpu", cpu), ("mem", mem.as_str())];
    if let Some(s) = shares {
        pairs.push(("cuda.shares", s));
    }
    let slots = ResourceSlots::parse_input(pairs)
        .map_err(|e| anyhow::anyhow!("seed preset {name}: {e}"))?;
    Ok(resource_presets::ActiveModel {
        name: Set(name.to_string()),
        resource_slots: Set(slots),
        shared_memory: Set(shm_gib.map(gib)),
        // Distinct creation times keep the seeds' order when listed by creation.
        created_at: Set(now + chrono::Duration::milliseconds(order)),
    })
}

/// On first start (no domains yet): domain, group, resource policy and resource group
/// `default`, and the seeds' presets.
/// Times come from `clock` (the state's, or the system clock before there is a state).
pub async fn seed_defaults(db: &DatabaseConnection, clock: &dyn Clock) -> anyhow::Result<()> {
    if domains::Entity::find().count(db).await? > 0 {
        return Ok(());
    }
    let now = clock.now();
    let txn = db.begin().await?;
    let (limits, hosts) = crate::policies::default_policy_values();
    domains::ActiveModel {
        name: Set("default".into()),
        description: Set(Some("The default domain".into())),
        is_active: Set(true),
        created_at: Set(now),
        modified_at: Set(now),
        total_resource_slots: Set(Default::default()),
        allowed_vfolder_hosts: Set(hosts.clone()),
        allowed_docker_registries: Set(Default::default()),
        integration_id: Set(None),
        dotfiles: Set(None),
    }
    .insert(&txn)
    .await?;
    groups::ActiveModel {
        id: Set(Uuid::new_v4()),
        name: Set("default".into()),
        description: Set(Some("The default project".into())),
        is_active: Set(true),
        created_at: Set(now),
        modified_at: Set(now),
        domain_name: Set("default".into()),
        total_resource_slots: Set(Default::default()),
        allowed_vfolder_hosts: Set(hosts.clone()),
        integration_id: Set(None),
        dotfiles: Set(None),
        group_type: Set(GroupType::General),
    }
    .insert(&txn)
    .await?;
    keypair_resource_policies::ActiveModel {
        name: Set("default".into()),
        created_at: Set(now),
        default_for_unspecified: Set(DefaultForUnspecified::Unlimited),
        total_resource_slots: Set(limits),
        max_session_lifetime: Set(0),
        max_concurrent_sessions: Set(30),
        max_pending_session_count: Set(None),
        max_containers_per_session: Set(1),
        idle_timeout: Set(0),
        idle_utilization_pct: Set(0),
        idle_utilization_secs: Set(0),
        allowed_vfolder_hosts: Set(hosts),
        max_vfolder_count: Set(10),
        max_vfolder_size: Set(0),
        max_customized_image_count: Set(3),
        max_session_count_per_model_session: Set(crate::policies::DEFAULT_MAX_REPLICAS),
    }
    .insert(&txn)
    .await?;
    scaling_groups::ActiveModel {
        name: Set("default".into()),
        description: Set(Some("The default agent scaling group".into())),
        is_active: Set(true),
        is_public: Set(true),
        created_at: Set(now),
        wsproxy_addr: Set(None),
        driver: Set("static".into()),
        driver_opts: Set(json!({})),
        scheduler: Set(SchedulerKind::Fifo),
        scheduler_opts: Set(json!({})),
        use_host_network: Set(false),
    }
    .insert(&txn)
    .await?;
    sgroups_for_domains::ActiveModel {
        scaling_group: Set("default".into()),
        domain: Set("default".into()),
    }
    .insert(&txn)
    .await?;
    // The seeds' preset table (admin chapter); medium and large carry 1 GiB shared memory as
    // in the launch dialog's cards.
    for p in [
        preset(now, 0, "small", "1", 2, None, None)?,
        preset(now, 1, "small-gpu", "1", 2, Some("0.3"), None)?,
        preset(now, 2, "medium", "2", 4, None, Some(1))?,
        preset(now, 3, "medium-gpu", "2", 4, Some("1"), Some(1))?,
        preset(now, 4, "large", "4", 8, None, Some(1))?,
        preset(now, 5, "large-gpu", "4", 8, Some("2"), Some(1))?,
    ] {
        p.insert(&txn).await?;
    }
    crate::audit::record(&txn, now, "system", "seed", "domain", "default", json!({}))
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.describe()))?;
    txn.commit().await?;
    tracing::info!(
        "seeded domain, group, resource policy, resource group `default` and the resource presets"
    );
    Ok(())
}

/// This installation's id (made once, kept in the database): containers carry it so that
/// several installations sharing one engine never touch each other's containers.
pub async fn instance_id(db: &DatabaseConnection, clock: &dyn Clock) -> anyhow::Result<String> {
    use entity::system_settings;
    const KEY: &str = "manager.instance_id";
    if let Some(row) = system_settings::Entity::find_by_id(KEY.to_string())
        .one(db)
        .await?
        && let Some(id) = row.value.as_str()
    {
        return Ok(id.to_string());
    }
    let id = Uuid::new_v4().simple().to_string();
    system_settings::ActiveModel {
        key: Set(KEY.to_string()),
        value: Set(json!(id)),
        modified_at: Set(clock.now()),
    }
    .insert(db)
    .await?;
    Ok(id)
}

/// What `ensure_superadmin` did.
#[derive(Debug, PartialEq, Eq)]
pub enum SuperadminOutcome {
    Existing,
    Created {
        email: String,
        generated_password: Option<String>,
    },
}

/// Creates the first superadmin when there is none: from `BAI_ADMIN_EMAIL` +
/// `BAI_ADMIN_PASSWORD`, else with a random one-time password that must be changed at the
/// first login.
pub async fn ensure_superadmin(
    db: &DatabaseConnection,
    config: &Config,
    clock: &dyn Clock,
) -> anyhow::Result<SuperadminOutcome> {
    let exists = users::Entity::find()
        .filter(users::Column::Role.eq(UserRole::Superadmin))
        .count(db)
        .await?
        > 0;
    if exists {
        return Ok(SuperadminOutcome::Existing);
    }
    let (password, generated) = match &config.admin_password {
        Some(p) => {
            password::validate_rules(p)
                .map_err(|e| anyhow::anyhow!("BAI_ADMIN_PASSWORD: {}", e.describe()))?;
            (p.clone(), None)
        }
        None => {
            let p = tokens::new_password();
            (p.clone(), Some(p))
        }
    };
    let email = set_superadmin(
        db,
        config,
        clock,
        &config.admin_email,
        &password,
        generated.is_some(),
    )
    .await?;
    Ok(SuperadminOutcome::Created {
        email,
        generated_password: generated,
    })
}

/// Creates a superadmin `email`, or resets the password of an existing account and makes
/// it an active superadmin (`bai superadmin`).
pub async fn set_superadmin(
    db: &DatabaseConnection,
    config: &Config,
    clock: &dyn Clock,
    email: &str,
    new_password: &str,
    must_change: bool,
) -> anyhow::Result<String> {
    password::validate_rules(new_password).map_err(|e| anyhow::anyhow!("{}", e.describe()))?;
    let hash = password::hash(new_password)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.describe()))?;
    let email = crate::validate::email(email).map_err(|e| anyhow::anyhow!("{}", e.describe()))?;
    let rate_limit = i32::try_from(config.admin_rate_limit).unwrap_or(i32::MAX);
    let existing = users::Entity::find()
        .filter(users::Column::Email.eq(&email))
        .one(db)
        .await?;
    let txn = db.begin().await?;
    match existing {
        Some(u) => {
            let uuid = u.uuid;
            let mut m: users::ActiveModel = u.clone().into();
            m.password = Set(hash);
            m.role = Set(UserRole::Superadmin);
            m.status = Set(UserStatus::Active);
            m.need_password_change = Set(must_change);
            m.modified_at = Set(clock.now());
            let u = m.update(&txn).await?;
            crate::keypairs::reactivate_main(&txn, &u)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.describe()))?;
            // Not announced: the bootstrap runs before this process serves anyone, and other
            // managers check a login session against the database, where it is gone.
            let _ = crate::auth::logins::end(&txn, uuid, None)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.describe()))?;
        }
        None => {
            let username = email.split('@').next().unwrap_or("admin").to_string();
            crate::users::create(
                &txn,
                crate::users::NewUser {
                    email: email.clone(),
                    username,
                    password_hash: hash,
                    need_password_change: must_change,
                    full_name: Some("Superadmin".into()),
                    description: None,
                    status: UserStatus::Active,
                    domain_name: "default".into(),
                    role: UserRole::Superadmin,
                    group_ids: vec![],
                    resource_policy: "default".into(),
                    rate_limit,
                },
                clock.now(),
            )
            .await
            .map_err(|e: ApiError| {
                anyhow::anyhow!("creating superadmin {email}: {}", e.describe())
            })?;
        }
    }
    crate::audit::record(
        &txn,
        clock.now(),
        "system",
        "set_superadmin",
        "user",
        &email,
        json!({}),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{}", e.describe()))?;
    txn.commit().await?;
    Ok(email)
}

/// Held by a running server on its SQLite data directory: a second server (or a restore)
/// on the same directory is refused instead of corrupting it.
pub struct DataDirLock {
    _file: std::fs::File,
}

pub fn lock_data_dir(config: &Config) -> anyhow::Result<Option<DataDirLock>> {
    // SQLite serves one process: a second `bai serve` on the same file (the data directory's,
    // or one a `sqlite:` URL names) is refused. PostgreSQL takes any number.
    let (path, what) = match &config.database_url {
        None => (
            config.data_dir.join("bai.lock"),
            format!("the data directory {}", config.data_dir.display()),
        ),
        Some(url) if url.starts_with("sqlite:") => {
            let file = url
                .trim_start_matches("sqlite:")
                .trim_start_matches("//")
                .split('?')
                .next()
                .unwrap_or_default();
            if file.is_empty() || file == ":memory:" {
                return Ok(None);
            }
            (
                std::path::PathBuf::from(format!("{file}.lock")),
                format!("the SQLite database {file}"),
            )
        }
        Some(_) => return Ok(None),
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
        |_| {
            anyhow::anyhow!(
                "another bai server is using {what}: SQLite serves one process (stop it first, or put several managers on PostgreSQL)"
            )
        },
    )?;
    Ok(Some(DataDirLock { _file: file }))
}

fn sqlite_file(config: &Config) -> anyhow::Result<std::path::PathBuf> {
    if config.database_url.is_some() {
        anyhow::bail!(
            "bai backup/restore handle the SQLite database; for PostgreSQL use pg_dump and pg_restore (see the book, docs/src/operations.md)"
        );
    }
    Ok(config.data_dir.join("bai.db"))
}

async fn integrity_ok(file: &std::path::Path) -> anyhow::Result<()> {
    use sea_orm::ConnectionTrait;
    let url = format!("sqlite://{}?mode=ro", file.display());
    let db = connect_raw(&url).await?;
    let row = db
        .query_one(sea_orm::Statement::from_string(
            db.get_database_backend(),
            "PRAGMA integrity_check",
        ))
        .await?
        .context("no answer to the integrity check")?;
    let verdict: String = row.try_get_by_index(0)?;
    db.close().await?;
    if verdict != "ok" {
        anyhow::bail!(
            "{} fails SQLite's integrity check: {verdict}",
            file.display()
        );
    }
    Ok(())
}

/// Writes a consistent snapshot of the SQLite database to `dest` (a new file), while the
/// server may be running (SQLite's `VACUUM INTO` reads one transaction's view), and checks it.
pub async fn backup(config: &Config, dest: &std::path::Path) -> anyhow::Result<()> {
    use sea_orm::ConnectionTrait;
    let src = sqlite_file(config)?;
    if !src.exists() {
        anyhow::bail!("there is no database at {}", src.display());
    }
    if dest.exists() {
        anyhow::bail!("{} exists already; give a new file", dest.display());
    }
    let dest_text = dest
        .to_str()
        .context("the backup path must be valid UTF-8")?
        .replace('\'', "''");
    let db = connect_raw(&format!("sqlite://{}?mode=ro", src.display())).await?;
    db.execute_unprepared(&format!("VACUUM INTO '{dest_text}'"))
        .await
        .with_context(|| format!("writing the backup {}", dest.display()))?;
    db.close().await?;
    integrity_ok(dest).await
}

/// Puts the database from `backup` in place in a data directory whose server is stopped.
/// An existing database is only replaced with `force` (it is kept as `bai.db.before-restore`).
pub async fn restore(config: &Config, backup: &std::path::Path, force: bool) -> anyhow::Result<()> {
    let target = sqlite_file(config)?;
    integrity_ok(backup).await?;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let _lock = lock_data_dir(config)?;
    if target.exists() {
        if !force {
            anyhow::bail!(
                "{} exists; pass --force to replace it (it is kept as bai.db.before-restore)",
                target.display()
            );
        }
        std::fs::rename(&target, config.data_dir.join("bai.db.before-restore"))?;
    }
    for stale in ["bai.db-wal", "bai.db-shm"] {
        // Usually absent; a leftover that cannot be removed makes SQLite recover it itself.
        let _ = std::fs::remove_file(config.data_dir.join(stale));
    }
    let tmp = config.data_dir.join("bai.db.restoring");
    std::fs::copy(backup, &tmp).with_context(|| format!("copying {}", backup.display()))?;
    std::fs::rename(&tmp, &target)?;
    Ok(())
}

#[cfg(test)]
mod statement_tests {
    use super::table_of;

    #[test]
    fn a_statement_is_counted_under_the_table_it_names_first() {
        assert_eq!(
            table_of(r#"SELECT "users"."email" FROM "users" WHERE "users"."uuid" IN ($1, $2)"#),
            Some("users")
        );
        assert_eq!(
            table_of(
                r#"SELECT COUNT(*) AS num_items FROM (SELECT "sessions"."id" FROM "sessions") AS "sub_query""#
            ),
            Some("sessions")
        );
        assert_eq!(
            table_of(r#"INSERT INTO "kernels" ("id") VALUES ($1)"#),
            Some("kernels")
        );
        assert_eq!(
            table_of(r#"UPDATE "keypairs" SET "num_queries" = $1"#),
            Some("keypairs")
        );
        assert_eq!(table_of("SELECT 1"), None);
    }
}
