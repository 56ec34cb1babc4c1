//! GraphQL for container registries (superadmin only).
use async_graphql::{Context, InputObject, Object, SimpleObject};
use entity::container_registries as registries;
use uuid::Uuid;

use crate::graphql::context::authed;

const MASK: &str = "*****";

pub struct ContainerRegistry(pub registries::Model);

/// Backend.AI 24.03's nested `config` view of a registry.
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ContainerRegistryConfig {
    pub url: String,
    #[graphql(name = "type")]
    pub registry_type: String,
    pub project: Vec<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub ssl_verify: bool,
}

#[Object(rename_fields = "snake_case")]
impl ContainerRegistry {
    async fn id(&self) -> Uuid {
        self.0.id
    }
    async fn hostname(&self) -> &str {
        &self.0.hostname
    }
    async fn registry_name(&self) -> &str {
        &self.0.hostname
    }
    async fn url(&self) -> &str {
        &self.0.url
    }
    #[graphql(name = "type")]
    async fn registry_type(&self) -> &str {
        self.0.registry_type.as_str()
    }
    async fn project(&self) -> Option<&str> {
        self.0.project.as_deref()
    }
    async fn username(&self) -> Option<&str> {
        self.0.username.as_deref()
    }
    /// Never the stored password: `*****` when one is set.
    async fn password(&self) -> Option<&str> {
        self.0.password.as_ref().map(|_| MASK)
    }
    async fn ssl_verify(&self) -> bool {
        self.0.ssl_verify
    }
    async fn is_global(&self) -> bool {
        self.0.is_global
    }
    async fn config(&self) -> ContainerRegistryConfig {
        ContainerRegistryConfig {
            url: self.0.url.clone(),
            registry_type: self.0.registry_type.as_str().to_string(),
            project: self.0.project.iter().cloned().collect(),
            username: self.0.username.clone(),
            password: self.0.password.as_ref().map(|_| MASK.to_string()),
            ssl_verify: self.0.ssl_verify,
        }
    }
}

#[derive(Default)]
pub struct RegistryQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl RegistryQuery {
    async fn container_registry(
        &self,
        ctx: &Context<'_>,
        hostname: String,
    ) -> crate::graphql::context::Result<ContainerRegistry> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        Ok(ContainerRegistry(
            crate::registries::find(&state.read, &hostname).await?,
        ))
    }

    async fn container_registries(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<ContainerRegistry>> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let rows = crate::registries::list(&state.read, &scope).await?;
        Ok(rows.into_iter().map(ContainerRegistry).collect())
    }
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateContainerRegistryInput {
    /// With an explicit scheme: `http://host:port` or `https://host`.
    pub url: String,
    #[graphql(name = "type")]
    pub registry_type: String,
    pub project: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub ssl_verify: Option<bool>,
    pub is_global: Option<bool>,
}

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyContainerRegistryInput {
    pub url: Option<String>,
    #[graphql(name = "type")]
    pub registry_type: Option<String>,
    pub project: Option<String>,
    pub username: Option<String>,
    /// An empty string removes the stored password.
    pub password: Option<String>,
    pub ssl_verify: Option<bool>,
    pub is_global: Option<bool>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ContainerRegistryResult {
    pub ok: bool,
    pub msg: String,
    pub container_registry: Option<ContainerRegistry>,
}

impl From<CreateContainerRegistryInput> for crate::registries::NewRegistry {
    fn from(p: CreateContainerRegistryInput) -> Self {
        Self {
            url: p.url,
            registry_type: p.registry_type,
            project: p.project,
            username: p.username,
            password: p.password,
            ssl_verify: p.ssl_verify,
            is_global: p.is_global,
        }
    }
}

impl From<ModifyContainerRegistryInput> for crate::registries::RegistryChange {
    fn from(p: ModifyContainerRegistryInput) -> Self {
        Self {
            url: p.url,
            registry_type: p.registry_type,
            project: p.project,
            username: p.username,
            password: p.password,
            ssl_verify: p.ssl_verify,
            is_global: p.is_global,
        }
    }
}

#[derive(Default)]
pub struct RegistryMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl RegistryMutation {
    async fn create_container_registry(
        &self,
        ctx: &Context<'_>,
        hostname: String,
        props: CreateContainerRegistryInput,
    ) -> crate::graphql::context::Result<ContainerRegistryResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let r = crate::registries::create(state, &scope, &hostname, props.into()).await?;
        Ok(ContainerRegistryResult {
            ok: true,
            msg: "success".into(),
            container_registry: Some(ContainerRegistry(r)),
        })
    }

    async fn modify_container_registry(
        &self,
        ctx: &Context<'_>,
        hostname: String,
        props: ModifyContainerRegistryInput,
    ) -> crate::graphql::context::Result<ContainerRegistryResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let r = crate::registries::modify(state, &scope, &hostname, props.into()).await?;
        Ok(ContainerRegistryResult {
            ok: true,
            msg: "success".into(),
            container_registry: Some(ContainerRegistry(r)),
        })
    }

    async fn delete_container_registry(
        &self,
        ctx: &Context<'_>,
        hostname: String,
    ) -> crate::graphql::context::Result<ContainerRegistryResult> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::registries::delete(state, &scope, &hostname).await?;
        Ok(ContainerRegistryResult {
            ok: true,
            msg: "success".into(),
            container_registry: None,
        })
    }
}
