//! GraphQL for domains: `domain`, `domains`, `create_domain`, `modify_domain`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::domains;

use crate::graphql::{context::authed, scalars::JsonString};

pub struct Domain(pub domains::Model);

#[Object(rename_fields = "snake_case")]
impl Domain {
    async fn name(&self) -> &str {
        &self.0.name
    }
    async fn description(&self) -> Option<&str> {
        self.0.description.as_deref()
    }
    async fn is_active(&self) -> bool {
        self.0.is_active
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn modified_at(&self) -> DateTime<Utc> {
        self.0.modified_at
    }
    async fn total_resource_slots(&self) -> JsonString {
        JsonString(serde_json::to_value(&self.0.total_resource_slots).unwrap_or_default())
    }
    async fn allowed_vfolder_hosts(&self) -> JsonString {
        JsonString(self.0.allowed_vfolder_hosts.clone())
    }
    async fn allowed_docker_registries(&self) -> Vec<String> {
        self.0.allowed_docker_registries.0.clone()
    }
    async fn integration_id(&self) -> Option<&str> {
        self.0.integration_id.as_deref()
    }
}

#[derive(Default)]
pub struct DomainQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl DomainQuery {
    /// A domain by name; without `name`, the caller's. Non-superadmins see only their own.
    async fn domain(
        &self,
        ctx: &Context<'_>,
        name: Option<String>,
    ) -> crate::graphql::context::Result<Domain> {
        let (state, caller) = authed(ctx)?;
        let name = name.unwrap_or_else(|| caller.domain_name.clone());
        let d = crate::domains::find_visible(&state.read, caller, &name).await?;
        Ok(Domain(d))
    }

    async fn domains(
        &self,
        ctx: &Context<'_>,
        is_active: Option<bool>,
    ) -> crate::graphql::context::Result<Vec<Domain>> {
        let (state, caller) = authed(ctx)?;
        Ok(crate::domains::visible(&state.read, caller, is_active)
            .await?
            .into_iter()
            .map(Domain)
            .collect())
    }
}

#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct DomainInput {
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub total_resource_slots: Option<JsonString>,
    pub allowed_vfolder_hosts: Option<JsonString>,
    pub allowed_docker_registries: Option<Vec<String>>,
    pub integration_id: Option<String>,
}

/// A change to a domain (Backend.AI's `ModifyDomainInput`): `name` renames it.
#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyDomainInput {
    pub name: Option<String>,
    pub description: Option<String>,
    pub is_active: Option<bool>,
    pub total_resource_slots: Option<JsonString>,
    pub allowed_vfolder_hosts: Option<JsonString>,
    pub allowed_docker_registries: Option<Vec<String>>,
    pub integration_id: Option<String>,
}

impl From<ModifyDomainInput> for crate::domains::DomainChange {
    fn from(p: ModifyDomainInput) -> Self {
        Self {
            description: p.description,
            is_active: p.is_active,
            total_resource_slots: p.total_resource_slots.map(|v| v.0),
            allowed_vfolder_hosts: p.allowed_vfolder_hosts.map(|v| v.0),
            allowed_docker_registries: p.allowed_docker_registries,
            integration_id: p.integration_id,
        }
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateDomain {
    pub ok: bool,
    pub msg: String,
    pub domain: Option<Domain>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyDomain {
    pub ok: bool,
    pub msg: String,
    pub domain: Option<Domain>,
}

impl From<DomainInput> for crate::domains::DomainChange {
    fn from(p: DomainInput) -> Self {
        Self {
            description: p.description,
            is_active: p.is_active,
            total_resource_slots: p.total_resource_slots.map(|v| v.0),
            allowed_vfolder_hosts: p.allowed_vfolder_hosts.map(|v| v.0),
            allowed_docker_registries: p.allowed_docker_registries,
            integration_id: p.integration_id,
        }
    }
}

#[derive(Default)]
pub struct DomainMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl DomainMutation {
    async fn create_domain(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: DomainInput,
    ) -> crate::graphql::context::Result<CreateDomain> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let d = crate::domains::create(state, &scope, &name, props.into()).await?;
        Ok(CreateDomain {
            ok: true,
            msg: "success".into(),
            domain: Some(Domain(d)),
        })
    }

    /// Modifies a domain; `props.name` renames it (superadmins).
    async fn modify_domain(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: ModifyDomainInput,
    ) -> crate::graphql::context::Result<ModifyDomain> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        let new_name = props.name.clone();
        let mut d = crate::domains::modify(state, &scope, &name, props.into()).await?;
        if let Some(new) = new_name.filter(|n| *n != name) {
            d = crate::domains::rename(state, &scope, &name, &new).await?;
        }
        Ok(ModifyDomain {
            ok: true,
            msg: "success".into(),
            domain: Some(Domain(d)),
        })
    }

    /// Deletes an empty domain for good (no users, sessions or folders; its empty projects go
    /// with it). Superadmins; never the default domain.
    async fn purge_domain(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> crate::graphql::context::Result<ModifyDomain> {
        let (state, caller) = authed(ctx)?;
        let scope = caller.require_superadmin()?;
        crate::domains::purge(state, &scope, &name).await?;
        Ok(ModifyDomain {
            ok: true,
            msg: "success".into(),
            domain: None,
        })
    }
}
