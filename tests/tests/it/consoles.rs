//! Lablup's consoles through Lablup's own web servers, unchanged, in front of bai, with Redis
//! from Debian (installed by `scripts/cli.sh` and `scripts/test.sh`): `backend.ai-console-server`
//! 20.9.7 with Console 21.02 (the console the guides show), walked in headless Chromium — a user
//! logs in, reaches the Summary and the session list, launches a session from the launcher,
//! opens Data & Storage; an admin opens the user and agent lists — and `backend.ai-webserver`
//! 26.9.x, whose login the official CLI uses with `BACKEND_ENDPOINT_TYPE=session`.
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::Client;
use serde_json::{Value, json};

use crate::browser::{browser, screenshot_dir};
use crate::cli::Cli;
use crate::support::*;

fn venv(var: &str, name: &str) -> PathBuf {
    let dir = std::env::var(var).map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".cache/bai-cli")
            .join(name)
    });
    assert!(
        dir.join("bin/python").exists(),
        "{name} is not installed in {}: run scripts/cli.sh (scripts/test.sh does)",
        dir.display()
    );
    dir
}

/// A process group (a server and the workers it forks), killed whole with the value.
struct Group {
    child: std::process::Child,
    log: PathBuf,
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

fn spawn_group(
    program: &std::path::Path,
    args: &[&str],
    dir: &std::path::Path,
    name: &str,
) -> Group {
    use std::os::unix::process::CommandExt as _;
    let log = dir.join(format!("{name}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let child = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .env("PYTHONWARNINGS", "ignore")
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("{name} ({}): {e}", program.display()));
    Group { child, log }
}

/// Debian's Redis on a free loopback port, for the web servers' sessions.
async fn redis(dir: &std::path::Path) -> (Group, u16) {
    let port = free_port();
    let g = spawn_group(
        std::path::Path::new("redis-server"),
        &[
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        dir,
        "redis",
    );
    eventually("Redis to listen", WAIT, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
    })
    .await;
    (g, port)
}

async fn listening(g: &Group, url: &str, what: &str) {
    let http = reqwest::Client::new();
    let ok = tokio::time::timeout(WAIT, async {
        loop {
            if http
                .get(url)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(
        ok.is_ok(),
        "{what} did not serve {url}:\n{}",
        std::fs::read_to_string(&g.log).unwrap_or_default()
    );
}

/// Lablup's backend.ai-console-server 20.9.7 in front of `app` on `port` (chosen before bai
/// starts, which names the console's origin in `app_proxy_origins`); its URL.
async fn console_server(app: &TestApp, redis_port: u16, port: u16) -> (Group, String) {
    let venv = venv("BAI_CONSOLE_SERVER_VENV", "console-server");
    let dir = app.dir.join("console-server");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("console-server.conf"),
        format!(
            r#"[service]
ip = "127.0.0.1"
port = {port}
mode = "webconsole"
enable_signup = false
allow_project_resource_monitor = false
force-endpoint-protocol = "http"
[service.wsproxy]
url = "{base}"
[api]
domain = "default"
endpoint = "{base}"
text = "bai"
ssl-verify = false
[ui]
brand = "bai"
[session]
max_age = 3600
flush_on_startup = true
[session.redis]
host = "127.0.0.1"
port = {redis_port}
"#,
            base = app.base
        ),
    )
    .unwrap();
    let g = spawn_group(
        &venv.join("bin/python"),
        &[
            "-m",
            "ai.backend.console.server",
            "-f",
            "console-server.conf",
        ],
        &dir,
        "console-server",
    );
    let url = format!("http://127.0.0.1:{port}");
    listening(&g, &format!("{url}/config.toml"), "console-server").await;
    (g, url)
}

/// Lablup's backend.ai-webserver 26.9.x in front of `app`; its URL.
async fn web_server(app: &TestApp, redis_port: u16) -> (Group, String) {
    let venv = venv("BAI_WEBSERVER_VENV", "webserver");
    let port = free_port();
    let dir = app.dir.join("webserver");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("webserver.toml"),
        format!(
            r#"[service]
ip = "127.0.0.1"
port = {port}
[security]
cookie-secure = false
[api]
endpoint = "{base}"
[session]
flush-on-startup = true
[session.redis]
addr = "127.0.0.1:{redis_port}"
[webserver]
event-loop = "asyncio"
pid-file = "{pid}"
ipc-base-path = "{ipc}"
"#,
            base = app.base,
            pid = dir.join("webserver.pid").display(),
            ipc = dir.display(),
        ),
    )
    .unwrap();
    let g = spawn_group(
        &venv.join("bin/backend.ai"),
        &["web", "start-server", "-f", "webserver.toml"],
        &dir,
        "webserver",
    );
    let url = format!("http://127.0.0.1:{port}");
    listening(&g, &format!("{url}/config.toml"), "backend.ai-webserver").await;
    (g, url)
}

/// Finds elements through every shadow root (Console 21.02 is made of web components) and
/// reads their text, shadow trees included.
const DEEP: &str = r#"
const __deep = (sel) => { const out = []; const walk = (r) => { r.querySelectorAll(sel).forEach(e => out.push(e)); r.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); }; walk(document); return out; };
const __text = (sel) => __deep(sel).map(e => { const acc = []; const walk = (n) => { if (n.nodeType === 3) acc.push(n.textContent); if (n.shadowRoot) walk(n.shadowRoot); (n.childNodes || []).forEach(walk); }; walk(e); return acc.join(' '); }).join(' ');
"#;

async fn js(c: &Client, code: &str, args: Vec<Value>) -> Value {
    c.execute(&format!("{DEEP}\n{code}"), args)
        .await
        .unwrap_or_else(|e| panic!("{code}: {e}"))
}

/// Waits until `code` (a JS expression over `__deep`/`__text`) is true.
async fn until(c: &Client, what: &str, code: &str) {
    let script = format!("return !!({code});");
    let done = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if js(c, &script, vec![]).await == json!(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    if done.is_err() {
        let _ = shot(
            c,
            &format!("console21-timeout-{}.png", what.replace(' ', "-")),
        )
        .await;
        panic!("Console 21.02: {what} did not happen in 60 s");
    }
}

/// Whether `code` (as for [`until`]) becomes true within `secs`.
async fn becomes(c: &Client, code: &str, secs: u64) -> bool {
    let script = format!("return !!({code});");
    tokio::time::timeout(Duration::from_secs(secs), async {
        while js(c, &script, vec![]).await != json!(true) {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await
    .is_ok()
}

async fn shot(c: &Client, name: &str) -> std::io::Result<()> {
    let png = c.screenshot().await.map_err(std::io::Error::other)?;
    std::fs::write(screenshot_dir().join(name), png)
}

async fn console_login(c: &Client, url: &str, email: &str, password: &str) {
    c.goto(url).await.unwrap();
    until(
        c,
        "the login panel",
        "__deep('backend-ai-login').length && __deep('backend-ai-login')[0].shadowRoot.querySelector('#login-panel').open === true",
    )
    .await;
    js(
        c,
        "const l = __deep('backend-ai-login')[0].shadowRoot;
         l.querySelector('#id_user_id').value = arguments[0];
         l.querySelector('#id_password').value = arguments[1];
         l.querySelector('#login-button').click();",
        vec![json!(email), json!(password)],
    )
    .await;
    until(
        c,
        "the login panel to close",
        "__deep('backend-ai-login')[0].shadowRoot.querySelector('#login-panel').open === false",
    )
    .await;
    until(
        c,
        "the Summary after login",
        "__text('backend-ai-summary-view').includes('Start Menu')",
    )
    .await;
}

/// A pointer click at the middle of the element `element` (a JS expression over `__deep`)
/// names, as a user's click arrives (web components inside shadow roots included).
async fn click_at(c: &Client, element: &str) {
    use fantoccini::actions::{InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction};
    let at = js(
        c,
        &format!(
            "const r = ({element}).getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2];"
        ),
        vec![],
    )
    .await;
    let (x, y) = (at[0].as_f64().unwrap(), at[1].as_f64().unwrap());
    let mouse = MouseActions::new("mouse".into())
        .then(PointerAction::MoveTo {
            duration: None,
            x,
            y,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    c.perform_actions(mouse).await.unwrap();
}

/// The window `c` opened since `before` was listed.
async fn new_window(
    c: &Client,
    before: &[fantoccini::wd::WindowHandle],
) -> fantoccini::wd::WindowHandle {
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Some(h) = c
                .windows()
                .await
                .unwrap()
                .into_iter()
                .find(|h| !before.contains(h))
            {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    match found {
        Ok(h) => h,
        Err(_) => {
            let _ = shot(c, "console21-timeout-app-window.png").await;
            panic!("Console 21.02: no app window opened in 60 s");
        }
    }
}

/// Opens Jupyter (the row's app launcher) and the terminal (the row's terminal button) of
/// session `id` from the session list, through bai's app proxy, each in the window the
/// console opens; back in the console's window afterwards.
async fn console_apps(c: &Client, id: &str) {
    js(
        c,
        "localStorage.setItem('backendaiconsole.terminalguide', 'false');",
        vec![],
    )
    .await;
    let console = c.window().await.unwrap();
    let row = format!(
        "__deep('#controls').find(e => e['session-uuid'] === {})",
        json!(id)
    );
    until(c, "the session's controls", &row).await;
    let before = c.windows().await.unwrap();
    js(
        c,
        &format!("{row}.querySelector('mwc-icon-button[icon=\"apps\"]').click();"),
        vec![],
    )
    .await;
    let jupyter =
        "__deep('#app-dialog mwc-icon-button.apps').find(b => b['app-name'] === 'jupyter')";
    until(c, "Jupyter in the app launcher", jupyter).await;
    shot(c, "console21-4b-app-launcher.png").await.unwrap();
    js(c, &format!("{jupyter}.click();"), vec![]).await;
    let opened = new_window(c, &before).await;
    c.switch_to_window(opened).await.unwrap();
    until(
        c,
        "Jupyter's file tree",
        "document.querySelector('#notebook_list') && document.title.includes('Home')",
    )
    .await;
    shot(c, "console21-4c-jupyter.png").await.unwrap();
    c.close_window().await.unwrap();
    c.switch_to_window(console.clone()).await.unwrap();
    // The terminal: the row's button without an icon name (its own drawing).
    let before = c.windows().await.unwrap();
    js(
        c,
        &format!(
            "[...{row}.querySelectorAll('mwc-icon-button')].find(b => !b.getAttribute('icon') && b.querySelector('svg')).click();"
        ),
        vec![],
    )
    .await;
    let opened = new_window(c, &before).await;
    c.switch_to_window(opened).await.unwrap();
    until(
        c,
        "the terminal's shell prompt",
        "document.body && document.body.innerText.includes('work@')",
    )
    .await;
    c.active_element()
        .await
        .unwrap()
        .send_keys("echo $((6 * 7))x\n")
        .await
        .unwrap();
    until(
        c,
        "the terminal running a command",
        "document.body.innerText.includes('42x')",
    )
    .await;
    shot(c, "console21-4d-terminal.png").await.unwrap();
    c.close_window().await.unwrap();
    c.switch_to_window(console).await.unwrap();
}

/// Opens `path` of the console at `url`, waits until `ready` (as for [`until`]) and keeps a
/// screenshot named `name`.
async fn visit(c: &Client, url: &str, path: &str, what: &str, ready: &str, name: &str) {
    c.goto(&format!("{url}{path}")).await.unwrap();
    until(c, what, ready).await;
    shot(c, name).await.unwrap();
}

/// An administrator's screens that read bai's answers in Backend.AI 21.x's shapes: the image
/// table, the registries, the resource policies' storage hosts, Configurations, Information.
async fn console_admin_screens(c: &Client, url: &str) {
    visit(
        c,
        url,
        "/environment",
        "the image table",
        "__text('backend-ai-environment-list').includes('Python') && __text('backend-ai-environment-list').includes('0.32GB')",
        "console21-8-images.png",
    )
    .await;
    js(
        c,
        "__deep('mwc-tab[title=\"registry-lists\"]')[0].click();",
        vec![],
    )
    .await;
    until(
        c,
        "the registry list",
        "__deep('backend-ai-registry-list').some(r => r.hostnames.includes('registry.example:5000') && r.allowed_registries.includes('registry.example:5000')) && ['registry.example:5000', 'https://registry.example:5000', 'site'].every(t => __deep('vaadin-grid-cell-content').some(c => c.innerText.trim() === t && c.getRootNode().host.localName === 'backend-ai-registry-list')) && !__text('backend-ai-registry-list').includes('registry-secret')",
    )
    .await;
    shot(c, "console21-9-registries.png").await.unwrap();
    c.goto(&format!("{url}/credential")).await.unwrap();
    // A click where the user clicks (the tab bar follows pointer clicks, not `click()`).
    let tab = "__deep('mwc-tab[title=\"resource-policy-lists\"]')[0]";
    until(
        c,
        "the resource policies' tab",
        &format!("{tab} && {tab}.offsetParent !== null"),
    )
    .await;
    // Until the page listens, a click does nothing: click until the policies show.
    let shown = "__deep('#resource-policy-lists').some(e => e.style.display === 'block')";
    for _ in 0..10 {
        click_at(c, tab).await;
        if becomes(c, shown, 3).await {
            break;
        }
    }
    until(
        c,
        "the resource policies' storage hosts",
        "__deep('vaadin-grid-cell-content').some(c => c.innerText.trim() === 'local' && c.getRootNode().host.localName === 'backend-ai-resource-policy-list')",
    )
    .await;
    shot(c, "console21-10-policies.png").await.unwrap();
    visit(
        c,
        url,
        "/settings",
        "Configurations with bai's values",
        "__deep('backend-ai-settings-view').some(v => v.options && v.options.image_pulling_behavior === 'tag' && v.options.scheduler === 'fifo')",
        "console21-11-configurations.png",
    )
    .await;
    visit(
        c,
        url,
        "/information",
        "Information with the licence",
        "__deep('backend-ai-information-view').some(v => v.manager_version && String(v.license_licensee).startsWith('bai, open source'))",
        "console21-12-information.png",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_21_through_lablups_console_server() {
    let started = std::time::Instant::now();
    require_docker();
    // The console's origin may use bai's app proxy (Backend.AI's app-proxy protocol).
    let console_port = free_port();
    let pool = port_block();
    let app = spawn_with(Db::Sqlite, |c| {
        c.app_port_pool = format!("{pool}-{}", pool + 9);
        c.app_proxy_origins = vec![format!("http://127.0.0.1:{console_port}")];
    })
    .await;
    // The launcher lists the images agents have: wait until the engine's were scanned.
    eventually("the Python image in the catalog", WAIT, || async {
        let img = app
            .ok(
                Some(&app.admin_token),
                "query($r: String!) { image(reference: $r) { installed } }",
                json!({"r": PYTHON}),
            )
            .await;
        (img["image"]["installed"] == true).then_some(())
    })
    .await;
    let (_redis, redis_port) = redis(&app.dir).await;
    let (_server, url) = console_server(&app, redis_port, console_port).await;
    let user = app.user("console21@x.org", "user", "default").await;
    let b = browser().await;
    let c = &b.client;

    // A user: Summary, the session list, a session from the launcher, Data & Storage.
    console_login(c, &url, "console21@x.org", USER_PASSWORD).await;
    // The resource monitor has read the user's resource group, limits and what is free.
    until(
        c,
        "the Summary's resource statistics",
        "__deep('lablup-progress-bar').some(e => String(e.description).startsWith('0/2'))",
    )
    .await;
    shot(c, "console21-1-summary.png").await.unwrap();
    c.goto(&format!("{url}/job")).await.unwrap();
    until(
        c,
        "the session list",
        "__deep('backend-ai-session-list').some(e => e.offsetParent !== null)",
    )
    .await;
    shot(c, "console21-2-sessions.png").await.unwrap();
    let launcher = "__deep('backend-ai-session-launcher').filter(e => e.offsetParent !== null)[0]";
    let ready = format!(
        "{launcher}.shadowRoot.querySelector('#environment').value && !{launcher}.shadowRoot.querySelector('#launch-button').disabled"
    );
    // The Python environment, chosen by hand: the engine may hold other tests' images, and the
    // console preselects the first it lists.
    let python = json!(PYTHON.split(':').next().unwrap_or(PYTHON));
    let listed = format!(
        "[...{launcher}.shadowRoot.querySelectorAll('#environment mwc-list-item')].some(i => i.value === {python})"
    );
    // The console asks for the images once, with its own 5 s timeout: on a machine busy with
    // other tests that answer may come too late, and only a reload asks again.
    for attempt in 0..3 {
        if attempt > 0 {
            c.goto(&format!("{url}/job")).await.unwrap();
        }
        until(
            c,
            "the launcher's button",
            &format!("{launcher} && {launcher}.shadowRoot.querySelector('#launch-session')"),
        )
        .await;
        js(
            c,
            &format!("{launcher}.shadowRoot.querySelector('#launch-session').click();"),
            vec![],
        )
        .await;
        if becomes(c, &listed, 20).await {
            break;
        }
    }
    until(c, "the Python environment in the launcher", &listed).await;
    js(
        c,
        &format!(
            "const s = {launcher}.shadowRoot.querySelector('#environment');
             s.select([...s.querySelectorAll('mwc-list-item')].findIndex(i => i.value === {python}));"
        ),
        vec![],
    )
    .await;
    let ready = format!(
        "{launcher}.shadowRoot.querySelector('#environment').value === {python} && {ready}"
    );
    until(c, "the Python environment chosen", &ready).await;
    // The least memory the launcher offers is what a launch needs: the image's minimum (256m)
    // plus the 64m of shared memory the console sends by default (0.3125 GiB, up to the 0.32
    // it shows); the session is launched there, at the least shared memory (0.06 GiB).
    let least = js(
        c,
        &format!("return [{launcher}.mem_metric.min, {launcher}.shmem_metric.min];"),
        vec![],
    )
    .await;
    assert_eq!(least, json!([0.32, 0.06]), "the launcher's least memory");
    // The launcher applies its first preset when it has read them: set until it holds.
    let at_least = format!(
        "{launcher}.mem_request === {launcher}.mem_metric.min && {launcher}.shmem_request === {launcher}.shmem_metric.min"
    );
    for _ in 0..10 {
        js(
            c,
            &format!(
                "const l = {launcher};
                 l.mem_request = l.mem_metric.min; l.shmem_request = l.shmem_metric.min;
                 l.shadowRoot.querySelector('#mem-resource').value = l.mem_metric.min;
                 l.shadowRoot.querySelector('#shmem-resource').value = l.shmem_metric.min;"
            ),
            vec![],
        )
        .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        if js(c, &format!("return {at_least};"), vec![]).await == json!(true) {
            break;
        }
    }
    until(c, "the least memory set", &at_least).await;
    shot(c, "console21-3-launcher.png").await.unwrap();
    js(
        c,
        &format!("{launcher}.shadowRoot.querySelector('#launch-button').click();"),
        vec![],
    )
    .await;
    // No folder is mounted: the console asks once more.
    until(
        c,
        "the no-folder confirmation",
        &format!("{launcher}.shadowRoot.querySelector('#launch-confirmation-button').getBoundingClientRect().width > 0"),
    )
    .await;
    js(
        c,
        &format!("{launcher}.shadowRoot.querySelector('#launch-confirmation-button').click();"),
        vec![],
    )
    .await;
    let session = eventually("the console's session to run", WAIT, || async {
        let list = app
            .ok(
                Some(&user),
                "{ compute_session_list(limit: 10, offset: 0) { items { id name status image occupied_slots } } }",
                json!({}),
            )
            .await;
        let item = list["compute_session_list"]["items"][0].clone();
        (item["status"] == "RUNNING").then_some(item)
    })
    .await;
    assert_eq!(session["image"], PYTHON, "{session}");
    let occupied: Value =
        serde_json::from_str(session["occupied_slots"].as_str().unwrap()).unwrap();
    let mem: f64 = match &occupied["mem"] {
        Value::String(s) => s.parse().unwrap(),
        v => v.as_f64().unwrap(),
    };
    assert!(
        (mem - 0.32 * 1024.0 * 1024.0 * 1024.0).abs() < 1.0,
        "launched at the least memory: {session}"
    );
    let id = session["id"].as_str().unwrap().to_string();
    let name = session["name"].as_str().unwrap().to_string();
    c.goto(&format!("{url}/job")).await.unwrap();
    until(
        c,
        "the session in the list",
        &format!(
            "__text('backend-ai-session-list').includes({})",
            json!(name)
        ),
    )
    .await;
    shot(c, "console21-4-session-running.png").await.unwrap();
    console_apps(c, &id).await;
    let (st, made) = rest(
        &app,
        &user,
        reqwest::Method::POST,
        "/folders",
        Some(json!({"name": "console-data"})),
    )
    .await;
    assert_eq!(st, 201, "{made}");
    visit(
        c,
        &url,
        "/data",
        "Data & Storage",
        "__text('backend-ai-data-view').includes('console-data')",
        "console21-5-data.png",
    )
    .await;
    // Upload in the explorer: the console's own upload (tus, from its origin) lands the file.
    js(
        c,
        "__deep('mwc-icon-button[icon=\"folder_open\"]').find(b => b['folder-id'] === 'console-data').click();",
        vec![],
    )
    .await;
    until(
        c,
        "the folder explorer",
        "__deep('#folder-explorer-dialog').some(d => d.open === true) && __deep('#fileInput').length",
    )
    .await;
    js(
        c,
        "const input = __deep('#fileInput')[0];
         const files = new DataTransfer();
         files.items.add(new File(['uploaded through Console 21.02\\n'], 'from-console.txt', {type: 'text/plain'}));
         input.files = files.files;
         input.dispatchEvent(new Event('change'));",
        vec![],
    )
    .await;
    let folder = made["id"].as_str().unwrap().to_string();
    eventually("the uploaded file in the folder", WAIT, || async {
        let (_, files) = rest(
            &app,
            &user,
            reqwest::Method::GET,
            &format!("/folders/{folder}/files"),
            None,
        )
        .await;
        files["items"]
            .as_array()?
            .iter()
            .any(|i| i["name"] == "from-console.txt" && i["size"] == 31)
            .then_some(())
    })
    .await;
    until(
        c,
        "the upload in the explorer",
        "__text('backend-ai-storage-list').includes('from-console.txt')",
    )
    .await;
    shot(c, "console21-5b-upload.png").await.unwrap();
    // Statistics: the month's use, charted per quarter hour (the last day's 96), the running
    // session in the last (once bai has sampled it).
    eventually(
        "the running session in the month's statistics",
        WAIT,
        || async {
            let (_, bins) = rest(
                &app,
                &user,
                reqwest::Method::GET,
                "/resource/stats/user/month",
                None,
            )
            .await;
            (bins.as_array()?.last()?["num_sessions"]["value"].as_f64()? > 0.0).then_some(())
        },
    )
    .await;
    let usage =
        "__deep('backend-ai-usage-list').filter(e => e.collection && e.collection['1D'])[0]";
    visit(
        c,
        &url,
        "/statistics",
        "the Statistics chart",
        &format!(
            "{usage} && {usage}.collection['1D'].num_sessions.data[0].length === 96 && {usage}.collection['1D'].num_sessions.data[0][95].y > 0 && __deep('backend-ai-chart').length > 0"
        ),
        "console21-5c-statistics.png",
    )
    .await;

    // An admin: the user list and the agent list.
    c.delete_all_cookies().await.unwrap();
    console_login(c, &url, ADMIN_EMAIL, ADMIN_PASSWORD).await;
    visit(
        c,
        &url,
        "/credential",
        "the user list",
        "__text('backend-ai-credential-view').includes('console21@x.org')",
        "console21-6-users.png",
    )
    .await;
    let agent = app
        .admin_op::<crate::gql::sessions::Agents>(Default::default())
        .await["agents"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    visit(
        c,
        &url,
        "/agent",
        "the agent list",
        &format!("__text('backend-ai-agent-view').includes({})", json!(agent)),
        "console21-7-agents.png",
    )
    .await;
    // A registry of the site's (its password never shown; enabled: the domain may use any),
    // for the Registries tab.
    app.admin_op::<crate::gql::admin::CreateContainerRegistry>(
        crate::gql::admin::create_container_registry::Variables {
            hostname: "registry.example:5000".into(),
            props: crate::gql::admin::create_container_registry::CreateContainerRegistryInput {
                url: "https://registry.example:5000".into(),
                type_: "docker".into(),
                username: Some("site".into()),
                password: Some("registry-secret".into()),
                ..Default::default()
            },
        },
    )
    .await;
    console_admin_screens(c, &url).await;
    took(
        "it::consoles::console_21_through_lablups_console_server",
        started,
    );
}

// Both official CLIs in their session mode (`BACKEND_ENDPOINT_TYPE=session`) through Lablup's
// web server 26.9: `login` (the web server asks bai's `/auth/authorize`), commands through its
// signed proxy, `logout`; a wrong password is refused, and nothing works once logged out.
crate::both_dbs!(clis_log_in_through_lablups_web_server, |db| async move {
    let app = spawn(db).await;
    let (_redis, redis_port) = redis(&app.dir).await;
    let (_server, url) = web_server(&app, redis_port).await;
    let user = app.user("ws-cli@x.org", "user", "default").await;
    for (n, cli) in [
        (23, Cli::for_user(&app, &user).await),
        (26, Cli::for_user26(&app, &user).await),
    ] {
        let cli = cli.through_web_server(&url);
        let wrong = cli
            .run_input(&["login"], "ws-cli@x.org\nnot-the-password\n")
            .await;
        // bai's refusal, passed on by the web server (401, auth-failed, bai's message); the
        // clients then fail to print it (their error printer reads a `title` the web
        // server's login answer keeps under `data`), so it shows in their traceback.
        let all = format!("{wrong}");
        assert!(!all.contains("Login succeeded"), "{wrong}");
        assert!(
            all.contains("BackendAPIError(401, 'Unauthorized'")
                && all.contains("https://api.backend.ai/probs/auth-failed")
                && all.contains("Invalid email or password."),
            "{wrong}"
        );
        let login = cli
            .run_input(&["login"], &format!("ws-cli@x.org\n{USER_PASSWORD}\n"))
            .await;
        assert!(
            login.ok && format!("{login}").contains("Login succeeded"),
            "{login}"
        );
        let name = format!("ws-folder-{n}");
        let made = cli.run(&["vfolder", "create", &name, "local"]).await;
        assert!(made.ok, "{made}");
        let listed = cli.run(&["vfolder", "list"]).await;
        assert!(listed.ok && listed.stdout.contains(&name), "{listed}");
        let ps = cli.run(&["ps"]).await;
        assert!(ps.ok || ps.stderr.contains("NoItems"), "{ps}");
        let out = cli.run(&["logout"]).await;
        assert!(out.ok && format!("{out}").contains("Logout done"), "{out}");
        let after = cli.run(&["vfolder", "list"]).await;
        assert!(!after.stdout.contains(&name), "logged out: {after}");
        // Refused by the web server itself: no login session, no keypair to sign with.
        assert!(
            after.refused("401 Unauthorized", "Unauthorized access"),
            "logged out: {after}"
        );
    }
});

/// Logs in to Lablup's Web UI at `url` and waits for the project's Start page.
async fn webui_login(c: &Client, url: &str, email: &str, password: &str, shot_name: &str) {
    use fantoccini::Locator;
    c.goto(url).await.unwrap();
    let secret = c
        .wait()
        .at_most(Duration::from_secs(60))
        .for_element(Locator::Css("input[type=password]"))
        .await
        .unwrap();
    let name = c.find(Locator::Css("input[type=text]")).await.unwrap();
    name.send_keys(email).await.unwrap();
    secret.send_keys(password).await.unwrap();
    secret.send_keys("\u{E007}").await.unwrap();
    let reached = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let here = c
                .current_url()
                .await
                .map(|u| u.to_string())
                .unwrap_or_default();
            let text = js(c, "return document.body.innerText;", vec![]).await;
            if here.contains("/start")
                && text
                    .as_str()
                    .is_some_and(|t| t.contains("Start Interactive Session"))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    shot(c, shot_name).await.unwrap();
    assert!(
        reached.is_ok(),
        "the Web UI did not reach the Start page: {:?}",
        js(c, "return document.body.innerText;", vec![]).await
    );
}

/// Opens `path` of the Web UI and waits until its text shows `needle`.
async fn webui_page(c: &Client, url: &str, path: &str, needle: &str, shot_name: &str) {
    c.goto(&format!("{url}{path}")).await.unwrap();
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let text = js(c, "return document.body.innerText;", vec![]).await;
            if text.as_str().is_some_and(|t| t.contains(needle)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    shot(c, shot_name).await.unwrap();
    assert!(
        found.is_ok(),
        "{path}: {needle} not shown: {:?}",
        js(c, "return document.body.innerText;", vec![]).await
    );
}

/// Clicks the visible button whose text is `label` (Lablup's Web UI 26); false if none yet.
async fn click_button(c: &Client, label: &str) -> bool {
    js(
        c,
        "const b = [...document.querySelectorAll('button')].find(b => b.innerText.trim() === arguments[0] && b.offsetParent !== null && !b.disabled); if (b) { b.click(); return true; } return false;",
        vec![json!(label)],
    )
    .await
        == json!(true)
}

/// Waits (60 s) for the button `label` and clicks it.
async fn press(c: &Client, label: &str, shot_name: &str) {
    let pressed = tokio::time::timeout(Duration::from_secs(60), async {
        while !click_button(c, label).await {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    if pressed.is_err() {
        let _ = shot(c, shot_name).await;
        panic!(
            "no '{label}' button: {:?}",
            js(c, "return document.body.innerText;", vec![]).await
        );
    }
}

/// Lablup's Web UI 26.9 through its web server, the journey of the guides:
/// - a user logs in (the web server asks bai's `/auth/authorize`) and reaches its project's
///   Start page, then the Dashboard (`agent_summary_list`, `user_resource_policy`, …);
/// - the Data page lists its folder (`vfolder_nodes`);
/// - it launches a session from the launcher (`accessible_scaling_groups`, `resource_presets`,
///   images as Backend.AI 24.12 names them, `POST /session` with `mount_ids`), which runs and
///   is listed on the Sessions page (`compute_session_nodes`);
/// - an admin, in a browser of its own, opens the user list (`adminUsersV2`) and the agent
///   list (`agent_nodes`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_ui_26_through_lablups_web_server() {
    let started = std::time::Instant::now();
    require_docker();
    let app = spawn(Db::Sqlite).await;
    // The launcher offers the images agents have: wait until the engine's were scanned.
    eventually("the Python image in the catalog", WAIT, || async {
        let img = app
            .ok(
                Some(&app.admin_token),
                "query($r: String!) { image(reference: $r) { installed } }",
                json!({"r": PYTHON}),
            )
            .await;
        (img["image"]["installed"] == true).then_some(())
    })
    .await;
    let (_redis, redis_port) = redis(&app.dir).await;
    let (_server, url) = web_server(&app, redis_port).await;
    let user = app.user("webui@x.org", "user", "default").await;
    let (st, made) = rest(
        &app,
        &user,
        reqwest::Method::POST,
        "/folders",
        Some(json!({"name": "webui-data"})),
    )
    .await;
    assert_eq!(st, 201, "{made}");
    let b = browser().await;
    let c = &b.client;
    webui_login(c, &url, "webui@x.org", USER_PASSWORD, "webui26-1-start.png").await;
    webui_page(
        c,
        &url,
        "/dashboard",
        "My Sessions",
        "webui26-2-dashboard.png",
    )
    .await;
    webui_page(c, &url, "/data", "webui-data", "webui26-3-data.png").await;

    // The launcher, filled as its own shared links fill it (`?formValues=`: a name and the
    // Python image, whatever other images the engine holds), then straight to the review,
    // launch, and confirm that no folder is mounted.
    let form = json!({"sessionName": "webui-launched", "environments": {"version": PYTHON}});
    let link = reqwest::Url::parse_with_params(
        &format!("{url}/session/start"),
        &[("formValues", form.to_string())],
    )
    .unwrap();
    webui_page(
        c,
        &url,
        &format!("{}?{}", link.path(), link.query().unwrap_or_default()),
        "Skip to review",
        "webui26-4-launcher.png",
    )
    .await;
    press(c, "Skip to review", "webui26-timeout-review.png").await;
    press(c, "Launch", "webui26-timeout-launch.png").await;
    shot(c, "webui26-5-confirm.png").await.unwrap();
    press(c, "Start", "webui26-timeout-start.png").await;
    let session = eventually("the launched session to run", WAIT, || async {
        let list = app
            .ok(
                Some(&user),
                "{ compute_session_list(limit: 10, offset: 0) { items { name status image } } }",
                json!({}),
            )
            .await;
        let item = list["compute_session_list"]["items"][0].clone();
        (item["status"] == "RUNNING").then_some(item)
    })
    .await;
    assert_eq!(session["name"], "webui-launched", "{session}");
    assert_eq!(session["image"], PYTHON, "{session}");
    webui_page(
        c,
        &url,
        "/session",
        "webui-launched",
        "webui26-6-sessions.png",
    )
    .await;

    // An admin (a browser of its own): the user list and the agent list.
    let agent = app
        .admin_op::<crate::gql::sessions::Agents>(Default::default())
        .await["agents"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b2 = browser().await;
    let c2 = &b2.client;
    webui_login(
        c2,
        &url,
        ADMIN_EMAIL,
        ADMIN_PASSWORD,
        "webui26-7-admin-start.png",
    )
    .await;
    webui_page(
        c2,
        &url,
        "/admin/users",
        "webui@x.org",
        "webui26-8-users.png",
    )
    .await;
    webui_page(c2, &url, "/agent", &agent, "webui26-9-agents.png").await;
    took(
        "it::consoles::web_ui_26_through_lablups_web_server",
        started,
    );
}

// What Lablup's consoles call beside GraphQL, answered as Backend.AI does (issue 63): the tus
// endpoint's CORS for an upload from the console's own origin, `/config/get` (read-only, for
// superadmins), `/license`, the month statistics, and Backend.AI 21.x's shapes on the legacy
// GraphQL endpoint Console 21.02 uses (storage hosts as a list, the registries "any" means).
crate::both_dbs!(
    consoles_side_calls_answer_as_backend_ai_does,
    |db| async move {
        require_docker();
        let app = spawn(db).await;
        let user = app.user("side@x.org", "user", "default").await;
        let origin = "http://console.example:8090";
        // tus from another origin: the preflight, and every answer readable (an error too).
        let pre = app
            .http
            .request(
                reqwest::Method::OPTIONS,
                app.url("/folders/_/transfer/upload?token=x"),
            )
            .header("origin", origin)
            .header("access-control-request-method", "PATCH")
            .header(
                "access-control-request-headers",
                "tus-resumable,upload-offset,content-type",
            )
            .send()
            .await
            .unwrap();
        assert!(pre.status().is_success(), "{}", pre.status());
        let h = pre.headers();
        assert_eq!(h["access-control-allow-origin"], "*");
        assert!(
            h["access-control-allow-methods"]
                .to_str()
                .unwrap()
                .contains("PATCH")
        );
        assert!(
            h["access-control-allow-headers"]
                .to_str()
                .unwrap()
                .contains("Upload-Offset")
        );
        assert_eq!(h["tus-resumable"], "1.0.0");
        let head = app
            .http
            .head(app.url("/folders/_/transfer/upload?token=not-a-token"))
            .header("origin", origin)
            .send()
            .await
            .unwrap();
        assert_eq!(head.status(), 404);
        assert_eq!(head.headers()["access-control-allow-origin"], "*");
        assert!(
            head.headers()["access-control-expose-headers"]
                .to_str()
                .unwrap()
                .contains("Upload-Offset")
        );

        // /config/get: superadmins only, read-only values, null for what bai has not.
        let get = |token: String, body: Value| {
            let app = &app;
            async move {
                rest(
                    app,
                    &token,
                    reqwest::Method::POST,
                    "/config/get",
                    Some(body),
                )
                .await
            }
        };
        let admin = app.admin_token.clone();
        let (st, v) = get(
            admin.clone(),
            json!({"key": "config/docker/image/auto_pull"}),
        )
        .await;
        assert_eq!((st, v["result"].clone()), (200, json!("tag")), "{v}");
        let (st, v) = get(admin.clone(), json!({"key": "config/plugins/scheduler"})).await;
        assert_eq!((st, v["result"].clone()), (200, json!("fifo")), "{v}");
        let (st, v) = get(
            admin.clone(),
            json!({"key": "config/docker/registry", "prefix": true}),
        )
        .await;
        assert_eq!(st, 200, "{v}");
        assert!(v["result"].is_object(), "{v}");
        let (st, v) = get(admin.clone(), json!({"key": "config/network/overlay/mtu"})).await;
        assert_eq!((st, v["result"].clone()), (200, Value::Null), "{v}");
        let (st, _) = get(
            user.clone(),
            json!({"key": "config/docker/image/auto_pull"}),
        )
        .await;
        assert!(
            st == 403 || st == 404,
            "a user reads no configuration: {st}"
        );
        // Nor a domain admin (the registries' URLs and users are the superadmin's).
        let domain_admin = app.user("side-admin@x.org", "admin", "default").await;
        let (st, _) = get(
            domain_admin,
            json!({"key": "config/docker/registry", "prefix": true}),
        )
        .await;
        assert!(
            st == 403 || st == 404,
            "a domain admin reads no configuration: {st}"
        );
        let (st, v) = get(admin.clone(), json!("not an object")).await;
        assert_eq!(st, 400, "{v}");
        let (st, v) = rest(
            &app,
            &admin,
            reqwest::Method::POST,
            "/config/set",
            Some(json!({"key": "config/x", "value": "y"})),
        )
        .await;
        assert_eq!(st, 400, "writing stays refused: {v}");

        // /license: open source, for anyone logged in.
        let (st, v) = rest(&app, &user, reqwest::Method::GET, "/license", None).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["status"], "valid");
        assert_eq!(v["certificate"]["type"], "open-source");
        let anon = app.http.get(app.url("/license")).send().await.unwrap();
        assert_eq!(anon.status(), 401);

        // The month statistics: a quarter hour each, 30 days of them, the figures Backend.AI's.
        let (st, v) = rest(
            &app,
            &user,
            reqwest::Method::GET,
            "/resource/stats/user/month",
            None,
        )
        .await;
        assert_eq!(st, 200, "{v}");
        let bins = v.as_array().unwrap();
        assert!((2880..=2881).contains(&bins.len()), "{}", bins.len());
        let last = bins.last().unwrap();
        for key in [
            "num_sessions",
            "cpu_allocated",
            "mem_allocated",
            "gpu_allocated",
            "io_read_bytes",
            "io_write_bytes",
        ] {
            assert!(last[key]["unit_hint"].is_string(), "{key}: {last}");
        }
        let dates: Vec<f64> = bins.iter().map(|b| b["date"].as_f64().unwrap()).collect();
        assert!(
            dates.windows(2).all(|w| w[1] - w[0] == 900.0),
            "quarter hours, oldest first"
        );

        // Backend.AI 21.x's shapes on /admin/graphql; today's on /admin/gql.
        let q = json!({"query": "{ keypair_resource_policies { name allowed_vfolder_hosts } domain(name: \"default\") { allowed_docker_registries } }"});
        let legacy: Value = app
            .http
            .post(app.url("/admin/graphql"))
            .bearer_auth(&admin)
            .json(&q)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let policy = &legacy["keypair_resource_policies"][0];
        assert!(policy["allowed_vfolder_hosts"].is_array(), "{legacy}");
        assert!(
            policy["allowed_vfolder_hosts"]
                .as_array()
                .unwrap()
                .iter()
                .all(Value::is_string),
            "{legacy}"
        );
        let registries = legacy["domain"]["allowed_docker_registries"]
            .as_array()
            .unwrap();
        assert!(
            registries.contains(&json!("bai.local")),
            "any registry means those in use: {legacy}"
        );
        let today: Value = app
            .http
            .post(app.url("/admin/gql"))
            .bearer_auth(&admin)
            .json(&q)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(
            today["data"]["keypair_resource_policies"][0]["allowed_vfolder_hosts"].is_string(),
            "{today}"
        );
        assert_eq!(
            today["data"]["domain"]["allowed_docker_registries"],
            json!([]),
            "{today}"
        );
    }
);

// Backend.AI's app-proxy protocol (v1), which Lablup's consoles speak to open an app, answered
// by bai's own app proxy (issue 63): `/conf` proves who asks (the keypair's secret here; a
// console's web server in SESSION mode, only one named in app_proxy_origins), `/add` starts
// the app and answers where it opens (its own port and token); the first visit with
// `&redirect=/tree` sets the app's cookie and goes inside the app, never elsewhere. A stranger's
// session is NOT_FOUND, a bad token refused, CORS only for the consoles named; without that
// setting the protocol is off.
crate::both_dbs!(
    apps_open_through_backend_ais_app_proxy_protocol,
    |db| async move {
        require_docker();
        let pool = port_block();
        let console = "http://console.example:8090";
        let app = spawn_with(db, |c| {
            c.app_port_pool = format!("{pool}-{}", pool + 9);
            c.app_proxy_origins = vec![console.into()];
        })
        .await;
        let user = app.user("proxied@x.org", "user", "default").await;
        let nosy = app.user("nosy@x.org", "user", "default").await;
        let id =
            session_ids(&create_session(&app, &user, json!({"image": PYTHON})).await)[0].clone();
        wait_status(&app, &user, &id, &["RUNNING"]).await;
        let keys = |token: String| {
            let app = &app;
            async move {
                let k = app
                    .ok(
                        Some(&token),
                        "{ keypair { access_key secret_key } }",
                        json!({}),
                    )
                    .await;
                (
                    k["keypair"]["access_key"].as_str().unwrap().to_string(),
                    k["keypair"]["secret_key"].as_str().unwrap().to_string(),
                )
            }
        };
        let plain = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        // The preflight: CORS for the console named, for no other origin.
        for (origin, allowed) in [(console, true), ("http://evil.example", false)] {
            let pre = plain
                .request(reqwest::Method::OPTIONS, app.url("/conf"))
                .header("origin", origin)
                .header("access-control-request-method", "PUT")
                .send()
                .await
                .unwrap();
            assert!(pre.status().is_success());
            let got = pre
                .headers()
                .get("access-control-allow-origin")
                .map(|v| v.to_str().unwrap().to_string());
            assert_eq!(got, allowed.then(|| origin.to_string()), "{origin}");
        }
        let conf = |body: Value| {
            let (plain, app) = (&plain, &app);
            async move {
                let resp = plain
                    .put(app.url("/conf"))
                    .header("origin", console)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let status = resp.status().as_u16();
                assert_eq!(resp.headers()["access-control-allow-origin"], console);
                (status, resp.json::<Value>().await.unwrap_or(Value::Null))
            }
        };
        let (ak, sk) = keys(user.clone()).await;
        let (st, _) = conf(json!({"mode": "DEFAULT", "access_key": ak, "secret_key": "wrong", "api_version": "v6"})).await;
        assert_eq!(st, 401);
        // SESSION mode asks only a console's web server bai knows: never a URL a caller makes up.
        let (st, v) = conf(
            json!({"mode": "SESSION", "endpoint": "http://169.254.169.254", "session": "abc"}),
        )
        .await;
        assert_eq!(st, 403, "{v}");
        let (st, v) = conf(
            json!({"mode": "DEFAULT", "access_key": ak, "secret_key": sk, "api_version": "v6"}),
        )
        .await;
        assert_eq!(st, 200, "{v}");
        let token = v["token"].as_str().unwrap().to_string();
        let add = |token: String, session: String, app_name: &str| {
            let (plain, app) = (&plain, &app);
            let path = format!("/proxy/{token}/{session}/add?app={app_name}");
            async move {
                let resp = plain
                    .get(app.url(&path))
                    .header("origin", console)
                    .send()
                    .await
                    .unwrap();
                (
                    resp.status().as_u16(),
                    resp.json::<Value>().await.unwrap_or(Value::Null),
                )
            }
        };
        let (st, added) = add(token.clone(), id.clone(), "jupyter").await;
        assert_eq!(st, 200, "{added}");
        assert_eq!(added["code"], 200);
        let url = added["url"].as_str().unwrap().to_string();
        let port = added["port"].as_u64().unwrap() as u16;
        assert!((pool..=pool + 9).contains(&port), "{added}");
        assert!(
            url.starts_with(&format!(
                "http://127.0.0.1:{port}/apps/{id}/jupyter/?token="
            )),
            "{url}"
        );
        // A stranger with a token of its own, and a bad token.
        let (nak, nsk) = keys(nosy.clone()).await;
        let (_, v) = conf(json!({"mode": "DEFAULT", "access_key": nak, "secret_key": nsk})).await;
        let theirs = v["token"].as_str().unwrap().to_string();
        let (st, v) = add(theirs, id.clone(), "jupyter").await;
        assert_eq!(st, 404, "{v}");
        let (st, _) = add("not-a-token".into(), id.clone(), "jupyter").await;
        assert_eq!(st, 401);
        // The first visit: the cookie, then inside the app (the console adds `&redirect=/tree`).
        let first = plain
            .get(format!("{url}&redirect=/tree"))
            .header("origin", console)
            .send()
            .await
            .unwrap();
        assert_eq!(first.status(), 302);
        let inside = first.headers()["location"].to_str().unwrap().to_string();
        assert!(
            inside.starts_with(&format!("/apps/{id}/jupyter/tree?token=")),
            "{inside}"
        );
        assert_eq!(first.headers()["access-control-allow-origin"], console);
        let cookie = first.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_string();
        let tree = plain
            .get(format!("http://127.0.0.1:{port}{inside}"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(tree.status(), 200);
        assert!(tree.text().await.unwrap().contains("Jupyter"));
        // A redirect elsewhere is never followed.
        for evil in ["//evil.example/x", "https://evil.example/", "/%5Cevil"] {
            let r = plain
                .get(format!("{url}&redirect={evil}"))
                .send()
                .await
                .unwrap();
            let to = r
                .headers()
                .get("location")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            assert!(
                to.is_empty() || to.starts_with(&format!("/apps/{id}/jupyter/")),
                "{evil} → {to}: the browser stays inside the app"
            );
        }
        // What the consoles ask at a session's end.
        for (path, code) in [
            (format!("/proxy/{token}/{id}"), 404),
            (format!("/proxy/{token}/{id}/delete"), 200),
        ] {
            let answer: Value = plain
                .get(app.url(&path))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(answer["code"], code, "{path}");
        }
        // Web UI 26 asks which protocol first.
        let (st, v) = rest(
            &app,
            &user,
            reqwest::Method::GET,
            "/scaling-groups/default/wsproxy-version",
            None,
        )
        .await;
        assert_eq!(
            (st, v["wsproxy_version"].clone()),
            (200, json!("v1")),
            "{v}"
        );
        let (st, _) = rest(
            &app,
            &user,
            reqwest::Method::GET,
            "/scaling-groups/nope/wsproxy-version",
            None,
        )
        .await;
        assert_eq!(st, 404);
        destroy(&app, &user, &id).await;
        // Without app_proxy_origins the protocol is off, and says what to set.
        let off = spawn(db).await;
        let resp = plain
            .put(off.url("/conf"))
            .json(&json!({"mode": "DEFAULT", "access_key": "a", "secret_key": "b"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 403);
        assert!(resp.text().await.unwrap().contains("app_proxy_origins"));
    }
);
