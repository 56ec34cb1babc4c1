//! `background_task(task_id)` and `background_task_events(task_id)`.
use async_graphql::{Context, Object, Subscription};
use futures_util::Stream;
use uuid::Uuid;

use crate::bgtasks::TaskState;
use crate::graphql::context::authed;

#[derive(Default)]
pub struct BgTaskQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl BgTaskQuery {
    async fn background_task(
        &self,
        ctx: &Context<'_>,
        task_id: Uuid,
    ) -> crate::graphql::context::Result<TaskState> {
        let (state, caller) = authed(ctx)?;
        Ok(crate::bgtasks::visible(&tasks_of(state), caller, task_id)?)
    }
}

#[derive(Default)]
pub struct BgTaskSubscription;

#[Subscription(rename_fields = "snake_case", rename_args = "snake_case")]
impl BgTaskSubscription {
    /// The task's current state, then every update until it is done or failed.
    async fn background_task_events(
        &self,
        ctx: &Context<'_>,
        task_id: Uuid,
    ) -> crate::graphql::context::Result<impl Stream<Item = TaskState>> {
        let (state, caller) = authed(ctx)?;
        Ok(crate::bgtasks::follow(&tasks_of(state), caller, task_id)?)
    }
}

/// The background tasks' handles in `state`.
fn tasks_of(state: &crate::state::AppState) -> crate::bgtasks::Tasks {
    crate::bgtasks::Tasks::new(&state.local.bgtasks, &state.shared.events)
}
