//! The isolation matrix, generated from the live schema (issue 13). Every query, mutation and
//! subscription field that takes an argument naming a tenant object (an id, an email, an
//! access key, a domain or project) must have an entry below; a new such field without one
//! fails the test. Each entry is called by a stranger (a user), a domain admin of another
//! domain and a domain admin of the superadmin's own domain, with the victim's object and with
//! an object that does not exist: the two answers must be the same (the victim's is "like not
//! found"), and afterwards every victim object is unchanged.
use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::both_dbs;
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
}

enum Check {
    /// Called with `$v` bound to the victim's (or a missing) object of this kind.
    Tenant(Kind, &'static str),
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
    vec![
        (
            "Query",
            "user",
            "email",
            Tenant(User, "query($v: String!) { user(email: $v) { email } }"),
        ),
        (
            "Query",
            "user",
            "domain_name",
            Tenant(
                Domain,
                "query($v: String!) { user(domain_name: $v) { email } }",
            ),
        ),
        (
            "Query",
            "users",
            "domain_name",
            Tenant(
                Domain,
                "query($v: String!) { users(domain_name: $v) { email } }",
            ),
        ),
        (
            "Query",
            "users",
            "group_id",
            Tenant(Group, "query($v: UUID!) { users(group_id: $v) { email } }"),
        ),
        (
            "Query",
            "user_list",
            "domain_name",
            Tenant(
                Domain,
                "query($v: String!) { user_list(limit: 10, offset: 0, domain_name: $v) { total_count items { email } } }",
            ),
        ),
        (
            "Query",
            "user_list",
            "group_id",
            Tenant(
                Group,
                "query($v: UUID!) { user_list(limit: 10, offset: 0, group_id: $v) { total_count items { email } } }",
            ),
        ),
        (
            "Query",
            "keypair",
            "access_key",
            Tenant(
                Keypair,
                "query($v: String!) { keypair(access_key: $v) { access_key } }",
            ),
        ),
        (
            "Query",
            "keypair",
            "domain_name",
            Tenant(
                Domain,
                "query($v: String!) { keypair(domain_name: $v) { access_key } }",
            ),
        ),
        (
            "Query",
            "keypairs",
            "domain_name",
            Tenant(
                Domain,
                "query($v: String!) { keypairs(domain_name: $v) { access_key } }",
            ),
        ),
        (
            "Query",
            "keypairs",
            "email",
            Tenant(
                User,
                "query($v: String!) { keypairs(email: $v) { access_key } }",
            ),
        ),
        (
            "Query",
            "keypair_list",
            "domain_name",
            Tenant(
                Domain,
                "query($v: String!) { keypair_list(limit: 10, offset: 0, domain_name: $v) { total_count items { access_key } } }",
            ),
        ),
        (
            "Query",
            "keypair_list",
            "email",
            Tenant(
                User,
                "query($v: String!) { keypair_list(limit: 10, offset: 0, email: $v) { total_count items { access_key } } }",
            ),
        ),
        ("Query", "keypair_resource_policy", "name", Global(CATALOG)),
        (
            "Query",
            "domain",
            "name",
            Tenant(Domain, "query($v: String!) { domain(name: $v) { name } }"),
        ),
        (
            "Query",
            "group",
            "id",
            Tenant(Group, "query($v: UUID!) { group(id: $v) { name } }"),
        ),
        (
            "Query",
            "groups",
            "domain_name",
            Tenant(
                Domain,
                "query($v: String!) { groups(domain_name: $v) { name } }",
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
                "query($v: UUID!) { scaling_groups_for_user_group(user_group: $v) { name } }",
            ),
        ),
        ("Query", "container_registry", "hostname", Global(CATALOG)),
        ("Query", "image", "id", Global(CATALOG)),
        ("Query", "image", "reference", Global(CATALOG)),
        (
            "Query",
            "compute_session",
            "id",
            Tenant(
                Session,
                "query($v: UUID!) { compute_session(id: $v) { id } }",
            ),
        ),
        (
            "Query",
            "compute_session_list",
            "domain_name",
            Tenant(
                Domain,
                "query($v: String!) { compute_session_list(limit: 10, offset: 0, domain_name: $v) { total_count items { id } } }",
            ),
        ),
        (
            "Query",
            "compute_session_list",
            "group_id",
            Tenant(
                Group,
                "query($v: UUID!) { compute_session_list(limit: 10, offset: 0, group_id: $v) { total_count items { id } } }",
            ),
        ),
        (
            "Query",
            "compute_session_list",
            "access_key",
            Tenant(
                Keypair,
                "query($v: String!) { compute_session_list(limit: 10, offset: 0, access_key: $v) { total_count items { id } } }",
            ),
        ),
        (
            "Query",
            "session_ssh_private_key",
            "session_id",
            Tenant(
                Session,
                "query($v: UUID!) { session_ssh_private_key(session_id: $v) }",
            ),
        ),
        (
            "Query",
            "session_logs",
            "id",
            Tenant(Session, "query($v: UUID!) { session_logs(id: $v) }"),
        ),
        (
            "Query",
            "execution",
            "run_id",
            Tenant(Run, "query($v: UUID!) { execution(run_id: $v) { status } }"),
        ),
        (
            "Query",
            "resource_usage",
            "group_id",
            Tenant(
                Group,
                "query($v: UUID!) { resource_usage(group_id: $v) { __typename } }",
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
                "query($v: UUID!) { background_task(task_id: $v) { status } }",
            ),
        ),
        (
            "Query",
            "vfolder",
            "id",
            Tenant(Folder, "query($v: UUID!) { vfolder(id: $v) { name } }"),
        ),
        (
            "Query",
            "vfolder_files",
            "id",
            Tenant(
                Folder,
                "query($v: UUID!) { vfolder_files(id: $v) { name } }",
            ),
        ),
        ("Mutation", "login", "email", Global(AUTH)),
        ("Mutation", "signup", "email", Global(AUTH)),
        ("Mutation", "update_password_no_auth", "email", Global(AUTH)),
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
                r#"mutation($v: String!) { modify_user(email: $v, props: {full_name: "pwned"}) { ok } }"#,
            ),
        ),
        (
            "Mutation",
            "create_keypair",
            "user_id",
            Tenant(
                User,
                r#"mutation($v: String!) { create_keypair(user_id: $v, props: {resource_policy: "default", rate_limit: 1}) { ok } }"#,
            ),
        ),
        (
            "Mutation",
            "modify_keypair",
            "access_key",
            Tenant(
                Keypair,
                "mutation($v: String!) { modify_keypair(access_key: $v, props: {rate_limit: 1, is_active: false}) { ok } }",
            ),
        ),
        (
            "Mutation",
            "delete_keypair",
            "access_key",
            Tenant(
                Keypair,
                "mutation($v: String!) { delete_keypair(access_key: $v) { ok } }",
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
                r#"mutation($v: String!) { modify_domain(name: $v, props: {description: "pwned", is_active: false}) { ok } }"#,
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
                r#"mutation($v: UUID!) { modify_group(gid: $v, props: {name: "pwned"}) { ok } }"#,
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
                r#"mutation($v: String!) { associate_scaling_group_with_domain(scaling_group: "default", domain: $v) { ok } }"#,
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
                r#"mutation($v: String!) { disassociate_scaling_group_with_domain(scaling_group: "default", domain: $v) { ok } }"#,
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
                r#"mutation($v: UUID!) { associate_scaling_group_with_user_group(scaling_group: "default", user_group: $v) { ok } }"#,
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
                r#"mutation($v: UUID!) { disassociate_scaling_group_with_user_group(scaling_group: "default", user_group: $v) { ok } }"#,
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
                r#"mutation($v: String!) { associate_scaling_group_with_keypair(scaling_group: "default", access_key: $v) { ok } }"#,
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
                r#"mutation($v: String!) { disassociate_scaling_group_with_keypair(scaling_group: "default", access_key: $v) { ok } }"#,
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
                "mutation($v: UUID!) { destroy_session(id: $v) { ok } }",
            ),
        ),
        (
            "Mutation",
            "execute_in_session",
            "session_id",
            Tenant(
                Session,
                r#"mutation($v: UUID!) { execute_in_session(session_id: $v, mode: "query", code: "print(1)") { run_id } }"#,
            ),
        ),
        (
            "Mutation",
            "start_service",
            "session_id",
            Tenant(
                Session,
                r#"mutation($v: UUID!) { start_service(session_id: $v, app: "jupyter") { url } }"#,
            ),
        ),
        (
            "Mutation",
            "send_execution_input",
            "run_id",
            Tenant(
                Run,
                r#"mutation($v: UUID!) { send_execution_input(run_id: $v, input: "x") { ok } }"#,
            ),
        ),
        (
            "Mutation",
            "destroy_sessions",
            "ids",
            Tenant(
                Session,
                "mutation($v: UUID!) { destroy_sessions(ids: [$v]) { ok msg } }",
            ),
        ),
        (
            "Mutation",
            "rename_vfolder",
            "id",
            Tenant(
                Folder,
                r#"mutation($v: UUID!) { rename_vfolder(id: $v, new_name: "pwned") { ok } }"#,
            ),
        ),
        (
            "Mutation",
            "delete_vfolder",
            "id",
            Tenant(
                Folder,
                r#"mutation($v: UUID!) { delete_vfolder(id: $v, confirm_name: "secret-folder") { ok } }"#,
            ),
        ),
        (
            "Mutation",
            "create_vfolder_directory",
            "id",
            Tenant(
                Folder,
                r#"mutation($v: UUID!) { create_vfolder_directory(id: $v, path: "x") { ok } }"#,
            ),
        ),
        (
            "Mutation",
            "rename_vfolder_file",
            "id",
            Tenant(
                Folder,
                r#"mutation($v: UUID!) { rename_vfolder_file(id: $v, path: "keep.txt", new_name: "pwned.txt") { ok } }"#,
            ),
        ),
        (
            "Mutation",
            "delete_vfolder_files",
            "id",
            Tenant(
                Folder,
                r#"mutation($v: UUID!) { delete_vfolder_files(id: $v, paths: ["keep.txt"]) { ok } }"#,
            ),
        ),
        (
            "Subscription",
            "session_status_changes",
            "session_id",
            Tenant(
                Session,
                "subscription($v: UUID!) { session_status_changes(session_id: $v) { name status } }",
            ),
        ),
        (
            "Subscription",
            "execution_output",
            "run_id",
            Tenant(
                Run,
                "subscription($v: UUID!) { execution_output(run_id: $v) { stream data } }",
            ),
        ),
        (
            "Subscription",
            "session_stats",
            "session_id",
            Tenant(
                Session,
                "subscription($v: UUID!) { session_stats(session_id: $v) { cpu_used_pct } }",
            ),
        ),
        (
            "Subscription",
            "background_task_events",
            "task_id",
            Tenant(
                Task,
                "subscription($v: UUID!) { background_task_events(task_id: $v) { status } }",
            ),
        ),
    ]
}

/// Every (root, field, argument) of the live schema that may name a tenant object.
async fn id_taking_fields(app: &TestApp) -> BTreeSet<(String, String, String)> {
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

/// One answer over a GraphQL WebSocket: the first message for the subscription within a
/// short while, or "nothing".
async fn ws_answer(app: &TestApp, token: &str, doc: &str, v: &Value) -> String {
    let mut ws = subscribe_ws(app, token, doc, json!({"v": v})).await;
    use futures_util::StreamExt;
    match tokio::time::timeout(Duration::from_millis(700), ws.next()).await {
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

fn normalized(answer: &str, victim: &Value, fake: &Value) -> String {
    let text = |v: &Value| {
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string())
    };
    let answer = match serde_json::from_str::<Value>(answer) {
        Ok(mut v) => {
            without_request_ids(&mut v);
            v.to_string()
        }
        Err(_) => answer.to_string(),
    };
    answer
        .replace(&text(victim), "<ID>")
        .replace(&text(fake), "<ID>")
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
    let me = app
        .admin("{ user { email uuid } keypair { access_key } }", json!({}))
        .await;
    let super_email = me["user"]["email"].as_str().unwrap().to_string();
    let super_ak = me["keypair"]["access_key"].as_str().unwrap().to_string();
    app.create_domain("secret").await;
    app.create_domain("lab").await;
    let hidden = app
        .admin(r#"mutation { create_group(name: "hidden", props: {domain_name: "secret"}) { group { id } } }"#, json!({}))
        .await["create_group"]["group"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let folder = app
        .admin(
            r#"mutation { create_vfolder(props: {name: "secret-folder"}) { vfolder { id } } }"#,
            json!({}),
        )
        .await["create_vfolder"]["vfolder"]["id"]
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
        .admin(r#"mutation($s: UUID!) { execute_in_session(session_id: $s, mode: "query", code: "print(1)") { run_id } }"#, json!({"s": session}))
        .await["execute_in_session"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let task = app
        .admin("mutation { rescan_images { task_id } }", json!({}))
        .await["rescan_images"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let victim = |k: Kind| -> Value {
        json!(match k {
            User => super_email.clone(),
            Keypair => super_ak.clone(),
            Session => session.clone(),
            Run => run.clone(),
            Task => task.clone(),
            Folder => folder.clone(),
            Group => hidden.clone(),
            Domain => "secret".to_string(),
        })
    };
    let fake = |k: Kind| -> Value {
        json!(match k {
            User => "nobody-at-all@x.org".to_string(),
            Keypair => "AKIANOSUCHKEY0000000".to_string(),
            Domain => "nosuchdomain".to_string(),
            _ => uuid::Uuid::new_v4().to_string(),
        })
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
        for (root, field, arg, check) in entries() {
            let Tenant(kind, doc) = check else { continue };
            let (v, f) = (victim(kind), fake(kind));
            let (a, b) = if root == "Subscription" {
                (
                    ws_answer(&app, token, doc, &v).await,
                    ws_answer(&app, token, doc, &f).await,
                )
            } else {
                (
                    app.gql(Some(token), doc, json!({"v": v})).await.to_string(),
                    app.gql(Some(token), doc, json!({"v": f})).await.to_string(),
                )
            };
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
        .admin(
            r#"query($s: UUID!, $g: UUID!, $f: UUID!) { user { full_name } keypair { rate_limit is_active } compute_session(id: $s) { status } group(id: $g) { name } vfolder(id: $f) { name } domain(name: "secret") { description is_active } }"#,
            json!({"s": session, "g": hidden, "f": folder}),
        )
        .await;
    assert_ne!(after["user"]["full_name"], "pwned", "{after}");
    assert_eq!(after["keypair"]["is_active"], true, "{after}");
    assert_ne!(after["keypair"]["rate_limit"], 1, "{after}");
    assert_eq!(after["compute_session"]["status"], "RUNNING", "{after}");
    assert_eq!(after["group"]["name"], "hidden", "{after}");
    assert_eq!(after["vfolder"]["name"], "secret-folder", "{after}");
    assert_eq!(after["domain"]["is_active"], true, "{after}");
    assert_ne!(after["domain"]["description"], "pwned", "{after}");
    destroy(&app, &app.admin_token, &session).await;
});
