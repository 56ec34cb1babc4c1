//! GraphQL over HTTP (same origin, session cookie) with Backend.AI-style error codes. The
//! operations are typed (`crate::ops`): variables go out as their `Variables`, answers come
//! back as their `ResponseData`.
use gloo_net::http::Request;
use graphql_client::GraphQLQuery;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Value, json};

use crate::i18n::{t, tr};

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

/// A live GraphQL subscription `Q` over graphql-transport-ws (same origin, the login cookie
/// rides on the upgrade). Calls `on_next` with each `data` (a message whose `data` does not
/// read as `Q`'s is skipped); when the connection drops it sets `online` to false, reconnects
/// after a pause, calls `on_reconnect` (so the page can refetch what it missed) and sets
/// `online` back. Ends when `alive` is cleared.
pub fn subscribe<Q: GraphQLQuery>(
    variables: Q::Variables,
    online: leptos::prelude::RwSignal<bool>,
    alive: std::sync::Arc<std::sync::atomic::AtomicBool>,
    on_next: impl Fn(Q::ResponseData) + 'static,
    on_reconnect: impl Fn() + 'static,
) {
    use futures::{SinkExt, StreamExt};
    use gloo_net::websocket::Message;
    use gloo_net::websocket::futures::WebSocket;
    use leptos::prelude::Set;
    use std::sync::atomic::Ordering;
    // Plain data (strings, numbers, lists): turning it into JSON does not fail.
    let Ok(payload) = serde_json::to_value(Q::build_query(variables)) else {
        return;
    };
    let sub = json!({"id": "1", "type": "subscribe", "payload": payload}).to_string();
    leptos::task::spawn_local(async move {
        let mut first = true;
        while alive.load(Ordering::Relaxed) {
            let loc = web_sys::window().map(|w| w.location());
            let host = loc.as_ref().and_then(|l| l.host().ok()).unwrap_or_default();
            let scheme = match loc.and_then(|l| l.protocol().ok()).as_deref() {
                Some("https:") => "wss",
                _ => "ws",
            };
            let url = format!("{scheme}://{host}/graphql/ws");
            if let Ok(ws) = WebSocket::open_with_protocol(&url, "graphql-transport-ws") {
                let (mut tx, mut rx) = ws.split();
                let init = json!({"type": "connection_init", "payload": {}}).to_string();
                if tx.send(Message::Text(init)).await.is_ok()
                    && tx.send(Message::Text(sub.clone())).await.is_ok()
                {
                    while let Some(Ok(msg)) = rx.next().await {
                        if !alive.load(Ordering::Relaxed) {
                            return;
                        }
                        let Message::Text(t) = msg else { continue };
                        let Ok(mut v) = serde_json::from_str::<Value>(&t) else {
                            continue;
                        };
                        match v["type"].as_str() {
                            Some("connection_ack") => {
                                online.set(true);
                                if !first {
                                    on_reconnect();
                                }
                                first = false;
                            }
                            Some("next") => {
                                let data = v
                                    .get_mut("payload")
                                    .and_then(|p| p.get_mut("data"))
                                    .map(Value::take)
                                    .unwrap_or_default();
                                if let Ok(data) = serde_json::from_value(data) {
                                    on_next(data);
                                }
                            }
                            Some("ping") => {
                                let _ = tx
                                    .send(Message::Text(json!({"type": "pong"}).to_string()))
                                    .await;
                            }
                            _ => {}
                        }
                    }
                }
            }
            if !alive.load(Ordering::Relaxed) {
                return;
            }
            online.set(false);
            gloo_timers_sleep(2000).await;
        }
    });
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
