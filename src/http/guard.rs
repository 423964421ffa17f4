//! What every route of the API gets around its handler, whoever wrote it:
//!
//! - content negotiation: a request whose `Accept` allows none of the media types the route
//!   answers in is a 406 before anything runs;
//! - retries: a request that met a serialization failure or a deadlock (marked
//!   [`Retryable`] by its error) is run again a bounded number of times, each run from the
//!   start with the same cached body; past the last it keeps its 503 `write_conflict` answer.
//!
//! [`guard_routes`] wraps every handler of a route tree once, at start-up, so that no
//! route can be served without it.

use std::sync::Arc;
use std::time::Duration;

use salvo::http::ResBody;
use salvo::prelude::*;

use super::error::{ApiError, Retryable};

/// How many times a request is run at most when it keeps meeting conflicts.
pub const ATTEMPTS: u32 = 4;

/// The media types a route answers in, when not only JSON: set by a hoop on the route
/// (`Router::with_path("export").hoop(Produces(&[...]))`).
#[derive(Clone, Copy, Debug)]
pub struct Produces(pub &'static [&'static str]);

pub const JSON: &[&str] = &["application/json"];
/// A record that prints: JSON by default, a PDF document when asked for.
pub const JSON_OR_PDF: &[&str] = &["application/json", "application/pdf"];

/// The route a request reached, as `GET /api/v1/patients/{id}`: what its audit records name,
/// written by the unit and the read audit. Work no request did (the day closer) names none.
#[derive(Clone, Debug)]
pub struct Endpoint(pub Arc<str>);

#[async_trait]
impl Handler for Produces {
    async fn handle(&self, _req: &mut Request, depot: &mut Depot, _res: &mut Response, _ctrl: &mut FlowCtrl) {
        depot.insert_typed(*self);
    }
}

/// Wraps every handler under `router` in a [`Guard`].
pub fn guard_routes(router: &mut Router) {
    if let Some(goal) = router.goal.take() {
        router.goal = Some(Arc::new(Guard { inner: goal }));
    }
    for child in router.routers_mut() {
        guard_routes(child);
    }
}

pub struct Guard {
    inner: Arc<dyn Handler>,
}

#[async_trait]
impl Handler for Guard {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        depot.insert_typed(Endpoint(format!("{} /{}", req.method(), req.matched_path()).into()));
        let produces = depot.get_typed::<Produces>().map_or(JSON, |p| p.0);
        if !acceptable(&accept_of(req), produces) {
            res.render(ApiError::NotAcceptable);
            return;
        }
        // Headers hoops set before the handler (rate limits, CORS) survive a retry.
        let headers = res.headers().clone();
        for attempt in 1..=ATTEMPTS {
            self.inner.handle(req, depot, res, ctrl).await;
            if res.extensions.remove::<Retryable>().is_none() || attempt == ATTEMPTS {
                return;
            }
            tracing::info!(attempt, "serialization failure or deadlock; running the request again");
            res.status_code = None;
            res.body = ResBody::None;
            *res.headers_mut() = headers.clone();
            tokio::time::sleep(backoff(attempt)).await;
        }
    }
}

/// A short, growing, jittered pause, so that the colliding requests do not meet again.
fn backoff(attempt: u32) -> Duration {
    let base = 5u64 << attempt;
    Duration::from_millis(base + rand::random_range(0..base))
}

/// The media ranges of an `Accept` header with their weights; `None` when it restricts
/// nothing (absent, empty, or unreadable).
fn ranges(accept: &str) -> Option<Vec<(String, String, f32)>> {
    let mut ranges = Vec::new();
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        if media.is_empty() {
            continue;
        }
        let (kind, subtype) = media.split_once('/')?;
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").map(str::trim))
            .find_map(|q| q.parse::<f32>().ok())
            .unwrap_or(1.0);
        ranges.push((kind.trim().to_owned(), subtype.trim().to_owned(), q));
    }
    (!ranges.is_empty()).then_some(ranges)
}

/// The weight `ranges` give `offered`: that of the most specific range that matches it (RFC
/// 9110, 12.5.1), 0 when none does.
fn quality(ranges: &[(String, String, f32)], offered: &str) -> f32 {
    let (kind, subtype) = offered.split_once('/').unwrap_or((offered, ""));
    ranges
        .iter()
        .filter(|(k, s, _)| (k == "*" || k == kind) && (s == "*" || s == subtype))
        .max_by_key(|(k, s, _)| (k != "*") as u8 + (s != "*") as u8)
        .map_or(0.0, |(_, _, q)| *q)
}

/// Whether an `Accept` header allows one of `produces`. No header, or one that cannot be
/// read, allows anything; `q=0` excludes.
pub fn acceptable(accept: &str, produces: &[&str]) -> bool {
    ranges(accept).is_none_or(|ranges| produces.iter().any(|offered| quality(&ranges, offered) > 0.0))
}

/// Which of `produces` to answer in: the one the header weighs most, the first listed on a
/// tie (a route's default comes first), none when it allows none of them.
pub fn preferred<'a>(accept: &str, produces: &[&'a str]) -> Option<&'a str> {
    let Some(ranges) = ranges(accept) else { return produces.first().copied() };
    let mut best: Option<(&'a str, f32)> = None;
    for offered in produces {
        let q = quality(&ranges, offered);
        if q > 0.0 && best.is_none_or(|(_, top)| q > top) {
            best = Some((offered, q));
        }
    }
    best.map(|(offered, _)| offered)
}

/// The `Accept` header of `req`, its several lines as one list (RFC 9110, 5.3).
pub fn accept_of(req: &Request) -> String {
    let lines: Vec<&str> = req.headers().get_all("accept").iter().filter_map(|v| v.to_str().ok()).collect();
    lines.join(",")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use salvo::test::{ResponseExt, TestClient};

    use super::*;

    /// A handler that meets a conflict on its first `conflicts` runs, then answers 200.
    struct Colliding {
        conflicts: u32,
        runs: Arc<AtomicU32>,
    }

    #[async_trait]
    impl Handler for Colliding {
        async fn handle(
            &self,
            _req: &mut Request,
            _depot: &mut Depot,
            res: &mut Response,
            _ctrl: &mut FlowCtrl,
        ) {
            if self.runs.fetch_add(1, Ordering::SeqCst) < self.conflicts {
                res.render(ApiError::Contended);
            } else {
                res.render("done");
            }
        }
    }

    async fn run(conflicts: u32) -> (u16, Option<String>, u32) {
        let runs = Arc::new(AtomicU32::new(0));
        let mut router = Router::with_path("x").get(Colliding { conflicts, runs: runs.clone() });
        guard_routes(&mut router);
        let mut res = TestClient::get("http://127.0.0.1/x").send(&Service::new(router)).await;
        let retry_after = res.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
        let status = res.status_code.unwrap().as_u16();
        let _ = res.take_string().await;
        (status, retry_after, runs.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_conflict_is_run_again_until_it_goes_through() {
        assert_eq!(run(2).await, (200, None, 3));
    }

    #[tokio::test]
    async fn past_the_last_attempt_a_conflict_is_a_503_with_retry_after() {
        assert_eq!(run(ATTEMPTS + 5).await, (503, Some("1".into()), ATTEMPTS));
    }

    #[test]
    fn accept_headers() {
        assert!(acceptable("", JSON));
        assert!(acceptable("application/json", JSON));
        assert!(acceptable("*/*", JSON));
        assert!(acceptable("application/*", JSON));
        assert!(acceptable("text/html, application/json;q=0.5", JSON));
        assert!(acceptable("Application/JSON; charset=utf-8", JSON));
        assert!(!acceptable("application/pdf", JSON));
        assert!(!acceptable("text/html", JSON));
        assert!(!acceptable("application/json;q=0", JSON));
        assert!(!acceptable("*/*, application/json;q=0", JSON));
        assert!(acceptable("text/csv", &["text/csv", "application/json"]));
        assert!(acceptable("garbage", JSON), "an unreadable header restricts nothing");
    }

    #[test]
    fn the_preferred_media_type() {
        assert_eq!(preferred("", JSON_OR_PDF), Some("application/json"));
        assert_eq!(preferred("*/*", JSON_OR_PDF), Some("application/json"));
        assert_eq!(preferred("application/pdf", JSON_OR_PDF), Some("application/pdf"));
        assert_eq!(
            preferred("application/pdf, application/json;q=0.5", JSON_OR_PDF),
            Some("application/pdf")
        );
        assert_eq!(preferred("application/json, application/pdf", JSON_OR_PDF), Some("application/json"));
        assert_eq!(preferred("application/*;q=0.2, application/pdf", JSON_OR_PDF), Some("application/pdf"));
        assert_eq!(preferred("text/html", JSON_OR_PDF), None);
        assert_eq!(preferred("application/pdf", JSON), None);
    }
}
