//! What every resolver uses: its result and error types (errors leave with
//! `extensions.code`), the state and caller of the request, and Backend.AI's pagination and
//! ordering of lists. It names no resolver, so the per-domain resolvers depend on it and the
//! schema (`graphql/mod.rs`) on them, one way.
use async_graphql::Context;
use sea_orm::{EntityTrait, Order, QueryOrder, Select};

use crate::auth::{Caller, ClientAddr, Principal};
use crate::error::{ApiError, ApiResult};
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
    // 1000: the most Backend.AI's consoles ask for in one page (Console 21.02's launcher).
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("limit must be between 1 and 1000"));
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

/// The client's address, for login throttles.
pub fn client_addr(ctx: &Context<'_>) -> Option<std::net::IpAddr> {
    ctx.data_opt::<ClientAddr>().and_then(|a| a.0)
}

/// A row's related names, batched: every row of a list asking for its owner's e-mail or
/// its project's name in the same turn is answered by one query per kind (not one per row).
/// Keys come from rows the caller was already allowed to see. Per process and cacheless: it
/// holds only the keys of the current turn (nothing a second `bai serve` would need to see).
pub struct Names {
    read: sea_orm::DatabaseConnection,
}

/// A user's e-mail address, by the user's id.
#[derive(Clone, Copy, Hash, PartialEq, Eq)]
pub struct UserEmail(pub uuid::Uuid);

/// A project's name, by its id.
#[derive(Clone, Copy, Hash, PartialEq, Eq)]
pub struct GroupName(pub uuid::Uuid);

impl Names {
    /// The loader the schema holds (reads through the read pool).
    pub fn loader(
        read: sea_orm::DatabaseConnection,
    ) -> async_graphql::dataloader::DataLoader<Self> {
        async_graphql::dataloader::DataLoader::new(Self { read }, tokio::spawn)
    }
}

impl async_graphql::dataloader::Loader<UserEmail> for Names {
    type Value = String;
    type Error = ApiError;
    async fn load(
        &self,
        keys: &[UserEmail],
    ) -> std::result::Result<std::collections::HashMap<UserEmail, String>, ApiError> {
        let ids: Vec<uuid::Uuid> = keys.iter().map(|k| k.0).collect();
        Ok(crate::users::emails_of(&self.read, &ids)
            .await?
            .into_iter()
            .map(|(id, email)| (UserEmail(id), email))
            .collect())
    }
}

impl async_graphql::dataloader::Loader<GroupName> for Names {
    type Value = String;
    type Error = ApiError;
    async fn load(
        &self,
        keys: &[GroupName],
    ) -> std::result::Result<std::collections::HashMap<GroupName, String>, ApiError> {
        let ids: Vec<uuid::Uuid> = keys.iter().map(|k| k.0).collect();
        Ok(crate::groups::names_of(&self.read, &ids)
            .await?
            .into_iter()
            .map(|(id, name)| (GroupName(id), name))
            .collect())
    }
}

/// A page's related names, read by the list that returned the page, once per table for all
/// its rows (when the query asks for them), before any row is resolved: a page costs one query
/// per related table whatever the rows' timing (the loader batches only the keys that arrive
/// within its delay). Per request, in memory (each HTTP request gets its own).
#[derive(Default)]
pub struct PageNames {
    emails: parking_lot::Mutex<std::collections::HashMap<uuid::Uuid, Option<String>>>,
    groups: parking_lot::Mutex<std::collections::HashMap<uuid::Uuid, Option<String>>>,
}

/// Reads the owners' e-mails of `users` and the names of `groups` for the page being returned
/// (each list only when its field is asked: `user_email` / `group_name` at the path `rows`
/// under the current field, e.g. `items`). Without a request's `PageNames` (a subscription) it does nothing.
pub async fn prime_names(
    ctx: &Context<'_>,
    rows: &[&str],
    users: impl Iterator<Item = uuid::Uuid>,
    groups: impl Iterator<Item = uuid::Uuid>,
) -> Result<()> {
    let Some(names) = ctx.data_opt::<PageNames>() else {
        return Ok(());
    };
    let read = &state(ctx)?.read;
    let row = rows
        .iter()
        .fold(ctx.look_ahead(), |ahead, name| ahead.field(name));
    if row.field("user_email").exists() {
        let ids = unique(users);
        let found = crate::users::emails_of(read, &ids).await?;
        remember(&names.emails, ids, &found);
    }
    if row.field("group_name").exists() {
        let ids = unique(groups);
        let found = crate::groups::names_of(read, &ids).await?;
        remember(&names.groups, ids, &found);
    }
    Ok(())
}

/// The distinct ids of a page's rows, sorted.
fn unique(ids: impl Iterator<Item = uuid::Uuid>) -> Vec<uuid::Uuid> {
    let mut ids: Vec<uuid::Uuid> = ids.collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Keeps what a page's lookup found for each of `ids` (None: no such row).
fn remember(
    known: &parking_lot::Mutex<std::collections::HashMap<uuid::Uuid, Option<String>>>,
    ids: Vec<uuid::Uuid>,
    found: &std::collections::HashMap<uuid::Uuid, String>,
) {
    let mut m = known.lock();
    for id in ids {
        m.insert(id, found.get(&id).cloned());
    }
}

/// The e-mail address of user `id` (None: no such user): from the page's names, else batched
/// with the other rows'.
pub async fn user_email(ctx: &Context<'_>, id: uuid::Uuid) -> Result<Option<String>> {
    if let Some(known) = ctx
        .data_opt::<PageNames>()
        .and_then(|n| n.emails.lock().get(&id).cloned())
    {
        return Ok(known);
    }
    let names = ctx.data::<async_graphql::dataloader::DataLoader<Names>>()?;
    Ok(names.load_one(UserEmail(id)).await?)
}

/// The name of project `id` (None: no such project): from the page's names, else batched with
/// the other rows'.
pub async fn group_name(ctx: &Context<'_>, id: uuid::Uuid) -> Result<Option<String>> {
    if let Some(known) = ctx
        .data_opt::<PageNames>()
        .and_then(|n| n.groups.lock().get(&id).cloned())
    {
        return Ok(known);
    }
    let names = ctx.data::<async_graphql::dataloader::DataLoader<Names>>()?;
    Ok(names.load_one(GroupName(id)).await?)
}
