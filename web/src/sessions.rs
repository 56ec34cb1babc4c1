//! Sessions: Running / Finished / Others tabs, kept current by the `session_status_changes`
//! subscription; the launch dialog (environment, name, folders, resources, summary); the app
//! launcher (Jupyter, terminal, SSH/SFTP); logs; terminate.
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};

use crate::gql::{self, JsonString};
use bai_types::enums::SessionStatus;

use crate::i18n::{key, t, tr};
use crate::ops;
use crate::summary::{Usage, UsageBars, fetch_usage};
use crate::ui::{Modal, amount, download_text, gib};

const RUNNING: &str = "PENDING,SCHEDULED,PULLING,PREPARING,RUNNING,RESTARTING,TERMINATING";
const FINISHED: &str = "TERMINATED,CANCELLED";
const OTHERS: &str = "ERROR";

#[derive(Clone, Debug, PartialEq)]
struct Row {
    id: String,
    name: String,
    image: String,
    status: String,
    info: String,
    why: String,
    group: String,
    cpu: String,
    mem: String,
    gpu: String,
    started: String,
    /// When it started and ended (none yet: running), RFC 3339, for the elapsed time.
    created_at: String,
    terminated_at: String,
    owner: String,
    project: String,
}

/// One session's live figures, as `sessions_stats` sends them.
type Stats = ops::sessions_stats::SessionsStatsSessionsStats;

fn row(v: ops::session_list::SessionListComputeSessionListItems) -> Row {
    let slots = v.occupying_slots.0;
    let data = v.status_data.map(|d| d.0).unwrap_or_default();
    let why = data["scheduler"]["failed_predicates"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p["msg"].as_str().or(p["name"].as_str()))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default();
    Row {
        id: v.id,
        name: v.name,
        image: v.image,
        status: v.status,
        info: v.status_info.unwrap_or_default(),
        why,
        group: v.scaling_group.unwrap_or_default(),
        cpu: amount(&slots["cpu"])
            .map(|c| tr("{n} core", &[("n", &c.to_string())]))
            .unwrap_or_else(|| "-".into()),
        mem: amount(&slots["mem"]).map(gib).unwrap_or_else(|| "-".into()),
        gpu: amount(&slots["cuda.shares"])
            .or(amount(&slots["cuda.device"]))
            .map(|g| tr("{n} GPU", &[("n", &g.to_string())]))
            .unwrap_or_else(|| "-".into()),
        started: v.created_at.replace('T', " ").chars().take(19).collect(),
        created_at: v.created_at,
        terminated_at: v.terminated_at.unwrap_or_default(),
        owner: v.user_email.unwrap_or_default(),
        project: v.group_name.unwrap_or_default(),
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Dialog {
    None,
    Launch,
    Apps(String, String),
    Logs(String, String),
    Detail(String, String),
    Terminate(String, String),
    Commit(String, String),
}

#[component]
pub fn SessionsPage() -> impl IntoView {
    let online: RwSignal<bool> = use_context().unwrap_or_else(|| RwSignal::new(true));
    let tab = RwSignal::new(RUNNING);
    let rows = RwSignal::new(Vec::<Row>::new());
    let usage = RwSignal::new(Usage::default());
    let opens_launch = window().location().hash().unwrap_or_default() == "#sessions/new";
    let dialog = RwSignal::new(if opens_launch {
        Dialog::Launch
    } else {
        Dialog::None
    });
    let scope: Option<crate::Scope> = use_context();
    // Environments by name ("Python 3.11") for the list, read once.
    let env_names = RwSignal::new(Vec::<EnvImage>::new());
    spawn_local(async move {
        if let Ok(d) = gql::run::<ops::ImageNames>(ops::image_names::Variables).await {
            env_names.set(env_images(d.images.into_iter().map(|i| EnvImage {
                reference: i.name,
                environment: i.environment,
                version: i.version,
                registry: i.registry,
            })));
        }
    });
    let env_label = move |reference: &str| {
        env_names.with(|list| {
            list.iter()
                .find(|i| i.reference == reference)
                .map(EnvImage::label)
                .unwrap_or_else(|| {
                    reference
                        .rsplit('/')
                        .next()
                        .unwrap_or(reference)
                        .to_string()
                })
        })
    };
    // The list follows the tab and the project (Leptos' resource: only the answer to the latest
    // request is shown, however the answers arrive).
    let list = LocalResource::new(move || {
        let vars = ops::session_list::Variables {
            status: Some(tab.get().to_string()),
            group_id: scope.and_then(|s| s.group_id.get()),
        };
        if let Some(s) = scope {
            s.scaling_group.track();
        }
        gql::run::<ops::SessionList>(vars)
    });
    Effect::new(move |_| {
        if let Some(Ok(d)) = list.get() {
            rows.set(d.compute_session_list.items.into_iter().map(row).collect());
        }
    });
    let load_usage = move || {
        spawn_local(async move {
            if let Ok(u) = fetch_usage(scope).await {
                usage.set(u);
            }
        })
    };
    let refresh = move || {
        list.refetch();
        load_usage();
    };
    Effect::new(move |_| {
        tab.track();
        if let Some(s) = scope {
            s.group_id.track();
            s.scaling_group.track();
        }
        load_usage();
    });
    // Every status change of the caller's sessions refreshes the list: no reload needed.
    gql::subscribe::<ops::SessionStatusChanges>(
        ops::session_status_changes::Variables,
        online,
        move |_| refresh(),
        refresh,
    );
    // The usage column: one subscription for the running rows on screen, made again when
    // they change.
    let stats = RwSignal::new(HashMap::<String, Stats>::new());
    let running_ids = Memo::new(move |_| {
        rows.with(|rs| {
            rs.iter()
                .filter(|r| r.status == "RUNNING")
                .map(|r| r.id.clone())
                .take(100)
                .collect::<Vec<_>>()
        })
    });
    Effect::new(move |_| {
        let ids = running_ids.get();
        if !ids.is_empty() {
            watch_stats(ids, online, stats);
        }
    });

    let tab_button = move |label: &'static str, value: &'static str, id: &'static str| {
        view! {
            <button class="tab" id=id class:active=move || tab.get() == value on:click=move |_| tab.set(value)>{t(label)}</button>
        }
    };
    view! {
        <div class="page-head">
            <h1>{t("Sessions")}</h1>
            <button class="primary-inline" id="start-session" on:click=move |_| dialog.set(Dialog::Launch)>{t("+ START")}</button>
        </div>
        <div class="card wide"><UsageBars usage=usage /></div>
        <div class="tabs">
            {tab_button(key("Running"), RUNNING, "tab-running")}
            {tab_button(key("Finished"), FINISHED, "tab-finished")}
            {tab_button(key("Others"), OTHERS, "tab-others")}
        </div>
        {crate::ui::answer_state(list)}
        <div class="card wide table-wrap">
            <table class="list" id="session-table">
                <thead><tr>
                    <th>{t("Session")}</th><th>{t("Status")}</th><th>{t("Control")}</th><th>{t("Configuration")}</th><th>{t("Usage")}</th>
                    <th>{t("Started")}</th>
                </tr></thead>
                <tbody>
                    <For each=move || rows.get() key=|r| (r.id.clone(), r.status.clone(), r.why.clone()) children=move |r: Row| {
                        let (id, name) = (r.id.clone(), r.name.clone());
                        let status = SessionStatus::parse(&r.status);
                        let running = status == Some(SessionStatus::Running);
                        // Its controls show until it is over or ending.
                        let live = status.is_none_or(|s| s.is_live() && s != SessionStatus::Terminating);
                        let (id1, n1, id2, n2, id3, n3, id4) = (id.clone(), name.clone(), id.clone(), name.clone(), id.clone(), name.clone(), id.clone());
                        let (id5, n5) = (id.clone(), name.clone());
                        view! {
                            <tr class="session-row" data-name=r.name.clone() data-status=r.status.clone()>
                                <td><button class="link strong session-open" data-action="detail" aria-label=tr("Details of {name}", &[("name", &r.name)])
                                    on:click={let (i, n) = (id.clone(), name.clone()); move |_| dialog.set(Dialog::Detail(i.clone(), n.clone()))}>{r.name.clone()}</button><div class="muted small env-name" title=r.image.clone()>{let i = r.image.clone(); move || env_label(&i)}</div><div class="muted small owner">{r.owner.clone()}{(!r.project.is_empty()).then(|| format!(" · {}", r.project))}</div></td>
                                <td>
                                    <span class=format!("status status-{}", r.status.to_lowercase())>{r.status.clone()}</span>
                                    <div class="muted small">{r.info.clone()}</div>
                                    <Show when={let w = r.why.clone(); move || !w.is_empty()}>
                                        <div class="why small" title=t("Why pending")>{r.why.clone()}</div>
                                    </Show>
                                </td>
                                <td class="controls">
                                    <Show when=move || running>
                                        <button class="icon" title=t("Apps") aria-label=t("Apps") data-action="apps" on:click={let (i, n) = (id1.clone(), n1.clone()); move |_| dialog.set(Dialog::Apps(i.clone(), n.clone()))}>"▦"</button>
                                        <a class="icon" title=t("Terminal") aria-label=t("Terminal") data-action="terminal" target="_blank" href=format!("#terminal/{id4}")>">_"</a>
                                        <button class="icon" title=t("Convert to image") aria-label=t("Convert to image") data-action="commit" on:click={let (i, n) = (id5.clone(), n5.clone()); move |_| dialog.set(Dialog::Commit(i.clone(), n.clone()))}>"▣"</button>
                                    </Show>
                                    <button class="icon" title=t("Logs") aria-label=t("Logs") data-action="logs" on:click={let (i, n) = (id2.clone(), n2.clone()); move |_| dialog.set(Dialog::Logs(i.clone(), n.clone()))}>"☰"</button>
                                    <Show when=move || live>
                                        <button class="icon danger" title=t("Terminate") aria-label=t("Terminate") data-action="terminate" on:click={let (i, n) = (id3.clone(), n3.clone()); move |_| dialog.set(Dialog::Terminate(i.clone(), n.clone()))}>"✕"</button>
                                    </Show>
                                </td>
                                <td class="small config"><span class="sgroup" title=t("Resource group")>{r.group.clone()} <sup>"SG"</sup></span>
                                    <div>{r.cpu.clone()} " · " {r.mem.clone()} " · " {r.gpu.clone()}</div></td>
                                <td class="small">{if running { let id = r.id.clone(); view! { <LiveUsage stats=Signal::derive(move || stats.with(|m| m.get(&id).cloned())) /> }.into_any() } else { "-".into_any() }}</td>
                                <td class="small"><span class="started">{r.started.clone()}</span>
                                    <div class="muted elapsed" title=t("Elapsed")><Elapsed start=r.created_at.clone() end=r.terminated_at.clone() /></div></td>
                            </tr>
                        }
                    } />
                </tbody>
            </table>
            <Show when=move || rows.get().is_empty()>
                <p class="muted empty">{t("No sessions here.")}</p>
            </Show>
        </div>
        {move || match dialog.get() {
            Dialog::None => ().into_any(),
            Dialog::Launch => view! { <LaunchDialog usage=usage on_close=move || dialog.set(Dialog::None)
                on_launched=move |id: String, name: String, interactive: bool| {
                    tab.set(RUNNING);
                    refresh();
                    // A batch job has no apps to open: it runs its command and ends.
                    dialog.set(if interactive { Dialog::Apps(id, name) } else { Dialog::None });
                } /> }.into_any(),
            Dialog::Apps(id, name) => view! { <AppsDialog id=id name=name on_close=move || dialog.set(Dialog::None) /> }.into_any(),
            Dialog::Logs(id, name) => view! { <LogsDialog id=id name=name on_close=move || dialog.set(Dialog::None) /> }.into_any(),
            Dialog::Detail(id, name) => view! { <DetailDialog id=id name=name env_label=env_label on_close=move || dialog.set(Dialog::None) /> }.into_any(),
            Dialog::Terminate(id, name) => view! { <TerminateDialog id=id name=name on_close=move || { dialog.set(Dialog::None); refresh(); } /> }.into_any(),
            Dialog::Commit(id, name) => view! { <CommitDialog id=id name=name on_close=move || dialog.set(Dialog::None) /> }.into_any(),
        }}
    }
}

/// Session names: 4–64 letters, digits, `-`, `_`, `.`, starting and ending with a letter or
/// digit (the server's rule).
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    let n = name.chars().count();
    if !(4..=64).contains(&n) {
        return Some(t("Use 4 to 64 characters."));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Some(t("Only letters, digits, '-', '_' and '.'; no spaces."));
    }
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge(name.chars().next()) || !edge(name.chars().last()) {
        return Some(t("Start and end with a letter or digit."));
    }
    None
}

#[derive(Clone, Debug, PartialEq)]
struct Folder {
    name: String,
    automount: bool,
    permission: String,
}

/// An installed image as the launcher shows it: its environment's name and its version
/// (named by the server from the image's labels), the registry as a detail.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvImage {
    pub reference: String,
    pub environment: String,
    pub version: String,
    pub registry: String,
}

impl EnvImage {
    /// "Python 3.11".
    pub fn label(&self) -> String {
        format!("{} {}", self.environment, self.version)
    }
}

/// Images sorted by environment, newest version first (versions compare number by number:
/// 3.11 above 3.9).
fn env_images(images: impl IntoIterator<Item = EnvImage>) -> Vec<EnvImage> {
    let mut list: Vec<EnvImage> = images.into_iter().collect();
    let key = |v: &str| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    list.sort_by(|a, b| {
        a.environment
            .cmp(&b.environment)
            .then_with(|| key(&b.version).cmp(&key(&a.version)))
            .then_with(|| b.version.cmp(&a.version))
    });
    list
}

/// A saved session template offered by the launcher.
#[derive(Clone, Debug, PartialEq)]
struct Template {
    id: String,
    name: String,
    scope: String,
    is_owner: bool,
    template: Value,
}

/// `1g`, `512m`, `1.5g` or bytes, in GiB.
fn size_gib(s: &str) -> Option<f64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len()));
    let n: f64 = num.trim().parse().ok()?;
    let factor = match unit.trim_end_matches(['b', 'i']) {
        "" => 1.0 / 1024f64.powi(3),
        "k" => 1.0 / 1024f64.powi(2),
        "m" => 1.0 / 1024.0,
        "g" => 1.0,
        "t" => 1024.0,
        _ => return None,
    };
    Some(n * factor)
}

#[component]
fn LaunchDialog(
    usage: RwSignal<Usage>,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
    on_launched: impl Fn(String, String, bool) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let scope: Option<crate::Scope> = use_context();
    let step = RwSignal::new(1u8);
    let images = RwSignal::new(Vec::<EnvImage>::new());
    let image = RwSignal::new(String::new());
    let environment = RwSignal::new(String::new());
    let name = RwSignal::new(String::new());
    let folders = RwSignal::new(Vec::<Folder>::new());
    let chosen = RwSignal::new(Vec::<String>::new());
    let preset = RwSignal::new(String::from("custom"));
    let cpu = RwSignal::new(1.0f64);
    let mem_gib = RwSignal::new(1.0f64);
    let shmem_gib = RwSignal::new(0.0625f64);
    let gpu = RwSignal::new(0.0f64);
    let count = RwSignal::new(1u32);
    let envs = RwSignal::new(Vec::<(String, String)>::new());
    let env_open = RwSignal::new(false);
    let warn_no_folder = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let batch = RwSignal::new(false);
    let cluster_size = RwSignal::new(1u32);
    let multi_node = RwSignal::new(false);
    let startup = RwSignal::new(String::new());
    let templates = RwSignal::new(Vec::<Template>::new());
    // The template the dialog was filled from (launched from it, its settings overridden by
    // the dialog's).
    let template = RwSignal::new(None::<Template>);
    let template_name = RwSignal::new(String::new());
    let saved = RwSignal::new(None::<String>);
    let load_templates = move |d: &ops::launch_options::ResponseData| {
        templates.set(
            d.session_templates
                .iter()
                .map(|t| Template {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    scope: t.scope.clone(),
                    is_owner: t.is_owner,
                    template: t.template.0.clone(),
                })
                .collect(),
        );
    };
    spawn_local(async move {
        if let Ok(d) = gql::run::<ops::LaunchOptions>(ops::launch_options::Variables).await {
            load_templates(&d);
            let list = env_images(d.images.into_iter().map(|i| EnvImage {
                reference: i.name,
                environment: i.environment,
                version: i.version,
                registry: i.registry,
            }));
            if let Some(first) = list
                .iter()
                .find(|i| i.environment == "Python")
                .or(list.first())
            {
                environment.set(first.environment.clone());
                image.set(first.reference.clone());
            }
            images.set(list);
            folders.set(
                d.vfolder_list
                    .items
                    .into_iter()
                    .map(|f| Folder {
                        name: f.name,
                        automount: f.is_automount,
                        permission: f.my_permission,
                    })
                    .collect(),
            );
        }
    });
    // Fills the dialog from a template: what it holds replaces the dialog's choices.
    let apply_template = move |id: String| {
        let chosen_t = templates.get_untracked().into_iter().find(|t| t.id == id);
        if let Some(tp) = &chosen_t {
            let t = &tp.template;
            if let Some(img) = t.pointer("/spec/kernel/image").and_then(Value::as_str) {
                match images
                    .get_untracked()
                    .into_iter()
                    .find(|i| i.reference == img)
                {
                    Some(i) => {
                        environment.set(i.environment);
                        image.set(i.reference);
                    }
                    None => image.set(img.to_string()),
                }
            }
            batch.set(t.pointer("/spec/session_type").and_then(Value::as_str) == Some("batch"));
            startup.set(
                t.pointer("/spec/kernel/run/startup_command")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            );
            envs.set(
                t.pointer("/spec/kernel/environ")
                    .and_then(Value::as_object)
                    .map(|o| {
                        o.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                            .collect()
                    })
                    .unwrap_or_default(),
            );
            let res = |k: &str| {
                t.pointer(&format!("/spec/resources/{k}"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            if let Some(c) = res("cpu").and_then(|c| c.parse::<f64>().ok()) {
                preset.set("custom".into());
                cpu.set(c);
            }
            if let Some(m) = res("mem").and_then(|m| size_gib(&m)) {
                preset.set("custom".into());
                mem_gib.set(m);
            }
        }
        template.set(chosen_t);
    };
    let save_template = move || {
        let name = template_name.get_untracked().trim().to_string();
        if name.is_empty() {
            error.set(Some(t("Name the template first.")));
            return;
        }
        let mounts: serde_json::Map<String, Value> = chosen
            .get_untracked()
            .into_iter()
            .map(|f| (f, Value::Null))
            .collect();
        let environ: serde_json::Map<String, Value> = envs
            .get_untracked()
            .into_iter()
            .map(|(k, v)| (k, json!(v)))
            .collect();
        let mut spec = json!({
            "session_type": if batch.get_untracked() { "batch" } else { "interactive" },
            "kernel": {
                "image": image.get_untracked(),
                "environ": environ,
                "run": {"startup_command": Some(startup.get_untracked()).filter(|s| !s.trim().is_empty())},
            },
            "mounts": mounts,
        });
        if preset.get_untracked() == "custom" {
            spec["resources"] = json!({
                "cpu": cpu.get_untracked().to_string(),
                "mem": format!("{}m", (mem_gib.get_untracked() * 1024.0).round()),
            });
        }
        let payload = json!({"api_version": "v1", "kind": "taskTemplate", "metadata": {"name": name}, "spec": spec}).to_string();
        let props = ops::create_session_template::CreateSessionTemplateInput {
            payload,
            group: scope.map(|s| s.group_name.get_untracked()),
            ..Default::default()
        };
        spawn_local(async move {
            match gql::run::<ops::CreateSessionTemplate>(ops::create_session_template::Variables {
                props,
            })
            .await
            {
                Ok(_) => {
                    saved.set(Some(tr("Saved as template '{name}'.", &[("name", &name)])));
                    if let Ok(d) =
                        gql::run::<ops::LaunchOptions>(ops::launch_options::Variables).await
                    {
                        load_templates(&d);
                    }
                }
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    let delete_template = move |id: String| {
        spawn_local(async move {
            match gql::run::<ops::DeleteSessionTemplate>(ops::delete_session_template::Variables {
                id: id.clone(),
            })
            .await
            {
                Ok(_) => {
                    templates.update(|l| l.retain(|t| t.id != id));
                    template.set(None);
                }
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    let presets = move || usage.get().raw.presets;
    let remaining = move |slot: &str| usage.get().remaining(slot);
    // Custom amounts are bounded by what is left (keypair limits and the resource group).
    let max_cpu = move || remaining("cpu").unwrap_or(64.0).max(1.0);
    let max_mem = move || {
        remaining("mem")
            .map(|b| b / 1024f64.powi(3))
            .unwrap_or(256.0)
            .max(0.25)
    };
    let max_gpu = move || remaining("cuda.shares").unwrap_or(0.0);
    let problems = move || {
        let mut p = Vec::new();
        if image.get().is_empty() {
            p.push(t("Choose an environment."));
        }
        if let Some(e) = name_problem(&name.get()) {
            p.push(tr("Session name: {problem}", &[("problem", &e)]));
        }
        if batch.get() && startup.get().trim().is_empty() {
            p.push(t("A batch session needs a startup command."));
        }
        if preset.get() == "custom" {
            if cpu.get() < 1.0 || cpu.get() > max_cpu() {
                p.push(tr(
                    "CPU must be between 1 and {max}.",
                    &[("max", &max_cpu().to_string())],
                ));
            }
            if mem_gib.get() <= 0.0 || mem_gib.get() > max_mem() {
                p.push(tr(
                    "Memory must be above 0 and at most {max} GiB.",
                    &[("max", &format!("{:.2}", max_mem()))],
                ));
            }
            if shmem_gib.get() <= 0.0 || shmem_gib.get() >= mem_gib.get() {
                p.push(t("Shared memory must be above 0 and below the memory."));
            }
            if gpu.get() > max_gpu() {
                p.push(tr(
                    "GPU must be at most {max}.",
                    &[("max", &max_gpu().to_string())],
                ));
            }
        }
        p
    };
    let launch = move |force: bool| {
        if !problems().is_empty() {
            error.set(Some(problems().join(" ")));
            return;
        }
        if chosen.get_untracked().is_empty() && !force {
            warn_no_folder.set(true);
            return;
        }
        busy.set(true);
        error.set(None);
        let mut props = ops::create_session::CreateSessionInput {
            image: image.get_untracked(),
            mounts: Some(chosen.get_untracked()),
            count: Some(count.get_untracked().into()),
            scaling_group: Some(usage.get_untracked().scaling_group()),
            group: scope.map(|s| s.group_name.get_untracked()),
            name: Some(name.get_untracked()).filter(|n| !n.is_empty()),
            ..Default::default()
        };
        if preset.get_untracked() == "custom" {
            let mut res = json!({"cpu": cpu.get_untracked().to_string(), "mem": format!("{}m", (mem_gib.get_untracked() * 1024.0).round())});
            if gpu.get_untracked() > 0.0 {
                res["cuda.shares"] = json!(gpu.get_untracked().to_string());
            }
            props.resources = Some(JsonString(res));
            props.shmem = Some(format!("{}m", (shmem_gib.get_untracked() * 1024.0).round()));
        } else {
            props.preset = Some(preset.get_untracked());
        }
        let env: serde_json::Map<String, Value> = envs
            .get_untracked()
            .into_iter()
            .map(|(k, v)| (k, json!(v)))
            .collect();
        props.environ = Some(JsonString(Value::Object(env)));
        if cluster_size.get_untracked() > 1 {
            props.cluster_size = Some(cluster_size.get_untracked().into());
            if multi_node.get_untracked() {
                props.cluster_mode = Some("multi-node".into());
            }
        }
        if batch.get_untracked() {
            props.type_ = Some("batch".into());
            props.startup_command = Some(startup.get_untracked());
        }
        // From a template: the dialog's choices over the template's settings.
        let from_template = template.get_untracked().map(|tp| {
            let mut config = json!({
                "mounts": props.mounts.clone().unwrap_or_default(),
                "environ": props.environ.as_ref().map(|e| e.0.clone()),
                "scalingGroup": props.scaling_group.clone(),
            });
            if let Some(r) = &props.resources {
                config["resources"] = r.0.clone();
            }
            if let Some(s) = &props.shmem {
                config["resource_opts"] = json!({"shmem": s});
            }
            let overrides = json!({
                "name": props.name.clone(),
                "image": props.image.clone(),
                "group": props.group.clone(),
                "type": if batch.get_untracked() { "batch" } else { "interactive" },
                "startupCommand": props.startup_command.clone(),
                "clusterSize": props.cluster_size,
                "clusterMode": props.cluster_mode.clone(),
                "config": config,
            });
            ops::create_session_from_template::Variables {
                id: tp.id,
                overrides: Some(JsonString(overrides)),
                count: props.count,
            }
        });
        spawn_local(async move {
            let first =
                |sessions: Vec<(String, String)>| sessions.into_iter().next().unwrap_or_default();
            let created = match from_template {
                Some(vars) => gql::run::<ops::CreateSessionFromTemplate>(vars)
                    .await
                    .map(|d| {
                        first(
                            d.create_session_from_template
                                .sessions
                                .into_iter()
                                .map(|s| (s.id, s.name))
                                .collect(),
                        )
                    }),
                None => gql::run::<ops::CreateSession>(ops::create_session::Variables { props })
                    .await
                    .map(|d| {
                        first(
                            d.create_session
                                .sessions
                                .into_iter()
                                .map(|s| (s.id, s.name))
                                .collect(),
                        )
                    }),
            };
            match created {
                Ok((id, name)) => on_launched(id, name, !batch.get_untracked()),
                Err(e) => error.set(Some(e.message)),
            }
            busy.set(false);
        });
    };
    let num_input = move |id: &'static str,
                          sig: RwSignal<f64>,
                          step_by: &'static str,
                          max: Signal<f64>| {
        view! {
            <div class="slider">
                <input type="range" min="0" step=step_by prop:max=move || max.get() prop:value=move || sig.get()
                    on:input=move |ev| sig.set(event_target_value(&ev).parse().unwrap_or(0.0)) />
                <input type="number" id=id min="0" step=step_by prop:value=move || sig.get()
                    on:input=move |ev| sig.set(event_target_value(&ev).parse().unwrap_or(0.0)) />
            </div>
        }
    };
    view! {
        <Modal title=t("Start a new session") id="launch-dialog" on_close=on_close>
            <div class="steps">
                <span class:active=move || step.get() == 1>{t("1 Environment")}</span>
                <span class:active=move || step.get() == 2>{t("2 Folders")}</span>
                <span class:active=move || step.get() == 3>{t("3 Resources")}</span>
                <span class:active=move || step.get() == 4>{t("4 Confirm")}</span>
            </div>
            <Show when=move || step.get() == 1>
                <div class="row" id="launch-templates">
                    <label for="launch-template">{t("Template")}</label>
                    <select id="launch-template" on:change=move |ev| apply_template(event_target_value(&ev))>
                        <option value="" selected=move || template.get().is_none()>{t("none")}</option>
                        {move || templates.get().into_iter().map(|tp| {
                            let sel = tp.id.clone();
                            let label = format!("{} ({})", tp.name, tp.scope);
                            view! { <option value=tp.id.clone() selected=move || template.get().is_some_and(|c| c.id == sel)>{label}</option> }
                        }).collect_view()}
                    </select>
                    {move || template.get().filter(|tp| tp.is_owner).map(|tp| {
                        let id = tp.id.clone();
                        view! { <button class="secondary" id="template-delete" on:click=move |_| delete_template(id.clone())>{t("DELETE TEMPLATE")}</button> }
                    })}
                </div>
                <div class="env-pick">
                    <div>
                        <label for="launch-env">{t("Environment")}</label>
                        <select id="launch-env" on:change=move |ev| {
                            let env = event_target_value(&ev);
                            // The newest version of the environment chosen.
                            if let Some(first) = images.get_untracked().into_iter().find(|i| i.environment == env) {
                                image.set(first.reference);
                            }
                            environment.set(env);
                        }>
                            {move || {
                                let mut names: Vec<String> = images.get().into_iter().map(|i| i.environment).collect();
                                names.dedup();
                                names.into_iter().map(|n| {
                                    let sel = n.clone();
                                    view! { <option value=n.clone() selected=move || environment.get() == sel>{n.clone()}</option> }
                                }).collect_view()
                            }}
                        </select>
                    </div>
                    <div>
                        <label for="launch-image">{t("Version")}</label>
                        <select id="launch-image" on:change=move |ev| image.set(event_target_value(&ev))>
                            {move || images.get().into_iter().filter(|i| i.environment == environment.get()).map(|i| {
                                let sel = i.reference.clone();
                                view! { <option value=i.reference.clone() selected=move || image.get() == sel>{i.version.clone()}</option> }
                            }).collect_view()}
                        </select>
                    </div>
                </div>
                <div class="muted small" id="launch-registry">{move || {
                    images.get().into_iter().find(|i| i.reference == image.get()).map(|i| format!("{} · {}", i.registry, i.reference)).unwrap_or_default()
                }}</div>
                <label for="launch-name">{t("Session name (optional)")}</label>
                <input id="launch-name" placeholder=t("random when empty") prop:value=move || name.get()
                    on:input=move |ev| name.set(event_target_value(&ev)) />
                {move || name_problem(&name.get()).map(|e| view! { <div class="error" id="name-error">{e}</div> })}
                <label for="launch-type">{t("Session type")}</label>
                <select id="launch-type" on:change=move |ev| batch.set(event_target_value(&ev) == "batch")>
                    <option value="interactive" selected=move || !batch.get()>{t("Interactive")}</option>
                    <option value="batch" selected=move || batch.get()>{t("Batch (runs a command, then ends)")}</option>
                </select>
                <Show when=move || batch.get()>
                    <label for="launch-startup">{t("Startup command")}</label>
                    <textarea id="launch-startup" rows="3" style="width: 100%" placeholder="python train.py" prop:value=move || startup.get()
                        on:input=move |ev| startup.set(event_target_value(&ev))></textarea>
                </Show>
                <div class="row">
                    <span>{move || {
                        let list = envs.get();
                        let names = if list.is_empty() { t("none") } else { list.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>().join(", ") };
                        tr("Environment variables: {names}", &[("names", &names)])
                    }}</span>
                    <button class="secondary" id="env-open" on:click=move |_| env_open.set(true)>{t("CONFIG")}</button>
                </div>
                <Show when=move || env_open.get()>
                    <EnvDialog envs=envs on_close=move || env_open.set(false) />
                </Show>
            </Show>
            <Show when=move || step.get() == 2>
                <p class="muted">{t("Folders to mount (at /home/work/<name>).")}</p>
                <For each=move || folders.get() key=|f| f.name.clone() children=move |f: Folder| {
                    let n = f.name.clone();
                    let n2 = f.name.clone();
                    view! {
                        <label class="check">
                            <input type="checkbox" class="folder-choice" data-name=f.name.clone() disabled=f.automount
                                prop:checked=move || f.automount || chosen.get().contains(&n)
                                on:change=move |ev| {
                                    let on = event_target_checked(&ev);
                                    chosen.update(|c| { c.retain(|x| *x != n2); if on { c.push(n2.clone()); } });
                                } />
                            {f.name.clone()} " " <span class="muted small">{if f.automount { t("(automount: always mounted)") } else { format!("({})", f.permission) }}</span>
                        </label>
                    }
                } />
                <Show when=move || folders.get().is_empty()>
                    <p class="muted">{t("No folders yet (Data & Storage → NEW FOLDER).")}</p>
                </Show>
            </Show>
            <Show when=move || step.get() == 3>
                <label>{t("Resource group")}</label>
                <div class="strong">{move || usage.get().scaling_group()}</div>
                <label for="launch-preset">{t("Resource preset")}</label>
                <select id="launch-preset" on:change=move |ev| preset.set(event_target_value(&ev))>
                    <option value="custom" selected=move || preset.get() == "custom">{t("Custom allocation")}</option>
                    {move || presets().into_iter().filter(|p| p.allocatable).map(|p| {
                        let n = p.name;
                        let slots = p.resource_slots.0;
                        let label = tr("{name} (CPU {cpu}, RAM {ram})", &[("name", &n), ("cpu", &amount(&slots["cpu"]).unwrap_or(0.0).to_string()), ("ram", &amount(&slots["mem"]).map(gib).unwrap_or_default())]);
                        let sel = n.clone();
                        view! { <option value=n.clone() selected=move || preset.get() == sel>{label}</option> }
                    }).collect_view()}
                </select>
                <Show when=move || preset.get() == "custom">
                    <label>{t("CPU (cores)")}</label>
                    {num_input("launch-cpu", cpu, "1", Signal::derive(max_cpu))}
                    <label>{t("Memory (GiB)")}</label>
                    {num_input("launch-mem", mem_gib, "0.25", Signal::derive(max_mem))}
                    <label>{t("Shared memory (GiB, below the memory)")}</label>
                    {num_input("launch-shmem", shmem_gib, "0.0625", Signal::derive(move || mem_gib.get()))}
                    <Show when=move || { max_gpu() > 0.0 }>
                        <label>"GPU / fGPU"</label>
                        {num_input("launch-gpu", gpu, "0.1", Signal::derive(max_gpu))}
                    </Show>
                </Show>
                <label for="launch-cluster-size">{t("Containers per session (cluster: main1, sub1, …)")}</label>
                <input id="launch-cluster-size" type="number" min="1" max="16" prop:value=move || cluster_size.get()
                    on:input=move |ev| cluster_size.set(event_target_value(&ev).parse().unwrap_or(1).max(1)) />
                <Show when=move || { cluster_size.get() > 1 }>
                    <label for="launch-cluster-mode">{t("Cluster mode")}</label>
                    <select id="launch-cluster-mode"
                        on:change=move |ev| multi_node.set(event_target_value(&ev) == "multi-node")>
                        <option value="single-node" selected=move || !multi_node.get()>{t("Single node (every container on one agent)")}</option>
                        <option value="multi-node" selected=move || multi_node.get()>{t("Multi node (containers spread over other hosts)")}</option>
                    </select>
                </Show>
                <label for="launch-count">{t("Sessions")}</label>
                <input id="launch-count" type="number" min="1" max="10" prop:value=move || count.get()
                    on:input=move |ev| count.set(event_target_value(&ev).parse().unwrap_or(1)) />
            </Show>
            <Show when=move || step.get() == 4>
                <table class="summary" id="launch-summary">
                    <tr><th>{t("Environment")}</th><td>{move || {
                        let r = image.get();
                        images.get().into_iter().find(|i| i.reference == r).map(|i| i.label()).unwrap_or(r)
                    }}</td></tr>
                    <tr><th>{t("Name")}</th><td>{move || { let n = name.get(); if n.is_empty() { t("(random)") } else { n } }}</td></tr>
                    <tr><th>{t("Folders")}</th><td>{move || { let c = chosen.get(); if c.is_empty() { t("none") } else { c.join(", ") } }}</td></tr>
                    <tr><th>{t("Resources")}</th><td>{move || if preset.get() == "custom" {
                        tr("{cpu} core, {mem} GiB RAM, {shm} GiB shm, {gpu} GPU", &[
                            ("cpu", &cpu.get().to_string()),
                            ("mem", &format!("{:.2}", mem_gib.get())),
                            ("shm", &format!("{:.2}", shmem_gib.get())),
                            ("gpu", &gpu.get().to_string()),
                        ])
                    } else { tr("preset {name}", &[("name", &preset.get())]) }}</td></tr>
                    <tr><th>{t("Environment variables")}</th><td>{move || envs.get().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")}</td></tr>
                    <tr><th>{t("Sessions")}</th><td>{move || count.get()}</td></tr>
                    <tr><th>{t("Containers")}</th><td id="launch-summary-containers">{move || cluster_size.get()}</td></tr>
                    <Show when=move || { cluster_size.get() > 1 }>
                        <tr><th>{t("Cluster mode")}</th><td id="launch-summary-cluster-mode">{move || if multi_node.get() {
                            t("Multi node (containers spread over other hosts)")
                        } else {
                            t("Single node (every container on one agent)")
                        }}</td></tr>
                    </Show>
                    <tr><th>{t("Session type")}</th><td id="launch-summary-type">{move || if batch.get() { format!("{}: {}", t("Batch"), startup.get()) } else { t("Interactive") }}</td></tr>
                    <tr><th>{t("Template")}</th><td>{move || template.get().map(|tp| tp.name).unwrap_or_else(|| t("none"))}</td></tr>
                </table>
                <div class="row" id="template-save">
                    <input id="template-name" placeholder=t("template name") prop:value=move || template_name.get()
                        on:input=move |ev| template_name.set(event_target_value(&ev)) />
                    <button class="secondary" id="template-save-button" on:click=move |_| save_template()>{t("SAVE AS TEMPLATE")}</button>
                </div>
                {move || saved.get().map(|m| view! { <div class="muted" id="template-saved">{m}</div> })}
            </Show>
            {move || { let p = problems(); (!p.is_empty() && step.get() == 4).then(|| view! { <div class="error">{p.join(" ")}</div> }) }}
            {move || error.get().map(|e| view! { <div class="error" id="launch-error">{e}</div> })}
            <Show when=move || warn_no_folder.get()>
                <div class="warn" id="no-folder-warning">
                    {t("No storage folder is mounted: files in /home/work disappear with the session.")}
                    <button class="danger-inline" id="launch-anyway" on:click=move |_| { warn_no_folder.set(false); launch(true) }>{t("LAUNCH WITHOUT STORAGE FOLDER")}</button>
                </div>
            </Show>
            <div class="dialog-actions">
                <button class="secondary" disabled=move || step.get() == 1 on:click=move |_| step.update(|s| *s = s.saturating_sub(1).max(1))>{t("Back")}</button>
                <Show when=move || step.get() < 4>
                    <button class="secondary" id="launch-next" on:click=move |_| step.update(|s| *s += 1)>{t("Next")}</button>
                </Show>
                <button class="primary-inline" id="launch-confirm" disabled=move || busy.get() on:click=move |_| launch(false)>{t("CONFIRM AND LAUNCH")}</button>
            </div>
        </Modal>
    }
}

#[derive(Clone, Debug, PartialEq)]
struct App {
    name: String,
    protocol: String,
}

#[component]
fn AppsDialog(
    id: String,
    name: String,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let apps = RwSignal::new(Vec::<App>::new());
    let public = RwSignal::new(false);
    let preferred = RwSignal::new(false);
    let port = RwSignal::new(String::from("30000"));
    let message = RwSignal::new(None::<String>);
    let ssh = RwSignal::new(None::<u16>);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let sid = id.clone();
    spawn_local(async move {
        match gql::run::<ops::SessionApps>(ops::session_apps::Variables { id: sid }).await {
            Ok(d) => apps.set(
                d.compute_session
                    .apps
                    .into_iter()
                    .map(|x| App {
                        name: x.name,
                        protocol: x.protocol,
                    })
                    .collect(),
            ),
            Err(e) => error.set(Some(e.message)),
        }
    });
    let open = {
        let id = id.clone();
        move |app: App| {
            let id = id.clone();
            if app.name == "terminal" {
                let _ = window().open_with_url_and_target(&format!("#terminal/{id}"), "_blank");
                return;
            }
            busy.set(true);
            error.set(None);
            let pref: Option<u16> = preferred
                .get_untracked()
                .then(|| port.get_untracked().parse().ok())
                .flatten();
            spawn_local(async move {
                let vars = ops::start_service::Variables {
                    id,
                    app: app.name.clone(),
                    public: Some(public.get_untracked()),
                    port: pref.map(i64::from),
                };
                match gql::run::<ops::StartService>(vars).await {
                    Ok(d) => {
                        let s = d.start_service;
                        let p = s.port.and_then(|p| u16::try_from(p).ok());
                        if app.protocol == "tcp" {
                            ssh.set(p);
                        } else {
                            let url = s.url;
                            let full = match p {
                                Some(p) => {
                                    let loc = window().location();
                                    format!(
                                        "{}//{}:{p}{url}",
                                        loc.protocol().unwrap_or_default(),
                                        loc.hostname().unwrap_or_default()
                                    )
                                }
                                None => url,
                            };
                            message.set(Some(tr(
                                "{app} is running: {url}",
                                &[("app", &app.name), ("url", &full)],
                            )));
                            let _ = window().open_with_url_and_target(&full, "_blank");
                        }
                    }
                    Err(e) => error.set(Some(e.message)),
                }
                busy.set(false);
            });
        }
    };
    let key_id = id.clone();
    let download_key = move |_| {
        let id = key_id.clone();
        spawn_local(async move {
            match gql::run::<ops::SessionSshPrivateKey>(ops::session_ssh_private_key::Variables {
                id,
            })
            .await
            {
                Ok(d) => download_text("id_container", &d.session_ssh_private_key),
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    let host = window().location().hostname().unwrap_or_default();
    view! {
        <Modal title=tr("Apps — {name}", &[("name", &name)]) id="apps-dialog" on_close=on_close>
            <div class="app-grid">
                <For each=move || apps.get() key=|a| a.name.clone() children=move |a: App| {
                    let label = match a.name.as_str() {
                        "jupyter" => "Jupyter Notebook".to_string(),
                        "jupyterlab" => "JupyterLab".to_string(),
                        "tensorboard" => "TensorBoard".to_string(),
                        "sshd" => "SSH / SFTP".to_string(),
                        "ttyd" => t("Console (web terminal app)"),
                        "terminal" => t("Console (terminal)"),
                        other => other.to_string(),
                    };
                    let open = open.clone();
                    let app = a.clone();
                    view! {
                        <button class="app-tile" data-app=a.name.clone() disabled=move || busy.get() on:click=move |_| open(app.clone())>
                            <span class="app-icon">{a.name.chars().next().unwrap_or('?').to_ascii_uppercase().to_string()}</span>
                            <span>{label}</span>
                        </button>
                    }
                } />
            </div>
            <label class="check"><input type="checkbox" id="open-public" prop:checked=move || public.get()
                on:change=move |ev| public.set(event_target_checked(&ev)) />{t("Open app to public")}</label>
            <label class="check"><input type="checkbox" id="try-preferred" prop:checked=move || preferred.get()
                on:change=move |ev| preferred.set(event_target_checked(&ev)) />{t("Try preferred port")}
                <input class="port" type="number" prop:value=move || port.get() disabled=move || !preferred.get()
                    on:input=move |ev| port.set(event_target_value(&ev)) /></label>
            {move || busy.get().then(|| view! { <p class="muted">{t("Starting the app…")}</p> })}
            {move || message.get().map(|m| view! { <p class="ok" id="app-message">{m}</p> })}
            {move || ssh.get().map(|p| {
                let cmd = format!("ssh -i id_container -p {p} work@{host}");
                let sftp = format!("sftp -i id_container -P {p} work@{host}");
                let dl = download_key.clone();
                view! {
                    <div class="ssh-info" id="ssh-info">
                        <p>{t("SSH / SFTP port ")} <b>{p}</b></p>
                        <code>{cmd}</code><code>{sftp}</code>
                        <button class="secondary" on:click=dl>{t("Download SSH key (id_container)")}</button>
                    </div>
                }
            })}
            {move || error.get().map(|e| view! { <div class="error">{e}</div> })}
        </Modal>
    }
}

/// Everything about one session the list cannot show: its environment, mounts, environment
/// variable names, status history with the last reason, agent, and time used.
#[component]
fn DetailDialog(
    id: String,
    name: String,
    env_label: impl Fn(&str) -> String + Copy + Send + Sync + 'static,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let data =
        RwSignal::new(None::<Result<ops::session_detail::SessionDetailComputeSession, String>>);
    let session_id = StoredValue::new(id.clone());
    spawn_local(async move {
        data.set(Some(
            gql::run::<ops::SessionDetail>(ops::session_detail::Variables { id })
                .await
                .map(|d| d.compute_session)
                .map_err(|e| e.message),
        ));
    });
    let body = move || match data.get() {
        None => view! { <p class="muted">{t("Loading…")}</p> }.into_any(),
        Some(Err(e)) => view! { <div class="error">{e}</div> }.into_any(),
        Some(Ok(v)) => {
            let mounts: Vec<String> = v
                .vfolder_mounts
                .0
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|m| {
                            let name = m["name"].as_str().unwrap_or_default();
                            let path = m["target"].as_str().unwrap_or_default();
                            let perm = if m["read_only"].as_bool().unwrap_or(false) {
                                t("read-only")
                            } else {
                                t("read-write")
                            };
                            format!("{name} → {path} ({perm})")
                        })
                        .collect()
                })
                .unwrap_or_default();
            let envs = v.environ_names;
            let mut history: Vec<(String, String)> = v
                .status_history
                .0
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, t)| (t.as_str().unwrap_or_default().to_string(), k.clone()))
                        .collect()
                })
                .unwrap_or_default();
            history.sort();
            let last = history.len().saturating_sub(1);
            let reason = v.status_info.unwrap_or_default();
            let running = SessionStatus::parse(&v.status) == Some(SessionStatus::Running);
            let agents: Vec<String> = v.containers.into_iter().filter_map(|c| c.agent).collect();
            let used = used_time(&history, &v.terminated_at.unwrap_or_default());
            let slots = if v
                .occupying_slots
                .0
                .as_object()
                .is_some_and(|o| !o.is_empty())
            {
                v.occupying_slots.0
            } else {
                v.requested_slots.0
            };
            let resources = tr(
                "{cpu} core · {mem} · {gpu} GPU",
                &[
                    ("cpu", &amount(&slots["cpu"]).unwrap_or(0.0).to_string()),
                    (
                        "mem",
                        &amount(&slots["mem"]).map(gib).unwrap_or_else(|| "-".into()),
                    ),
                    (
                        "gpu",
                        &amount(&slots["cuda.shares"])
                            .or(amount(&slots["cuda.device"]))
                            .unwrap_or(0.0)
                            .to_string(),
                    ),
                ],
            );
            view! {
                <table class="summary" id="session-detail">
                    <tr><th>{t("Environment")}</th><td>{env_label(&v.image)} <div class="muted small">{v.image.clone()}</div></td></tr>
                    <tr><th>{t("Type")}</th><td>{v.type_}</td></tr>
                    <tr><th>{t("Status")}</th><td>{v.status} " " <span class="muted small">{reason.clone()}</span></td></tr>
                    <tr><th>{t("Resources")}</th><td>{resources}</td></tr>
                    <tr><th>{t("Resource group")}</th><td>{v.scaling_group.unwrap_or_default()}</td></tr>
                    <tr><th>{t("Agent")}</th><td id="detail-agent">{if agents.is_empty() { "-".to_string() } else { agents.join(", ") }}</td></tr>
                    <tr><th>{t("Mounts")}</th><td id="detail-mounts">{if mounts.is_empty() { t("none") } else { mounts.join("; ") }}</td></tr>
                    <tr><th>{t("Environment variables")}</th><td id="detail-env">{if envs.is_empty() { t("none") } else { envs.join(", ") }}</td></tr>
                    <tr><th>{t("Used time")}</th><td id="detail-used">{used}</td></tr>
                    <tr><th>{t("Started")}</th><td id="detail-started">{v.created_at.replace('T', " ").chars().take(19).collect::<String>()}</td></tr>
                    <tr><th>{t("Usage")}</th><td id="detail-usage">{if running { view! { <SessionUsage id=session_id.get_value() /> }.into_any() } else { "-".into_any() }}</td></tr>
                </table>
                <h4>{t("Status history")}</h4>
                <ol class="history" id="detail-history">
                    {history.into_iter().enumerate().map(|(i, (t, st))| {
                        let why = if i == last && !reason.is_empty() { format!(" — {reason}") } else { String::new() };
                        view! { <li><span class="strong">{st}</span> " " <span class="muted small">{t.replace('T', " ").chars().take(19).collect::<String>()}</span>{why}</li> }
                    }).collect_view()}
                </ol>
            }
            .into_any()
        }
    };
    view! {
        <Modal title=tr("Session {name}", &[("name", &name)]) id="detail-dialog" on_close=on_close>
            {body}
        </Modal>
    }
}

/// From RUNNING (or the first status) to the end (or now): "1 h 02 min", "35 s".
fn used_time(history: &[(String, String)], terminated_at: &str) -> String {
    let start = history
        .iter()
        .find(|(_, st)| SessionStatus::parse(st) == Some(SessionStatus::Running))
        .or(history.first())
        .map(|(t, _)| t.as_str())
        .unwrap_or_default();
    elapsed(start, terminated_at)
}

/// The time from `start` to `end`; without an end (still running) it ticks every second.
#[component]
fn Elapsed(start: String, end: String) -> impl IntoView {
    let text = RwSignal::new(elapsed(&start, &end));
    if end.is_empty()
        && let Ok(h) = set_interval_with_handle(
            move || text.set(elapsed(&start, "")),
            std::time::Duration::from_secs(1),
        )
    {
        on_cleanup(move || h.clear());
    }
    view! { <span>{move || text.get()}</span> }
}

/// From `start` to `end` (empty: now), RFC 3339 both: "1 h 02 min", "35 s"; "-" when `start`
/// does not read as a time.
fn elapsed(start: &str, end: &str) -> String {
    let start = js_sys::Date::parse(start);
    if !start.is_finite() {
        return "-".into();
    }
    let end = if end.is_empty() {
        js_sys::Date::now()
    } else {
        js_sys::Date::parse(end)
    };
    let secs = ((end - start) / 1000.0).max(0.0) as u64;
    match secs {
        s if s < 60 => tr("{s} s", &[("s", &s.to_string())]),
        s if s < 3600 => tr(
            "{m} min {s} s",
            &[
                ("m", &(s / 60).to_string()),
                ("s", &format!("{:02}", s % 60)),
            ],
        ),
        s => tr(
            "{h} h {m} min",
            &[
                ("h", &(s / 3600).to_string()),
                ("m", &format!("{:02}", (s % 3600) / 60)),
            ],
        ),
    }
}

#[component]
fn LogsDialog(
    id: String,
    name: String,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let text = RwSignal::new(t("Loading…"));
    let live = RwSignal::new(false);
    let alive = Arc::new(AtomicBool::new(true));
    let fetch = {
        let id = id.clone();
        move || {
            let id = id.clone();
            spawn_local(async move {
                match gql::run::<ops::SessionLogs>(ops::session_logs::Variables { id }).await {
                    Ok(d) => text.set(d.session_logs),
                    Err(e) => text.set(e.message),
                }
            });
        }
    };
    fetch();
    {
        let fetch = fetch.clone();
        let alive = alive.clone();
        spawn_local(async move {
            while alive.load(Ordering::Relaxed) {
                gql::gloo_timers_sleep(2000).await;
                if live.get_untracked() && alive.load(Ordering::Relaxed) {
                    fetch();
                }
            }
        });
    }
    let stop = alive.clone();
    on_cleanup(move || stop.store(false, Ordering::Relaxed));
    view! {
        <Modal title=tr("Logs — {name}", &[("name", &name)]) id="logs-dialog" on_close=on_close>
            <div class="row">
                <button class="secondary" id="logs-refresh" on:click=move |_| fetch()>{t("Refresh")}</button>
                <label class="check"><input type="checkbox" prop:checked=move || live.get()
                    on:change=move |ev| live.set(event_target_checked(&ev)) />{t("Live tail")}</label>
            </div>
            <pre class="logs" id="logs-text">{move || text.get()}</pre>
        </Modal>
    }
}

#[component]
fn TerminateDialog(
    id: String,
    name: String,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let n = name.clone();
    let go = move |_| {
        let id = id.clone();
        busy.set(true);
        spawn_local(async move {
            match gql::run::<ops::DestroySession>(ops::destroy_session::Variables { id }).await {
                Ok(_) => on_close(),
                Err(e) => {
                    error.set(Some(e.message));
                    busy.set(false);
                }
            }
        });
    };
    view! {
        <Modal title=t("Terminate session") id="terminate-dialog" on_close=on_close>
            <p>{
                // The name is drawn in bold where the sentence places it.
                let text = t("Terminate {name}? Its processes stop and data outside mounted folders is lost (a pending session is cancelled).");
                let (before, after) = text
                    .split_once("{name}")
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .unwrap_or_else(|| (text.clone(), String::new()));
                view! { {before} <b>{n}</b> {after} }
            }</p>
            {move || error.get().map(|e| view! { <div class="error">{e}</div> })}
            <div class="dialog-actions">
                <button class="secondary" on:click=move |_| on_close()>{t("Cancel")}</button>
                <button class="danger-inline" id="terminate-confirm" disabled=move || busy.get() on:click=go>{t("TERMINATE")}</button>
            </div>
        </Modal>
    }
}

/// "Convert to image": commits the session to an image of the user's, following the task.
#[component]
fn CommitDialog(
    id: String,
    name: String,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let image_name = RwSignal::new(name);
    let error = RwSignal::new(None::<String>);
    let progress = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let finished = RwSignal::new(false);
    let go = move |_| {
        let (id, image_name) = (id.clone(), image_name.get_untracked());
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            let vars = ops::commit_session::Variables {
                session_id: id,
                image_name,
            };
            match gql::run::<ops::CommitSession>(vars).await {
                Ok(d) => crate::ui::follow_task(d.commit_session.task_id, progress, move |done| {
                    busy.set(false);
                    finished.set(done);
                }),
                Err(e) => {
                    error.set(Some(e.message));
                    busy.set(false);
                }
            }
        });
    };
    view! {
        <Modal title=t("Convert session to image") id="commit-dialog" on_close=on_close>
            <p>{t("What the session installed and its /home/work become an image of yours; mounted folders are not part of it. Only you see the image and start sessions from it.")}</p>
            <label for="commit-name">{t("Image name")}</label>
            <input id="commit-name" prop:value=move || image_name.get() on:input=move |ev| image_name.set(event_target_value(&ev)) />
            {move || progress.get().map(|p| view! { <div class="muted small" id="commit-progress">{p}</div> })}
            {move || error.get().map(|e| view! { <div class="error">{e}</div> })}
            <Show when=move || finished.get()>
                <p class="ok" id="commit-done">{t("The image is ready: choose it in the launcher under its environment.")}</p>
            </Show>
            <div class="dialog-actions">
                <button class="secondary" on:click=move |_| on_close()>{t("Close")}</button>
                <button id="commit-confirm" disabled=move || busy.get() || finished.get() on:click=go>{t("CONVERT")}</button>
            </div>
        </Modal>
    }
}

/// Subscribes to the live figures of sessions `ids` (`sessions_stats`), keeping each
/// session's latest in `into`; ends with the reactive scope it is called in.
fn watch_stats(ids: Vec<String>, online: RwSignal<bool>, into: RwSignal<HashMap<String, Stats>>) {
    gql::subscribe::<ops::SessionsStats>(
        ops::sessions_stats::Variables { ids },
        online,
        move |d| {
            into.update(|m| {
                for s in d.sessions_stats {
                    m.insert(s.session_id.clone(), s);
                }
            })
        },
        || {},
    );
}

/// One running session's live use, on its own subscription (the detail dialog).
#[component]
fn SessionUsage(id: String) -> impl IntoView {
    let online: RwSignal<bool> = use_context().unwrap_or_else(|| RwSignal::new(true));
    let stats = RwSignal::new(HashMap::<String, Stats>::new());
    watch_stats(vec![id.clone()], online, stats);
    view! { <LiveUsage stats=Signal::derive(move || stats.with(|m| m.get(&id).cloned())) /> }
}

/// A running session's live CPU and memory use ("…" until its first figures arrive).
#[component]
fn LiveUsage(stats: Signal<Option<Stats>>) -> impl IntoView {
    let size = |b: i64| crate::ui::human_size(b as f64);
    let text = move || {
        let Some(st) = stats.get() else {
            return String::from("…");
        };
        let gpu = st
            .gpu_used_pct
            .map(|g| {
                tr(
                    " · GPU {gpu}% · GPU RAM {gmem}",
                    &[
                        ("gpu", &format!("{g:.0}")),
                        (
                            "gmem",
                            &crate::ui::human_size(st.gpu_mem_bytes.unwrap_or(0) as f64),
                        ),
                    ],
                )
            })
            .unwrap_or_default();
        tr(
            "CPU {cpu}% · RAM {used} / {limit}",
            &[
                ("cpu", &format!("{:.0}", st.cpu_used_pct)),
                ("used", &size(st.mem_bytes)),
                ("limit", &size(st.mem_limit_bytes)),
            ],
        ) + &gpu
    };
    let io = move || {
        stats
            .get()
            .map(|st| {
                tr(
                    "I/O {read} READ · {write} WRITE · net {rx} in · {tx} out",
                    &[
                        ("read", &size(st.io_read_bytes)),
                        ("write", &size(st.io_write_bytes)),
                        ("rx", &size(st.net_rx_bytes)),
                        ("tx", &size(st.net_tx_bytes)),
                    ],
                )
            })
            .unwrap_or_default()
    };
    view! { <span class="live-usage">{text}</span><div class="muted io-usage">{io}</div> }
}

/// The environment variables dialog: edits a draft; SAVE applies the non-empty rows, closing
/// with unsaved changes asks first (as the seeds describe).
#[component]
fn EnvDialog(
    envs: RwSignal<Vec<(String, String)>>,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let initial = envs.get_untracked();
    let draft = RwSignal::new(if initial.is_empty() {
        vec![(String::new(), String::new())]
    } else {
        initial
    });
    let confirm = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let cleaned = move || {
        draft
            .get_untracked()
            .into_iter()
            .map(|(k, v)| (k.trim().to_string(), v))
            .filter(|(k, v)| !(k.is_empty() && v.is_empty()))
            .collect::<Vec<_>>()
    };
    let try_close = move || {
        if cleaned() == envs.get_untracked() {
            on_close();
        } else {
            confirm.set(true);
        }
    };
    let save = move |_| {
        let rows = cleaned();
        if rows.iter().any(|(k, _)| k.is_empty()) {
            error.set(Some(t("Every variable with a value needs a name.")));
            return;
        }
        if let Some((k, _)) = rows.iter().find(|(k, _)| {
            !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                || k.starts_with(|c: char| c.is_ascii_digit())
        }) {
            error.set(Some(tr("'{name}' is not a valid variable name (letters, digits, '_'; not starting with a digit).", &[("name", k.as_str())])));
            return;
        }
        envs.set(rows);
        on_close();
    };
    let rows = move || (0..draft.get().len()).collect::<Vec<usize>>();
    view! {
        <Modal title=t("Environment variables") id="env-dialog" on_close=try_close>
            <For each=rows key=|i| *i children=move |i: usize| view! {
                <div class="env-row">
                    <input class="env-name" placeholder=t("Variable") prop:value=move || draft.get().get(i).map(|e| e.0.clone()).unwrap_or_default()
                        on:input=move |ev| draft.update(|v| if let Some(e) = v.get_mut(i) { e.0 = event_target_value(&ev) }) />
                    <input class="env-value" placeholder=t("Value") prop:value=move || draft.get().get(i).map(|e| e.1.clone()).unwrap_or_default()
                        on:input=move |ev| draft.update(|v| if let Some(e) = v.get_mut(i) { e.1 = event_target_value(&ev) }) />
                    <button class="icon" title=t("Remove") aria-label=t("Remove") on:click=move |_| draft.update(|v| { if i < v.len() { v.remove(i); } })>"−"</button>
                </div>
            } />
            <button class="icon" title=t("Add") aria-label=t("Add") id="env-add" on:click=move |_| draft.update(|v| v.push((String::new(), String::new())))>"+"</button>
            {move || error.get().map(|e| view! { <div class="error" id="env-error">{e}</div> })}
            <Show when=move || confirm.get()>
                <div class="warn" id="env-unsaved">
                    {t("Close without saving? The changes are not applied to the session.")}
                    <span>
                        <button class="secondary" id="env-keep" on:click=move |_| confirm.set(false)>{t("KEEP EDITING")}</button>
                        " "
                        <button class="danger-inline" id="env-discard" on:click=move |_| on_close()>{t("CLOSE")}</button>
                    </span>
                </div>
            </Show>
            <div class="dialog-actions">
                <button class="secondary" id="env-delete-all" on:click=move |_| draft.set(vec![(String::new(), String::new())])>{t("DELETE ALL")}</button>
                <button class="primary-inline" id="env-save" on:click=save>{t("SAVE")}</button>
            </div>
        </Modal>
    }
}
