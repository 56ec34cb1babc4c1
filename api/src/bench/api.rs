//! The API under load over real HTTP: bearer and HMAC-signed session lists against an
//! anonymous `{ __typename }`.
use anyhow::Context;

use super::load::load;

/// The console's own session-list document (what its Sessions page asks).
const CONSOLE_SESSION_LIST: &str =
    include_str!("../../../web/graphql/sessions/session_list.graphql");
use super::{bench_admin, bench_config, bench_login, seed_sessions};

/// The API under load, over real HTTP on loopback: a bearer-token and an HMAC-signed
/// `compute_session_list(limit: 20)` over `sessions` sessions, against anonymous
/// `{ __typename }` measured in the same run. `database_url` None = SQLite.
pub(super) async fn run(
    seconds: u64,
    connections: usize,
    sessions: usize,
    database_url: Option<String>,
) -> anyhow::Result<()> {
    use sea_orm::EntityTrait;
    let (config, dir, db_name) = bench_config(database_url)?;
    let server = crate::start(config).await?;
    let state = server.state.clone();
    let base = format!("http://{}", server.addr);
    let (admin, group) = bench_admin(&state.db).await?;
    let ak = admin.main_access_key.clone().context("admin keypair")?;
    let kp = entity::keypairs::Entity::find_by_id(ak.clone())
        .one(&state.db)
        .await?
        .context("admin keypair")?;
    seed_sessions(
        &state.db,
        "bench",
        sessions,
        &admin,
        group.id,
        entity::enums::SessionStatus::Terminated,
    )
    .await?;
    let token = bench_login(&base).await?;
    let list = serde_json::json!({"query": "{ compute_session_list(limit: 20, offset: 0, status: \"TERMINATED\") { total_count items { id name status } } }"});
    let url = format!("{base}/graphql");
    let check = answer(&url, &token, &list).await?;
    anyhow::ensure!(
        check["data"]["compute_session_list"]["total_count"].as_u64() == Some(sessions as u64),
        "the list does not show the sessions: {check}"
    );
    println!(
        "api on {db_name}: {connections} HTTP/1.1 keep-alive connections, {seconds} s each, {sessions} sessions"
    );
    let anon = {
        let url = url.clone();
        load(connections, seconds, move |c, _| {
            c.post(&url)
                .json(&serde_json::json!({"query": "{ __typename }"}))
        })
        .await
    };
    println!("{}", anon.line("baseline: anonymous { __typename }", None));
    let bearer = bearer_load(connections, seconds, &url, &token, &list).await;
    println!(
        "{}",
        bearer.line("bearer compute_session_list(limit: 20)", Some(&anon))
    );
    // The page the console asks for: its own document (100 rows with each owner's e-mail
    // and project name), and what one such request costs the database.
    let console =
        serde_json::json!({"query": CONSOLE_SESSION_LIST, "variables": {"status": "TERMINATED"}});
    let check = answer(&url, &token, &console).await?;
    let items = check["data"]["compute_session_list"]["items"]
        .as_array()
        .map_or(0, Vec::len);
    anyhow::ensure!(
        items == sessions.min(100)
            && check["data"]["compute_session_list"]["items"][0]["user_email"].is_string()
            && check["data"]["compute_session_list"]["items"][0]["group_name"].is_string(),
        "the console's list does not show the sessions with their owners: {check}"
    );
    let before = state.local.statements.snapshot();
    let page = bearer_load(connections, seconds, &url, &token, &console).await;
    let after = state.local.statements.snapshot();
    println!(
        "{}",
        page.line("console's session list (100 rows, owners)", Some(&anon))
    );
    let per_request = |table: &str| {
        let n = after.get(table).copied().unwrap_or(0) - before.get(table).copied().unwrap_or(0);
        n as f64 / page.requests().max(1) as f64
    };
    println!(
        "    statements per request: sessions {:.2}, users {:.2}, groups {:.2}, kernels {:.2}",
        per_request("sessions"),
        per_request("users"),
        per_request("groups"),
        per_request("kernels"),
    );
    let signed = {
        let admin_gql = format!("{base}/admin/gql");
        let host = server.addr.to_string();
        let secret = kp.secret_key.clone();
        let body = list.to_string();
        let last_micros = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
        load(connections, seconds, move |c, _| {
            // A fresh date (microseconds, never the same twice across the connections) per
            // request: every signature is new, as the official client's are; two requests
            // signed in the same microsecond would be one replayed signature.
            let wall = chrono::Utc::now().timestamp_micros();
            let micros = match last_micros.fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |last| Some(wall.max(last + 1)),
            ) {
                Ok(last) | Err(last) => wall.max(last + 1),
            };
            let now = chrono::DateTime::from_timestamp_micros(micros).unwrap_or_default();
            let raw_date = now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
            let date = now.fixed_offset();
            let input = crate::auth::hmac::SignInput {
                method: "POST",
                path_and_query: "/admin/gql",
                raw_date: &raw_date,
                date,
                host: &host,
                content_type: "application/json",
                version: crate::API_VERSION,
            };
            let sig = crate::auth::hmac::sign(&secret, &input);
            c.post(&admin_gql)
                .header(
                    "authorization",
                    format!("BackendAI signMethod=HMAC-SHA256, credential={ak}:{sig}"),
                )
                .header("date", raw_date.clone())
                .header("x-backendai-version", crate::API_VERSION)
                .header("content-type", "application/json")
                .body(body.clone())
        })
        .await
    };
    println!(
        "{}",
        signed.line("HMAC-signed /admin/gql, the same list", Some(&anon))
    );
    server.stop().await?;
    // A scratch directory of the bench; one left behind is harmless.
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

/// `body`'s answer for `token` (what a figure's check reads before its load runs).
async fn answer(
    url: &str,
    token: &str,
    body: &serde_json::Value,
) -> anyhow::Result<serde_json::Value> {
    Ok(reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .json(body)
        .send()
        .await?
        .json()
        .await?)
}

/// `body` posted with `token` on every connection for `seconds`.
async fn bearer_load(
    connections: usize,
    seconds: u64,
    url: &str,
    token: &str,
    body: &serde_json::Value,
) -> super::load::Load {
    let (url, token, body) = (url.to_string(), token.to_string(), body.clone());
    load(connections, seconds, move |c, _| {
        c.post(&url).bearer_auth(&token).json(&body)
    })
    .await
}
