//! A span per request (route, method, status, user, branch), child of the caller's W3C trace
//! context when one is sent.

use opentelemetry::propagation::Extractor;
use salvo::http::StatusCode;
use salvo::prelude::*;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct Headers<'a>(&'a salvo::http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

pub struct RequestSpan;

#[async_trait]
impl Handler for RequestSpan {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        let method = req.method().as_str().to_owned();
        let route =
            if req.matched_path().is_empty() { String::new() } else { format!("/{}", req.matched_path()) };
        let name = if route.is_empty() { method.clone() } else { format!("{method} {route}") };
        let span = tracing::info_span!(
            "request",
            otel.name = name.as_str(),
            otel.kind = "server",
            http.request.method = method.as_str(),
            http.route = route.as_str(),
            http.response.status_code = tracing::field::Empty,
            user.id = tracing::field::Empty,
            branch.id = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(req.headers())));
        // Must precede the first enter; fails harmlessly when no exporter is installed.
        let _ = span.set_parent(parent);
        let started = std::time::Instant::now();
        ctrl.call_next(req, depot, res).instrument(span.clone()).await;
        let status = res.status_code.unwrap_or(StatusCode::OK);
        span.record("http.response.status_code", status.as_u16() as i64);
        if status.is_server_error() {
            span.record("otel.status_code", "error");
        }
        let _entered = span.enter();
        tracing::debug!(
            status = status.as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "{name}"
        );
    }
}
