//! The HTTP server: GraphQL (+ GraphiQL, WebSocket subscriptions), Backend.AI's REST entry
//! points, and the web console with SPA fallback.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router, middleware};
use serde_json::json;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;

use crate::error::IntoProblem as _;
use crate::graphql::http::{self, Web};
use crate::graphql::schema;
use crate::state::AppState;

pub fn router(app: AppState) -> Router {
    let schema = schema::build_schema(app.clone());
    let body_limit = app.config.max_body_bytes;
    let web = Web {
        app: app.clone(),
        schema,
    };
    let api = Router::new()
        .route("/", get(root))
        .route("/graphql", get(http::graphiql).post(http::graphql_post))
        .route("/admin/gql", post(http::graphql_admin))
        .route("/admin/graphql", post(http::graphql_legacy))
        .route("/graphql/ws", get(http::graphql_ws))
        .route("/manager/announcement", get(announcement))
        .route_layer(middleware::from_fn_with_state(
            app.clone(),
            crate::middleware::authenticate,
        ))
        // A layer, not DefaultBodyLimit: the GraphQL extractor reads the body stream itself.
        .layer(RequestBodyLimitLayer::new(body_limit))
        .layer(crate::observe::compression())
        .with_state(web);
    // File transfer streams bodies of any size, so it sits outside the body limit above.
    let app_for_compat = app.clone();
    let files = Router::new()
        .route(
            "/storage/folders/{id}/download",
            get(crate::transfer::download),
        )
        .route(
            "/storage/folders/{id}/upload",
            post(crate::transfer::upload),
        )
        .route("/sessions/{id}/terminal", get(crate::terminal::terminal))
        .route(
            "/apps/{session}/{app}",
            axum::routing::any(crate::proxy::proxy),
        )
        // A catch-all never matches an empty rest: the app's root needs its own route.
        .route(
            "/apps/{session}/{app}/",
            axum::routing::any(crate::proxy::proxy),
        )
        .route(
            "/apps/{session}/{app}/{*rest}",
            axum::routing::any(crate::proxy::proxy),
        )
        .route_layer(middleware::from_fn_with_state(
            app.clone(),
            crate::middleware::authenticate,
        ))
        .with_state(app.clone());
    let api = api
        .merge(files)
        .merge(crate::compat::transfer_router(app.clone()))
        .merge(crate::compat::router(app_for_compat))
        .merge(crate::wsproxy::router(app.clone()));
    let health = Router::new()
        .route("/health/live", get(crate::observe::live))
        .route("/health/readyz", get(crate::observe::ready))
        .route("/metrics", get(crate::metrics::with_token))
        .with_state(app.clone());
    let hsts = (app.tls.is_some() && app.config.hsts_max_age_secs > 0)
        .then(|| {
            header::HeaderValue::from_str(&format!("max-age={}", app.config.hsts_max_age_secs)).ok()
        })
        .flatten();
    let for_fallback = app;
    let router = api
        .merge(health)
        .route_layer(middleware::from_fn(crate::observe::record_route))
        .fallback(move |req: axum::extract::Request| {
            let state = for_fallback.clone();
            async move { crate::observe::fallback(State(state), req).await }
        })
        .layer(middleware::map_response(
            crate::observe::problem_for_bare_errors,
        ))
        .layer(middleware::map_response(frame_guard));
    // Over HTTPS, browsers are told to never come back over plain HTTP.
    let router = match hsts {
        Some(value) => router.layer(middleware::map_response(move |mut resp: Response| {
            let value = value.clone();
            async move {
                resp.headers_mut()
                    .insert(header::STRICT_TRANSPORT_SECURITY, value);
                resp
            }
        })),
        None => router,
    };
    router
        .layer(TraceLayer::new_for_http())
        .layer(middleware::from_fn(crate::observe::request_context))
}

/// No page served here may be framed by another site (clickjacking), nor sniffed into
/// another type; an app's own Content-Security-Policy is kept.
async fn frame_guard(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert("x-frame-options", header::HeaderValue::from_static("DENY"));
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(header::HeaderValue::from_static("frame-ancestors 'none'"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    resp
}

/// `GET /`: the version document for API clients (as Backend.AI answers JSON requests), the
/// console for browsers.
async fn root(State(web): State<Web>, headers: HeaderMap) -> Response {
    if crate::observe::wants_html(&headers)
        && let Some(page) = crate::observe::console_page(&web.app.config.web_dir).await
    {
        return page;
    }
    Json(version_document()).into_response()
}

/// `manager` is the Backend.AI release whose API bai speaks (its consoles switch features on
/// it); `bai` is this server's own version.
pub fn version_document() -> serde_json::Value {
    json!({
        "version": crate::API_VERSION,
        "manager": crate::MANAGER_COMPAT,
        "bai": crate::VERSION,
    })
}

/// `GET /manager/announcement` (the CLI calls it before every command).
async fn announcement(State(web): State<Web>) -> Response {
    match crate::settings::get(&web.app.db, "announcement").await {
        Ok(v) => {
            let message = v.as_str().unwrap_or("").to_string();
            Json(json!({ "enabled": !message.is_empty(), "message": message })).into_response()
        }
        Err(e) => e.into_response(),
    }
}
