//! The web console in a real headless Chromium: the login page, a failed and a successful
//! superadmin login, logout. Needs chromium + chromium-driver and the built bundle
//! (scripts/test.sh provides all three; missing ones fail the test, never skip it).
use std::path::PathBuf;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};

use crate::support::*;

pub fn web_dir() -> PathBuf {
    let dir = std::env::var("BAI_TEST_WEB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../web/dist"));
    assert!(
        dir.join("index.html").exists(),
        "web console bundle missing in {}: run scripts/build-web.sh",
        dir.display()
    );
    dir
}

pub fn screenshot_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("bai-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A headless Chromium driven through chromedriver; both end with the value.
pub struct Browser {
    pub client: Client,
    _driver: tokio::process::Child,
    _profile: PathBuf,
}

pub async fn browser() -> Browser {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let driver = tokio::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver must be installed (Debian chromium-driver)");
    let profile =
        std::env::temp_dir().join(format!("bai-chrome-{}", uuid::Uuid::new_v4().simple()));
    let caps = serde_json::json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1200,800", format!("--user-data-dir={}", profile.display())]
        }
    });
    let caps = caps.as_object().unwrap().clone();
    let url = format!("http://127.0.0.1:{port}");
    let mut last_err = None;
    for _ in 0..50 {
        match ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(client) => {
                return Browser {
                    client,
                    _driver: driver,
                    _profile: profile,
                };
            }
            Err(e) => last_err = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("cannot start Chromium through chromedriver: {last_err:?}");
}

async fn text_of(c: &Client, css: &str) -> String {
    c.wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_login_and_logout() {
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| c.web_dir = dir).await;
    let b = browser().await;
    let c = &b.client;
    // Checks run in a block so the browser is always closed before asserting.
    let result: Result<(), String> = async {
        c.goto(&format!("{}/some/deep/link", app.base))
            .await
            .map_err(|e| e.to_string())?;
        let heading = text_of(c, ".panel h2").await;
        if heading != "Login With E-mail" {
            return Err(format!("login heading: {heading}"));
        }
        let endpoint = text_of(c, ".endpoint").await;
        if !endpoint.contains(&app.base) {
            return Err(format!("endpoint shown: {endpoint}"));
        }
        std::fs::write(
            screenshot_dir().join("login.png"),
            c.screenshot().await.map_err(|e| e.to_string())?,
        )
        .unwrap();
        let fill = |sel: &'static str, v: String| async move {
            let el = c.find(Locator::Css(sel)).await.map_err(|e| e.to_string())?;
            el.clear().await.map_err(|e| e.to_string())?;
            el.send_keys(&v).await.map_err(|e| e.to_string())
        };
        fill("#email", ADMIN_EMAIL.into()).await?;
        fill("#password", "wrong-Pass1".into()).await?;
        c.find(Locator::Css("#login-button"))
            .await
            .map_err(|e| e.to_string())?
            .click()
            .await
            .map_err(|e| e.to_string())?;
        let err = text_of(c, "#login-error").await;
        if err != "Invalid email or password." {
            return Err(format!("error shown: {err}"));
        }
        fill("#password", ADMIN_PASSWORD.into()).await?;
        c.find(Locator::Css("#login-button"))
            .await
            .map_err(|e| e.to_string())?
            .click()
            .await
            .map_err(|e| e.to_string())?;
        let who = text_of(c, "#current-user").await;
        if !who.contains(ADMIN_EMAIL) || !who.contains("superadmin") {
            return Err(format!("user shown: {who}"));
        }
        let admin_menu = text_of(c, ".side .section").await;
        if admin_menu != "ADMINISTRATION" && admin_menu != "Administration" {
            return Err(format!("admin menu: {admin_menu}"));
        }
        std::fs::write(
            screenshot_dir().join("shell.png"),
            c.screenshot().await.map_err(|e| e.to_string())?,
        )
        .unwrap();
        // A reload keeps the session (HttpOnly cookie); logout ends it.
        c.refresh().await.map_err(|e| e.to_string())?;
        text_of(c, "#current-user").await;
        c.find(Locator::Css("#logout"))
            .await
            .map_err(|e| e.to_string())?
            .click()
            .await
            .map_err(|e| e.to_string())?;
        text_of(c, "#login-button").await;
        c.refresh().await.map_err(|e| e.to_string())?;
        text_of(c, "#login-button").await;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
}

/// A fresh install's superadmin has a one-time password that must be changed: the console
/// shows the change form, enforces the rules with the server's message, then logs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_forced_password_change() {
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| c.web_dir = dir).await;
    app.user("first@x.org", "user", "default").await;
    app.admin(r#"mutation { modify_user(email: "first@x.org", props: {need_password_change: true}) { ok } }"#, serde_json::json!({})).await;
    let b = browser().await;
    let c = &b.client;
    let result: Result<(), String> = async {
        let e = |e: fantoccini::error::CmdError| e.to_string();
        c.goto(&app.base).await.map_err(|e| e.to_string())?;
        text_of(c, "#login-button").await;
        c.find(Locator::Css("#email"))
            .await
            .map_err(e)?
            .send_keys("first@x.org")
            .await
            .map_err(e)?;
        c.find(Locator::Css("#password"))
            .await
            .map_err(e)?
            .send_keys(USER_PASSWORD)
            .await
            .map_err(e)?;
        c.find(Locator::Css("#login-button"))
            .await
            .map_err(e)?
            .click()
            .await
            .map_err(e)?;
        let heading = c
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::XPath(
                "//h2[normalize-space()='Change your password']",
            ))
            .await
            .map_err(e)?;
        let _ = heading;
        c.find(Locator::Css("#new-password"))
            .await
            .map_err(e)?
            .send_keys("weakpass")
            .await
            .map_err(e)?;
        c.find(Locator::Css("#new-password2"))
            .await
            .map_err(e)?
            .send_keys("weakpass")
            .await
            .map_err(e)?;
        c.find(Locator::Css("#login-button"))
            .await
            .map_err(e)?
            .click()
            .await
            .map_err(e)?;
        let rules = c
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::XPath(
                "//div[@id='login-error'][contains(., 'special character')]",
            ))
            .await
            .map_err(e)?;
        let _ = rules;
        std::fs::write(
            screenshot_dir().join("forced-change.png"),
            c.screenshot().await.map_err(e)?,
        )
        .unwrap();
        for (id, v) in [
            ("#new-password", "Fresh-pass-9"),
            ("#new-password2", "Fresh-pass-9"),
        ] {
            let el = c.find(Locator::Css(id)).await.map_err(e)?;
            el.clear().await.map_err(e)?;
            el.send_keys(v).await.map_err(e)?;
        }
        c.find(Locator::Css("#login-button"))
            .await
            .map_err(e)?
            .click()
            .await
            .map_err(e)?;
        let who = text_of(c, "#current-user").await;
        if !who.contains("first@x.org") {
            return Err(format!("user shown: {who}"));
        }
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
    app.login("first@x.org", "Fresh-pass-9").await;
}
