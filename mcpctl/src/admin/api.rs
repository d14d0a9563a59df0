//! The `/api/*` endpoints. JSON bodies are camelCase, lists come in an object named after them,
//! and errors are `{"error": {"message": ...}}` with the matching status.

use std::convert::Infallible;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::{BodyExt as _, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode, header};
use mcp_middleware::http::SessionSummary;
use mcp_middleware_models::audit::KeySource;
use mcp_middleware_models::audit_log::{Anchor, AuditKey, Verdict, verify, verify_with_anchor};
use mcpctl::store::{AnyResource, ProjectSpec, PromptSpec, ServerSpec, Store};
use serde_json::{Value, json};

use super::AdminState;
use super::view::ViewError;

/// A response body: whole, or streamed (SSE).
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// A JSON answer.
pub(crate) fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// An error answer: `{"error": {"message": MESSAGE}}`.
pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    json_response(status, &json!({"error": {"message": message.into()}}))
}

fn ok(value: Value) -> Response<Body> {
    json_response(StatusCode::OK, &value)
}

fn rfc3339(time: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn view_error(err: ViewError) -> Response<Body> {
    match err {
        ViewError::Rpc { code, message } => json_response(
            StatusCode::BAD_GATEWAY,
            &json!({"error": {"message": message, "code": code}}),
        ),
        other => error(StatusCode::BAD_GATEWAY, other.to_string()),
    }
}

/// `GET /api/servers`.
pub(crate) async fn servers(state: &AdminState) -> Response<Body> {
    // The servers' tools come from the admin session: starting it also brings the status
    // file up to date.
    let tools = state.view.tools().await;
    let names = server_names(state);
    let states = status_file(state, &names);
    let eras = state.project.as_ref().map(|(store, project)| {
        mcp_middleware::upstream::read_era_file(&crate::eras::era_file(store, project))
    });
    let restarts = super::logs::buffer().upstream_restarts();
    let view_error = tools.as_ref().err().map(ToString::to_string);
    let lifecycle = state
        .reloader
        .as_ref()
        .map(|r| r.lifecycle())
        .unwrap_or_default();
    let mut servers: Vec<Value> = names
        .names
        .iter()
        .map(|name| {
            let tool_count = tools.as_ref().map_or(0, |tools| {
                tools
                    .iter()
                    .filter(|t| names.server_of(t.get("name").and_then(Value::as_str)) == *name)
                    .count()
            });
            let recorded = states
                .iter()
                .find(|s| s.get("name").and_then(Value::as_str) == Some(name));
            let (status, last_error) = match (recorded, &view_error) {
                (Some(s), _) if s.get("state").and_then(Value::as_str) == Some("down") => (
                    "failed",
                    s.get("reason").and_then(Value::as_str).map(str::to_owned),
                ),
                (Some(_), _) => ("running", None),
                (None, Some(err)) => ("failed", Some(err.clone())),
                (None, None) => ("running", None),
            };
            // A server a reload changed is `restarting` until the admin session has seen it
            // run again (its tools listed, its state recorded as running).
            let restarting = lifecycle.get(name) == Some(&crate::live::Lifecycle::Restarting);
            let status = match (status, restarting, &state.reloader) {
                ("running", true, Some(reloader)) if tools.is_ok() => {
                    reloader.seen_running(name);
                    status
                }
                ("running", true, _) => "restarting",
                _ => status,
            };
            // The era the server was last seen speaking (recorded when it was connected).
            let era = eras
                .as_ref()
                .and_then(|eras| eras.get(name.as_str()))
                .cloned();
            json!({
                "name": name,
                "status": status,
                "toolCount": tool_count,
                "lastError": last_error,
                "restarts": restarts,
                "era": era,
            })
        })
        .collect();
    // Servers a reload removed from the project: stopped.
    for (name, _) in lifecycle
        .iter()
        .filter(|(name, l)| **l == crate::live::Lifecycle::Stopped && !names.names.contains(name))
    {
        servers.push(json!({
            "name": name,
            "status": "stopped",
            "toolCount": 0,
            "lastError": null,
            "restarts": restarts,
        }));
    }
    ok(json!({ "servers": servers }))
}

/// The servers the proxy runs now: the project's after its last reload, else those it started
/// with.
fn server_names(state: &AdminState) -> super::ServerNames {
    match &state.reloader {
        Some(reloader) => {
            let (names, separator) = reloader.server_names();
            super::ServerNames { names, separator }
        }
        None => state.servers.clone(),
    }
}

/// The states the project's server set last wrote (several servers only).
fn status_file(state: &AdminState, names: &super::ServerNames) -> Vec<Value> {
    let Some((store, project)) = &state.project else {
        return Vec::new();
    };
    if names.names.len() < 2 {
        return Vec::new();
    }
    let path = crate::proxy::status_file(store, project);
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<Vec<Value>>(&text).ok())
        .unwrap_or_default()
}

/// `GET /api/tools`.
pub(crate) async fn tools(state: &AdminState) -> Response<Body> {
    let names = server_names(state);
    match state.view.tools().await {
        Ok(tools) => {
            let tools: Vec<Value> = tools
                .into_iter()
                .map(|mut tool| {
                    let name = tool.get("name").and_then(Value::as_str).map(str::to_owned);
                    if let Some(object) = tool.as_object_mut() {
                        object.insert("server".into(), json!(names.server_of(name.as_deref())));
                        let restricted = name.as_deref().is_some_and(|n| {
                            mcp_middleware::pattern::any_matches(&state.restricted, n)
                        });
                        object.insert("restricted".into(), json!(restricted));
                    }
                    tool
                })
                .collect();
            ok(json!({ "tools": tools }))
        }
        Err(err) => view_error(err),
    }
}

/// `POST /api/tools/{name}/call` with `{"arguments": {...}}` (or no body): the tool's result as
/// `tools/call` returns it.
pub(crate) async fn call_tool(state: &AdminState, name: &str, body: &[u8]) -> Response<Body> {
    let arguments = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(mut object)) => object.remove("arguments").unwrap_or(json!({})),
            Ok(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "the body must be a JSON object: {\"arguments\": {...}}",
                );
            }
            Err(err) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("the body is not JSON: {err}"),
                );
            }
        }
    };
    if !arguments.is_object() {
        return error(StatusCode::BAD_REQUEST, "`arguments` must be a JSON object");
    }
    match state
        .view
        .request("tools/call", json!({"name": name, "arguments": arguments}))
        .await
    {
        Ok(result) => ok(result),
        Err(err) => view_error(err),
    }
}

/// `POST /api/search`, `/api/inspect`, `/api/execute`: code mode's `search_tools`, `inspect`
/// and `execute` for agents that are not MCP clients, the body being the tool's arguments
/// (`{"query": ...}`, `{"names": [...]}`, `{"code": ...}`). They run in the admin session,
/// under the project's routes (hidden stays hidden); `404` unless the chain runs code mode.
pub(crate) async fn code_mode(state: &AdminState, endpoint: &str, body: &[u8]) -> Response<Body> {
    if !state.codemode {
        return error(
            StatusCode::NOT_FOUND,
            format!("`/api/{endpoint}` needs a proxy that runs the `codemode` model"),
        );
    }
    let tool = match endpoint {
        "search" => "search_tools",
        other => other,
    };
    let arguments = match serde_json::from_slice::<Value>(body) {
        Ok(arguments @ Value::Object(_)) => arguments,
        Ok(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "the body must be a JSON object: the tool's arguments",
            );
        }
        Err(err) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {err}"),
            );
        }
    };
    match state
        .view
        .request("tools/call", json!({"name": tool, "arguments": arguments}))
        .await
    {
        Ok(result) => ok(result),
        Err(err) => view_error(err),
    }
}

/// A session as the API lists it: named by its log digest (as the proxy's logs name it), never
/// by its `Mcp-Session-Id`, which is what a client presents to use the session.
fn session_json(session: &SessionSummary, model: &str) -> Value {
    json!({
        "id": mcp_middleware::http::Sessions::log_id(&session.id),
        "principal": session.principal,
        "clientName": session.client_name,
        "clientVersion": session.client_version,
        "model": model,
        "startedAt": rfc3339(session.started_at),
        "lastActivityAt": rfc3339(session.last_activity_at),
        "requests": session.requests,
        "openStreams": session.open_streams,
        "queuedBytes": session.queued_bytes,
    })
}

/// `GET /api/sessions`.
pub(crate) fn sessions(state: &AdminState) -> Response<Body> {
    let sessions: Vec<Value> = state
        .sessions
        .list()
        .iter()
        .map(|s| session_json(s, &state.model))
        .collect();
    ok(json!({ "sessions": sessions }))
}

/// `DELETE /api/sessions/{id}`, `id` being the session's log digest as `GET /api/sessions`
/// lists it.
pub(crate) fn end_session(state: &AdminState, id: &str, by: &str) -> Response<Body> {
    let found = state
        .sessions
        .list()
        .into_iter()
        .find(|s| mcp_middleware::http::Sessions::log_id(&s.id) == id);
    match found {
        Some(session)
            if state
                .sessions
                .end(&session.id, "the session was ended by an administrator") =>
        {
            tracing::info!(session = %id, admin = by, "session ended by an administrator");
            ok(json!({"ended": id}))
        }
        _ => error(
            StatusCode::NOT_FOUND,
            format!("no open session `{id}` (name a session by the `id` GET /api/sessions lists)"),
        ),
    }
}

/// `GET /api/proxymodels`.
pub(crate) fn proxy_models(state: &AdminState) -> Response<Body> {
    match mcp_middleware::registry::models() {
        Ok(models) => {
            let models: Vec<Value> = models
                .into_iter()
                .map(|m| {
                    let mut summary = crate::models::summary(m);
                    if let Some(object) = summary.as_object_mut() {
                        object.insert("running".into(), json!(m.name == state.model));
                    }
                    summary
                })
                .collect();
            ok(json!({ "proxyModels": models }))
        }
        Err(err) => error(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
    }
}

/// `GET /api/project`: the project, its servers and prompts as stored, secrets hidden
/// ([`super::redact`]: `${env:VAR}` references show as written, literal secrets as `***`), and
/// the model running.
pub(crate) fn project(state: &AdminState) -> Response<Body> {
    let Some((store, name)) = &state.project else {
        return ok(json!({
            "project": null,
            "model": state.model,
            "servers": server_names(state).names,
        }));
    };
    let documents = || -> Result<Value, mcpctl::store::StoreError> {
        let project = store.get::<ProjectSpec>(name)?;
        let mut servers = Vec::new();
        for server in &project.spec.servers {
            let mut document = serde_json::to_value(store.get::<ServerSpec>(server)?.to_document())
                .unwrap_or(Value::Null);
            super::redact::server(&mut document);
            servers.push(document);
        }
        let mut prompts = Vec::new();
        for prompt in &project.spec.prompts {
            prompts.push(
                serde_json::to_value(store.get::<PromptSpec>(prompt)?.to_document())
                    .unwrap_or(Value::Null),
            );
        }
        let mut document = serde_json::to_value(project.to_document()).unwrap_or(Value::Null);
        super::redact::project(&mut document);
        Ok(json!({
            "project": document,
            "model": state.model,
            "servers": servers,
            "prompts": prompts,
        }))
    };
    match documents() {
        Ok(value) => ok(value),
        Err(err) => error(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
    }
}

/// `GET /api/audit?tail=N`: the last N records (default 50) and the chain's verification.
pub(crate) fn audit(state: &AdminState, tail: usize) -> Response<Body> {
    let Some(source) = &state.audit else {
        return error(
            StatusCode::NOT_FOUND,
            "this proxy writes no audit log (its model chain has no `audit` with a `path`)",
        );
    };
    let key = match &source.key {
        KeySource::Inline(key) => AuditKey::new(key),
        KeySource::Env(name) => AuditKey::from_env(name),
        KeySource::File(path) => AuditKey::from_file(path),
    };
    let verification = match key {
        Err(err) => json!({"state": "unverified", "message": err.to_string()}),
        Ok(key) => {
            let verdict = match &source.anchor {
                Some(anchor) => Anchor::read(anchor)
                    .and_then(|anchor| verify_with_anchor(&source.path, &key, &anchor)),
                None => verify(&source.path, &key),
            };
            match verdict {
                Ok(Verdict::Intact {
                    records, restarts, ..
                }) => json!({
                    "state": "intact", "records": records, "restarts": restarts.len(),
                }),
                Ok(Verdict::Broken { line, reason }) => json!({
                    "state": "broken", "line": line, "message": reason,
                }),
                Ok(Verdict::Truncated {
                    records,
                    last_seq,
                    anchor,
                }) => json!({
                    "state": "truncated", "records": records, "lastSeq": last_seq,
                    "message": format!("the anchor names record {}", anchor.seq),
                }),
                Ok(_) => json!({"state": "unverified", "message": "unknown verdict"}),
                Err(err) => json!({"state": "unverified", "message": err.to_string()}),
            }
        }
    };
    let text = std::fs::read_to_string(&source.path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let records: Vec<Value> = lines[lines.len().saturating_sub(tail)..]
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| json!({"unreadable": line})))
        .collect();
    ok(json!({
        "path": source.path.display().to_string(),
        "verification": verification,
        "records": records,
    }))
}

/// `GET /api/logs?tail=N`, and with `follow` an SSE stream: the tail, then each new line as
/// an event `log` whose data is the line's JSON.
pub(crate) fn logs(tail: Option<usize>, follow: bool) -> Response<Body> {
    let buffer = super::logs::buffer();
    if !follow {
        return ok(json!({ "logs": buffer.tail(tail) }));
    }
    let receiver = buffer.subscribe();
    let first: Vec<Result<Frame<Bytes>, Infallible>> = buffer
        .tail(tail.or(Some(100)))
        .iter()
        .map(|line| Ok(sse_event(line)))
        .collect();
    let live = tokio_stream_of(receiver);
    let stream = futures_util::stream::iter(first).chain(live);
    let mut response = Response::new(http_body_util::BodyExt::boxed(StreamBody::new(stream)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

fn sse_event(line: &super::logs::LogLine) -> Frame<Bytes> {
    let data = serde_json::to_string(line).unwrap_or_default();
    Frame::data(Bytes::from(format!("event: log\ndata: {data}\n\n")))
}

/// New log lines as SSE frames, until the client goes away (a lagging follower skips what it
/// missed, with a comment saying so).
fn tokio_stream_of(
    receiver: tokio::sync::broadcast::Receiver<super::logs::LogLine>,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> {
    futures_util::stream::unfold(receiver, |mut receiver| async move {
        use tokio::sync::broadcast::error::RecvError;
        match receiver.recv().await {
            Ok(line) => Some((Ok(sse_event(&line)), receiver)),
            Err(RecvError::Lagged(n)) => Some((
                Ok(Frame::data(Bytes::from(format!(": skipped {n} lines\n\n")))),
                receiver,
            )),
            Err(RecvError::Closed) => None,
        }
    })
}

/// `POST /api/apply`: YAML (`application/yaml`) or JSON (`application/json`) resource
/// documents, checked like `mcpctl apply -f` and written together, or not at all.
pub(crate) async fn apply(state: &AdminState, content_type: &str, body: &[u8]) -> Response<Body> {
    let resources: Vec<AnyResource> = match super::request::parse_apply_body(content_type, body) {
        Ok(resources) => resources,
        Err(err @ super::request::ApplyBodyError::UnsupportedMediaType) => {
            return error(StatusCode::UNSUPPORTED_MEDIA_TYPE, err.to_string());
        }
        Err(super::request::ApplyBodyError::Documents(problems)) => return apply_errors(problems),
    };
    let store = match &state.project {
        Some((store, _)) => Ok(store.clone()),
        None => Store::from_env(),
    };
    // Written and reloaded together: the store watch's reload of this change comes after.
    let applied = match &state.reloader {
        Some(reloader) => store.and_then(|store| {
            reloader
                .write_then_reload("POST /api/apply", || store.apply(resources))
                .map(|(applied, reloaded)| (applied, Some(reloaded)))
        }),
        None => store
            .and_then(|store| store.apply(resources))
            .map(|applied| (applied, None)),
    };
    match applied {
        Ok((applied, reloaded)) => {
            let results: Vec<Value> = applied
                .iter()
                .map(|a| json!({"kind": a.kind.title(), "name": a.name, "action": a.action.as_str()}))
                .collect();
            let in_force_here = matches!(reloaded, Some(Ok(_)));
            let mut reload = reload_json(reloaded);
            // Answered once the other replicas run it too (a generation fence), or naming
            // those that do not.
            if let (Some(reloader), true) = (&state.reloader, in_force_here) {
                let behind = reloader.in_force_on_replicas(REPLICAS_WAIT).await;
                reload["replicasBehind"] = json!(behind);
            }
            ok(json!({
                "results": results,
                "reload": reload,
            }))
        }
        Err(err) => apply_errors(vec![
            json!({"document": null, "line": null, "field": null, "message": err.to_string()}),
        ]),
    }
}

/// How long `POST /api/apply` waits for the other replicas of a shared store to run the change.
const REPLICAS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the reload after an apply did, so the answer says what the running proxy now runs.
/// Which documents were wrong is checked before anything is written (400); what can still be
/// refused here is what only building the proxy finds (a server referring to a secret of the
/// proxy's, say): the store keeps what was applied and the running configuration stays, as for
/// an edit of the files.
fn reload_json(reloaded: Option<anyhow::Result<crate::live::Outcome>>) -> Value {
    let Some(reloaded) = reloaded else {
        return json!({"state": "none", "message": "an ad-hoc proxy has no project to reload"});
    };
    match reloaded {
        Ok(outcome) => json!({
            "state": if outcome.reloaded.is_unchanged() { "unchanged" } else { "reloaded" },
            "generation": outcome.reloaded.generation,
            "serversAdded": outcome.added,
            "serversRemoved": outcome.removed,
            "serversChanged": outcome.changed,
            "routesChanged": outcome.reloaded.routes_changed,
            "modelChanged": outcome.reloaded.model_changed,
        }),
        Err(err) => json!({"state": "refused", "message": format!("{err:#}")}),
    }
}

fn apply_errors(errors: Vec<Value>) -> Response<Body> {
    json_response(StatusCode::BAD_REQUEST, &json!({ "errors": errors }))
}

/// `GET /metrics`.
#[cfg(feature = "metrics")]
pub(crate) fn metrics(state: &AdminState) -> Response<Body> {
    let sessions = state.sessions.list();
    let text = state.metrics.encode(
        sessions.len(),
        sessions.iter().map(|s| s.queued_bytes).sum(),
        super::logs::buffer().upstream_restarts(),
    );
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    response
}
