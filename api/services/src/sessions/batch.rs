//! Batch sessions: the main container's exit ends the session (with its result and exit
//! code), as does the batch timeout.
use entity::enums::{SessionResult, SessionStatus};
use entity::sessions;
use serde_json::{Value, json};
use uuid::Uuid;

use super::kernels::{kernels_of, remove_others};
use super::lifecycle::terminate_with;
use super::status::{Change, apply};
use crate::store::Runtime;

/// A batch session ends when its command exits: success for 0, failure otherwise, the exit
/// code in `status_data`, the output kept as the session log.
pub async fn watch_batch(
    state: impl Runtime,
    id: Uuid,
    agent_id: String,
    container_id: String,
    kernel_id: Uuid,
) {
    let Some(agent) = state.agents().get(&agent_id).await else {
        return;
    };
    let deadline = batch_deadline(&state, id).await;
    // An engine that does not answer says nothing about the job: keep waiting (the job may
    // be running), until it answers or the session ends some other way.
    let mut backoff = std::time::Duration::from_secs(1);
    let code = loop {
        let waited = match deadline {
            Some(d) => tokio::time::timeout_at(d, agent.wait(&container_id)).await,
            None => Ok(agent.wait(&container_id).await),
        };
        let Ok(waited) = waited else {
            tracing::info!(session = %id, "the batch job ran past its batch_timeout; ending it");
            // Backend.AI's reason for it (`KernelLifecycleEventReason.TASK_TIMEOUT`).
            if let Err(e) =
                terminate_with(&state, id, "task-timeout", Some(SessionResult::Failure)).await
                && e.code != crate::error::ErrorCode::BadRequest
            {
                tracing::warn!(session = %id, error = %e.message, cause = %e.chain(), "ending a batch job past its batch_timeout failed");
            }
            return;
        };
        match waited {
            Ok(code) => break Some(code),
            Err(e) if e.is_not_found() => break None,
            Err(e) => {
                tracing::warn!(session = %id, agent = %agent_id, error = ?e, "waiting for a batch job: the engine does not answer; waiting on");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(30));
                match crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await {
                    Ok(s) if s.status == SessionStatus::Running => continue,
                    Ok(_) => return,
                    Err(e) if e.code == crate::error::ErrorCode::NotFound => return,
                    Err(_) => continue,
                }
            }
        }
    };
    let lock = state.session_locks().get(id).await;
    // The job has ended: a setup still running under the lock (SSH in a cluster's containers
    // on other hosts) lets go instead of delaying its end.
    let _asked = state.session_locks().ask_to_end(id);
    let _guard = lock.lock().await;
    let Ok(s) = crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await else {
        return;
    };
    if s.status != SessionStatus::Running {
        return; // terminated by someone else, who cleaned up
    }
    let info = if code.is_some() {
        "task-finished"
    } else {
        "container-lost"
    };
    // The job has ended: TERMINATING at once, as Backend.AI's manager marks it, while the
    // containers go (a multi-node cluster's, on other hosts, take seconds).
    if let Err(e) = apply(
        &state,
        id,
        SessionStatus::Terminating,
        Change {
            info: Some(info.into()),
            ..Default::default()
        },
    )
    .await
    {
        tracing::warn!(session = %id, error = %e.message, "cannot mark an ended batch session TERMINATING; ending it all the same");
    }
    let log = agent.logs(&container_id).await.unwrap_or_default();
    if let Err(e) = agent.remove(&container_id, kernel_id).await {
        // The job has ended; its container goes with the next reconciliation.
        tracing::warn!(session = %id, container = %container_id, error = ?e, "removing a finished batch container failed");
    }
    // A cluster's other containers stood by for the main one: they go with it.
    match kernels_of(state.db(), id).await {
        Ok(all) => remove_others(&state, &s, &all, kernel_id, None).await,
        Err(e) => {
            tracing::warn!(session = %id, error = %e.message, "cannot list a session's containers to remove them; the reconciliation removes them")
        }
    }
    let exit = code.unwrap_or(-1);
    let change = Change {
        info: Some(info.into()),
        data: Some(json!({"kernel": {"exit_code": exit}})),
        result: Some(if exit == 0 {
            SessionResult::Success
        } else {
            SessionResult::Failure
        }),
        exit_code: i32::try_from(exit).ok(),
        log: Some(log),
        ..Default::default()
    };
    if let Err(e) = apply(&state, id, SessionStatus::Terminated, change).await {
        tracing::error!(session = %id, error = %e.message, cause = %e.chain(), "cannot record the end of a batch session");
    }
}

/// When a batch job must have ended: its `batch_timeout` after it started running (as the
/// status history says, so a restarted server keeps the same end); None without a limit.
/// The timer is owned by the process that drives the job's agent (it runs `watch_batch`);
/// the deadline itself is in the database, so whichever process watches next keeps it.
async fn batch_deadline(state: &impl Runtime, id: Uuid) -> Option<tokio::time::Instant> {
    let s = crate::lookup::get::<sessions::Entity>(state.db(), "session", id)
        .await
        .ok()?;
    let limit = chrono::Duration::seconds(s.batch_timeout?);
    let now = state.clock().now();
    let started = s
        .status_history
        .get("RUNNING")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or(now, |t| t.with_timezone(&chrono::Utc));
    let left = (started + limit - now).to_std().unwrap_or_default();
    Some(tokio::time::Instant::now() + left)
}
