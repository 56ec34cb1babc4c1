//! GraphQL for storage folders: `vfolder`, `vfolder_list`, `vfolder_hosts`, `vfolder_files`,
//! `create_vfolder`, `rename_vfolder`, `delete_vfolder` (the name must be typed as
//! confirmation), `create_vfolder_directory`, `rename_vfolder_file`, `delete_vfolder_files`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::{VFolderPermission, VFolderUsageMode};
use entity::{groups, users, vfolders};
use sea_orm::{ColumnTrait, EntityTrait, Order, QueryFilter};
use uuid::Uuid;

use crate::auth::ReadScope;
use crate::error::{ApiError, ApiResult};
use crate::graphql::{context::authed, context::state, scalars::BigInt};
use crate::storage::Access;

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
        let Some(u) = self.folder.user else {
            return Ok(None);
        };
        Ok(users::Entity::find_by_id(u)
            .one(&state(ctx)?.db)
            .await
            .map_err(ApiError::from)?
            .map(|u| u.email))
    }
    async fn group(&self) -> Option<Uuid> {
        self.folder.group
    }
    async fn group_name(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<String>> {
        let Some(g) = self.folder.group else {
            return Ok(None);
        };
        Ok(groups::Entity::find_by_id(g)
            .one(&state(ctx)?.db)
            .await
            .map_err(ApiError::from)?
            .map(|g| g.name))
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
    /// Bytes used (measured now).
    async fn cur_size(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<BigInt> {
        let state = state(ctx)?;
        let root = crate::storage::folder_root(&state.config, &self.folder)?;
        Ok(BigInt(
            i64::try_from(state.storage.usage(&root).await.0).unwrap_or(i64::MAX),
        ))
    }
    /// Files in the folder (measured now).
    async fn num_files(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<BigInt> {
        let state = state(ctx)?;
        let root = crate::storage::folder_root(&state.config, &self.folder)?;
        Ok(BigInt(
            i64::try_from(state.storage.usage(&root).await.1).unwrap_or(i64::MAX),
        ))
    }
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

fn mode_string(mode: u32) -> String {
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
            mode: mode_string(e.mode),
        })
        .collect();
    out.sort_by(|a, b| {
        (b.file_type == "DIRECTORY")
            .cmp(&(a.file_type == "DIRECTORY"))
            .then(a.name.cmp(&b.name))
    });
    Ok(out)
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
        Ok(VirtualFolder { folder, access })
    }

    /// Folders the caller can reach (superadmins: all; domain admins: their domain).
    async fn vfolder_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        order: Option<String>,
    ) -> crate::graphql::context::Result<VirtualFolderList> {
        let (state, caller) = authed(ctx)?;
        let select = match caller.read_scope() {
            ReadScope::Admin(scope) => match scope.domain() {
                None => vfolders::Entity::find(),
                Some(d) => vfolders::Entity::find().filter(vfolders::Column::DomainName.eq(d)),
            },
            ReadScope::Own { .. } => crate::storage::accessible(caller),
        };
        let (rows, total_count) = crate::graphql::context::paginate(
            &state.db,
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
        let mut items = Vec::new();
        for f in rows {
            let access = match crate::storage::find(state, caller, f.id).await {
                Ok((_, a)) => a,
                Err(_) => Access::Read, // visible to an admin scope without membership
            };
            items.push(VirtualFolder { folder: f, access });
        }
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
        let permission = match props.permission.as_deref() {
            None => VFolderPermission::ReadWrite,
            Some(p) => VFolderPermission::parse(p).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "invalid permission '{p}' (one of: {})",
                    VFolderPermission::choices()
                ))
            })?,
        };
        let usage_mode = match props.usage_mode.as_deref() {
            None => VFolderUsageMode::General,
            Some(m) => VFolderUsageMode::parse(m).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "invalid usage mode '{m}' (one of: {})",
                    VFolderUsageMode::choices()
                ))
            })?,
        };
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

    /// Deletes a folder and its files. `confirm_name` must be the folder's name.
    async fn delete_vfolder(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        confirm_name: String,
    ) -> crate::graphql::context::Result<VFolderResult> {
        let (state, caller) = authed(ctx)?;
        crate::storage::delete(state, caller, id, &confirm_name).await?;
        Ok(ok("deleted", None))
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
                    let visible = e.user == Some(caller.uuid)
                        || caller
                            .admin_scope()
                            .is_some_and(|s| s.covers_domain(&e.domain))
                        || match e.group {
                            Some(g) => crate::groups::is_member(&state.db, caller.uuid, g)
                                .await
                                .unwrap_or(false),
                            None => false,
                        };
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
