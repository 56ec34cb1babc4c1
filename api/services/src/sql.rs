//! What the services know of the database that the pure layers must not: which database
//! errors are the caller's (a unique key clash is a CONFLICT, not an internal error), and how
//! a parsed list filter becomes a condition.
use bai_core::filter::{Filter, Op};
use sea_orm::sea_query::{Expr, Func, SimpleExpr};
use sea_orm::{ColumnTrait, Condition, DbErr, SqlErr};

use crate::error::{ApiError, ErrorCode};

/// An error on its way out, as the caller should see it: a database constraint violation
/// kept as an internal error (layer 2 knows no database) becomes the CONFLICT it is; every
/// other error is returned as it is. The surfaces call this before they answer.
pub fn classify(e: ApiError) -> ApiError {
    if e.code != ErrorCode::Internal {
        return e;
    }
    let Some(db) = e.source().and_then(|s| s.downcast_ref::<DbErr>()) else {
        return e;
    };
    if unavailable(db) {
        return ApiError::new(
            ErrorCode::Unavailable,
            "database unavailable: the server cannot reach its database now; try again shortly",
        )
        .with_header("retry-after", "5");
    }
    match db.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(_)) => {
            ApiError::conflict("an object with the same name already exists")
        }
        Some(SqlErr::ForeignKeyConstraintViolation(_)) => {
            ApiError::conflict("the object is still referenced by other objects")
        }
        _ => e,
    }
}

/// Whether a database error says the database cannot be reached (no connection in time, a
/// connection refused or broken), rather than that the statement failed.
pub fn unavailable(e: &DbErr) -> bool {
    use sea_orm::RuntimeErr;
    use sea_orm::sqlx::Error as Sqlx;
    let sqlx = match e {
        DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => return true,
        DbErr::Exec(RuntimeErr::SqlxError(s)) | DbErr::Query(RuntimeErr::SqlxError(s)) => s,
        _ => return false,
    };
    matches!(
        sqlx,
        Sqlx::Io(_) | Sqlx::PoolTimedOut | Sqlx::PoolClosed | Sqlx::WorkerCrashed | Sqlx::Tls(_)
    )
}

/// Whether an error is the database's being unavailable ([`unavailable`]).
pub fn is_unavailable(e: &ApiError) -> bool {
    e.source()
        .and_then(|s| s.downcast_ref::<DbErr>())
        .is_some_and(unavailable)
}

/// Runs `write` until the database takes it, waiting out an outage (the wait doubling from
/// half a second to five, a warning a minute): for an outcome that must not be lost, such as
/// a launch whose containers run. Any other error is returned at once.
pub async fn until_recorded<T, F, Fut>(what: &str, mut write: F) -> Result<T, ApiError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let mut wait = std::time::Duration::from_millis(500);
    let mut warned: Option<std::time::Instant> = None;
    loop {
        match write().await {
            Err(e) if is_unavailable(&e) => {
                if warned.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(60)) {
                    tracing::warn!(what, error = %e.chain(), "the database is unavailable; retrying until it takes what must be recorded");
                    warned = Some(std::time::Instant::now());
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(std::time::Duration::from_secs(5));
            }
            other => return other,
        }
    }
}

/// The database condition a parsed list filter stands for.
pub fn condition<C: ColumnTrait>(filter: &Filter<C>) -> Condition {
    match filter {
        Filter::Any(parts) => parts
            .iter()
            .fold(Condition::any(), |c, p| c.add(condition(p))),
        Filter::All(parts) => parts
            .iter()
            .fold(Condition::all(), |c, p| c.add(condition(p))),
        Filter::Compare { column, op, value } => Condition::all().add(compare(*column, *op, value)),
        Filter::In {
            column,
            values,
            negated,
        } => {
            let any = values
                .iter()
                .fold(Condition::any(), |c, v| c.add(compare(*column, Op::Eq, v)));
            // `in []` holds for nothing, `not in []` for everything.
            let any = if values.is_empty() {
                Condition::all().add(Expr::val(1).eq(0))
            } else {
                any
            };
            if *negated { any.not() } else { any }
        }
        Filter::Not(inner) => condition(inner).not(),
    }
}

fn compare<C: ColumnTrait>(col: C, op: Op, v: &str) -> SimpleExpr {
    // A UUID column compares with a UUID (SQLite keeps them as bytes, PostgreSQL will not
    // compare uuid with text); a value that is no UUID matches nothing (`!=`: everything).
    if matches!(col.def().get_column_type(), sea_orm::ColumnType::Uuid)
        && matches!(op, Op::Eq | Op::Ne)
    {
        return match (uuid::Uuid::parse_str(v.trim()), op) {
            (Ok(u), Op::Eq) => col.eq(u),
            (Ok(u), _) => col.ne(u),
            (Err(_), Op::Eq) => Expr::val(1).eq(0),
            (Err(_), _) => Expr::val(1).eq(1),
        };
    }
    let v = v.to_string();
    match op {
        Op::Eq => col.eq(v),
        Op::Ne => col.ne(v),
        Op::Lt => col.lt(v),
        Op::Le => col.lte(v),
        Op::Gt => col.gt(v),
        Op::Ge => col.gte(v),
        Op::Like => col.like(v),
        Op::ILike => Expr::expr(Func::lower(Expr::col(col))).like(v.to_lowercase()),
        Op::Contains => col.contains(v),
    }
}

#[cfg(test)]
mod tests {
    use entity::sessions;
    use sea_orm::{DbBackend, EntityTrait, QueryFilter, QueryTrait};

    fn sql(f: &str) -> String {
        let cols = [
            ("name", sessions::Column::Name),
            ("status", sessions::Column::Status),
        ];
        let parsed = bai_core::filter::parse(f, &cols).unwrap().unwrap();
        sessions::Entity::find()
            .filter(super::condition(&parsed))
            .build(DbBackend::Sqlite)
            .to_string()
    }

    #[test]
    fn filters_become_conditions() {
        let s = sql(r#"name == "a b" & (status == "RUNNING" | status == 'PENDING')"#);
        assert!(s.contains(r#""name" = 'a b'"#), "{s}");
        assert!(
            s.contains(r#""status" = 'RUNNING' OR "sessions"."status" = 'PENDING'"#),
            "{s}"
        );
        let s = sql(r#"name ilike "%GPU%""#);
        assert!(s.contains("LOWER") && s.contains("'%gpu%'"), "{s}");
    }

    #[tokio::test]
    async fn a_unique_key_clash_is_a_conflict_and_other_database_errors_stay_internal() {
        use sea_orm::{ConnectionTrait, Database};
        let db = Database::connect("sqlite::memory:").await.unwrap();
        db.execute_unprepared("CREATE TABLE t (name TEXT UNIQUE)")
            .await
            .unwrap();
        db.execute_unprepared("INSERT INTO t VALUES ('a')")
            .await
            .unwrap();
        let clash = db
            .execute_unprepared("INSERT INTO t VALUES ('a')")
            .await
            .unwrap_err();
        let e = super::classify(crate::error::ApiError::from(clash));
        assert_eq!(e.code, crate::error::ErrorCode::Conflict, "{e:?}");
        let missing = db
            .execute_unprepared("SELECT * FROM nowhere")
            .await
            .unwrap_err();
        let e = super::classify(crate::error::ApiError::from(missing));
        assert_eq!(e.code, crate::error::ErrorCode::Internal);
        assert!(e.chain().to_string().contains("nowhere"), "{e:?}");
    }

    #[tokio::test]
    async fn an_unreachable_database_is_unavailable_with_a_clear_message() {
        use sea_orm::{ConnectionTrait, Database};
        let db = Database::connect("sqlite::memory:").await.unwrap();
        db.close_by_ref().await.unwrap();
        let gone = db.execute_unprepared("SELECT 1").await.unwrap_err();
        assert!(super::unavailable(&gone), "{gone:?}");
        let e = super::classify(crate::error::ApiError::from(gone));
        assert_eq!(e.code, crate::error::ErrorCode::Unavailable, "{e:?}");
        assert!(e.message.starts_with("database unavailable"), "{e:?}");
        assert!(!super::unavailable(&sea_orm::DbErr::RecordNotFound(
            "x".into()
        )));
    }
}
