//! GraphQL for keypair resource policies.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::keypair_resource_policies as policies;

use crate::error::{ApiError, ApiResult};
use crate::graphql::{context::authed, scalars::BigInt, scalars::JsonString};
use crate::policies::PolicyChange;

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
    /// Backend.AI's limit of pending sessions' resources: bai keeps none (null: unlimited).
    async fn max_pending_session_resource_slots(&self) -> Option<JsonString> {
        None
    }
    /// Backend.AI's SFTP sessions: bai has none (null).
    async fn max_concurrent_sftp_sessions(&self) -> Option<i32> {
        None
    }
    /// Seconds; 0 = sessions are never reclaimed for idleness.
    async fn idle_timeout(&self) -> BigInt {
        BigInt(self.0.idle_timeout)
    }
    /// Idle by utilization: a session whose CPU and GPU use both stay below this percentage
    /// of what it was allocated for `idle_utilization_secs` is ended (0 = no such rule).
    async fn idle_utilization_pct(&self) -> i32 {
        self.0.idle_utilization_pct
    }
    /// Seconds of use below `idle_utilization_pct` after which a session ends.
    async fn idle_utilization_secs(&self) -> BigInt {
        BigInt(self.0.idle_utilization_secs)
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
    /// Images a user may keep from committed sessions; 0 = none.
    async fn max_customized_image_count(&self) -> i32 {
        self.0.max_customized_image_count
    }
    /// Replicas one model-serving endpoint may keep.
    async fn max_session_count_per_model_session(&self) -> i32 {
        self.0.max_session_count_per_model_session
    }
}

/// Backend.AI's `UserResourcePolicy`: in bai a user's folder limits are those of its keypair's
/// resource policy, shown under that policy's name.
pub struct UserResourcePolicy(policies::Model);

#[Object(rename_fields = "snake_case")]
impl UserResourcePolicy {
    /// The Relay global id, `base64("UserResourcePolicy:<name>")`.
    async fn id(&self) -> async_graphql::ID {
        crate::graphql::sessions::global_id("UserResourcePolicy", &self.0.name)
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// 0 = unlimited.
    async fn max_vfolder_count(&self) -> i32 {
        self.0.max_vfolder_count
    }
    /// Bytes per folder; 0 = unlimited.
    async fn max_quota_scope_size(&self) -> BigInt {
        BigInt(self.0.max_vfolder_size)
    }
    /// Bytes per folder; 0 = unlimited.
    async fn max_vfolder_size(&self) -> BigInt {
        BigInt(self.0.max_vfolder_size)
    }
    /// Replicas one model-serving endpoint may keep.
    async fn max_session_count_per_model_session(&self) -> i32 {
        self.0.max_session_count_per_model_session
    }
    async fn max_customized_image_count(&self) -> i32 {
        self.0.max_customized_image_count
    }
}

/// Backend.AI's `ProjectResourcePolicy`, of which bai has none.
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ProjectResourcePolicy {
    id: async_graphql::ID,
    name: String,
    max_vfolder_count: Option<i32>,
}

#[derive(Default)]
pub struct PolicyQuery;

/// Backend.AI's atomic permissions a storage host grants (`vfolder_host_permissions`).
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct PredefinedAtomicPermission {
    pub vfolder_host_permission_list: Vec<String>,
}

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl PolicyQuery {
    /// The permissions a storage host may grant in a policy's `allowed_vfolder_hosts`.
    async fn vfolder_host_permissions(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<PredefinedAtomicPermission> {
        authed(ctx)?;
        Ok(PredefinedAtomicPermission {
            vfolder_host_permission_list: crate::policies::HOST_PERMISSIONS
                .iter()
                .map(|p| p.to_string())
                .collect(),
        })
    }

    /// Backend.AI's `user_resource_policy`: the folder limits of the caller (its keypair's
    /// policy), or of the policy `name` (users: only their own keypairs' policies).
    async fn user_resource_policy(
        &self,
        ctx: &Context<'_>,
        name: Option<String>,
    ) -> crate::graphql::context::Result<UserResourcePolicy> {
        let (state, caller) = authed(ctx)?;
        let Some(name) = name else {
            return Ok(UserResourcePolicy(
                crate::policies::of_caller(state, caller).await?,
            ));
        };
        Ok(UserResourcePolicy(
            crate::policies::find_visible(&state.read, caller, name).await?,
        ))
    }

    /// Backend.AI's `project_resource_policy`: bai has no per-project resource policies, so
    /// there is none to show (null).
    async fn project_resource_policy(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "accepted; bai has no project policies")] _name: String,
    ) -> crate::graphql::context::Result<Option<ProjectResourcePolicy>> {
        authed(ctx)?;
        Ok(None)
    }

    /// A policy by name; without `name`, the policy of the caller's keypair. Users may only
    /// read the policies of their own keypairs.
    async fn keypair_resource_policy(
        &self,
        ctx: &Context<'_>,
        name: Option<String>,
    ) -> crate::graphql::context::Result<KeyPairResourcePolicy> {
        let (state, caller) = authed(ctx)?;
        let name = match name {
            Some(n) => n,
            None => crate::policies::name_of_caller(&state.read, caller).await?,
        };
        let p = crate::policies::find_visible(&state.read, caller, name).await?;
        Ok(KeyPairResourcePolicy(p))
    }

    async fn keypair_resource_policies(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<KeyPairResourcePolicy>> {
        let (state, caller) = authed(ctx)?;
        let rows = crate::policies::visible(&state.read, caller).await?;
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
    /// Percent (0–100; 0 = no utilization rule).
    pub idle_utilization_pct: Option<i32>,
    /// Seconds.
    pub idle_utilization_secs: Option<BigInt>,
    pub allowed_vfolder_hosts: Option<JsonString>,
    pub max_vfolder_count: Option<i32>,
    pub max_vfolder_size: Option<BigInt>,
    pub max_customized_image_count: Option<i32>,
    /// Replicas one model-serving endpoint may keep.
    pub max_session_count_per_model_session: Option<i32>,
    /// Accepted as Backend.AI's clients send it; bai has no SFTP sessions (ignored).
    pub max_concurrent_sftp_sessions: Option<i32>,
    /// Accepted as Backend.AI's clients send it; bai keeps no limit on pending sessions'
    /// resources (null only).
    pub max_pending_session_resource_slots: Option<JsonString>,
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
    /// Percent (0–100; 0 = no utilization rule).
    pub idle_utilization_pct: Option<i32>,
    /// Seconds.
    pub idle_utilization_secs: Option<BigInt>,
    pub allowed_vfolder_hosts: Option<JsonString>,
    pub max_vfolder_count: Option<i32>,
    pub max_vfolder_size: Option<BigInt>,
    pub max_customized_image_count: Option<i32>,
    /// Replicas one model-serving endpoint may keep.
    pub max_session_count_per_model_session: Option<i32>,
    /// Accepted as Backend.AI's clients send it; bai has no SFTP sessions (ignored).
    pub max_concurrent_sftp_sessions: Option<i32>,
    /// Accepted as Backend.AI's clients send it; null only.
    pub max_pending_session_resource_slots: Option<JsonString>,
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

impl From<ModifyKeyPairResourcePolicyInput> for PolicyChange {
    fn from(p: ModifyKeyPairResourcePolicyInput) -> Self {
        Self {
            default_for_unspecified: p.default_for_unspecified,
            total_resource_slots: p.total_resource_slots.map(|v| v.0),
            max_session_lifetime: p.max_session_lifetime.map(|v| v.0),
            max_concurrent_sessions: p.max_concurrent_sessions,
            max_containers_per_session: p.max_containers_per_session,
            max_pending_session_count: p.max_pending_session_count,
            idle_timeout: p.idle_timeout.map(|v| v.0),
            idle_utilization_pct: p.idle_utilization_pct,
            idle_utilization_secs: p.idle_utilization_secs.map(|v| v.0),
            allowed_vfolder_hosts: p.allowed_vfolder_hosts.map(|v| v.0),
            max_vfolder_count: p.max_vfolder_count,
            max_vfolder_size: p.max_vfolder_size.map(|v| v.0),
            max_customized_image_count: p.max_customized_image_count,
            max_session_count_per_model_session: p.max_session_count_per_model_session,
        }
    }
}

#[derive(Default)]
pub struct PolicyMutation;

/// A limit on pending sessions' resources is refused: bai keeps none (an empty one is fine).
fn no_pending_slot_limit(v: &Option<JsonString>) -> ApiResult<()> {
    match v {
        Some(j) if !(j.0.is_null() || j.0.as_object().is_some_and(|m| m.is_empty())) => {
            Err(ApiError::bad_request(
                "A limit on pending sessions' resources (max_pending_session_resource_slots) is not supported by this server; use max_pending_session_count",
            ))
        }
        _ => Ok(()),
    }
}

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl PolicyMutation {
    async fn create_keypair_resource_policy(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: CreateKeyPairResourcePolicyInput,
    ) -> crate::graphql::context::Result<CreateKeyPairResourcePolicy> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        no_pending_slot_limit(&props.max_pending_session_resource_slots)?;
        let change = PolicyChange {
            default_for_unspecified: None,
            total_resource_slots: Some(props.total_resource_slots.0),
            max_session_lifetime: props.max_session_lifetime.map(|v| v.0),
            max_concurrent_sessions: Some(props.max_concurrent_sessions),
            max_containers_per_session: Some(props.max_containers_per_session),
            max_pending_session_count: props.max_pending_session_count,
            idle_timeout: Some(props.idle_timeout.0),
            idle_utilization_pct: props.idle_utilization_pct,
            idle_utilization_secs: props.idle_utilization_secs.map(|v| v.0),
            allowed_vfolder_hosts: props.allowed_vfolder_hosts.map(|v| v.0),
            max_vfolder_count: props.max_vfolder_count,
            max_vfolder_size: props.max_vfolder_size.map(|v| v.0),
            max_customized_image_count: props.max_customized_image_count,
            max_session_count_per_model_session: props.max_session_count_per_model_session,
        };
        let p =
            crate::policies::create(state, &scope, &name, &props.default_for_unspecified, change)
                .await?;
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
    ) -> crate::graphql::context::Result<ModifyKeyPairResourcePolicy> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        no_pending_slot_limit(&props.max_pending_session_resource_slots)?;
        let p = crate::policies::modify(state, &scope, &name, props.into()).await?;
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
    ) -> crate::graphql::context::Result<DeleteKeyPairResourcePolicy> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::policies::delete(state, &scope, &name).await?;
        Ok(DeleteKeyPairResourcePolicy {
            ok: true,
            msg: "success".into(),
        })
    }
}
