//! Accounts and authentication: signup on/off, login/logout/expiry, password rules and
//! changes, HMAC request signing, rate limits.
use serde_json::{Value, json};

use crate::both_dbs;
use crate::support::*;

both_dbs!(signup_is_refused_when_disabled, |db| async move {
    let app = spawn(db).await;
    let body = app
        .gql(
            None,
            r#"mutation { signup(email: "new@x.org", username: "new", password: "Abcdef1!", password2: "Abcdef1!", agreed_to_terms: true) { ok } }"#,
            json!({}),
        )
        .await;
    assert_code(&body, "FORBIDDEN");
    assert!(message(&body).contains("Signup is disabled"), "{body}");
    // And the account really does not exist: logging in fails.
    let login = app
        .gql(
            None,
            r#"mutation { login(email: "new@x.org", password: "Abcdef1!") { token } }"#,
            json!({}),
        )
        .await;
    assert_code(&login, "UNAUTHENTICATED");
    let cfg = app
        .ok(
            None,
            "{ signup_config { enabled requires_invitation_token } }",
            json!({}),
        )
        .await;
    assert_eq!(cfg["signup_config"]["enabled"], false);
});

both_dbs!(signup_with_invitation_token_and_terms, |db| async move {
    let app = spawn_with(db, |c| {
        c.signup_enabled = true;
        c.signup_invitation_token = Some("beta-2026".into());
    })
    .await;
    let q = "mutation($e: String!, $p: String!, $p2: String!, $t: String, $a: Boolean!) { signup(email: $e, username: \"tester\", password: $p, password2: $p2, invitation_token: $t, agreed_to_terms: $a) { ok msg } }";
    let vars = |t: &str, a: bool, p2: &str| json!({"e": "tester@test.com", "p": "Tester-01", "p2": p2, "t": t, "a": a});
    let wrong_token = app.gql(None, q, vars("nope", true, "Tester-01")).await;
    assert_code(&wrong_token, "FORBIDDEN");
    let no_terms = app
        .gql(None, q, vars("beta-2026", false, "Tester-01"))
        .await;
    assert_code(&no_terms, "BAD_REQUEST");
    let mismatch = app.gql(None, q, vars("beta-2026", true, "Tester-02")).await;
    assert_code(&mismatch, "BAD_REQUEST");
    let weak = app.gql(None, q, json!({"e": "tester@test.com", "p": "weakpass", "p2": "weakpass", "t": "beta-2026", "a": true})).await;
    assert_code(&weak, "BAD_REQUEST");
    assert!(message(&weak).contains("special character"), "{weak}");
    app.ok(None, q, vars("beta-2026", true, "Tester-01")).await;
    let again = app.gql(None, q, vars("beta-2026", true, "Tester-01")).await;
    assert_code(&again, "CONFLICT");
    let token = app.login("tester@test.com", "Tester-01").await;
    let me = app
        .ok(
            Some(&token),
            "{ user { email role domain_name groups { name } } }",
            json!({}),
        )
        .await;
    assert_eq!(me["user"]["role"], "user");
    assert_eq!(me["user"]["domain_name"], "default");
    assert_eq!(me["user"]["groups"][0]["name"], "default");
});

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
    let bad = app
        .gql(
            None,
            r#"mutation { login(email: "admin@bai.local", password: "wrong-Pass1") { token } }"#,
            json!({}),
        )
        .await;
    assert_code(&bad, "UNAUTHENTICATED");
    let unknown = app
        .gql(
            None,
            r#"mutation { login(email: "ghost@bai.local", password: "wrong-Pass1") { token } }"#,
            json!({}),
        )
        .await;
    assert_eq!(
        message(&bad),
        message(&unknown),
        "same message for unknown email and wrong password"
    );

    let resp = app
        .http
        .post(app.url("/graphql"))
        .json(&json!({"query": format!(r#"mutation {{ login(email: "{ADMIN_EMAIL}", password: "{ADMIN_PASSWORD}") {{ token }} }}"#)}))
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
            .json(&json!({"query": "{ user { email } }"}));
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
    app.ok(Some(&token), "mutation { logout { ok } }", json!({}))
        .await;
    let after = app
        .http
        .post(app.url("/graphql"))
        .bearer_auth(&token)
        .json(&json!({"query": "{ user { email } }"}))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 401);
    let problem: Value = after.json().await.unwrap();
    assert_eq!(problem["code"], "UNAUTHENTICATED");

    // Expiry: the session lives 2 seconds.
    let token = app.login(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    app.ok(Some(&token), "{ user { email } }", json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let expired = app
        .http
        .post(app.url("/graphql"))
        .bearer_auth(&token)
        .json(&json!({"query": "{ user { email } }"}))
        .send()
        .await
        .unwrap();
    assert_eq!(expired.status(), 401);
    // Without credentials, protected fields say UNAUTHENTICATED.
    let anon = app.gql(None, "{ user { email } }", json!({})).await;
    assert_code(&anon, "UNAUTHENTICATED");
});

both_dbs!(password_rules_change_and_forced_change, |db| async move {
    let app = spawn(db).await;
    let weak = app
        .gql(
            Some(&app.admin_token),
            r#"mutation { create_user(email: "u@x.org", props: {username: "u", password: "short1!", need_password_change: false, domain_name: "default"}) { ok } }"#,
            json!({}),
        )
        .await;
    assert_code(&weak, "BAD_REQUEST");
    assert!(message(&weak).contains("at least 8 characters"), "{weak}");
    let token = app.user("u@x.org", "user", "default").await;
    let change = "mutation($o: String!, $n: String!, $n2: String!) { change_password(old_password: $o, new_password: $n, new_password2: $n2) { ok } }";
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
            .gql(
                Some(&token),
                change,
                json!({"o": old, "n": new, "n2": new2}),
            )
            .await;
        assert_code(&body, "BAD_REQUEST");
        assert!(!message(&body).is_empty(), "{why}");
    }
    app.ok(
        Some(&token),
        change,
        json!({"o": USER_PASSWORD, "n": "Better-pass2", "n2": "Better-pass2"}),
    )
    .await;
    app.login("u@x.org", "Better-pass2").await;

    // An admin flags the account: login is refused until the password is changed.
    app.admin(
        r#"mutation { modify_user(email: "u@x.org", props: {need_password_change: true}) { ok } }"#,
        json!({}),
    )
    .await;
    let refused = app
        .gql(
            None,
            r#"mutation { login(email: "u@x.org", password: "Better-pass2") { token } }"#,
            json!({}),
        )
        .await;
    assert_code(&refused, "PASSWORD_CHANGE_REQUIRED");
    app.ok(
        None,
        r#"mutation { update_password_no_auth(email: "u@x.org", current_password: "Better-pass2", new_password: "Third-pass3", new_password2: "Third-pass3") { ok } }"#,
        json!({}),
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

struct Signed<'a> {
    app: &'a TestApp,
    ak: String,
    sk: String,
}

impl Signed<'_> {
    /// POSTs `query` to /admin/gql signed for `signed_path` with `date`, sent to `path`.
    async fn post(
        &self,
        path: &str,
        signed_path: &str,
        date: &str,
        secret: Option<&str>,
    ) -> reqwest::Response {
        let body = json!({"query": "{ keypair { access_key secret_key is_admin } }"});
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
        self.app
            .http
            .post(self.app.url(path))
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

fn now_iso(offset_secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(offset_secs))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
}

both_dbs!(hmac_signing, |db| async move {
    let app = spawn(db).await;
    let token = app.user("hmac@x.org", "user", "default").await;
    let kp = app
        .ok(
            Some(&token),
            "{ keypair { access_key secret_key } }",
            json!({}),
        )
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
    let bomb = json!({
        "query": "query($f: String!) { compute_session_list(limit: 1, offset: 0, filter: $f) { total_count } }",
        "variables": {"f": "(".repeat(200_000)},
    });
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
    let mut kp = json!({});
    for _ in 0..50 {
        kp = app
            .ok(
                Some(&token),
                "{ keypair { num_queries last_used } }",
                json!({}),
            )
            .await;
        if kp["keypair"]["num_queries"].as_i64().unwrap() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(kp["keypair"]["num_queries"].as_i64().unwrap() >= 2, "{kp}");
    assert!(kp["keypair"]["last_used"].is_string());

    // A deactivated keypair stops working.
    app.admin("mutation($a: String!) { modify_keypair(access_key: $a, props: {is_active: false}) { ok } }", json!({"a": s.ak})).await;
    let inactive = s.post("/admin/gql", "/admin/gql", &now_iso(0), None).await;
    assert_eq!(inactive.status(), 401);
});

both_dbs!(rate_limit_per_keypair, |db| async move {
    let app = spawn(db).await;
    app.user("rl@x.org", "user", "default").await;
    let created = app
        .admin(
            r#"mutation { create_keypair(user_id: "rl@x.org", props: {resource_policy: "default", rate_limit: 3}) { keypair { access_key secret_key rate_limit } } }"#,
            json!({}),
        )
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
        .ok(
            Some(&token),
            "{ ssh_keypair { ssh_public_key } }",
            json!({}),
        )
        .await;
    assert!(before["ssh_keypair"]["ssh_public_key"].is_null());
    let fresh = app
        .ok(
            Some(&token),
            "mutation { refresh_ssh_keypair { ssh_public_key ssh_private_key } }",
            json!({}),
        )
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
        .ok(
            Some(&token),
            "{ ssh_keypair { ssh_public_key } keypair { ssh_public_key } }",
            json!({}),
        )
        .await;
    assert_eq!(after["ssh_keypair"]["ssh_public_key"], public.as_str());
    assert_eq!(after["keypair"]["ssh_public_key"], public.as_str());
    let again = app
        .ok(
            Some(&token),
            "mutation { refresh_ssh_keypair { ssh_public_key } }",
            json!({}),
        )
        .await;
    assert_ne!(
        again["refresh_ssh_keypair"]["ssh_public_key"],
        public.as_str(),
        "a refresh makes a new key"
    );
    assert_code(
        &app.gql(
            None,
            "mutation { refresh_ssh_keypair { ssh_public_key } }",
            json!({}),
        )
        .await,
        "UNAUTHENTICATED",
    );
});

// Authenticated requests write nothing: with the keypairs table locked against writers by
// another connection, bearer requests still answer at once; their use is counted in memory,
// written in batches, and kept across a clean restart.
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
        let started = std::time::Instant::now();
        let body = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            app.gql(Some(&token), "{ keypair { access_key } }", json!({})),
        )
        .await
        .expect("answered while writers are locked out");
        assert_eq!(body["data"]["keypair"]["access_key"], ak.as_str(), "{body}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
    txn.commit().await.unwrap();
    drop(locker);
    // A clean restart writes what was counted.
    app.restart().await;
    let kp = app
        .admin(
            "query($a: String!) { keypair(access_key: $a) { num_queries last_used } }",
            json!({"a": ak}),
        )
        .await;
    assert!(kp["keypair"]["num_queries"].as_i64().unwrap() >= 21, "{kp}");
    assert!(kp["keypair"]["last_used"].is_string(), "{kp}");
});
