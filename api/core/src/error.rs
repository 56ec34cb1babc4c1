//! One error type for every API surface. Each error carries a stable code, sent as GraphQL
//! `extensions.code` and as the REST problem+json `type`, and keeps its cause (`source`) for
//! the log. Internal details (SQL, paths) are logged with the request id when the error
//! leaves through a surface (`ApiError::report`), never sent.
//!
//! This layer knows no web, GraphQL or database framework: the surfaces turn an `ApiError`
//! into their answers (api's `error.rs`), and the services classify database errors they
//! own (`bai_services::db::classify`).
use std::any::Any;
use std::error::Error;
use std::fmt;
use std::sync::Arc;

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

/// What caused an error, kept for the log (shared, so the error stays `Clone`).
pub type Cause = Arc<dyn Error + Send + Sync>;

#[derive(Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// Extra HTTP headers of the REST answer (e.g. `Retry-After` on 429).
    pub headers: Vec<(&'static str, String)>,
    /// Backend.AI's `error_code` where it names this refusal more precisely than the code's
    /// default (`ErrorCode::backend_ai_error_code`).
    pub error_code: Option<&'static str>,
    source: Option<Cause>,
}

pub type ApiResult<T> = Result<T, ApiError>;

/// Two errors are the same answer when code, message and headers agree; the cause is only
/// for the log.
impl PartialEq for ApiError {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.message == other.message && self.headers == other.headers
    }
}
impl Eq for ApiError {}

impl fmt::Debug for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiError")
            .field("code", &self.code)
            .field("message", &self.message)
            .field("cause", &self.chain().to_string())
            .finish()
    }
}

/// An error's cause and the causes of that, `: `-separated (for the log).
pub struct Chain<'a>(Option<&'a (dyn Error + 'static)>);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut next = self.0;
        let mut first = true;
        while let Some(e) = next {
            if !first {
                f.write_str(": ")?;
            }
            write!(f, "{e}")?;
            first = false;
            next = e.source();
        }
        Ok(())
    }
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            headers: Vec::new(),
            error_code: None,
            source: None,
        }
    }
    /// Names this refusal as Backend.AI's manager does (`session_create_unavailable`, …).
    pub fn with_error_code(mut self, code: &'static str) -> Self {
        self.error_code = Some(code);
        self
    }
    /// Backend.AI's `error_code` of this error.
    pub fn backend_ai_error_code(&self) -> &'static str {
        self.error_code
            .unwrap_or_else(|| self.code.backend_ai_error_code())
    }
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
    /// Keeps `cause` as this error's source (logged, never sent).
    pub fn with_source(mut self, cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        self.source = Some(Arc::from(cause.into()));
        self
    }
    /// What caused this error, if anything did.
    pub fn source(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
    /// The message and, after it, the cause chain (for an operator: the CLI, start-up).
    pub fn describe(&self) -> String {
        match &self.source {
            Some(_) => format!("{} ({})", self.message, self.chain()),
            None => self.message.clone(),
        }
    }
    /// The cause and its causes, for the log.
    pub fn chain(&self) -> Chain<'_> {
        Chain(self.source.as_deref().map(|e| e as &(dyn Error + 'static)))
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
    /// An opaque internal error keeping its real cause for the log; the answer carries a
    /// reference that finds the log line (`report`).
    pub fn internal(context: &str, cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        let reference = uuid::Uuid::new_v4();
        Self::new(
            ErrorCode::Internal,
            format!("internal error while {context} (reference {reference})"),
        )
        .with_source(cause)
    }

    /// Logs the error as it leaves (through a surface, or dropped by a background task):
    /// internal errors at ERROR with their cause chain and the request id, others at DEBUG.
    pub fn report(&self) {
        let request = request_id();
        let request = request.as_deref().unwrap_or("-");
        if self.code == ErrorCode::Internal {
            tracing::error!(request_id = request, cause = %self.chain(), "{}", self.message);
        } else {
            tracing::debug!(request_id = request, code = self.code.as_str(), cause = %self.chain(), "{}", self.message);
        }
    }
}

/// Any error that is not one of ours is internal, kept as the cause. Bad resource slots
/// (layer 1's `SlotError`) are the caller's mistake. Database errors are classified where the
/// database is known (`bai_services::db::classify`: a unique-key clash is a CONFLICT).
impl<E: Error + Send + Sync + 'static> From<E> for ApiError {
    fn from(e: E) -> Self {
        if let Some(slot) = (&e as &dyn Any).downcast_ref::<bai_types::slots::SlotError>() {
            return ApiError::bad_request(slot.to_string());
        }
        ApiError::internal("serving the request", e)
    }
}

// ApiError deliberately implements neither Display nor std::error::Error: async-graphql
// converts every Display type into an error without `extensions.code`, and the surfaces'
// conversion, which keeps the code, must be the only one. (Not being an Error also keeps the
// blanket conversion above from swallowing one ApiError into another.)

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Inner;
    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("disk on fire")
        }
    }
    impl Error for Inner {}

    #[derive(Debug)]
    struct Outer(Inner);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("writing a block")
        }
    }
    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    fn fails() -> ApiResult<()> {
        Err(Outer(Inner))?
    }

    #[test]
    fn a_foreign_error_is_internal_and_keeps_its_chain() {
        let e = fails().unwrap_err();
        assert_eq!(e.code, ErrorCode::Internal);
        assert!(e.message.contains("reference"), "{}", e.message);
        assert!(
            !e.message.contains("fire"),
            "the cause is never sent: {}",
            e.message
        );
        assert_eq!(e.chain().to_string(), "writing a block: disk on fire");
        assert!(e.source().is_some_and(|s| s.is::<Outer>()));
    }

    #[test]
    fn bad_slots_are_the_callers_mistake() {
        let slot = bai_types::slots::parse_amount("cpu", "lots").unwrap_err();
        let e = ApiError::from(slot);
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert!(e.source().is_none());
    }

    #[test]
    fn equality_ignores_the_cause() {
        let a = ApiError::bad_request("x").with_source("one");
        let b = ApiError::bad_request("x").with_source("two");
        assert_eq!(a, b);
        assert_eq!(a.chain().to_string(), "one");
    }
}
