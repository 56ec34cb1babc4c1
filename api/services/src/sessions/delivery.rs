//! Images reach the agent that needs them: pulled from the registry the catalog names when one
//! is configured, otherwise (or when that pull fails) copied from another agent that holds the
//! image, `docker save` streamed into `docker load` through bai (no registry, no shared disk).
//! The session shows PULLING with the per-cent done, live.

use std::sync::Arc;

use bai_engine::{ByteStream, EngineError};
use entity::enums::AgentStatus;
use entity::{agents, images};
use futures_util::StreamExt;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::agents::Agent;
use crate::error::{ApiError, ApiResult};
use crate::store::Runtime;

/// The shortest time between two progress updates of a session (each is a row write and an
/// event).
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Per-cent of `done` in `total` (0 while the total is unknown, 99 until it is over).
pub fn percent(done: u64, total: u64) -> u8 {
    if total == 0 {
        return 0;
    }
    u8::try_from((u128::from(done) * 100 / u128::from(total)).min(99)).unwrap_or(99)
}

/// Brings `reference` (the catalog's `image`) onto `agent`, reporting progress on `session`,
/// and records the agent as holding it.
pub async fn bring(
    state: &impl Runtime,
    session: Uuid,
    image: &images::Model,
    agent_id: &str,
    agent: &Arc<Agent>,
    reference: &str,
) -> ApiResult<()> {
    // One transfer of an image to an agent at a time; whoever waited finds it there.
    let _turn = state
        .agents()
        .turn(format!("image-transfer:{agent_id}:{}", image.id))
        .await;
    if agent.has_image(reference).await? {
        return crate::images::local::mark_installed(state, image, agent_id).await;
    }
    let (tx, rx) = tokio::sync::watch::channel(None::<u8>);
    let reporter = tokio::spawn(report(state.clone(), session, reference.to_string(), rx));
    let progress = move |done: u64, total: u64| {
        let p = Some(percent(done, total));
        tx.send_if_modified(|old| std::mem::replace(old, p) != p);
    };
    // Said at once, however the transfer goes (layers the engine has need no bytes).
    progress(0, 0);
    let outcome = arrive(state, image, agent_id, agent, reference, &progress).await;
    drop(progress); // ends the reporter
    if let Err(e) = reporter.await {
        tracing::warn!(session = %session, error = %e, "the progress reporter of an image transfer ended badly");
    }
    outcome?;
    crate::images::local::mark_installed(state, image, agent_id).await
}

async fn arrive(
    state: &impl Runtime,
    image: &images::Model,
    agent_id: &str,
    agent: &Arc<Agent>,
    reference: &str,
    progress: bai_engine::Progress<'_>,
) -> ApiResult<()> {
    let registry = entity::container_registries::Entity::find()
        .filter(entity::container_registries::Column::Hostname.eq(&image.registry))
        .one(state.db())
        .await?;
    let mut pull_failed = None;
    if let Some(registry) = registry {
        let creds = registry
            .username
            .map(|u| (u, registry.password.unwrap_or_default()));
        match agent.pull(reference, creds, progress).await {
            Ok(()) => return Ok(()),
            Err(e) => {
                tracing::warn!(agent = %agent_id, image = %reference, error = ?e, "pulling an image failed; trying a copy from another agent");
                pull_failed = Some(e);
            }
        }
    }
    // Agents that hold it and answer, this one excepted.
    let alive: Vec<String> = agents::Entity::find()
        .filter(agents::Column::Status.eq(AgentStatus::Alive))
        .all(state.db())
        .await?
        .into_iter()
        .map(|a| a.id)
        .collect();
    let mut last = pull_failed;
    for source_id in image
        .installed_agents
        .0
        .iter()
        .filter(|a| a.as_str() != agent_id && alive.contains(a))
    {
        let Some(source) = state.agents().get(source_id).await else {
            continue;
        };
        match copy(source.as_ref(), agent.as_ref(), reference, progress).await {
            Ok(()) => {
                tracing::info!(image = %reference, from = %source_id, to = %agent_id, "image copied between agents");
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(image = %reference, from = %source_id, to = %agent_id, error = ?e, "copying an image between agents failed");
                last = Some(e);
            }
        }
    }
    Err(match last {
        Some(e) => ApiError::from(e),
        None => ApiError::bad_request(format!(
            "The image {reference} is on no agent that answers and no configured registry serves it"
        )),
    })
}

/// `docker save` on `from` streamed into `docker load` on `to`, counting the bytes.
async fn copy(
    from: &Agent,
    to: &Agent,
    reference: &str,
    progress: bai_engine::Progress<'_>,
) -> Result<(), EngineError> {
    let (size, archive) = from.export_image(reference).await?;
    progress(0, size);
    let counted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = counted.clone();
    let archive: ByteStream = Box::pin(archive.inspect(move |chunk| {
        if let Ok(bytes) = chunk {
            seen.fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
    }));
    // The load runs while a ticker reports what has gone through.
    let load = to.load_image(archive);
    tokio::pin!(load);
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
    loop {
        tokio::select! {
            done = &mut load => {
                done?;
                break;
            }
            _ = tick.tick() => progress(counted.load(std::sync::atomic::Ordering::Relaxed), size),
        }
    }
    // A `docker save` archive is a little larger than the image: never past 99 before the end.
    progress(size, size);
    Ok(())
}

/// Writes the session's progress ("pulling <image>: 42%") as it changes, at most every
/// [`PROGRESS_EVERY`], until the transfer ends (the sender is dropped).
async fn report(
    state: impl Runtime,
    session: Uuid,
    reference: String,
    mut rx: tokio::sync::watch::Receiver<Option<u8>>,
) {
    while rx.changed().await.is_ok() {
        let Some(p) = *rx.borrow_and_update() else {
            continue;
        };
        if let Err(e) = crate::sessions::status::pulling(&state, session, &reference, p).await {
            tracing::warn!(session = %session, error = %e.message, "recording an image transfer's progress failed");
        }
        tokio::time::sleep(PROGRESS_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn percent_stays_below_100_until_the_end() {
        assert_eq!(super::percent(0, 0), 0);
        assert_eq!(super::percent(5, 10), 50);
        assert_eq!(super::percent(10, 10), 99);
        assert_eq!(super::percent(12, 10), 99);
        assert_eq!(super::percent(u64::MAX, u64::MAX), 99);
    }
}
