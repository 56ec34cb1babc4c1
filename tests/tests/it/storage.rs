//! Storage folders through the API (seeds' chapter 7): create (user/group, host, permission),
//! automount listing, explorer operations, rename, delete with name confirmation, the policy's
//! folder limit, isolation between users, and hostile paths at every file operation.
use serde_json::{Value, json};

use crate::both_dbs;
use crate::gql;
use crate::gql::create_vfolder::CreateVFolderInput;
use crate::support::*;

/// A folder called `name`, the defaults for the rest.
fn named(name: &str) -> CreateVFolderInput {
    CreateVFolderInput {
        name: name.into(),
        ..Default::default()
    }
}

async fn create_folder(app: &TestApp, token: &str, props: CreateVFolderInput) -> Value {
    app.op::<gql::CreateVfolder>(Some(token), gql::create_vfolder::Variables { props })
        .await
}

fn folder_id(body: &Value) -> String {
    body["data"]["create_vfolder"]["vfolder"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_string()
}

/// What `op_ok` checks, for an operation the test also sends expecting an error.
#[track_caller]
fn assert_ok(body: &Value) {
    assert!(
        body.get("errors").is_none() && !body["data"].is_null(),
        "unexpected errors: {body}"
    );
}

/// The id of the first group (project) the superadmin sees: `default`.
async fn default_group(app: &TestApp) -> String {
    app.admin_op::<gql::Groups>(Default::default()).await["groups"][0]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

both_dbs!(
    folders_are_created_explored_renamed_and_deleted,
    |db| async move {
        let app = spawn(db).await;
        let user = app.user("user2@x.org", "user", "default").await;
        let hosts = app
            .op_ok::<gql::storage::VfolderHosts>(Some(&user), Default::default())
            .await;
        assert_eq!(hosts["vfolder_hosts"], json!(["local"]));
        let made = create_folder(&app, &user, named("user2-vfolder")).await;
        let f = &made["data"]["create_vfolder"]["vfolder"];
        assert_eq!(f["host"], "local");
        assert_eq!(f["ownership_type"], "user");
        assert_eq!(f["permission"], "rw");
        assert_eq!(f["my_permission"], "wd");
        assert_eq!(f["is_automount"], false);
        let id = folder_id(&made);
        let auto = create_folder(&app, &user, named(".local")).await;
        assert_eq!(
            auto["data"]["create_vfolder"]["vfolder"]["is_automount"],
            true
        );
        assert_code(
            &create_folder(&app, &user, named("user2-vfolder")).await,
            "CONFLICT",
        );
        for bad in ["", "a/b", "..", "has space", &"x".repeat(65)] {
            assert_code(&create_folder(&app, &user, named(bad)).await, "BAD_REQUEST");
        }
        assert_code(
            &create_folder(
                &app,
                &user,
                CreateVFolderInput {
                    host: Some("nfs9".into()),
                    ..named("x1")
                },
            )
            .await,
            "NOT_FOUND",
        );
        assert_code(
            &create_folder(
                &app,
                &user,
                CreateVFolderInput {
                    permission: Some("all".into()),
                    ..named("x1")
                },
            )
            .await,
            "BAD_REQUEST",
        );

        // Explorer: mkdir, list, rename, delete.
        let mkdir = |path: &str, parents: Option<bool>| {
            app.op::<gql::CreateVfolderDirectory>(
                Some(&user),
                gql::create_vfolder_directory::Variables {
                    id: id.clone(),
                    path: path.into(),
                    parents,
                },
            )
        };
        let made = mkdir("data/raw", Some(true)).await;
        assert_ok(&made);
        assert_code(&mkdir("data", None).await, "CONFLICT");
        assert_code(&mkdir("no/such/parent", None).await, "NOT_FOUND");
        let state = app.state();
        let root = api::storage::hosts(&state.config)["local"].join(id.replace('-', ""));
        std::fs::write(root.join("data/raw/sample.csv"), "a,b\n1,2\n").unwrap();
        let top = app
            .op_ok::<gql::storage::VfolderFileTypes>(
                Some(&user),
                gql::storage::vfolder_file_types::Variables {
                    id: id.clone(),
                    path: None,
                },
            )
            .await;
        assert_eq!(
            top["vfolder_files"],
            json!([{"name": "data", "type": "DIRECTORY"}])
        );
        let raw = app
            .op_ok::<gql::storage::VfolderFileDetails>(
                Some(&user),
                gql::storage::vfolder_file_details::Variables {
                    id: id.clone(),
                    path: Some("data/raw".into()),
                },
            )
            .await;
        assert_eq!(raw["vfolder_files"][0]["name"], "sample.csv");
        assert_eq!(raw["vfolder_files"][0]["size"], 8);
        let rename_file = |path: &str, new_name: &str| {
            app.op::<gql::RenameVfolderFile>(
                Some(&user),
                gql::rename_vfolder_file::Variables {
                    id: id.clone(),
                    path: path.into(),
                    new_name: new_name.into(),
                },
            )
        };
        let renamed = rename_file("data/raw/sample.csv", "renamed.csv").await;
        assert_ok(&renamed);
        assert!(root.join("data/raw/renamed.csv").exists());
        assert_code(
            &rename_file("data/raw/renamed.csv", "../../escape.csv").await,
            "BAD_REQUEST",
        );
        let usage = app
            .op_ok::<gql::storage::VfolderUsage>(
                Some(&user),
                gql::storage::vfolder_usage::Variables { id: id.clone() },
            )
            .await;
        assert_eq!(usage["vfolder"], json!({"cur_size": 8, "num_files": 1}));
        let delete_files = |recursive: Option<bool>| {
            app.op::<gql::DeleteVfolderFiles>(
                Some(&user),
                gql::delete_vfolder_files::Variables {
                    id: id.clone(),
                    paths: vec!["data".into()],
                    recursive,
                },
            )
        };
        assert_code(&delete_files(None).await, "BAD_REQUEST");
        let deleted = delete_files(Some(true)).await;
        assert_ok(&deleted);
        assert!(!root.join("data").exists());

        // Rename, then delete only with the right name typed.
        app.op_ok::<gql::RenameVfolder>(
            Some(&user),
            gql::rename_vfolder::Variables {
                id: id.clone(),
                new_name: "user2-data".into(),
            },
        )
        .await;
        let delete = |confirm_name: &str| {
            app.op::<gql::DeleteVfolder>(
                Some(&user),
                gql::delete_vfolder::Variables {
                    id: id.clone(),
                    confirm_name: confirm_name.into(),
                },
            )
        };
        let wrong = delete("user2-vfolder").await;
        assert_code(&wrong, "BAD_REQUEST");
        assert!(root.exists(), "nothing deleted without the confirmation");
        let right = delete("user2-data").await;
        assert_ok(&right);
        // In the trash: its files kept, its status says so, until it is purged.
        assert!(root.exists(), "the trash keeps the files");
        let trashed = app
            .ok(
                Some(&user),
                "query($id: UUID!) { vfolder(id: $id) { status } }",
                json!({"id": id}),
            )
            .await;
        assert_eq!(trashed["vfolder"]["status"], "delete-pending");
        app.ok(
            Some(&user),
            "mutation($id: UUID!) { purge_vfolder(id: $id) { ok } }",
            json!({"id": id}),
        )
        .await;
        assert!(!root.exists());
        assert_code(
            &app.op::<gql::Vfolder>(Some(&user), gql::vfolder::Variables { id: id.clone() })
                .await,
            "NOT_FOUND",
        );
        let list = app
            .op_ok::<gql::storage::VfolderList>(Some(&user), Default::default())
            .await;
        assert_eq!(
            list["vfolder_list"]["items"],
            json!([{"name": ".local", "is_automount": true}])
        );
    }
);

both_dbs!(folders_are_isolated_and_limited, |db| async move {
    let app = spawn(db).await;
    let owner = app.user("owner@x.org", "user", "default").await;
    let stranger = app.user("stranger@x.org", "user", "default").await;
    let id = folder_id(&create_folder(&app, &owner, named("private")).await);
    let s = Some(stranger.as_str());
    for body in [
        app.op::<gql::Vfolder>(s, gql::vfolder::Variables { id: id.clone() })
            .await,
        app.op::<gql::storage::VfolderFileNames>(
            s,
            gql::storage::vfolder_file_names::Variables {
                id: id.clone(),
                path: None,
            },
        )
        .await,
        app.op::<gql::CreateVfolderDirectory>(
            s,
            gql::create_vfolder_directory::Variables {
                id: id.clone(),
                path: "x".into(),
                parents: None,
            },
        )
        .await,
        app.op::<gql::DeleteVfolder>(
            s,
            gql::delete_vfolder::Variables {
                id: id.clone(),
                confirm_name: "private".into(),
            },
        )
        .await,
        app.op::<gql::RenameVfolder>(
            s,
            gql::rename_vfolder::Variables {
                id: id.clone(),
                new_name: "mine".into(),
            },
        )
        .await,
    ] {
        assert_code(&body, "NOT_FOUND");
    }
    let theirs = app
        .op_ok::<gql::storage::VfolderList>(s, Default::default())
        .await;
    assert_eq!(theirs["vfolder_list"]["total_count"], 0);

    // Group folders: domain admins create them; project members see and use them with the
    // folder's permission; users cannot create them.
    let gid = default_group(&app).await;
    let team_folder = |permission: Option<&str>| CreateVFolderInput {
        group: Some(gid.clone()),
        permission: permission.map(String::from),
        ..named("team-data")
    };
    assert_code(
        &create_folder(&app, &owner, team_folder(None)).await,
        "FORBIDDEN",
    );
    let team = folder_id(&create_folder(&app, &app.admin_token, team_folder(Some("ro"))).await);
    let seen = app
        .op_ok::<gql::Vfolder>(Some(&owner), gql::vfolder::Variables { id: team.clone() })
        .await;
    assert_eq!(
        seen["vfolder"],
        json!({"name": "team-data", "ownership_type": "group", "group_name": "default", "my_permission": "ro", "is_owner": false})
    );
    assert_code(
        &app.op::<gql::CreateVfolderDirectory>(
            Some(&owner),
            gql::create_vfolder_directory::Variables {
                id: team.clone(),
                path: "x".into(),
                parents: None,
            },
        )
        .await,
        "FORBIDDEN",
    );
    assert_code(
        &app.op::<gql::DeleteVfolder>(
            Some(&owner),
            gql::delete_vfolder::Variables {
                id: team.clone(),
                confirm_name: "team-data".into(),
            },
        )
        .await,
        "FORBIDDEN",
    );

    // The policy's folder limit (default policy: 10), and allowed hosts.
    for i in 1..10 {
        create_folder(&app, &owner, named(&format!("f{i}"))).await;
    }
    let over = create_folder(&app, &owner, named("one-too-many")).await;
    assert_code(&over, "BAD_REQUEST");
    assert!(
        message(&over).contains("most your resource policy allows (10)"),
        "{over}"
    );
    app.use_policy(
        &stranger,
        "no-storage",
        gql::create_policy::CreateKeyPairResourcePolicyInput {
            default_for_unspecified: "UNLIMITED".into(),
            total_resource_slots: json!("{}"),
            max_concurrent_sessions: 1,
            max_containers_per_session: 1,
            idle_timeout: 0,
            allowed_vfolder_hosts: Some(json!("{}")),
            ..Default::default()
        },
    )
    .await;
    assert_code(
        &create_folder(&app, &stranger, named("nope")).await,
        "FORBIDDEN",
    );
});

// Thousands of hostile paths at every file operation: none may touch anything outside the
// folder, and each is refused with a clear error rather than a server fault.
both_dbs!(hostile_paths_never_escape, |db| async move {
    let app = spawn(db).await;
    let user = app.user("fuzz@x.org", "user", "default").await;
    let id = folder_id(&create_folder(&app, &user, named("target")).await);
    let state = app.state();
    let host_root = api::storage::hosts(&state.config)["local"].clone();
    let root = host_root.join(id.replace('-', ""));
    let outside = host_root.join("outside-marker");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("keep.txt"), "keep").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
    let pieces = [
        "..",
        ".",
        "link",
        "keep.txt",
        "%2e%2e",
        "%2F",
        "/",
        "\\",
        "~",
        "a",
        "..%00",
        "outside-marker",
        "\u{0}",
        "../..",
    ];
    let mut seed: u64 = 42;
    let mut rand = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let t = Some(user.as_str());
    for i in 0..1200 {
        let n = 1 + rand() % 4;
        let p: Vec<&str> = (0..n).map(|_| pieces[rand() % pieces.len()]).collect();
        let mut path = p.join("/");
        if rand() % 5 == 0 {
            path.insert(0, '/');
        }
        // Each file operation in turn: list, mkdir -p, rename, rm -r.
        let (id, p) = (id.clone(), path.clone());
        let body = match i % 4 {
            0 => {
                app.op::<gql::storage::VfolderFileNames>(
                    t,
                    gql::storage::vfolder_file_names::Variables { id, path: Some(p) },
                )
                .await
            }
            1 => {
                app.op::<gql::CreateVfolderDirectory>(
                    t,
                    gql::create_vfolder_directory::Variables {
                        id,
                        path: p,
                        parents: Some(true),
                    },
                )
                .await
            }
            2 => {
                app.op::<gql::RenameVfolderFile>(
                    t,
                    gql::rename_vfolder_file::Variables {
                        id,
                        path: p,
                        new_name: "moved".into(),
                    },
                )
                .await
            }
            _ => {
                app.op::<gql::DeleteVfolderFiles>(
                    t,
                    gql::delete_vfolder_files::Variables {
                        id,
                        paths: vec![p],
                        recursive: Some(true),
                    },
                )
                .await
            }
        };
        if let Some(code) = body["errors"][0]["extensions"]["code"].as_str() {
            assert!(
                matches!(code, "BAD_REQUEST" | "NOT_FOUND" | "CONFLICT"),
                "{path:?}: {body}"
            );
        }
        assert!(
            outside.join("keep.txt").exists(),
            "{path:?} reached outside the folder"
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("keep.txt")).unwrap(),
        "keep"
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        1,
        "nothing created outside"
    );
});

async fn upload(
    app: &TestApp,
    token: &str,
    id: &str,
    path: &str,
    body: Vec<u8>,
) -> reqwest::Response {
    app.http
        .post(app.url(&format!("/storage/folders/{id}/upload?path={path}")))
        .bearer_auth(token)
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn download(app: &TestApp, token: &str, id: &str, path: &str) -> reqwest::Response {
    app.http
        .get(app.url(&format!("/storage/folders/{id}/download?path={path}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

// The seeds' chapter 8: mount folders into a session, write into one from inside the
// container, terminate, and download the file through the explorer.
both_dbs!(
    seeds_journey_mounted_folders_outlive_sessions,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let user = app.user("user2@x.org", "user", "default").await;
        let _ml = folder_id(&create_folder(&app, &user, named("user1-ml-test")).await);
        let v = folder_id(&create_folder(&app, &user, named("user2-vfolder")).await);
        let local = folder_id(&create_folder(&app, &user, named(".local")).await);
        let gid = default_group(&app).await;
        let shared = folder_id(
            &create_folder(
                &app,
                &app.admin_token,
                CreateVFolderInput {
                    group: Some(gid),
                    permission: Some("ro".into()),
                    ..named("shared-ro")
                },
            )
            .await,
        );

        // Uploads stream to disk; a large one arrives whole.
        let up = upload(&app, &user, &v, "tc-perft01.txt", b"perf data\n".to_vec()).await;
        assert_eq!(up.status(), 200);
        let big: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let up = upload(&app, &user, &v, "big.bin", big.clone()).await;
        assert_eq!(up.json::<Value>().await.unwrap()["size"], big.len());
        assert_eq!(
            upload(
                &app,
                &app.admin_token,
                &shared,
                "readme.txt",
                b"shared\n".to_vec()
            )
            .await
            .status(),
            200
        );
        assert_eq!(
            upload(&app, &user, &shared, "nope.txt", b"x".to_vec())
                .await
                .status(),
            403,
            "read-only for members"
        );
        assert_eq!(
            upload(&app, &user, &v, "../escape.txt", b"x".to_vec())
                .await
                .status(),
            400
        );
        assert_eq!(
            upload(&app, &user, &v, "missing-dir/file", b"x".to_vec())
                .await
                .status(),
            404
        );

        // Overlapping targets and folders of others are refused.
        let overlap = create_session(&app, &user, json!({"image": PYTHON, "mounts": ["user2-vfolder", "user1-ml-test"], "mount_map": "{\"user1-ml-test\": \"user2-vfolder/inner\"}"})).await;
        assert_code(&overlap, "BAD_REQUEST");
        assert!(message(&overlap).contains("overlap"), "{overlap}");
        let stranger = app.user("stranger@x.org", "user", "default").await;
        assert_code(
            &create_session(
                &app,
                &stranger,
                json!({"image": PYTHON, "mounts": [v.clone()]}),
            )
            .await,
            "NOT_FOUND",
        );

        let id = session_ids(
            &create_session(
                &app,
                &user,
                json!({"image": PYTHON, "mounts": ["user1-ml-test", "user2-vfolder", "shared-ro"]}),
            )
            .await,
        )[0]
        .clone();
        let s = wait_status(&app, &user, &id, &["RUNNING", "ERROR"]).await;
        assert_eq!(s["status"], "RUNNING", "{s}");
        let c = s["containers"][0]["container_id"]
            .as_str()
            .unwrap()
            .to_string();
        let ls = docker(&["exec", &c, "ls", "-A", "/home/work"]);
        for name in [".local", "shared-ro", "user1-ml-test", "user2-vfolder"] {
            assert!(ls.lines().any(|l| l == name), "{name} not in {ls:?}");
        }
        docker(&[
            "exec",
            &c,
            "sh",
            "-c",
            "echo 'file inside user2-vfolder' > /home/work/user2-vfolder/test_file && echo scratch > /home/work/scratch_file && echo kept > /home/work/.local/marker",
        ]);
        assert_eq!(
            docker(&["exec", &c, "cat", "/home/work/user2-vfolder/tc-perft01.txt"]),
            "perf data"
        );
        assert_eq!(
            docker(&["exec", &c, "cat", "/home/work/shared-ro/readme.txt"]),
            "shared"
        );
        let ro = std::process::Command::new("docker")
            .args(["exec", &c, "touch", "/home/work/shared-ro/x"])
            .output()
            .unwrap();
        assert!(
            !ro.status.success(),
            "a read-only folder stays read-only inside the container"
        );
        let busy = app
            .op::<gql::DeleteVfolder>(
                Some(&user),
                gql::delete_vfolder::Variables {
                    id: v.clone(),
                    confirm_name: "user2-vfolder".into(),
                },
            )
            .await;
        assert_code(&busy, "CONFLICT");
        destroy(&app, &user, &id).await;

        // After the session: the file is in the folder, with the same contents.
        let files = app
            .op_ok::<gql::storage::VfolderFileNames>(
                Some(&user),
                gql::storage::vfolder_file_names::Variables {
                    id: v.clone(),
                    path: None,
                },
            )
            .await;
        assert!(files.to_string().contains("test_file"), "{files}");
        let got = download(&app, &user, &v, "test_file").await;
        assert_eq!(got.status(), 200);
        assert!(
            got.headers()["content-disposition"]
                .to_str()
                .unwrap()
                .contains("test_file")
        );
        assert_eq!(got.text().await.unwrap(), "file inside user2-vfolder\n");
        assert_eq!(
            download(&app, &user, &v, "big.bin")
                .await
                .bytes()
                .await
                .unwrap()
                .to_vec(),
            big
        );
        let tar = download(&app, &user, &v, "").await;
        assert_eq!(tar.headers()["content-type"], "application/x-tar");
        assert!(
            tar.bytes().await.unwrap().len() > big.len(),
            "the whole folder as an archive"
        );
        assert_eq!(
            download(&app, &stranger, &v, "test_file").await.status(),
            404
        );
        assert_eq!(
            app.http
                .get(app.url(&format!("/storage/folders/{v}/download?path=test_file")))
                .send()
                .await
                .unwrap()
                .status(),
            401
        );
        assert_eq!(
            download(&app, &user, &local, "marker")
                .await
                .text()
                .await
                .unwrap(),
            "kept\n",
            "automount folder written"
        );

        // A new session: the automount folder is back, the scratch file is gone.
        let id2 =
            session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
        let s2 = wait_status(&app, &user, &id2, &["RUNNING"]).await;
        let c2 = s2["containers"][0]["container_id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            docker(&["exec", &c2, "cat", "/home/work/.local/marker"]),
            "kept"
        );
        let gone = std::process::Command::new("docker")
            .args(["exec", &c2, "test", "-e", "/home/work/scratch_file"])
            .output()
            .unwrap();
        assert!(
            !gone.status.success(),
            "files outside mounted folders are gone with the session"
        );
        destroy(&app, &user, &id2).await;
    }
);

both_dbs!(folder_list_changes_are_live_and_private, |db| async move {
    let app = spawn(db).await;
    let owner = app.user("watch@x.org", "user", "default").await;
    let stranger = app.user("other@x.org", "user", "default").await;
    async fn watch(app: &TestApp, token: &str) -> Ws {
        subscribe_op::<gql::storage::VfolderChanges>(app, token, Default::default()).await
    }
    async fn next(ws: &mut Ws) -> Value {
        next_json(ws).await["payload"]["data"]["vfolder_changes"].clone()
    }
    let mut mine = watch(&app, &owner).await;
    let mut theirs = watch(&app, &stranger).await;
    let id = folder_id(&create_folder(&app, &owner, named("live-folder")).await);
    assert_eq!(
        next(&mut mine).await,
        json!({"name": "live-folder", "action": "created"})
    );
    app.op_ok::<gql::RenameVfolder>(
        Some(&owner),
        gql::rename_vfolder::Variables {
            id: id.clone(),
            new_name: "renamed".into(),
        },
    )
    .await;
    assert_eq!(
        next(&mut mine).await,
        json!({"name": "renamed", "action": "modified"})
    );
    app.op_ok::<gql::DeleteVfolder>(
        Some(&owner),
        gql::delete_vfolder::Variables {
            id: id.clone(),
            confirm_name: "renamed".into(),
        },
    )
    .await;
    // To the trash (a change), then deleted for good.
    assert_eq!(
        next(&mut mine).await,
        json!({"name": "renamed", "action": "modified"})
    );
    app.ok(
        Some(&owner),
        "mutation($id: UUID!) { purge_vfolder(id: $id) { ok } }",
        json!({"id": id}),
    )
    .await;
    assert_eq!(
        next(&mut mine).await,
        json!({"name": "renamed", "action": "deleted"})
    );
    // The stranger heard none of that: its first event is its own folder.
    create_folder(&app, &stranger, named("theirs")).await;
    assert_eq!(
        next(&mut theirs).await,
        json!({"name": "theirs", "action": "created"})
    );
});
