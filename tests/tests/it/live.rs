//! The server's surfaces: version document, GraphQL limits, the `/admin/gql` path,
//! subscriptions over graphql-transport-ws, and image edits on a catalog entry.
use futures_util::{SinkExt, StreamExt};
use sea_orm::{ActiveModelTrait, Set};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::both_dbs;
use crate::support::*;

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
        .json(&json!({"query": "{ keypair { access_key is_admin } }"}))
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
    let mut presets = subscribe_ws(
        &app,
        &user,
        "subscription { resource_preset_changes { kind action key } }",
        json!({}),
    )
    .await;
    let mut users = subscribe_ws(
        &app,
        &app.admin_token,
        "subscription { user_changes { action key } }",
        json!({}),
    )
    .await;
    // Give the server a moment to register the subscriptions.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    app.admin(r#"mutation { create_resource_preset(name: "live", props: {resource_slots: "{\"cpu\": \"1\", \"mem\": \"1g\"}"}) { ok } }"#, json!({})).await;
    let ev = next_json(&mut presets).await;
    assert_eq!(ev["type"], "next", "{ev}");
    assert_eq!(
        ev["payload"]["data"]["resource_preset_changes"],
        json!({"kind": "resource_preset", "action": "created", "key": "live"})
    );
    app.admin(
        r#"mutation { delete_resource_preset(name: "live") { ok } }"#,
        json!({}),
    )
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
    let mut denied = subscribe_ws(
        &app,
        &user,
        "subscription { user_changes { key } }",
        json!({}),
    )
    .await;
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
    }
    .insert(&state.db)
    .await
    .unwrap();
    let r = "cr.local/stable/python:3.11-bookworm";
    app.admin(&format!(r#"mutation {{ modify_image(target: "{r}", props: {{resource_limits: [{{key: "mem", min: "256m"}}]}}) {{ ok }} }}"#), json!({})).await;
    app.admin(
        &format!(r#"mutation {{ alias_image(alias: "python", target: "{r}") {{ ok }} }}"#),
        json!({}),
    )
    .await;
    let user = app.user("img@x.org", "user", "default").await;
    let img = app.ok(Some(&user), r#"{ image(reference: "python") { name namespace base_image_name base_distro installed aliases resource_limits { key min max } } }"#, json!({})).await;
    let i = &img["image"];
    assert_eq!(i["base_distro"], "debian12");
    assert_eq!(i["namespace"], "stable");
    assert_eq!(i["installed"], true);
    assert_eq!(i["aliases"], json!(["python"]));
    assert!(
        i["resource_limits"]
            .as_array()
            .unwrap()
            .contains(&json!({"key": "mem", "min": "268435456", "max": null})),
        "{i}"
    );
    assert_code(
        &app.gql(
            Some(&user),
            &format!(r#"mutation {{ modify_image(target: "{r}", props: {{}}) {{ ok }} }}"#),
            json!({}),
        )
        .await,
        "FORBIDDEN",
    );
    assert_code(
        &app.gql(
            Some(&app.admin_token),
            &format!(r#"mutation {{ alias_image(alias: "python", target: "{r}") {{ ok }} }}"#),
            json!({}),
        )
        .await,
        "CONFLICT",
    );
    assert_code(&app.gql(Some(&app.admin_token), &format!(r#"mutation {{ modify_image(target: "{r}", props: {{resource_limits: [{{key: "cpu", min: "4", max: "2"}}]}}) {{ ok }} }}"#), json!({})).await, "BAD_REQUEST");
    app.admin(
        r#"mutation { dealias_image(alias: "python") { ok } }"#,
        json!({}),
    )
    .await;
    app.admin(
        &format!(r#"mutation {{ forget_image(reference: "{r}") {{ ok }} }}"#),
        json!({}),
    )
    .await;
    let left = app.admin("{ images { name } }", json!({})).await;
    assert!(!left.to_string().contains(r), "{left}");
});
