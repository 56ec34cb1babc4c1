//! Code execution inside a running session (what the official CLI's `run` needs): query mode
//! runs a snippet with the image's runtime (`ai.backend.runtime-type`), batch mode runs build
//! and exec commands in /home/work. Output streams as it comes (stdout/stderr chunks, numbered
//! so a late subscriber can replay without gaps), stdin can be written while it runs, and the
//! exit code is recorded at the end. Executions count as activity for the idle timeout.
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

use entity::enums::SessionStatus;
use entity::sessions;
use futures_util::StreamExt;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

mod shared;

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
fn truncated(run_id: Uuid, seq: u64, first: u64) -> Chunk {
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
struct RunState {
    chunks: VecDeque<Chunk>,
    bytes: usize,
    next_seq: u64,
    finished: bool,
    exit_code: Option<i64>,
    finished_at: Option<std::time::Instant>,
}

pub struct Run {
    pub id: Uuid,
    pub session_id: Uuid,
    pub owner: Uuid,
    state: Mutex<RunState>,
    /// The next sequence number, for followers waiting for more.
    changed: tokio::sync::watch::Sender<u64>,
    input: tokio::sync::Mutex<Option<Pin<Box<dyn AsyncWrite + Send>>>>,
    /// Where the next `poll` (Backend.AI's execute over HTTP) starts reading (with the run,
    /// in the process that owns it).
    polled: Mutex<u64>,
}

impl Run {
    fn lock(&self) -> parking_lot::MutexGuard<'_, RunState> {
        self.state.lock()
    }

    fn new(
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
    fn since(&self, seq: u64) -> (Vec<Chunk>, u64) {
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
    async fn wait_finished(&self, wait: std::time::Duration) {
        let mut rx = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        while !self.lock().finished {
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => break,
            }
        }
    }

    fn is_finished(&self) -> (bool, Option<i64>) {
        let s = self.lock();
        (s.finished, s.exit_code)
    }

    fn push(&self, stream: &'static str, data: String, exit_code: Option<i64>) {
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
    fn insert(&self, run: Arc<Run>) -> ApiResult<()> {
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

/// An execution found by its id, wherever it runs: in this process (its output in memory), or
/// through another manager on the same database (its output as that manager copied it there,
/// at most [`shared::COPY_EVERY`] behind).
pub struct Exec {
    pub id: Uuid,
    pub session_id: Uuid,
    pub owner: Uuid,
    local: Option<Arc<Run>>,
}

/// The stream of an execution's output (see [`Run::follow`]).
pub type Output = Pin<Box<dyn futures_util::Stream<Item = Chunk> + Send + 'static>>;

/// The execution `id`, if this process or (several managers) any other keeps it.
pub async fn find(state: &AppState, id: Uuid) -> ApiResult<Option<Exec>> {
    if let Some(run) = state.exec_runs.get(id) {
        return Ok(Some(Exec::local(run)));
    }
    if !state.cluster.is_shared() {
        return Ok(None);
    }
    Ok(shared::header(state, id).await?.map(|h| Exec {
        id,
        session_id: h.session_id,
        owner: h.owner,
        local: None,
    }))
}

impl Exec {
    fn local(run: Arc<Run>) -> Self {
        Self {
            id: run.id,
            session_id: run.session_id,
            owner: run.owner,
            local: Some(run),
        }
    }

    /// What is kept so far, whether it ended, its exit code.
    pub async fn snapshot(&self, state: &AppState) -> ApiResult<(Vec<Chunk>, bool, Option<i64>)> {
        match &self.local {
            Some(run) => Ok(run.snapshot()),
            None => {
                let h = shared::header(state, self.id)
                    .await?
                    .ok_or_else(|| ApiError::not_found("execution", self.id))?;
                let (chunks, _) = shared::since(state, self.id, &h, 0).await?;
                Ok((chunks, h.finished, h.exit_code))
            }
        }
    }

    /// Backend.AI's execute over HTTP (see [`Run::poll`]). With several managers the read
    /// position is the database's, so polls through different managers read on from each
    /// other.
    pub async fn poll(
        &self,
        state: &AppState,
        wait: std::time::Duration,
    ) -> ApiResult<(Vec<Chunk>, bool, Option<i64>)> {
        match &self.local {
            Some(run) if !state.cluster.is_shared() => Ok(run.poll(wait).await),
            Some(run) => {
                run.wait_finished(wait).await;
                shared::poll(state, self.id, Some(run)).await
            }
            None => {
                shared::wait_finished(state, self.id, wait).await?;
                shared::poll(state, self.id, None).await
            }
        }
    }

    /// Writes to the program's standard input (through the manager running it).
    pub async fn send_input(&self, state: &AppState, data: &str) -> ApiResult<()> {
        match &self.local {
            Some(run) => run.send_input(data).await,
            None => shared::send_input(state, self.id, data).await,
        }
    }

    /// The output from the start (as kept), then live until the `finished` chunk.
    pub fn follow(&self, state: &AppState) -> Output {
        match &self.local {
            Some(run) => Box::pin(run.clone().follow()),
            None => Box::pin(shared::follow(state.clone(), self.id)),
        }
    }
}

fn option(options: &Value, key: &str) -> Option<String> {
    options
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .filter(|s| !s.trim().is_empty())
}

/// The command for `mode` on an image whose runtime is `runtime` (`python`, `cpp`, …).
pub fn command(
    runtime: &str,
    runtime_path: &str,
    mode: &str,
    code: &str,
    options: &Value,
) -> ApiResult<Vec<String>> {
    let sh = |script: String| vec!["/bin/bash".to_string(), "-c".to_string(), script];
    match mode {
        "query" => match runtime {
            "python" => Ok(vec![if runtime_path.is_empty() { "python3".into() } else { runtime_path.to_string() }, "-c".into(), code.to_string()]),
            "cpp" => Ok(vec![
                "/bin/bash".into(),
                "-c".into(),
                "printf '%s' \"$1\" > /tmp/bai-query.cpp && g++ -o /tmp/bai-query /tmp/bai-query.cpp && /tmp/bai-query".into(),
                "bai-query".into(),
                code.to_string(),
            ]),
            _ => Ok(sh(code.to_string())),
        },
        "batch" => {
            // "*" means the runtime's default, as Backend.AI's runners do.
            let default_build = if runtime == "cpp" { "g++ -o main *.cpp" } else { "" };
            let default_exec = match runtime {
                "python" => "python3 main.py",
                "cpp" => "./main",
                _ => "",
            };
            let pick = |key: &str, default: &str| match option(options, key) {
                Some(v) if v == "*" => default.to_string(),
                Some(v) => v,
                None => String::new(),
            };
            let build = pick("build", default_build);
            let exec = pick("exec", default_exec);
            let steps: Vec<String> = [build, exec].into_iter().filter(|s| !s.trim().is_empty()).collect();
            if steps.is_empty() {
                return Err(ApiError::bad_request("batch mode needs a build or exec command in options"));
            }
            Ok(sh(steps.join(" && ")))
        }
        other => Err(ApiError::bad_request(format!("unknown execution mode '{other}' (query or batch)"))),
    }
}

/// Starts an execution in a running session; returns the run at once (this process runs it).
pub async fn start(
    state: &AppState,
    session: &sessions::Model,
    mode: &str,
    code: &str,
    options: &Value,
) -> ApiResult<Exec> {
    if session.status != SessionStatus::Running {
        return Err(ApiError::bad_request(format!(
            "Session '{}' is not running ({})",
            session.name, session.status
        )));
    }
    if code.len() > 1024 * 1024 {
        return Err(ApiError::bad_request("The code is larger than 1 MiB"));
    }
    let k = super::main_kernel(&state.db, session.id).await?;
    let (agent, container) = super::container_of(state, &k).await?;
    let image = crate::images::resolve(&state.db, &k.image, Some(&k.architecture)).await?;
    let label = |key: &str| {
        image
            .labels
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let cmd = command(
        &label("ai.backend.runtime-type"),
        &label("ai.backend.runtime-path"),
        mode,
        code,
        options,
    )?;
    let run_id = Uuid::new_v4();
    let shared = state.cluster.is_shared();
    if shared {
        // Before the program starts: its output has a place the moment it comes.
        shared::register(state, run_id, session).await?;
    }
    let attached = agent.attach_exec(&container, cmd, false, Vec::new()).await;
    let bai_engine::AttachedExec {
        id: exec_id,
        mut output,
        input,
    } = match attached {
        Ok(a) => a,
        Err(e) => {
            if shared {
                shared::forget(state, run_id).await;
            }
            return Err(e.into());
        }
    };
    let run = Arc::new(Run::new(run_id, session.id, session.user_uuid, Some(input)));
    if let Err(e) = state.exec_runs.insert(run.clone()) {
        if shared {
            shared::forget(state, run_id).await;
        }
        return Err(e);
    }
    if shared {
        tokio::spawn(shared::mirror(state.clone(), run.clone()));
    }
    touch(state, session.id).await;
    let (task_state, task_run) = (state.clone(), run.clone());
    tokio::spawn(async move {
        while let Some(item) = output.next().await {
            match item {
                Ok(bai_engine::ExecOutput::Stderr(message)) => task_run.push(
                    "stderr",
                    String::from_utf8_lossy(&message).into_owned(),
                    None,
                ),
                Ok(bai_engine::ExecOutput::Stdout(out)) => {
                    task_run.push("stdout", String::from_utf8_lossy(&out).into_owned(), None)
                }
                Err(e) => {
                    task_run.push(
                        "stderr",
                        {
                            let reference = Uuid::new_v4();
                            tracing::warn!(%reference, error = ?e, "execution output stream failed");
                            format!("[the output stream broke off (reference {reference})]\n")
                        },
                        None,
                    );
                    break;
                }
            }
        }
        *task_run.input.lock().await = None;
        let code = agent.exec_exit_code(&exec_id).await;
        task_run.push("finished", String::new(), code);
        touch(&task_state, task_run.session_id).await;
    });
    Ok(Exec::local(run))
}

/// The leader's cleanup of executions copied to the database (several managers).
pub async fn expire_shared(state: &AppState) -> ApiResult<()> {
    shared::expire(&state.db, state.cluster.ttl() * 2).await
}

/// Marks the session as used now (idle timeout).
pub async fn touch(state: &AppState, session: Uuid) {
    let touched = sessions::Entity::update_many()
        .col_expr(
            sessions::Column::LastActivity,
            sea_orm::sea_query::Expr::value(state.clock.now()),
        )
        .filter(sessions::Column::Id.eq(session))
        .exec(&state.db)
        .await;
    // Activity is advisory (the idle reaper reads it): a missed write only makes the session
    // look idle a little earlier, so it is logged, not returned.
    if let Err(e) = touched {
        tracing::warn!(session = %session, error = %e, "recording session activity failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn commands_per_runtime() {
        let none = serde_json::json!({});
        assert_eq!(
            command("python", "/usr/bin/python3", "query", "print(1)", &none).unwrap(),
            ["/usr/bin/python3", "-c", "print(1)"]
        );
        let cpp = command("cpp", "/usr/bin/g++", "query", "int main(){}", &none).unwrap();
        assert_eq!(
            cpp.last().unwrap(),
            "int main(){}",
            "code passed as an argument, never spliced into the script"
        );
        let batch = command(
            "python",
            "",
            "batch",
            "",
            &serde_json::json!({"build": "*", "exec": "python x.py a b"}),
        )
        .unwrap();
        assert_eq!(batch[2], "python x.py a b");
        let defaults = command(
            "cpp",
            "",
            "batch",
            "",
            &serde_json::json!({"build": "*", "exec": "*"}),
        )
        .unwrap();
        assert_eq!(defaults[2], "g++ -o main *.cpp && ./main");
        assert!(command("python", "", "batch", "", &none).is_err());
        assert!(command("python", "", "repl", "", &none).is_err());
    }
}
