//! Every admin mutation with good and bad input.
use serde_json::json;

use crate::both_dbs;
use crate::support::*;

both_dbs!(users_and_keypairs, |db| async move {
    let app = spawn(db).await;
    let created = app
        .admin(
            r#"mutation { create_user(email: "New@Lab.org", props: {username: "newbie", password: "Newbie-01", need_password_change: false, domain_name: "default", full_name: "New Bie", role: "user"}) { ok user { email username full_name role is_active main_access_key groups { name } } } }"#,
            json!({}),
        )
        .await;
    let u = &created["create_user"]["user"];
    assert_eq!(u["email"], "new@lab.org");
    assert_eq!(u["groups"][0]["name"], "default");
    let main_key = u["main_access_key"].as_str().unwrap().to_string();
    for (m, code) in [
        (
            r#"mutation { create_user(email: "new@lab.org", props: {username: "x2", password: "Newbie-01", need_password_change: false, domain_name: "default"}) { ok } }"#,
            "CONFLICT",
        ),
        (
            r#"mutation { create_user(email: "x3@lab.org", props: {username: "newbie", password: "Newbie-01", need_password_change: false, domain_name: "default"}) { ok } }"#,
            "CONFLICT",
        ),
        (
            r#"mutation { create_user(email: "not-an-email", props: {username: "x4", password: "Newbie-01", need_password_change: false, domain_name: "default"}) { ok } }"#,
            "BAD_REQUEST",
        ),
        (
            r#"mutation { create_user(email: "x5@lab.org", props: {username: "x5", password: "Newbie-01", need_password_change: false, domain_name: "nowhere"}) { ok } }"#,
            "NOT_FOUND",
        ),
        (
            r#"mutation { create_user(email: "x6@lab.org", props: {username: "x6", password: "Newbie-01", need_password_change: false, domain_name: "default", role: "god"}) { ok } }"#,
            "BAD_REQUEST",
        ),
        (
            r#"mutation { modify_user(email: "ghost@lab.org", props: {full_name: "x"}) { ok } }"#,
            "NOT_FOUND",
        ),
        (
            r#"mutation { modify_user(email: "admin@bai.local", props: {is_active: false}) { ok } }"#,
            "BAD_REQUEST",
        ),
    ] {
        assert_code(&app.gql(Some(&app.admin_token), m, json!({})).await, code);
    }

    // Keypairs: explicit keys, bad keys, policy checks, delete rules.
    let explicit = app
        .admin(
            r#"mutation { create_keypair(user_id: "new@lab.org", props: {resource_policy: "default", rate_limit: 500, access_key: "AKIAEXPLICIT00000001", secret_key: "abcdefghijabcdefghijabcdefghijabcdefghij"}) { keypair { access_key secret_key is_active } } }"#,
            json!({}),
        )
        .await;
    assert_eq!(
        explicit["create_keypair"]["keypair"]["access_key"],
        "AKIAEXPLICIT00000001"
    );
    for (m, code) in [
        (
            r#"mutation { create_keypair(user_id: "new@lab.org", props: {resource_policy: "default", rate_limit: 1, access_key: "short"}) { ok } }"#,
            "BAD_REQUEST",
        ),
        (
            r#"mutation { create_keypair(user_id: "new@lab.org", props: {resource_policy: "nope", rate_limit: 1}) { ok } }"#,
            "NOT_FOUND",
        ),
        (
            r#"mutation { create_keypair(user_id: "new@lab.org", props: {resource_policy: "default", rate_limit: -1}) { ok } }"#,
            "BAD_REQUEST",
        ),
        (
            r#"mutation { create_keypair(user_id: "new@lab.org", props: {resource_policy: "default", rate_limit: 1, access_key: "AKIAEXPLICIT00000001"}) { ok } }"#,
            "CONFLICT",
        ),
        (
            r#"mutation { modify_keypair(access_key: "AKIAEXPLICIT00000001", props: {resource_policy: "nope"}) { ok } }"#,
            "NOT_FOUND",
        ),
    ] {
        assert_code(&app.gql(Some(&app.admin_token), m, json!({})).await, code);
    }
    let modified = app
        .admin(r#"mutation { modify_keypair(access_key: "AKIAEXPLICIT00000001", props: {rate_limit: 2000, is_active: false}) { keypair { rate_limit is_active } } }"#, json!({}))
        .await;
    assert_eq!(
        modified["modify_keypair"]["keypair"],
        json!({"rate_limit": 2000, "is_active": false})
    );
    let inactive = app
        .admin(
            r#"{ keypairs(email: "new@lab.org", is_active: false) { access_key } }"#,
            json!({}),
        )
        .await;
    assert_eq!(
        inactive["keypairs"],
        json!([{"access_key": "AKIAEXPLICIT00000001"}])
    );
    let main_del = app
        .gql(
            Some(&app.admin_token),
            "mutation($a: String!) { delete_keypair(access_key: $a) { ok } }",
            json!({"a": main_key}),
        )
        .await;
    assert_code(&main_del, "CONFLICT");
    app.admin(
        r#"mutation { delete_keypair(access_key: "AKIAEXPLICIT00000001") { ok } }"#,
        json!({}),
    )
    .await;
    assert_code(
        &app.gql(
            Some(&app.admin_token),
            r#"mutation { delete_keypair(access_key: "AKIAEXPLICIT00000001") { ok } }"#,
            json!({}),
        )
        .await,
        "NOT_FOUND",
    );
    let page = app.admin(r#"{ keypair_list(limit: 1, offset: 0, order: "+user_id") { total_count items { user_id } } }"#, json!({})).await;
    assert_eq!(page["keypair_list"]["total_count"], 2);
    assert_eq!(
        page["keypair_list"]["items"][0]["user_id"],
        "admin@bai.local"
    );
    assert_code(
        &app.gql(
            Some(&app.admin_token),
            r#"{ keypair_list(limit: 1000, offset: 0) { total_count } }"#,
            json!({}),
        )
        .await,
        "BAD_REQUEST",
    );
    assert_code(
        &app.gql(
            Some(&app.admin_token),
            r#"{ keypair_list(limit: 1, offset: 0, order: "secret_key") { total_count } }"#,
            json!({}),
        )
        .await,
        "BAD_REQUEST",
    );

    // Deactivation: login refused, keypairs off, hidden from the active list; never deleted.
    app.admin(r#"mutation { modify_user(email: "new@lab.org", props: {is_active: false}) { user { is_active status } } }"#, json!({})).await;
    let login = app
        .gql(
            None,
            r#"mutation { login(email: "new@lab.org", password: "Newbie-01") { token } }"#,
            json!({}),
        )
        .await;
    assert_code(&login, "UNAUTHENTICATED");
    assert!(message(&login).contains("deactivated"), "{login}");
    let active = app
        .admin("{ users(is_active: true) { email } }", json!({}))
        .await;
    assert!(
        !active["users"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["email"] == "new@lab.org")
    );
    let all = app.admin(r#"{ user(email: "new@lab.org") { status } keypairs(email: "new@lab.org") { is_active } }"#, json!({})).await;
    assert_eq!(all["user"]["status"], "inactive");
    assert!(
        all["keypairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["is_active"] == false)
    );
    app.admin(
        r#"mutation { modify_user(email: "new@lab.org", props: {is_active: true}) { ok } }"#,
        json!({}),
    )
    .await;
    app.login("new@lab.org", "Newbie-01").await;
});

both_dbs!(policies_presets_and_settings, |db| async move {
    let app = spawn(db).await;
    let created = app
        .admin(
            r#"mutation { create_keypair_resource_policy(name: "gpu-team", props: {default_for_unspecified: "LIMITED", total_resource_slots: "{\"cpu\": \"Infinity\", \"mem\": \"16g\", \"cuda.shares\": \"2\"}", max_concurrent_sessions: 30, max_containers_per_session: 1, idle_timeout: 600, allowed_vfolder_hosts: "[\"local\"]", max_vfolder_count: 10, max_vfolder_size: 0}) { resource_policy { name total_resource_slots idle_timeout allowed_vfolder_hosts } } }"#,
            json!({}),
        )
        .await;
    let p = &created["create_keypair_resource_policy"]["resource_policy"];
    let slots: serde_json::Value =
        serde_json::from_str(p["total_resource_slots"].as_str().unwrap()).unwrap();
    assert_eq!(
        slots,
        json!({"cpu": "Infinity", "mem": "17179869184", "cuda.shares": "2"})
    );
    assert_eq!(p["idle_timeout"], 600);
    let base = r#"default_for_unspecified: "LIMITED", max_concurrent_sessions: 1, max_containers_per_session: 1, idle_timeout: 0"#;
    for (slots, extra, want) in [
        (r#"{\"tpu\": \"1\"}"#, "", "BAD_REQUEST"),
        (r#"{\"cpu\": \"-2\"}"#, "", "BAD_REQUEST"),
        (r#"{\"mem\": \"lots\"}"#, "", "BAD_REQUEST"),
        (
            r#"{}"#,
            r#", allowed_vfolder_hosts: "{\"local\": [\"fly\"]}""#,
            "BAD_REQUEST",
        ),
        (r#"not json"#, "", "BAD_REQUEST"),
    ] {
        let m = format!(
            r#"mutation {{ create_keypair_resource_policy(name: "bad", props: {{{base}, total_resource_slots: "{slots}"{extra}}}) {{ ok }} }}"#
        );
        let body = app.gql(Some(&app.admin_token), &m, json!({})).await;
        assert!(body["errors"].is_array(), "{m}: {body}");
        let got = code(&body);
        assert!(
            got == want || got == "GRAPHQL_VALIDATION_FAILED",
            "{m}: {body}"
        );
    }
    let neg = app.gql(Some(&app.admin_token), r#"mutation { modify_keypair_resource_policy(name: "gpu-team", props: {max_concurrent_sessions: -1}) { ok } }"#, json!({})).await;
    assert_code(&neg, "BAD_REQUEST");
    let dup = app.gql(Some(&app.admin_token), &format!(r#"mutation {{ create_keypair_resource_policy(name: "gpu-team", props: {{{base}, total_resource_slots: "{{}}"}}) {{ ok }} }}"#), json!({})).await;
    assert_code(&dup, "CONFLICT");
    // A policy in use cannot be deleted; an unused one can.
    app.user("gpu@x.org", "user", "default").await;
    app.admin(r#"mutation { create_keypair(user_id: "gpu@x.org", props: {resource_policy: "gpu-team", rate_limit: 100}) { ok } }"#, json!({})).await;
    let in_use = app
        .gql(
            Some(&app.admin_token),
            r#"mutation { delete_keypair_resource_policy(name: "gpu-team") { ok } }"#,
            json!({}),
        )
        .await;
    assert_code(&in_use, "CONFLICT");
    assert!(message(&in_use).contains("used by 1 keypair"), "{in_use}");
    let in_use_default = app
        .gql(
            Some(&app.admin_token),
            r#"mutation { delete_keypair_resource_policy(name: "default") { ok } }"#,
            json!({}),
        )
        .await;
    assert_code(&in_use_default, "CONFLICT");

    // Presets: seeded table, create/modify/delete, bad input.
    let seeded = app
        .admin(
            "{ resource_presets { name resource_slots shared_memory } }",
            json!({}),
        )
        .await;
    let names: Vec<&str> = seeded["resource_presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "small",
            "small-gpu",
            "medium",
            "medium-gpu",
            "large",
            "large-gpu"
        ]
    );
    let small_gpu: serde_json::Value = serde_json::from_str(
        seeded["resource_presets"][1]["resource_slots"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        small_gpu,
        json!({"cpu": "1", "cuda.shares": "0.3", "mem": "2147483648"})
    );
    app.admin(r#"mutation { create_resource_preset(name: "xl", props: {resource_slots: "{\"cpu\": \"8\", \"mem\": \"32g\"}", shared_memory: "2g"}) { resource_preset { shared_memory } } }"#, json!({})).await;
    for (m, code) in [
        (
            r#"mutation { create_resource_preset(name: "xl", props: {resource_slots: "{\"cpu\": \"8\", \"mem\": \"32g\"}"}) { ok } }"#,
            "CONFLICT",
        ),
        (
            r#"mutation { create_resource_preset(name: "bad", props: {resource_slots: "{\"cpu\": \"1\", \"mem\": \"1g\"}", shared_memory: "1g"}) { ok } }"#,
            "BAD_REQUEST",
        ),
        (
            r#"mutation { create_resource_preset(name: "bad", props: {resource_slots: "{\"cpu\": \"1\"}"}) { ok } }"#,
            "BAD_REQUEST",
        ),
        (
            r#"mutation { create_resource_preset(name: "bad", props: {resource_slots: "{\"gpu\": \"1\", \"cpu\": \"1\", \"mem\": \"1g\"}"}) { ok } }"#,
            "BAD_REQUEST",
        ),
        (
            r#"mutation { create_resource_preset(name: "b a d", props: {resource_slots: "{\"cpu\": \"1\", \"mem\": \"1g\"}"}) { ok } }"#,
            "BAD_REQUEST",
        ),
        (
            r#"mutation { modify_resource_preset(name: "nope", props: {shared_memory: "1g"}) { ok } }"#,
            "NOT_FOUND",
        ),
        (
            r#"mutation { modify_resource_preset(name: "xl", props: {shared_memory: "64g"}) { ok } }"#,
            "BAD_REQUEST",
        ),
    ] {
        assert_code(&app.gql(Some(&app.admin_token), m, json!({})).await, code);
    }
    let modded = app.admin(r#"mutation { modify_resource_preset(name: "xl", props: {shared_memory: "4g"}) { resource_preset { shared_memory } } }"#, json!({})).await;
    assert_eq!(
        modded["modify_resource_preset"]["resource_preset"]["shared_memory"],
        4i64 * 1024 * 1024 * 1024
    );
    app.admin(
        r#"mutation { delete_resource_preset(name: "xl") { ok } }"#,
        json!({}),
    )
    .await;
    assert_code(
        &app.gql(
            Some(&app.admin_token),
            r#"{ resource_preset(name: "xl") { name } }"#,
            json!({}),
        )
        .await,
        "NOT_FOUND",
    );

    // System settings: read-only list + editable announcement.
    let settings = app
        .admin("{ system_settings { key value editable } }", json!({}))
        .await;
    assert!(
        settings["system_settings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["key"] == "auth.signup_enabled" && s["editable"] == false)
    );
    app.admin(r#"mutation { modify_system_setting(key: "announcement", value: "\"Maintenance at 6pm\"") { ok } }"#, json!({})).await;
    let ann: serde_json::Value = app
        .http
        .get(app.url("/manager/announcement"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        ann,
        json!({"enabled": true, "message": "Maintenance at 6pm"})
    );
    assert_code(&app.gql(Some(&app.admin_token), r#"mutation { modify_system_setting(key: "auth.signup_enabled", value: "true") { ok } }"#, json!({})).await, "BAD_REQUEST");
    assert_code(&app.gql(Some(&app.admin_token), r#"mutation { modify_system_setting(key: "scheduler.num_retries_to_skip", value: "\"many\"") { ok } }"#, json!({})).await, "BAD_REQUEST");
});

both_dbs!(
    domains_groups_scaling_groups_registries_images,
    |db| async move {
        let app = spawn(db).await;
        app.admin(r#"mutation { create_domain(name: "lab", props: {description: "Lab", total_resource_slots: "{\"cpu\": \"64\"}"}) { domain { name total_resource_slots } } }"#, json!({})).await;
        assert_code(
            &app.gql(
                Some(&app.admin_token),
                r#"mutation { create_domain(name: "lab", props: {}) { ok } }"#,
                json!({}),
            )
            .await,
            "CONFLICT",
        );
        assert_code(
            &app.gql(
                Some(&app.admin_token),
                r#"mutation { create_domain(name: "bad name", props: {}) { ok } }"#,
                json!({}),
            )
            .await,
            "BAD_REQUEST",
        );
        app.admin(r#"mutation { modify_domain(name: "lab", props: {is_active: false}) { domain { is_active } } }"#, json!({})).await;

        let g = app.admin(r#"mutation { create_group(name: "team-a", props: {domain_name: "default", description: "A"}) { group { id name } } }"#, json!({})).await;
        let gid = g["create_group"]["group"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_code(&app.gql(Some(&app.admin_token), r#"mutation { create_group(name: "team-a", props: {domain_name: "default"}) { ok } }"#, json!({})).await, "CONFLICT");
        app.user("member@x.org", "user", "default").await;
        let uuid = app
            .admin(r#"{ user(email: "member@x.org") { uuid } }"#, json!({}))
            .await["user"]["uuid"]
            .as_str()
            .unwrap()
            .to_string();
        app.admin("mutation($g: UUID!, $u: UUID!) { modify_group(gid: $g, props: {user_update_mode: \"add\", user_uuids: [$u]}) { ok } }", json!({"g": gid, "u": uuid})).await;
        let members = app
            .admin(
                "query($g: UUID!) { users(group_id: $g) { email } }",
                json!({"g": gid}),
            )
            .await;
        assert_eq!(members["users"], json!([{"email": "member@x.org"}]));
        let bad_mode = app.gql(Some(&app.admin_token), "mutation($g: UUID!, $u: UUID!) { modify_group(gid: $g, props: {user_update_mode: \"swap\", user_uuids: [$u]}) { ok } }", json!({"g": gid, "u": uuid})).await;
        assert_code(&bad_mode, "BAD_REQUEST");

        // Resource groups.
        app.admin(r#"mutation { create_scaling_group(name: "gpu-nodes", props: {description: "GPU", driver: "static", scheduler: "drf", scheduler_opts: "{\"pending_timeout\": 60}"}) { scaling_group { name scheduler is_active } } }"#, json!({})).await;
        for (m, code) in [
            (
                r#"mutation { create_scaling_group(name: "x", props: {driver: "static", scheduler: "random"}) { ok } }"#,
                "BAD_REQUEST",
            ),
            (
                r#"mutation { create_scaling_group(name: "x", props: {driver: "k8s", scheduler: "fifo"}) { ok } }"#,
                "BAD_REQUEST",
            ),
            (
                r#"mutation { create_scaling_group(name: "x", props: {driver: "static", scheduler: "fifo", scheduler_opts: "{\"colour\": 1}"}) { ok } }"#,
                "BAD_REQUEST",
            ),
            (
                r#"mutation { create_scaling_group(name: "gpu-nodes", props: {driver: "static", scheduler: "fifo"}) { ok } }"#,
                "CONFLICT",
            ),
            (
                r#"mutation { modify_scaling_group(name: "nope", props: {is_active: false}) { ok } }"#,
                "NOT_FOUND",
            ),
            (
                r#"mutation { associate_scaling_group_with_domain(scaling_group: "gpu-nodes", domain: "nowhere") { ok } }"#,
                "NOT_FOUND",
            ),
        ] {
            assert_code(&app.gql(Some(&app.admin_token), m, json!({})).await, code);
        }
        let member = app.login("member@x.org", USER_PASSWORD).await;
        let before = app
            .ok(Some(&member), "{ scaling_groups { name } }", json!({}))
            .await;
        assert_eq!(before["scaling_groups"], json!([{"name": "default"}]));
        app.admin("mutation($g: UUID!) { associate_scaling_group_with_user_group(scaling_group: \"gpu-nodes\", user_group: $g) { ok } }", json!({"g": gid})).await;
        let after = app
            .ok(Some(&member), "{ scaling_groups { name } }", json!({}))
            .await;
        assert_eq!(
            after["scaling_groups"],
            json!([{"name": "default"}, {"name": "gpu-nodes"}])
        );
        app.admin(r#"mutation { modify_scaling_group(name: "gpu-nodes", props: {is_active: false, scheduler: "lifo"}) { scaling_group { scheduler is_active } } }"#, json!({})).await;
        let inactive = app
            .ok(Some(&member), "{ scaling_groups { name } }", json!({}))
            .await;
        assert_eq!(inactive["scaling_groups"], json!([{"name": "default"}]));
        app.admin(
            r#"mutation { delete_scaling_group(name: "gpu-nodes") { ok } }"#,
            json!({}),
        )
        .await;

        // Registries: URL scheme required, hostname must match, password never returned.
        let r = app
        .admin(r#"mutation { create_container_registry(hostname: "localhost:5000", props: {url: "http://localhost:5000", type: "docker", username: "bob", password: "s3cret"}) { container_registry { hostname url password config { password } } } }"#, json!({}))
        .await;
        assert_eq!(
            r["create_container_registry"]["container_registry"]["password"],
            "*****"
        );
        let listed = app
            .admin(
                "{ container_registries { hostname username password } }",
                json!({}),
            )
            .await;
        assert_eq!(
            listed["container_registries"],
            json!([{"hostname": "localhost:5000", "username": "bob", "password": "*****"}])
        );
        assert!(!listed.to_string().contains("s3cret"));
        for (m, code) in [
            (
                r#"mutation { create_container_registry(hostname: "localhost:7777", props: {url: "localhost:7777", type: "docker"}) { ok } }"#,
                "BAD_REQUEST",
            ),
            (
                r#"mutation { create_container_registry(hostname: "localhost:7777", props: {url: "ftp://localhost:7777", type: "docker"}) { ok } }"#,
                "BAD_REQUEST",
            ),
            (
                r#"mutation { create_container_registry(hostname: "localhost:7777", props: {url: "http://elsewhere:7777", type: "docker"}) { ok } }"#,
                "BAD_REQUEST",
            ),
            (
                r#"mutation { create_container_registry(hostname: "localhost:7777", props: {url: "http://localhost:7777", type: "s3"}) { ok } }"#,
                "BAD_REQUEST",
            ),
            (
                r#"mutation { create_container_registry(hostname: "localhost:5000", props: {url: "http://localhost:5000", type: "docker"}) { ok } }"#,
                "CONFLICT",
            ),
            (
                r#"mutation { delete_container_registry(hostname: "nope:1") { ok } }"#,
                "NOT_FOUND",
            ),
        ] {
            assert_code(&app.gql(Some(&app.admin_token), m, json!({})).await, code);
        }
        app.admin(r#"mutation { modify_container_registry(hostname: "localhost:5000", props: {password: ""}) { container_registry { password } } }"#, json!({})).await;
        app.admin(
            r#"mutation { delete_container_registry(hostname: "localhost:5000") { ok } }"#,
            json!({}),
        )
        .await;

        // Images: the catalog holds the engine's environment images; edits of unknown images are NOT_FOUND.
        let images = app.admin("{ images { name } }", json!({})).await;
        assert!(
            images["images"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["name"].as_str().unwrap().starts_with("bai.local/")),
            "{images}"
        );
        assert_code(&app.gql(Some(&app.admin_token), r#"mutation { modify_image(target: "cr.local/x/python:3", props: {resource_limits: [{key: "cpu", min: "1"}]}) { ok } }"#, json!({})).await, "NOT_FOUND");
        assert_code(&app.gql(Some(&app.admin_token), r#"mutation { alias_image(alias: "python", target: "cr.local/x/python:3") { ok } }"#, json!({})).await, "NOT_FOUND");
    }
);

both_dbs!(
    keypair_used_by_a_session_cannot_be_deleted,
    |db| async move {
        let app = spawn(db).await;
        app.user("owner@x.org", "user", "default").await;
        let info = app
            .admin(
                r#"{ user(email: "owner@x.org") { uuid groups { id } } }"#,
                json!({}),
            )
            .await;
        let user: uuid::Uuid = info["user"]["uuid"].as_str().unwrap().parse().unwrap();
        let group: uuid::Uuid = info["user"]["groups"][0]["id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let kp = app.admin(r#"mutation { create_keypair(user_id: "owner@x.org", props: {resource_policy: "default", rate_limit: 100}) { keypair { access_key } } }"#, json!({})).await;
        let ak = kp["create_keypair"]["keypair"]["access_key"]
            .as_str()
            .unwrap()
            .to_string();
        insert_session(&app, &ak, user, group).await;
        let refused = app
            .gql(
                Some(&app.admin_token),
                "mutation($a: String!) { delete_keypair(access_key: $a) { ok } }",
                json!({"a": ak}),
            )
            .await;
        assert_code(&refused, "CONFLICT");
        assert!(
            message(&refused).contains("1 compute session(s)"),
            "{refused}"
        );
        // Still there, and deactivation remains possible.
        app.admin("mutation($a: String!) { modify_keypair(access_key: $a, props: {is_active: false}) { ok } }", json!({"a": ak})).await;
        let still = app
            .admin(
                "query($a: String!) { keypair(access_key: $a) { is_active } }",
                json!({"a": ak}),
            )
            .await;
        assert_eq!(still["keypair"]["is_active"], false);
    }
);
