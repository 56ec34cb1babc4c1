//! Ending a user's logins: one function, whatever the reason (a password set or reset, a
//! deactivation of the account or its domain, a new role, the superadmin's bootstrap).
use entity::{email_tokens, login_sessions};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::revocations::Revocations;
use crate::error::ApiResult;

/// Logins ended in the database, still to be announced ([`Ended::announce`]) once that
/// database work is committed.
#[must_use = "announce the revocation once the change is committed"]
pub struct Ended(Uuid);

impl Ended {
    /// Tells this manager's caches and open WebSockets, and the other managers, that the
    /// user's logins are over (they re-check their rights).
    pub fn announce(self, revocations: &Revocations) {
        revocations.bump(self.0);
    }
}

/// Ends every login session of `user` but `keep` and voids its pending e-mailed links (a reset
/// or verification link made before must not open the account again). `db` may be a
/// transaction: announce the result after it commits.
pub async fn end<C: ConnectionTrait>(db: &C, user: Uuid, keep: Option<Uuid>) -> ApiResult<Ended> {
    let mut del =
        login_sessions::Entity::delete_many().filter(login_sessions::Column::UserUuid.eq(user));
    if let Some(k) = keep {
        del = del.filter(login_sessions::Column::Id.ne(k));
    }
    del.exec(db).await?;
    email_tokens::Entity::delete_many()
        .filter(email_tokens::Column::UserUuid.eq(user))
        .exec(db)
        .await?;
    Ok(Ended(user))
}

#[cfg(test)]
mod tests {
    use entity::enums::UserRole;
    use entity::{email_tokens, login_sessions};
    use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, Set};
    use uuid::Uuid;

    use crate::testing::world;

    async fn login(db: &sea_orm::DatabaseConnection, user: Uuid) -> Uuid {
        let now = chrono::Utc::now();
        let id = Uuid::new_v4();
        login_sessions::ActiveModel {
            id: Set(id),
            token_hash: Set(id.simple().to_string()),
            user_uuid: Set(user),
            created_at: Set(now),
            expires_at: Set(now + chrono::Duration::hours(1)),
            last_seen: Set(now),
            user_agent: Set(None),
        }
        .insert(db)
        .await
        .unwrap();
        id
    }

    #[tokio::test]
    async fn ending_logins_keeps_only_the_one_asked_voids_links_and_is_announced() {
        let w = world().await;
        let db = &w.state.db;
        let u = w.user("u@a.test", UserRole::User, "default").await;
        let other = w.user("o@a.test", UserRole::User, "default").await;
        let keep = login(db, u.uuid).await;
        login(db, u.uuid).await;
        let theirs = login(db, other.uuid).await;
        let now = chrono::Utc::now();
        email_tokens::ActiveModel {
            token_hash: Set("reset".into()),
            purpose: Set("password_reset".into()),
            user_uuid: Set(u.uuid),
            email: Set(u.email.clone()),
            created_at: Set(now),
            expires_at: Set(now + chrono::Duration::hours(1)),
        }
        .insert(db)
        .await
        .unwrap();
        let before = w.state.shared.revocations.current();
        let ended = super::end(db, u.uuid, Some(keep)).await.unwrap();
        // Nothing is announced until the caller says the change is committed.
        assert_eq!(w.state.shared.revocations.current(), before);
        ended.announce(&w.state.shared.revocations);
        assert_ne!(w.state.shared.revocations.current(), before);
        let left: Vec<Uuid> = login_sessions::Entity::find()
            .all(db)
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(left.len(), 2);
        assert!(left.contains(&keep) && left.contains(&theirs));
        let links = email_tokens::Entity::find()
            .filter(email_tokens::Column::UserUuid.eq(u.uuid))
            .count(db)
            .await
            .unwrap();
        assert_eq!(links, 0, "a pending reset link must not outlive the logins");
    }
}
