//! `/auth/authorize`: email and password for the user's main keypair (anonymous).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use entity::enums::UserRole;
use entity::users;
use serde::Deserialize;
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

use super::reply;

#[derive(Deserialize)]
pub(super) struct Authorize {
    #[serde(rename = "type")]
    kind: String,
    username: String,
    password: String,
}

/// `POST /auth/authorize` (anonymous): email + password → the user's main keypair.
pub(super) async fn authorize(
    State(state): State<AppState>,
    Extension(addr): Extension<crate::auth::ClientAddr>,
    Json(body): Json<Authorize>,
) -> Response {
    reply(
        async {
            if body.kind != "keypair" {
                return Err(ApiError::bad_request(format!(
                    "Unsupported authorization type '{}' (keypair)",
                    body.kind
                )));
            }
            // A login session too, as Backend.AI's web servers expect one (`session_token`):
            // the keypair's secret is a credential like it, handed out only after a forced
            // password change is done (`accounts::login` checks it).
            let login = crate::accounts::login(
                &state,
                &body.username,
                &body.password,
                addr.0,
                Some("Backend.AI web server (/auth/authorize)".into()),
            )
            .await?;
            let user = login.user;
            let Some(k) = crate::keypairs::preferred(&state.read, &user).await? else {
                return Err(ApiError::not_found("keypair", &body.username));
            };
            Ok(Json(json!({"data": {
                "response_type": "success",
                "access_key": k.access_key,
                "secret_key": k.secret_key,
                "role": role_name(&user),
                "status": user.status.as_str(),
                "user_id": user.uuid,
                "session_token": login.token,
            }}))
            .into_response())
        }
        .await,
    )
}

#[derive(Deserialize)]
pub(super) struct Logout {
    session_token: String,
}

/// `POST /auth/logout` (signed by the user's keypair, as Backend.AI's web servers send it):
/// ends the login session `/auth/authorize` gave; another user's token ends nothing.
pub(super) async fn logout(
    State(state): State<AppState>,
    Extension(principal): Extension<crate::auth::Principal>,
    Json(body): Json<Logout>,
) -> Response {
    reply(
        async {
            let caller = super::caller(&principal)?;
            crate::accounts::logout_token(&state, caller, &body.session_token).await?;
            Ok(Json(json!({})).into_response())
        }
        .await,
    )
}

fn role_name(u: &users::Model) -> &'static str {
    match u.role {
        UserRole::Superadmin => "superadmin",
        UserRole::Admin => "admin",
        UserRole::User => "user",
        UserRole::Monitor => "monitor",
    }
}
