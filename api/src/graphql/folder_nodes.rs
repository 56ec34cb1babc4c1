//! Backend.AI 26's Relay shapes of storage folders, which Lablup's Web UI 26 lists folders
//! with: `vfolder_nodes(scope_id, permission, filter, order, offset, first)` answering a
//! connection of `VirtualFolderNode`s, `vfolder_node(id)`, and the newer `VFolder` type
//! (`vfolderV2(vfolderId)`). Who reaches which folder is the one rule of the storage service
//! (`crate::storage::find`): strangers get NOT_FOUND.
// Resolver arguments mirror Backend.AI's GraphQL signatures, however many there are.
#![allow(clippy::too_many_arguments)]
use async_graphql::{Context, Enum, ID, InputValueError, Object, Scalar, ScalarType, SimpleObject};
use chrono::{DateTime, Utc};
use entity::enums::{VFolderOwnershipType, VFolderStatus};
use entity::vfolders;
use sea_orm::{ColumnTrait, Order, QueryFilter};
use uuid::Uuid;

use crate::error::ApiError;
use crate::graphql::context::authed;
use crate::graphql::scalars::BigInt;
use crate::graphql::sessions::{GlobalIdField, Scope, ScopeField, global_id};
use crate::storage::Access;

/// Backend.AI's `VFolderPermissionValueField`: one of the permission words below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VFolderPermissionValueField(String);

#[Scalar(name = "VFolderPermissionValueField")]
impl ScalarType for VFolderPermissionValueField {
    fn parse(value: async_graphql::Value) -> async_graphql::InputValueResult<Self> {
        match value {
            async_graphql::Value::String(s) if ALL_PERMISSIONS.contains(&s.as_str()) => {
                Ok(VFolderPermissionValueField(s))
            }
            async_graphql::Value::String(s) => Err(InputValueError::custom(format!(
                "'{s}' is not a folder permission (one of: {})",
                ALL_PERMISSIONS.join(", ")
            ))),
            other => Err(InputValueError::expected_type(other)),
        }
    }
    fn to_value(&self) -> async_graphql::Value {
        async_graphql::Value::String(self.0.clone())
    }
}

const ALL_PERMISSIONS: &[&str] = &[
    "clone",
    "assign_permission_to_others",
    "read_attribute",
    "update_attribute",
    "delete_vfolder",
    "read_content",
    "write_content",
    "delete_content",
    "mount_ro",
    "mount_rw",
    "mount_wd",
];

/// What `access` lets the caller do with `folder`, in Backend.AI's words.
fn permissions(folder: &vfolders::Model, access: Access) -> Vec<&'static str> {
    let mut p = vec!["read_attribute", "read_content", "mount_ro"];
    if folder.cloneable || access == Access::Owner {
        p.push("clone");
    }
    if access >= Access::ReadWrite {
        p.extend(["write_content", "mount_rw"]);
    }
    if access >= Access::ReadWriteDelete {
        p.extend(["delete_content", "mount_wd"]);
    }
    if access == Access::Owner {
        p.extend([
            "update_attribute",
            "delete_vfolder",
            "assign_permission_to_others",
        ]);
    }
    p
}

/// Backend.AI's quota scope of a folder: `user:<uuid>` or `project:<uuid>`.
fn quota_scope_id(f: &vfolders::Model) -> Option<String> {
    match (f.user, f.group) {
        (Some(u), _) => Some(format!("user:{u}")),
        (None, Some(g)) => Some(format!("project:{g}")),
        _ => None,
    }
}

/// A folder as Backend.AI 24.03–26's `VirtualFolderNode`.
pub struct VirtualFolderNode {
    folder: vfolders::Model,
    access: Access,
}

#[Object(rename_fields = "snake_case")]
impl VirtualFolderNode {
    /// The Relay global id, `base64("VirtualFolderNode:<uuid>")`.
    pub(crate) async fn id(&self) -> ID {
        global_id("VirtualFolderNode", self.folder.id)
    }
    async fn row_id(&self) -> Uuid {
        self.folder.id
    }
    async fn host(&self) -> &str {
        &self.folder.host
    }
    async fn quota_scope_id(&self) -> Option<String> {
        quota_scope_id(&self.folder)
    }
    async fn name(&self) -> &str {
        &self.folder.name
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
    async fn creator(&self) -> Option<&str> {
        self.folder.creator.as_deref()
    }
    /// Backend.AI's unmanaged folders: bai has none (null).
    async fn unmanaged_path(&self) -> Option<String> {
        None
    }
    async fn usage_mode(&self) -> &str {
        self.folder.usage_mode.as_str()
    }
    /// What the caller may do with the content: ro, rw or wd.
    async fn permission(&self) -> &str {
        self.access.as_permission().as_str()
    }
    async fn ownership_type(&self) -> &str {
        self.folder.ownership_type.as_str()
    }
    async fn max_files(&self) -> i32 {
        self.folder.max_files
    }
    async fn max_size(&self) -> Option<BigInt> {
        self.folder.max_size.map(BigInt)
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.folder.created_at
    }
    async fn last_used(&self) -> Option<DateTime<Utc>> {
        self.folder.last_used
    }
    /// Files in the folder, as last measured.
    async fn num_files(&self) -> i64 {
        self.folder.num_files
    }
    /// Bytes used, as last measured.
    async fn cur_size(&self) -> BigInt {
        BigInt(self.folder.cur_size)
    }
    async fn cloneable(&self) -> bool {
        self.folder.cloneable
    }
    async fn status(&self) -> &str {
        self.folder.status.as_str()
    }
    /// What the caller may do with the folder, in Backend.AI's permission words.
    async fn permissions(&self) -> Vec<VFolderPermissionValueField> {
        permissions(&self.folder, self.access)
            .into_iter()
            .map(|p| VFolderPermissionValueField(p.to_string()))
            .collect()
    }
}

#[derive(SimpleObject)]
pub struct VirtualFolderEdge {
    node: VirtualFolderNode,
    cursor: String,
}

#[derive(SimpleObject)]
pub struct VirtualFolderConnection {
    count: u64,
    edges: Vec<VirtualFolderEdge>,
}

/// Backend.AI 26's `VFolderOperationStatus`.
#[derive(Enum, Copy, Clone, PartialEq, Eq)]
#[graphql(name = "VFolderOperationStatus")]
pub enum VFolderOperationStatus {
    Ready,
    Cloning,
    DeletePending,
    DeleteOngoing,
    DeleteComplete,
    DeleteError,
}

impl From<VFolderStatus> for VFolderOperationStatus {
    fn from(s: VFolderStatus) -> Self {
        match s {
            VFolderStatus::Ready | VFolderStatus::Mounted => Self::Ready,
            VFolderStatus::Performing => Self::Cloning,
            VFolderStatus::Error => Self::DeleteError,
            VFolderStatus::DeletePending => Self::DeletePending,
            VFolderStatus::DeleteOngoing => Self::DeleteOngoing,
            VFolderStatus::DeleteComplete => Self::DeleteComplete,
        }
    }
}

#[derive(SimpleObject)]
#[graphql(name = "VFolderMetadataInfo")]
pub struct VFolderMetadataInfo {
    name: String,
    usage_mode: String,
    quota_scope_id: Option<String>,
    created_at: DateTime<Utc>,
    last_used: Option<DateTime<Utc>>,
    cloneable: bool,
}

#[derive(SimpleObject)]
#[graphql(name = "VFolderAccessControlInfo")]
pub struct VFolderAccessControlInfo {
    /// What the caller may do with the content: ro, rw or wd.
    permission: String,
    ownership_type: String,
}

#[derive(SimpleObject)]
#[graphql(name = "VFolderOwnershipInfo")]
pub struct VFolderOwnershipInfo {
    user_id: Option<Uuid>,
    project_id: Option<Uuid>,
    creator_email: Option<String>,
}

/// A folder as Backend.AI 26's `VFolder`.
pub struct VFolder {
    folder: vfolders::Model,
    access: Access,
}

#[Object(name = "VFolder")]
impl VFolder {
    /// The Relay global id, `base64("VFolder:<uuid>")`.
    pub(crate) async fn id(&self) -> ID {
        global_id("VFolder", self.folder.id)
    }
    async fn status(&self) -> VFolderOperationStatus {
        self.folder.status.into()
    }
    async fn host(&self) -> &str {
        &self.folder.host
    }
    async fn metadata(&self) -> VFolderMetadataInfo {
        VFolderMetadataInfo {
            name: self.folder.name.clone(),
            usage_mode: self.folder.usage_mode.as_str().to_uppercase(),
            quota_scope_id: quota_scope_id(&self.folder),
            created_at: self.folder.created_at,
            last_used: self.folder.last_used,
            cloneable: self.folder.cloneable,
        }
    }
    async fn access_control(&self) -> VFolderAccessControlInfo {
        VFolderAccessControlInfo {
            permission: self.access.as_permission().as_str().to_string(),
            ownership_type: match self.folder.ownership_type {
                VFolderOwnershipType::User => "USER",
                VFolderOwnershipType::Group => "GROUP",
            }
            .to_string(),
        }
    }
    async fn ownership(&self) -> VFolderOwnershipInfo {
        VFolderOwnershipInfo {
            user_id: self.folder.user,
            project_id: self.folder.group,
            creator_email: self.folder.creator.clone(),
        }
    }
    /// Backend.AI's unmanaged folders: bai has none (null).
    async fn unmanaged_path(&self) -> Option<String> {
        None
    }
}

/// Folders matching Backend.AI's filter; status values may be Backend.AI 26's names
/// (`DELETE_PENDING`), read as bai's words (`delete-pending`).
fn filtered(
    select: sea_orm::Select<vfolders::Entity>,
    filter: Option<String>,
) -> Result<sea_orm::Select<vfolders::Entity>, ApiError> {
    let Some(f) = filter else {
        return Ok(select);
    };
    let Some(mut f) = bai_core::filter::parse(&f, crate::graphql::storage::FILTERABLE)? else {
        return Ok(select);
    };
    f.map_values(&|c| matches!(c, vfolders::Column::Status), &|v| {
        v.to_lowercase().replace('_', "-")
    });
    Ok(select.filter(crate::sql::condition(&f)))
}

/// The caller's folders in `scope`: `project:<uuid>` its own and that project's,
/// `user:<uuid>` those of that user, `domain:<name>` that domain's.
fn scoped(
    select: sea_orm::Select<vfolders::Entity>,
    scope: Option<Scope>,
) -> sea_orm::Select<vfolders::Entity> {
    match scope {
        None => select,
        Some(Scope::Project(g)) => crate::storage::with_project(select, g),
        Some(Scope::User(u)) => select.filter(vfolders::Column::User.eq(u)),
        Some(Scope::Domain(d)) => select.filter(vfolders::Column::DomainName.eq(d)),
    }
}

/// `permission` when it is one every reachable folder grants; the others are refused.
fn readable_only(permission: Option<&VFolderPermissionValueField>) -> Result<(), ApiError> {
    match permission.map(|p| p.0.as_str()) {
        None | Some("read_attribute" | "read_content" | "mount_ro") => Ok(()),
        Some(other) => Err(ApiError::bad_request(format!(
            "listing folders by the '{other}' permission is not supported by this server \
             (read_attribute, read_content and mount_ro are)"
        ))),
    }
}

#[derive(Default)]
pub struct FolderNodeQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl FolderNodeQuery {
    /// The folders the caller reaches in `scope_id`, filtered and ordered in Backend.AI's
    /// languages (`first: 0` answers the count alone).
    async fn vfolder_nodes(
        &self,
        ctx: &Context<'_>,
        scope_id: Option<ScopeField>,
        #[graphql(desc = "Backend.AI's older form of `scope_id: \"project:<uuid>\"`")]
        project_id: Option<Uuid>,
        permission: Option<VFolderPermissionValueField>,
        filter: Option<String>,
        order: Option<String>,
        offset: Option<i32>,
        first: Option<i32>,
        #[graphql(desc = "accepted; pages go by offset")] _before: Option<String>,
        #[graphql(desc = "accepted; pages go by offset")] _after: Option<String>,
        #[graphql(desc = "accepted; pages go by offset")] _last: Option<i32>,
    ) -> crate::graphql::context::Result<VirtualFolderConnection> {
        let (state, caller) = authed(ctx)?;
        readable_only(permission.as_ref())?;
        let scope = ScopeField::resolve(scope_id.as_ref(), project_id)?;
        let select = scoped(crate::storage::accessible(caller), scope);
        let select = filtered(select, filter)?;
        let count = {
            use sea_orm::PaginatorTrait;
            select
                .clone()
                .count(&state.read)
                .await
                .map_err(ApiError::from)?
        };
        let first = first.unwrap_or(20);
        if first <= 0 {
            return Ok(VirtualFolderConnection {
                count,
                edges: Vec::new(),
            });
        }
        let rows = crate::graphql::context::page_rows(
            &state.read,
            select,
            (first, offset.unwrap_or(0)),
            order.as_deref(),
            &[
                ("name", vfolders::Column::Name),
                ("created_at", vfolders::Column::CreatedAt),
                ("last_used", vfolders::Column::LastUsed),
                ("host", vfolders::Column::Host),
                ("status", vfolders::Column::Status),
                ("usage_mode", vfolders::Column::UsageMode),
                ("ownership_type", vfolders::Column::OwnershipType),
                ("permission", vfolders::Column::Permission),
                ("creator", vfolders::Column::Creator),
                ("num_files", vfolders::Column::NumFiles),
                ("cur_size", vfolders::Column::CurSize),
            ],
            (vfolders::Column::CreatedAt, Order::Desc),
        )
        .await?;
        // The page's access, owners and projects: a few queries for the page, none per row.
        let access = crate::storage::access_of_page(state, caller, &rows).await?;
        crate::graphql::context::prime_names(
            ctx,
            &["edges", "node"],
            rows.iter().filter_map(|f| f.user),
            rows.iter().filter_map(|f| f.group),
        )
        .await?;
        let edges = rows
            .into_iter()
            .filter_map(|folder| {
                let access = access.get(&folder.id).copied()?;
                Some(VirtualFolderEdge {
                    cursor: folder.id.to_string(),
                    node: VirtualFolderNode { folder, access },
                })
            })
            .collect();
        Ok(VirtualFolderConnection { count, edges })
    }

    /// One folder by its global id (or its UUID), if the caller reaches it.
    async fn vfolder_node(
        &self,
        ctx: &Context<'_>,
        id: String,
    ) -> crate::graphql::context::Result<VirtualFolderNode> {
        let (state, caller) = authed(ctx)?;
        let raw = GlobalIdField(id.clone()).local();
        let uuid = raw
            .parse::<Uuid>()
            .map_err(|_| ApiError::not_found("folder", &id))?;
        let (folder, access) = crate::storage::find(state, caller, uuid).await?;
        Ok(VirtualFolderNode { folder, access })
    }

    /// Backend.AI 26's `vfolderV2`: one folder, if the caller reaches it.
    #[graphql(name = "vfolderV2")]
    async fn vfolder_v2(
        &self,
        ctx: &Context<'_>,
        #[graphql(name = "vfolderId")] vfolder_id: Uuid,
    ) -> crate::graphql::context::Result<VFolder> {
        let (state, caller) = authed(ctx)?;
        let (folder, access) = crate::storage::find(state, caller, vfolder_id).await?;
        Ok(VFolder { folder, access })
    }
}
