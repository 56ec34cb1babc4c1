//! What a session's owner does to it after launch: terminate (or cancel while pending),
//! rename, read its logs; who depends on it; this process following session events.
use entity::enums::{ClusterRole, SessionStatus};
use entity::sessions;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, Set, TransactionTrait,
};
use uuid::Uuid;

use super::create::validate_name;
use super::kernels::{kernels_of, main_kernel, remove_others};
use super::status::{Change, apply, publish};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::store::Runtime;

/// Terminates a session: a pending one is CANCELLED; a running one goes TERMINATING, its
/// container is stopped and removed (output kept), then TERMINATED.
pub async fn terminate(state: &impl Runtime, id: Uuid, reason: &str) -> ApiResult<sessions::Model> {
    terminate_with(state, id, reason, None).await
}

/// [`terminate`], recording a batch job's `result` as it ends (a job past its
/// `batch_timeout` fails: `session_failure` with the reason, as Backend.AI's `task-timeout`).
pub async fn terminate_with(
    state: &impl Runtime,
    id: Uuid,
    reason: &str,
    result: Option<entity::enums::SessionResult>,
) -> ApiResult<sessions::Model> {
    let lock = state.session_locks().get(id).await;
    // A launch waiting for a bootstrap script lets go at once.
    let _asked = state.session_locks().ask_to_end(id);
    let _guard = lock.lock().await;
    let s = crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await?;
    let info = Some(reason.to_string());
    match s.status {
        SessionStatus::Pending => {
            apply(
                state,
                id,
                SessionStatus::Cancelled,
                Change {
                    info,
                    ..Default::default()
                },
            )
            .await
        }
        status if status.is_over() => Err(ApiError::bad_request(format!(
            "Session '{}' has already ended ({})",
            s.name, s.status
        ))),
        _ => {
            apply(
                state,
                id,
                SessionStatus::Terminating,
                Change {
                    info: info.clone(),
                    ..Default::default()
                },
            )
            .await?;
            let all = kernels_of(state.db(), id).await?;
            let k = all
                .first()
                .filter(|k| k.cluster_role == ClusterRole::Main)
                .ok_or_else(|| ApiError::not_found("kernel of session", id))?;
            let mut log = None;
            let mut silent = None;
            if let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id)
                && let Some(agent) = state.agents().get(agent_id).await
            {
                // A user may end a session whose agent does not answer; its container is
                // removed by the reconciliation when the agent is back.
                // An engine that does not answer is asked once, not three times (each
                // call would wait for the timeout).
                match agent.stop(container, 3).await {
                    Err(e) if e.is_unreachable() => {
                        tracing::warn!(session = %id, container = %container, error = ?e, "the agent does not answer; the reconciliation removes the container when it is back");
                        silent = Some(agent_id.as_str());
                    }
                    stopped => {
                        if let Err(e) = stopped {
                            tracing::warn!(session = %id, container = %container, error = ?e, "stopping a container failed; removing it anyway");
                        }
                        log = agent.logs(container).await.ok();
                        if let Err(e) = agent.remove(container, k.id).await {
                            tracing::warn!(session = %id, container = %container, error = ?e, "removing a container failed; the reconciliation removes it");
                        }
                    }
                }
            }
            // The others on agents that answer go now, whether or not the main one's did.
            remove_others(state, &s, &all, k.id, silent).await;
            apply(
                state,
                id,
                SessionStatus::Terminated,
                Change {
                    info,
                    log,
                    result,
                    ..Default::default()
                },
            )
            .await
        }
    }
}

/// Renames a running session (Backend.AI renames only those), keeping names unique among the
/// keypair's live sessions.
pub async fn rename(state: &impl Runtime, id: Uuid, new_name: &str) -> ApiResult<sessions::Model> {
    validate_name(new_name)?;
    let lock = state.session_locks().get(id).await;
    let _guard = lock.lock().await;
    let txn = state.db().begin().await?;
    let s = crate::lookup::get::<sessions::Entity>(&txn, "session", id).await?;
    if s.status != SessionStatus::Running {
        return Err(ApiError::bad_request(format!(
            "Only a running session can be renamed; '{}' is {}",
            s.name, s.status
        )));
    }
    if s.name == new_name {
        return Ok(s);
    }
    let taken = sessions::Entity::find()
        .filter(sessions::Column::AccessKey.eq(&s.access_key))
        .filter(sessions::Column::Name.eq(new_name))
        .filter(sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
        .one(&txn)
        .await?;
    if taken.is_some() {
        return Err(ApiError::conflict(format!(
            "You already have a live session named '{new_name}'"
        )));
    }
    let mut m = s.into_active_model();
    m.name = Set(new_name.to_string());
    let renamed = m.update(&txn).await?;
    txn.commit().await?;
    publish(state, &renamed, "session_renamed", None);
    Ok(renamed)
}

/// The live sessions that depend on `id`, directly or through others.
pub async fn dependents(state: &impl Runtime, id: Uuid) -> ApiResult<Vec<Uuid>> {
    let mut seen: std::collections::HashSet<Uuid> = std::collections::HashSet::from([id]);
    let mut all = Vec::new();
    let mut frontier = vec![id];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for chunk in frontier.chunks(500) {
            for e in entity::session_dependencies::Entity::find()
                .filter(entity::session_dependencies::Column::DependsOn.is_in(chunk.to_vec()))
                .all(state.db())
                .await?
            {
                if seen.insert(e.session_id) {
                    next.push(e.session_id);
                }
            }
        }
        all.extend(next.iter().copied());
        frontier = next;
    }
    let mut live = Vec::new();
    for chunk in all.chunks(500) {
        live.extend(
            sessions::Entity::find()
                .filter(sessions::Column::Id.is_in(chunk.to_vec()))
                .filter(sessions::Column::Status.is_in(SessionStatus::LIVE.iter().copied()))
                .all(state.db())
                .await?
                .into_iter()
                .map(|s| s.id),
        );
    }
    Ok(live)
}

/// Several managers: what another process's session changes mean here (its list counts are
/// stale; an ended session's apps are gone). On one process this happens where they change.
pub async fn follow(state: impl Runtime) {
    if !state.events().spans_processes() {
        return;
    }
    crate::events::follow(state.events(), |e| match e {
        Some(Event::Session(e)) => {
            state.session_counts().changed();
            if e.status.is_over() {
                state.started_apps().forget(e.session_id);
            }
        }
        Some(Event::BgTask(t)) => state.bgtasks().heard(t),
        Some(_) => {}
        None => state.session_counts().changed(),
    })
    .await
}

/// The container's output: live while it runs, the kept copy afterwards.
pub async fn logs(state: &impl Runtime, id: Uuid) -> ApiResult<String> {
    let k = main_kernel(state.db(), id).await?;
    if k.status == SessionStatus::Running
        && let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id)
        && let Some(agent) = state.agents().get(agent_id).await
    {
        return Ok(agent.logs(container).await?);
    }
    Ok(k.container_log.unwrap_or_default())
}
