//! Groups (projects): sessions belong to one, users belong to several within their domain.

use entity::enums::{GroupType, UserRole};
use entity::{association_groups_users, domains, groups, users};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{AdminScope, Caller};
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;

pub async fn is_member<C: ConnectionTrait>(db: &C, user: Uuid, group: Uuid) -> ApiResult<bool> {
    Ok(association_groups_users::Entity::find()
        .filter(association_groups_users::Column::UserId.eq(user))
        .filter(association_groups_users::Column::GroupId.eq(group))
        .one(db)
        .await?
        .is_some())
}

/// The group if the caller may see it: a member, or an admin of its domain.
pub async fn find_visible<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<groups::Model> {
    let g = crate::lookup::get::<groups::Entity>(db, "group", id).await?;
    let admin = caller
        .admin_scope()
        .is_some_and(|s| s.covers_domain(&g.domain_name));
    if admin || is_member(db, caller.uuid, id).await? {
        Ok(g)
    } else {
        Err(ApiError::not_found("group", id))
    }
}

/// A group type by name (BAD_REQUEST naming the choices otherwise).
pub fn parse_type(s: &str) -> ApiResult<GroupType> {
    // Backend.AI's clients spell them GENERAL and MODEL_STORE.
    GroupType::parse(&s.replace('_', "-")).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid group type '{s}' (one of: {})",
            GroupType::choices()
        ))
    })
}

/// A new group as a surface read it. The JSON values and the type name are checked here
/// (`policies::parse_limits`, `normalize_allowed_hosts`, `parse_type`).
#[derive(Debug, Clone)]
pub struct NewGroup {
    pub domain_name: String,
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub total_resource_slots: Option<Value>,
    pub allowed_vfolder_hosts: Option<Value>,
    pub integration_id: Option<String>,
    pub group_type: Option<String>,
}

/// A change to a group as a surface read it; `None` keeps the value. `user_update_mode`
/// (`add` or `remove`) and `user_uuids` go together and change the members.
#[derive(Debug, Default, Clone)]
pub struct GroupChange {
    pub name: Option<String>,
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub total_resource_slots: Option<Value>,
    pub allowed_vfolder_hosts: Option<Value>,
    pub integration_id: Option<String>,
    pub user_update_mode: Option<String>,
    pub user_uuids: Option<Vec<Uuid>>,
}

/// Creates group `name` in a domain the scope covers (NOT_FOUND for another domain), with
/// its audit record by `actor`, and announces it.
pub async fn create(
    store: &impl Store,
    scope: &AdminScope,
    actor: &str,
    name: &str,
    props: NewGroup,
) -> ApiResult<groups::Model> {
    if !scope.covers_domain(&props.domain_name) {
        return Err(ApiError::not_found("domain", &props.domain_name));
    }
    if domains::Entity::find_by_id(props.domain_name.clone())
        .one(store.db())
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("domain", &props.domain_name));
    }
    let name = crate::validate::object_name("group", name)?;
    let taken = groups::Entity::find()
        .filter(groups::Column::DomainName.eq(&props.domain_name))
        .filter(groups::Column::Name.eq(&name))
        .one(store.db())
        .await?;
    if taken.is_some() {
        return Err(ApiError::conflict(format!(
            "Group '{name}' already exists in domain '{}'",
            props.domain_name
        )));
    }
    let now = store.clock().now();
    let m = groups::ActiveModel {
        id: Set(Uuid::new_v4()),
        name: Set(name),
        description: Set(props.description),
        is_active: Set(props.is_active.unwrap_or(true)),
        created_at: Set(now),
        modified_at: Set(now),
        domain_name: Set(props.domain_name),
        total_resource_slots: Set(props
            .total_resource_slots
            .map(|v| crate::policies::parse_limits(&v))
            .transpose()?
            .unwrap_or_default()),
        allowed_vfolder_hosts: Set(props
            .allowed_vfolder_hosts
            .map(|v| crate::policies::normalize_allowed_hosts(&v))
            .transpose()?
            .unwrap_or_else(|| json!({}))),
        integration_id: Set(props.integration_id),
        dotfiles: Set(None),
        group_type: Set(props
            .group_type
            .as_deref()
            .map(parse_type)
            .transpose()?
            .unwrap_or(GroupType::General)),
    };
    let g = crate::audit::audited(store, actor, "create_group", "group", move |txn| {
        Box::pin(async move {
            let g = m.insert(txn).await?;
            let key = g.id.to_string();
            Ok((g, key, json!({})))
        })
    })
    .await?;
    store.events().changed(
        ObjectKind::Group,
        ChangeAction::Created,
        g.id.to_string(),
        Some(g.domain_name.clone()),
    );
    Ok(g)
}

/// Modifies group `gid` (in a domain the scope covers; NOT_FOUND otherwise) and, with
/// `user_update_mode`, its members (users of the group's domain), with its audit record by
/// `actor`, and announces it.
pub async fn modify(
    store: &impl Store,
    scope: &AdminScope,
    actor: &str,
    gid: Uuid,
    props: GroupChange,
) -> ApiResult<groups::Model> {
    let existing = groups::Entity::find_by_id(gid)
        .one(store.db())
        .await?
        .filter(|g| scope.covers_domain(&g.domain_name))
        .ok_or_else(|| ApiError::not_found("group", gid))?;
    let domain = existing.domain_name.clone();
    let mode = match (props.user_update_mode.as_deref(), &props.user_uuids) {
        (None, None) => None,
        (Some(m @ ("add" | "remove")), Some(_)) => Some(m.to_string()),
        (Some(other), Some(_)) => {
            return Err(ApiError::bad_request(format!(
                "user_update_mode must be 'add' or 'remove', not '{other}'"
            )));
        }
        _ => {
            return Err(ApiError::bad_request(
                "user_update_mode and user_uuids go together",
            ));
        }
    };
    let new_name = props
        .name
        .as_deref()
        .map(|n| crate::validate::object_name("group", n))
        .transpose()?;
    if let Some(n) = &new_name {
        let taken = groups::Entity::find()
            .filter(groups::Column::DomainName.eq(&domain))
            .filter(groups::Column::Name.eq(n))
            .filter(groups::Column::Id.ne(gid))
            .one(store.db())
            .await?;
        if taken.is_some() {
            return Err(ApiError::conflict(format!(
                "Group '{n}' already exists in domain '{domain}'"
            )));
        }
    }
    let mut m = existing.into_active_model();
    if let Some(v) = new_name {
        m.name = Set(v);
    }
    if let Some(v) = props.description {
        m.description = Set(Some(v));
    }
    if let Some(v) = props.is_active {
        m.is_active = Set(v);
    }
    if let Some(v) = props.total_resource_slots {
        m.total_resource_slots = Set(crate::policies::parse_limits(&v)?);
    }
    if let Some(v) = props.allowed_vfolder_hosts {
        m.allowed_vfolder_hosts = Set(crate::policies::normalize_allowed_hosts(&v)?);
    }
    if let Some(v) = props.integration_id {
        m.integration_id = Set(Some(v));
    }
    m.modified_at = Set(store.clock().now());
    let user_uuids = props.user_uuids.unwrap_or_default();
    let (by_superadmin, actor_email) = (matches!(scope, AdminScope::Super), actor.to_string());
    let g = crate::audit::audited(store, actor, "modify_group", "group", move |txn| {
        Box::pin(async move {
            let g = m.update(txn).await?;
            if let Some(mode) = &mode {
                for u in &user_uuids {
                    // In the project's domain, and (a domain admin) one it governs: itself or
                    // a user ranked below admin. Anyone else reads as not found.
                    let user = users::Entity::find_by_id(*u).one(txn).await?;
                    let governed = |x: &users::Model| {
                        by_superadmin
                            || x.email == actor_email
                            || crate::auth::caller::rank(x.role)
                                < crate::auth::caller::rank(UserRole::Admin)
                    };
                    if user.is_none_or(|x| x.domain_name != domain || !governed(&x)) {
                        return Err(ApiError::not_found("user", u));
                    }
                    let member = is_member(txn, *u, gid).await?;
                    if mode == "add" && !member {
                        association_groups_users::ActiveModel {
                            user_id: Set(*u),
                            group_id: Set(gid),
                        }
                        .insert(txn)
                        .await?;
                    } else if mode == "remove" && member {
                        association_groups_users::Entity::delete_many()
                            .filter(association_groups_users::Column::UserId.eq(*u))
                            .filter(association_groups_users::Column::GroupId.eq(gid))
                            .exec(txn)
                            .await?;
                    }
                }
            }
            let key = g.id.to_string();
            Ok((
                g,
                key,
                json!({"user_update_mode": mode, "users": user_uuids}),
            ))
        })
    })
    .await?;
    store.events().changed(
        ObjectKind::Group,
        ChangeAction::Modified,
        g.id.to_string(),
        Some(g.domain_name.clone()),
    );
    Ok(g)
}

/// The groups `user` belongs to, as a query (callers add their order).
pub fn of_user(user: Uuid) -> sea_orm::Select<groups::Entity> {
    use sea_orm::sea_query::{Expr, Query as SqlQuery};
    groups::Entity::find().filter(
        groups::Column::Id.in_subquery(
            SqlQuery::select()
                .column(association_groups_users::Column::GroupId)
                .from(association_groups_users::Entity)
                .and_where(Expr::col(association_groups_users::Column::UserId).eq(user))
                .to_owned(),
        ),
    )
}

/// The names of the resource groups associated with group `id`.
pub async fn scaling_groups<C: ConnectionTrait>(db: &C, id: Uuid) -> ApiResult<Vec<String>> {
    Ok(entity::sgroups_for_groups::Entity::find()
        .filter(entity::sgroups_for_groups::Column::Group.eq(id))
        .all(db)
        .await?
        .into_iter()
        .map(|s| s.scaling_group)
        .collect())
}

/// The groups the caller may list, by name: an admin those of its scope, a user those it
/// belongs to; narrowed to `domain_name`, activity and the types named (BAD_REQUEST for an
/// unknown type).
pub async fn list<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    domain_name: Option<String>,
    is_active: Option<bool>,
    types: Option<Vec<String>>,
) -> ApiResult<Vec<groups::Model>> {
    use sea_orm::QueryOrder;
    let mut select = groups::Entity::find().order_by_asc(groups::Column::Name);
    match caller.admin_scope() {
        Some(scope) => {
            if let Some(d) = scope.domain() {
                select = select.filter(groups::Column::DomainName.eq(d));
            }
        }
        None => {
            select = select.filter(
                groups::Column::Id.in_subquery(
                    sea_orm::sea_query::Query::select()
                        .column(association_groups_users::Column::GroupId)
                        .from(association_groups_users::Entity)
                        .and_where(
                            sea_orm::sea_query::Expr::col(association_groups_users::Column::UserId)
                                .eq(caller.uuid),
                        )
                        .to_owned(),
                ),
            )
        }
    }
    if let Some(d) = domain_name {
        select = select.filter(groups::Column::DomainName.eq(d));
    }
    if let Some(a) = is_active {
        select = select.filter(groups::Column::IsActive.eq(a));
    }
    if let Some(types) = types {
        let parsed = types
            .iter()
            .map(|t| parse_type(t))
            .collect::<ApiResult<Vec<_>>>()?;
        select = select.filter(groups::Column::GroupType.is_in(parsed));
    }
    Ok(select.all(db).await?)
}

/// The names of these projects (those that exist), in one query: a list's rows ask for
/// theirs together (GraphQL's batched loader). At most as many as `ids`.
pub async fn names_of<C: ConnectionTrait>(
    db: &C,
    ids: &[Uuid],
) -> ApiResult<std::collections::HashMap<Uuid, String>> {
    Ok(groups::Entity::find()
        .filter(groups::Column::Id.is_in(ids.iter().copied()))
        .all(db)
        .await?
        .into_iter()
        .map(|g| (g.id, g.name))
        .collect())
}

/// The group `id`, without a visibility check (NOT_FOUND when there is none).
pub async fn by_id<C: ConnectionTrait>(db: &C, id: Uuid) -> ApiResult<groups::Model> {
    crate::lookup::get::<groups::Entity>(db, "group", id).await
}

/// The group named `default` of `domain` (NOT_FOUND when there is none).
pub async fn default_of<C: ConnectionTrait>(db: &C, domain: &str) -> ApiResult<groups::Model> {
    groups::Entity::find()
        .filter(groups::Column::DomainName.eq(domain))
        .filter(groups::Column::Name.eq("default"))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found("group", "default"))
}

/// Purges group `gid` (Backend.AI's `purge_group`; in a domain the scope covers, NOT_FOUND
/// otherwise): the group, its members' and resource groups' associations, its templates and
/// its ended sessions (with their containers' records), with its audit record by `actor`. A
/// domain's `default` project stays; a group with live sessions is refused until they end
/// (as Backend.AI refuses it), and one that still has folders until they are deleted —
/// Backend.AI deletes their data with the group; bai never deletes folders on the side.
pub async fn purge(
    store: &impl Store,
    scope: &AdminScope,
    actor: &str,
    gid: Uuid,
) -> ApiResult<()> {
    use entity::enums::SessionStatus;
    use sea_orm::PaginatorTrait;
    use sea_orm::sea_query::{Expr, Query as SqlQuery};
    let g = groups::Entity::find_by_id(gid)
        .one(store.db())
        .await?
        .filter(|g| scope.covers_domain(&g.domain_name))
        .ok_or_else(|| ApiError::not_found("group", gid))?;
    if g.name == "default" {
        return Err(ApiError::bad_request(format!(
            "The default project of domain '{}' cannot be purged",
            g.domain_name
        )));
    }
    // Backend.AI's `ProjectHasActiveEndpointsError`: endpoints go through their own deletion.
    let endpoints = entity::endpoints::Entity::find()
        .filter(entity::endpoints::Column::Project.eq(gid))
        .filter(entity::endpoints::Column::LifecycleStage.ne("destroyed"))
        .count(store.db())
        .await?;
    if endpoints > 0 {
        return Err(ApiError::conflict(format!(
            "Project has active endpoints. ('{}' has {endpoints} model services that are not destroyed: delete them first)",
            g.name
        ))
        .with_error_code("group_purge_conflict"));
    }
    let live = entity::sessions::Entity::find()
        .filter(entity::sessions::Column::GroupId.eq(gid))
        .filter(entity::sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
        .count(store.db())
        .await?;
    if live > 0 {
        return Err(ApiError::bad_request(format!(
            "Project '{}' has {live} active sessions: terminate them first to purge it",
            g.name
        )));
    }
    let folders = entity::vfolders::Entity::find()
        .filter(entity::vfolders::Column::Group.eq(gid))
        .count(store.db())
        .await?;
    if folders > 0 {
        return Err(ApiError::bad_request(format!(
            "Project '{}' still has {folders} folders: delete them first to purge it",
            g.name
        )));
    }
    let domain = g.domain_name.clone();
    let (by_superadmin, actor_email) = (matches!(scope, AdminScope::Super), actor.to_string());
    crate::audit::audited(store, actor, "purge_group", "group", move |txn| {
        Box::pin(async move {
            // A domain admin purges what it governs: a project with another administrator
            // (or a superadmin) among its members or its sessions' owners is a superadmin's to
            // purge, as `modify_group` never lets it remove such a member.
            if !by_superadmin {
                let members = SqlQuery::select()
                    .column(association_groups_users::Column::UserId)
                    .from(association_groups_users::Entity)
                    .and_where(Expr::col(association_groups_users::Column::GroupId).eq(gid))
                    .to_owned();
                let owners = SqlQuery::select()
                    .column(entity::sessions::Column::UserUuid)
                    .from(entity::sessions::Entity)
                    .and_where(Expr::col(entity::sessions::Column::GroupId).eq(gid))
                    .to_owned();
                let above = users::Entity::find()
                    .filter(
                        sea_orm::Condition::any()
                            .add(users::Column::Uuid.in_subquery(members))
                            .add(users::Column::Uuid.in_subquery(owners)),
                    )
                    .filter(users::Column::Role.is_in([UserRole::Admin, UserRole::Superadmin]))
                    .filter(users::Column::Email.ne(actor_email))
                    .count(txn)
                    .await?;
                if above > 0 {
                    return Err(ApiError::forbidden(
                        "Another administrator belongs to this project or owns its sessions: only a superadmin may purge it",
                    ));
                }
            }
            // A session that began since the check makes the purge fail, never orphaned.
            let live = entity::sessions::Entity::find()
                .filter(entity::sessions::Column::GroupId.eq(gid))
                .filter(entity::sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
                .count(txn)
                .await?;
            if live > 0 {
                return Err(ApiError::conflict(
                    "A session started in the project meanwhile: try again once it ended",
                ));
            }
            // Ended sessions go with their containers' records and dependencies (cascade);
            // never a live one (on PostgreSQL one may commit between the count and here).
            entity::sessions::Entity::delete_many()
                .filter(entity::sessions::Column::GroupId.eq(gid))
                .filter(
                    entity::sessions::Column::Status.is_not_in(SessionStatus::LIVE.iter().copied()),
                )
                .exec(txn)
                .await?;
            association_groups_users::Entity::delete_many()
                .filter(association_groups_users::Column::GroupId.eq(gid))
                .exec(txn)
                .await?;
            entity::sgroups_for_groups::Entity::delete_many()
                .filter(entity::sgroups_for_groups::Column::Group.eq(gid))
                .exec(txn)
                .await?;
            entity::session_templates::Entity::delete_many()
                .filter(entity::session_templates::Column::GroupId.eq(gid))
                .exec(txn)
                .await?;
            // Destroyed endpoints go with their routes and tokens (cascade); a live one
            // created meanwhile makes the purge fail.
            let endpoints = entity::endpoints::Entity::find()
                .filter(entity::endpoints::Column::Project.eq(gid))
                .filter(entity::endpoints::Column::LifecycleStage.ne("destroyed"))
                .count(txn)
                .await?;
            if endpoints > 0 {
                return Err(ApiError::conflict("Project has active endpoints.")
                    .with_error_code("group_purge_conflict"));
            }
            entity::endpoints::Entity::delete_many()
                .filter(entity::endpoints::Column::Project.eq(gid))
                .exec(txn)
                .await?;
            groups::Entity::delete_by_id(gid).exec(txn).await?;
            Ok(((), gid.to_string(), json!({})))
        })
    })
    .await?;
    store.events().changed(
        ObjectKind::Group,
        ChangeAction::Deleted,
        gid.to_string(),
        Some(domain),
    );
    Ok(())
}
