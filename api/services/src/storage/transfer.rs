//! Uploads and downloads the Backend.AI way (its storage proxy's flow, served by bai itself):
//! `request-upload` / `request-download` give a token, kept only by its SHA-256 and bound to its
//! folder, path and user; the transfer itself (tus `PATCH` for uploads, ranged `GET` for
//! downloads) presents it. Every use checks again that the user is active and may still write
//! (or read) the folder, so a revoked share or a deactivated account ends its tokens. An
//! upload's token ends when its file is in place (single use, as Backend.AI's); a download's
//! serves ranges until it expires. Upload bytes are staged beside the storage host's folders
//! (`<host>/.bai-uploads`, outside every folder a container mounts) and moved into place
//! through directory handles.
use std::path::PathBuf;

use entity::enums::UserStatus;
use entity::{users, vfolder_transfers, vfolders};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use super::access::{Access, find, folder_root, require_ready};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::Store;

/// How long a transfer token lives.
pub const TOKEN_TTL: chrono::Duration = chrono::Duration::hours(24);
/// The largest file one upload declares.
pub const MAX_UPLOAD: u64 = 1 << 40;
/// The most uploads one user has under way at once.
pub const MAX_OPEN_UPLOADS: u64 = 64;

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Upload,
    Download,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Upload => "upload",
            Op::Download => "download",
        }
    }
}

/// A transfer, as its token proves it.
pub struct Transfer {
    pub row: vfolder_transfers::Model,
    pub folder: vfolders::Model,
    pub root: PathBuf,
    /// The server's own directory for staged uploads on the folder's storage host.
    pub staging: PathBuf,
}

/// The staging directory of a folder's storage host.
fn staging_of(store: &impl Store, f: &vfolders::Model) -> ApiResult<PathBuf> {
    super::access::hosts(store.config())
        .remove(&f.host)
        .map(|h| h.join(".bai-uploads"))
        .ok_or_else(|| ApiError::internal("locating uploads", format!("no host {}", f.host)))
}

/// Room left under the caller's policy size limit for folder `f`, if it has one: an error
/// naming the figures when `adding` bytes, beside what uploads under way declared, would pass
/// it.
pub async fn check_room(
    store: &impl Store,
    caller: &Caller,
    f: &vfolders::Model,
    adding: u64,
) -> ApiResult<()> {
    let max = crate::policies::of_caller(store, caller)
        .await?
        .max_vfolder_size;
    let Ok(max) = u64::try_from(max) else {
        return Ok(());
    };
    if max == 0 {
        return Ok(());
    }
    let (used, _) = super::usage::usage(store, f).await?;
    let coming: i64 = vfolder_transfers::Entity::find()
        .filter(vfolder_transfers::Column::Vfolder.eq(f.id))
        .filter(vfolder_transfers::Column::Op.eq(Op::Upload.as_str()))
        .filter(vfolder_transfers::Column::ExpiresAt.gt(store.clock().now()))
        .all(store.db())
        .await?
        .iter()
        .map(|t| t.size)
        .sum();
    let coming = u64::try_from(coming).unwrap_or(0);
    if used.saturating_add(coming).saturating_add(adding) > max {
        let under_way = if coming > 0 {
            format!(" and uploads under way declared {coming} more")
        } else {
            String::new()
        };
        return Err(ApiError::bad_request(format!(
            "The folder '{}' holds {used} bytes{under_way}; {adding} more would pass the size limit of your resource policy ({max} bytes)",
            f.name
        )));
    }
    Ok(())
}

/// A token to upload `size` bytes to `path` of folder `id` (read-write access; checked against
/// the size limit first). An empty file is put in place at once: Backend.AI's client sends no
/// bytes for it.
pub async fn request_upload(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    path: &str,
    size: u64,
) -> ApiResult<String> {
    let (f, access) = find(store, caller, id).await?;
    access.require(Access::ReadWrite, "upload files")?;
    require_ready(&f)?;
    if bai_core::path::components(path)?.is_empty() {
        return Err(ApiError::bad_request("Give the path of the file to upload"));
    }
    if size > MAX_UPLOAD {
        return Err(ApiError::bad_request(format!(
            "A file of {size} bytes is larger than one upload takes ({MAX_UPLOAD} bytes)"
        )));
    }
    let open = sea_orm::PaginatorTrait::count(
        vfolder_transfers::Entity::find()
            .filter(vfolder_transfers::Column::User.eq(caller.uuid))
            .filter(vfolder_transfers::Column::Op.eq(Op::Upload.as_str()))
            .filter(vfolder_transfers::Column::ExpiresAt.gt(store.clock().now())),
        store.db(),
    )
    .await?;
    if open >= MAX_OPEN_UPLOADS {
        return Err(ApiError::new(
            crate::error::ErrorCode::RateLimited,
            format!(
                "You have {open} uploads under way, the most at once: finish them or wait until they expire"
            ),
        ));
    }
    check_room(store, caller, &f, size).await?;
    let root = folder_root(store.config(), &f)?;
    if size == 0 {
        let up = store.storage().write(&root, path).await?;
        up.commit().await?;
    }
    issue(store, caller, &f, Op::Upload, path, size).await
}

/// A token to download `path` of folder `id` (read access).
pub async fn request_download(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    path: &str,
) -> ApiResult<String> {
    let (f, _) = find(store, caller, id).await?;
    require_ready(&f)?;
    let root = folder_root(store.config(), &f)?;
    match store.storage().kind(&root, path).await? {
        None => return Err(ApiError::not_found("file", path)),
        Some(bai_storage::fsat::Kind::File) | Some(bai_storage::fsat::Kind::Directory) => {}
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "'{path}' is not a regular file or directory"
            )));
        }
    }
    issue(store, caller, &f, Op::Download, path, 0).await
}

async fn issue(
    store: &impl Store,
    caller: &Caller,
    f: &vfolders::Model,
    op: Op,
    path: &str,
    size: u64,
) -> ApiResult<String> {
    let token = crate::auth::tokens::new_token();
    let now = store.clock().now();
    vfolder_transfers::ActiveModel {
        token_hash: Set(crate::auth::tokens::hash_token(&token)),
        op: Set(op.as_str().into()),
        vfolder: Set(f.id),
        user: Set(caller.uuid),
        path: Set(path.to_string()),
        size: Set(i64::try_from(size).unwrap_or(i64::MAX)),
        created_at: Set(now),
        expires_at: Set(now + TOKEN_TTL),
    }
    .insert(store.db())
    .await?;
    Ok(token)
}

/// The transfer `token` proves for `op`; NOT_FOUND for an unknown, expired or used token, or
/// once its user may no longer use the folder.
pub async fn redeem(store: &impl Store, token: &str, op: Op) -> ApiResult<Transfer> {
    let gone = || ApiError::not_found("upload or download session", "of this token");
    let row = vfolder_transfers::Entity::find_by_id(crate::auth::tokens::hash_token(token))
        .one(store.db())
        .await?
        .filter(|r| r.op == op.as_str() && r.expires_at > store.clock().now())
        .ok_or_else(gone)?;
    let user = users::Entity::find_by_id(row.user)
        .one(store.db())
        .await?
        .filter(|u| u.status == UserStatus::Active)
        .ok_or_else(gone)?;
    let caller = Caller::of_user(user, None, None);
    let (folder, access) = find(store, &caller, row.vfolder)
        .await
        .map_err(|_| gone())?;
    if op == Op::Upload {
        access.require(Access::ReadWrite, "upload files")?;
    }
    require_ready(&folder)?;
    let root = folder_root(store.config(), &folder)?;
    let staging = staging_of(store, &folder)?;
    Ok(Transfer {
        row,
        folder,
        root,
        staging,
    })
}

impl Transfer {
    /// The staged upload's name in the staging directory.
    pub fn staged_name(&self) -> &str {
        &self.row.token_hash
    }

    /// The declared size of an upload.
    pub fn size(&self) -> u64 {
        u64::try_from(self.row.size).unwrap_or(0)
    }

    /// Where the upload goes: its path, beneath `dst_dir` when the client names one.
    pub fn target(&self, dst_dir: Option<&str>) -> ApiResult<String> {
        let mut parts = match dst_dir {
            Some(d) => bai_core::path::components(d)?,
            None => Vec::new(),
        };
        parts.extend(bai_core::path::components(&self.row.path)?);
        Ok(parts.join("/"))
    }

    /// Puts a finished upload in place, ends its token and measures the folder again.
    pub async fn finish(&self, store: &impl Store, dst_dir: Option<&str>) -> ApiResult<()> {
        let target = self.target(dst_dir)?;
        if let Some((parent, _)) = target.rsplit_once('/') {
            store.storage().mkdir(&self.root, parent, true).await?;
        }
        store
            .storage()
            .adopt(&self.root, &self.staging, self.staged_name(), &target)
            .await?;
        self.end(store).await?;
        super::usage::add_usage(store, self.folder.id, self.size(), 1).await
    }

    /// Ends the token (and drops what was staged).
    pub async fn end(&self, store: &impl Store) -> ApiResult<()> {
        store
            .storage()
            .unstage(&self.staging, self.staged_name())
            .await;
        vfolder_transfers::Entity::delete_by_id(self.row.token_hash.clone())
            .exec(store.db())
            .await?;
        Ok(())
    }
}

/// Ends every transfer of folder `f` and drops what they staged (the folder is purged).
pub async fn forget_folder(store: &impl Store, f: &vfolders::Model) -> ApiResult<()> {
    let rows = vfolder_transfers::Entity::find()
        .filter(vfolder_transfers::Column::Vfolder.eq(f.id))
        .all(store.db())
        .await?;
    if let Ok(staging) = staging_of(store, f) {
        for row in &rows {
            store.storage().unstage(&staging, &row.token_hash).await;
        }
    }
    vfolder_transfers::Entity::delete_many()
        .filter(vfolder_transfers::Column::Vfolder.eq(f.id))
        .exec(store.db())
        .await?;
    Ok(())
}

/// Forgets expired tokens and what they staged (the leader's sweep).
pub async fn expire(store: &impl Store) -> ApiResult<()> {
    let old = vfolder_transfers::Entity::find()
        .filter(vfolder_transfers::Column::ExpiresAt.lte(store.clock().now()))
        .all(store.db())
        .await?;
    for row in old {
        if let Some(f) = vfolders::Entity::find_by_id(row.vfolder)
            .one(store.db())
            .await?
            && let Ok(staging) = staging_of(store, &f)
        {
            store.storage().unstage(&staging, &row.token_hash).await;
        }
        vfolder_transfers::Entity::delete_by_id(row.token_hash)
            .exec(store.db())
            .await?;
    }
    Ok(())
}
