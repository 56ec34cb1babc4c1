//! The console's GraphQL operations: one document each under `web/graphql/<screen>/`, read
//! against the server's schema (`api/schema.graphql`) when the console is built. A selected
//! field, an input type or a variable type the schema lacks fails the build (graphql_client
//! does not check argument names, nor a variable's type against its argument's); so does Rust
//! code reading a field the document does not select. Each struct runs through `gql::run`
//! (queries, mutations) or `gql::subscribe`; its module (`ops::user_list`, …) holds the typed
//! `Variables` and `ResponseData`. One operation per document: a document is sent whole.
//!
//! Operations whose input objects leave fields out are built with `skip_serializing_none`
//! (and `Default` variables, to fill in the rest): an unset field is left out of the request
//! rather than sent as `null`.
// Enums of the schema that layer 1 (`bai_types`) defines come from there, not the derive.
use bai_types::events::TaskStatus;
use graphql_client::GraphQLQuery;

// The derive reads the schema unseen by Cargo: this makes a change to it rebuild the console.
const _: &str = include_str!("../../api/schema.graphql");

// The schema's custom scalars, as the server writes them (api/src/graphql/scalars.rs).

/// `UUID`: the hyphenated text form. (The derive looks scalars up by their schema name.)
#[allow(clippy::upper_case_acronyms)]
pub type UUID = String;
/// `DateTime`: RFC 3339 text (the console cuts and parses it as text).
pub type DateTime = String;
/// `BigInt`: a 64-bit integer, sent as a JSON number.
pub type BigInt = i64;
/// `JSONString`: a JSON document carried as a string.
pub type JSONString = crate::gql::JsonString;

// ---------------------------------------------------------------- The login page and the shell (main.rs)
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/login/me.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct Me;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/login/signup_enabled.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SignupEnabled;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/login/request_password_reset.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct RequestPasswordReset;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/login/reset_password.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct ResetPassword;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/login/verify_email.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct VerifyEmail;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/login/login.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct Login;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/login/update_password_no_auth.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct UpdatePasswordNoAuth;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/login/logout.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct Logout;

// ---------------------------------------------------------------- Account dialogs (account.rs)
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/account/change_password.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct ChangePassword;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/account/ssh_public_key.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SshPublicKey;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/account/refresh_ssh_keypair.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct RefreshSshKeypair;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/account/my_settings.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct MySettings;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/account/update_preferred_ssh_port.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct UpdatePreferredSshPort;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/account/signup_needs_token.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SignupNeedsToken;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/account/signup.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct Signup;

// ---------------------------------------------------------------- Sessions (sessions.rs)
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/session_list.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SessionList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/image_names.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct ImageNames;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/launch_options.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct LaunchOptions;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/create_session.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreateSession;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/create_session_from_template.graphql",
    response_derives = "Debug, Clone, PartialEq",
    skip_serializing_none
)]
pub struct CreateSessionFromTemplate;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/create_session_template.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreateSessionTemplate;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/commit_session.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct CommitSession;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/delete_session_template.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeleteSessionTemplate;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/session_apps.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SessionApps;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/start_service.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct StartService;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/session_ssh_private_key.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SessionSshPrivateKey;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/session_detail.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SessionDetail;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/session_logs.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SessionLogs;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/destroy_session.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DestroySession;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/session_status_changes.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SessionStatusChanges;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/sessions/sessions_stats.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SessionsStats;

// ---------------------------------------------------------------- Data & Storage (storage.rs)
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/folder_list.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct FolderList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/create_folder.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreateFolder;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/rename_folder.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct RenameFolder;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/delete_folder.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeleteFolder;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/folder_files.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct FolderFiles;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/create_folder_directory.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct CreateFolderDirectory;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/delete_folder_files.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeleteFolderFiles;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/rename_folder_file.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct RenameFolderFile;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/folder_invitations.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct FolderInvitations;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/invite_to_folder.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct InviteToFolder;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/accept_invitation.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct AcceptInvitation;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/decline_invitation.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeclineInvitation;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/leave_folder.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct LeaveFolder;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/restore_folder.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct RestoreFolder;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/purge_folder.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct PurgeFolder;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/folder_shares.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct FolderShares;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/storage/set_folder_share.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SetFolderShare;

// ---------------------------------------------------------------- Summary and the usage bars (summary.rs)
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/summary/resource_usage.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct ResourceUsage;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/summary/scaling_groups_for_project.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct ScalingGroupsForProject;

// ---------------------------------------------------------------- Administration (admin.rs)
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/user_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct UserList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/deactivate_user.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeactivateUser;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/modify_user.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct ModifyUser;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/create_user.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreateUser;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/keypair_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct KeypairList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/set_keypair_active.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SetKeypairActive;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/delete_keypair.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeleteKeypair;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/policy_names.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct PolicyNames;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/modify_keypair.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct ModifyKeypair;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/create_keypair.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreateKeypair;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/policy_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct PolicyList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/delete_policy.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeletePolicy;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/modify_policy.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct ModifyPolicy;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/create_policy.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreatePolicy;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/image_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct ImageList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/modify_image.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct ModifyImage;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/preset_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct PresetList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/delete_preset.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeletePreset;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/modify_preset.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct ModifyPreset;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/create_preset.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct CreatePreset;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/background_task.graphql",
    response_derives = "Debug, Clone, PartialEq",
    extern_enums("TaskStatus")
)]
pub struct BackgroundTask;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/registry_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct RegistryList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/rescan_registry.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct RescanRegistry;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/delete_registry.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeleteRegistry;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/create_registry.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreateRegistry;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/modify_registry.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct ModifyRegistry;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/agent_list.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct AgentList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/agent_changes.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct AgentChanges;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/scaling_group_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct ScalingGroupList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/modify_scaling_group.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct ModifyScalingGroup;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/create_scaling_group.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreateScalingGroup;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/system_settings.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SystemSettings;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/set_announcement.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct SetAnnouncement;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/recalculate_usage.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct RecalculateUsage;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/rescan_images.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct RescanImages;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/clean_up_images.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct CleanUpImages;

// ---------------------------------------------------------------- Projects and domains (projects.rs)
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/project_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct ProjectList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/project_members.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct ProjectMembers;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/create_project.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreateProject;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/modify_project.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct ModifyProject;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/associate_project_resource_group.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct AssociateProjectResourceGroup;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/disassociate_project_resource_group.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DisassociateProjectResourceGroup;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/domain_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct DomainList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/create_domain.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct CreateDomain;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/modify_domain.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct ModifyDomain;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/admin/user_detail.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct UserDetail;

// ---------------------------------------------------------------- Statistics (statistics.rs)
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/statistics/usage_series.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct UsageSeries;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/statistics/usage_totals.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct UsageTotals;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/statistics/usage_changes.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct UsageChanges;

// ---------------------------------------------------------------- Serving (serving.rs)
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/serving/endpoint_list.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct EndpointList;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/serving/endpoint_detail.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct EndpointDetail;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/serving/serving_choices.graphql",
    response_derives = "Debug, Clone, PartialEq, Default"
)]
pub struct ServingChoices;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/serving/create_endpoint.graphql",
    response_derives = "Debug, Clone, PartialEq",
    skip_serializing_none
)]
pub struct CreateEndpoint;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/serving/scale_endpoint.graphql",
    response_derives = "Debug, Clone, PartialEq",
    variables_derives = "Default",
    skip_serializing_none
)]
pub struct ScaleEndpoint;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/serving/delete_endpoint.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct DeleteEndpoint;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/serving/create_endpoint_token.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct CreateEndpointToken;
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../api/schema.graphql",
    query_path = "graphql/serving/revoke_endpoint_token.graphql",
    response_derives = "Debug, Clone, PartialEq"
)]
pub struct RevokeEndpointToken;
