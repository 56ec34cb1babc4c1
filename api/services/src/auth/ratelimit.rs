//! Per-keypair request rate limit over fixed 15-minute windows (Backend.AI's rule).
//!
//! Windows are aligned to the clock (window = Unix time / 900 s), so a count is just
//! `(access key, window number) → requests`. One process counts in its memory; with several
//! managers each adds its counts to the shared ones every second and learns the others'
//! (`auth::shared`), and a request is refused when its own count and the others' together
//! reach the limit.
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

pub const WINDOW: Duration = Duration::from_secs(15 * 60);

/// One key's count in one window.
#[derive(Debug, Clone, Copy, Default)]
struct Count {
    window: u64,
    /// Requests admitted here.
    mine: u32,
    /// Requests the other managers admitted, as last read.
    others: u32,
    /// Admitted here and not yet added to the shared count.
    pending: u32,
}

#[derive(Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<String, Count>>,
}

/// The window `now` falls in.
pub fn window_of(now: chrono::DateTime<chrono::Utc>) -> u64 {
    u64::try_from(now.timestamp()).unwrap_or(0) / WINDOW.as_secs()
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
            windows.retain(|_, c| c.window == window);
        }
        let entry = windows.entry(key.to_string()).or_default();
        if entry.window != window {
            *entry = Count {
                window,
                ..Count::default()
            };
        }
        let used = entry.mine.saturating_add(entry.others);
        if used >= limit {
            return Err(Exceeded {
                retry_after: Duration::from_secs(WINDOW.as_secs() - unix_secs % WINDOW.as_secs()),
            });
        }
        entry.mine += 1;
        entry.pending += 1;
        Ok(limit - used - 1)
    }

    /// Whether `key` has a count for `window` here.
    pub fn knows(&self, key: &str, window: u64) -> bool {
        self.windows
            .lock()
            .get(key)
            .is_some_and(|c| c.window == window)
    }

    /// What the other managers counted for `key` in `window`.
    pub fn set_others(&self, key: &str, window: u64, others: u32) {
        let mut windows = self.windows.lock();
        let entry = windows.entry(key.to_string()).or_default();
        if entry.window != window {
            if entry.window > window {
                return; // a late answer for a window already over
            }
            *entry = Count {
                window,
                ..Count::default()
            };
        }
        entry.others = others;
    }

    /// The counts not yet shared: `(key, window, new requests, all of this process's)`.
    pub fn take_pending(&self) -> Vec<(String, u64, u32, u32)> {
        let mut windows = self.windows.lock();
        windows
            .iter_mut()
            .filter(|(_, c)| c.pending > 0)
            .map(|(k, c)| {
                let delta = std::mem::take(&mut c.pending);
                (k.clone(), c.window, delta, c.mine)
            })
            .collect()
    }

    /// Counts that could not be shared, for the next try.
    pub fn give_back(&self, key: &str, window: u64, delta: u32) {
        if let Some(c) = self.windows.lock().get_mut(key)
            && c.window == window
        {
            c.pending += delta;
        }
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

    #[test]
    fn the_other_managers_counts_are_part_of_the_limit() {
        let rl = RateLimiter::default();
        let t0 = 900 * 1000 + 100;
        let window = t0 / 900;
        assert!(!rl.knows("k", window));
        rl.set_others("k", window, 8);
        assert!(rl.knows("k", window));
        assert_eq!(rl.check_at("k", 10, t0).ok(), Some(1));
        assert!(rl.check_at("k", 10, t0).is_ok());
        assert!(rl.check_at("k", 10, t0).is_err(), "8 elsewhere + 2 here");
        assert_eq!(rl.take_pending(), vec![("k".to_string(), window, 2, 2)]);
        assert!(rl.take_pending().is_empty(), "taken once");
        rl.give_back("k", window, 2);
        assert_eq!(rl.take_pending(), vec![("k".to_string(), window, 2, 2)]);
        // A late answer for an older window changes nothing.
        rl.check_at("k", 10, t0 + 900).unwrap();
        rl.set_others("k", window, 100);
        assert!(rl.check_at("k", 10, t0 + 900).is_ok());
    }
}
