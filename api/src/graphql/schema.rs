//! The schema: Backend.AI's `/admin/gql` names (snake_case) assembled from the per-domain
//! query, mutation and subscription objects, with its limits.
use async_graphql::{MergedObject, MergedSubscription, Schema};

use crate::graphql::{limits, order};
use crate::state::AppState;

#[derive(MergedObject, Default)]
pub struct Query(
    crate::graphql::accounts::AccountQuery,
    crate::graphql::users::UserQuery,
    crate::graphql::users_v2::UserV2Query,
    crate::graphql::keypairs::KeypairQuery,
    crate::graphql::policies::PolicyQuery,
    crate::graphql::domains::DomainQuery,
    crate::graphql::groups::GroupQuery,
    crate::graphql::presets::PresetQuery,
    crate::graphql::scaling_groups::ScalingGroupQuery,
    crate::graphql::registries::RegistryQuery,
    crate::graphql::images::ImageQuery,
    crate::graphql::settings::SettingQuery,
    crate::graphql::sessions::SessionQuery,
    crate::graphql::sessions::SessionNodeQuery,
    crate::graphql::sessions::ExecutionQuery,
    crate::graphql::sessions::UsageQuery,
    crate::graphql::agents::AgentQuery,
    crate::graphql::bgtasks::BgTaskQuery,
    crate::graphql::storage::StorageQuery,
    crate::graphql::folder_nodes::FolderNodeQuery,
    crate::graphql::templates::TemplateQuery,
    crate::graphql::statistics::StatisticsQuery,
    crate::graphql::serving::ServingQuery,
);

#[derive(MergedObject, Default)]
pub struct Mutation(
    crate::graphql::accounts::AccountMutation,
    crate::graphql::users::UserMutation,
    crate::graphql::keypairs::KeypairMutation,
    crate::graphql::policies::PolicyMutation,
    crate::graphql::domains::DomainMutation,
    crate::graphql::groups::GroupMutation,
    crate::graphql::presets::PresetMutation,
    crate::graphql::scaling_groups::ScalingGroupMutation,
    crate::graphql::registries::RegistryMutation,
    crate::graphql::images::ImageMutation,
    crate::graphql::settings::SettingMutation,
    crate::graphql::sessions::SessionMutation,
    crate::graphql::sessions::ExecutionMutation,
    crate::graphql::agents::AgentMutation,
    crate::graphql::storage::StorageMutation,
    crate::graphql::templates::TemplateMutation,
    crate::graphql::serving::ServingMutation,
);

#[derive(MergedSubscription, Default)]
pub struct Subscription(
    crate::changes::ChangeSubscription,
    crate::graphql::sessions::SessionSubscription,
    crate::graphql::sessions::ExecutionSubscription,
    crate::graphql::bgtasks::BgTaskSubscription,
    crate::graphql::storage::StorageSubscription,
);

pub type BaiSchema = Schema<Query, Mutation, Subscription>;

/// The schema's types, with Relay's `Node`, which no field returns but Lablup's Web UI 26
/// spreads fragments on.
fn builder() -> async_graphql::SchemaBuilder<Query, Mutation, Subscription> {
    Schema::build(
        Query::default(),
        Mutation::default(),
        Subscription::default(),
    )
    .register_output_type::<crate::graphql::sessions::Node>()
}

pub fn build_schema(state: AppState) -> BaiSchema {
    let cfg = state.config.clone();
    let names = crate::graphql::context::Names::loader(state.read.clone());
    builder()
        .data(names)
        .data(state)
        .limit_depth(cfg.graphql_max_depth)
        .limit_complexity(cfg.graphql_max_complexity)
        .extension(limits::DocumentLimits {
            max_aliases: cfg.graphql_max_aliases,
            max_fields: cfg.graphql_max_fields,
        })
        .extension(order::SelectionOrder)
        .extension(crate::graphql::ws_guard::WsGuard)
        .finish()
}

/// The SDL committed as `api/schema.graphql`.
pub fn sdl() -> String {
    builder().finish().sdl()
}
