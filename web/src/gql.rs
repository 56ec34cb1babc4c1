//! GraphQL over HTTP (same origin, session cookie) with Backend.AI-style error codes. The
//! operations are typed (`crate::ops`): variables go out as their `Variables`, answers come
//! back as their `ResponseData`.
use gloo_net::http::Request;
use graphql_client::GraphQLQuery;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::i18n::{t, tr};

#[derive(Clone, Debug)]
pub struct GqlError {
    pub code: String,
    pub message: String,
}

/// The `JSONString` scalar: a JSON document the server sends as a string (`"{\"cpu\": \"2\"}"`),
/// held parsed. A string that is not JSON reads as `null`, and a plain JSON value is taken as
/// it is; it goes out as a string again.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonString(pub Value);

impl<'de> Deserialize<'de> for JsonString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(JsonString(match Value::deserialize(d)? {
            Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::Null),
            other => other,
        }))
    }
}

impl Serialize for JsonString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

/// Runs the query or mutation `Q` and returns its `data`, or the first error with its code.
pub async fn run<Q: GraphQLQuery>(variables: Q::Variables) -> Result<Q::ResponseData, GqlError> {
    let network = |e: String| GqlError {
        code: "NETWORK".into(),
        message: tr("Cannot reach the server: {error}", &[("error", &e)]),
    };
    let req = Request::post("/graphql")
        .json(&Q::build_query(variables))
        .map_err(|e| network(e.to_string()))?;
    let resp = req.send().await.map_err(|e| network(e.to_string()))?;
    let status = resp.status();
    let mut body: Value = resp.json().await.map_err(|e| network(e.to_string()))?;
    if let Some(err) = body.get("errors").and_then(|e| e.get(0)) {
        return Err(GqlError {
            code: err["extensions"]["code"]
                .as_str()
                .unwrap_or("ERROR")
                .to_string(),
            message: err["message"]
                .as_str()
                .map_or_else(|| t("Request failed"), str::to_string),
        });
    }
    if status >= 400 {
        return Err(GqlError {
            code: body["code"].as_str().unwrap_or("ERROR").to_string(),
            message: body["title"]
                .as_str()
                .map_or_else(|| t("Request failed"), str::to_string),
        });
    }
    serde_json::from_value(body.get_mut("data").map(Value::take).unwrap_or_default()).map_err(
        |_| GqlError {
            code: "UNEXPECTED_RESPONSE".into(),
            message: t("Unexpected answer from the server."),
        },
    )
}

/// A live GraphQL subscription `Q` on the tab's one WebSocket (`live`): calls `on_next` with
/// each `data` (a message whose `data` does not read as `Q`'s is skipped). When the socket
/// drops, `online` turns false until it is back; then every subscription is sent again and
/// `on_reconnect` called (so the page can refetch what it missed). The subscription ends
/// with the reactive scope it was made in (the view unmounting, or the effect running again):
/// the server is told at once, and the socket closes a little after its last subscription.
pub fn subscribe<Q: GraphQLQuery>(
    variables: Q::Variables,
    online: leptos::prelude::RwSignal<bool>,
    on_next: impl Fn(Q::ResponseData) + 'static,
    on_reconnect: impl Fn() + 'static,
) {
    // Plain data (strings, numbers, lists): turning it into JSON does not fail.
    let Ok(payload) = serde_json::to_value(Q::build_query(variables)) else {
        return;
    };
    let id = live::add(
        payload,
        online,
        std::rc::Rc::new(move |data: Value| {
            if let Ok(data) = serde_json::from_value(data) {
                on_next(data);
            }
        }),
        std::rc::Rc::new(on_reconnect),
    );
    leptos::prelude::on_cleanup(move || live::remove(id));
}

/// The tab's one GraphQL WebSocket (graphql-transport-ws, same origin, the login cookie rides
/// on the upgrade), multiplexing every subscription the page holds under its own id. Per tab
/// and in memory (the console runs on one thread: a thread-local); the server counts this
/// tab as one live connection, however many views are live.
mod live {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::rc::Rc;

    use futures::channel::mpsc;
    use futures::{SinkExt, StreamExt};
    use gloo_net::websocket::Message;
    use gloo_net::websocket::futures::WebSocket;
    use leptos::prelude::{RwSignal, Set};
    use serde_json::{Value, json};

    /// How long the socket stays open after its last subscription ended (moving between two
    /// live pages keeps it).
    const LINGER_MS: i32 = 3000;
    /// The pause before connecting again after the socket dropped.
    const RETRY_MS: i32 = 2000;

    struct Sub {
        payload: Value,
        on_next: Rc<dyn Fn(Value)>,
        on_reconnect: Rc<dyn Fn()>,
    }

    enum Out {
        Text(String),
        Close,
    }

    #[derive(Default)]
    struct Hub {
        next_id: u64,
        subs: BTreeMap<u64, Sub>,
        /// Set while the socket is open and acknowledged: what is sent on it.
        out: Option<mpsc::UnboundedSender<Out>>,
        /// A connection task is running.
        running: bool,
        /// Moves on every subscription added and every time the last one ends: a close timer
        /// acts only if nothing happened since it started.
        linger: u64,
        online: Option<RwSignal<bool>>,
    }

    thread_local! {
        static HUB: RefCell<Hub> = RefCell::new(Hub::default());
    }

    fn subscribe_message(id: u64, payload: &Value) -> String {
        json!({"id": id.to_string(), "type": "subscribe", "payload": payload}).to_string()
    }

    /// Registers a subscription and sends it when the socket is open (or at its next
    /// acknowledgement); starts the socket when it is not running. Returns its id.
    pub(super) fn add(
        payload: Value,
        online: RwSignal<bool>,
        on_next: Rc<dyn Fn(Value)>,
        on_reconnect: Rc<dyn Fn()>,
    ) -> u64 {
        let (id, start) = HUB.with(|h| {
            let mut h = h.borrow_mut();
            h.next_id += 1;
            let id = h.next_id;
            if let Some(out) = &h.out {
                let _ = out.unbounded_send(Out::Text(subscribe_message(id, &payload)));
            }
            h.subs.insert(
                id,
                Sub {
                    payload,
                    on_next,
                    on_reconnect,
                },
            );
            h.online = Some(online);
            h.linger += 1;
            let start = !h.running;
            h.running = true;
            (id, start)
        });
        if start {
            leptos::task::spawn_local(connection());
        }
        id
    }

    /// Ends subscription `id`: the server is told at once; the socket closes after
    /// `LINGER_MS` when nothing else subscribed meanwhile.
    pub(super) fn remove(id: u64) {
        forget(id, true);
    }

    /// Drops subscription `id` (telling the server when `tell`: the view ended it, not the
    /// server); when none is left, the socket closes after `LINGER_MS`.
    fn forget(id: u64, tell: bool) {
        let linger = HUB.with(|h| {
            let mut h = h.borrow_mut();
            if h.subs.remove(&id).is_some()
                && tell
                && let Some(out) = &h.out
            {
                let complete = json!({"id": id.to_string(), "type": "complete"}).to_string();
                let _ = out.unbounded_send(Out::Text(complete));
            }
            h.subs.is_empty().then(|| {
                h.linger += 1;
                h.linger
            })
        });
        if let Some(linger) = linger {
            leptos::task::spawn_local(async move {
                super::gloo_timers_sleep(LINGER_MS).await;
                HUB.with(|h| {
                    let h = h.borrow();
                    // Not yet acknowledged: the acknowledgement closes it (nothing to send).
                    if h.subs.is_empty()
                        && h.linger == linger
                        && let Some(out) = &h.out
                    {
                        let _ = out.unbounded_send(Out::Close);
                    }
                });
            });
        }
    }

    fn set_online(v: bool) {
        if let Some(online) = HUB.with(|h| h.borrow().online) {
            online.set(v);
        }
    }

    fn url() -> String {
        let loc = web_sys::window().map(|w| w.location());
        let host = loc.as_ref().and_then(|l| l.host().ok()).unwrap_or_default();
        let scheme = match loc.and_then(|l| l.protocol().ok()).as_deref() {
            Some("https:") => "wss",
            _ => "ws",
        };
        format!("{scheme}://{host}/graphql/ws")
    }

    /// What one message from the server asks of the hub.
    fn received(text: &str, out: &mpsc::UnboundedSender<Out>, reconnected: &mut bool) {
        let Ok(mut v) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let id = v["id"].as_str().and_then(|i| i.parse::<u64>().ok());
        match v["type"].as_str() {
            Some("connection_ack") => {
                // Every subscription (again, after a drop) on the acknowledged socket.
                let again = HUB.with(|h| {
                    let mut h = h.borrow_mut();
                    // Every view left while it connected: nothing to keep it open for.
                    if h.subs.is_empty() {
                        let _ = out.unbounded_send(Out::Close);
                    }
                    for (id, sub) in &h.subs {
                        let _ = out.unbounded_send(Out::Text(subscribe_message(*id, &sub.payload)));
                    }
                    h.out = Some(out.clone());
                    h.subs
                        .values()
                        .map(|s| s.on_reconnect.clone())
                        .collect::<Vec<_>>()
                });
                set_online(true);
                if std::mem::take(reconnected) {
                    for f in again {
                        f();
                    }
                }
            }
            Some("next") => {
                let f = id.and_then(|id| {
                    HUB.with(|h| h.borrow().subs.get(&id).map(|s| s.on_next.clone()))
                });
                if let Some(f) = f {
                    let data = v
                        .get_mut("payload")
                        .and_then(|p| p.get_mut("data"))
                        .map(Value::take)
                        .unwrap_or_default();
                    f(data);
                }
            }
            // The server ended or refused it: it is not sent again after a reconnect (a
            // view that needs it subscribes again when what it shows changes).
            Some("complete" | "error") => {
                if let Some(id) = id {
                    forget(id, false);
                }
            }
            Some("ping") => {
                let _ = out.unbounded_send(Out::Text(json!({"type": "pong"}).to_string()));
            }
            _ => {}
        }
    }

    /// The socket's life: open, acknowledge, carry messages both ways; after a drop, wait and
    /// open again while anything is subscribed; end when closed with nothing subscribed.
    async fn connection() {
        let mut reconnected = false;
        loop {
            let mut closed_on_purpose = false;
            if let Ok(ws) = WebSocket::open_with_protocol(&url(), "graphql-transport-ws") {
                let (mut tx, rx) = ws.split();
                let (out, orx) = mpsc::unbounded::<Out>();
                let init = json!({"type": "connection_init", "payload": {}}).to_string();
                if tx.send(Message::Text(init)).await.is_ok() {
                    let mut rx = rx.fuse();
                    let mut orx = orx.fuse();
                    loop {
                        futures::select! {
                            msg = rx.next() => match msg {
                                Some(Ok(Message::Text(t))) => received(&t, &out, &mut reconnected),
                                Some(Ok(_)) => {}
                                _ => break,
                            },
                            o = orx.next() => match o {
                                Some(Out::Text(t)) => {
                                    if tx.send(Message::Text(t)).await.is_err() {
                                        break;
                                    }
                                }
                                Some(Out::Close) | None => {
                                    closed_on_purpose = true;
                                    let _ = tx.close().await;
                                    break;
                                }
                            },
                        }
                    }
                }
            }
            let idle = HUB.with(|h| {
                let mut h = h.borrow_mut();
                h.out = None;
                let idle = h.subs.is_empty();
                if idle {
                    h.running = false;
                }
                idle
            });
            if idle {
                return;
            }
            if !closed_on_purpose {
                set_online(false);
                super::gloo_timers_sleep(RETRY_MS).await;
                reconnected = true;
                // Every view left during the pause: no socket until one subscribes.
                let idle = HUB.with(|h| {
                    let mut h = h.borrow_mut();
                    let idle = h.subs.is_empty();
                    if idle {
                        h.running = false;
                    }
                    idle
                });
                if idle {
                    set_online(true);
                    return;
                }
            }
        }
    }
}

/// Waits `ms` milliseconds (a browser timer).
pub async fn gloo_timers_sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Sends a form's mutation: `busy` while it runs, then the server's message in `error`, or
/// `error` cleared and `on_ok` with the answer.
pub fn submit<Q>(
    variables: Q::Variables,
    busy: leptos::prelude::RwSignal<bool>,
    error: leptos::prelude::RwSignal<Option<String>>,
    on_ok: impl FnOnce(Q::ResponseData) + 'static,
) where
    Q: GraphQLQuery + 'static,
    Q::Variables: 'static,
{
    use leptos::prelude::Set;
    busy.set(true);
    leptos::task::spawn_local(async move {
        match run::<Q>(variables).await {
            Ok(d) => {
                error.set(None);
                on_ok(d);
            }
            Err(e) => error.set(Some(e.message)),
        }
        busy.set(false);
    });
}
