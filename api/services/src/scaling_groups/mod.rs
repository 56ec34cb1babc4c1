//! Resource (scaling) groups: sets of agents with their own scheduler, made available to
//! domains, groups and keypairs.

use std::collections::BTreeSet;

use entity::enums::{AgentStatus, SchedulerKind, SessionStatus};
use entity::{
    agents, association_groups_users, domains, groups, keypairs, scaling_groups, sessions,
    sgroups_for_domains, sgroups_for_groups, sgroups_for_keypairs,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, ModelTrait,
    PaginatorTrait, QueryFilter, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{Caller, SuperadminScope};
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;

/// Names of the active resource groups a user may use: those associated with its domain,
/// with its groups (or only `group` when given) and with its keypair.
pub async fn allowed_for<C: ConnectionTrait>(
    db: &C,
    domain: &str,
    user: Uuid,
    group: Option<Uuid>,
    access_key: Option<&str>,
) -> ApiResult<Vec<String>> {
    let mut names = BTreeSet::new();
    for s in sgroups_for_domains::Entity::find()
        .filter(sgroups_for_domains::Column::Domain.eq(domain))
        .all(db)
        .await?
    {
        names.insert(s.scaling_group);
    }
    let group_ids: Vec<Uuid> = match group {
        Some(g) => vec![g],
        None => association_groups_users::Entity::find()
            .filter(association_groups_users::Column::UserId.eq(user))
            .all(db)
            .await?
            .into_iter()
            .map(|a| a.group_id)
            .collect(),
    };
    for s in sgroups_for_groups::Entity::find()
        .filter(sgroups_for_groups::Column::Group.is_in(group_ids))
        .all(db)
        .await?
    {
        names.insert(s.scaling_group);
    }
    if let Some(ak) = access_key {
        for s in sgroups_for_keypairs::Entity::find()
            .filter(sgroups_for_keypairs::Column::AccessKey.eq(ak))
            .all(db)
            .await?
        {
            names.insert(s.scaling_group);
        }
    }
    let active = scaling_groups::Entity::find()
        .filter(scaling_groups::Column::Name.is_in(names))
        .filter(scaling_groups::Column::IsActive.eq(true))
        .all(db)
        .await?;
    Ok(active.into_iter().map(|s| s.name).collect())
}

/// The names of the resource groups the caller may see: None for an admin (every one), else
/// those it may use ([`allowed_for`]).
async fn visible_names<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
) -> ApiResult<Option<Vec<String>>> {
    if caller.admin_scope().is_some() {
        return Ok(None);
    }
    Ok(Some(
        allowed_for(
            db,
            &caller.domain_name,
            caller.uuid,
            None,
            caller.access_key.as_deref(),
        )
        .await?,
    ))
}

/// Resource group `name` if the caller may see it: an admin any, anyone else one it may use
/// (NOT_FOUND otherwise).
pub async fn find_visible<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    name: &str,
) -> ApiResult<scaling_groups::Model> {
    if visible_names(db, caller)
        .await?
        .is_some_and(|v| !v.iter().any(|n| n == name))
    {
        return Err(ApiError::not_found("resource group", name));
    }
    crate::lookup::get::<scaling_groups::Entity>(db, "resource group", name.to_string()).await
}

/// The resource groups the caller may see, by name, narrowed to `name` and activity.
pub async fn visible<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    name: Option<String>,
    is_active: Option<bool>,
) -> ApiResult<Vec<scaling_groups::Model>> {
    use sea_orm::QueryOrder;
    let mut select = scaling_groups::Entity::find().order_by_asc(scaling_groups::Column::Name);
    if let Some(names) = visible_names(db, caller).await? {
        select = select.filter(scaling_groups::Column::Name.is_in(names));
    }
    if let Some(n) = name {
        select = select.filter(scaling_groups::Column::Name.eq(n));
    }
    if let Some(a) = is_active {
        select = select.filter(scaling_groups::Column::IsActive.eq(a));
    }
    Ok(select.all(db).await?)
}

/// The resource groups the caller may use from `project` (one it may see:
/// `groups::find_visible`), by name.
pub async fn usable_from<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    project: &groups::Model,
) -> ApiResult<Vec<scaling_groups::Model>> {
    use sea_orm::QueryOrder;
    let names = allowed_for(
        db,
        &project.domain_name,
        caller.uuid,
        Some(project.id),
        caller.access_key.as_deref(),
    )
    .await?;
    Ok(scaling_groups::Entity::find()
        .filter(scaling_groups::Column::Name.is_in(names))
        .order_by_asc(scaling_groups::Column::Name)
        .all(db)
        .await?)
}

const STRATEGIES: &[&str] = &["dispersed", "concentrated", "legacy"];
const SESSION_TYPES: &[&str] = &["interactive", "batch", "inference"];

/// `scheduler_opts`: `allowed_session_types`, `pending_timeout` (seconds),
/// `agent_selection_strategy`, `config`.
/// The scheduler of resource group `name` (`fifo`, `lifo`, `drf`); None: no such group.
pub async fn scheduler_of<C: ConnectionTrait>(db: &C, name: &str) -> ApiResult<Option<String>> {
    Ok(scaling_groups::Entity::find_by_id(name.to_string())
        .one(db)
        .await?
        .map(|g| g.scheduler.as_str().to_string()))
}

pub fn validate_scheduler_opts(v: &Value) -> ApiResult<Value> {
    let obj = v
        .as_object()
        .ok_or_else(|| ApiError::bad_request("scheduler_opts must be a JSON object"))?;
    for (k, val) in obj {
        let ok = match k.as_str() {
            "allowed_session_types" => val.as_array().is_some_and(|a| {
                a.iter()
                    .all(|t| t.as_str().is_some_and(|s| SESSION_TYPES.contains(&s)))
            }),
            "pending_timeout" => val.as_f64().is_some_and(|n| n >= 0.0),
            "agent_selection_strategy" => val.as_str().is_some_and(|s| STRATEGIES.contains(&s)),
            "config" | "num_retries_to_skip" => true,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unknown scheduler option '{k}' (allowed: allowed_session_types, pending_timeout, agent_selection_strategy, config)"
                )));
            }
        };
        if !ok {
            return Err(ApiError::bad_request(format!(
                "invalid value for scheduler option '{k}'"
            )));
        }
    }
    Ok(v.clone())
}

/// A resource group's driver name. bai, like Backend.AI's manager, runs every group as the
/// `static` driver does (a fixed set of agents); another name is kept as given, as Backend.AI
/// keeps it, and changes nothing (the book, docs/src/compatibility.md).
pub fn validate_driver(driver: &str) -> ApiResult<String> {
    crate::validate::object_name("resource group driver", driver)
}

fn parse_scheduler(s: &str) -> ApiResult<SchedulerKind> {
    SchedulerKind::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid scheduler '{s}' (one of: {})",
            SchedulerKind::choices()
        ))
    })
}

/// A change to a resource group as a surface read it; `None` keeps the value. The values are
/// checked here (driver, scheduler, `driver_opts` an object, `scheduler_opts`).
#[derive(Debug, Default, Clone)]
pub struct ScalingGroupChange {
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub is_public: Option<bool>,
    pub wsproxy_addr: Option<String>,
    pub driver: Option<String>,
    pub driver_opts: Option<Value>,
    pub scheduler: Option<String>,
    pub scheduler_opts: Option<Value>,
    pub use_host_network: Option<bool>,
}

fn apply(m: &mut scaling_groups::ActiveModel, c: ScalingGroupChange) -> ApiResult<()> {
    if let Some(v) = c.description {
        m.description = Set(Some(v));
    }
    if let Some(v) = c.is_active {
        m.is_active = Set(v);
    }
    if let Some(v) = c.is_public {
        m.is_public = Set(v);
    }
    if let Some(v) = c.wsproxy_addr {
        m.wsproxy_addr = Set(Some(v));
    }
    if let Some(v) = c.driver {
        m.driver = Set(validate_driver(&v)?);
    }
    if let Some(v) = c.driver_opts {
        if !v.is_object() {
            return Err(ApiError::bad_request("driver_opts must be a JSON object"));
        }
        m.driver_opts = Set(v);
    }
    if let Some(v) = c.scheduler {
        m.scheduler = Set(parse_scheduler(&v)?);
    }
    if let Some(v) = c.scheduler_opts {
        m.scheduler_opts = Set(validate_scheduler_opts(&v)?);
    }
    if let Some(v) = c.use_host_network {
        m.use_host_network = Set(v);
    }
    Ok(())
}

async fn existing(
    db: &sea_orm::DatabaseConnection,
    name: &str,
) -> ApiResult<scaling_groups::Model> {
    crate::lookup::get::<scaling_groups::Entity>(db, "resource group", name.to_string()).await
}

/// Creates resource group `name` (superadmins only) with `driver` and `scheduler`; `change`
/// sets the rest (its `driver` and `scheduler` are not read).
pub async fn create(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    driver: &str,
    scheduler: &str,
    change: ScalingGroupChange,
) -> ApiResult<scaling_groups::Model> {
    let name = crate::validate::object_name("resource group", name)?;
    if scaling_groups::Entity::find_by_id(name.clone())
        .one(store.db())
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "Resource group '{name}' already exists"
        )));
    }
    let mut m = scaling_groups::ActiveModel {
        name: Set(name),
        description: Set(None),
        is_active: Set(true),
        is_public: Set(true),
        created_at: Set(store.clock().now()),
        wsproxy_addr: Set(None),
        driver: Set(validate_driver(driver)?),
        driver_opts: Set(json!({})),
        scheduler: Set(parse_scheduler(scheduler)?),
        scheduler_opts: Set(json!({})),
        use_host_network: Set(false),
    };
    apply(
        &mut m,
        ScalingGroupChange {
            driver: None,
            scheduler: None,
            ..change
        },
    )?;
    let s = crate::audit::audited(
        store,
        scope.actor(),
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
    store.events().changed(
        ObjectKind::ScalingGroup,
        ChangeAction::Created,
        &s.name,
        None,
    );
    Ok(s)
}

/// Changes resource group `name` (superadmins only).
pub async fn modify(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    change: ScalingGroupChange,
) -> ApiResult<scaling_groups::Model> {
    let mut m = existing(store.db(), name).await?.into_active_model();
    apply(&mut m, change)?;
    let s = crate::audit::audited(
        store,
        scope.actor(),
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
    store.events().changed(
        ObjectKind::ScalingGroup,
        ChangeAction::Modified,
        &s.name,
        None,
    );
    Ok(s)
}

/// Deletes resource group `name` (superadmins only); refused while agents or live sessions
/// are in it.
pub async fn delete(store: &impl Store, scope: &SuperadminScope, name: &str) -> ApiResult<()> {
    let s = existing(store.db(), name).await?;
    let agents = agents::Entity::find()
        .filter(agents::Column::ScalingGroup.eq(name))
        .filter(agents::Column::Status.ne(AgentStatus::Terminated))
        .count(store.db())
        .await?;
    let live = sessions::Entity::find()
        .filter(sessions::Column::ScalingGroupName.eq(name))
        .filter(sessions::Column::Status.is_not_in([
            SessionStatus::Terminated,
            SessionStatus::Cancelled,
            SessionStatus::Error,
        ]))
        .count(store.db())
        .await?;
    if agents > 0 || live > 0 {
        return Err(ApiError::conflict(format!(
            "Resource group '{name}' still has {agents} agent(s) and {live} live session(s); deactivate it instead."
        )));
    }
    crate::audit::audited(
        store,
        scope.actor(),
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
    store
        .events()
        .changed(ObjectKind::ScalingGroup, ChangeAction::Deleted, name, None);
    Ok(())
}

/// What a resource group is made available to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Domain(String),
    Group(Uuid),
    Keypair(String),
}

/// Associates (`associate`) or disassociates resource group `scaling_group` with a domain,
/// group or keypair (superadmins only). Both sides must exist; associating twice or
/// disassociating what is not associated changes nothing but is still recorded.
pub async fn set_link(
    store: &impl Store,
    scope: &SuperadminScope,
    scaling_group: &str,
    link: Link,
    associate: bool,
) -> ApiResult<()> {
    existing(store.db(), scaling_group).await?;
    let db = store.db();
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
    let sgname = scaling_group.to_string();
    crate::audit::audited(store, scope.actor(), action, "scaling_group", move |txn| {
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
    store.events().changed(
        ObjectKind::ScalingGroup,
        ChangeAction::Modified,
        scaling_group,
        None,
    );
    Ok(())
}
