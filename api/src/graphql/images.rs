//! GraphQL for images: `image`, `images`, `modify_image` (minimum resources),
//! `alias_image`, `dealias_image`, `forget_image`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use entity::images;
use serde_json::Value;
use uuid::Uuid;

use crate::error::ApiError;
use crate::graphql::{context::authed, context::state, scalars::BigInt};

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

/// The tag's parts after the version (`debian12` of `3.12-debian12`), as Backend.AI 24.12+
/// splits them into `tags`.
pub(crate) fn tag_parts(image: &entity::images::Model) -> Vec<KVPair> {
    let (_, version) = crate::images::environment(&image.image, &image.tag, &image.labels);
    image
        .tag
        .strip_prefix(&version)
        .unwrap_or("")
        .split('-')
        .filter(|p| !p.is_empty())
        .map(|p| KVPair {
            key: p.to_string(),
            value: String::new(),
        })
        .collect()
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
    /// The image's name as Backend.AI names it: the repository path without the registry and
    /// the tag (`stable/python`), so that `{registry}/{name}:{tag}` is its reference.
    async fn name(&self) -> &str {
        &self.0.image
    }
    /// The canonical reference `registry/namespace/name:tag`.
    async fn canonical_ref(&self) -> &str {
        &self.0.name
    }
    /// Backend.AI 24.12's name for `name`: the repository path without the registry
    /// (`stable/python`), so that `{registry}/{namespace}:{tag}` is the reference.
    async fn namespace(&self) -> &str {
        &self.0.image
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
    /// The tag's parts after the version, as Backend.AI 24.12+ lists them.
    async fn tags(&self) -> Vec<KVPair> {
        tag_parts(&self.0)
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
    async fn aliases(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<Vec<String>> {
        let state = state(ctx)?;
        Ok(crate::images::aliases_of(&state.read, self.0.id).await?)
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
                        // No maximum: "Infinity", as Backend.AI answers (its consoles
                        // compare against it).
                        max: Some(
                            v.get("max")
                                .and_then(Value::as_str)
                                .unwrap_or("Infinity")
                                .to_string(),
                        ),
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
        !self.0.installed_agents.is_empty()
    }
    async fn installed_agents(&self) -> Vec<String> {
        self.0.installed_agents.0.clone()
    }
    /// The name its owner gave a committed session's image (null: a catalog image).
    async fn customized_name(&self) -> Option<String> {
        self.0
            .owner_id
            .and_then(|_| self.label(crate::images::CUSTOMIZED_NAME_LABEL))
    }
    /// The user a committed session's image belongs to (null: a catalog image).
    async fn owner_id(&self) -> Option<Uuid> {
        self.0.owner_id
    }
}

#[derive(Default)]
pub struct ImageQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ImageQuery {
    /// An image by id (a UUID, as text: Backend.AI's clients send a `String`), or by
    /// reference/alias.
    async fn image(
        &self,
        ctx: &Context<'_>,
        id: Option<String>,
        reference: Option<String>,
        architecture: Option<String>,
    ) -> crate::graphql::context::Result<Image> {
        let (state, caller) = authed(ctx)?;
        let target = match (id, reference) {
            (Some(id), _) => {
                let Ok(id) = Uuid::parse_str(id.trim()) else {
                    return Err(ApiError::not_found("image", id).into());
                };
                id.to_string()
            }
            (None, Some(r)) => r,
            (None, None) => return Err(ApiError::bad_request("give either id or reference").into()),
        };
        Ok(Image(
            crate::images::resolve_for(&state.read, caller, &target, architecture.as_deref())
                .await?,
        ))
    }

    /// The catalog and the caller's own committed images; `load_filters` as Backend.AI's:
    /// with `customized`, a superadmin gets every user's committed images as well.
    async fn images(
        &self,
        ctx: &Context<'_>,
        is_installed: Option<bool>,
        is_operation: Option<bool>,
        load_filters: Option<Vec<String>>,
    ) -> crate::graphql::context::Result<Vec<Image>> {
        let (state, caller) = authed(ctx)?;
        let everyone = load_filters
            .unwrap_or_default()
            .iter()
            .any(|f| f == "customized");
        let rows = crate::images::visible(caller, everyone)
            .all(&state.read)
            .await
            .map_err(ApiError::from)?;
        Ok(rows
            .into_iter()
            .map(Image)
            .filter(|i| match is_installed {
                Some(want) => i.0.installed_agents.is_empty() != want,
                None => true,
            })
            // Backend.AI's operational images carry the `operation` feature label.
            .filter(|i| match is_operation {
                Some(want) => {
                    i.label("ai.backend.features")
                        .is_some_and(|f| f.split_whitespace().any(|x| x == "operation"))
                        == want
                }
                None => true,
            })
            .collect())
    }

    /// The caller's own committed images (Backend.AI's `customized_images`).
    async fn customized_images(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<Image>> {
        let (state, caller) = authed(ctx)?;
        let rows = crate::images::owned_by(&state.read, caller.uuid).await?;
        Ok(rows.into_iter().map(Image).collect())
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

impl From<ResourceLimitInput> for crate::images::ResourceLimitEdit {
    fn from(e: ResourceLimitInput) -> Self {
        Self {
            key: e.key,
            min: e.min,
            max: e.max,
        }
    }
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
    ) -> crate::graphql::context::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let edits: Option<Vec<crate::images::ResourceLimitEdit>> = props
            .resource_limits
            .map(|v| v.into_iter().map(Into::into).collect());
        crate::images::modify(state, &scope, &target, architecture.as_deref(), edits).await?;
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
    ) -> crate::graphql::context::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::images::alias(state, &scope, &alias, &target, architecture.as_deref()).await?;
        Ok(ImageResult {
            ok: true,
            msg: "success".into(),
        })
    }

    async fn dealias_image(
        &self,
        ctx: &Context<'_>,
        alias: String,
    ) -> crate::graphql::context::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::images::dealias(state, &scope, &alias).await?;
        Ok(ImageResult {
            ok: true,
            msg: "success".into(),
        })
    }

    /// Forgets an image by id (a UUID, as text, as Backend.AI's clients send it): the caller's
    /// own committed image (removed from the engines too), or, for a superadmin, any image.
    async fn forget_image_by_id(
        &self,
        ctx: &Context<'_>,
        image_id: String,
    ) -> crate::graphql::context::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        let id = image_uuid(&image_id)?;
        crate::images::forget_by_id(state, caller, id).await?;
        Ok(ImageResult {
            ok: true,
            msg: "success".into(),
        })
    }

    /// Backend.AI's `untag_image_from_registry` (the client's, after converting a session to
    /// an image): bai keeps committed sessions' images in its engines, not in a registry, so
    /// untagging one removes its tag there and forgets it, as `forget_image_by_id` (the
    /// caller's own; a superadmin's for anyone's; another's is NOT_FOUND). Images of a
    /// registry are not untagged there (bai speaks no registry's management API).
    async fn untag_image_from_registry(
        &self,
        ctx: &Context<'_>,
        image_id: String,
    ) -> crate::graphql::context::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        crate::images::untag(state, caller, image_uuid(&image_id)?).await?;
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
    ) -> crate::graphql::context::Result<ImageResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::images::forget(state, &scope, &reference, architecture.as_deref()).await?;
        Ok(ImageResult {
            ok: true,
            msg: "success".into(),
        })
    }
}

/// An image id as Backend.AI's clients send it (a UUID as text); anything else is NOT_FOUND.
fn image_uuid(image_id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(image_id.trim()).map_err(|_| ApiError::not_found("image", image_id))
}
