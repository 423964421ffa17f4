//! Cross-origin calls from a clinic's browser front-end on another origin
//! (`CORS_ALLOWED_ORIGINS`). Only listed origins get CORS headers, preflights included;
//! any other origin is served as if it had sent none, so a browser refuses the answer.

use salvo::cors::{Cors, CorsHandler};
use salvo::http::Method;
use salvo::prelude::*;

/// Request headers front-ends send besides the simple ones.
const ALLOWED_HEADERS: [&str; 6] =
    ["authorization", "content-type", "accept", "x-branch-id", "if-match", "idempotency-key"];
/// Answer headers a browser script may read.
const EXPOSED_HEADERS: [&str; 6] =
    ["etag", "location", "retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "idempotent-replayed"];

pub struct AllowedOrigins {
    origins: Vec<String>,
    cors: CorsHandler,
}

impl AllowedOrigins {
    /// `None` when no origin is allowed: then no CORS header is ever sent.
    pub fn new(origins: &[String]) -> Option<Self> {
        if origins.is_empty() {
            return None;
        }
        let cors = Cors::new()
            .allow_origin(origins.iter().map(String::as_str).collect::<Vec<_>>())
            .allow_methods(vec![Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE])
            .allow_headers(ALLOWED_HEADERS.to_vec())
            .expose_headers(EXPOSED_HEADERS.to_vec())
            .max_age(600)
            .into_handler();
        Some(Self { origins: origins.to_vec(), cors })
    }
}

#[async_trait]
impl Handler for AllowedOrigins {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        let listed = req
            .headers()
            .get("origin")
            .and_then(|o| o.to_str().ok())
            .is_some_and(|origin| self.origins.iter().any(|allowed| allowed == origin));
        if listed {
            self.cors.handle(req, depot, res, ctrl).await;
        } else {
            ctrl.call_next(req, depot, res).await;
        }
    }
}
