//! Limits that hold across several managers (PostgreSQL only; one process keeps them in its
//! memory alone): counts per key and clock-aligned window in `limit_windows`.
//!
//! - **HMAC replay**: a signature accepted by one manager is refused by every other (one row
//!   per signature, kept until its date could no longer pass the skew check).
//! - **Login throttle**: failed password checks are counted per account and per address in
//!   the database and read before each attempt, so a guessing flood split over managers is
//!   throttled as one (besides each process's own count of attempts running at once).
//! - **Rate limit**: each process counts its requests in memory and adds them to the shared
//!   count every [`FLUSH`]; a key's first request in a window on a process reads the shared
//!   count first. The limit holds to within what the other managers admit in one flush period.
//! - **E-mail requests** (`mail_allowed`): counted in the database on SQLite too (they are
//!   rare), so the hourly bounds hold across restarts as well.
use std::time::Duration;

use sea_orm::{ConnectionTrait, DbBackend, Statement};

use super::ratelimit::RateLimiter;
use crate::error::ApiResult;
use crate::store::Store;

/// How often each process adds its rate-limit counts to the shared ones.
pub const FLUSH: Duration = Duration::from_secs(1);

/// Whether other managers may share the database (PostgreSQL).
fn shared(store: &impl Store) -> bool {
    store.config().shares_database()
}

/// Adds `delta` to `key`'s count in `window` (kept until `keep_secs` from now); the total.
/// Written for SQLite and PostgreSQL alike (mail requests are counted on both).
async fn add(
    store: &impl Store,
    key: &str,
    window: i64,
    delta: i64,
    keep_secs: f64,
) -> ApiResult<i64> {
    use sea_orm::sea_query::{Alias, Expr, OnConflict, Query};
    let t = || Alias::new("limit_windows");
    let expires = store.clock().now()
        + chrono::Duration::milliseconds((keep_secs * 1000.0).clamp(0.0, 1e15) as i64);
    let insert = Query::insert()
        .into_table(t())
        .columns([
            Alias::new("key"),
            Alias::new("window"),
            Alias::new("count"),
            Alias::new("expires_at"),
        ])
        .values([key.into(), window.into(), delta.into(), expires.into()])
        .map_err(|e| crate::error::ApiError::internal("counting against a limit", e))?
        .on_conflict(
            OnConflict::columns([Alias::new("key"), Alias::new("window")])
                .value(
                    Alias::new("count"),
                    Expr::col((t(), Alias::new("count"))).add(delta),
                )
                .to_owned(),
        )
        .returning_col(Alias::new("count"))
        .to_owned();
    let backend = store.db().get_database_backend();
    Ok(match store.db().query_one(backend.build(&insert)).await? {
        Some(r) => r.try_get("", "count")?,
        None => 0,
    })
}

/// `key`'s count in `window` (0 when none).
async fn count(store: &impl Store, key: &str, window: i64) -> ApiResult<i64> {
    let row = store
        .db()
        .query_one(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT count FROM limit_windows WHERE key = $1 AND \"window\" = $2",
            [key.into(), window.into()],
        ))
        .await?;
    Ok(match row {
        Some(r) => r.try_get("", "count")?,
        None => 0,
    })
}

/// Whether `signature` (hex) is used here for the first time across every manager.
pub async fn fresh_signature(store: &impl Store, signature: &str) -> ApiResult<bool> {
    if !shared(store) {
        return Ok(true);
    }
    let keep = (store.config().hmac_clock_skew_secs.saturating_mul(2)) as f64;
    let inserted = store
        .db()
        .execute(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "INSERT INTO limit_windows (key, \"window\", count, expires_at) \
             VALUES ($1, 0, 1, now() + make_interval(secs => $2)) ON CONFLICT DO NOTHING",
            [format!("sig:{signature}").into(), keep.into()],
        ))
        .await?;
    Ok(inserted.rows_affected() == 1)
}

fn login_window(store: &impl Store) -> (i64, f64) {
    let secs = store.config().login_block_secs.max(1);
    let now = u64::try_from(store.clock().now().timestamp()).unwrap_or(0);
    (i64::try_from(now / secs).unwrap_or(0), (secs * 2) as f64)
}

fn login_keys(account: &str, addr: Option<std::net::IpAddr>) -> Vec<(String, bool)> {
    let mut keys = vec![(format!("login:account:{account}"), true)];
    if let Some(a) = addr {
        keys.push((format!("login:addr:{a}"), false));
    }
    keys
}

/// Refuses an attempt while the account or address has failed too often on any manager.
pub async fn login_allowed(
    store: &impl Store,
    account: &str,
    addr: Option<std::net::IpAddr>,
) -> ApiResult<()> {
    if !shared(store) {
        return Ok(());
    }
    let (window, _) = login_window(store);
    for (key, is_account) in login_keys(account, addr) {
        let max = if is_account {
            store.config().login_max_failures_per_account
        } else {
            store.config().login_max_failures_per_addr
        };
        if count(store, &key, window).await? >= i64::from(max) {
            let secs = store.config().login_block_secs.max(1);
            let now = u64::try_from(store.clock().now().timestamp()).unwrap_or(0);
            let whom = if is_account {
                "for this account"
            } else {
                "from your address"
            };
            return Err(super::throttle::refused(
                whom,
                Duration::from_secs(secs - now % secs),
            ));
        }
    }
    Ok(())
}

/// Counts a failed password check of `account` from `addr` for every manager.
pub async fn login_failed(store: &impl Store, account: &str, addr: Option<std::net::IpAddr>) {
    if !shared(store) {
        return;
    }
    let (window, keep) = login_window(store);
    for (key, _) in login_keys(account, addr) {
        if let Err(e) = add(store, &key, window, 1, keep).await {
            tracing::warn!(error = %e.message, cause = %e.chain(), "counting a failed login for the other managers failed");
        }
    }
}

/// Before a keypair's first request in a window on this process: what the other managers
/// have counted already.
pub async fn seed_rate(
    store: &impl Store,
    limiter: &RateLimiter,
    access_key: &str,
) -> ApiResult<()> {
    if !shared(store) {
        return Ok(());
    }
    let window = super::ratelimit::window_of(store.clock().now());
    if limiter.knows(access_key, window) {
        return Ok(());
    }
    let total = count(store, &format!("rate:{access_key}"), window as i64).await?;
    limiter.set_others(access_key, window, u32::try_from(total).unwrap_or(u32::MAX));
    Ok(())
}

/// Adds this process's rate-limit counts to the shared ones every [`FLUSH`], learning the
/// others' in return. Without PostgreSQL there is nothing to do.
pub async fn flush_rates(store: impl Store, limiter: std::sync::Arc<RateLimiter>) {
    if !shared(&store) {
        return;
    }
    let keep = (super::ratelimit::WINDOW.as_secs() * 2) as f64;
    loop {
        tokio::time::sleep(FLUSH).await;
        for (key, window, delta, mine) in limiter.take_pending() {
            match add(
                &store,
                &format!("rate:{key}"),
                window as i64,
                i64::from(delta),
                keep,
            )
            .await
            {
                Ok(total) => {
                    let total = u32::try_from(total).unwrap_or(u32::MAX);
                    limiter.set_others(&key, window, total.saturating_sub(mine));
                }
                Err(e) => {
                    // Counted again with the next flush.
                    limiter.give_back(&key, window, delta);
                    tracing::warn!(error = %e.message, cause = %e.chain(), "sharing rate-limit counts failed; retried");
                }
            }
        }
    }
}

/// Requests for e-mailed links, counted per hour in the database on SQLite and PostgreSQL
/// alike (they are rare; the count survives restarts and holds across managers): per e-mail
/// address — whether or not an account has it, so the answer tells nothing — and per client
/// address. Refused with RATE_LIMITED once either is over its hourly bound.
pub async fn mail_allowed(
    store: &impl Store,
    email: &str,
    addr: Option<std::net::IpAddr>,
) -> ApiResult<()> {
    use sea_orm::sea_query::{Alias, Expr, Query};
    const HOUR: i64 = 3600;
    let now = store.clock().now();
    let window = now.timestamp().div_euclid(HOUR);
    let cfg = store.config();
    // The client's address first: a request it refuses does not count against the e-mail
    // address (else one client could keep anyone's address at its limit). IPv6 clients count
    // by their /64, which one host usually holds whole.
    let mut keys = Vec::new();
    if let Some(a) = addr {
        let a = match a {
            std::net::IpAddr::V6(v6) => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
            v4 => v4.to_string(),
        };
        keys.push((
            format!("mail:addr:{a}"),
            cfg.mail_max_per_addr_per_hour,
            "from your address",
        ));
    }
    keys.push((
        format!("mail:account:{email}"),
        cfg.mail_max_per_account_per_hour,
        "for this e-mail address",
    ));
    let t = || Alias::new("limit_windows");
    let backend = store.db().get_database_backend();
    // Windows before the last hour are of no further use.
    let purge = Query::delete()
        .from_table(t())
        .and_where(Expr::col(Alias::new("key")).like("mail:%"))
        .and_where(Expr::col(Alias::new("window")).lt(window - 1))
        .to_owned();
    store.db().execute(backend.build(&purge)).await?;
    let mut refused = None;
    for (key, max, whom) in keys {
        let total = add(store, &key, window, 1, (2 * HOUR) as f64).await?;
        if total > i64::from(max) {
            refused = Some(whom);
            break;
        }
    }
    if let Some(whom) = refused {
        metrics::counter!("bai_mail_throttled_total").increment(1);
        let secs = u64::try_from(HOUR - now.timestamp().rem_euclid(HOUR)).unwrap_or(1);
        return Err(crate::error::ApiError::new(
            crate::error::ErrorCode::RateLimited,
            format!(
                "Too many e-mail requests {whom}. Try again in {} minutes.",
                secs.div_ceil(60)
            ),
        )
        .with_header("retry-after", secs.to_string()));
    }
    Ok(())
}
