//! Password guessing is slowed per account and per client address (Backend.AI's webserver
//! blocks an account for `login_block_time` after `login_allowed_fail_count` failures; OWASP
//! adds the per-address bound). An attempt counts as a failure from the moment it starts and
//! is taken back when it succeeds, so a burst of parallel guesses is refused at once instead
//! of queueing hundreds of argon2 computations. Blocked attempts are answered before any
//! password is hashed.
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::error::{ApiError, ApiResult, ErrorCode};

/// The limits, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct LoginLimits {
    /// Failures of one account within `window` before it is blocked.
    pub per_account: u32,
    /// Failures from one client address within `window` before it is blocked.
    pub per_addr: u32,
    /// Attempts from one client address running at the same time.
    pub concurrent_per_addr: u32,
    /// How long failures are remembered, and how long a block lasts.
    pub window: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Tally {
    since: Instant,
    failures: u32,
    running: u32,
}

/// Most keys remembered per map; beyond it expired entries are dropped, and if none are,
/// new keys are refused (the bound holds against a flood of fresh names or addresses).
const MAX_KEYS: usize = 100_000;

struct Book<K> {
    tallies: Mutex<HashMap<K, Tally>>,
}

impl<K: Eq + Hash + Clone> Book<K> {
    fn new() -> Self {
        Self {
            tallies: Mutex::new(HashMap::new()),
        }
    }

    /// Counts the start of an attempt; `Err(retry_after)` when refused.
    fn start(
        &self,
        key: &K,
        max_failures: u32,
        max_running: u32,
        window: Duration,
        now: Instant,
    ) -> Result<(), Duration> {
        let mut map = self.tallies.lock();
        if map.len() >= MAX_KEYS && !map.contains_key(key) {
            map.retain(|_, t| t.running > 0 || now.duration_since(t.since) < window);
            if map.len() >= MAX_KEYS {
                return Err(window);
            }
        }
        let t = map.entry(key.clone()).or_insert(Tally {
            since: now,
            failures: 0,
            running: 0,
        });
        if now.duration_since(t.since) >= window {
            t.since = now;
            t.failures = t.failures.min(t.running);
        }
        let retry = window.saturating_sub(now.duration_since(t.since));
        if t.failures >= max_failures || t.running >= max_running {
            return Err(retry.max(Duration::from_secs(1)));
        }
        t.failures += 1;
        t.running += 1;
        Ok(())
    }

    fn finish(&self, key: &K, ok: bool) {
        let mut map = self.tallies.lock();
        if let Some(t) = map.get_mut(key) {
            t.running = t.running.saturating_sub(1);
            if ok {
                t.failures = t.failures.saturating_sub(1);
            }
        }
    }
}

pub struct LoginThrottle {
    limits: LoginLimits,
    accounts: Book<String>,
    addrs: Book<IpAddr>,
}

/// One attempt in progress; `succeeded` takes its failure back, dropping it keeps it.
pub struct Attempt<'a> {
    throttle: &'a LoginThrottle,
    account: String,
    addr: Option<IpAddr>,
    ok: bool,
}

impl Attempt<'_> {
    pub fn succeeded(mut self) {
        self.ok = true;
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        self.throttle.accounts.finish(&self.account, self.ok);
        if let Some(a) = &self.addr {
            self.throttle.addrs.finish(a, self.ok);
        }
    }
}

impl LoginThrottle {
    pub fn new(limits: LoginLimits) -> Self {
        Self {
            limits,
            accounts: Book::new(),
            addrs: Book::new(),
        }
    }

    /// Starts an attempt to prove the password of `account` (an email, lower-cased) from
    /// `addr`, or refuses it with RATE_LIMITED.
    pub fn start(&self, account: &str, addr: Option<IpAddr>) -> ApiResult<Attempt<'_>> {
        self.start_at(account, addr, Instant::now())
    }

    fn start_at(
        &self,
        account: &str,
        addr: Option<IpAddr>,
        now: Instant,
    ) -> ApiResult<Attempt<'_>> {
        let l = self.limits;
        let account = account.trim().to_ascii_lowercase();
        if let Some(a) = &addr {
            self.addrs
                .start(a, l.per_addr, l.concurrent_per_addr, l.window, now)
                .map_err(|retry| refused("from your address", retry))?;
        }
        if let Err(retry) = self
            .accounts
            .start(&account, l.per_account, u32::MAX, l.window, now)
        {
            if let Some(a) = &addr {
                self.addrs.finish(a, false);
            }
            return Err(refused("for this account", retry));
        }
        Ok(Attempt {
            throttle: self,
            account,
            addr,
            ok: false,
        })
    }
}

pub(crate) fn refused(whom: &str, retry: Duration) -> ApiError {
    metrics::counter!("bai_login_throttled_total").increment(1);
    let secs = retry.as_secs().max(1);
    ApiError::new(
        ErrorCode::RateLimited,
        format!("Too many failed login attempts {whom}. Try again in {secs} seconds."),
    )
    .with_header("retry-after", secs.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle() -> LoginThrottle {
        LoginThrottle::new(LoginLimits {
            per_account: 3,
            per_addr: 5,
            concurrent_per_addr: 2,
            window: Duration::from_secs(60),
        })
    }

    #[test]
    fn account_blocks_after_failures_and_success_takes_back() {
        let t = throttle();
        let now = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        t.start_at("X@y", Some(a), now).unwrap().succeeded();
        for _ in 0..3 {
            drop(t.start_at("x@y", Some(a), now).unwrap());
        }
        // Blocked for the account from any address, before any password is checked.
        let e = t.start_at("x@y", Some(b), now).err().unwrap();
        assert_eq!(e.code, ErrorCode::RateLimited);
        // Another account from the first address still goes (2 of 5 address failures left).
        t.start_at("z@y", Some(a), now).unwrap().succeeded();
        // The block ends with the window.
        assert!(
            t.start_at("x@y", Some(b), now + Duration::from_secs(61))
                .is_ok()
        );
    }

    #[test]
    fn parallel_attempts_from_one_address_are_capped() {
        let t = throttle();
        let now = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let first = t.start_at("p@y", Some(a), now).unwrap();
        let second = t.start_at("q@y", Some(a), now).unwrap();
        assert!(t.start_at("r@y", Some(a), now).is_err());
        first.succeeded();
        drop(second);
        assert!(t.start_at("r@y", Some(a), now).is_ok());
    }
}
