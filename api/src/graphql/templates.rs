//! GraphQL for session templates: `session_template(s)`, `create/modify/delete_session_template`
//! and `create_session_from_template`. Templates someone may not see are NOT_FOUND.
use async_graphql::{Context, InputObject, Object};
use chrono::{DateTime, Utc};
use entity::session_templates as templates;
use uuid::Uuid;

use crate::error::ApiError;
use crate::graphql::sessions::{ComputeSession, CreateSessionResult};
use crate::graphql::{context::authed, scalars::JsonString};
use crate::templates::Scope;

pub struct SessionTemplate {
    t: templates::Model,
    is_owner: bool,
}

#[Object(rename_fields = "snake_case")]
impl SessionTemplate {
    async fn id(&self) -> Uuid {
        self.t.id
    }
    async fn name(&self) -> &str {
        &self.t.name
    }
    /// `user` (the owner), `group` (the project's members) or `domain` (the whole domain).
    async fn scope(&self) -> &str {
        &self.t.scope
    }
    async fn is_owner(&self) -> bool {
        self.is_owner
    }
    async fn user_uuid(&self) -> Uuid {
        self.t.user_uuid
    }
    async fn group_id(&self) -> Option<Uuid> {
        self.t.group_id
    }
    async fn domain_name(&self) -> &str {
        &self.t.domain_name
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.t.created_at
    }
    async fn modified_at(&self) -> DateTime<Utc> {
        self.t.modified_at
    }
    /// The task template (Backend.AI's `task_template_v1`, normalized).
    async fn template(&self) -> JsonString {
        JsonString(self.t.template.clone())
    }
    /// The image the template starts.
    async fn image(&self) -> Option<&str> {
        self.t
            .template
            .pointer("/spec/kernel/image")
            .and_then(serde_json::Value::as_str)
    }
}

fn wrap(caller: &crate::auth::Caller, t: templates::Model) -> SessionTemplate {
    SessionTemplate {
        is_owner: t.user_uuid == caller.uuid,
        t,
    }
}

#[derive(Default)]
pub struct TemplateQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl TemplateQuery {
    /// The session templates you may use: yours, your projects' and your domain's shared ones
    /// (administrators: their domain's; superadmins: all).
    async fn session_templates(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<SessionTemplate>> {
        let (state, caller) = authed(ctx)?;
        let list = crate::templates::list(state, caller).await?;
        Ok(list.into_iter().map(|t| wrap(caller, t)).collect())
    }

    async fn session_template(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<SessionTemplate> {
        let (state, caller) = authed(ctx)?;
        Ok(wrap(
            caller,
            crate::templates::find(state, caller, id).await?,
        ))
    }
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateSessionTemplateInput {
    /// A task template (`kind: taskTemplate`) as JSON or YAML; several as a list or YAML
    /// documents.
    pub payload: String,
    /// The project it belongs to (name or id; default `default`).
    pub group: Option<String>,
    /// `user` (default), `group`, or `domain` (administrators).
    pub scope: Option<String>,
}

#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifySessionTemplateInput {
    /// A new template (JSON or YAML), replacing the old one.
    pub payload: Option<String>,
    pub name: Option<String>,
    pub scope: Option<String>,
}

#[derive(Default)]
pub struct TemplateMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl TemplateMutation {
    async fn create_session_template(
        &self,
        ctx: &Context<'_>,
        props: CreateSessionTemplateInput,
    ) -> crate::graphql::context::Result<Vec<SessionTemplate>> {
        let (state, caller) = authed(ctx)?;
        let scope = props
            .scope
            .as_deref()
            .map(Scope::parse)
            .transpose()?
            .unwrap_or(Scope::User);
        let created =
            crate::templates::create(state, caller, &props.payload, props.group.as_deref(), scope)
                .await?;
        Ok(created.into_iter().map(|t| wrap(caller, t)).collect())
    }

    /// Changes a template (its owner, a superadmin, or an administrator of its domain).
    async fn modify_session_template(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        props: ModifySessionTemplateInput,
    ) -> crate::graphql::context::Result<SessionTemplate> {
        let (state, caller) = authed(ctx)?;
        let scope = props.scope.as_deref().map(Scope::parse).transpose()?;
        let t = crate::templates::update(
            state,
            caller,
            id,
            props.payload.as_deref(),
            props.name.as_deref(),
            scope,
        )
        .await?;
        Ok(wrap(caller, t))
    }

    async fn delete_session_template(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
    ) -> crate::graphql::context::Result<bool> {
        let (state, caller) = authed(ctx)?;
        crate::templates::delete(state, caller, id).await?;
        Ok(true)
    }

    /// Creates a session from a template; `overrides` are Backend.AI's creation keys
    /// (`{"name": …, "type": "batch", "config": {"resources": {…}, "environ": {…}}}`), each
    /// replacing the template's; `count` identical sessions (1 to 100, as `create_session`).
    async fn create_session_from_template(
        &self,
        ctx: &Context<'_>,
        id: Uuid,
        overrides: Option<JsonString>,
        count: Option<i32>,
    ) -> crate::graphql::context::Result<CreateSessionResult> {
        let (state, caller) = authed(ctx)?;
        let overrides = overrides.map(|o| o.0).unwrap_or(serde_json::Value::Null);
        let body = crate::templates::creation_body(state, caller, id, &overrides).await?;
        let mut req = crate::sessions::body::creation_request(caller, &body)?;
        if let Some(n) = count {
            req.count = u32::try_from(n)
                .map_err(|_| ApiError::bad_request("count must be between 1 and 100"))?;
        }
        let created = crate::sessions::create(state, caller, req).await?;
        Ok(CreateSessionResult {
            ok: true,
            msg: "enqueued".into(),
            sessions: created.into_iter().map(ComputeSession).collect(),
        })
    }
}
