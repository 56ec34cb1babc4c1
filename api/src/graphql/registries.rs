//! GraphQL for container registries (superadmin only).
use async_graphql::{Context, InputObject, Object, SimpleObject};
use entity::container_registries as registries;
use entity::enums::RegistryType;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, ModelTrait, QueryFilter,
    QueryOrder, Set,
};
use serde_json::json;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::graphql::authed;

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

async fn find(db: &sea_orm::DatabaseConnection, hostname: &str) -> ApiResult<registries::Model> {
    registries::Entity::find()
        .filter(registries::Column::Hostname.eq(hostname.trim().to_ascii_lowercase()))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found("container registry", hostname))
}

#[derive(Default)]
pub struct RegistryQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl RegistryQuery {
    async fn container_registry(
        &self,
        ctx: &Context<'_>,
        hostname: String,
    ) -> async_graphql::Result<ContainerRegistry> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        Ok(ContainerRegistry(find(&state.db, &hostname).await?))
    }

    async fn container_registries(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Vec<ContainerRegistry>> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let rows = registries::Entity::find()
            .order_by_asc(registries::Column::Hostname)
            .all(&state.db)
            .await
            .map_err(ApiError::from)?;
        Ok(rows.into_iter().map(ContainerRegistry).collect())
    }
}

fn parse_type(s: &str) -> ApiResult<RegistryType> {
    RegistryType::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid registry type '{s}' (one of: {})",
            RegistryType::choices()
        ))
    })
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

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|v| !v.is_empty())
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
    ) -> async_graphql::Result<ContainerRegistryResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let hostname = crate::registries::validate(&hostname, &props.url)?;
        if find(&state.db, &hostname).await.is_ok() {
            return Err(ApiError::conflict(format!("Registry '{hostname}' already exists")).into());
        }
        let now = state.clock.now();
        let m = registries::ActiveModel {
            id: Set(Uuid::new_v4()),
            hostname: Set(hostname),
            url: Set(props.url.trim_end_matches('/').to_string()),
            registry_type: Set(parse_type(&props.registry_type)?),
            project: Set(non_empty(props.project)),
            username: Set(non_empty(props.username)),
            password: Set(non_empty(props.password)),
            ssl_verify: Set(props.ssl_verify.unwrap_or(true)),
            is_global: Set(props.is_global.unwrap_or(true)),
            created_at: Set(now),
            modified_at: Set(now),
        };
        let r = crate::audit::audited(
            &state.db,
            &caller.email,
            "create_container_registry",
            "container_registry",
            move |txn| {
                Box::pin(async move {
                    let r = m.insert(txn).await?;
                    let key = r.hostname.clone();
                    let detail = json!({"url": r.url});
                    Ok((r, key, detail))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::ContainerRegistry,
            ChangeAction::Created,
            &r.hostname,
            None,
        );
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
    ) -> async_graphql::Result<ContainerRegistryResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let existing = find(&state.db, &hostname).await?;
        let url = props.url.clone().unwrap_or_else(|| existing.url.clone());
        crate::registries::validate(&existing.hostname, &url)?;
        let mut m = existing.into_active_model();
        m.url = Set(url.trim_end_matches('/').to_string());
        if let Some(t) = props.registry_type {
            m.registry_type = Set(parse_type(&t)?);
        }
        if let Some(v) = props.project {
            m.project = Set(non_empty(Some(v)));
        }
        if let Some(v) = props.username {
            m.username = Set(non_empty(Some(v)));
        }
        if let Some(v) = props.password {
            m.password = Set(non_empty(Some(v)));
        }
        if let Some(v) = props.ssl_verify {
            m.ssl_verify = Set(v);
        }
        if let Some(v) = props.is_global {
            m.is_global = Set(v);
        }
        m.modified_at = Set(state.clock.now());
        let r = crate::audit::audited(
            &state.db,
            &caller.email,
            "modify_container_registry",
            "container_registry",
            move |txn| {
                Box::pin(async move {
                    let r = m.update(txn).await?;
                    let key = r.hostname.clone();
                    Ok((r, key, json!({})))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::ContainerRegistry,
            ChangeAction::Modified,
            &r.hostname,
            None,
        );
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
    ) -> async_graphql::Result<ContainerRegistryResult> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let existing = find(&state.db, &hostname).await?;
        let key = existing.hostname.clone();
        crate::audit::audited(
            &state.db,
            &caller.email,
            "delete_container_registry",
            "container_registry",
            move |txn| {
                Box::pin(async move {
                    let key = existing.hostname.clone();
                    existing.delete(txn).await?;
                    Ok(((), key, json!({})))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::ContainerRegistry,
            ChangeAction::Deleted,
            &key,
            None,
        );
        Ok(ContainerRegistryResult {
            ok: true,
            msg: "success".into(),
            container_registry: None,
        })
    }
}
