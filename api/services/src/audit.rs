//! The append-only audit log of administrative changes. Only the services write it (its
//! functions are crate-private): a surface cannot make an audited change of its own.
use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ConnectionTrait, NotSet, Set};

use crate::error::ApiResult;
use crate::store::Store;

/// Records `actor` did `action` on `target_type` `target` at `at` (the state's clock). Call
/// inside the same transaction as the change so the log never disagrees with the data.
pub(crate) async fn record<C: ConnectionTrait>(
    db: &C,
    at: DateTime<Utc>,
    actor: &str,
    action: &str,
    target_type: &str,
    target: &str,
    detail: serde_json::Value,
) -> ApiResult<()> {
    entity::audit_logs::ActiveModel {
        id: NotSet,
        created_at: Set(at),
        actor: Set(actor.to_string()),
        action: Set(action.to_string()),
        target_type: Set(target_type.to_string()),
        target: Set(target.to_string()),
        detail: Set(detail),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// The future an audited operation returns: its result, the target's key and the detail to log.
pub type AuditedFuture<'c, T> = std::pin::Pin<
    Box<dyn std::future::Future<Output = ApiResult<(T, String, serde_json::Value)>> + Send + 'c>,
>;

/// Runs `op` in a transaction and records `actor` did `action` on the target it reports, in
/// the same transaction, at the time the state's clock tells.
pub(crate) async fn audited<T, F>(
    store: &impl Store,
    actor: &str,
    action: &str,
    target_type: &str,
    op: F,
) -> ApiResult<T>
where
    T: Send,
    F: for<'c> FnOnce(&'c sea_orm::DatabaseTransaction) -> AuditedFuture<'c, T> + Send,
{
    use sea_orm::TransactionTrait;
    let txn = store.db().begin().await?;
    let (value, target, detail) = op(&txn).await?;
    let at = store.clock().now();
    record(&txn, at, actor, action, target_type, &target, detail).await?;
    // Dropping an uncommitted transaction rolls it back, so every early return above undoes
    // the operation.
    txn.commit().await?;
    Ok(value)
}
