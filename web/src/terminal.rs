//! The web terminal page (`#terminal/<session>`): the session's tmux over
//! `/sessions/{id}/terminal`, the screen kept by the `vt100` terminal-state crate (compiled into
//! this bundle) and drawn as text; keys go back as bytes.
use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use gloo_net::websocket::Message;
use gloo_net::websocket::futures::WebSocket;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::i18n::{t, tr};

const ROWS: u16 = 32;

fn cols_for_window() -> u16 {
    let w = window()
        .inner_width()
        .ok()
        .and_then(|v| v.as_f64())
        .unwrap_or(1000.0);
    (((w - 32.0) / 8.45) as u16).clamp(40, 240)
}

fn color(c: vt100::Color, fg: bool) -> Option<String> {
    const BASE: [&str; 16] = [
        "#1e1e1e", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
        "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff",
    ];
    match c {
        vt100::Color::Default => None,
        vt100::Color::Idx(i) if i < 16 => Some(BASE[i as usize].to_string()),
        vt100::Color::Idx(i) if i >= 232 => {
            let v = 8 + (i - 232) as u32 * 10;
            Some(format!("rgb({v},{v},{v})"))
        }
        vt100::Color::Idx(i) => {
            let i = i - 16;
            let f = |x: u8| if x == 0 { 0 } else { 55 + x as u32 * 40 };
            Some(format!(
                "rgb({},{},{})",
                f(i / 36),
                f((i / 6) % 6),
                f(i % 6)
            ))
        }
        vt100::Color::Rgb(r, g, b) => {
            let _ = fg;
            Some(format!("rgb({r},{g},{b})"))
        }
    }
}

fn escape(s: &str, out: &mut String) {
    for ch in s.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
}

/// The screen as HTML: one line per row, runs of equal style as spans, the cursor inverted.
fn render(screen: &vt100::Screen) -> String {
    let (rows, cols) = screen.size();
    let (crow, ccol) = screen.cursor_position();
    let mut html = String::new();
    for r in 0..rows {
        let mut run = String::new();
        let mut style = String::new();
        let flush = |html: &mut String, run: &mut String, style: &str| {
            if run.is_empty() {
                return;
            }
            if style.is_empty() {
                html.push_str(run);
            } else {
                html.push_str(&format!("<span style=\"{style}\">{run}</span>"));
            }
            run.clear();
        };
        for c in 0..cols {
            let Some(cell) = screen.cell(r, c) else {
                continue;
            };
            if cell.is_wide_continuation() {
                continue;
            }
            let cursor = r == crow && c == ccol && !screen.hide_cursor();
            let (mut fg, mut bg) = (color(cell.fgcolor(), true), color(cell.bgcolor(), false));
            if cell.inverse() != cursor {
                std::mem::swap(&mut fg, &mut bg);
                fg = Some(fg.unwrap_or_else(|| "#1e1e1e".into()));
                bg = Some(bg.unwrap_or_else(|| "#e5e5e5".into()));
            }
            let mut s = String::new();
            if let Some(f) = fg {
                s.push_str(&format!("color:{f};"));
            }
            if let Some(b) = bg {
                s.push_str(&format!("background:{b};"));
            }
            if cell.bold() {
                s.push_str("font-weight:bold;");
            }
            if s != style {
                flush(&mut html, &mut run, &style);
                style = s;
            }
            let text = cell.contents();
            if text.is_empty() {
                run.push(' ');
            } else {
                escape(&text, &mut run);
            }
        }
        flush(&mut html, &mut run, &style);
        html.push('\n');
    }
    html
}

/// Bytes a key press sends to the terminal (xterm conventions).
fn key_bytes(ev: &web_sys::KeyboardEvent) -> Option<Vec<u8>> {
    let key = ev.key();
    if ev.ctrl_key() && key.len() == 1 {
        let c = key.chars().next()?.to_ascii_lowercase();
        if c.is_ascii_lowercase() {
            return Some(vec![c as u8 - b'a' + 1]);
        }
        return match c {
            '[' => Some(vec![27]),
            '\\' => Some(vec![28]),
            ']' => Some(vec![29]),
            ' ' | '@' => Some(vec![0]),
            _ => None,
        };
    }
    let seq: &[u8] = match key.as_str() {
        "Enter" => b"\r",
        "Backspace" => b"\x7f",
        "Tab" => b"\t",
        "Escape" => b"\x1b",
        "ArrowUp" => b"\x1b[A",
        "ArrowDown" => b"\x1b[B",
        "ArrowRight" => b"\x1b[C",
        "ArrowLeft" => b"\x1b[D",
        "Home" => b"\x1b[H",
        "End" => b"\x1b[F",
        "Delete" => b"\x1b[3~",
        "PageUp" => b"\x1b[5~",
        "PageDown" => b"\x1b[6~",
        k if k.chars().count() == 1 && !ev.meta_key() => {
            let mut v = Vec::new();
            if ev.alt_key() {
                v.push(0x1b);
            }
            v.extend_from_slice(k.as_bytes());
            return Some(v);
        }
        _ => return None,
    };
    Some(seq.to_vec())
}

#[component]
pub fn TerminalPage(session_id: String) -> impl IntoView {
    let screen_html = RwSignal::new(t("Connecting…"));
    let status = RwSignal::new(t("connecting"));
    let cols = cols_for_window();
    let parser = Arc::new(Mutex::new(vt100::Parser::new(ROWS, cols, 0)));
    let (key_tx, mut key_rx) = futures::channel::mpsc::unbounded::<Vec<u8>>();
    let loc = window().location();
    let scheme = if loc.protocol().ok().as_deref() == Some("https:") {
        "wss"
    } else {
        "ws"
    };
    let url = format!(
        "{scheme}://{}/sessions/{session_id}/terminal",
        loc.host().unwrap_or_default()
    );
    {
        let parser = parser.clone();
        spawn_local(async move {
            let ws = match WebSocket::open(&url) {
                Ok(ws) => ws,
                Err(e) => {
                    status.set(tr("cannot connect: {error}", &[("error", &e.to_string())]));
                    return;
                }
            };
            let (mut tx, mut rx) = ws.split();
            let resize =
                serde_json::json!({"type": "resize", "cols": cols, "rows": ROWS}).to_string();
            let _ = tx.send(Message::Text(resize)).await;
            status.set(t("connected"));
            spawn_local(async move {
                while let Some(bytes) = key_rx.next().await {
                    if tx.send(Message::Bytes(bytes)).await.is_err() {
                        break;
                    }
                }
            });
            while let Some(msg) = rx.next().await {
                let bytes = match msg {
                    Ok(Message::Bytes(b)) => b,
                    Ok(Message::Text(t)) => t.into_bytes(),
                    Err(e) => {
                        status.set(tr("disconnected: {error}", &[("error", &e.to_string())]));
                        return;
                    }
                };
                let html = match parser.lock() {
                    Ok(mut p) => {
                        p.process(&bytes);
                        render(p.screen())
                    }
                    Err(_) => return,
                };
                screen_html.set(html);
            }
            status.set(t("disconnected"));
        });
    }
    let on_key = move |ev: web_sys::KeyboardEvent| {
        if let Some(bytes) = key_bytes(&ev) {
            ev.prevent_default();
            let _ = key_tx.unbounded_send(bytes);
        }
    };
    let screen_ref = NodeRef::<leptos::html::Pre>::new();
    Effect::new(move |_| {
        if let Some(el) = screen_ref.get() {
            let _ = el.focus();
        }
    });
    view! {
        <div class="terminal-page">
            <div class="terminal-bar">
                <span>{t("Web terminal — tmux (Ctrl-B c: new window, Ctrl-B w: list, Ctrl-B x: close pane)")}</span>
                <span id="terminal-status">{move || status.get()}</span>
            </div>
            <pre class="terminal" id="terminal-screen" tabindex="0" node_ref=screen_ref
                on:keydown=on_key inner_html=move || screen_html.get()></pre>
        </div>
    }
}
