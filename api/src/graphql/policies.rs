//! GraphQL for keypair resource policies.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::DefaultForUnspecified;
use entity::{keypair_resource_policies as policies, keypairs};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, ModelTrait, PaginatorTrait,
    QueryFilter, QueryOrder, Set,
};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::graphql::{BigInt, JsonString, authed};
use crate::validate::{non_negative, non_negative_i32};

pub struct KeyPairResourcePolicy(pub policies::Model);

#[Object(rename_fields = "snake_case")]
impl KeyPairResourcePolicy {
    async fn name(&self) -> &str {
        &self.0.name
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// LIMITED (unlisted slots are 0) or UNLIMITED (unlisted slots have no limit).
    async fn default_for_unspecified(&self) -> &str {
        self.0.default_for_unspecified.as_str()
    }
    /// `{"cpu": "4", "mem": "17179869184", "cuda.shares": "Infinity"}`.
    async fn total_resource_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.total_resource_slots).unwrap_or_default())
    }
    /// Seconds; 0 = unlimited.
    async fn max_session_lifetime(&self) -> BigInt {
        BigInt(self.0.max_session_lifetime)
    }
    /// Concurrent jobs; 0 = unlimited.
    async fn max_concurrent_sessions(&self) -> i32 {
        self.0.max_concurrent_sessions
    }
    /// 0 = unlimited.
    async fn max_containers_per_session(&self) -> i32 {
        self.0.max_containers_per_session
    }
    async fn max_pending_session_count(&self) -> Option<i32> {
        self.0.max_pending_session_count
    }
    /// Seconds; 0 = sessions are never reclaimed for idleness.
    async fn idle_timeout(&self) -> BigInt {
        BigInt(self.0.idle_timeout)
    }
    /// `{host: [permission, …]}`.
    async fn allowed_vfolder_hosts(&self) -> JsonString {
        JsonString(self.0.allowed_vfolder_hosts.clone())
    }
    /// 0 = unlimited.
    async fn max_vfolder_count(&self) -> i32 {
        self.0.max_vfolder_count
    }
    /// Folder capacity in bytes; 0 = unlimited.
    async fn max_vfolder_size(&self) -> BigInt {
        BigInt(self.0.max_vfolder_size)
    }
}

/// Names of policies used by the caller's keypairs.
async fn own_policy_names(
    db: &sea_orm::DatabaseConnection,
    caller: &Caller,
) -> ApiResult<Vec<String>> {
    Ok(keypairs::Entity::find()
        .filter(keypairs::Column::User.eq(caller.uuid))
        .all(db)
        .await?
        .into_iter()
        .map(|k| k.resource_policy)
        .collect())
}

#[derive(Default)]
pub struct PolicyQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl PolicyQuery {
    /// A policy by name; without `name`, the policy of the caller's keypair. Users may only
    /// read the policies of their own keypairs.
    async fn keypair_resource_policy(
        &self,
        ctx: &Context<'_>,
        name: Option<String>,
    ) -> async_graphql::Result<KeyPairResourcePolicy> {
        let (state, caller) = authed(ctx)?;
        let name = match name {
            Some(n) => n,
            None => {
                let ak = caller.access_key.clone().unwrap_or_default();
                keypairs::Entity::find_by_id(ak)
                    .one(&state.db)
                    .await
                    .map_err(ApiError::from)?
                    .map(|k| k.resource_policy)
                    .ok_or_else(|| ApiError::not_found("resource policy", "(caller)"))?
            }
        };
        if caller.admin_scope().is_none()
            && !own_policy_names(&state.db, caller).await?.contains(&name)
        {
            return Err(ApiError::not_found("resource policy", &name).into());
        }
        let p = crate::lookup::get::<policies::Entity>(&state.db, "resource policy", name.clone())
            .await?;
        Ok(KeyPairResourcePolicy(p))
    }

    async fn keypair_resource_policies(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Vec<KeyPairResourcePolicy>> {
        let (state, caller) = authed(ctx)?;
        let mut select = policies::Entity::find().order_by_asc(policies::Column::Name);
        if caller.admin_scope().is_none() {
            select = select
                .filter(policies::Column::Name.is_in(own_policy_names(&state.db, caller).await?));
        }
        let rows = select.all(&state.db).await.map_err(ApiError::from)?;
        Ok(rows.into_iter().map(KeyPairResourcePolicy).collect())
    }
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateKeyPairResourcePolicyInput {
    pub default_for_unspecified: String,
    /// JSON object of slot limits; "Infinity" = unlimited.
    pub total_resource_slots: JsonString,
    pub max_session_lifetime: Option<BigInt>,
    pub max_concurrent_sessions: i32,
    pub max_containers_per_session: i32,
    pub max_pending_session_count: Option<i32>,
    pub idle_timeout: BigInt,
    pub allowed_vfolder_hosts: Option<JsonString>,
    pub max_vfolder_count: Option<i32>,
    pub max_vfolder_size: Option<BigInt>,
}

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyKeyPairResourcePolicyInput {
    pub default_for_unspecified: Option<String>,
    pub total_resource_slots: Option<JsonString>,
    pub max_session_lifetime: Option<BigInt>,
    pub max_concurrent_sessions: Option<i32>,
    pub max_containers_per_session: Option<i32>,
    pub max_pending_session_count: Option<i32>,
    pub idle_timeout: Option<BigInt>,
    pub allowed_vfolder_hosts: Option<JsonString>,
    pub max_vfolder_count: Option<i32>,
    pub max_vfolder_size: Option<BigInt>,
}

fn parse_default(s: &str) -> ApiResult<DefaultForUnspecified> {
    DefaultForUnspecified::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid default_for_unspecified '{s}' (one of: {})",
            DefaultForUnspecified::choices()
        ))
    })
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateKeyPairResourcePolicy {
    pub ok: bool,
    pub msg: String,
    pub resource_policy: Option<KeyPairResourcePolicy>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyKeyPairResourcePolicy {
    pub ok: bool,
    pub msg: String,
    pub resource_policy: Option<KeyPairResourcePolicy>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct DeleteKeyPairResourcePolicy {
    pub ok: bool,
    pub msg: String,
}

/// Applies `props` onto `m`, validating each value.
fn apply(m: &mut policies::ActiveModel, p: ModifyKeyPairResourcePolicyInput) -> ApiResult<()> {
    if let Some(v) = p.default_for_unspecified {
        m.default_for_unspecified = Set(parse_default(&v)?);
    }
    if let Some(v) = p.total_resource_slots {
        m.total_resource_slots = Set(crate::policies::parse_limits(&v.0)?);
    }
    if let Some(v) = p.max_session_lifetime {
        m.max_session_lifetime = Set(non_negative("max_session_lifetime", v.0)?);
    }
    if let Some(v) = p.max_concurrent_sessions {
        m.max_concurrent_sessions = Set(non_negative_i32("max_concurrent_sessions", v)?);
    }
    if let Some(v) = p.max_containers_per_session {
        m.max_containers_per_session = Set(non_negative_i32("max_containers_per_session", v)?);
    }
    if let Some(v) = p.max_pending_session_count {
        m.max_pending_session_count = Set(Some(non_negative_i32("max_pending_session_count", v)?));
    }
    if let Some(v) = p.idle_timeout {
        m.idle_timeout = Set(non_negative("idle_timeout", v.0)?);
    }
    if let Some(v) = p.allowed_vfolder_hosts {
        m.allowed_vfolder_hosts = Set(crate::policies::normalize_allowed_hosts(&v.0)?);
    }
    if let Some(v) = p.max_vfolder_count {
        m.max_vfolder_count = Set(non_negative_i32("max_vfolder_count", v)?);
    }
    if let Some(v) = p.max_vfolder_size {
        m.max_vfolder_size = Set(non_negative("max_vfolder_size", v.0)?);
    }
    Ok(())
}

#[derive(Default)]
pub struct PolicyMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl PolicyMutation {
    async fn create_keypair_resource_policy(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: CreateKeyPairResourcePolicyInput,
    ) -> async_graphql::Result<CreateKeyPairResourcePolicy> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let name = crate::validate::object_name("resource policy", &name)?;
        let (_, default_hosts) = crate::policies::default_policy_values();
        let mut m = policies::ActiveModel {
            name: Set(name.clone()),
            created_at: Set(state.clock.now()),
            default_for_unspecified: Set(parse_default(&props.default_for_unspecified)?),
            total_resource_slots: Set(Default::default()),
            max_session_lifetime: Set(0),
            max_concurrent_sessions: Set(0),
            max_containers_per_session: Set(1),
            max_pending_session_count: Set(None),
            idle_timeout: Set(0),
            allowed_vfolder_hosts: Set(default_hosts),
            max_vfolder_count: Set(10),
            max_vfolder_size: Set(0),
        };
        apply(
            &mut m,
            ModifyKeyPairResourcePolicyInput {
                default_for_unspecified: None,
                total_resource_slots: Some(props.total_resource_slots),
                max_session_lifetime: props.max_session_lifetime,
                max_concurrent_sessions: Some(props.max_concurrent_sessions),
                max_containers_per_session: Some(props.max_containers_per_session),
                max_pending_session_count: props.max_pending_session_count,
                idle_timeout: Some(props.idle_timeout),
                allowed_vfolder_hosts: props.allowed_vfolder_hosts,
                max_vfolder_count: props.max_vfolder_count,
                max_vfolder_size: props.max_vfolder_size,
            },
        )?;
        if policies::Entity::find_by_id(name.clone())
            .one(&state.db)
            .await
            .map_err(ApiError::from)?
            .is_some()
        {
            return Err(
                ApiError::conflict(format!("Resource policy '{name}' already exists")).into(),
            );
        }
        let p = crate::audit::audited(
            &state.db,
            &caller.email,
            "create_keypair_resource_policy",
            "resource_policy",
            move |txn| {
                Box::pin(async move {
                    let p = m.insert(txn).await?;
                    let key = p.name.to_string();
                    let detail = serde_json::json!({});
                    Ok((p, key, detail))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::KeypairResourcePolicy,
            ChangeAction::Created,
            &p.name,
            None,
        );
        Ok(CreateKeyPairResourcePolicy {
            ok: true,
            msg: "success".into(),
            resource_policy: Some(KeyPairResourcePolicy(p)),
        })
    }

    async fn modify_keypair_resource_policy(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: ModifyKeyPairResourcePolicyInput,
    ) -> async_graphql::Result<ModifyKeyPairResourcePolicy> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let existing =
            crate::lookup::get::<policies::Entity>(&state.db, "resource policy", name.clone())
                .await?;
        let mut m = existing.into_active_model();
        apply(&mut m, props)?;
        let p = crate::audit::audited(
            &state.db,
            &caller.email,
            "modify_keypair_resource_policy",
            "resource_policy",
            move |txn| {
                Box::pin(async move {
                    let p = m.update(txn).await?;
                    let key = p.name.to_string();
                    let detail = serde_json::json!({});
                    Ok((p, key, detail))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::KeypairResourcePolicy,
            ChangeAction::Modified,
            &p.name,
            None,
        );
        Ok(ModifyKeyPairResourcePolicy {
            ok: true,
            msg: "success".into(),
            resource_policy: Some(KeyPairResourcePolicy(p)),
        })
    }

    /// Deletes a policy; refused while any keypair uses it.
    async fn delete_keypair_resource_policy(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> async_graphql::Result<DeleteKeyPairResourcePolicy> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let existing =
            crate::lookup::get::<policies::Entity>(&state.db, "resource policy", name.clone())
                .await?;
        let users = keypairs::Entity::find()
            .filter(keypairs::Column::ResourcePolicy.eq(&name))
            .count(&state.db)
            .await
            .map_err(ApiError::from)?;
        if users > 0 {
            return Err(ApiError::conflict(format!(
                "Resource policy '{name}' is used by {users} keypair(s); assign them another policy first."
            ))
            .into());
        }
        crate::audit::audited(
            &state.db,
            &caller.email,
            "delete_keypair_resource_policy",
            "resource_policy",
            move |txn| {
                Box::pin(async move {
                    let key = existing.name.clone();
                    existing.delete(txn).await?;
                    Ok(((), key, serde_json::json!({})))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::KeypairResourcePolicy,
            ChangeAction::Deleted,
            &name,
            None,
        );
        Ok(DeleteKeyPairResourcePolicy {
            ok: true,
            msg: "success".into(),
        })
    }
}
