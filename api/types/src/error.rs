//! Error codes every surface sends: GraphQL `extensions.code`, the REST problem+json `code`
//! and `type`. The console reads the same codes.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    BadRequest,
    Unauthenticated,
    PasswordChangeRequired,
    Forbidden,
    NotFound,
    Conflict,
    RateLimited,
    MethodNotAllowed,
    PayloadTooLarge,
    Unavailable,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "BAD_REQUEST",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::PasswordChangeRequired => "PASSWORD_CHANGE_REQUIRED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::Unavailable => "SERVICE_UNAVAILABLE",
            ErrorCode::Internal => "INTERNAL_SERVER_ERROR",
        }
    }

    /// The HTTP status a REST answer with this code has.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthenticated | ErrorCode::PasswordChangeRequired => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::Conflict => 409,
            ErrorCode::RateLimited => 429,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::Unavailable => 503,
            ErrorCode::Internal => 500,
        }
    }

    /// Backend.AI's `error_code` for an error of this kind (`<domain>_<operation>_<detail>`, as
    /// its manager's generic exceptions name them: `InvalidAPIParameters`,
    /// `AuthorizationFailed`, `GenericForbidden`, `ObjectNotFound`, `RateLimitExceeded`,
    /// `MethodNotAllowed`, `ServiceUnavailable`, `InternalServerError`); a refusal Backend.AI
    /// names more precisely carries its own (`ApiError::with_error_code`).
    pub fn backend_ai_error_code(self) -> &'static str {
        match self {
            ErrorCode::BadRequest | ErrorCode::PayloadTooLarge => "api_generic_invalid-parameters",
            ErrorCode::Unauthenticated | ErrorCode::PasswordChangeRequired => {
                "user_auth_unauthorized"
            }
            ErrorCode::Forbidden => "backendai_generic_forbidden",
            ErrorCode::NotFound => "backendai_read_not-found",
            ErrorCode::Conflict => "backendai_generic_conflict",
            ErrorCode::RateLimited => "api_access_unavailable",
            ErrorCode::MethodNotAllowed => "api_access_forbidden",
            ErrorCode::Unavailable => "backendai_generic_unavailable",
            ErrorCode::Internal => "backendai_generic_internal-error",
        }
    }

    /// Backend.AI's problem type slug (`https://api.backend.ai/probs/<slug>`).
    pub fn problem_slug(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "invalid-api-params",
            ErrorCode::Unauthenticated => "auth-failed",
            ErrorCode::PasswordChangeRequired => "password-change-required",
            ErrorCode::Forbidden => "generic-forbidden",
            ErrorCode::NotFound => "object-not-found",
            ErrorCode::Conflict => "generic-conflict",
            ErrorCode::RateLimited => "too-many-requests",
            ErrorCode::MethodNotAllowed => "method-not-allowed",
            ErrorCode::PayloadTooLarge => "request-too-large",
            ErrorCode::Unavailable => "service-unavailable",
            ErrorCode::Internal => "internal-server-error",
        }
    }
}

impl ErrorCode {
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::BadRequest,
        ErrorCode::Unauthenticated,
        ErrorCode::PasswordChangeRequired,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::RateLimited,
        ErrorCode::MethodNotAllowed,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unavailable,
        ErrorCode::Internal,
    ];

    /// The code of a `code` string as sent (None for codes this build does not know).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}
