//! One OpenTelemetry SERVER span per client request, with the MCP semantic conventions'
//! attributes, and its W3C trace context for the upstream.
//!
//! The span starts when the request enters the session and ends when its answer leaves (or it
//! is cancelled), so its duration is the request's. A `traceparent` (and `tracestate`) in the
//! client's `params._meta` makes the span its child; what is forwarded upstream carries the
//! span's own context in `params._meta`, so the upstream's spans are the proxy's children.
//! Both directions go through OpenTelemetry's W3C propagator, not a parser of our own.
//!
//! `mcp.session.id` is the proxy's session id (the one in its logs), not an HTTP
//! `Mcp-Session-Id`: that header is what a client presents to use its session, and traces are
//! read by more people than should hold it.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Span, Tracer};
use serde_json::{Map, Value};

use mcp_middleware::model::Outcome;
use mcp_middleware::request_tap::{RequestEnd, RequestStart, RequestTap, TappedRequest};

use super::Downstream;

/// Starts a span for each client request.
pub(super) struct SpanTap {
    tracer: Tracer,
    propagator: TraceContextPropagator,
    downstream: Downstream,
}

impl SpanTap {
    pub(super) fn new(tracer: Tracer, downstream: Downstream) -> Self {
        Self {
            tracer,
            propagator: TraceContextPropagator::new(),
            downstream,
        }
    }
}

/// A request's span, and the trace context to send upstream for it.
struct RequestSpan {
    span: Span,
    forward: Vec<(String, String)>,
}

/// `params._meta` read as a W3C carrier.
struct MetaCarrier<'a>(&'a Map<String, Value>);

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The entries a propagator writes, for `params._meta`.
struct Entries(Vec<(String, String)>);

impl Injector for Entries {
    fn set(&mut self, key: &str, value: String) {
        self.0.push((key.to_owned(), value));
    }
}

impl RequestTap for SpanTap {
    fn start(&self, request: &RequestStart<'_>) -> Option<Box<dyn TappedRequest>> {
        let parent = self.propagator.extract(&MetaCarrier(request.meta));
        let target = request.target();
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", request.method.to_owned()),
            KeyValue::new("jsonrpc.request.id", request_id(request.id)),
            KeyValue::new("mcp.session.id", request.session_id.to_owned()),
        ];
        if let Some(version) = request.protocol_version {
            attributes.push(KeyValue::new("mcp.protocol.version", version.to_owned()));
        }
        match self.downstream {
            Downstream::Pipe => attributes.push(KeyValue::new("network.transport", "pipe")),
            Downstream::Http => {
                attributes.push(KeyValue::new("network.transport", "tcp"));
                attributes.push(KeyValue::new("network.protocol.name", "http"));
            }
        }
        // The span name's target is low-cardinality only for tools and prompts (semconv).
        let mut name = request.method.to_owned();
        match (request.method, target) {
            ("tools/call", Some(tool)) => {
                name = format!("{name} {tool}");
                attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
                attributes.push(KeyValue::new("gen_ai.tool.name", tool));
            }
            ("prompts/get", Some(prompt)) => {
                name = format!("{name} {prompt}");
                attributes.push(KeyValue::new("gen_ai.prompt.name", prompt));
            }
            (_, Some(uri)) => attributes.push(KeyValue::new("mcp.resource.uri", uri)),
            (_, None) => {}
        }
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        // Joins the trace to the logs: the session's lines carry the same `session`.
        tracing::debug!(
            session = request.session_id,
            trace_id = %span.span_context().trace_id(),
            method = request.method,
            "request traced"
        );
        let mut forward = Entries(Vec::new());
        let context = Context::new().with_remote_span_context(span.span_context().clone());
        self.propagator.inject_context(&context, &mut forward);
        Some(Box::new(RequestSpan {
            span,
            forward: forward.0,
        }))
    }
}

impl TappedRequest for RequestSpan {
    fn forward_meta(&self) -> &[(String, String)] {
        &self.forward
    }

    fn end(mut self: Box<Self>, end: &RequestEnd<'_>) {
        self.span.set_attribute(KeyValue::new(
            "mcp_middleware.outcome",
            end.outcome.as_str(),
        ));
        if end.outcome == Outcome::Error {
            // semconv: the JSON-RPC error code as a string, or `tool_error` for `isError`.
            let error_type = end
                .error_code
                .map_or_else(|| "tool_error".to_owned(), |code| code.to_string());
            if let Some(code) = end.error_code {
                self.span
                    .set_attribute(KeyValue::new("rpc.response.status_code", code.to_string()));
            }
            self.span
                .set_attribute(KeyValue::new("error.type", error_type));
            self.span.set_status(Status::error(
                end.error_message.unwrap_or("error").to_owned(),
            ));
        }
        self.span.end();
    }
}

/// The id as a string attribute: a JSON string's text, a number as written.
fn request_id(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::String(text)) => text,
        _ => raw.to_owned(),
    }
}
