//! The one error type every handler and hoop returns, rendered as SPEC.md's JSON bodies.
//!
//! Every error body has `message` and a stable snake_case `code`; a 422 adds `errors`
//! (field -> messages). A failed login is the one exception: exactly
//! `{"message": "Invalid credentials"}`. Internals never reach the client: a 500 logs the
//! cause and answers a generic message.

use std::collections::BTreeMap;

use salvo::http::StatusCode;
use salvo::http::header::{HeaderValue, RETRY_AFTER};
use salvo::prelude::*;
use serde_json::json;

/// Field name -> messages, ordered so answers are stable.
pub type FieldErrors = BTreeMap<String, Vec<String>>;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("invalid credentials")]
    InvalidCredentials,
    #[error("unauthenticated")]
    Unauthenticated,
    #[error("{message}")]
    Forbidden { code: &'static str, message: String },
    #[error("not found")]
    NotFound,
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// A 409 whose body says more: the record's `status`, the `conflicts`, the `shortages`.
    #[error("{message}")]
    ConflictWith { code: &'static str, message: String, details: serde_json::Map<String, serde_json::Value> },
    #[error("precondition failed")]
    PreconditionFailed,
    #[error("request timeout")]
    RequestTimeout,
    #[error("payload too large")]
    PayloadTooLarge,
    #[error("unsupported media type")]
    UnsupportedMediaType,
    #[error("validation failed")]
    Validation(FieldErrors),
    #[error("rate limited")]
    RateLimited { limit: u32, retry_after_secs: u64 },
    #[error("{message}")]
    Unavailable { code: &'static str, message: String },
    #[error("internal: {0:#}")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::BadRequest { code, message: message.into() }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::Forbidden { code: "forbidden", message: message.into() }
    }

    /// A 422 with one message on one field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut errors = FieldErrors::new();
        errors.entry(field.into()).or_default().push(message.into());
        Self::Validation(errors)
    }

    pub fn conflict_with(
        code: &'static str,
        message: impl Into<String>,
        details: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Self {
        Self::ConflictWith { code, message: message.into(), details: details.into_iter().collect() }
    }

    pub fn unavailable(code: &'static str, message: impl Into<String>) -> Self {
        Self::Unavailable { code, message: message.into() }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::InvalidCredentials | Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Conflict { .. } | Self::ConflictWith { .. } => StatusCode::CONFLICT,
            Self::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn body(&self) -> serde_json::Value {
        match self {
            Self::InvalidCredentials => json!({ "message": "Invalid credentials" }),
            Self::Validation(errors) => json!({
                "message": validation_message(errors),
                "code": "validation_failed",
                "errors": errors,
            }),
            Self::ConflictWith { code, message, details } => {
                let mut body = details.clone();
                body.insert("message".into(), json!(message));
                body.insert("code".into(), json!(code));
                serde_json::Value::Object(body)
            }
            other => {
                let (code, message): (&str, String) = match other {
                    Self::BadRequest { code, message }
                    | Self::Forbidden { code, message }
                    | Self::Conflict { code, message }
                    | Self::Unavailable { code, message } => (code, message.clone()),
                    Self::Unauthenticated => ("unauthenticated", "Unauthenticated.".into()),
                    Self::NotFound => ("not_found", "Resource not found.".into()),
                    Self::PreconditionFailed => (
                        "precondition_failed",
                        "The record was changed by someone else; reload it and try again.".into(),
                    ),
                    Self::PayloadTooLarge => ("payload_too_large", "The request body is too large.".into()),
                    Self::RequestTimeout => {
                        ("request_timeout", "The request body did not arrive in time.".into())
                    }
                    Self::UnsupportedMediaType => {
                        ("unsupported_media_type", "Send the request body as application/json.".into())
                    }
                    Self::RateLimited { .. } => {
                        ("rate_limited", "Too many requests. Try again later.".into())
                    }
                    Self::Internal(_) => ("internal_error", "Internal server error.".into()),
                    Self::InvalidCredentials | Self::Validation(_) | Self::ConflictWith { .. } => {
                        unreachable!()
                    }
                };
                json!({ "message": message, "code": code })
            }
        }
    }
}

/// Laravel-style summary: the first message, plus how many more there are.
fn validation_message(errors: &FieldErrors) -> String {
    let total: usize = errors.values().map(Vec::len).sum();
    match errors.values().flatten().next() {
        None => "The given data was invalid.".into(),
        Some(first) if total == 1 => first.clone(),
        Some(first) => format!("{first} (and {} more error{})", total - 1, if total == 2 { "" } else { "s" }),
    }
}

/// Writes a JSON body with the given status.
pub fn render_json(res: &mut Response, status: StatusCode, body: &serde_json::Value) {
    res.status_code(status);
    res.render(Json(body));
}

impl Scribe for ApiError {
    fn render(self, res: &mut Response) {
        if let Self::Internal(cause) = &self {
            tracing::error!(error = format!("{cause:#}"), "request failed");
        }
        if let Self::RateLimited { limit, retry_after_secs } = &self {
            let headers = res.headers_mut();
            headers.insert(RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            headers.insert("x-ratelimit-limit", HeaderValue::from(*limit));
            headers.insert("x-ratelimit-remaining", HeaderValue::from(0u32));
        }
        render_json(res, self.status(), &self.body());
    }
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Internal(anyhow::Error::new(e).context("database"))
    }
}

impl From<deadpool_postgres::PoolError> for ApiError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Timeout(_) => {
                tracing::warn!("no database connection free in time");
                Self::unavailable("database_busy", "The service is busy; try again shortly.")
            }
            other => Self::Internal(anyhow::Error::new(other).context("database pool")),
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
