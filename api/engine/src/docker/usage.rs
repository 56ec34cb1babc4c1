//! What an engine's usage samples know of its running containers. One sample asks the engine
//! for at most [`SAMPLE_MAX`] containers' figures (those never read first, then the longest
//! unread), so its cost is bounded whatever the engine holds: with 200 containers each is read
//! every few samples, and the totals add every running container's last reading.
use std::collections::HashMap;
use std::time::Instant;

/// The most containers one sample asks the engine about (a few at a time).
pub const SAMPLE_MAX: usize = 48;

/// A container's last reading: cumulative CPU time (ns) and memory now, and when.
#[derive(Clone, Copy, Debug)]
struct Reading {
    at: Instant,
    cpu_ns: u64,
    mem: u64,
}

/// The last reading of each running container of one engine: a cache of this process's
/// connection to it, bounded by the containers running there (stopped ones are forgotten at
/// each sample); another `bai serve` keeps its own when it drives the engine.
#[derive(Debug, Default)]
pub struct UsageBook {
    seen: HashMap<String, Reading>,
}

impl UsageBook {
    /// Forgets the containers that no longer run, and names the at most `max` of `running` to
    /// read now: never read first, then the longest unread.
    pub fn due(&mut self, running: &[String], max: usize) -> Vec<String> {
        self.seen.retain(|id, _| running.contains(id));
        let mut order: Vec<(Option<Instant>, &String)> = running
            .iter()
            .map(|id| (self.seen.get(id).map(|r| r.at), id))
            .collect();
        // None (never read) sorts first.
        order.sort_by_key(|(at, _)| *at);
        order
            .into_iter()
            .take(max)
            .map(|(_, id)| id.clone())
            .collect()
    }

    pub fn record(&mut self, id: String, cpu_ns: u64, mem: u64, at: Instant) {
        self.seen.insert(id, Reading { at, cpu_ns, mem });
    }

    /// CPU time and memory summed over the containers' last readings.
    pub fn totals(&self) -> (u64, u64) {
        self.seen.values().fold((0u64, 0u64), |(cpu, mem), r| {
            (cpu.saturating_add(r.cpu_ns), mem.saturating_add(r.mem))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i:03}")).collect()
    }

    #[test]
    fn each_sample_reads_a_bounded_share_and_every_container_in_turn() {
        let mut book = UsageBook::default();
        let running = ids(100);
        let t0 = Instant::now();
        let mut read = std::collections::HashSet::new();
        for round in 0..3u32 {
            let due = book.due(&running, 40);
            assert!(due.len() <= 40);
            for id in due {
                read.insert(id.clone());
                book.record(id, 10, 1, t0 + Duration::from_secs(u64::from(round)));
            }
        }
        assert_eq!(read.len(), 100, "every container read within three samples");
        assert_eq!(book.totals(), (1000, 100));
        // The oldest readings come next: c020–c039 (first round; c000–c019 were read again in
        // the third), then c040–c059 (second).
        let next = book.due(&running, 40);
        assert!(
            next.iter()
                .all(|id| ("c020".."c060").contains(&id.as_str())),
            "{next:?}"
        );
    }

    #[test]
    fn containers_that_stopped_are_forgotten() {
        let mut book = UsageBook::default();
        let now = Instant::now();
        for id in ids(3) {
            book.record(id, 5, 7, now);
        }
        let running = vec!["c001".to_string()];
        assert_eq!(book.due(&running, 10), vec!["c001".to_string()]);
        assert_eq!(book.totals(), (5, 7));
    }
}
