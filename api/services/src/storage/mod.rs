//! Storage folders (vfolders): data that outlives sessions. Folders live on configured storage
//! hosts (directories on the server's disk); user folders belong to one user, group folders
//! to a project. Names starting with a dot are automount folders. Every file path goes
//! through `fsat` (directory handles, no link ever followed).
pub use bai_core::path;
pub use bai_storage::fsat;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use entity::enums::{VFolderOwnershipType, VFolderPermission, VFolderStatus, VFolderUsageMode};
use entity::{vfolder_permissions, vfolders};
use sea_orm::sea_query::{Expr, Query as SqlQuery};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, IntoActiveModel, ModelTrait,
    PaginatorTrait, QueryFilter, Set,
};
use serde_json::json;
use uuid::Uuid;

use crate::auth::Caller;
use crate::config::Config;
use crate::error::{ApiError, ApiResult};
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

/// The session's folders as `agent` sees them: where its host mounts each storage host
/// (`paths`; None: the manager's own paths, as resolved at creation). The scheduler places a
/// session only where every storage host is seen, so a miss here is a refusal, not a guess.
pub fn mounts_on(
    paths: Option<crate::agents::StoragePaths>,
    agent: &str,
    mounts: Vec<MountSpec>,
) -> ApiResult<Vec<MountSpec>> {
    let Some(paths) = paths else {
        return Ok(mounts);
    };
    mounts
        .into_iter()
        .map(|mut m| {
            let Some(host) = &m.storage_host else {
                return Ok(m);
            };
            let root = paths.get(host).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "The storage host {host} of the folder '{}' is not available on the agent {agent}",
                    m.name
                ))
            })?;
            m.host_path = root.join(m.id.simple().to_string()).display().to_string();
            Ok(m)
        })
        .collect()
}

/// Folder names: 1–64 characters of letters, digits, `-`, `_`, `.`; a leading dot makes an
/// automount folder.
pub fn validate_name(name: &str) -> ApiResult<String> {
    let n = name.trim();
    let ok = !n.is_empty()
        && n.len() <= 64
        && n != "."
        && n != ".."
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(n.to_string())
    } else {
        Err(ApiError::bad_request(format!(
            "Invalid folder name '{name}': use 1 to 64 letters, digits, '-', '_' or '.' (a leading dot makes an automount folder)"
        )))
    }
}

pub fn is_automount(name: &str) -> bool {
    name.starts_with('.')
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
            .add(vfolders::Column::Id.in_subquery(shared)),
    )
}

/// The folder and the caller's access to it; NOT_FOUND for folders it cannot reach.
pub async fn find(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<(vfolders::Model, Access)> {
    let not_found = || ApiError::not_found("folder", id);
    let f = vfolders::Entity::find_by_id(id)
        .one(store.db())
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
        if crate::groups::is_member(store.db(), caller.uuid, g).await? {
            let access = Access::from_permission(f.permission);
            return Ok((f, access));
        }
    }
    if let Some(p) = vfolder_permissions::Entity::find_by_id((id, caller.uuid))
        .one(store.db())
        .await?
    {
        let access = Access::from_permission(p.permission);
        return Ok((f, access));
    }
    Err(not_found())
}

pub struct NewFolder {
    pub name: String,
    pub host: Option<String>,
    pub group: Option<Uuid>,
    pub permission: VFolderPermission,
    pub usage_mode: VFolderUsageMode,
    pub cloneable: bool,
}

/// Creates a folder (a directory on the host, then its record). User folders count against
/// the policy's folder limit; group folders need an admin of the project's domain.
pub async fn create(
    store: &impl Store,
    caller: &Caller,
    req: NewFolder,
) -> ApiResult<vfolders::Model> {
    let name = validate_name(&req.name)?;
    let all_hosts = hosts(store.config());
    let host = match req.host.filter(|h| !h.trim().is_empty()) {
        Some(h) => h.trim().to_string(),
        None => all_hosts
            .keys()
            .next()
            .cloned()
            .ok_or_else(|| ApiError::bad_request("No storage host is configured"))?,
    };
    let Some(host_root) = all_hosts.get(&host) else {
        return Err(ApiError::not_found("storage host", &host));
    };
    let policy = crate::policies::of_caller(store, caller).await?;
    let allowed = policy
        .allowed_vfolder_hosts
        .get(&host)
        .and_then(|p| p.as_array())
        .is_some_and(|perms| perms.iter().any(|p| p == "create-vfolder"));
    if !allowed {
        return Err(ApiError::forbidden(format!(
            "Your resource policy does not allow folders on the storage host '{host}'"
        )));
    }
    let (ownership, user, group, domain) = match req.group {
        None => (
            VFolderOwnershipType::User,
            Some(caller.uuid),
            None,
            caller.domain_name.clone(),
        ),
        Some(gid) => {
            let g = crate::groups::find_visible(store.db(), caller, gid).await?;
            // A project's own host list, when it has one, narrows where its folders live.
            let listed = crate::policies::normalize_allowed_hosts(&g.allowed_vfolder_hosts)
                .unwrap_or_default();
            if listed
                .as_object()
                .is_some_and(|m| !m.is_empty() && !m.contains_key(&host))
            {
                return Err(ApiError::forbidden(format!(
                    "The project '{}' does not allow folders on the storage host '{host}'",
                    g.name
                )));
            }
            let scope = caller.require_admin()?;
            if !scope.covers_domain(&g.domain_name) {
                return Err(ApiError::not_found("group", gid));
            }
            (VFolderOwnershipType::Group, None, Some(g.id), g.domain_name)
        }
    };
    let same_owner = match (user, group) {
        (Some(u), _) => vfolders::Column::User.eq(u),
        (_, Some(g)) => vfolders::Column::Group.eq(g),
        _ => return Err(ApiError::internal("creating a folder", "no owner")),
    };
    let taken = vfolders::Entity::find()
        .filter(same_owner.clone())
        .filter(vfolders::Column::Name.eq(&name))
        .count(store.db())
        .await?;
    if taken > 0 {
        return Err(ApiError::conflict(format!(
            "A folder named '{name}' already exists"
        )));
    }
    if ownership == VFolderOwnershipType::User && policy.max_vfolder_count > 0 {
        let owned = vfolders::Entity::find()
            .filter(same_owner)
            .count(store.db())
            .await?;
        if owned >= u64::try_from(policy.max_vfolder_count).unwrap_or(0) {
            return Err(ApiError::bad_request(format!(
                "You already have {owned} folders, the most your resource policy allows ({})",
                policy.max_vfolder_count
            )));
        }
    }
    let id = Uuid::new_v4();
    let dir = host_root.join(id.simple().to_string());
    store.storage().create_folder(&dir).await?;
    let model = vfolders::ActiveModel {
        id: Set(id),
        host: Set(host),
        domain_name: Set(domain),
        name: Set(name),
        usage_mode: Set(req.usage_mode),
        permission: Set(req.permission),
        max_files: Set(0),
        max_size: Set(None),
        num_files: Set(0),
        cur_size: Set(0),
        ownership_type: Set(ownership),
        user: Set(user),
        group: Set(group),
        creator: Set(Some(caller.email.clone())),
        cloneable: Set(req.cloneable),
        status: Set(VFolderStatus::Ready),
        created_at: Set(store.clock().now()),
        last_used: Set(None),
        usage_at: Set(None),
    };
    let actor = caller.email.clone();
    let created = crate::audit::audited(store, &actor, "create_vfolder", "vfolder", move |txn| {
        Box::pin(async move {
            let f = model.insert(txn).await?;
            let key = f.id.to_string();
            Ok((f, key, serde_json::json!({})))
        })
    })
    .await;
    match &created {
        Ok(f) => publish(store, f, crate::events::ChangeAction::Created),
        Err(_) => {
            // The record was not created: take back its directory. The caller gets the
            // creation's error; a directory left behind only costs space, so it is logged.
            if let Err(e) = store.storage().remove_folder(&dir).await {
                tracing::warn!(dir = %dir.display(), error = %e, "removing the directory of a folder not created failed");
            }
        }
    }
    created
}

pub fn publish(store: &impl Store, f: &vfolders::Model, action: crate::events::ChangeAction) {
    store
        .events()
        .publish(crate::events::Event::Vfolder(crate::events::VfolderEvent {
            id: f.id,
            name: f.name.clone(),
            action,
            user: f.user,
            group: f.group,
            domain: f.domain_name.clone(),
        }));
}

/// Renames folder `id` (its owner only: others who may reach it get FORBIDDEN, the rest
/// NOT_FOUND); the new name must be free among its owner's folders. Returns the folder and
/// the caller's access to it.
pub async fn rename(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    new_name: &str,
) -> ApiResult<(vfolders::Model, Access)> {
    let (f, access) = find(store, caller, id).await?;
    if access != Access::Owner {
        return Err(ApiError::forbidden(
            "Only the folder's owner may rename it.",
        ));
    }
    let name = validate_name(new_name)?;
    let same_owner = match (f.user, f.group) {
        (Some(u), _) => vfolders::Column::User.eq(u),
        (_, Some(g)) => vfolders::Column::Group.eq(g),
        _ => return Err(ApiError::internal("renaming a folder", "no owner")),
    };
    let clash = vfolders::Entity::find()
        .filter(same_owner)
        .filter(vfolders::Column::Name.eq(&name))
        .filter(vfolders::Column::Id.ne(id))
        .one(store.db())
        .await?;
    if clash.is_some() {
        return Err(ApiError::conflict(format!(
            "A folder named '{name}' already exists"
        )));
    }
    let mut m = f.into_active_model();
    m.name = Set(name);
    let f = crate::audit::audited(
        store,
        &caller.email,
        "rename_vfolder",
        "vfolder",
        move |txn| {
            Box::pin(async move {
                let f = m.update(txn).await?;
                let key = f.id.to_string();
                let detail = json!({"name": f.name});
                Ok((f, key, detail))
            })
        },
    )
    .await?;
    publish(store, &f, crate::events::ChangeAction::Modified);
    Ok((f, access))
}

/// Deletes folder `id` and its files (its owner only). Refused while a live session mounts
/// it; `confirm_name` must be the folder's name.
pub async fn delete(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    confirm_name: &str,
) -> ApiResult<()> {
    let (f, access) = find(store, caller, id).await?;
    if access != Access::Owner {
        return Err(ApiError::forbidden(
            "Only the folder's owner may delete it.",
        ));
    }
    let live = entity::sessions::Entity::find()
        .filter(entity::sessions::Column::Status.is_in(crate::sessions::LIVE.iter().copied()))
        .all(store.db())
        .await?;
    if let Some(s) = live
        .iter()
        .find(|s| s.vfolder_mounts.0.iter().any(|m| m.id == f.id))
    {
        return Err(ApiError::conflict(format!(
            "The folder is mounted in the session '{}'; terminate it first",
            s.name
        )));
    }
    if confirm_name != f.name {
        return Err(ApiError::bad_request(format!(
            "Type the folder's name ('{}') to confirm the deletion",
            f.name
        )));
    }
    let root = folder_root(store.config(), &f)?;
    let gone = f.clone();
    crate::audit::audited(
        store,
        &caller.email,
        "delete_vfolder",
        "vfolder",
        move |txn| {
            Box::pin(async move {
                let key = f.id.to_string();
                let detail = json!({"name": f.name});
                f.delete(txn).await?;
                Ok(((), key, detail))
            })
        },
    )
    .await?;
    if let Err(e) = store.storage().remove_folder(&root).await {
        tracing::warn!(dir = %root.display(), error = %e, "removing a deleted folder's files failed");
    }
    publish(store, &gone, crate::events::ChangeAction::Deleted);
    Ok(())
}

/// Creates directory `path` in folder `id` (read-write access needed); `parents` also
/// creates the missing directories above it.
pub async fn create_directory(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    path: String,
    parents: bool,
) -> ApiResult<()> {
    let (f, access) = find(store, caller, id).await?;
    access.require(Access::ReadWrite, "create directories")?;
    let root = folder_root(store.config(), &f)?;
    store.storage().mkdir(&root, &path, parents).await
}

/// Renames file or directory `path` of folder `id` within its directory (read-write access
/// needed).
pub async fn rename_file(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    path: String,
    new_name: String,
) -> ApiResult<()> {
    let (f, access) = find(store, caller, id).await?;
    access.require(Access::ReadWrite, "rename files")?;
    let root = folder_root(store.config(), &f)?;
    store.storage().rename(&root, &path, &new_name).await
}

/// Deletes files of folder `id` (read-write-delete access needed; at most 1000 paths);
/// directories need `recursive`. Every path is checked before anything is deleted.
pub async fn delete_files(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    paths: Vec<String>,
    recursive: bool,
) -> ApiResult<()> {
    let (f, access) = find(store, caller, id).await?;
    access.require(Access::ReadWriteDelete, "delete files")?;
    let root = folder_root(store.config(), &f)?;
    if paths.len() > 1000 {
        return Err(ApiError::bad_request("At most 1000 paths at once"));
    }
    // Every path is checked before anything is deleted.
    for p in &paths {
        match store.storage().kind(&root, p).await? {
            None => return Err(ApiError::not_found("file", p)),
            Some(fsat::Kind::Directory) if path::components(p)?.is_empty() => {
                return Err(ApiError::bad_request(
                    "The folder itself is deleted with delete_vfolder",
                ));
            }
            Some(fsat::Kind::Directory) if !recursive => {
                return Err(ApiError::bad_request(format!(
                    "'{p}' is a directory: delete it with recursive: true"
                )));
            }
            Some(_) => {}
        }
    }
    for p in &paths {
        store.storage().remove(&root, p, recursive).await?;
    }
    Ok(())
}

pub use bai_types::columns::MountSpec;

const HOME: &str = "/home/work";

/// Where a folder appears in the container: `/home/work/<name>`, or the alias from
/// `mount_map` (relative to /home/work, or absolute beneath it).
fn mount_target(name: &str, alias: Option<&String>) -> ApiResult<String> {
    let rel = match alias {
        None => name.to_string(),
        Some(a) => match a.strip_prefix(HOME) {
            Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/').to_string(),
            Some(_) | None if a.starts_with('/') => {
                return Err(ApiError::bad_request(format!(
                    "Mount path '{a}' must be beneath {HOME}"
                )));
            }
            _ => a.clone(),
        },
    };
    let parts = path::components(&rel)?;
    if parts.is_empty() {
        return Err(ApiError::bad_request(format!(
            "A folder cannot be mounted over {HOME} itself"
        )));
    }
    Ok(format!("{HOME}/{}", parts.join("/")))
}

/// The folders to mount for a new session of `caller`: those it names (by name or id) that it
/// may access, read-only where it may only read, plus its own automount (dot-named) folders.
/// Overlapping targets are refused.
pub async fn session_mounts(
    store: &impl Store,
    caller: &Caller,
    requested: &[String],
    mount_map: &BTreeMap<String, String>,
) -> ApiResult<Vec<MountSpec>> {
    let mut out: Vec<MountSpec> = Vec::new();
    let reachable = accessible(caller).all(store.db()).await?;
    for want in requested {
        let by_id = Uuid::parse_str(want).ok();
        let mut candidates: Vec<&vfolders::Model> = reachable
            .iter()
            .filter(|f| Some(f.id) == by_id || f.name == *want)
            .collect();
        // Prefer the caller's own folder when a group folder has the same name.
        candidates.sort_by_key(|f| f.user != Some(caller.uuid));
        let folder = candidates
            .first()
            .ok_or_else(|| ApiError::not_found("folder", want))?;
        let (folder, access) = find(store, caller, folder.id).await?;
        let alias = mount_map.get(want).or_else(|| mount_map.get(&folder.name));
        out.push(MountSpec {
            id: folder.id,
            name: folder.name.clone(),
            storage_host: Some(folder.host.clone()),
            host_path: folder_root(store.config(), &folder)?.display().to_string(),
            target: mount_target(&folder.name, alias)?,
            read_only: access < Access::ReadWrite,
        });
    }
    for f in reachable
        .iter()
        .filter(|f| f.user == Some(caller.uuid) && is_automount(&f.name))
    {
        if out.iter().any(|m| m.id == f.id) {
            continue;
        }
        out.push(MountSpec {
            id: f.id,
            name: f.name.clone(),
            storage_host: Some(f.host.clone()),
            host_path: folder_root(store.config(), f)?.display().to_string(),
            target: mount_target(&f.name, None)?,
            read_only: false,
        });
    }
    // A folder already over the policy's size limit is not mounted writable again: what a
    // container writes cannot be stopped half-way without filesystem quotas, but it is
    // stopped from growing further through bai.
    let max = crate::policies::of_caller(store, caller)
        .await?
        .max_vfolder_size;
    if let Ok(max) = u64::try_from(max)
        && max > 0
    {
        for m in out.iter().filter(|m| !m.read_only) {
            let (used, _) = store.storage().usage(Path::new(&m.host_path)).await;
            if used > max {
                return Err(ApiError::bad_request(format!(
                    "The folder '{}' holds {used} bytes, more than the size limit of your resource policy ({max} bytes): make room before mounting it",
                    m.name
                )));
            }
        }
    }
    for (i, a) in out.iter().enumerate() {
        for b in out.iter().skip(i + 1) {
            let nested = |x: &str, y: &str| x == y || y.starts_with(&format!("{x}/"));
            if a.id == b.id {
                return Err(ApiError::bad_request(format!(
                    "The folder '{}' is listed twice",
                    a.name
                )));
            }
            if nested(&a.target, &b.target) || nested(&b.target, &a.target) {
                return Err(ApiError::bad_request(format!(
                    "Mount targets overlap: {} and {}",
                    a.target, b.target
                )));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_paths_are_absolute_even_for_a_relative_data_dir() {
        let config = crate::Config {
            data_dir: "data".into(),
            storage_hosts: vec!["local".into(), "nfs=rel/nfs".into()],
            ..Default::default()
        };
        let hosts = super::hosts(&config);
        assert!(
            hosts["local"].is_absolute() && hosts["local"].ends_with("data/vfolders/local"),
            "{hosts:?}"
        );
        assert!(
            hosts["nfs"].is_absolute() && hosts["nfs"].ends_with("rel/nfs"),
            "{hosts:?}"
        );
    }
}
