//! Time as a handle: the services ask `state.clock.now()` instead of reading the system clock,
//! so what depends on time (idle timeouts, lifetimes, retries, token expiry, signature skew)
//! is tested by moving a [`ManualClock`] instead of sleeping.
use parking_lot::Mutex;

use chrono::{DateTime, Duration, Utc};

pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock (production).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told (tests).
#[derive(Debug)]
pub struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self(Mutex::new(start))
    }

    fn with<T>(&self, f: impl FnOnce(&mut DateTime<Utc>) -> T) -> T {
        f(&mut self.0.lock())
    }

    /// Moves the clock forward (or back, with a negative duration).
    pub fn advance(&self, by: Duration) {
        self.with(|t| *t += by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        self.with(|t| *t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let start = Utc::now();
        let c = ManualClock::new(start);
        assert_eq!(c.now(), start);
        c.advance(Duration::seconds(90));
        assert_eq!(c.now() - start, Duration::seconds(90));
        assert!(SystemClock.now() >= start);
    }
}
