//! What the caller may still allocate (summary page, launch dialog): `resource_usage`,
//! following Backend.AI's `/resource/check-presets` (which the REST surface serves from here).
use async_graphql::{Context, Object, SimpleObject};
use entity::enums::SessionStatus;
use entity::slots::ResourceSlots;
use entity::{keypair_resource_policies, keypairs, sessions};
use sea_orm::{ColumnTrait, QueryFilter};
use serde_json::{Value, json};
use uuid::Uuid;

use super::slots_json;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::graphql::{context::authed, scalars::BigInt, scalars::JsonString};
use crate::sessions::visible;
use crate::state::AppState;

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct PresetAvailability {
    pub name: String,
    pub resource_slots: JsonString,
    pub shared_memory: Option<BigInt>,
    /// Some alive agent has room for it and the caller's limits allow it.
    pub allocatable: bool,
}

/// What the caller may still allocate (summary page, launch dialog), following Backend.AI's
/// `/resource/check-presets`.
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ResourceUsage {
    pub keypair_limits: JsonString,
    pub keypair_using: JsonString,
    /// What the keypair's sessions occupy in the resource group asked about.
    pub keypair_using_in_scaling_group: JsonString,
    pub keypair_remaining: JsonString,
    /// 0 = unlimited.
    pub concurrency_limit: i32,
    pub concurrency_used: u64,
    /// What the project's sessions occupy (everyone's).
    pub group_using: JsonString,
    /// What the caller's own sessions in the project occupy.
    pub group_user_using: JsonString,
    /// The project's limits (`total_resource_slots`; empty = unlimited).
    pub group_limits: JsonString,
    pub group_name: String,
    /// Sessions occupying resources now that the caller may see (its own for a user, its
    /// domain's for a domain admin, all for a superadmin).
    pub visible_sessions_running: u64,
    pub scaling_group: String,
    /// Capacity of the resource group's alive agents.
    pub scaling_group_capacity: JsonString,
    /// Free capacity of the resource group's alive agents.
    pub scaling_group_remaining: JsonString,
    pub presets: Vec<PresetAvailability>,
}

#[derive(Default)]
pub struct UsageQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl UsageQuery {
    async fn resource_usage(
        &self,
        ctx: &Context<'_>,
        group_id: Option<Uuid>,
        scaling_group: Option<String>,
    ) -> crate::graphql::context::Result<ResourceUsage> {
        let (state, caller) = authed(ctx)?;
        Ok(resource_usage(state, caller, group_id, scaling_group).await?)
    }
}

pub(crate) async fn resource_usage(
    state: &AppState,
    caller: &Caller,
    group_id: Option<Uuid>,
    scaling_group: Option<String>,
) -> ApiResult<ResourceUsage> {
    let db = &state.read;
    let ak = caller
        .access_key
        .clone()
        .ok_or_else(|| ApiError::bad_request("This account has no keypair"))?;
    let kp = crate::lookup::get::<keypairs::Entity>(db, "keypair", ak.clone()).await?;
    let policy = crate::lookup::get::<keypair_resource_policies::Entity>(
        db,
        "resource policy",
        kp.resource_policy.clone(),
    )
    .await?;
    let group = match group_id {
        Some(g) => crate::groups::find_visible(db, caller, g).await?,
        None => crate::groups::default_of(db, &caller.domain_name).await?,
    };
    let allowed = crate::scaling_groups::allowed_for(
        db,
        &caller.domain_name,
        caller.uuid,
        Some(group.id),
        Some(&ak),
    )
    .await?;
    let sg = match scaling_group {
        Some(sg) if allowed.contains(&sg) => sg,
        Some(sg) => return Err(ApiError::not_found("resource group", sg)),
        None => allowed.first().cloned().unwrap_or_default(),
    };
    let allocated = crate::sessions::allocated(db).await?;
    let mut key_using = ResourceSlots::new();
    let mut key_using_sg = ResourceSlots::new();
    let mut group_using = ResourceSlots::new();
    let mut group_user_using = ResourceSlots::new();
    let mut concurrency = 0u64;
    for s in &allocated {
        if s.access_key == ak {
            key_using = key_using.add(&s.requested_slots);
            concurrency += 1;
            if s.scaling_group_name.as_deref() == Some(sg.as_str()) {
                key_using_sg = key_using_sg.add(&s.requested_slots);
            }
        }
        if s.group_id == group.id {
            group_using = group_using.add(&s.requested_slots);
            if s.user_uuid == caller.uuid {
                group_user_using = group_user_using.add(&s.requested_slots);
            }
        }
    }
    // The one definition of who sees which session.
    let visible_sessions_running = {
        use sea_orm::PaginatorTrait;
        visible(caller)
            .filter(sessions::Column::Status.is_in(SessionStatus::ALLOCATED.iter().copied()))
            .count(&state.read)
            .await?
    };
    let unspecified = crate::policies::unspecified_limit(&policy);
    // Remaining per limited slot (unlimited slots are left out, as "Infinity").
    let mut remaining = serde_json::Map::new();
    for (slot, _) in entity::slots::KNOWN_SLOTS {
        let v = match policy.total_resource_slots.limit(slot, unspecified) {
            entity::slots::SlotLimit::Limited(max) => json!(
                (max - key_using.get(slot))
                    .max(rust_decimal::Decimal::ZERO)
                    .to_string()
            ),
            entity::slots::SlotLimit::Unlimited => json!("Infinity"),
        };
        remaining.insert(slot.to_string(), v);
    }
    let alive = crate::agents::schedulable_in(db, &sg).await?;
    let mut capacity = ResourceSlots::new();
    let mut free = ResourceSlots::new();
    for a in &alive {
        capacity = capacity.add(&a.available_slots);
        free = free.add(&a.available_slots.sub(&a.occupied_slots));
    }
    let mut presets = Vec::new();
    for p in crate::presets::list(db).await? {
        let fits_agent = alive.iter().any(|a| {
            p.resource_slots
                .le(&a.available_slots.sub(&a.occupied_slots))
        });
        let fits_policy = policy
            .total_resource_slots
            .exceeded_by(&key_using.add(&p.resource_slots), unspecified)
            .is_empty();
        let under_concurrency = policy.max_concurrent_sessions == 0
            || concurrency < u64::try_from(policy.max_concurrent_sessions).unwrap_or(0);
        presets.push(PresetAvailability {
            name: p.name,
            resource_slots: slots_json(&p.resource_slots),
            shared_memory: p.shared_memory.map(BigInt),
            allocatable: fits_agent && fits_policy && under_concurrency,
        });
    }
    Ok(ResourceUsage {
        keypair_limits: JsonString(
            serde_json::to_value(&policy.total_resource_slots).unwrap_or_default(),
        ),
        keypair_using: slots_json(&key_using),
        keypair_using_in_scaling_group: slots_json(&key_using_sg),
        keypair_remaining: JsonString(Value::Object(remaining)),
        concurrency_limit: policy.max_concurrent_sessions,
        concurrency_used: concurrency,
        group_using: slots_json(&group_using),
        group_user_using: slots_json(&group_user_using),
        group_limits: JsonString(
            serde_json::to_value(&group.total_resource_slots).unwrap_or_default(),
        ),
        group_name: group.name.clone(),
        visible_sessions_running,
        scaling_group: sg,
        scaling_group_capacity: slots_json(&capacity),
        scaling_group_remaining: slots_json(&free),
        presets,
    })
}
