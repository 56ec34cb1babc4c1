//! Backend.AI 24.12–26's node layer, as Lablup's Web UI 26 reads it, against hostile callers:
//! folder nodes (`vfolder_nodes`, `vfolder_node`, `vfolderV2`), the admin user list
//! (`adminUsersV2`), `agent_summary_list`, `accessible_scaling_groups`,
//! `user_resource_policy`, and `POST /session` as the Web UI sends it.
use serde_json::{Value, json};

use crate::gql::matrix as m;
use crate::support::*;

/// The names in a `vfolder_nodes` answer.
fn names(v: &Value) -> Vec<String> {
    v["vfolder_nodes"]["edges"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|e| e["node"]["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn folder(app: &TestApp, token: &str, name: &str) -> String {
    let (st, made) = rest(
        app,
        token,
        reqwest::Method::POST,
        "/folders",
        Some(json!({"name": name})),
    )
    .await;
    assert_eq!(st, 201, "{made}");
    // The dashed form GraphQL answers (REST answers 32 hex digits, as Backend.AI does).
    uuid::Uuid::parse_str(made["id"].as_str().unwrap_or_else(|| panic!("{made}")))
        .unwrap()
        .to_string()
}

crate::both_dbs!(folder_nodes_show_each_caller_its_own, |db| async move {
    let app = spawn(db).await;
    let alice = app.user("nodes-a@x.org", "user", "default").await;
    let bob = app.user("nodes-b@x.org", "user", "default").await;
    let mine = folder(&app, &alice, "alice-data").await;
    let secret = folder(&app, &bob, "bob-secret").await;
    folder(&app, &alice, ".dotted").await;
    let project = group_id(&app, &alice, "default").await;
    let list = |token: String, filter: Option<&'static str>| {
        let app = &app;
        let project = project.clone();
        async move {
            app.op::<m::VfolderNodes>(
                Some(&token),
                m::vfolder_nodes::Variables {
                    scope: Some(format!("project:{project}")),
                    filter: filter.map(str::to_string),
                    order: Some("name".into()),
                    ..Default::default()
                },
            )
            .await
        }
    };
    // Alice sees her folders, never Bob's.
    let got = list(alice.clone(), None).await;
    assert_eq!(names(&got["data"]), vec![".dotted", "alice-data"], "{got}");
    let node = &got["data"]["vfolder_nodes"]["edges"][1]["node"];
    assert_eq!(node["row_id"], mine.as_str(), "{node}");
    let alice_id = app.ok(Some(&alice), "{ user { id } }", json!({})).await["user"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(node["quota_scope_id"], format!("user:{alice_id}"), "{node}");
    assert_eq!(node["ownership_type"], "user", "{node}");
    let perms = node["permissions"].as_array().unwrap();
    for p in [
        "read_attribute",
        "write_content",
        "delete_vfolder",
        "mount_wd",
    ] {
        assert!(perms.contains(&json!(p)), "{p}: {node}");
    }
    // Backend.AI 26's filter: status names, lists, negation.
    let active = list(
        alice.clone(),
        Some(r#"status != "DELETE_PENDING" & status != "DELETE_ONGOING" & (! name ilike ".%")"#),
    )
    .await;
    assert_eq!(names(&active["data"]), vec!["alice-data"], "{active}");
    let trash = list(
        alice.clone(),
        Some(r#"status in ["DELETE_PENDING", "DELETE_ONGOING", "DELETE_ERROR"]"#),
    )
    .await;
    assert_eq!(trash["data"]["vfolder_nodes"]["count"], 0, "{trash}");
    let bad = list(alice.clone(), Some(r#"owner == "x""#)).await;
    assert_code(&bad, "BAD_REQUEST");
    // Bob's folder, by either id form, is NOT_FOUND for Alice, as a missing one is.
    let missing = uuid::Uuid::new_v4().to_string();
    for id in [secret.clone(), missing.clone()] {
        let one = app
            .op::<m::VfolderNode>(Some(&alice), m::vfolder_node::Variables { id: id.clone() })
            .await;
        assert_code(&one, "NOT_FOUND");
        let v2 = app
            .op::<m::VfolderV2>(Some(&alice), m::vfolder_v2::Variables { id })
            .await;
        assert_code(&v2, "NOT_FOUND");
    }
    use base64::Engine as _;
    let global =
        base64::engine::general_purpose::STANDARD.encode(format!("VirtualFolderNode:{secret}"));
    let one = app
        .op::<m::VfolderNode>(Some(&alice), m::vfolder_node::Variables { id: global })
        .await;
    assert_code(&one, "NOT_FOUND");
    // Her own, by its global id and in the v2 shape.
    let own = app
        .op_ok::<m::VfolderV2>(Some(&alice), m::vfolder_v2::Variables { id: mine.clone() })
        .await;
    assert_eq!(own["vfolderV2"]["metadata"]["name"], "alice-data", "{own}");
    assert_eq!(own["vfolderV2"]["status"], "READY", "{own}");
    // A user scope of someone else lists nothing of theirs.
    let bob_id = app.ok(Some(&bob), "{ user { id } }", json!({})).await["user"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let theirs = app
        .op::<m::VfolderNodes>(
            Some(&alice),
            m::vfolder_nodes::Variables {
                scope: Some(format!("user:{bob_id}")),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(theirs["data"]["vfolder_nodes"]["count"], 0, "{theirs}");
    // A permission only some folders grant is refused, an unknown word is a clear error.
    let q = "query($p: VFolderPermissionValueField) { vfolder_nodes(permission: $p) { count } }";
    let refused = app
        .gql(Some(&alice), q, json!({"p": "delete_vfolder"}))
        .await;
    assert!(
        message(&refused).contains("not supported by this server"),
        "{refused}"
    );
    let unknown = app.gql(Some(&alice), q, json!({"p": "root"})).await;
    assert!(
        message(&unknown).contains("not a folder permission"),
        "{unknown}"
    );
});

crate::both_dbs!(admin_users_v2_keep_to_the_callers_scope, |db| async move {
    let app = spawn(db).await;
    let user = app.user("v2-user@x.org", "user", "default").await;
    app.create_domain("lab").await;
    let boss = app.user("v2-boss@lab.org", "admin", "lab").await;
    app.user("v2-member@lab.org", "user", "lab").await;
    let q = r#"query($f: UserV2Filter, $o: [UserV2OrderBy!], $l: Int) {
        adminUsersV2(filter: $f, orderBy: $o, limit: $l, offset: 0) {
            count
            edges { node { id basicInfo { email } status { status } organization { domainName role resourcePolicy }
                projects(limit: 10) { count edges { node { id basicInfo { name type } } } }
                timestamps { createdAt } } }
        }
    }"#;
    let emails = |v: &Value| -> Vec<String> {
        v["data"]["adminUsersV2"]["edges"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|e| {
                e["node"]["basicInfo"]["email"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    // A user may not list users.
    let denied = app.gql(Some(&user), q, json!({})).await;
    assert_code(&denied, "FORBIDDEN");
    // A domain admin sees its domain's users only, whatever it filters on.
    let lab = app
        .gql(
            Some(&boss),
            q,
            json!({"f": {"OR": [{"domainName": {"equals": "default"}}, {"email": {"iContains": "X.ORG"}}]},
                   "o": [{"field": "EMAIL", "direction": "ASC"}]}),
        )
        .await;
    assert!(emails(&lab).is_empty(), "{lab}");
    let lab = app
        .gql(
            Some(&boss),
            q,
            json!({"o": [{"field": "EMAIL", "direction": "ASC"}]}),
        )
        .await;
    assert_eq!(
        emails(&lab),
        vec!["v2-boss@lab.org", "v2-member@lab.org"],
        "{lab}"
    );
    // The superadmin: every user, Backend.AI's typed filters and orders.
    let all = app
        .gql(
            Some(&app.admin_token),
            q,
            json!({"f": {"status": {"equals": "ACTIVE"}, "email": {"endsWith": "@x.org"},
                         "NOT": [{"role": {"in": ["SUPERADMIN"]}}]},
                   "o": [{"field": "EMAIL", "direction": "DESC"}]}),
        )
        .await;
    assert_eq!(emails(&all), vec!["v2-user@x.org"], "{all}");
    let node = &all["data"]["adminUsersV2"]["edges"][0]["node"];
    assert_eq!(node["organization"]["role"], "USER", "{node}");
    assert_eq!(node["organization"]["resourcePolicy"], "default", "{node}");
    assert_eq!(
        node["projects"]["edges"][0]["node"]["basicInfo"]["name"], "default",
        "{node}"
    );
    assert_eq!(
        node["projects"]["edges"][0]["node"]["basicInfo"]["type"], "GENERAL",
        "{node}"
    );
    use base64::Engine as _;
    let id = base64::engine::general_purpose::STANDARD
        .decode(node["id"].as_str().unwrap())
        .unwrap();
    assert!(
        String::from_utf8(id).unwrap().starts_with("UserV2:"),
        "{node}"
    );
    // Wildcards are literal; nesting and pages are bounded.
    let literal = app
        .gql(
            Some(&app.admin_token),
            q,
            json!({"f": {"email": {"contains": "%"}}}),
        )
        .await;
    assert!(emails(&literal).is_empty(), "{literal}");
    let mut deep = json!({"email": {"equals": "x"}});
    for _ in 0..10 {
        deep = json!({"AND": [deep]});
    }
    let refused = app.gql(Some(&app.admin_token), q, json!({"f": deep})).await;
    assert_code(&refused, "BAD_REQUEST");
    let refused = app
        .gql(Some(&app.admin_token), q, json!({"l": 100000}))
        .await;
    assert_code(&refused, "BAD_REQUEST");
    let refused = app
        .gql(
            Some(&app.admin_token),
            q,
            json!({"o": [{"field": "PROJECT_NAME", "direction": "ASC"}]}),
        )
        .await;
    assert!(
        message(&refused).contains("not supported by this server"),
        "{refused}"
    );
});

crate::both_dbs!(
    launcher_queries_answer_only_what_the_caller_may_use,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let user = app.user("launch-v2@x.org", "user", "default").await;
        app.create_domain("lab").await;
        let outsider = app.user("outsider-v2@lab.org", "user", "lab").await;
        let project = group_id(&app, &user, "default").await;
        // The launcher's resource groups: the project's for a member, NOT_FOUND for a stranger.
        let groups = app
            .op_ok::<m::AccessibleScalingGroups>(
                Some(&user),
                m::accessible_scaling_groups::Variables {
                    project_id: project.clone(),
                },
            )
            .await;
        assert_eq!(
            groups["accessible_scaling_groups"][0]["name"], "default",
            "{groups}"
        );
        let stranger = app
            .op::<m::AccessibleScalingGroups>(
                Some(&outsider),
                m::accessible_scaling_groups::Variables {
                    project_id: project.clone(),
                },
            )
            .await;
        assert_code(&stranger, "NOT_FOUND");
        // Agents: those of the resource groups the caller may use.
        let q = "{ agent_summary_list(limit: 100, offset: 0) { total_count items { id scaling_group available_slots } } }";
        let all = app.ok(Some(&app.admin_token), q, json!({})).await;
        assert!(
            all["agent_summary_list"]["total_count"].as_u64() >= Some(1),
            "the engine's agent: {all}"
        );
        let mine = app.ok(Some(&user), q, json!({})).await;
        assert_eq!(
            mine["agent_summary_list"]["total_count"], all["agent_summary_list"]["total_count"],
            "{mine}"
        );
        let theirs = app.ok(Some(&outsider), q, json!({})).await;
        assert_eq!(theirs["agent_summary_list"]["total_count"], 0, "{theirs}");
        // Folder limits: the caller's own policy; another's name is NOT_FOUND as a missing one.
        let own = app
            .ok(
                Some(&user),
                "{ user_resource_policy { id name max_vfolder_count } }",
                json!({}),
            )
            .await;
        assert_eq!(own["user_resource_policy"]["name"], "default", "{own}");
        app.ok(
        Some(&app.admin_token),
        r#"mutation { create_keypair_resource_policy(name: "private", props: {default_for_unspecified: "UNLIMITED", total_resource_slots: "{}", max_concurrent_sessions: 1, max_containers_per_session: 1, idle_timeout: 0}) { ok } }"#,
        json!({}),
    )
    .await;
        for name in ["private", "no-such-policy"] {
            let other = app
                .gql(
                    Some(&user),
                    "query($n: String) { user_resource_policy(name: $n) { name } }",
                    json!({"n": name}),
                )
                .await;
            assert_code(&other, "NOT_FOUND");
        }
        let none = app
            .ok(
                Some(&user),
                r#"{ project_resource_policy(name: "default") { name } }"#,
                json!({}),
            )
            .await;
        assert_eq!(none["project_resource_policy"], Value::Null);
        // Presets carry a stable id; GET / names the Backend.AI release bai speaks.
        let q = "{ resource_presets { id name scaling_group_name } }";
        let (a, b) = (
            app.ok(Some(&user), q, json!({})).await,
            app.ok(Some(&user), q, json!({})).await,
        );
        assert_eq!(a, b);
        let v: Value = app
            .http
            .get(app.url("/"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["manager"], "24.12.0", "{v}");
        assert_eq!(v["version"], "v8.20240915", "{v}");
        assert!(v["bai"].is_string(), "{v}");
    }
);

// `POST /session` as Lablup's Web UI 26 sends it: folders by id (`mount_ids`, `mount_id_map`);
// another user's folder id is NOT_FOUND, and what bai does not do (preopened ports, sub-path
// mounts, a hand-picked agent) is refused, never dropped.
crate::both_dbs!(web_ui_session_bodies_are_checked, |db| async move {
    let app = spawn(db).await;
    let alice = app.user("body-a@x.org", "user", "default").await;
    let bob = app.user("body-b@x.org", "user", "default").await;
    let secret = folder(&app, &bob, "bob-private").await;
    let post = |token: String, config: Value| {
        let app = &app;
        async move {
            let resp = app
                .http
                .post(app.url("/session"))
                .header("x-backendai-version", "v8.20240915")
                .bearer_auth(&token)
                .json(&json!({"image": PYTHON, "sessionName": "from-webui", "config": config}))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    for (config, what) in [
        (json!({"preopen_ports": [8080]}), "Preopened ports"),
        (
            json!({"mount_options": {"x": {"subpath": "a"}}}),
            "sub-path",
        ),
        (json!({"agent_list": ["i-agent"]}), "agent"),
        (json!({"mount_ids": "not-a-list"}), "mount_ids"),
        (json!({"mount_id_map": ["x"]}), "mount_id_map"),
    ] {
        let (st, body) = post(alice.clone(), config.clone()).await;
        assert_eq!(st, 400, "{config}: {body}");
        assert!(body.to_string().contains(what), "{config}: {body}");
    }
    require_docker();
    for id in [secret.clone(), uuid::Uuid::new_v4().to_string()] {
        let (st, body) = post(
            alice.clone(),
            json!({"mount_ids": [id], "mount_id_map": {id.clone(): "/home/work/x"}, "preopen_ports": []}),
        )
        .await;
        assert_eq!(st, 404, "{body}");
        assert!(!body.to_string().contains("bob-private"), "{body}");
    }
});

// Backend.AI resolves a global id by its local part whatever type it names: `compute_session_node`
// answers a session's raw id, `ComputeSessionNode:<id>` and the client's own
// `to_global_id("compute_session_node", id)` alike; a stranger gets NOT_FOUND for every form.
crate::both_dbs!(session_node_by_every_global_id_form, |db| async move {
    use base64::Engine as _;
    require_docker();
    let app = spawn(db).await;
    let owner = app.user("gid-owner@x.org", "user", "default").await;
    let nosy = app.user("gid-nosy@x.org", "user", "default").await;
    let id = session_ids(&create_session(&app, &owner, json!({"image": PYTHON})).await)[0].clone();
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    for form in [
        id.clone(),
        b64(format!("ComputeSessionNode:{id}")),
        b64(format!("compute_session_node:{id}")),
    ] {
        let vars = || crate::gql::session_node::Variables { id: form.clone() };
        let got = app
            .op_ok::<crate::gql::SessionNode>(Some(&owner), vars())
            .await;
        assert_eq!(
            got["compute_session_node"]["row_id"],
            json!(id),
            "{form}: {got}"
        );
        let stranger = app.op::<crate::gql::SessionNode>(Some(&nosy), vars()).await;
        assert_code(&stranger, "NOT_FOUND");
    }
    // The session's detail as the 26.x client asks it: its images and each container's.
    let detail = app
        .ok(
            Some(&owner),
            "query($id: GlobalIDField!) { compute_session_node(id: $id) { image_references kernel_nodes { edges { node { row_id image_reference created_at status } } } } }",
            json!({"id": id}),
        )
        .await;
    let node = &detail["compute_session_node"];
    assert_eq!(node["image_references"], json!([PYTHON]), "{detail}");
    let kernel = &node["kernel_nodes"]["edges"][0]["node"];
    assert_eq!(kernel["image_reference"], PYTHON, "{detail}");
    assert!(kernel["created_at"].is_string(), "{detail}");
    destroy(&app, &owner, &id).await;
});
