//! The isolation matrix, generated from the live schema (issue 13). Every query, mutation and
//! subscription field that takes an argument naming a tenant object (an id, an email, an
//! access key, a domain or project) must have an entry below; a new such field without one
//! fails the test. Each entry is called by a stranger (a user), a domain admin of another
//! domain and a domain admin of the superadmin's own domain, with the victim's object and with
//! an object that does not exist: the two answers must be the same (the victim's is "like not
//! found"), and afterwards every victim object is unchanged.
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use graphql_client::GraphQLQuery;
use serde_json::{Value, json};

use crate::both_dbs;
use crate::gql::{self, admin, matrix as m};
use crate::support::*;

/// Arguments that never name a tenant object.
const NOT_IDS: &[&str] = &[
    "limit",
    "offset",
    "order",
    "filter",
    "status",
    "is_active",
    "path",
    "paths",
    "props",
    "mode",
    "code",
    "options",
    "app",
    "open_to_public",
    "preferred_port",
    // The caller's own preferred SSH port (update_preferred_ssh_port acts on the caller).
    "port",
    "input",
    "new_name",
    "confirm_name",
    "recursive",
    "parents",
    "password",
    "password2",
    "new_password",
    "new_password2",
    "old_password",
    "current_password",
    "username",
    "invitation_token",
    "agreed_to_terms",
    "alias",
    "architecture",
    "value",
    "interval_secs",
    "type",
    "is_installed",
    "overrides",
    // The name a commit gives its new image (a new name, never looked up as someone's).
    "image_name",
    "load_filters",
    "count",
    "is_operation",
    // A folder's mount permission (ro, rw, wd), its options, a path inside it, whether the
    // invitations asked for are the sent ones: never someone's object.
    "permission",
    "cloneable",
    "src",
    "dst",
    "sent",
    // Relay's pagination (a count and cursors; pages go by offset).
    "first",
    "last",
    "after",
    "before",
    // Backend.AI 26's typed order of a list.
    "orderBy",
    // Statistics: which kind of series (the id names the object) and over how long.
    "scope",
    "period",
    // How long a new endpoint token lives.
    "duration",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    User,
    Keypair,
    Session,
    Run,
    Task,
    Folder,
    Group,
    Domain,
    Template,
    /// A committed session's image (its id; `ImageRef`: its reference).
    Image,
    ImageRef,
    /// An invitation to share a folder.
    Invitation,
    /// A model-serving endpoint, one of its routes, one of its tokens (its id; `TokenText`:
    /// the token itself).
    Endpoint,
    Route,
    Token,
    TokenText,
}

/// What a request answered, as text: a query's or mutation's whole body, or a subscription's
/// first message.
type Answer<'a> = Pin<Box<dyn Future<Output = String> + 'a>>;

/// One typed request naming a tenant object: made as the caller (`token`) with `v`, the
/// victim's object or one that does not exist.
type Ask = for<'a> fn(&'a TestApp, &'a str, String) -> Answer<'a>;

fn answer<'a>(f: impl Future<Output = String> + 'a) -> Answer<'a> {
    Box::pin(f)
}

/// `ask!(Op, |v| variables)`: the query or mutation `Op`, its whole answer.
macro_rules! ask {
    ($op:ty, |$v:ident| $vars:expr) => {
        |app, token, $v| answer(async move { app.op::<$op>(Some(token), $vars).await.to_string() })
    };
}

/// `watch!(Op, |v| variables)`: the subscription `Op`, its first message.
macro_rules! watch {
    ($op:ty, |$v:ident| $vars:expr) => {
        |app, token, $v| answer(ws_answer::<$op>(app, token, $vars))
    };
}

enum Check {
    /// Asked with the victim's (or a missing) object of this kind.
    Tenant(Kind, Ask),
    /// Not a tenant object, with the reason (global catalogs and settings that only admins
    /// change, or authentication that answers every wrong pair alike).
    Global(&'static str),
}

use Check::*;
use Kind::*;

/// (root type, field, argument) → how it is checked.
fn entries() -> Vec<(&'static str, &'static str, &'static str, Check)> {
    const CATALOG: &str = "global catalog: read by everyone, changed by superadmins only";
    const AUTH: &str = "authentication: every wrong email/password pair gets the same answer";
    // Nothing is looked up, so no answer can differ; a stranger's name yielding nothing is
    // tested with a live session in cli::events_by_name_before_the_session_exists.
    const NAME_FILTER: &str =
        "a filter, never resolved: it narrows the events of the sessions the caller already sees";
    // A second condition on a lookup or list the caller's own visibility already bounds.
    const NARROWS: &str =
        "narrows what the caller already sees (its own objects): it never widens the answer";
    vec![
        (
            "Query",
            "accessible_scaling_groups",
            "project_id",
            Tenant(
                Group,
                ask!(m::AccessibleScalingGroups, |v| {
                    m::accessible_scaling_groups::Variables { project_id: v }
                }),
            ),
        ),
        (
            "Query",
            "agent_summary_list",
            "scaling_group",
            Global(CATALOG),
        ),
        ("Query", "compute_session_node", "scope_id", Global(NARROWS)),
        (
            "Query",
            "compute_session_node",
            "project_id",
            Global(NARROWS),
        ),
        ("Query", "group", "domain_name", Global(NARROWS)),
        (
            "Query",
            "vfolder_nodes",
            "scope_id",
            Tenant(
                Group,
                ask!(m::VfolderNodes, |v| m::vfolder_nodes::Variables {
                    scope: Some(format!("project:{v}")),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "vfolder_nodes",
            "project_id",
            Tenant(
                Group,
                ask!(m::VfolderNodes, |v| m::vfolder_nodes::Variables {
                    project_id: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "vfolder_node",
            "id",
            Tenant(
                Folder,
                ask!(m::VfolderNode, |v| m::vfolder_node::Variables { id: v }),
            ),
        ),
        (
            "Query",
            "vfolderV2",
            "vfolderId",
            Tenant(
                Folder,
                ask!(m::VfolderV2, |v| m::vfolder_v2::Variables { id: v }),
            ),
        ),
        ("Query", "user_resource_policy", "name", Global(CATALOG)),
        (
            "Query",
            "project_resource_policy",
            "name",
            Global("always null: bai has no per-project resource policies"),
        ),
        (
            "Query",
            "user",
            "email",
            Tenant(
                User,
                ask!(m::User, |v| m::user::Variables {
                    email: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "user",
            "domain_name",
            Tenant(
                Domain,
                ask!(m::User, |v| m::user::Variables {
                    domain_name: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "users",
            "domain_name",
            Tenant(
                Domain,
                ask!(gql::Users, |v| gql::users::Variables {
                    domain_name: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "users",
            "group_id",
            Tenant(
                Group,
                ask!(gql::Users, |v| gql::users::Variables {
                    group_id: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "user_list",
            "domain_name",
            Tenant(
                Domain,
                ask!(gql::UserList, |v| gql::user_list::Variables {
                    limit: 10,
                    offset: 0,
                    domain_name: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "user_list",
            "group_id",
            Tenant(
                Group,
                ask!(gql::UserList, |v| gql::user_list::Variables {
                    limit: 10,
                    offset: 0,
                    group_id: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "keypair",
            "access_key",
            Tenant(
                Keypair,
                ask!(m::Keypair, |v| m::keypair::Variables {
                    access_key: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "keypair",
            "domain_name",
            Tenant(
                Domain,
                ask!(m::Keypair, |v| m::keypair::Variables {
                    domain_name: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "keypairs",
            "domain_name",
            Tenant(
                Domain,
                ask!(gql::Keypairs, |v| gql::keypairs::Variables {
                    domain_name: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "keypairs",
            "email",
            Tenant(
                User,
                ask!(gql::Keypairs, |v| gql::keypairs::Variables {
                    email: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "keypair_list",
            "domain_name",
            Tenant(
                Domain,
                ask!(gql::KeypairList, |v| gql::keypair_list::Variables {
                    limit: 10,
                    offset: 0,
                    domain_name: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        (
            "Query",
            "keypair_list",
            "email",
            Tenant(
                User,
                ask!(gql::KeypairList, |v| gql::keypair_list::Variables {
                    limit: 10,
                    offset: 0,
                    email: Some(v),
                    ..Default::default()
                }),
            ),
        ),
        ("Query", "keypair_resource_policy", "name", Global(CATALOG)),
        (
            "Query",
            "domain",
            "name",
            Tenant(
                Domain,
                ask!(gql::DomainName, |v| gql::domain_name::Variables {
                    name: Some(v)
                }),
            ),
        ),
        (
            "Query",
            "group",
            "id",
            Tenant(Group, ask!(m::Group, |v| m::group::Variables { id: v })),
        ),
        (
            "Query",
            "groups",
            "domain_name",
            Tenant(
                Domain,
                ask!(gql::Groups, |v| gql::groups::Variables {
                    domain_name: Some(v)
                }),
            ),
        ),
        (
            "Query",
            "session_template",
            "id",
            Tenant(
                Template,
                ask!(m::SessionTemplate, |v| m::session_template::Variables {
                    id: v
                }),
            ),
        ),
        (
            "Mutation",
            "modify_session_template",
            "id",
            Tenant(
                Template,
                ask!(m::ModifySessionTemplate, |v| {
                    m::modify_session_template::Variables {
                        id: v,
                        props: m::modify_session_template::ModifySessionTemplateInput {
                            name: Some("pwned".into()),
                            ..Default::default()
                        },
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "delete_session_template",
            "id",
            Tenant(
                Template,
                ask!(gql::DeleteSessionTemplate, |v| {
                    gql::delete_session_template::Variables { id: v }
                }),
            ),
        ),
        (
            "Mutation",
            "create_session_from_template",
            "id",
            Tenant(
                Template,
                ask!(gql::CreateSessionFromTemplate, |v| {
                    gql::create_session_from_template::Variables {
                        id: v,
                        ..Default::default()
                    }
                }),
            ),
        ),
        (
            "Query",
            "endpoint",
            "endpoint_id",
            Tenant(
                Endpoint,
                ask!(m::Endpoint, |v| m::endpoint::Variables { id: v }),
            ),
        ),
        ("Query", "endpoint_list", "domain_name", Global(NARROWS)),
        ("Query", "endpoint_list", "group_id", Global(NARROWS)),
        ("Query", "endpoint_list", "user_uuid", Global(NARROWS)),
        ("Query", "endpoint_list", "project", Global(NARROWS)),
        (
            "Query",
            "routing",
            "routing_id",
            Tenant(Route, ask!(m::Routing, |v| m::routing::Variables { id: v })),
        ),
        (
            "Query",
            "routing_list",
            "endpoint_id",
            Tenant(
                Endpoint,
                ask!(m::RoutingList, |v| m::routing_list::Variables {
                    id: Some(v)
                }),
            ),
        ),
        (
            "Query",
            "endpoint_token",
            "token",
            Tenant(
                TokenText,
                ask!(m::EndpointToken, |v| m::endpoint_token::Variables {
                    token: v
                }),
            ),
        ),
        (
            "Query",
            "endpoint_token_list",
            "endpoint_id",
            Tenant(
                Endpoint,
                ask!(m::EndpointTokenList, |v| {
                    m::endpoint_token_list::Variables { id: Some(v) }
                }),
            ),
        ),
        (
            "Mutation",
            "modify_endpoint",
            "endpoint_id",
            Tenant(
                Endpoint,
                ask!(m::ModifyEndpoint, |v| m::modify_endpoint::Variables {
                    id: v,
                    props: m::modify_endpoint::ModifyEndpointInput {
                        name: Some("pwned".into()),
                        replicas: Some(0),
                        open_to_public: Some(true),
                        ..Default::default()
                    },
                }),
            ),
        ),
        (
            "Mutation",
            "delete_endpoint",
            "endpoint_id",
            Tenant(
                Endpoint,
                ask!(m::DeleteEndpoint, |v| m::delete_endpoint::Variables {
                    id: v
                }),
            ),
        ),
        (
            "Mutation",
            "create_endpoint_token",
            "endpoint_id",
            Tenant(
                Endpoint,
                ask!(m::CreateEndpointToken, |v| {
                    m::create_endpoint_token::Variables { id: v }
                }),
            ),
        ),
        (
            "Mutation",
            "revoke_endpoint_token",
            "endpoint_id",
            Tenant(
                Endpoint,
                ask!(m::RevokeEndpointToken, |v| {
                    m::revoke_endpoint_token::Variables {
                        endpoint: v,
                        token: uuid::Uuid::new_v4().to_string(),
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "revoke_endpoint_token",
            "token_id",
            Tenant(
                Token,
                ask!(m::RevokeEndpointToken, |v| {
                    // A token id is only ever looked up under an endpoint the caller may act
                    // on: under any other, the victim's and a missing one answer alike.
                    m::revoke_endpoint_token::Variables {
                        endpoint: uuid::Uuid::nil().to_string(),
                        token: v,
                    }
                }),
            ),
        ),
        ("Query", "resource_preset", "name", Global(CATALOG)),
        ("Query", "scaling_group", "name", Global(CATALOG)),
        ("Query", "scaling_groups", "name", Global(CATALOG)),
        (
            "Query",
            "scaling_groups_for_user_group",
            "user_group",
            Tenant(
                Group,
                ask!(m::ScalingGroupsForUserGroup, |v| {
                    m::scaling_groups_for_user_group::Variables { user_group: v }
                }),
            ),
        ),
        ("Query", "container_registry", "hostname", Global(CATALOG)),
        (
            "Query",
            "image",
            "id",
            Tenant(
                Image,
                ask!(m::ImageById, |v| m::image_by_id::Variables { id: v }),
            ),
        ),
        (
            "Query",
            "image",
            "reference",
            Tenant(
                ImageRef,
                ask!(gql::Image, |v| gql::image::Variables { reference: v }),
            ),
        ),
        (
            "Mutation",
            "forget_image_by_id",
            "image_id",
            Tenant(
                Image,
                ask!(gql::ForgetImageById, |v| {
                    gql::forget_image_by_id::Variables { image_id: v }
                }),
            ),
        ),
        (
            "Mutation",
            "untag_image_from_registry",
            "image_id",
            Tenant(
                Image,
                ask!(gql::UntagImageFromRegistry, |v| {
                    gql::untag_image_from_registry::Variables { image_id: v }
                }),
            ),
        ),
        (
            "Mutation",
            "commit_session",
            "session_id",
            Tenant(
                Session,
                ask!(gql::CommitSession, |v| gql::commit_session::Variables {
                    session_id: v,
                    image_name: "stolen".into(),
                }),
            ),
        ),
        (
            "Query",
            "compute_session",
            "id",
            Tenant(
                Session,
                ask!(gql::SessionId, |v| gql::session_id::Variables { id: v }),
            ),
        ),
        (
            "Query",
            "usage_series",
            "id",
            Tenant(
                Session,
                ask!(m::UsageSeriesOfSession, |v| {
                    m::usage_series_of_session::Variables { id: Some(v) }
                }),
            ),
        ),
        (
            "Query",
            "compute_session_node",
            "id",
            Tenant(
                Session,
                ask!(gql::SessionNode, |v| gql::session_node::Variables { id: v }),
            ),
        ),
        (
            "Query",
            "compute_session_nodes",
            "scope_id",
            Tenant(
                Group,
                ask!(gql::SessionNodes, |v| gql::session_nodes::Variables {
                    scope: Some(format!("project:{v}")),
                }),
            ),
        ),
        (
            "Query",
            "compute_session_list",
            "domain_name",
            Tenant(
                Domain,
                ask!(gql::ComputeSessionList, |v| {
                    gql::compute_session_list::Variables {
                        limit: 10,
                        domain_name: Some(v),
                        ..Default::default()
                    }
                }),
            ),
        ),
        (
            "Query",
            "compute_session_list",
            "group_id",
            Tenant(
                Group,
                ask!(gql::ComputeSessionList, |v| {
                    gql::compute_session_list::Variables {
                        limit: 10,
                        group_id: Some(v),
                        ..Default::default()
                    }
                }),
            ),
        ),
        (
            "Query",
            "compute_session_list",
            "access_key",
            Tenant(
                Keypair,
                ask!(gql::ComputeSessionList, |v| {
                    gql::compute_session_list::Variables {
                        limit: 10,
                        access_key: Some(v),
                        ..Default::default()
                    }
                }),
            ),
        ),
        (
            "Query",
            "session_ssh_private_key",
            "session_id",
            Tenant(
                Session,
                ask!(gql::SessionSshPrivateKey, |v| {
                    gql::session_ssh_private_key::Variables { session_id: v }
                }),
            ),
        ),
        (
            "Query",
            "session_logs",
            "id",
            Tenant(
                Session,
                ask!(gql::SessionLogs, |v| gql::session_logs::Variables { id: v }),
            ),
        ),
        (
            "Query",
            "execution",
            "run_id",
            Tenant(
                Run,
                ask!(gql::Execution, |v| gql::execution::Variables { run_id: v }),
            ),
        ),
        (
            "Query",
            "resource_usage",
            "group_id",
            Tenant(
                Group,
                ask!(gql::ResourceUsage, |v| gql::resource_usage::Variables {
                    group_id: Some(v)
                }),
            ),
        ),
        ("Query", "resource_usage", "scaling_group", Global(CATALOG)),
        (
            "Query",
            "agent",
            "agent_id",
            Global("agents are infrastructure: superadmins only"),
        ),
        ("Query", "agents", "scaling_group", Global(CATALOG)),
        ("Query", "agent_list", "scaling_group", Global(CATALOG)),
        (
            "Query",
            "background_task",
            "task_id",
            Tenant(
                Task,
                ask!(gql::BackgroundTask, |v| gql::background_task::Variables {
                    task_id: v
                }),
            ),
        ),
        (
            "Query",
            "vfolder",
            "id",
            Tenant(
                Folder,
                ask!(gql::Vfolder, |v| gql::vfolder::Variables { id: v }),
            ),
        ),
        (
            "Query",
            "vfolder_files",
            "id",
            Tenant(
                Folder,
                ask!(m::VfolderFiles, |v| m::vfolder_files::Variables { id: v }),
            ),
        ),
        ("Mutation", "login", "email", Global(AUTH)),
        ("Mutation", "signup", "email", Global(AUTH)),
        ("Mutation", "update_password_no_auth", "email", Global(AUTH)),
        (
            "Mutation",
            "request_password_reset",
            "email",
            Global(
                "every address gets the same answer; the link goes to the address only (mail::password_reset_by_mail)",
            ),
        ),
        (
            "Mutation",
            "reset_password",
            "token",
            Global("an e-mailed link's secret: it names its own account and nothing else"),
        ),
        (
            "Mutation",
            "verify_email",
            "token",
            Global("an e-mailed link's secret: it names its own account and nothing else"),
        ),
        (
            "Mutation",
            "create_user",
            "email",
            Global("creates a new account: admins only, checked before anything"),
        ),
        (
            "Mutation",
            "modify_user",
            "email",
            Tenant(
                User,
                ask!(gql::ModifyUser, |v| gql::modify_user::Variables {
                    email: v,
                    props: gql::modify_user::ModifyUserInput {
                        full_name: Some("pwned".into()),
                        ..Default::default()
                    },
                }),
            ),
        ),
        (
            "Mutation",
            "create_keypair",
            "user_id",
            Tenant(
                User,
                ask!(gql::CreateKeypair, |v| gql::create_keypair::Variables {
                    user_id: v,
                    props: gql::create_keypair::KeyPairInput {
                        resource_policy: "default".into(),
                        rate_limit: 1,
                        ..Default::default()
                    },
                }),
            ),
        ),
        (
            "Mutation",
            "modify_keypair",
            "access_key",
            Tenant(
                Keypair,
                ask!(gql::ModifyKeypair, |v| gql::modify_keypair::Variables {
                    access_key: v,
                    props: gql::modify_keypair::ModifyKeyPairInput {
                        rate_limit: Some(1),
                        is_active: Some(false),
                        ..Default::default()
                    },
                }),
            ),
        ),
        (
            "Mutation",
            "delete_keypair",
            "access_key",
            Tenant(
                Keypair,
                ask!(admin::DeleteKeypair, |v| admin::delete_keypair::Variables {
                    access_key: v
                }),
            ),
        ),
        (
            "Mutation",
            "create_keypair_resource_policy",
            "name",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "modify_keypair_resource_policy",
            "name",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "delete_keypair_resource_policy",
            "name",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "create_domain",
            "name",
            Global("creates a new domain: superadmins only"),
        ),
        (
            "Mutation",
            "modify_domain",
            "name",
            Tenant(
                Domain,
                ask!(gql::ModifyDomain, |v| gql::modify_domain::Variables {
                    name: v,
                    props: gql::modify_domain::ModifyDomainInput {
                        description: Some("pwned".into()),
                        is_active: Some(false),
                        ..Default::default()
                    },
                }),
            ),
        ),
        (
            "Mutation",
            "create_group",
            "name",
            Global("creates a new project in a domain named in props: admins of that domain only"),
        ),
        (
            "Mutation",
            "modify_group",
            "gid",
            Tenant(
                Group,
                ask!(admin::ModifyGroup, |v| admin::modify_group::Variables {
                    gid: v,
                    props: admin::modify_group::ModifyGroupInput {
                        name: Some("pwned".into()),
                        ..Default::default()
                    },
                }),
            ),
        ),
        (
            "Mutation",
            "purge_group",
            "gid",
            Tenant(
                Group,
                ask!(admin::PurgeGroup, |v| admin::purge_group::Variables {
                    gid: v
                }),
            ),
        ),
        (
            "Mutation",
            "create_resource_preset",
            "name",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "modify_resource_preset",
            "name",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "delete_resource_preset",
            "name",
            Global(CATALOG),
        ),
        ("Mutation", "create_scaling_group", "name", Global(CATALOG)),
        ("Mutation", "modify_scaling_group", "name", Global(CATALOG)),
        ("Mutation", "delete_scaling_group", "name", Global(CATALOG)),
        (
            "Mutation",
            "associate_scaling_group_with_domain",
            "scaling_group",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "associate_scaling_group_with_domain",
            "domain",
            Tenant(
                Domain,
                ask!(admin::AssociateScalingGroupWithDomain, |v| {
                    admin::associate_scaling_group_with_domain::Variables {
                        scaling_group: "default".into(),
                        domain: v,
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "disassociate_scaling_group_with_domain",
            "scaling_group",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "disassociate_scaling_group_with_domain",
            "domain",
            Tenant(
                Domain,
                ask!(m::DisassociateScalingGroupWithDomain, |v| {
                    m::disassociate_scaling_group_with_domain::Variables {
                        scaling_group: "default".into(),
                        domain: v,
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "associate_scaling_group_with_user_group",
            "scaling_group",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "associate_scaling_group_with_user_group",
            "user_group",
            Tenant(
                Group,
                ask!(admin::AssociateScalingGroupWithUserGroup, |v| {
                    admin::associate_scaling_group_with_user_group::Variables {
                        scaling_group: "default".into(),
                        user_group: v,
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "disassociate_scaling_group_with_user_group",
            "scaling_group",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "disassociate_scaling_group_with_user_group",
            "user_group",
            Tenant(
                Group,
                ask!(m::DisassociateScalingGroupWithUserGroup, |v| {
                    m::disassociate_scaling_group_with_user_group::Variables {
                        scaling_group: "default".into(),
                        user_group: v,
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "associate_scaling_group_with_keypair",
            "scaling_group",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "associate_scaling_group_with_keypair",
            "access_key",
            Tenant(
                Keypair,
                ask!(m::AssociateScalingGroupWithKeypair, |v| {
                    m::associate_scaling_group_with_keypair::Variables {
                        scaling_group: "default".into(),
                        access_key: v,
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "disassociate_scaling_group_with_keypair",
            "scaling_group",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "disassociate_scaling_group_with_keypair",
            "access_key",
            Tenant(
                Keypair,
                ask!(m::DisassociateScalingGroupWithKeypair, |v| {
                    m::disassociate_scaling_group_with_keypair::Variables {
                        scaling_group: "default".into(),
                        access_key: v,
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "create_container_registry",
            "hostname",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "modify_container_registry",
            "hostname",
            Global(CATALOG),
        ),
        (
            "Mutation",
            "delete_container_registry",
            "hostname",
            Global(CATALOG),
        ),
        ("Mutation", "modify_image", "target", Global(CATALOG)),
        ("Mutation", "alias_image", "target", Global(CATALOG)),
        ("Mutation", "forget_image", "reference", Global(CATALOG)),
        ("Mutation", "modify_system_setting", "key", Global(CATALOG)),
        ("Mutation", "rescan_images", "registry", Global(CATALOG)),
        (
            "Mutation",
            "destroy_session",
            "id",
            Tenant(
                Session,
                ask!(gql::DestroySession, |v| gql::destroy_session::Variables {
                    id: v
                }),
            ),
        ),
        (
            "Mutation",
            "execute_in_session",
            "session_id",
            Tenant(
                Session,
                ask!(gql::ExecuteInSession, |v| {
                    gql::execute_in_session::Variables {
                        session_id: v,
                        mode: "query".into(),
                        code: Some("print(1)".into()),
                        options: None,
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "start_service",
            "session_id",
            Tenant(
                Session,
                ask!(gql::StartService, |v| gql::start_service::Variables {
                    session_id: v,
                    app: "jupyter".into(),
                    open_to_public: false,
                    preferred_port: None,
                }),
            ),
        ),
        (
            "Mutation",
            "send_execution_input",
            "run_id",
            Tenant(
                Run,
                ask!(gql::SendExecutionInput, |v| {
                    gql::send_execution_input::Variables {
                        run_id: v,
                        input: "x".into(),
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "destroy_sessions",
            "ids",
            Tenant(
                Session,
                ask!(gql::DestroySessions, |v| gql::destroy_sessions::Variables {
                    ids: vec![v]
                }),
            ),
        ),
        (
            "Query",
            "vfolder_shares",
            "id",
            Tenant(
                Folder,
                ask!(m::VfolderShares, |v| m::vfolder_shares::Variables { id: v }),
            ),
        ),
        (
            "Query",
            "vfolder_list",
            "group_id",
            Tenant(
                Group,
                ask!(m::VfolderListOfGroup, |v| {
                    m::vfolder_list_of_group::Variables { group_id: Some(v) }
                }),
            ),
        ),
        (
            "Mutation",
            "clone_vfolder",
            "id",
            Tenant(
                Folder,
                ask!(m::CloneVfolder, |v| m::clone_vfolder::Variables {
                    id: v,
                    props: m::clone_vfolder::CloneVFolderInput {
                        name: "stolen".into(),
                        ..Default::default()
                    },
                }),
            ),
        ),
        (
            "Mutation",
            "leave_vfolder",
            "id",
            Tenant(
                Folder,
                ask!(m::LeaveVfolder, |v| m::leave_vfolder::Variables { id: v }),
            ),
        ),
        (
            "Mutation",
            "move_vfolder_file",
            "id",
            Tenant(
                Folder,
                ask!(m::MoveVfolderFile, |v| m::move_vfolder_file::Variables {
                    id: v,
                    src: "keep.txt".into(),
                    dst: "moved.txt".into(),
                }),
            ),
        ),
        (
            "Mutation",
            "purge_vfolder",
            "id",
            Tenant(
                Folder,
                ask!(m::PurgeVfolder, |v| m::purge_vfolder::Variables { id: v }),
            ),
        ),
        (
            "Mutation",
            "restore_vfolder",
            "id",
            Tenant(
                Folder,
                ask!(m::RestoreVfolder, |v| m::restore_vfolder::Variables {
                    id: v
                }),
            ),
        ),
        (
            "Mutation",
            "update_vfolder_options",
            "id",
            Tenant(
                Folder,
                ask!(m::UpdateVfolderOptions, |v| {
                    m::update_vfolder_options::Variables {
                        id: v,
                        cloneable: Some(true),
                        permission: None,
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "invite_to_vfolder",
            "id",
            Tenant(
                Folder,
                ask!(m::InviteToVfolder, |v| m::invite_to_vfolder::Variables {
                    id: v,
                    emails: vec!["stranger@x.org".into()],
                    permission: "rw".into(),
                }),
            ),
        ),
        (
            "Mutation",
            "invite_to_vfolder",
            "emails",
            Global(
                "the addresses invited to the caller's own folder (checked first by id); the answer never tells whether one is an account",
            ),
        ),
        (
            "Mutation",
            "set_vfolder_share",
            "id",
            Tenant(
                Folder,
                ask!(m::SetVfolderShare, |v| m::set_vfolder_share::Variables {
                    id: v,
                    user: uuid::Uuid::new_v4().to_string(),
                    permission: None,
                }),
            ),
        ),
        (
            "Mutation",
            "set_vfolder_share",
            "user",
            Global(
                "the user a share of the caller's own folder is with: the folder (id) is checked first, an unknown share is NOT_FOUND",
            ),
        ),
        (
            "Mutation",
            "share_vfolder_with_members",
            "id",
            Tenant(
                Folder,
                ask!(m::ShareVfolderWithMembers, |v| {
                    m::share_vfolder_with_members::Variables {
                        id: v,
                        emails: vec!["stranger@x.org".into()],
                        permission: Some("rw".into()),
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "share_vfolder_with_members",
            "emails",
            Global(
                "members of the folder's project, named by an admin of its domain after the folder (id) is checked",
            ),
        ),
        (
            "Mutation",
            "accept_vfolder_invitation",
            "id",
            Tenant(
                Invitation,
                ask!(m::AcceptVfolderInvitation, |v| {
                    m::accept_vfolder_invitation::Variables { id: v }
                }),
            ),
        ),
        (
            "Mutation",
            "decline_vfolder_invitation",
            "id",
            Tenant(
                Invitation,
                ask!(m::DeclineVfolderInvitation, |v| {
                    m::decline_vfolder_invitation::Variables { id: v }
                }),
            ),
        ),
        (
            "Mutation",
            "update_vfolder_invitation",
            "id",
            Tenant(
                Invitation,
                ask!(m::UpdateVfolderInvitation, |v| {
                    m::update_vfolder_invitation::Variables {
                        id: v,
                        permission: "wd".into(),
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "purge_domain",
            "name",
            Tenant(
                Domain,
                ask!(m::PurgeDomain, |v| m::purge_domain::Variables { name: v }),
            ),
        ),
        (
            "Mutation",
            "purge_user",
            "email",
            Tenant(
                User,
                ask!(m::PurgeUser, |v| m::purge_user::Variables { email: v }),
            ),
        ),
        (
            "Mutation",
            "delete_user",
            "email",
            Tenant(
                User,
                ask!(m::DeleteUser, |v| m::delete_user::Variables { email: v }),
            ),
        ),
        (
            "Query",
            "groups_by_name",
            "name",
            Global(
                "projects by name, only among those `groups` shows the caller (its own; an admin's domain's): another domain's are never listed",
            ),
        ),
        (
            "Query",
            "groups_by_name",
            "domain_name",
            Global(
                "narrows `groups_by_name` among the projects the caller may see; never widens it",
            ),
        ),
        (
            "Query",
            "storage_volume",
            "id",
            Global("storage hosts are infrastructure: superadmins only, checked before the id"),
        ),
        (
            "Mutation",
            "rename_vfolder",
            "id",
            Tenant(
                Folder,
                ask!(gql::RenameVfolder, |v| gql::rename_vfolder::Variables {
                    id: v,
                    new_name: "pwned".into(),
                }),
            ),
        ),
        (
            "Mutation",
            "delete_vfolder",
            "id",
            Tenant(
                Folder,
                ask!(gql::DeleteVfolder, |v| gql::delete_vfolder::Variables {
                    id: v,
                    confirm_name: "secret-folder".into(),
                }),
            ),
        ),
        (
            "Mutation",
            "create_vfolder_directory",
            "id",
            Tenant(
                Folder,
                ask!(gql::CreateVfolderDirectory, |v| {
                    gql::create_vfolder_directory::Variables {
                        id: v,
                        path: "x".into(),
                        parents: None,
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "rename_vfolder_file",
            "id",
            Tenant(
                Folder,
                ask!(gql::RenameVfolderFile, |v| {
                    gql::rename_vfolder_file::Variables {
                        id: v,
                        path: "keep.txt".into(),
                        new_name: "pwned.txt".into(),
                    }
                }),
            ),
        ),
        (
            "Mutation",
            "delete_vfolder_files",
            "id",
            Tenant(
                Folder,
                ask!(gql::DeleteVfolderFiles, |v| {
                    gql::delete_vfolder_files::Variables {
                        id: v,
                        paths: vec!["keep.txt".into()],
                        recursive: None,
                    }
                }),
            ),
        ),
        (
            "Subscription",
            "session_status_changes",
            "session_id",
            Tenant(
                Session,
                watch!(gql::SessionStatusChanges, |v| {
                    gql::session_status_changes::Variables {
                        session_id: Some(v),
                        session_name: None,
                    }
                }),
            ),
        ),
        (
            "Subscription",
            "session_status_changes",
            "session_name",
            Global(NAME_FILTER),
        ),
        (
            "Subscription",
            "execution_output",
            "run_id",
            Tenant(
                Run,
                watch!(gql::ExecutionOutput, |v| gql::execution_output::Variables {
                    run_id: v
                }),
            ),
        ),
        (
            "Subscription",
            "session_stats",
            "session_id",
            Tenant(
                Session,
                watch!(gql::SessionStats, |v| gql::session_stats::Variables {
                    session_id: v,
                    interval_secs: None,
                }),
            ),
        ),
        (
            "Subscription",
            "sessions_stats",
            "session_ids",
            Tenant(
                Session,
                watch!(gql::SessionsStats, |v| gql::sessions_stats::Variables {
                    session_ids: vec![v],
                    interval_secs: None,
                }),
            ),
        ),
        (
            "Subscription",
            "background_task_events",
            "task_id",
            Tenant(
                Task,
                watch!(gql::BackgroundTaskEvents, |v| {
                    gql::background_task_events::Variables { task_id: v }
                }),
            ),
        ),
    ]
}

/// Every (root, field, argument) of the live schema that may name a tenant object.
async fn id_taking_fields(app: &TestApp) -> BTreeSet<(String, String, String)> {
    // Stays inline: introspection (`__schema`) is not in api/schema.graphql, so graphql_client
    // cannot check this document.
    let q = "{ __schema { queryType { fields { name args { name } } } mutationType { fields { name args { name } } } subscriptionType { fields { name args { name } } } } }";
    let s = app.admin(q, json!({})).await;
    let mut out = BTreeSet::new();
    for (root, key) in [
        ("Query", "queryType"),
        ("Mutation", "mutationType"),
        ("Subscription", "subscriptionType"),
    ] {
        for f in s["__schema"][key]["fields"].as_array().unwrap() {
            for a in f["args"].as_array().unwrap() {
                let arg = a["name"].as_str().unwrap();
                if !NOT_IDS.contains(&arg) {
                    out.insert((
                        root.to_string(),
                        f["name"].as_str().unwrap().to_string(),
                        arg.to_string(),
                    ));
                }
            }
        }
    }
    out
}

/// One answer over a GraphQL WebSocket: the first message for the typed subscription `Q`.
/// The server answers a subscription to a missing or hidden object at once (an error); only
/// one that was let through and listens waits out the bound (a bound against hanging), and
/// then answers "nothing", which differs from the missing object's error.
async fn ws_answer<Q: GraphQLQuery>(app: &TestApp, token: &str, variables: Q::Variables) -> String {
    // Not `subscribe_op`: that waits for the server to listen on the event bus, which a
    // refused subscription never does.
    let mut ws = subscribe_op_sent::<Q>(app, token, variables).await;
    use futures_util::StreamExt;
    match tokio::time::timeout(WAIT, ws.next()).await {
        Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t)))) => t.to_string(),
        Ok(other) => format!("{other:?}"),
        Err(_) => "nothing".into(),
    }
}

/// Request ids differ by design: they are dropped before answers are compared.
fn without_request_ids(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("request_id");
            m.values_mut().for_each(without_request_ids);
        }
        Value::Array(a) => a.iter_mut().for_each(without_request_ids),
        _ => {}
    }
}

/// The superadmin's model service of one replica (a model folder whose service sleeps), its
/// route and a token: (endpoint, route, token id, token).
async fn victim_endpoint(app: &TestApp) -> (String, String, String, String) {
    let (st, f) = rest(
        app,
        &app.admin_token,
        reqwest::Method::POST,
        "/folders",
        Some(json!({"name": "secret-model", "usage_mode": "model"})),
    )
    .await;
    assert_eq!(st, 201, "{f}");
    let folder = uuid::Uuid::parse_str(f["id"].as_str().unwrap())
        .unwrap()
        .to_string();
    let resp = app
        .http
        .post(app.url(&format!(
            "/storage/folders/{folder}/upload?path=model-definition.yaml"
        )))
        .bearer_auth(&app.admin_token)
        .body("models:\n- name: m\n  service: {start_command: [sleep, '3600'], port: 8000}\n")
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let (st, e) = rest(
        app,
        &app.admin_token,
        reqwest::Method::POST,
        "/services",
        Some(json!({
            "name": "secret-service", "replicas": 1, "image": PYTHON,
            "config": {"model": folder, "scaling_group": "default"},
        })),
    )
    .await;
    assert_eq!(st, 201, "{e}");
    let endpoint = e["endpoint_id"].as_str().unwrap().to_string();
    let route = eventually("the victim service's route", WAIT, || async {
        let (_, e) = rest(
            app,
            &app.admin_token,
            reqwest::Method::GET,
            &format!("/services/{endpoint}"),
            None,
        )
        .await;
        e["active_routes"][0]["route_id"]
            .as_str()
            .map(str::to_string)
    })
    .await;
    let made = app
        .admin_op::<m::CreateEndpointToken>(m::create_endpoint_token::Variables {
            id: endpoint.clone(),
        })
        .await;
    let text = made["create_endpoint_token"]["token"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let listed = app
        .admin_op::<m::EndpointToken>(m::endpoint_token::Variables {
            token: text.clone(),
        })
        .await;
    assert_eq!(
        listed["endpoint_token"]["endpoint_id"],
        endpoint.as_str(),
        "{listed}"
    );
    let ids = app
        .ok(Some(&app.admin_token), "query($id: UUID) { endpoint_token_list(limit: 1, offset: 0, endpoint_id: $id) { items { id } } }", json!({"id": endpoint}))
        .await;
    let token_id = ids["endpoint_token_list"]["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    (endpoint, route, token_id, text)
}

fn normalized(answer: &str, victim: &str, fake: &str) -> String {
    let answer = match serde_json::from_str::<Value>(answer) {
        Ok(mut v) => {
            without_request_ids(&mut v);
            v.to_string()
        }
        Err(_) => answer.to_string(),
    };
    answer.replace(victim, "<ID>").replace(fake, "<ID>")
}

both_dbs!(isolation_matrix_from_the_live_schema, |db| async move {
    require_docker();
    let app = spawn(db).await;

    // Coverage first: every id-taking field of the schema has an entry, and no entry is stale.
    let live = id_taking_fields(&app).await;
    let table: BTreeSet<(String, String, String)> = entries()
        .iter()
        .map(|(r, f, a, _)| (r.to_string(), f.to_string(), a.to_string()))
        .collect();
    let missing: Vec<_> = live.difference(&table).collect();
    assert!(
        missing.is_empty(),
        "id-taking fields with no isolation-matrix entry: {missing:?}"
    );
    for (_, field, arg, check) in entries() {
        if let Global(reason) = check {
            assert!(
                reason.len() > 10,
                "{field}({arg}) is exempt without a reason"
            );
        }
    }
    let stale: Vec<_> = table.difference(&live).collect();
    assert!(
        stale.is_empty(),
        "matrix entries for fields the schema no longer has: {stale:?}"
    );

    // The victims: the superadmin's own things, and a project of a third domain.
    let me = app.admin_op::<m::Me>(m::me::Variables).await;
    let super_email = me["user"]["email"].as_str().unwrap().to_string();
    let super_ak = me["keypair"]["access_key"].as_str().unwrap().to_string();
    app.create_domain("secret").await;
    app.create_domain("lab").await;
    let hidden = app
        .admin_op::<gql::CreateGroup>(gql::create_group::Variables {
            name: "hidden".into(),
            props: gql::create_group::GroupInput {
                domain_name: "secret".into(),
                ..Default::default()
            },
        })
        .await["create_group"]["group"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let folder = app
        .admin_op::<gql::CreateVfolder>(gql::create_vfolder::Variables {
            props: gql::create_vfolder::CreateVFolderInput {
                name: "secret-folder".into(),
                ..Default::default()
            },
        })
        .await["create_vfolder"]["vfolder"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The superadmin's invitation of another user of its domain to its folder.
    app.user("invitee@x.org", "user", "default").await;
    app.admin_op::<m::InviteToVfolder>(m::invite_to_vfolder::Variables {
        id: folder.clone(),
        emails: vec!["invitee@x.org".into()],
        permission: "ro".into(),
    })
    .await;
    let invitation = app
        .admin_op::<m::VfolderInvitations>(m::vfolder_invitations::Variables { sent: Some(true) })
        .await["vfolder_invitations"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let created = create_session(
        &app,
        &app.admin_token,
        json!({"image": PYTHON, "name": "victim"}),
    )
    .await;
    let session = session_ids(&created)[0].clone();
    wait_status(&app, &app.admin_token, &session, &["RUNNING"]).await;
    let run = app
        .admin_op::<gql::ExecuteInSession>(gql::execute_in_session::Variables {
            session_id: session.clone(),
            mode: "query".into(),
            code: Some("print(1)".into()),
            options: None,
        })
        .await["execute_in_session"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let task =
        app.admin_op::<gql::RescanImages>(Default::default()).await["rescan_images"]["task_id"]
            .as_str()
            .unwrap()
            .to_string();
    let template = app
        .admin_op::<gql::CreateSessionTemplate>(gql::create_session_template::Variables {
            props: gql::create_session_template::CreateSessionTemplateInput {
                payload: format!(
                    "api_version: v1\nkind: taskTemplate\nmetadata: {{name: secret-template}}\nspec: {{kernel: {{image: {PYTHON}}}}}"
                ),
                ..Default::default()
            },
        })
        .await["create_session_template"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The superadmin's own committed image (the victim session's, through the console's
    // mutation), once its task is done.
    let commit = app
        .admin_op::<gql::CommitSession>(gql::commit_session::Variables {
            session_id: session.clone(),
            image_name: "secret-image".into(),
        })
        .await;
    let task_id = commit["commit_session"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_task_done(&app, &app.admin_token, &task_id).await;
    let mine = app
        .admin_op::<gql::CustomizedImages>(Default::default())
        .await;
    let image = &mine["customized_images"][0];
    assert_eq!(image["customized_name"], "secret-image", "{mine}");
    let (image_id, image_ref) = (
        image["id"].as_str().unwrap().to_string(),
        image["name"].as_str().unwrap().to_string(),
    );
    // The superadmin's model service (one replica) with a token.
    let (endpoint, route, token_id, token_text) = victim_endpoint(&app).await;
    let victim = |k: Kind| -> String {
        match k {
            Endpoint => endpoint.clone(),
            Route => route.clone(),
            Token => token_id.clone(),
            TokenText => token_text.clone(),
            User => super_email.clone(),
            Keypair => super_ak.clone(),
            Session => session.clone(),
            Run => run.clone(),
            Task => task.clone(),
            Folder => folder.clone(),
            Group => hidden.clone(),
            Domain => "secret".to_string(),
            Template => template.clone(),
            Image => image_id.clone(),
            ImageRef => image_ref.clone(),
            Invitation => invitation.clone(),
        }
    };
    let fake = |k: Kind| -> String {
        match k {
            User => "nobody-at-all@x.org".to_string(),
            Keypair => "AKIANOSUCHKEY0000000".to_string(),
            Domain => "nosuchdomain".to_string(),
            TokenText => format!("{}.e30.c2ln", uuid::Uuid::new_v4().simple()),
            ImageRef => format!(
                "bai.local/user-{}/python:3-customized_{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            ),
            _ => uuid::Uuid::new_v4().to_string(),
        }
    };

    let callers = [
        (
            "a user",
            app.user("stranger@x.org", "user", "default").await,
        ),
        (
            "an admin of another domain",
            app.user("boss@lab.org", "admin", "lab").await,
        ),
        (
            "an admin of the superadmin's domain",
            app.user("peer@x.org", "admin", "default").await,
        ),
    ];
    let mut failures = Vec::new();
    for (who, token) in &callers {
        for (_, field, arg, check) in entries() {
            let Tenant(kind, ask) = check else { continue };
            let (v, f) = (victim(kind), fake(kind));
            let (a, b) = (
                ask(&app, token, v.clone()).await,
                ask(&app, token, f.clone()).await,
            );
            let (a, b) = (normalized(&a, &v, &f), normalized(&b, &v, &f));
            if a != b {
                failures.push(format!(
                    "{who} / {field}({arg}):\n  victim: {a}\n  missing: {b}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "answers that tell a victim's object from a missing one:\n{}",
        failures.join("\n")
    );

    // Nothing changed.
    let after = app
        .admin_op::<m::VictimsAfter>(m::victims_after::Variables {
            session: session.clone(),
            group: hidden.clone(),
            folder: folder.clone(),
            template: template.clone(),
        })
        .await;
    assert_ne!(after["user"]["full_name"], "pwned", "{after}");
    assert_eq!(after["keypair"]["is_active"], true, "{after}");
    assert_ne!(after["keypair"]["rate_limit"], 1, "{after}");
    assert_eq!(after["compute_session"]["status"], "RUNNING", "{after}");
    assert_eq!(after["group"]["name"], "hidden", "{after}");
    assert_eq!(after["vfolder"]["name"], "secret-folder", "{after}");
    assert_eq!(after["domain"]["is_active"], true, "{after}");
    assert_eq!(
        after["session_template"]["name"], "secret-template",
        "{after}"
    );
    assert_ne!(after["domain"]["description"], "pwned", "{after}");
    let still = app
        .admin_op::<gql::CustomizedImages>(Default::default())
        .await;
    assert_eq!(
        still["customized_images"].as_array().map(Vec::len),
        Some(1),
        "{still}"
    );
    let (st, e) = rest(
        &app,
        &app.admin_token,
        reqwest::Method::GET,
        &format!("/services/{endpoint}"),
        None,
    )
    .await;
    assert_eq!(st, 200, "{e}");
    assert_eq!(
        (
            e["name"].as_str(),
            e["replicas"].as_i64(),
            e["is_public"].as_bool()
        ),
        (Some("secret-service"), Some(1), Some(false)),
        "{e}"
    );
    let tokens = app
        .admin_op::<m::EndpointTokenList>(m::endpoint_token_list::Variables {
            id: Some(endpoint.clone()),
        })
        .await;
    assert_eq!(tokens["endpoint_token_list"]["total_count"], 1, "{tokens}");
    destroy(&app, &app.admin_token, &session).await;
    app.admin_op::<gql::ForgetImageById>(gql::forget_image_by_id::Variables { image_id })
        .await;
});
