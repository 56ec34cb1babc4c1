//! A new password stored: the hash, the flags and times that go with it, the pending reset
//! links it voids, its audit record.
use chrono::Utc;
use entity::enums::UserStatus;
use entity::{email_tokens, users};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};

use crate::error::ApiResult;
use crate::mail::Purpose;

/// Stores a new password's hash on `user` in `db` (a transaction where the caller has one):
/// clears the "require password change" flag, voids the account's pending reset links and
/// records it. A reset through an e-mailed link (`proven_address`) also verifies a not yet
/// verified address. Ending the login sessions is the caller's.
pub(super) async fn store<C: ConnectionTrait>(
    db: &C,
    now: chrono::DateTime<Utc>,
    user: users::Model,
    hash: String,
    proven_address: bool,
) -> ApiResult<()> {
    let email = user.email.clone();
    let uuid = user.uuid;
    let verified_now = proven_address && user.status == UserStatus::BeforeVerification;
    let mut m: users::ActiveModel = user.into();
    m.password = Set(hash);
    m.need_password_change = Set(false);
    m.password_changed_at = Set(Some(now));
    m.modified_at = Set(now);
    if verified_now {
        m.status = Set(UserStatus::Active);
    }
    m.update(db).await?;
    void_resets(db, uuid).await?;
    let action = if proven_address {
        "reset_password"
    } else {
        "change_password"
    };
    crate::audit::record(
        db,
        now,
        &email,
        action,
        "user",
        &email,
        serde_json::json!({}),
    )
    .await
}

/// Makes every pending reset link of `user` void (after a password change through bai's own
/// paths; a change anywhere else voids them too, by `password_changed_at`).
async fn void_resets<C: ConnectionTrait>(db: &C, user: uuid::Uuid) -> ApiResult<()> {
    email_tokens::Entity::delete_many()
        .filter(email_tokens::Column::UserUuid.eq(user))
        .filter(email_tokens::Column::Purpose.eq(Purpose::PasswordReset.as_str()))
        .exec(db)
        .await?;
    Ok(())
}
