//! The web console in a real headless Chromium: the login page, a failed and a successful
//! superadmin login, logout. Needs chromium + chromium-driver and the built bundle
//! (scripts/test.sh provides all three; missing ones fail the test, never skip it).
use std::path::PathBuf;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};

use crate::gql;
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
    browser_with(&[]).await
}

/// A browser with more command-line switches.
pub async fn browser_with(extra: &[String]) -> Browser {
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
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1200,800",
    ]
    .map(String::from)
    .to_vec();
    args.push(format!("--user-data-dir={}", profile.display()));
    args.extend(extra.iter().cloned());
    let caps = serde_json::json!({
        "browserName": "chrome",
        "goog:chromeOptions": { "binary": "/usr/bin/chromium", "args": args }
    });
    let caps = caps.as_object().unwrap().clone();
    let url = format!("http://127.0.0.1:{port}");
    eventually("chromedriver to listen", WAIT, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    let client = eventually("chromedriver to start Chromium", WAIT, || async {
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps.clone())
            .connect(&url)
            .await
            // Shown with the test's output should it never start.
            .inspect_err(|e| eprintln!("cannot start Chromium through chromedriver: {e:?}"))
            .ok()
    })
    .await;
    Browser {
        client,
        _driver: driver,
        _profile: profile,
    }
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
        // Our own name; Backend.AI (Lablup's trademark) only as what we are compatible with.
        let title = c.title().await.map_err(|e| e.to_string())?;
        let product = text_of(c, ".panel h1").await;
        let subtitle = text_of(c, ".panel .subtitle").await;
        if title != "bai console"
            || product != "bai"
            || subtitle != "a Backend.AI-compatible server"
        {
            return Err(format!("product name: {title} / {product} / {subtitle}"));
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
        let brand = text_of(c, ".side .brand").await;
        if brand != "bai" {
            return Err(format!("brand: {brand}"));
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
    app.admin_op::<gql::ModifyUser>(gql::modify_user::Variables {
        email: "first@x.org".into(),
        props: gql::modify_user::ModifyUserInput {
            need_password_change: Some(true),
            ..Default::default()
        },
    })
    .await;
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

/// `eventually` for the steps of a browser test, up to `secs`: running out of time is an
/// `Err` rather than a panic, so the test still closes the browser before it fails.
async fn within<T, F, Fut>(secs: u64, what: &str, probe: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let limit = Duration::from_secs(secs);
    // `eventually`'s own bound lies beyond this one: this one ends the wait.
    tokio::time::timeout(limit, eventually(what, limit + WAIT, probe))
        .await
        .map_err(|_| format!("waited {limit:?} for {what}"))
}

/// Clicks the element `css` finds (waiting for it to appear). Live lists draw a row again
/// when its session changes status, so an element found a moment earlier may be gone: it is
/// found again.
async fn click(c: &Client, css: &str) -> Result<(), String> {
    within(15, &format!("{css} to take a click"), || async {
        let el = c.find(Locator::Css(css)).await.ok()?;
        match el.click().await {
            Ok(()) => Some(Ok(())),
            Err(e) if e.to_string().contains("stale element") => None,
            Err(e) => Some(Err(format!("click {css}: {e}"))),
        }
    })
    .await?
}

/// Clicks `opener` until `dialog` shows (a live list may redraw the row between finding the
/// button and the click landing, and a click on the old row opens nothing).
async fn open_dialog(c: &Client, opener: &str, dialog: &str) -> Result<(), String> {
    for _ in 0..3 {
        click(c, opener).await?;
        if wait_for(c, dialog, 3).await.is_ok() {
            return Ok(());
        }
    }
    Err(format!("{opener} did not open {dialog}"))
}

async fn shot(c: &Client, name: &str) -> Result<(), String> {
    let png = c.screenshot().await.map_err(|e| e.to_string())?;
    std::fs::write(screenshot_dir().join(name), png).map_err(|e| e.to_string())
}

/// Waits (without reloading) until `css` matches, up to `secs`.
/// The list of strings a page's script returns.
async fn strings(c: &Client, script: &str) -> Result<Vec<String>, String> {
    let value = c.execute(script, vec![]).await.map_err(|e| e.to_string())?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}

async fn wait_for(c: &Client, css: &str, secs: u64) -> Result<(), String> {
    c.wait()
        .at_most(Duration::from_secs(secs))
        .for_element(Locator::Css(css))
        .await
        .map(|_| ())
        .map_err(|e| format!("{css} did not appear: {e}"))
}

/// Waits until the element's text contains `needle`, up to `secs`.
async fn wait_text(c: &Client, css: &str, needle: &str, secs: u64) -> Result<(), String> {
    let last = std::sync::Mutex::new(String::new());
    within(secs, &format!("{css} to show {needle:?}"), || async {
        let text = c
            .find(Locator::Css(css))
            .await
            .ok()?
            .text()
            .await
            .unwrap_or_default();
        let shown = text.contains(needle);
        *last.lock().unwrap() = text;
        shown.then_some(())
    })
    .await
    .map_err(|e| format!("{e}; last: {:?}", last.lock().unwrap()))
}

/// Waits until nothing matches `css`, up to `secs`.
async fn wait_gone(c: &Client, css: &str, secs: u64) -> Result<(), String> {
    within(secs, &format!("{css} to go"), || async {
        c.find_all(Locator::Css(css))
            .await
            .ok()
            .filter(|v| v.is_empty())
            .map(|_| ())
    })
    .await
}

/// The user's day in the console: log in, make a folder, launch a session with it through the
/// wizard, watch it reach RUNNING live, run a command in the web terminal that writes into the
/// folder, terminate the session, and find the file in the explorer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_session_with_folder_terminal_and_explorer() {
    require_docker();
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| c.web_dir = dir).await;
    let token = app.user("web@x.org", "user", "default").await;
    let b = browser().await;
    let c = &b.client;
    let result: Result<(), String> = async {
        let e = |e: fantoccini::error::CmdError| e.to_string();
        c.goto(&app.base).await.map_err(e)?;
        c.wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::Css("#email"))
            .await
            .map_err(e)?
            .send_keys("web@x.org")
            .await
            .map_err(e)?;
        // Figures for the README (printed, never asserted): first paint and the login form.
        let timing = c
            .execute(
                "const p = performance.getEntriesByName('first-contentful-paint')[0]; return [p ? p.startTime : null, performance.now()];",
                vec![],
            )
            .await
            .map_err(e)?;
        println!("console timing (ms): first contentful paint, login form ready by: {timing}");
        c.find(Locator::Css("#password"))
            .await
            .map_err(e)?
            .send_keys(USER_PASSWORD)
            .await
            .map_err(e)?;
        click(c, "#login-button").await?;
        wait_for(c, "#current-user", 15).await?;
        wait_for(c, ".bar", 15).await?;
        shot(c, "summary.png").await?;

        // Data & Storage: NEW FOLDER.
        c.goto(&format!("{}/#data", app.base)).await.map_err(e)?;
        click(c, "#new-folder").await?;
        c.wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css("#folder-name"))
            .await
            .map_err(e)?
            .send_keys("webdata")
            .await
            .map_err(e)?;
        shot(c, "new-folder.png").await?;
        click(c, "#folder-create").await?;
        wait_for(c, "tr.folder-row[data-name='webdata']", 15).await?;
        shot(c, "data.png").await?;

        // Sessions: the launch wizard, with the folder.
        c.goto(&format!("{}/#sessions", app.base))
            .await
            .map_err(e)?;
        click(c, "#start-session").await?;
        let name = c
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css("#launch-name"))
            .await
            .map_err(e)?;
        // Environments by name, versions by number; the registry as a detail.
        wait_for(c, "#launch-env option[value='Python']", 10).await?;
        let envs = text_of(c, "#launch-env").await;
        if !envs.contains("Python") || !envs.contains("C++ (GCC)") || envs.contains("bai.local") {
            return Err(format!("environments: {envs}"));
        }
        let versions = text_of(c, "#launch-image").await;
        if versions.trim() != "3.11" {
            return Err(format!("Python versions: {versions}"));
        }
        click(c, "#launch-env option[value='C++ (GCC)']").await?;
        wait_text(c, "#launch-image", "12", 5).await?;
        wait_text(c, "#launch-registry", "bai.local/stable/cpp:12-debian12", 5).await?;
        shot(c, "launch-environment.png").await?;
        click(c, "#launch-env option[value='Python']").await?;
        wait_text(c, "#launch-registry", "python:3.11-debian12", 5).await?;
        name.send_keys("bad name").await.map_err(e)?;
        let shown = text_of(c, "#name-error").await;
        if !shown.contains("no spaces") {
            return Err(format!("name validation: {shown}"));
        }
        name.clear().await.map_err(e)?;
        name.send_keys("web-sess").await.map_err(e)?;
        // Environment variables: closing unsaved asks first; SAVE applies them.
        click(c, "#env-open").await?;
        type_into(c, "#env-dialog .env-name", "GREETING").await?;
        type_into(c, "#env-dialog .env-value", "bar").await?;
        click(c, "#env-dialog .close").await?;
        wait_for(c, "#env-unsaved", 5).await?;
        shot(c, "env-dialog.png").await?;
        click(c, "#env-keep").await?;
        click(c, "#env-save").await?;
        wait_gone(c, "#env-dialog", 5).await?;
        click(c, "#launch-next").await?;
        click(c, ".folder-choice[data-name='webdata']").await?;
        click(c, "#launch-next").await?;
        wait_for(c, "#launch-cpu", 10).await?;
        shot(c, "launch-resources.png").await?;
        click(c, "#launch-next").await?;
        let summary = text_of(c, "#launch-summary").await;
        if !summary.contains("webdata") || !summary.contains("web-sess") || !summary.contains("GREETING=bar") || !summary.contains("Python 3.11") {
            return Err(format!("summary: {summary}"));
        }
        shot(c, "launch-summary.png").await?;
        click(c, "#launch-confirm").await?;
        // The app launcher opens after launch.
        wait_for(c, "#apps-dialog .app-tile[data-app='jupyter']", 20).await?;
        wait_for(c, "#apps-dialog .app-tile[data-app='sshd']", 5).await?;
        shot(c, "apps.png").await?;
        click(c, "#apps-dialog .close").await?;
        // RUNNING without a reload.
        wait_for(
            c,
            "tr.session-row[data-name='web-sess'][data-status='RUNNING']",
            90,
        )
        .await?;
        wait_text(c, "tr.session-row[data-name='web-sess'] .live-usage", "CPU ", 30).await?;
        // Usage as the guide shows it: block and network I/O beside CPU and memory; the
        // configuration with its resource group; the start date with the elapsed time.
        wait_text(c, "tr.session-row[data-name='web-sess'] .io-usage", "READ", 10).await?;
        wait_text(c, "tr.session-row[data-name='web-sess'] .io-usage", "net ", 5).await?;
        wait_text(c, "tr.session-row[data-name='web-sess'] .sgroup", "default", 5).await?;
        // The elapsed time ticks while the session runs.
        let first = text_of(c, "tr.session-row[data-name='web-sess'] .elapsed").await;
        within(10, "the elapsed time to tick", || async {
            let now = text_of(c, "tr.session-row[data-name='web-sess'] .elapsed").await;
            (now != first && now.ends_with(" s")).then_some(())
        })
        .await?;
        wait_text(c, "tr.session-row[data-name='web-sess'] .env-name", "Python 3.11", 10).await?;
        shot(c, "sessions.png").await?;
        // The session's detail panel: mounts, variable names (never values), history, agent.
        click(c, "tr.session-row[data-name='web-sess'] .session-open").await?;
        wait_text(c, "#detail-history", "RUNNING", 10).await?;
        let detail = text_of(c, "#detail-dialog").await;
        for want in ["webdata", "/home/work/webdata", "GREETING", "PENDING", "Python 3.11", "Used time"] {
            if !detail.contains(want) {
                return Err(format!("detail panel lacks {want}: {detail}"));
            }
        }
        if detail.contains("GREETING=bar") {
            return Err(format!("detail panel shows a variable's value: {detail}"));
        }
        wait_text(c, "#detail-usage .io-usage", "WRITE", 15).await?;
        if text_of(c, "#detail-agent").await.trim() == "-" {
            return Err(format!("detail panel without an agent: {detail}"));
        }
        shot(c, "session-detail.png").await?;
        // Dialogs take the focus and close on Escape.
        let focused = c
            .execute("return document.activeElement && document.activeElement.closest('#detail-dialog') !== null;", vec![])
            .await
            .map_err(e)?;
        if focused != serde_json::json!(true) {
            return Err("the detail dialog did not take the focus".into());
        }
        c.active_element()
            .await
            .map_err(e)?
            .send_keys("\u{e00c}")
            .await
            .map_err(e)?;
        wait_gone(c, "#detail-dialog", 5).await?;
        // Summary: the project's section (everyone's use, mine within it) and the statistics.
        c.goto(&format!("{}/#summary", app.base)).await.map_err(e)?;
        wait_text(c, "#project-usage", "mine 1 core of the project's 1 core", 15).await?;
        let project = text_of(c, "#project-usage").await;
        if !project.to_lowercase().contains("project default") || !project.contains("project 1 core / unlimited") {
            return Err(format!("project section: {project}"));
        }
        // The guide's bars: upper = mine here / (mine here + allocatable here), lower = mine in
        // all / (mine in all + allocatable here); 1 of the group's 2 cores is left.
        wait_text(c, ".guide-bar[data-slot='cpu']", "1 core / 2 core in this resource group", 10).await?;
        wait_text(c, ".guide-bar[data-slot='cpu']", "1 core / 2 core in all", 10).await?;
        wait_text(c, "#stat-mine", "1", 10).await?;
        let visible = text_of(c, "#stat-visible").await;
        if visible.trim() != "1" {
            return Err(format!("running sessions a user may see: {visible}"));
        }
        shot(c, "summary-project.png").await?;
        c.goto(&format!("{}/#sessions", app.base)).await.map_err(e)?;
        wait_for(c, "tr.session-row[data-name='web-sess'][data-status='RUNNING']", 15).await?;
        // The launcher starts Jupyter and shows where SSH/SFTP listens.
        click(
            c,
            "tr.session-row[data-name='web-sess'] [data-action='apps']",
        )
        .await?;
        click(c, "#apps-dialog .app-tile[data-app='sshd']").await?;
        wait_text(c, "#ssh-info", "ssh -i id_container -p ", 30).await?;
        click(c, "#apps-dialog .app-tile[data-app='jupyter']").await?;
        wait_text(c, "#app-message", "jupyter is running", 60).await?;
        shot(c, "apps-started.png").await?;
        let handles = c.windows().await.map_err(e)?;
        c.switch_to_window(handles[0].clone()).await.map_err(e)?;
        click(c, "#apps-dialog .close").await?;

        // The web terminal writes into the mounted folder.
        let list = app
            .op_ok::<gql::ComputeSessionList>(
                Some(&token),
                gql::compute_session_list::Variables {
                    limit: 5,
                    ..Default::default()
                },
            )
            .await;
        let id = list["compute_session_list"]["items"][0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        c.goto(&format!("{}/#terminal/{id}", app.base))
            .await
            .map_err(e)?;
        wait_text(c, "#terminal-status", "connected", 20).await?;
        // The shell's prompt (bash in tmux): it reads what is typed from now on.
        wait_text(c, "#terminal-screen", "$", 20).await?;
        let term = c.find(Locator::Css("#terminal-screen")).await.map_err(e)?;
        term.click().await.map_err(e)?;
        term.send_keys(
            "echo hello-from-$((6*7))-$GREETING > webdata/from-term.txt; cat webdata/from-term.txt",
        )
        .await
        .map_err(e)?;
        term.send_keys(&fantoccini::key::Key::Enter.to_string())
            .await
            .map_err(e)?;
        wait_text(c, "#terminal-screen", "hello-from-42-bar", 20).await?;
        shot(c, "terminal.png").await?;

        // "Convert to image" in the session menu: a named image of the user's, with progress.
        c.goto(&format!("{}/#sessions", app.base))
            .await
            .map_err(e)?;
        click(
            c,
            "tr.session-row[data-name='web-sess'] [data-action='commit']",
        )
        .await?;
        type_into(c, "#commit-name", "web-env").await?;
        click(c, "#commit-confirm").await?;
        wait_for(c, "#commit-done", 120).await?;
        shot(c, "commit.png").await?;
        click(c, "#commit-dialog .close").await?;
        let mine = app
            .op_ok::<gql::CustomizedImages>(Some(&token), Default::default())
            .await;
        assert_eq!(
            mine["customized_images"][0]["customized_name"], "web-env",
            "{mine}"
        );
        app.op_ok::<gql::ForgetImageById>(
            Some(&token),
            gql::forget_image_by_id::Variables {
                image_id: mine["customized_images"][0]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            },
        )
        .await;

        // Logs, then terminate with confirmation; the row leaves Running by itself.
        click(
            c,
            "tr.session-row[data-name='web-sess'] [data-action='logs']",
        )
        .await?;
        wait_for(c, "#logs-text", 10).await?;
        shot(c, "logs.png").await?;
        click(c, "#logs-dialog .close").await?;
        click(
            c,
            "tr.session-row[data-name='web-sess'] [data-action='terminate']",
        )
        .await?;
        shot(c, "terminate.png").await?;
        click(c, "#terminate-confirm").await?;
        wait_gone(c, "tr.session-row[data-name='web-sess']", 60).await?;
        click(c, "#tab-finished").await?;
        wait_for(
            c,
            "tr.session-row[data-name='web-sess'][data-status='TERMINATED']",
            15,
        )
        .await?;
        shot(c, "finished.png").await?;

        // The file outlives the session: the explorer lists it and offers the download.
        c.goto(&format!("{}/#data", app.base)).await.map_err(e)?;
        click(c, "tr.folder-row[data-name='webdata'] .folder-open").await?;
        wait_for(c, "tr.file-row[data-name='from-term.txt']", 15).await?;
        // Upload through the explorer (with its progress bar), then it is listed.
        let local = app.dir.join("uploaded.txt");
        std::fs::write(&local, "from the browser\n").map_err(|e| e.to_string())?;
        c.find(Locator::Css("#upload-input"))
            .await
            .map_err(e)?
            .send_keys(&local.display().to_string())
            .await
            .map_err(e)?;
        wait_for(c, "tr.file-row[data-name='uploaded.txt']", 20).await?;
        shot(c, "explorer.png").await?;
        let href = c
            .find(Locator::Css(
                "tr.file-row[data-name='from-term.txt'] a[title='Download']",
            ))
            .await
            .map_err(e)?
            .attr("href")
            .await
            .map_err(e)?
            .unwrap_or_default();
        let body = app
            .http
            .get(app.url(&href))
            .bearer_auth(&token)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .text()
            .await
            .map_err(|e| e.to_string())?;
        if body != "hello-from-42-bar\n" {
            return Err(format!("downloaded {href}: {body:?}"));
        }
        // A narrow window still works.
        c.set_window_size(420, 800).await.map_err(e)?;
        shot(c, "narrow.png").await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
}

async fn type_into(c: &Client, css: &str, text: &str) -> Result<(), String> {
    let el = c
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
        .map_err(|e| format!("{css}: {e}"))?;
    el.clear().await.map_err(|e| e.to_string())?;
    el.send_keys(text).await.map_err(|e| e.to_string())
}

/// The console in Korean: chosen in the user menu, remembered across reloads, every word of
/// the shell, Summary and the launch dialog from the Korean catalogue; back to English.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_korean() {
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| c.web_dir = dir).await;
    let b = browser().await;
    let c = &b.client;
    let result: Result<(), String> = async {
        let e = |e: fantoccini::error::CmdError| e.to_string();
        login_as(c, &app.base, ADMIN_EMAIL, ADMIN_PASSWORD).await?;
        wait_for(c, ".bar", 15).await?;
        click(c, "#current-user").await?;
        click(c, ".lang-choice[data-lang='ko']").await?;
        // The page draws itself again in Korean.
        wait_text(c, ".side", "요약", 15).await?;
        let side = text_of(c, ".side").await;
        for word in ["세션", "데이터 & 스토리지", "관리"] {
            if !side.contains(word) {
                return Err(format!("side menu in Korean lacks {word}: {side}"));
            }
        }
        let lang = c
            .execute("return document.documentElement.lang;", vec![])
            .await
            .map_err(e)?;
        if lang != serde_json::json!("ko") {
            return Err(format!("html lang: {lang}"));
        }
        wait_text(c, "#logout", "로그아웃", 5).await?;
        shot(c, "korean-summary.png").await?;
        // Remembered: a reload stays Korean.
        c.refresh().await.map_err(e)?;
        wait_text(c, ".side", "요약", 15).await?;
        c.goto(&format!("{}/#sessions", app.base))
            .await
            .map_err(e)?;
        click(c, "#start-session").await?;
        wait_for(c, "#launch-env option[value='Python']", 10).await?;
        let dialog = text_of(c, "#launch-dialog").await;
        for word in ["실행 환경", "버전"] {
            if !dialog.contains(word) {
                return Err(format!("launch dialog in Korean lacks {word}: {dialog}"));
            }
        }
        shot(c, "korean-launch.png").await?;
        click(c, "#launch-dialog .close").await?;
        // And back.
        click(c, "#current-user").await?;
        click(c, ".lang-choice[data-lang='en']").await?;
        wait_text(c, ".side", "Summary", 15).await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
}

/// Signup (when enabled, with the terms box), then the user menu: change password with the
/// rules and an inline error, and the SSH keypair dialog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_signup_password_and_ssh_keypair() {
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| {
        c.web_dir = dir;
        c.signup_enabled = true;
    })
    .await;
    let b = browser().await;
    let c = &b.client;
    let result: Result<(), String> = async {
        let e = |e: fantoccini::error::CmdError| e.to_string();
        c.goto(&app.base).await.map_err(e)?;
        click(c, "#signup-open").await?;
        type_into(c, "#signup-email", "new@x.org").await?;
        type_into(c, "#signup-username", "newbie").await?;
        type_into(c, "#signup-password", "Newbie-pass-1").await?;
        type_into(c, "#signup-password2", "Newbie-pass-1").await?;
        click(c, "#signup-submit").await?;
        wait_text(c, "#signup-error", "Terms of Service", 10).await?;
        click(c, "#signup-terms").await?;
        click(c, "#signup-submit").await?;
        wait_for(c, "#signup-ok", 10).await?;
        shot(c, "signup.png").await?;
        click(c, "#signup-dialog .close").await?;
        type_into(c, "#email", "new@x.org").await?;
        type_into(c, "#password", "Newbie-pass-1").await?;
        click(c, "#login-button").await?;
        wait_for(c, "#project-select", 15).await?;
        click(c, "#current-user").await?;
        click(c, "#menu-password").await?;
        type_into(c, "#old-password", "wrong-Pass-1").await?;
        type_into(c, "#new-password", "Second-pass-2").await?;
        type_into(c, "#new-password2", "Second-pass-2").await?;
        click(c, "#password-save").await?;
        wait_for(c, "#password-error", 10).await?;
        shot(c, "password.png").await?;
        type_into(c, "#old-password", "Newbie-pass-1").await?;
        click(c, "#password-save").await?;
        wait_for(c, "#password-ok", 10).await?;
        click(c, "#password-dialog .close").await?;
        click(c, "#current-user").await?;
        click(c, "#menu-ssh").await?;
        click(c, "#ssh-generate").await?;
        wait_text(c, "#ssh-public", "ssh-ed25519 ", 10).await?;
        wait_for(c, "#ssh-download", 5).await?;
        shot(c, "ssh-keypair.png").await?;
        click(c, "#ssh-dialog .close").await?;
        // User settings: the preferred SSH port; a port below 1024 is refused with the
        // server's message, a good one is kept (and shown when the dialog opens again).
        click(c, "#current-user").await?;
        click(c, "#menu-settings").await?;
        type_into(c, "#preferred-ssh-port", "80").await?;
        click(c, "#settings-save").await?;
        wait_text(c, "#settings-error", "between 1024 and 65535", 10).await?;
        type_into(c, "#preferred-ssh-port", "23456").await?;
        click(c, "#settings-save").await?;
        wait_for(c, "#settings-ok", 10).await?;
        shot(c, "user-settings.png").await?;
        click(c, "#settings-dialog .close").await?;
        click(c, "#current-user").await?;
        click(c, "#menu-settings").await?;
        within(10, "the saved port in the dialog", || async {
            let v = c
                .execute(
                    "return document.querySelector('#preferred-ssh-port').value;",
                    vec![],
                )
                .await
                .ok()?;
            (v == serde_json::json!("23456")).then_some(())
        })
        .await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
    // The new password is the one that works now, and the setting is the server's.
    let token = app.login("new@x.org", "Second-pass-2").await;
    let me = app
        .ok(
            Some(&token),
            "{ user { preferred_ssh_port } }",
            serde_json::json!({}),
        )
        .await;
    assert_eq!(me["user"]["preferred_ssh_port"], 23456);
}

async fn login_as(c: &Client, base: &str, email: &str, password: &str) -> Result<(), String> {
    c.goto(base).await.map_err(|e| e.to_string())?;
    type_into(c, "#email", email).await?;
    type_into(c, "#password", password).await?;
    click(c, "#login-button").await?;
    // The first load of the console (the WASM bundle) on a busy test machine takes a while.
    wait_for(c, "#current-user", 30).await
}

/// Every administration screen's main action, by a superadmin, and a plain user kept out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_administration_screens() {
    require_docker();
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| c.web_dir = dir).await;
    app.user("member@x.org", "user", "default").await;
    let b = browser().await;
    let c = &b.client;
    let base = app.base.clone();
    let result: Result<(), String> = async {
        let e = |e: fantoccini::error::CmdError| e.to_string();
        let go = |page: &'static str| {
            let url = format!("{base}/#{page}");
            async move { c.goto(&url).await.map_err(|e| e.to_string()) }
        };
        login_as(c, &base, ADMIN_EMAIL, ADMIN_PASSWORD).await?;

        // Users: create, edit, deactivate (never delete).
        go("users").await?;
        click(c, "#create-user").await?;
        type_into(c, "#user-email", "hired@x.org").await?;
        type_into(c, "#user-name", "hired").await?;
        type_into(c, "#user-password", "short").await?;
        type_into(c, "#user-password2", "short").await?;
        click(c, "#user-save").await?;
        wait_text(
            c,
            "#user-dialog .admin-error",
            "Password must be at least 8 characters long",
            10,
        )
        .await?;
        type_into(c, "#user-password", "Hired-pass-1").await?;
        click(c, "#user-save").await?;
        wait_text(c, "#user-dialog .admin-error", "do not match", 10).await?;
        type_into(c, "#user-password2", "Hired-pass-1").await?;
        click(c, "#user-save").await?;
        wait_for(c, "tr.admin-row[data-key='hired@x.org']", 15).await?;
        click(
            c,
            "tr.admin-row[data-key='hired@x.org'] [data-action='edit']",
        )
        .await?;
        type_into(c, "#user-name", "hired-renamed").await?;
        click(c, "#user-save").await?;
        wait_text(
            c,
            "tr.admin-row[data-key='hired@x.org']",
            "hired-renamed",
            15,
        )
        .await?;
        shot(c, "admin-users.png").await?;
        click(
            c,
            "tr.admin-row[data-key='hired@x.org'] [data-action='deactivate']",
        )
        .await?;
        click(c, "#deactivate-confirm").await?;
        wait_gone(c, "tr.admin-row[data-key='hired@x.org']", 15).await?;
        click(c, "#users-inactive").await?;
        wait_for(c, "tr.admin-row[data-key='hired@x.org']", 15).await?;

        // Credentials: add one for a user, refuse deleting a main keypair, delete the new one.
        click(c, "#tab-credentials").await?;
        wait_for(c, "#keys-table", 15).await?;
        click(c, "#add-credential").await?;
        type_into(c, "#key-user", "member@x.org").await?;
        click(c, "#key-explicit").await?;
        type_into(c, "#key-ak", "AKIAEXPLICIT00000001").await?;
        type_into(c, "#key-sk", "explicitSecretKey00000000000000000000000").await?;
        click(c, "#key-save").await?;
        wait_for(c, "tr.admin-row[data-key='AKIAEXPLICIT00000001']", 15).await?;
        shot(c, "admin-credentials.png").await?;
        let main_key = c
            .find_all(Locator::Css("#keys-table tr.admin-row"))
            .await
            .map_err(e)?;
        let mut refused = false;
        for row in main_key {
            let text = row.text().await.map_err(e)?;
            if text.contains("member@x.org") && !text.contains("AKIAEXPLICIT00000001") {
                row.find(Locator::Css("[data-action='delete']"))
                    .await
                    .map_err(e)?
                    .click()
                    .await
                    .map_err(e)?;
                wait_text(
                    c,
                    ".admin-error",
                    "is the main keypair of member@x.org; deactivate it instead.",
                    10,
                )
                .await?;
                refused = true;
                break;
            }
        }
        if !refused {
            return Err("no main keypair row for member@x.org".into());
        }
        click(
            c,
            "tr.admin-row[data-key='AKIAEXPLICIT00000001'] [data-action='delete']",
        )
        .await?;
        wait_gone(c, "tr.admin-row[data-key='AKIAEXPLICIT00000001']", 15).await?;

        // Resource policies: create with unlimited boxes, then delete.
        click(c, "#tab-policies").await?;
        click(c, "#create-policy").await?;
        type_into(c, "#policy-name", "gpu-lab").await?;
        click(c, "#policy-cpu-unlimited").await?;
        type_into(c, "#policy-cpu", "8").await?;
        click(c, "#policy-concurrency-unlimited").await?;
        type_into(c, "#policy-concurrency", "3").await?;
        // Idle below 5 % of its CPU and GPU for half an hour; a non-number is refused first.
        type_into(c, "#policy-util-pct", "five").await?;
        click(c, "#policy-save").await?;
        wait_text(c, "#policy-dialog", "whole numbers", 15).await?;
        type_into(c, "#policy-util-pct", "5").await?;
        type_into(c, "#policy-util-secs", "1800").await?;
        shot(c, "admin-policy-dialog.png").await?;
        click(c, "#policy-save").await?;
        wait_text(c, "tr.admin-row[data-key='gpu-lab']", "8 core", 15).await?;
        wait_text(c, "tr.admin-row[data-key='gpu-lab']", "< 5 % · 1800 s", 15).await?;
        shot(c, "admin-policies.png").await?;
        click(c, "tr.admin-row[data-key='gpu-lab'] [data-action='delete']").await?;
        wait_gone(c, "tr.admin-row[data-key='gpu-lab']", 15).await?;

        // Environments: image minimums, a preset, a registry with a bad URL.
        go("environments").await?;
        wait_text(c, &format!("tr.admin-row[data-key='{PYTHON}']"), "✔", 15).await?;
        click(
            c,
            &format!("tr.admin-row[data-key='{PYTHON}'] [data-action='edit']"),
        )
        .await?;
        type_into(c, "#image-mem", "512m").await?;
        click(c, "#image-save").await?;
        wait_text(
            c,
            &format!("tr.admin-row[data-key='{PYTHON}']"),
            "mem ≥ 512.0 MiB",
            15,
        )
        .await?;
        shot(c, "admin-images.png").await?;
        click(c, "#tab-presets").await?;
        click(c, "#create-preset").await?;
        type_into(c, "#preset-name", "tiny").await?;
        type_into(c, "#preset-cpu", "1").await?;
        type_into(c, "#preset-mem", "1g").await?;
        click(c, "#preset-save").await?;
        wait_for(c, "tr.admin-row[data-key='tiny']", 15).await?;
        shot(c, "admin-presets.png").await?;
        click(c, "#tab-registries").await?;
        click(c, "#add-registry").await?;
        type_into(c, "#registry-host", "reg.example.org").await?;
        type_into(c, "#registry-url", "reg.example.org").await?;
        click(c, "#registry-save").await?;
        wait_text(
            c,
            "#registry-dialog .admin-error",
            "Invalid registry URL 'reg.example.org': it must start with http:// or https://",
            10,
        )
        .await?;
        shot(c, "admin-registries.png").await?;
        click(c, "#registry-dialog .close").await?;

        // Resources: the agent, a resource group.
        go("resources").await?;
        wait_text(c, "#agents-table", "ALIVE", 15).await?;
        shot(c, "admin-agents.png").await?;
        click(c, "#tab-groups").await?;
        click(c, "#create-sgroup").await?;
        type_into(c, "#sgroup-name", "night").await?;
        type_into(c, "#sgroup-description", "overnight jobs").await?;
        c.find(Locator::Css("#sgroup-scheduler option[value='drf']"))
            .await
            .map_err(e)?
            .click()
            .await
            .map_err(e)?;
        click(c, "#sgroup-save").await?;
        wait_text(c, "tr.admin-row[data-key='night']", "DRF", 15).await?;
        shot(c, "admin-groups.png").await?;

        // Settings: the announcement reaches the CLI's endpoint.
        go("settings").await?;
        type_into(c, "#announcement", "Maintenance on Friday").await?;
        click(c, "#announcement-save").await?;
        wait_for(c, "#settings-saved", 10).await?;
        shot(c, "admin-settings.png").await?;

        // Maintenance: each button shows its result.
        go("maintenance").await?;
        click(c, "#recalculate").await?;
        wait_text(c, "#recalculate-result", "Usage recalculated", 30).await?;
        click(c, "#cleanup").await?;
        wait_text(c, "#cleanup-result", "Removed", 60).await?;
        click(c, "#rescan").await?;
        wait_text(c, "#rescan-result", "done", 60).await?;
        shot(c, "admin-maintenance.png").await?;

        // A project (group) folder, shared with the project's members.
        go("data").await?;
        click(c, "#new-folder").await?;
        type_into(c, "#folder-name", "team-data").await?;
        c.find(Locator::Css("#folder-type option[value='project']"))
            .await
            .map_err(e)?
            .click()
            .await
            .map_err(e)?;
        click(c, "#folder-create").await?;
        wait_gone(c, "#new-folder-dialog", 10).await?;
        click(c, "#tab-shared").await?;
        wait_text(
            c,
            "tr.folder-row[data-name='team-data']",
            "project default",
            15,
        )
        .await?;
        shot(c, "admin-project-folder.png").await?;

        // The admin session list spans users, with the same controls.
        let member = app.login("member@x.org", USER_PASSWORD).await;
        create_session(
            &app,
            &member,
            serde_json::json!({"image": PYTHON, "name": "members-job"}),
        )
        .await;
        go("sessions").await?;
        wait_text(
            c,
            "tr.session-row[data-name='members-job']",
            "member@x.org",
            30,
        )
        .await?;
        shot(c, "admin-sessions.png").await?;
        open_dialog(
            c,
            "tr.session-row[data-name='members-job'] [data-action='terminate']",
            "#terminate-confirm",
        )
        .await?;
        click(c, "#terminate-confirm").await?;
        wait_gone(c, "tr.session-row[data-name='members-job']", 60).await?;

        // A plain user sees no administration and gets none of its data.
        click(c, "#logout").await?;
        login_as(c, &base, "member@x.org", USER_PASSWORD).await?;
        if !c
            .find_all(Locator::Css(".side .section"))
            .await
            .map_err(e)?
            .is_empty()
        {
            return Err("a user sees the Administration menu".into());
        }
        for page in [
            "users",
            "environments",
            "resources",
            "settings",
            "maintenance",
        ] {
            go(page).await?;
            wait_for(c, "#not-allowed", 10).await?;
            if !c
                .find_all(Locator::Css("table.list"))
                .await
                .map_err(e)?
                .is_empty()
            {
                return Err(format!("{page}: a table was shown to a user"));
            }
        }
        shot(c, "admin-refused.png").await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
    let ann: serde_json::Value = app
        .http
        .get(app.url("/manager/announcement"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ann["message"], "Maintenance on Friday");
    // The API refuses a user the admin data too.
    let user = app.login("member@x.org", USER_PASSWORD).await;
    let body = app
        .op::<gql::UserList>(
            Some(&user),
            gql::user_list::Variables {
                limit: 5,
                offset: 0,
                ..Default::default()
            },
        )
        .await;
    assert_code(&body, "FORBIDDEN");
    assert!(
        message(&body).contains("requires administrator privileges"),
        "{body}"
    );
}

/// Projects and domains (the guide's §1.1), the user detail (§10.1) and registry editing: a
/// superadmin creates a project with limits and a resource group, changes its members,
/// deactivates it; creates, edits and deactivates a domain (whose users can then no longer
/// log in); edits a registry. A domain admin sees only its domain's projects and no domains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_projects_domains_user_detail_and_registry_editing() {
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| c.web_dir = dir).await;
    app.user("member@x.org", "user", "default").await;
    app.user("dadmin@x.org", "admin", "default").await;
    app.create_domain("elsewhere").await;
    app.user("far@x.org", "user", "elsewhere").await;
    app.admin(
        r#"mutation { create_group(name: "far-project", props: {domain_name: "elsewhere"}) { ok } }"#,
        serde_json::json!({}),
    )
    .await;
    let b = browser().await;
    let c = &b.client;
    let base = app.base.clone();
    let result: Result<(), String> = async {
        let go = |page: &'static str| {
            let url = format!("{base}/#{page}");
            async move { c.goto(&url).await.map_err(|e| e.to_string()) }
        };
        login_as(c, &base, ADMIN_EMAIL, ADMIN_PASSWORD).await?;

        // User detail: information and association.
        go("users").await?;
        click(c, "tr.admin-row[data-key='member@x.org'] [data-action='detail']").await?;
        wait_text(c, "#user-detail-association", "default", 10).await?;
        wait_text(c, "#user-detail-projects", "default", 10).await?;
        wait_text(c, "#user-detail-info", "member@x.org", 5).await?;
        shot(c, "user-detail.png").await?;
        click(c, "#user-detail-dialog .close").await?;

        // A project with a CPU limit, a storage host and a resource group.
        go("projects").await?;
        wait_for(c, "#projects-table", 15).await?;
        click(c, "#create-project").await?;
        type_into(c, "#project-name", "lab").await?;
        type_into(c, "#project-description", "the lab").await?;
        click(c, "#project-cpu-unlimited").await?;
        type_into(c, "#project-cpu", "4").await?;
        type_into(c, "#project-hosts", "local").await?;
        click(c, "#project-sgroups input[data-sgroup='default']").await?;
        click(c, "#project-save").await?;
        within(15, "the new project in the list", || async {
            let rows = c.find_all(Locator::Css("#projects-table tr.admin-row")).await.ok()?;
            for r in rows {
                let text = r.text().await.ok()?;
                if text.starts_with("lab") {
                    return (text.contains("4 core") && text.contains("default") && text.contains("local"))
                        .then_some(());
                }
            }
            None
        })
        .await?;
        shot(c, "projects.png").await?;
        let click_lab = |action: &'static str| async move {
            let rows = c.find_all(Locator::Css("#projects-table tr.admin-row")).await.map_err(|e| e.to_string())?;
            for r in rows {
                if r.text().await.map_err(|e| e.to_string())?.starts_with("lab") {
                    return r
                        .find(Locator::Css(&format!("[data-action='{action}']")))
                        .await
                        .map_err(|e| e.to_string())?
                        .click()
                        .await
                        .map_err(|e| e.to_string());
                }
            }
            Err(format!("no lab row for {action}"))
        };
        // Members: add one, then remove.
        click_lab("members").await?;
        wait_for(c, "#members-dialog", 10).await?;
        within(10, "the domain's users to choose from", || async {
            let opts = c.find_all(Locator::Css("#member-add option")).await.ok()?;
            (opts.len() > 1).then_some(())
        })
        .await?;
        let uuid = c
            .execute(
                "const o = [...document.querySelectorAll('#member-add option')].find(o => o.textContent === 'member@x.org'); \
                 const s = document.querySelector('#member-add'); s.value = o.value; \
                 s.dispatchEvent(new Event('change', {bubbles: true})); return o.value;",
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        if !uuid.is_string() {
            return Err(format!("no option for member@x.org: {uuid}"));
        }
        click(c, "#member-add-button").await?;
        wait_for(c, "#members-table tr.member-row[data-email='member@x.org']", 10).await?;
        shot(c, "project-members.png").await?;
        click(c, "#members-table tr.member-row[data-email='member@x.org'] [data-action='remove']").await?;
        wait_gone(c, "#members-table tr.member-row[data-email='member@x.org']", 10).await?;
        click(c, "#members-dialog .close").await?;
        // Deactivate: off the active list, on the inactive one.
        click_lab("deactivate").await?;
        click(c, "#deactivate-project-confirm").await?;
        click(c, "#projects-inactive").await?;
        wait_text(c, "#projects-table", "the lab", 15).await?;
        // The domain admin's project of another domain is listed for the superadmin.
        click(c, "#projects-active").await?;
        wait_text(c, "#projects-table", "far-project", 15).await?;

        // Domains: create with a registry, edit, deactivate.
        click(c, "#tab-domains").await?;
        click(c, "#create-domain").await?;
        type_into(c, "#domain-name", "research").await?;
        type_into(c, "#domain-description", "research groups").await?;
        type_into(c, "#domain-registries", "cr.example.org").await?;
        click(c, "#domain-save").await?;
        wait_for(c, "tr.admin-row[data-key='research']", 15).await?;
        wait_text(c, "tr.admin-row[data-key='research']", "cr.example.org", 5).await?;
        click(c, "tr.admin-row[data-key='research'] [data-action='edit']").await?;
        type_into(c, "#domain-description", "all research groups").await?;
        click(c, "#domain-save").await?;
        wait_text(c, "tr.admin-row[data-key='research']", "all research groups", 15).await?;
        shot(c, "domains.png").await?;
        click(c, "tr.admin-row[data-key='elsewhere'] [data-action='deactivate']").await?;
        click(c, "#deactivate-domain-confirm").await?;
        wait_gone(c, "tr.admin-row[data-key='elsewhere']", 15).await?;

        // Registries: add one, then edit its URL.
        go("environments").await?;
        click(c, "#tab-registries").await?;
        click(c, "#add-registry").await?;
        type_into(c, "#registry-host", "reg.example.org").await?;
        type_into(c, "#registry-url", "https://reg.example.org").await?;
        click(c, "#registry-save").await?;
        wait_for(c, "tr.admin-row[data-key='reg.example.org']", 15).await?;
        click(c, "tr.admin-row[data-key='reg.example.org'] [data-action='edit']").await?;
        // The URL must keep the registry's host (the guide: "set identically").
        type_into(c, "#registry-url", "https://mirror.example.org:5000").await?;
        click(c, "#registry-save").await?;
        wait_text(c, "#registry-dialog .admin-error", "must match", 10).await?;
        type_into(c, "#registry-url", "http://reg.example.org").await?;
        type_into(c, "#registry-user", "robot").await?;
        shot(c, "registry-edit.png").await?;
        click(c, "#registry-save").await?;
        wait_text(c, "tr.admin-row[data-key='reg.example.org']", "http://reg.example.org", 15).await?;
        wait_text(c, "tr.admin-row[data-key='reg.example.org']", "robot", 5).await?;

        // A domain admin: its domain's projects only, no Domains tab.
        c.goto(&format!("{base}/")).await.map_err(|e| e.to_string())?;
        click(c, "#logout").await?;
        login_as(c, &base, "dadmin@x.org", USER_PASSWORD).await?;
        go("projects").await?;
        wait_text(c, "#projects-table", "default", 15).await?;
        if text_of(c, "#projects-table").await.contains("far-project") {
            return Err("a domain admin sees another domain's project".into());
        }
        if c.find(Locator::Css("#tab-domains")).await.is_ok() {
            return Err("a domain admin sees the Domains tab".into());
        }
        shot(c, "projects-domain-admin.png").await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
    // The deactivated domain's user can no longer log in (the password is right).
    let refused = app
        .gql(
            None,
            "mutation($e: String!, $p: String!) { login(email: $e, password: $p) { token } }",
            serde_json::json!({"e": "far@x.org", "p": USER_PASSWORD}),
        )
        .await;
    assert_code(&refused, "UNAUTHENTICATED");
    assert!(
        refused.to_string().contains("domain is deactivated"),
        "{refused}"
    );
}

/// The console over HTTPS served by bai itself: the browser trusts exactly the test server's
/// key (not any certificate), logs in, and the login survives a reload in a `Secure`,
/// `__Host-` cookie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_over_https() {
    let dir = web_dir();
    let tls = TlsFiles::new();
    let app = spawn_with(Db::Sqlite, |c| {
        c.web_dir = dir;
        c.tls_cert = Some(tls.cert.clone());
        c.tls_key = Some(tls.key.clone());
    })
    .await;
    assert!(app.base.starts_with("https://localhost:"), "{}", app.base);
    let b = browser_with(&[format!(
        "--ignore-certificate-errors-spki-list={}",
        tls.spki_sha256()
    )])
    .await;
    let c = &b.client;
    let result: Result<(), String> = async {
        // A first visit as a browser makes it (HTTPS, so brotli), measured and printed for the
        // README, never asserted.
        c.goto(&app.base).await.map_err(|e| e.to_string())?;
        wait_for(c, "#login-button", 15).await?;
        let figures = c
            .execute(
                "const nav = performance.getEntriesByType('navigation')[0];
                 const res = performance.getEntriesByType('resource');
                 const sum = (f) => f(nav) + res.reduce((a, r) => a + f(r), 0);
                 const fcp = performance.getEntriesByName('first-contentful-paint')[0];
                 return { transferred: sum((e) => e.transferSize), decoded: sum((e) => e.decodedBodySize),
                          first_contentful_paint_ms: fcp ? Math.round(fcp.startTime) : null,
                          resources: res.map((r) => r.name.replace(/^.*\\//, '') + ' ' + r.transferSize) };",
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        eprintln!("console first visit over HTTPS: {figures}");
        login_as(c, &app.base, ADMIN_EMAIL, ADMIN_PASSWORD).await?;
        text_of(c, "#current-user").await;
        let url = c.current_url().await.map_err(|e| e.to_string())?;
        if url.scheme() != "https" {
            return Err(format!("not on https: {url}"));
        }
        let cookies = c.get_all_cookies().await.map_err(|e| e.to_string())?;
        let login = cookies
            .iter()
            .find(|k| k.name() == "__Host-bai_session")
            .ok_or_else(|| format!("no __Host- login cookie: {cookies:?}"))?;
        if login.secure() != Some(true) || login.http_only() != Some(true) {
            return Err(format!("login cookie not Secure+HttpOnly: {login:?}"));
        }
        c.refresh().await.map_err(|e| e.to_string())?;
        let who = text_of(c, "#current-user").await;
        if !who.contains(ADMIN_EMAIL) {
            return Err(format!("user shown after reload: {who}"));
        }
        shot(c, "https-console.png").await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
}

/// The launcher's templates and batch sessions: a saved template fills the dialog (type,
/// command, variables, resources), the session starts from it with the dialog's name, runs its
/// command and ends; the dialog's settings are saved as a new template; the owner may delete
/// one of theirs there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_launcher_templates_and_batch() {
    require_docker();
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| c.web_dir = dir).await;
    let token = app.user("templater@x.org", "user", "default").await;
    let payload = format!(
        "api_version: v1\nkind: taskTemplate\nmetadata: {{name: nightly}}\nspec:\n  session_type: batch\n  kernel:\n    image: {PYTHON}\n    environ: {{GREETING: hi}}\n    run: {{startup_command: 'echo from-template $GREETING'}}\n  resources: {{cpu: '1', mem: 768m}}\n"
    );
    let made = app
        .ok(
            Some(&token),
            "mutation($p: String!) { create_session_template(props: {payload: $p}) { id } }",
            serde_json::json!({"p": payload}),
        )
        .await;
    let tid = made["create_session_template"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = browser().await;
    let c = &b.client;
    let result: Result<(), String> = async {
        let e = |e: fantoccini::error::CmdError| e.to_string();
        login_as(c, &app.base, "templater@x.org", USER_PASSWORD).await?;
        c.goto(&format!("{}/#sessions", app.base)).await.map_err(e)?;
        click(c, "#start-session").await?;
        wait_for(c, &format!("#launch-template option[value='{tid}']"), 10).await?;
        wait_for(c, "#launch-env option[value='Python']", 10).await?;
        click(c, &format!("#launch-template option[value='{tid}']")).await?;
        wait_for(c, "#launch-startup", 5).await?;
        let command = c
            .find(Locator::Css("#launch-startup"))
            .await
            .map_err(e)?
            .prop("value")
            .await
            .map_err(e)?
            .unwrap_or_default();
        if command != "echo from-template $GREETING" {
            return Err(format!("the template's command: {command:?}"));
        }
        type_into(c, "#launch-name", "from-nightly").await?;
        shot(c, "launch-template.png").await?;
        click(c, "#launch-next").await?;
        click(c, "#launch-next").await?;
        click(c, "#launch-next").await?;
        let summary = text_of(c, "#launch-summary").await;
        for want in ["Batch", "echo from-template", "GREETING=hi", "nightly", "0.75 GiB"] {
            if !summary.contains(want) {
                return Err(format!("summary lacks {want}: {summary}"));
            }
        }
        // The dialog's settings saved as a template of their own.
        type_into(c, "#template-name", "saved-from-dialog").await?;
        click(c, "#template-save-button").await?;
        wait_text(c, "#template-saved", "saved-from-dialog", 10).await?;
        shot(c, "launch-template-summary.png").await?;
        click(c, "#launch-confirm").await?;
        // No folder chosen: the console warns first.
        click(c, "#launch-anyway").await?;
        wait_gone(c, "#launch-dialog", 10).await?;
        // A batch job ends by itself: it moves to the finished sessions.
        within(120, "the batch job to finish", || async {
            click(c, "#tab-finished").await.ok()?;
            wait_for(
                c,
                "tr.session-row[data-name='from-nightly'][data-status='TERMINATED']",
                3,
            )
            .await
            .ok()
        })
        .await?;
        shot(c, "template-batch-done.png").await?;
        // The saved one is offered next time; its owner deletes it there.
        c.goto(&format!("{}/#sessions", app.base)).await.map_err(e)?;
        click(c, "#start-session").await?;
        wait_text(c, "#launch-template", "saved-from-dialog", 10).await?;
        let saved_id = c
            .execute(
                "return [...document.querySelectorAll('#launch-template option')].find(o => o.textContent.startsWith('saved-from-dialog')).value;",
                vec![],
            )
            .await
            .map_err(e)?;
        let saved_id = saved_id.as_str().unwrap_or_default().to_string();
        click(c, &format!("#launch-template option[value='{saved_id}']")).await?;
        click(c, "#template-delete").await?;
        wait_gone(c, &format!("#launch-template option[value='{saved_id}']"), 10).await?;
        // A cluster of two: the console passes the size on, and the policy's refusal (one
        // container per session by default) reads as a message.
        click(c, "#launch-next").await?;
        click(c, "#launch-next").await?;
        type_into(c, "#launch-cluster-size", "2").await?;
        // A cluster may spread over other hosts (multi node); the policy refuses it first.
        click(c, "#launch-cluster-mode option[value='multi-node']").await?;
        shot(c, "launch-cluster-mode.png").await?;
        click(c, "#launch-next").await?;
        wait_text(c, "#launch-summary-containers", "2", 5).await?;
        wait_text(c, "#launch-summary-cluster-mode", "Multi node", 5).await?;
        click(c, "#launch-confirm").await?;
        click(c, "#launch-anyway").await?;
        wait_text(c, "#launch-error", "at most 1 container", 10).await?;
        shot(c, "launch-cluster-refused.png").await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
    // Started from the template with the dialog's name: the template's command ran.
    let list = app
        .ok(
            Some(&token),
            "{ compute_session_list(limit: 10, offset: 0) { items { id name type result } } }",
            serde_json::json!({}),
        )
        .await;
    let s = list["compute_session_list"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "from-nightly")
        .cloned()
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(s["type"], "batch", "{s}");
    assert_eq!(s["result"], "success", "{s}");
    let logs = app
        .ok(
            Some(&token),
            "query($id: UUID!) { session_logs(id: $id) }",
            serde_json::json!({"id": s["id"]}),
        )
        .await;
    assert!(logs.to_string().contains("from-template hi"), "{logs}");
    let left = app
        .ok(
            Some(&token),
            "{ session_templates { name } }",
            serde_json::json!({}),
        )
        .await;
    assert_eq!(
        left["session_templates"].as_array().unwrap().len(),
        1,
        "{left}"
    );
}

/// Several managers: the console served by one follows, live, a session launched through
/// another (the session list's subscription hears the other manager's events through
/// PostgreSQL), and its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_on_one_manager_follows_a_session_launched_through_another() {
    require_docker();
    let dir = web_dir();
    let a = spawn_with(Db::Postgres, |c| c.web_dir = dir).await;
    let b_manager = a.beside().await;
    let token = a.user("two@x.org", "user", "default").await;
    let b = browser().await;
    let c = &b.client;
    let result: Result<(), String> = async {
        login_as(c, &b_manager.base, "two@x.org", USER_PASSWORD).await?;
        c.goto(&format!("{}/#sessions", b_manager.base))
            .await
            .map_err(|e| e.to_string())?;
        wait_for(c, "#start-session", 15).await?;
        let body = create_session(
            &a,
            &token,
            serde_json::json!({"image": PYTHON, "name": "via-a", "resources": "{\"cpu\": \"1\", \"mem\": \"320m\"}"}),
        )
        .await;
        let id = session_ids(&body)[0].clone();
        // RUNNING without a reload.
        wait_for(
            c,
            "tr.session-row[data-name='via-a'][data-status='RUNNING']",
            60,
        )
        .await?;
        shot(c, "managers-live.png").await?;
        destroy(&a, &token, &id).await;
        within(30, "the ended session to leave the running list", || async {
            c.find(Locator::Css("tr.session-row[data-name='via-a']"))
                .await
                .is_err()
                .then_some(())
        })
        .await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
}

/// Sharing in the console: the owner invites a user read-only from the folder's Share dialog;
/// the invitee finds the invitation on the Shared Data tab, accepts it, sees the folder there
/// read-only, and a session it launches mounts it read-only (a write inside fails). The
/// owner's trash: a folder deleted shows under Trash and comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_shares_a_folder_read_only() {
    require_docker();
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| c.web_dir = dir).await;
    let owner = app.user("sharer@x.org", "user", "default").await;
    let friend = app.user("friend@x.org", "user", "default").await;
    app.ok(
        Some(&owner),
        "mutation { a: create_vfolder(props: {name: \"lab-data\"}) { ok } b: create_vfolder(props: {name: \"old-data\"}) { ok } }",
        serde_json::json!({}),
    )
    .await;
    let base = app.base.clone();
    let a = browser().await;
    let result: Result<(), String> = async {
        let c = &a.client;
        login_as(c, &base, "sharer@x.org", USER_PASSWORD).await?;
        c.goto(&format!("{base}/#data"))
            .await
            .map_err(|e| e.to_string())?;
        open_dialog(
            c,
            "tr.folder-row[data-name='lab-data'] [data-action='share']",
            "#share-folder-dialog",
        )
        .await?;
        type_into(c, "#share-emails", "friend@x.org").await?;
        click(c, "#share-invite").await?;
        wait_text(c, "#share-notice", "friend@x.org", 10).await?;
        shot(c, "folders-share-dialog.png").await?;
        click(c, "#share-folder-dialog .close").await?;
        wait_gone(c, "#share-folder-dialog", 10).await?;
        // The trash: deleted (name typed), listed under Trash, restored.
        open_dialog(
            c,
            "tr.folder-row[data-name='old-data'] [data-action='delete']",
            "#delete-folder-dialog",
        )
        .await?;
        type_into(c, "#delete-folder-name", "old-data").await?;
        click(c, "#delete-folder-confirm").await?;
        wait_gone(c, "tr.folder-row[data-name='old-data']", 10).await?;
        click(c, "#tab-trash").await?;
        wait_for(
            c,
            "tr.folder-row[data-name='old-data'] [data-action='restore']",
            10,
        )
        .await?;
        shot(c, "folders-trash.png").await?;
        click(
            c,
            "tr.folder-row[data-name='old-data'] [data-action='restore']",
        )
        .await?;
        wait_gone(c, "tr.folder-row[data-name='old-data']", 10).await?;
        Ok(())
    }
    .await;
    result.unwrap_or_else(|e| panic!("owner: {e}"));
    let b = browser().await;
    let result: Result<(), String> = async {
        let c = &b.client;
        login_as(c, &base, "friend@x.org", USER_PASSWORD).await?;
        c.goto(&format!("{base}/#data"))
            .await
            .map_err(|e| e.to_string())?;
        click(c, "#tab-shared").await?;
        wait_for(c, ".invitation.received[data-folder='lab-data']", 10).await?;
        shot(c, "folders-invitation.png").await?;
        click(
            c,
            ".invitation.received[data-folder='lab-data'] [data-action='accept']",
        )
        .await?;
        wait_for(c, "tr.folder-row[data-name='lab-data']", 10).await?;
        wait_text(c, "tr.folder-row[data-name='lab-data']", "ro", 10).await?;
        wait_gone(c, ".invitation.received", 10).await?;
        shot(c, "folders-shared-tab.png").await?;
        Ok(())
    }
    .await;
    result.unwrap_or_else(|e| panic!("invitee: {e}"));
    // Mounted read-only in the invitee's session: reading works, writing fails.
    let body = create_session(
        &app,
        &friend,
        serde_json::json!({"image": PYTHON, "mounts": ["lab-data"]}),
    )
    .await;
    let id = session_ids(&body)[0].clone();
    let running = wait_status(&app, &friend, &id, &["RUNNING"]).await;
    let container = running["containers"][0]["container_id"]
        .as_str()
        .unwrap()
        .to_string();
    let tried = std::process::Command::new("docker")
        .args([
            "exec",
            &container,
            "sh",
            "-c",
            "ls /home/work/lab-data && touch /home/work/lab-data/x",
        ])
        .output()
        .unwrap();
    assert!(
        !tried.status.success(),
        "a write into a read-only share succeeded"
    );
    assert!(
        String::from_utf8_lossy(&tried.stderr).contains("Read-only file system"),
        "{}",
        String::from_utf8_lossy(&tried.stderr)
    );
    // A share revoked: gone from the invitee's next mount.
    let folder_id = app
        .ok(
            Some(&friend),
            "{ vfolder_list(limit: 10, offset: 0) { items { id name } } }",
            serde_json::json!({}),
        )
        .await["vfolder_list"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "lab-data")
        .unwrap()["id"]
        .clone();
    let friend_uuid = app
        .ok(Some(&friend), "{ user { uuid } }", serde_json::json!({}))
        .await["user"]["uuid"]
        .clone();
    app.ok(
        Some(&owner),
        "mutation($id: UUID!, $u: UUID!) { set_vfolder_share(id: $id, user: $u) { ok } }",
        serde_json::json!({"id": folder_id, "u": friend_uuid}),
    )
    .await;
    let again = create_session(
        &app,
        &friend,
        serde_json::json!({"image": PYTHON, "mounts": ["lab-data"]}),
    )
    .await;
    assert_code(&again, "NOT_FOUND");
    destroy(&app, &friend, &id).await;
}

/// "Forgot password?" and signup verification as a user meets them: the login panel's link,
/// the e-mail read from a real SMTP server (aiosmtpd), its link followed in the browser, the
/// new password set (a weak one refused first), and a new account verified before it logs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_forgot_password_and_signup_verification_by_mail() {
    let dir = web_dir();
    let smtp = crate::mail::smtp_server().await;
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}");
    let app = spawn_with(Db::Sqlite, |c| {
        c.web_dir = dir;
        c.listen = format!("127.0.0.1:{port}").parse().unwrap();
        c.signup_enabled = true;
        smtp.configure(c, &public);
    })
    .await;
    app.user("erin@x.org", "user", "default").await;
    let b = browser().await;
    let c = &b.client;
    let mail_link = |to: &'static str, n: usize, route: &'static str| {
        let smtp = &smtp;
        let public = public.clone();
        async move {
            let mail = within(30, &format!("mail {n} to {to}"), || async {
                smtp.to(to).get(n - 1).cloned()
            })
            .await?;
            let prefix = format!("{public}/#{route}/");
            let token = crate::mail::link_token(&mail, &prefix);
            Ok::<String, String>(format!("{prefix}{token}"))
        }
    };
    let result: Result<(), String> = async {
        let e = |e: fantoccini::error::CmdError| e.to_string();
        c.goto(&app.base).await.map_err(e)?;
        wait_text(c, ".login-more", "Forgot password?", 10).await?;
        shot(c, "login-forgot-password.png").await?;
        click(c, "#forgot-open").await?;
        type_into(c, "#forgot-email", "erin@x.org").await?;
        click(c, "#forgot-send").await?;
        wait_text(c, "#forgot-ok", "If an account has this address", 10).await?;
        shot(c, "forgot-password.png").await?;
        click(c, "#forgot-dialog .close").await?;
        let link = mail_link("erin@x.org", 1, "reset-password").await?;
        c.goto(&link).await.map_err(e)?;
        wait_text(c, "#link-page h2", "Set a new password", 10).await?;
        type_into(c, "#reset-password", "weak").await?;
        type_into(c, "#reset-password2", "weak").await?;
        click(c, "#reset-save").await?;
        wait_for(c, "#link-error", 10).await?;
        shot(c, "reset-password-refused.png").await?;
        type_into(c, "#reset-password", "Erin-new-pass-1").await?;
        type_into(c, "#reset-password2", "Erin-new-pass-1").await?;
        click(c, "#reset-save").await?;
        wait_text(c, "#link-ok", "Log in with the new password", 10).await?;
        shot(c, "reset-password-done.png").await?;
        click(c, "#link-to-login").await?;
        // The token has left the address bar.
        let url = c.current_url().await.map_err(e)?;
        if url.as_str().contains("reset-password") {
            return Err(format!("the link stayed in the address bar: {url}"));
        }
        type_into(c, "#email", "erin@x.org").await?;
        type_into(c, "#password", "Erin-new-pass-1").await?;
        click(c, "#login-button").await?;
        wait_for(c, "#current-user", 15).await?;
        click(c, "#logout").await?;
        wait_for(c, "#login-button", 10).await?;

        // A signup waits for its address to be verified.
        click(c, "#signup-open").await?;
        type_into(c, "#signup-email", "frank@x.org").await?;
        type_into(c, "#signup-username", "frank").await?;
        type_into(c, "#signup-password", "Frank-pass-1").await?;
        type_into(c, "#signup-password2", "Frank-pass-1").await?;
        click(c, "#signup-terms").await?;
        click(c, "#signup-submit").await?;
        wait_text(c, "#signup-ok", "Check your e-mail", 10).await?;
        shot(c, "signup-verification-sent.png").await?;
        click(c, "#signup-dialog .close").await?;
        type_into(c, "#email", "frank@x.org").await?;
        type_into(c, "#password", "Frank-pass-1").await?;
        click(c, "#login-button").await?;
        wait_text(c, "#login-error", "not been verified", 10).await?;
        let link = mail_link("frank@x.org", 1, "verify-email").await?;
        c.goto(&link).await.map_err(e)?;
        wait_text(c, "#link-ok", "verified", 10).await?;
        shot(c, "verify-email-done.png").await?;
        click(c, "#link-to-login").await?;
        type_into(c, "#email", "frank@x.org").await?;
        type_into(c, "#password", "Frank-pass-1").await?;
        click(c, "#login-button").await?;
        wait_for(c, "#current-user", 15).await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
}

/// The launcher's other apps, declared by the Python image's service definitions: JupyterLab
/// opens on its own origin and runs a cell (which logs a scalar with tensorboardX), and
/// TensorBoard, opened the same way, shows that scalar.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_jupyterlab_runs_a_cell_and_tensorboard_shows_its_scalar() {
    require_docker();
    let dir = web_dir();
    let pool = port_block();
    let app = spawn_with(Db::Sqlite, |c| {
        c.web_dir = dir;
        c.app_port_pool = format!("{pool}-{}", pool + 9);
    })
    .await;
    let token = app.user("lab@x.org", "user", "default").await;
    let id = session_ids(
        &create_session(
            &app,
            &token,
            serde_json::json!({"image": PYTHON, "name": "lab-sess"}),
        )
        .await,
    )[0]
    .clone();
    wait_status(&app, &token, &id, &["RUNNING"]).await;
    let b = browser().await;
    let c = &b.client;
    let result: Result<(), String> = async {
        let e = |e: fantoccini::error::CmdError| e.to_string();
        login_as(c, &app.base, "lab@x.org", USER_PASSWORD).await?;
        c.goto(&format!("{}/#sessions", app.base)).await.map_err(e)?;
        wait_for(c, "tr.session-row[data-name='lab-sess'][data-status='RUNNING']", 15).await?;
        let console = c.window().await.map_err(e)?;
        // Opens an app from the launcher; switches to the window it opened.
        let open_app = |name: &'static str, label: &'static str| {
            let console = console.clone();
            async move {
                c.switch_to_window(console).await.map_err(e)?;
                let before = c.windows().await.map_err(e)?;
                open_dialog(c, "tr.session-row[data-name='lab-sess'] [data-action='apps']", "#apps-dialog").await?;
                wait_text(c, &format!("#apps-dialog .app-tile[data-app='{name}']"), label, 10).await?;
                shot(c, "apps-launcher.png").await?;
                click(c, &format!("#apps-dialog .app-tile[data-app='{name}']")).await?;
                wait_text(c, "#app-message", &format!("{name} is running"), 90).await?;
                let opened = within(15, "the app's window", || async {
                    c.windows()
                        .await
                        .ok()?
                        .into_iter()
                        .find(|h| !before.contains(h))
                })
                .await?;
                click(c, "#apps-dialog .close").await?;
                c.switch_to_window(opened).await.map_err(e)
            }
        };
        open_app("jupyterlab", "JupyterLab").await?;
        // JupyterLab's launcher (a large page: its first load takes a while): a notebook on the
        // Python 3 kernel.
        if let Err(err) = wait_for(c, ".jp-LauncherCard[data-category='Notebook']", 90).await {
            shot(c, "jupyterlab-not-loaded.png").await?;
            let url = c.current_url().await.map_err(e)?;
            let loaded = c
                .execute(
                    "return performance.getEntriesByType('resource').map(e => e.responseStatus + ' ' + e.initiatorType + ' ' + e.name).join('\\n');",
                    vec![],
                )
                .await
                .map_err(e)?;
            return Err(format!("{err} (at {url}); loaded:\n{}", loaded.as_str().unwrap_or_default()));
        }
        click(c, ".jp-LauncherCard[data-category='Notebook']").await?;
        wait_for(c, ".jp-Notebook .jp-Cell .cm-content", 60).await?;
        // Typed once the kernel is idle (its first start takes a few seconds).
        wait_text(c, ".jp-StatusBar-Widget, .jp-StatusBar", "Idle", 90).await?;
        let cell = c
            .find(Locator::Css(".jp-Notebook .jp-Cell .cm-content"))
            .await
            .map_err(e)?;
        cell.click().await.map_err(e)?;
        cell.send_keys(
            "from tensorboardX import SummaryWriter; w = SummaryWriter('/home/work/logs/run1'); [w.add_scalar('bai/loss', 1.0 / (i + 1), i) for i in range(5)]; w.close(); print(6 * 7)",
        )
        .await
        .map_err(e)?;
        use fantoccini::key::Key;
        cell.send_keys(&format!("{}{}{}", Key::Shift, Key::Enter, Key::Null))
            .await
            .map_err(e)?;
        if let Err(err) = wait_text(c, ".jp-Notebook .jp-OutputArea-output", "42", 90).await {
            shot(c, "jupyterlab-cell-failed.png").await?;
            return Err(err);
        }
        shot(c, "jupyterlab-cell.png").await?;

        open_app("tensorboard", "TensorBoard").await?;
        let shown = within(60, "TensorBoard to show bai/loss", || async {
            let text = c
                .execute("return document.body.innerText;", vec![])
                .await
                .ok()?;
            // The card's title is the tag's group and name ("bai", "/loss"), beside the run.
            let text = text.as_str()?;
            (text.contains("/loss") && text.contains("run1")).then_some(())
        })
        .await;
        if let Err(err) = shown {
            shot(c, "tensorboard-not-shown.png").await?;
            let url = c.current_url().await.map_err(e)?;
            let loaded = c
                .execute(
                    "return performance.getEntriesByType('resource').map(e => e.responseStatus + ' ' + e.initiatorType + ' ' + e.name).join('\\n') + '\\n' + document.body.innerText.slice(0, 500);",
                    vec![],
                )
                .await
                .map_err(e)?;
            return Err(format!("{err} (at {url}); loaded:\n{}", loaded.as_str().unwrap_or_default()));
        }
        // The chart draws once its data arrived.
        tokio::time::sleep(Duration::from_secs(2)).await;
        shot(c, "tensorboard-scalar.png").await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    result.unwrap();
    destroy(&app, &token, &id).await;
}

/// Statistics: a user's own usage as charts (a sampled running session and a month of history),
/// day and month, kept current live, its sessions' list, the CSV of a chart; an admin's view
/// of users and resource groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_statistics_charts_live_and_csv() {
    require_docker();
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| {
        c.web_dir = dir;
        c.usage_sample_secs = 2;
    })
    .await;
    let alice = app.user("alice@x.org", "user", "default").await;
    let body = create_session(
        &app,
        &alice,
        serde_json::json!({"image": PYTHON, "name": "charted", "resources": "{\"cpu\": \"1\", \"mem\": \"512m\"}"}),
    )
    .await;
    let sid = session_ids(&body)[0].clone();
    wait_status(&app, &alice, &sid, &["RUNNING"]).await;
    // A month of history for the same session: busy by day, idle by night.
    let me = app
        .ok(
            Some(&alice),
            "{ user { uuid } groups { id name } }",
            serde_json::json!({}),
        )
        .await;
    let user: uuid::Uuid = me["user"]["uuid"].as_str().unwrap().parse().unwrap();
    let project: uuid::Uuid = me["groups"][0]["id"].as_str().unwrap().parse().unwrap();
    let now = chrono::Utc::now().timestamp();
    // The last day minute by minute; before it, a sample per hour standing for the hour, in
    // the hour and day buckets only (as the minute ones would be gone by retention).
    let mut batch = api::statistics::Batch::default();
    let mut older = api::statistics::Batch::default();
    for step in 1..(24 * 60 + 24 * 29) {
        let (at, secs) = if step <= 24 * 60 {
            (now - step * 60, 60.0)
        } else {
            (now - (step - 24 * 60 + 24) * 3600, 3600.0)
        };
        let busy = if (at / 3600) % 24 >= 8 && (at / 3600) % 24 < 20 {
            0.8
        } else {
            0.1
        };
        let into = if secs < 3600.0 {
            &mut batch
        } else {
            &mut older
        };
        into.add(&api::statistics::Sample {
            session: sid.parse().unwrap(),
            user,
            project,
            domain: "default".into(),
            resource_group: Some("default".into()),
            owner_governed: true,
            at,
            figures: api::statistics::Figures::over(
                secs,
                api::statistics::Figures {
                    secs: 1.0,
                    cpu_alloc: 1.0,
                    cpu_used: busy,
                    mem_alloc: 512.0 * 1024.0 * 1024.0,
                    mem_used: 400.0 * 1024.0 * 1024.0 * busy,
                    gpu_alloc: 0.0,
                    gpu_used: 0.0,
                },
            ),
        });
    }
    older.retain(|res, _| res != api::statistics::MINUTE);
    api::statistics::write(app.state(), &batch).await.unwrap();
    api::statistics::write(app.state(), &older).await.unwrap();
    let b = browser().await;
    let c = &b.client;
    let base = app.base.clone();
    let result: Result<(), String> = async {
        login_as(c, &base, "alice@x.org", USER_PASSWORD).await?;
        click(c, "nav.side a[href='#statistics']").await?;
        wait_for(c, "#chart-cpu svg polyline", 20).await?;
        wait_text(c, "#stats-subject", "alice@x.org", 10).await?;
        // Live: new samples arrive every 2 s and the page fetches them by itself.
        let loaded = |c: &Client| {
            let c = c.clone();
            async move {
                c.find(Locator::Css("#stats-body"))
                    .await
                    .ok()?
                    .attr("data-loaded")
                    .await
                    .ok()??
                    .parse::<u32>()
                    .ok()
            }
        };
        let first = loaded(c).await.ok_or("no data-loaded")?;
        within(20, "the charts to refresh by themselves", || async {
            loaded(c).await.filter(|n| *n > first + 1)
        })
        .await?;
        let title = c
            .find(Locator::Css("#chart-cpu svg"))
            .await
            .map_err(|e| e.to_string())?
            .attr("aria-label")
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        if !title.contains("allocated") || !title.contains("used") {
            return Err(format!("the CPU chart's latest allocation: {title}"));
        }
        shot(c, "statistics-day.png").await?;
        click(c, "#stats-span-month").await?;
        wait_text(c, "#stats-subject", "every 3 h", 10).await?;
        shot(c, "statistics-month.png").await?;
        // The CSV of the chart shown: the data the browser saves.
        c.execute(
            "window.__csv = null; const make = URL.createObjectURL;
             URL.createObjectURL = function (b) { b.text().then((t) => { window.__csv = t; }); return make.call(URL, b); };",
            vec![],
        )
        .await
        .map_err(|e| e.to_string())?;
        click(c, "#stats-csv").await?;
        let csv = within(10, "the CSV", || async {
            c.execute("return window.__csv;", vec![])
                .await
                .ok()?
                .as_str()
                .map(str::to_string)
        })
        .await?;
        let lines: Vec<&str> = csv.lines().collect();
        if !lines[0].starts_with("ts,sessions,used_secs,cpu_allocated,cpu_used") || lines.len() < 230 {
            return Err(format!("CSV: {} lines, first {:?}", lines.len(), lines.first()));
        }
        // Her sessions, by use.
        click(c, "#stats-view-sessions").await?;
        wait_text(c, "#stats-totals", "charted", 10).await?;
        wait_text(c, "#stats-subject", "charted", 10).await?;
        shot(c, "statistics-sessions.png").await?;

        // An admin: the users, then the resource groups.
        c.delete_all_cookies().await.map_err(|e| e.to_string())?;
        login_as(c, &base, ADMIN_EMAIL, ADMIN_PASSWORD).await?;
        c.goto(&format!("{base}/#statistics")).await.map_err(|e| e.to_string())?;
        click(c, "#stats-view-users").await?;
        wait_text(c, "#stats-totals", "alice@x.org", 10).await?;
        click(c, "#stats-totals tr.pick").await?;
        wait_text(c, "#stats-subject", "alice@x.org", 10).await?;
        shot(c, "statistics-admin-users.png").await?;
        click(c, "#stats-view-resource-groups").await?;
        wait_text(c, "#stats-totals", "default", 10).await?;
        wait_text(c, "#stats-subject", "default", 10).await?;
        wait_for(c, "#chart-mem svg polyline", 10).await?;
        shot(c, "statistics-admin-resource-groups.png").await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    destroy(&app, &alice, &sid).await;
    result.unwrap();
}

/// The console's Serving page: a user starts a service from a model folder, watches its
/// replica become healthy, reads its URL, makes a token and calls the model with it, scales,
/// revokes the token and deletes the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_serving_page() {
    let started = std::time::Instant::now();
    require_docker();
    let dir = web_dir();
    let ports = port_block();
    let app = spawn_with(Db::Sqlite, |c| {
        c.web_dir = dir;
        c.serving_port_pool = format!("{ports}-{}", ports + 9);
    })
    .await;
    let alice = app.user("alice@x.org", "user", "default").await;
    crate::serving::model_folder(&app, &alice, "linear-model").await;
    let b = browser().await;
    let c = &b.client;
    let base = app.base.clone();
    let http = reqwest::Client::new();
    let result: Result<(), String> = async {
        login_as(c, &base, "alice@x.org", USER_PASSWORD).await?;
        click(c, "nav.side a[href='#serving']").await?;
        wait_for(c, "#services-table", 10).await?;
        open_dialog(c, "#start-service", "#service-dialog").await?;
        wait_text(c, "#service-folder", "linear-model", 10).await?;
        type_into(c, "#service-name", "linear").await?;
        click(c, &format!("#service-image option[value='{PYTHON}']")).await?;
        c.find(Locator::Css("#service-mem"))
            .await
            .map_err(|e| e.to_string())?
            .clear()
            .await
            .map_err(|e| e.to_string())?;
        type_into(c, "#service-mem", "512m").await?;
        shot(c, "serving-start.png").await?;
        click(c, "#service-start").await?;
        wait_gone(c, "#service-dialog", 10).await?;
        wait_text(c, "#services-table", "linear", 10).await?;
        wait_text(c, "#services-table", "1 / 1", 90).await?;
        shot(c, "serving-list.png").await?;
        open_dialog(
            c,
            "#services-table button[data-action='detail']",
            "#service-detail",
        )
        .await?;
        wait_text(c, "#service-url", "http://127.0.0.1:", 10).await?;
        let url = text_of(c, "#service-url").await;
        click(c, "#token-create").await?;
        wait_for(c, "#tokens-list .token-row", 10).await?;
        let token = c
            .find(Locator::Css("#tokens-list .token-text"))
            .await
            .map_err(|e| e.to_string())?
            .prop("value")
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        let r = http
            .post(format!("{url}/predict"))
            .bearer_auth(token.trim())
            .json(&serde_json::json!({"x": [1]}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let answer: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
        if answer != serde_json::json!({"y": [5.0]}) {
            return Err(format!(
                "the model through the console's URL and token: {answer}"
            ));
        }
        wait_text(c, "#routes-table", "HEALTHY", 10).await?;
        shot(c, "serving-detail.png").await?;
        click(c, "#tokens-list button[data-action='revoke']").await?;
        wait_gone(c, "#tokens-list .token-row", 10).await?;
        let r = http
            .get(format!("{url}/health"))
            .bearer_auth(token.trim())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if r.status() != 401 {
            return Err(format!("a revoked token still works: {}", r.status()));
        }
        c.find(Locator::Css("#service-scale"))
            .await
            .map_err(|e| e.to_string())?
            .clear()
            .await
            .map_err(|e| e.to_string())?;
        type_into(c, "#service-scale", "0").await?;
        click(c, "#service-scale-apply").await?;
        within(60, "no routes left", || async {
            c.find_all(Locator::Css("#routes-table tr.admin-row"))
                .await
                .ok()
                .filter(Vec::is_empty)
                .map(|_| ())
        })
        .await?;
        click(c, "#service-detail .dialog-head button.close").await?;
        open_dialog(
            c,
            "#services-table button[data-action='delete']",
            "#service-delete-dialog",
        )
        .await?;
        click(c, "#service-delete-confirm").await?;
        within(60, "the service gone from the list", || async {
            let t = text_of(c, "#services-table").await;
            (!t.contains("linear")).then_some(())
        })
        .await?;
        Ok(())
    }
    .await;
    if let Err(e) = result {
        let _ = shot(c, "serving-failure.png").await;
        let state = app
            .ok(Some(&alice), "{ endpoint_list(limit: 5, offset: 0) { items { name retries resource_slots routings { status error_data } } } }", serde_json::json!({}))
            .await;
        panic!("{e}\n{state}");
    }
    took("it::browser::console_serving_page", started);
}

/// The console at a site's size: an admin looks at 40 running sessions of four users. Every
/// row's usage fills in, the tab holds at most 2 WebSockets (one multiplexed socket; a second
/// only while one closes), none is refused, and leaving the live pages closes it. A slow
/// answer for the tab left behind never overwrites the rows of the tab chosen after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_sessions_list_stays_live_at_forty_running_sessions() {
    require_docker();
    let dir = web_dir();
    let app = spawn_with(Db::Sqlite, |c| {
        c.web_dir = dir;
        // 40 sessions of a quarter core each on a 2-core machine.
        c.agent_cpu_overcommit = 8;
    })
    .await;
    app.image_min_cpu(PYTHON, "0.25").await;
    let mut users = Vec::new();
    for i in 0..4 {
        let token = app
            .user(&format!("many-{i}@x.org"), "user", "default")
            .await;
        let mut policy = TestApp::open_policy();
        policy.max_concurrent_sessions = 10;
        app.use_policy(&token, &format!("many-{i}"), policy).await;
        users.push(token);
    }
    let project: uuid::Uuid = group_id(&app, &app.admin_token, "default")
        .await
        .parse()
        .unwrap();
    // A finished session of a user's, for the Finished tab.
    let first_user: uuid::Uuid = crate::statistics::uuid_of(&app, &users[0])
        .await
        .parse()
        .unwrap();
    let first_ak = app.access_key(&users[0]).await;
    insert_session(&app, &first_ak, first_user, project).await;
    let admin_uuid: uuid::Uuid = crate::statistics::uuid_of(&app, &app.admin_token)
        .await
        .parse()
        .unwrap();
    let started = std::time::Instant::now();
    let creations = (0..40).map(|i| {
        let (app, token) = (&app, users[i % 4].clone());
        async move {
            let body = create_session(
                app,
                &token,
                serde_json::json!({"image": PYTHON, "name": format!("many-{i:02}"), "resources": "{\"cpu\": \"0.25\", \"mem\": \"320m\"}"}),
            )
            .await;
            (token, session_ids(&body)[0].clone())
        }
    });
    let sessions: Vec<(String, String)> = futures_util::future::join_all(creations).await;
    for (token, id) in &sessions {
        wait_status(&app, token, id, &["RUNNING"]).await;
    }
    took("40 sessions running", started);
    let owner = api::auth::ws::Owner::User(admin_uuid);
    let conns = app.state().local.ws_connections.clone();
    let refused_before = conns.refusals();
    let b = browser().await;
    let c = &b.client;
    let result: Result<(), String> = async {
        login_as(c, &app.base, ADMIN_EMAIL, ADMIN_PASSWORD).await?;
        // The test's hand on the page's sockets: it can close them and keep new ones from
        // opening (a server out of reach), without reloading the page.
        c.execute(
            "const Orig = window.WebSocket;
             window.__sockets = []; window.__block = false;
             function Patched(url, protocols) {
               if (window.__block) throw new DOMException('blocked by the test', 'SecurityError');
               const ws = new Orig(url, protocols); window.__sockets.push(ws); return ws;
             }
             Patched.prototype = Orig.prototype;
             Object.assign(Patched, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
             window.WebSocket = Patched;",
            vec![],
        )
        .await
        .map_err(|e| e.to_string())?;
        c.goto(&format!("{}/#sessions", app.base))
            .await
            .map_err(|e| e.to_string())?;
        let mut most = 0;
        within(120, "every running row's usage to fill in", || {
            most = most.max(conns.open_of(&owner));
            async {
                let filled = c
                    .execute(
                        "return [...document.querySelectorAll(\"tr.session-row[data-status='RUNNING'] .live-usage\")].filter(e => e.textContent.startsWith('CPU ')).length",
                        vec![],
                    )
                    .await
                    .ok()?;
                (filled.as_u64() == Some(40)).then_some(())
            }
        })
        .await?;
        // A few more rounds of figures: still one socket.
        for _ in 0..20 {
            most = most.max(conns.open_of(&owner));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        shot(c, "sessions-forty-live.png").await?;
        if most > 2 || most == 0 {
            return Err(format!("the page held {most} WebSockets (at most 2 expected)"));
        }
        if conns.refusals() != refused_before {
            return Err("a live connection was refused".into());
        }
        let opened = c
            .execute("return window.__sockets.length", vec![])
            .await
            .map_err(|e| e.to_string())?;
        if opened.as_u64() != Some(1) {
            return Err(format!("the page opened {opened} WebSockets (one expected)"));
        }
        // The socket drops and cannot come back for a while; a session ends meanwhile. Once
        // back, the page re-subscribes and refetches what it missed: the row goes.
        c.execute(
            "window.__block = true; window.__sockets.forEach(s => s.close());",
            vec![],
        )
        .await
        .map_err(|e| e.to_string())?;
        wait_for(c, "#offline-banner", 15).await?;
        let (gone_token, gone_id) = sessions[0].clone();
        destroy(&app, &gone_token, &gone_id).await;
        wait_status(&app, &gone_token, &gone_id, &["TERMINATED"]).await;
        let gone = c
            .find(Locator::Css("tr.session-row[data-name='many-00']"))
            .await
            .is_ok();
        if !gone {
            return Err("the ended session's row left while the page was offline".into());
        }
        c.execute("window.__block = false;", vec![])
            .await
            .map_err(|e| e.to_string())?;
        wait_gone(c, "#offline-banner", 15).await?;
        within(20, "the session that ended offline to leave the list", || async {
            c.find(Locator::Css("tr.session-row[data-name='many-00']"))
                .await
                .is_err()
                .then_some(())
        })
        .await?;
        if conns.open_of(&owner) > 1 {
            return Err(format!(
                "{} sockets after the reconnect (one expected)",
                conns.open_of(&owner)
            ));
        }
        // Tab A (Finished) answers slowly, tab B (Running) fast: B's rows stay.
        c.execute(
            "const orig = window.fetch.bind(window);
             window.fetch = async (input, init) => {
               try {
                 const body = input instanceof Request ? await input.clone().text() : String((init || {}).body || '');
                 if (body.includes('TERMINATED,CANCELLED')) await new Promise(r => setTimeout(r, 4000));
               } catch (e) {}
               return orig(input, init);
             };",
            vec![],
        )
        .await
        .map_err(|e| e.to_string())?;
        click(c, "#tab-finished").await?;
        click(c, "#tab-running").await?;
        let statuses = || {
            strings(
                c,
                "return [...document.querySelectorAll('tr.session-row')].map(r => r.dataset.status)",
            )
        };
        let running = |shown: &[String]| shown.len() == 39 && shown.iter().all(|s| s == "RUNNING");
        // The Running tab's rows arrive (however busy the machine) …
        within(30, "the Running tab's rows", || async {
            statuses().await.ok().filter(|s| running(s)).map(|_| ())
        })
        .await?;
        // … and stay once the Finished tab's late answer (4 s) has arrived.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let shown = statuses().await?;
        if !running(&shown) {
            return Err(format!("the Running tab shows {shown:?} after the Finished tab's late answer"));
        }
        shot(c, "sessions-latest-tab-wins.png").await?;
        // Leaving the live pages closes the socket.
        c.goto(&format!("{}/#summary", app.base))
            .await
            .map_err(|e| e.to_string())?;
        within(20, "the page's WebSocket to close", || async {
            (conns.open_of(&owner) == 0).then_some(())
        })
        .await?;
        Ok(())
    }
    .await;
    if result.is_err() {
        let _ = shot(c, "sessions-forty-failure.png").await;
    }
    let _ = b.client.clone().close().await;
    // Every session ended (the one the test ended already answers with its refusal).
    for (token, id) in &sessions {
        app.op::<gql::DestroySession>(
            Some(token),
            gql::destroy_session::Variables { id: id.clone() },
        )
        .await;
    }
    result.unwrap();
}

/// The console's first visit downloads the first module only; a screen's part arrives when the
/// screen is first shown. A part that cannot arrive (its file gone) shows an error on its
/// screen, the rest of the console keeps working, and the next visit of the screen loads it
/// once the file is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_screens_load_on_first_use() {
    let built = web_dir();
    // A copy of the bundle whose files the test can take away.
    let dir = std::env::temp_dir().join(format!("bai-web-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&built).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let app = spawn_with(Db::Sqlite, |c| c.web_dir = dir.clone()).await;
    let b = browser().await;
    let c = &b.client;
    // The parts the page has fetched so far (their names without the hash).
    let fetched = || {
        strings(
            c,
            "return performance.getEntriesByType('resource').map(e => e.name).filter(n => n.endsWith('.wasm')).map(n => n.split('/').pop().replace(/-[0-9a-f]{12}\\.wasm$/, ''))",
        )
    };
    let result: Result<(), String> = async {
        login_as(c, &app.base, ADMIN_EMAIL, ADMIN_PASSWORD).await?;
        click(c, "nav.side a[href='#sessions']").await?;
        wait_for(c, "#tab-running", 15).await?;
        let first = fetched().await?;
        if first != ["web_bg"] {
            return Err(format!(
                "the first visit fetched {first:?} (the first module only expected)"
            ));
        }
        // An administration screen: its part arrives, the screen works.
        click(c, "nav.side a[href='#users']").await?;
        wait_text(
            c,
            &format!("tr.admin-row[data-key='{ADMIN_EMAIL}']"),
            ADMIN_EMAIL,
            20,
        )
        .await?;
        let now = fetched().await?;
        if !now.iter().any(|n| n == "split_admin") || now.iter().any(|n| n == "split_statistics") {
            return Err(format!("after Users the page fetched {now:?}"));
        }
        // Statistics' part is gone from the server: its screen says so, the console lives on.
        let gone: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("split_statistics-"))
            })
            .collect();
        if gone.is_empty() {
            return Err("the bundle has no part of its own for Statistics".into());
        }
        let away = |p: &PathBuf| PathBuf::from(format!("{}.away", p.display()));
        for p in &gone {
            std::fs::rename(p, away(p)).unwrap();
        }
        click(c, "nav.side a[href='#statistics']").await?;
        wait_text(c, "#screen-load-error", "could not be loaded", 20).await?;
        shot(c, "screen-load-error.png").await?;
        click(c, "nav.side a[href='#sessions']").await?;
        wait_for(c, "#tab-running", 15).await?;
        // Back on the server: the next visit loads it.
        for p in &gone {
            std::fs::rename(away(p), p).unwrap();
        }
        click(c, "nav.side a[href='#statistics']").await?;
        wait_for(c, "#chart-mem svg polyline", 20).await?;
        shot(c, "screen-loaded-on-retry.png").await?;
        Ok(())
    }
    .await;
    let _ = b.client.clone().close().await;
    let _ = std::fs::remove_dir_all(&dir);
    result.unwrap();
}
