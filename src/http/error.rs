//! The one error type every handler and hoop returns, rendered as the API's JSON bodies.
//!
//! Every error body has `message` and a stable snake_case `code`; a 422 adds `errors`
//! (field -> messages). A failed login is the one exception: exactly
//! `{"message": "Invalid credentials"}`. Internals never reach the client: a 500 logs the
//! cause and answers a generic message.

use std::collections::BTreeMap;

use salvo::http::StatusCode;
use salvo::http::header::{HeaderValue, RETRY_AFTER};
use salvo::prelude::*;
use serde::Deserialize;
use serde_json::json;

/// What a replayed answer's ETag comes from: the version of the record it holds.
#[derive(Deserialize)]
struct Versioned {
    data: Version,
}

#[derive(Deserialize)]
struct Version {
    version: i64,
}

/// Field name -> messages, ordered so answers are stable.
pub type FieldErrors = BTreeMap<String, Vec<String>>;

/// What taking a pooled connection fails with.
type PoolError = deadpool::managed::PoolError<tokio_postgres::Error>;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("invalid credentials")]
    InvalidCredentials,
    #[error("unauthenticated")]
    Unauthenticated,
    /// A 401 that says what is missing or wrong (a login's second factor).
    #[error("{message}")]
    Unauthorized { code: &'static str, message: String },
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
    /// A 4xx of its own with a stable code: an upload too large for the route or the branch's
    /// quota (413), a file of a kind the route does not take (415), a range past the end (416).
    #[error("{message}")]
    Refusal { status: StatusCode, code: &'static str, message: String },
    #[error("validation failed")]
    Validation(FieldErrors),
    /// A 422 on a field whose `code` says why, for clients that act on the reason (an
    /// appointment outside the doctor's hours is `outside_hours`).
    #[error("{code}")]
    Refused { code: &'static str, errors: FieldErrors },
    #[error("rate limited")]
    RateLimited { limit: u32, retry_after_secs: u64 },
    #[error("not acceptable")]
    NotAcceptable,
    /// A 406 for a record that has no printed form (a refraction that is not a final one):
    /// the message says why; its JSON is still there.
    #[error("{0}")]
    NotPrintable(String),
    /// 503 with `Retry-After`: the database is busy, out of reach, or the branch is under
    /// maintenance; the same request may succeed shortly.
    #[error("{message}")]
    Unavailable { code: &'static str, message: String, retry_after_secs: u32 },
    /// A serialization failure or deadlock: the request is run again (see `http::guard`);
    /// past the retries it is a 503 `write_conflict`.
    #[error("serialization failure or deadlock")]
    Contended,
    /// A record that was merged into another (a duplicate patient): a read of it is sent to
    /// the one it was merged into (301 with `Location`), a write naming it is 410.
    #[error("merged into {into}")]
    Merged { into: i64, location: Option<String>, write: bool },
    /// The first answer to a request's `Idempotency-Key`, given again instead of running it.
    #[error("replayed answer")]
    Replayed { status: u16, body: serde_json::Value },
    #[error("internal: {0:#}")]
    Internal(#[from] anyhow::Error),
}

/// Set on a response whose request met a serialization failure or a deadlock, so that the
/// route's guard runs it again.
#[derive(Debug, Clone, Copy)]
pub struct Retryable;

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

    /// A 422 with one message on one field, under its own `code`.
    pub fn refused(code: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut errors = FieldErrors::new();
        errors.entry(field.into()).or_default().push(message.into());
        Self::Refused { code, errors }
    }

    pub fn conflict_with(
        code: &'static str,
        message: impl Into<String>,
        details: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Self {
        Self::ConflictWith { code, message: message.into(), details: details.into_iter().collect() }
    }

    /// A 503 that a retry a second later may cure.
    pub fn unavailable(code: &'static str, message: impl Into<String>) -> Self {
        Self::Unavailable { code, message: message.into(), retry_after_secs: 1 }
    }

    /// The database cannot be reached (down, restarting, refusing connections).
    pub fn database_unavailable() -> Self {
        Self::Unavailable {
            code: "database_unavailable",
            message: "The database is not reachable right now; try again shortly.".into(),
            retry_after_secs: 5,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::InvalidCredentials | Self::Unauthenticated | Self::Unauthorized { .. } => {
                StatusCode::UNAUTHORIZED
            }
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Conflict { .. } | Self::ConflictWith { .. } => StatusCode::CONFLICT,
            Self::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Refusal { status, .. } => *status,
            Self::Validation(_) | Self::Refused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::NotAcceptable | Self::NotPrintable(_) => StatusCode::NOT_ACCEPTABLE,
            Self::Unavailable { .. } | Self::Contended => StatusCode::SERVICE_UNAVAILABLE,
            Self::Merged { write: false, .. } => StatusCode::MOVED_PERMANENTLY,
            Self::Merged { write: true, .. } => StatusCode::GONE,
            Self::Replayed { status, .. } => StatusCode::from_u16(*status).unwrap_or(StatusCode::OK),
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn body(&self) -> serde_json::Value {
        match self {
            Self::InvalidCredentials => json!({ "message": "Invalid credentials" }),
            Self::Replayed { body, .. } => body.clone(),
            Self::Validation(errors) => json!({
                "message": validation_message(errors),
                "code": "validation_failed",
                "errors": errors,
            }),
            Self::Refused { code, errors } => json!({
                "message": validation_message(errors),
                "code": code,
                "errors": errors,
            }),
            Self::Merged { into, location, write } => {
                let message = if *write {
                    format!("This record was merged into record {into}; write to that one instead.")
                } else {
                    format!("This record was merged into record {into}.")
                };
                let mut body = json!({ "message": message, "code": "merged", "merged_into_id": into });
                if let Some(location) = location {
                    body["location"] = json!(location);
                }
                body
            }
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
                    | Self::Unauthorized { code, message }
                    | Self::Conflict { code, message }
                    | Self::Refusal { code, message, .. }
                    | Self::Unavailable { code, message, .. } => (code, message.clone()),
                    Self::Contended => (
                        "write_conflict",
                        "The request collided with concurrent changes; try again shortly.".into(),
                    ),
                    Self::NotAcceptable => (
                        "not_acceptable",
                        "This route cannot answer in any media type the Accept header allows.".into(),
                    ),
                    Self::NotPrintable(message) => ("not_printable", message.clone()),
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
                    Self::InvalidCredentials
                    | Self::Validation(_)
                    | Self::Refused { .. }
                    | Self::ConflictWith { .. }
                    | Self::Merged { .. }
                    | Self::Replayed { .. } => unreachable!(),
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
        // A database error that reached here through `anyhow` is classified like one
        // converted directly: an outage or a conflict is never a 500.
        let this = match self {
            Self::Internal(cause) => classify_cause(cause),
            other => other,
        };
        match &this {
            Self::Internal(cause) => tracing::error!(error = format!("{cause:#}"), "request failed"),
            Self::RateLimited { limit, retry_after_secs } => {
                let headers = res.headers_mut();
                headers.insert(RETRY_AFTER, HeaderValue::from(*retry_after_secs));
                headers.insert("x-ratelimit-limit", HeaderValue::from(*limit));
                headers.insert("x-ratelimit-remaining", HeaderValue::from(0u32));
            }
            Self::Unavailable { retry_after_secs, .. } => {
                res.headers_mut().insert(RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            Self::Contended => {
                res.headers_mut().insert(RETRY_AFTER, HeaderValue::from(1u32));
                res.extensions.insert(Retryable);
            }
            Self::Merged { location: Some(location), write: false, .. } => {
                if let Ok(value) = HeaderValue::from_str(location) {
                    res.headers_mut().insert(salvo::http::header::LOCATION, value);
                }
            }
            Self::Replayed { body, .. } => {
                if let Ok(Versioned { data: Version { version } }) = Versioned::deserialize(body)
                    && let Ok(tag) = HeaderValue::from_str(&format!("\"{version}\""))
                {
                    res.headers_mut().insert(salvo::http::header::ETAG, tag);
                }
                res.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
            }
            _ => {}
        }
        render_json(res, this.status(), &this.body());
    }
}

/// The SQLSTATE the schemas raise for a row written for a merged record.
pub const MERGED_SQLSTATE: &str = "MG410";

/// Counts the writes that met an audit log without a partition for their month: each walk
/// that makes the months (`tenancy::audit_months`) watches it and runs at once, not at its
/// next turn. A watch, not a wake-up: a walk busy when it moves still sees it afterwards.
pub static AUDIT_MONTH_MISSING: std::sync::LazyLock<tokio::sync::watch::Sender<u64>> =
    std::sync::LazyLock::new(|| tokio::sync::watch::Sender::new(0));

/// Tells the walks that a month is missing.
pub fn audit_month_missing() {
    AUDIT_MONTH_MISSING.send_modify(|n| *n = n.wrapping_add(1));
}

/// Whether `e` says a row found no partition of its partitioned table to go to.
pub fn is_no_partition(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(no_partition)
}

fn no_partition(db: &tokio_postgres::error::DbError) -> bool {
    db.code() == &tokio_postgres::error::SqlState::CHECK_VIOLATION
        && db.message().starts_with("no partition of relation")
}

/// What a database error means for the client: a serialization failure or deadlock is
/// retried, an outage or an overloaded server is a 503, anything else stays internal.
///
/// An outage is anything that says the connection or the server is gone or not taking work:
/// the connection broke or was closed (no SQLSTATE), the server is shutting down, starting up
/// or recovering (57P01, 57P02, 57P03), a connection exception (class 08), the server ran out
/// of a resource (class 53: connections, memory, disk) or failed a system call (class 58),
/// it is read-only (a standby after a failover), or it ended the session (FATAL or PANIC).
fn classify_database(e: &tokio_postgres::Error) -> Option<ApiError> {
    use tokio_postgres::error::{Severity, SqlState};
    let Some(db) = e.as_db_error() else {
        return connection_fault(e).then(ApiError::database_unavailable);
    };
    let code = db.code();
    if code.code() == MERGED_SQLSTATE {
        // A row written for a merged patient (a trigger of the schema refuses it); the
        // detail is the id of the patient it was merged into.
        // The triggers guard references to patients only, so the survivor is a patient.
        let into: i64 = db.detail().and_then(|d| d.parse().ok()).unwrap_or_default();
        let location = (into > 0).then(|| format!("/api/v1/patients/{into}"));
        return Some(ApiError::Merged { into, location, write: true });
    }
    if code == &SqlState::T_R_SERIALIZATION_FAILURE || code == &SqlState::T_R_DEADLOCK_DETECTED {
        return Some(ApiError::Contended);
    }
    if no_partition(db) {
        // Only the audit logs are partitioned: their months are made ahead, and this one was
        // not (the walk failed for a week, or the clocks disagree). It is made now.
        tracing::error!(error = %e, "an audit record has no month to go to; making the months now");
        audit_month_missing();
        return Some(ApiError::unavailable(
            "audit_month_missing",
            "The audit log is being readied for the new month; try again in a moment.",
        ));
    }
    if code == &SqlState::UNDEFINED_TABLE || code == &SqlState::INVALID_SCHEMA_NAME {
        // A branch connection routed to a schema that moved to another server (the old one
        // is renamed when it retires): the route is stale for a moment, not broken.
        tracing::warn!(error = %e, "a table or schema is missing; a branch may have moved");
        return Some(ApiError::unavailable(
            "branch_moved",
            "This branch has just moved to another database server; try again.",
        ));
    }
    if code == &SqlState::QUERY_CANCELED {
        return Some(ApiError::unavailable(
            "database_timeout",
            "The request took longer than the database allows; try again shortly.",
        ));
    }
    let class = &code.code()[..2];
    let outage = matches!(class, "08" | "53" | "58")
        || code == &SqlState::ADMIN_SHUTDOWN
        || code == &SqlState::CRASH_SHUTDOWN
        || code == &SqlState::CANNOT_CONNECT_NOW
        || code == &SqlState::DATABASE_DROPPED
        || code == &SqlState::IDLE_SESSION_TIMEOUT
        || code == &SqlState::READ_ONLY_SQL_TRANSACTION
        || matches!(db.parsed_severity(), Some(Severity::Fatal | Severity::Panic));
    outage.then(ApiError::database_unavailable)
}

/// Whether an error without a SQLSTATE is the connection's fault rather than the query's:
/// it broke or was closed, did not open, timed out, or the server's messages stopped making
/// sense (a connection cut mid-message). Errors of our own making (a parameter that does not
/// serialize, a column that does not read, a wrong row count) are not.
fn connection_fault(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()) {
        return true;
    }
    // The kind is private; its name leads the error's Debug form (`Error { kind: Io, .. }`).
    let shown = format!("{e:?}");
    let kind = shown
        .strip_prefix("Error { kind: ")
        .map(|rest| rest.split([',', '(', ' ']).next().unwrap_or_default())
        .unwrap_or_default();
    matches!(
        kind,
        "Io" | "Closed" | "Connect" | "Timeout" | "UnexpectedMessage" | "Parse" | "Tls" | "Authentication"
    )
}

fn classify_pool(e: &PoolError) -> ApiError {
    use deadpool::managed::TimeoutType;
    match e {
        // Every connection is in use: the database is up, this server is busy.
        PoolError::Timeout(TimeoutType::Wait) => {
            tracing::warn!("no database connection free in time");
            ApiError::unavailable("database_busy", "The service is busy; try again shortly.")
        }
        // A new connection did not open, or an idle one did not answer, in time.
        PoolError::Timeout(_) => {
            tracing::warn!(error = %e, "database connection timed out");
            ApiError::database_unavailable()
        }
        PoolError::Backend(db) => classify_database(db).unwrap_or_else(|| {
            tracing::warn!(error = %db, "could not open a database connection");
            ApiError::database_unavailable()
        }),
        // The pool was closed (shutting down), or a new connection failed its set-up.
        other => {
            tracing::warn!(error = %other, "database pool unavailable");
            ApiError::database_unavailable()
        }
    }
}

/// An internal error whose cause is a database or pool error that means something to the
/// client becomes that answer.
fn classify_cause(cause: anyhow::Error) -> ApiError {
    let known = cause.chain().find_map(|e| {
        if let Some(db) = e.downcast_ref::<tokio_postgres::Error>() {
            return classify_database(db);
        }
        e.downcast_ref::<PoolError>().map(classify_pool)
    });
    known.unwrap_or(ApiError::Internal(cause))
}

/// An error shared by every waiter of one cache load: the one owner gets it whole; the
/// others get what it means for the client (an outage stays a 503).
impl From<std::sync::Arc<ApiError>> for ApiError {
    fn from(shared: std::sync::Arc<ApiError>) -> Self {
        match std::sync::Arc::try_unwrap(shared) {
            Ok(error) => error,
            Err(shared) => match &*shared {
                Self::Unavailable { code, message, retry_after_secs } => {
                    Self::Unavailable { code, message: message.clone(), retry_after_secs: *retry_after_secs }
                }
                Self::Contended => Self::Contended,
                other => Self::Internal(anyhow::anyhow!("{other}")),
            },
        }
    }
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        classify_database(&e).unwrap_or_else(|| Self::Internal(anyhow::Error::new(e).context("database")))
    }
}

impl From<PoolError> for ApiError {
    fn from(e: PoolError) -> Self {
        classify_pool(&e)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use deadpool::managed::TimeoutType;

    use super::*;

    fn answer(error: ApiError) -> (u16, Option<String>, String) {
        let mut res = Response::new();
        error.render(&mut res);
        let retry_after = res.headers().get(RETRY_AFTER).map(|v| v.to_str().unwrap().to_owned());
        let code = match &res.body {
            salvo::http::ResBody::Once(bytes) => serde_json::from_slice::<serde_json::Value>(bytes).unwrap()
                ["code"]
                .as_str()
                .unwrap()
                .to_owned(),
            other => panic!("unexpected body {other:?}"),
        };
        (res.status_code.unwrap().as_u16(), retry_after, code)
    }

    #[test]
    fn every_pool_error_is_a_503_with_retry_after() {
        let unavailable = (503, Some("5".to_owned()), "database_unavailable".to_owned());
        for error in [
            PoolError::Timeout(TimeoutType::Create),
            PoolError::Timeout(TimeoutType::Recycle),
            PoolError::Closed,
            PoolError::NoRuntimeSpecified,
            PoolError::Backend(tokio_postgres::Error::__private_api_timeout()),
        ] {
            assert_eq!(answer(error.into()), unavailable);
        }
        assert_eq!(
            answer(PoolError::Timeout(TimeoutType::Wait).into()),
            (503, Some("1".to_owned()), "database_busy".to_owned())
        );
    }

    #[test]
    fn a_connection_fault_without_a_sqlstate_is_an_outage_even_wrapped() {
        let timeout = tokio_postgres::Error::__private_api_timeout();
        assert!(connection_fault(&timeout), "{timeout:?}");
        assert_eq!(answer(timeout.into()).0, 503);
        let wrapped = anyhow::Error::new(tokio_postgres::Error::__private_api_timeout()).context("loading");
        assert_eq!(answer(ApiError::Internal(wrapped)).0, 503);
        let pooled = anyhow::Error::new(PoolError::Closed).context("loading");
        assert_eq!(answer(ApiError::Internal(pooled)).0, 503);
        assert_eq!(answer(ApiError::Internal(anyhow::anyhow!("a bug"))).0, 500);
    }
}
