//! What a folder holds (bytes, files): a kept figure, measured again when stale, moved by
//! bai's own uploads, and kept fresh a few folders at a time by the leader's sweep.

use entity::vfolders;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::access::folder_root;
use crate::error::ApiResult;
use crate::store::Store;

/// Measures the `n` folders measured longest ago (never measured first): the leader's sweep
/// keeps the figures of folders that sessions write into fresh, a few at a time.
pub async fn measure_stalest(store: &impl Store, n: u64) -> ApiResult<()> {
    use sea_orm::{QueryOrder, QuerySelect};
    let rows = vfolders::Entity::find()
        .order_by_with_nulls(
            vfolders::Column::UsageAt,
            sea_orm::Order::Asc,
            sea_orm::sea_query::NullOrdering::First,
        )
        .limit(n)
        .all(store.db())
        .await?;
    for f in rows {
        if let Err(e) = measure(store, &f).await {
            tracing::warn!(folder = %f.id, error = %e.message, "measuring a folder failed");
            // Still marked measured, so one folder that cannot be read never holds the rest up.
            vfolders::Entity::update_many()
                .col_expr(vfolders::Column::UsageAt, Expr::value(store.clock().now()))
                .filter(vfolders::Column::Id.eq(f.id))
                .exec(store.db())
                .await?;
        }
    }
    Ok(())
}

/// How long a kept usage figure stands before a request that needs it measures again.
pub const USAGE_FRESH: chrono::Duration = chrono::Duration::seconds(10);

/// The folder's usage (bytes, files): the kept figure while it is fresh, else measured now.
/// At most one walk per folder every [`USAGE_FRESH`], however many requests ask.
pub async fn usage(store: &impl Store, f: &vfolders::Model) -> ApiResult<(u64, u64)> {
    match f.usage_at {
        Some(at) if store.clock().now() - at < USAGE_FRESH => Ok((
            u64::try_from(f.cur_size).unwrap_or(0),
            u64::try_from(f.num_files).unwrap_or(0),
        )),
        _ => measure(store, f).await,
    }
}

/// bai added `bytes` in `files` to the folder (a finished upload): the kept figure moves by as
/// much, without a walk (the next measure corrects an overwritten file).
pub async fn add_usage(store: &impl Store, id: Uuid, bytes: u64, files: u64) -> ApiResult<()> {
    vfolders::Entity::update_many()
        .col_expr(
            vfolders::Column::CurSize,
            Expr::col(vfolders::Column::CurSize).add(i64::try_from(bytes).unwrap_or(i64::MAX)),
        )
        .col_expr(
            vfolders::Column::NumFiles,
            Expr::col(vfolders::Column::NumFiles).add(i64::try_from(files).unwrap_or(i64::MAX)),
        )
        .filter(vfolders::Column::Id.eq(id))
        .exec(store.db())
        .await?;
    Ok(())
}

/// The kept figure is stale (files were deleted): the next request that needs it measures.
pub async fn mark_stale(store: &impl Store, id: Uuid) -> ApiResult<()> {
    vfolders::Entity::update_many()
        .col_expr(
            vfolders::Column::UsageAt,
            Expr::value(Option::<chrono::DateTime<chrono::Utc>>::None),
        )
        .filter(vfolders::Column::Id.eq(id))
        .exec(store.db())
        .await?;
    Ok(())
}

/// Measures folder `f` again and keeps the figure (`cur_size`, `num_files`, `usage_at`):
/// after bai changed its content, and when its information is asked for. Lists show the kept
/// figure, never a walk per request.
pub async fn measure(store: &impl Store, f: &vfolders::Model) -> ApiResult<(u64, u64)> {
    let root = folder_root(store.config(), f)?;
    let (bytes, files) = store.storage().usage(&root).await;
    vfolders::Entity::update_many()
        .col_expr(
            vfolders::Column::CurSize,
            Expr::value(i64::try_from(bytes).unwrap_or(i64::MAX)),
        )
        .col_expr(
            vfolders::Column::NumFiles,
            Expr::value(i64::try_from(files).unwrap_or(i64::MAX)),
        )
        .col_expr(vfolders::Column::UsageAt, Expr::value(store.clock().now()))
        .filter(vfolders::Column::Id.eq(f.id))
        .exec(store.db())
        .await?;
    Ok((bytes, files))
}
