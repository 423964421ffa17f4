//! The real binary exporting over OTLP/HTTP to a receiver in this test, its bodies decoded
//! with the OTLP protobuf messages: the request span under the caller's `traceparent`, its
//! database spans, the user and branch on both, no patient data anywhere; the metrics; and
//! the `METRICS_ADDR` listener answering without a token.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use salvo::prelude::*;
use serde_json::json;

use crate::support::{ADMIN_PASSWORD, TestDb, assert_status, client, reply};

/// The instance id the server is started with.
const INSTANCE: &str = "clinic-otlp-1";

/// A body posted to the receiver: (path, body).
type Post = (String, Vec<u8>);

/// The bodies posted to the receiver.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Post>>>);

#[async_trait]
impl Handler for Received {
    async fn handle(&self, req: &mut Request, _depot: &mut Depot, res: &mut Response, _ctrl: &mut FlowCtrl) {
        let body = req.payload_with_max_size(64 << 20).await.map(|b| b.to_vec()).unwrap_or_default();
        self.0.lock().unwrap().push((req.uri().path().to_owned(), body));
        res.status_code(StatusCode::OK);
    }
}

impl Received {
    fn bodies(&self, path: &str) -> Vec<Vec<u8>> {
        self.0.lock().unwrap().iter().filter(|(p, _)| p == path).map(|(_, b)| b.clone()).collect()
    }
}

/// An OTLP/HTTP receiver on a free port: `POST /v1/traces` and `POST /v1/metrics`.
async fn receiver() -> (String, Received) {
    let received = Received::default();
    let acceptor = TcpListener::new("127.0.0.1:0").bind().await;
    let addr = acceptor.local_addr().unwrap();
    let router = Router::new().push(Router::with_path("v1/{signal}").post(received.clone()));
    tokio::spawn(async move { Server::new(acceptor).serve(router).await });
    (format!("http://{addr}"), received)
}

/// The server process, killed if the test ends before it stopped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Process {
    /// SIGTERM, then the exit status (the exporters flush on the way out).
    fn stop(&mut self) -> std::process::ExitStatus {
        // SAFETY: signals the child this test started, by its id.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Starts `clinic-server serve` on `db`, exporting to `otlp`; returns it with the addresses
/// it printed: the API's and the metrics listener's.
fn serve(db: &TestDb, otlp: &str) -> (Process, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clinic-server"))
        .arg("serve")
        .env("DATABASE_URL", &db.url)
        .env("BIND_ADDR", "127.0.0.1:0")
        .env("METRICS_ADDR", "127.0.0.1:0")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
        .env("OTEL_SERVICE_NAME", "clinic-server-under-test")
        .env("SERVICE_INSTANCE_ID", INSTANCE)
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "500")
        .env("PASSWORD_HASH_MEMORY_KIB", "8")
        .env("PASSWORD_HASH_WEAK_FOR_TESTS", "true")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let stdout = child.stdout.take().unwrap();
    let server = Process(child);
    let (lines, heard) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                // Keep draining so the server never blocks on a full pipe.
                continue;
            }
        }
    });
    let (mut api, mut metrics) = (None, None);
    let address = |line: &str, after: &str| {
        let at = line.find(after)? + after.len();
        line[at..].split_whitespace().next().map(|a| a.trim_end_matches("/metrics").to_owned())
    };
    while api.is_none() || metrics.is_none() {
        let line = heard.recv_timeout(Duration::from_secs(120)).expect("the server says where it listens");
        if line.contains("clinic-server listening on") {
            api = address(&line, "listening on http://");
        } else if line.contains("metrics listening on") {
            metrics = address(&line, "listening on http://");
        }
    }
    (server, api.unwrap(), metrics.unwrap())
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Any> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref())
}

fn text(value: &Any) -> String {
    match value {
        Any::StringValue(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// Every text an exported span carries: name, attributes, events and links.
fn texts_of(span: &Span) -> Vec<String> {
    let values = |attributes: &[KeyValue]| {
        attributes
            .iter()
            .filter_map(|kv| kv.value.as_ref().and_then(|v: &AnyValue| v.value.as_ref()).map(text))
            .collect::<Vec<_>>()
    };
    let mut texts = vec![span.name.clone()];
    texts.extend(values(&span.attributes));
    for event in &span.events {
        texts.push(event.name.clone());
        texts.extend(values(&event.attributes));
    }
    texts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exports_traces_and_metrics_over_otlp() {
    let db = TestDb::create().await;
    let (otlp, received) = receiver().await;
    let (mut server, api, metrics_addr) = serve(&db, &otlp);
    let http = client();
    let base = format!("http://{api}/api/v1");

    let login = http.post(format!("{base}/auth/login"));
    let login = reply(login.json(&json!({ "username": "admin", "password": ADMIN_PASSWORD }))).await.body;
    let token = login["data"]["token"].as_str().expect("a token").to_owned();
    let registry = clinic_server::db::connect(&db.url).await.unwrap();
    let row = registry
        .query_one(
            "SELECT (SELECT id FROM branches WHERE code = 'MAIN'), (SELECT id FROM users WHERE username = 'admin')",
            &[],
        )
        .await
        .unwrap();
    let (branch, admin): (i64, i64) = (row.get(0), row.get(1));
    let call = |method: reqwest::Method, path: &str| {
        http.request(method, format!("{base}{path}"))
            .bearer_auth(&token)
            .header("x-branch-id", branch.to_string())
    };
    let (first, last) = ("Zorabel", "Quintavalle");
    let created = reply(call(reqwest::Method::POST, "/patients").json(
        &json!({ "first_name": first, "last_name": last, "birth_date": "1980-01-02", "sex": "female" }),
    ))
    .await;
    assert_status(&created, 201);
    let patient = created.body;
    let (id, pin) =
        (patient["data"]["id"].as_i64().unwrap(), patient["data"]["pin"].as_str().unwrap().to_owned());

    let trace_id = "5cf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "10f067aa0ba902b7";
    let traceparent = format!("00-{trace_id}-{caller_span}-01");
    let got =
        reply(call(reqwest::Method::GET, &format!("/patients/{id}")).header("traceparent", &traceparent));
    assert_status(&got.await, 200);
    let found =
        call(reqwest::Method::GET, &format!("/patients?search={last}")).header("traceparent", &traceparent);
    assert_status(&reply(found).await, 200);

    // The metrics listener needs no token.
    let scraped = reply(http.get(format!("http://{metrics_addr}/metrics"))).await;
    assert_status(&scraped, 200);
    let scraped = scraped.text;
    assert!(scraped.contains("http_server_request_duration_seconds_count{"), "{scraped}");
    // Every series names the instance, target_info among them.
    let samples = crate::metrics::samples(&scraped);
    assert!(samples.iter().any(|s| s.name == "target_info"), "{scraped}");
    for sample in &samples {
        assert_eq!(
            sample.labels.get("service_instance_id").map(String::as_str),
            Some(INSTANCE),
            "{sample:?}"
        );
    }

    let status = tokio::task::spawn_blocking(move || {
        let status = server.stop();
        drop(server);
        status
    })
    .await
    .unwrap();
    assert!(status.success(), "the server exited with {status}");

    // Traces.
    let mut spans = Vec::new();
    for body in received.bodies("/v1/traces") {
        let request = ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP trace export");
        for resource in request.resource_spans {
            let attributes = resource.resource.map(|r| r.attributes).unwrap_or_default();
            assert_eq!(
                attribute(&attributes, "service.name"),
                Some(&Any::StringValue("clinic-server-under-test".into()))
            );
            assert_eq!(
                attribute(&attributes, "service.instance.id"),
                Some(&Any::StringValue(INSTANCE.into()))
            );
            spans.extend(resource.scope_spans.into_iter().flat_map(|s| s.spans));
        }
    }
    assert!(!spans.is_empty(), "no span was exported");
    let trace = hex::decode(trace_id).unwrap();
    let server_span = |name: &str| {
        let found: Vec<&Span> = spans.iter().filter(|s| s.trace_id == trace && s.name == name).collect();
        assert_eq!(
            found.len(),
            1,
            "spans named {name}: {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        found[0]
    };
    let get = server_span("GET /api/v1/patients/{id}");
    assert_eq!(get.kind, SpanKind::Server as i32);
    assert_eq!(get.parent_span_id, hex::decode(caller_span).unwrap(), "the caller's span is the parent");
    let attributes = &get.attributes;
    assert_eq!(attribute(attributes, "http.route"), Some(&Any::StringValue("/api/v1/patients/{id}".into())));
    assert_eq!(attribute(attributes, "http.request.method"), Some(&Any::StringValue("GET".into())));
    assert_eq!(attribute(attributes, "http.response.status_code"), Some(&Any::IntValue(200)));
    assert_eq!(attribute(attributes, "user.id"), Some(&Any::IntValue(admin)));
    assert_eq!(attribute(attributes, "branch.id"), Some(&Any::IntValue(branch)));

    let queries: Vec<&Span> = spans
        .iter()
        .filter(|s| {
            s.trace_id == trace && s.parent_span_id == get.span_id && s.kind == SpanKind::Client as i32
        })
        .collect();
    assert!(!queries.is_empty(), "no database span under the request");
    for query in &queries {
        assert_eq!(
            attribute(&query.attributes, "db.system.name"),
            Some(&Any::StringValue("postgresql".into()))
        );
        assert_eq!(attribute(&query.attributes, "user.id"), Some(&Any::IntValue(admin)));
        assert_eq!(attribute(&query.attributes, "branch.id"), Some(&Any::IntValue(branch)));
    }
    assert!(
        queries.iter().any(|q| q.name == "SELECT patients"),
        "{:?}",
        queries.iter().map(|q| &q.name).collect::<Vec<_>>()
    );
    let search = server_span("GET /api/v1/patients");
    assert_eq!(search.parent_span_id, get.parent_span_id);

    // No patient's name or PIN anywhere, nor the search term of the query string.
    for span in &spans {
        for text in texts_of(span) {
            for secret in [first, last, pin.as_str()] {
                assert!(!text.contains(secret), "span {} carries {secret:?}: {text:?}", span.name);
            }
        }
    }

    // Metrics, as OTLP names them.
    let mut names = std::collections::BTreeSet::new();
    let mut routes = std::collections::BTreeSet::new();
    for body in received.bodies("/v1/metrics") {
        let request = ExportMetricsServiceRequest::decode(body.as_slice()).expect("an OTLP metrics export");
        for resource in &request.resource_metrics {
            let attributes = resource.resource.as_ref().map(|r| r.attributes.as_slice()).unwrap_or_default();
            assert_eq!(
                attribute(attributes, "service.instance.id"),
                Some(&Any::StringValue(INSTANCE.into()))
            );
        }
        for metric in
            request.resource_metrics.into_iter().flat_map(|r| r.scope_metrics).flat_map(|s| s.metrics)
        {
            if metric.name == "http.server.request.duration" {
                assert_eq!(metric.unit, "s");
                if let Some(Data::Histogram(histogram)) = &metric.data {
                    for point in &histogram.data_points {
                        if let Some(Any::StringValue(route)) = attribute(&point.attributes, "http.route") {
                            routes.insert(route.clone());
                        }
                    }
                }
            }
            names.insert(metric.name);
        }
    }
    for name in [
        "http.server.request.duration",
        "http.server.active_requests",
        "clinic.branch.requests",
        "clinic.branch.request.duration",
        "db.client.connection.count",
        "db.client.connection.max",
        "db.client.connection.pending_requests",
        "db.client.connection.wait_time",
        "db.client.connection.timeouts",
        "clinic.branch.migration.failed",
        "clinic.rate_limit.rejections",
        "clinic.password_hash.queue",
        "clinic.read_audit.records",
        "clinic.read_audit.queue",
        "clinic.read_audit.queue.max",
    ] {
        assert!(names.contains(name), "{name} was not exported; got {names:?}");
    }
    assert!(routes.contains("/api/v1/patients/{id}"), "{routes:?}");
    assert!(routes.iter().all(|r| !r.contains(&format!("/patients/{id}"))), "{routes:?}");
}
