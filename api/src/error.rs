//! Errors as the surfaces send them: a REST problem+json document (`Problem`) or a GraphQL
//! error with `extensions.code` (`graphql::GqlError`). Both go through `leaving`, which gives
//! a database error its real code (`sql::classify`) and logs it with the request id.
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
pub use bai_core::error::*;

/// An error on its way out to a caller: classified, and logged once.
pub fn leaving(e: ApiError) -> ApiError {
    let e = crate::sql::classify(e);
    e.report();
    e
}

/// A REST answer for an error: `application/problem+json`, shaped like Backend.AI's.
pub struct Problem(ApiError);

impl From<ApiError> for Problem {
    fn from(e: ApiError) -> Self {
        Problem(leaving(e))
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let e = self.0;
        let mut body = serde_json::json!({
            "type": format!("https://api.backend.ai/probs/{}", e.code.problem_slug()),
            "title": e.message,
            "code": e.code.as_str(),
            "error_code": e.backend_ai_error_code(),
        });
        if let Some(id) = request_id() {
            body["request_id"] = serde_json::Value::String(id);
        }
        let status =
            StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, body.to_string()).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        for (name, value) in &e.headers {
            if let Ok(v) = HeaderValue::from_str(value) {
                resp.headers_mut().insert(*name, v);
            }
        }
        resp
    }
}

/// `e.into_response()` for an `ApiError` where a handler builds its answer by hand (the
/// trait is ours because the error type is layer 2's).
pub trait IntoProblem {
    fn into_response(self) -> Response;
}

impl IntoProblem for ApiError {
    fn into_response(self) -> Response {
        Problem::from(self).into_response()
    }
}
