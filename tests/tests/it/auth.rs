//! Accounts and authentication: signup on/off, login/logout/expiry, password rules and
//! changes, HMAC request signing, rate limits.
use graphql_client::GraphQLQuery;
use serde_json::Value;

use crate::both_dbs;
use crate::gql;
use crate::support::*;

/// `login(email, password)` without a token: the whole answer.
pub(crate) async fn login_body(app: &TestApp, email: &str, password: &str) -> Value {
    app.op::<gql::Login>(
        None,
        gql::login::Variables {
            email: email.into(),
            password: password.into(),
        },
    )
    .await
}

both_dbs!(signup_is_refused_when_disabled, |db| async move {
    let app = spawn(db).await;
    let body = app
        .op::<gql::auth::Signup>(
            None,
            gql::auth::signup::Variables {
                email: "new@x.org".into(),
                username: "new".into(),
                password: "Abcdef1!".into(),
                password2: "Abcdef1!".into(),
                invitation_token: None,
                agreed_to_terms: true,
            },
        )
        .await;
    assert_code(&body, "FORBIDDEN");
    assert!(message(&body).contains("Signup is disabled"), "{body}");
    // And the account really does not exist: logging in fails.
    let login = login_body(&app, "new@x.org", "Abcdef1!").await;
    assert_code(&login, "UNAUTHENTICATED");
    let cfg = app
        .op_ok::<gql::auth::SignupConfig>(None, Default::default())
        .await;
    assert_eq!(cfg["signup_config"]["enabled"], false);
});

both_dbs!(signup_with_invitation_token_and_terms, |db| async move {
    let app = spawn_with(db, |c| {
        c.signup_enabled = true;
        c.signup_invitation_token = Some("beta-2026".into());
    })
    .await;
    let vars = |p: &str, p2: &str, t: &str, a: bool| gql::auth::signup::Variables {
        email: "tester@test.com".into(),
        username: "tester".into(),
        password: p.into(),
        password2: p2.into(),
        invitation_token: Some(t.into()),
        agreed_to_terms: a,
    };
    let signup = |v| app.op::<gql::auth::Signup>(None, v);
    let wrong_token = signup(vars("Tester-01", "Tester-01", "nope", true)).await;
    assert_code(&wrong_token, "FORBIDDEN");
    let no_terms = signup(vars("Tester-01", "Tester-01", "beta-2026", false)).await;
    assert_code(&no_terms, "BAD_REQUEST");
    let mismatch = signup(vars("Tester-01", "Tester-02", "beta-2026", true)).await;
    assert_code(&mismatch, "BAD_REQUEST");
    let weak = signup(vars("weakpass", "weakpass", "beta-2026", true)).await;
    assert_code(&weak, "BAD_REQUEST");
    assert!(message(&weak).contains("special character"), "{weak}");
    app.op_ok::<gql::auth::Signup>(None, vars("Tester-01", "Tester-01", "beta-2026", true))
        .await;
    let again = signup(vars("Tester-01", "Tester-01", "beta-2026", true)).await;
    assert_code(&again, "CONFLICT");
    let token = app.login("tester@test.com", "Tester-01").await;
    let me = app
        .op_ok::<gql::auth::MeDetails>(Some(&token), Default::default())
        .await;
    assert_eq!(me["user"]["role"], "user");
    assert_eq!(me["user"]["domain_name"], "default");
    assert_eq!(me["user"]["groups"][0]["name"], "default");
});

/// The caller's email (`UserEmail` without arguments) as a request body, for requests the
/// test sends itself (with a cookie, an origin, a revoked token).
fn me_query() -> graphql_client::QueryBody<gql::roles::user_email::Variables> {
    gql::roles::UserEmail::build_query(Default::default())
}

fn set_cookie_token(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| {
            let first = c.split(';').next()?;
            let (k, v) = first.split_once('=')?;
            (k == "bai_session").then(|| v.to_string())
        })
}

both_dbs!(login_cookie_logout_and_expiry, |db| async move {
    let app = spawn_with(db, |c| c.login_session_ttl_secs = 2).await;
    let bad = login_body(&app, "admin@bai.local", "wrong-Pass1").await;
    assert_code(&bad, "UNAUTHENTICATED");
    let unknown = login_body(&app, "ghost@bai.local", "wrong-Pass1").await;
    assert_eq!(
        message(&bad),
        message(&unknown),
        "same message for unknown email and wrong password"
    );

    let resp = app
        .http
        .post(app.url("/graphql"))
        .json(&gql::Login::build_query(gql::login::Variables {
            email: ADMIN_EMAIL.into(),
            password: ADMIN_PASSWORD.into(),
        }))
        .send()
        .await
        .unwrap();
    let raw_cookie = resp
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        raw_cookie.contains("HttpOnly") && raw_cookie.contains("SameSite=Strict"),
        "{raw_cookie}"
    );
    let cookie = set_cookie_token(&resp).unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["data"]["login"]["token"].as_str().unwrap(),
        cookie,
        "bearer token = cookie token"
    );

    // The cookie authenticates; a cookie sent from another origin does not.
    let me = |origin: Option<&str>| {
        let mut r = app
            .http
            .post(app.url("/graphql"))
            .header("cookie", format!("bai_session={cookie}"))
            .json(&me_query());
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r
    };
    let same: Value = me(Some(&app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(same["data"]["user"]["email"], ADMIN_EMAIL);
    let foreign: Value = me(Some("http://evil.example"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_code(&foreign, "UNAUTHENTICATED");

    // Logout revokes the token server-side.
    let token = app.login(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    app.op_ok::<gql::auth::Logout>(Some(&token), Default::default())
        .await;
    let after = app
        .http
        .post(app.url("/graphql"))
        .bearer_auth(&token)
        .json(&me_query())
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 401);
    let problem: Value = after.json().await.unwrap();
    assert_eq!(problem["code"], "UNAUTHENTICATED");

    // Expiry: the session lives 2 seconds.
    let token = app.login(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    app.op_ok::<gql::roles::UserEmail>(Some(&token), Default::default())
        .await;
    // Not a synchronisation: wall time must pass for the session's 2 s lifetime to run out.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let expired = app
        .http
        .post(app.url("/graphql"))
        .bearer_auth(&token)
        .json(&me_query())
        .send()
        .await
        .unwrap();
    assert_eq!(expired.status(), 401);
    // Without credentials, protected fields say UNAUTHENTICATED.
    let anon = app
        .op::<gql::roles::UserEmail>(None, Default::default())
        .await;
    assert_code(&anon, "UNAUTHENTICATED");
});

both_dbs!(password_rules_change_and_forced_change, |db| async move {
    let app = spawn(db).await;
    async fn create(app: &TestApp, email: &str, password: &str) -> serde_json::Value {
        let vars = gql::create_user::Variables {
            email: email.into(),
            props: gql::create_user::UserInput {
                username: email.split('@').next().unwrap_or_default().into(),
                password: password.into(),
                need_password_change: false,
                domain_name: "default".into(),
                ..Default::default()
            },
        };
        app.op::<gql::CreateUser>(Some(&app.admin_token), vars)
            .await
    }
    // An administrator's password follows Backend.AI's manager (anything non-empty): the
    // guides' rule is sign-up's and users' own (below), unless the operator extends it.
    let backend_ai = create(&app, "suite@x.org", "password1234").await;
    assert!(backend_ai["errors"].is_null(), "{backend_ai}");
    app.login("suite@x.org", "password1234").await;
    let empty = create(&app, "empty@x.org", "").await;
    assert_code(&empty, "BAD_REQUEST");
    assert!(message(&empty).contains("must not be empty"), "{empty}");
    let strict = spawn_with(db, |c| c.password_rule_for_admins = true).await;
    let weak = create(&strict, "u@x.org", "short1!").await;
    assert_code(&weak, "BAD_REQUEST");
    assert!(message(&weak).contains("at least 8 characters"), "{weak}");
    let token = app.user("u@x.org", "user", "default").await;
    let change = |o: &str, n: &str, n2: &str| gql::auth::change_password::Variables {
        old_password: o.into(),
        new_password: n.into(),
        new_password2: n2.into(),
    };
    for (old, new, new2, why) in [
        (
            "Wrong-pass1",
            "Better-pass2",
            "Better-pass2",
            "wrong current",
        ),
        (USER_PASSWORD, "nodigits!!", "nodigits!!", "no digit"),
        (USER_PASSWORD, "Better-pass2", "Better-pass3", "mismatch"),
    ] {
        let body = app
            .op::<gql::auth::ChangePassword>(Some(&token), change(old, new, new2))
            .await;
        assert_code(&body, "BAD_REQUEST");
        assert!(!message(&body).is_empty(), "{why}");
    }
    app.op_ok::<gql::auth::ChangePassword>(
        Some(&token),
        change(USER_PASSWORD, "Better-pass2", "Better-pass2"),
    )
    .await;
    app.login("u@x.org", "Better-pass2").await;

    // An admin flags the account: login is refused until the password is changed.
    app.admin_op::<gql::ModifyUser>(gql::modify_user::Variables {
        email: "u@x.org".into(),
        props: gql::modify_user::ModifyUserInput {
            need_password_change: Some(true),
            ..Default::default()
        },
    })
    .await;
    let refused = login_body(&app, "u@x.org", "Better-pass2").await;
    assert_code(&refused, "PASSWORD_CHANGE_REQUIRED");
    app.op_ok::<gql::auth::UpdatePasswordNoAuth>(
        None,
        gql::auth::update_password_no_auth::Variables {
            email: "u@x.org".into(),
            current_password: "Better-pass2".into(),
            new_password: "Third-pass3".into(),
            new_password2: "Third-pass3".into(),
        },
    )
    .await;
    app.login("u@x.org", "Third-pass3").await;
});

/// Signs like the official client (common/auth/utils.py), written independently of the server.
fn sign(
    secret: &str,
    method: &str,
    path: &str,
    date: &str,
    host: &str,
    content_type: &str,
    version: &str,
) -> String {
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256};
    type H = Hmac<Sha256>;
    let day = &date[..10].replace('-', "");
    let mut k1 = H::new_from_slice(secret.as_bytes()).unwrap();
    k1.update(day.as_bytes());
    let mut k2 = H::new_from_slice(&k1.finalize().into_bytes()).unwrap();
    k2.update(host.as_bytes());
    let body_hash = hex::encode(Sha256::digest(b""));
    let s = format!(
        "{method}\n{path}\n{date}\nhost:{host}\ncontent-type:{content_type}\nx-backendai-version:{version}\n{body_hash}"
    );
    let mut m = H::new_from_slice(&k2.finalize().into_bytes()).unwrap();
    m.update(s.as_bytes());
    hex::encode(m.finalize().into_bytes())
}

pub(crate) struct Signed<'a> {
    pub(crate) app: &'a TestApp,
    pub(crate) ak: String,
    pub(crate) sk: String,
}

impl Signed<'_> {
    /// POSTs `MyKeypair` to /admin/gql signed for `signed_path` with `date`, sent to `path`.
    pub(crate) async fn post(
        &self,
        path: &str,
        signed_path: &str,
        date: &str,
        secret: Option<&str>,
    ) -> reqwest::Response {
        let body = serde_json::to_value(gql::MyKeypair::build_query(Default::default())).unwrap();
        self.post_body(path, signed_path, date, secret, body).await
    }

    async fn post_body(
        &self,
        path: &str,
        signed_path: &str,
        date: &str,
        secret: Option<&str>,
        body: Value,
    ) -> reqwest::Response {
        self.post_body_via(self.app, path, signed_path, date, secret, body)
            .await
    }

    /// As [`Signed::post`], signed for this server's host but sent to `via` (another manager
    /// behind the same name, as a load balancer would).
    pub(crate) async fn post_via(
        &self,
        via: &TestApp,
        path: &str,
        date: &str,
    ) -> reqwest::Response {
        let body = serde_json::to_value(gql::MyKeypair::build_query(Default::default())).unwrap();
        self.post_body_via(via, path, path, date, None, body).await
    }

    async fn post_body_via(
        &self,
        via: &TestApp,
        path: &str,
        signed_path: &str,
        date: &str,
        secret: Option<&str>,
        body: Value,
    ) -> reqwest::Response {
        let host = self.app.base.trim_start_matches("http://").to_string();
        let version = "v8.20240915";
        let sig = sign(
            secret.unwrap_or(&self.sk),
            "POST",
            signed_path,
            date,
            &host,
            "application/json",
            version,
        );
        via.http
            .post(via.url(path))
            .header("host", &host)
            .header("date", date)
            .header("x-backendai-version", version)
            .header("content-type", "application/json")
            .header(
                "authorization",
                format!(
                    "BackendAI signMethod=HMAC-SHA256, credential={}:{sig}",
                    self.ak
                ),
            )
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    }
}

pub(crate) fn now_iso(offset_secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(offset_secs))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
}

both_dbs!(hmac_signing, |db| async move {
    let app = spawn(db).await;
    let token = app.user("hmac@x.org", "user", "default").await;
    let kp = app
        .op_ok::<gql::MyKeypair>(Some(&token), Default::default())
        .await;
    let s = Signed {
        app: &app,
        ak: kp["keypair"]["access_key"].as_str().unwrap().into(),
        sk: kp["keypair"]["secret_key"].as_str().unwrap().into(),
    };
    assert_eq!(s.ak.len(), 20);
    assert_eq!(s.sk.len(), 40);
    let date = now_iso(0);
    let ok = s.post("/admin/gql", "/admin/gql", &date, None).await;
    assert_eq!(ok.status(), 200);
    // The same signed request again (a replay, perhaps with another body): refused.
    let replay = s.post("/admin/gql", "/admin/gql", &date, None).await;
    assert_eq!(replay.status(), 401);
    let problem: Value = replay.json().await.unwrap();
    assert!(problem.to_string().contains("already used"), "{problem}");
    // The filter bomb through the signed path: refused, and the server keeps serving.
    let bomb = serde_json::to_value(gql::SessionList::build_query(
        gql::session_list::Variables {
            limit: 1,
            offset: 0,
            filter: Some("(".repeat(200_000)),
            ..Default::default()
        },
    ))
    .unwrap();
    let resp = s
        .post_body("/admin/gql", "/admin/gql", &now_iso(0), None, bomb)
        .await;
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "BAD_REQUEST",
        "{body}"
    );
    let body: Value = ok.json().await.unwrap();
    assert_eq!(body["data"]["keypair"]["access_key"], s.ak.as_str());
    assert_eq!(body["data"]["keypair"]["is_admin"], false);

    let wrong_secret = s
        .post(
            "/admin/gql",
            "/admin/gql",
            &now_iso(0),
            Some("x".repeat(40).as_str()),
        )
        .await;
    assert_eq!(wrong_secret.status(), 401);
    let problem: Value = wrong_secret.json().await.unwrap();
    assert_eq!(problem["type"], "https://api.backend.ai/probs/auth-failed");
    // Backend.AI's error_code beside the type (its AuthorizationFailed's).
    assert_eq!(problem["error_code"], "user_auth_unauthorized", "{problem}");
    let stale = s
        .post("/admin/gql", "/admin/gql", &now_iso(-20 * 60), None)
        .await;
    assert_eq!(stale.status(), 401);
    let tampered = s
        .post("/admin/gql?x=1", "/admin/gql", &now_iso(0), None)
        .await;
    assert_eq!(tampered.status(), 401);

    // num_queries and last_used are tracked for the keypair: counted in memory, written in
    // batches (no write on the request path), visible within seconds.
    let kp = eventually(
        "the keypair's two signed queries to be counted",
        WAIT,
        || async {
            let kp = app
                .op_ok::<gql::auth::KeypairUse>(Some(&token), Default::default())
                .await;
            (kp["keypair"]["num_queries"].as_i64().unwrap() >= 2).then_some(kp)
        },
    )
    .await;
    assert!(kp["keypair"]["last_used"].is_string());

    // A deactivated keypair stops working.
    app.admin_op::<gql::ModifyKeypair>(gql::modify_keypair::Variables {
        access_key: s.ak.clone(),
        props: gql::modify_keypair::ModifyKeyPairInput {
            is_active: Some(false),
            ..Default::default()
        },
    })
    .await;
    let inactive = s.post("/admin/gql", "/admin/gql", &now_iso(0), None).await;
    assert_eq!(inactive.status(), 401);
});

both_dbs!(rate_limit_per_keypair, |db| async move {
    let app = spawn(db).await;
    app.user("rl@x.org", "user", "default").await;
    let created = app
        .admin_op::<gql::CreateKeypair>(gql::create_keypair::Variables {
            user_id: "rl@x.org".into(),
            props: gql::create_keypair::KeyPairInput {
                resource_policy: "default".into(),
                rate_limit: 3,
                ..Default::default()
            },
        })
        .await;
    let kp = &created["create_keypair"]["keypair"];
    assert_eq!(kp["rate_limit"], 3);
    let s = Signed {
        app: &app,
        ak: kp["access_key"].as_str().unwrap().into(),
        sk: kp["secret_key"].as_str().unwrap().into(),
    };
    for left in (0..3).rev() {
        let ok = s.post("/admin/gql", "/admin/gql", &now_iso(0), None).await;
        assert_eq!(ok.status(), 200);
        assert_eq!(ok.headers()["x-ratelimit-limit"], "3");
        assert_eq!(
            ok.headers()["x-ratelimit-remaining"],
            left.to_string().as_str()
        );
    }
    let limited = s.post("/admin/gql", "/admin/gql", &now_iso(0), None).await;
    assert_eq!(limited.status(), 429);
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=900).contains(&retry), "{retry}");
    assert_eq!(limited.headers()["x-ratelimit-remaining"], "0");
    assert_eq!(limited.headers()["x-ratelimit-window"], "900");
    let problem: Value = limited.json().await.unwrap();
    assert!(
        problem["title"]
            .as_str()
            .unwrap()
            .contains("at most 3 requests per 15 minutes"),
        "{problem}"
    );
});

both_dbs!(ssh_keypair_refresh, |db| async move {
    let app = spawn(db).await;
    let token = app.user("ssh@x.org", "user", "default").await;
    let before = app
        .op_ok::<gql::auth::SshPublicKeys>(Some(&token), Default::default())
        .await;
    assert!(before["ssh_keypair"]["ssh_public_key"].is_null());
    let fresh = app
        .op_ok::<gql::auth::RefreshSshKeypair>(Some(&token), Default::default())
        .await;
    let public = fresh["refresh_ssh_keypair"]["ssh_public_key"]
        .as_str()
        .unwrap()
        .to_string();
    let private = fresh["refresh_ssh_keypair"]["ssh_private_key"]
        .as_str()
        .unwrap();
    assert!(public.starts_with("ssh-ed25519 "), "{public}");
    assert!(private.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----"));
    let after = app
        .op_ok::<gql::auth::SshPublicKeys>(Some(&token), Default::default())
        .await;
    assert_eq!(after["ssh_keypair"]["ssh_public_key"], public.as_str());
    assert_eq!(after["keypair"]["ssh_public_key"], public.as_str());
    let again = app
        .op_ok::<gql::auth::RefreshSshKeypair>(Some(&token), Default::default())
        .await;
    assert_ne!(
        again["refresh_ssh_keypair"]["ssh_public_key"],
        public.as_str(),
        "a refresh makes a new key"
    );
    assert_code(
        &app.op::<gql::auth::RefreshSshKeypair>(None, Default::default())
            .await,
        "UNAUTHENTICATED",
    );
});

// Authenticated requests write nothing: with the keypairs table locked against writers by
// another connection, bearer requests still answer; their use is counted in memory, written
// in batches, and kept across a clean restart.
both_dbs!(requests_do_not_write_and_use_is_kept, |db| async move {
    use sea_orm::ConnectionTrait;
    let mut app = spawn(db).await;
    let token = app.user("counted@x.org", "user", "default").await;
    let ak = app.access_key(&token).await;
    let url = app.config.effective_database_url();
    let locker = api::db::connect_raw(&url).await.unwrap();
    let txn = sea_orm::TransactionTrait::begin(&locker).await.unwrap();
    if url.starts_with("sqlite:") {
        // The first write takes SQLite's one write lock until the transaction ends.
        txn.execute_unprepared(&format!(
            "UPDATE keypairs SET rate_limit = rate_limit WHERE access_key = '{ak}'"
        ))
        .await
        .unwrap();
    } else {
        txn.execute_unprepared("LOCK TABLE keypairs IN EXCLUSIVE MODE")
            .await
            .unwrap();
    }
    for _ in 0..20 {
        // A hang bound, not a speed claim: a request that wrote would wait for the lock until
        // the transaction ends (PostgreSQL) or for SQLite's 10 s busy timeout.
        let body = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            app.op::<gql::MyAccessKey>(Some(&token), Default::default()),
        )
        .await
        .expect("answered while writers are locked out");
        assert_eq!(body["data"]["keypair"]["access_key"], ak.as_str(), "{body}");
    }
    txn.commit().await.unwrap();
    drop(locker);
    // A clean restart writes what was counted.
    app.restart().await;
    let kp = app
        .admin_op::<gql::auth::KeypairUse>(gql::auth::keypair_use::Variables {
            access_key: Some(ak.clone()),
        })
        .await;
    assert!(kp["keypair"]["num_queries"].as_i64().unwrap() >= 21, "{kp}");
    assert!(kp["keypair"]["last_used"].is_string(), "{kp}");
});

both_dbs!(
    a_deactivated_domain_refuses_its_users_logins,
    |db| async move {
        let app = spawn(db).await;
        app.create_domain("closing").await;
        let before = app.user("leaving@x.org", "user", "closing").await;
        app.user("boss@x.org", "superadmin", "closing").await;
        app.user("staying@x.org", "user", "default").await;
        let kp = app
            .op_ok::<gql::MyKeypair>(Some(&before), Default::default())
            .await;
        let signed = Signed {
            app: &app,
            ak: kp["keypair"]["access_key"].as_str().unwrap().into(),
            sk: kp["keypair"]["secret_key"].as_str().unwrap().into(),
        };
        const SET: &str = "mutation($n: String!, $a: Boolean!) { modify_domain(name: $n, props: {is_active: $a}) { ok } }";
        const LOGIN: &str =
            "mutation($e: String!, $p: String!) { login(email: $e, password: $p) { token } }";
        let login = |email: &'static str| {
            let app = &app;
            async move {
                app.gql(
                    None,
                    LOGIN,
                    serde_json::json!({"e": email, "p": USER_PASSWORD}),
                )
                .await
            }
        };
        app.admin(SET, serde_json::json!({"n": "closing", "a": false}))
            .await;
        let refused = login("leaving@x.org").await;
        assert_code(&refused, "UNAUTHENTICATED");
        assert!(
            refused.to_string().contains("domain is deactivated"),
            "{refused}"
        );
        // The login made before is over; a superadmin of the domain still logs in.
        let stale = app
            .gql(Some(&before), "{ user { email } }", serde_json::json!({}))
            .await;
        // (The auth layer answers before GraphQL does: a problem document, not `errors`.)
        assert_eq!(stale["code"], "UNAUTHENTICATED", "{stale}");
        assert!(login("boss@x.org").await["errors"].is_null());
        // The API keypair (HMAC) starts no session in an inactive domain.
        let create = serde_json::to_value(gql::CreateSession::build_query(
            gql::create_session::Variables {
                props: gql::create_session::CreateSessionInput {
                    image: "bai.local/stable/python:3.11-debian12".into(),
                    ..Default::default()
                },
            },
        ))
        .unwrap();
        let resp = signed
            .post_body("/admin/gql", "/admin/gql", &now_iso(0), None, create)
            .await;
        let body: Value = resp.json().await.unwrap();
        assert_code(&body, "BAD_REQUEST");
        assert!(body.to_string().contains("inactive"), "{body}");
        // A wrong password still reads as any wrong login (nothing said of the domain).
        let wrong = app
            .gql(
                None,
                LOGIN,
                serde_json::json!({"e": "leaving@x.org", "p": "Wrong-pass-1"}),
            )
            .await;
        assert!(!wrong.to_string().contains("domain"), "{wrong}");
        // Other domains are untouched; reactivated, the domain's users log in again.
        assert!(login("staying@x.org").await["errors"].is_null());
        app.admin(SET, serde_json::json!({"n": "closing", "a": true}))
            .await;
        assert!(login("leaving@x.org").await["errors"].is_null());
        // A superadmin cannot lock itself out by deactivating its own domain.
        let own = app
            .gql(
                Some(&app.admin_token.clone()),
                SET,
                serde_json::json!({"n": "default", "a": false}),
            )
            .await;
        assert_code(&own, "BAD_REQUEST");
        assert!(own.to_string().contains("your own domain"), "{own}");
    }
);

both_dbs!(preferred_ssh_port_is_the_callers_own, |db| async move {
    let app = spawn(db).await;
    const SET: &str = "mutation($p: Int) { update_preferred_ssh_port(port: $p) { ok } }";
    const GET: &str = "{ user { preferred_ssh_port } }";
    // Anonymous: refused before anything is read.
    let anon = app.gql(None, SET, serde_json::json!({ "p": 20000 })).await;
    assert!(anon.to_string().contains("UNAUTHENTICATED"), "{anon}");
    let a = app.user("pa@x.org", "user", "default").await;
    let b = app.user("pb@x.org", "user", "default").await;
    app.ok(Some(&a), SET, serde_json::json!({ "p": 20000 }))
        .await;
    // The mutation names nobody: B's setting and the superadmin's stay unset.
    for token in [&b, &app.admin_token.clone()] {
        let me = app.ok(Some(token), GET, serde_json::json!({})).await;
        assert!(me["user"]["preferred_ssh_port"].is_null(), "{me}");
    }
    // Huge or negative values are refused, and the stored one is kept.
    for bad in [i64::from(i32::MAX), -20000, 0] {
        assert_code(
            &app.gql(Some(&a), SET, serde_json::json!({ "p": bad }))
                .await,
            "BAD_REQUEST",
        );
    }
    let me = app.ok(Some(&a), GET, serde_json::json!({})).await;
    assert_eq!(me["user"]["preferred_ssh_port"], 20000);
});
