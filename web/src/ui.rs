//! Small shared pieces: dialogs, bars, number formatting, JSONString fields.
use leptos::prelude::*;
use serde_json::Value;

/// A JSONString field (`"{\"cpu\": \"2\"}"`) as a value.
pub fn json_field(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
        other => other.clone(),
    }
}

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

/// A labelled usage bar: `used` of `total` (no total: just the figure).
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
            <div class="bar-label"><span>{label}</span><span class="bar-text">{move || text.get()}</span></div>
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
    view! {
        <div class="backdrop" on:click=move |_| on_close()>
            <div class="dialog" id=id on:click=|ev| ev.stop_propagation()>
                <div class="dialog-head">
                    <h3>{title}</h3>
                    <button class="icon close" title="Close" on:click=move |_| on_close()>"×"</button>
                </div>
                <div class="dialog-body">{children()}</div>
            </div>
        </div>
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
