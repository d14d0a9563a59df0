//! `GET /metrics`: Prometheus text format from `prometheus-client` (no global registry).
//!
//! Fed from one place: the library's request tap ([`mcp_middleware::request_tap`]), which
//! sees every finished client request of every session (and the admin session's). Gauges that
//! describe the present (open sessions, upstream restarts) are read when scraped.
//!
//! - `mcp_requests_total{mcp_method_name, outcome, server}`: finished requests.
//! - `mcp_server_operation_duration_seconds{mcp_method_name, outcome, server}`: their duration,
//!   with the buckets of the OpenTelemetry MCP semantic conventions
//!   (`mcp.server.operation.duration`).
//! - `mcp_sessions_open`: open HTTP sessions.
//! - `mcp_upstream_restarts_total`: upstreams a session restarted.
//! - `mcp_client_queue_bytes`: bytes of messages waiting for clients, over all open sessions
//!   (a client that stops reading makes it grow).
//! - `mcp_codemode_executions_total{outcome}`: code-mode `execute` calls.
//!
//! `server` is the server a request was routed to: the namespace prefix of the tool, prompt or
//! resource when the proxy has several servers, the one server's name when it has one, and `*`
//! for requests that go to every server (`tools/list`, `initialize`, ...).

use std::sync::Mutex;

use std::time::Duration;

use mcp_middleware::model::Outcome;
use mcp_middleware::request_tap::{RequestEnd, RequestStart, RequestTap, TappedRequest};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::ServerNames;

/// The buckets of `mcp.server.operation.duration` in the OpenTelemetry MCP semantic
/// conventions.
const BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    mcp_method_name: String,
    outcome: String,
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// Every metric, and the registry that encodes them.
pub(crate) struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    duration: Family<RequestLabels, Histogram>,
    sessions: Gauge,
    queued: Gauge,
    restarts: Counter,
    executions: Family<OutcomeLabels, Counter>,
    servers: ServerNames,
    codemode: bool,
}

impl Metrics {
    /// Metrics for a proxy with these servers; `codemode`: whether its chain runs code mode
    /// (its `execute` calls are counted).
    pub(crate) fn new(servers: ServerNames, codemode: bool) -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "mcp_requests",
            "Finished MCP client requests",
            requests.clone(),
        );
        let duration = Family::<RequestLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "mcp_server_operation_duration_seconds",
            "Duration of MCP client requests, from arrival to answer",
            duration.clone(),
        );
        let sessions = Gauge::default();
        registry.register("mcp_sessions_open", "Open HTTP sessions", sessions.clone());
        let queued = Gauge::default();
        registry.register(
            "mcp_client_queue_bytes",
            "Bytes of messages waiting for clients, over all open sessions",
            queued.clone(),
        );
        let restarts = Counter::default();
        registry.register(
            "mcp_upstream_restarts",
            "Upstreams restarted by a session after they died",
            restarts.clone(),
        );
        let executions = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "mcp_codemode_executions",
            "Code-mode execute calls",
            executions.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            requests,
            duration,
            sessions,
            queued,
            restarts,
            executions,
            servers,
            codemode,
        }
    }

    /// The text exposition, with the present-state gauges set to `open_sessions`,
    /// `queued_bytes` (waiting for clients) and `restarts`.
    pub(crate) fn encode(
        &self,
        open_sessions: usize,
        queued_bytes: usize,
        restarts: u64,
    ) -> String {
        self.sessions
            .set(i64::try_from(open_sessions).unwrap_or(i64::MAX));
        self.queued
            .set(i64::try_from(queued_bytes).unwrap_or(i64::MAX));
        let seen = self.restarts.get();
        if restarts > seen {
            self.restarts.inc_by(restarts - seen);
        }
        let mut text = String::new();
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(err) = prometheus_client::encoding::text::encode(&mut text, &registry) {
            tracing::warn!(%err, "encoding the metrics failed");
        }
        text
    }

    /// Counts one finished request: `method` about `target` ended in `outcome` after
    /// `duration`.
    fn record(&self, method: &str, target: Option<&str>, outcome: Outcome, duration: Duration) {
        let server = self.servers.server_of(target);
        let labels = RequestLabels {
            mcp_method_name: method.to_owned(),
            outcome: outcome.as_str().to_owned(),
            server,
        };
        self.requests.get_or_create(&labels).inc();
        self.duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
        if self.codemode && method == "tools/call" && target == Some("execute") {
            self.executions
                .get_or_create(&OutcomeLabels {
                    outcome: labels.outcome,
                })
                .inc();
        }
    }
}

/// The tap that feeds [`Metrics`].
pub(crate) struct MetricsTap(pub(crate) std::sync::Arc<Metrics>);

/// A request [`MetricsTap`] follows until it ends.
struct Counted {
    metrics: std::sync::Arc<Metrics>,
    method: String,
    target: Option<String>,
}

impl RequestTap for MetricsTap {
    fn start(&self, request: &RequestStart<'_>) -> Option<Box<dyn TappedRequest>> {
        Some(Box::new(Counted {
            metrics: self.0.clone(),
            method: request.method.to_owned(),
            target: request.target(),
        }))
    }
}

impl TappedRequest for Counted {
    fn end(self: Box<Self>, end: &RequestEnd<'_>) {
        self.metrics.record(
            &self.method,
            self.target.as_deref(),
            end.outcome,
            end.duration,
        );
    }
}
