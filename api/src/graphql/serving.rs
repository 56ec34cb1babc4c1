//! GraphQL for model serving, as Backend.AI's legacy schema has it and its CLI asks it:
//! `endpoint`, `endpoint_list`, `routing`, `routing_list`, `endpoint_token`,
//! `endpoint_token_list`, `modify_endpoint`; and bai's `create_endpoint`,
//! `delete_endpoint`, `create_endpoint_token`, `revoke_endpoint_token` for its console. An
//! endpoint the caller may not see is NOT_FOUND, as are its routes and tokens.
use async_graphql::{Context, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use entity::{endpoint_tokens, endpoints, routings};
use uuid::Uuid;

use crate::error::ApiError;
use crate::graphql::context::{authed, state};
use crate::graphql::scalars::JsonString;
use crate::graphql::sessions::ImageNode;
use crate::serving::{self, route_status};

pub struct Endpoint(pub endpoints::Model);

/// Backend.AI's `RuntimeVariantInfo`.
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct RuntimeVariantInfo {
    pub name: String,
    pub human_readable_name: String,
}

/// A replica that failed to start, as Backend.AI's `InferenceSessionError` has it.
#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct InferenceSessionError {
    pub session_id: Option<Uuid>,
    pub errors: Vec<InferenceSessionErrorInfo>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct InferenceSessionErrorInfo {
    pub src: String,
    pub name: String,
    pub repr: String,
}

fn error_of(r: &routings::Model) -> Option<InferenceSessionError> {
    let data = r.error_data.as_ref()?;
    let message = data
        .get("message")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("failed to start")
        .to_string();
    Some(InferenceSessionError {
        session_id: r.session,
        errors: vec![InferenceSessionErrorInfo {
            src: "bai".into(),
            name: r.status.clone(),
            repr: message,
        }],
    })
}

impl Endpoint {
    async fn routes(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<routings::Model>> {
        Ok(serving::routes_of(state(ctx)?, self.0.id).await?)
    }
}

#[Object(rename_fields = "snake_case")]
impl Endpoint {
    async fn id(&self) -> async_graphql::ID {
        crate::graphql::sessions::global_id("Endpoint", self.0.id)
    }
    async fn endpoint_id(&self) -> Uuid {
        self.0.id
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// The image's canonical name.
    async fn image(&self) -> &str {
        &self.0.image
    }
    async fn image_object(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<ImageNode>> {
        Ok(
            crate::images::find_named(&state(ctx)?.read, &self.0.image, &self.0.architecture)
                .await?
                .map(ImageNode),
        )
    }
    async fn domain(&self) -> &str {
        &self.0.domain_name
    }
    /// The project's id.
    async fn project(&self) -> Uuid {
        self.0.project
    }
    async fn resource_group(&self) -> &str {
        &self.0.resource_group
    }
    /// Each replica's slots as asked (`{"cpu": "1", "mem": "512m"}`).
    async fn resource_slots(&self) -> JsonString {
        JsonString(self.0.resources.clone())
    }
    async fn resource_opts(&self) -> JsonString {
        JsonString(self.0.resource_opts.clone())
    }
    /// Where the endpoint is reached (null until the leader gave it its port, and once it is
    /// destroyed).
    async fn url(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<Option<String>> {
        Ok(serving::url_of(state(ctx)?, self.0.port))
    }
    /// The model folder.
    async fn model(&self) -> Option<Uuid> {
        self.0.model
    }
    async fn model_definition_path(&self) -> Option<&str> {
        self.0.model_definition_path.as_deref()
    }
    async fn model_mount_destination(&self) -> &str {
        &self.0.model_mount_destination
    }
    /// The model definition as bai read it from the folder.
    async fn model_definition(&self) -> JsonString {
        JsonString(self.0.model_definition.clone())
    }
    async fn created_user(&self) -> Uuid {
        self.0.created_user
    }
    async fn created_user_id(&self) -> Uuid {
        self.0.created_user
    }
    async fn created_user_email(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<String>> {
        crate::graphql::context::user_email(ctx, self.0.created_user).await
    }
    async fn session_owner(&self) -> Uuid {
        self.0.session_owner
    }
    async fn session_owner_id(&self) -> Uuid {
        self.0.session_owner
    }
    async fn session_owner_email(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Option<String>> {
        crate::graphql::context::user_email(ctx, self.0.session_owner).await
    }
    async fn tag(&self) -> Option<&str> {
        self.0.tag.as_deref()
    }
    async fn startup_command(&self) -> Option<&str> {
        self.0.startup_command.as_deref()
    }
    async fn bootstrap_script(&self) -> Option<&str> {
        self.0.bootstrap_script.as_deref()
    }
    async fn callback_url(&self) -> Option<&str> {
        self.0.callback_url.as_deref()
    }
    async fn environ(&self) -> JsonString {
        JsonString(self.0.environ.clone())
    }
    /// Replicas wanted.
    async fn replicas(&self) -> i32 {
        self.0.replicas
    }
    /// Replicas wanted (Backend.AI's older name).
    async fn desired_session_count(&self) -> i32 {
        self.0.replicas
    }
    async fn cluster_mode(&self) -> &str {
        &self.0.cluster_mode
    }
    async fn cluster_size(&self) -> i32 {
        self.0.cluster_size
    }
    async fn open_to_public(&self) -> bool {
        self.0.open_to_public
    }
    async fn runtime_variant(&self) -> RuntimeVariantInfo {
        let human = serving::RUNTIME_VARIANTS
            .iter()
            .find(|(n, _)| *n == self.0.runtime_variant)
            .map_or(self.0.runtime_variant.as_str(), |(_, h)| h);
        RuntimeVariantInfo {
            name: self.0.runtime_variant.clone(),
            human_readable_name: human.to_string(),
        }
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn destroyed_at(&self) -> Option<DateTime<Utc>> {
        self.0.destroyed_at
    }
    /// Its replicas' routes (those that failed to start too).
    async fn routings(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<Vec<Routing>> {
        let url = serving::url_of(state(ctx)?, self.0.port);
        Ok(self
            .routes(ctx)
            .await?
            .into_iter()
            .map(|r| Routing(r, url.clone()))
            .collect())
    }
    /// Replicas that failed to start.
    async fn retries(&self) -> i32 {
        self.0.retries
    }
    /// `HEALTHY`, `DEGRADED`, `UNHEALTHY`, `PROVISIONING`, `READY` (no replica wanted),
    /// `DESTROYING`, `DESTROYED`.
    async fn status(&self, ctx: &Context<'_>) -> crate::graphql::context::Result<String> {
        Ok(serving::status_of(&self.0, &self.routes(ctx).await?).to_string())
    }
    /// `CREATED`, `DESTROYING`, `DESTROYED`.
    async fn lifecycle_stage(&self) -> String {
        self.0.lifecycle_stage.to_ascii_uppercase()
    }
    async fn errors(
        &self,
        ctx: &Context<'_>,
    ) -> crate::graphql::context::Result<Vec<InferenceSessionError>> {
        Ok(self
            .routes(ctx)
            .await?
            .iter()
            .filter(|r| r.status == route_status::FAILED_TO_START)
            .filter_map(error_of)
            .collect())
    }
}

/// One replica's route.
pub struct Routing(routings::Model, Option<String>);

#[Object(rename_fields = "snake_case")]
impl Routing {
    async fn id(&self) -> async_graphql::ID {
        crate::graphql::sessions::global_id("Routing", self.0.id)
    }
    async fn routing_id(&self) -> Uuid {
        self.0.id
    }
    /// The endpoint's URL.
    async fn endpoint(&self) -> Option<&str> {
        self.1.as_deref()
    }
    async fn endpoint_id(&self) -> Uuid {
        self.0.endpoint
    }
    /// The replica's session.
    async fn session(&self) -> Option<Uuid> {
        self.0.session
    }
    /// `PROVISIONING`, `HEALTHY`, `UNHEALTHY`, `TERMINATING`, `FAILED_TO_START`.
    async fn status(&self) -> &str {
        &self.0.status
    }
    /// `HEALTHY`, `UNHEALTHY` or `NOT_CHECKED` (not serving yet).
    async fn health_status(&self) -> &str {
        match self.0.status.as_str() {
            route_status::HEALTHY => "HEALTHY",
            route_status::UNHEALTHY => "UNHEALTHY",
            _ => "NOT_CHECKED",
        }
    }
    async fn traffic_ratio(&self) -> f64 {
        self.0.traffic_ratio
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn error(&self) -> Option<InferenceSessionError> {
        error_of(&self.0)
    }
    async fn error_data(&self) -> Option<JsonString> {
        self.0.error_data.clone().map(JsonString)
    }
}

/// A token of a private endpoint.
pub struct EndpointToken {
    row: endpoint_tokens::Model,
    token: String,
}

#[Object(rename_fields = "snake_case")]
impl EndpointToken {
    async fn id(&self) -> Uuid {
        self.row.id
    }
    async fn token(&self) -> &str {
        &self.token
    }
    async fn endpoint_id(&self) -> Uuid {
        self.row.endpoint
    }
    async fn domain(&self) -> &str {
        &self.row.domain_name
    }
    async fn project(&self) -> String {
        self.row.project.to_string()
    }
    async fn session_owner(&self) -> Uuid {
        self.row.session_owner
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.row.created_at
    }
    async fn valid_until(&self) -> DateTime<Utc> {
        self.row.valid_until
    }
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct EndpointList {
    pub items: Vec<Endpoint>,
    pub total_count: i32,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct RoutingList {
    pub items: Vec<Routing>,
    pub total_count: i32,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct EndpointTokenList {
    pub items: Vec<EndpointToken>,
    pub total_count: i32,
}

/// The fields `endpoint_list` may filter on (Backend.AI's filter language).
const FILTERABLE: &[(&str, endpoints::Column)] = &[
    ("name", endpoints::Column::Name),
    ("endpoint_id", endpoints::Column::Id),
    ("project", endpoints::Column::Project),
    ("resource_group", endpoints::Column::ResourceGroup),
    ("created_at", endpoints::Column::CreatedAt),
    ("retries", endpoints::Column::Retries),
    ("replicas", endpoints::Column::Replicas),
    ("destroyed_at", endpoints::Column::DestroyedAt),
    ("model", endpoints::Column::Model),
    ("domain", endpoints::Column::DomainName),
    ("lifecycle_stage", endpoints::Column::LifecycleStage),
    ("open_to_public", endpoints::Column::OpenToPublic),
    ("created_user_id", endpoints::Column::CreatedUser),
];

fn is_stage(c: &endpoints::Column) -> bool {
    sea_orm::IdenStatic::as_str(c) == "lifecycle_stage"
}

/// Whether a filter compares the lifecycle stage.
fn mentions_stage(f: &bai_core::filter::Filter<endpoints::Column>) -> bool {
    use bai_core::filter::Filter;
    match f {
        Filter::Any(parts) | Filter::All(parts) => parts.iter().any(mentions_stage),
        Filter::Compare { column: c, .. } | Filter::In { column: c, .. } => is_stage(c),
        Filter::Not(inner) => mentions_stage(inner),
    }
}

fn page(limit: i32, offset: i32) -> Result<(usize, usize), ApiError> {
    if !(1..=100).contains(&limit) || offset < 0 {
        return Err(ApiError::bad_request(
            "limit must be 1 to 100 and offset 0 or more",
        ));
    }
    Ok((
        usize::try_from(limit).unwrap_or(100),
        usize::try_from(offset).unwrap_or(0),
    ))
}

#[derive(Default)]
pub struct ServingQuery;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ServingQuery {
    /// One model service.
    async fn endpoint(
        &self,
        ctx: &Context<'_>,
        endpoint_id: Uuid,
    ) -> crate::graphql::context::Result<Endpoint> {
        let (state, caller) = authed(ctx)?;
        Ok(Endpoint(serving::find(state, caller, endpoint_id).await?))
    }

    /// The model services the caller may see, newest first (destroyed ones when the filter
    /// asks for them by `lifecycle_stage`).
    #[allow(clippy::too_many_arguments)]
    async fn endpoint_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        filter: Option<String>,
        order: Option<String>,
        domain_name: Option<String>,
        group_id: Option<String>,
        user_uuid: Option<String>,
        project: Option<Uuid>,
    ) -> crate::graphql::context::Result<EndpointList> {
        use sea_orm::{ColumnTrait, QueryFilter};
        let (state, caller) = authed(ctx)?;
        let mut select = serving::visible_query(caller);
        let filter = match filter {
            Some(f) => bai_core::filter::parse(&f, FILTERABLE)?,
            None => None,
        };
        let mut names_stage = false;
        if let Some(mut f) = filter {
            // Backend.AI's stage names are upper-case; bai stores them lower.
            f.map_values(&|c| is_stage(c), &|v| v.to_ascii_lowercase());
            names_stage = mentions_stage(&f);
            select = select.filter(crate::sql::condition(&f));
        }
        if !names_stage {
            select = select.filter(endpoints::Column::LifecycleStage.ne(serving::stage::DESTROYED));
        }
        if let Some(d) = domain_name {
            select = select.filter(endpoints::Column::DomainName.eq(d));
        }
        if let Some(p) = project.or_else(|| group_id.and_then(|g| g.parse().ok())) {
            select = select.filter(endpoints::Column::Project.eq(p));
        }
        if let Some(u) = user_uuid.and_then(|u| u.parse::<Uuid>().ok()) {
            select = select.filter(endpoints::Column::SessionOwner.eq(u));
        }
        let (rows, total) = crate::graphql::context::paginate(
            &state.read,
            select,
            (limit, offset),
            order.as_deref(),
            &[
                ("name", endpoints::Column::Name),
                ("created_at", endpoints::Column::CreatedAt),
                ("replicas", endpoints::Column::Replicas),
                ("lifecycle_stage", endpoints::Column::LifecycleStage),
            ],
            (endpoints::Column::CreatedAt, sea_orm::Order::Desc),
        )
        .await?;
        Ok(EndpointList {
            items: rows.into_iter().map(Endpoint).collect(),
            total_count: i32::try_from(total).unwrap_or(i32::MAX),
        })
    }

    /// One route, when the caller may see its endpoint.
    async fn routing(
        &self,
        ctx: &Context<'_>,
        routing_id: Uuid,
    ) -> crate::graphql::context::Result<Routing> {
        let (state, caller) = authed(ctx)?;
        let (r, e) = serving::find_route(state, caller, routing_id).await?;
        Ok(Routing(r, serving::url_of(state, e.port)))
    }

    /// The routes of an endpoint (or of every endpoint the caller may see).
    async fn routing_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        endpoint_id: Option<Uuid>,
    ) -> crate::graphql::context::Result<RoutingList> {
        let (state, caller) = authed(ctx)?;
        let (limit, offset) = page(limit, offset)?;
        let endpoints = match endpoint_id {
            Some(id) => vec![serving::find(state, caller, id).await?],
            None => serving::visible(state, caller, false).await?,
        };
        let mut all = Vec::new();
        for e in endpoints.iter().take(200) {
            let url = serving::url_of(state, e.port);
            for r in serving::routes_of(state, e.id).await? {
                all.push(Routing(r, url.clone()));
            }
        }
        let total_count = i32::try_from(all.len()).unwrap_or(i32::MAX);
        Ok(RoutingList {
            items: all.into_iter().skip(offset).take(limit).collect(),
            total_count,
        })
    }

    /// One token, by its text, when the caller may see its endpoint.
    async fn endpoint_token(
        &self,
        ctx: &Context<'_>,
        token: String,
    ) -> crate::graphql::context::Result<EndpointToken> {
        let (state, caller) = authed(ctx)?;
        let not_found = || ApiError::not_found("token", "…");
        let claims = token
            .split('.')
            .nth(1)
            .and_then(|p| {
                use base64::Engine as _;
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(p)
                    .ok()
            })
            .and_then(|b| serde_json::from_slice::<serving::tokens::Claims>(&b).ok())
            .ok_or_else(not_found)?;
        let e = serving::find(state, caller, claims.endpoint)
            .await
            .map_err(|_| not_found())?;
        let now = state.clock.now().timestamp();
        serving::tokens::verify(&e.token_key, &token, e.id, now).map_err(|_| not_found())?;
        let row = serving::tokens_of(state, e.id)
            .await?
            .into_iter()
            .find(|t| t.id == claims.jti)
            .ok_or_else(not_found)?;
        Ok(EndpointToken { row, token })
    }

    /// The live tokens of an endpoint (or of every endpoint the caller may see), newest first.
    async fn endpoint_token_list(
        &self,
        ctx: &Context<'_>,
        limit: i32,
        offset: i32,
        endpoint_id: Option<Uuid>,
    ) -> crate::graphql::context::Result<EndpointTokenList> {
        let (state, caller) = authed(ctx)?;
        let (limit, offset) = page(limit, offset)?;
        let endpoints = match endpoint_id {
            Some(id) => vec![serving::find(state, caller, id).await?],
            None => serving::visible(state, caller, false).await?,
        };
        let mut all = Vec::new();
        for e in endpoints.iter().take(200) {
            for row in serving::tokens_of(state, e.id).await? {
                let token = serving::token_of(e, &row)?;
                all.push(EndpointToken { row, token });
            }
        }
        let total_count = i32::try_from(all.len()).unwrap_or(i32::MAX);
        Ok(EndpointTokenList {
            items: all.into_iter().skip(offset).take(limit).collect(),
            total_count,
        })
    }
}

/// Backend.AI's `ModifyEndpointInput`: what bai changes on a live endpoint (replicas, name,
/// public access); the rest is refused rather than ignored.
#[derive(InputObject, Default)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyEndpointInput {
    pub replicas: Option<i32>,
    /// Backend.AI's older name of `replicas` (not both).
    pub desired_session_count: Option<i32>,
    pub name: Option<String>,
    pub open_to_public: Option<bool>,
    pub resource_slots: Option<JsonString>,
    pub resource_opts: Option<JsonString>,
    pub cluster_mode: Option<String>,
    pub cluster_size: Option<i32>,
    pub resource_group: Option<String>,
    pub model_definition_path: Option<String>,
    pub environ: Option<JsonString>,
    pub runtime_variant: Option<String>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ModifyEndpoint {
    pub ok: bool,
    pub msg: String,
    pub endpoint: Option<Endpoint>,
}

/// bai's console's request to serve a model (the fields of `POST /services`).
#[derive(InputObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateEndpointInput {
    pub name: String,
    pub image: String,
    pub architecture: Option<String>,
    /// The model folder, by name or id.
    pub model: String,
    pub model_definition_path: Option<String>,
    /// Default `/models`.
    pub model_mount_destination: Option<String>,
    pub replicas: i32,
    /// The project's name or id (default: `default`).
    pub project: Option<String>,
    pub resource_group: String,
    /// Slot amounts (`{"cpu": "1", "mem": "1g"}`).
    pub resources: Option<JsonString>,
    /// `{"shmem": "64m"}`.
    pub resource_opts: Option<JsonString>,
    pub environ: Option<JsonString>,
    pub cluster_mode: Option<String>,
    pub cluster_size: Option<i32>,
    pub open_to_public: Option<bool>,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct CreateEndpointToken {
    pub ok: bool,
    pub token: EndpointToken,
}

#[derive(SimpleObject)]
#[graphql(rename_fields = "snake_case")]
pub struct ServingResult {
    pub ok: bool,
    pub msg: String,
}

/// A JSON object of text values.
fn text_map(
    v: Option<JsonString>,
    what: &str,
) -> Result<std::collections::BTreeMap<String, String>, ApiError> {
    match v.map(|v| v.0) {
        None | Some(serde_json::Value::Null) => Ok(Default::default()),
        Some(serde_json::Value::Object(o)) => o
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, s)),
                serde_json::Value::Number(n) => Ok((k, n.to_string())),
                _ => Err(ApiError::bad_request(format!(
                    "{what}.{k} must be text or a number"
                ))),
            })
            .collect(),
        Some(_) => Err(ApiError::bad_request(format!(
            "{what} must be a JSON object"
        ))),
    }
}

#[derive(Default)]
pub struct ServingMutation;

#[Object(rename_fields = "snake_case", rename_args = "snake_case")]
impl ServingMutation {
    /// Serves a model folder (the same as `POST /services`): the replicas and URL follow.
    async fn create_endpoint(
        &self,
        ctx: &Context<'_>,
        props: CreateEndpointInput,
    ) -> crate::graphql::context::Result<Endpoint> {
        let (state, caller) = authed(ctx)?;
        let resource_opts = match props.resource_opts.map(|v| v.0) {
            None | Some(serde_json::Value::Null) => serde_json::Map::new(),
            Some(serde_json::Value::Object(o)) => o,
            Some(_) => {
                return Err(ApiError::bad_request("resource_opts must be a JSON object").into());
            }
        };
        let req = serving::NewService {
            name: props.name,
            replicas: i64::from(props.replicas),
            image: props.image,
            architecture: props.architecture,
            runtime_variant: "custom".into(),
            group: props.project.unwrap_or_else(|| "default".into()),
            domain: None,
            cluster_size: i64::from(props.cluster_size.unwrap_or(1)),
            cluster_mode: props.cluster_mode.unwrap_or_else(|| "single-node".into()),
            open_to_public: props.open_to_public.unwrap_or(false),
            model: props.model,
            model_definition_path: props.model_definition_path,
            model_mount_destination: props
                .model_mount_destination
                .unwrap_or_else(|| "/models".into()),
            environ: text_map(props.environ, "environ")?,
            scaling_group: Some(props.resource_group),
            resources: text_map(props.resources, "resources")?,
            resource_opts,
            ..Default::default()
        };
        Ok(Endpoint(serving::create(state, caller, req).await?))
    }

    /// Changes a live endpoint: its replicas (within the policy), its name, public access.
    async fn modify_endpoint(
        &self,
        ctx: &Context<'_>,
        endpoint_id: Uuid,
        props: ModifyEndpointInput,
    ) -> crate::graphql::context::Result<ModifyEndpoint> {
        let (state, caller) = authed(ctx)?;
        // Strangers learn nothing, not even which fields bai changes.
        serving::find(state, caller, endpoint_id).await?;
        if props.replicas.is_some() && props.desired_session_count.is_some() {
            return Err(
                ApiError::bad_request("Give replicas or desired_session_count, not both").into(),
            );
        }
        let unsupported = [
            ("resource_slots", props.resource_slots.is_some()),
            ("resource_opts", props.resource_opts.is_some()),
            ("cluster_mode", props.cluster_mode.is_some()),
            ("cluster_size", props.cluster_size.is_some()),
            ("resource_group", props.resource_group.is_some()),
            (
                "model_definition_path",
                props.model_definition_path.is_some(),
            ),
            ("environ", props.environ.is_some()),
        ];
        if let Some((name, _)) = unsupported.iter().find(|(_, given)| *given) {
            return Err(ApiError::bad_request(format!(
                "bai does not change '{name}' of a running service: create a new service with it"
            ))
            .into());
        }
        let e = serving::modify(
            state,
            caller,
            endpoint_id,
            props
                .replicas
                .or(props.desired_session_count)
                .map(i64::from),
            props.name,
            props.open_to_public,
        )
        .await?;
        Ok(ModifyEndpoint {
            ok: true,
            msg: "success".into(),
            endpoint: Some(Endpoint(e)),
        })
    }

    /// Deletes a service: its replicas end, then it is destroyed.
    async fn delete_endpoint(
        &self,
        ctx: &Context<'_>,
        endpoint_id: Uuid,
    ) -> crate::graphql::context::Result<ServingResult> {
        let (state, caller) = authed(ctx)?;
        serving::delete(state, caller, endpoint_id).await?;
        Ok(ServingResult {
            ok: true,
            msg: "success".into(),
        })
    }

    /// A token for a private endpoint, valid for `duration` (seconds, or `1h`, `7d`…).
    async fn create_endpoint_token(
        &self,
        ctx: &Context<'_>,
        endpoint_id: Uuid,
        duration: String,
    ) -> crate::graphql::context::Result<CreateEndpointToken> {
        let (state, caller) = authed(ctx)?;
        serving::find(state, caller, endpoint_id).await?;
        let secs = serving::tokens::parse_duration(&serde_json::Value::String(duration.clone()))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "duration must be seconds or a number with w, d, h, m or s (up to ten years), not '{duration}'"
                ))
            })?;
        let until = state.clock.now().timestamp() + secs;
        let (row, token) = serving::issue_token(state, caller, endpoint_id, until).await?;
        Ok(CreateEndpointToken {
            ok: true,
            token: EndpointToken { row, token },
        })
    }

    /// Revokes a token: every manager refuses it within a second.
    async fn revoke_endpoint_token(
        &self,
        ctx: &Context<'_>,
        endpoint_id: Uuid,
        token_id: Uuid,
    ) -> crate::graphql::context::Result<ServingResult> {
        let (state, caller) = authed(ctx)?;
        serving::revoke_token(state, caller, endpoint_id, token_id).await?;
        Ok(ServingResult {
            ok: true,
            msg: "success".into(),
        })
    }
}
