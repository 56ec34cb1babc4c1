//! GraphQL for keypairs: `keypair`, `keypairs`, `keypair_list`, `create_keypair`,
//! `modify_keypair`, `delete_keypair`.
// Resolver arguments mirror Backend.AI's GraphQL signatures, however many there are.
#![allow(clippy::too_many_arguments)]
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::{keypairs, users};
use sea_orm::{Order, QueryFilter, QueryOrder};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::graphql::{context::authed, scalars::BigInt};

/// A keypair as the caller may see it. The secret key is shown to its owner and to
/// superadmins only.
pub struct KeyPair {
    pub kp: keypairs::Model,
    pub owner: users::Model,
    pub show_secret: bool,
}

impl KeyPair {
    fn new(kp: keypairs::Model, owner: users::Model, caller: &Caller) -> Self {
        let show_secret = owner.uuid == caller.uuid || caller.is_superadmin();
        Self {
            kp,
            owner,
            show_secret,
        }
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct UserInfo {
    pub email: String,
    pub full_name: Option<String>,
}

#[Object(rename_fields = "snake_case")]
impl KeyPair {
    async fn id(&self) -> &str {
        &self.kp.access_key
    }
    /// The owner's email.
    async fn user_id(&self) -> &str {
        &self.kp.user_id
    }
    async fn access_key(&self) -> &str {
        &self.kp.access_key
    }
    async fn secret_key(&self) -> Option<&str> {
        self.show_secret.then_some(self.kp.secret_key.as_str())
    }
    async fn is_active(&self) -> bool {
        self.kp.is_active
    }
    async fn is_admin(&self) -> bool {
        self.kp.is_admin
    }
    async fn resource_policy(&self) -> &str {
        &self.kp.resource_policy
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.kp.created_at
    }
    async fn modified_at(&self) -> DateTime<Utc> {
        self.kp.modified_at
    }
    async fn last_used(&self) -> Option<DateTime<Utc>> {
        self.kp.last_used
    }
    /// Requests allowed per 15 minutes (0 = unlimited).
    async fn rate_limit(&self) -> i32 {
        self.kp.rate_limit
    }
    async fn num_queries(&self) -> BigInt {
        BigInt(self.kp.num_queries)
    }
    /// The owner's UUID.
    async fn user(&self) -> uuid::Uuid {
        self.kp.user
    }
    async fn ssh_public_key(&self) -> Option<&str> {
        self.kp.ssh_public_key.as_deref()
    }
    async fn full_name(&self) -> Option<&str> {
        self.owner.full_name.as_deref()
    }
    async fn domain_name(&self) -> &str {
        &self.owner.domain_name
    }
    async fn is_main(&self) -> bool {
        self.owner.main_access_key.as_deref() == Some(self.kp.access_key.as_str())
    }
    /// The names of the owner's projects.
    async fn projects(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<Vec<String>> {
        let state = crate::graphql::context::state(ctx)?;
        let mut names: Vec<String> = crate::groups::of_user(self.owner.uuid)
            .all(&state.read)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .map(|g| g.name)
            .collect();
        names.sort();
        Ok(names)
    }
    async fn user_info(&self) -> UserInfo {
        UserInfo {
            email: self.owner.email.clone(),
            full_name: self.owner.full_name.clone(),
        }
    }
    /// Backend.AI 20.09's `concurrency_limit`: the keypair's policy's `max_concurrent_sessions`
    /// (0 = unlimited).
    async fn concurrency_limit(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<i32> {
        let state = crate::graphql::context::state(ctx)?;
        Ok(crate::policies::find(&state.read, &self.kp.resource_policy)
            .await?
            .map_or(0, |p| p.max_concurrent_sessions))
    }
    /// Sessions currently holding resources under this keypair.
    async fn concurrency_used(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<u64> {
        let state = crate::graphql::context::state(ctx)?;
        Ok(crate::keypairs::live_session_count(&state.read, &self.kp.access_key).await?)
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct KeyPairList {
    pub items: Vec<KeyPair>,
    pub total_count: u64,
}

#[derive(Default)]
pub struct KeypairQuery;

async fn with_owners(
    db: &sea_orm::DatabaseConnection,
    caller: &Caller,
    rows: Vec<keypairs::Model>,
) -> ApiResult<Vec<KeyPair>> {
    let mut out = Vec::with_capacity(rows.len());
    for kp in rows {
        let owner = crate::users::by_uuid(db, kp.user).await?;
        out.push(KeyPair::new(kp, owner, caller));
    }
    Ok(out)
}

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl KeypairQuery {
    /// A keypair by access key; without arguments, the caller's own keypair (the one
    /// authenticating this request).
    async fn keypair(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "accepted for compatibility")] _domain_name: Option<String>,
        access_key: Option<String>,
    ) -> crate::graphql::context::Result<KeyPair> {
        let (state, caller) = authed(ctx)?;
        let ak = match access_key.or_else(|| caller.access_key.clone()) {
            Some(ak) => ak,
            None => return Err(ApiError::not_found("keypair", "(none)").into()),
        };
        let (kp, owner) = crate::auth::visibility::keypair(&state.read, caller, &ak).await?;
        Ok(KeyPair::new(kp, owner, caller))
    }

    async fn keypairs(
        &self,
        ctx: &Context<'_>,
        domain_name: Option<String>,
        email: Option<String>,
        is_active: Option<bool>,
    ) -> crate::graphql::context::Result<Vec<KeyPair>> {
        let (state, caller) = authed(ctx)?;
        let rows = crate::keypairs::listable(caller, domain_name, email, is_active)
            .order_by_asc(keypairs::Column::CreatedAt)
            .all(&state.read)
            .await
            .map_err(ApiError::from)?;
        Ok(with_owners(&state.read, caller, rows).await?)
    }

    async fn keypair_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        order: Option<String>,
        domain_name: Option<String>,
        email: Option<String>,
        is_active: Option<bool>,
        filter: Option<String>,
    ) -> crate::graphql::context::Result<KeyPairList> {
        let (state, caller) = authed(ctx)?;
        let mut select = crate::keypairs::listable(caller, domain_name, email, is_active);
        if let Some(f) = filter
            && let Some(f) = bai_core::filter::parse(
                &f,
                &[
                    ("access_key", keypairs::Column::AccessKey),
                    ("user_id", keypairs::Column::UserId),
                    ("is_active", keypairs::Column::IsActive),
                    ("is_admin", keypairs::Column::IsAdmin),
                    ("resource_policy", keypairs::Column::ResourcePolicy),
                    ("created_at", keypairs::Column::CreatedAt),
                    ("last_used", keypairs::Column::LastUsed),
                ],
            )?
        {
            select = select.filter(crate::sql::condition(&f));
        }
        let (rows, total_count) = crate::graphql::context::paginate(
            &state.read,
            select,
            (limit, offset),
            order.as_deref(),
            &[
                ("access_key", keypairs::Column::AccessKey),
                ("user_id", keypairs::Column::UserId),
                ("created_at", keypairs::Column::CreatedAt),
                ("last_used", keypairs::Column::LastUsed),
                ("resource_policy", keypairs::Column::ResourcePolicy),
                ("num_queries", keypairs::Column::NumQueries),
            ],
            // Newest first, as Backend.AI lists keypairs.
            (keypairs::Column::CreatedAt, Order::Desc),
        )
        .await?;
        Ok(KeyPairList {
            items: with_owners(&state.read, caller, rows).await?,
            total_count,
        })
    }
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct KeyPairInput {
    pub resource_policy: String,
    /// Requests per 15 minutes; 0 = unlimited.
    pub rate_limit: i32,
    pub is_active: Option<bool>,
    pub is_admin: Option<bool>,
    /// Advanced: an explicit access key (20 upper-case letters/digits).
    pub access_key: Option<String>,
    /// Advanced: an explicit secret key (40 characters).
    pub secret_key: Option<String>,
}

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyKeyPairInput {
    pub is_active: Option<bool>,
    pub is_admin: Option<bool>,
    pub resource_policy: Option<String>,
    pub rate_limit: Option<i32>,
}

impl From<KeyPairInput> for crate::keypairs::NewKeypair {
    fn from(p: KeyPairInput) -> Self {
        Self {
            resource_policy: p.resource_policy,
            rate_limit: p.rate_limit,
            is_active: p.is_active.unwrap_or(true),
            is_admin: p.is_admin.unwrap_or(false),
            access_key: p.access_key,
            secret_key: p.secret_key,
        }
    }
}

impl From<ModifyKeyPairInput> for crate::keypairs::KeypairChange {
    fn from(p: ModifyKeyPairInput) -> Self {
        Self {
            is_active: p.is_active,
            is_admin: p.is_admin,
            resource_policy: p.resource_policy,
            rate_limit: p.rate_limit,
        }
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateKeyPair {
    pub ok: bool,
    pub msg: String,
    pub keypair: Option<KeyPair>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyKeyPair {
    pub ok: bool,
    pub msg: String,
    pub keypair: Option<KeyPair>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct DeleteKeyPair {
    pub ok: bool,
    pub msg: String,
}

#[derive(Default)]
pub struct KeypairMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl KeypairMutation {
    /// Adds a keypair for the user with email `user_id` (superadmin only).
    async fn create_keypair(
        &self,
        ctx: &Context<'_>,
        user_id: String,
        props: KeyPairInput,
    ) -> crate::graphql::context::Result<CreateKeyPair> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let (kp, owner) =
            crate::keypairs::create(state, &scope, caller, &user_id, props.into()).await?;
        Ok(CreateKeyPair {
            ok: true,
            msg: "success".into(),
            keypair: Some(KeyPair::new(kp, owner, caller)),
        })
    }

    /// Changes a keypair's activity, policy or rate limit (admins of the owner's domain).
    async fn modify_keypair(
        &self,
        ctx: &Context<'_>,
        access_key: String,
        props: ModifyKeyPairInput,
    ) -> crate::graphql::context::Result<ModifyKeyPair> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_admin()?;
        let (kp, owner) =
            crate::keypairs::modify(state, &scope, caller, &access_key, props.into()).await?;
        Ok(ModifyKeyPair {
            ok: true,
            msg: "success".into(),
            keypair: Some(KeyPair::new(kp, owner, caller)),
        })
    }

    /// Deletes a keypair for good (superadmin only). Refused while any session was created
    /// with it, and for a user's main keypair.
    async fn delete_keypair(
        &self,
        ctx: &Context<'_>,
        access_key: String,
    ) -> crate::graphql::context::Result<DeleteKeyPair> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::keypairs::delete(state, &scope, caller, &access_key).await?;
        Ok(DeleteKeyPair {
            ok: true,
            msg: "success".into(),
        })
    }
}
