//! The translation of one connection: what the session writes and what the server answers,
//! for a handshake-era session in front of a 2026-07-28-only server (see the parent module).
//!
//! Toward the server every request gets the per-request `_meta` envelope (protocol version, the
//! client's info and capabilities from its `initialize`, the log level it set). Toward the
//! session results lose what a 2025 client does not expect (`resultType`, `ttlMs`,
//! `cacheScope`, the reserved `_meta` keys), and an `input_required` result becomes real
//! server-to-client requests (sampling, elicitation, roots) whose answers go back in a retry
//! with `inputResponses` and `requestState`. `initialize`, `ping`, `logging/setLevel` and
//! `resources/subscribe`/`unsubscribe` are answered here; change notifications come from one
//! `subscriptions/listen` stream per connection. Task-augmented requests are refused: the
//! 2025 tasks protocol has no 2026-07-28 counterpart this bridge can drive.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use crate::era::{RESERVED_PREFIX, STATELESS_VERSION, UNSUPPORTED_PROTOCOL_VERSION};
use crate::jsonrpc::{self, INVALID_REQUEST, METHOD_NOT_FOUND};
use crate::transport::outbound::Belongs;
use crate::upstream::era_probe::{self, EraRecord, EraSeen};

const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// The handshake versions a bridged `initialize` may be answered with (the client's, if it is
/// one of these; else the newest).
const HANDSHAKE_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The id of the proxy's own `server/discover` probe.
const PROBE_ID: &str = r#""mcpmw-era-probe""#;

/// One message on its way out of the adapter.
#[derive(Debug, PartialEq)]
pub(super) enum Out {
    /// To the server.
    Up(String, Belongs),
    /// To the session; with the session's id of the request it was sent during, if any.
    Down(String, Option<Box<str>>),
}

/// Where the connection is in finding the server's era.
#[derive(Debug)]
enum Phase {
    /// The session's first request decides.
    Undecided,
    /// The session's `initialize` is at the server; what the session sends meanwhile waits.
    Initializing {
        id: Box<str>,
        params: Value,
        held: Vec<(String, Belongs)>,
    },
    /// The server refused `initialize` (`error_line` is that answer); `server/discover` is out.
    Probing {
        id: Box<str>,
        params: Value,
        error_line: String,
        held: Vec<(String, Belongs)>,
    },
    /// Nothing to translate; `watch` holds the ids of `initialize`/`server/discover` requests
    /// whose answers tell the era.
    Transparent { watch: Vec<(Box<str>, bool)> },
    /// A handshake session in front of a 2026-07-28 server.
    Bridged(Box<Bridged>),
}

/// The translation state of a bridged connection.
#[derive(Debug)]
struct Bridged {
    /// The server's `server/discover` result.
    discover: Value,
    client_info: Value,
    client_capabilities: Value,
    log_level: Option<String>,
    /// Requests at the server (or waiting for the client's input), by the id they went up with.
    calls: HashMap<Box<str>, Call>,
    /// The id each session request currently has at the server.
    by_session: HashMap<Box<str>, Box<str>>,
    /// Input requests put to the client: (upstream id of the call, key in `inputRequests`).
    asks: HashMap<Box<str>, (Box<str>, String)>,
    next: u64,
    /// Resources the client subscribed to.
    uris: BTreeSet<String>,
    /// The open `subscriptions/listen` request, by id.
    listen: Option<Box<str>>,
}

/// One of the session's requests, as the server sees it.
#[derive(Debug)]
struct Call {
    session_id: Box<str>,
    /// The params as sent (with the envelope), to retry with.
    params: Map<String, Value>,
    method: String,
    /// The input round in progress, if the server asked for input.
    round: Option<Round>,
}

#[derive(Debug)]
struct Round {
    request_state: Option<Value>,
    outstanding: usize,
    responses: Map<String, Value>,
}

/// The translator of one connection.
#[derive(Debug)]
pub(super) struct Bridge {
    name: String,
    record: Option<EraRecord>,
    phase: Phase,
}

impl Bridge {
    pub(super) fn new(name: String, record: Option<EraRecord>) -> Self {
        Self {
            name,
            record,
            phase: Phase::Undecided,
        }
    }

    /// Whether lines pass untouched (and unparsed) in both directions.
    pub(super) fn is_transparent(&self) -> bool {
        matches!(&self.phase, Phase::Transparent { watch } if watch.is_empty())
    }

    fn record(&self, seen: &EraSeen) {
        tracing::info!(
            server = %self.name,
            era = seen.era.as_str(),
            bridged = seen.bridged,
            "upstream era seen"
        );
        if let Some(record) = &self.record {
            record.write(seen);
        }
    }

    /// A line the session wrote for the server.
    pub(super) fn on_session_line(&mut self, line: String, belongs: Belongs) -> Vec<Out> {
        match &mut self.phase {
            Phase::Initializing { held, .. } | Phase::Probing { held, .. } => {
                held.push((line, belongs));
                return Vec::new();
            }
            Phase::Bridged(bridged) => return bridged.on_session_line(&self.name, line, belongs),
            Phase::Undecided | Phase::Transparent { .. } => {}
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            return vec![Out::Up(line, belongs)];
        };
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").map(|id| id.to_string().into_boxed_str());
        match (&self.phase, method, id) {
            (Phase::Undecided, Some("initialize"), Some(id)) => {
                self.phase = Phase::Initializing {
                    id,
                    params: message.get("params").cloned().unwrap_or(Value::Null),
                    held: Vec::new(),
                };
            }
            (Phase::Undecided | Phase::Transparent { .. }, Some(m), Some(id))
                if m == "initialize" || m == "server/discover" =>
            {
                let discover = m == "server/discover";
                match &mut self.phase {
                    Phase::Transparent { watch } => watch.push((id, discover)),
                    _ => {
                        self.phase = Phase::Transparent {
                            watch: vec![(id, discover)],
                        }
                    }
                }
            }
            (Phase::Undecided, Some(_), Some(_)) => {
                self.phase = Phase::Transparent { watch: Vec::new() };
            }
            _ => {}
        }
        vec![Out::Up(line, belongs)]
    }

    /// A line the server wrote; `request` is the id of the request whose stream carried it.
    pub(super) fn on_upstream_line(&mut self, line: String, request: Option<Box<str>>) -> Vec<Out> {
        match &mut self.phase {
            Phase::Bridged(bridged) => return bridged.on_upstream_line(line, request),
            Phase::Undecided => return vec![Out::Down(line, request)],
            _ => {}
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            return vec![Out::Down(line, request)];
        };
        let id = message.get("id").map(|id| id.to_string());
        let is_response = message.get("method").is_none();
        let Some(id) = id.filter(|_| is_response) else {
            return vec![Out::Down(line, request)];
        };
        match std::mem::replace(&mut self.phase, Phase::Undecided) {
            Phase::Initializing {
                id: init_id,
                params,
                held,
            } if *init_id == *id => {
                if let Some(result) = message.get("result") {
                    self.record(&era_probe::seen_from_initialize(result));
                    self.phase = Phase::Transparent { watch: Vec::new() };
                    let mut out = vec![Out::Down(line, request)];
                    out.extend(held.into_iter().map(|(l, b)| Out::Up(l, b)));
                    return out;
                }
                let code = message.pointer("/error/code").and_then(Value::as_i64);
                if !matches!(code, Some(UNSUPPORTED_PROTOCOL_VERSION | METHOD_NOT_FOUND)) {
                    self.phase = Phase::Transparent { watch: Vec::new() };
                    let mut out = vec![Out::Down(line, request)];
                    out.extend(held.into_iter().map(|(l, b)| Out::Up(l, b)));
                    return out;
                }
                tracing::info!(server = %self.name, "the upstream refused initialize; probing server/discover");
                let meta = envelope(params.get("clientInfo"), params.get("capabilities"), None);
                let probe = jsonrpc::request(
                    PROBE_ID,
                    "server/discover",
                    Some(&json!({ "_meta": meta }).to_string()),
                );
                self.phase = Phase::Probing {
                    id: init_id,
                    params,
                    error_line: line,
                    held,
                };
                vec![Out::Up(probe, Belongs::Unsaid)]
            }
            Phase::Probing {
                id: init_id,
                params,
                error_line,
                held,
            } if id == PROBE_ID => {
                let seen = message
                    .get("result")
                    .and_then(|r| era_probe::seen_from_discover(r, true));
                let (Some(seen), Some(discover)) = (seen, message.get("result")) else {
                    // Not a 2026-07-28 server either: the client gets the server's own refusal.
                    self.phase = Phase::Transparent { watch: Vec::new() };
                    let mut out = vec![Out::Down(error_line, None)];
                    out.extend(held.into_iter().map(|(l, b)| Out::Up(l, b)));
                    return out;
                };
                self.record(&seen);
                let mut bridged = Bridged {
                    discover: discover.clone(),
                    client_info: params.get("clientInfo").cloned().unwrap_or(Value::Null),
                    client_capabilities: params
                        .get("capabilities")
                        .cloned()
                        .unwrap_or_else(|| json!({})),
                    log_level: None,
                    calls: HashMap::new(),
                    by_session: HashMap::new(),
                    asks: HashMap::new(),
                    next: 0,
                    uris: BTreeSet::new(),
                    listen: None,
                };
                let mut out = vec![Out::Down(
                    jsonrpc::result(&init_id, &bridged.initialize_result(&params).to_string()),
                    None,
                )];
                out.extend(bridged.listen());
                for (line, belongs) in held {
                    out.extend(bridged.on_session_line(&self.name, line, belongs));
                }
                self.phase = Phase::Bridged(Box::new(bridged));
                out
            }
            Phase::Transparent { mut watch } => {
                if let Some(at) = watch.iter().position(|(w, _)| **w == *id) {
                    let (_, discover) = watch.remove(at);
                    let seen = match (discover, message.get("result")) {
                        (true, Some(result)) => era_probe::seen_from_discover(result, false),
                        (false, Some(result)) => Some(era_probe::seen_from_initialize(result)),
                        _ => None,
                    };
                    if let Some(seen) = seen {
                        self.record(&seen);
                        // The era is known: stop looking at lines.
                        watch.clear();
                    }
                }
                self.phase = Phase::Transparent { watch };
                vec![Out::Down(line, request)]
            }
            other => {
                self.phase = other;
                vec![Out::Down(line, request)]
            }
        }
    }
}

/// The per-request envelope of a 2026-07-28 request.
fn envelope(
    client_info: Option<&Value>,
    capabilities: Option<&Value>,
    log_level: Option<&str>,
) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(PROTOCOL_VERSION_KEY.into(), STATELESS_VERSION.into());
    meta.insert(
        CLIENT_INFO_KEY.into(),
        client_info.cloned().unwrap_or_else(
            || json!({ "name": "mcp-middleware", "version": env!("CARGO_PKG_VERSION") }),
        ),
    );
    meta.insert(
        CAPABILITIES_KEY.into(),
        capabilities.cloned().unwrap_or_else(|| json!({})),
    );
    if let Some(level) = log_level {
        meta.insert(LOG_LEVEL_KEY.into(), level.into());
    }
    meta
}

/// A 2026-07-28 result as a 2025 client expects it: no `resultType`, no cache hints, no
/// reserved `_meta` keys.
fn strip_result(result: &mut Value) {
    let Some(map) = result.as_object_mut() else {
        return;
    };
    map.remove("resultType");
    map.remove("ttlMs");
    map.remove("cacheScope");
    if let Some(Value::Object(meta)) = map.get_mut("_meta") {
        meta.retain(|key, _| !key.starts_with(RESERVED_PREFIX));
        if meta.is_empty() {
            map.remove("_meta");
        }
    }
}

impl Bridged {
    fn next_id(&mut self, what: &str) -> Box<str> {
        self.next += 1;
        format!(r#""mcpmw-{what}-{}""#, self.next).into_boxed_str()
    }

    fn envelope(&self) -> Map<String, Value> {
        envelope(
            Some(&self.client_info),
            Some(&self.client_capabilities),
            self.log_level.as_deref(),
        )
    }

    /// The answer to the client's `initialize`, from the server's discovery.
    fn initialize_result(&self, params: &Value) -> Value {
        let asked = params.get("protocolVersion").and_then(Value::as_str);
        let version = asked
            .filter(|v| HANDSHAKE_VERSIONS.contains(v))
            .unwrap_or(HANDSHAKE_VERSIONS[0]);
        let mut capabilities = match self.discover.get("capabilities") {
            Some(Value::Object(caps)) => caps.clone(),
            _ => Map::new(),
        };
        // The bridge serves `logging/setLevel` itself (through the envelope) and refuses tasks.
        capabilities
            .entry("logging")
            .or_insert_with(|| Value::Object(Map::new()));
        capabilities.remove("tasks");
        let server_info = self
            .discover
            .pointer("/_meta/io.modelcontextprotocol~1serverInfo")
            .cloned()
            .unwrap_or_else(|| json!({ "name": "unknown", "version": "" }));
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": server_info,
        });
        if let Some(instructions) = self.discover.get("instructions") {
            result["instructions"] = instructions.clone();
        }
        result
    }

    fn flag(&self, pointer: &str) -> bool {
        self.discover.pointer(pointer) == Some(&Value::Bool(true))
    }

    /// Opens the connection's `subscriptions/listen` stream (closing the one before), for the
    /// list changes the server announces and the resources the client subscribed to.
    fn listen(&mut self) -> Vec<Out> {
        let mut out = Vec::new();
        if let Some(old) = self.listen.take() {
            let params =
                json!({ "requestId": serde_json::from_str::<Value>(&old).unwrap_or(Value::Null) });
            out.push(Out::Up(
                jsonrpc::notification("notifications/cancelled", Some(&params.to_string())),
                Belongs::Unsaid,
            ));
        }
        let mut filter = Map::new();
        for (pointer, key) in [
            ("/capabilities/tools/listChanged", "toolsListChanged"),
            ("/capabilities/prompts/listChanged", "promptsListChanged"),
            (
                "/capabilities/resources/listChanged",
                "resourcesListChanged",
            ),
        ] {
            if self.flag(pointer) {
                filter.insert(key.into(), true.into());
            }
        }
        if !self.uris.is_empty() {
            filter.insert(
                "resourceSubscriptions".into(),
                self.uris.iter().cloned().collect::<Vec<_>>().into(),
            );
        }
        if filter.is_empty() {
            return out;
        }
        let id = self.next_id("listen");
        let params = json!({ "_meta": self.envelope(), "notifications": filter });
        out.push(Out::Up(
            jsonrpc::request(&id, "subscriptions/listen", Some(&params.to_string())),
            Belongs::Unsaid,
        ));
        self.listen = Some(id);
        out
    }

    fn on_session_line(&mut self, name: &str, line: String, belongs: Belongs) -> Vec<Out> {
        let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(&line) else {
            return vec![Out::Up(line, belongs)];
        };
        let id = message.get("id").map(|id| id.to_string().into_boxed_str());
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut params = match message.remove("params") {
            Some(Value::Object(params)) => params,
            _ => Map::new(),
        };
        let ok = |id: &str| vec![Out::Down(jsonrpc::result(id, "{}"), None)];
        match (method.as_deref(), id) {
            (Some(method), Some(id)) => match method {
                "initialize" => {
                    let result = self.initialize_result(&Value::Object(params));
                    vec![Out::Down(jsonrpc::result(&id, &result.to_string()), None)]
                }
                "ping" => ok(&id),
                "logging/setLevel" => {
                    self.log_level = params
                        .get("level")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    ok(&id)
                }
                "resources/subscribe" | "resources/unsubscribe" => {
                    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
                        return vec![Out::Down(
                            jsonrpc::error(
                                Some(&id),
                                jsonrpc::INVALID_PARAMS,
                                &format!("{method} needs a `uri`"),
                            ),
                            None,
                        )];
                    };
                    let changed = if method == "resources/subscribe" {
                        self.uris.insert(uri.to_owned())
                    } else {
                        self.uris.remove(uri)
                    };
                    let mut out = ok(&id);
                    if changed {
                        out.extend(self.listen());
                    }
                    out
                }
                _ if params.get("task").is_some_and(Value::is_object) => vec![Out::Down(
                    jsonrpc::error(
                        Some(&id),
                        INVALID_REQUEST,
                        &format!(
                            "task-augmented {method} cannot be run: upstream `{name}` speaks only \
                             2026-07-28, whose tasks this proxy does not bridge to 2025-11-25 \
                             clients; call it without `task`"
                        ),
                    ),
                    None,
                )],
                _ => {
                    let envelope = self.envelope();
                    match params.get_mut("_meta") {
                        Some(Value::Object(meta)) => meta.extend(envelope),
                        _ => {
                            params.insert("_meta".into(), Value::Object(envelope));
                        }
                    }
                    let line = jsonrpc::request(
                        &id,
                        method,
                        Some(&Value::Object(params.clone()).to_string()),
                    );
                    self.by_session.insert(id.clone(), id.clone());
                    self.calls.insert(
                        id.clone(),
                        Call {
                            session_id: id,
                            params,
                            method: method.to_owned(),
                            round: None,
                        },
                    );
                    vec![Out::Up(line, belongs)]
                }
            },
            (None, Some(id)) => self.on_client_answer(&id, &message, line, belongs),
            (Some(method), None) => match method {
                "notifications/initialized" | "notifications/roots/list_changed" => Vec::new(),
                "notifications/cancelled" => {
                    let Some(session_id) = params.get("requestId").map(|id| id.to_string()) else {
                        return Vec::new();
                    };
                    let Some(up_id) = self.by_session.remove(session_id.as_str()) else {
                        return Vec::new();
                    };
                    let Some(call) = self.calls.remove(&up_id) else {
                        return Vec::new();
                    };
                    self.asks.retain(|_, (call_id, _)| *call_id != up_id);
                    if call.round.is_some() {
                        // Between rounds nothing runs at the server.
                        return Vec::new();
                    }
                    params.insert(
                        "requestId".into(),
                        serde_json::from_str(&up_id).unwrap_or(Value::Null),
                    );
                    vec![Out::Up(
                        jsonrpc::notification(method, Some(&Value::Object(params).to_string())),
                        Belongs::Unsaid,
                    )]
                }
                _ => vec![Out::Up(line, belongs)],
            },
            (None, None) => vec![Out::Up(line, belongs)],
        }
    }

    /// The client answered one of the input requests the bridge put to it.
    fn on_client_answer(
        &mut self,
        id: &str,
        message: &Map<String, Value>,
        line: String,
        belongs: Belongs,
    ) -> Vec<Out> {
        let Some((up_id, key)) = self.asks.remove(id) else {
            return vec![Out::Up(line, belongs)];
        };
        let Some(call) = self.calls.get_mut(&up_id) else {
            return Vec::new();
        };
        if let Some(error) = message.get("error") {
            // The client refused what the server asked: the call fails with the client's error.
            let Some(call) = self.calls.remove(&up_id) else {
                return Vec::new();
            };
            self.by_session.remove(&call.session_id);
            self.asks.retain(|_, (call_id, _)| *call_id != up_id);
            return vec![Out::Down(
                jsonrpc::error_response(&call.session_id, &error.to_string()),
                None,
            )];
        }
        let Some(round) = call.round.as_mut() else {
            return Vec::new();
        };
        round.responses.insert(
            key,
            message.get("result").cloned().unwrap_or_else(|| json!({})),
        );
        round.outstanding = round.outstanding.saturating_sub(1);
        if round.outstanding > 0 {
            return Vec::new();
        }
        // Every input is in: retry the request with the answers.
        let Some(mut call) = self.calls.remove(&up_id) else {
            return Vec::new();
        };
        let Some(round) = call.round.take() else {
            return Vec::new();
        };
        call.params
            .insert("inputResponses".into(), Value::Object(round.responses));
        match round.request_state {
            Some(state) => {
                call.params.insert("requestState".into(), state);
            }
            None => {
                call.params.remove("requestState");
            }
        }
        if let Some(Value::Object(meta)) = call.params.get_mut("_meta") {
            // The log level may have changed since the first attempt.
            meta.extend(self.envelope());
        }
        let retry_id = self.next_id("retry");
        let line = jsonrpc::request(
            &retry_id,
            &call.method,
            Some(&Value::Object(call.params.clone()).to_string()),
        );
        self.by_session
            .insert(call.session_id.clone(), retry_id.clone());
        self.calls.insert(retry_id, call);
        vec![Out::Up(line, Belongs::Unsaid)]
    }

    fn on_upstream_line(&mut self, line: String, request: Option<Box<str>>) -> Vec<Out> {
        // Lines carried on a retry's stream belong to the session's request.
        let during = request.map(|up| {
            self.calls
                .get(&up)
                .map_or(up, |call| call.session_id.clone())
        });
        let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(&line) else {
            return vec![Out::Down(line, during)];
        };
        if let Some(method) = message.get("method").and_then(Value::as_str) {
            if method == "notifications/subscriptions/acknowledged" {
                return Vec::new();
            }
            return vec![Out::Down(line, during)];
        }
        let Some(id) = message.get("id").map(|id| id.to_string()) else {
            return vec![Out::Down(line, during)];
        };
        if self.listen.as_deref() == Some(id.as_str()) {
            tracing::debug!("the upstream closed its subscriptions/listen stream");
            self.listen = None;
            return Vec::new();
        }
        let Some(call) = self.calls.get_mut(id.as_str()) else {
            return vec![Out::Down(line, during)];
        };
        if let Some(error) = message.get("error") {
            let line = jsonrpc::error_response(&call.session_id, &error.to_string());
            let session_id = call.session_id.clone();
            self.calls.remove(id.as_str());
            self.by_session.remove(&session_id);
            return vec![Out::Down(line, None)];
        }
        let mut result = message.remove("result").unwrap_or_else(|| json!({}));
        if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
            let requests = match result.get("inputRequests") {
                Some(Value::Object(requests)) if !requests.is_empty() => requests.clone(),
                _ => {
                    let line = jsonrpc::error(
                        Some(&call.session_id),
                        jsonrpc::INTERNAL_ERROR,
                        "the upstream asked for input without saying what (an input_required \
                         result with no inputRequests)",
                    );
                    let session_id = call.session_id.clone();
                    self.calls.remove(id.as_str());
                    self.by_session.remove(&session_id);
                    return vec![Out::Down(line, None)];
                }
            };
            call.round = Some(Round {
                request_state: result.get("requestState").cloned(),
                outstanding: requests.len(),
                responses: Map::new(),
            });
            let session_id = call.session_id.clone();
            let up_id: Box<str> = id.into_boxed_str();
            let mut out = Vec::new();
            for (key, request) in requests {
                let ask_id = self.next_id("input");
                let method = request.get("method").and_then(Value::as_str).unwrap_or("");
                let params = request.get("params").map(Value::to_string);
                out.push(Out::Down(
                    jsonrpc::request(&ask_id, method, params.as_deref()),
                    Some(session_id.clone()),
                ));
                self.asks.insert(ask_id, (up_id.clone(), key));
            }
            return out;
        }
        strip_result(&mut result);
        let line = jsonrpc::result(&call.session_id, &result.to_string());
        let session_id = call.session_id.clone();
        self.calls.remove(id.as_str());
        self.by_session.remove(&session_id);
        vec![Out::Down(line, None)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(out: Vec<Out>) -> Vec<(bool, Value)> {
        out.into_iter()
            .map(|o| match o {
                Out::Up(l, _) => (true, serde_json::from_str(&l).unwrap()),
                Out::Down(l, _) => (false, serde_json::from_str(&l).unwrap()),
            })
            .collect()
    }

    fn bridged() -> Bridge {
        let mut bridge = Bridge::new("m".into(), None);
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"c","version":"1"}}}"#;
        let out = lines(bridge.on_session_line(init.into(), Belongs::Unsaid));
        assert_eq!(
            out[0].1["method"], "initialize",
            "the client's initialize goes up first"
        );
        let refused = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"no"}}"#;
        let out = lines(bridge.on_upstream_line(refused.into(), None));
        assert_eq!(out[0].1["method"], "server/discover");
        assert_eq!(out[0].1["params"]["_meta"][CLIENT_INFO_KEY]["name"], "c");
        let discover = r#"{"jsonrpc":"2.0","id":"mcpmw-era-probe","result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"instructions":"hi","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"2"}}}}"#;
        let out = lines(bridge.on_upstream_line(discover.into(), None));
        assert_eq!(out[0].1["id"], 1);
        assert_eq!(out[0].1["result"]["serverInfo"]["name"], "s");
        assert_eq!(out[0].1["result"]["instructions"], "hi");
        assert_eq!(out[0].1["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(out[1].1["method"], "subscriptions/listen");
        assert_eq!(
            out[1].1["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        bridge
    }

    #[test]
    fn answers_initialize_from_discovery_and_wraps_requests() {
        let mut bridge = bridged();
        let out = lines(bridge.on_session_line(
            r#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}"#
                .into(),
            Belongs::Unsaid,
        ));
        assert_eq!(
            out,
            vec![(false, json!({"jsonrpc":"2.0","id":2,"result":{}}))]
        );
        let out = lines(bridge.on_session_line(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":7}}}"#.into(),
            Belongs::Unsaid,
        ));
        let meta = &out[0].1["params"]["_meta"];
        assert_eq!(meta["progressToken"], 7);
        assert_eq!(meta[PROTOCOL_VERSION_KEY], STATELESS_VERSION);
        assert_eq!(meta[LOG_LEVEL_KEY], "debug");
        let out = lines(bridge.on_upstream_line(
            r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{}}}}"#.into(),
            None,
        ));
        assert_eq!(
            out,
            vec![(
                false,
                json!({"jsonrpc":"2.0","id":3,"result":{"content":[]}})
            )]
        );
    }

    #[test]
    fn turns_input_rounds_into_client_requests_and_retries() {
        let mut bridge = bridged();
        bridge.on_session_line(
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"greet"}}"#.into(),
            Belongs::Unsaid,
        );
        let out = bridge.on_upstream_line(
            r#"{"jsonrpc":"2.0","id":4,"result":{"resultType":"input_required","requestState":"s1","inputRequests":{"k":{"method":"elicitation/create","params":{"message":"name?"}}}}}"#.into(),
            None,
        );
        let Some(Out::Down(ask, Some(during))) = out.into_iter().next() else {
            panic!("an input request for the client");
        };
        assert_eq!(&*during, "4");
        let ask: Value = serde_json::from_str(&ask).unwrap();
        assert_eq!(ask["method"], "elicitation/create");
        let answer = json!({"jsonrpc":"2.0","id":ask["id"],"result":{"action":"accept","content":{"name":"x"}}});
        let out = lines(bridge.on_session_line(answer.to_string(), Belongs::Unsaid));
        let retry = &out[0].1;
        assert_eq!(retry["method"], "tools/call");
        assert_eq!(retry["params"]["requestState"], "s1");
        assert_eq!(retry["params"]["inputResponses"]["k"]["action"], "accept");
        let done = json!({"jsonrpc":"2.0","id":retry["id"],"result":{"resultType":"complete","content":[{"type":"text","text":"hello x"}]}});
        let out = lines(bridge.on_upstream_line(done.to_string(), None));
        assert_eq!(out[0].1["id"], 4);
        assert_eq!(out[0].1["result"]["content"][0]["text"], "hello x");
    }

    #[test]
    fn serves_ping_subscribe_and_refuses_tasks() {
        let mut bridge = bridged();
        let out = lines(bridge.on_session_line(
            r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#.into(),
            Belongs::Unsaid,
        ));
        assert_eq!(out[0].1["result"], json!({}));
        let out = lines(bridge.on_session_line(
            r#"{"jsonrpc":"2.0","id":6,"method":"resources/subscribe","params":{"uri":"a://b"}}"#
                .into(),
            Belongs::Unsaid,
        ));
        assert_eq!(out[1].1["method"], "notifications/cancelled");
        assert_eq!(
            out[2].1["params"]["notifications"]["resourceSubscriptions"],
            json!(["a://b"])
        );
        let out = lines(
            bridge.on_session_line(
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","task":{}}}"#
                    .into(),
                Belongs::Unsaid,
            ),
        );
        assert_eq!(out[0].1["error"]["code"], INVALID_REQUEST);
    }

    #[test]
    fn a_handshake_server_is_left_alone() {
        let mut bridge = Bridge::new("l".into(), None);
        bridge.on_session_line(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#.into(),
            Belongs::Unsaid,
        );
        bridge.on_session_line(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
            Belongs::Unsaid,
        );
        let out = bridge.on_upstream_line(
            r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}"#.into(),
            None,
        );
        assert_eq!(out.len(), 2);
        assert!(bridge.is_transparent());
    }
}
