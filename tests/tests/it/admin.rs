//! Every admin mutation with good and bad input.
use serde_json::json;

use crate::both_dbs;
use crate::gql;
use crate::gql::admin as ops;
use crate::support::*;

both_dbs!(users_and_keypairs, |db| async move {
    let app = spawn(db).await;
    let admin = Some(app.admin_token.as_str());
    let created = app
        .admin_op::<ops::CreateUserDetail>(ops::create_user_detail::Variables {
            email: "New@Lab.org".into(),
            props: ops::create_user_detail::UserInput {
                username: "newbie".into(),
                password: "Newbie-01".into(),
                need_password_change: false,
                domain_name: "default".into(),
                full_name: Some("New Bie".into()),
                role: Some("user".into()),
                ..Default::default()
            },
        })
        .await;
    let u = &created["create_user"]["user"];
    assert_eq!(u["email"], "new@lab.org");
    assert_eq!(u["groups"][0]["name"], "default");
    let main_key = u["main_access_key"].as_str().unwrap().to_string();
    let new_user = |username: &str, domain: &str| gql::create_user::UserInput {
        username: username.into(),
        password: "Newbie-01".into(),
        need_password_change: false,
        domain_name: domain.into(),
        ..Default::default()
    };
    for (email, props, code) in [
        ("new@lab.org", new_user("x2", "default"), "CONFLICT"),
        ("x3@lab.org", new_user("newbie", "default"), "CONFLICT"),
        ("not-an-email", new_user("x4", "default"), "BAD_REQUEST"),
        ("x5@lab.org", new_user("x5", "nowhere"), "NOT_FOUND"),
        (
            "x6@lab.org",
            gql::create_user::UserInput {
                role: Some("god".into()),
                ..new_user("x6", "default")
            },
            "BAD_REQUEST",
        ),
    ] {
        let body = app
            .op::<gql::CreateUser>(
                admin,
                gql::create_user::Variables {
                    email: email.into(),
                    props,
                },
            )
            .await;
        assert_code(&body, code);
    }
    for (email, props, code) in [
        (
            "ghost@lab.org",
            gql::modify_user::ModifyUserInput {
                full_name: Some("x".into()),
                ..Default::default()
            },
            "NOT_FOUND",
        ),
        (
            "admin@bai.local",
            gql::modify_user::ModifyUserInput {
                is_active: Some(false),
                ..Default::default()
            },
            "BAD_REQUEST",
        ),
    ] {
        let body = app
            .op::<gql::ModifyUser>(
                admin,
                gql::modify_user::Variables {
                    email: email.into(),
                    props,
                },
            )
            .await;
        assert_code(&body, code);
    }

    // Keypairs: explicit keys, bad keys, policy checks, delete rules.
    let keypair = |policy: &str, rate_limit: i64| gql::create_keypair::KeyPairInput {
        resource_policy: policy.into(),
        rate_limit,
        ..Default::default()
    };
    let explicit = app
        .admin_op::<gql::CreateKeypair>(gql::create_keypair::Variables {
            user_id: "new@lab.org".into(),
            props: gql::create_keypair::KeyPairInput {
                access_key: Some("AKIAEXPLICIT00000001".into()),
                secret_key: Some("abcdefghijabcdefghijabcdefghijabcdefghij".into()),
                ..keypair("default", 500)
            },
        })
        .await;
    assert_eq!(
        explicit["create_keypair"]["keypair"]["access_key"],
        "AKIAEXPLICIT00000001"
    );
    for (props, code) in [
        (
            gql::create_keypair::KeyPairInput {
                access_key: Some("short".into()),
                ..keypair("default", 1)
            },
            "BAD_REQUEST",
        ),
        (keypair("nope", 1), "NOT_FOUND"),
        (keypair("default", -1), "BAD_REQUEST"),
        (
            gql::create_keypair::KeyPairInput {
                access_key: Some("AKIAEXPLICIT00000001".into()),
                ..keypair("default", 1)
            },
            "CONFLICT",
        ),
    ] {
        let body = app
            .op::<gql::CreateKeypair>(
                admin,
                gql::create_keypair::Variables {
                    user_id: "new@lab.org".into(),
                    props,
                },
            )
            .await;
        assert_code(&body, code);
    }
    let bad_policy = app
        .op::<gql::ModifyKeypair>(
            admin,
            gql::modify_keypair::Variables {
                access_key: "AKIAEXPLICIT00000001".into(),
                props: gql::modify_keypair::ModifyKeyPairInput {
                    resource_policy: Some("nope".into()),
                    ..Default::default()
                },
            },
        )
        .await;
    assert_code(&bad_policy, "NOT_FOUND");
    let modified = app
        .admin_op::<gql::ModifyKeypair>(gql::modify_keypair::Variables {
            access_key: "AKIAEXPLICIT00000001".into(),
            props: gql::modify_keypair::ModifyKeyPairInput {
                rate_limit: Some(2000),
                is_active: Some(false),
                ..Default::default()
            },
        })
        .await;
    assert_eq!(
        modified["modify_keypair"]["keypair"],
        json!({"rate_limit": 2000, "is_active": false})
    );
    let inactive = app
        .admin_op::<gql::Keypairs>(gql::keypairs::Variables {
            email: Some("new@lab.org".into()),
            is_active: Some(false),
            ..Default::default()
        })
        .await;
    assert_eq!(
        inactive["keypairs"],
        json!([{"access_key": "AKIAEXPLICIT00000001"}])
    );
    let main_del = app
        .op::<ops::DeleteKeypair>(
            admin,
            ops::delete_keypair::Variables {
                access_key: main_key,
            },
        )
        .await;
    assert_code(&main_del, "CONFLICT");
    let explicit_key = || ops::delete_keypair::Variables {
        access_key: "AKIAEXPLICIT00000001".into(),
    };
    app.admin_op::<ops::DeleteKeypair>(explicit_key()).await;
    assert_code(
        &app.op::<ops::DeleteKeypair>(admin, explicit_key()).await,
        "NOT_FOUND",
    );
    let page = app
        .admin_op::<gql::KeypairList>(gql::keypair_list::Variables {
            limit: 1,
            offset: 0,
            order: Some("+user_id".into()),
            ..Default::default()
        })
        .await;
    assert_eq!(page["keypair_list"]["total_count"], 2);
    assert_eq!(
        page["keypair_list"]["items"][0]["user_id"],
        "admin@bai.local"
    );
    assert_code(
        &app.op::<gql::KeypairList>(
            admin,
            gql::keypair_list::Variables {
                limit: 1001,
                offset: 0,
                order: None,
                ..Default::default()
            },
        )
        .await,
        "BAD_REQUEST",
    );
    assert_code(
        &app.op::<gql::KeypairList>(
            admin,
            gql::keypair_list::Variables {
                limit: 1,
                offset: 0,
                order: Some("secret_key".into()),
                ..Default::default()
            },
        )
        .await,
        "BAD_REQUEST",
    );

    // Deactivation: login refused, keypairs off, hidden from the active list; never deleted.
    let set_active = |is_active: bool| gql::modify_user::Variables {
        email: "new@lab.org".into(),
        props: gql::modify_user::ModifyUserInput {
            is_active: Some(is_active),
            ..Default::default()
        },
    };
    app.admin_op::<gql::ModifyUser>(set_active(false)).await;
    let login = app
        .op::<gql::Login>(
            None,
            gql::login::Variables {
                email: "new@lab.org".into(),
                password: "Newbie-01".into(),
            },
        )
        .await;
    assert_code(&login, "UNAUTHENTICATED");
    assert!(message(&login).contains("deactivated"), "{login}");
    let active = app
        .admin_op::<gql::Users>(gql::users::Variables {
            is_active: Some(true),
            group_id: None,
            ..Default::default()
        })
        .await;
    assert!(
        !active["users"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["email"] == "new@lab.org")
    );
    let all = app
        .admin_op::<ops::UserStatusAndKeypairs>(ops::user_status_and_keypairs::Variables {
            email: "new@lab.org".into(),
        })
        .await;
    assert_eq!(all["user"]["status"], "inactive");
    assert!(
        all["keypairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["is_active"] == false)
    );
    app.admin_op::<gql::ModifyUser>(set_active(true)).await;
    app.login("new@lab.org", "Newbie-01").await;
});

both_dbs!(policies_presets_and_settings, |db| async move {
    let app = spawn(db).await;
    let admin = Some(app.admin_token.as_str());
    let created = app
        .admin_op::<ops::CreatePolicyDetail>(ops::create_policy_detail::Variables {
            name: "gpu-team".into(),
            props: ops::create_policy_detail::CreateKeyPairResourcePolicyInput {
                default_for_unspecified: "LIMITED".into(),
                total_resource_slots: json!(
                    r#"{"cpu": "Infinity", "mem": "16g", "cuda.shares": "2"}"#
                ),
                max_concurrent_sessions: 30,
                max_containers_per_session: 1,
                idle_timeout: 600,
                idle_utilization_pct: Some(5),
                idle_utilization_secs: Some(1800),
                allowed_vfolder_hosts: Some(json!(r#"["local"]"#)),
                max_vfolder_count: Some(10),
                max_vfolder_size: Some(0),
                ..Default::default()
            },
        })
        .await;
    let p = &created["create_keypair_resource_policy"]["resource_policy"];
    let slots: serde_json::Value =
        serde_json::from_str(p["total_resource_slots"].as_str().unwrap()).unwrap();
    assert_eq!(
        slots,
        json!({"cpu": "Infinity", "mem": "17179869184", "cuda.shares": "2"})
    );
    assert_eq!(p["idle_timeout"], 600);
    assert_eq!(p["idle_utilization_pct"], 5);
    assert_eq!(p["idle_utilization_secs"], 1800);
    let base = |slots: &str| gql::create_policy::CreateKeyPairResourcePolicyInput {
        default_for_unspecified: "LIMITED".into(),
        max_concurrent_sessions: 1,
        max_containers_per_session: 1,
        idle_timeout: 0,
        total_resource_slots: json!(slots),
        ..Default::default()
    };
    for (slots, hosts, want) in [
        (r#"{"tpu": "1"}"#, None, "BAD_REQUEST"),
        (r#"{"cpu": "-2"}"#, None, "BAD_REQUEST"),
        (r#"{"mem": "lots"}"#, None, "BAD_REQUEST"),
        (r#"{}"#, Some(r#"{"local": ["fly"]}"#), "BAD_REQUEST"),
        (r#"not json"#, None, "BAD_REQUEST"),
    ] {
        let body = app
            .op::<gql::CreatePolicy>(
                admin,
                gql::create_policy::Variables {
                    name: "bad".into(),
                    props: gql::create_policy::CreateKeyPairResourcePolicyInput {
                        allowed_vfolder_hosts: hosts.map(|h| json!(h)),
                        ..base(slots)
                    },
                },
            )
            .await;
        assert!(body["errors"].is_array(), "{slots} {hosts:?}: {body}");
        let got = code(&body);
        assert!(
            got == want || got == "GRAPHQL_VALIDATION_FAILED",
            "{slots} {hosts:?}: {body}"
        );
    }
    let neg = app
        .op::<gql::ModifyPolicy>(
            admin,
            gql::modify_policy::Variables {
                name: "gpu-team".into(),
                props: gql::modify_policy::ModifyKeyPairResourcePolicyInput {
                    max_concurrent_sessions: Some(-1),
                    ..Default::default()
                },
            },
        )
        .await;
    assert_code(&neg, "BAD_REQUEST");
    // A utilization threshold is a percentage, its window a duration.
    // A window shorter than a minute would end a session on a sample or two.
    for (pct, secs) in [
        (Some(101), None),
        (Some(-1), None),
        (None, Some(-5)),
        (None, Some(30)),
        (Some(10), Some(0)),
    ] {
        let bad = app
            .op::<gql::ModifyPolicy>(
                admin,
                gql::modify_policy::Variables {
                    name: "gpu-team".into(),
                    props: gql::modify_policy::ModifyKeyPairResourcePolicyInput {
                        idle_utilization_pct: pct,
                        idle_utilization_secs: secs,
                        ..Default::default()
                    },
                },
            )
            .await;
        assert_code(&bad, "BAD_REQUEST");
    }
    let dup = app
        .op::<gql::CreatePolicy>(
            admin,
            gql::create_policy::Variables {
                name: "gpu-team".into(),
                props: base("{}"),
            },
        )
        .await;
    assert_code(&dup, "CONFLICT");
    // A policy in use cannot be deleted; an unused one can.
    app.user("gpu@x.org", "user", "default").await;
    app.admin_op::<gql::CreateKeypair>(gql::create_keypair::Variables {
        user_id: "gpu@x.org".into(),
        props: gql::create_keypair::KeyPairInput {
            resource_policy: "gpu-team".into(),
            rate_limit: 100,
            ..Default::default()
        },
    })
    .await;
    let in_use = app
        .op::<ops::DeletePolicy>(
            admin,
            ops::delete_policy::Variables {
                name: "gpu-team".into(),
            },
        )
        .await;
    assert_code(&in_use, "CONFLICT");
    assert!(message(&in_use).contains("used by 1 keypair"), "{in_use}");
    let in_use_default = app
        .op::<ops::DeletePolicy>(
            admin,
            ops::delete_policy::Variables {
                name: "default".into(),
            },
        )
        .await;
    assert_code(&in_use_default, "CONFLICT");

    // Presets: seeded table, create/modify/delete, bad input.
    let seeded = app
        .admin_op::<gql::ResourcePresets>(gql::resource_presets::Variables)
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
    let preset =
        |slots: &str, shared_memory: Option<&str>| gql::create_preset::CreateResourcePresetInput {
            resource_slots: json!(slots),
            shared_memory: shared_memory.map(Into::into),
        };
    app.admin_op::<gql::CreatePreset>(gql::create_preset::Variables {
        name: "xl".into(),
        props: preset(r#"{"cpu": "8", "mem": "32g"}"#, Some("2g")),
    })
    .await;
    for (name, props, code) in [
        (
            "xl",
            preset(r#"{"cpu": "8", "mem": "32g"}"#, None),
            "CONFLICT",
        ),
        (
            "bad",
            preset(r#"{"cpu": "1", "mem": "1g"}"#, Some("1g")),
            "BAD_REQUEST",
        ),
        ("bad", preset(r#"{"cpu": "1"}"#, None), "BAD_REQUEST"),
        (
            "bad",
            preset(r#"{"gpu": "1", "cpu": "1", "mem": "1g"}"#, None),
            "BAD_REQUEST",
        ),
        (
            "b a d",
            preset(r#"{"cpu": "1", "mem": "1g"}"#, None),
            "BAD_REQUEST",
        ),
    ] {
        let body = app
            .op::<gql::CreatePreset>(
                admin,
                gql::create_preset::Variables {
                    name: name.into(),
                    props,
                },
            )
            .await;
        assert_code(&body, code);
    }
    let shared_memory = |name: &str, size: &str| ops::modify_preset::Variables {
        name: name.into(),
        props: ops::modify_preset::ModifyResourcePresetInput {
            shared_memory: Some(size.into()),
            ..Default::default()
        },
    };
    for (name, size, code) in [("nope", "1g", "NOT_FOUND"), ("xl", "64g", "BAD_REQUEST")] {
        let body = app
            .op::<ops::ModifyPreset>(admin, shared_memory(name, size))
            .await;
        assert_code(&body, code);
    }
    let modded = app
        .admin_op::<ops::ModifyPreset>(shared_memory("xl", "4g"))
        .await;
    assert_eq!(
        modded["modify_resource_preset"]["resource_preset"]["shared_memory"],
        4i64 * 1024 * 1024 * 1024
    );
    app.admin_op::<gql::DeletePreset>(gql::delete_preset::Variables { name: "xl".into() })
        .await;
    assert_code(
        &app.op::<ops::ResourcePreset>(
            admin,
            ops::resource_preset::Variables { name: "xl".into() },
        )
        .await,
        "NOT_FOUND",
    );

    // System settings: read-only list + editable announcement.
    let settings = app
        .admin_op::<gql::SystemSettings>(gql::system_settings::Variables)
        .await;
    assert!(
        settings["system_settings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["key"] == "auth.signup_enabled" && s["editable"] == false)
    );
    // The value is a JSON document carried as a string, as the console sends it.
    let setting = |key: &str, value: &str| ops::modify_system_setting::Variables {
        key: key.into(),
        value: json!(value),
    };
    app.admin_op::<ops::ModifySystemSetting>(setting("announcement", r#""Maintenance at 6pm""#))
        .await;
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
    for (key, value) in [
        ("auth.signup_enabled", "true"),
        ("scheduler.num_retries_to_skip", r#""many""#),
    ] {
        let body = app
            .op::<ops::ModifySystemSetting>(admin, setting(key, value))
            .await;
        assert_code(&body, "BAD_REQUEST");
    }
});

both_dbs!(
    domains_groups_scaling_groups_registries_images,
    |db| async move {
        let app = spawn(db).await;
        let admin = Some(app.admin_token.as_str());
        app.admin_op::<ops::CreateDomainDetail>(ops::create_domain_detail::Variables {
            name: "lab".into(),
            props: ops::create_domain_detail::DomainInput {
                description: Some("Lab".into()),
                total_resource_slots: Some(json!(r#"{"cpu": "64"}"#)),
                ..Default::default()
            },
        })
        .await;
        for (name, code) in [("lab", "CONFLICT"), ("bad name", "BAD_REQUEST")] {
            let body = app
                .op::<gql::CreateDomain>(admin, gql::create_domain::Variables { name: name.into() })
                .await;
            assert_code(&body, code);
        }
        app.admin_op::<gql::ModifyDomain>(gql::modify_domain::Variables {
            name: "lab".into(),
            props: gql::modify_domain::ModifyDomainInput {
                is_active: Some(false),
                ..Default::default()
            },
        })
        .await;

        let team_a = |description: Option<&str>| gql::create_group::Variables {
            name: "team-a".into(),
            props: gql::create_group::GroupInput {
                domain_name: "default".into(),
                description: description.map(Into::into),
                ..Default::default()
            },
        };
        let g = app.admin_op::<gql::CreateGroup>(team_a(Some("A"))).await;
        let gid = g["create_group"]["group"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_code(
            &app.op::<gql::CreateGroup>(admin, team_a(None)).await,
            "CONFLICT",
        );
        app.user("member@x.org", "user", "default").await;
        let uuid = app
            .admin_op::<ops::UserIds>(ops::user_ids::Variables {
                email: "member@x.org".into(),
            })
            .await["user"]["uuid"]
            .as_str()
            .unwrap()
            .to_string();
        let members_update = |mode: &str| ops::modify_group::Variables {
            gid: gid.clone(),
            props: ops::modify_group::ModifyGroupInput {
                user_update_mode: Some(mode.into()),
                user_uuids: Some(vec![uuid.clone()]),
                ..Default::default()
            },
        };
        app.admin_op::<ops::ModifyGroup>(members_update("add"))
            .await;
        let members = app
            .admin_op::<gql::Users>(gql::users::Variables {
                is_active: None,
                group_id: Some(gid.clone()),
                ..Default::default()
            })
            .await;
        assert_eq!(members["users"], json!([{"email": "member@x.org"}]));
        let bad_mode = app
            .op::<ops::ModifyGroup>(admin, members_update("swap"))
            .await;
        assert_code(&bad_mode, "BAD_REQUEST");

        // A domain admin changes the memberships of the users it governs (itself, users) only:
        // a superadmin or a peer admin of its domain reads as not found.
        let dadmin = app.user("team-lead@x.org", "admin", "default").await;
        app.user("top@x.org", "superadmin", "default").await;
        app.user("peer@x.org", "admin", "default").await;
        let uuid_of = |email: &'static str| {
            let app = &app;
            async move {
                app.admin_op::<ops::UserIds>(ops::user_ids::Variables {
                    email: email.into(),
                })
                .await["user"]["uuid"]
                    .as_str()
                    .unwrap()
                    .to_string()
            }
        };
        let change = |mode: &str, who: String| ops::modify_group::Variables {
            gid: gid.clone(),
            props: ops::modify_group::ModifyGroupInput {
                user_update_mode: Some(mode.into()),
                user_uuids: Some(vec![who]),
                ..Default::default()
            },
        };
        for email in ["top@x.org", "peer@x.org"] {
            let who = uuid_of(email).await;
            for mode in ["add", "remove"] {
                assert_code(
                    &app.op::<ops::ModifyGroup>(Some(&dadmin), change(mode, who.clone()))
                        .await,
                    "NOT_FOUND",
                );
            }
        }
        app.op_ok::<ops::ModifyGroup>(Some(&dadmin), change("remove", uuid.clone()))
            .await;
        let me = uuid_of("team-lead@x.org").await;
        app.op_ok::<ops::ModifyGroup>(Some(&dadmin), change("add", me))
            .await;
        app.admin_op::<ops::ModifyGroup>(members_update("add"))
            .await;

        // Resource groups.
        let sgroup =
            |driver: &str, scheduler: &str| gql::create_scaling_group::CreateScalingGroupInput {
                driver: driver.into(),
                scheduler: scheduler.into(),
                ..Default::default()
            };
        app.admin_op::<gql::CreateScalingGroup>(gql::create_scaling_group::Variables {
            name: "gpu-nodes".into(),
            props: gql::create_scaling_group::CreateScalingGroupInput {
                description: Some("GPU".into()),
                scheduler_opts: Some(json!(r#"{"pending_timeout": 60}"#)),
                ..sgroup("static", "drf")
            },
        })
        .await;
        for (name, props, code) in [
            ("x", sgroup("static", "random"), "BAD_REQUEST"),
            ("x", sgroup("k 8s", "fifo"), "BAD_REQUEST"),
            (
                "x",
                gql::create_scaling_group::CreateScalingGroupInput {
                    scheduler_opts: Some(json!(r#"{"colour": 1}"#)),
                    ..sgroup("static", "fifo")
                },
                "BAD_REQUEST",
            ),
            ("gpu-nodes", sgroup("static", "fifo"), "CONFLICT"),
        ] {
            let body = app
                .op::<gql::CreateScalingGroup>(
                    admin,
                    gql::create_scaling_group::Variables {
                        name: name.into(),
                        props,
                    },
                )
                .await;
            assert_code(&body, code);
        }
        let unknown = app
            .op::<ops::ModifyScalingGroup>(
                admin,
                ops::modify_scaling_group::Variables {
                    name: "nope".into(),
                    props: ops::modify_scaling_group::ModifyScalingGroupInput {
                        is_active: Some(false),
                        ..Default::default()
                    },
                },
            )
            .await;
        assert_code(&unknown, "NOT_FOUND");
        let nowhere = app
            .op::<ops::AssociateScalingGroupWithDomain>(
                admin,
                ops::associate_scaling_group_with_domain::Variables {
                    scaling_group: "gpu-nodes".into(),
                    domain: "nowhere".into(),
                },
            )
            .await;
        assert_code(&nowhere, "NOT_FOUND");
        let member = app.login("member@x.org", USER_PASSWORD).await;
        let member_groups =
            || app.op_ok::<gql::ScalingGroups>(Some(&member), gql::scaling_groups::Variables);
        let before = member_groups().await;
        assert_eq!(before["scaling_groups"], json!([{"name": "default"}]));
        app.admin_op::<ops::AssociateScalingGroupWithUserGroup>(
            ops::associate_scaling_group_with_user_group::Variables {
                scaling_group: "gpu-nodes".into(),
                user_group: gid.clone(),
            },
        )
        .await;
        let after = member_groups().await;
        assert_eq!(
            after["scaling_groups"],
            json!([{"name": "default"}, {"name": "gpu-nodes"}])
        );
        app.admin_op::<ops::ModifyScalingGroup>(ops::modify_scaling_group::Variables {
            name: "gpu-nodes".into(),
            props: ops::modify_scaling_group::ModifyScalingGroupInput {
                is_active: Some(false),
                scheduler: Some("lifo".into()),
                ..Default::default()
            },
        })
        .await;
        let inactive = member_groups().await;
        assert_eq!(inactive["scaling_groups"], json!([{"name": "default"}]));
        app.admin_op::<ops::DeleteScalingGroup>(ops::delete_scaling_group::Variables {
            name: "gpu-nodes".into(),
        })
        .await;

        // Registries: URL scheme required, hostname must match, password never returned.
        let registry =
            |url: &str, kind: &str| ops::create_container_registry::CreateContainerRegistryInput {
                url: url.into(),
                type_: kind.into(),
                ..Default::default()
            };
        let r = app
            .admin_op::<ops::CreateContainerRegistry>(ops::create_container_registry::Variables {
                hostname: "localhost:5000".into(),
                props: ops::create_container_registry::CreateContainerRegistryInput {
                    username: Some("bob".into()),
                    password: Some("s3cret".into()),
                    ..registry("http://localhost:5000", "docker")
                },
            })
            .await;
        assert_eq!(
            r["create_container_registry"]["container_registry"]["password"],
            "*****"
        );
        let listed = app
            .admin_op::<gql::ContainerRegistries>(gql::container_registries::Variables)
            .await;
        assert_eq!(
            listed["container_registries"],
            json!([{"hostname": "localhost:5000", "username": "bob", "password": "*****"}])
        );
        assert!(!listed.to_string().contains("s3cret"));
        for (hostname, props, code) in [
            (
                "localhost:7777",
                registry("localhost:7777", "docker"),
                "BAD_REQUEST",
            ),
            (
                "localhost:7777",
                registry("ftp://localhost:7777", "docker"),
                "BAD_REQUEST",
            ),
            (
                "localhost:7777",
                registry("http://elsewhere:7777", "docker"),
                "BAD_REQUEST",
            ),
            (
                "localhost:7777",
                registry("http://localhost:7777", "s3"),
                "BAD_REQUEST",
            ),
            (
                "localhost:5000",
                registry("http://localhost:5000", "docker"),
                "CONFLICT",
            ),
        ] {
            let body = app
                .op::<ops::CreateContainerRegistry>(
                    admin,
                    ops::create_container_registry::Variables {
                        hostname: hostname.into(),
                        props,
                    },
                )
                .await;
            assert_code(&body, code);
        }
        let delete_registry = |hostname: &str| ops::delete_container_registry::Variables {
            hostname: hostname.into(),
        };
        assert_code(
            &app.op::<ops::DeleteContainerRegistry>(admin, delete_registry("nope:1"))
                .await,
            "NOT_FOUND",
        );
        app.admin_op::<ops::ModifyContainerRegistry>(ops::modify_container_registry::Variables {
            hostname: "localhost:5000".into(),
            props: ops::modify_container_registry::ModifyContainerRegistryInput {
                password: Some(String::new()),
                ..Default::default()
            },
        })
        .await;
        app.admin_op::<ops::DeleteContainerRegistry>(delete_registry("localhost:5000"))
            .await;

        // Images: the catalog holds the engine's environment images (and, while the registry
        // tests run beside this one, what they pulled from their registries on 127.0.0.1);
        // edits of unknown images are NOT_FOUND.
        let images = app.admin_op::<gql::Images>(gql::images::Variables).await;
        let names: Vec<&str> = images["images"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&PYTHON), "{images}");
        assert!(
            names
                .iter()
                .all(|n| n.starts_with("bai.local/") || n.starts_with("127.0.0.1:")),
            "{images}"
        );
        let unknown_image = app
            .op::<gql::ModifyImage>(
                admin,
                gql::modify_image::Variables {
                    target: "cr.local/x/python:3".into(),
                    props: gql::modify_image::ModifyImageInput {
                        resource_limits: Some(vec![gql::modify_image::ResourceLimitInput {
                            key: "cpu".into(),
                            min: Some("1".into()),
                            max: None,
                        }]),
                    },
                },
            )
            .await;
        assert_code(&unknown_image, "NOT_FOUND");
        let unknown_alias = app
            .op::<gql::AliasImage>(
                admin,
                gql::alias_image::Variables {
                    alias: "python".into(),
                    target: "cr.local/x/python:3".into(),
                },
            )
            .await;
        assert_code(&unknown_alias, "NOT_FOUND");
    }
);

both_dbs!(
    keypair_with_a_live_session_cannot_be_deleted,
    |db| async move {
        let app = spawn(db).await;
        app.user("owner@x.org", "user", "default").await;
        let info = app
            .admin_op::<ops::UserIds>(ops::user_ids::Variables {
                email: "owner@x.org".into(),
            })
            .await;
        let user: uuid::Uuid = info["user"]["uuid"].as_str().unwrap().parse().unwrap();
        let group: uuid::Uuid = info["user"]["groups"][0]["id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let kp = app
            .admin_op::<gql::CreateKeypair>(gql::create_keypair::Variables {
                user_id: "owner@x.org".into(),
                props: gql::create_keypair::KeyPairInput {
                    resource_policy: "default".into(),
                    rate_limit: 100,
                    ..Default::default()
                },
            })
            .await;
        let ak = kp["create_keypair"]["keypair"]["access_key"]
            .as_str()
            .unwrap()
            .to_string();
        // A live session holds it (as Backend.AI refuses it); an ended one would not.
        let session = insert_session(&app, &ak, user, group).await;
        let set_status = |status: entity::enums::SessionStatus| {
            use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
            entity::sessions::Entity::update_many()
                .col_expr(
                    entity::sessions::Column::Status,
                    Expr::value(status.as_str()),
                )
                .filter(entity::sessions::Column::Id.eq(session))
                .exec(&app.state().db)
        };
        set_status(entity::enums::SessionStatus::Running)
            .await
            .unwrap();
        let refused = app
            .op::<ops::DeleteKeypair>(
                Some(&app.admin_token),
                ops::delete_keypair::Variables {
                    access_key: ak.clone(),
                },
            )
            .await;
        assert_code(&refused, "CONFLICT");
        assert!(
            message(&refused).contains("1 compute session(s)"),
            "{refused}"
        );
        // Still there, and deactivation remains possible.
        app.admin_op::<gql::ModifyKeypair>(gql::modify_keypair::Variables {
            access_key: ak.clone(),
            props: gql::modify_keypair::ModifyKeyPairInput {
                is_active: Some(false),
                ..Default::default()
            },
        })
        .await;
        let still = app
            .admin_op::<ops::KeypairIsActive>(ops::keypair_is_active::Variables {
                access_key: ak.clone(),
            })
            .await;
        assert_eq!(still["keypair"]["is_active"], false);
        // Once the session ended, the keypair may go (the session keeps its key for history).
        set_status(entity::enums::SessionStatus::Terminated)
            .await
            .unwrap();
        app.admin_op::<ops::DeleteKeypair>(ops::delete_keypair::Variables { access_key: ak })
            .await;
    }
);

// Backend.AI's purge_group (the client's `Group.purge`, Lablup's tester): an administrator of
// the project's domain purges it with its ended sessions; live sessions or folders refuse it
// (400, what to do), as does a domain's default project; a user is refused, a domain admin of
// another domain and an unknown id get NOT_FOUND.
crate::both_dbs!(projects_are_purged_as_backend_ai_does, |db| async move {
    require_docker();
    let app = spawn(db).await;
    app.create_domain("lab").await;
    let outsider = app.user("purge-outsider@lab.org", "admin", "lab").await;
    let lead = app.user("purge-lead@x.org", "admin", "default").await;
    let member = app.user("purge-member@x.org", "user", "default").await;
    let made = app
        .admin_op::<gql::CreateGroup>(gql::create_group::Variables {
            name: "doomed".into(),
            props: gql::create_group::GroupInput {
                domain_name: "default".into(),
                ..Default::default()
            },
        })
        .await;
    let gid = made["create_group"]["group"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let uuid = app
        .admin_op::<ops::UserIds>(ops::user_ids::Variables {
            email: "purge-member@x.org".into(),
        })
        .await["user"]["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    app.admin_op::<ops::ModifyGroup>(ops::modify_group::Variables {
        gid: gid.clone(),
        props: ops::modify_group::ModifyGroupInput {
            user_update_mode: Some("add".into()),
            user_uuids: Some(vec![uuid]),
            ..Default::default()
        },
    })
    .await;
    let purge = |token: String, gid: String| {
        let app = &app;
        async move {
            app.op::<ops::PurgeGroup>(Some(&token), ops::purge_group::Variables { gid })
                .await
        }
    };
    // Strangers and users.
    assert_code(&purge(outsider.clone(), gid.clone()).await, "NOT_FOUND");
    assert_code(
        &purge(lead.clone(), uuid::Uuid::new_v4().to_string()).await,
        "NOT_FOUND",
    );
    let refused = purge(member.clone(), gid.clone()).await;
    assert_code(&refused, "FORBIDDEN");
    // A live session in the project refuses it; once ended, the purge takes it along.
    let id = session_ids(
        &create_session(&app, &member, json!({"image": PYTHON, "group": "doomed"})).await,
    )[0]
    .clone();
    let live = purge(lead.clone(), gid.clone()).await;
    assert_code(&live, "BAD_REQUEST");
    assert!(message(&live).contains("1 active sessions"), "{live}");
    destroy(&app, &member, &id).await;
    // (The new project has no resource group: its session waits, and is cancelled.)
    wait_status(&app, &member, &id, &["TERMINATED", "CANCELLED"]).await;
    // A folder of the project refuses it until the folder is deleted.
    let (st, folder) = rest(
        &app,
        &app.admin_token,
        reqwest::Method::POST,
        "/folders",
        Some(json!({"name": "doomed-data", "group": gid})),
    )
    .await;
    assert_eq!(st, 201, "{folder}");
    let kept = purge(lead.clone(), gid.clone()).await;
    assert_code(&kept, "BAD_REQUEST");
    assert!(message(&kept).contains("1 folders"), "{kept}");
    for (method, path) in [
        (reqwest::Method::DELETE, "/folders"),
        (reqwest::Method::POST, "/folders/purge"),
    ] {
        let (st, answer) = rest(
            &app,
            &app.admin_token,
            method,
            path,
            Some(json!({"id": folder["id"]})),
        )
        .await;
        assert_eq!(st, 204, "{path}: {answer}");
    }
    let ended = "{ compute_session_list(limit: 10, offset: 0, status: \"TERMINATED,CANCELLED\") { items { id } } }";
    let before = app.ok(Some(&member), ended, json!({})).await;
    assert!(before.to_string().contains(&id), "{before}");
    let done = purge(lead.clone(), gid.clone()).await;
    assert_eq!(done["data"]["purge_group"]["ok"], true, "{done}");
    let groups = app
        .ok(Some(&app.admin_token), "{ groups { id } }", json!({}))
        .await;
    assert!(!groups.to_string().contains(&gid), "{groups}");
    // As Backend.AI answers an unknown group (its clients check for None after a purge).
    let gone = app
        .ok(
            Some(&app.admin_token),
            "query($id: UUID!) { group(id: $id) { id } }",
            json!({"id": gid}),
        )
        .await;
    assert_eq!(gone["group"], serde_json::Value::Null, "{gone}");
    // The ended session went with it (its owner no longer lists it).
    let left = app.ok(Some(&member), ended, json!({})).await;
    assert!(!left.to_string().contains(&id), "{left}");
    // The default project stays.
    let default = group_id(&app, &app.admin_token, "default").await;
    let kept = purge(app.admin_token.clone(), default).await;
    assert_code(&kept, "BAD_REQUEST");
    assert!(message(&kept).contains("default project"), "{kept}");
});

// Backend.AI's delete_user (the client's `User.delete`, Lablup's tester's clean-up): a
// superadmin marks the account deleted (it can no longer log in); itself is refused, a domain
// admin is FORBIDDEN (strangers: the isolation matrix).
crate::both_dbs!(users_are_deleted_as_backend_ai_does, |db| async move {
    let app = spawn(db).await;
    app.user("leaving@x.org", "user", "default").await;
    let lead = app.user("delete-lead@x.org", "admin", "default").await;
    let delete = |token: String, email: &'static str| {
        let app = &app;
        async move {
            app.op::<crate::gql::matrix::DeleteUser>(
                Some(&token),
                crate::gql::matrix::delete_user::Variables {
                    email: email.into(),
                },
            )
            .await
        }
    };
    assert_code(&delete(lead, "leaving@x.org").await, "FORBIDDEN");
    assert_code(
        &delete(app.admin_token.clone(), ADMIN_EMAIL).await,
        "BAD_REQUEST",
    );
    let done = delete(app.admin_token.clone(), "leaving@x.org").await;
    assert_eq!(done["data"]["delete_user"]["ok"], true, "{done}");
    let status = app
        .ok(
            Some(&app.admin_token),
            "{ user(email: \"leaving@x.org\") { status } }",
            json!({}),
        )
        .await;
    assert_eq!(status["user"]["status"], "deleted", "{status}");
    let login = crate::auth::login_body(&app, "leaving@x.org", USER_PASSWORD).await;
    assert!(
        login["errors"].is_array(),
        "a deleted account logs in: {login}"
    );
});

// A domain admin never purges a project a superadmin (or another administrator) belongs to,
// as it may never remove such a member (`modify_group`); the superadmin may.
crate::both_dbs!(
    a_domain_admin_cannot_purge_a_superadmins_project,
    |db| async move {
        let app = spawn(db).await;
        let lead = app.user("purge-lead2@x.org", "admin", "default").await;
        let made = app
            .admin_op::<gql::CreateGroup>(gql::create_group::Variables {
                name: "shared-with-root".into(),
                props: gql::create_group::GroupInput {
                    domain_name: "default".into(),
                    ..Default::default()
                },
            })
            .await;
        let gid = made["create_group"]["group"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let root = app
            .admin_op::<ops::UserIds>(ops::user_ids::Variables {
                email: ADMIN_EMAIL.into(),
            })
            .await["user"]["uuid"]
            .as_str()
            .unwrap()
            .to_string();
        app.admin_op::<ops::ModifyGroup>(ops::modify_group::Variables {
            gid: gid.clone(),
            props: ops::modify_group::ModifyGroupInput {
                user_update_mode: Some("add".into()),
                user_uuids: Some(vec![root]),
                ..Default::default()
            },
        })
        .await;
        let refused = app
            .op::<ops::PurgeGroup>(
                Some(&lead),
                ops::purge_group::Variables { gid: gid.clone() },
            )
            .await;
        assert_code(&refused, "FORBIDDEN");
        let groups = app
            .ok(Some(&app.admin_token), "{ groups { id } }", json!({}))
            .await;
        assert!(groups.to_string().contains(&gid), "still there: {groups}");
        let done = app
            .op::<ops::PurgeGroup>(
                Some(&app.admin_token),
                ops::purge_group::Variables { gid: gid.clone() },
            )
            .await;
        assert_eq!(done["data"]["purge_group"]["ok"], true, "{done}");
    }
);
