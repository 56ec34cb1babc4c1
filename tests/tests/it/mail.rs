//! E-mail through a real SMTP server (aiosmtpd from PyPI on loopback, STARTTLS required and
//! AUTH asked, as `tests/support/smtp_server.py` runs it): "Forgot password?" and signup
//! verification, on SQLite and PostgreSQL, with the attacks on them (another address, a
//! forged Host header, a used, expired, voided or foreign token, a flood of requests).
use std::path::PathBuf;
use std::time::Duration;

use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};

use crate::both_dbs;
use crate::support::*;

/// aiosmtpd on a free loopback port, writing each message to `dir/<n>.eml`; killed on drop.
pub struct Smtp {
    child: std::process::Child,
    pub port: u16,
    pub dir: PathBuf,
    pub tls: TlsFiles,
}

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub const SMTP_USER: &str = "bai-mailer";
pub const SMTP_PASSWORD: &str = "smtp-Secret-1";

pub async fn smtp_server() -> Smtp {
    let venv = std::env::var("BAI_SMTP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/bai-cli/smtp")
        });
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "aiosmtpd is not installed in {}: run scripts/cli.sh (scripts/test.sh does)",
        venv.display()
    );
    let tls = TlsFiles::new();
    let port = free_port();
    let dir = tls.dir.join("mail");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("support/smtp_server.py");
    let log = std::fs::File::create(tls.dir.join("smtp.log")).unwrap();
    let child = std::process::Command::new(&python)
        .arg(&script)
        .args(["--port", &port.to_string()])
        .arg("--dir")
        .arg(&dir)
        .arg("--cert")
        .arg(&tls.cert)
        .arg("--key")
        .arg(&tls.key)
        .args(["--user", SMTP_USER, "--password", SMTP_PASSWORD])
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    eventually("the SMTP server to listen", WAIT, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    Smtp {
        child,
        port,
        dir,
        tls,
    }
}

impl Smtp {
    /// Points bai's mail at this server: STARTTLS with the test CA, the login it asks for.
    pub fn configure(&self, c: &mut api::Config, public_url: &str) {
        c.smtp_host = Some("localhost".into());
        c.smtp_port = self.port;
        c.smtp_tls = "starttls".into();
        c.smtp_username = Some(SMTP_USER.into());
        c.smtp_password = Some(SMTP_PASSWORD.into());
        c.smtp_ca_file = Some(self.tls.ca.clone());
        c.mail_from = "bai <noreply@bai.test>".into();
        c.public_url = Some(public_url.into());
    }

    /// Every message received so far, in order, with quoted-printable soft breaks undone.
    pub fn messages(&self) -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "eml"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .map(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .replace("=\r\n", "")
                    .replace("=\n", "")
            })
            .collect()
    }

    /// The messages to `to`.
    pub fn to(&self, to: &str) -> Vec<String> {
        self.messages()
            .into_iter()
            .filter(|m| {
                m.lines()
                    .any(|l| l.to_ascii_lowercase().starts_with("to: ") && l.contains(to))
            })
            .collect()
    }

    /// Waits for the `n`th message to `to` (1-based); returns it.
    pub async fn wait_for(&self, to: &str, n: usize) -> String {
        eventually(&format!("message {n} to {to}"), WAIT, || async {
            self.to(to).get(n - 1).cloned()
        })
        .await
    }
}

/// The token of the link `<prefix><token>` in a message.
pub fn link_token(mail: &str, prefix: &str) -> String {
    let at = mail
        .find(prefix)
        .unwrap_or_else(|| panic!("no link {prefix}… in:\n{mail}"));
    mail[at + prefix.len()..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

const PUBLIC: &str = "https://bai.example.test";
const REQUEST: &str = "mutation($e: String!) { request_password_reset(email: $e) { ok msg } }";
const RESET: &str = "mutation($t: String!, $p: String!, $q: String!) { reset_password(token: $t, new_password: $p, new_password2: $q) { ok } }";
const VERIFY: &str = "mutation($t: String!) { verify_email(token: $t) { ok } }";
const ME: &str = "{ user { email } }";

async fn reset(app: &TestApp, token: &str, pw: &str, pw2: &str) -> Value {
    app.gql(None, RESET, json!({"t": token, "p": pw, "q": pw2}))
        .await
}

/// The hourly request counts start afresh on the hour: a test counting them starts well
/// inside one.
async fn inside_an_hour() {
    let into = chrono::Utc::now().timestamp().rem_euclid(3600);
    if into > 3600 - 90 {
        tokio::time::sleep(Duration::from_secs((3600 - into + 1) as u64)).await;
    }
}

both_dbs!(password_reset_by_mail, |db| async move {
    // Without SMTP there is no e-mail, and the server says so.
    let plain = spawn(db).await;
    let cfg = plain
        .ok(
            None,
            "{ signup_config { password_reset_enabled email_verification_required } }",
            json!({}),
        )
        .await;
    assert_eq!(cfg["signup_config"]["password_reset_enabled"], false);
    assert_eq!(cfg["signup_config"]["email_verification_required"], false);
    let off = plain.gql(None, REQUEST, json!({"e": ADMIN_EMAIL})).await;
    assert_code(&off, "FORBIDDEN");
    assert!(message(&off).contains("E-mail is not configured"), "{off}");
    drop(plain);

    inside_an_hour().await;
    let smtp = smtp_server().await;
    let app = spawn_with(db, |c| {
        smtp.configure(c, PUBLIC);
        c.mail_max_per_account_per_hour = 3;
        c.mail_max_per_addr_per_hour = 10;
    })
    .await;
    let cfg = app
        .ok(
            None,
            "{ signup_config { password_reset_enabled } }",
            json!({}),
        )
        .await;
    assert_eq!(cfg["signup_config"]["password_reset_enabled"], true);
    let alice1 = app.user("alice@x.org", "user", "default").await;
    let alice2 = app.login("alice@x.org", USER_PASSWORD).await;
    app.user("bob@x.org", "user", "default").await;

    // 1. A forged Host header does not move the link: it points at public_url.
    let forged: Value = app
        .http
        .post(app.url("/graphql"))
        .header("host", "evil.example")
        .header("x-forwarded-host", "evil.example")
        .json(&json!({"query": REQUEST, "variables": {"e": "Alice@X.org "}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // 2. An address no account has gets the very same answer.
    let unknown = app.gql(None, REQUEST, json!({"e": "nobody@x.org"})).await;
    assert_eq!(
        forged, unknown,
        "the answer tells whether an account exists"
    );
    assert_eq!(forged["data"]["request_password_reset"]["ok"], true);
    let bob_req = app.gql(None, REQUEST, json!({"e": "bob@x.org"})).await;
    assert_eq!(bob_req, unknown);
    let mail = smtp.wait_for("alice@x.org", 1).await;
    assert!(mail.contains("Subject: Reset your bai password"), "{mail}");
    assert!(mail.contains("From: bai <noreply@bai.test>"), "{mail}");
    assert!(
        mail.lines()
            .any(|l| l.starts_with("Message-ID: <") && l.ends_with("@bai.test>")),
        "{mail}"
    );
    assert!(!mail.contains("evil.example"), "{mail}");
    let token = link_token(&mail, &format!("{PUBLIC}/#reset-password/"));
    assert!(token.len() >= 40, "{token}");
    // The queue is worked in order: once bob's link is here, nobody's request was handled.
    let bob_mail = smtp.wait_for("bob@x.org", 1).await;
    let bob_token = link_token(&bob_mail, &format!("{PUBLIC}/#reset-password/"));
    assert!(
        smtp.to("nobody@x.org").is_empty(),
        "mail to an unknown address"
    );
    assert_eq!(smtp.messages().len(), 2);

    // 3. Bad input: clear errors, nothing sent.
    for bad in [
        "not-an-address",
        "",
        &format!("{}@x.org", "a".repeat(10_000)),
    ] {
        let r = app.gql(None, REQUEST, json!({"e": bad})).await;
        assert_code(&r, "BAD_REQUEST");
    }

    // 4. The rules apply before the link is spent; a mismatch or a weak password keeps it.
    let weak = reset(&app, &token, "short", "short").await;
    assert_code(&weak, "BAD_REQUEST");
    let mismatch = reset(&app, &token, "New-pass-22", "New-pass-23").await;
    assert_code(&mismatch, "BAD_REQUEST");
    // A reset link is no verification link (and is not spent by trying).
    let wrong_kind = app.gql(None, VERIFY, json!({"t": token})).await;
    assert_code(&wrong_kind, "BAD_REQUEST");
    let garbage = reset(&app, "not-a-token", "New-pass-22", "New-pass-22").await;
    assert_code(&garbage, "BAD_REQUEST");
    let huge = reset(&app, &"x".repeat(100_000), "New-pass-22", "New-pass-22").await;
    assert_code(&huge, "BAD_REQUEST");

    // 5. The link sets the password once; every login session of the account ends.
    let ok = reset(&app, &token, "New-pass-22", "New-pass-22").await;
    assert_eq!(ok["data"]["reset_password"]["ok"], true, "{ok}");
    for t in [&alice1, &alice2] {
        // The ended login's bearer token is refused by the authentication layer (Backend.AI's
        // problem+json with UNAUTHENTICATED), not answered as anonymous nor failed otherwise.
        let me = app.gql(Some(t), ME, json!({})).await;
        assert_eq!(me["code"], "UNAUTHENTICATED", "{me}");
        assert!(
            me["title"]
                .as_str()
                .is_some_and(|m| m.contains("The bearer token is invalid or has expired")),
            "{me}"
        );
    }
    let old = app
        .gql(
            None,
            "mutation($e: String!, $p: String!) { login(email: $e, password: $p) { token } }",
            json!({"e": "alice@x.org", "p": USER_PASSWORD}),
        )
        .await;
    assert_code(&old, "UNAUTHENTICATED");
    let alice = app.login("alice@x.org", "New-pass-22").await;
    let again = reset(&app, &token, "Other-pass-33", "Other-pass-33").await;
    assert_code(&again, "BAD_REQUEST");
    assert!(
        message(&again).contains("invalid, used or expired"),
        "{again}"
    );

    // 6. Two uses of one link at once: exactly one wins.
    let (a, b) = tokio::join!(
        reset(&app, &bob_token, "Bob-pass-1!", "Bob-pass-1!"),
        reset(&app, &bob_token, "Eve-pass-1!", "Eve-pass-1!")
    );
    let wins = [&a, &b]
        .iter()
        .filter(|r| r["data"]["reset_password"]["ok"] == true)
        .count();
    assert_eq!(wins, 1, "{a} {b}");

    // 7. An expired link is refused.
    app.gql(None, REQUEST, json!({"e": "alice@x.org"})).await;
    let expiring = link_token(
        &smtp.wait_for("alice@x.org", 2).await,
        &format!("{PUBLIC}/#reset-password/"),
    );
    use sea_orm::sea_query::Expr;
    entity::email_tokens::Entity::update_many()
        .col_expr(
            entity::email_tokens::Column::ExpiresAt,
            Expr::value(chrono::Utc::now() - chrono::Duration::seconds(1)),
        )
        .filter(entity::email_tokens::Column::UserUuid.is_not_null())
        .exec(&app.state().db)
        .await
        .unwrap();
    let expired = reset(&app, &expiring, "Late-pass-44", "Late-pass-44").await;
    assert_code(&expired, "BAD_REQUEST");

    // 8. A password changed in the meantime voids the pending links.
    app.gql(None, REQUEST, json!({"e": "alice@x.org"})).await;
    let pending = link_token(
        &smtp.wait_for("alice@x.org", 3).await,
        &format!("{PUBLIC}/#reset-password/"),
    );
    app.ok(
        Some(&alice),
        "mutation { change_password(old_password: \"New-pass-22\", new_password: \"Changed-pass-55\", new_password2: \"Changed-pass-55\") { ok } }",
        json!({}),
    )
    .await;
    let voided = reset(&app, &pending, "Late-pass-44", "Late-pass-44").await;
    assert_code(&voided, "BAD_REQUEST");
    app.login("alice@x.org", "Changed-pass-55").await;

    // 9. Throttled per address asked for — an unknown one alike, so the limit tells nothing —
    //    and per client address.
    let fourth = app.gql(None, REQUEST, json!({"e": "alice@x.org"})).await;
    assert_code(&fourth, "RATE_LIMITED");
    assert!(
        message(&fourth).contains("for this e-mail address"),
        "{fourth}"
    );
    for _ in 0..2 {
        let r = app.gql(None, REQUEST, json!({"e": "nobody@x.org"})).await;
        assert_eq!(r["data"]["request_password_reset"]["ok"], true, "{r}");
    }
    let nobody4 = app.gql(None, REQUEST, json!({"e": "nobody@x.org"})).await;
    assert_eq!(
        (code(&nobody4), message(&nobody4)),
        (code(&fourth), message(&fourth)),
        "the limit differs for an unknown address"
    );
    // So far from this address: alice 4, nobody 4, bob 1 (refused ones count too).
    let tenth = app.gql(None, REQUEST, json!({"e": "fresh1@x.org"})).await;
    assert_eq!(
        tenth["data"]["request_password_reset"]["ok"], true,
        "{tenth}"
    );
    let eleventh = app.gql(None, REQUEST, json!({"e": "fresh2@x.org"})).await;
    assert_code(&eleventh, "RATE_LIMITED");
    assert!(
        message(&eleventh).contains("from your address"),
        "{eleventh}"
    );
    // Only the three links to alice and bob's went out.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(smtp.messages().len(), 4, "{:?}", smtp.messages());
});

both_dbs!(signup_verified_by_mail, |db| async move {
    inside_an_hour().await;
    let smtp = smtp_server().await;
    let app = spawn_with(db, |c| {
        smtp.configure(c, PUBLIC);
        c.signup_enabled = true;
    })
    .await;
    let cfg = app
        .ok(
            None,
            "{ signup_config { email_verification_required } }",
            json!({}),
        )
        .await;
    assert_eq!(cfg["signup_config"]["email_verification_required"], true);
    const SIGNUP: &str = "mutation($e: String!) { signup(email: $e, username: $e, password: \"Carol-pass-1\", password2: \"Carol-pass-1\", agreed_to_terms: true) { ok msg } }";
    const LOGIN: &str =
        "mutation($e: String!) { login(email: $e, password: \"Carol-pass-1\") { token } }";
    let s = app.ok(None, SIGNUP, json!({"e": "carol@x.org"})).await;
    assert!(
        s["signup"]["msg"]
            .as_str()
            .unwrap()
            .contains("Check your e-mail"),
        "{s}"
    );
    // Not before the address is verified.
    let early = app.gql(None, LOGIN, json!({"e": "carol@x.org"})).await;
    assert_code(&early, "UNAUTHENTICATED");
    assert!(message(&early).contains("not been verified"), "{early}");
    let mail = smtp.wait_for("carol@x.org", 1).await;
    assert!(
        mail.contains("Subject: Verify your e-mail address for bai"),
        "{mail}"
    );
    let token = link_token(&mail, &format!("{PUBLIC}/#verify-email/"));
    // A verification link sets no password, and a guess verifies nothing.
    let as_reset = reset(&app, &token, "Mallory-pass-1", "Mallory-pass-1").await;
    assert_code(&as_reset, "BAD_REQUEST");
    let guess = app
        .gql(
            None,
            VERIFY,
            json!({"t": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}),
        )
        .await;
    assert_code(&guess, "BAD_REQUEST");
    app.ok(None, VERIFY, json!({"t": token})).await;
    let twice = app.gql(None, VERIFY, json!({"t": token})).await;
    assert_code(&twice, "BAD_REQUEST");
    let logged = app.ok(None, LOGIN, json!({"e": "carol@x.org"})).await;
    assert!(logged["login"]["token"].is_string());
    let status = app
        .admin("{ user(email: \"carol@x.org\") { status } }", json!({}))
        .await;
    assert_eq!(status["user"]["status"], "active");

    // The verification mail lost: "Forgot password?" sends a link that verifies as well.
    app.ok(None, SIGNUP, json!({"e": "dave@x.org"})).await;
    smtp.wait_for("dave@x.org", 1).await;
    app.ok(None, REQUEST, json!({"e": "dave@x.org"})).await;
    let reset_mail = smtp.wait_for("dave@x.org", 2).await;
    let t = link_token(&reset_mail, &format!("{PUBLIC}/#reset-password/"));
    let r = reset(&app, &t, "Dave-pass-22", "Dave-pass-22").await;
    assert_eq!(r["data"]["reset_password"]["ok"], true, "{r}");
    app.login("dave@x.org", "Dave-pass-22").await;
    let rows = entity::email_tokens::Entity::find()
        .filter(entity::email_tokens::Column::Email.eq("dave@x.org"))
        .all(&app.state().db)
        .await
        .unwrap();
    // Dave's unused verification link is left to expire; no reset link is left.
    assert!(rows.iter().all(|r| r.purpose == "verify_email"), "{rows:?}");
});
