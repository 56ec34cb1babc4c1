//! The server's surfaces: version document, GraphQL limits, the `/admin/gql` path,
//! subscriptions over graphql-transport-ws, and image edits on a catalog entry.
use futures_util::{SinkExt, StreamExt};
use graphql_client::GraphQLQuery;
use sea_orm::{ActiveModelTrait, Set};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::*;
use crate::{both_dbs, gql};

both_dbs!(version_document_and_paths, |db| async move {
    let app = spawn(db).await;
    let v: Value = app
        .http
        .get(app.url("/"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["version"], "v8.20240915");
    assert!(v["manager"].is_string());
    let via_admin: Value = app
        .http
        .post(app.url("/admin/gql"))
        .bearer_auth(&app.admin_token)
        .json(&gql::live::KeypairIsAdmin::build_query(Default::default()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(via_admin["data"]["keypair"]["is_admin"], true);
    let graphiql = app
        .http
        .get(app.url("/graphql"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(graphiql.to_lowercase().contains("graphiql"));
    let ann: Value = app
        .http
        .get(app.url("/manager/announcement"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ann, json!({"enabled": false, "message": ""}));
});

// Every request here is wrong on purpose (what the schema or the limits refuse), so they stay
// inline text: a syntax error, an unknown field, an alias bomb, a depth bomb, an oversized body.
both_dbs!(graphql_limits_and_error_codes, |db| async move {
    let app = spawn(db).await;
    let syntax = app
        .gql(Some(&app.admin_token), "{ users { email ", json!({}))
        .await;
    assert_code(&syntax, "GRAPHQL_VALIDATION_FAILED");
    let unknown = app
        .gql(Some(&app.admin_token), "{ no_such_field }", json!({}))
        .await;
    assert_code(&unknown, "GRAPHQL_VALIDATION_FAILED");
    let aliases: String = (0..40)
        .map(|i| format!("a{i}: resource_presets {{ name }} "))
        .collect();
    let too_many = app
        .gql(
            Some(&app.admin_token),
            &format!("{{ {aliases} }}"),
            json!({}),
        )
        .await;
    assert_code(&too_many, "BAD_REQUEST");
    assert!(message(&too_many).contains("aliases"), "{too_many}");
    let mut nested = String::from("name");
    for _ in 0..20 {
        nested = format!("ofType {{ {nested} }}");
    }
    let deep = format!("{{ __schema {{ types {{ fields {{ type {{ {nested} }} }} }} }} }}");
    let deep_body = app.gql(Some(&app.admin_token), &deep, json!({})).await;
    assert_code(&deep_body, "GRAPHQL_VALIDATION_FAILED");
    assert!(message(&deep_body).contains("deep"), "{deep_body}");
    let huge = "x".repeat(2 * 1024 * 1024);
    let resp = app
        .http
        .post(app.url("/graphql"))
        .header("content-type", "application/json")
        .body(json!({"query": huge}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
});

both_dbs!(subscription_receives_preset_changes, |db| async move {
    let app = spawn(db).await;
    let user = app.user("watcher@x.org", "user", "default").await;
    // Each returns once the server listens on the event bus for it.
    let mut presets =
        subscribe_op::<gql::live::PresetChanges>(&app, &user, Default::default()).await;
    let mut users =
        subscribe_op::<gql::UserChanges>(&app, &app.admin_token, Default::default()).await;
    app.admin_op::<gql::CreatePreset>(gql::create_preset::Variables {
        name: "live".into(),
        props: gql::create_preset::CreateResourcePresetInput {
            resource_slots: json!("{\"cpu\": \"1\", \"mem\": \"1g\"}"),
            ..Default::default()
        },
    })
    .await;
    let ev = next_json(&mut presets).await;
    assert_eq!(ev["type"], "next", "{ev}");
    assert_eq!(
        ev["payload"]["data"]["resource_preset_changes"],
        json!({"kind": "resource_preset", "action": "created", "key": "live"})
    );
    app.admin_op::<gql::DeletePreset>(gql::delete_preset::Variables {
        name: "live".into(),
    })
    .await;
    let ev = next_json(&mut presets).await;
    assert_eq!(
        ev["payload"]["data"]["resource_preset_changes"]["action"],
        "deleted"
    );
    app.user("second@x.org", "user", "default").await;
    let ev = next_json(&mut users).await;
    assert_eq!(
        ev["payload"]["data"]["user_changes"],
        json!({"action": "created", "key": "second@x.org"})
    );

    // A plain user may not watch users.
    // Refused, it never listens on the bus: the answer is what is waited for.
    let mut denied = subscribe_op_sent::<gql::UserChanges>(&app, &user, Default::default()).await;
    let ev = next_json(&mut denied).await;
    // async-graphql reports a refused subscription as one `next` carrying the error.
    assert_eq!(ev["type"], "next", "{ev}");
    assert_eq!(ev["payload"]["data"], serde_json::Value::Null, "{ev}");
    assert_eq!(
        ev["payload"]["errors"][0]["extensions"]["code"], "FORBIDDEN",
        "{ev}"
    );
    // A bad token is refused at connection_init.
    let mut req = app
        .url("/graphql/ws")
        .replace("http://", "ws://")
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "sec-websocket-protocol",
        "graphql-transport-ws".parse().unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws.send(Message::text(
        json!({"type": "connection_init", "payload": {"token": "bogus"}}).to_string(),
    ))
    .await
    .unwrap();
    let closed = tokio::time::timeout(std::time::Duration::from_secs(5), ws.next())
        .await
        .unwrap();
    assert!(
        !matches!(closed, Some(Ok(Message::Text(ref t))) if t.as_str().contains("connection_ack")),
        "{closed:?}"
    );
});

both_dbs!(image_minimums_and_aliases, |db| async move {
    let app = spawn(db).await;
    let state = &app.server.as_ref().unwrap().state;
    entity::images::ActiveModel {
        id: Set(uuid::Uuid::new_v4()),
        name: Set("cr.local/stable/python:3.11-bookworm".into()),
        image: Set("stable/python".into()),
        tag: Set("3.11-bookworm".into()),
        registry: Set("cr.local".into()),
        architecture: Set("x86_64".into()),
        config_digest: Set("sha256:abc".into()),
        size_bytes: Set(123),
        is_local: Set(true),
        image_type: Set(entity::enums::ImageType::Compute),
        accelerators: Set(None),
        labels: Set(json!({"ai.backend.base-distro": "debian12"})),
        resources: Set(
            json!({"cpu": {"min": "1", "max": null}, "mem": {"min": "1073741824", "max": null}}),
        ),
        created_at: Set(chrono::Utc::now()),
        installed_agents: Set(vec!["local".to_string()].into()),
        owner_id: Set(None),
    }
    .insert(&state.db)
    .await
    .unwrap();
    let r = "cr.local/stable/python:3.11-bookworm";
    let limits = |limits: &[(&str, Option<&str>, Option<&str>)]| {
        use gql::modify_image::{ModifyImageInput, ResourceLimitInput, Variables};
        Variables {
            target: r.into(),
            props: ModifyImageInput {
                resource_limits: Some(
                    limits
                        .iter()
                        .map(|(key, min, max)| ResourceLimitInput {
                            key: key.to_string(),
                            min: min.map(str::to_string),
                            max: max.map(str::to_string),
                        })
                        .collect(),
                ),
            },
        }
    };
    let alias = || gql::alias_image::Variables {
        alias: "py-live".into(),
        target: r.into(),
    };
    app.admin_op::<gql::ModifyImage>(limits(&[("mem", Some("256m"), None)]))
        .await;
    app.admin_op::<gql::AliasImage>(alias()).await;
    let user = app.user("img@x.org", "user", "default").await;
    let img = app
        .op_ok::<gql::Image>(
            Some(&user),
            gql::image::Variables {
                reference: "py-live".into(),
            },
        )
        .await;
    let i = &img["image"];
    assert_eq!(i["base_distro"], "debian12");
    // Backend.AI 24.12's `namespace` is the repository path, as `name` was.
    assert_eq!(i["namespace"], "stable/python", "{i}");
    assert_eq!(i["base_image_name"], "python", "{i}");
    assert_eq!(i["installed"], true);
    assert_eq!(i["aliases"], json!(["py-live"]));
    assert!(
        i["resource_limits"]
            .as_array()
            .unwrap()
            .contains(&json!({"key": "mem", "min": "268435456", "max": "Infinity"})),
        "{i}"
    );
    assert_code(
        &app.op::<gql::ModifyImage>(
            Some(&user),
            gql::modify_image::Variables {
                target: r.into(),
                props: Default::default(),
            },
        )
        .await,
        "FORBIDDEN",
    );
    assert_code(
        &app.op::<gql::AliasImage>(Some(&app.admin_token), alias())
            .await,
        "CONFLICT",
    );
    assert_code(
        &app.op::<gql::ModifyImage>(
            Some(&app.admin_token),
            limits(&[("cpu", Some("4"), Some("2"))]),
        )
        .await,
        "BAD_REQUEST",
    );
    app.admin_op::<gql::live::DealiasImage>(gql::live::dealias_image::Variables {
        alias: "py-live".into(),
    })
    .await;
    app.admin_op::<gql::live::ForgetImage>(gql::live::forget_image::Variables {
        reference: r.into(),
    })
    .await;
    let left = app.admin_op::<gql::Images>(Default::default()).await;
    assert!(
        !left["images"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"].as_str().unwrap().contains(r)),
        "{left}"
    );
});

// A list's usage column on one subscription: a stranger's session among the caller's own is
// NOT_FOUND (and a missing one answers the same), more than a page of sessions is refused
// before anything is looked up, and the caller's own ended session ends the stream.
both_dbs!(
    sessions_stats_is_one_subscription_for_a_page_of_own_sessions,
    |db| async move {
        let app = spawn(db).await;
        let alice = app.user("stats-alice@x.org", "user", "default").await;
        let bob = app.user("stats-bob@x.org", "user", "default").await;
        let project: uuid::Uuid = group_id(&app, &app.admin_token, "default")
            .await
            .parse()
            .unwrap();
        let mut own = Vec::new();
        for token in [&alice, &bob] {
            let user: uuid::Uuid = crate::statistics::uuid_of(&app, token)
                .await
                .parse()
                .unwrap();
            let ak = app.access_key(token).await;
            own.push(insert_session(&app, &ak, user, project).await.to_string());
        }
        let (alices, bobs) = (own[0].clone(), own[1].clone());
        let answer = |token: String, ids: Vec<String>| {
            let app = &app;
            async move {
                let mut ws = subscribe_op_sent::<gql::SessionsStats>(
                    app,
                    &token,
                    gql::sessions_stats::Variables {
                        session_ids: ids,
                        interval_secs: Some(1),
                    },
                )
                .await;
                next_json(&mut ws).await
            }
        };
        // A stranger's session and a missing one get the same answer (naming only the id asked).
        let missing = uuid::Uuid::new_v4().to_string();
        for other in [bobs.clone(), missing] {
            let refused = answer(alice.clone(), vec![alices.clone(), other.clone()]).await;
            assert_eq!(
                refused["payload"]["errors"][0]["extensions"]["code"], "NOT_FOUND",
                "{refused}"
            );
            assert_eq!(
                refused["payload"]["errors"][0]["message"],
                format!("session '{other}' not found"),
                "{refused}"
            );
        }
        let many: Vec<String> = (0..101).map(|_| uuid::Uuid::new_v4().to_string()).collect();
        let refused = answer(alice.clone(), many).await;
        assert_eq!(
            refused["payload"]["errors"][0]["extensions"]["code"], "BAD_REQUEST",
            "{refused}"
        );
        assert!(
            refused["payload"]["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("At most 100 sessions"),
            "{refused}"
        );
        // Her own session has ended: nothing to measure, the stream ends.
        let ended = answer(alice.clone(), vec![alices.clone()]).await;
        assert_eq!(ended["type"], "complete", "{ended}");
        // The superadmin sees both: one subscription for the two rows.
        let both = answer(app.admin_token.clone(), vec![alices, bobs]).await;
        assert_eq!(both["type"], "complete", "{both}");
    }
);

// The console's own session-list document over 1,000 sessions of three owners: each page asks
// the database once per related table (owners' e-mails, projects' names), never once per row
// (counted by the server's statement log, as `/metrics` shows it).
both_dbs!(
    a_page_of_sessions_costs_one_query_per_related_table,
    |db| async move {
        use sea_orm::EntityTrait;
        let app = spawn(db).await;
        let project: uuid::Uuid = group_id(&app, &app.admin_token, "default")
            .await
            .parse()
            .unwrap();
        let mut owners = Vec::new();
        for token in [
            app.admin_token.clone(),
            app.user("page-a@x.org", "user", "default").await,
            app.user("page-b@x.org", "user", "default").await,
        ] {
            let user: uuid::Uuid = crate::statistics::uuid_of(&app, &token)
                .await
                .parse()
                .unwrap();
            owners.push((app.access_key(&token).await, user));
        }
        let rows: Vec<_> = (0..1000)
            .map(|i| {
                let (ak, user) = &owners[i % owners.len()];
                ended_session(ak, *user, project)
            })
            .collect();
        for chunk in rows.chunks(100) {
            entity::sessions::Entity::insert_many(chunk.to_vec())
                .exec(&app.state().db)
                .await
                .unwrap();
        }
        let document = include_str!("../../../web/graphql/sessions/session_list.graphql");
        let page = || async {
            app.ok(
                Some(&app.admin_token),
                document,
                json!({"status": "TERMINATED,CANCELLED"}),
            )
            .await
        };
        // Once to warm what is cached (the login, the count).
        page().await;
        let before = app.state().local.statements.snapshot();
        for _ in 0..3 {
            let d = page().await;
            let items = d["compute_session_list"]["items"].as_array().unwrap();
            assert_eq!(items.len(), 100);
            assert_eq!(d["compute_session_list"]["total_count"], 1000);
            assert!(
                items
                    .iter()
                    .all(|r| r["user_email"].is_string() && r["group_name"] == "default"),
                "{d}"
            );
        }
        let after = app.state().local.statements.snapshot();
        let ran = |table: &str| {
            after.get(table).copied().unwrap_or(0) - before.get(table).copied().unwrap_or(0)
        };
        assert_eq!(
            ran("users"),
            3,
            "one query per page for the owners: {after:?}"
        );
        assert_eq!(
            ran("groups"),
            3,
            "one query per page for the projects: {after:?}"
        );
        assert_eq!(ran("kernels"), 0, "the list reads no kernel: {after:?}");
    }
);
