//! The fast fixture every service's tests may use: the application state over an in-memory
//! SQLite database (migrated and seeded as at start-up), a manual clock, one agent whose engine
//! is the in-memory one (`bai_engine::memory`, holding [`IMAGE`]), a storage root of its own
//! and the superadmin as a caller. Milliseconds per test, no Docker.
use std::sync::Arc;

use bai_core::clock::{Clock, ManualClock};
use bai_engine::memory::MemoryEngine;
use entity::enums::UserRole;
use entity::slots::ResourceSlots;
use entity::{keypairs, users};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::auth::Caller;
use crate::config::Config;
use crate::state::AppState;

pub(crate) const IMAGE: &str = "bai.local/testing/python:3.11";

/// One test's world (its directory goes when it is dropped).
pub(crate) struct World {
    pub state: AppState,
    /// The one agent: an in-memory engine holding `IMAGE`.
    pub engine: Arc<MemoryEngine>,
    /// Time moves only when a test says so.
    pub clock: Arc<ManualClock>,
    /// The superadmin (`admin_password` bootstrap), with its keypair.
    pub admin: Caller,
    _dir: TempDir,
}

/// A directory removed when dropped (the storage root of one test).
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) async fn world() -> World {
    // The HTTP client needs a TLS provider (the server installs the same at start).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("bai-lifecycle-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = Config {
        data_dir: dir.clone(),
        docker_endpoints: Vec::new(),
        admin_password: Some("lifecycle-Test-1234".into()),
        ..Config::default()
    };
    let db = crate::db::connect_and_migrate("sqlite::memory:")
        .await
        .unwrap();
    crate::db::seed_defaults(&db, &bai_core::clock::SystemClock)
        .await
        .unwrap();
    crate::db::ensure_superadmin(&db, &config, &bai_core::clock::SystemClock)
        .await
        .unwrap();
    let mut state = AppState::new(
        db.clone(),
        db,
        config,
        "lifecycle".into(),
        reqwest::Client::new(),
        None,
    );
    // Time moves only when a test says so.
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    state.clock = clock.clone();
    let capacity = ResourceSlots::new()
        .with("cpu", Decimal::from(4))
        .with("mem", Decimal::from(8i64 << 30));
    let engine = Arc::new(MemoryEngine::new("i-memory", capacity, &[IMAGE]));
    crate::agents::add(&state, engine.clone()).await.unwrap();
    let user = users::Entity::find()
        .filter(users::Column::Role.eq(UserRole::Superadmin))
        .one(&state.db)
        .await
        .unwrap()
        .unwrap();
    let keypair = keypairs::Entity::find()
        .filter(keypairs::Column::UserId.eq(user.email.clone()))
        .one(&state.db)
        .await
        .unwrap()
        .unwrap();
    let admin = Caller {
        uuid: user.uuid,
        email: user.email.clone(),
        domain_name: user.domain_name.clone(),
        role: user.role,
        access_key: Some(keypair.access_key),
        login_session: None,
    };
    World {
        state,
        engine,
        clock,
        admin,
        _dir: TempDir(dir),
    }
}

impl World {
    /// A new active user of `domain` (created first if it is not there) with `role`, its main
    /// keypair and the domain's default project, as the caller it would be.
    pub async fn user(&self, email: &str, role: UserRole, domain: &str) -> Caller {
        if entity::domains::Entity::find_by_id(domain.to_string())
            .one(&self.state.db)
            .await
            .unwrap()
            .is_none()
        {
            let scope = self.admin.require_superadmin().unwrap();
            crate::domains::create(&self.state, &scope, domain, Default::default())
                .await
                .unwrap();
        }
        let new = crate::users::NewUser {
            email: email.into(),
            username: email.replace(['@', '.'], "-"),
            password_hash: String::new(),
            need_password_change: false,
            full_name: None,
            description: None,
            status: entity::enums::UserStatus::Active,
            domain_name: domain.into(),
            role,
            group_ids: Vec::new(),
            resource_policy: "default".into(),
            rate_limit: 1000,
        };
        let (user, keypair) = crate::users::create(&self.state.db, new, self.clock.now())
            .await
            .unwrap();
        Caller {
            uuid: user.uuid,
            email: user.email,
            domain_name: user.domain_name,
            role: user.role,
            access_key: Some(keypair.access_key),
            login_session: None,
        }
    }
}

/// A request for a 1-core, 2 GiB session of `kind` in `IMAGE` (with `ANSWER=42` in its
/// environment), running `command` if it is a batch job.
pub(crate) fn request(
    kind: entity::enums::SessionType,
    command: Option<&str>,
) -> crate::sessions::CreateRequest {
    crate::sessions::CreateRequest {
        image: IMAGE.into(),
        name: None,
        session_type: kind,
        group: None,
        scaling_group: None,
        preset: None,
        resources: [("cpu", "1"), ("mem", "2g")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        shmem: None,
        environ: std::collections::BTreeMap::from([("ANSWER".to_string(), "42".to_string())]),
        startup_command: command.map(str::to_string),
        batch_timeout: None,
        count: 1,
        tag: None,
        mounts: Vec::new(),
        mount_map: std::collections::BTreeMap::new(),
        dependencies: Vec::new(),
        bootstrap_script: None,
        cluster_size: 1,
        cluster_mode: entity::enums::ClusterMode::SingleNode,
        model: None,
    }
}
