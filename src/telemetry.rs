//! Logs and traces: `tracing` everywhere, exported over OTLP/HTTP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Incoming W3C `traceparent` headers are honoured.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

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

/// The OTLP traces URL: the setting is the collector's base URL, as in the OTel convention.
fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") { base.to_owned() } else { format!("{base}/v1/traces") }
}

pub fn init(settings: &Settings) -> anyhow::Result<Telemetry> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let provider = match &settings.otlp_endpoint {
        Some(endpoint) => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(traces_url(endpoint))
                .with_timeout(std::time::Duration::from_secs(5))
                .build()?;
            Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(
                        opentelemetry_sdk::Resource::builder()
                            .with_service_name(settings.service_name.clone())
                            .build(),
                    )
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

/// Adds the caller to the current request span.
pub fn record_user(id: i64) {
    tracing::Span::current().record("user.id", id);
}

/// Adds the branch to the current request span.
pub fn record_branch(id: i64) {
    tracing::Span::current().record("branch.id", id);
}

#[cfg(test)]
mod tests {
    #[test]
    fn traces_url_appends_the_signal_path_once() {
        assert_eq!(super::traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(super::traces_url("http://c:4318/v1/traces"), "http://c:4318/v1/traces");
    }
}
