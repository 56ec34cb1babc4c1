//! The executions of this process: each run's output as it comes (stdout/stderr chunks,
//! numbered so a late reader can replay without gaps), its input while it runs, its exit
//! code; and the bounded set of recent runs. Nothing here reaches the application state.
//!
//! Memory is bounded per run and in all: a run keeps its newest output up to
//! [`MAX_OUTPUT_BYTES`] (older chunks are dropped and readers get a `truncated` chunk saying
//! so), followers pull from that buffer at their own pace (a slow one misses only its own
//! chunks, is told, and always gets the `finished` chunk), finished runs expire after
//! [`FINISHED_TTL`], and at most [`MAX_RUNS`] runs ([`MAX_RUNS_PER_USER`] per user) are kept.
use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub run_id: Uuid,
    pub seq: u64,
    /// stdout, stderr, or `finished` (then `exit_code` is set).
    pub stream: &'static str,
    pub data: String,
    pub exit_code: Option<i64>,
}

/// Output kept per run (the newest part).
pub const MAX_OUTPUT_BYTES: usize = 512 * 1024;
/// How long a finished run can still be read.
pub const FINISHED_TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// Runs kept at once, and per user.
pub const MAX_RUNS: usize = 256;
pub const MAX_RUNS_PER_USER: usize = 32;

/// The notice that chunks `seq..first` were dropped.
pub(super) fn truncated(run_id: Uuid, seq: u64, first: u64) -> Chunk {
    Chunk {
        run_id,
        seq,
        stream: "truncated",
        data: format!(
            "[{} earlier output chunk(s) were dropped: output is kept up to {} KiB]\n",
            first - seq,
            MAX_OUTPUT_BYTES / 1024
        ),
        exit_code: None,
    }
}

#[derive(Default)]
pub(super) struct RunState {
    pub(super) chunks: VecDeque<Chunk>,
    pub(super) bytes: usize,
    pub(super) next_seq: u64,
    pub(super) finished: bool,
    pub(super) exit_code: Option<i64>,
    pub(super) finished_at: Option<std::time::Instant>,
}

pub struct Run {
    pub id: Uuid,
    pub session_id: Uuid,
    pub owner: Uuid,
    state: Mutex<RunState>,
    /// The next sequence number, for followers waiting for more.
    changed: tokio::sync::watch::Sender<u64>,
    pub(super) input: tokio::sync::Mutex<Option<Pin<Box<dyn AsyncWrite + Send>>>>,
    /// Where the next `poll` (Backend.AI's execute over HTTP) starts reading (with the run,
    /// in the process that owns it).
    polled: Mutex<u64>,
}

impl Run {
    pub(super) fn lock(&self) -> parking_lot::MutexGuard<'_, RunState> {
        self.state.lock()
    }

    pub(super) fn new(
        id: Uuid,
        session_id: Uuid,
        owner: Uuid,
        input: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    ) -> Self {
        Self {
            id,
            session_id,
            owner,
            state: Mutex::new(RunState::default()),
            changed: tokio::sync::watch::channel(0).0,
            input: tokio::sync::Mutex::new(input),
            polled: Mutex::new(0),
        }
    }

    /// What is kept so far (a `truncated` chunk first when older output was dropped),
    /// whether it ended, its exit code.
    pub fn snapshot(&self) -> (Vec<Chunk>, bool, Option<i64>) {
        let (chunks, _) = self.since(0);
        let s = self.lock();
        (chunks, s.finished, s.exit_code)
    }

    /// Chunks from `seq` on; when some of them were already dropped, a `truncated` chunk
    /// comes first. Returns the next sequence number to ask for.
    pub(super) fn since(&self, seq: u64) -> (Vec<Chunk>, u64) {
        let s = self.lock();
        let first = s.chunks.front().map_or(s.next_seq, |c| c.seq);
        let mut out = Vec::new();
        if seq < first {
            out.push(truncated(self.id, seq, first));
        }
        out.extend(s.chunks.iter().filter(|c| c.seq >= seq).cloned());
        (out, s.next_seq)
    }

    /// The output from the start (as kept), then live until the `finished` chunk, at the
    /// reader's pace: nothing is queued per reader.
    pub fn follow(self: Arc<Self>) -> impl futures_util::Stream<Item = Chunk> + Send + 'static {
        let rx = self.changed.subscribe();
        futures_util::stream::unfold(
            (self, rx, 0u64, VecDeque::<Chunk>::new(), false),
            |(run, mut rx, mut next, mut pending, done)| async move {
                loop {
                    if let Some(c) = pending.pop_front() {
                        let end = c.stream == "finished";
                        return Some((c, (run, rx, next, pending, end)));
                    }
                    if done {
                        return None;
                    }
                    rx.borrow_and_update();
                    let (chunks, upto) = run.since(next);
                    if chunks.is_empty() {
                        if rx.changed().await.is_err() {
                            return None;
                        }
                        continue;
                    }
                    next = upto;
                    pending.extend(chunks);
                }
            },
        )
    }

    /// Backend.AI's execute over HTTP: the output since the previous poll, once the run
    /// ends or `wait` passed (a long run answers in pieces); whether it ended, its exit code.
    pub async fn poll(&self, wait: std::time::Duration) -> (Vec<Chunk>, bool, Option<i64>) {
        self.wait_finished(wait).await;
        // One poll at a time reads on from where the last one stopped (two at once would
        // answer the same output twice).
        let chunks = {
            let mut polled = self.polled.lock();
            let (chunks, next) = self.since(*polled);
            *polled = (*polled).max(next);
            chunks
        };
        let s = self.lock();
        (chunks, s.finished, s.exit_code)
    }

    /// Until the run ends, or at most `wait`.
    pub(super) async fn wait_finished(&self, wait: std::time::Duration) {
        let mut rx = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        while !self.lock().finished {
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => break,
            }
        }
    }

    pub(super) fn is_finished(&self) -> (bool, Option<i64>) {
        let s = self.lock();
        (s.finished, s.exit_code)
    }

    pub(super) fn push(&self, stream: &'static str, data: String, exit_code: Option<i64>) {
        let next = {
            let mut s = self.lock();
            let chunk = Chunk {
                run_id: self.id,
                seq: s.next_seq,
                stream,
                data,
                exit_code,
            };
            s.next_seq += 1;
            s.bytes += chunk.data.len();
            s.chunks.push_back(chunk);
            while s.bytes > MAX_OUTPUT_BYTES && s.chunks.len() > 1 {
                if let Some(old) = s.chunks.pop_front() {
                    s.bytes -= old.data.len();
                }
            }
            if stream == "finished" {
                s.finished = true;
                s.exit_code = exit_code;
                s.finished_at = Some(std::time::Instant::now());
            }
            s.next_seq
        };
        self.changed.send_replace(next);
    }

    /// Writes to the program's standard input.
    pub async fn send_input(&self, data: &str) -> ApiResult<()> {
        let mut input = self.input.lock().await;
        let w = input.as_mut().ok_or_else(|| {
            ApiError::bad_request("The execution has finished; it reads no more input")
        })?;
        w.write_all(data.as_bytes())
            .await
            .map_err(|e| ApiError::bad_request(format!("could not send input: {e}")))?;
        w.flush()
            .await
            .map_err(|e| ApiError::bad_request(format!("could not send input: {e}")))
    }
}

/// Recent executions, by run id: process memory, bounded ([`MAX_RUNS`], [`FINISHED_TTL`]),
/// owned by the process that started them (a run's output streams from its engine
/// connection there). With several managers, the owner copies each run to the database
/// (`shared`), where every other manager reads it ([`find`]).
#[derive(Default)]
pub struct Runs {
    runs: Mutex<HashMap<Uuid, Arc<Run>>>,
}

impl Runs {
    pub fn get(&self, id: Uuid) -> Option<Arc<Run>> {
        self.lock().get(&id).cloned()
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<Uuid, Arc<Run>>> {
        self.runs.lock()
    }

    /// Keeps `run`, after dropping expired finished runs; refused (RATE_LIMITED) when the
    /// owner or the server holds too many runs still running or recently finished.
    pub(super) fn insert(&self, run: Arc<Run>) -> ApiResult<()> {
        self.insert_at(run, std::time::Instant::now())
    }

    fn insert_at(&self, run: Arc<Run>, now: std::time::Instant) -> ApiResult<()> {
        let mut runs = self.lock();
        runs.retain(|_, r| {
            r.lock()
                .finished_at
                .is_none_or(|t| now.duration_since(t) < FINISHED_TTL)
        });
        let mine = runs.values().filter(|r| r.owner == run.owner).count();
        if mine >= MAX_RUNS_PER_USER || runs.len() >= MAX_RUNS {
            // Make room by forgetting the oldest finished runs (of this owner first).
            let mut finished: Vec<(std::time::Instant, bool, Uuid)> = runs
                .values()
                .filter_map(|r| {
                    r.lock()
                        .finished_at
                        .map(|t| (t, r.owner != run.owner, r.id))
                })
                .collect();
            finished.sort();
            let mut freed = finished.into_iter();
            while runs.values().filter(|r| r.owner == run.owner).count() >= MAX_RUNS_PER_USER
                || runs.len() >= MAX_RUNS
            {
                match freed.next() {
                    Some((_, _, id)) => {
                        runs.remove(&id);
                    }
                    None => {
                        return Err(ApiError::new(
                            crate::error::ErrorCode::RateLimited,
                            format!(
                                "Too many executions are running (at most {MAX_RUNS_PER_USER} per user); wait for some to finish."
                            ),
                        ));
                    }
                }
            }
        }
        runs.insert(run.id, run);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[tokio::test]
    async fn output_is_a_bounded_ring_and_the_end_always_arrives() {
        let run = Arc::new(Run::new(
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
            None,
        ));
        // A reader that does not read while a noisy program writes 4 MiB.
        let slow = run.clone().follow();
        let line = "x".repeat(1024);
        for _ in 0..4096 {
            run.push("stdout", line.clone(), None);
        }
        run.push("finished", String::new(), Some(0));
        let kept: usize = run.lock().chunks.iter().map(|c| c.data.len()).sum();
        assert!(kept <= MAX_OUTPUT_BYTES, "{kept}");
        let (snap, finished, code) = run.snapshot();
        assert!(finished && code == Some(0));
        assert_eq!(snap[0].stream, "truncated");
        let got: Vec<Chunk> = slow.collect().await;
        assert_eq!(
            got[0].stream, "truncated",
            "the slow reader is told what it missed"
        );
        assert_eq!(got.last().map(|c| c.stream), Some("finished"));
        assert!(got.len() < 600);
    }

    #[test]
    fn runs_expire_and_are_capped_per_user() {
        let runs = Runs::default();
        let owner = Uuid::new_v4();
        let t0 = std::time::Instant::now();
        for _ in 0..MAX_RUNS_PER_USER {
            let r = Arc::new(Run::new(Uuid::new_v4(), Uuid::new_v4(), owner, None));
            runs.insert_at(r, t0).unwrap();
        }
        let extra = Arc::new(Run::new(Uuid::new_v4(), Uuid::new_v4(), owner, None));
        assert!(
            runs.insert_at(extra.clone(), t0).is_err(),
            "all still running"
        );
        // Another user is not affected.
        let other = Arc::new(Run::new(
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
            None,
        ));
        runs.insert_at(other, t0).unwrap();
        // Once one finishes, it makes room; finished runs expire after the TTL.
        let first = runs
            .lock()
            .values()
            .find(|r| r.owner == owner)
            .cloned()
            .unwrap();
        first.push("finished", String::new(), Some(0));
        runs.insert_at(extra, t0).unwrap();
        assert!(runs.get(first.id).is_none());
        let done = runs.lock().values().next().cloned().unwrap();
        done.push("finished", String::new(), Some(0));
        let later = Arc::new(Run::new(
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
            None,
        ));
        runs.insert_at(
            later,
            std::time::Instant::now() + FINISHED_TTL + std::time::Duration::from_secs(1),
        )
        .unwrap();
        assert!(runs.get(done.id).is_none());
    }
}
