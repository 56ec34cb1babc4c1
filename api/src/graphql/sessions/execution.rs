//! Code run inside a session: `execute_in_session` (query or batch mode), its input
//! (`send_execution_input`), its output so far (`execution`) and live (`execution_output`).
use async_graphql::{Context, Object, SimpleObject, Subscription};
use futures_util::{Stream, StreamExt};
use serde_json::json;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::graphql::{context::authed, scalars::JsonString};
use crate::sessions::find_own;
use crate::state::AppState;

#[derive(SimpleObject, Clone)]
#[graphql(rename_fields = "snake_case")]
pub struct ExecutionChunk {
    pub run_id: Uuid,
    /// Position in the run's output (replays and live chunks never overlap).
    pub seq: u64,
    /// stdout, stderr, or finished (then `exit_code` is set).
    pub stream: String,
    pub data: String,
    pub exit_code: Option<i64>,
}

impl From<crate::sessions::exec::Chunk> for ExecutionChunk {
    fn from(c: crate::sessions::exec::Chunk) -> Self {
        Self {
            run_id: c.run_id,
            seq: c.seq,
            stream: c.stream.into(),
            data: c.data,
            exit_code: c.exit_code,
        }
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct Execution {
    pub run_id: Uuid,
    pub session_id: Uuid,
    /// running or finished.
    pub status: String,
    pub exit_code: Option<i64>,
    pub console: Vec<ExecutionChunk>,
}

/// The run, if the caller may see its session.
/// An execution of a session the caller owns (or any, for a superadmin).
async fn own_run(
    state: &AppState,
    caller: &Caller,
    run_id: Uuid,
) -> ApiResult<crate::sessions::exec::Exec> {
    let run = crate::sessions::exec::find(state, run_id)
        .await?
        .ok_or_else(|| ApiError::not_found("execution", run_id))?;
    find_own(state, caller, run.session_id)
        .await
        .map_err(|_| ApiError::not_found("execution", run_id))?;
    Ok(run)
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ExecutionStarted {
    pub ok: bool,
    pub run_id: Uuid,
}

#[derive(Default)]
pub struct ExecutionQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ExecutionQuery {
    /// An execution's output so far and whether it finished.
    async fn execution(
        &self,
        ctx: &Context<'_>,
        run_id: Uuid,
    ) -> crate::graphql::context::Result<Execution> {
        let (state, caller) = authed(ctx)?;
        let run = own_run(state, caller, run_id).await?;
        let (chunks, finished, exit_code) = run.snapshot(state).await?;
        Ok(Execution {
            run_id,
            session_id: run.session_id,
            status: if finished { "finished" } else { "running" }.into(),
            exit_code,
            console: chunks.into_iter().map(ExecutionChunk::from).collect(),
        })
    }
}

#[derive(Default)]
pub struct ExecutionMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ExecutionMutation {
    /// Runs code in a running session: `mode` query (a snippet for the image's runtime) or
    /// batch (`options`: `{"build": "…", "exec": "…"}`, `*` = the runtime's default). Follow
    /// the output with `execution_output(run_id)`.
    async fn execute_in_session(
        &self,
        ctx: &Context<'_>,
        session_id: Uuid,
        mode: String,
        code: Option<String>,
        options: Option<JsonString>,
    ) -> crate::graphql::context::Result<ExecutionStarted> {
        let (state, caller) = authed(ctx)?;
        let s = find_own(state, caller, session_id).await?;
        let options = options.map(|o| o.0).unwrap_or_else(|| json!({}));
        let run =
            crate::sessions::exec::start(state, &s, &mode, code.as_deref().unwrap_or(""), &options)
                .await?;
        Ok(ExecutionStarted {
            ok: true,
            run_id: run.id,
        })
    }

    /// Sends text to a running execution's standard input.
    async fn send_execution_input(
        &self,
        ctx: &Context<'_>,
        run_id: Uuid,
        input: String,
    ) -> crate::graphql::context::Result<ExecutionStarted> {
        let (state, caller) = authed(ctx)?;
        let run = own_run(state, caller, run_id).await?;
        run.send_input(state, &input).await?;
        Ok(ExecutionStarted { ok: true, run_id })
    }
}

#[derive(Default)]
pub struct ExecutionSubscription;

#[Subscription(rename_fields = "snake_case", rename_args = "snake_case")]
impl ExecutionSubscription {
    /// An execution's output: what was produced so far, then live, ending after `finished`.
    async fn execution_output(
        &self,
        ctx: &Context<'_>,
        run_id: Uuid,
    ) -> crate::graphql::context::Result<impl Stream<Item = ExecutionChunk>> {
        let (state, caller) = authed(ctx)?;
        let run = own_run(state, caller, run_id).await?;
        Ok(run.follow(state).map(ExecutionChunk::from))
    }
}
