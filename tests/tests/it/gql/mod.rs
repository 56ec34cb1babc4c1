//! The tests' GraphQL operations: one document per operation. The harness's and those several
//! test modules share are under `tests/graphql/common/` (registered below: `gql::Name`), a
//! module's own under `tests/graphql/<module>/` (`gql::<module>::Name`, which another module
//! may borrow). Where a test sends exactly what the console sends, it uses the console's own
//! document under `web/graphql/` (`../web/graphql/…`), so the two cannot drift apart. They
//! are read against the server's schema (`api/schema.graphql`) when the
//! tests are compiled, as the console's are (`web/src/ops.rs`). A selected field, an input
//! field, an input type or a variable type the schema lacks fails the build, and so does a
//! variable the test does not set. Run them with `TestApp::op` / `op_ok` / `admin_op` (the
//! answer as JSON, so a test can also assert what must be absent) or `subscribe_op`.
//!
//! Only requests that are wrong on purpose stay inline (`TestApp::gql` with a string): a
//! syntax error, an unknown field, a depth or alias bomb — the schema refuses them, which is
//! what such a test checks.
//!
//! Every operation gets `Default` variables and leaves unset optional input fields out of the
//! request (`skip_serializing_none`), so `..Default::default()` fills in what a test does not
//! care about. Variables (and input objects) also derive `Deserialize`, so that a test may
//! write an input object as JSON (`support::create_session`).

// The derive reads the schema unseen by Cargo: this makes a change to it rebuild the tests.
const _: &str = include_str!("../../../../api/schema.graphql");

// The schema's custom scalars, as the tests send and read them.

/// `UUID`: the hyphenated text form.
#[allow(clippy::upper_case_acronyms)]
pub type UUID = String;
/// `DateTime`: RFC 3339 text.
pub type DateTime = String;
/// `BigInt`: a 64-bit integer, a JSON number.
pub type BigInt = i64;
/// `JSONString`: the server takes a JSON document as a string or as a plain value.
pub type JSONString = serde_json::Value;
/// `ScopeField`: `project:<uuid>`, `user:<uuid>` or `domain:<name>`.
pub type ScopeField = String;
/// `GlobalIDField`: a Relay global id, `base64("<type>:<id>")`.
pub type GlobalIDField = String;
/// `VFolderPermissionValueField`: one of Backend.AI's folder permission words.
pub type VFolderPermissionValueField = String;

/// `operation!(Name, "graphql/<module>/<file>.graphql");` — the document holds one operation
/// called `Name`; `gql::name::Variables` is what it takes.
///
/// A selection set of nothing but `__typename` (or only inline fragments) cannot be derived:
/// graphql_client makes it an enum without serde's path, which then needs the `serde` crate
/// this package does not depend on ("can't find crate for `serde`" at the derive below).
/// Select a real field beside `__typename`, or send such a request inline.
// rustfmt re-indents an attribute inside a macro on every run; kept as written.
#[rustfmt::skip]
macro_rules! operation {
    ($name:ident, $path:tt) => {
        #[derive(graphql_client::GraphQLQuery)]
        #[graphql(
            schema_path = "../api/schema.graphql",
            query_path = $path,
            variables_derives = "Debug, Default, Deserialize",
            response_derives = "Debug",
            skip_serializing_none
        )]
        pub struct $name;
    };
}
// The modules below see it by textual scope (they are declared after it).

// Used by the harness (support.rs) and every module.
operation!(Login, "graphql/common/login.graphql");
operation!(CreateUser, "../web/graphql/admin/create_user.graphql");
operation!(MyAccessKey, "graphql/common/my_access_key.graphql");
operation!(
    SetKeypairPolicy,
    "graphql/common/set_keypair_policy.graphql"
);
operation!(CreatePolicy, "../web/graphql/admin/create_policy.graphql");
operation!(CreateDomain, "graphql/common/create_domain.graphql");
operation!(SessionState, "graphql/common/session_state.graphql");
operation!(CreateSession, "graphql/common/create_session.graphql");
operation!(
    DestroySession,
    "../web/graphql/sessions/destroy_session.graphql"
);

// Used by more than one test module: one document each, selecting what all of them read
// (a test reads fields out of the answer, so a field another test needs costs it nothing).
operation!(AliasImage, "graphql/common/alias_image.graphql");
operation!(BackgroundTask, "graphql/common/background_task.graphql");
operation!(
    BackgroundTaskEvents,
    "graphql/common/background_task_events.graphql"
);
operation!(
    ComputeSessionList,
    "graphql/common/compute_session_list.graphql"
);
operation!(
    ContainerRegistries,
    "graphql/common/container_registries.graphql"
);
operation!(CreateGroup, "graphql/common/create_group.graphql");
operation!(CreateKeypair, "graphql/common/create_keypair.graphql");
operation!(CreatePreset, "graphql/common/create_preset.graphql");
operation!(
    CreateScalingGroup,
    "graphql/common/create_scaling_group.graphql"
);
operation!(
    CreateSessionFromTemplate,
    "../web/graphql/sessions/create_session_from_template.graphql"
);
operation!(
    CreateSessionTemplate,
    "../web/graphql/sessions/create_session_template.graphql"
);
operation!(
    CommitSession,
    "../web/graphql/sessions/commit_session.graphql"
);
operation!(CreateVfolder, "graphql/common/create_vfolder.graphql");
operation!(CustomizedImages, "graphql/common/customized_images.graphql");
operation!(
    CreateVfolderDirectory,
    "graphql/common/create_vfolder_directory.graphql"
);
operation!(DeletePreset, "../web/graphql/admin/delete_preset.graphql");
operation!(
    DeleteSessionTemplate,
    "../web/graphql/sessions/delete_session_template.graphql"
);
operation!(DeleteVfolder, "graphql/common/delete_vfolder.graphql");
operation!(
    DeleteVfolderFiles,
    "graphql/common/delete_vfolder_files.graphql"
);
operation!(DestroySessions, "graphql/common/destroy_sessions.graphql");
operation!(DomainName, "graphql/common/domain_name.graphql");
operation!(ForgetImageById, "graphql/common/forget_image_by_id.graphql");
operation!(
    UntagImageFromRegistry,
    "graphql/common/untag_image_from_registry.graphql"
);
operation!(
    ExecuteInSession,
    "graphql/common/execute_in_session.graphql"
);
operation!(Execution, "graphql/common/execution.graphql");
operation!(ExecutionOutput, "graphql/common/execution_output.graphql");
operation!(Groups, "graphql/common/groups.graphql");
operation!(Image, "graphql/common/image.graphql");
operation!(Images, "graphql/common/images.graphql");
operation!(KeypairList, "graphql/common/keypair_list.graphql");
operation!(Keypairs, "graphql/common/keypairs.graphql");
operation!(ModifyDomain, "graphql/common/modify_domain.graphql");
operation!(ModifyImage, "graphql/common/modify_image.graphql");
operation!(ModifyKeypair, "graphql/common/modify_keypair.graphql");
operation!(ModifyPolicy, "../web/graphql/admin/modify_policy.graphql");
operation!(ModifyUser, "graphql/common/modify_user.graphql");
operation!(MyKeypair, "graphql/common/my_keypair.graphql");
operation!(RenameVfolder, "graphql/common/rename_vfolder.graphql");
operation!(
    RenameVfolderFile,
    "graphql/common/rename_vfolder_file.graphql"
);
operation!(RescanImages, "graphql/common/rescan_images.graphql");
operation!(ResourcePresets, "graphql/common/resource_presets.graphql");
operation!(ResourceUsage, "graphql/common/resource_usage.graphql");
operation!(ScalingGroups, "graphql/common/scaling_groups.graphql");
operation!(
    SendExecutionInput,
    "graphql/common/send_execution_input.graphql"
);
operation!(SessionId, "graphql/common/session_id.graphql");
operation!(SessionNode, "graphql/common/session_node.graphql");
operation!(SessionNodes, "graphql/common/session_nodes.graphql");
operation!(SessionList, "graphql/common/session_list.graphql");
operation!(SessionLogs, "../web/graphql/sessions/session_logs.graphql");
operation!(
    SessionSshPrivateKey,
    "graphql/common/session_ssh_private_key.graphql"
);
operation!(SessionStats, "graphql/common/session_stats.graphql");
operation!(SessionsStats, "graphql/common/sessions_stats.graphql");
operation!(
    SessionStatusChanges,
    "graphql/common/session_status_changes.graphql"
);
operation!(StartService, "graphql/common/start_service.graphql");
operation!(SystemSettings, "graphql/common/system_settings.graphql");
operation!(UserChanges, "graphql/common/user_changes.graphql");
operation!(UserList, "graphql/common/user_list.graphql");
operation!(Users, "graphql/common/users.graphql");
operation!(Vfolder, "graphql/common/vfolder.graphql");

// One module of operations per test module.
pub mod admin;
pub mod auth;
pub mod hostile;
pub mod hosts;
pub mod live;
pub mod managers;
pub mod matrix;
pub mod ops;
pub mod registry;
pub mod roles;
pub mod sessions;
pub mod storage;
