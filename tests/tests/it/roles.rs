//! Role boundaries: user vs domain admin vs superadmin, across domains. Objects a caller may
//! not see are NOT_FOUND, operations beyond a role are FORBIDDEN.
use serde_json::json;

use crate::both_dbs;
use crate::gql;
use crate::support::*;

/// `modify_user(email, props)` as `token`: the whole answer.
async fn modify_user(
    app: &TestApp,
    token: &str,
    email: &str,
    props: gql::modify_user::ModifyUserInput,
) -> serde_json::Value {
    app.op::<gql::ModifyUser>(
        Some(token),
        gql::modify_user::Variables {
            email: email.into(),
            props,
        },
    )
    .await
}

/// `user(email)` as `token`: the whole answer.
async fn user_by_email(app: &TestApp, token: &str, email: &str) -> serde_json::Value {
    app.op::<gql::roles::UserEmail>(
        Some(token),
        gql::roles::user_email::Variables {
            email: Some(email.into()),
        },
    )
    .await
}

/// The preset every non-superadmin is refused.
fn preset_props() -> gql::create_preset::CreateResourcePresetInput {
    gql::create_preset::CreateResourcePresetInput {
        resource_slots: json!("{\"cpu\":\"1\",\"mem\":\"1g\"}"),
        ..Default::default()
    }
}

both_dbs!(users_see_only_their_own_things, |db| async move {
    let app = spawn(db).await;
    let alice = app.user("alice@x.org", "user", "default").await;
    let bob = app.user("bob@x.org", "user", "default").await;
    let bob_key = app.access_key(&bob).await;

    let me = app
        .op_ok::<gql::roles::UserEmail>(Some(&alice), Default::default())
        .await;
    assert_eq!(me["user"]["email"], "alice@x.org");
    assert_code(&user_by_email(&app, &alice, "bob@x.org").await, "NOT_FOUND");
    assert_code(
        &user_by_email(&app, &alice, "nobody@x.org").await,
        "NOT_FOUND",
    );
    assert_code(
        &app.op::<gql::roles::KeypairByKey>(
            Some(&alice),
            gql::roles::keypair_by_key::Variables {
                access_key: bob_key,
            },
        )
        .await,
        "NOT_FOUND",
    );
    let keys = app
        .op_ok::<gql::roles::KeypairUserIds>(Some(&alice), Default::default())
        .await;
    assert!(
        keys["keypairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["user_id"] == "alice@x.org"),
        "{keys}"
    );

    // Administrators' reads: each refused.
    for body in [
        app.op::<gql::Users>(Some(&alice), Default::default()).await,
        app.op::<gql::UserList>(
            Some(&alice),
            gql::user_list::Variables {
                limit: 10,
                offset: 0,
                ..Default::default()
            },
        )
        .await,
        app.op::<gql::ContainerRegistries>(Some(&alice), Default::default())
            .await,
        app.op::<gql::SystemSettings>(Some(&alice), Default::default())
            .await,
    ] {
        assert_code(&body, "FORBIDDEN");
    }
    // Administrators' changes: each refused.
    for body in [
        app.op::<gql::CreateUser>(
            Some(&alice),
            gql::create_user::Variables {
                email: "c@x.org".into(),
                props: gql::create_user::UserInput {
                    username: "c".into(),
                    password: "Abcdef-12".into(),
                    need_password_change: false,
                    domain_name: "default".into(),
                    ..Default::default()
                },
            },
        )
        .await,
        app.op::<gql::CreatePreset>(
            Some(&alice),
            gql::create_preset::Variables {
                name: "p".into(),
                props: preset_props(),
            },
        )
        .await,
        app.op::<gql::CreateDomain>(
            Some(&alice),
            gql::create_domain::Variables { name: "d2".into() },
        )
        .await,
        modify_user(
            &app,
            &alice,
            "bob@x.org",
            gql::modify_user::ModifyUserInput {
                full_name: Some("x".into()),
                ..Default::default()
            },
        )
        .await,
        app.op::<gql::CreateScalingGroup>(
            Some(&alice),
            gql::create_scaling_group::Variables {
                name: "sg".into(),
                props: gql::create_scaling_group::CreateScalingGroupInput {
                    driver: "static".into(),
                    scheduler: "fifo".into(),
                    ..Default::default()
                },
            },
        )
        .await,
    ] {
        assert_code(&body, "FORBIDDEN");
    }
    // Users read presets and the resource groups allowed to them.
    let presets = app
        .op_ok::<gql::ResourcePresets>(Some(&alice), Default::default())
        .await;
    assert_eq!(presets["resource_presets"].as_array().unwrap().len(), 6);
    let sgs = app
        .op_ok::<gql::ScalingGroups>(Some(&alice), Default::default())
        .await;
    assert_eq!(sgs["scaling_groups"], json!([{"name": "default"}]));
    let groups = app
        .op_ok::<gql::roles::GroupsAndDomain>(Some(&alice), Default::default())
        .await;
    assert_eq!(groups["groups"], json!([{"name": "default"}]));
    assert_code(
        &app.op::<gql::DomainName>(
            Some(&alice),
            gql::domain_name::Variables {
                name: Some("other".into()),
            },
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
            .op_ok::<gql::roles::UsersWithDomain>(Some(&lab_admin), Default::default())
            .await;
        let emails: Vec<&str> = users["users"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["email"].as_str().unwrap())
            .collect();
        assert_eq!(emails.len(), 2, "{users}");
        assert!(emails.contains(&"worker@lab.org") && emails.contains(&"boss@lab.org"));
        let list = app
            .op_ok::<gql::UserList>(
                Some(&lab_admin),
                gql::user_list::Variables {
                    limit: 10,
                    offset: 0,
                    order: Some("-email".into()),
                    ..Default::default()
                },
            )
            .await;
        assert_eq!(list["user_list"]["total_count"], 2);
        assert_eq!(list["user_list"]["items"][0]["email"], "worker@lab.org");

        assert_code(
            &user_by_email(&app, &lab_admin, "outsider@x.org").await,
            "NOT_FOUND",
        );
        let full_name = |name: &str| gql::modify_user::ModifyUserInput {
            full_name: Some(name.into()),
            ..Default::default()
        };
        assert_code(
            &modify_user(&app, &lab_admin, "outsider@x.org", full_name("x")).await,
            "NOT_FOUND",
        );
        let renamed = app
            .op_ok::<gql::roles::ModifyUserFullName>(
                Some(&lab_admin),
                gql::roles::modify_user_full_name::Variables {
                    email: "worker@lab.org".into(),
                    props: gql::roles::modify_user_full_name::ModifyUserInput {
                        full_name: Some("Worker".into()),
                        ..Default::default()
                    },
                },
            )
            .await;
        assert_eq!(renamed["modify_user"]["user"]["full_name"], "Worker");
        assert_code(
            &modify_user(
                &app,
                &lab_admin,
                "worker@lab.org",
                gql::modify_user::ModifyUserInput {
                    role: Some("superadmin".into()),
                    ..Default::default()
                },
            )
            .await,
            "FORBIDDEN",
        );
        assert_code(
            &modify_user(
                &app,
                &lab_admin,
                "worker@lab.org",
                gql::modify_user::ModifyUserInput {
                    is_active: Some(false),
                    ..Default::default()
                },
            )
            .await,
            "FORBIDDEN",
        );
        // Groups: create in own domain, not in another.
        let create_group = |domain: &str| gql::create_group::Variables {
            name: "team".into(),
            props: gql::create_group::GroupInput {
                domain_name: domain.into(),
                ..Default::default()
            },
        };
        app.op_ok::<gql::CreateGroup>(Some(&lab_admin), create_group("lab"))
            .await;
        assert_code(
            &app.op::<gql::CreateGroup>(Some(&lab_admin), create_group("default"))
                .await,
            "NOT_FOUND",
        );
        let groups = app
            .op_ok::<gql::roles::GroupsWithDomain>(Some(&lab_admin), Default::default())
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
            .op_ok::<gql::roles::KeypairSecrets>(Some(&lab_admin), Default::default())
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
            &app.op::<gql::ContainerRegistries>(Some(&lab_admin), Default::default())
                .await,
            "FORBIDDEN",
        );
        assert_code(
            &app.op::<gql::CreatePreset>(
                Some(&lab_admin),
                gql::create_preset::Variables {
                    name: "p".into(),
                    props: preset_props(),
                },
            )
            .await,
            "FORBIDDEN",
        );
        // Superadmin sees every domain.
        let all = app
            .admin_op::<gql::roles::UsersAndDomains>(Default::default())
            .await;
        assert_eq!(all["users"].as_array().unwrap().len(), 4);
        assert_eq!(all["domains"].as_array().unwrap().len(), 2);
    }
);
