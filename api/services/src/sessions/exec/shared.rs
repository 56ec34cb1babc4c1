//! Executions across managers (PostgreSQL only). The manager running a program copies its
//! output to `exec_chunks` every [`COPY_EVERY`] (the newest part, as bounded as in memory:
//! older chunks are deleted as the ring drops them), with the run's state in `exec_runs`, and
//! writes to the program what other managers left for it in `exec_inputs` (at most
//! [`MAX_PENDING_INPUTS`] waiting). Every other manager reads a run from there: its snapshot,
//! its output as it comes, and Backend.AI's `continue` polls, whose read position is the
//! row's (`polled`, moved by compare-and-set), so polls through different managers never
//! answer the same output twice. The leader removes finished runs after [`FINISHED_TTL`]
//! and the runs of managers that stopped (`reconcile::forget_expired`).
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Statement, TransactionTrait, Value};
use uuid::Uuid;

use super::runs::{Chunk, FINISHED_TTL, MAX_OUTPUT_BYTES, Run};
use crate::error::{ApiError, ApiResult};
use crate::store::Runtime;

/// How often the running manager copies new output (and reads waiting input).
pub const COPY_EVERY: Duration = Duration::from_millis(200);
/// How often a reader through another manager looks for more.
const READ_EVERY: Duration = Duration::from_millis(200);
/// Inputs waiting for the running manager, per run.
pub const MAX_PENDING_INPUTS: i64 = 64;
/// Chunks per INSERT statement.
const CHUNKS_PER_INSERT: usize = 500;

fn stmt(sql: &str, values: Vec<Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// A run's row.
pub struct Header {
    pub session_id: Uuid,
    pub owner: Uuid,
    pub first_seq: u64,
    pub next_seq: u64,
    pub polled: u64,
    pub finished: bool,
    pub exit_code: Option<i64>,
}

fn seq(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn db_seq(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn header_of(r: &QueryResult) -> Result<Header, sea_orm::DbErr> {
    Ok(Header {
        session_id: r.try_get("", "session_id")?,
        owner: r.try_get("", "owner")?,
        first_seq: seq(r.try_get("", "first_seq")?),
        next_seq: seq(r.try_get("", "next_seq")?),
        polled: seq(r.try_get("", "polled")?),
        finished: r.try_get("", "finished")?,
        exit_code: r.try_get("", "exit_code")?,
    })
}

/// A new run of this manager's, before its program starts.
pub async fn register(
    state: &impl Runtime,
    id: Uuid,
    session: &entity::sessions::Model,
) -> ApiResult<()> {
    state
        .db()
        .execute(stmt(
            "INSERT INTO exec_runs (id, session_id, owner, manager, first_seq, next_seq, polled, \
             finished, exit_code, updated_at) VALUES ($1, $2, $3, $4, 0, 0, 0, false, NULL, now())",
            vec![
                id.into(),
                session.id.into(),
                session.user_uuid.into(),
                state.cluster().id.clone().into(),
            ],
        ))
        .await?;
    Ok(())
}

/// Removes a run that never started (best effort: the leader removes it later otherwise).
pub async fn forget(state: &impl Runtime, id: Uuid) {
    if let Err(e) = state
        .db()
        .execute(stmt("DELETE FROM exec_runs WHERE id = $1", vec![id.into()]))
        .await
    {
        tracing::warn!(run = %id, error = %e, "removing an execution that did not start");
    }
}

pub async fn header(state: &impl Runtime, id: Uuid) -> ApiResult<Option<Header>> {
    header_on(state.read(), id).await
}

/// The run's row as `conn` reads it (the writer's connection sees a poll just made).
async fn header_on(conn: &sea_orm::DatabaseConnection, id: Uuid) -> ApiResult<Option<Header>> {
    let row = conn
        .query_one(stmt(
            "SELECT session_id, owner, first_seq, next_seq, polled, finished, exit_code \
             FROM exec_runs WHERE id = $1",
            vec![id.into()],
        ))
        .await?;
    Ok(row.as_ref().map(header_of).transpose()?)
}

fn static_stream(s: &str) -> &'static str {
    match s {
        "stdout" => "stdout",
        "finished" => "finished",
        "truncated" => "truncated",
        _ => "stderr",
    }
}

/// The copied chunks from `from` on (a `truncated` chunk first when some were dropped), and
/// the next sequence number to ask for.
pub async fn since(
    state: &impl Runtime,
    id: Uuid,
    h: &Header,
    from: u64,
) -> ApiResult<(Vec<Chunk>, u64)> {
    let rows = state
        .read()
        .query_all(stmt(
            "SELECT seq, stream, data, exit_code FROM exec_chunks \
             WHERE run_id = $1 AND seq >= $2 ORDER BY seq",
            vec![id.into(), db_seq(from).into()],
        ))
        .await?;
    let mut out = Vec::with_capacity(rows.len() + 1);
    let first = rows
        .first()
        .map(|r| r.try_get::<i64>("", "seq").map(seq))
        .transpose()?
        .unwrap_or(h.next_seq)
        .max(h.first_seq.min(h.next_seq));
    if from < first {
        out.push(super::runs::truncated(id, from, first));
    }
    let mut next = from.max(first);
    for r in rows {
        let c = Chunk {
            run_id: id,
            seq: seq(r.try_get("", "seq")?),
            stream: static_stream(&r.try_get::<String>("", "stream")?),
            data: r.try_get("", "data")?,
            exit_code: r.try_get("", "exit_code")?,
        };
        next = c.seq + 1;
        out.push(c);
    }
    Ok((out, next))
}

/// Until the run ends, or at most `wait` (reading its row every [`READ_EVERY`]).
pub async fn wait_finished(state: &impl Runtime, id: Uuid, wait: Duration) -> ApiResult<()> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let h = header(state, id)
            .await?
            .ok_or_else(|| ApiError::not_found("execution run", id))?;
        if h.finished || tokio::time::Instant::now() >= deadline {
            return Ok(());
        }
        tokio::time::sleep(READ_EVERY.min(deadline - tokio::time::Instant::now())).await;
    }
}

/// The output since the last poll through any manager; the read position moves by
/// compare-and-set (a poll that lost reads again from the winner's position).
pub async fn poll(
    state: &impl Runtime,
    id: Uuid,
    local: Option<&Arc<Run>>,
) -> ApiResult<(Vec<Chunk>, bool, Option<i64>)> {
    for _ in 0..8 {
        // The position is read from the writer: a poll just made through another manager
        // is seen.
        let h = header_on(state.db(), id)
            .await?
            .ok_or_else(|| ApiError::not_found("execution run", id))?;
        // The running manager answers from memory (ahead of its copy); its end is its
        // memory's too.
        let (chunks, next, finished, exit_code) = match local {
            Some(run) => {
                let (chunks, next) = run.since(h.polled);
                let (finished, exit_code) = run.is_finished();
                (chunks, next, finished, exit_code)
            }
            None => {
                let (chunks, next) = since(state, id, &h, h.polled).await?;
                (chunks, next, h.finished, h.exit_code)
            }
        };
        let moved = state
            .db()
            .execute(stmt(
                "UPDATE exec_runs SET polled = $2 WHERE id = $1 AND polled = $3",
                vec![id.into(), db_seq(next).into(), db_seq(h.polled).into()],
            ))
            .await?;
        if moved.rows_affected() == 1 {
            return Ok((chunks, finished, exit_code));
        }
    }
    Err(ApiError::conflict(
        "The execution is being polled through other requests at the same time; try again",
    ))
}

/// Leaves input for the manager running the program (it writes it within [`COPY_EVERY`]).
pub async fn send_input(state: &impl Runtime, id: Uuid, data: &str) -> ApiResult<()> {
    let h = header(state, id)
        .await?
        .ok_or_else(|| ApiError::not_found("execution run", id))?;
    if h.finished {
        return Err(ApiError::bad_request(
            "The execution has finished; it reads no more input",
        ));
    }
    let left = state
        .db()
        .execute(stmt(
            "INSERT INTO exec_inputs (run_id, data) SELECT $1, $2 \
             WHERE (SELECT count(*) FROM exec_inputs WHERE run_id = $1) < $3",
            vec![
                id.into(),
                data.to_string().into(),
                MAX_PENDING_INPUTS.into(),
            ],
        ))
        .await?;
    if left.rows_affected() == 0 {
        return Err(ApiError::new(
            crate::error::ErrorCode::RateLimited,
            format!(
                "{MAX_PENDING_INPUTS} inputs already wait for the program to read them; wait a moment"
            ),
        ));
    }
    Ok(())
}

/// The output through another manager: what was copied, then more as it is copied, until the
/// `finished` chunk (or the run is removed).
pub fn follow(
    state: impl Runtime,
    id: Uuid,
) -> impl futures_util::Stream<Item = Chunk> + Send + 'static {
    futures_util::stream::unfold(
        (state, 0u64, VecDeque::<Chunk>::new(), false),
        move |(state, mut next, mut pending, done)| async move {
            loop {
                if let Some(c) = pending.pop_front() {
                    let end = c.stream == "finished";
                    return Some((c, (state, next, pending, end)));
                }
                if done {
                    return None;
                }
                let h = match header(&state, id).await {
                    Ok(Some(h)) => h,
                    Ok(None) => return None,
                    Err(e) => {
                        tracing::debug!(run = %id, error = %e.message, "reading an execution");
                        tokio::time::sleep(READ_EVERY).await;
                        continue;
                    }
                };
                match since(&state, id, &h, next).await {
                    Ok((chunks, upto)) if !chunks.is_empty() => {
                        next = upto;
                        pending.extend(chunks);
                    }
                    Ok(_) => tokio::time::sleep(READ_EVERY).await,
                    Err(e) => {
                        tracing::debug!(run = %id, error = %e.message, "reading an execution");
                        tokio::time::sleep(READ_EVERY).await;
                    }
                }
            }
        },
    )
}

/// The running manager's copy of `run` to the database, every [`COPY_EVERY`] until its end
/// is copied; it also writes the input other managers left.
pub async fn mirror(state: impl Runtime, run: Arc<Run>) {
    let mut copied = 0u64;
    let mut failures = 0u32;
    let mut tick = tokio::time::interval(COPY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match copy(&state, &run, copied).await {
            Ok((upto, finished)) => {
                copied = upto;
                failures = 0;
                if finished {
                    return;
                }
            }
            Err(e) => {
                failures += 1;
                tracing::warn!(run = %run.id, error = %e.message, "copying an execution's output");
                // A database gone for a minute: readers through other managers see the run
                // stop; this manager's own readers are unaffected.
                if failures > 300 {
                    return;
                }
            }
        }
        if let Err(e) = deliver_inputs(&state, &run).await {
            tracing::warn!(run = %run.id, error = %e.message, "reading input left for an execution");
        }
    }
}

/// Copies chunks from `from` on and the run's state in one transaction; returns where the
/// next copy starts and whether the end was copied.
async fn copy(state: &impl Runtime, run: &Run, from: u64) -> ApiResult<(u64, bool)> {
    let (chunks, first, next, finished, exit_code) = {
        let s = run.lock();
        let chunks: Vec<Chunk> = s.chunks.iter().filter(|c| c.seq >= from).cloned().collect();
        let first = s.chunks.front().map_or(s.next_seq, |c| c.seq);
        (chunks, first, s.next_seq, s.finished, s.exit_code)
    };
    if chunks.is_empty() && next == from && !finished {
        return Ok((from, false));
    }
    debug_assert!(chunks.iter().map(|c| c.data.len()).sum::<usize>() <= MAX_OUTPUT_BYTES * 2);
    let txn = state.db().begin().await?;
    for part in chunks.chunks(CHUNKS_PER_INSERT) {
        let mut sql =
            String::from("INSERT INTO exec_chunks (run_id, seq, stream, data, exit_code) VALUES ");
        let mut values: Vec<Value> = Vec::with_capacity(part.len() * 5);
        for (i, c) in part.iter().enumerate() {
            let b = i * 5;
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!(
                "(${}, ${}, ${}, ${}, ${})",
                b + 1,
                b + 2,
                b + 3,
                b + 4,
                b + 5
            ));
            values.extend([
                run.id.into(),
                db_seq(c.seq).into(),
                c.stream.to_string().into(),
                c.data.clone().into(),
                c.exit_code.into(),
            ]);
        }
        sql.push_str(" ON CONFLICT (run_id, seq) DO NOTHING");
        txn.execute(stmt(&sql, values)).await?;
    }
    txn.execute(stmt(
        "DELETE FROM exec_chunks WHERE run_id = $1 AND seq < $2",
        vec![run.id.into(), db_seq(first).into()],
    ))
    .await?;
    txn.execute(stmt(
        "UPDATE exec_runs SET first_seq = $2, next_seq = $3, finished = $4, exit_code = $5, \
         updated_at = now() WHERE id = $1",
        vec![
            run.id.into(),
            db_seq(first).into(),
            db_seq(next).into(),
            finished.into(),
            exit_code.into(),
        ],
    ))
    .await?;
    txn.commit().await?;
    Ok((next, finished))
}

/// Writes the input other managers left for `run`, in the order it was left.
async fn deliver_inputs(state: &impl Runtime, run: &Run) -> ApiResult<()> {
    let rows = state
        .db()
        .query_all(stmt(
            "DELETE FROM exec_inputs WHERE run_id = $1 RETURNING id, data",
            vec![run.id.into()],
        ))
        .await?;
    let mut inputs: Vec<(i32, String)> = rows
        .iter()
        .map(|r| Ok((r.try_get("", "id")?, r.try_get("", "data")?)))
        .collect::<Result<_, sea_orm::DbErr>>()?;
    inputs.sort_by_key(|(id, _)| *id);
    for (_, data) in inputs {
        if let Err(e) = run.send_input(&data).await {
            tracing::debug!(run = %run.id, error = %e.message, "input after the end");
        }
    }
    Ok(())
}

/// The leader's cleanup: finished runs older than the time they can be read, the runs of
/// managers no longer alive, and what belonged to removed runs.
pub async fn expire(db: &sea_orm::DatabaseConnection, alive_for: Duration) -> ApiResult<()> {
    db.execute(stmt(
        "DELETE FROM exec_runs WHERE (finished AND updated_at < now() - make_interval(secs => $1)) \
         OR manager NOT IN (SELECT id FROM managers WHERE seen_at > now() - make_interval(secs => $2))",
        vec![
            FINISHED_TTL.as_secs_f64().into(),
            alive_for.as_secs_f64().into(),
        ],
    ))
    .await?;
    db.execute(Statement::from_string(
        DbBackend::Postgres,
        "DELETE FROM exec_chunks WHERE run_id NOT IN (SELECT id FROM exec_runs)",
    ))
    .await?;
    db.execute(Statement::from_string(
        DbBackend::Postgres,
        "DELETE FROM exec_inputs WHERE run_id NOT IN (SELECT id FROM exec_runs)",
    ))
    .await?;
    Ok(())
}
