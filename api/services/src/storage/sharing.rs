//! Sharing folders with people, the Backend.AI way: the owner of a user folder invites users
//! of its domain by e-mail with a permission; an invitee accepts (a `vfolder_permissions` row
//! is made, and the folder mounts with that permission) or rejects; the inviter cancels or
//! changes a pending invitation, changes or revokes a share; an invitee leaves. Admins give
//! project members a permission of their own on a project folder (`share` / `unshare`).
//! Strangers get NOT_FOUND for every folder and invitation that is not theirs.
use entity::enums::{InvitationState, UserStatus, VFolderOwnershipType, VFolderPermission};
use entity::{users, vfolder_invitations, vfolder_permissions, vfolders};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, Set,
};
use serde_json::json;
use uuid::Uuid;

use super::{Access, find, require_ready};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::Store;

/// At most this many addresses in one invitation or share.
const MAX_EMAILS: usize = 100;

/// An invitation as its inviter and invitee see it.
#[derive(Debug, Clone)]
pub struct Invitation {
    pub id: Uuid,
    pub vfolder_id: Uuid,
    pub vfolder_name: String,
    pub inviter: String,
    pub invitee: String,
    pub permission: VFolderPermission,
    pub state: InvitationState,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub modified_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A user a folder is shared with.
#[derive(Debug, Clone)]
pub struct Share {
    pub user: Uuid,
    pub email: String,
    pub permission: VFolderPermission,
}

fn check_emails(emails: &[String]) -> ApiResult<Vec<String>> {
    if emails.len() > MAX_EMAILS {
        return Err(ApiError::bad_request(format!(
            "At most {MAX_EMAILS} addresses at once"
        )));
    }
    Ok(emails
        .iter()
        .map(|e| e.trim().to_ascii_lowercase())
        .collect())
}

/// The folder the caller owns as a user folder (invitations are the owner's). NOT_FOUND for
/// every other, those it may use included: as Backend.AI, the folder to invite people to is
/// looked up among the caller's own user folders (its tester expects 404 when an invitee
/// invites to a folder shared with them).
async fn owned(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<vfolders::Model> {
    let (f, access) = find(store, caller, id).await?;
    if access != Access::Owner || f.user != Some(caller.uuid) {
        return Err(ApiError::not_found("user folder of yours", &f.name));
    }
    require_ready(&f)?;
    if super::is_automount(&f.name) {
        return Err(ApiError::forbidden(
            "Dot-named (automount) folders are private and cannot be shared",
        ));
    }
    Ok(f)
}

/// Invites the active users with these addresses in the folder's domain (never the caller) to
/// folder `id` with `permission`; those already sharing it or already invited are left out.
/// Returns the addresses given (but the caller's own): whether an address belongs to an
/// account is never told.
pub async fn invite(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    permission: VFolderPermission,
    emails: &[String],
) -> ApiResult<Vec<String>> {
    let f = owned(store, caller, id).await?;
    let mut emails = check_emails(emails)?;
    emails.retain(|e| !e.is_empty() && *e != caller.email.to_ascii_lowercase());
    emails.sort();
    emails.dedup();
    let invitees = users::Entity::find()
        .filter(users::Column::Email.is_in(emails.clone()))
        .filter(users::Column::Status.eq(UserStatus::Active))
        .filter(users::Column::DomainName.eq(&f.domain_name))
        .filter(users::Column::Uuid.ne(caller.uuid))
        .all(store.db())
        .await?;
    let now = store.clock().now();
    for u in invitees {
        let shared = vfolder_permissions::Entity::find_by_id((f.id, u.uuid))
            .one(store.db())
            .await?
            .is_some();
        let pending = vfolder_invitations::Entity::find()
            .filter(vfolder_invitations::Column::Vfolder.eq(f.id))
            .filter(vfolder_invitations::Column::Invitee.eq(u.uuid))
            .filter(vfolder_invitations::Column::State.eq(InvitationState::Pending))
            .one(store.db())
            .await?
            .is_some();
        if shared || pending {
            continue;
        }
        let m = vfolder_invitations::ActiveModel {
            id: Set(Uuid::new_v4()),
            vfolder: Set(f.id),
            inviter: Set(caller.uuid),
            invitee: Set(u.uuid),
            permission: Set(permission),
            state: Set(InvitationState::Pending),
            created_at: Set(now),
            modified_at: Set(None),
        };
        let detail =
            json!({"vfolder": f.id, "invitee": u.email, "permission": permission.as_str()});
        crate::audit::audited(
            store,
            &caller.email,
            "invite_vfolder",
            "vfolder",
            move |txn| {
                Box::pin(async move {
                    let i = m.insert(txn).await?;
                    Ok(((), i.id.to_string(), detail))
                })
            },
        )
        .await?;
    }
    Ok(emails)
}

async fn described(
    store: &impl Store,
    rows: Vec<vfolder_invitations::Model>,
) -> ApiResult<Vec<Invitation>> {
    let mut out = Vec::with_capacity(rows.len());
    for i in rows {
        let email = |u: Option<users::Model>| u.map(|u| u.email).unwrap_or_default();
        let inviter = email(
            users::Entity::find_by_id(i.inviter)
                .one(store.read())
                .await?,
        );
        let invitee = email(
            users::Entity::find_by_id(i.invitee)
                .one(store.read())
                .await?,
        );
        let name = vfolders::Entity::find_by_id(i.vfolder)
            .one(store.read())
            .await?
            .map(|f| f.name)
            .unwrap_or_default();
        out.push(Invitation {
            id: i.id,
            vfolder_id: i.vfolder,
            vfolder_name: name,
            inviter,
            invitee,
            permission: i.permission,
            state: i.state,
            created_at: i.created_at,
            modified_at: i.modified_at,
        });
    }
    Ok(out)
}

/// The pending invitations the caller received (`sent`: those it sent), newest first; at most
/// 500.
pub async fn invitations(
    store: &impl Store,
    caller: &Caller,
    sent: bool,
) -> ApiResult<Vec<Invitation>> {
    let who = if sent {
        vfolder_invitations::Column::Inviter
    } else {
        vfolder_invitations::Column::Invitee
    };
    let rows = sea_orm::QuerySelect::limit(
        vfolder_invitations::Entity::find()
            .filter(who.eq(caller.uuid))
            .filter(vfolder_invitations::Column::State.eq(InvitationState::Pending))
            .order_by_desc(vfolder_invitations::Column::CreatedAt),
        500,
    )
    .all(store.read())
    .await?;
    described(store, rows).await
}

/// A pending invitation the caller sent or received; NOT_FOUND for any other.
async fn pending(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<vfolder_invitations::Model> {
    vfolder_invitations::Entity::find_by_id(id)
        .one(store.db())
        .await?
        .filter(|i| {
            i.state == InvitationState::Pending
                && (i.invitee == caller.uuid || i.inviter == caller.uuid)
        })
        .ok_or_else(|| ApiError::not_found("folder invitation", id))
}

/// Accepts invitation `id` (its invitee only): the folder is shared with the caller with the
/// invitation's permission. Refused when the caller already reaches a folder of that name.
pub async fn accept(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<vfolders::Model> {
    let inv = pending(store, caller, id).await?;
    if inv.invitee != caller.uuid {
        return Err(ApiError::not_found("folder invitation", id));
    }
    let f = vfolders::Entity::find_by_id(inv.vfolder)
        .one(store.db())
        .await?
        .ok_or_else(|| ApiError::not_found("folder", inv.vfolder))?;
    require_ready(&f)?;
    let clash = super::accessible(caller)
        .filter(vfolders::Column::Name.eq(&f.name))
        .one(store.db())
        .await?;
    if clash.is_some() {
        return Err(ApiError::conflict(format!(
            "You already have a folder named '{}': rename it before accepting",
            f.name
        )));
    }
    let share = vfolder_permissions::ActiveModel {
        vfolder: Set(f.id),
        user: Set(caller.uuid),
        permission: Set(inv.permission),
    };
    let detail = json!({"vfolder": f.id});
    let (now, inv_id) = (store.clock().now(), inv.id);
    crate::audit::audited(
        store,
        &caller.email,
        "accept_vfolder_invitation",
        "vfolder",
        move |txn| {
            Box::pin(async move {
                // Still pending (not canceled meanwhile), else nothing is shared.
                settle(txn, inv_id, InvitationState::Accepted, now).await?;
                share.insert(txn).await?;
                Ok(((), inv_id.to_string(), detail))
            })
        },
    )
    .await?;
    super::publish(store, &f, crate::events::ChangeAction::Modified);
    Ok(f)
}

/// Ends pending invitation `id`: rejected by its invitee, canceled by its inviter.
pub async fn decline(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let inv = pending(store, caller, id).await?;
    let state = if inv.invitee == caller.uuid {
        InvitationState::Rejected
    } else {
        InvitationState::Canceled
    };
    settle(store.db(), inv.id, state, store.clock().now()).await
}

/// Moves pending invitation `id` to `state`; NOT_FOUND when it is no longer pending (another
/// request settled it first).
async fn settle<C: sea_orm::ConnectionTrait>(
    db: &C,
    id: Uuid,
    state: InvitationState,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<()> {
    use sea_orm::sea_query::Expr;
    let done = vfolder_invitations::Entity::update_many()
        .col_expr(
            vfolder_invitations::Column::State,
            Expr::value(state.as_str()),
        )
        .col_expr(vfolder_invitations::Column::ModifiedAt, Expr::value(now))
        .filter(vfolder_invitations::Column::Id.eq(id))
        .filter(vfolder_invitations::Column::State.eq(InvitationState::Pending))
        .exec(db)
        .await?;
    if done.rows_affected == 0 {
        return Err(ApiError::not_found("folder invitation", id));
    }
    Ok(())
}

/// Changes the permission of pending invitation `id` (its inviter only).
pub async fn update_invitation(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    permission: VFolderPermission,
) -> ApiResult<()> {
    let inv = pending(store, caller, id).await?;
    if inv.inviter != caller.uuid {
        return Err(ApiError::not_found("folder invitation", id));
    }
    let mut m = inv.into_active_model();
    m.permission = Set(permission);
    m.modified_at = Set(Some(store.clock().now()));
    m.update(store.db()).await?;
    Ok(())
}

/// Whether `f`, another user's folder, reaches the caller because it was shared with it (an
/// accepted invitation); false for the caller's own folders and project folders.
pub async fn shared_with<C: sea_orm::ConnectionTrait>(
    db: &C,
    caller: &Caller,
    f: &vfolders::Model,
) -> ApiResult<bool> {
    if f.user.is_none() || f.user == Some(caller.uuid) {
        return Ok(false);
    }
    Ok(vfolder_permissions::Entity::find_by_id((f.id, caller.uuid))
        .one(db)
        .await?
        .is_some())
}

/// Who folder `id` is shared with (its owner, or an admin of a project folder, only).
pub async fn shares(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<Vec<Share>> {
    let (f, access) = find(store, caller, id).await?;
    if access != Access::Owner {
        return Err(ApiError::forbidden(
            "Only the folder's owner sees whom it is shared with",
        ));
    }
    let rows = vfolder_permissions::Entity::find()
        .filter(vfolder_permissions::Column::Vfolder.eq(f.id))
        .all(store.read())
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        if let Some(u) = users::Entity::find_by_id(r.user).one(store.read()).await? {
            out.push(Share {
                user: u.uuid,
                email: u.email,
                permission: r.permission,
            });
        }
    }
    out.sort_by(|a, b| a.email.cmp(&b.email));
    Ok(out)
}

/// Changes (`Some`) or revokes (`None`) the share of folder `id` with `user`: the owner of a
/// user folder for the users it shared with, an admin for a project folder's members. A
/// revoked share is gone from the next mount.
pub async fn set_share(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    user: Uuid,
    permission: Option<VFolderPermission>,
) -> ApiResult<()> {
    let (f, access) = find(store, caller, id).await?;
    if access != Access::Owner {
        return Err(ApiError::forbidden(
            "Only the folder's owner may change whom it is shared with",
        ));
    }
    let row = vfolder_permissions::Entity::find_by_id((f.id, user))
        .one(store.db())
        .await?
        .ok_or_else(|| ApiError::not_found("share of the folder with user", user))?;
    let detail =
        json!({"vfolder": f.id, "user": user, "permission": permission.map(|p| p.as_str())});
    crate::audit::audited(
        store,
        &caller.email,
        "set_vfolder_share",
        "vfolder",
        move |txn| {
            Box::pin(async move {
                match permission {
                    Some(p) => {
                        let mut m = row.into_active_model();
                        m.permission = Set(p);
                        m.update(txn).await?;
                    }
                    None => {
                        vfolder_permissions::Entity::delete_by_id((id, user))
                            .exec(txn)
                            .await?;
                    }
                }
                Ok(((), id.to_string(), detail))
            })
        },
    )
    .await?;
    super::publish(store, &f, crate::events::ChangeAction::Modified);
    Ok(())
}

/// The caller leaves a user folder shared with it (its share ends).
pub async fn leave(store: &impl Store, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let (f, access) = find(store, caller, id).await?;
    if f.ownership_type == VFolderOwnershipType::Group {
        return Err(ApiError::bad_request("A project folder cannot be left"));
    }
    if access == Access::Owner {
        return Err(ApiError::bad_request(
            "You own this folder: delete it instead of leaving it",
        ));
    }
    vfolder_permissions::Entity::delete_by_id((f.id, caller.uuid))
        .exec(store.db())
        .await?;
    super::publish(store, &f, crate::events::ChangeAction::Modified);
    Ok(())
}

/// Gives project members (by address) a permission of their own on project folder `id`, or
/// takes it back (`None`): admins of the folder's domain only. Returns the addresses changed;
/// addresses of non-members are refused together.
pub async fn share_with_members(
    store: &impl Store,
    caller: &Caller,
    id: Uuid,
    permission: Option<VFolderPermission>,
    emails: &[String],
) -> ApiResult<Vec<String>> {
    let (f, access) = find(store, caller, id).await?;
    let Some(group) = f.group else {
        return Err(ApiError::bad_request(
            "Only project folders are shared with members directly; invite people to a user folder",
        ));
    };
    if access != Access::Owner {
        return Err(ApiError::forbidden(
            "Only an admin of the project's domain may share a project folder",
        ));
    }
    let emails = check_emails(emails)?;
    let found = users::Entity::find()
        .filter(users::Column::Email.is_in(emails.clone()))
        .all(store.db())
        .await?;
    let mut members = Vec::new();
    for u in &found {
        if crate::groups::is_member(store.db(), u.uuid, group).await? {
            members.push(u.clone());
        }
    }
    let missing: Vec<&String> = emails
        .iter()
        .filter(|e| !members.iter().any(|m| &m.email == *e))
        .collect();
    if !missing.is_empty() {
        return Err(ApiError::not_found(
            "member of the folder's project",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    let action = if permission.is_some() {
        "share_vfolder"
    } else {
        "unshare_vfolder"
    };
    let folder = f.id;
    let changed = crate::audit::audited(store, &caller.email, action, "vfolder", move |txn| {
        Box::pin(async move {
            let mut changed = Vec::new();
            for u in members {
                let existing = vfolder_permissions::Entity::find_by_id((folder, u.uuid))
                    .one(txn)
                    .await?;
                match (permission, existing) {
                    (Some(p), Some(row)) => {
                        let mut m = row.into_active_model();
                        m.permission = Set(p);
                        m.update(txn).await?;
                    }
                    (Some(p), None) => {
                        vfolder_permissions::ActiveModel {
                            vfolder: Set(folder),
                            user: Set(u.uuid),
                            permission: Set(p),
                        }
                        .insert(txn)
                        .await?;
                    }
                    (None, Some(_)) => {
                        vfolder_permissions::Entity::delete_by_id((folder, u.uuid))
                            .exec(txn)
                            .await?;
                    }
                    (None, None) => continue,
                }
                changed.push(u.email);
            }
            let detail = json!({"emails": changed, "permission": permission.map(|p| p.as_str())});
            Ok((changed, folder.to_string(), detail))
        })
    })
    .await?;
    super::publish(store, &f, crate::events::ChangeAction::Modified);
    Ok(changed)
}
