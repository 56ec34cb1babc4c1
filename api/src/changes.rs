//! Live change notifications for admin screens (our addition; Backend.AI's Graphene schema
//! has no subscriptions). Each event names the object; clients refetch what they show.
use async_graphql::{Context, SimpleObject, Subscription};
use futures_util::{Stream, StreamExt};

use crate::error::ApiResult;
use crate::events::{ChangeAction, Event, ObjectKind};
use crate::graphql::context::authed;

#[derive(SimpleObject, Clone)]
#[graphql(rename_fields = "snake_case")]
pub struct ChangeEvent {
    pub kind: ObjectKind,
    pub action: ChangeAction,
    /// Name, hostname, email or id of the object.
    pub key: String,
}

/// Who may hear about a change: anyone logged in, or only admins of the change's domain.
enum Audience {
    LoggedIn,
    Admins(crate::auth::AdminScope),
}

fn changes(
    ctx: &Context<'_>,
    kind: ObjectKind,
    superadmin_only: bool,
    admins_only: bool,
) -> ApiResult<impl Stream<Item = ChangeEvent> + use<>> {
    let (state, caller) = authed(ctx)?;
    if superadmin_only {
        caller.require_superadmin()?;
    }
    let audience = if admins_only {
        Audience::Admins(caller.require_admin()?)
    } else {
        Audience::LoggedIn
    };
    let (state, caller) = (state.clone(), caller.clone());
    Ok(state.shared.events.stream().filter_map(move |ev| {
        let (state, caller) = (state.clone(), caller.clone());
        let scope = match &audience {
            Audience::LoggedIn => None,
            Audience::Admins(s) => Some(s.clone()),
        };
        async move {
            let Event::Changed(c) = &*ev else {
                return None;
            };
            if c.kind != kind {
                return None;
            }
            if let Some(scope) = scope {
                if !c.domain.as_deref().is_none_or(|d| scope.covers_domain(d)) {
                    return None;
                }
                // Accounts and keypairs follow role order: a domain admin hears only of its
                // own and of lower-ranked users' (a deleted one can no longer be checked).
                if !caller.is_superadmin()
                    && matches!(kind, ObjectKind::User | ObjectKind::Keypair)
                    && !governed(&state, &caller, kind, &c.key).await
                {
                    return None;
                }
            }
            Some(ChangeEvent {
                kind: c.kind,
                action: c.action,
                key: c.key.clone(),
            })
        }
    }))
}

/// Whether the user (by email) or keypair (by access key) `key` is governed by `caller`.
async fn governed(
    state: &crate::state::AppState,
    caller: &crate::auth::Caller,
    kind: ObjectKind,
    key: &str,
) -> bool {
    // Each is NOT_FOUND for a stranger's account or keypair (and one that is gone).
    match kind {
        ObjectKind::User => crate::auth::visibility::user(&state.read, caller, key)
            .await
            .is_ok(),
        _ => crate::auth::visibility::keypair(&state.read, caller, key)
            .await
            .is_ok(),
    }
}

#[derive(Default)]
pub struct ChangeSubscription;

#[Subscription(rename_fields = "snake_case")]
impl ChangeSubscription {
    async fn resource_preset_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::ResourcePreset, false, false)?)
    }
    async fn container_registry_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::ContainerRegistry, true, true)?)
    }
    async fn image_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::Image, false, false)?)
    }
    async fn scaling_group_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::ScalingGroup, false, false)?)
    }
    /// Users of the admin's scope (domain admins: their domain).
    async fn user_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::User, false, true)?)
    }
    async fn keypair_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::Keypair, false, true)?)
    }
    async fn keypair_resource_policy_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(
            ctx,
            ObjectKind::KeypairResourcePolicy,
            false,
            true,
        )?)
    }
    /// Agents (status, occupied slots); administrators.
    async fn agent_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::Agent, false, true)?)
    }
    /// A batch of usage samples was written (Statistics): charts refetch. Anyone logged in
    /// (the event names a time, nothing else).
    async fn usage_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::Usage, false, false)?)
    }
    async fn system_setting_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::SystemSetting, false, true)?)
    }
}
