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
