//! Storage folders the Backend.AI way (`/folders…`): the attack first — a stranger's ids and
//! names at every endpoint, a read-only invitee writing, a revoked share's token, an upload
//! token reused or expired, `../`, absolute paths, links and FIFOs — then trash, ranges and
//! the size limit; both official clients' `vfolder` commands whole.
use reqwest::Method;
use serde_json::{Value, json};

use crate::both_dbs;
use crate::support::*;

async fn make(app: &TestApp, token: &str, body: Value) -> Value {
    let (status, made) = rest(app, token, Method::POST, "/folders", Some(body)).await;
    assert_eq!(status, 201, "{made}");
    made
}

/// Uploads `bytes` to `path` of folder `key` through the storage-proxy flow; the PATCH's
/// status.
async fn upload(app: &TestApp, token: &str, key: &str, path: &str, bytes: &[u8]) -> (u16, String) {
    let (status, got) = rest(
        app,
        token,
        Method::POST,
        &format!("/folders/{key}/request-upload"),
        Some(json!({"path": path, "size": bytes.len()})),
    )
    .await;
    assert_eq!(status, 200, "{got}");
    let url = format!(
        "{}?token={}",
        got["url"].as_str().unwrap(),
        got["token"].as_str().unwrap()
    );
    let resp = app
        .http
        .patch(&url)
        .header("upload-offset", "0")
        .header("tus-resumable", "1.0.0")
        .header("content-type", "application/offset+octet-stream")
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), url)
}

async fn download_url(app: &TestApp, token: &str, key: &str, path: &str) -> (u16, String) {
    let (status, got) = rest(
        app,
        token,
        Method::POST,
        &format!("/folders/{key}/request-download"),
        Some(json!({"path": path})),
    )
    .await;
    if status != 200 {
        return (status, got.to_string());
    }
    (
        status,
        format!(
            "{}?token={}",
            got["url"].as_str().unwrap(),
            got["token"].as_str().unwrap()
        ),
    )
}

both_dbs!(
    strangers_readers_and_tokens_reach_nothing_more,
    |db| async move {
        let app = spawn(db).await;
        let owner = app.user("owner@x.org", "user", "default").await;
        let reader = app.user("reader@x.org", "user", "default").await;
        let stranger = app.user("stranger@x.org", "user", "default").await;
        let made = make(&app, &owner, json!({"name": "secret", "cloneable": true})).await;
        let hex = made["id"].as_str().unwrap().to_string();
        assert_eq!(made["ownership_type"], "user");
        let (s, _) = upload(&app, &owner, &hex, "data/notes.txt", b"0123456789").await;
        assert_eq!(s, 204);

        // A stranger: every endpoint, by id and by name, is NOT_FOUND.
        let paths: Vec<(Method, String, Value)> = vec![
            (Method::GET, format!("/folders/{hex}"), json!(null)),
            (Method::DELETE, format!("/folders/{hex}"), json!(null)),
            (
                Method::POST,
                format!("/folders/{hex}/rename"),
                json!({"new_name": "mine"}),
            ),
            (
                Method::POST,
                format!("/folders/{hex}/update-options"),
                json!({"cloneable": false}),
            ),
            (
                Method::POST,
                format!("/folders/{hex}/mkdir"),
                json!({"path": "x"}),
            ),
            (Method::GET, format!("/folders/{hex}/files"), json!(null)),
            (
                Method::POST,
                format!("/folders/{hex}/rename-file"),
                json!({"target_path": "data", "new_name": "y"}),
            ),
            (
                Method::POST,
                format!("/folders/{hex}/move-file"),
                json!({"src": "data", "dst": "z"}),
            ),
            (
                Method::DELETE,
                format!("/folders/{hex}/delete-files"),
                json!({"files": ["data"], "recursive": true}),
            ),
            (
                Method::POST,
                format!("/folders/{hex}/request-upload"),
                json!({"path": "p", "size": 1}),
            ),
            (
                Method::POST,
                format!("/folders/{hex}/request-download"),
                json!({"path": "data/notes.txt"}),
            ),
            (
                Method::POST,
                format!("/folders/{hex}/invite"),
                json!({"perm": "rw", "user_ids": ["stranger@x.org"]}),
            ),
            (Method::POST, format!("/folders/{hex}/leave"), json!({})),
            (
                Method::POST,
                format!("/folders/{hex}/share"),
                json!({"emails": ["stranger@x.org"]}),
            ),
            (
                Method::POST,
                format!("/folders/{hex}/clone"),
                json!({"target_name": "stolen"}),
            ),
            (Method::DELETE, format!("/folders/{hex}/force"), json!(null)),
            (Method::GET, "/folders/secret".into(), json!(null)),
            (Method::GET, "/folders/_/id?name=secret".into(), json!(null)),
            (
                Method::POST,
                "/folders/restore-from-trash-bin".into(),
                json!({"id": hex}),
            ),
            (Method::POST, "/folders/purge".into(), json!({"id": hex})),
            (Method::DELETE, "/folders".into(), json!({"id": hex})),
            (
                Method::GET,
                format!("/folders/_/shared?vfolder_id={hex}"),
                json!(null),
            ),
        ];
        for (m, p, b) in &paths {
            let body = (!b.is_null()).then(|| b.clone());
            let (status, answer) = rest(&app, &stranger, m.clone(), p, body).await;
            assert_eq!(status, 404, "{m} {p}: {answer}");
            assert!(
                answer["type"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("https://api.backend.ai/probs/"),
                "{answer}"
            );
            assert!(answer["title"].is_string(), "{answer}");
        }
        let (_, listed) = rest(&app, &stranger, Method::GET, "/folders", None).await;
        assert_eq!(listed, json!([]));

        // A read-only invitee: reads, never writes (REST, GraphQL, tokens).
        let (s, inv) = rest(
            &app,
            &owner,
            Method::POST,
            &format!("/folders/{hex}/invite"),
            Some(
                json!({"perm": "ro", "user_ids": ["reader@x.org", "nobody@x.org", "owner@x.org"]}),
            ),
        )
        .await;
        // Every address given is answered (but the owner's own): whether one belongs to an
        // account is never told.
        assert_eq!(
            (s, &inv["invited_ids"]),
            (201, &json!(["nobody@x.org", "reader@x.org"])),
            "{inv}"
        );
        let (_, list) = rest(
            &app,
            &reader,
            Method::GET,
            "/folders/invitations/list",
            None,
        )
        .await;
        let inv_id = list["invitations"][0]["id"].as_str().unwrap().to_string();
        assert_eq!(list["invitations"][0]["inviter"], "owner@x.org");
        assert_eq!(list["invitations"][0]["perm"], "ro");
        // Today's shape beside the older one (Backend.AI's newer clients, Lablup's tester).
        let inv = &list["invitations"][0];
        assert_eq!(
            (
                &inv["status"],
                &inv["invitee_user_email"],
                &inv["inviter_user_email"],
                &inv["mount_permission"]
            ),
            (
                &json!("pending"),
                &json!("reader@x.org"),
                &json!("owner@x.org"),
                &json!("ro")
            ),
            "{list}"
        );
        // Another user cannot accept or decline it.
        for p in ["/folders/invitations/accept", "/folders/invitations/delete"] {
            let (s, a) = rest(
                &app,
                &stranger,
                Method::POST,
                p,
                Some(json!({"inv_id": inv_id})),
            )
            .await;
            assert_eq!(s, 404, "{p}: {a}");
        }
        let (s, a) = rest(
            &app,
            &reader,
            Method::POST,
            "/folders/invitations/accept",
            Some(json!({"inv_id": inv_id})),
        )
        .await;
        assert_eq!(s, 200, "{a}");
        let (s, info) = rest(&app, &reader, Method::GET, "/folders/secret", None).await;
        assert_eq!(
            (s, &info["permission"], &info["is_owner"]),
            (200, &json!("ro"), &json!(false)),
            "{info}"
        );
        let (s, dl) = download_url(&app, &reader, &hex, "data/notes.txt").await;
        assert_eq!(s, 200, "{dl}");
        let got = app.http.get(&dl).send().await.unwrap();
        assert_eq!(got.bytes().await.unwrap().as_ref(), b"0123456789");
        for (m, p, b) in [
            (
                Method::POST,
                "request-upload",
                json!({"path": "w", "size": 1}),
            ),
            (
                Method::DELETE,
                "delete-files",
                json!({"files": ["data/notes.txt"]}),
            ),
            (
                Method::POST,
                "rename-file",
                json!({"target_path": "data", "new_name": "y"}),
            ),
            (
                Method::POST,
                "move-file",
                json!({"src": "data", "dst": "z"}),
            ),
            (Method::POST, "mkdir", json!({"path": "x"})),
            (Method::POST, "rename", json!({"new_name": "x"})),
        ] {
            let (s, a) = rest(
                &app,
                &reader,
                m.clone(),
                &format!("/folders/{hex}/{p}"),
                Some(b),
            )
            .await;
            assert_eq!(s, 403, "{p}: {a}");
        }
        // Invitations are looked up among the caller's own user folders, as Backend.AI's
        // (its tester expects 404 when an invitee invites to a folder shared with them).
        let (s, a) = rest(
            &app,
            &reader,
            Method::POST,
            &format!("/folders/{hex}/invite"),
            Some(json!({"user_ids": ["stranger@x.org"]})),
        )
        .await;
        assert_eq!(s, 404, "invite: {a}");
        let gql = app
            .gql(
                Some(&reader),
                "mutation($id: UUID!) { create_vfolder_directory(id: $id, path: \"x\") { ok } }",
                json!({"id": hex}),
            )
            .await;
        assert_code(&gql, "FORBIDDEN");

        // A share revoked: the token it gave is dead, and the folder is gone for the reader.
        let (s, _) = rest(
            &app,
            &owner,
            Method::POST,
            "/folders/_/shared",
            Some(json!({"vfolder": hex, "user": reader_uuid(&app, &reader).await, "perm": "rw"})),
        )
        .await;
        assert_eq!(s, 200);
        let (s, got) = rest(
            &app,
            &reader,
            Method::POST,
            &format!("/folders/{hex}/request-upload"),
            Some(json!({"path": "late.txt", "size": 3})),
        )
        .await;
        assert_eq!(s, 200, "{got}");
        let late = format!(
            "{}?token={}",
            got["url"].as_str().unwrap(),
            got["token"].as_str().unwrap()
        );
        let (s, _) = rest(
            &app,
            &owner,
            Method::POST,
            &format!("/folders/{hex}/leave"),
            Some(json!({"shared_user_uuid": reader_uuid(&app, &reader).await})),
        )
        .await;
        assert_eq!(s, 200);
        let patch = app
            .http
            .patch(&late)
            .header("upload-offset", "0")
            .body("abc")
            .send()
            .await
            .unwrap();
        assert_eq!(patch.status(), 404);
        let (s, _) = rest(&app, &reader, Method::GET, &format!("/folders/{hex}"), None).await;
        assert_eq!(s, 404);

        // An upload token: single use, bound to its path, expired when its time is up.
        let (s, used) = upload(&app, &owner, &hex, "once.txt", b"one").await;
        assert_eq!(s, 204);
        let again = app
            .http
            .patch(&used)
            .header("upload-offset", "0")
            .body("two")
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 404);
        let head = app.http.head(&used).send().await.unwrap();
        assert_eq!(head.status(), 404);
        let (s, got) = rest(
            &app,
            &owner,
            Method::POST,
            &format!("/folders/{hex}/request-upload"),
            Some(json!({"path": "slow.txt", "size": 4})),
        )
        .await;
        assert_eq!(s, 200);
        let slow = format!(
            "{}?token={}",
            got["url"].as_str().unwrap(),
            got["token"].as_str().unwrap()
        );
        // Half of it, a wrong offset, more than declared: refused; then time runs out.
        let half = app
            .http
            .patch(&slow)
            .header("upload-offset", "0")
            .body("ab")
            .send()
            .await
            .unwrap();
        assert_eq!(
            (
                half.status().as_u16(),
                half.headers()["upload-offset"].to_str().unwrap()
            ),
            (204, "2")
        );
        let wrong = app
            .http
            .patch(&slow)
            .header("upload-offset", "0")
            .body("cd")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 409);
        let over = app
            .http
            .patch(&slow)
            .header("upload-offset", "2")
            .body("cdef")
            .send()
            .await
            .unwrap();
        assert_eq!(over.status(), 400);
        expire_tokens(&app).await;
        let late = app
            .http
            .patch(&slow)
            .header("upload-offset", "2")
            .body("cd")
            .send()
            .await
            .unwrap();
        assert_eq!(late.status(), 404);
        let (_, files) = rest(
            &app,
            &owner,
            Method::GET,
            &format!("/folders/{hex}/files"),
            None,
        )
        .await;
        let names: Vec<&str> = files["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["data", "once.txt"], "{files}");

        // `../`, absolute paths, links and FIFOs at every path-taking endpoint.
        let host_root = api::storage::hosts(&app.state().config)["local"].clone();
        let root = host_root.join(&hex);
        let outside = host_root.join("outside-marker");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep.txt"), "keep").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
        std::os::unix::fs::symlink(outside.join("keep.txt"), root.join("keep-link")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(root.join("pipe"))
            .status()
            .unwrap();
        assert!(fifo.success());
        for bad in ["../x", "/etc/passwd", "escape/x", "data/../../x", "a/\0"] {
            let (s, a) = rest(
                &app,
                &owner,
                Method::POST,
                &format!("/folders/{hex}/request-upload"),
                Some(json!({"path": bad, "size": 1})),
            )
            .await;
            if s == 200 {
                // A name allowed until the bytes land: they never land through a link.
                let url = format!(
                    "{}?token={}",
                    a["url"].as_str().unwrap(),
                    a["token"].as_str().unwrap()
                );
                let r = app
                    .http
                    .patch(&url)
                    .header("upload-offset", "0")
                    .body("x")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 400, "upload to {bad}");
            } else {
                assert_eq!(s, 400, "upload to {bad}: {a}");
            }
            let (s, a) = rest(
                &app,
                &owner,
                Method::POST,
                &format!("/folders/{hex}/mkdir"),
                Some(json!({"path": bad})),
            )
            .await;
            assert_eq!(s, 400, "mkdir {bad}: {a}");
            let (s, a) = rest(
                &app,
                &owner,
                Method::GET,
                &format!("/folders/{hex}/files?path={}", urlencode(bad)),
                None,
            )
            .await;
            assert!(matches!(s, 400 | 404), "ls {bad}: {a}");
            let (s, a) = rest(
                &app,
                &owner,
                Method::POST,
                &format!("/folders/{hex}/move-file"),
                Some(json!({"src": "once.txt", "dst": bad})),
            )
            .await;
            assert!(matches!(s, 400 | 404), "mv to {bad}: {a}");
            let (s, a) = rest(
                &app,
                &owner,
                Method::POST,
                &format!("/folders/{hex}/rename-file"),
                Some(json!({"target_path": "once.txt", "new_name": bad})),
            )
            .await;
            assert_eq!(s, 400, "rename to {bad}: {a}");
            let (s, a) = rest(
                &app,
                &owner,
                Method::DELETE,
                &format!("/folders/{hex}/delete-files"),
                Some(json!({"files": [bad], "recursive": true})),
            )
            .await;
            assert!(matches!(s, 400 | 404), "rm {bad}: {a}");
        }
        for special in ["escape", "keep-link", "pipe", "escape/keep.txt"] {
            let (s, a) = download_url(&app, &owner, &hex, special).await;
            if s == 200 {
                let r = app.http.get(&a).send().await.unwrap();
                assert_eq!(r.status(), 400, "download of {special}");
            } else {
                assert_eq!(s, 400, "download of {special}: {a}");
            }
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("keep.txt")).unwrap(),
            "keep"
        );
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            1,
            "nothing written outside"
        );

        // Ranges: a resumed download gets the rest; a changed file (If-Range) starts over.
        let (_, dl) = download_url(&app, &owner, &hex, "data/notes.txt").await;
        let part = app
            .http
            .get(&dl)
            .header("range", "bytes=4-")
            .send()
            .await
            .unwrap();
        assert_eq!(part.status(), 206);
        assert_eq!(part.headers()["content-range"], "bytes 4-9/10");
        assert_eq!(part.bytes().await.unwrap().as_ref(), b"456789");
        let stale = app
            .http
            .get(&dl)
            .header("range", "bytes=4-")
            .header("if-range", "Mon, 01 Jan 2001 00:00:00 GMT")
            .send()
            .await
            .unwrap();
        assert_eq!(stale.status(), 200);
        assert_eq!(stale.headers()["content-length"], "10");
    }
);

both_dbs!(
    trash_limits_and_admins_against_superadmins,
    |db| async move {
        let app = spawn(db).await;
        let owner = app.user("trash@x.org", "user", "default").await;
        let admin = app.user("dadmin@x.org", "admin", "default").await;
        let made = make(&app, &owner, json!({"name": "bin"})).await;
        let hex = made["id"].as_str().unwrap().to_string();
        // Delete moves to the trash: listed with its status, unusable until restored.
        let (s, _) = rest(&app, &owner, Method::DELETE, "/folders/bin", None).await;
        assert_eq!(s, 204);
        let (_, listed) = rest(&app, &owner, Method::GET, "/folders", None).await;
        assert_eq!(listed[0]["status"], "delete-pending", "{listed}");
        let (s, id) = rest(
            &app,
            &owner,
            Method::GET,
            "/folders/_/id",
            Some(json!({"name": "bin"})),
        )
        .await;
        assert_eq!((s, id["name"].as_str()), (200, Some("bin")), "{id}");
        let (s, a) = rest(
            &app,
            &owner,
            Method::POST,
            &format!("/folders/{hex}/mkdir"),
            Some(json!({"path": "x"})),
        )
        .await;
        assert_eq!(s, 400, "{a}");
        assert!(a["title"].as_str().unwrap().contains("trash"), "{a}");
        // The name stays taken while it is in the trash.
        let (s, _) = rest(
            &app,
            &owner,
            Method::POST,
            "/folders",
            Some(json!({"name": "bin"})),
        )
        .await;
        assert_eq!(s, 409);
        let (s, _) = rest(
            &app,
            &owner,
            Method::POST,
            "/folders/restore-from-trash-bin",
            Some(json!({"id": hex})),
        )
        .await;
        assert_eq!(s, 204);
        let (s, a) = rest(
            &app,
            &owner,
            Method::POST,
            "/folders/purge",
            Some(json!({"id": hex})),
        )
        .await;
        assert_eq!(s, 400, "purging a folder not in the trash: {a}");
        let (s, _) = rest(
            &app,
            &owner,
            Method::DELETE,
            "/folders",
            Some(json!({"id": hex})),
        )
        .await;
        assert_eq!(s, 204);
        let (s, _) = rest(
            &app,
            &owner,
            Method::POST,
            "/folders/delete-from-trash-bin",
            Some(json!({"id": hex})),
        )
        .await;
        assert_eq!(s, 204);
        let (s, _) = rest(&app, &owner, Method::GET, &format!("/folders/{hex}"), None).await;
        assert_eq!(s, 404);
        let root = api::storage::hosts(&app.state().config)["local"].join(&hex);
        assert!(!root.exists(), "files gone for good");

        // A domain admin empties its domain's trash, never a superadmin's folder.
        let su = app.admin_token.clone();
        let theirs = make(&app, &su, json!({"name": "su-bin"})).await;
        let su_hex = theirs["id"].as_str().unwrap().to_string();
        let users = make(&app, &owner, json!({"name": "user-bin"})).await;
        for (t, h) in [
            (&su, &su_hex),
            (&owner, &users["id"].as_str().unwrap().to_string()),
        ] {
            let (s, _) = rest(&app, t, Method::DELETE, "/folders", Some(json!({"id": h}))).await;
            assert_eq!(s, 204);
        }
        let (s, a) = rest(
            &app,
            &admin,
            Method::POST,
            "/folders/purge",
            Some(json!({"id": su_hex})),
        )
        .await;
        assert_eq!(s, 404, "a domain admin purging a superadmin's folder: {a}");
        let emptied = app
            .ok(Some(&admin), "mutation { empty_vfolder_trash }", json!({}))
            .await;
        assert_eq!(emptied["empty_vfolder_trash"], 1, "{emptied}");
        let (s, su_info) = rest(&app, &su, Method::GET, &format!("/folders/{su_hex}"), None).await;
        assert_eq!((s, &su_info["status"]), (200, &json!("delete-pending")));

        // The size limit: an upload that would pass it is refused with the figures.
        let mut policy = TestApp::open_policy();
        policy.max_vfolder_size = Some(1000);
        app.use_policy(&owner, "small", policy).await;
        let small = make(&app, &owner, json!({"name": "small"})).await;
        let (s, a) = rest(
            &app,
            &owner,
            Method::POST,
            &format!("/folders/{}/request-upload", small["id"].as_str().unwrap()),
            Some(json!({"path": "big", "size": 2000})),
        )
        .await;
        assert_eq!(s, 400, "{a}");
        assert!(a["title"].as_str().unwrap().contains("1000 bytes"), "{a}");
        // The folder count limit holds through REST too.
        let (_, listed) = rest(&app, &owner, Method::GET, "/folders", None).await;
        assert!(
            listed
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["cur_size"].is_number()),
            "{listed}"
        );
    }
);

async fn reader_uuid(app: &TestApp, token: &str) -> String {
    app.ok(Some(token), "{ user { uuid } }", json!({})).await["user"]["uuid"]
        .as_str()
        .unwrap()
        .to_string()
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every transfer token ends now (as if a day passed).
async fn expire_tokens(app: &TestApp) {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
    entity::vfolder_transfers::Entity::update_many()
        .col_expr(
            entity::vfolder_transfers::Column::ExpiresAt,
            Expr::value(chrono::Utc::now() - chrono::Duration::seconds(1)),
        )
        .filter(entity::vfolder_transfers::Column::Op.eq("upload"))
        .exec(&app.state().db)
        .await
        .unwrap();
}

/// Backend.AI's official CLI `v` ("23": 23.9.10, "26": 26.9.x) through every `vfolder`
/// command a user has: create, list, list-hosts, info, upload (20 MiB and a directory), ls,
/// download (bytes compared), mkdir, mv, rename-file, rm, rename, invite / invitations,
/// share, clone, update-options, leave, delete, and with 26 restore and delete-trash.
async fn vfolder_commands(app: &TestApp, v: &str, owner: &str, invitee: &str) {
    use crate::cli::Cli;
    let (a, b) = if v == "26" {
        (
            Cli::for_user26(app, owner).await,
            Cli::for_user26(app, invitee).await,
        )
    } else {
        (
            Cli::for_user(app, owner).await,
            Cli::for_user(app, invitee).await,
        )
    };
    let admin = if v == "26" {
        Cli::for_user26(app, &app.admin_token).await
    } else {
        Cli::for_user(app, &app.admin_token).await
    };
    let ok = |out: &crate::cli::Out, what: &str| assert!(out.ok, "{v} {what}: {out}");
    let name = format!("data{v}");
    let out = a.run(&["vfolder", "list-hosts"]).await;
    ok(&out, "list-hosts");
    assert!(out.stdout.contains("local"), "{out}");
    let out = a.run(&["vfolder", "create", &name, "local"]).await;
    ok(&out, "create");
    assert!(
        out.stdout.contains(&format!("\"{name}\" is created")),
        "{out}"
    );
    let clonable = format!("cl{v}");
    ok(
        &a.run(&["vfolder", "create", &clonable, "local", "--cloneable"])
            .await,
        "create --cloneable",
    );
    let out = a.run(&["vfolder", "list"]).await;
    ok(&out, "list");
    assert!(
        out.stdout.contains("Ownership Type") && out.stdout.contains(&name),
        "{out}"
    );
    let out = a.run(&["vfolder", "info", &name]).await;
    ok(&out, "info");
    assert!(
        out.stdout.contains(&format!("Virtual folder \"{name}\"")),
        "{out}"
    );
    assert!(out.stdout.contains("- Owner: True"), "{out}");

    // 20 MiB and a directory up; listed; the big one down again, byte for byte.
    let big: Vec<u8> = (0..20u32 * 1024 * 1024)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(a.dir().join("big.bin"), &big).unwrap();
    std::fs::create_dir_all(a.dir().join("tree/sub")).unwrap();
    std::fs::write(a.dir().join("tree/a.txt"), "a").unwrap();
    std::fs::write(a.dir().join("tree/sub/b.txt"), "bb").unwrap();
    ok(
        &a.run(&["vfolder", "upload", &name, "big.bin"]).await,
        "upload",
    );
    ok(
        &a.run(&["vfolder", "upload", &name, "tree", "-r"]).await,
        "upload -r",
    );
    let out = a.run(&["vfolder", "ls", &name]).await;
    assert!(
        out.stdout.contains("big.bin") && out.stdout.contains("tree"),
        "{v} ls: {out}"
    );
    assert!(out.stdout.contains("20971520"), "{v} ls sizes: {out}");
    let out = a.run(&["vfolder", "ls", &name, "tree/sub"]).await;
    assert!(out.stdout.contains("b.txt"), "{v} ls tree/sub: {out}");
    std::fs::create_dir_all(a.dir().join("down")).unwrap();
    ok(
        &a.run(&["vfolder", "download", &name, "big.bin", "-b", "down"])
            .await,
        "download",
    );
    assert!(
        std::fs::read(a.dir().join("down/big.bin")).unwrap() == big,
        "{v}: the download differs"
    );

    // Files moved about, renamed and removed.
    ok(&a.run(&["vfolder", "mkdir", &name, "made"]).await, "mkdir");
    ok(
        &a.run(&["vfolder", "mv", &name, "tree/a.txt", "made"]).await,
        "mv",
    );
    ok(
        &a.run(&["vfolder", "rename-file", &name, "made/a.txt", "c.txt"])
            .await,
        "rename-file",
    );
    let out = a.run(&["vfolder", "ls", &name, "made"]).await;
    assert!(
        out.stdout.contains("c.txt") && !out.stdout.contains("a.txt"),
        "{v}: {out}"
    );
    ok(
        &a.run_input(&["vfolder", "rm", &name, "made/c.txt"], "y\n")
            .await,
        "rm",
    );
    let out = a.run(&["vfolder", "ls", &name, "made"]).await;
    assert!(!out.stdout.contains("c.txt"), "{v}: {out}");
    let renamed = format!("shared{v}");
    ok(
        &a.run(&["vfolder", "rename", &name, &renamed]).await,
        "rename",
    );

    // Shared with the invitee read-only: accepted, listed, readable, never writable.
    let out = a
        .run(&["vfolder", "invite", &renamed, "inv@x.org", "-p", "ro"])
        .await;
    ok(&out, "invite");
    assert!(out.stdout.contains("inv@x.org"), "{out}");
    let out = b.run_input(&["vfolder", "invitations"], "1\na\n").await;
    ok(&out, "invitations");
    assert!(out.stdout.contains("You can now access"), "{v}: {out}");
    let out = b.run(&["vfolder", "info", &renamed]).await;
    ok(&out, "info (invitee)");
    assert!(
        out.stdout.contains("- Permission: ro") && out.stdout.contains("- Owner: False"),
        "{out}"
    );
    std::fs::write(b.dir().join("intruder.txt"), "x").unwrap();
    let out = b
        .run(&["vfolder", "upload", &renamed, "intruder.txt"])
        .await;
    assert!(
        out.refused("403 Forbidden", "You may not upload files in this folder."),
        "{v}: a read-only invitee uploaded: {out}"
    );
    std::fs::create_dir_all(b.dir().join("got/tree/sub")).unwrap();
    ok(
        &b.run(&[
            "vfolder",
            "download",
            &renamed,
            "tree/sub/b.txt",
            "-b",
            "got",
        ])
        .await,
        "download (invitee)",
    );
    assert_eq!(
        std::fs::read_to_string(b.dir().join("got/tree/sub/b.txt"))
            .ok()
            .or_else(|| std::fs::read_to_string(b.dir().join("got/b.txt")).ok())
            .as_deref(),
        Some("bb")
    );
    let out = b.run(&["vfolder", "leave", &renamed]).await;
    ok(&out, "leave");
    assert!(
        out.stdout.contains("Left the shared virtual folder"),
        "{out}"
    );
    let out = b.run(&["vfolder", "info", &renamed]).await;
    assert!(
        out.refused("404 Not Found", &format!("folder '{renamed}' not found")),
        "{v}: still reachable after leaving: {out}"
    );

    // A project folder shared with a member by the admin.
    let project = format!("proj{v}");
    ok(
        &admin
            .run(&["vfolder", "create", &project, "local", "-g", "default"])
            .await,
        "create -g",
    );
    let out = admin
        .run(&["vfolder", "share", &project, "inv@x.org", "-p", "ro"])
        .await;
    ok(&out, "share");
    assert!(out.stdout.contains("inv@x.org"), "{out}");
    let out = b.run(&["vfolder", "info", &project]).await;
    assert!(out.stdout.contains("- Permission: ro"), "{v}: {out}");
    let out = admin
        .run(&["vfolder", "unshare", &project, "inv@x.org"])
        .await;
    ok(&out, "unshare");
    assert!(out.stdout.contains("inv@x.org"), "{out}");

    // Clone (a background task followed to its end) and options.
    ok(
        &a.run(&["vfolder", "upload", &clonable, "big.bin"]).await,
        "upload to clone",
    );
    let copy = format!("copy{v}");
    let out = a
        .run(&["vfolder", "clone", &clonable, &copy, "local"])
        .await;
    ok(&out, "clone");
    let out = a.run(&["vfolder", "ls", &copy]).await;
    assert!(
        out.stdout.contains("big.bin") && out.stdout.contains("20971520"),
        "{v} clone: {out}"
    );
    ok(
        &a.run(&[
            "vfolder",
            "update-options",
            &copy,
            "-p",
            "ro",
            "--set-cloneable",
            "true",
        ])
        .await,
        "update-options",
    );

    // Delete: to the trash; 26 restores it and deletes it for good.
    ok(&a.run(&["vfolder", "delete", &copy]).await, "delete");
    let status = app
        .ok(
            Some(owner),
            "query { vfolder_list(limit: 100, offset: 0) { items { name status } } }",
            json!({}),
        )
        .await;
    let items = status["vfolder_list"]["items"].as_array().unwrap().clone();
    assert!(
        items
            .iter()
            .any(|i| i["name"] == copy.as_str() && i["status"] == "delete-pending"),
        "{v}: {status}"
    );
    if v == "26" {
        ok(&a.run(&["vfolder", "restore", &copy]).await, "restore");
        ok(&a.run(&["vfolder", "delete", &copy]).await, "delete again");
        ok(
            &a.run(&["vfolder", "delete-trash", &copy]).await,
            "delete-trash",
        );
        let out = a.run(&["vfolder", "info", &copy]).await;
        assert!(
            out.refused("404 Not Found", &format!("folder '{copy}' not found")),
            "{v}: deleted for good, still there: {out}"
        );
    }
}

both_dbs!(both_official_clients_use_folders_whole, |db| async move {
    let app = spawn(db).await;
    let owner = app.user("own@x.org", "user", "default").await;
    let invitee = app.user("inv@x.org", "user", "default").await;
    // The invitee is a member of the default project (for a project folder's share).
    let groups = app.admin("{ groups { id name } }", json!({})).await;
    let default = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "default")
        .unwrap()["id"]
        .clone();
    let inv_uuid = reader_uuid(&app, &invitee).await;
    app.admin(
        "mutation($gid: UUID!, $u: [UUID!]) { modify_group(gid: $gid, props: {user_update_mode: \"add\", user_uuids: $u}) { ok } }",
        json!({"gid": default, "u": [inv_uuid]}),
    )
    .await;
    vfolder_commands(&app, "23", &owner, &invitee).await;
    vfolder_commands(&app, "26", &owner, &invitee).await;
});
