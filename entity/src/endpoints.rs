//! Model-serving endpoints (Backend.AI's `endpoints`): a model folder served by `replicas`
//! inference sessions of one image, reached at the endpoint's own port. Rows stay after
//! the endpoint is destroyed (`lifecycle_stage = destroyed`), as Backend.AI keeps them.
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "endpoints")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub name: String,
    pub domain_name: String,
    /// The project (group) the replicas run in.
    pub project: Uuid,
    pub resource_group: String,
    pub created_user: Uuid,
    /// Whose sessions the replicas are (and whose keypair launches them).
    pub session_owner: Uuid,
    pub owner_access_key: String,
    /// The image's canonical name.
    pub image: String,
    pub architecture: String,
    /// The model folder (null once the folder is purged).
    pub model: Option<Uuid>,
    pub model_mount_destination: String,
    /// The definition file that was read, relative to the folder (`./model-definition.yaml`).
    pub model_definition_path: Option<String>,
    /// The resolved model definition (bai-services' `serving::definition::Definition`).
    pub model_definition: Json,
    /// `custom` (the only one bai runs).
    pub runtime_variant: String,
    /// Slot amounts as given (`{"cpu": "1", "mem": "512m"}`).
    pub resources: Json,
    pub resource_opts: Json,
    pub environ: Json,
    /// `single-node` or `multi-node`.
    pub cluster_mode: String,
    pub cluster_size: i32,
    /// Replicas wanted (Backend.AI's `replicas` / `desired_session_count`).
    pub replicas: i32,
    pub open_to_public: bool,
    /// `created`, `destroying`, `destroyed`.
    pub lifecycle_stage: String,
    /// Replicas that failed to start.
    pub retries: i32,
    /// The port the endpoint is served on (its URL); null until the leader assigns one.
    pub port: Option<i32>,
    /// Hex key the endpoint's tokens are signed with (HMAC-SHA256); never sent.
    pub token_key: String,
    pub tag: Option<String>,
    pub startup_command: Option<String>,
    pub bootstrap_script: Option<String>,
    pub callback_url: Option<String>,
    pub created_at: DateTimeUtc,
    pub destroyed_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
