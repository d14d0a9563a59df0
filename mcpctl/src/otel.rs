//! OpenTelemetry traces (README, "Traces (OpenTelemetry)"): off unless the standard OTLP
//! endpoint variables say where to send them.
//!
//! [`Traces::from_env`] reads `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`; with neither (or with `OTEL_SDK_DISABLED=true`) there is no
//! tap and the proxy forwards every message as it would without this module. With one, spans
//! are batched and exported over OTLP/HTTP with protobuf by the OpenTelemetry SDK (the exporter
//! itself reads the rest of the standard variables: `OTEL_EXPORTER_OTLP_HEADERS`, timeouts,
//! compression), one SERVER span per client request ([`tap`]), and W3C trace context goes
//! upstream in `params._meta`. Dropping [`Traces`] flushes what is still batched, so a
//! `proxy` whose client closed, or a `serve` that got SIGTERM, exports its last spans.
//!
//! Without the `otel` cargo feature the same [`Traces`] exists, never taps, and says so when
//! an endpoint is configured.

#[cfg(feature = "otel")]
mod http;
#[cfg(feature = "otel")]
mod tap;

use std::sync::Arc;

use mcp_middleware::request_tap::RequestTap;

/// The downstream transport, for `network.transport` (and `network.protocol.name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Downstream {
    /// `mcpctl proxy`: the client's stdio pipes.
    Pipe,
    /// `mcpctl serve`: streamable HTTP over TCP.
    Http,
}

/// The variables that turn tracing on: the traces endpoint, or the endpoint of every signal.
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// The endpoint variable that is set (to something other than blank), if tracing is wanted.
fn configured_endpoint() -> Option<&'static str> {
    let disabled = std::env::var("OTEL_SDK_DISABLED")
        .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
    if disabled {
        return None;
    }
    ENDPOINT_VARS
        .into_iter()
        .find(|var| std::env::var(var).is_ok_and(|value| !value.trim().is_empty()))
}

/// The process's tracing: a tap for the proxy's sessions while it lives, a flush when dropped.
pub(crate) struct Traces {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
    tap: Option<Arc<dyn RequestTap>>,
}

impl Traces {
    /// Tracing as the environment asks for it: none without an OTLP endpoint.
    #[cfg(feature = "otel")]
    pub(crate) fn from_env(downstream: Downstream) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        use opentelemetry::trace::TracerProvider as _;
        use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};

        let Some(var) = configured_endpoint() else {
            return Ok(Self::off());
        };
        // Said at start, not at the first failed export: the client speaks HTTP(S) only. The
        // URL itself is not repeated: it may carry credentials.
        let endpoint = std::env::var(var).unwrap_or_default();
        let scheme = endpoint.trim().split_once("://").map(|(scheme, _)| scheme);
        let web = |s: &str| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https");
        if !scheme.is_some_and(web) {
            anyhow::bail!(
                "{var}: OpenTelemetry traces go to an http:// or https:// URL, not {}",
                scheme.map_or_else(
                    || "one without a scheme".to_owned(),
                    |s| format!("`{s}://`")
                )
            );
        }
        let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Ok(protocol) = protocol
            && protocol.trim() != "http/protobuf"
        {
            tracing::warn!(
                "OTEL_EXPORTER_OTLP_PROTOCOL is `{protocol}`; mcpctl exports traces over \
                 http/protobuf only, and does so"
            );
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(
                http::OtlpClient::new()
                    .map_err(|err| anyhow::anyhow!("OpenTelemetry traces: {err}"))?,
            )
            .build()
            .with_context(|| format!("OpenTelemetry traces: the OTLP exporter for `{var}`"))?;
        let service = std::env::var("OTEL_SERVICE_NAME")
            .ok()
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| "mcpctl".to_owned());
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(service)
            .build();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("mcpctl");
        tracing::debug!(from = var, "OpenTelemetry traces are on");
        Ok(Self {
            tap: Some(Arc::new(tap::SpanTap::new(tracer, downstream))),
            provider: Some(provider),
        })
    }

    /// Without the `otel` feature: never a tap; a configured endpoint gets a warning.
    #[cfg(not(feature = "otel"))]
    pub(crate) fn from_env(_downstream: Downstream) -> anyhow::Result<Self> {
        if let Some(var) = configured_endpoint() {
            tracing::warn!(
                "{var} is set, but this mcpctl was built without the `otel` feature: no traces \
                 are exported"
            );
        }
        Ok(Self::off())
    }

    fn off() -> Self {
        Self {
            #[cfg(feature = "otel")]
            provider: None,
            tap: None,
        }
    }

    /// The tap to install in the proxy's sessions, when tracing is on.
    pub(crate) fn tap(&self) -> Option<Arc<dyn RequestTap>> {
        self.tap.clone()
    }
}

impl Drop for Traces {
    /// Exports what is still batched (the exporter's own timeout bounds it).
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider.take()
            && let Err(err) = provider.shutdown()
        {
            tracing::warn!("OpenTelemetry traces: the last spans were not all exported: {err}");
        }
    }
}
