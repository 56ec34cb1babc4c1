//! Cloning a folder: a cloneable folder the caller can read is copied into a new folder of the
//! caller's, as a background task with progress (Backend.AI's `clone`). The size limit is
//! checked before anything is made; the copy takes directories and regular files and never
//! follows or copies a link (`fsat::Folder::copy_into`). The new folder is `performing`
//! (mounted nowhere) until the copy ends, then `ready`, or `error` if it failed.
use entity::enums::{VFolderPermission, VFolderStatus, VFolderUsageMode};
use entity::vfolders;
use sea_orm::{ActiveModelTrait, IntoActiveModel, Set};
use uuid::Uuid;

use super::{NewFolder, find, folder_root, require_ready};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::Store;

pub struct CloneRequest {
    pub name: String,
    pub host: Option<String>,
    pub usage_mode: VFolderUsageMode,
    pub permission: VFolderPermission,
    pub cloneable: bool,
}

/// Starts copying folder `id` into a new folder of the caller's; returns the new folder and
/// the background task that copies.
pub async fn clone<S: Store + Clone + 'static>(
    store: &S,
    tasks: &crate::bgtasks::Tasks,
    caller: &Caller,
    id: Uuid,
    req: CloneRequest,
) -> ApiResult<(vfolders::Model, Uuid)> {
    let (src, _) = find(store, caller, id).await?;
    require_ready(&src)?;
    if !src.cloneable {
        return Err(ApiError::forbidden(format!(
            "The folder '{}' does not allow cloning (its owner may allow it)",
            src.name
        )));
    }
    let (bytes, _) = super::usage(store, &src).await?;
    let max = crate::policies::of_caller(store, caller)
        .await?
        .max_vfolder_size;
    if let Ok(max) = u64::try_from(max)
        && max > 0
        && bytes > max
    {
        return Err(ApiError::bad_request(format!(
            "The folder '{}' holds {bytes} bytes, more than the size limit of your resource policy ({max} bytes)",
            src.name
        )));
    }
    let made = super::create(
        store,
        caller,
        NewFolder {
            name: req.name,
            host: req.host.or_else(|| Some(src.host.clone())),
            group: None,
            permission: req.permission,
            usage_mode: req.usage_mode,
            cloneable: req.cloneable,
        },
    )
    .await?;
    let mut m = made.clone().into_active_model();
    m.status = Set(VFolderStatus::Performing);
    let made = m.update(store.db()).await?;
    let (from, to) = (
        folder_root(store.config(), &src)?,
        folder_root(store.config(), &made)?,
    );
    // The copy stops where the size limit would pass, should the source grow meanwhile.
    let limit = u64::try_from(max)
        .ok()
        .filter(|m| *m > 0)
        .unwrap_or(u64::MAX);
    let (st, target) = (store.clone(), made.clone());
    let task = crate::bgtasks::spawn(tasks, "clone_vfolder", caller.uuid, move |p| async move {
        p.update(0, bytes, format!("copying '{}'", src.name));
        let progress = p.clone();
        let copied = st
            .storage()
            .copy(
                &from,
                &to,
                limit,
                Box::new(move |done| progress.update(done, bytes, "copying")),
            )
            .await;
        let status = if copied.is_ok() {
            VFolderStatus::Ready
        } else {
            VFolderStatus::Error
        };
        let mut m = target.clone().into_active_model();
        m.status = Set(status);
        let updated = m.update(st.db()).await.map_err(|e| e.to_string())?;
        let _ = super::measure(&st, &updated).await;
        super::publish(&st, &updated, crate::events::ChangeAction::Modified);
        match copied {
            Ok((b, n)) => Ok(format!(
                "cloned into '{}': {n} files, {b} bytes",
                updated.name
            )),
            Err(e) => Err(format!(
                "cloning into '{}' failed: {}",
                updated.name, e.message
            )),
        }
    });
    Ok((made, task))
}
