//! Storage folders (vfolders): data that outlives sessions. Folders live on configured storage
//! hosts (directories on the server's disk); user folders belong to one user, group folders
//! to a project. Names starting with a dot are automount folders. Every file path goes
//! through `path::resolve`.
pub mod graphql;
pub mod path;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::Utc;
use entity::enums::{VFolderOwnershipType, VFolderPermission, VFolderStatus, VFolderUsageMode};
use entity::{keypair_resource_policies, keypairs, vfolder_permissions, vfolders};
use sea_orm::sea_query::{Expr, Query as SqlQuery};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, PaginatorTrait, QueryFilter, Set,
};
use uuid::Uuid;

use crate::auth::Caller;
use crate::config::Config;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Configured storage hosts: `name=/absolute/path` entries; `local` alone means
/// `<data_dir>/vfolders`.
pub fn hosts(config: &Config) -> BTreeMap<String, PathBuf> {
    config
        .storage_hosts
        .iter()
        .map(|h| match h.split_once('=') {
            Some((name, path)) => (name.trim().to_string(), PathBuf::from(path.trim())),
            None => (
                h.trim().to_string(),
                config.data_dir.join("vfolders").join(h.trim()),
            ),
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
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<(vfolders::Model, Access)> {
    let not_found = || ApiError::not_found("folder", id);
    let f = vfolders::Entity::find_by_id(id)
        .one(&state.db)
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
        if crate::groups::is_member(&state.db, caller.uuid, g).await? {
            let access = Access::from_permission(f.permission);
            return Ok((f, access));
        }
    }
    if let Some(p) = vfolder_permissions::Entity::find_by_id((id, caller.uuid))
        .one(&state.db)
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

async fn policy_of(
    state: &AppState,
    caller: &Caller,
) -> ApiResult<keypair_resource_policies::Model> {
    let ak = caller
        .access_key
        .clone()
        .ok_or_else(|| ApiError::bad_request("This account has no keypair"))?;
    let kp = crate::lookup::get::<keypairs::Entity>(&state.db, "keypair", ak).await?;
    crate::lookup::get::<keypair_resource_policies::Entity>(
        &state.db,
        "resource policy",
        kp.resource_policy,
    )
    .await
}

/// Creates a folder (a directory on the host, then its record). User folders count against
/// the policy's folder limit; group folders need an admin of the project's domain.
pub async fn create(
    state: &AppState,
    caller: &Caller,
    req: NewFolder,
) -> ApiResult<vfolders::Model> {
    let name = validate_name(&req.name)?;
    let all_hosts = hosts(&state.config);
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
    let policy = policy_of(state, caller).await?;
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
            let g = crate::groups::find_visible(&state.db, caller, gid).await?;
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
        .count(&state.db)
        .await?;
    if taken > 0 {
        return Err(ApiError::conflict(format!(
            "A folder named '{name}' already exists"
        )));
    }
    if ownership == VFolderOwnershipType::User && policy.max_vfolder_count > 0 {
        let owned = vfolders::Entity::find()
            .filter(same_owner)
            .count(&state.db)
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
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| ApiError::internal("creating a folder directory", e))?;
    // Sessions run as uid 1000 (`work`): the folder must be theirs to write.
    #[cfg(unix)]
    {
        let _ = std::os::unix::fs::chown(&dir, Some(1000), Some(1000));
    }
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
        created_at: Set(Utc::now()),
        last_used: Set(None),
    };
    let actor = caller.email.clone();
    let created =
        crate::audit::audited(&state.db, &actor, "create_vfolder", "vfolder", move |txn| {
            Box::pin(async move {
                let f = model.insert(txn).await?;
                let key = f.id.to_string();
                Ok((f, key, serde_json::json!({})))
            })
        })
        .await;
    if created.is_err() {
        let _ = tokio::fs::remove_dir_all(&dir).await;
    }
    created
}

/// Size in bytes and number of files (walks the folder; links are not followed).
pub async fn usage(dir: PathBuf) -> (u64, u64) {
    tokio::task::spawn_blocking(move || {
        let mut stack = vec![dir];
        let (mut size, mut files) = (0u64, 0u64);
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(meta) = e.path().symlink_metadata() else {
                    continue;
                };
                if meta.is_dir() {
                    stack.push(e.path());
                } else {
                    files += 1;
                    size += meta.len();
                }
            }
        }
        (size, files)
    })
    .await
    .unwrap_or((0, 0))
}

pub fn is_dir(p: &Path) -> bool {
    p.symlink_metadata().map(|m| m.is_dir()).unwrap_or(false)
}
