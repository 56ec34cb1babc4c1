//! Per-keypair request rate limit over fixed 15-minute windows (Backend.AI's rule).
//!
//! Windows are aligned to the clock (window = Unix time / 900 s), so a count is just
//! `(access key, window number) → requests`: a form several bai processes can share (an
//! atomic increment in a shared store) when there are several managers. Here it lives in
//! this process.
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

pub const WINDOW: Duration = Duration::from_secs(15 * 60);

#[derive(Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<String, (u64, u32)>>,
}

/// Over the limit: retry after this long.
#[derive(Debug)]
pub struct Exceeded {
    pub retry_after: Duration,
}

impl RateLimiter {
    /// Counts one request for `key` at `now` (the state's clock); `limit` 0 means unlimited.
    /// Returns what is left of the window.
    pub fn check(
        &self,
        key: &str,
        limit: u32,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<u32, Exceeded> {
        self.check_at(key, limit, u64::try_from(now.timestamp()).unwrap_or(0))
    }

    fn check_at(&self, key: &str, limit: u32, unix_secs: u64) -> Result<u32, Exceeded> {
        if limit == 0 {
            return Ok(u32::MAX);
        }
        let window = unix_secs / WINDOW.as_secs();
        let mut windows = self.windows.lock();
        if windows.len() > 100_000 {
            windows.retain(|_, (w, _)| *w == window);
        }
        let entry = windows.entry(key.to_string()).or_insert((window, 0));
        if entry.0 != window {
            *entry = (window, 0);
        }
        if entry.1 >= limit {
            return Err(Exceeded {
                retry_after: Duration::from_secs(WINDOW.as_secs() - unix_secs % WINDOW.as_secs()),
            });
        }
        entry.1 += 1;
        Ok(limit - entry.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_resets() {
        let rl = RateLimiter::default();
        let t0 = 900 * 1000 + 100;
        assert!(rl.check_at("k", 2, t0).is_ok());
        assert!(rl.check_at("k", 2, t0).is_ok());
        let over = rl.check_at("k", 2, t0 + 10).unwrap_err();
        assert_eq!(over.retry_after, Duration::from_secs(790));
        assert!(rl.check_at("other", 2, t0).is_ok());
        assert!(rl.check_at("k", 2, t0 + 800).is_ok(), "the next window");
        assert!(rl.check_at("k", 0, t0).is_ok());
    }
}
