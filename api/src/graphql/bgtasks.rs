//! `background_task(task_id)` and `background_task_events(task_id)`.
use async_graphql::{Context, Object, Subscription};
use futures_util::Stream;
use uuid::Uuid;

use crate::bgtasks::{TaskState, TaskStatus};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::graphql::authed;

fn visible(ctx: &Context<'_>, id: Uuid) -> ApiResult<TaskState> {
    let (state, caller) = authed(ctx)?;
    state
        .bgtasks
        .get(id)
        .filter(|t| t.owner == caller.uuid || caller.is_superadmin())
        .ok_or_else(|| ApiError::not_found("background task", id))
}

#[derive(Default)]
pub struct BgTaskQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl BgTaskQuery {
    async fn background_task(
        &self,
        ctx: &Context<'_>,
        task_id: Uuid,
    ) -> crate::graphql::Result<TaskState> {
        Ok(visible(ctx, task_id)?)
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
    ) -> crate::graphql::Result<impl Stream<Item = TaskState>> {
        let (state, _) = authed(ctx)?;
        let events = state
            .events
            .stream_topic(crate::events::Topic::Task(task_id));
        let first = visible(ctx, task_id)?;
        let live = futures_util::StreamExt::filter_map(events, move |ev| {
            let out = match &*ev {
                Event::BgTask(t) if t.task_id == task_id => Some(t.clone()),
                _ => None,
            };
            std::future::ready(out)
        });
        let over = first.status != TaskStatus::Running;
        let stream = futures_util::StreamExt::chain(
            futures_util::stream::iter([first]),
            crate::events::until(live, over, |t: &TaskState| t.status != TaskStatus::Running),
        );
        Ok(stream)
    }
}
