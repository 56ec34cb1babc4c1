//! A session is its kernels: all of them in launch order (main first, then by local rank),
//! the main one, and the container a kernel runs in.
use entity::enums::ClusterRole;
use entity::{kernels, sessions};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use std::sync::Arc;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::store::Runtime;

/// The agent and container of a kernel that is running now.
pub async fn container_of(
    state: &impl Runtime,
    k: &kernels::Model,
) -> ApiResult<(std::sync::Arc<crate::agents::Agent>, String)> {
    let (Some(agent_id), Some(container)) = (&k.agent, &k.container_id) else {
        return Err(ApiError::bad_request("The session has no container"));
    };
    let agent = state
        .agents()
        .get(agent_id)
        .await
        .ok_or_else(|| crate::agents::not_alive(agent_id))?;
    Ok((agent, container.clone()))
}

pub async fn main_kernel<C: ConnectionTrait>(db: &C, session: Uuid) -> ApiResult<kernels::Model> {
    kernels::Entity::find()
        .filter(kernels::Column::SessionId.eq(session))
        .filter(kernels::Column::ClusterRole.eq(ClusterRole::Main))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found("kernel of session", session))
}

/// The main kernels of `sessions` (one query; a session without one is absent).
pub async fn main_kernels<C: ConnectionTrait>(
    db: &C,
    sessions: &[Uuid],
) -> ApiResult<Vec<kernels::Model>> {
    Ok(kernels::Entity::find()
        .filter(kernels::Column::SessionId.is_in(sessions.iter().copied()))
        .filter(kernels::Column::ClusterRole.eq(ClusterRole::Main))
        .all(db)
        .await?)
}

/// The kernels of a session, main first, then by local rank.
pub async fn kernels_of<C: ConnectionTrait>(
    db: &C,
    session: Uuid,
) -> ApiResult<Vec<kernels::Model>> {
    let mut ks = kernels::Entity::find()
        .filter(kernels::Column::SessionId.eq(session))
        .all(db)
        .await?;
    in_kernel_order(&mut ks);
    Ok(ks)
}

/// A session's kernels in their order: main first, then by local rank (placements and
/// launches name them in this order).
pub fn in_kernel_order(ks: &mut [kernels::Model]) {
    ks.sort_by_key(|k| {
        (
            k.session_id,
            k.cluster_role != ClusterRole::Main,
            k.local_rank,
        )
    });
}

/// A cluster whose containers may run on several agents.
pub fn is_multi_node(s: &sessions::Model) -> bool {
    s.cluster_mode == entity::enums::ClusterMode::MultiNode && s.cluster_size > 1
}

/// Stops and removes a session's containers other than `main` (a cluster's `all`, each on its
/// own agent), and a cluster's networks or peer rules on every agent it used; failures, and
/// whatever is on the agent `silent` (which did not answer just now), are left to the
/// reconciliation.
pub(super) async fn remove_others(
    state: &impl Runtime,
    s: &sessions::Model,
    all: &[kernels::Model],
    main: Uuid,
    silent: Option<&str>,
) {
    let id = s.id;
    if all.len() < 2 {
        return;
    }
    let mut agents: Vec<Arc<crate::agents::Agent>> = Vec::new();
    let mut others = Vec::new();
    for k in all {
        let Some(agent) = (match k.agent.as_deref().filter(|a| Some(*a) != silent) {
            Some(a) => state.agents().get(a).await,
            None => None,
        }) else {
            continue;
        };
        if !agents.iter().any(|a| a.info().id == agent.info().id) {
            agents.push(agent.clone());
        }
        if let (true, Some(container)) = (k.id != main, &k.container_id) {
            others.push((k.id, container.clone(), agent));
        }
    }
    // All at once: each may take its stop's grace period.
    let ends = others.into_iter().map(|(kernel, container, agent)| async move {
        if let Err(e) = agent.stop(&container, 3).await {
            tracing::warn!(session = %id, container = %container, error = ?e, "stopping a cluster container failed; removing it anyway");
        }
        if let Err(e) = agent.remove(&container, kernel).await {
            tracing::warn!(session = %id, container = %container, error = ?e, "removing a cluster container failed; the reconciliation removes it");
        }
    });
    futures_util::future::join_all(ends).await;
    for agent in agents {
        if let Err(e) = agent.remove_cluster(id, is_multi_node(s)).await {
            tracing::warn!(session = %id, agent = %agent.info().id, error = ?e, "removing a cluster's network or peer rules failed; the reconciliation removes them");
        }
    }
}
