//! `/auth/authorize`: email and password for the user's main keypair (anonymous).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use entity::enums::UserRole;
use entity::{keypairs, users};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
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
            let user =
                crate::accounts::check_credentials(&state, &body.username, &body.password, addr.0)
                    .await?;
            // The keypair's secret is a credential like a login session: not before a forced
            // password change is done.
            crate::accounts::usable(&state, &user).await?;
            let mut keys = keypairs::Entity::find()
                .filter(keypairs::Column::User.eq(user.uuid))
                .filter(keypairs::Column::IsActive.eq(true))
                .order_by_asc(keypairs::Column::CreatedAt)
                .all(&state.db)
                .await?;
            let pick = keys
                .iter()
                .position(|k| Some(&k.access_key) == user.main_access_key.as_ref())
                .unwrap_or(0);
            if keys.is_empty() {
                return Err(ApiError::not_found("keypair", &body.username));
            }
            let k = keys.swap_remove(pick);
            Ok(Json(json!({"data": {
                "access_key": k.access_key,
                "secret_key": k.secret_key,
                "role": role_name(&user),
                "status": user.status.as_str(),
            }}))
            .into_response())
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
