//! Metrics: one OpenTelemetry meter provider per server instance, read as Prometheus text
//! (`GET /metrics`, made by the opentelemetry-prometheus exporter and prometheus's
//! `TextEncoder`) and pushed over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//!
//! What is measured, named by the OpenTelemetry semantic conventions where they name it:
//! - every request ([`MeasureRequests`]): `http.server.request.duration` by method, route
//!   template and status, `http.server.active_requests`; and per accepted `X-Branch-Id`
//!   `clinic.branch.requests` (with the status) and `clinic.branch.request.duration`;
//! - the pools: `db.client.connection.count` (idle/used), `.max`, `.pending_requests` read
//!   from each pool's status here; `.wait_time` and `.timeouts` measured around every
//!   checkout (`db::waits`);
//! - `clinic.branch.migration.failed` per branch, read from the registry on every scrape
//!   and every minute;
//! - `clinic.rate_limit.rejections` by limit and `clinic.password_hash.queue`;
//! - the read audit (`db::read_audit`): `clinic.read_audit.records` queued,
//!   `clinic.read_audit.queue` waiting to be written and its bound `clinic.read_audit.queue.max`
//!   (a full queue makes reads answer 503 `audit_busy`).
//!
//! Every series carries `service_instance_id` (the resource's `service.instance.id`,
//! `SERVICE_INSTANCE_ID`), so instances behind one scrape job or one collector stay apart.
//!
//! Attributes never carry patient data nor anything read from a path: a route is its
//! template (`/api/v1/patients/{id}`), a branch is its id or code, a pool its server.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, MeterProvider as _, UpDownCounter};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use salvo::http::StatusCode;
use salvo::http::header::{CONTENT_TYPE, HeaderValue};
use salvo::oapi::{Content, PathItemType};
use salvo::prelude::*;

use crate::config::Settings;
use crate::db::directory::{BranchRoute, Directory};
use crate::db::read_audit::ReadAudit;
use crate::db::waits::POOL_NAME;
use crate::http::docs::{self, Access};
use crate::http::endpoints::Endpoints;
use crate::http::error::ApiError;
use crate::http::guard::Produces;
use crate::http::rate_limit::Limits;
use crate::security::password::Hasher;

/// Bucket bounds of request durations in seconds, as the HTTP conventions advise.
const DURATION_BOUNDS: &[f64] =
    &[0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];

/// The media type `/metrics` answers in.
pub const TEXT: &[&str] = &["text/plain"];

/// The instruments every request records into.
struct Requests {
    duration: Histogram<f64>,
    active: UpDownCounter<i64>,
    branch_requests: Counter<u64>,
    branch_duration: Histogram<f64>,
}

/// A branch as the migration gauge reports it.
struct BranchState {
    id: i64,
    code: String,
    failed: bool,
}

pub struct Metrics {
    provider: SdkMeterProvider,
    registry: prometheus::Registry,
    meter: Meter,
    requests: Requests,
    branches: Arc<Mutex<Vec<BranchState>>>,
    /// Where the branches' states are read from; set by [`Metrics::observe`].
    directory: OnceLock<Weak<Directory>>,
}

impl Metrics {
    /// The provider with its Prometheus reader, and an OTLP reader when an endpoint is set
    /// (exporting every `OTEL_METRIC_EXPORT_INTERVAL` milliseconds, a minute by default).
    pub fn new(settings: &Settings) -> anyhow::Result<Self> {
        let registry = prometheus::Registry::new();
        // `service.instance.id` goes on every series as `service_instance_id` (by default the
        // exporter keeps resource attributes to `target_info`): a Prometheus behind a
        // collector, or one that relabels `instance`, still tells the instances apart.
        let instance = std::collections::HashSet::from([opentelemetry::Key::from_static_str(
            crate::telemetry::INSTANCE_ID,
        )]);
        let prometheus = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .with_resource_selector(instance)
            .build()?;
        let resource = crate::telemetry::resource(settings);
        let mut provider = SdkMeterProvider::builder().with_reader(prometheus).with_resource(resource);
        if let Some(endpoint) = &settings.otlp_endpoint {
            let exporter = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_http_client(crate::telemetry::otlp_client(settings)?)
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(crate::telemetry::signal_url(endpoint, "metrics"))
                .with_timeout(Duration::from_secs(5))
                .build()?;
            provider = provider.with_reader(PeriodicReader::builder(exporter).build());
        }
        let provider = provider.build();
        let meter = provider.meter("clinic-server");
        let requests = Requests {
            duration: meter
                .f64_histogram("http.server.request.duration")
                .with_unit("s")
                .with_description("Duration of HTTP server requests")
                .with_boundaries(DURATION_BOUNDS.to_vec())
                .build(),
            active: meter
                .i64_up_down_counter("http.server.active_requests")
                .with_unit("{request}")
                .with_description("Number of active HTTP server requests")
                .build(),
            branch_requests: meter
                .u64_counter("clinic.branch.requests")
                .with_unit("{request}")
                .with_description("Requests whose X-Branch-Id was accepted, by branch and status")
                .build(),
            branch_duration: meter
                .f64_histogram("clinic.branch.request.duration")
                .with_unit("s")
                .with_description("Duration of requests whose X-Branch-Id was accepted, by branch")
                .with_boundaries(DURATION_BOUNDS.to_vec())
                .build(),
        };
        Ok(Self { provider, registry, meter, requests, branches: Arc::default(), directory: OnceLock::new() })
    }

    /// The meter the pools and other parts make their instruments with.
    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    /// Observes the pools, the limits, the hashing queue, the read audit and the branches'
    /// migrations; the
    /// callbacks hold the directory weakly, so that it ends with its state.
    pub fn observe(
        &self,
        directory: &Arc<Directory>,
        hasher: &Hasher,
        limits: &Arc<Limits>,
        reads: &ReadAudit,
    ) {
        let reads = reads.gauge();
        let _ = self.directory.set(Arc::downgrade(directory));
        let pools = |directory: Weak<Directory>| move || directory.upgrade().map(|d| d.pool_statuses());
        let statuses = pools(Arc::downgrade(directory));
        self.meter
            .i64_observable_up_down_counter("db.client.connection.count")
            .with_unit("{connection}")
            .with_description("Connections of the pool, by state (idle or used)")
            .with_callback(move |observer| {
                for (name, status) in statuses().unwrap_or_default() {
                    let used = status.size.saturating_sub(status.available);
                    for (state, count) in [("idle", status.available), ("used", used)] {
                        let attributes = [
                            KeyValue::new(POOL_NAME, name.clone()),
                            KeyValue::new("db.client.connection.state", state),
                        ];
                        observer.observe(count as i64, &attributes);
                    }
                }
            })
            .build();
        let statuses = pools(Arc::downgrade(directory));
        self.meter
            .i64_observable_up_down_counter("db.client.connection.max")
            .with_unit("{connection}")
            .with_description("The most connections the pool may open")
            .with_callback(move |observer| {
                for (name, status) in statuses().unwrap_or_default() {
                    observer.observe(status.max_size as i64, &[KeyValue::new(POOL_NAME, name)]);
                }
            })
            .build();
        let statuses = pools(Arc::downgrade(directory));
        self.meter
            .i64_observable_up_down_counter("db.client.connection.pending_requests")
            .with_unit("{request}")
            .with_description("Requests waiting for a connection of the pool")
            .with_callback(move |observer| {
                for (name, status) in statuses().unwrap_or_default() {
                    observer.observe(status.waiting as i64, &[KeyValue::new(POOL_NAME, name)]);
                }
            })
            .build();
        let limits = limits.clone();
        self.meter
            .u64_observable_counter("clinic.rate_limit.rejections")
            .with_unit("{request}")
            .with_description("Requests refused with 429, by limit")
            .with_callback(move |observer| {
                for (name, rejected) in limits.rejections() {
                    observer.observe(rejected, &[KeyValue::new("clinic.rate_limit.name", name)]);
                }
            })
            .build();
        let hasher = hasher.clone();
        self.meter
            .i64_observable_up_down_counter("clinic.password_hash.queue")
            .with_unit("{hash}")
            .with_description("Password hashes and checks waiting for their turn or being computed")
            .with_callback(move |observer| observer.observe(hasher.queue() as i64, &[]))
            .build();
        let audit = reads.clone();
        self.meter
            .u64_observable_counter("clinic.read_audit.records")
            .with_unit("{record}")
            .with_description("Audit records of reads queued to be written")
            .with_callback(move |observer| observer.observe(audit.recorded(), &[]))
            .build();
        let audit = reads.clone();
        self.meter
            .i64_observable_up_down_counter("clinic.read_audit.queue")
            .with_unit("{record}")
            .with_description("Audit records of reads waiting in the queue to be written")
            .with_callback(move |observer| observer.observe(audit.queue().0 as i64, &[]))
            .build();
        let audit = reads.clone();
        self.meter
            .i64_observable_up_down_counter("clinic.read_audit.queue.max")
            .with_unit("{record}")
            .with_description("The most records the read audit queue holds; reads answer 503 past it")
            .with_callback(move |observer| observer.observe(audit.queue().1 as i64, &[]))
            .build();
        let branches = self.branches.clone();
        self.meter
            .u64_observable_gauge("clinic.branch.migration.failed")
            .with_description("1 when the last migration of an active branch failed (it answers 503), else 0")
            .with_callback(move |observer| {
                for branch in branches.lock().expect("branch states").iter() {
                    let attributes = [
                        KeyValue::new("clinic.branch.id", branch.id),
                        KeyValue::new("clinic.branch.code", branch.code.clone()),
                    ];
                    observer.observe(u64::from(branch.failed), &attributes);
                }
            })
            .build();
    }

    /// Reads every active branch's migration state from the registry (briefly: a registry
    /// out of reach leaves the last states).
    pub async fn refresh_branches(&self) {
        let Some(directory) = self.directory.get().and_then(Weak::upgrade) else { return };
        let read = async {
            let client = directory.registry().get().await?;
            let rows = client
                .query(
                    "SELECT id, code, migration_state = 'failed' FROM branches WHERE status = 'active' ORDER BY id",
                    &[],
                )
                .await?;
            anyhow::Ok(
                rows.iter().map(|r| BranchState { id: r.get(0), code: r.get(1), failed: r.get(2) }).collect(),
            )
        };
        match tokio::time::timeout(Duration::from_secs(2), read).await {
            Ok(Ok(states)) => *self.branches.lock().expect("branch states") = states,
            Ok(Err(e)) => tracing::debug!(error = format!("{e:#}"), "metrics: branch states not read"),
            Err(_) => tracing::debug!("metrics: branch states not read in time"),
        }
    }

    /// Reads the branches' states every minute, for exports nobody scrapes.
    pub fn watch_branches(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let metrics = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(60));
            loop {
                every.tick().await;
                let Some(metrics) = metrics.upgrade() else { return };
                metrics.refresh_branches().await;
            }
        })
    }

    /// Everything measured, in the Prometheus text format.
    pub fn render(&self) -> anyhow::Result<String> {
        let mut text = String::new();
        prometheus::TextEncoder::new().encode_utf8(&self.registry.gather(), &mut text)?;
        Ok(text)
    }

    /// Exports what is left and stops the exporters.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!(error = %e, "metrics shutdown");
        }
    }
}

/// `GET /metrics`: the metrics of this instance as Prometheus text. Reads the [`Metrics`]
/// the service injected.
#[handler]
pub async fn scrape(depot: &mut Depot, res: &mut Response) {
    let Some(metrics) = depot.get_typed::<Arc<Metrics>>().ok().cloned() else {
        res.render(ApiError::Internal(anyhow::anyhow!("no metrics in the depot")));
        return;
    };
    metrics.refresh_branches().await;
    match metrics.render() {
        Ok(text) => {
            res.status_code(StatusCode::OK);
            res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(prometheus::TEXT_FORMAT));
            let _ = res.write_body(text);
        }
        Err(e) => res.render(ApiError::Internal(e)),
    }
}

/// `GET /metrics` on the main address, described; `app` puts it behind a token holding
/// `admin.access`.
pub fn endpoints() -> Endpoints {
    let mut monitoring = Endpoints::at_root(Access::User);
    let op = monitoring
        .operation("monitoring", "Metrics of this instance, in the Prometheus text format")
        .description(
            "Needs `admin.access`. Names follow the OpenTelemetry conventions as Prometheus writes \
             them (`http_server_request_duration_seconds`, `db_client_connection_count`, ...). \
             With `METRICS_ADDR` set, the same text is served there without a token.",
        )
        .add_response(
            "200",
            salvo::oapi::Response::new("The metrics (text format 0.0.4)")
                .add_content("text/plain", Content::new(docs::string())),
        );
    monitoring.add_behind(PathItemType::Get, "metrics", "getMetrics", Some(Produces(TEXT)), scrape, op);
    monitoring
}

/// A method as the conventions record it: one of the standard ones, else `_OTHER`.
fn method_of(req: &Request) -> &'static str {
    match req.method().as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "_OTHER",
    }
}

/// Counts a request as active until dropped (also when its task is cancelled).
struct Active {
    counter: UpDownCounter<i64>,
    method: [KeyValue; 1],
}

impl Drop for Active {
    fn drop(&mut self) {
        self.counter.add(-1, &self.method);
    }
}

/// Service hoop: measures every request (first of all hoops, so that a panic's 500 counts).
pub struct MeasureRequests(pub Arc<Metrics>);

#[async_trait]
impl Handler for MeasureRequests {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        let requests = &self.0.requests;
        let method = method_of(req);
        // The template the router matched; nothing for a path no route serves.
        let route = (!req.matched_path().is_empty()).then(|| format!("/{}", req.matched_path()));
        let method_attribute = KeyValue::new("http.request.method", method);
        requests.active.add(1, std::slice::from_ref(&method_attribute));
        let _active = Active { counter: requests.active.clone(), method: [method_attribute.clone()] };
        let started = Instant::now();
        ctrl.call_next(req, depot, res).await;
        let elapsed = started.elapsed().as_secs_f64();
        let status = KeyValue::new(
            "http.response.status_code",
            i64::from(res.status_code.unwrap_or(StatusCode::OK).as_u16()),
        );
        let mut attributes = vec![method_attribute, status.clone()];
        if let Some(route) = route {
            attributes.push(KeyValue::new("http.route", route));
        }
        requests.duration.record(elapsed, &attributes);
        // Put in the depot by the branch hoop once the header is accepted.
        if let Ok(branch) = depot.get_typed::<Arc<BranchRoute>>() {
            let id = KeyValue::new("clinic.branch.id", branch.id);
            requests.branch_requests.add(1, &[id.clone(), status]);
            requests.branch_duration.record(elapsed, &[id]);
        }
    }
}
