//! Per-keypair request rate limit over fixed 15-minute windows (Backend.AI's rule).
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const WINDOW: Duration = Duration::from_secs(15 * 60);

#[derive(Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<String, (Instant, u32)>>,
}

/// Over the limit: retry after this long.
#[derive(Debug)]
pub struct Exceeded {
    pub retry_after: Duration,
}

impl RateLimiter {
    /// Counts one request for `key`; `limit` 0 means unlimited. Returns what is left of the
    /// window.
    pub fn check(&self, key: &str, limit: u32) -> Result<u32, Exceeded> {
        self.check_at(key, limit, Instant::now())
    }

    fn check_at(&self, key: &str, limit: u32, now: Instant) -> Result<u32, Exceeded> {
        if limit == 0 {
            return Ok(u32::MAX);
        }
        let mut windows = match self.windows.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if windows.len() > 100_000 {
            windows.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
        }
        let entry = windows.entry(key.to_string()).or_insert((now, 0));
        if now.duration_since(entry.0) >= WINDOW {
            *entry = (now, 0);
        }
        if entry.1 >= limit {
            return Err(Exceeded {
                retry_after: WINDOW.saturating_sub(now.duration_since(entry.0)),
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
        let t0 = Instant::now();
        assert!(rl.check_at("k", 2, t0).is_ok());
        assert!(rl.check_at("k", 2, t0).is_ok());
        assert!(rl.check_at("k", 2, t0).is_err());
        assert!(rl.check_at("other", 2, t0).is_ok());
        assert!(rl.check_at("k", 2, t0 + WINDOW).is_ok());
        assert!(rl.check_at("k", 0, t0).is_ok());
    }
}
