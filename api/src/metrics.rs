//! Prometheus metrics at `/metrics`: request, GraphQL, scheduler, event-bus and login
//! counters and histograms from the `metrics` crate (one recorder per process), plus gauges
//! read from the database at each scrape (sessions by status, the pending queue, agents with
//! capacity and allocation per slot, database connections). Served on `metrics_listen`
//! (nothing else there) and/or on the main port behind `metrics_token`; neither = not served.
use std::fmt::Write;
use std::sync::OnceLock;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::error::ApiError;
use crate::error::IntoProblem as _;
use crate::state::AppState;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process's recorder once (a second server in the same process shares it).
pub fn init() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let buckets = [
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ];
            PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)
                .ok()?
                .install_recorder()
                .map_err(|e| tracing::warn!(error = %e, "metrics recorder not installed"))
                .ok()
        })
        .as_ref()
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', " ")
}

/// The gauges that are read at scrape time.
// `writeln!` into a `String` cannot fail: its results (`let _ =`) are dropped on purpose.
async fn gauges(state: &AppState) -> Result<String, ApiError> {
    let mut out = String::new();
    let by_status = crate::sessions::count_by_status(&state.read).await?;
    let _ = writeln!(
        out,
        "# HELP bai_sessions Sessions by status.\n# TYPE bai_sessions gauge"
    );
    for (status, n) in &by_status {
        let _ = writeln!(out, "bai_sessions{{status=\"{}\"}} {n}", status.as_str());
    }
    let pending = crate::sessions::count_pending(&state.read).await?;
    let _ = writeln!(
        out,
        "# HELP bai_sessions_pending Sessions waiting to be scheduled.\n# TYPE bai_sessions_pending gauge\nbai_sessions_pending {pending}"
    );
    let all_agents = crate::agents::all_rows(&state.read).await?;
    let _ = writeln!(
        out,
        "# HELP bai_agents Agents by status.\n# TYPE bai_agents gauge"
    );
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for a in &all_agents {
        *counts.entry(a.status.as_str()).or_default() += 1;
    }
    for (s, n) in counts {
        let _ = writeln!(out, "bai_agents{{status=\"{s}\"}} {n}");
    }
    slot_gauge(
        &mut out,
        "bai_agent_capacity",
        "Schedulable capacity per slot.",
        &all_agents,
        |a| &a.available_slots,
    );
    slot_gauge(
        &mut out,
        "bai_agent_allocated",
        "Allocated amount per slot.",
        &all_agents,
        |a| &a.occupied_slots,
    );
    let _ = writeln!(
        out,
        "# HELP bai_event_subscribers Listeners on the event bus.\n# TYPE bai_event_subscribers gauge\nbai_event_subscribers {}",
        state.shared.events.subscribers()
    );
    let mut statements: Vec<(String, u64)> =
        state.local.statements.snapshot().into_iter().collect();
    statements.sort();
    let _ = writeln!(
        out,
        "# HELP bai_db_statements_total Database statements this process ran, by the table each names first.\n# TYPE bai_db_statements_total counter"
    );
    for (table, n) in statements {
        let _ = writeln!(
            out,
            "bai_db_statements_total{{table=\"{}\"}} {n}",
            label(&table)
        );
    }
    let (size, idle) = pool_use(&state.db);
    let _ = writeln!(
        out,
        "# HELP bai_db_connections Database connections of the pool.\n# TYPE bai_db_connections gauge\nbai_db_connections{{state=\"idle\"}} {idle}\nbai_db_connections{{state=\"in_use\"}} {}",
        size.saturating_sub(idle)
    );
    Ok(out)
}

/// One gauge per agent and resource slot. (`writeln!` into a `String` cannot fail.)
fn slot_gauge(
    out: &mut String,
    name: &str,
    help: &str,
    agents: &[entity::agents::Model],
    slots: impl Fn(&entity::agents::Model) -> &entity::slots::ResourceSlots,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for a in agents {
        for (slot, v) in &slots(a).0 {
            let _ = writeln!(
                out,
                "{name}{{agent=\"{}\",slot=\"{}\"}} {v}",
                label(&a.id),
                label(slot)
            );
        }
    }
}

fn pool_use(db: &sea_orm::DatabaseConnection) -> (u32, u32) {
    match db {
        sea_orm::DatabaseConnection::SqlxSqlitePoolConnection(_) => {
            let p = db.get_sqlite_connection_pool();
            (p.size(), u32::try_from(p.num_idle()).unwrap_or(0))
        }
        sea_orm::DatabaseConnection::SqlxPostgresPoolConnection(_) => {
            let p = db.get_postgres_connection_pool();
            (p.size(), u32::try_from(p.num_idle()).unwrap_or(0))
        }
        _ => (0, 0),
    }
}

pub async fn render(state: &AppState) -> Result<String, ApiError> {
    let mut out = init().map(PrometheusHandle::render).unwrap_or_default();
    out.push_str(&gauges(state).await?);
    Ok(out)
}

fn exposition(text: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// `/metrics` on the main port: only with `metrics_token` (as a bearer token).
pub async fn with_token(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Some(expected) = &state.config.metrics_token else {
        return ApiError::not_found("API path", "/metrics").into_response();
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !crate::auth::tokens::eq(given.trim(), expected) {
        return (StatusCode::UNAUTHORIZED, "metrics token required").into_response();
    }
    match render(&state).await {
        Ok(t) => exposition(t),
        Err(e) => e.into_response(),
    }
}

/// `/metrics` on `metrics_listen` (nothing else is served there).
pub async fn open(State(state): State<AppState>) -> Response {
    match render(&state).await {
        Ok(t) => exposition(t),
        Err(e) => e.into_response(),
    }
}
