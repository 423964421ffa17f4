//! Logs and traces: `tracing` everywhere, exported over OTLP/HTTP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (http or https: rustls on ring, the collector's
//! certificate checked against `OTEL_EXPORTER_OTLP_CERTIFICATE` or the public roots).
//! Incoming W3C `traceparent` headers are honoured. (Metrics are `crate::metrics`.)
//!
//! Telemetry carries no patient data: a span's attributes and a metric's labels hold a route
//! template (never the path with its ids), a method, a status, a user, branch or pool by id,
//! code or server; never a name, a PIN, a body, a query string or a credential (a token, a
//! display key).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::{LookupSpan, Registry};

use crate::config::Settings;

/// Flushes and stops the exporter when dropped.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("trace export shutdown: {e:?}");
        }
    }
}

/// The resource attribute that tells instances of the service apart.
pub const INSTANCE_ID: &str = "service.instance.id";

/// What every span and metric of this process is about: `service.name` and
/// `service.instance.id` (`OTEL_SERVICE_NAME`, `SERVICE_INSTANCE_ID`).
pub fn resource(settings: &Settings) -> opentelemetry_sdk::Resource {
    opentelemetry_sdk::Resource::builder()
        .with_service_name(settings.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(INSTANCE_ID, settings.service_instance_id.clone()))
        .build()
}

/// The OTLP URL of a signal (`traces`, `metrics`): the setting is the collector's base URL,
/// as in the OTel convention.
pub fn signal_url(endpoint: &str, signal: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    let path = format!("/v1/{signal}");
    if base.ends_with(&path) { base.to_owned() } else { format!("{base}{path}") }
}

/// The blocking HTTP client both OTLP exporters send with: https through rustls on ring,
/// trusting `OTEL_EXPORTER_OTLP_CERTIFICATE`'s CAs when set, else the public roots.
pub fn otlp_client(settings: &Settings) -> anyhow::Result<reqwest::blocking::Client> {
    let roots = match &settings.otlp_certificate {
        Some(path) => crate::security::roots::from_pem_file(path, "OTEL_EXPORTER_OTLP_CERTIFICATE")
            .map_err(anyhow::Error::msg)?,
        None => crate::security::roots::public(),
    };
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    // A blocking client owns a runtime of its own, which may be neither made nor dropped
    // on one of tokio's threads: it is built on a thread of its own, as the exporter does.
    std::thread::spawn(move || {
        reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(std::time::Duration::from_secs(5))
            .build()
    })
    .join()
    .map_err(|_| anyhow::anyhow!("building the OTLP client panicked"))?
    .map_err(|e| anyhow::anyhow!("building the OTLP client: {e}"))
}

pub fn init(settings: &Settings) -> anyhow::Result<Telemetry> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let provider = match &settings.otlp_endpoint {
        Some(endpoint) => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(otlp_client(settings)?)
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(signal_url(endpoint, "traces"))
                .with_timeout(std::time::Duration::from_secs(5))
                .build()?;
            Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(resource(settings))
                    .build(),
            )
        }
        None => None,
    };
    let otel_layer = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("clinic-server"))
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
    });
    tracing_subscriber::registry()
        .with(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,tokio_postgres=warn")),
        )
        .with(tracing_subscriber::fmt::layer().with_target(false))
        .with(otel_layer)
        .try_init()?;
    Ok(Telemetry { provider })
}

/// The caller of a request, kept with its span for the spans made below it ([`caller`]).
#[derive(Clone, Copy, Default)]
struct Caller {
    user: Option<i64>,
    branch: Option<i64>,
}

/// Changes the caller kept with the current span (when a subscriber keeps spans).
fn update_caller(change: impl FnOnce(&mut Caller)) {
    tracing::Span::current().with_subscriber(|(id, dispatch)| {
        let Some(span) = dispatch.downcast_ref::<Registry>().and_then(|r| r.span(id)) else { return };
        let mut extensions = span.extensions_mut();
        match extensions.get_mut::<Caller>() {
            Some(caller) => change(caller),
            None => {
                let mut caller = Caller::default();
                change(&mut caller);
                extensions.insert(caller);
            }
        }
    });
}

/// The user and the branch of the request the current span belongs to, as far as known:
/// a database span carries them like its request span.
pub fn caller() -> (Option<i64>, Option<i64>) {
    let found = tracing::Span::current().with_subscriber(|(id, dispatch)| {
        let span = dispatch.downcast_ref::<Registry>()?.span(id)?;
        span.scope().find_map(|s| s.extensions().get::<Caller>().copied())
    });
    found.flatten().map_or((None, None), |c| (c.user, c.branch))
}

/// Adds the caller to the current request span.
pub fn record_user(id: i64) {
    tracing::Span::current().record("user.id", id);
    update_caller(|c| c.user = Some(id));
}

/// Adds the branch to the current request span.
pub fn record_branch(id: i64) {
    tracing::Span::current().record("branch.id", id);
    update_caller(|c| c.branch = Some(id));
}

#[cfg(test)]
mod tests {
    #[test]
    fn signal_urls_append_the_signal_path_once() {
        assert_eq!(super::signal_url("http://c:4318", "traces"), "http://c:4318/v1/traces");
        assert_eq!(super::signal_url("http://c:4318/", "metrics"), "http://c:4318/v1/metrics");
        assert_eq!(super::signal_url("http://c:4318/v1/traces", "traces"), "http://c:4318/v1/traces");
    }
}
