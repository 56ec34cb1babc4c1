//! GraphQL for resource presets: `resource_preset(s)`, `create/modify/delete_resource_preset`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use entity::resource_presets as presets;
use entity::slots::ResourceSlots;
use sea_orm::{ActiveModelTrait, EntityTrait, IntoActiveModel, ModelTrait, QueryOrder, Set};
use serde_json::json;

use crate::error::ApiError;
use crate::events::{ChangeAction, ObjectKind};
use crate::graphql::{BigInt, JsonString, authed};

pub struct ResourcePreset(pub presets::Model);

#[Object(rename_fields = "snake_case")]
impl ResourcePreset {
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// `{"cpu": "2", "mem": "4294967296", …}`.
    async fn resource_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.resource_slots).unwrap_or_default())
    }
    /// Bytes; null = the default (64m).
    async fn shared_memory(&self) -> Option<BigInt> {
        self.0.shared_memory.map(BigInt)
    }
}

#[derive(Default)]
pub struct PresetQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl PresetQuery {
    async fn resource_preset(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> async_graphql::Result<ResourcePreset> {
        let (state, _) = authed(ctx)?;
        let p = crate::lookup::get::<presets::Entity>(&state.db, "resource preset", name.clone())
            .await?;
        Ok(ResourcePreset(p))
    }

    async fn resource_presets(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Vec<ResourcePreset>> {
        let (state, _) = authed(ctx)?;
        let rows = presets::Entity::find()
            .order_by_asc(presets::Column::CreatedAt)
            .all(&state.db)
            .await
            .map_err(ApiError::from)?;
        Ok(rows.into_iter().map(ResourcePreset).collect())
    }
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateResourcePresetInput {
    /// `{"cpu": "2", "mem": "4g", "cuda.shares": "0.5"}`.
    pub resource_slots: JsonString,
    /// e.g. `1g`; empty or absent = default.
    pub shared_memory: Option<String>,
}

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyResourcePresetInput {
    pub resource_slots: Option<JsonString>,
    pub shared_memory: Option<String>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateResourcePreset {
    pub ok: bool,
    pub msg: String,
    pub resource_preset: Option<ResourcePreset>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyResourcePreset {
    pub ok: bool,
    pub msg: String,
    pub resource_preset: Option<ResourcePreset>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct DeleteResourcePreset {
    pub ok: bool,
    pub msg: String,
}

#[derive(Default)]
pub struct PresetMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl PresetMutation {
    async fn create_resource_preset(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: CreateResourcePresetInput,
    ) -> async_graphql::Result<CreateResourcePreset> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let name = crate::validate::object_name("preset", &name)?;
        let slots = ResourceSlots::parse_json(&props.resource_slots.0).map_err(ApiError::from)?;
        let shm = props
            .shared_memory
            .as_deref()
            .map(crate::presets::parse_shared_memory)
            .transpose()?
            .flatten();
        crate::presets::validate(&slots, shm)?;
        if presets::Entity::find_by_id(name.clone())
            .one(&state.db)
            .await
            .map_err(ApiError::from)?
            .is_some()
        {
            return Err(
                ApiError::conflict(format!("Resource preset '{name}' already exists")).into(),
            );
        }
        let m = presets::ActiveModel {
            name: Set(name),
            resource_slots: Set(slots),
            shared_memory: Set(shm),
            created_at: Set(state.clock.now()),
        };
        let p = crate::audit::audited(&state.db, &caller.email, "create_resource_preset", "resource_preset", move |txn| {
            Box::pin(async move {
                let p = m.insert(txn).await?;
                let key = p.name.clone();
                let detail = json!({"resource_slots": p.resource_slots, "shared_memory": p.shared_memory});
                Ok((p, key, detail))
            })
        })
        .await?;
        state.events.changed(
            ObjectKind::ResourcePreset,
            ChangeAction::Created,
            &p.name,
            None,
        );
        Ok(CreateResourcePreset {
            ok: true,
            msg: "success".into(),
            resource_preset: Some(ResourcePreset(p)),
        })
    }

    async fn modify_resource_preset(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: ModifyResourcePresetInput,
    ) -> async_graphql::Result<ModifyResourcePreset> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let existing =
            crate::lookup::get::<presets::Entity>(&state.db, "resource preset", name.clone())
                .await?;
        let slots = match props.resource_slots {
            Some(v) => ResourceSlots::parse_json(&v.0).map_err(ApiError::from)?,
            None => existing.resource_slots.clone(),
        };
        let shm = match props.shared_memory.as_deref() {
            Some(s) => crate::presets::parse_shared_memory(s)?,
            None => existing.shared_memory,
        };
        crate::presets::validate(&slots, shm)?;
        let mut m = existing.into_active_model();
        m.resource_slots = Set(slots);
        m.shared_memory = Set(shm);
        let p = crate::audit::audited(&state.db, &caller.email, "modify_resource_preset", "resource_preset", move |txn| {
            Box::pin(async move {
                let p = m.update(txn).await?;
                let key = p.name.clone();
                let detail = json!({"resource_slots": p.resource_slots, "shared_memory": p.shared_memory});
                Ok((p, key, detail))
            })
        })
        .await?;
        state.events.changed(
            ObjectKind::ResourcePreset,
            ChangeAction::Modified,
            &p.name,
            None,
        );
        Ok(ModifyResourcePreset {
            ok: true,
            msg: "success".into(),
            resource_preset: Some(ResourcePreset(p)),
        })
    }

    async fn delete_resource_preset(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> async_graphql::Result<DeleteResourcePreset> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let existing =
            crate::lookup::get::<presets::Entity>(&state.db, "resource preset", name.clone())
                .await?;
        crate::audit::audited(
            &state.db,
            &caller.email,
            "delete_resource_preset",
            "resource_preset",
            move |txn| {
                Box::pin(async move {
                    let key = existing.name.clone();
                    existing.delete(txn).await?;
                    Ok(((), key, json!({})))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::ResourcePreset,
            ChangeAction::Deleted,
            &name,
            None,
        );
        Ok(DeleteResourcePreset {
            ok: true,
            msg: "success".into(),
        })
    }
}
