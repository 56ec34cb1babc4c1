//! GraphQL for images: `image`, `images`, `modify_image` (minimum resources),
//! `alias_image`, `dealias_image`, `forget_image`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use entity::slots::{format_amount, parse_amount};
use entity::{image_aliases, images};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, ModelTrait, QueryFilter,
    QueryOrder, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::graphql::{BigInt, authed, state};

pub struct Image(pub images::Model);

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct KVPair {
    pub key: String,
    pub value: String,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ResourceLimit {
    pub key: String,
    pub min: String,
    pub max: Option<String>,
}

impl Image {
    fn label(&self, key: &str) -> Option<String> {
        self.0
            .labels
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

/// `registry/namespace/base:tag` → (namespace, base).
fn split_image(image: &str) -> (String, String) {
    match image.rsplit_once('/') {
        Some((ns, base)) => (ns.to_string(), base.to_string()),
        None => (String::new(), image.to_string()),
    }
}

#[Object(rename_fields = "snake_case")]
impl Image {
    async fn id(&self) -> Uuid {
        self.0.id
    }
    /// The canonical reference `registry/namespace/name:tag`.
    async fn name(&self) -> &str {
        &self.0.name
    }
    async fn namespace(&self) -> String {
        split_image(&self.0.image).0
    }
    async fn base_image_name(&self) -> String {
        split_image(&self.0.image).1
    }
    /// The environment's human name ("Python", "C++ (GCC)"): the OCI title label, a
    /// well-known name, else the repository's base name.
    async fn environment(&self) -> String {
        crate::images::environment(&self.0.image, &self.0.tag, &self.0.labels).0
    }
    /// The version within the environment: the tag without its base-distro suffix.
    async fn version(&self) -> String {
        crate::images::environment(&self.0.image, &self.0.tag, &self.0.labels).1
    }
    async fn humanized_name(&self) -> String {
        format!("{}:{}", self.0.image, self.0.tag)
    }
    async fn tag(&self) -> &str {
        &self.0.tag
    }
    async fn registry(&self) -> &str {
        &self.0.registry
    }
    async fn architecture(&self) -> &str {
        &self.0.architecture
    }
    async fn is_local(&self) -> bool {
        self.0.is_local
    }
    async fn digest(&self) -> &str {
        &self.0.config_digest
    }
    /// From the `ai.backend.base-distro` label.
    async fn base_distro(&self) -> Option<String> {
        self.label("ai.backend.base-distro")
    }
    async fn labels(&self) -> Vec<KVPair> {
        self.0
            .labels
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| KVPair {
                        key: k.clone(),
                        value: v
                            .as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| v.to_string()),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    async fn aliases(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<String>> {
        let state = state(ctx)?;
        Ok(image_aliases::Entity::find()
            .filter(image_aliases::Column::Image.eq(self.0.id))
            .all(&state.db)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .map(|a| a.alias)
            .collect())
    }
    async fn size_bytes(&self) -> BigInt {
        BigInt(self.0.size_bytes)
    }
    #[graphql(name = "type")]
    async fn image_type(&self) -> &str {
        self.0.image_type.as_str()
    }
    /// Minimum (and optional maximum) per slot; memory in bytes.
    async fn resource_limits(&self) -> Vec<ResourceLimit> {
        self.0
            .resources
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| ResourceLimit {
                        key: k.clone(),
                        min: v
                            .get("min")
                            .and_then(Value::as_str)
                            .unwrap_or("0")
                            .to_string(),
                        max: v.get("max").and_then(Value::as_str).map(str::to_string),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    async fn supported_accelerators(&self) -> Vec<String> {
        self.0
            .accelerators
            .as_deref()
            .map(|a| {
                a.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }
    /// Installed on at least one agent.
    async fn installed(&self) -> bool {
        self.0
            .installed_agents
            .as_array()
            .is_some_and(|a| !a.is_empty())
    }
    async fn installed_agents(&self) -> Vec<String> {
        serde_json::from_value(self.0.installed_agents.clone()).unwrap_or_default()
    }
}

#[derive(Default)]
pub struct ImageQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ImageQuery {
    /// An image by id, or by reference/alias.
    async fn image(
        &self,
        ctx: &Context<'_>,
        id: Option<Uuid>,
        reference: Option<String>,
        architecture: Option<String>,
    ) -> async_graphql::Result<Image> {
        let (state, _) = authed(ctx)?;
        let target = match (id, reference) {
            (Some(id), _) => id.to_string(),
            (None, Some(r)) => r,
            (None, None) => return Err(ApiError::bad_request("give either id or reference").into()),
        };
        Ok(Image(
            crate::images::resolve(&state.db, &target, architecture.as_deref()).await?,
        ))
    }

    async fn images(
        &self,
        ctx: &Context<'_>,
        is_installed: Option<bool>,
    ) -> async_graphql::Result<Vec<Image>> {
        let (state, _) = authed(ctx)?;
        let rows = images::Entity::find()
            .order_by_asc(images::Column::Name)
            .all(&state.db)
            .await
            .map_err(ApiError::from)?;
        Ok(rows
            .into_iter()
            .map(Image)
            .filter(|i| match is_installed {
                Some(want) => {
                    i.0.installed_agents
                        .as_array()
                        .is_some_and(|a| !a.is_empty())
                        == want
                }
                None => true,
            })
            .collect())
    }
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ResourceLimitInput {
    pub key: String,
    /// e.g. `1` for cpu, `256m` for mem.
    pub min: Option<String>,
    /// Empty or absent = no maximum.
    pub max: Option<String>,
}

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyImageInput {
    pub resource_limits: Option<Vec<ResourceLimitInput>>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ImageResult {
    pub ok: bool,
    pub msg: String,
}

/// Applies per-slot min/max edits onto the image's `resources` JSON.
fn edit_limits(resources: &Value, edits: &[ResourceLimitInput]) -> ApiResult<Value> {
    let mut out = resources.as_object().cloned().unwrap_or_default();
    for e in edits {
        let entry = out
            .entry(e.key.clone())
            .or_insert_with(|| json!({"min": "0", "max": null}));
        let min = match &e.min {
            Some(m) => parse_amount(&e.key, m)?,
            None => entry
                .get("min")
                .and_then(Value::as_str)
                .map(|s| parse_amount(&e.key, s))
                .transpose()?
                .unwrap_or_default(),
        };
        let max = match e.max.as_deref().map(str::trim) {
            Some("") | None => None,
            Some(m) => Some(parse_amount(&e.key, m)?),
        };
        if max.is_some_and(|mx| mx < min) {
            return Err(ApiError::bad_request(format!(
                "minimum {} of '{}' exceeds its maximum",
                format_amount(&e.key, min),
                e.key
            )));
        }
        *entry = json!({"min": min.to_string(), "max": max.map(|m| m.to_string())});
    }
    Ok(Value::Object(out))
}

#[derive(Default)]
pub struct ImageMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ImageMutation {
    /// Edits an image's minimum/maximum resources (superadmin).
    async fn modify_image(
        &self,
        ctx: &Context<'_>,
        target: String,
        architecture: Option<String>,
        props: ModifyImageInput,
    ) -> async_graphql::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let image = crate::images::resolve(&state.db, &target, architecture.as_deref()).await?;
        let resources = match &props.resource_limits {
            Some(edits) => edit_limits(&image.resources, edits)?,
            None => image.resources.clone(),
        };
        let mut m = image.into_active_model();
        m.resources = Set(resources);
        let img = crate::audit::audited(
            &state.db,
            &caller.email,
            "modify_image",
            "image",
            move |txn| {
                Box::pin(async move {
                    let i = m.update(txn).await?;
                    let key = i.name.clone();
                    let detail = json!({"resources": i.resources});
                    Ok((i, key, detail))
                })
            },
        )
        .await?;
        state
            .events
            .changed(ObjectKind::Image, ChangeAction::Modified, &img.name, None);
        Ok(ImageResult {
            ok: true,
            msg: "success".into(),
        })
    }

    /// Gives an image a short name such as `python` (superadmin).
    async fn alias_image(
        &self,
        ctx: &Context<'_>,
        alias: String,
        target: String,
        architecture: Option<String>,
    ) -> async_graphql::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let alias = alias.trim().to_string();
        if alias.is_empty() || alias.len() > 256 || alias.chars().any(|c| c.is_whitespace()) {
            return Err(ApiError::bad_request(
                "An alias must be 1 to 256 characters without spaces",
            )
            .into());
        }
        let image = crate::images::resolve(&state.db, &target, architecture.as_deref()).await?;
        if image_aliases::Entity::find()
            .filter(image_aliases::Column::Alias.eq(&alias))
            .one(&state.db)
            .await
            .map_err(ApiError::from)?
            .is_some()
        {
            return Err(
                ApiError::conflict(format!("The alias '{alias}' is already in use")).into(),
            );
        }
        let name = image.name.clone();
        crate::audit::audited(
            &state.db,
            &caller.email,
            "alias_image",
            "image",
            move |txn| {
                Box::pin(async move {
                    image_aliases::ActiveModel {
                        id: Set(Uuid::new_v4()),
                        alias: Set(alias.clone()),
                        image: Set(image.id),
                    }
                    .insert(txn)
                    .await?;
                    Ok(((), image.name, json!({"alias": alias})))
                })
            },
        )
        .await?;
        state
            .events
            .changed(ObjectKind::Image, ChangeAction::Modified, &name, None);
        Ok(ImageResult {
            ok: true,
            msg: "success".into(),
        })
    }

    async fn dealias_image(
        &self,
        ctx: &Context<'_>,
        alias: String,
    ) -> async_graphql::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let row = image_aliases::Entity::find()
            .filter(image_aliases::Column::Alias.eq(&alias))
            .one(&state.db)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::not_found("image alias", &alias))?;
        crate::audit::audited(
            &state.db,
            &caller.email,
            "dealias_image",
            "image",
            move |txn| {
                Box::pin(async move {
                    let key = row.alias.clone();
                    row.delete(txn).await?;
                    Ok(((), key, json!({})))
                })
            },
        )
        .await?;
        state
            .events
            .changed(ObjectKind::Image, ChangeAction::Modified, &alias, None);
        Ok(ImageResult {
            ok: true,
            msg: "success".into(),
        })
    }

    /// Removes an image from the catalog (not from the engines).
    async fn forget_image(
        &self,
        ctx: &Context<'_>,
        reference: String,
        architecture: Option<String>,
    ) -> async_graphql::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let image = crate::images::resolve(&state.db, &reference, architecture.as_deref()).await?;
        let name = image.name.clone();
        crate::audit::audited(
            &state.db,
            &caller.email,
            "forget_image",
            "image",
            move |txn| {
                Box::pin(async move {
                    let key = image.name.clone();
                    image.delete(txn).await?;
                    Ok(((), key, json!({})))
                })
            },
        )
        .await?;
        state
            .events
            .changed(ObjectKind::Image, ChangeAction::Deleted, &name, None);
        Ok(ImageResult {
            ok: true,
            msg: "success".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_edit() {
        let r = json!({"cpu": {"min": "1", "max": null}});
        let out = edit_limits(
            &r,
            &[ResourceLimitInput {
                key: "mem".into(),
                min: Some("256m".into()),
                max: None,
            }],
        )
        .unwrap();
        assert_eq!(out["mem"]["min"], "268435456");
        assert_eq!(out["cpu"]["min"], "1");
        assert!(
            edit_limits(
                &r,
                &[ResourceLimitInput {
                    key: "cpu".into(),
                    min: Some("4".into()),
                    max: Some("2".into())
                }]
            )
            .is_err()
        );
        assert!(
            edit_limits(
                &r,
                &[ResourceLimitInput {
                    key: "tpu".into(),
                    min: Some("1".into()),
                    max: None
                }]
            )
            .is_err()
        );
    }
}
