//! Storage folders (vfolders): data that outlives sessions. Folders live on configured storage
//! hosts (directories on the server's disk); user folders belong to one user, group folders
//! to a project. Names starting with a dot are automount folders. Every file path goes
//! through `fsat` (directory handles, no link ever followed).
pub use bai_core::path;
pub use bai_storage::fsat;

pub mod access;
pub mod clone;
pub mod sharing;
pub mod transfer;
pub mod usage;

pub use access::{
    Access, access_of_page, accessible, find, folder_root, hosts, own_folders, owner_email,
    project_name, reachable, require_ready, resolve, sees_change, visible, with_project,
};
pub use usage::{USAGE_FRESH, add_usage, mark_stale, measure, measure_stalest, usage};

use std::collections::BTreeMap;

use entity::enums::{VFolderOwnershipType, VFolderPermission, VFolderStatus, VFolderUsageMode};
use entity::{vfolder_permissions, vfolders};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, ModelTrait, PaginatorTrait,
    QueryFilter, Set,
};
use serde_json::json;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::Store;

/// The session's folders as `agent` sees them: where its host mounts each storage host
/// (`paths`; None: the manager's own paths, as resolved at creation). The scheduler places a
/// session only where every storage host is seen, so a miss here is a refusal, not a guess.
pub fn mounts_on(
    paths: Option<bai_storage::StoragePaths>,
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
    if !ok {
        return Err(ApiError::bad_request(format!(
            "Invalid folder name '{name}': use 1 to 64 letters, digits, '-', '_' or '.' (a leading dot makes an automount folder)"
        )));
    }
    // Folders are named by id or by name in the same places (`/folders/{name}`, mounts): a
    // name that reads as an id would be taken for one (another folder's, perhaps).
    if Uuid::parse_str(n).is_ok() {
        return Err(ApiError::bad_request(format!(
            "Invalid folder name '{name}': it reads as a folder id, and folders are named by id or by name alike; choose another name"
        )));
    }
    Ok(n.to_string())
}

pub fn is_automount(name: &str) -> bool {
    name.starts_with('.')
}

pub struct NewFolder {
    pub name: String,
    pub host: Option<String>,
    pub group: Option<Uuid>,
    pub permission: VFolderPermission,
    pub usage_mode: VFolderUsageMode,
    pub cloneable: bool,
}

/// The project a new folder is for, named by id or by name in the caller's domain (NOT_FOUND
/// for a name no project of that domain has).
pub async fn project_id<C: sea_orm::ConnectionTrait>(
    db: &C,
    caller: &Caller,
    key: &str,
) -> ApiResult<Uuid> {
    if let Ok(id) = Uuid::parse_str(key) {
        return Ok(id);
    }
    entity::groups::Entity::find()
        .filter(entity::groups::Column::Name.eq(key))
        .filter(entity::groups::Column::DomainName.eq(&caller.domain_name))
        .one(db)
        .await?
        .map(|g| g.id)
        .ok_or_else(|| ApiError::not_found("group", key))
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

/// Moves folder `id` to the trash after its name is typed to confirm (`confirm_name`); see
/// [`trash`].
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
    if confirm_name != f.name {
        return Err(ApiError::bad_request(format!(
            "Type the folder's name ('{}') to confirm the deletion",
            f.name
        )));
    }
    trash(store, caller, id).await
}

/// Moves folder `id` to the trash (its owner only; Backend.AI's `delete-pending`): it keeps
/// its files and its name, is mounted nowhere any more, and its shares and pending
/// invitations end. Refused while a live session mounts it.
pub async fn trash(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let (f, access) = find(store, caller, id).await?;
    if access != Access::Owner {
        return Err(ApiError::forbidden(
            "Only the folder's owner may delete it.",
        ));
    }
    if f.status == VFolderStatus::DeletePending {
        return Err(ApiError::bad_request(format!(
            "The folder '{}' is already in the trash",
            f.name
        )));
    }
    // A folder a failed clone left in `error` may go to the trash too.
    if f.status != VFolderStatus::Error {
        require_ready(&f)?;
    }
    // A model folder a service still serves (Backend.AI's soft-delete conflict): the service
    // goes first, or its replacements would find no model.
    if let Some(e) = entity::endpoints::Entity::find()
        .filter(entity::endpoints::Column::Model.eq(f.id))
        .filter(entity::endpoints::Column::LifecycleStage.ne("destroyed"))
        .one(store.db())
        .await?
    {
        return Err(ApiError::bad_request(format!(
            "The folder '{}' is the model of the service '{}': delete the service first",
            f.name, e.name
        ))
        .with_error_code("model-service_soft-delete_conflict"));
    }
    let live = entity::sessions::Entity::find()
        .filter(
            entity::sessions::Column::Status
                .is_in(entity::enums::SessionStatus::LIVE.iter().copied()),
        )
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
    let f = set_status(
        store,
        caller,
        f,
        VFolderStatus::DeletePending,
        "trash_vfolder",
        true,
    )
    .await?;
    publish(store, &f, crate::events::ChangeAction::Modified);
    Ok(())
}

/// Brings folder `id` back from the trash (its owner only).
pub async fn restore(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let (f, access) = find(store, caller, id).await?;
    if access != Access::Owner {
        return Err(ApiError::forbidden(
            "Only the folder's owner may restore it.",
        ));
    }
    if f.status != VFolderStatus::DeletePending {
        return Err(ApiError::bad_request(format!(
            "The folder '{}' is not in the trash",
            f.name
        )));
    }
    let f = set_status(
        store,
        caller,
        f,
        VFolderStatus::Ready,
        "restore_vfolder",
        false,
    )
    .await?;
    publish(store, &f, crate::events::ChangeAction::Modified);
    Ok(())
}

/// Deletes folder `id` for good, files and all; it must be in the trash. Its owner, or an
/// admin of its domain (Backend.AI's `purge`), may.
pub async fn purge(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let found = find(store, caller, id).await;
    let f = match found {
        Ok((f, Access::Owner)) => f,
        other => {
            // An admin reaches its domain's folders of lower-ranked users in the trash too.
            let row = vfolders::Entity::find_by_id(id).one(store.db()).await?;
            match row {
                Some(f)
                    if caller
                        .admin_scope()
                        .is_some_and(|s| s.covers_domain(&f.domain_name))
                        && admin_governs_owner(store, caller, &f).await? =>
                {
                    f
                }
                _ => {
                    return Err(match other {
                        Ok((f, _)) => ApiError::forbidden(format!(
                            "Only the owner of '{}' may delete it for good",
                            f.name
                        )),
                        Err(e) => e,
                    });
                }
            }
        }
    };
    if f.status != VFolderStatus::DeletePending {
        return Err(ApiError::bad_request(format!(
            "The folder '{}' is not in the trash: delete it first",
            f.name
        )));
    }
    let root = folder_root(store.config(), &f)?;
    // Its transfers end with it, and what they staged.
    transfer::forget_folder(store, &f).await?;
    let gone = f.clone();
    crate::audit::audited(
        store,
        &caller.email,
        "purge_vfolder",
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
        tracing::warn!(dir = %root.display(), error = %e, "removing a purged folder's files failed");
    }
    publish(store, &gone, crate::events::ChangeAction::Deleted);
    Ok(())
}

/// Whether an admin may act on folder `f` of another user: a superadmin always, a domain admin
/// for lower-ranked users and projects of its domain.
async fn admin_governs_owner(
    store: &impl Store,
    caller: &Caller,
    f: &vfolders::Model,
) -> ApiResult<bool> {
    match f.user {
        Some(u) => Ok(entity::users::Entity::find_by_id(u)
            .one(store.db())
            .await?
            .is_some_and(|o| caller.governs(o.uuid, o.role, &o.domain_name))),
        None => Ok(caller
            .admin_scope()
            .is_some_and(|s| s.covers_domain(&f.domain_name))),
    }
}

/// Empties the trash: every folder in it the caller may purge (its own; an admin's: its
/// domain's). Returns how many were deleted for good.
pub async fn empty_trash(store: &impl Store, caller: &Caller) -> ApiResult<usize> {
    let mut q =
        vfolders::Entity::find().filter(vfolders::Column::Status.eq(VFolderStatus::DeletePending));
    q = match caller.admin_scope() {
        Some(crate::auth::AdminScope::Super) => q,
        Some(crate::auth::AdminScope::Domain(d)) => q.filter(vfolders::Column::DomainName.eq(d)),
        None => q.filter(vfolders::Column::User.eq(caller.uuid)),
    };
    let mut done = 0;
    for f in q.all(store.db()).await? {
        match purge(store, caller, f.id).await {
            Ok(()) => done += 1,
            // Another user's folder a domain admin does not govern: left in the trash.
            Err(e) if matches!(e.code.as_str(), "NOT_FOUND" | "FORBIDDEN") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

async fn set_status(
    store: &impl Store,
    caller: &Caller,
    f: vfolders::Model,
    status: VFolderStatus,
    action: &'static str,
    end_shares: bool,
) -> ApiResult<vfolders::Model> {
    let id = f.id;
    let mut m = f.into_active_model();
    m.status = Set(status);
    crate::audit::audited(store, &caller.email, action, "vfolder", move |txn| {
        Box::pin(async move {
            if end_shares {
                vfolder_permissions::Entity::delete_many()
                    .filter(vfolder_permissions::Column::Vfolder.eq(id))
                    .exec(txn)
                    .await?;
                entity::vfolder_invitations::Entity::delete_many()
                    .filter(entity::vfolder_invitations::Column::Vfolder.eq(id))
                    .filter(
                        entity::vfolder_invitations::Column::State
                            .eq(entity::enums::InvitationState::Pending),
                    )
                    .exec(txn)
                    .await?;
            }
            let f = m.update(txn).await?;
            let key = f.id.to_string();
            let detail = json!({"name": f.name, "status": f.status.as_str()});
            Ok((f, key, detail))
        })
    })
    .await
}

/// Changes a folder's options (its owner only): whether it may be cloned, and the permission
/// its project's members mount it with.
pub async fn update_options(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    cloneable: Option<bool>,
    permission: Option<VFolderPermission>,
) -> ApiResult<vfolders::Model> {
    let (f, access) = find(store, caller, id).await?;
    if access != Access::Owner {
        return Err(ApiError::forbidden(
            "Only the folder's owner may change its options.",
        ));
    }
    require_ready(&f)?;
    let mut m = f.into_active_model();
    if let Some(c) = cloneable {
        m.cloneable = Set(c);
    }
    if let Some(p) = permission {
        m.permission = Set(p);
    }
    let f = crate::audit::audited(
        store,
        &caller.email,
        "update_vfolder_options",
        "vfolder",
        move |txn| {
            Box::pin(async move {
                let f = m.update(txn).await?;
                let key = f.id.to_string();
                let detail = json!({"cloneable": f.cloneable, "permission": f.permission.as_str()});
                Ok((f, key, detail))
            })
        },
    )
    .await?;
    publish(store, &f, crate::events::ChangeAction::Modified);
    Ok(f)
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
    require_ready(&f)?;
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
    require_ready(&f)?;
    let root = folder_root(store.config(), &f)?;
    store.storage().rename(&root, &path, &new_name).await
}

/// Moves `src` of folder `id` to `dst` (into it when it is a directory; read-write access
/// needed).
pub async fn move_file(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    src: &str,
    dst: &str,
) -> ApiResult<()> {
    let (f, access) = find(store, caller, id).await?;
    access.require(Access::ReadWrite, "move files")?;
    require_ready(&f)?;
    let root = folder_root(store.config(), &f)?;
    store.storage().move_to(&root, src, dst).await
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
    require_ready(&f)?;
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
    mark_stale(store, f.id).await
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

/// Top-level directories of a container a model folder may never cover.
const SYSTEM_DIRS: [&str; 16] = [
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "opt", "proc", "root", "run",
    "sbin", "sys", "usr", "var",
];

/// An inference session's model folder (`caller`'s, of `model` usage), mounted at
/// `destination`: an absolute path beneath /home/work, or a directory of its own at the top
/// (Backend.AI's `/models`), never over the container's system directories.
pub async fn model_mount(
    store: &impl Store,
    caller: &Caller,
    folder: Uuid,
    destination: &str,
) -> ApiResult<MountSpec> {
    let (f, access) = find(store, caller, folder).await?;
    require_ready(&f)?;
    if f.usage_mode != entity::enums::VFolderUsageMode::Model {
        return Err(ApiError::bad_request(format!(
            "The folder '{}' is not a model folder",
            f.name
        )));
    }
    Ok(MountSpec {
        id: f.id,
        name: f.name.clone(),
        storage_host: Some(f.host.clone()),
        host_path: folder_root(store.config(), &f)?.display().to_string(),
        target: model_destination(destination)?,
        read_only: access < Access::ReadWrite,
    })
}

/// Where a model folder may be mounted (see `model_mount`).
pub fn model_destination(destination: &str) -> ApiResult<String> {
    if destination.starts_with(HOME) {
        return mount_target("", Some(&destination.to_string()));
    }
    let bad = || {
        ApiError::bad_request(format!(
            "Model mount destination '{destination}' must be an absolute path beneath {HOME} or a directory of its own (such as /models), not over a system directory"
        ))
    };
    let rel = destination.strip_prefix('/').ok_or_else(bad)?;
    let parts = path::components(rel).map_err(|_| bad())?;
    match parts.first() {
        Some(top) if !SYSTEM_DIRS.contains(&top.as_str()) && !top.starts_with('.') => {
            Ok(format!("/{}", parts.join("/")))
        }
        _ => Err(bad()),
    }
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
        require_ready(&folder)?;
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
    for f in reachable.iter().filter(|f| {
        f.user == Some(caller.uuid)
            && is_automount(&f.name)
            && matches!(f.status, VFolderStatus::Ready | VFolderStatus::Mounted)
    }) {
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
            let Some(f) = reachable.iter().find(|f| f.id == m.id) else {
                continue;
            };
            let (used, _) = usage(store, f).await?;
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

/// The filesystem a storage host lives on: its capacity and what is used, in bytes (None when
/// it cannot be read).
pub fn volume_usage(path: &std::path::Path) -> Option<(u64, u64)> {
    let s = rustix::fs::statvfs(path).ok()?;
    let capacity = s.f_blocks.saturating_mul(s.f_frsize);
    let free = s.f_bfree.saturating_mul(s.f_frsize);
    Some((capacity, capacity.saturating_sub(free)))
}

/// `ro`, `rw` or `wd`, or a clear error.
pub fn permission(p: &str) -> ApiResult<VFolderPermission> {
    VFolderPermission::parse(p).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid permission '{p}' (one of: {})",
            VFolderPermission::choices()
        ))
    })
}

/// `general`, `model` or `data`, or a clear error.
pub fn usage_mode(m: &str) -> ApiResult<VFolderUsageMode> {
    VFolderUsageMode::parse(m).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid usage mode '{m}' (one of: {})",
            VFolderUsageMode::choices()
        ))
    })
}

/// Permission bits as `ls` shows them (`rwxr-x---`).
pub fn mode_string(mode: u32) -> String {
    let bits = ['r', 'w', 'x'];
    (0..9)
        .map(|i| {
            if mode & (1 << (8 - i)) != 0 {
                bits[i % 3]
            } else {
                '-'
            }
        })
        .collect()
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
