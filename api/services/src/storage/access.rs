//! Where folders are and who may use them: the storage hosts, a folder's root, the access a
//! caller has to a folder (owner, project member, invited), finding one by id or name.
use std::collections::BTreeMap;
use std::path::PathBuf;

use entity::enums::{VFolderPermission, VFolderStatus};
use entity::{association_groups_users, groups, users, vfolder_permissions, vfolders};
use sea_orm::sea_query::{Expr, Query as SqlQuery};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use uuid::Uuid;

use crate::auth::{Caller, ReadScope};
use crate::config::Config;
use crate::error::{ApiError, ApiResult};
use crate::events::VfolderEvent;
use crate::store::Store;

/// Configured storage hosts: `name=/absolute/path` entries; `local` alone means
/// `<data_dir>/vfolders`.
pub fn hosts(config: &Config) -> BTreeMap<String, PathBuf> {
    config
        .storage_hosts
        .iter()
        .map(|h| {
            let (name, path) = match h.split_once('=') {
                Some((name, path)) => (name.trim().to_string(), PathBuf::from(path.trim())),
                None => (
                    h.trim().to_string(),
                    config.data_dir.join("vfolders").join(h.trim()),
                ),
            };
            // Containers bind-mount folders by absolute host path, and the default data
            // directory is relative.
            let path = std::path::absolute(&path).unwrap_or(path);
            (name, path)
        })
        .collect()
}

pub fn folder_root(config: &Config, folder: &vfolders::Model) -> ApiResult<PathBuf> {
    let root = hosts(config).remove(&folder.host).ok_or_else(|| {
        ApiError::internal(
            "locating a folder",
            format!("storage host {} is not configured", folder.host),
        )
    })?;
    Ok(root.join(folder.id.simple().to_string()))
}

/// What the caller may do with a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    Read,
    ReadWrite,
    ReadWriteDelete,
    /// Owner, or an admin of a group folder's domain: also rename and delete the folder.
    Owner,
}

impl Access {
    fn from_permission(p: VFolderPermission) -> Access {
        match p {
            VFolderPermission::ReadOnly => Access::Read,
            VFolderPermission::ReadWrite => Access::ReadWrite,
            VFolderPermission::ReadWriteDelete => Access::ReadWriteDelete,
        }
    }

    pub fn as_permission(self) -> VFolderPermission {
        match self {
            Access::Read => VFolderPermission::ReadOnly,
            Access::ReadWrite => VFolderPermission::ReadWrite,
            Access::ReadWriteDelete | Access::Owner => VFolderPermission::ReadWriteDelete,
        }
    }

    pub fn require(self, need: Access, what: &str) -> ApiResult<()> {
        if self >= need {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "You may not {what} in this folder."
            )))
        }
    }
}

/// Folders the caller can reach: its own, its projects' group folders, those shared with it.
pub fn accessible(caller: &Caller) -> sea_orm::Select<vfolders::Entity> {
    let member_groups = SqlQuery::select()
        .column(entity::association_groups_users::Column::GroupId)
        .from(entity::association_groups_users::Entity)
        .and_where(Expr::col(entity::association_groups_users::Column::UserId).eq(caller.uuid))
        .to_owned();
    let shared = SqlQuery::select()
        .column(vfolder_permissions::Column::Vfolder)
        .from(vfolder_permissions::Entity)
        .and_where(Expr::col(vfolder_permissions::Column::User).eq(caller.uuid))
        .to_owned();
    vfolders::Entity::find().filter(
        Condition::any()
            .add(vfolders::Column::User.eq(caller.uuid))
            .add(vfolders::Column::Group.in_subquery(member_groups))
            // A share row reaches a user folder; on a project folder it only overrides a
            // member's permission (a former member's row reaches nothing).
            .add(
                Condition::all()
                    .add(vfolders::Column::Id.in_subquery(shared))
                    .add(vfolders::Column::Group.is_null()),
            ),
    )
}

/// Folders the caller may list: a superadmin every one, a domain admin its domain's, anyone
/// else those it reaches ([`accessible`]).
pub fn visible(caller: &Caller) -> sea_orm::Select<vfolders::Entity> {
    match caller.read_scope() {
        ReadScope::Admin(scope) => match scope.domain() {
            None => vfolders::Entity::find(),
            Some(d) => vfolders::Entity::find().filter(vfolders::Column::DomainName.eq(d)),
        },
        ReadScope::Own { .. } => accessible(caller),
    }
}

/// `select` narrowed to user folders and the folders of project `group`.
pub fn with_project(
    select: sea_orm::Select<vfolders::Entity>,
    group: Uuid,
) -> sea_orm::Select<vfolders::Entity> {
    select.filter(
        Condition::any()
            .add(vfolders::Column::Group.eq(group))
            .add(vfolders::Column::Group.is_null()),
    )
}

/// The folders the caller reaches (at most `limit`), narrowed to user folders and project
/// `group`'s when given.
pub async fn reachable<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    group: Option<Uuid>,
    limit: u64,
) -> ApiResult<Vec<vfolders::Model>> {
    let mut select = accessible(caller);
    if let Some(g) = group {
        select = with_project(select, g);
    }
    Ok(select.limit(limit).all(db).await?)
}

/// The caller's own user folders.
pub async fn own_folders<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
) -> ApiResult<Vec<vfolders::Model>> {
    Ok(accessible(caller)
        .filter(vfolders::Column::User.eq(caller.uuid))
        .all(db)
        .await?)
}

/// The e-mail address of the user a folder belongs to (None: a project folder, or no such
/// user).
pub async fn owner_email<C: ConnectionTrait>(
    db: &C,
    f: &vfolders::Model,
) -> ApiResult<Option<String>> {
    let Some(u) = f.user else {
        return Ok(None);
    };
    Ok(users::Entity::find_by_id(u).one(db).await?.map(|u| u.email))
}

/// The name of the project a folder belongs to (None: a user folder, or no such project).
pub async fn project_name<C: ConnectionTrait>(
    db: &C,
    f: &vfolders::Model,
) -> ApiResult<Option<String>> {
    let Some(g) = f.group else {
        return Ok(None);
    };
    Ok(groups::Entity::find_by_id(g).one(db).await?.map(|g| g.name))
}

/// Whether the caller may hear of a change to a folder: its owner, an admin of its domain, a
/// member of its project, or a user it is shared with (false where that cannot be read).
pub async fn sees_change<C: ConnectionTrait>(db: &C, caller: &Caller, e: &VfolderEvent) -> bool {
    e.user == Some(caller.uuid)
        || caller
            .admin_scope()
            .is_some_and(|s| s.covers_domain(&e.domain))
        || match e.group {
            Some(g) => crate::groups::is_member(db, caller.uuid, g)
                .await
                .unwrap_or(false),
            None => false,
        }
        || vfolder_permissions::Entity::find_by_id((e.id, caller.uuid))
            .one(db)
            .await
            .is_ok_and(|p| p.is_some())
}

/// The folder and the caller's access to it; NOT_FOUND for folders it cannot reach.
pub async fn find(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<(vfolders::Model, Access)> {
    let not_found = || ApiError::not_found("folder", id);
    let f = vfolders::Entity::find_by_id(id)
        .one(store.read())
        .await?
        .ok_or_else(not_found)?;
    if f.user == Some(caller.uuid) {
        return Ok((f, Access::Owner));
    }
    if let Some(g) = f.group {
        let admin = caller
            .admin_scope()
            .is_some_and(|s| s.covers_domain(&f.domain_name));
        if admin {
            return Ok((f, Access::Owner));
        }
        if crate::groups::is_member(store.read(), caller.uuid, g).await? {
            // An admin's per-user permission overrides the project folder's own.
            let own = vfolder_permissions::Entity::find_by_id((id, caller.uuid))
                .one(store.read())
                .await?
                .map_or(f.permission, |p| p.permission);
            return Ok((f, Access::from_permission(own)));
        }
        // A project folder is its members' (and its domain admins'): a share row left from
        // a former membership reaches nothing.
        return Err(not_found());
    }
    if let Some(p) = vfolder_permissions::Entity::find_by_id((id, caller.uuid))
        .one(store.read())
        .await?
    {
        let access = Access::from_permission(p.permission);
        return Ok((f, access));
    }
    Err(not_found())
}

/// The rows `query` finds for `ids`, or none without asking when there are no ids.
async fn unless_none<M, F>(
    ids: &[Uuid],
    query: impl FnOnce(Vec<Uuid>) -> F,
) -> ApiResult<std::vec::IntoIter<M>>
where
    F: std::future::Future<Output = Result<Vec<M>, sea_orm::DbErr>>,
{
    if ids.is_empty() {
        return Ok(Vec::new().into_iter());
    }
    Ok(query(ids.to_vec()).await?.into_iter())
}

/// The caller's access to each folder of a page, as `find` decides it for one, in two queries
/// for the whole page (the caller's memberships among the page's projects, its permission rows
/// among the page's folders). A folder it reaches in none of `find`'s ways is absent.
pub async fn access_of_page(
    store: &impl Store,
    caller: &Caller,
    folders: &[vfolders::Model],
) -> ApiResult<std::collections::HashMap<Uuid, Access>> {
    let mut out = std::collections::HashMap::new();
    let others: Vec<&vfolders::Model> = folders
        .iter()
        .filter(|f| f.user != Some(caller.uuid))
        .collect();
    let projects: Vec<Uuid> = others.iter().filter_map(|f| f.group).collect();
    let member_of: std::collections::HashSet<Uuid> = unless_none(&projects, |projects| {
        association_groups_users::Entity::find()
            .filter(association_groups_users::Column::UserId.eq(caller.uuid))
            .filter(association_groups_users::Column::GroupId.is_in(projects))
            .all(store.read())
    })
    .await?
    .map(|m| m.group_id)
    .collect();
    let ids: Vec<Uuid> = others.iter().map(|f| f.id).collect();
    let permissions: std::collections::HashMap<Uuid, _> = unless_none(&ids, |ids| {
        vfolder_permissions::Entity::find()
            .filter(vfolder_permissions::Column::User.eq(caller.uuid))
            .filter(vfolder_permissions::Column::Vfolder.is_in(ids))
            .all(store.read())
    })
    .await?
    .map(|p| (p.vfolder, p.permission))
    .collect();
    for f in folders {
        let access = if f.user == Some(caller.uuid) {
            Some(Access::Owner)
        } else if let Some(g) = f.group {
            if caller
                .admin_scope()
                .is_some_and(|s| s.covers_domain(&f.domain_name))
            {
                Some(Access::Owner)
            } else if member_of.contains(&g) {
                Some(Access::from_permission(
                    permissions.get(&f.id).copied().unwrap_or(f.permission),
                ))
            } else {
                None
            }
        } else {
            permissions.get(&f.id).copied().map(Access::from_permission)
        };
        if let Some(a) = access {
            out.insert(f.id, a);
        }
    }
    Ok(out)
}

/// The folder the caller names by id (dashed or 32 hex digits, as Backend.AI's client 26
/// sends it) or by name (its own first, then its projects' and those shared with it), and its
/// access; NOT_FOUND for anything it cannot reach.
pub async fn resolve(
    store: &impl Store,
    caller: &Caller,
    key: &str,
) -> ApiResult<(vfolders::Model, Access)> {
    if let Ok(id) = Uuid::parse_str(key) {
        return find(store, caller, id).await;
    }
    let mut named = accessible(caller)
        .filter(vfolders::Column::Name.eq(key))
        .all(store.db())
        .await?;
    // Its own folder first when a project folder has the same name.
    named.sort_by_key(|f| f.user != Some(caller.uuid));
    match named.first() {
        Some(f) => find(store, caller, f.id).await,
        None => Err(ApiError::not_found("folder", key)),
    }
}

/// Refused for a folder in the trash (restore it first) or one being prepared (a clone).
pub fn require_ready(f: &vfolders::Model) -> ApiResult<()> {
    match f.status {
        VFolderStatus::Ready | VFolderStatus::Mounted => Ok(()),
        VFolderStatus::DeletePending => Err(ApiError::bad_request(format!(
            "The folder '{}' is in the trash: restore it first",
            f.name
        ))),
        other => Err(ApiError::bad_request(format!(
            "The folder '{}' is not ready ({other})",
            f.name
        ))),
    }
}
