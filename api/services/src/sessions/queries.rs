//! Reads of sessions for the surfaces: by name, by id, their dependencies, the ones holding
//! resources and counts by status; and whom a creation acts as. Who may see which session is
//! `access`'s rule, used here.
use entity::enums::{SessionStatus, UserRole};
use entity::{session_dependencies, sessions};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
};
use uuid::Uuid;

use super::access::visible;
use crate::auth::{Caller, SuperadminScope};
use crate::error::{ApiError, ApiResult};

/// A session by UUID, whoever owns it (None when there is none).
pub async fn find<C: ConnectionTrait>(db: &C, id: Uuid) -> ApiResult<Option<sessions::Model>> {
    Ok(sessions::Entity::find_by_id(id).one(db).await?)
}

/// The keypair whose sessions a name refers to: the caller's own, or `owner_access_key` for
/// an administrator (Backend.AI refuses it to a user).
pub fn owner_key(caller: &Caller, owner_access_key: Option<&str>) -> ApiResult<String> {
    match owner_access_key {
        Some(ak) if Some(ak) != caller.access_key.as_deref() => {
            if !matches!(caller.role, UserRole::Admin | UserRole::Superadmin) {
                return Err(ApiError::forbidden(
                    "Only administrators may act on another keypair's sessions",
                ));
            }
            Ok(ak.to_string())
        }
        _ => caller
            .access_key
            .clone()
            .ok_or_else(|| ApiError::bad_request("This account has no keypair")),
    }
}

/// The session named `name` of the caller's keypair (an administrator's `owner_access_key`:
/// that keypair's) that the caller may see: the most recent live one, else the most recent.
pub async fn find_named<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    name: &str,
    owner_access_key: Option<&str>,
) -> ApiResult<sessions::Model> {
    let access_key = owner_key(caller, owner_access_key)?;
    let found = visible(caller)
        .filter(sessions::Column::Name.eq(name))
        .filter(sessions::Column::AccessKey.eq(access_key))
        .order_by_desc(sessions::Column::CreatedAt)
        .all(db)
        .await?;
    found
        .iter()
        .find(|s| s.status.is_live())
        .or(found.first())
        .cloned()
        .ok_or_else(|| ApiError::not_found("session", name))
}

/// A live session of the caller's keypair named `name`, if there is one.
pub async fn live_named<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    name: &str,
) -> ApiResult<Option<sessions::Model>> {
    Ok(visible(caller)
        .filter(sessions::Column::Name.eq(name))
        .filter(sessions::Column::AccessKey.eq(caller.access_key.clone().unwrap_or_default()))
        .filter(sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
        .one(db)
        .await?)
}

/// Whom a creation acts as: the caller, or with `owner_access_key` (administrators only,
/// FORBIDDEN for others, as in Backend.AI) the owner of that keypair, whom the caller must
/// govern: a keypair it may not see is NOT_FOUND, an inactive one too.
pub async fn acting_as<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    owner_access_key: Option<&str>,
) -> ApiResult<Caller> {
    let Some(ak) = owner_access_key.filter(|ak| Some(*ak) != caller.access_key.as_deref()) else {
        return Ok(caller.clone());
    };
    if caller.admin_scope().is_none() {
        return Err(ApiError::forbidden(
            "Only administrators may create sessions for another keypair",
        ));
    }
    let (kp, owner) = crate::auth::visibility::keypair(db, caller, ak).await?;
    if !kp.is_active {
        return Err(ApiError::not_found("keypair", ak));
    }
    Ok(Caller::of_user(owner, Some(kp.access_key), None))
}

/// The UUIDs of the sessions `session` waits for.
pub async fn dependency_ids<C: ConnectionTrait>(db: &C, session: Uuid) -> ApiResult<Vec<Uuid>> {
    Ok(session_dependencies::Entity::find()
        .filter(session_dependencies::Column::SessionId.eq(session))
        .all(db)
        .await?
        .into_iter()
        .map(|e| e.depends_on)
        .collect())
}

/// The UUIDs of the sessions that wait for `session` (directly).
pub async fn dependent_ids<C: ConnectionTrait>(db: &C, session: Uuid) -> ApiResult<Vec<Uuid>> {
    Ok(session_dependencies::Entity::find()
        .filter(session_dependencies::Column::DependsOn.eq(session))
        .all(db)
        .await?
        .into_iter()
        .map(|e| e.session_id)
        .collect())
}

/// The sessions `session` waits for, oldest first.
pub async fn dependencies<C: ConnectionTrait>(
    db: &C,
    session: Uuid,
) -> ApiResult<Vec<sessions::Model>> {
    let ids = dependency_ids(db, session).await?;
    Ok(sessions::Entity::find()
        .filter(sessions::Column::Id.is_in(ids))
        .order_by_asc(sessions::Column::CreatedAt)
        .all(db)
        .await?)
}

/// The sessions among `ids` that the caller may see, oldest first.
pub async fn visible_among<C: ConnectionTrait>(
    db: &C,
    caller: &Caller,
    ids: Vec<Uuid>,
) -> ApiResult<Vec<sessions::Model>> {
    Ok(visible(caller)
        .filter(sessions::Column::Id.is_in(ids))
        .order_by_asc(sessions::Column::CreatedAt)
        .all(db)
        .await?)
}

/// Every owner's sessions that hold resources now (`SessionStatus::ALLOCATED`).
pub async fn allocated<C: ConnectionTrait>(db: &C) -> ApiResult<Vec<sessions::Model>> {
    Ok(sessions::Entity::find()
        .filter(sessions::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
        .all(db)
        .await?)
}

/// How many sessions hold resources now across the installation (superadmins).
pub async fn count_allocated<C: ConnectionTrait>(
    db: &C,
    _scope: &SuperadminScope,
) -> ApiResult<u64> {
    Ok(sessions::Entity::find()
        .filter(sessions::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
        .count(db)
        .await?)
}

/// How many sessions there are in each status (statuses without any are left out).
pub async fn count_by_status<C: ConnectionTrait>(db: &C) -> ApiResult<Vec<(SessionStatus, i64)>> {
    Ok(sessions::Entity::find()
        .select_only()
        .column(sessions::Column::Status)
        .column_as(
            sea_orm::sea_query::Expr::col(sessions::Column::Id).count(),
            "n",
        )
        .group_by(sessions::Column::Status)
        .into_tuple()
        .all(db)
        .await?)
}

/// How many sessions wait to be scheduled (PENDING).
pub async fn count_pending<C: ConnectionTrait>(db: &C) -> ApiResult<u64> {
    Ok(sessions::Entity::find()
        .filter(sessions::Column::Status.eq(SessionStatus::Pending))
        .count(db)
        .await?)
}

#[cfg(test)]
mod tests {
    use entity::enums::{SessionStatus, SessionType, UserRole};
    use entity::sessions;
    use sea_orm::{ActiveModelTrait, IntoActiveModel, Set};

    use crate::error::ErrorCode;
    use crate::testing::{World, request, world};

    /// A PENDING session of `caller`'s named `name`.
    async fn pending(w: &World, caller: &crate::auth::Caller, name: &str) -> sessions::Model {
        let req = crate::sessions::create::CreateRequest {
            name: Some(name.into()),
            ..request(SessionType::Interactive, None)
        };
        let mut created = crate::sessions::create(&w.state, caller, req)
            .await
            .unwrap();
        created.remove(0)
    }

    #[tokio::test]
    async fn a_name_finds_the_live_session_first_and_only_for_its_keypair() {
        let w = world().await;
        let db = &w.state.db;
        let live = pending(&w, &w.admin, "older").await;
        let ended = pending(&w, &w.admin, "newer").await;
        // The older one live, a newer one of the same name ended.
        let mut m = ended.into_active_model();
        m.name = Set("n".into());
        m.status = Set(SessionStatus::Cancelled);
        m.created_at = Set(live.created_at + chrono::Duration::seconds(1));
        let ended = m.update(db).await.unwrap();
        let mut m = live.into_active_model();
        m.name = Set("n".into());
        let live = m.update(db).await.unwrap();

        let found = super::find_named(db, &w.admin, "n", None).await.unwrap();
        assert_eq!(found.id, live.id);
        let mut m = found.into_active_model();
        m.status = Set(SessionStatus::Terminated);
        m.update(db).await.unwrap();
        let found = super::find_named(db, &w.admin, "n", None).await.unwrap();
        assert_eq!(found.id, ended.id, "no live one: the most recent");

        // A user: another keypair's name is FORBIDDEN, its own keypair has no such session.
        let user = w.user("u@a.test", UserRole::User, "alpha").await;
        let admin_key = w.admin.access_key.clone();
        let e = super::find_named(db, &user, "n", admin_key.as_deref())
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        let e = super::find_named(db, &user, "n", None).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::NotFound);
        assert!(super::live_named(db, &user, "n").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_creation_acts_for_another_keypair_only_for_an_admin_who_governs_its_owner() {
        let w = world().await;
        let db = &w.state.db;
        let admin = w.user("da@a.test", UserRole::Admin, "alpha").await;
        let mine = w.user("u@a.test", UserRole::User, "alpha").await;
        let other = w.user("u@b.test", UserRole::User, "beta").await;
        let key = |c: &crate::auth::Caller| c.access_key.clone().unwrap();

        // Its own keypair, or none: the caller itself.
        let same = super::acting_as(db, &mine, Some(&key(&mine)))
            .await
            .unwrap();
        assert_eq!(same.uuid, mine.uuid);
        assert_eq!(
            super::acting_as(db, &mine, None).await.unwrap().uuid,
            mine.uuid
        );
        // A user may not act for anyone else.
        let e = super::acting_as(db, &mine, Some(&key(&other)))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        // A domain admin: for the users it governs, NOT_FOUND for strangers.
        let acting = super::acting_as(db, &admin, Some(&key(&mine)))
            .await
            .unwrap();
        assert_eq!(
            (acting.uuid, acting.access_key),
            (mine.uuid, Some(key(&mine)))
        );
        let e = super::acting_as(db, &admin, Some(&key(&other)))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::NotFound);
        // An inactive keypair is NOT_FOUND too.
        let kp = crate::lookup::get::<entity::keypairs::Entity>(db, "keypair", key(&mine))
            .await
            .unwrap();
        let mut m = kp.into_active_model();
        m.is_active = Set(false);
        m.update(db).await.unwrap();
        let e = super::acting_as(db, &admin, Some(&key(&mine)))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::NotFound);
    }

    #[tokio::test]
    async fn dependencies_read_both_ways_and_strangers_see_none() {
        let w = world().await;
        let db = &w.state.db;
        let first = pending(&w, &w.admin, "first").await;
        let second = pending(&w, &w.admin, "second").await;
        entity::session_dependencies::ActiveModel {
            session_id: Set(second.id),
            depends_on: Set(first.id),
        }
        .insert(db)
        .await
        .unwrap();
        assert_eq!(
            super::find(db, second.id).await.unwrap(),
            Some(second.clone())
        );
        assert_eq!(super::find(db, uuid::Uuid::new_v4()).await.unwrap(), None);
        assert_eq!(
            super::dependency_ids(db, second.id).await.unwrap(),
            [first.id]
        );
        assert_eq!(
            super::dependent_ids(db, first.id).await.unwrap(),
            [second.id]
        );
        let deps = super::dependencies(db, second.id).await.unwrap();
        assert_eq!(deps.iter().map(|s| s.id).collect::<Vec<_>>(), [first.id]);
        let ids = vec![first.id, second.id];
        assert_eq!(
            super::visible_among(db, &w.admin, ids.clone())
                .await
                .unwrap()
                .len(),
            2
        );
        let user = w.user("u@a.test", UserRole::User, "alpha").await;
        assert!(
            super::visible_among(db, &user, ids)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(super::count_pending(db).await.unwrap(), 2);
        let scope = w.admin.require_superadmin().unwrap();
        assert_eq!(super::count_allocated(db, &scope).await.unwrap(), 0);
        assert_eq!(
            super::count_by_status(db).await.unwrap(),
            [(SessionStatus::Pending, 2)]
        );
    }
}
