//! Small shared pieces: dialogs, bars, tables, tabs, form fields (text, check, resource
//! limits, storage hosts), error lines, number formatting, slot amounts, and running an
//! operation or following a background task into signals.
use bai_types::events::TaskStatus;
use graphql_client::GraphQLQuery;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};

use crate::gql::{self, JsonString};
use crate::i18n::{key, t, tr};
use crate::ops;

/// A slot amount as a number (`"2"`, `"4294967296"`, `2`); `Infinity` is `None`.
pub fn amount(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) if s == "Infinity" => None,
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

pub fn gib(bytes: f64) -> String {
    format!("{:.2} GiB", bytes / 1024.0 / 1024.0 / 1024.0)
}

pub fn human_size(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut i = 0;
    while v >= 1024.0 && i < units.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} {}", units[i])
    } else {
        format!("{v:.1} {}", units[i])
    }
}

/// A labelled usage bar: `used` of `total` (no total: just the figure). `label` is English
/// (marked with `key` where it is a word), drawn through the catalogue.
#[component]
pub fn Bar(
    label: &'static str,
    #[prop(into)] used: Signal<f64>,
    #[prop(into)] total: Signal<Option<f64>>,
    #[prop(into)] text: Signal<String>,
) -> impl IntoView {
    let pct = move || match total.get() {
        Some(t) if t > 0.0 => (used.get() / t * 100.0).clamp(0.0, 100.0),
        _ => 0.0,
    };
    view! {
        <div class="bar">
            <div class="bar-label"><span>{t(label)}</span><span class="bar-text">{move || text.get()}</span></div>
            <div class="bar-track"><div class="bar-fill" style=move || format!("width:{:.1}%", pct())></div></div>
        </div>
    }
}

/// A modal dialog; `on_close` runs for the × button and the backdrop.
#[component]
pub fn Modal(
    title: String,
    #[prop(optional)] id: &'static str,
    on_close: impl Fn() + Copy + Send + Sync + 'static,
    children: Children,
) -> impl IntoView {
    // A dialog takes the focus when it opens, keeps Tab inside itself, and closes on Escape.
    let dialog = NodeRef::<leptos::html::Div>::new();
    Effect::new(move |_| {
        if let Some(el) = dialog.get() {
            let _ = el.focus();
        }
    });
    let on_key = move |ev: web_sys::KeyboardEvent| match ev.key().as_str() {
        "Escape" => {
            ev.prevent_default();
            on_close();
        }
        "Tab" => {
            if let Some(el) = dialog.get_untracked() {
                trap_tab(&el, &ev);
            }
        }
        _ => {}
    };
    let label = title.clone();
    view! {
        <div class="backdrop" on:click=move |_| on_close()>
            <div class="dialog" id=id role="dialog" aria-modal="true" aria-label=label tabindex="-1"
                node_ref=dialog on:keydown=on_key on:click=|ev| ev.stop_propagation()>
                <div class="dialog-head">
                    <h3>{title}</h3>
                    <button class="icon close" title=t("Close") aria-label=t("Close") on:click=move |_| on_close()>"×"</button>
                </div>
                <div class="dialog-body">{children()}</div>
            </div>
        </div>
    }
}

/// Tab from the last control goes to the first, Shift+Tab from the first to the last.
fn trap_tab(dialog: &web_sys::HtmlElement, ev: &web_sys::KeyboardEvent) {
    use wasm_bindgen::JsCast;
    let Ok(nodes) = dialog.query_selector_all(
        "button:not([disabled]), [href], input:not([disabled]), select:not([disabled]), textarea:not([disabled])",
    ) else {
        return;
    };
    let controls: Vec<web_sys::HtmlElement> = (0..nodes.length())
        .filter_map(|i| nodes.item(i))
        .filter_map(|n| n.dyn_into::<web_sys::HtmlElement>().ok())
        .collect();
    let (Some(first), Some(last)) = (controls.first(), controls.last()) else {
        return;
    };
    let active = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.active_element());
    let at = |el: &web_sys::HtmlElement| {
        active
            .as_ref()
            .is_some_and(|a| a == el.unchecked_ref::<web_sys::Element>())
    };
    let outside = active
        .as_ref()
        .is_none_or(|a| !dialog.contains(Some(a.unchecked_ref())));
    if ev.shift_key() && (at(first) || outside) {
        ev.prevent_default();
        let _ = last.focus();
    } else if !ev.shift_key() && (at(last) || outside) {
        ev.prevent_default();
        let _ = first.focus();
    }
}

/// Saves text as a file through the browser (e.g. an SSH key).
pub fn download_text(name: &str, text: &str) {
    use wasm_bindgen::JsCast;
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(text));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type("application/octet-stream");
    let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts) else {
        return;
    };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&blob) else {
        return;
    };
    if let Some(doc) = window().document()
        && let Ok(el) = doc.create_element("a")
        && let Ok(a) = el.dyn_into::<web_sys::HtmlAnchorElement>()
    {
        a.set_href(&url);
        a.set_download(name);
        a.click();
    }
    let _ = web_sys::Url::revoke_object_url(&url);
}

/// One table row: a key and the cells shown.
pub(crate) type Row = (String, Vec<String>);

pub(crate) fn table(
    id: &'static str,
    headers: &[&'static str],
    rows: Vec<Row>,
    actions: impl Fn(&Row) -> AnyView,
) -> AnyView {
    let headers: Vec<&'static str> = headers.to_vec();
    view! {
        <div class="card wide table-wrap">
            <table class="list" id=id>
                <thead><tr>{headers.into_iter().map(|h| view! { <th>{t(h)}</th> }).collect_view()}<th>{t("Control")}</th></tr></thead>
                <tbody>
                    {rows.iter().map(|r| view! {
                        <tr class="admin-row" data-key=r.0.clone()>
                            {r.1.iter().map(|c| view! { <td>{c.clone()}</td> }).collect_view()}
                            <td class="controls">{actions(r)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            {rows.is_empty().then(|| view! { <p class="muted empty">{t("Nothing here.")}</p> })}
        </div>
    }
    .into_any()
}

pub(crate) fn slots_text(v: &JsonString) -> String {
    let j = &v.0;
    let cpu = amount(&j["cpu"])
        .map(|c| tr("{n} core", &[("n", &c.to_string())]))
        .unwrap_or_else(|| t("∞ core"));
    let mem = amount(&j["mem"]).map(gib).unwrap_or_else(|| "∞ RAM".into());
    let gpu = amount(&j["cuda.device"])
        .map(|g| format!("{g} GPU"))
        .unwrap_or_default();
    let fgpu = amount(&j["cuda.shares"])
        .map(|g| format!("{g} fGPU"))
        .unwrap_or_default();
    [cpu, mem, gpu, fgpu]
        .into_iter()
        .filter(|x| !x.is_empty())
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Runs the operation `Q` (a mutation, or a query to load), then `after` with its answer on
/// success, or shows the error.
pub(crate) fn run<Q>(
    vars: Q::Variables,
    error: RwSignal<Option<String>>,
    after: impl Fn(Q::ResponseData) + 'static,
) where
    Q: GraphQLQuery,
    Q::Variables: 'static,
    Q::ResponseData: 'static,
{
    spawn_local(async move {
        match gql::run::<Q>(vars).await {
            Ok(d) => {
                error.set(None);
                after(d);
            }
            Err(e) => error.set(Some(e.message)),
        }
    });
}

/// Loads a list query `Q` into `rows`; `list` takes the list out of its answer. Only the answer
/// to the latest load of `rows` is applied: an earlier request answering late (a slow tab
/// left for another) never overwrites it.
pub(crate) fn load_list<Q, T>(
    vars: Q::Variables,
    error: RwSignal<Option<String>>,
    rows: RwSignal<Vec<T>>,
    list: fn(Q::ResponseData) -> Vec<T>,
) where
    Q: GraphQLQuery,
    Q::Variables: 'static,
    Q::ResponseData: 'static,
    T: Send + Sync + 'static,
{
    let ticket = latest::take(&rows);
    spawn_local(async move {
        let answer = gql::run::<Q>(vars).await;
        if !latest::is_current(&rows, ticket) {
            return;
        }
        match answer {
            Ok(d) => {
                error.set(None);
                rows.set(list(d));
            }
            Err(e) => error.set(Some(e.message)),
        }
    });
}

/// Which load of a list is the latest, by the list's signal: per tab, in memory (the console
/// runs on one thread), one counter per list signal ever loaded.
mod latest {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::hash::{Hash, Hasher};

    thread_local! {
        static TICKETS: RefCell<HashMap<u64, u64>> = RefCell::new(HashMap::new());
    }

    fn key(signal: &impl Hash) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        signal.hash(&mut h);
        h.finish()
    }

    /// A new ticket for `signal`'s next load (every earlier one is outdated).
    pub(super) fn take(signal: &impl Hash) -> u64 {
        TICKETS.with(|t| {
            let mut t = t.borrow_mut();
            let n = t.entry(key(signal)).or_insert(0);
            *n += 1;
            *n
        })
    }

    pub(super) fn is_current(signal: &impl Hash, ticket: u64) -> bool {
        TICKETS.with(|t| t.borrow().get(&key(signal)) == Some(&ticket))
    }
}

/// A query's state shown the same way on every page: "Loading…" until its first answer, the
/// server's message when the latest answer is an error, nothing otherwise (the page draws the
/// data; a refetch keeps the last answer on screen until the next one).
pub(crate) fn answer_state<T>(answer: LocalResource<Result<T, gql::GqlError>>) -> impl IntoView
where
    T: Clone + 'static,
{
    move || match answer.get() {
        None => Some(view! { <p class="muted loading">{t("Loading…")}</p> }.into_any()),
        Some(Err(e)) => Some(view! { <div class="error">{e.message}</div> }.into_any()),
        Some(Ok(_)) => None,
    }
}

pub(crate) fn tabs(
    current: RwSignal<&'static str>,
    items: &[(&'static str, &'static str)],
) -> AnyView {
    let items = items.to_vec();
    view! {
        <div class="tabs">
            {items.into_iter().map(|(label, value)| view! {
                <button class="tab" id=format!("tab-{value}") class:active=move || current.get() == value on:click=move |_| current.set(value)>{t(label)}</button>
            }).collect_view()}
        </div>
    }
    .into_any()
}

pub(crate) fn text_input(id: &'static str, label: &'static str, sig: RwSignal<String>) -> AnyView {
    view! {
        <label for=id>{t(label)}</label>
        <input id=id prop:value=move || sig.get() on:input=move |ev| sig.set(event_target_value(&ev)) />
    }
    .into_any()
}

pub(crate) fn check(id: &'static str, label: &'static str, sig: RwSignal<bool>) -> AnyView {
    view! {
        <label class="check"><input type="checkbox" id=id prop:checked=move || sig.get() on:change=move |ev| sig.set(event_target_checked(&ev)) />{t(label)}</label>
    }
    .into_any()
}

/// `text` (already translated) cut at `{name}`: what comes before and after it, so that a value
/// can be drawn between them (in bold, say) where the language puts it.
pub(crate) fn around(text: String, name: &str) -> (String, String) {
    let mark = format!("{{{name}}}");
    match text.find(&mark) {
        Some(at) => (text[..at].to_string(), text[at + mark.len()..].to_string()),
        None => (text, String::new()),
    }
}

pub(crate) fn error_view(error: RwSignal<Option<String>>) -> impl IntoView {
    move || {
        error
            .get()
            .map(|e| view! { <div class="error admin-error">{e}</div> })
    }
}

/// A limit input with an "unlimited" box.
pub(crate) fn limit_input(
    id: &'static str,
    label: &'static str,
    value: RwSignal<String>,
    unlimited: RwSignal<bool>,
) -> AnyView {
    view! {
        <label for=id>{t(label)}</label>
        <div class="row">
            <input id=id prop:value=move || value.get() disabled=move || unlimited.get() on:input=move |ev| value.set(event_target_value(&ev)) />
            <label class="check"><input type="checkbox" id=format!("{id}-unlimited") prop:checked=move || unlimited.get()
                on:change=move |ev| unlimited.set(event_target_checked(&ev)) />{t("Unlimited")}</label>
        </div>
    }
    .into_any()
}

/// A form's four resource limits (CPU, RAM, GPU, fGPU), each a value or unlimited, read from
/// and written to a `total_resource_slots` document (`"Infinity"` for unlimited, as
/// Backend.AI writes it). Policies, projects and domains edit them alike; the document's
/// other slots (ones the form does not show) are kept.
#[derive(Clone, Copy)]
pub(crate) struct SlotInputs {
    limits: [(RwSignal<String>, RwSignal<bool>); 4],
    initial: StoredValue<(Value, [(String, bool); 4])>,
}

impl SlotInputs {
    const KEYS: [&'static str; 4] = ["cpu", "mem", "cuda.device", "cuda.shares"];
    const LABELS: [&'static str; 4] = [
        key("CPU (cores)"),
        key("RAM (e.g. 16g)"),
        key("GPU"),
        key("fGPU"),
    ];

    pub(crate) fn of(slots: &Value) -> SlotInputs {
        let values = Self::KEYS.map(|k| match &slots[k] {
            Value::String(x) if x != "Infinity" => (x.clone(), false),
            Value::Number(n) => (n.to_string(), false),
            _ => (String::new(), true),
        });
        SlotInputs {
            limits: values
                .clone()
                .map(|(v, unlimited)| (RwSignal::new(v), RwSignal::new(unlimited))),
            initial: StoredValue::new((slots.clone(), values)),
        }
    }

    /// Whether any of the four was changed in the form.
    pub(crate) fn changed(&self) -> bool {
        let (_, before) = self.initial.get_value();
        self.limits
            .iter()
            .zip(before)
            .any(|((v, u), (bv, bu))| v.get_untracked() != bv || u.get_untracked() != bu)
    }

    pub(crate) fn json(&self) -> JsonString {
        let mut out = self
            .initial
            .get_value()
            .0
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (k, (v, unlimited)) in Self::KEYS.iter().zip(self.limits) {
            let v = if unlimited.get_untracked() {
                json!("Infinity")
            } else {
                json!(v.get_untracked().trim())
            };
            out.insert((*k).to_string(), v);
        }
        JsonString(Value::Object(out))
    }

    /// The four inputs, with these element ids.
    pub(crate) fn inputs(&self, ids: [&'static str; 4]) -> AnyView {
        ids.into_iter()
            .zip(Self::LABELS)
            .zip(self.limits)
            .map(|((id, label), (v, u))| limit_input(id, label, v, u))
            .collect_view()
            .into_any()
    }
}

/// Storage hosts allowed (an `allowed_vfolder_hosts` document) as the comma-separated names
/// a form shows.
pub(crate) fn hosts_text(hosts: &JsonString) -> String {
    hosts
        .0
        .as_object()
        .map(|o| o.keys().cloned().collect::<Vec<_>>().join(","))
        .unwrap_or_default()
}

/// Comma-separated storage host names as an `allowed_vfolder_hosts` document: a host `before`
/// already allowed keeps its permissions, a new one gets every folder permission.
pub(crate) fn hosts_json(text: &str, before: &JsonString) -> JsonString {
    let hosts: serde_json::Map<String, Value> = text
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| {
            let perms = before.0.get(h).cloned().unwrap_or_else(|| {
                json!([
                    "create-vfolder",
                    "modify-vfolder",
                    "delete-vfolder",
                    "mount-in-session",
                    "upload-file",
                    "download-file"
                ])
            });
            (h.to_string(), perms)
        })
        .collect();
    JsonString(Value::Object(hosts))
}

/// Follows a background task until it ends, showing its progress.
/// Polls a background task, telling `progress` where it is; `after` hears whether it ended
/// done (rather than failed).
pub(crate) fn follow_task(
    task_id: String,
    progress: RwSignal<Option<String>>,
    after: impl Fn(bool) + 'static,
) {
    spawn_local(async move {
        loop {
            let vars = ops::background_task::Variables {
                task_id: task_id.clone(),
            };
            match gql::run::<ops::BackgroundTask>(vars).await {
                Ok(d) => {
                    let task = d.background_task;
                    progress.set(Some(format!(
                        "{}: {}/{} {}",
                        task.status.as_str(),
                        task.current_progress,
                        task.total_progress,
                        task.message
                    )));
                    if task.status != TaskStatus::Running {
                        after(task.status == TaskStatus::Done);
                        return;
                    }
                }
                Err(e) => {
                    progress.set(Some(e.message));
                    return;
                }
            }
            gql::gloo_timers_sleep(700).await;
        }
    });
}
