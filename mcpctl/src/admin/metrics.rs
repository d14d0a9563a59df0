//! `GET /metrics`: Prometheus text format from `prometheus-client` (no global registry).
//!
//! Fed from one place: the library's request tap ([`mcp_middleware::request_tap`]), which
//! sees every finished client request of every session (and the admin session's). Gauges that
//! describe the present (open sessions, upstream restarts) are read when scraped.
//!
//! - `mcp_requests_total{LABELS}`: finished requests.
//! - `mcp_server_operation_duration_seconds{LABELS}`: their duration, with the buckets of the
//!   OpenTelemetry MCP semantic conventions (`mcp.server.operation.duration`).
//! - `mcp_sessions_open`: open HTTP sessions.
//! - `mcpctl_build_info{version}`: always 1; the running build's version.
//! - `mcp_upstream_restarts_total`: upstreams a session restarted.
//! - `mcp_client_queue_bytes`: bytes of messages waiting for clients, over all open sessions
//!   (a client that stops reading makes it grow).
//! - `mcp_codemode_executions_total{outcome}`: code-mode `execute` calls.
//!
//! `server` is the server a request was routed to: the namespace prefix of the tool, prompt or
//! resource when the proxy has several servers, the one server's name when it has one, and `*`
//! for requests that go to every server (`tools/list`, `initialize`, ...).
//!
//! `LABELS` are the conventions' attributes, written as Prometheus names:
//! - `mcp_method_name`: the JSON-RPC method;
//! - `gen_ai_tool_name` (for `tools/call`) and `gen_ai_prompt_name` (for `prompts/get`): the
//!   name the client called, empty for other methods;
//! - `error_type`: empty when the request succeeded, else the JSON-RPC error code (`-32602`),
//!   `tool_error` for a tool result with `isError: true`, or `cancelled`;
//! - `outcome` (`ok`, `error`, `rejected`, `cancelled`) and `server`, as above.
//!
//! Names come from clients, so their number is bounded: past [`MOST_NAMES`] distinct names of
//! one kind (or for a name longer than [`LONGEST_NAME`]) the label reads `_other`. Who called
//! is never a label (per-caller figures belong in the audit log, not in a time series).

use std::sync::Mutex;

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

/// How many distinct tool (or prompt) names get a label of their own.
const MOST_NAMES: usize = 512;

/// The longest name that gets a label of its own, in bytes.
const LONGEST_NAME: usize = 128;

/// The label of names past [`MOST_NAMES`] or [`LONGEST_NAME`].
const OTHER: &str = "_other";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    mcp_method_name: String,
    gen_ai_tool_name: String,
    gen_ai_prompt_name: String,
    error_type: String,
    outcome: String,
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

/// The names that have a label of their own (see the module docs).
#[derive(Debug, Default)]
struct Named(Mutex<std::collections::HashSet<String>>);

impl Named {
    /// `name`'s label: itself, or [`OTHER`] once the set is full or for a long name.
    fn label(&self, name: &str) -> String {
        if name.len() > LONGEST_NAME {
            return OTHER.to_owned();
        }
        let mut names = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if names.contains(name) {
            return name.to_owned();
        }
        if names.len() >= MOST_NAMES {
            return OTHER.to_owned();
        }
        names.insert(name.to_owned());
        name.to_owned()
    }
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
    tools: Named,
    prompts: Named,
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
        let build = Family::<BuildLabels, Gauge>::default();
        registry.register(
            "mcpctl_build_info",
            "The running build (always 1)",
            build.clone(),
        );
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
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
            tools: Named::default(),
            prompts: Named::default(),
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

    /// Counts one finished request: `method` about `target` ended as `end` says.
    fn record(&self, method: &str, target: Option<&str>, end: &RequestEnd<'_>) {
        let (outcome, duration) = (end.outcome, end.duration);
        let server = self.servers.server_of(target);
        let named = |kind: &str, names: &Named| match target {
            Some(name) if method == kind => names.label(name),
            _ => String::new(),
        };
        let labels = RequestLabels {
            mcp_method_name: method.to_owned(),
            gen_ai_tool_name: named("tools/call", &self.tools),
            gen_ai_prompt_name: named("prompts/get", &self.prompts),
            error_type: error_type(end),
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
        self.metrics
            .record(&self.method, self.target.as_deref(), end);
    }
}

/// The conventions' `error.type` of a finished request: empty for a success, the JSON-RPC
/// error code, `tool_error` for a tool result with `isError: true`, or `cancelled`.
fn error_type(end: &RequestEnd<'_>) -> String {
    match (end.outcome, end.error_code) {
        (Outcome::Ok, _) => String::new(),
        (Outcome::Cancelled, _) => "cancelled".to_owned(),
        (_, Some(code)) => code.to_string(),
        (_, None) => "tool_error".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_get_labels_of_their_own_up_to_a_bound() {
        let names = Named::default();
        assert_eq!(names.label("echo"), "echo");
        assert_eq!(names.label(&"x".repeat(LONGEST_NAME + 1)), OTHER);
        for n in 1..MOST_NAMES {
            assert_eq!(names.label(&format!("tool-{n}")), format!("tool-{n}"));
        }
        assert_eq!(names.label("one-too-many"), OTHER);
        assert_eq!(
            names.label("echo"),
            "echo",
            "a name seen before keeps its label"
        );
    }
}
