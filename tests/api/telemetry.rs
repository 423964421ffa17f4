//! Request and database spans, read back from an in-memory exporter. This file is its own
//! test binary because the tracing subscriber is process-global.

use std::sync::OnceLock;

use crate::support::{TestApp, assert_status, id_of, reply, sse};
use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use reqwest::Method;
use serde_json::json;
use tracing_subscriber::prelude::*;

fn exporter() -> &'static (InMemorySpanExporter, SdkTracerProvider) {
    static INSTALLED: OnceLock<(InMemorySpanExporter, SdkTracerProvider)> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
            .init();
        (exporter, provider)
    })
}

/// The finished spans of one trace.
fn spans_of(trace_id: &str) -> Vec<SpanData> {
    let (exporter, provider) = exporter();
    provider.force_flush().unwrap();
    exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|s| s.span_context.trace_id().to_string() == trace_id)
        .collect()
}

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_queries_become_spans_under_the_callers_trace() {
    exporter();
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let r = reply(
        app.request(Method::GET, "/api/v1/patients?perPage=5", Some(branch))
            .header("traceparent", format!("00-{trace_id}-{caller_span}-01")),
    )
    .await;
    assert_status(&r, 200);
    // A failing request is traced too, with its status.
    let r = reply(
        app.request(Method::GET, "/api/v1/patients", None)
            .header("traceparent", format!("00-{trace_id}-{caller_span}-01")),
    )
    .await;
    assert_status(&r, 400);

    let spans = spans_of(trace_id);
    let requests: Vec<&SpanData> = spans.iter().filter(|s| s.name == "GET /api/v1/patients").collect();
    assert_eq!(requests.len(), 2, "spans: {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    let ok = requests
        .iter()
        .find(|s| attribute(s, "http.response.status_code") == Some(Value::I64(200)))
        .expect("the 200 span");
    assert_eq!(ok.span_kind, SpanKind::Server);
    assert_eq!(ok.parent_span_id.to_string(), caller_span);
    assert!(ok.parent_span_is_remote);
    assert_eq!(attribute(ok, "http.route").map(|v| v.as_str().into_owned()), Some("/api/v1/patients".into()));
    assert_eq!(attribute(ok, "http.request.method").map(|v| v.as_str().into_owned()), Some("GET".into()));
    assert_eq!(attribute(ok, "branch.id"), Some(Value::I64(branch)));
    assert!(matches!(attribute(ok, "user.id"), Some(Value::I64(id)) if id > 0));
    let bad = requests
        .iter()
        .find(|s| attribute(s, "http.response.status_code") == Some(Value::I64(400)))
        .expect("the 400 span");
    assert!(attribute(bad, "branch.id").is_none());

    let db: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Client && s.parent_span_id == ok.span_context.span_id())
        .collect();
    assert!(!db.is_empty(), "no database span under the request");
    assert_eq!(db[0].name, "SELECT patients");
    assert_eq!(
        attribute(db[0], "db.system.name").map(|v| v.as_str().into_owned()),
        Some("postgresql".into())
    );
    // A database span carries its request's user and branch.
    for span in &db {
        assert_eq!(attribute(span, "branch.id"), Some(Value::I64(branch)));
        assert_eq!(attribute(span, "user.id"), attribute(ok, "user.id"));
    }
}

/// A display key travels in a header only: no span holds it, in its name or an attribute,
/// and the metrics name the screen's stream by its route template.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_display_key_reaches_no_span_and_no_metric() {
    exporter();
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let service = json!({ "name": "Reception", "code": "R" });
    let service = id_of(&app.created(&format!("/api/v1/branches/{branch}/services"), None, service).await);
    let keys = format!("/api/v1/branch-services/{service}/display-keys");
    let key = app.created(&keys, None, json!({ "name": "Lobby" })).await["key"].as_str().unwrap().to_owned();
    let trace_id = "5bf92f3577b34da6a3ce929d0e0e4737";
    let stream = |presented: String| {
        sse::open(
            app.http
                .get(app.url(&format!("/display/{service}/events")))
                .header("x-display-key", presented)
                .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01")),
        )
    };
    drop(stream(key.clone()).await.stream());
    // A wrong key (the right one, one character changed) is refused, and not recorded either.
    let last = if key.ends_with('0') { '1' } else { '0' };
    let wrong = format!("{}{last}", &key[..key.len() - 1]);
    assert_status(&stream(wrong).await.refused(), 401);

    let secret = &key[3..key.len() - 1];
    let spans = spans_of(trace_id);
    let requests: Vec<&SpanData> = spans.iter().filter(|s| s.name == "GET /display/{id}/events").collect();
    assert_eq!(requests.len(), 2, "spans: {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    // The route's template, never the path with its ids.
    assert_eq!(
        attribute(requests[0], "http.route").map(|v| v.as_str().into_owned()),
        Some("/display/{id}/events".to_owned())
    );
    assert!(attribute(requests[0], "url.path").is_none());
    for span in &spans {
        assert!(!span.name.contains(secret), "{}", span.name);
        for kv in &span.attributes {
            assert!(!kv.value.as_str().contains(secret), "{} = {}", kv.key, kv.value);
        }
    }
    let metrics = reply(app.http.get(app.url("/metrics")).bearer_auth(&app.admin_token)).await;
    assert_status(&metrics, 200);
    assert!(metrics.text.contains("/display/{id}/events"), "the stream is measured by its template");
    assert!(!metrics.text.contains(secret));
}
