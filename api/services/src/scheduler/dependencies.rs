//! Session dependencies (Backend.AI's `dependencies`): a pending session takes part in a pass
//! only once every session it depends on ended in success. While one still runs it waits,
//! saying for which; when one ended otherwise (failure, cancelled, error) it is cancelled with
//! that reason, since it could never start.
use std::collections::HashMap;
use std::sync::Arc;

use entity::enums::{SessionResult, SessionStatus};
use entity::{session_dependencies, sessions};
use sea_orm::sea_query::Query;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;
use uuid::Uuid;

use crate::error::ApiResult;
use crate::sessions::Change;
use crate::store::Runtime;
use bai_core::plan::{Decision, Predicate, Reason};

/// Pending sessions held back by their dependencies, with why.
#[derive(Default)]
pub(super) struct Waiting {
    pub sessions: Vec<sessions::Model>,
    pub decisions: Vec<Decision>,
}

impl Waiting {
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

/// How a dependency stands for the session waiting on it.
#[derive(Debug, PartialEq, Eq)]
enum Standing {
    Succeeded,
    Running,
    /// Ended otherwise: the dependent can never start.
    Failed(String),
}

fn standing(name: &str, status: SessionStatus, result: SessionResult) -> Standing {
    match (status, result) {
        (SessionStatus::Terminated, SessionResult::Success) => Standing::Succeeded,
        (status, result) if status.is_over() => Standing::Failed(format!(
            "The session '{name}' it depends on ended without success ({status}, result {})",
            result.as_str()
        )),
        _ => Standing::Running,
    }
}

/// Splits the pending sessions into those free to be placed and those that wait; cancels
/// those whose dependency failed.
pub(super) async fn gate(
    state: &impl Runtime,
    pending: Vec<sessions::Model>,
) -> ApiResult<(Vec<sessions::Model>, Waiting)> {
    let edges = session_dependencies::Entity::find()
        .filter(
            session_dependencies::Column::SessionId.in_subquery(
                Query::select()
                    .column(sessions::Column::Id)
                    .from(sessions::Entity)
                    .and_where(sessions::Column::Status.eq(SessionStatus::Pending))
                    .to_owned(),
            ),
        )
        .all(state.read())
        .await?;
    if edges.is_empty() {
        return Ok((pending, Waiting::default()));
    }
    let mut deps_of: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    for e in &edges {
        deps_of.entry(e.session_id).or_default().push(e.depends_on);
    }
    let mut wanted: Vec<Uuid> = edges.iter().map(|e| e.depends_on).collect();
    wanted.sort();
    wanted.dedup();
    let mut deps: HashMap<Uuid, sessions::Model> = HashMap::new();
    for chunk in wanted.chunks(500) {
        for d in sessions::Entity::find()
            .filter(sessions::Column::Id.is_in(chunk.iter().copied()))
            .all(state.read())
            .await?
        {
            deps.insert(d.id, d);
        }
    }
    let mut free = Vec::with_capacity(pending.len());
    let mut waiting = Waiting::default();
    for s in pending {
        let Some(ids) = deps_of.get(&s.id) else {
            free.push(s);
            continue;
        };
        let mut running = Vec::new();
        let mut failed = None;
        for id in ids {
            // A dependency deleted with its owner is one that never succeeds.
            let st = deps.get(id).map_or_else(
                || Standing::Failed(format!("The session {id} it depends on no longer exists")),
                |d| standing(&d.name, d.status, d.result),
            );
            match st {
                Standing::Succeeded => {}
                Standing::Running => {
                    if let Some(d) = deps.get(id) {
                        running.push(d.name.clone());
                    }
                }
                Standing::Failed(why) => {
                    failed = Some(why);
                    break;
                }
            }
        }
        if let Some(why) = failed {
            cancel(state, s.id, why).await?;
        } else if running.is_empty() {
            free.push(s);
        } else {
            running.sort();
            let reason = Arc::new(Reason {
                status_info: "predicate-checks-failed",
                failed: vec![Predicate {
                    name: "dependencies",
                    msg: format!(
                        "Waiting for the sessions it depends on to finish with success: {}",
                        running.join(", ")
                    ),
                }],
                passed: Vec::new(),
            });
            waiting.decisions.push(Decision::Wait {
                session: s.id,
                reason,
            });
            waiting.sessions.push(s);
        }
    }
    Ok((free, waiting))
}

/// Cancels a pending session whose dependency failed, unless it left PENDING meanwhile.
async fn cancel(state: &impl Runtime, id: Uuid, why: String) -> ApiResult<()> {
    let lock = state.session_locks().get(id).await;
    let _guard = lock.lock().await;
    let now = crate::lookup::get::<sessions::Entity>(state.db(), "session", id).await?;
    if now.status != SessionStatus::Pending {
        return Ok(());
    }
    tracing::info!(session = %id, reason = %why, "cancelling a session whose dependency failed");
    crate::sessions::apply(
        state,
        id,
        SessionStatus::Cancelled,
        Change {
            info: Some("dependency-failed".into()),
            data: Some(json!({"error": {"message": why}})),
            ..Default::default()
        },
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_success_lets_a_dependent_start() {
        let s = |status, result| ("a", status, result);
        let standing = |(n, st, r): (&str, SessionStatus, SessionResult)| standing(n, st, r);
        assert_eq!(
            standing(s(SessionStatus::Terminated, SessionResult::Success)),
            Standing::Succeeded
        );
        assert_eq!(
            standing(s(SessionStatus::Running, SessionResult::Undefined)),
            Standing::Running
        );
        assert_eq!(
            standing(s(SessionStatus::Pending, SessionResult::Undefined)),
            Standing::Running
        );
        for (st, r) in [
            (SessionStatus::Terminated, SessionResult::Failure),
            (SessionStatus::Terminated, SessionResult::Undefined),
            (SessionStatus::Cancelled, SessionResult::Undefined),
            (SessionStatus::Error, SessionResult::Undefined),
        ] {
            assert!(matches!(standing(s(st, r)), Standing::Failed(_)), "{st}");
        }
    }
}
