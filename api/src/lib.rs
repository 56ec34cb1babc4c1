//! bai: Backend.AI rebuilt in Rust as one binary — layer 5, the surfaces (GraphQL, Backend.AI
//! REST, terminal, file transfer) and the server that wires the services together.
// The merged query root has more parts than the compiler's default query depth allows.
#![recursion_limit = "256"]
// Layers 1–4 below this crate, re-exported so that `crate::sessions::…` reads the same in the
// surfaces as in the services.
pub use bai_core::validate;
pub use bai_services::{
    API_VERSION, MANAGER_COMPAT, VERSION, accounts, agents, audit, auth, bgtasks, cluster, config,
    db, domains, dotfiles, events, groups, heartbeat, images, keypairs, lookup, policies, presets,
    registries, scaling_groups, scheduler, serving, sessions, settings, sql, state, statistics,
    storage, templates, users,
};

// Layer 5: the surfaces and the server. The commit bai is built from is the binary's
// (api/bin), given to `cli::main`: nothing here changes with a commit.
mod bench;
pub mod changes;
pub mod cli;
pub mod compat;
pub mod edge;
pub mod error;
pub mod gpus;
pub mod graphql;
pub mod metrics;
pub mod middleware;
pub mod observe;
pub mod proxy;
pub mod server;
pub mod serving_proxy;
#[cfg(test)]
mod surfaces_tests;
pub mod terminal;
pub mod tls;
pub mod transfer;
pub mod wsproxy;

use std::net::SocketAddr;

use anyhow::Context;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use config::Config;
pub use state::AppState;

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    /// Where `/metrics` is served on its own (`metrics_listen`).
    pub metrics_addr: Option<SocketAddr>,
    /// The plain-HTTP listener that redirects to HTTPS (`tls_redirect_listen`).
    pub redirect_addr: Option<SocketAddr>,
    pub state: AppState,
    /// The superadmin created at this start, with its generated password if any.
    pub created_superadmin: Option<(String, Option<String>)>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Stops accepting connections, finishes in-flight requests and waits.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            // The server task may have ended already (then there is nothing left to stop).
            let _ = tx.send(());
        }
        self.task
            .await
            .context("server task panicked")?
            .context("server error")
    }

    /// Waits until the server ends (after `shutdown` resolves).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task
            .await
            .context("server task panicked")?
            .context("server error")
    }
}

/// Connects the database, migrates, seeds, binds `config.listen` and serves until `stop`
/// (or `shutdown` resolves).
///
/// `shutdown` is boxed, not generic: the serving stack (hyper, axum, TLS) is compiled once
/// whatever future a caller stops it with.
pub async fn start_with_shutdown(
    mut config: Config,
    shutdown: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) -> anyhow::Result<Server> {
    install_crypto();
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        (None, None) => None,
        _ => anyhow::bail!("tls_cert and tls_key go together: set both or neither"),
    };
    if tls.is_some() {
        config.cookie_secure = true;
    } else if config.tls_redirect_listen.is_some() {
        anyhow::bail!("tls_redirect_listen needs tls_cert and tls_key");
    }
    if config.database_url.is_none() {
        db::prepare_data_dir(&config)?;
    }
    let data_lock = db::lock_data_dir(&config)?;
    let db = db::connect_and_migrate(&config.effective_database_url()).await?;
    db::seed_defaults(&db, &bai_core::clock::SystemClock)
        .await
        .context("seeding default objects")?;
    let created_superadmin =
        match db::ensure_superadmin(&db, &config, &bai_core::clock::SystemClock).await? {
            db::SuperadminOutcome::Existing => None,
            db::SuperadminOutcome::Created {
                email,
                generated_password,
            } => Some((email, generated_password)),
        };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    if !config.web_dir.join("index.html").exists() {
        tracing::warn!(dir = %config.web_dir.display(), "web console bundle not found; build it with scripts/build-web.sh");
    }
    let instance = db::instance_id(&db, &bai_core::clock::SystemClock)
        .await
        .context("reading the instance id")?;
    // The app proxy's client: an app's redirect is passed to the browser (made relative),
    // never followed by the server (it could point anywhere on the host's network).
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("building the HTTP client")?;
    crate::metrics::init();
    let metrics_listener = match config.metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding the metrics address {addr}"))?,
        ),
        None => None,
    };
    let metrics_addr = match &metrics_listener {
        Some(l) => Some(l.local_addr()?),
        None => None,
    };
    let redirect_listener = match config.tls_redirect_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding the HTTP redirect address {addr}"))?,
        ),
        None => None,
    };
    let redirect_addr = match &redirect_listener {
        Some(l) => Some(l.local_addr()?),
        None => None,
    };
    // Every statement counted by table (`/metrics`, `bai bench`, tests), on both pools.
    let statements = std::sync::Arc::new(db::StatementCounts::default());
    let mut db = db;
    statements.watch(&mut db);
    let mut read = db::connect_readers(&config.effective_database_url(), &db).await?;
    if config.effective_database_url().starts_with("sqlite:") {
        statements.watch(&mut read);
    }
    if config.advertise_addr.is_none() {
        config.advertise_addr = Some(addr.to_string());
    }
    let mail = config.mail()?;
    let mut state = AppState::new(db, read, config, instance, http, tls.clone());
    state.local.statements = statements;
    if let Some(settings) = mail {
        if settings.security == bai_services::mail::Security::None
            && !matches!(settings.host.as_str(), "localhost" | "127.0.0.1" | "::1")
        {
            tracing::warn!(host = %settings.host, "smtp_tls = none: e-mails (their links included) cross the network in plain text");
        }
        tracing::info!(host = %settings.host, port = settings.port, "e-mail on: password reset and signup verification by e-mailed links");
        state.local.mailer = Some(std::sync::Arc::new(
            bai_services::mail::Mailer::new(settings).context("setting up e-mail")?,
        ));
    }
    if state.elected.cluster.is_shared() {
        // Several managers may share this database: events travel through it.
        let pool = state.db.get_postgres_connection_pool().clone();
        let bus = events::PgBus::connect(pool)
            .await
            .context("listening for the other managers' events (LISTEN bai_events)")?;
        state.shared.events = std::sync::Arc::new(bus);
        state
            .shared
            .revocations
            .announce_on(state.shared.events.clone(), &state.elected.cluster.id);
    }
    agents::start_all(&state)
        .await
        .map_err(|e| anyhow::anyhow!("starting agents: {}", e.describe()))?;
    let engines = state.local.agents.ids().await;
    cluster::round(&state.db, &state.elected.cluster, &engines)
        .await
        .map_err(|e| anyhow::anyhow!("taking this process's leases: {}", e.describe()))?;
    tracing::info!(process = %state.elected.cluster.id, addr = %state.elected.cluster.addr, role = state.elected.cluster.role(), "manager started");
    ::metrics::gauge!("bai_leader").set(if state.elected.cluster.is_leader() {
        1.0
    } else {
        0.0
    });
    sessions::reconcile::on_start(&state)
        .await
        .map_err(|e| anyhow::anyhow!("reconciling sessions with containers: {}", e.describe()))?;
    let mut background = vec![
        tokio::spawn(scheduler::run(state.clone())),
        tokio::spawn(scheduler::wake_on_changes(state.clone())),
        tokio::spawn(heartbeat::heartbeat_loop(state.clone())),
        tokio::spawn(sessions::reconcile::sweep_loop(state.clone())),
        tokio::spawn(sessions::idle_loop(state.clone())),
        tokio::spawn(sessions::utilization_loop(state.clone())),
        tokio::spawn(statistics::sample_loop(state.clone())),
        tokio::spawn(statistics::prune_loop(state.clone())),
        tokio::spawn(keypairs::usage::flush_loop(
            state.shared.usage.clone(),
            state.db.clone(),
        )),
        tokio::spawn(sessions::reconcile::membership_loop(state.clone())),
        tokio::spawn(auth::follow(
            state.shared.events.clone(),
            state.shared.revocations.clone(),
            state.elected.cluster.id.clone(),
        )),
        tokio::spawn(auth::shared::flush_rates(
            state.clone(),
            state.shared.rate_limiter.clone(),
        )),
        tokio::spawn(sessions::follow(state.clone())),
        tokio::spawn(accounts::links::outbox(state.clone())),
        tokio::spawn(serving::reconcile_loop(state.clone())),
        tokio::spawn(serving::wake_on_sessions(state.clone())),
        tokio::spawn(serving_proxy::serve_loop(state.clone())),
    ];
    if let Some(listener) = metrics_listener {
        let router = axum::Router::new()
            .route("/metrics", axum::routing::get(crate::metrics::open))
            .with_state(state.clone());
        let metrics_state = state.clone();
        background.push(tokio::spawn(async move {
            let edge = edge::Edge::of(&metrics_state.config);
            if let Err(e) = edge::serve(listener, None, router, edge, std::future::pending()).await
            {
                tracing::warn!(error = %e, "metrics listener stopped");
            }
        }));
    }
    if let Some(listener) = redirect_listener {
        let router = tls::redirect_router(addr.port());
        let edge = edge::Edge::of(&state.config);
        background.push(tokio::spawn(async move {
            if let Err(e) = edge::serve(listener, None, router, edge, std::future::pending()).await
            {
                tracing::warn!(error = %e, "HTTP redirect listener stopped");
            }
        }));
    }
    state.elected.scheduler.wake();
    let app = server::router(state.clone());
    let stopping = state.clone();
    let signalled = state.shutdown.clone();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let edge = edge::Edge::of(&stopping.config);
        let served = edge::serve(listener, tls, app, edge, async move {
            tokio::select! {
                _ = rx => {}
                _ = shutdown => {}
            }
            // Live streams (subscriptions, SSE) end now, each with the reason.
            signalled.cancel();
        });
        // In-flight requests get `shutdown_grace_secs` after the signal; then what is left
        // (idle WebSockets, say) is cut.
        let grace = std::time::Duration::from_secs(stopping.config.shutdown_grace_secs);
        let deadline = async {
            stopping.shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        let served = tokio::select! {
            r = served => r,
            _ = deadline => {
                tracing::warn!(grace_secs = grace.as_secs(), "shutdown deadline passed: closing the remaining connections");
                Ok(())
            }
        };
        for task in background {
            task.abort();
        }
        // Nothing counted is lost on a clean shutdown.
        stopping.shared.usage.flush(&stopping.db).await;
        agents::stop_all(&stopping).await;
        // Another manager takes the leases over at once.
        cluster::leave(&stopping.db, &stopping.elected.cluster).await;
        drop(data_lock);
        served
    });
    Ok(Server {
        addr,
        metrics_addr,
        redirect_addr,
        state,
        created_superadmin,
        shutdown: Some(tx),
        task,
    })
}

/// TLS (served, for registry scans, and every HTTP client of this process) uses ring (already
/// used by the database driver); installing it twice is harmless.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub async fn start(config: Config) -> anyhow::Result<Server> {
    start_with_shutdown(config, Box::pin(std::future::pending())).await
}
