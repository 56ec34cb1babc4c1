//! Role boundaries: user vs domain admin vs superadmin, across domains. Objects a caller may
//! not see are NOT_FOUND, operations beyond a role are FORBIDDEN.
use serde_json::json;

use crate::both_dbs;
use crate::support::*;

both_dbs!(users_see_only_their_own_things, |db| async move {
    let app = spawn(db).await;
    let alice = app.user("alice@x.org", "user", "default").await;
    let bob = app.user("bob@x.org", "user", "default").await;
    let bob_key = app
        .ok(Some(&bob), "{ keypair { access_key } }", json!({}))
        .await["keypair"]["access_key"]
        .as_str()
        .unwrap()
        .to_string();

    let me = app.ok(Some(&alice), "{ user { email } }", json!({})).await;
    assert_eq!(me["user"]["email"], "alice@x.org");
    assert_code(
        &app.gql(
            Some(&alice),
            r#"{ user(email: "bob@x.org") { email } }"#,
            json!({}),
        )
        .await,
        "NOT_FOUND",
    );
    assert_code(
        &app.gql(
            Some(&alice),
            r#"{ user(email: "nobody@x.org") { email } }"#,
            json!({}),
        )
        .await,
        "NOT_FOUND",
    );
    assert_code(
        &app.gql(
            Some(&alice),
            "query($a: String!) { keypair(access_key: $a) { access_key } }",
            json!({"a": bob_key}),
        )
        .await,
        "NOT_FOUND",
    );
    let keys = app
        .ok(Some(&alice), "{ keypairs { user_id } }", json!({}))
        .await;
    assert!(
        keys["keypairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["user_id"] == "alice@x.org"),
        "{keys}"
    );

    for q in [
        "{ users { email } }",
        "{ user_list(limit: 10, offset: 0) { total_count } }",
        "{ container_registries { hostname } }",
        "{ system_settings { key } }",
    ] {
        assert_code(&app.gql(Some(&alice), q, json!({})).await, "FORBIDDEN");
    }
    for m in [
        r#"mutation { create_user(email: "c@x.org", props: {username: "c", password: "Abcdef-12", need_password_change: false, domain_name: "default"}) { ok } }"#,
        r#"mutation { create_resource_preset(name: "p", props: {resource_slots: "{\"cpu\":\"1\",\"mem\":\"1g\"}"}) { ok } }"#,
        r#"mutation { create_domain(name: "d2", props: {}) { ok } }"#,
        r#"mutation { modify_user(email: "bob@x.org", props: {full_name: "x"}) { ok } }"#,
        r#"mutation { create_scaling_group(name: "sg", props: {driver: "static", scheduler: "fifo"}) { ok } }"#,
    ] {
        assert_code(&app.gql(Some(&alice), m, json!({})).await, "FORBIDDEN");
    }
    // Users read presets and the resource groups allowed to them.
    let presets = app
        .ok(Some(&alice), "{ resource_presets { name } }", json!({}))
        .await;
    assert_eq!(presets["resource_presets"].as_array().unwrap().len(), 6);
    let sgs = app
        .ok(Some(&alice), "{ scaling_groups { name } }", json!({}))
        .await;
    assert_eq!(sgs["scaling_groups"], json!([{"name": "default"}]));
    let groups = app
        .ok(
            Some(&alice),
            "{ groups { name } domain { name } }",
            json!({}),
        )
        .await;
    assert_eq!(groups["groups"], json!([{"name": "default"}]));
    assert_code(
        &app.gql(
            Some(&alice),
            r#"{ domain(name: "other") { name } }"#,
            json!({}),
        )
        .await,
        "NOT_FOUND",
    );
});

both_dbs!(
    domain_admins_are_confined_to_their_domain,
    |db| async move {
        let app = spawn(db).await;
        app.create_domain("lab").await;
        let lab_admin = app.user("boss@lab.org", "admin", "lab").await;
        app.user("worker@lab.org", "user", "lab").await;
        app.user("outsider@x.org", "user", "default").await;

        let users = app
            .ok(
                Some(&lab_admin),
                "{ users { email domain_name } }",
                json!({}),
            )
            .await;
        let emails: Vec<&str> = users["users"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["email"].as_str().unwrap())
            .collect();
        assert_eq!(emails.len(), 2, "{users}");
        assert!(emails.contains(&"worker@lab.org") && emails.contains(&"boss@lab.org"));
        let list = app.ok(Some(&lab_admin), r#"{ user_list(limit: 10, offset: 0, order: "-email") { total_count items { email } } }"#, json!({})).await;
        assert_eq!(list["user_list"]["total_count"], 2);
        assert_eq!(list["user_list"]["items"][0]["email"], "worker@lab.org");

        assert_code(
            &app.gql(
                Some(&lab_admin),
                r#"{ user(email: "outsider@x.org") { email } }"#,
                json!({}),
            )
            .await,
            "NOT_FOUND",
        );
        assert_code(
        &app.gql(Some(&lab_admin), r#"mutation { modify_user(email: "outsider@x.org", props: {full_name: "x"}) { ok } }"#, json!({})).await,
        "NOT_FOUND",
    );
        let renamed = app.ok(Some(&lab_admin), r#"mutation { modify_user(email: "worker@lab.org", props: {full_name: "Worker"}) { user { full_name } } }"#, json!({})).await;
        assert_eq!(renamed["modify_user"]["user"]["full_name"], "Worker");
        assert_code(
        &app.gql(Some(&lab_admin), r#"mutation { modify_user(email: "worker@lab.org", props: {role: "superadmin"}) { ok } }"#, json!({})).await,
        "FORBIDDEN",
    );
        assert_code(
        &app.gql(Some(&lab_admin), r#"mutation { modify_user(email: "worker@lab.org", props: {is_active: false}) { ok } }"#, json!({})).await,
        "FORBIDDEN",
    );
        // Groups: create in own domain, not in another.
        app.ok(
            Some(&lab_admin),
            r#"mutation { create_group(name: "team", props: {domain_name: "lab"}) { ok } }"#,
            json!({}),
        )
        .await;
        assert_code(
        &app.gql(Some(&lab_admin), r#"mutation { create_group(name: "team", props: {domain_name: "default"}) { ok } }"#, json!({})).await,
        "NOT_FOUND",
    );
        let groups = app
            .ok(
                Some(&lab_admin),
                "{ groups { name domain_name } }",
                json!({}),
            )
            .await;
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .all(|g| g["domain_name"] == "lab"),
            "{groups}"
        );
        let keys = app
            .ok(
                Some(&lab_admin),
                "{ keypairs { user_id secret_key } }",
                json!({}),
            )
            .await;
        for k in keys["keypairs"].as_array().unwrap() {
            assert!(k["user_id"].as_str().unwrap().ends_with("@lab.org"));
            if k["user_id"] != "boss@lab.org" {
                assert!(
                    k["secret_key"].is_null(),
                    "domain admins do not see others' secret keys"
                );
            }
        }
        assert_code(
            &app.gql(
                Some(&lab_admin),
                "{ container_registries { hostname } }",
                json!({}),
            )
            .await,
            "FORBIDDEN",
        );
        assert_code(
        &app.gql(Some(&lab_admin), r#"mutation { create_resource_preset(name: "p", props: {resource_slots: "{\"cpu\":\"1\",\"mem\":\"1g\"}"}) { ok } }"#, json!({})).await,
        "FORBIDDEN",
    );
        // Superadmin sees every domain.
        let all = app
            .admin("{ users { email } domains { name } }", json!({}))
            .await;
        assert_eq!(all["users"].as_array().unwrap().len(), 4);
        assert_eq!(all["domains"].as_array().unwrap().len(), 2);
    }
);
