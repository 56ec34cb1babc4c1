//! `/user-config/dotfiles`, `/group-config/dotfiles`, `/domain-config/dotfiles`: Backend.AI's
//! dotfiles for its official client (`backend.ai dotfile …`). GET lists (or, with `path`,
//! answers one file), POST creates, PATCH changes, DELETE removes. Whose dotfiles the
//! route and `owner_access_key` / `group` (+ `domain`) / `domain` say; someone who may not see
//! that owner gets NOT_FOUND (`bai_services::dotfiles`).
use std::collections::HashMap;

use axum::extract::{MatchedPath, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;

use super::session_calls::{Params, string};
use super::{caller, reply};
use crate::auth::Principal;
use crate::dotfiles::{self, Change, Dotfile, Named};
use crate::error::ApiError;
use crate::state::AppState;

pub(super) async fn dotfiles(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    method: Method,
    route: MatchedPath,
    Query(query): Query<HashMap<String, String>>,
    Params(p): Params,
) -> Response {
    reply(
        async {
            let caller = caller(&principal)?;
            let named = match route.as_str() {
                "/group-config/dotfiles" => Named {
                    group: Some(string(&p, &["group"]).ok_or_else(|| {
                        ApiError::bad_request("'group' (a project's name or id) is required")
                    })?),
                    domain: string(&p, &["domain"]),
                    ..Named::default()
                },
                "/domain-config/dotfiles" => Named {
                    domain: Some(string(&p, &["domain"]).ok_or_else(|| {
                        ApiError::bad_request("'domain' (a domain's name) is required")
                    })?),
                    ..Named::default()
                },
                // The 26.x client's list spells it `onwer_access_key`; the query's is read
                // here (the parameters leave it to the session calls' own extractor).
                _ => Named {
                    owner_access_key: string(&p, &["owner_access_key", "onwer_access_key"])
                        .or_else(|| query.get("owner_access_key").cloned()),
                    ..Named::default()
                },
            };
            let write = method != Method::GET;
            let owner = dotfiles::resolve(&state, caller, &named, write).await?;
            let path = string(&p, &["path"]);
            let file = || -> crate::error::ApiResult<Dotfile> {
                Ok(Dotfile {
                    path: path
                        .clone()
                        .ok_or_else(|| ApiError::bad_request("'path' is required"))?,
                    permission: string(&p, &["permission"]).unwrap_or_else(|| "755".into()),
                    data: string(&p, &["data"])
                        .ok_or_else(|| ApiError::bad_request("'data' is required"))?,
                })
            };
            Ok(match method {
                Method::GET => match &path {
                    Some(path) => Json(dotfiles::get(&state, &owner, path).await?),
                    None => {
                        return Ok(Json(dotfiles::list(&state, &owner).await?).into_response());
                    }
                }
                .into_response(),
                Method::POST => {
                    dotfiles::change(&state, &owner, Change::Create(file()?)).await?;
                    Json(json!({})).into_response()
                }
                Method::PATCH => {
                    dotfiles::change(&state, &owner, Change::Update(file()?)).await?;
                    Json(json!({})).into_response()
                }
                _ => {
                    let path = path.ok_or_else(|| ApiError::bad_request("'path' is required"))?;
                    dotfiles::change(&state, &owner, Change::Delete(path)).await?;
                    Json(json!({"success": true})).into_response()
                }
            })
        }
        .await,
    )
}
