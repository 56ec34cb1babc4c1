//! GraphQL for resource groups: `scaling_group(s)`, create/modify/delete, and the
//! associations with domains, groups and keypairs.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::{AgentStatus, SchedulerKind, SessionStatus};
use entity::{
    agents, domains, groups, keypairs, scaling_groups as sg, sessions, sgroups_for_domains,
    sgroups_for_groups, sgroups_for_keypairs,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, ModelTrait, PaginatorTrait,
    QueryFilter, QueryOrder, Set,
};
use serde_json::json;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::graphql::{JsonString, authed, state};

pub struct ScalingGroup(pub sg::Model);

#[Object(rename_fields = "snake_case")]
impl ScalingGroup {
    async fn name(&self) -> &str {
        &self.0.name
    }
    async fn description(&self) -> Option<&str> {
        self.0.description.as_deref()
    }
    async fn is_active(&self) -> bool {
        self.0.is_active
    }
    async fn is_public(&self) -> bool {
        self.0.is_public
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn wsproxy_addr(&self) -> Option<&str> {
        self.0.wsproxy_addr.as_deref()
    }
    async fn driver(&self) -> &str {
        &self.0.driver
    }
    async fn driver_opts(&self) -> JsonString {
        JsonString(self.0.driver_opts.clone())
    }
    /// fifo, lifo or drf.
    async fn scheduler(&self) -> &str {
        self.0.scheduler.as_str()
    }
    async fn scheduler_opts(&self) -> JsonString {
        JsonString(self.0.scheduler_opts.clone())
    }
    async fn use_host_network(&self) -> bool {
        self.0.use_host_network
    }
    /// Number of agents in this resource group with the given status (default ALIVE).
    async fn agent_count_by_status(
        &self,
        ctx: &Context<'_>,
        status: Option<String>,
    ) -> async_graphql::Result<u64> {
        let state = state(ctx)?;
        let status = match status {
            Some(s) => AgentStatus::parse(&s).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "invalid agent status '{s}' (one of: {})",
                    AgentStatus::choices()
                ))
            })?,
            None => AgentStatus::Alive,
        };
        Ok(agents::Entity::find()
            .filter(agents::Column::ScalingGroup.eq(&self.0.name))
            .filter(agents::Column::Status.eq(status))
            .count(&state.db)
            .await
            .map_err(ApiError::from)?)
    }
}

async fn visible_names(
    db: &sea_orm::DatabaseConnection,
    caller: &Caller,
) -> ApiResult<Option<Vec<String>>> {
    if caller.admin_scope().is_some() {
        return Ok(None);
    }
    Ok(Some(
        crate::scaling_groups::allowed_for(
            db,
            &caller.domain_name,
            caller.uuid,
            None,
            caller.access_key.as_deref(),
        )
        .await?,
    ))
}

#[derive(Default)]
pub struct ScalingGroupQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ScalingGroupQuery {
    /// A resource group by name (users see only the ones they may use).
    async fn scaling_group(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> async_graphql::Result<ScalingGroup> {
        let (state, caller) = authed(ctx)?;
        if visible_names(&state.db, caller)
            .await?
            .is_some_and(|v| !v.contains(&name))
        {
            return Err(ApiError::not_found("resource group", &name).into());
        }
        let s = crate::lookup::get::<sg::Entity>(&state.db, "resource group", name.clone()).await?;
        Ok(ScalingGroup(s))
    }

    async fn scaling_groups(
        &self,
        ctx: &Context<'_>,
        name: Option<String>,
        is_active: Option<bool>,
    ) -> async_graphql::Result<Vec<ScalingGroup>> {
        let (state, caller) = authed(ctx)?;
        let mut select = sg::Entity::find().order_by_asc(sg::Column::Name);
        if let Some(names) = visible_names(&state.db, caller).await? {
            select = select.filter(sg::Column::Name.is_in(names));
        }
        if let Some(n) = name {
            select = select.filter(sg::Column::Name.eq(n));
        }
        if let Some(a) = is_active {
            select = select.filter(sg::Column::IsActive.eq(a));
        }
        Ok(select
            .all(&state.db)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .map(ScalingGroup)
            .collect())
    }

    /// Active resource groups usable from a group (project), for the launch dialog.
    async fn scaling_groups_for_user_group(
        &self,
        ctx: &Context<'_>,
        user_group: Uuid,
    ) -> async_graphql::Result<Vec<ScalingGroup>> {
        let (state, caller) = authed(ctx)?;
        let g = crate::groups::find_visible(&state.db, caller, user_group).await?;
        let names = crate::scaling_groups::allowed_for(
            &state.db,
            &g.domain_name,
            caller.uuid,
            Some(g.id),
            caller.access_key.as_deref(),
        )
        .await?;
        let rows = sg::Entity::find()
            .filter(sg::Column::Name.is_in(names))
            .order_by_asc(sg::Column::Name)
            .all(&state.db)
            .await
            .map_err(ApiError::from)?;
        Ok(rows.into_iter().map(ScalingGroup).collect())
    }
}

fn parse_scheduler(s: &str) -> ApiResult<SchedulerKind> {
    SchedulerKind::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid scheduler '{s}' (one of: {})",
            SchedulerKind::choices()
        ))
    })
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ScalingGroupInput {
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub is_public: Option<bool>,
    pub wsproxy_addr: Option<String>,
    pub driver: String,
    pub driver_opts: Option<JsonString>,
    pub scheduler: String,
    pub scheduler_opts: Option<JsonString>,
    pub use_host_network: Option<bool>,
}

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyScalingGroupInput {
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub is_public: Option<bool>,
    pub wsproxy_addr: Option<String>,
    pub driver: Option<String>,
    pub driver_opts: Option<JsonString>,
    pub scheduler: Option<String>,
    pub scheduler_opts: Option<JsonString>,
    pub use_host_network: Option<bool>,
}

fn apply(m: &mut sg::ActiveModel, p: ModifyScalingGroupInput) -> ApiResult<()> {
    if let Some(v) = p.description {
        m.description = Set(Some(v));
    }
    if let Some(v) = p.is_active {
        m.is_active = Set(v);
    }
    if let Some(v) = p.is_public {
        m.is_public = Set(v);
    }
    if let Some(v) = p.wsproxy_addr {
        m.wsproxy_addr = Set(Some(v));
    }
    if let Some(v) = p.driver {
        m.driver = Set(crate::scaling_groups::validate_driver(&v)?);
    }
    if let Some(v) = p.driver_opts {
        if !v.0.is_object() {
            return Err(ApiError::bad_request("driver_opts must be a JSON object"));
        }
        m.driver_opts = Set(v.0);
    }
    if let Some(v) = p.scheduler {
        m.scheduler = Set(parse_scheduler(&v)?);
    }
    if let Some(v) = p.scheduler_opts {
        m.scheduler_opts = Set(crate::scaling_groups::validate_scheduler_opts(&v.0)?);
    }
    if let Some(v) = p.use_host_network {
        m.use_host_network = Set(v);
    }
    Ok(())
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ScalingGroupResult {
    pub ok: bool,
    pub msg: String,
    pub scaling_group: Option<ScalingGroup>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct AssociationResult {
    pub ok: bool,
    pub msg: String,
}

async fn existing(db: &sea_orm::DatabaseConnection, name: &str) -> ApiResult<sg::Model> {
    crate::lookup::get::<sg::Entity>(db, "resource group", name.to_string()).await
}

/// One association kind: which table, how to name the other side.
enum Link {
    Domain(String),
    Group(Uuid),
    Keypair(String),
}

async fn set_link(
    ctx: &Context<'_>,
    scaling_group: String,
    link: Link,
    associate: bool,
) -> async_graphql::Result<AssociationResult> {
    let (state, caller) = authed(ctx)?;
    caller.require_superadmin()?;
    existing(&state.db, &scaling_group).await?;
    let db = &state.db;
    let target = match &link {
        Link::Domain(d) => {
            crate::lookup::get::<domains::Entity>(db, "domain", d.clone()).await?;
            format!("domain:{d}")
        }
        Link::Group(g) => {
            crate::lookup::get::<groups::Entity>(db, "group", *g).await?;
            format!("group:{g}")
        }
        Link::Keypair(k) => {
            crate::lookup::get::<keypairs::Entity>(db, "keypair", k.clone()).await?;
            format!("keypair:{k}")
        }
    };
    let action = if associate {
        "associate_scaling_group"
    } else {
        "disassociate_scaling_group"
    };
    let sgname = scaling_group.clone();
    crate::audit::audited(db, &caller.email, action, "scaling_group", move |txn| {
        Box::pin(async move {
            match (link, associate) {
                (Link::Domain(d), true) => {
                    let found =
                        sgroups_for_domains::Entity::find_by_id((sgname.clone(), d.clone()))
                            .one(txn)
                            .await?;
                    if found.is_none() {
                        sgroups_for_domains::ActiveModel {
                            scaling_group: Set(sgname.clone()),
                            domain: Set(d),
                        }
                        .insert(txn)
                        .await?;
                    }
                }
                (Link::Domain(d), false) => {
                    sgroups_for_domains::Entity::delete_by_id((sgname.clone(), d))
                        .exec(txn)
                        .await?;
                }
                (Link::Group(g), true) => {
                    let found = sgroups_for_groups::Entity::find_by_id((sgname.clone(), g))
                        .one(txn)
                        .await?;
                    if found.is_none() {
                        sgroups_for_groups::ActiveModel {
                            scaling_group: Set(sgname.clone()),
                            group: Set(g),
                        }
                        .insert(txn)
                        .await?;
                    }
                }
                (Link::Group(g), false) => {
                    sgroups_for_groups::Entity::delete_by_id((sgname.clone(), g))
                        .exec(txn)
                        .await?;
                }
                (Link::Keypair(k), true) => {
                    let found =
                        sgroups_for_keypairs::Entity::find_by_id((sgname.clone(), k.clone()))
                            .one(txn)
                            .await?;
                    if found.is_none() {
                        sgroups_for_keypairs::ActiveModel {
                            scaling_group: Set(sgname.clone()),
                            access_key: Set(k),
                        }
                        .insert(txn)
                        .await?;
                    }
                }
                (Link::Keypair(k), false) => {
                    sgroups_for_keypairs::Entity::delete_by_id((sgname.clone(), k))
                        .exec(txn)
                        .await?;
                }
            }
            Ok(((), sgname, json!({ "with": target })))
        })
    })
    .await?;
    state.events.changed(
        ObjectKind::ScalingGroup,
        ChangeAction::Modified,
        &scaling_group,
        None,
    );
    Ok(AssociationResult {
        ok: true,
        msg: "success".into(),
    })
}

#[derive(Default)]
pub struct ScalingGroupMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ScalingGroupMutation {
    async fn create_scaling_group(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: ScalingGroupInput,
    ) -> async_graphql::Result<ScalingGroupResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let name = crate::validate::object_name("resource group", &name)?;
        if sg::Entity::find_by_id(name.clone())
            .one(&state.db)
            .await
            .map_err(ApiError::from)?
            .is_some()
        {
            return Err(
                ApiError::conflict(format!("Resource group '{name}' already exists")).into(),
            );
        }
        let mut m = sg::ActiveModel {
            name: Set(name),
            description: Set(None),
            is_active: Set(true),
            is_public: Set(true),
            created_at: Set(state.clock.now()),
            wsproxy_addr: Set(None),
            driver: Set(crate::scaling_groups::validate_driver(&props.driver)?),
            driver_opts: Set(json!({})),
            scheduler: Set(parse_scheduler(&props.scheduler)?),
            scheduler_opts: Set(json!({})),
            use_host_network: Set(false),
        };
        apply(
            &mut m,
            ModifyScalingGroupInput {
                description: props.description,
                is_active: props.is_active,
                is_public: props.is_public,
                wsproxy_addr: props.wsproxy_addr,
                driver: None,
                driver_opts: props.driver_opts,
                scheduler: None,
                scheduler_opts: props.scheduler_opts,
                use_host_network: props.use_host_network,
            },
        )?;
        let s = crate::audit::audited(
            &state.db,
            &caller.email,
            "create_scaling_group",
            "scaling_group",
            move |txn| {
                Box::pin(async move {
                    let s = m.insert(txn).await?;
                    let key = s.name.clone();
                    Ok((s, key, json!({})))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::ScalingGroup,
            ChangeAction::Created,
            &s.name,
            None,
        );
        Ok(ScalingGroupResult {
            ok: true,
            msg: "success".into(),
            scaling_group: Some(ScalingGroup(s)),
        })
    }

    async fn modify_scaling_group(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: ModifyScalingGroupInput,
    ) -> async_graphql::Result<ScalingGroupResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let mut m = existing(&state.db, &name).await?.into_active_model();
        apply(&mut m, props)?;
        let s = crate::audit::audited(
            &state.db,
            &caller.email,
            "modify_scaling_group",
            "scaling_group",
            move |txn| {
                Box::pin(async move {
                    let s = m.update(txn).await?;
                    let key = s.name.clone();
                    Ok((s, key, json!({})))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::ScalingGroup,
            ChangeAction::Modified,
            &s.name,
            None,
        );
        Ok(ScalingGroupResult {
            ok: true,
            msg: "success".into(),
            scaling_group: Some(ScalingGroup(s)),
        })
    }

    /// Deletes a resource group; refused while agents or live sessions are in it.
    async fn delete_scaling_group(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> async_graphql::Result<AssociationResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let s = existing(&state.db, &name).await?;
        let agents = agents::Entity::find()
            .filter(agents::Column::ScalingGroup.eq(&name))
            .filter(agents::Column::Status.ne(AgentStatus::Terminated))
            .count(&state.db)
            .await
            .map_err(ApiError::from)?;
        let live = sessions::Entity::find()
            .filter(sessions::Column::ScalingGroupName.eq(&name))
            .filter(sessions::Column::Status.is_not_in([
                SessionStatus::Terminated,
                SessionStatus::Cancelled,
                SessionStatus::Error,
            ]))
            .count(&state.db)
            .await
            .map_err(ApiError::from)?;
        if agents > 0 || live > 0 {
            return Err(ApiError::conflict(format!(
                "Resource group '{name}' still has {agents} agent(s) and {live} live session(s); deactivate it instead."
            ))
            .into());
        }
        crate::audit::audited(
            &state.db,
            &caller.email,
            "delete_scaling_group",
            "scaling_group",
            move |txn| {
                Box::pin(async move {
                    let key = s.name.clone();
                    s.delete(txn).await?;
                    Ok(((), key, json!({})))
                })
            },
        )
        .await?;
        state
            .events
            .changed(ObjectKind::ScalingGroup, ChangeAction::Deleted, &name, None);
        Ok(AssociationResult {
            ok: true,
            msg: "success".into(),
        })
    }

    async fn associate_scaling_group_with_domain(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        domain: String,
    ) -> async_graphql::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Domain(domain), true).await
    }
    async fn disassociate_scaling_group_with_domain(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        domain: String,
    ) -> async_graphql::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Domain(domain), false).await
    }
    async fn associate_scaling_group_with_user_group(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        user_group: Uuid,
    ) -> async_graphql::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Group(user_group), true).await
    }
    async fn disassociate_scaling_group_with_user_group(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        user_group: Uuid,
    ) -> async_graphql::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Group(user_group), false).await
    }
    async fn associate_scaling_group_with_keypair(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        access_key: String,
    ) -> async_graphql::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Keypair(access_key), true).await
    }
    async fn disassociate_scaling_group_with_keypair(
        &self,
        ctx: &Context<'_>,
        scaling_group: String,
        access_key: String,
    ) -> async_graphql::Result<AssociationResult> {
        set_link(ctx, scaling_group, Link::Keypair(access_key), false).await
    }
}
