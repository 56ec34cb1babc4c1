//! The authentication layer of every route: resolves the request's credentials once
//! (`auth::credentials`), puts the `Principal` and `Credential` into the request, and adds the
//! keypair's rate-limit headers to the answer.
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::auth::ClientAddr;
use crate::auth::caller::Principal;
use crate::auth::credentials::{RateWindow, resolve};
use crate::error::IntoProblem as _;
use crate::state::AppState;

pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let addr = ClientAddr(
        req.extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip()),
    );
    req.extensions_mut().insert(addr);
    let seen = req.extensions().get::<crate::observe::Seen>().cloned();
    match resolve(&state, req.method(), &path_and_query, req.headers()).await {
        Ok((principal, credential, window)) => {
            if let (Some(seen), Principal::User(c)) = (&seen, &principal) {
                seen.who(c.access_key.clone().unwrap_or_else(|| c.email.clone()));
            }
            req.extensions_mut().insert(principal);
            req.extensions_mut().insert(credential);
            let mut resp = next.run(req).await;
            if let Some(RateWindow(limit, remaining)) = window {
                let h = resp.headers_mut();
                h.insert("x-ratelimit-limit", limit.into());
                h.insert("x-ratelimit-remaining", remaining.into());
                h.insert(
                    "x-ratelimit-window",
                    crate::auth::ratelimit::WINDOW.as_secs().into(),
                );
            }
            resp
        }
        Err(e) => e.into_response(),
    }
}
