//! GraphQL for resource presets: `resource_preset(s)`, `create/modify/delete_resource_preset`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use entity::resource_presets as presets;
use entity::slots::ResourceSlots;
use uuid::Uuid;

use crate::error::ApiError;
use crate::graphql::{context::authed, scalars::BigInt, scalars::JsonString};

pub struct ResourcePreset(pub presets::Model);

#[Object(rename_fields = "snake_case")]
impl ResourcePreset {
    /// A stable id made from the name (bai keys presets by name; renaming one is a new
    /// preset).
    async fn id(&self) -> Uuid {
        crate::presets::id_of(&self.0.name)
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// Backend.AI's per-resource-group presets: bai offers each preset in every group (null).
    async fn scaling_group_name(&self) -> Option<String> {
        None
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
    ) -> crate::graphql::context::Result<ResourcePreset> {
        let (state, _) = authed(ctx)?;
        let p = crate::presets::find(&state.read, &name).await?;
        Ok(ResourcePreset(p))
    }

    async fn resource_presets(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<ResourcePreset>> {
        let (state, _) = authed(ctx)?;
        let rows = crate::presets::list(&state.read).await?;
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
    ) -> crate::graphql::context::Result<CreateResourcePreset> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let slots = ResourceSlots::parse_json(&props.resource_slots.0).map_err(ApiError::from)?;
        let shm = props
            .shared_memory
            .as_deref()
            .map(crate::presets::parse_shared_memory)
            .transpose()?
            .flatten();
        let p = crate::presets::create(state, &scope, &name, slots, shm).await?;
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
    ) -> crate::graphql::context::Result<ModifyResourcePreset> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let slots = props
            .resource_slots
            .map(|v| ResourceSlots::parse_json(&v.0))
            .transpose()
            .map_err(ApiError::from)?;
        let shm = props
            .shared_memory
            .as_deref()
            .map(crate::presets::parse_shared_memory)
            .transpose()?;
        let p = crate::presets::modify(state, &scope, &name, slots, shm).await?;
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
    ) -> crate::graphql::context::Result<DeleteResourcePreset> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::presets::delete(state, &scope, &name).await?;
        Ok(DeleteResourcePreset {
            ok: true,
            msg: "success".into(),
        })
    }
}
