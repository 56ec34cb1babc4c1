//! The GraphQL WebSocket's guard (an async-graphql extension): before every operation the
//! connection proves its credential again (`auth::credentials::reresolve`), so logout,
//! deactivation, demotion and password changes take effect at once; running subscriptions end
//! when a revocation changes their caller's rights. Connections per owner are counted by
//! `auth::ws::Connections`.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextPrepareRequest, NextSubscribe,
};
use async_graphql::{Request, Response, ServerResult};
use futures_util::stream::{self, BoxStream, StreamExt};

use crate::auth::Credential;
use crate::auth::caller::Principal;
use crate::auth::credentials as middleware;
use crate::auth::ws::ConnectionSlot;
use crate::state::AppState;

/// Connection data of one GraphQL WebSocket.
pub struct WsConnection {
    pub credential: Credential,
    pub operations: Arc<AtomicUsize>,
    pub max_operations: usize,
    pub _slot: ConnectionSlot,
}

struct OperationSlot(Arc<AtomicUsize>);

impl Drop for OperationSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The schema extension that applies the above (a no-op for plain HTTP requests).
pub struct WsGuard;

impl ExtensionFactory for WsGuard {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(WsGuardExtension::default())
    }
}

#[derive(Default)]
struct WsGuardExtension {
    /// The caller this operation started with: (user, role, domain).
    started_as: Arc<Mutex<Option<Identity>>>,
}

type Identity = (uuid::Uuid, entity::enums::UserRole, String);

fn identity(p: &Principal) -> Option<Identity> {
    match p {
        Principal::Anonymous => None,
        Principal::User(c) => Some((c.uuid, c.role, c.domain_name.clone())),
    }
}

fn shutting_down() -> Response {
    Response::from_errors(vec![crate::graphql::context::server_error(
        crate::error::ApiError::new(
            crate::error::ErrorCode::Unavailable,
            "The server is shutting down; subscribe again when it is back.",
        ),
    )])
}

fn revoked() -> Response {
    Response::from_errors(vec![crate::graphql::context::server_error(
        crate::error::ApiError::unauthenticated(
            "Your credentials were revoked or changed; subscribe again after logging in.",
        ),
    )])
}

#[async_graphql::async_trait::async_trait]
impl Extension for WsGuardExtension {
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        mut request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        if let (Some(conn), Some(state)) =
            (ctx.data_opt::<WsConnection>(), ctx.data_opt::<AppState>())
        {
            let principal = middleware::reresolve(state, &conn.credential, true)
                .await
                .map_err(crate::graphql::context::server_error)?;
            *self.started_as.lock() = identity(&principal);
            request.data.insert(principal);
        }
        next.run(ctx, request).await
    }

    fn subscribe<'s>(
        &self,
        ctx: &ExtensionContext<'_>,
        stream: BoxStream<'s, Response>,
        next: NextSubscribe<'_>,
    ) -> BoxStream<'s, Response> {
        let stream = next.run(ctx, stream);
        let (Some(conn), Some(state)) =
            (ctx.data_opt::<WsConnection>(), ctx.data_opt::<AppState>())
        else {
            return stream;
        };
        if conn.operations.fetch_add(1, Ordering::SeqCst) >= conn.max_operations {
            conn.operations.fetch_sub(1, Ordering::SeqCst);
            let e = crate::error::ApiError::new(
                crate::error::ErrorCode::RateLimited,
                format!(
                    "At most {} operations may run at once on one connection.",
                    conn.max_operations
                ),
            );
            return stream::once(async move {
                Response::from_errors(vec![crate::graphql::context::server_error(e)])
            })
            .boxed();
        }
        let slot = OperationSlot(conn.operations.clone());
        let credential = conn.credential.clone();
        let state = state.clone();
        let started_as = self.started_as.clone();
        let checked = state.shared.revocations.current();
        let stopping = state.shutdown.clone();
        let revocations = state.shared.revocations.watch();
        // Whenever anything is revoked (here or on another manager), the credential is proven
        // again at once, not at the next item: a failure or a different identity ends the
        // stream even when it is quiet.
        stream::unfold(
            (stream, slot, checked, revocations, false),
            move |(mut inner, slot, mut checked, mut revocations, done)| {
                let state = state.clone();
                let credential = credential.clone();
                let started_as = started_as.clone();
                let stopping = stopping.clone();
                async move {
                    if done {
                        return None;
                    }
                    loop {
                        let item = tokio::select! {
                            item = inner.next() => Some(item?),
                            _ = stopping.cancelled() => {
                                return Some((shutting_down(), (inner, slot, checked, revocations, true)));
                            }
                            changed = revocations.changed() => {
                                if changed.is_err() {
                                    // The counter is gone with the server: nothing more to watch.
                                    return None;
                                }
                                // The one revocation since the last check was someone else's:
                                // nothing to prove (thousands of streams are not re-proven for
                                // one user's logout).
                                let (count, whose) = *revocations.borrow_and_update();
                                let mine = started_as.lock().as_ref().map(|i| i.0);
                                if count == checked + 1 && whose.is_some() && whose != mine {
                                    checked = count;
                                }
                                None
                            }
                        };
                        let now = state.shared.revocations.current();
                        if now != checked {
                            checked = now;
                            let before = started_as.lock().clone();
                            let ok = match middleware::reresolve(&state, &credential, false).await {
                                Ok(p) => identity(&p) == before,
                                Err(e) => {
                                    // Revoked (logged at debug), or a failure worth the log.
                                    crate::error::leaving(e);
                                    false
                                }
                            };
                            if !ok {
                                return Some((revoked(), (inner, slot, checked, revocations, true)));
                            }
                        }
                        if let Some(item) = item {
                            return Some((item, (inner, slot, checked, revocations, false)));
                        }
                    }
                }
            },
        )
        .boxed()
    }
}
