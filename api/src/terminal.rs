//! The web terminal: a `tmux` session inside the container, attached through a Docker exec
//! with a TTY and bridged to a WebSocket at `GET /sessions/{id}/terminal`. Binary frames are
//! keystrokes; text frames are JSON controls — `{"type": "input", "data": "…"}` or
//! `{"type": "resize", "cols": 120, "rows": 40}`. Output comes back as binary frames. Because
//! it is real tmux, reconnecting resumes the same windows (Ctrl-B c / w / x as usual).
use axum::Extension;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use uuid::Uuid;

use crate::auth::Principal;
use crate::error::ApiResult;
use crate::error::IntoProblem as _;
use crate::state::AppState;

pub async fn terminal(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<Uuid>,
    upgrade: WebSocketUpgrade,
) -> Response {
    // Only the session's owner (or a superadmin) gets its terminal; others learn nothing.
    let target = match crate::sessions::apps::owned_running(&state, &principal, id).await {
        Ok((_, k)) => crate::sessions::container_of(&state, &k).await,
        Err(e) => Err(e),
    };
    match target {
        Ok((agent, container)) => upgrade.on_upgrade(move |ws| async move {
            if let Err(e) = bridge(state, id, agent, container, ws).await {
                tracing::warn!(session = %id, error = %e.message, cause = %e.chain(), "terminal ended with an error");
            }
        }),
        Err(e) => e.into_response(),
    }
}

#[derive(serde::Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Control {
    Input { data: String },
    Resize { cols: u16, rows: u16 },
}

async fn bridge(
    state: AppState,
    session: Uuid,
    agent: std::sync::Arc<crate::agents::Agent>,
    container: String,
    ws: WebSocket,
) -> ApiResult<()> {
    let bai_engine::AttachedExec {
        id: exec_id,
        mut output,
        mut input,
    } = agent
        .attach_exec(
            &container,
            ["tmux", "new-session", "-A", "-s", "main"]
                .map(String::from)
                .to_vec(),
            true,
            vec!["TERM=xterm-256color".into(), "LANG=C.UTF-8".into()],
        )
        .await?;
    let (mut to_browser, mut from_browser) = ws.split();
    let stopping = state.shutdown.clone();
    let pump_out = async {
        loop {
            tokio::select! {
                chunk = output.next() => {
                    let Some(Ok(chunk)) = chunk else { break };
                    if to_browser
                        .send(Message::Binary(chunk.into_bytes()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                _ = stopping.cancelled() => {
                    // Shutting down: a browser already gone needs no goodbye.
                    let _ = to_browser.send(going_away()).await;
                    return;
                }
            }
        }
        // The browser may have closed first.
        let _ = to_browser.send(Message::Close(None)).await;
    };
    let pump_in = async {
        while let Some(Ok(msg)) = from_browser.next().await {
            let keys = match msg {
                Message::Binary(b) => b.to_vec(),
                Message::Text(t) => match serde_json::from_str::<Control>(t.as_str()) {
                    Ok(Control::Input { data }) => data.into_bytes(),
                    Ok(Control::Resize { cols, rows }) => {
                        // A resize that fails leaves the old size: the terminal still works.
                        if let Err(e) = agent.resize_exec(&exec_id, rows, cols).await {
                            tracing::debug!(error = ?e, "terminal resize failed");
                        }
                        continue;
                    }
                    // Plain text is typed as is.
                    Err(_) => t.as_str().as_bytes().to_vec(),
                },
                Message::Close(_) => break,
                _ => continue,
            };
            if input.write_all(&keys).await.is_err() || input.flush().await.is_err() {
                break;
            }
            crate::sessions::exec::touch(&state, session).await;
        }
    };
    // Whichever side ends first ends the bridge; tmux keeps running for the next attach.
    tokio::select! {
        _ = pump_out => {}
        _ = pump_in => {}
    }
    Ok(())
}

/// The close frame a live WebSocket (terminal, execution) gets when the server shuts down:
/// 1001 "going away", with the reason.
pub fn going_away() -> Message {
    Message::Close(Some(axum::extract::ws::CloseFrame {
        code: axum::extract::ws::close_code::AWAY,
        reason: "server shutting down".into(),
    }))
}
