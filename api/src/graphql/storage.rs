//! GraphQL for storage folders: `vfolder`, `vfolder_list`, `vfolder_hosts`, `vfolder_files`,
//! `create_vfolder`, `rename_vfolder`, `delete_vfolder` (to the trash; the name must be typed
//! as confirmation), `restore_vfolder`, `purge_vfolder`, `empty_vfolder_trash`,
//! `update_vfolder_options`, `clone_vfolder`, `create_vfolder_directory`,
//! `rename_vfolder_file`, `move_vfolder_file`, `delete_vfolder_files`; sharing:
//! `vfolder_invitations`, `vfolder_shares`, `invite_to_vfolder`, `accept_vfolder_invitation`,
//! `decline_vfolder_invitation`, `update_vfolder_invitation`, `leave_vfolder`,
//! `set_vfolder_share`, `share_vfolder_with_members`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::{VFolderPermission, VFolderUsageMode};
use entity::vfolders;
use sea_orm::{Order, QueryFilter};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::graphql::{context::authed, scalars::BigInt};
use crate::storage::Access;

/// The folder columns Backend.AI's filter language may name (`vfolder_list`, `vfolder_nodes`).
pub(crate) const FILTERABLE: &[(&str, vfolders::Column)] = &[
    ("name", vfolders::Column::Name),
    ("host", vfolders::Column::Host),
    ("status", vfolders::Column::Status),
    ("permission", vfolders::Column::Permission),
    ("ownership_type", vfolders::Column::OwnershipType),
    ("usage_mode", vfolders::Column::UsageMode),
    ("creator", vfolders::Column::Creator),
    ("cloneable", vfolders::Column::Cloneable),
    ("created_at", vfolders::Column::CreatedAt),
    ("last_used", vfolders::Column::LastUsed),
];

pub struct VirtualFolder {
    pub folder: vfolders::Model,
    pub access: Access,
}

#[Object(rename_fields = "snake_case")]
impl VirtualFolder {
    async fn id(&self) -> Uuid {
        self.folder.id
    }
    /// Storage host (location).
    async fn host(&self) -> &str {
        &self.folder.host
    }
    async fn name(&self) -> &str {
        &self.folder.name
    }
    /// A dot-named folder, mounted into every new session of its owner.
    async fn is_automount(&self) -> bool {
        crate::storage::is_automount(&self.folder.name)
    }
    /// user or group.
    async fn ownership_type(&self) -> &str {
        self.folder.ownership_type.as_str()
    }
    async fn user(&self) -> Option<Uuid> {
        self.folder.user
    }
    async fn user_email(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<String>> {
        match self.folder.user {
            Some(u) => crate::graphql::context::user_email(ctx, u).await,
            None => Ok(None),
        }
    }
    async fn group(&self) -> Option<Uuid> {
        self.folder.group
    }
    async fn group_name(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<String>> {
        match self.folder.group {
            Some(g) => crate::graphql::context::group_name(ctx, g).await,
            None => Ok(None),
        }
    }
    async fn domain_name(&self) -> &str {
        &self.folder.domain_name
    }
    async fn creator(&self) -> Option<&str> {
        self.folder.creator.as_deref()
    }
    /// The folder's mount permission: ro, rw or wd (read-write-delete).
    async fn permission(&self) -> &str {
        self.folder.permission.as_str()
    }
    /// What the caller may do: ro, rw or wd.
    async fn my_permission(&self) -> &str {
        self.access.as_permission().as_str()
    }
    /// The caller owns it (may rename and delete the folder).
    async fn is_owner(&self) -> bool {
        self.access == Access::Owner
    }
    async fn usage_mode(&self) -> &str {
        self.folder.usage_mode.as_str()
    }
    async fn status(&self) -> &str {
        self.folder.status.as_str()
    }
    async fn cloneable(&self) -> bool {
        self.folder.cloneable
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.folder.created_at
    }
    async fn last_used(&self) -> Option<DateTime<Utc>> {
        self.folder.last_used
    }
    /// Bytes used, as last measured (`usage_at`): after bai changed the folder's content and
    /// whenever one folder is asked for (`vfolder`); lists never walk folders.
    async fn cur_size(&self) -> BigInt {
        BigInt(self.folder.cur_size)
    }
    /// Files in the folder, as last measured (`usage_at`).
    async fn num_files(&self) -> BigInt {
        BigInt(self.folder.num_files)
    }
    /// When `cur_size` and `num_files` were measured (null: not yet).
    async fn usage_at(&self) -> Option<DateTime<Utc>> {
        self.folder.usage_at
    }
    /// Another user's folder the caller reaches because it was shared with it (an accepted
    /// invitation).
    async fn shared_with_me(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<bool> {
        let (state, caller) = authed(ctx)?;
        Ok(crate::storage::sharing::shared_with(&state.read, caller, &self.folder).await?)
    }
}

/// An invitation to share a folder, as its inviter and invitee see it.
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct VFolderInvitation {
    pub id: Uuid,
    pub vfolder_id: Uuid,
    pub vfolder_name: String,
    pub inviter: String,
    pub invitee: String,
    /// ro, rw or wd.
    pub permission: String,
    /// pending, accepted, rejected or canceled.
    pub state: String,
    pub created_at: DateTime<Utc>,
    pub modified_at: Option<DateTime<Utc>>,
}

impl From<crate::storage::sharing::Invitation> for VFolderInvitation {
    fn from(i: crate::storage::sharing::Invitation) -> Self {
        Self {
            id: i.id,
            vfolder_id: i.vfolder_id,
            vfolder_name: i.vfolder_name,
            inviter: i.inviter,
            invitee: i.invitee,
            permission: i.permission.as_str().into(),
            state: i.state.as_str().into(),
            created_at: i.created_at,
            modified_at: i.modified_at,
        }
    }
}

/// A user a folder is shared with, and the permission it mounts it with.
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct VFolderShare {
    pub user: Uuid,
    pub email: String,
    pub permission: String,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct VirtualFolderList {
    pub items: Vec<VirtualFolder>,
    pub total_count: u64,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct VFolderFile {
    pub name: String,
    /// FILE or DIRECTORY.
    #[graphql(name = "type")]
    pub file_type: String,
    pub size: BigInt,
    pub created: Option<DateTime<Utc>>,
    pub modified: Option<DateTime<Utc>>,
    /// Unix permission bits, e.g. `rw-r--r--`.
    pub mode: String,
}

async fn list_dir(
    state: &crate::state::AppState,
    root: std::path::PathBuf,
    path: String,
) -> ApiResult<Vec<VFolderFile>> {
    use crate::storage::fsat::Kind;
    let entries = state.storage.list(&root, &path).await?;
    let mut out: Vec<VFolderFile> = entries
        .into_iter()
        .map(|e| VFolderFile {
            name: e.name,
            file_type: match e.kind {
                Kind::Directory => "DIRECTORY",
                Kind::Symlink => "SYMLINK",
                Kind::File => "FILE",
                Kind::Other => "OTHER",
            }
            .into(),
            size: BigInt(i64::try_from(e.size).unwrap_or(i64::MAX)),
            created: None,
            modified: e.modified,
            mode: crate::storage::mode_string(e.mode),
        })
        .collect();
    out.sort_by(|a, b| {
        (b.file_type == "DIRECTORY")
            .cmp(&(a.file_type == "DIRECTORY"))
            .then(a.name.cmp(&b.name))
    });
    Ok(out)
}

/// A storage host as Backend.AI's clients list volumes (`admin storage list`): its name is the
/// volume id, folders live on the server's own filesystem (`vfs`).
pub struct StorageVolume {
    id: String,
    path: std::path::PathBuf,
}

#[Object(rename_fields = "snake_case")]
impl StorageVolume {
    async fn id(&self) -> &str {
        &self.id
    }
    async fn backend(&self) -> &str {
        "vfs"
    }
    async fn capabilities(&self) -> Vec<String> {
        vec!["vfolder".into()]
    }
    /// Where the host's folders are on the server.
    async fn path(&self) -> String {
        self.path.display().to_string()
    }
    async fn fsprefix(&self) -> &str {
        ""
    }
    /// Backend.AI's storage hardware data: bai has none (`{}`).
    async fn hardware_metadata(&self) -> crate::graphql::scalars::JsonString {
        crate::graphql::scalars::JsonString(serde_json::json!({}))
    }
    /// Backend.AI's storage performance data: bai has none (`{}`).
    async fn performance_metric(&self) -> crate::graphql::scalars::JsonString {
        crate::graphql::scalars::JsonString(serde_json::json!({}))
    }
    /// The filesystem's `capacity_bytes` and `used_bytes` (`{}` when it cannot be read).
    async fn usage(&self) -> crate::graphql::scalars::JsonString {
        crate::graphql::scalars::JsonString(match crate::storage::volume_usage(&self.path) {
            Some((capacity, used)) => {
                serde_json::json!({"capacity_bytes": capacity, "used_bytes": used})
            }
            None => serde_json::json!({}),
        })
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct StorageVolumeList {
    pub items: Vec<StorageVolume>,
    pub total_count: u64,
}

fn volumes(state: &crate::state::AppState) -> Vec<StorageVolume> {
    crate::storage::hosts(&state.config)
        .into_iter()
        .map(|(id, path)| StorageVolume { id, path })
        .collect()
}

#[derive(Default)]
pub struct StorageQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl StorageQuery {
    async fn vfolder(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<VirtualFolder> {
        let (state, caller) = authed(ctx)?;
        let (folder, access) = crate::storage::find(state, caller, id).await?;
        // One folder asked for: measured unless measured in the last seconds; the figure is
        // kept for lists.
        crate::storage::usage(state, &folder).await?;
        let (folder, access) = match crate::storage::find(state, caller, id).await {
            Ok(found) => found,
            Err(_) => (folder, access),
        };
        Ok(VirtualFolder { folder, access })
    }

    /// The storage hosts as volumes (superadmins: they are infrastructure).
    async fn storage_volume_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        filter: Option<String>,
        order: Option<String>,
    ) -> crate::graphql::context::Result<StorageVolumeList> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        if filter.as_deref().is_some_and(|f| !f.trim().is_empty()) || order.is_some() {
            return Err(ApiError::bad_request(
                "Storage volumes are listed whole, by name: filter and order are not supported",
            )
            .into());
        }
        let all = volumes(state);
        let total_count = all.len() as u64;
        let items = all
            .into_iter()
            .skip(usize::try_from(offset.max(0)).unwrap_or(0))
            .take(usize::try_from(limit.clamp(0, 100)).unwrap_or(0))
            .collect();
        Ok(StorageVolumeList { items, total_count })
    }

    /// One storage host as a volume (superadmins); null when there is none of that name.
    async fn storage_volume(
        &self,
        ctx: &Context<'_>,
        id: String,
    ) -> crate::graphql::context::Result<Option<StorageVolume>> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        Ok(volumes(state).into_iter().find(|v| v.id == id))
    }

    /// Pending invitations the caller received (`sent`: those it sent).
    async fn vfolder_invitations(
        &self,
        ctx: &Context<'_>,
        sent: Option<bool>,
    ) -> crate::graphql::context::Result<Vec<VFolderInvitation>> {
        let (state, caller) = authed(ctx)?;
        let list =
            crate::storage::sharing::invitations(state, caller, sent.unwrap_or(false)).await?;
        Ok(list.into_iter().map(Into::into).collect())
    }

    /// Whom a folder is shared with (its owner only).
    async fn vfolder_shares(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<Vec<VFolderShare>> {
        let (state, caller) = authed(ctx)?;
        let list = crate::storage::sharing::shares(state, caller, id).await?;
        Ok(list
            .into_iter()
            .map(|s| VFolderShare {
                user: s.user,
                email: s.email,
                permission: s.permission.as_str().into(),
            })
            .collect())
    }

    /// Folders the caller can reach (superadmins: all; domain admins: their domain), in the
    /// trash too (`status` delete-pending). `group_id`: user folders and that project's;
    /// `filter` in Backend.AI's language over name, host, status, permission, ownership_type,
    /// usage_mode, created_at.
    async fn vfolder_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        order: Option<String>,
        group_id: Option<Uuid>,
        filter: Option<String>,
    ) -> crate::graphql::context::Result<VirtualFolderList> {
        let (state, caller) = authed(ctx)?;
        let mut select = crate::storage::visible(caller);
        if let Some(g) = group_id {
            select = crate::storage::with_project(select, g);
        }
        if let Some(f) = filter
            && let Some(f) = bai_core::filter::parse(&f, FILTERABLE)?
        {
            select = select.filter(crate::sql::condition(&f));
        }
        let (rows, total_count) = crate::graphql::context::paginate(
            &state.read,
            select,
            (limit, offset),
            order.as_deref(),
            &[
                ("name", vfolders::Column::Name),
                ("created_at", vfolders::Column::CreatedAt),
                ("host", vfolders::Column::Host),
            ],
            (vfolders::Column::Name, Order::Asc),
        )
        .await?;
        // The page's access, owners and projects: a few queries for the page, none per row.
        let access = crate::storage::access_of_page(state, caller, &rows).await?;
        crate::graphql::context::prime_names(
            ctx,
            &["items"],
            rows.iter().filter_map(|f| f.user),
            rows.iter().filter_map(|f| f.group),
        )
        .await?;
        let items = rows
            .into_iter()
            .map(|f| VirtualFolder {
                // Visible to an admin scope without membership: read.
                access: access.get(&f.id).copied().unwrap_or(Access::Read),
                folder: f,
            })
            .collect();
        Ok(VirtualFolderList { items, total_count })
    }

    /// Storage hosts the caller may create folders on.
    async fn vfolder_hosts(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<String>> {
        let (state, caller) = authed(ctx)?;
        let policy = crate::policies::of_caller(state, caller).await?;
        Ok(crate::storage::hosts(&state.config)
            .into_keys()
            .filter(|h| {
                policy
                    .allowed_vfolder_hosts
                    .get(h)
                    .and_then(|p| p.as_array())
                    .is_some_and(|p| p.iter().any(|x| x == "create-vfolder"))
            })
            .collect())
    }

    /// A directory's entries (`path` relative to the folder; empty = its top).
    async fn vfolder_files(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        path: Option<String>,
    ) -> crate::graphql::context::Result<Vec<VFolderFile>> {
        let (state, caller) = authed(ctx)?;
        let (folder, _) = crate::storage::find(state, caller, id).await?;
        let root = crate::storage::folder_root(&state.config, &folder)?;
        Ok(list_dir(state, root, path.unwrap_or_default()).await?)
    }
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateVFolderInput {
    pub name: String,
    /// Storage host (default: the first configured).
    pub host: Option<String>,
    /// Set for a group (project) folder; domain admins only.
    pub group: Option<Uuid>,
    /// ro, rw (default) or wd.
    pub permission: Option<String>,
    /// general (default), model or data.
    pub usage_mode: Option<String>,
    pub cloneable: Option<bool>,
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CloneVFolderInput {
    /// The new folder's name.
    pub name: String,
    /// Its storage host (default: the source's).
    pub host: Option<String>,
    pub usage_mode: Option<String>,
    pub permission: Option<String>,
    pub cloneable: Option<bool>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CloneVFolderResult {
    pub vfolder: VirtualFolder,
    /// The background task copying the files.
    pub task_id: Uuid,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct VFolderResult {
    pub ok: bool,
    pub msg: String,
    pub vfolder: Option<VirtualFolder>,
}

fn ok(msg: &str, vfolder: Option<VirtualFolder>) -> VFolderResult {
    VFolderResult {
        ok: true,
        msg: msg.into(),
        vfolder,
    }
}

#[derive(Default)]
pub struct StorageMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl StorageMutation {
    async fn create_vfolder(
        &self,
        ctx: &Context<'_>,
        props: CreateVFolderInput,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        let permission = props
            .permission
            .as_deref()
            .map(crate::storage::permission)
            .transpose()?
            .unwrap_or(VFolderPermission::ReadWrite);
        let usage_mode = props
            .usage_mode
            .as_deref()
            .map(crate::storage::usage_mode)
            .transpose()?
            .unwrap_or(VFolderUsageMode::General);
        let f = crate::storage::create(
            state,
            caller,
            crate::storage::NewFolder {
                name: props.name,
                host: props.host,
                group: props.group,
                permission,
                usage_mode,
                cloneable: props.cloneable.unwrap_or(false),
            },
        )
        .await?;
        Ok(ok(
            "created",
            Some(VirtualFolder {
                folder: f,
                access: Access::Owner,
            }),
        ))
    }

    async fn rename_vfolder(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        new_name: String,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        let (f, access) = crate::storage::rename(state, caller, id, &new_name).await?;
        Ok(ok("renamed", Some(VirtualFolder { folder: f, access })))
    }

    /// Moves a folder to the trash (its files stay until it is purged; `restore_vfolder`
    /// brings it back). `confirm_name` must be the folder's name.
    async fn delete_vfolder(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        confirm_name: String,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        crate::storage::delete(state, caller, id, &confirm_name).await?;
        Ok(ok("moved to the trash", None))
    }

    /// Brings a folder back from the trash (its owner).
    async fn restore_vfolder(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        crate::storage::restore(state, caller, id).await?;
        let (folder, access) = crate::storage::find(state, caller, id).await?;
        Ok(ok("restored", Some(VirtualFolder { folder, access })))
    }

    /// Deletes a folder in the trash for good, files and all (its owner, or an admin of its
    /// domain).
    async fn purge_vfolder(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        crate::storage::purge(state, caller, id).await?;
        Ok(ok("deleted for good", None))
    }

    /// Deletes for good every folder in the trash the caller may purge (its own; an admin's:
    /// its domain's). Returns how many.
    async fn empty_vfolder_trash(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<i32> {
        let (state, caller) = authed(ctx)?;
        let n = crate::storage::empty_trash(state, caller).await?;
        Ok(i32::try_from(n).unwrap_or(i32::MAX))
    }

    /// Changes whether a folder may be cloned and the permission its project's members mount
    /// it with (its owner).
    async fn update_vfolder_options(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        cloneable: Option<bool>,
        permission: Option<String>,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        let permission = permission
            .as_deref()
            .map(crate::storage::permission)
            .transpose()?;
        let folder =
            crate::storage::update_options(state, caller, id, cloneable, permission).await?;
        Ok(ok(
            "updated",
            Some(VirtualFolder {
                folder,
                access: Access::Owner,
            }),
        ))
    }

    /// Copies a cloneable folder into a new folder of the caller's, as a background task
    /// (follow `task_id` with `background_task`).
    async fn clone_vfolder(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        props: CloneVFolderInput,
    ) -> crate::graphql::context::Result<CloneVFolderResult> {
        let (state, caller) = authed(ctx)?;
        let req = crate::storage::clone::CloneRequest {
            name: props.name,
            host: props.host,
            usage_mode: props
                .usage_mode
                .as_deref()
                .map(crate::storage::usage_mode)
                .transpose()?
                .unwrap_or(VFolderUsageMode::General),
            permission: props
                .permission
                .as_deref()
                .map(crate::storage::permission)
                .transpose()?
                .unwrap_or(VFolderPermission::ReadWrite),
            cloneable: props.cloneable.unwrap_or(false),
        };
        let (folder, task) = crate::storage::clone::clone(
            state,
            &bai_services::store::Runtime::tasks(state),
            caller,
            id,
            req,
        )
        .await?;
        Ok(CloneVFolderResult {
            vfolder: VirtualFolder {
                folder,
                access: Access::Owner,
            },
            task_id: task,
        })
    }

    /// Moves a file or directory (into `dst` when it is a directory); never replaces.
    async fn move_vfolder_file(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        src: String,
        dst: String,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        crate::storage::move_file(state, caller, id, &src, &dst).await?;
        Ok(ok("moved", None))
    }

    /// Invites users of the folder's domain, by address, to share a user folder the caller
    /// owns with `permission` (ro, rw or wd). Returns the addresses invited (not those
    /// already sharing it or invited).
    async fn invite_to_vfolder(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        emails: Vec<String>,
        permission: String,
    ) -> crate::graphql::context::Result<Vec<String>> {
        let (state, caller) = authed(ctx)?;
        let p = crate::storage::permission(&permission)?;
        Ok(crate::storage::sharing::invite(state, caller, id, p, &emails).await?)
    }

    /// Accepts an invitation: the folder is shared with the caller.
    async fn accept_vfolder_invitation(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        let f = crate::storage::sharing::accept(state, caller, id).await?;
        let (folder, access) = crate::storage::find(state, caller, f.id).await?;
        Ok(ok("accepted", Some(VirtualFolder { folder, access })))
    }

    /// Rejects an invitation received, or cancels one sent.
    async fn decline_vfolder_invitation(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        crate::storage::sharing::decline(state, caller, id).await?;
        Ok(ok("declined", None))
    }

    /// Changes the permission of a pending invitation the caller sent.
    async fn update_vfolder_invitation(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        permission: String,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        let p = crate::storage::permission(&permission)?;
        crate::storage::sharing::update_invitation(state, caller, id, p).await?;
        Ok(ok("updated", None))
    }

    /// Leaves a folder shared with the caller.
    async fn leave_vfolder(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        crate::storage::sharing::leave(state, caller, id).await?;
        Ok(ok("left", None))
    }

    /// Changes the permission of a user a folder is shared with, or revokes the share (no
    /// `permission`): its owner.
    async fn set_vfolder_share(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        user: Uuid,
        permission: Option<String>,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        let p = permission
            .as_deref()
            .map(crate::storage::permission)
            .transpose()?;
        crate::storage::sharing::set_share(state, caller, id, user, p).await?;
        Ok(ok(if p.is_some() { "changed" } else { "revoked" }, None))
    }

    /// Gives project members a permission of their own on a project folder, or takes it back
    /// (no `permission`): admins of its domain. Returns the addresses changed.
    async fn share_vfolder_with_members(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        emails: Vec<String>,
        permission: Option<String>,
    ) -> crate::graphql::context::Result<Vec<String>> {
        let (state, caller) = authed(ctx)?;
        let p = permission
            .as_deref()
            .map(crate::storage::permission)
            .transpose()?;
        Ok(crate::storage::sharing::share_with_members(state, caller, id, p, &emails).await?)
    }

    async fn create_vfolder_directory(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        path: String,
        parents: Option<bool>,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        let parents = parents.unwrap_or(false);
        crate::storage::create_directory(state, caller, id, path, parents).await?;
        Ok(ok("created", None))
    }

    /// Renames a file or directory within its directory.
    async fn rename_vfolder_file(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        path: String,
        new_name: String,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        crate::storage::rename_file(state, caller, id, path, new_name).await?;
        Ok(ok("renamed", None))
    }

    /// Deletes files; directories need `recursive: true`.
    async fn delete_vfolder_files(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        paths: Vec<String>,
        recursive: Option<bool>,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        let recursive = recursive.unwrap_or(false);
        crate::storage::delete_files(state, caller, id, paths, recursive).await?;
        Ok(ok("deleted", None))
    }
}

#[derive(SimpleObject, Clone)]
#[graphql(rename_fields = "snake_case")]
pub struct VFolderChange {
    pub id: Uuid,
    pub name: String,
    pub action: crate::events::ChangeAction,
}

#[derive(Default)]
pub struct StorageSubscription;

#[async_graphql::Subscription(rename_fields = "snake_case")]
impl StorageSubscription {
    /// Folders the caller can see being created, renamed or deleted.
    async fn vfolder_changes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<impl futures_util::Stream<Item = VFolderChange>> {
        let (state, caller) = authed(ctx)?;
        let (state, caller) = (state.clone(), caller.clone());
        Ok(futures_util::StreamExt::filter_map(
            state.shared.events.stream(),
            move |ev| {
                let (state, caller) = (state.clone(), caller.clone());
                async move {
                    let crate::events::Event::Vfolder(e) = &*ev else {
                        return None;
                    };
                    let visible = crate::storage::sees_change(&state.read, &caller, e).await;
                    visible.then(|| VFolderChange {
                        id: e.id,
                        name: e.name.clone(),
                        action: e.action,
                    })
                }
            },
        ))
    }
}
