//! Live change notifications for admin screens (our addition; Backend.AI's Graphene schema
//! has no subscriptions). Each event names the object; clients refetch what they show.
use async_graphql::{Context, SimpleObject, Subscription};
use futures_util::{Stream, StreamExt};

use crate::error::ApiResult;
use crate::events::{ChangeAction, Event, ObjectKind};
use crate::graphql::authed;

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
    Ok(state.events.stream().filter_map(move |ev| {
        let out = match &*ev {
            Event::Changed(c) if c.kind == kind => {
                let visible = match &audience {
                    Audience::LoggedIn => true,
                    Audience::Admins(scope) => {
                        c.domain.as_deref().is_none_or(|d| scope.covers_domain(d))
                    }
                };
                visible.then(|| ChangeEvent {
                    kind: c.kind,
                    action: c.action,
                    key: c.key.clone(),
                })
            }
            _ => None,
        };
        std::future::ready(out)
    }))
}

#[derive(Default)]
pub struct ChangeSubscription;

#[Subscription(rename_fields = "snake_case")]
impl ChangeSubscription {
    async fn resource_preset_changes(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::ResourcePreset, false, false)?)
    }
    async fn container_registry_changes(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::ContainerRegistry, true, true)?)
    }
    async fn image_changes(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::Image, false, false)?)
    }
    async fn scaling_group_changes(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::ScalingGroup, false, false)?)
    }
    /// Users of the admin's scope (domain admins: their domain).
    async fn user_changes(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::User, false, true)?)
    }
    async fn keypair_changes(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::Keypair, false, true)?)
    }
    async fn keypair_resource_policy_changes(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = ChangeEvent>> {
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
    ) -> async_graphql::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::Agent, false, true)?)
    }
    async fn system_setting_changes(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = ChangeEvent>> {
        Ok(changes(ctx, ObjectKind::SystemSetting, false, true)?)
    }
}
