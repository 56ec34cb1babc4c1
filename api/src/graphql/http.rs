//! GraphQL over HTTP and WebSockets (a surface's handlers): the router's state (`Web`: the
//! application state and the schema), `/graphql` (POST), GraphiQL, and `/graphql/ws`.
use async_graphql::Data;
use async_graphql::ParseRequestError;
use async_graphql::http::{ALL_WEBSOCKET_PROTOCOLS, GraphiQLSource};
use async_graphql_axum::rejection::GraphQLRejection;
use async_graphql_axum::{GraphQLProtocol, GraphQLRequest, GraphQLResponse, GraphQLWebSocket};
use axum::Extension;
use axum::extract::{FromRef, State, WebSocketUpgrade};
use axum::response::{Html, IntoResponse, Response};

use crate::auth::ws::Owner;
use crate::auth::{ClientAddr, Credential, Principal};
use crate::graphql::context::GqlError;
use crate::graphql::schema::BaiSchema;
use crate::graphql::ws_guard::WsConnection;
use crate::state::AppState;

/// The router's state: the application's, and the schema built over it.
#[derive(Clone)]
pub struct Web {
    pub app: AppState,
    pub schema: BaiSchema,
}

impl FromRef<Web> for AppState {
    fn from_ref(web: &Web) -> AppState {
        web.app.clone()
    }
}

/// Every error leaves with a stable `extensions.code`; errors raised by the GraphQL engine
/// itself (syntax, validation, limits) get `GRAPHQL_VALIDATION_FAILED`.
fn ensure_codes(mut resp: async_graphql::Response) -> async_graphql::Response {
    let request_id = crate::error::request_id();
    for err in &mut resp.errors {
        if let Some(id) = &request_id {
            err.extensions
                .get_or_insert_with(Default::default)
                .set("request_id", id.as_str());
        }
        let has_code = err
            .extensions
            .as_ref()
            .is_some_and(|ext| ext.get("code").is_some());
        if !has_code {
            err.extensions
                .get_or_insert_with(Default::default)
                .set("code", "GRAPHQL_VALIDATION_FAILED");
        }
    }
    resp
}

/// `POST /admin/gql`: Backend.AI's GraphQL endpoint for its clients and Lablup's consoles:
/// answered as `application/json` (Lablup's Web UI reads nothing else as JSON) and never
/// compressed (Lablup's web servers copy the encoding header of what they proxy while their
/// HTTP client has already decoded the body).
pub async fn graphql_admin(
    State(web): State<Web>,
    Extension(principal): Extension<Principal>,
    Extension(addr): Extension<ClientAddr>,
    req: Result<GraphQLRequest, GraphQLRejection>,
) -> Response {
    let mut req = match req {
        Ok(req) => req.into_inner(),
        Err(rejected) => return not_a_request(rejected, false),
    };
    backend_ai_dialect(&mut req);
    let mut response = execute(&web, principal, addr, req).await;
    response
        .extensions_mut()
        .remove::<crate::observe::Compressible>();
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    response
}

pub async fn graphql_post(
    State(web): State<Web>,
    Extension(principal): Extension<Principal>,
    Extension(addr): Extension<ClientAddr>,
    req: Result<GraphQLRequest, GraphQLRejection>,
) -> Response {
    match req {
        Ok(req) => execute(&web, principal, addr, req.into_inner()).await,
        Err(rejected) => not_a_request(rejected, false),
    }
}

/// The answer to a body that is no GraphQL request (not JSON, nested too deep, a batch, too
/// large): a GraphQL error response with a code and a short message, or on Backend.AI's
/// legacy endpoint (`legacy`) its problem+json; never the parser's debug text, never the body
/// echoed back.
fn not_a_request(rejected: GraphQLRejection, legacy: bool) -> Response {
    use crate::error::{ApiError, ErrorCode, IntoProblem as _};
    let (code, message) = match &rejected.0 {
        ParseRequestError::PayloadTooLarge => (
            ErrorCode::PayloadTooLarge,
            "the request body is larger than the server takes (max_body_bytes)".to_string(),
        ),
        ParseRequestError::UnsupportedBatch => (
            ErrorCode::BadRequest,
            "batched requests (a JSON array) are not supported: send one operation per request"
                .to_string(),
        ),
        ParseRequestError::InvalidRequest(e) => {
            let mut why = e.to_string();
            // The parser's words only, cut short: it never repeats a whole body, but keep it so.
            if let Some((cut, _)) = why.char_indices().nth(160) {
                why.truncate(cut);
                why.push('…');
            }
            (
                ErrorCode::BadRequest,
                format!("the request body is not a GraphQL request: {why}"),
            )
        }
        _ => (
            ErrorCode::BadRequest,
            "the request body could not be read as a GraphQL request".to_string(),
        ),
    };
    metrics::counter!("bai_graphql_requests_total", "code" => code.as_str()).increment(1);
    if legacy {
        return ApiError::new(code, message).into_response();
    }
    let status = axum::http::StatusCode::from_u16(code.http_status())
        .unwrap_or(axum::http::StatusCode::BAD_REQUEST);
    let body = serde_json::json!({
        "data": null,
        "errors": [{"message": message, "extensions": {"code": code.as_str()}}],
    });
    (status, axum::Json(body)).into_response()
}

async fn execute(
    web: &Web,
    principal: Principal,
    addr: ClientAddr,
    request: async_graphql::Request,
) -> Response {
    let compressible = crate::observe::compressible_document(&request.query);
    let resp = web
        .schema
        .execute(
            request
                .data(principal)
                .data(addr)
                .data(crate::graphql::context::PageNames::default()),
        )
        .await;
    let code = resp
        .errors
        .first()
        .and_then(|e| e.extensions.as_ref())
        .and_then(|x| x.get("code"))
        .map(|c| c.to_string().trim_matches('"').to_string())
        .unwrap_or_else(|| {
            if resp.errors.is_empty() {
                "OK"
            } else {
                "GRAPHQL_VALIDATION_FAILED"
            }
            .to_string()
        });
    metrics::counter!("bai_graphql_requests_total", "code" => code).increment(1);
    let mut response = GraphQLResponse::from(ensure_codes(resp)).into_response();
    if compressible {
        response
            .extensions_mut()
            .insert(crate::observe::Compressible);
    }
    response
}

/// `POST /admin/graphql`: Backend.AI's legacy GraphQL endpoint, which older clients and
/// Console 21.02 use: the answer is the bare `data` object; errors come as Backend.AI's
/// `graphql-error` problem (400) with the errors in `data`. Never compressed (Lablup's
/// console server copies the encoding header of what it proxies).
pub async fn graphql_legacy(
    State(web): State<Web>,
    Extension(principal): Extension<Principal>,
    Extension(addr): Extension<ClientAddr>,
    req: Result<GraphQLRequest, GraphQLRejection>,
) -> Response {
    let mut req = match req {
        Ok(req) => req.into_inner(),
        Err(rejected) => return not_a_request(rejected, true),
    };
    backend_ai_dialect(&mut req);
    let asks_registries = req.query.contains("allowed_docker_registries");
    let resp = web
        .schema
        .execute(
            req.data(principal)
                .data(addr)
                .data(crate::graphql::context::PageNames::default()),
        )
        .await;
    let mut resp = ensure_codes(resp);
    if resp.errors.is_empty() {
        // Backend.AI 21.x's shapes, which Console 21.02 reads (this endpoint is its own).
        let registries = if asks_registries {
            match crate::registries::usable_when_any(&web.app.db).await {
                Ok(r) => r,
                Err(e) => return crate::error::IntoProblem::into_response(e),
            }
        } else {
            Vec::new()
        };
        legacy_shapes(&mut resp.data, &registries);
        return axum::Json(resp.data).into_response();
    }
    let errors = serde_json::to_value(&resp.errors).unwrap_or(serde_json::Value::Null);
    let body = serde_json::json!({
        "type": "https://api.backend.ai/probs/graphql-error",
        "title": "GraphQL-generated error",
        "data": errors,
    });
    let mut out = (axum::http::StatusCode::BAD_REQUEST, body.to_string()).into_response();
    out.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/problem+json"),
    );
    out
}

/// Answers in the shapes Backend.AI 21.x gave (Console 21.02 reads them; Backend.AI's own
/// clients move to `/admin/gql` from API v6.20210815 on, so only older ones arrive here —
/// both official CLIs use `/admin/gql`): a keypair resource
/// policy's `allowed_vfolder_hosts` as the list of its hosts (today a JSON string of
/// `{host: [permission, …]}`), and a domain's empty `allowed_docker_registries` — bai's "any
/// registry" — as the registries that means (the console shows only images of the listed
/// ones); an image's minimum `mem` as the least memory a launch with the default shared
/// memory needs (the image's minimum plus 64m). Backend.AI (since 19.09, as bai) counts the
/// shared memory on top of the image's minimum memory, but Console 21.02's launcher offers
/// the image's minimum as the least memory and sends 64m of shared memory besides, so its
/// launch at that minimum was refused by Backend.AI as by bai; told the sum, it starts there.
fn legacy_shapes(value: &mut async_graphql::Value, any_registry: &[String]) {
    use async_graphql::Value as V;
    match value {
        V::Object(fields) => {
            for (name, v) in fields.iter_mut() {
                match (name.as_str(), &*v) {
                    ("allowed_vfolder_hosts", V::String(s)) => {
                        if let Ok(serde_json::Value::Object(hosts)) =
                            serde_json::from_str::<serde_json::Value>(s)
                        {
                            *v = V::List(hosts.keys().map(|h| V::String(h.clone())).collect());
                        }
                    }
                    ("allowed_docker_registries", V::List(l)) if l.is_empty() => {
                        *v = V::List(any_registry.iter().map(|r| V::String(r.clone())).collect());
                    }
                    ("resource_limits", V::List(_)) => {
                        if let V::List(limits) = v {
                            limits.iter_mut().for_each(with_default_shared_memory);
                        }
                    }
                    _ => legacy_shapes(v, any_registry),
                }
            }
        }
        V::List(items) => items
            .iter_mut()
            .for_each(|v| legacy_shapes(v, any_registry)),
        _ => {}
    }
}

/// An image's `{key: "mem", min}` with the default shared memory added to `min`, in GiB
/// rounded up to a hundredth (`0.32g`): the console shows (and sends back) the least memory to
/// two decimals in GiB, and rounding down would offer less than a launch needs.
fn with_default_shared_memory(limit: &mut async_graphql::Value) {
    use async_graphql::Value as V;
    use rust_decimal::Decimal;
    let V::Object(fields) = limit else { return };
    if !matches!(fields.get("key"), Some(V::String(k)) if k == "mem") {
        return;
    }
    if let Some(V::String(min)) = fields.get_mut("min")
        && let Some(bytes) = entity::slots::parse_binary_size(min)
    {
        let hundredth = Decimal::from(1u64 << 30) / Decimal::from(100);
        let least = bytes + Decimal::from(crate::sessions::DEFAULT_SHMEM);
        *min = format!("{}g", (least / hundredth).ceil() / Decimal::from(100));
    }
}

/// What Backend.AI's clients and consoles send that bai's schema reads otherwise, on both of
/// their endpoints (`/admin/gql`, `/admin/graphql`): fragments no operation reaches are left
/// out, and `$group_id: String` reads as a UUID.
fn backend_ai_dialect(req: &mut async_graphql::Request) {
    if let std::borrow::Cow::Owned(q) = queries_as_query(&req.query) {
        req.query = q;
    }
    if let std::borrow::Cow::Owned(q) = without_unused_fragments(&req.query) {
        req.query = q;
    }
    if let std::borrow::Cow::Owned(q) = legacy_variable_types(&req.query) {
        req.query = q;
    }
}

/// Lablup's Web UI 26 drops the fields a manager's version lacks before sending a query, but
/// keeps the fragments only those fields used: fragments no operation reaches are left out
/// before validation (GraphQL refuses a document with unused fragments). A
/// document that does not parse is passed on as it is, for the usual error.
fn without_unused_fragments(query: &str) -> std::borrow::Cow<'_, str> {
    use async_graphql::parser::types::{DocumentOperations, Selection, SelectionSet};
    fn spreads(set: &SelectionSet, out: &mut Vec<String>) {
        for sel in &set.items {
            match &sel.node {
                Selection::Field(f) => spreads(&f.node.selection_set.node, out),
                Selection::FragmentSpread(s) => out.push(s.node.fragment_name.node.to_string()),
                Selection::InlineFragment(i) => spreads(&i.node.selection_set.node, out),
            }
        }
    }
    let Ok(doc) = async_graphql::parser::parse_query(query) else {
        return std::borrow::Cow::Borrowed(query);
    };
    let mut todo = Vec::new();
    match &doc.operations {
        DocumentOperations::Single(op) => spreads(&op.node.selection_set.node, &mut todo),
        DocumentOperations::Multiple(ops) => {
            for op in ops.values() {
                spreads(&op.node.selection_set.node, &mut todo);
            }
        }
    }
    let mut used = std::collections::HashSet::new();
    while let Some(name) = todo.pop() {
        if used.insert(name.clone())
            && let Some(f) = doc.fragments.get(name.as_str())
        {
            spreads(&f.node.selection_set.node, &mut todo);
        }
    }
    // Each unused fragment's text: from its definition's start to its closing brace.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(query.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    for (name, f) in &doc.fragments {
        if used.contains(name.as_str()) {
            continue;
        }
        let Some(line) = line_starts.get(f.pos.line.saturating_sub(1)) else {
            return std::borrow::Cow::Borrowed(query);
        };
        let start = query[*line..]
            .char_indices()
            .nth(f.pos.column.saturating_sub(1))
            .map(|(i, _)| line + i)
            .unwrap_or(query.len());
        match closing_brace(query, start) {
            Some(end) => cuts.push((start, end)),
            None => return std::borrow::Cow::Borrowed(query),
        }
    }
    if cuts.is_empty() {
        return std::borrow::Cow::Borrowed(query);
    }
    cuts.sort_unstable();
    let mut out = String::with_capacity(query.len());
    let mut at = 0;
    for (start, end) in cuts {
        if start < at {
            return std::borrow::Cow::Borrowed(query);
        }
        out.push_str(&query[at..start]);
        at = end;
    }
    out.push_str(&query[at..]);
    std::borrow::Cow::Owned(out)
}

/// Backend.AI's managers before 25.14 named the query root `Queries`, and Lablup's Web UI 26
/// writes `on Queries` in its fragments for them (bai announces an older manager): those type
/// conditions read as bai's `Query`. Only type conditions change, found by the parser.
fn queries_as_query(query: &str) -> std::borrow::Cow<'_, str> {
    use async_graphql::Pos;
    use async_graphql::parser::types::{Selection, SelectionSet};
    fn inline(set: &SelectionSet, out: &mut Vec<Pos>) {
        for sel in &set.items {
            match &sel.node {
                Selection::Field(f) => inline(&f.node.selection_set.node, out),
                Selection::FragmentSpread(_) => {}
                Selection::InlineFragment(i) => {
                    if let Some(t) = &i.node.type_condition
                        && t.node.on.node == "Queries"
                    {
                        out.push(t.node.on.pos);
                    }
                    inline(&i.node.selection_set.node, out);
                }
            }
        }
    }
    if !query.contains("Queries") {
        return std::borrow::Cow::Borrowed(query);
    }
    let Ok(doc) = async_graphql::parser::parse_query(query) else {
        return std::borrow::Cow::Borrowed(query);
    };
    let mut at = Vec::new();
    for f in doc.fragments.values() {
        let on = &f.node.type_condition.node.on;
        if on.node == "Queries" {
            at.push(on.pos);
        }
        inline(&f.node.selection_set.node, &mut at);
    }
    for (_, op) in doc.operations.iter() {
        inline(&op.node.selection_set.node, &mut at);
    }
    if at.is_empty() {
        return std::borrow::Cow::Borrowed(query);
    }
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(query.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let mut offsets: Vec<usize> = Vec::new();
    for pos in at {
        let Some(line) = line_starts.get(pos.line.saturating_sub(1)) else {
            return std::borrow::Cow::Borrowed(query);
        };
        match query[*line..]
            .char_indices()
            .nth(pos.column.saturating_sub(1))
        {
            Some((i, _)) if query[line + i..].starts_with("Queries") => offsets.push(line + i),
            _ => return std::borrow::Cow::Borrowed(query),
        }
    }
    offsets.sort_unstable();
    let mut out = String::with_capacity(query.len());
    let mut from = 0;
    for o in offsets {
        out.push_str(&query[from..o]);
        out.push_str("Query");
        from = o + "Queries".len();
    }
    out.push_str(&query[from..]);
    std::borrow::Cow::Owned(out)
}

/// The index just past the `}` closing the first `{` at or after `from`, strings skipped.
fn closing_brace(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                // A string (block strings too): on to the next unescaped quote run.
                let block = text[i..].starts_with("\"\"\"");
                i += if block { 3 } else { 1 };
                loop {
                    if i >= bytes.len() {
                        return None;
                    }
                    if block && text[i..].starts_with("\"\"\"") {
                        i += 3;
                        break;
                    }
                    if !block && bytes[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if !block && bytes[i] == b'"' {
                        i += 1;
                        break;
                    }
                    i += 1;
                }
                continue;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Lablup's Console 21.02 declares `$group_id: String` (Backend.AI 20.09 took any string there)
/// where Backend.AI's later managers and bai take a UUID: on Backend.AI's endpoints that
/// declaration reads as `UUID` (the value is still checked as one).
fn legacy_variable_types(query: &str) -> std::borrow::Cow<'_, str> {
    const NAME: &str = "$group_id";
    let mut out = String::new();
    let mut rest = query;
    let mut changed = false;
    while let Some(at) = rest.find(NAME) {
        let (before, from) = rest.split_at(at);
        let after = &from[NAME.len()..];
        let trimmed = after.trim_start();
        let typed = trimmed.strip_prefix(':').map(str::trim_start);
        match typed.and_then(|t| t.strip_prefix("String")) {
            Some(tail) if !tail.starts_with(|c: char| c.is_alphanumeric() || c == '_') => {
                out.push_str(before);
                out.push_str(NAME);
                out.push_str(": UUID");
                rest = tail;
                changed = true;
            }
            _ => {
                out.push_str(before);
                out.push_str(NAME);
                rest = after;
            }
        }
    }
    if !changed {
        return std::borrow::Cow::Borrowed(query);
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

pub async fn graphiql() -> impl IntoResponse {
    Html(
        GraphiQLSource::build()
            .endpoint("/graphql")
            .subscription_endpoint("/graphql/ws")
            .finish(),
    )
}

/// graphql-transport-ws (and legacy graphql-ws). The caller comes from the upgrade request's
/// cookie or signature, or from `connection_init`'s payload `{"token": "<bearer token>"}`,
/// and is proven again before every operation (`auth::ws`). Messages are bounded like HTTP
/// bodies.
pub async fn graphql_ws(
    State(web): State<Web>,
    Extension(principal): Extension<Principal>,
    Extension(credential): Extension<Credential>,
    Extension(addr): Extension<ClientAddr>,
    protocol: GraphQLProtocol,
    upgrade: WebSocketUpgrade,
) -> Response {
    let schema = web.schema.clone();
    let app = web.app.clone();
    let max = app.config.max_body_bytes;
    upgrade
        .max_message_size(max)
        .max_frame_size(max)
        // Small buffers: thousands of idle subscribers must not cost 256 KiB each (the
        // defaults); a larger message still arrives, the buffer grows for it.
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .on_upgrade(move |stream| {
            let resyncs = app.shared.events.resyncs();
            let served = GraphQLWebSocket::new(stream, schema, protocol)
                .on_connection_init(move |payload| async move {
                    let mut principal = principal;
                    let mut credential = credential;
                    if let Some(token) = payload.get("token").and_then(|t| t.as_str()) {
                        match crate::auth::credentials::caller_from_token(&app, token).await {
                            Ok(Some(c)) => {
                                principal = Principal::User(std::sync::Arc::new(c));
                                credential = Credential::Token(token.to_string());
                            }
                            Ok(None) => {
                                return Err(async_graphql::Error::new(
                                    "The token is invalid or has expired.",
                                ));
                            }
                            Err(e) => return Err(GqlError::from(e).into()),
                        }
                    }
                    let owner = match &principal {
                        Principal::User(c) => Owner::User(c.uuid),
                        Principal::Anonymous => Owner::Addr(addr.0),
                    };
                    let max_conns = app.config.ws_max_connections_per_user;
                    let slot = app
                        .local
                        .ws_connections
                        .admit(owner, max_conns)
                        .map_err(|e| async_graphql::Error::from(GqlError::from(e)))?;
                    let mut data = Data::default();
                    data.insert(principal);
                    data.insert(addr);
                    data.insert(WsConnection {
                        credential,
                        operations: Default::default(),
                        max_operations: app.config.ws_max_operations_per_connection,
                        _slot: slot,
                    });
                    Ok(data)
                })
                .serve();
            async move {
                // Events may have been missed (the bus's connection to the database was lost
                // and is back): the socket closes, and the client reconnects and refetches.
                match resyncs {
                    Some(mut resyncs) => {
                        tokio::select! {
                            _ = served => {}
                            _ = resyncs.changed() => {
                                tracing::info!("closing a GraphQL WebSocket: events may have been missed; the client refetches");
                            }
                        }
                    }
                    None => served.await,
                }
            }
        })
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::legacy_variable_types;

    #[test]
    fn console_21_is_told_the_least_memory_a_launch_needs() {
        use async_graphql::Value as V;
        let limit = |key: &str, min: &str| {
            let mut m = async_graphql::indexmap::IndexMap::new();
            m.insert(async_graphql::Name::new("key"), V::String(key.into()));
            m.insert(async_graphql::Name::new("min"), V::String(min.into()));
            V::Object(m)
        };
        let mut image = async_graphql::indexmap::IndexMap::new();
        image.insert(
            async_graphql::Name::new("resource_limits"),
            V::List(vec![limit("mem", "268435456"), limit("cpu", "1")]),
        );
        let mut images = V::List(vec![V::Object(image)]);
        super::legacy_shapes(&mut images, &[]);
        let (mut mem, mut cpu) = (limit("mem", "256m"), limit("cpu", "1"));
        super::with_default_shared_memory(&mut mem);
        super::with_default_shared_memory(&mut cpu);
        // 256m + 64m = 0.3125 GiB, up to 0.32 GiB (what the console shows and sends back).
        assert_eq!(mem, limit("mem", "0.32g"));
        assert_eq!(cpu, limit("cpu", "1"));
        let V::List(l) = images else { panic!() };
        let V::Object(image) = &l[0] else { panic!() };
        assert_eq!(
            image["resource_limits"],
            V::List(vec![limit("mem", "0.32g"), limit("cpu", "1")])
        );
    }

    #[test]
    fn fragments_no_operation_reaches_are_left_out() {
        use super::without_unused_fragments as strip;
        let q = "query Q { a { ...Used } }\nfragment Used on A { b ...Deep }\nfragment Deep on A { c }\nfragment Unused on B { d { e } s(x: \"}\") }\n# }\nfragment AlsoUnused on C { f }";
        let got = strip(q);
        assert!(
            got.contains("fragment Used") && got.contains("fragment Deep"),
            "{got}"
        );
        assert!(
            !got.contains("Unused") && !got.contains("AlsoUnused"),
            "{got}"
        );
        assert!(
            async_graphql::parser::parse_query(got.as_ref()).is_ok(),
            "{got}"
        );
        let clean = "query Q { a { ...F } } fragment F on A { b }";
        assert!(matches!(strip(clean), std::borrow::Cow::Borrowed(_)));
        assert!(matches!(
            strip("not graphql {"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn queries_type_conditions_read_as_query() {
        use super::queries_as_query as fix;
        let q = "query Q {\n  ...F\n  ... on Queries { a }\n}\nfragment F on Queries { b(s: \"on Queries\") }";
        assert_eq!(
            fix(q),
            "query Q {\n  ...F\n  ... on Query { a }\n}\nfragment F on Query { b(s: \"on Queries\") }"
        );
        for q in [
            "{ Queries }",
            "fragment F on Query { a }",
            "not graphql { Queries",
        ] {
            assert!(matches!(fix(q), std::borrow::Cow::Borrowed(_)), "{q}");
        }
    }

    #[test]
    fn consoles_string_group_ids_read_as_uuids() {
        assert_eq!(
            legacy_variable_types(
                "query($ak:String, $group_id:String, $status:String) { x(group_id:$group_id) }"
            ),
            "query($ak:String, $group_id: UUID, $status:String) { x(group_id:$group_id) }"
        );
        assert_eq!(
            legacy_variable_types("query($group_id : String!) { x }"),
            "query($group_id: UUID!) { x }"
        );
        // Other names and types stay as written.
        for q in [
            "query($group_id: UUID) { x }",
            "query($group_ids: String) { x }",
            "query($group_id: StringList) { x }",
            "{ x }",
        ] {
            assert_eq!(legacy_variable_types(q), q);
        }
    }
}
