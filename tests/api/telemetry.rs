//! Request and database spans, read back from an in-memory exporter. This file is its own
//! test binary because the tracing subscriber is process-global.

use std::sync::OnceLock;

use crate::support::{TestApp, send};
use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use reqwest::Method;
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

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_queries_become_spans_under_the_callers_trace() {
    let (exporter, provider) = exporter();
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let (status, _) = send(
        app.request(Method::GET, "/api/v1/patients?perPage=5", Some(branch))
            .header("traceparent", format!("00-{trace_id}-{caller_span}-01")),
    )
    .await;
    assert_eq!(status, 200);
    // A failing request is traced too, with its status.
    let (status, _) = send(
        app.request(Method::GET, "/api/v1/patients", None)
            .header("traceparent", format!("00-{trace_id}-{caller_span}-01")),
    )
    .await;
    assert_eq!(status, 400);
    provider.force_flush().unwrap();

    let spans: Vec<SpanData> = exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|s| s.span_context.trace_id().to_string() == trace_id)
        .collect();
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
