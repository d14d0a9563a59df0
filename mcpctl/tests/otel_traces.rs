//! OpenTelemetry traces end to end: the real
//! `mcpctl proxy` (stdio) and `mcpctl serve` (HTTP) in front of the scripted upstream, with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP receiver this test runs (hyper,
//! decoding `ExportTraceServiceRequest` with `opentelemetry-proto`). Checked: one SERVER span
//! per request with the MCP semantic-convention attributes, the span a child of the client's
//! `traceparent`, the upstream given the span's own context in `params._meta`, and, without the
//! variable, every forwarded byte as the client wrote it.

#[path = "../../mcp-middleware/tests/support/http_client.rs"]
mod http_client;
mod support;

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;

use std::sync::{Arc, Condvar, Mutex};
use wait_timeout::ChildExt;

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use prost::Message as _;
use serde_json::{Value, json};

use support::{Client, WAIT};

/// The client's own trace context, as an instrumented MCP client sends it.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const SPAN_KIND_SERVER: i32 = 2;
const STATUS_ERROR: i32 = 2;

/// One span as the receiver got it.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    kind: i32,
    status: i32,
    attributes: HashMap<String, String>,
    start: u64,
    end: u64,
}

impl Got {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// An OTLP/HTTP receiver on a loopback port, stopped when dropped.
struct Receiver {
    addr: SocketAddr,
    /// What arrived, and a signal each time more does.
    spans: Arc<(Mutex<Vec<Got>>, Condvar)>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("its address");
        let spans = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let store = spans.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the receiver's runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                tokio::pin!(stopped);
                loop {
                    let stream = tokio::select! {
                        _ = &mut stopped => break,
                        accepted = listener.accept() => match accepted {
                            Ok((stream, _)) => stream,
                            Err(_) => continue,
                        },
                    };
                    let store = store.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            let store = store.clone();
                            async move { Ok::<_, Infallible>(receive(request, &store).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        Self {
            addr,
            spans,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits until the spans received satisfy `done`, and returns them.
    fn wait_for(&self, what: &str, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        let (spans, arrived) = &*self.spans;
        let spans = spans.lock().expect("spans");
        let (spans, waited) = arrived
            .wait_timeout_while(spans, WAIT, |spans| !done(spans))
            .expect("spans");
        assert!(
            !waited.timed_out(),
            "no {what} within {WAIT:?}; received: {:#?}",
            *spans
        );
        spans.clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Decodes one export (only OTLP/HTTP protobuf on `/v1/traces` is accepted).
async fn receive(
    request: Request<Incoming>,
    store: &(Mutex<Vec<Got>>, Condvar),
) -> Response<Full<Bytes>> {
    let answer = |status: u16| {
        Response::builder()
            .status(status)
            .header("content-type", "application/x-protobuf")
            .body(Full::new(Bytes::new()))
            .expect("a response")
    };
    let protobuf = request
        .headers()
        .get("content-type")
        .is_some_and(|t| t == "application/x-protobuf");
    if request.uri().path() != "/v1/traces" || !protobuf {
        return answer(415);
    }
    let Ok(body) = request.into_body().collect().await else {
        return answer(400);
    };
    let Ok(export) = ExportTraceServiceRequest::decode(body.to_bytes()) else {
        return answer(400);
    };
    let (spans, arrived) = store;
    let mut spans = spans.lock().expect("spans");
    for resource in export.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| text_of(kv.value.as_ref()))
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                spans.push(Got {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    kind: span.kind,
                    status: span.status.map_or(0, |s| s.code),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text_of(kv.value.as_ref())))
                        .collect(),
                    start: span.start_time_unix_nano,
                    end: span.end_time_unix_nano,
                });
            }
        }
    }
    arrived.notify_all();
    answer(200)
}

fn text_of(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => text.clone(),
        Some(any_value::Value::IntValue(n)) => n.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A file under the system's temporary directory, unique to this test process and `name`.
fn temp_file(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("otel-traces-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// The trace id and parent span id of a W3C `traceparent`.
fn traceparent_parts(traceparent: &str) -> (String, String) {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "not a traceparent: {traceparent}");
    assert_eq!(parts[0], "00", "{traceparent}");
    (parts[1].to_owned(), parts[2].to_owned())
}

/// What the scripted upstream's `echo_params` tool says it received.
fn echoed_params(answer: &Value) -> Value {
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {answer}"));
    serde_json::from_str(text).expect("echo_params answers JSON")
}

fn tool_call(id: u64, meta: Option<Value>) -> Value {
    let mut params = json!({"name": "echo_params", "arguments": {"text": "hi"}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// The line of the upstream's raw log whose method is `method`, with its id.
fn received_line(log: &std::path::Path, method: &str) -> (String, Value) {
    let text = std::fs::read_to_string(log).expect("the upstream's raw log");
    text.lines()
        .find_map(|line| {
            let value: Value = serde_json::from_str(line).ok()?;
            (value["method"] == method).then(|| (line.to_owned(), value["id"].clone()))
        })
        .unwrap_or_else(|| panic!("the upstream received no `{method}`; it got:\n{text}"))
}

/// A request with unusual spacing and a `_meta` of its own, to see what reaches the upstream.
const SPACED: &str = r#"{"jsonrpc":"2.0","id":9,"method":"custom/echo","params":{ "a" : [1,  2] , "_meta" : { "x" : "y" } }}"#;

/// `proxy --model MODEL` with tracing on: spans for each request, the client's trace joined,
/// and the upstream given the proxy span's context.
fn stdio_traces(model: &str) {
    let receiver = Receiver::start();
    let endpoint = receiver.endpoint();
    let raw_log = temp_file(&format!("stdio-{model}"));
    let raw_log_text = raw_log.display().to_string();
    let mut client = Client::scripted(
        &["--model", model],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "otel-test"),
            ("SCRIPTED_RAW_LOG", raw_log_text.as_str()),
        ],
    );
    client.initialize();
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    client.send(&tool_call(
        2,
        Some(json!({"traceparent": traceparent, "tracestate": "vendor=kept"})),
    ));
    let joined = client.request_response(json!(2));
    client.send(&tool_call(3, None));
    let fresh = client.request_response(json!(3));
    let failed = client.request(json!(4), "no/such_method", json!({}));
    assert!(failed.get("error").is_some(), "{failed}");
    client.send_line(SPACED);
    client.request_response(json!(9));
    // A call the upstream never answers, cancelled by the client: its span ends then.
    client.send(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "hang"}}),
    );
    client.notify("notifications/cancelled", json!({"requestId": 5}));
    let (status, stderr) = client.close_with_stderr();
    assert!(status.success(), "mcpctl failed: {stderr}");

    // The upstream got the proxy span's context, in the client's trace, its tracestate kept.
    let upstream_meta = &echoed_params(&joined)["_meta"];
    let (trace, upstream_parent) = traceparent_parts(
        upstream_meta["traceparent"]
            .as_str()
            .unwrap_or_else(|| panic!("no traceparent upstream: {joined}")),
    );
    assert_eq!(trace, CLIENT_TRACE, "the upstream's trace is the client's");
    assert_ne!(
        upstream_parent, CLIENT_SPAN,
        "the proxy's span sits between"
    );
    assert_eq!(upstream_meta["tracestate"], "vendor=kept");
    let fresh_meta = &echoed_params(&fresh)["_meta"];
    let (fresh_trace, fresh_parent) = traceparent_parts(
        fresh_meta["traceparent"]
            .as_str()
            .unwrap_or_else(|| panic!("no traceparent upstream: {fresh}")),
    );
    assert_ne!(
        fresh_trace, CLIENT_TRACE,
        "a request without context starts a trace"
    );

    // Only `_meta` changed in what was forwarded: the rest kept its bytes.
    let (line, _) = received_line(&raw_log, "custom/echo");
    assert!(
        line.contains(r#""a" : [1,  2] ,"#),
        "the params' bytes changed: {line}"
    );
    let forwarded: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(forwarded["params"]["_meta"]["x"], "y", "{line}");
    assert!(
        forwarded["params"]["_meta"]["traceparent"].is_string(),
        "{line}"
    );
    let _ = std::fs::remove_file(&raw_log);

    // Spans: initialize, three tool calls, the failed call, custom/echo; flushed at exit.
    let spans = receiver.wait_for("six request spans", |spans| spans.len() >= 6);
    let by_id = |id: &str| {
        spans
            .iter()
            .find(|s| s.attr("jsonrpc.request.id") == Some(id))
            .unwrap_or_else(|| panic!("no span for request {id}: {spans:#?}"))
    };
    let call = by_id("2");
    assert_eq!(call.name, "tools/call echo_params");
    assert_eq!(call.kind, SPAN_KIND_SERVER);
    assert_eq!(call.service, "otel-test");
    assert_eq!(call.attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(call.attr("gen_ai.tool.name"), Some("echo_params"));
    assert_eq!(call.attr("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(call.attr("mcp.protocol.version"), Some("2025-11-25"));
    assert_eq!(call.attr("network.transport"), Some("pipe"));
    assert!(
        call.attr("mcp.session.id").is_some_and(|id| !id.is_empty()),
        "{call:?}"
    );
    assert_eq!(call.trace_id, CLIENT_TRACE, "a child of the client's span");
    assert_eq!(call.parent_span_id, CLIENT_SPAN);
    assert_eq!(
        call.span_id, upstream_parent,
        "the upstream's parent is this span"
    );
    assert!(call.end >= call.start && call.start > 0, "{call:?}");
    assert_ne!(call.status, STATUS_ERROR);

    let root = by_id("3");
    assert_eq!(root.parent_span_id, "", "no client context: a root span");
    assert_eq!(root.trace_id, fresh_trace);
    assert_eq!(root.span_id, fresh_parent);

    let error = by_id("4");
    assert_eq!(error.name, "no/such_method");
    assert_eq!(error.status, STATUS_ERROR);
    assert_eq!(error.attr("error.type"), Some("-32601"));
    assert_eq!(error.attr("rpc.response.status_code"), Some("-32601"));

    let cancelled = by_id("5");
    assert_eq!(cancelled.name, "tools/call hang");
    assert_eq!(cancelled.attr("mcp_middleware.outcome"), Some("cancelled"));
    assert_ne!(cancelled.status, STATUS_ERROR);
    assert_eq!(call.attr("mcp_middleware.outcome"), Some("ok"));

    let initialize = by_id("0");
    assert_eq!(initialize.attr("mcp.method.name"), Some("initialize"));
    assert_eq!(
        initialize.attr("mcp.session.id"),
        call.attr("mcp.session.id"),
        "one session"
    );
}

#[test]
fn stdio_requests_become_server_spans_and_the_upstream_joins_the_trace() {
    stdio_traces("passthrough");
}

#[test]
fn stdio_requests_through_hooks_carry_the_trace_to_the_upstream() {
    // `paginate` hooks tools/call (its results are paged): what its `next` sends upstream
    // carries the request's trace context too.
    stdio_traces("paginate");
}

#[test]
fn without_an_endpoint_the_upstream_gets_the_clients_bytes() {
    let raw_log = temp_file("off");
    let raw_log_text = raw_log.display().to_string();
    // Blank is unset (the OpenTelemetry rule), whatever the test's own environment holds.
    let mut client = Client::scripted(
        &["--model", "passthrough"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""),
            ("SCRIPTED_RAW_LOG", raw_log_text.as_str()),
        ],
    );
    client.initialize();
    client.send_line(SPACED);
    client.request_response(json!(9));
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let call = tool_call(2, Some(json!({"traceparent": traceparent})));
    let call_line = call.to_string();
    client.send_line(&call_line);
    let answer = client.request_response(json!(2));
    let status = client.close();
    assert!(status.success());

    // Byte for byte, but for the id the proxy gives each request upstream.
    let (line, id) = received_line(&raw_log, "custom/echo");
    assert_eq!(
        line.replacen(&format!("\"id\":{id}"), "\"id\":9", 1),
        SPACED
    );
    let (line, id) = received_line(&raw_log, "tools/call");
    assert_eq!(
        line.replacen(&format!("\"id\":{id}"), "\"id\":2", 1),
        call_line
    );
    assert_eq!(
        echoed_params(&answer)["_meta"]["traceparent"],
        traceparent,
        "the client's own context reaches the upstream untouched"
    );
    let _ = std::fs::remove_file(&raw_log);
}

/// `mcpctl serve` in front of the scripted upstream, with `env`; killed when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Served {
    fn start(env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpctl"));
        command
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--model",
                "passthrough",
                "--",
            ])
            .args(support::scripted_upstream())
            .env_remove("MCPCTL_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("mcpctl serve starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("listening on http://") {
                    let _ = tx.send(url.trim_end_matches("/mcp").to_owned());
                } else {
                    eprintln!("mcpctl: {line}");
                }
            }
        });
        let authority = rx.recv_timeout(WAIT).expect("mcpctl serve listens");
        let addr = authority.parse().expect("a socket address");
        Self { child, addr }
    }

    /// SIGTERM, as a service manager stops it, and its exit.
    fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        match self.child.wait_timeout(WAIT).expect("wait") {
            Some(status) => status,
            None => panic!("mcpctl serve did not stop within {WAIT:?}"),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_http_requests_become_server_spans_and_the_upstream_joins_the_trace() {
    let receiver = Receiver::start();
    // The traces-only variable, given the whole URL.
    let endpoint = format!("{}/v1/traces", receiver.endpoint());
    let served = Served::start(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint.as_str())]);
    let mut conn = http_client::Conn::connect(served.addr).await;
    let session = http_client::start_session(&mut conn, "otel").await;
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let messages = http_client::call(
        &mut conn,
        &session,
        7,
        "tools/call",
        json!({"name": "echo_params", "arguments": {}, "_meta": {"traceparent": traceparent}}),
    )
    .await;
    let answer = messages.last().expect("an answer");
    let (trace, upstream_parent) = traceparent_parts(
        echoed_params(answer)["_meta"]["traceparent"]
            .as_str()
            .unwrap_or_else(|| panic!("no traceparent upstream: {answer}")),
    );
    assert_eq!(trace, CLIENT_TRACE);
    drop(conn);
    let status = served.stop();
    assert!(status.success(), "{status}");

    let spans = receiver.wait_for("the tools/call span", |spans| {
        spans
            .iter()
            .any(|s| s.attr("jsonrpc.request.id") == Some("7"))
    });
    let call = spans
        .iter()
        .find(|s| s.attr("jsonrpc.request.id") == Some("7"))
        .expect("found above");
    assert_eq!(call.name, "tools/call echo_params");
    assert_eq!(call.kind, SPAN_KIND_SERVER);
    assert_eq!(call.service, "mcpctl", "the default service name");
    assert_eq!(call.attr("gen_ai.tool.name"), Some("echo_params"));
    assert_eq!(call.attr("network.transport"), Some("tcp"));
    assert_eq!(call.attr("network.protocol.name"), Some("http"));
    assert!(call.attr("mcp.protocol.version").is_some(), "{call:?}");
    assert_eq!(call.trace_id, CLIENT_TRACE);
    assert_eq!(call.parent_span_id, CLIENT_SPAN);
    assert_eq!(call.span_id, upstream_parent);
}

/// The official MCP Python SDK (`tests/interop/.venv`) calling one tool through `mcpctl proxy`
/// with trace context in `_meta`, printing what the tool answered.
const PYTHON_CLIENT: &str = r#"
import asyncio, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    traceparent, command, *args = sys.argv[1:]
    server = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(
                "echo_params", {"text": "hi"}, meta={"traceparent": traceparent})
            print(result.content[0].text, flush=True)

asyncio.run(main())
"#;

#[test]
fn the_official_python_client_over_stdio_gets_its_trace_continued() {
    let python =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/interop/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: install the interop suite's environment (tests/interop/README.md)",
        python.display()
    );
    let receiver = Receiver::start();
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let mut child = Command::new(python)
        .arg("-c")
        .arg(PYTHON_CLIENT)
        .arg(&traceparent)
        .arg(env!("CARGO_BIN_EXE_mcpctl"))
        .args(["proxy", "--model", "passthrough", "--"])
        .args(support::scripted_upstream())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the Python client starts");
    // Both pipes read to their end in threads of their own: a client that hangs cannot hang
    // the test, which kills it after `WAIT`.
    let read_all = |pipe: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(pipe).read_to_string(&mut text);
            let _ = tx.send(text);
        });
        rx
    };
    let stdout = read_all(Box::new(child.stdout.take().expect("stdout is piped")));
    let stderr = read_all(Box::new(child.stderr.take().expect("stderr is piped")));
    let exited = child.wait_timeout(WAIT).expect("wait");
    if exited.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let stderr = stderr.recv_timeout(WAIT).unwrap_or_default();
    let status = exited.unwrap_or_else(|| panic!("the Python client did not finish: {stderr}"));
    assert!(status.success(), "the Python client failed: {stderr}");
    let stdout = stdout.recv_timeout(WAIT).unwrap_or_default();
    let line = stdout
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no answer from the Python client: {stderr}"));
    let params: Value = serde_json::from_str(line).expect("echo_params answers JSON");
    let (trace, upstream_parent) = traceparent_parts(
        params["_meta"]["traceparent"]
            .as_str()
            .unwrap_or_else(|| panic!("no traceparent upstream: {line}")),
    );
    assert_eq!(trace, CLIENT_TRACE);

    let spans = receiver.wait_for("the tools/call span", |spans| {
        spans.iter().any(|s| s.name == "tools/call echo_params")
    });
    let call = spans
        .iter()
        .find(|s| s.name == "tools/call echo_params")
        .expect("found above");
    assert_eq!(call.kind, SPAN_KIND_SERVER);
    assert_eq!(call.trace_id, CLIENT_TRACE);
    assert_eq!(call.parent_span_id, CLIENT_SPAN);
    assert_eq!(call.span_id, upstream_parent);
    assert_eq!(call.attr("mcp.method.name"), Some("tools/call"));
    assert!(call.attr("mcp.protocol.version").is_some(), "{call:?}");
}

#[test]
fn an_endpoint_that_is_not_http_is_refused_at_start() {
    for (endpoint, says) in [
        ("grpc://127.0.0.1:4317", "not `grpc://`"),
        ("127.0.0.1:4318", "not one without a scheme"),
    ] {
        let client = Client::scripted(
            &["--model", "passthrough"],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)],
        );
        let (status, stderr) = client.close_with_stderr();
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(
                "OTEL_EXPORTER_OTLP_ENDPOINT: OpenTelemetry traces go to an http:// or https:// URL"
            ) && stderr.contains(says),
            "{stderr}"
        );
    }
}
