//! One error type for every API surface. Each error carries a stable code, sent as GraphQL
//! `extensions.code` and as the REST problem+json `type`. Internal details (SQL, paths) are
//! logged, never sent.
use std::fmt;

use async_graphql::ErrorExtensions;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
pub use bai_types::error::ErrorCode;

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being served (None outside a request): carried in every error.
pub fn request_id() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Runs `fut` as the request `id` (set by the outermost layer, `observe::request_context`).
pub fn with_request_id<F: std::future::Future>(
    id: String,
    fut: F,
) -> tokio::task::futures::TaskLocalFuture<String, F> {
    REQUEST_ID.scope(id, fut)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// Extra HTTP headers of the REST answer (e.g. `Retry-After` on 429).
    pub headers: Vec<(&'static str, String)>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            headers: Vec::new(),
        }
    }
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn bad_request(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, m)
    }
    pub fn unauthenticated(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthenticated, m)
    }
    pub fn forbidden(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, m)
    }
    /// "No such X" — also what a caller gets for objects it may not see.
    pub fn not_found(what: &str, key: impl fmt::Display) -> Self {
        Self::new(ErrorCode::NotFound, format!("{what} '{key}' not found"))
    }
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, m)
    }
    /// Logs the real cause and returns an opaque internal error.
    /// The response carries a reference that finds the log line.
    pub fn internal(context: &str, cause: impl fmt::Display) -> Self {
        let reference = uuid::Uuid::new_v4();
        tracing::error!(%reference, error = %cause, "{context}");
        Self::new(
            ErrorCode::Internal,
            format!("internal error while {context} (reference {reference})"),
        )
    }
}

impl From<sea_orm::DbErr> for ApiError {
    fn from(e: sea_orm::DbErr) -> Self {
        if let Some(sea_orm::SqlErr::UniqueConstraintViolation(_)) = e.sql_err() {
            return ApiError::conflict("an object with the same name already exists");
        }
        if let Some(sea_orm::SqlErr::ForeignKeyConstraintViolation(_)) = e.sql_err() {
            return ApiError::conflict("the object is still referenced by other objects");
        }
        ApiError::internal("accessing the database", e)
    }
}

impl From<bai_types::slots::SlotError> for ApiError {
    fn from(e: bai_types::slots::SlotError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

// ApiError deliberately implements neither Display nor std::error::Error: async-graphql
// converts every Display type into an error without `extensions.code`, and this conversion,
// which keeps the code, must be the only one.
impl ApiError {
    /// As an error of the GraphQL engine (for extensions, which cannot return resolver errors).
    pub fn into_server_error(self) -> async_graphql::ServerError {
        let mut ext = async_graphql::ErrorExtensionValues::default();
        ext.set("code", self.code.as_str());
        let mut e = async_graphql::ServerError::new(self.message, None);
        e.extensions = Some(ext);
        e
    }
}

impl From<ApiError> for async_graphql::Error {
    fn from(e: ApiError) -> Self {
        let code = e.code.as_str();
        async_graphql::Error::new(e.message).extend_with(|_, ext| ext.set("code", code))
    }
}

/// REST errors as `application/problem+json`, shaped like Backend.AI's.
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = serde_json::json!({
            "type": format!("https://api.backend.ai/probs/{}", self.code.problem_slug()),
            "title": self.message,
            "code": self.code.as_str(),
        });
        if let Some(id) = request_id() {
            body["request_id"] = serde_json::Value::String(id);
        }
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, body.to_string()).into_response();
        resp.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/problem+json"),
        );
        for (name, value) in &self.headers {
            if let Ok(v) = axum::http::HeaderValue::from_str(value) {
                resp.headers_mut().insert(*name, v);
            }
        }
        resp
    }
}
