//! Requests from hostile callers (issue 13): each would crash, starve or out-rank someone on
//! the code before it; each must now be refused quickly while the server keeps serving.
use std::time::{Duration, Instant};

use graphql_client::GraphQLQuery;
use serde_json::{Value, json};

use crate::both_dbs;
use crate::gql;
use crate::support::*;

/// The server still answers a plain request. The bound is a hang bound (a server starved by
/// what came before), not a claim about speed.
async fn still_serving(app: &TestApp) {
    let started = Instant::now();
    let body = app
        .op::<gql::hostile::Typename>(None, Default::default())
        .await;
    assert_eq!(body["data"]["__typename"], "Query", "{body}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Starts the typed operation `Q` as operation `id` on an open graphql-transport-ws
/// connection.
async fn ws_op<Q: GraphQLQuery>(ws: &mut Ws, id: impl std::fmt::Display, variables: Q::Variables) {
    use futures_util::SinkExt;
    let payload = serde_json::to_value(Q::build_query(variables)).unwrap();
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        json!({"id": id.to_string(), "type": "subscribe", "payload": payload}).to_string(),
    ))
    .await
    .expect("the operation is sent");
}

/// `user(email)` as `token`; without `email`, the caller: the whole answer.
async fn user_email(app: &TestApp, token: &str, email: Option<&str>) -> Value {
    app.op::<gql::roles::UserEmail>(
        Some(token),
        gql::roles::user_email::Variables {
            email: email.map(str::to_string),
        },
    )
    .await
}

/// `modify_user(email, props)` as `token`: the whole answer.
async fn modify_user(
    app: &TestApp,
    token: &str,
    email: &str,
    props: gql::modify_user::ModifyUserInput,
) -> Value {
    app.op::<gql::ModifyUser>(
        Some(token),
        gql::modify_user::Variables {
            email: email.into(),
            props,
        },
    )
    .await
}

/// `modify_keypair(access_key, props)` as `token`: the whole answer.
async fn modify_keypair(
    app: &TestApp,
    token: &str,
    access_key: &str,
    props: gql::modify_keypair::ModifyKeyPairInput,
) -> Value {
    app.op::<gql::ModifyKeypair>(
        Some(token),
        gql::modify_keypair::Variables {
            access_key: access_key.into(),
            props,
        },
    )
    .await
}

/// `execute_in_session(mode: "query", code)` as `token`: the whole answer.
async fn execute(app: &TestApp, token: &str, session: &str, code: &str) -> Value {
    app.op::<gql::ExecuteInSession>(
        Some(token),
        gql::execute_in_session::Variables {
            session_id: session.into(),
            mode: "query".into(),
            code: Some(code.into()),
            options: None,
        },
    )
    .await
}

/// `session_ssh_private_key` as `token`: the whole answer.
async fn ssh_private_key(app: &TestApp, token: &str, session: &str) -> Value {
    app.op::<gql::SessionSshPrivateKey>(
        Some(token),
        gql::session_ssh_private_key::Variables {
            session_id: session.into(),
        },
    )
    .await
}

/// `start_service(app: "jupyter")` as `token`: the whole answer.
async fn start_jupyter(app: &TestApp, token: &str, session: &str) -> Value {
    app.op::<gql::StartService>(
        Some(token),
        gql::start_service::Variables {
            session_id: session.into(),
            app: "jupyter".into(),
            open_to_public: false,
            preferred_port: None,
        },
    )
    .await
}

both_dbs!(request_cost_is_bounded_before_execution, |db| async move {
    let app = spawn(db).await;
    let user = app.user("cost@x.org", "user", "default").await;

    // 200,000 '(' in a filter used to overflow the parser's stack and abort the process.
    let started = Instant::now();
    let filtered = |filter: String| gql::session_list::Variables {
        limit: 1,
        offset: 0,
        filter: Some(filter),
        ..Default::default()
    };
    let body = app
        .op::<gql::SessionList>(Some(&user), filtered("(".repeat(200_000)))
        .await;
    assert_code(&body, "BAD_REQUEST");
    assert!(message(&body).contains("filter"), "{body}");
    let nested = format!("{}name == \"x\"{}", "(".repeat(40), ")".repeat(40));
    let body = app
        .op::<gql::SessionList>(Some(&user), filtered(nested))
        .await;
    assert_code(&body, "BAD_REQUEST");
    assert!(message(&body).contains("nested"), "{body}");
    still_serving(&app).await;

    // The documents below stay inline: they are wrong on purpose (a fragment bomb, a spread
    // chain past the depth bound, a nesting bomb of fields the schema lacks, a batch), and the
    // server's refusal of them is what is tested.
    // Fragments that each spread the next twice: 2^20 fields from a tiny anonymous document.
    let mut q = String::from("query{...F0}");
    for i in 0..20 {
        q.push_str(&format!(
            " fragment F{i} on Query{{...F{} ...F{}}}",
            i + 1,
            i + 1
        ));
    }
    q.push_str(" fragment F20 on Query{__typename}");
    let started_bomb = Instant::now();
    let body = app.gql(None, &q, json!({})).await;
    eprintln!("fragment bomb answered in {:?}", started_bomb.elapsed());
    assert_code(&body, "BAD_REQUEST");
    // A hang bound, not a speed claim: refused before it is expanded, the bomb answers at
    // once; expanded, it would keep the server busy far longer.
    assert!(
        started_bomb.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started_bomb.elapsed()
    );
    // A chain of single spreads deeper than the bound is refused too, with the reason.
    let mut q = String::from("query{...F0}");
    for i in 0..30 {
        q.push_str(&format!(" fragment F{i} on Query{{...F{}}}", i + 1));
    }
    q.push_str(" fragment F30 on Query{__typename}");
    let body = app.gql(None, &q, json!({})).await;
    assert_code(&body, "BAD_REQUEST");
    // Deeply nested selections are refused by the parser's own bound.
    let deep = format!("{}{}", "{a".repeat(10_000), "}".repeat(10_000));
    let body = app.gql(None, &deep, json!({})).await;
    assert_code(&body, "GRAPHQL_VALIDATION_FAILED");
    assert!(message(&body).contains("stack limit reached"), "{body}");
    // Batches are not accepted at all.
    let resp = app
        .http
        .post(app.url("/graphql"))
        .json(&json!([{"query": "{ __typename }"}, {"query": "{ __typename }"}]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_code(&body, "BAD_REQUEST");
    assert!(message(&body).contains("batched requests"), "{body}");
    // A hang bound for the whole barrage, not a speed claim.
    assert!(started.elapsed() < Duration::from_secs(30));
    still_serving(&app).await;
});

/// `login` sent through `client` (the flood comes from another local address).
async fn login_status(client: &reqwest::Client, app: &TestApp, email: &str, pw: &str) -> Value {
    client
        .post(app.url("/graphql"))
        .json(&gql::Login::build_query(gql::login::Variables {
            email: email.into(),
            password: pw.into(),
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

both_dbs!(password_guessing_is_throttled, |db| async move {
    let app = spawn(db).await;
    app.user("victim@x.org", "user", "default").await;
    app.user("bystander@x.org", "user", "default").await;

    // 400 parallel wrong logins from another address (127.0.0.2) while a real user logs in
    // from 127.0.0.1: the flood is refused at once, the real login is not queued behind it.
    let attacker = reqwest::Client::builder()
        .local_address(Some("127.0.0.2".parse().unwrap()))
        .build()
        .unwrap();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut flood = Vec::new();
    for i in 0..400 {
        let c = attacker.clone();
        let url = app.url("/graphql");
        let answered = answered.clone();
        flood.push(tokio::spawn(async move {
            let body: Value = c
                .post(url)
                .json(&gql::Login::build_query(gql::login::Variables {
                    email: format!("guess{i}@x.org"),
                    password: "Wrong-pass-1".into(),
                }))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            body["errors"][0]["extensions"]["code"]
                .as_str()
                .unwrap_or("")
                .to_string()
        }));
    }
    // The real login goes in once the flood is under way: the server has answered part of it.
    eventually("the flood to reach the server", WAIT, || async {
        (answered.load(std::sync::atomic::Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    let started = Instant::now();
    let ok = login_status(&app.http, &app, "bystander@x.org", USER_PASSWORD).await;
    let took = started.elapsed();
    assert!(ok["data"]["login"]["token"].is_string(), "{ok}");
    // A hang bound, not a speed claim: unthrottled, the bystander would wait behind ~400
    // password hashes (≥ 20 s on two cores); throttled, it waits for at most the two running
    // ones. 10 s still tells them apart, however busy the machine.
    assert!(
        took < Duration::from_secs(10),
        "a real login took {took:?} under the flood"
    );
    let mut limited = 0;
    for f in flood {
        let c = f.await.unwrap();
        assert!(c == "RATE_LIMITED" || c == "UNAUTHENTICATED", "{c}");
        limited += usize::from(c == "RATE_LIMITED");
    }
    assert!(
        limited >= 300,
        "only {limited} of 400 were refused before argon2"
    );

    // Per account: after 10 failures the account is blocked for a while, even from another
    // address and even with the right password; other accounts are unaffected.
    for _ in 0..10 {
        let body = login_status(&attacker, &app, "victim@x.org", "Wrong-pass-1").await;
        let c = code(&body);
        assert!(c == "UNAUTHENTICATED" || c == "RATE_LIMITED", "{body}");
    }
    let body = login_status(&app.http, &app, "victim@x.org", USER_PASSWORD).await;
    assert_code(&body, "RATE_LIMITED");
    assert!(message(&body).contains("Try again"), "{body}");
    // The same throttle guards update_password_no_auth and POST /auth/authorize.
    let body = app
        .op::<gql::auth::UpdatePasswordNoAuth>(
            None,
            gql::auth::update_password_no_auth::Variables {
                email: "victim@x.org".into(),
                current_password: "User-pass-1".into(),
                new_password: "Newer-pass-2".into(),
                new_password2: "Newer-pass-2".into(),
            },
        )
        .await;
    assert_code(&body, "RATE_LIMITED");
    let resp = app
        .http
        .post(app.url("/auth/authorize"))
        .header("x-backendai-version", "v8.20240915")
        .json(&json!({"type": "keypair", "domain": "default", "username": "victim@x.org", "password": USER_PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    app.login("bystander@x.org", USER_PASSWORD).await;
});

both_dbs!(domain_admins_do_not_outrank_superadmins, |db| async move {
    let app = spawn(db).await;
    // A domain admin of the superadmin's own domain, a peer admin and a user.
    let boss = app.user("boss@x.org", "admin", "default").await;
    app.user("peer@x.org", "admin", "default").await;
    let worker = app.user("worker@x.org", "user", "default").await;
    let me = app
        .admin_op::<gql::hostile::MeIds>(Default::default())
        .await;
    let super_ak = me["keypair"]["access_key"].as_str().unwrap().to_string();
    let super_uuid: uuid::Uuid = me["user"]["uuid"].as_str().unwrap().parse().unwrap();
    let group = app.admin_op::<gql::Groups>(Default::default()).await["groups"][0]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let super_session = insert_session(&app, &super_ak, super_uuid, group)
        .await
        .to_string();
    let w = app
        .op_ok::<gql::hostile::MeIds>(Some(&worker), Default::default())
        .await;
    let worker_session = insert_session(
        &app,
        w["keypair"]["access_key"].as_str().unwrap(),
        w["user"]["uuid"].as_str().unwrap().parse().unwrap(),
        group,
    )
    .await
    .to_string();
    let boss_ak = app.access_key(&boss).await;
    type UserProps = gql::modify_user::ModifyUserInput;
    type KeypairProps = gql::modify_keypair::ModifyKeyPairInput;

    // The superadmin and the peer admin do not exist for the domain admin.
    for body in [
        user_email(&app, &boss, Some("admin@bai.local")).await,
        user_email(&app, &boss, Some("peer@x.org")).await,
        modify_user(
            &app,
            &boss,
            "admin@bai.local",
            UserProps {
                full_name: Some("x".into()),
                ..Default::default()
            },
        )
        .await,
        modify_user(
            &app,
            &boss,
            "peer@x.org",
            UserProps {
                password: Some("Reset-pass-9".into()),
                ..Default::default()
            },
        )
        .await,
    ] {
        assert_code(&body, "NOT_FOUND");
    }
    for body in [
        modify_keypair(
            &app,
            &boss,
            &super_ak,
            KeypairProps {
                rate_limit: Some(1),
                ..Default::default()
            },
        )
        .await,
        modify_keypair(
            &app,
            &boss,
            &super_ak,
            KeypairProps {
                is_active: Some(false),
                ..Default::default()
            },
        )
        .await,
        app.op::<gql::roles::KeypairByKey>(
            Some(&boss),
            gql::roles::keypair_by_key::Variables {
                access_key: super_ak.clone(),
            },
        )
        .await,
    ] {
        assert_code(&body, "NOT_FOUND");
    }
    let listed = app
        .op_ok::<gql::hostile::UsersAndKeypairs>(Some(&boss), Default::default())
        .await;
    let text = listed.to_string();
    assert!(
        !text.contains("admin@bai.local") && !text.contains("peer@x.org"),
        "{text}"
    );
    assert!(
        text.contains("worker@x.org") && text.contains("boss@x.org"),
        "{text}"
    );
    // Nobody changes their own policy, rate limit or role.
    for body in [
        modify_keypair(
            &app,
            &boss,
            &boss_ak,
            KeypairProps {
                rate_limit: Some(0),
                ..Default::default()
            },
        )
        .await,
        modify_keypair(
            &app,
            &boss,
            &boss_ak,
            KeypairProps {
                resource_policy: Some("default".into()),
                rate_limit: Some(999_999),
                ..Default::default()
            },
        )
        .await,
    ] {
        assert_code(&body, "FORBIDDEN");
    }
    assert_code(
        &modify_user(
            &app,
            &boss,
            "boss@x.org",
            UserProps {
                role: Some("superadmin".into()),
                ..Default::default()
            },
        )
        .await,
        "FORBIDDEN",
    );
    let own_ak = me["keypair"]["access_key"].as_str().unwrap();
    assert_code(
        &modify_keypair(
            &app,
            &app.admin_token,
            own_ak,
            KeypairProps {
                rate_limit: Some(5),
                ..Default::default()
            },
        )
        .await,
        "FORBIDDEN",
    );
    // The superadmin's sessions: invisible to the domain admin, for every operation.
    for body in [
        app.op::<gql::SessionId>(
            Some(&boss),
            gql::session_id::Variables {
                id: super_session.clone(),
            },
        )
        .await,
        app.op::<gql::SessionLogs>(
            Some(&boss),
            gql::session_logs::Variables {
                id: super_session.clone(),
            },
        )
        .await,
        ssh_private_key(&app, &boss, &super_session).await,
        app.op::<gql::DestroySession>(
            Some(&boss),
            gql::destroy_session::Variables {
                id: super_session.clone(),
            },
        )
        .await,
        execute(&app, &boss, &super_session, "1").await,
        start_jupyter(&app, &boss, &super_session).await,
    ] {
        assert_code(&body, "NOT_FOUND");
        assert!(
            !message(&body).contains("history"),
            "the name leaked: {body}"
        );
    }
    let listed = app
        .op_ok::<gql::SessionList>(
            Some(&boss),
            gql::session_list::Variables {
                limit: 10,
                offset: 0,
                status: Some("TERMINATED".into()),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(listed["compute_session_list"]["total_count"], 1, "{listed}");
    // A user's session: the domain admin sees it, but inside it only its owner works.
    app.op_ok::<gql::SessionId>(
        Some(&boss),
        gql::session_id::Variables {
            id: worker_session.clone(),
        },
    )
    .await;
    for body in [
        execute(&app, &boss, &worker_session, "1").await,
        ssh_private_key(&app, &boss, &worker_session).await,
        start_jupyter(&app, &boss, &worker_session).await,
    ] {
        assert_code(&body, "NOT_FOUND");
    }
    // The app proxy and the terminal: the same NOT_FOUND for a stranger as for no session.
    for path in [
        format!("/apps/{worker_session}/jupyter/"),
        format!("/apps/{}/jupyter/", uuid::Uuid::new_v4()),
    ] {
        let resp = app
            .http
            .get(app.url(&path))
            .bearer_auth(&boss)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{path}");
        let text = resp.text().await.unwrap();
        assert!(
            !text.contains("history") && !text.contains("TERMINATED"),
            "{text}"
        );
        let anon = app.http.get(app.url(&path)).send().await.unwrap();
        assert_eq!(anon.status(), 401, "{path}");
    }
});

/// Refused as unauthenticated: a GraphQL error, or the middleware's problem+json for a
/// bearer token that no longer exists.
#[track_caller]
fn assert_unauthenticated(body: &Value) {
    let code = body["errors"][0]["extensions"]["code"]
        .as_str()
        .or(body["code"].as_str());
    assert_eq!(code, Some("UNAUTHENTICATED"), "{body}");
}

both_dbs!(revocation_is_immediate, |db| async move {
    let app = spawn(db).await;
    app.user("rev@x.org", "user", "default").await;
    let a = app.login("rev@x.org", USER_PASSWORD).await;
    let b = app.login("rev@x.org", USER_PASSWORD).await;
    // A subscription opened with `b` before anything changes.
    let mut ws = subscribe_op::<gql::SessionStatusChanges>(&app, &b, Default::default()).await;
    // Changing the password with `a` ends `b` (and keeps `a`).
    app.op_ok::<gql::auth::ChangePassword>(
        Some(&a),
        gql::auth::change_password::Variables {
            old_password: "User-pass-1".into(),
            new_password: "Other-pass-2".into(),
            new_password2: "Other-pass-2".into(),
        },
    )
    .await;
    assert_unauthenticated(&user_email(&app, &b, None).await);
    app.op_ok::<gql::roles::UserEmail>(Some(&a), Default::default())
        .await;
    // The running subscription ends at once, quiet as it is (no event came), with the reason.
    {
        let msg = next_json(&mut ws).await;
        assert_eq!(msg["id"], "1", "{msg}");
        assert!(msg.to_string().contains("revoked"), "{msg}");
    }
    // The open WebSocket: a new operation on it is refused.
    {
        ws_op::<gql::roles::UserEmail>(&mut ws, "2", Default::default()).await;
        let mut msg = next_json(&mut ws).await;
        // The ended subscription's "complete" may come first.
        if msg == json!({"id": "1", "type": "complete"}) {
            msg = next_json(&mut ws).await;
        }
        assert_eq!(msg["id"], "2", "{msg}");
        let text = msg.to_string();
        assert!(
            text.contains("UNAUTHENTICATED") || text.contains("revoked"),
            "{msg}"
        );
    }
    let admin_session = app
        .admin_op::<gql::hostile::AdminContext>(Default::default())
        .await;
    let _ = admin_session;
    // An admin's password reset ends `a` as well.
    let rev = |props| gql::modify_user::Variables {
        email: "rev@x.org".into(),
        props,
    };
    app.admin_op::<gql::ModifyUser>(rev(gql::modify_user::ModifyUserInput {
        password: Some("Reset-pass-3".into()),
        ..Default::default()
    }))
    .await;
    assert_unauthenticated(&user_email(&app, &a, None).await);

    // A forced password change keeps the keypair secret out of reach of /auth/authorize.
    app.admin_op::<gql::ModifyUser>(rev(gql::modify_user::ModifyUserInput {
        need_password_change: Some(true),
        ..Default::default()
    }))
    .await;
    let resp = app
        .http
        .post(app.url("/auth/authorize"))
        .header("x-backendai-version", "v8.20240915")
        .json(&json!({"type": "keypair", "domain": "default", "username": "rev@x.org", "password": "Reset-pass-3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let problem: Value = resp.json().await.unwrap();
    assert!(
        problem.to_string().contains("password-change-required"),
        "{problem}"
    );
    assert!(!problem.to_string().contains("secret"), "{problem}");

    // A deactivated main keypair stops the cookie/bearer login as well.
    app.user("kp@x.org", "user", "default").await;
    let t = app.login("kp@x.org", USER_PASSWORD).await;
    let ak = app.access_key(&t).await;
    app.admin_op::<gql::ModifyKeypair>(gql::modify_keypair::Variables {
        access_key: ak,
        props: gql::modify_keypair::ModifyKeyPairInput {
            is_active: Some(false),
            ..Default::default()
        },
    })
    .await;
    assert_unauthenticated(&user_email(&app, &t, None).await);
});

both_dbs!(running_subscriptions_end_on_revocation, |db| async move {
    let app = spawn(db).await;
    let t = app.user("sub@x.org", "user", "default").await;
    let mut ws = subscribe_op::<gql::SessionStatusChanges>(&app, &t, Default::default()).await;
    // Logout from another request; then any event for this subscriber ends its stream.
    app.op_ok::<gql::auth::Logout>(Some(&t), Default::default())
        .await;
    let me = app.admin_op::<gql::Groups>(Default::default()).await;
    let _ = me;
    // Trigger a session event visible to the user: its own (pending, unplaceable) session.
    let t2 = app.login("sub@x.org", USER_PASSWORD).await;
    let _ = create_session(
        &app,
        &t2,
        json!({"image": PYTHON, "resources": "{\"cpu\": \"1000\"}"}),
    )
    .await;
    let msg = next_json(&mut ws).await;
    // The errors only: an event's data (name, status, event) is no answer here.
    let text = msg["payload"]["errors"].to_string();
    assert!(
        text.contains("UNAUTHENTICATED") || msg["type"] == "complete",
        "the subscription outlived the logout: {msg}"
    );
});

both_dbs!(websocket_limits, |db| async move {
    use futures_util::SinkExt;
    let app = spawn_with(db, |c| {
        c.ws_max_connections_per_user = 2;
        c.ws_max_operations_per_connection = 2;
    })
    .await;
    let t = app.user("ws@x.org", "user", "default").await;
    let mut first = subscribe_op::<gql::SessionStatusChanges>(&app, &t, Default::default()).await;
    // A second and third operation on the same connection: the third is refused.
    for id in ["2", "3"] {
        ws_op::<gql::SessionStatusChanges>(&mut first, id, Default::default()).await;
    }
    let msg = next_json(&mut first).await;
    assert_eq!(msg["id"], "3", "{msg}");
    assert!(
        msg["payload"]["errors"]
            .to_string()
            .contains("RATE_LIMITED"),
        "{msg}"
    );
    let _second = subscribe_op::<gql::SessionStatusChanges>(&app, &t, Default::default()).await;
    // The rest stays raw on purpose: the WebSocket protocol abused (a connection past the
    // limit, a message past the body limit).
    // A third connection of the same user is refused at connection_init.
    let refused = tokio::spawn({
        let url = app.url("/graphql/ws").replace("http://", "ws://");
        let t = t.clone();
        async move {
            use tokio_tungstenite::tungstenite::client::IntoClientRequest;
            let mut req = url.into_client_request().unwrap();
            req.headers_mut().insert(
                "sec-websocket-protocol",
                "graphql-transport-ws".parse().unwrap(),
            );
            let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
            ws.send(tokio_tungstenite::tungstenite::Message::text(
                json!({"type": "connection_init", "payload": {"token": t}}).to_string(),
            ))
            .await
            .unwrap();
            use futures_util::StreamExt;
            tokio::time::timeout(Duration::from_secs(5), ws.next())
                .await
                .ok()
                .flatten()
                .map(|m| format!("{m:?}"))
        }
    })
    .await
    .unwrap();
    let text = refused.unwrap_or_default();
    assert!(!text.contains("connection_ack"), "{text}");
    assert!(
        text.contains("Close(") && text.contains("At most 2 live connections per user."),
        "{text}"
    );
    // A message larger than the body limit closes the connection instead of being buffered.
    let big = "x".repeat(app.config.max_body_bytes + 1024);
    let _ = first
        .send(tokio_tungstenite::tungstenite::Message::text(
            json!({"id": "9", "type": "subscribe", "payload": {"query": big}}).to_string(),
        ))
        .await;
    use futures_util::StreamExt;
    // A hang bound: the server closes at once; an unbounded buffer would never close.
    let end = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match first.next().await {
                None | Some(Err(_)) => return true,
                Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_))) => return true,
                Some(Ok(_)) => continue,
            }
        }
    })
    .await
    .unwrap_or(false);
    assert!(end, "an oversized message did not close the connection");
});

both_dbs!(written_quotas_are_applied, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let t = app.user("quota@x.org", "user", "default").await;
    app.admin_op::<gql::ModifyPolicy>(gql::modify_policy::Variables {
        name: "default".into(),
        props: gql::modify_policy::ModifyKeyPairResourcePolicyInput {
            max_pending_session_count: Some(1),
            ..Default::default()
        },
    })
    .await;
    // Far more CPU than any agent has: it stays PENDING.
    let first = create_session(
        &app,
        &t,
        json!({"image": PYTHON, "resources": "{\"cpu\": \"1000\"}"}),
    )
    .await;
    let id = session_ids(&first)[0].clone();
    let second = create_session(
        &app,
        &t,
        json!({"image": PYTHON, "resources": "{\"cpu\": \"1000\"}"}),
    )
    .await;
    assert_code(&second, "BAD_REQUEST");
    assert!(message(&second).contains("pending"), "{second}");
    destroy(&app, &t, &id).await;
    // The domain's registry allowlist.
    app.admin_op::<gql::ModifyDomain>(gql::modify_domain::Variables {
        name: "default".into(),
        props: gql::modify_domain::ModifyDomainInput {
            allowed_docker_registries: Some(vec!["registry.example".into()]),
            ..Default::default()
        },
    })
    .await;
    let refused = create_session(&app, &t, json!({"image": PYTHON})).await;
    assert_code(&refused, "FORBIDDEN");
    assert!(message(&refused).contains("bai.local"), "{refused}");
    // No page of the server can be framed by another site.
    let resp = app.http.get(app.url("/")).send().await.unwrap();
    assert_eq!(resp.headers()["x-frame-options"], "DENY");
    assert!(
        resp.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
});

both_dbs!(
    sessions_bound_memory_lifetime_and_leak_nothing,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let t = app.user("noisy@x.org", "user", "default").await;
        let other = app.user("quiet@x.org", "user", "default").await;
        let folder = app
            .op_ok::<gql::CreateVfolder>(
                Some(&t),
                gql::create_vfolder::Variables {
                    props: gql::create_vfolder::CreateVFolderInput {
                        name: "data".into(),
                        ..Default::default()
                    },
                },
            )
            .await;
        assert!(folder["create_vfolder"]["vfolder"]["id"].is_string());
        let created = create_session(&app, &t, json!({"image": PYTHON, "mounts": ["data"]})).await;
        let id = session_ids(&created)[0].clone();
        wait_status(&app, &t, &id, &["RUNNING"]).await;

        // No host path in what a user sees of its mounts.
        let mounts_of = || gql::hostile::session_mounts::Variables { id: id.clone() };
        let s = app
            .op_ok::<gql::hostile::SessionMounts>(Some(&t), mounts_of())
            .await;
        let mounts = s["compute_session"]["vfolder_mounts"].as_str().unwrap();
        assert!(
            mounts.contains("data") && !mounts.contains("host_path"),
            "{mounts}"
        );
        assert!(!mounts.contains(&app.dir.display().to_string()), "{mounts}");
        let as_super = app
            .admin_op::<gql::hostile::SessionMounts>(mounts_of())
            .await;
        assert!(
            as_super["compute_session"]["vfolder_mounts"]
                .as_str()
                .unwrap()
                .contains("host_path")
        );

        // Another user's live subscription, while a run floods its output.
        let mut quiet =
            subscribe_op::<gql::SessionStatusChanges>(&app, &other, Default::default()).await;
        let flood = "import sys\nfor i in range(40000): sys.stdout.write('x' * 200 + '\\n')";
        let run = execute(&app, &t, &id, flood).await;
        assert!(run.get("errors").is_none(), "{run}");
        let run = run["data"]["execute_in_session"]["run_id"]
            .as_str()
            .unwrap()
            .to_string();
        // The other user's own event still arrives promptly.
        let theirs = create_session(
            &app,
            &other,
            json!({"image": PYTHON, "resources": "{\"cpu\": \"1000\"}"}),
        )
        .await;
        let their_id = session_ids(&theirs)[0].clone();
        // It arrives, not held up behind the flood: `next_json`'s bound (10 s) is the hang
        // bound, not a claim about speed.
        let msg = next_json(&mut quiet).await;
        assert_eq!(
            msg["payload"]["data"]["session_status_changes"]["status"], "PENDING",
            "{msg}"
        );
        destroy(&app, &other, &their_id).await;
        // 8 MB of output: the server keeps its newest part, says so, and the end arrives.
        let e = eventually("the run to finish", WAIT, || async {
            let e = app
                .op_ok::<gql::Execution>(
                    Some(&t),
                    gql::execution::Variables {
                        run_id: run.clone(),
                    },
                )
                .await;
            (e["execution"]["status"] == "finished").then_some(e)
        })
        .await;
        let console = e["execution"]["console"].as_array().unwrap();
        assert_eq!(console[0]["stream"], "truncated", "{}", console[0]);
        let kept: usize = console
            .iter()
            .map(|c| c["data"].as_str().unwrap().len())
            .sum();
        assert!(kept < 600 * 1024, "kept {kept} bytes");
        assert_eq!(e["execution"]["exit_code"], 0);
        // A follower that subscribes after the end still gets the gap notice and the end (it
        // never listens on the event bus: its first message is what it waits for).
        let mut late = subscribe_op_sent::<gql::ExecutionOutput>(
            &app,
            &t,
            gql::execution_output::Variables {
                run_id: run.clone(),
            },
        )
        .await;
        let first = next_json(&mut late).await;
        assert_eq!(
            first["payload"]["data"]["execution_output"]["stream"], "truncated",
            "{first}"
        );
        loop {
            let m = next_json(&mut late).await;
            if m["type"] == "complete" {
                break;
            }
            if m["payload"]["data"]["execution_output"]["stream"] == "finished" {
                break;
            }
        }
        destroy(&app, &t, &id).await;

        // max_session_lifetime: the session ends by itself, saying why.
        app.use_policy(
            &t,
            "short",
            crate::gql::create_policy::CreateKeyPairResourcePolicyInput {
                default_for_unspecified: "UNLIMITED".into(),
                total_resource_slots: json!("{}"),
                max_concurrent_sessions: 5,
                max_containers_per_session: 1,
                idle_timeout: 0,
                allowed_vfolder_hosts: Some(json!("[\"local\"]")),
                max_vfolder_count: Some(10),
                max_session_lifetime: Some(2),
                max_vfolder_size: Some(0),
                ..Default::default()
            },
        )
        .await;
        let short = create_session(&app, &t, json!({"image": PYTHON})).await;
        let sid = session_ids(&short)[0].clone();
        wait_status(&app, &t, &sid, &["RUNNING"]).await;
        let ended = wait_status(&app, &t, &sid, &["TERMINATED"]).await;
        assert_eq!(ended["status_info"], "max-session-lifetime", "{ended}");
    }
);

both_dbs!(
    websocket_operations_count_and_demotion_ends_rights,
    |db| async move {
        let app = spawn(db).await;
        let peer = app.user("demote@x.org", "admin", "default").await;
        // An admin-only subscription, opened while an admin.
        let mut ws = subscribe_op::<gql::UserChanges>(&app, &peer, Default::default()).await;
        app.admin_op::<gql::ModifyUser>(gql::modify_user::Variables {
            email: "demote@x.org".into(),
            props: gql::modify_user::ModifyUserInput {
                role: Some("user".into()),
                ..Default::default()
            },
        })
        .await;
        // The demotion itself is a user change: instead of it, the stream ends with the reason.
        let msg = next_json(&mut ws).await;
        // The errors only: a change's data (action, key) is no answer here.
        let errors = msg["payload"]["errors"].to_string();
        assert!(
            errors.contains("UNAUTHENTICATED") || errors.contains("revoked"),
            "{msg}"
        );

        // Operations on a WebSocket count against the keypair's rate limit.
        let t = app.user("counted@x.org", "user", "default").await;
        let ak = app.access_key(&t).await;
        app.admin_op::<gql::ModifyKeypair>(gql::modify_keypair::Variables {
            access_key: ak,
            props: gql::modify_keypair::ModifyKeyPairInput {
                rate_limit: Some(4),
                ..Default::default()
            },
        })
        .await;
        // Queries over the WebSocket: they never listen on the event bus.
        let mut ws =
            subscribe_op_sent::<gql::hostile::Typename>(&app, &t, Default::default()).await;
        let mut limited = false;
        for i in 2..12 {
            ws_op::<gql::hostile::Typename>(&mut ws, i, Default::default()).await;
            loop {
                let m = next_json(&mut ws).await;
                if m["type"] == "complete" {
                    break;
                }
                if m.to_string().contains("RATE_LIMITED") {
                    limited = true;
                }
            }
            if limited {
                break;
            }
        }
        assert!(limited, "WebSocket operations were never rate limited");
    }
);

both_dbs!(session_events_follow_role_order, |db| async move {
    require_docker();
    let app = spawn(db).await;
    let boss = app.user("events-boss@x.org", "admin", "default").await;
    let worker = app.user("events-worker@x.org", "user", "default").await;
    let mut ws = subscribe_op::<gql::SessionStatusChanges>(&app, &boss, Default::default()).await;
    // The superadmin's session first: the domain admin must not hear of it…
    let mine = create_session(
        &app,
        &app.admin_token,
        json!({"image": PYTHON, "name": "super-secret", "resources": "{\"cpu\": \"1000\"}"}),
    )
    .await;
    let super_id = session_ids(&mine)[0].clone();
    // …then a user's, which it does hear of (and as the first event).
    let theirs = create_session(
        &app,
        &worker,
        json!({"image": PYTHON, "name": "worker-job", "resources": "{\"cpu\": \"1000\"}"}),
    )
    .await;
    let worker_id = session_ids(&theirs)[0].clone();
    let msg = next_json(&mut ws).await;
    assert_eq!(
        msg["payload"]["data"]["session_status_changes"]["name"], "worker-job",
        "{msg}"
    );
    // The same rule for Backend.AI's SSE endpoint: nothing of the superadmin's session.
    let resp = app.session_events(&boss).await;
    assert_eq!(resp.status(), 200);
    destroy(&app, &app.admin_token, &super_id).await;
    destroy(&app, &worker, &worker_id).await;
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    // Read until the user's session shows up: WAIT is a hang bound.
    let _ = tokio::time::timeout(WAIT, async {
        use futures_util::StreamExt;
        while let Some(Ok(chunk)) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.contains("worker-job") {
                break;
            }
        }
    })
    .await;
    assert!(text.contains("worker-job"), "{text}");
    assert!(!text.contains("super-secret"), "{text}");
});

both_dbs!(change_events_follow_role_order, |db| async move {
    let app = spawn(db).await;
    let boss = app.user("changes-boss@x.org", "admin", "default").await;
    app.user("changes-worker@x.org", "user", "default").await;
    let mut users = subscribe_op::<gql::UserChanges>(&app, &boss, Default::default()).await;
    let rename = |email: &str, name: &str| gql::modify_user::Variables {
        email: email.into(),
        props: gql::modify_user::ModifyUserInput {
            full_name: Some(name.into()),
            ..Default::default()
        },
    };
    // A change of the superadmin's account: not for the domain admin's ears…
    app.admin_op::<gql::ModifyUser>(rename("admin@bai.local", "Root"))
        .await;
    // …a change of a user of its domain is.
    app.admin_op::<gql::ModifyUser>(rename("changes-worker@x.org", "W"))
        .await;
    let msg = next_json(&mut users).await;
    assert_eq!(
        msg["payload"]["data"]["user_changes"]["key"], "changes-worker@x.org",
        "{msg}"
    );
});

/// The fuzzer installed by `scripts/cli.sh`.
fn schemathesis() -> std::path::PathBuf {
    let p = std::env::var("BAI_TEST_SCHEMATHESIS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/bai-cli/fuzz/bin/schemathesis")
        });
    assert!(
        p.exists(),
        "schemathesis is not installed at {} (run scripts/cli.sh)",
        p.display()
    );
    p
}

// The live GraphQL API fuzzed by schemathesis (GraphQL mode) as anonymous, a user and a
// superadmin: every operation with generated arguments, each answer within 1 s. A 5xx, an
// `INTERNAL` error or a slow answer fails the test; GraphQL errors with a code (NOT_FOUND,
// FORBIDDEN, BAD_REQUEST …) are the expected answers to random input. Mutations that would
// end the fuzzer's own login (logout, password and account changes) are left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error() {
    let st = schemathesis();
    let app = spawn_with(Db::Sqlite, |c| {
        c.admin_rate_limit = u32::MAX;
        c.default_rate_limit = u32::MAX;
        // E-mail on (to a port where nothing listens: the mail worker's failures stay in the
        // log), so the reset and verification mutations are fuzzed past "not configured".
        c.smtp_host = Some("127.0.0.1".into());
        c.smtp_port = 9;
        c.smtp_tls = "none".into();
        c.public_url = Some("http://bai.example.test".into());
    })
    .await;
    let user = app.user("fuzz@x.org", "user", "default").await;
    let url = format!("{}/graphql", app.base);
    let keep_login = "^Mutation\\.(logout|change_password|update_password_no_auth|delete_user|purge_user|modify_user|modify_keypair|delete_keypair)$";
    for (who, token) in [
        ("anonymous", None),
        ("user", Some(user.clone())),
        ("superadmin", Some(app.admin_token.clone())),
    ] {
        let mut cmd = tokio::process::Command::new(&st);
        cmd.args([
            "run",
            &url,
            "--max-examples",
            "15",
            "--max-response-time",
            "1",
            "--phases",
            "fuzzing",
            "--generation-database",
            "none",
            "--seed",
            "20261123",
            "--exclude-name-regex",
            keep_login,
        ])
        .env("NO_COLOR", "1");
        if let Some(t) = &token {
            cmd.args(["--header", &format!("Authorization: Bearer {t}")]);
        }
        let out = tokio::time::timeout(std::time::Duration::from_secs(300), cmd.output())
            .await
            .expect("schemathesis finished within 5 minutes")
            .expect("schemathesis runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            text.contains("API Operations:") && !text.contains("Failed to load"),
            "{who}: schemathesis did not run: {text}"
        );
        // The failure kinds of the summary: only GraphQL errors carrying our codes may appear.
        let kinds: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with("❌ ST"))
            .collect();
        let unexpected: Vec<&&str> = kinds
            .iter()
            .filter(|l| {
                !(l.contains("ST113 GraphQL server error")
                    || l.contains("ST206 GraphQL client error"))
            })
            .collect();
        assert!(unexpected.is_empty(), "{who}: {unexpected:?}\n{text}");
        let server_errors = text.matches("\"code\":\"INTERNAL\"").count()
            + text.matches("[500]").count()
            + text.matches("[502]").count()
            + text.matches("[503]").count();
        assert_eq!(server_errors, 0, "{who}: server errors\n{text}");
        // Every GraphQL error the fuzzer saw carried a code of ours.
        let uncoded = text
            .lines()
            .filter(|l| l.contains("\"errors\":[") && !l.contains("\"code\":\""))
            .count();
        assert_eq!(uncoded, 0, "{who}: errors without a code\n{text}");
        println!("{who}: {}", kinds.join(" | "));
    }
    still_serving(&app).await;
}

// The Summary's project section reads another project's name, limits and use through
// `resource_usage(group_id:)`: a stranger to the project (a user who is not a member, a domain
// admin of another domain) gets NOT_FOUND and learns nothing, not even the name.
both_dbs!(
    project_usage_of_a_stranger_s_project_is_not_found,
    |db| async move {
        let app = spawn(db).await;
        app.create_domain("other").await;
        let g = app
            .admin_op::<gql::CreateGroup>(gql::create_group::Variables {
                name: "secret-project".into(),
                props: gql::create_group::GroupInput {
                    domain_name: "default".into(),
                    description: Some("S".into()),
                    ..Default::default()
                },
            })
            .await;
        let gid = g["create_group"]["group"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let outsider = app.user("outsider@x.org", "user", "default").await;
        let foreign_admin = app.user("foreign-admin@x.org", "admin", "other").await;
        let of_project = || gql::resource_usage::Variables {
            group_id: Some(gid.clone()),
        };
        for token in [&outsider, &foreign_admin] {
            let body = app
                .op::<gql::ResourceUsage>(Some(token), of_project())
                .await;
            assert_code(&body, "NOT_FOUND");
            assert!(!body.to_string().contains("secret-project"), "{body}");
        }
        // The superadmin sees it (the query itself works).
        let seen = app.admin_op::<gql::ResourceUsage>(of_project()).await;
        assert_eq!(
            seen["resource_usage"]["group_name"], "secret-project",
            "{seen}"
        );
    }
);

// Backend.AI's event streams are live connections like GraphQL's WebSockets: a user holding
// `ws_max_connections_per_user` of them gets RATE_LIMITED (problem+json) for one more, while
// another user is untouched; a closed stream frees its place.
both_dbs!(
    event_streams_count_against_the_live_connection_cap,
    |db| async move {
        let app = spawn_with(db, |c| c.ws_max_connections_per_user = 2).await;
        let user = app.user("streams@x.org", "user", "default").await;
        let other = app.user("next-door@x.org", "user", "default").await;
        let open = |token: String| {
            let app = &app;
            async move {
                app.http
                    .get(app.url("/events/session?name=*"))
                    .header("x-backendai-version", "v8.20240915")
                    .bearer_auth(token)
                    .send()
                    .await
                    .unwrap()
            }
        };
        let first = open(user.clone()).await;
        assert_eq!(first.status(), 200);
        let second = open(user.clone()).await;
        assert_eq!(second.status(), 200);
        let third = open(user.clone()).await;
        assert_eq!(third.status(), 429);
        assert!(
            third.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/problem+json")
        );
        let body = third.text().await.unwrap();
        assert!(body.contains("At most 2 live connections"), "{body}");
        // A task that is not the caller's is NOT_FOUND before any count.
        let task = app
            .http
            .get(app.url(&format!(
                "/events/background-task?task_id={}",
                uuid::Uuid::new_v4()
            )))
            .header("x-backendai-version", "v8.20240915")
            .bearer_auth(&user)
            .send()
            .await
            .unwrap();
        assert_eq!(task.status(), 404, "an unknown task is not found first");
        // Another user has places of their own.
        assert_eq!(open(other.clone()).await.status(), 200);
        // A stream that ends frees its place.
        drop(first);
        eventually("a closed stream's place freed", WAIT, || async {
            let again = open(user.clone()).await;
            (again.status() == 200).then_some(())
        })
        .await;
        still_serving(&app).await;
    }
);

// Backend.AI's REST calls take bodies no larger than GraphQL's (`max_body_bytes`): a template
// or a session request of 1.5 MiB is 413 before anything reads it (the extractors alone read up
// to 2 MiB, whatever the setting).
both_dbs!(
    backend_ai_calls_take_no_body_larger_than_graphql,
    |db| async move {
        let app = spawn(db).await;
        let user = app.user("bulky@x.org", "user", "default").await;
        let filler = "x".repeat(1536 * 1024);
        for (path, body) in [
            (
                "/template/session",
                json!({"payload": json!({"api_version": "6", "kind": "task_template",
                   "metadata": {"name": filler}, "spec": {}}).to_string()}),
            ),
            ("/session", json!({"image": PYTHON, "tag": filler})),
        ] {
            let resp = app
                .http
                .post(app.url(path))
                .header("x-backendai-version", "v8.20240915")
                .header("content-type", "application/json")
                .bearer_auth(&user)
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 413, "{path}");
        }
        still_serving(&app).await;
    }
);

// An answer given before the body was read (here a 404 to a POST of 100 KB) keeps the
// keep-alive connection usable for the next request (issue 64): the edge reads the rest of the
// body. A body too large to read for nothing gets an answer that says `Connection: close`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_answer_keeps_the_connection_or_says_close() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = spawn(Db::Sqlite).await;
    let addr = app.server.as_ref().unwrap().addr;
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = b"POST /no/such/route HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 102400\r\n\r\n".to_vec();
    req.extend(std::iter::repeat_n(b'x', 102400));
    req.extend(b"GET /health/readyz HTTP/1.1\r\nHost: x\r\n\r\n");
    let (mut rd, mut wr) = tcp.split();
    let (written, answers) = tokio::join!(wr.write_all(&req), async {
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match rd.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend(&buf[..n]),
                }
                if String::from_utf8_lossy(&got).matches("HTTP/1.1 ").count() >= 2 {
                    break;
                }
            }
        })
        .await;
        String::from_utf8_lossy(&got).into_owned()
    });
    written.expect("the whole request is taken");
    let heads: Vec<&str> = answers
        .split("HTTP/1.1 ")
        .skip(1)
        .map(|a| a.get(..3).unwrap_or(a))
        .collect();
    assert_eq!(heads.len(), 2, "two answers on one connection: {answers}");
    assert!(heads[0].starts_with('4'), "{answers}");
    assert_eq!(heads[1], "200", "{answers}");
    assert!(
        !answers.to_ascii_lowercase().contains("connection: close"),
        "{answers}"
    );

    // 64 MiB announced: not read for nothing, and the answer says the connection ends.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(
        b"POST /no/such/route HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\nxxxx",
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(n) = tcp.read(&mut buf).await {
            if n == 0 {
                break;
            }
            got.extend(&buf[..n]);
        }
    })
    .await;
    let answer = String::from_utf8_lossy(&got).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 4"), "{answer}");
    assert!(answer.contains("connection: close"), "{answer}");
    still_serving(&app).await;
}

// Bodies that are no GraphQL request get a GraphQL error (JSON, a code, a short readable
// message) on `/graphql` and `/admin/gql`, Backend.AI's problem+json on `/admin/graphql`:
// invalid JSON, JSON nested past the parser's limit, a batch, a wrong content type; never the
// parser's debug text, never a 400 KB line echoed back (issue 64).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_graphql_bodies_get_json_errors() {
    let app = spawn(Db::Sqlite).await;
    let long = format!("{{\"query\": \"{}", "x".repeat(400 * 1024));
    let nested = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let bodies: Vec<(&str, String, &str)> = vec![
        ("not json", "{not json".into(), "BAD_REQUEST"),
        ("a 400 KB unterminated string", long, "BAD_REQUEST"),
        (
            "nested 5,000 deep",
            format!("{{\"query\": {nested}}}"),
            "BAD_REQUEST",
        ),
        (
            "a batch",
            r#"[{"query": "{ __typename }"}]"#.into(),
            "BAD_REQUEST",
        ),
    ];
    for path in ["/graphql", "/admin/gql"] {
        for (what, body, want) in &bodies {
            let resp = app
                .http
                .post(app.url(path))
                .header("content-type", "application/json")
                .bearer_auth(&app.admin_token)
                .body(body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 400, "{path} {what}");
            assert!(
                resp.headers()["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("application/json"),
                "{path} {what}: {:?}",
                resp.headers()
            );
            let text = resp.text().await.unwrap();
            assert!(
                text.len() < 1024,
                "{path} {what}: {} bytes back",
                text.len()
            );
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(code(&v), *want, "{path} {what}: {v}");
            assert!(
                !message(&v).contains("InvalidRequest") && !message(&v).contains("Error("),
                "{v}"
            );
        }
    }
    let resp = app
        .http
        .post(app.url("/admin/graphql"))
        .header("content-type", "application/json")
        .bearer_auth(&app.admin_token)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.headers()["content-type"], "application/problem+json");
    let v: Value = resp.json().await.unwrap();
    assert!(
        v["title"]
            .as_str()
            .unwrap()
            .starts_with("the request body is not a GraphQL request"),
        "{v}"
    );
    still_serving(&app).await;
}

// A folder may not be named as a folder id (dashed or as 32 hex digits): `/folders/{name}`,
// `/folders/_/id?name=` and mounts take ids and names alike, so such a name would be taken
// for another folder, perhaps a stranger's (issue 64). Renaming to one is refused too, and
// the stranger's folder stays NOT_FOUND by its id.
both_dbs!(folder_names_that_read_as_ids_are_refused, |db| async move {
    let app = spawn(db).await;
    let owner = app.user("keeper@x.org", "user", "default").await;
    let thief = app.user("mimic@x.org", "user", "default").await;
    let (status, made) = rest(
        &app,
        &owner,
        reqwest::Method::POST,
        "/folders",
        Some(json!({"name": "vault"})),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let id = made["id"].as_str().unwrap().to_string();
    let dashed = uuid_dashed(&id);
    let simple = dashed.replace('-', "");
    for name in [&dashed, &simple] {
        let (status, answer) = rest(
            &app,
            &thief,
            reqwest::Method::POST,
            "/folders",
            Some(json!({"name": name})),
        )
        .await;
        assert_eq!(status, 400, "{name}: {answer}");
        assert!(
            answer["title"]
                .as_str()
                .unwrap()
                .contains("reads as a folder id"),
            "{answer}"
        );
    }
    let (status, mine) = rest(
        &app,
        &thief,
        reqwest::Method::POST,
        "/folders",
        Some(json!({"name": "mine"})),
    )
    .await;
    assert_eq!(status, 201, "{mine}");
    let (status, answer) = rest(
        &app,
        &thief,
        reqwest::Method::POST,
        "/folders/mine/rename",
        Some(json!({"new_name": dashed})),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    for path in [
        format!("/folders/{dashed}"),
        format!("/folders/_/id?name={dashed}"),
    ] {
        let (status, answer) = rest(&app, &thief, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 404, "{path}: {answer}");
    }
    let (status, answer) = rest(
        &app,
        &owner,
        reqwest::Method::GET,
        &format!("/folders/{dashed}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["name"], "vault", "{answer}");
});

/// A UUID in its dashed form, from either form.
fn uuid_dashed(id: &str) -> String {
    let h: String = id.chars().filter(char::is_ascii_hexdigit).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Reads until the server closes the connection (or `within` passes): whether it closed.
async fn closed_within(tcp: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await
    .is_ok()
}

// The edge, tried as an attacker would (issue 37): half-sent headers (slowloris), silence, a
// half-sent HTTP/2 preface and idle keep-alive connections are dropped after the header
// timeout; one address holding its maximum of connections gets its next one closed at once
// (counted), while another address is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_drops_slow_idle_and_excess_connections() {
    use tokio::io::AsyncWriteExt;
    let app = spawn_with(Db::Sqlite, |c| {
        c.header_read_timeout_secs = 2;
        c.max_connections_per_addr = 12;
        c.metrics_token = Some("edge-metrics".into());
    })
    .await;
    let addr = app.server.as_ref().unwrap().addr;
    let connect = || async move { tokio::net::TcpStream::connect(addr).await.unwrap() };
    let mut slow = Vec::new();
    for opening in [
        &b"GET /health/live HTTP/1.1\r\nHost: x\r\nX-Slow: "[..],
        b"",
        b"PRI * HTTP/2.0\r\n",
        b"G",
    ] {
        let mut tcp = connect().await;
        tcp.write_all(opening).await.unwrap();
        slow.push(tcp);
    }
    // A keep-alive connection that made one request and then idles.
    let mut idle = connect().await;
    idle.write_all(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    for tcp in slow.iter_mut() {
        assert!(
            closed_within(tcp, Duration::from_secs(10)).await,
            "a slow connection still open after 10 s"
        );
    }
    assert!(closed_within(&mut idle, Duration::from_secs(10)).await);
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "dropped only after the header timeout: {:?}",
        started.elapsed()
    );

    // 12 connections from 127.0.0.1 (held silent); the 13th is closed at once.
    let mut held = Vec::new();
    for _ in 0..12 {
        held.push(connect().await);
    }
    let mut extra = connect().await;
    let t = Instant::now();
    assert!(closed_within(&mut extra, Duration::from_millis(1500)).await);
    println!(
        "the connection over the cap was closed after {:?}",
        t.elapsed()
    );
    // Another address is served meanwhile.
    let other = reqwest::Client::builder()
        .local_address(Some("127.0.0.2".parse().unwrap()))
        .build()
        .unwrap();
    let t = Instant::now();
    let resp = other
        .get(app.url("/health/live"))
        .send()
        .await
        .expect("another address is served");
    assert_eq!(resp.status(), 200);
    println!(
        "another address answered in {:?} while one held its maximum",
        t.elapsed()
    );
    let metrics = other
        .get(app.url("/metrics"))
        .bearer_auth("edge-metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("bai_connections_refused_total{reason=\"per_address_cap\"}")),
        "{metrics}"
    );
    drop(held);
    // Once they are gone, the address is served again.
    eventually(
        "127.0.0.1 served again",
        Duration::from_secs(10),
        || async {
            app.http
                .get(app.url("/health/live"))
                .send()
                .await
                .ok()
                .filter(|r| r.status() == 200)
                .map(|_| ())
        },
    )
    .await;
}

// An HTTP/2 rapid-reset burst over TLS (CVE-2023-44487): a client opens streams and resets each
// at once, thousands of times; the server bounds what that costs (it may end the connection)
// and answers everyone else meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_rapid_reset_burst_leaves_the_server_responsive() {
    use rustls::pki_types::pem::PemObject as _;
    let tls = TlsFiles::new();
    let app = spawn_with(Db::Sqlite, |c| {
        c.tls_cert = Some(tls.cert.clone());
        c.tls_key = Some(tls.key.clone());
    })
    .await;
    let addr = app.server.as_ref().unwrap().addr;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(&tls.ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let (client, conn) = h2::client::handshake(stream).await.unwrap();
    let conn = tokio::spawn(conn);
    let attack = tokio::spawn(async move {
        let mut client = client;
        let mut sent = 0u32;
        for _ in 0..5000 {
            client = match client.ready().await {
                Ok(c) => c,
                Err(_) => break, // the server ended the connection
            };
            let req =
                axum::http::Request::get(format!("https://localhost:{}/graphql", addr.port()))
                    .body(())
                    .unwrap();
            match client.send_request(req, false) {
                Ok((_, mut s)) => {
                    s.send_reset(h2::Reason::CANCEL);
                    sent += 1;
                }
                Err(_) => break,
            }
        }
        sent
    });
    // Meanwhile, and after, another client is answered.
    for _ in 0..5 {
        let t = Instant::now();
        let resp = tokio::time::timeout(
            Duration::from_secs(5),
            app.http.get(app.url("/health/live")).send(),
        )
        .await
        .expect("answered within 5 s during the burst")
        .unwrap();
        assert_eq!(resp.status(), 200);
        println!("answered in {:?} during the burst", t.elapsed());
    }
    let sent = tokio::time::timeout(Duration::from_secs(60), attack)
        .await
        .expect("the burst ends")
        .unwrap();
    println!(
        "{sent} streams opened and reset before the server ended the connection or the burst ended"
    );
    conn.abort();
    let resp = app.http.get(app.url("/health/live")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}
