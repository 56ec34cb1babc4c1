//! GraphQL for domains: `domain`, `domains`, `create_domain`, `modify_domain`.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::domains;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, Set,
};
use serde_json::json;

use crate::error::{ApiError, ApiResult};
use crate::events::{ChangeAction, ObjectKind};
use crate::graphql::{JsonString, authed};

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
        serde_json::from_value(self.0.allowed_docker_registries.clone()).unwrap_or_default()
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
    ) -> async_graphql::Result<Domain> {
        let (state, caller) = authed(ctx)?;
        let name = name.unwrap_or_else(|| caller.domain_name.clone());
        if !caller.is_superadmin() && name != caller.domain_name {
            return Err(ApiError::not_found("domain", &name).into());
        }
        let d = crate::lookup::get::<domains::Entity>(&state.db, "domain", name.clone()).await?;
        Ok(Domain(d))
    }

    async fn domains(
        &self,
        ctx: &Context<'_>,
        is_active: Option<bool>,
    ) -> async_graphql::Result<Vec<Domain>> {
        let (state, caller) = authed(ctx)?;
        let mut select = domains::Entity::find().order_by_asc(domains::Column::Name);
        if !caller.is_superadmin() {
            select = select.filter(domains::Column::Name.eq(&caller.domain_name));
        }
        if let Some(a) = is_active {
            select = select.filter(domains::Column::IsActive.eq(a));
        }
        Ok(select
            .all(&state.db)
            .await
            .map_err(ApiError::from)?
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

fn apply(m: &mut domains::ActiveModel, p: DomainInput) -> ApiResult<()> {
    if let Some(v) = p.description {
        m.description = Set(Some(v));
    }
    if let Some(v) = p.is_active {
        m.is_active = Set(v);
    }
    if let Some(v) = p.total_resource_slots {
        m.total_resource_slots = Set(crate::policies::parse_limits(&v.0)?);
    }
    if let Some(v) = p.allowed_vfolder_hosts {
        m.allowed_vfolder_hosts = Set(crate::policies::normalize_allowed_hosts(&v.0)?);
    }
    if let Some(v) = p.allowed_docker_registries {
        m.allowed_docker_registries = Set(json!(v));
    }
    if let Some(v) = p.integration_id {
        m.integration_id = Set(Some(v));
    }
    m.modified_at = Set(Utc::now());
    Ok(())
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
    ) -> async_graphql::Result<CreateDomain> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let name = crate::validate::object_name("domain", &name)?;
        if domains::Entity::find_by_id(name.clone())
            .one(&state.db)
            .await
            .map_err(ApiError::from)?
            .is_some()
        {
            return Err(ApiError::conflict(format!("Domain '{name}' already exists")).into());
        }
        let now = state.clock.now();
        let mut m = domains::ActiveModel {
            name: Set(name),
            description: Set(None),
            is_active: Set(true),
            created_at: Set(now),
            modified_at: Set(now),
            total_resource_slots: Set(Default::default()),
            allowed_vfolder_hosts: Set(json!({})),
            allowed_docker_registries: Set(json!([])),
            integration_id: Set(None),
        };
        apply(&mut m, props)?;
        let d = crate::audit::audited(
            &state.db,
            &caller.email,
            "create_domain",
            "domain",
            move |txn| {
                Box::pin(async move {
                    let d = m.insert(txn).await?;
                    let key = d.name.clone();
                    Ok((d, key, json!({})))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::Domain,
            ChangeAction::Created,
            &d.name,
            Some(d.name.clone()),
        );
        Ok(CreateDomain {
            ok: true,
            msg: "success".into(),
            domain: Some(Domain(d)),
        })
    }

    async fn modify_domain(
        &self,
        ctx: &Context<'_>,
        name: String,
        props: DomainInput,
    ) -> async_graphql::Result<ModifyDomain> {
        let (state, caller) = authed(ctx)?;
        caller.require_superadmin()?;
        let existing =
            crate::lookup::get::<domains::Entity>(&state.db, "domain", name.clone()).await?;
        let mut m = existing.into_active_model();
        apply(&mut m, props)?;
        let d = crate::audit::audited(
            &state.db,
            &caller.email,
            "modify_domain",
            "domain",
            move |txn| {
                Box::pin(async move {
                    let d = m.update(txn).await?;
                    let key = d.name.clone();
                    Ok((d, key, json!({})))
                })
            },
        )
        .await?;
        state.events.changed(
            ObjectKind::Domain,
            ChangeAction::Modified,
            &d.name,
            Some(d.name.clone()),
        );
        Ok(ModifyDomain {
            ok: true,
            msg: "success".into(),
            domain: Some(Domain(d)),
        })
    }
}
