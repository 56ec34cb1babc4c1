//! Session templates: saved launch settings (Backend.AI's task templates) that create
//! sessions with overrides. Each has an owner, a project and a scope saying who may see and
//! use it: `user` (the owner), `group` (the project's members), `domain` (everyone in the
//! domain; set by administrators). The owner changes and deletes it, as do a superadmin and
//! the domain's administrators (never for a superadmin's template). Everyone else is told
//! it does not exist.
pub mod spec;

use entity::enums::UserRole;
use entity::{association_groups_users, session_templates as templates, users};
use sea_orm::sea_query::Query;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, IntoActiveModel, QueryFilter,
    QueryOrder, Set,
};
use serde_json::Value;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::Store;

/// Who may see a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    User,
    Group,
    Domain,
}

impl Scope {
    pub fn parse(s: &str) -> ApiResult<Scope> {
        match s.to_ascii_lowercase().as_str() {
            "user" => Ok(Scope::User),
            "group" | "project" => Ok(Scope::Group),
            "domain" => Ok(Scope::Domain),
            other => Err(ApiError::bad_request(format!(
                "Unknown template scope '{other}' (user, group or domain)"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Group => "group",
            Scope::Domain => "domain",
        }
    }
}

/// The templates `caller` may see: everything for a superadmin; else their own, those shared
/// with a project they belong to or with their domain, and (administrators) those of the users
/// they govern.
pub fn visible(caller: &Caller) -> sea_orm::Select<templates::Entity> {
    let active = templates::Entity::find().filter(templates::Column::IsActive.eq(true));
    if caller.is_superadmin() {
        return active;
    }
    let mut any = Condition::any()
        .add(templates::Column::UserUuid.eq(caller.uuid))
        .add(
            Condition::all()
                .add(templates::Column::Scope.eq(Scope::Group.as_str()))
                .add(
                    templates::Column::GroupId.in_subquery(
                        Query::select()
                            .column(association_groups_users::Column::GroupId)
                            .from(association_groups_users::Entity)
                            .and_where(association_groups_users::Column::UserId.eq(caller.uuid))
                            .to_owned(),
                    ),
                ),
        )
        .add(
            Condition::all()
                .add(templates::Column::Scope.eq(Scope::Domain.as_str()))
                .add(templates::Column::DomainName.eq(&caller.domain_name)),
        );
    if caller.role == UserRole::Admin
        && let Some(sub) = crate::auth::visibility::governed(caller)
    {
        any = any.add(
            Condition::all()
                .add(templates::Column::DomainName.eq(&caller.domain_name))
                .add(templates::Column::UserUuid.in_subquery(sub)),
        );
    }
    active.filter(any)
}

/// A template the caller may see (NOT_FOUND otherwise, as for none at all).
pub async fn find(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<templates::Model> {
    visible(caller)
        .filter(templates::Column::Id.eq(id))
        .one(store.db())
        .await?
        .ok_or_else(|| ApiError::not_found("session template", id))
}

/// A template the caller may change: its owner, a superadmin, or an administrator governing
/// the owner. Others who can see it (a shared one) are refused; those who cannot get
/// NOT_FOUND.
async fn find_mine(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<templates::Model> {
    let t = find(store, caller, id).await?;
    let owner = crate::users::by_uuid(store.db(), t.user_uuid).await?;
    let may = caller.governs(owner.uuid, owner.role, &owner.domain_name);
    if !may {
        return Err(ApiError::forbidden(
            "Only the template's owner or an administrator may change it",
        ));
    }
    Ok(t)
}

/// Where a new template goes: the caller's project (by name or id, default `default`) and a
/// scope the caller may give (`domain` is for administrators).
async fn placement(
    store: &impl Store,
    caller: &Caller,
    group: Option<&str>,
    scope: Scope,
) -> ApiResult<Uuid> {
    if scope == Scope::Domain && !matches!(caller.role, UserRole::Admin | UserRole::Superadmin) {
        return Err(ApiError::forbidden(
            "Only administrators may share a template with the whole domain",
        ));
    }
    let g = crate::sessions::resolve_group(store.db(), caller, group).await?;
    Ok(g.id)
}

/// Stores the templates of `payload` (JSON or YAML, see [`spec::parse_payload`]).
pub async fn create(
    store: &impl Store,
    caller: &Caller,
    payload: &str,
    group: Option<&str>,
    scope: Scope,
) -> ApiResult<Vec<templates::Model>> {
    let items = spec::parse_payload(payload)?;
    let group_id = placement(store, caller, group, scope).await?;
    let now = store.clock().now();
    let mut out = Vec::new();
    for item in items {
        let m = templates::ActiveModel {
            id: Set(Uuid::new_v4()),
            created_at: Set(now),
            modified_at: Set(now),
            is_active: Set(true),
            domain_name: Set(caller.domain_name.clone()),
            group_id: Set(Some(group_id)),
            user_uuid: Set(caller.uuid),
            template_type: Set("task".into()),
            scope: Set(scope.as_str().into()),
            name: Set(item.name),
            template: Set(item.template),
        }
        .insert(store.db())
        .await?;
        out.push(m);
    }
    Ok(out)
}

/// The templates the caller may see, newest first.
pub async fn list(store: &impl Store, caller: &Caller) -> ApiResult<Vec<templates::Model>> {
    Ok(visible(caller)
        .order_by_desc(templates::Column::CreatedAt)
        .all(store.db())
        .await?)
}

/// Replaces a template's content (its first item), and optionally its name and scope.
/// Ownership stays (Backend.AI's update also moved the template to whoever updated it).
pub async fn update(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    payload: Option<&str>,
    name: Option<&str>,
    scope: Option<Scope>,
) -> ApiResult<templates::Model> {
    let t = find_mine(store, caller, id).await?;
    let mut m = t.into_active_model();
    if let Some(p) = payload {
        let mut items = spec::parse_payload(p)?;
        if items.len() != 1 {
            return Err(ApiError::bad_request(
                "An update holds exactly one template",
            ));
        }
        let item = items.remove(0);
        m.name = Set(item.name);
        m.template = Set(item.template);
    }
    if let Some(n) = name.filter(|n| !n.trim().is_empty()) {
        if n.chars().count() > 128 || n.chars().any(char::is_control) {
            return Err(ApiError::bad_request(
                "A template name is at most 128 printable characters",
            ));
        }
        m.name = Set(n.to_string());
    }
    if let Some(s) = scope {
        if s == Scope::Domain && !matches!(caller.role, UserRole::Admin | UserRole::Superadmin) {
            return Err(ApiError::forbidden(
                "Only administrators may share a template with the whole domain",
            ));
        }
        m.scope = Set(s.as_str().into());
    }
    m.modified_at = Set(store.clock().now());
    Ok(m.update(store.db()).await?)
}

/// Deletes a template (kept inactive, as Backend.AI keeps it).
pub async fn delete(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let t = find_mine(store, caller, id).await?;
    let mut m = t.into_active_model();
    m.is_active = Set(false);
    m.modified_at = Set(store.clock().now());
    m.update(store.db()).await?;
    Ok(())
}

/// The creation body (Backend.AI's `POST /session` keys) of a session from template `id`
/// with the request's overrides over it.
pub async fn creation_body(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    overrides: &Value,
) -> ApiResult<Value> {
    let t = find(store, caller, id).await?;
    Ok(spec::merge(spec::creation_body(&t.template), overrides))
}

/// The owner's e-mail and the project's name of each template, for listings.
pub async fn names(
    store: &impl Store,
    list: &[templates::Model],
) -> ApiResult<(
    std::collections::HashMap<Uuid, String>,
    std::collections::HashMap<Uuid, String>,
)> {
    let mut user_ids: Vec<Uuid> = list.iter().map(|t| t.user_uuid).collect();
    user_ids.sort();
    user_ids.dedup();
    let mut group_ids: Vec<Uuid> = list.iter().filter_map(|t| t.group_id).collect();
    group_ids.sort();
    group_ids.dedup();
    let emails = users::Entity::find()
        .filter(users::Column::Uuid.is_in(user_ids))
        .all(store.db())
        .await?
        .into_iter()
        .map(|u| (u.uuid, u.email))
        .collect();
    let groups = entity::groups::Entity::find()
        .filter(entity::groups::Column::Id.is_in(group_ids))
        .all(store.db())
        .await?
        .into_iter()
        .map(|g| (g.id, g.name))
        .collect();
    Ok((emails, groups))
}
