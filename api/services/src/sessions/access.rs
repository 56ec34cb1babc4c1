//! Who may see which session: one rule for lists (`visible`), single sessions
//! (`find_visible`, `find_own`, `works_inside`) and events (`session_topic`, `sees`), used by
//! GraphQL and REST alike.
use entity::sessions;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::Runtime;

/// The event topic that holds every session event `caller` may see: a superadmin's is all
/// of them, a domain admin's its domain's (role order is checked per event by [`sees`]), a
/// user's its own sessions'.
pub fn session_topic(caller: &Caller) -> crate::events::Topic {
    use crate::events::Topic;
    match caller.read_scope() {
        crate::auth::ReadScope::Admin(scope) => match scope.domain() {
            None => Topic::Sessions,
            Some(d) => Topic::SessionsIn(d.to_string()),
        },
        _ => Topic::SessionsOf(caller.uuid),
    }
}

/// Whether `caller` may hear about the session of event `e`: the same rule as for seeing the
/// session (`Caller::governs`); a domain admin's check reads the owner's role.
pub async fn sees(state: &impl Runtime, caller: &Caller, e: &crate::events::SessionEvent) -> bool {
    if e.user == caller.uuid || caller.is_superadmin() {
        return true;
    }
    match caller.read_scope() {
        crate::auth::ReadScope::Admin(s) if s.covers_domain(&e.domain) => {
            match entity::users::Entity::find_by_id(e.user)
                .one(state.db())
                .await
            {
                Ok(Some(owner)) => caller.governs(owner.uuid, owner.role, &owner.domain_name),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Sessions the caller may see and terminate: its own; a domain admin's also those of the
/// lower-ranked users of its domain; all for a superadmin (role order, `Caller::governs`).
pub fn visible(caller: &Caller) -> sea_orm::Select<sessions::Entity> {
    match caller.read_scope() {
        crate::auth::ReadScope::Admin(scope) => {
            let mut select = sessions::Entity::find();
            if let Some(d) = scope.domain() {
                select = select.filter(sessions::Column::DomainName.eq(d));
            }
            if let Some(sub) = crate::auth::visibility::governed(caller) {
                select = select.filter(sessions::Column::UserUuid.in_subquery(sub));
            }
            select
        }
        crate::auth::ReadScope::Own { user, .. } => {
            sessions::Entity::find().filter(sessions::Column::UserUuid.eq(user))
        }
    }
}

/// Whether `caller` may work inside `s`: its owner or a superadmin.
pub fn works_inside(caller: &Caller, s: &sessions::Model) -> bool {
    s.user_uuid == caller.uuid || caller.is_superadmin()
}

/// A session the caller may work inside (execute code, upload files, open the terminal or
/// apps, read the SSH key): only its owner's and a superadmin's. Anyone else gets the same
/// NOT_FOUND as for a session that does not exist, checked before anything else.
pub async fn find_own(
    state: &impl Runtime,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<sessions::Model> {
    let s = find_visible(state, caller, id).await?;
    if !works_inside(caller, &s) {
        return Err(ApiError::not_found("session", id));
    }
    Ok(s)
}

pub async fn find_visible(
    state: &impl Runtime,
    caller: &Caller,
    id: Uuid,
) -> ApiResult<sessions::Model> {
    visible(caller)
        .filter(sessions::Column::Id.eq(id))
        .one(state.read())
        .await?
        .ok_or_else(|| ApiError::not_found("session", id))
}
