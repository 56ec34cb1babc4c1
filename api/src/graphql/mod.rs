//! The GraphQL schema: Backend.AI's `/admin/gql` names (snake_case) assembled from the
//! per-domain query, mutation and subscription objects, plus the HTTP/WebSocket handlers.
pub use bai_core::filter;
pub mod accounts;
pub mod agents;
pub mod bgtasks;
pub mod domains;
pub mod groups;
pub mod images;
pub mod keypairs;
pub mod limits;
pub mod order;
pub mod policies;
pub mod presets;
pub mod registries;
pub mod scalars;
pub mod scaling_groups;
pub mod sessions;
pub mod settings;
pub mod storage;
pub mod templates;
pub mod users;
pub mod ws_guard;

use async_graphql::http::{ALL_WEBSOCKET_PROTOCOLS, GraphiQLSource};
use async_graphql::{Context, Data, MergedObject, MergedSubscription, Schema};
use async_graphql_axum::{GraphQLProtocol, GraphQLRequest, GraphQLResponse, GraphQLWebSocket};
use axum::Extension;
use axum::extract::{State, WebSocketUpgrade};
use axum::response::{Html, IntoResponse, Response};
use sea_orm::{EntityTrait, Order, QueryOrder, Select};

pub use scalars::{BigInt, JsonString};

use crate::auth::ws::Owner;
use crate::auth::{Caller, ClientAddr, Credential, Principal};
use crate::error::{ApiError, ApiResult};
use crate::graphql::ws_guard::WsConnection;
use crate::server::Web;
use crate::state::AppState;

/// A resolver's error: ours (kept with its code) or one of the GraphQL engine's own (a
/// missing context value). It leaves as a GraphQL error with `extensions.code`; ours go
/// through `error::leaving` on the way (classified, logged with the request id).
#[derive(Clone)]
pub enum GqlError {
    Api(ApiError),
    Engine(async_graphql::Error),
}

/// A resolver's result. (The derive macros recognise a result by the name `Result`.)
pub type Result<T, E = GqlError> = std::result::Result<T, E>;

impl From<ApiError> for GqlError {
    fn from(e: ApiError) -> Self {
        GqlError::Api(crate::error::leaving(e))
    }
}

impl From<sea_orm::DbErr> for GqlError {
    fn from(e: sea_orm::DbErr) -> Self {
        GqlError::from(ApiError::from(e))
    }
}

impl From<async_graphql::Error> for GqlError {
    fn from(e: async_graphql::Error) -> Self {
        GqlError::Engine(e)
    }
}

impl From<GqlError> for async_graphql::Error {
    fn from(e: GqlError) -> Self {
        use async_graphql::ErrorExtensions;
        match e {
            GqlError::Api(e) => {
                let code = e.code.as_str();
                async_graphql::Error::new(e.message).extend_with(|_, ext| ext.set("code", code))
            }
            GqlError::Engine(e) => e,
        }
    }
}

/// As an error of the GraphQL engine (for extensions, which cannot return resolver errors).
pub fn server_error(e: ApiError) -> async_graphql::ServerError {
    let e = crate::error::leaving(e);
    let mut ext = async_graphql::ErrorExtensionValues::default();
    ext.set("code", e.code.as_str());
    let mut out = async_graphql::ServerError::new(e.message, None);
    out.extensions = Some(ext);
    out
}

#[derive(MergedObject, Default)]
pub struct Query(
    crate::graphql::accounts::AccountQuery,
    crate::graphql::users::UserQuery,
    crate::graphql::keypairs::KeypairQuery,
    crate::graphql::policies::PolicyQuery,
    crate::graphql::domains::DomainQuery,
    crate::graphql::groups::GroupQuery,
    crate::graphql::presets::PresetQuery,
    crate::graphql::scaling_groups::ScalingGroupQuery,
    crate::graphql::registries::RegistryQuery,
    crate::graphql::images::ImageQuery,
    crate::graphql::settings::SettingQuery,
    crate::graphql::sessions::SessionQuery,
    crate::graphql::sessions::ExecutionQuery,
    crate::graphql::sessions::UsageQuery,
    crate::graphql::agents::AgentQuery,
    crate::graphql::bgtasks::BgTaskQuery,
    crate::graphql::storage::StorageQuery,
    crate::graphql::templates::TemplateQuery,
);

#[derive(MergedObject, Default)]
pub struct Mutation(
    crate::graphql::accounts::AccountMutation,
    crate::graphql::users::UserMutation,
    crate::graphql::keypairs::KeypairMutation,
    crate::graphql::policies::PolicyMutation,
    crate::graphql::domains::DomainMutation,
    crate::graphql::groups::GroupMutation,
    crate::graphql::presets::PresetMutation,
    crate::graphql::scaling_groups::ScalingGroupMutation,
    crate::graphql::registries::RegistryMutation,
    crate::graphql::images::ImageMutation,
    crate::graphql::settings::SettingMutation,
    crate::graphql::sessions::SessionMutation,
    crate::graphql::sessions::ExecutionMutation,
    crate::graphql::agents::AgentMutation,
    crate::graphql::storage::StorageMutation,
    crate::graphql::templates::TemplateMutation,
);

#[derive(MergedSubscription, Default)]
pub struct Subscription(
    crate::changes::ChangeSubscription,
    crate::graphql::sessions::SessionSubscription,
    crate::graphql::sessions::ExecutionSubscription,
    crate::graphql::bgtasks::BgTaskSubscription,
    crate::graphql::storage::StorageSubscription,
);

pub type BaiSchema = Schema<Query, Mutation, Subscription>;

pub fn build_schema(state: AppState) -> BaiSchema {
    let cfg = state.config.clone();
    Schema::build(
        Query::default(),
        Mutation::default(),
        Subscription::default(),
    )
    .data(state)
    .limit_depth(cfg.graphql_max_depth)
    .limit_complexity(cfg.graphql_max_complexity)
    .extension(limits::DocumentLimits {
        max_aliases: cfg.graphql_max_aliases,
        max_fields: cfg.graphql_max_fields,
    })
    .extension(order::SelectionOrder)
    .extension(crate::graphql::ws_guard::WsGuard)
    .finish()
}

/// The SDL committed as `api/schema.graphql`.
pub fn sdl() -> String {
    Schema::build(
        Query::default(),
        Mutation::default(),
        Subscription::default(),
    )
    .finish()
    .sdl()
}

pub fn state<'a>(ctx: &Context<'a>) -> ApiResult<&'a AppState> {
    ctx.data::<AppState>()
        .map_err(|e| ApiError::internal("reading request context", e.message))
}

pub fn caller<'a>(ctx: &Context<'a>) -> ApiResult<&'a Caller> {
    match ctx.data::<Principal>() {
        Ok(p) => p.caller(),
        Err(_) => Err(ApiError::unauthenticated("Login required.")),
    }
}

/// Both at once, the common case for resolvers.
pub fn authed<'a>(ctx: &Context<'a>) -> ApiResult<(&'a AppState, &'a Caller)> {
    Ok((state(ctx)?, caller(ctx)?))
}

/// Validated `limit`/`offset` of Backend.AI's paginated lists.
pub fn page(limit: i32, offset: i32) -> ApiResult<(u64, u64)> {
    if !(1..=100).contains(&limit) {
        return Err(ApiError::bad_request("limit must be between 1 and 100"));
    }
    let offset =
        u64::try_from(offset).map_err(|_| ApiError::bad_request("offset must not be negative"))?;
    Ok((limit as u64, offset))
}

/// Applies Backend.AI's order syntax (`+name,-created_at`; no sign = ascending) restricted to
/// the `allowed` columns.
pub fn apply_order<E: EntityTrait>(
    mut select: Select<E>,
    order: Option<&str>,
    allowed: &[(&str, E::Column)],
    default: (E::Column, Order),
) -> ApiResult<Select<E>> {
    let Some(order) = order.filter(|o| !o.trim().is_empty()) else {
        return Ok(select.order_by(default.0, default.1));
    };
    for part in order.split(',') {
        let part = part.trim();
        let (dir, name) = match part.split_at_checked(1) {
            Some(("-", rest)) => (Order::Desc, rest),
            Some(("+", rest)) => (Order::Asc, rest),
            _ => (Order::Asc, part),
        };
        let col = allowed
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| *c)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "cannot order by '{name}' (allowed: {})",
                    allowed
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        select = select.order_by(col, dir);
    }
    Ok(select)
}

/// One page of a Backend.AI paginated list: validated `limit`/`offset`, the total count,
/// then the rows in the requested order.
pub async fn paginate<E>(
    db: &sea_orm::DatabaseConnection,
    select: Select<E>,
    (limit, offset): (i32, i32),
    order: Option<&str>,
    allowed: &[(&str, E::Column)],
    default: (E::Column, Order),
) -> ApiResult<(Vec<E::Model>, u64)>
where
    E: EntityTrait,
    E::Model: Sync,
{
    use sea_orm::PaginatorTrait;
    let total = select.clone().count(db).await?;
    let rows = page_rows(db, select, (limit, offset), order, allowed, default).await?;
    Ok((rows, total))
}

/// One page of `select` (what `paginate` returns without the count).
pub async fn page_rows<E>(
    db: &sea_orm::DatabaseConnection,
    select: Select<E>,
    (limit, offset): (i32, i32),
    order: Option<&str>,
    allowed: &[(&str, E::Column)],
    default: (E::Column, Order),
) -> ApiResult<Vec<E::Model>>
where
    E: EntityTrait,
    E::Model: Sync,
{
    use sea_orm::QuerySelect;
    let (limit, offset) = page(limit, offset)?;
    Ok(apply_order(select, order, allowed, default)?
        .limit(limit)
        .offset(offset)
        .all(db)
        .await?)
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

/// The client's address, for login throttles.
pub fn client_addr(ctx: &Context<'_>) -> Option<std::net::IpAddr> {
    ctx.data_opt::<ClientAddr>().and_then(|a| a.0)
}

pub async fn graphql_post(
    State(web): State<Web>,
    Extension(principal): Extension<Principal>,
    Extension(addr): Extension<ClientAddr>,
    req: GraphQLRequest,
) -> Response {
    let request = req.into_inner();
    let compressible = crate::observe::compressible_document(&request.query);
    let resp = web.schema.execute(request.data(principal).data(addr)).await;
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
            let resyncs = app.events.resyncs();
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
    #[test]
    fn committed_schema_matches_live_schema() {
        let live = super::sdl();
        let committed = include_str!("../../schema.graphql");
        assert!(
            live == committed,
            "api/schema.graphql is out of date: regenerate it with `cargo run -p api --bin bai -- schema > api/schema.graphql`"
        );
    }
}
