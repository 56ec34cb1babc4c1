//! Domains: the top layer of authority and resource control. Superadmins manage them;
//! everyone else sees only their own domain.

use entity::enums::UserRole;
use entity::{domains, users};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, Set};
use serde_json::{Value, json};

use crate::auth::SuperadminScope;
use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::store::Store;

/// A change to a domain as a surface read it; `None` keeps the value. The JSON values are
/// checked here (`policies::parse_limits`, `normalize_allowed_hosts`).
#[derive(Debug, Default, Clone)]
pub struct DomainChange {
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub total_resource_slots: Option<Value>,
    pub allowed_vfolder_hosts: Option<Value>,
    pub allowed_docker_registries: Option<Vec<String>>,
    pub integration_id: Option<String>,
}

fn apply(store: &impl Store, m: &mut domains::ActiveModel, c: DomainChange) -> ApiResult<()> {
    if let Some(v) = c.description {
        m.description = Set(Some(v));
    }
    if let Some(v) = c.is_active {
        m.is_active = Set(v);
    }
    if let Some(v) = c.total_resource_slots {
        m.total_resource_slots = Set(crate::policies::parse_limits(&v)?);
    }
    if let Some(v) = c.allowed_vfolder_hosts {
        m.allowed_vfolder_hosts = Set(crate::policies::normalize_allowed_hosts(&v)?);
    }
    if let Some(v) = c.allowed_docker_registries {
        m.allowed_docker_registries = Set(v.into());
    }
    if let Some(v) = c.integration_id {
        m.integration_id = Set(Some(v));
    }
    m.modified_at = Set(store.clock().now());
    Ok(())
}

/// Creates domain `name` (superadmins only), with its audit record, and announces it.
pub async fn create(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    change: DomainChange,
) -> ApiResult<domains::Model> {
    let name = crate::validate::object_name("domain", name)?;
    if domains::Entity::find_by_id(name.clone())
        .one(store.db())
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "Domain '{name}' already exists"
        )));
    }
    let now = store.clock().now();
    let mut m = domains::ActiveModel {
        name: Set(name),
        description: Set(None),
        is_active: Set(true),
        created_at: Set(now),
        modified_at: Set(now),
        total_resource_slots: Set(Default::default()),
        allowed_vfolder_hosts: Set(json!({})),
        allowed_docker_registries: Set(Default::default()),
        integration_id: Set(None),
        dotfiles: Set(None),
    };
    apply(store, &mut m, change)?;
    let d = crate::audit::audited(
        store,
        scope.actor(),
        "create_domain",
        "domain",
        move |txn| {
            Box::pin(async move {
                let d = m.insert(txn).await?;
                let key = d.name.clone();
                Ok((d, key, json!({})))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::Domain,
        ChangeAction::Created,
        &d.name,
        Some(d.name.clone()),
    );
    Ok(d)
}

/// Changes domain `name` (superadmins only).
pub async fn modify(
    store: &impl Store,
    scope: &SuperadminScope,
    name: &str,
    change: DomainChange,
) -> ApiResult<domains::Model> {
    let existing =
        crate::lookup::get::<domains::Entity>(store.db(), "domain", name.to_string()).await?;
    let deactivating = existing.is_active && change.is_active == Some(false);
    if deactivating {
        let own = users::Entity::find()
            .filter(users::Column::Email.eq(scope.actor()))
            .one(store.db())
            .await?
            .is_some_and(|u| u.domain_name == existing.name);
        if own {
            return Err(ApiError::bad_request(format!(
                "You cannot deactivate your own domain '{}': you would lock yourself out",
                existing.name
            )));
        }
    }
    let mut m = existing.into_active_model();
    apply(store, &mut m, change)?;
    let d = crate::audit::audited(
        store,
        scope.actor(),
        "modify_domain",
        "domain",
        move |txn| {
            Box::pin(async move {
                let d = m.update(txn).await?;
                let key = d.name.clone();
                Ok((d, key, json!({})))
            })
        },
    )
    .await?;
    if deactivating {
        // Its users' console and API logins end now (new ones are refused while it stays
        // inactive: `accounts::usable`); superadmins, who administer every domain, keep theirs.
        let members = users::Entity::find()
            .filter(users::Column::DomainName.eq(d.name.clone()))
            .filter(users::Column::Role.ne(UserRole::Superadmin))
            .all(store.db())
            .await?;
        for u in members {
            crate::auth::logins::end(store.db(), u.uuid, None)
                .await?
                .announce(store.revocations());
        }
    }
    store.events().changed(
        ObjectKind::Domain,
        ChangeAction::Modified,
        &d.name,
        Some(d.name.clone()),
    );
    Ok(d)
}

/// Renames domain `old` to `new` (Backend.AI's `modify_domain` with `name`): its users,
/// projects, resource-group links and templates follow by the database's cascades, its
/// sessions, kernels and folders in the same transaction. The default domain keeps its name.
pub async fn rename(
    store: &impl Store,
    scope: &SuperadminScope,
    old: &str,
    new: &str,
) -> ApiResult<domains::Model> {
    let new = crate::validate::object_name("domain", new)?;
    crate::lookup::get::<domains::Entity>(store.db(), "domain", old.to_string()).await?;
    if new == old {
        return crate::lookup::get::<domains::Entity>(store.db(), "domain", new).await;
    }
    if old == "default" {
        return Err(ApiError::bad_request("The default domain keeps its name"));
    }
    if domains::Entity::find_by_id(new.clone())
        .one(store.db())
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!("Domain '{new}' already exists")));
    }
    let (from, to) = (old.to_string(), new.clone());
    let d = crate::audit::audited(
        store,
        scope.actor(),
        "rename_domain",
        "domain",
        move |txn| {
            Box::pin(async move {
                use sea_orm::sea_query::Expr;
                domains::Entity::update_many()
                    .col_expr(domains::Column::Name, Expr::value(to.clone()))
                    .filter(domains::Column::Name.eq(&from))
                    .exec(txn)
                    .await?;
                entity::sessions::Entity::update_many()
                    .col_expr(
                        entity::sessions::Column::DomainName,
                        Expr::value(to.clone()),
                    )
                    .filter(entity::sessions::Column::DomainName.eq(&from))
                    .exec(txn)
                    .await?;
                entity::kernels::Entity::update_many()
                    .col_expr(entity::kernels::Column::DomainName, Expr::value(to.clone()))
                    .filter(entity::kernels::Column::DomainName.eq(&from))
                    .exec(txn)
                    .await?;
                entity::vfolders::Entity::update_many()
                    .col_expr(
                        entity::vfolders::Column::DomainName,
                        Expr::value(to.clone()),
                    )
                    .filter(entity::vfolders::Column::DomainName.eq(&from))
                    .exec(txn)
                    .await?;
                crate::statistics::rows::rename_domain(txn, &from, &to).await?;
                let d = crate::lookup::get::<domains::Entity>(txn, "domain", to.clone()).await?;
                Ok((d, to, json!({"from": from})))
            })
        },
    )
    .await?;
    store.events().changed(
        ObjectKind::Domain,
        ChangeAction::Modified,
        &d.name,
        Some(d.name.clone()),
    );
    Ok(d)
}

/// Deletes domain `name` for good (Backend.AI's `purge_domain`): only an empty one — no
/// users, projects with members, sessions or folders; its empty projects and resource-group
/// links go with it. The default domain stays.
pub async fn purge(store: &impl Store, scope: &SuperadminScope, name: &str) -> ApiResult<()> {
    use sea_orm::PaginatorTrait;
    let d = crate::lookup::get::<domains::Entity>(store.db(), "domain", name.to_string()).await?;
    if d.name == "default" {
        return Err(ApiError::bad_request("The default domain cannot be purged"));
    }
    let users = entity::users::Entity::find()
        .filter(entity::users::Column::DomainName.eq(&d.name))
        .count(store.db())
        .await?;
    let sessions = entity::sessions::Entity::find()
        .filter(entity::sessions::Column::DomainName.eq(&d.name))
        .count(store.db())
        .await?;
    let folders = entity::vfolders::Entity::find()
        .filter(entity::vfolders::Column::DomainName.eq(&d.name))
        .count(store.db())
        .await?;
    if users + sessions + folders > 0 {
        return Err(ApiError::conflict(format!(
            "The domain '{}' still has {users} users, {sessions} sessions and {folders} folders: remove them first",
            d.name
        )));
    }
    let key = d.name.clone();
    crate::audit::audited(store, scope.actor(), "purge_domain", "domain", move |txn| {
        Box::pin(async move {
            let groups: Vec<uuid::Uuid> = entity::groups::Entity::find()
                .filter(entity::groups::Column::DomainName.eq(&key))
                .all(txn)
                .await?
                .into_iter()
                .map(|g| g.id)
                .collect();
            for g in &groups {
                entity::association_groups_users::Entity::delete_many()
                    .filter(entity::association_groups_users::Column::GroupId.eq(*g))
                    .exec(txn)
                    .await?;
                entity::sgroups_for_groups::Entity::delete_many()
                    .filter(entity::sgroups_for_groups::Column::Group.eq(*g))
                    .exec(txn)
                    .await?;
            }
            entity::session_templates::Entity::delete_many()
                .filter(entity::session_templates::Column::DomainName.eq(&key))
                .exec(txn)
                .await?;
            entity::groups::Entity::delete_many()
                .filter(entity::groups::Column::DomainName.eq(&key))
                .exec(txn)
                .await?;
            entity::sgroups_for_domains::Entity::delete_many()
                .filter(entity::sgroups_for_domains::Column::Domain.eq(&key))
                .exec(txn)
                .await?;
            crate::statistics::rows::forget_domain(txn, &key).await?;
            domains::Entity::delete_by_id(key.clone()).exec(txn).await?;
            Ok(((), key, json!({})))
        })
    })
    .await?;
    store.events().changed(
        ObjectKind::Domain,
        ChangeAction::Deleted,
        name,
        Some(name.to_string()),
    );
    Ok(())
}

/// Domain `name` if the caller may see it: a superadmin any, everyone else only its own
/// (NOT_FOUND otherwise).
pub async fn find_visible<C: sea_orm::ConnectionTrait>(
    db: &C,
    caller: &crate::auth::Caller,
    name: &str,
) -> ApiResult<domains::Model> {
    if !caller.is_superadmin() && name != caller.domain_name {
        return Err(ApiError::not_found("domain", name));
    }
    crate::lookup::get::<domains::Entity>(db, "domain", name.to_string()).await
}

/// The domains the caller may see, by name: all for a superadmin, else its own; `is_active`
/// narrows.
pub async fn visible<C: sea_orm::ConnectionTrait>(
    db: &C,
    caller: &crate::auth::Caller,
    is_active: Option<bool>,
) -> ApiResult<Vec<domains::Model>> {
    use sea_orm::QueryOrder;
    let mut select = domains::Entity::find().order_by_asc(domains::Column::Name);
    if !caller.is_superadmin() {
        select = select.filter(domains::Column::Name.eq(&caller.domain_name));
    }
    if let Some(a) = is_active {
        select = select.filter(domains::Column::IsActive.eq(a));
    }
    Ok(select.all(db).await?)
}
