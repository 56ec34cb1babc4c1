//! Small shared pieces: dialogs, bars, number formatting, slot amounts.
use leptos::prelude::*;
use serde_json::Value;

use crate::i18n::t;

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
