//! Dotfiles (`/user-config|group-config|domain-config/dotfiles`): the attack first — another
//! keypair's, another domain's, a user writing its project's or domain's, `../`, absolute
//! paths, reserved names, set-id bits, the size bound — then both official clients'
//! `dotfile` commands, and a session (started with the `python` alias the first start seeded)
//! that finds the domain's, the project's and its own files, the nearest owner's winning.
use reqwest::Method;
use serde_json::{Value, json};

use crate::both_dbs;
use crate::cli::Cli;
use crate::support::*;

const USER: &str = "/user-config/dotfiles";
const GROUP: &str = "/group-config/dotfiles";
const DOMAIN: &str = "/domain-config/dotfiles";

fn file(path: &str, data: &str, perm: &str) -> Value {
    json!({"path": path, "data": data, "permission": perm})
}

fn with(mut v: Value, extra: Value) -> Value {
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

both_dbs!(
    dotfiles_reach_sessions_and_strangers_get_nothing,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let alice = app.user("dot-alice@x.org", "user", "default").await;
        let bob = app.user("dot-bob@x.org", "user", "default").await;
        app.create_domain("dotlab").await;
        let lab_admin = app.user("dot-boss@lab.org", "admin", "dotlab").await;
        let admin = app.admin_token.clone();
        let alice_key = app.access_key(&alice).await;

        // Alice's own.
        let (st, body) = rest(
            &app,
            &alice,
            Method::POST,
            USER,
            Some(file(".vimrc", "set nu\n", "644")),
        )
        .await;
        assert_eq!(st, 200, "{body}");
        let (st, _) = rest(
            &app,
            &alice,
            Method::POST,
            USER,
            Some(file(".vimrc", "x", "644")),
        )
        .await;
        assert_eq!(st, 409, "a second create of one path");

        // Bad paths and permissions, each refused with the reason.
        for (path, perm) in [
            ("../etc/passwd", "644"),
            ("/etc/passwd", "644"),
            ("a/../../x", "644"),
            (".ssh/authorized_keys", "600"),
            (".ssh", "700"),
            ("", "644"),
            (".x", "4755"),
            (".x", "rwx"),
        ] {
            let (st, body) = rest(
                &app,
                &alice,
                Method::POST,
                USER,
                Some(file(path, "x", perm)),
            )
            .await;
            assert_eq!(st, 400, "{path} {perm}: {body}");
            assert!(
                body["title"].as_str().is_some_and(|t| !t.is_empty()),
                "{body}"
            );
        }
        // The size bound: 64 KiB per owner together.
        let big = "y".repeat(70 * 1024);
        let (st, body) = rest(
            &app,
            &alice,
            Method::POST,
            USER,
            Some(file(".big", &big, "644")),
        )
        .await;
        assert_eq!(st, 400, "{body}");

        // Strangers: Bob names Alice's keypair; the lab's admin names Alice's keypair, the
        // default domain and its project: NOT_FOUND each, nothing changed.
        for (token, method, path, body) in [
            (
                &bob,
                Method::GET,
                format!("{USER}?owner_access_key={alice_key}"),
                None,
            ),
            (
                &bob,
                Method::DELETE,
                format!("{USER}?owner_access_key={alice_key}&path=.vimrc"),
                None,
            ),
            (
                &bob,
                Method::PATCH,
                USER.to_string(),
                Some(with(
                    file(".vimrc", "pwned", "644"),
                    json!({"owner_access_key": alice_key}),
                )),
            ),
            (
                &lab_admin,
                Method::GET,
                format!("{USER}?owner_access_key={alice_key}"),
                None,
            ),
            (
                &lab_admin,
                Method::POST,
                DOMAIN.to_string(),
                Some(with(file(".d", "x", "644"), json!({"domain": "default"}))),
            ),
            (
                &lab_admin,
                Method::GET,
                format!("{DOMAIN}?domain=default"),
                None,
            ),
            (
                &lab_admin,
                Method::POST,
                GROUP.to_string(),
                Some(with(
                    file(".g", "x", "644"),
                    json!({"group": "default", "domain": "default"}),
                )),
            ),
            (&bob, Method::GET, format!("{DOMAIN}?domain=dotlab"), None),
            (&bob, Method::GET, format!("{GROUP}?group=nope"), None),
        ] {
            let (st, answer) = rest(&app, token, method.clone(), &path, body).await;
            assert_eq!(st, 404, "{method} {path}: {answer}");
        }
        // A domain admin against the superadmin: the superadmin's keypair is not its to see.
        let default_admin = app.user("dot-admin@x.org", "admin", "default").await;
        let super_key = app.access_key(&app.admin_token).await;
        for method in [Method::GET, Method::POST] {
            let (st, answer) = rest(
                &app,
                &default_admin,
                method.clone(),
                &format!("{USER}?owner_access_key={super_key}"),
                Some(with(
                    file(".planted", "x", "644"),
                    json!({"owner_access_key": super_key}),
                )),
            )
            .await;
            assert_eq!(st, 404, "{method}: {answer}");
        }
        let (_, got) = rest(
            &app,
            &alice,
            Method::GET,
            &format!("{USER}?path=.vimrc"),
            None,
        )
        .await;
        assert_eq!(
            got,
            json!({"path": ".vimrc", "permission": "644", "data": "set nu\n"})
        );

        // A user reads but does not write its project's and its domain's.
        let (st, _) = rest(
            &app,
            &alice,
            Method::POST,
            GROUP,
            Some(with(file(".g", "x", "644"), json!({"group": "default"}))),
        )
        .await;
        assert_eq!(st, 403);
        let (st, _) = rest(
            &app,
            &alice,
            Method::POST,
            DOMAIN,
            Some(with(file(".d", "x", "644"), json!({"domain": "default"}))),
        )
        .await;
        assert_eq!(st, 403);
        let (st, listed) = rest(
            &app,
            &alice,
            Method::GET,
            &format!("{DOMAIN}?domain=default"),
            None,
        )
        .await;
        assert_eq!((st, listed), (200, json!([])));

        // The superadmin writes the domain's and the project's; the lab's admin its own domain's.
        for (path, scope, data) in [
            (DOMAIN, json!({"domain": "default"}), ".from-domain"),
            (GROUP, json!({"group": "default"}), ".from-group"),
        ] {
            for (name, content) in [(data, data), (".shared", data)] {
                let (st, body) = rest(
                    &app,
                    &admin,
                    Method::POST,
                    path,
                    Some(with(file(name, content, "640"), scope.clone())),
                )
                .await;
                assert_eq!(st, 200, "{body}");
            }
        }
        let (st, body) = rest(
            &app,
            &lab_admin,
            Method::POST,
            DOMAIN,
            Some(with(file(".lab", "x", "644"), json!({"domain": "dotlab"}))),
        )
        .await;
        assert_eq!(st, 200, "{body}");
        let (st, body) = rest(
            &app,
            &alice,
            Method::POST,
            USER,
            Some(file(".shared", "from-alice", "600")),
        )
        .await;
        assert_eq!(st, 200, "{body}");
        let (st, body) = rest(
            &app,
            &alice,
            Method::POST,
            USER,
            Some(file("/home/work/.config/tool/rc", "nested", "755")),
        )
        .await;
        assert_eq!(st, 200, "{body}");

        // The 26.x client reads the domain's and the project's (`-d`, `-g`) as Alice.
        let cli26 = Cli::for_user26(&app, &alice).await;
        let domain = cli26.run(&["dotfile", "list", "-d", "default"]).await;
        assert!(
            domain.ok && domain.stdout.contains(".from-domain"),
            "{domain}"
        );
        let project = cli26
            .run(&["dotfile", "list", "-g", "default", "-d", "default"])
            .await;
        assert!(
            project.ok && project.stdout.contains(".from-group"),
            "{project}"
        );

        // Both official clients: create from a file, list, get, update, delete.
        for (n, cli) in [
            (23, Cli::for_user(&app, &alice).await),
            (26, Cli::for_user26(&app, &alice).await),
        ] {
            let name = format!(".rc{n}");
            std::fs::write(cli.dir().join("rc"), format!("rc {n}\n")).unwrap();
            let made = cli
                .run(&["dotfile", "create", &name, "-f", "rc", "--perm", "600"])
                .await;
            assert!(made.ok, "{made}");
            let listed = cli.run(&["dotfile", "list"]).await;
            assert!(
                listed.ok && listed.stdout.contains(&name) && listed.stdout.contains(".vimrc"),
                "{listed}"
            );
            let got = cli.run(&["dotfile", "get", &name]).await;
            assert!(got.ok && got.stdout.contains(&format!("rc {n}")), "{got}");
            std::fs::write(cli.dir().join("rc"), "changed\n").unwrap();
            let upd = cli
                .run(&["dotfile", "update", &name, "-f", "rc", "--perm", "644"])
                .await;
            assert!(upd.ok, "{upd}");
            let got = cli.run(&["dotfile", "get", &name]).await;
            assert!(got.stdout.contains("changed"), "{got}");
            let del = cli.run(&["dotfile", "delete", "-f", &name]).await;
            assert!(del.ok, "{del}");
            let gone = cli.run(&["dotfile", "get", &name]).await;
            assert!(
                gone.refused("404 Not Found", &format!("dotfile '{name}' not found")),
                "{gone}"
            );
            assert!(!format!("{gone}").contains("Traceback"), "{gone}");
        }

        // A session finds them all; Alice's `.shared` over the project's over the domain's.
        let cli = Cli::for_user26(&app, &alice).await;
        let code = "import os\n\
        for p in ['.vimrc', '.from-domain', '.from-group', '.shared', '.config/tool/rc', '.lab']:\n\
        \x20   f = '/home/work/' + p\n\
        \x20   print(p, open(f).read().strip() if os.path.exists(f) else '-', oct(os.stat(f).st_mode & 0o777) if os.path.exists(f) else '-', os.stat(f).st_uid if os.path.exists(f) else '-')\n\
        print('dir', os.stat('/home/work/.config/tool').st_uid)\n";
        let ran = cli.run(&["run", "--rm", "-c", code, "python"]).await;
        assert!(ran.ok, "{ran}");
        for line in [
            ".vimrc set nu 0o644 1000",
            ".from-domain .from-domain 0o640 1000",
            ".from-group .from-group 0o640 1000",
            ".shared from-alice 0o600 1000",
            ".config/tool/rc nested 0o755 1000",
            ".lab - - -",
            "dir 1000",
        ] {
            assert!(ran.stdout.contains(line), "{line}: {ran}");
        }
    }
);
