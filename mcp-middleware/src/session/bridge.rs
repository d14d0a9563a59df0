//! Bridging a 2026-07-28 (stateless) client to an upstream that only has the 2025-11-25
//! handshake.
//!
//! The session finds out which era the client speaks from its first request; a stateless request
//! makes it probe the upstream with `server/discover`. An upstream that speaks 2026-07-28 gets
//! everything as it comes. One that does not is initialized by the proxy with the client's
//! envelope, and from then on the proxy plays a 2026-07-28 server for the client:
//!
//! - `server/discover` is answered from the upstream's `initialize` result;
//! - the envelope is taken off requests (its `logLevel` becomes `logging/setLevel`), and results
//!   get `resultType` and cache hints ([`era`]);
//! - requests the upstream sends the client (sampling, elicitation, roots) become *input rounds*:
//!   the client's pending `tools/call` (or `prompts/get`, `resources/read`) is answered with
//!   `resultType: "input_required"` while the upstream call stays open; the client's retry
//!   carries the answers, which go to the upstream, and the upstream's final result answers the
//!   retry; the `requestState` the client gets is sealed to the session (`rounds`);
//! - `subscriptions/listen` streams are served from the upstream's `resources/subscribe` and
//!   list-changed notifications.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Map, Value};

use super::{Pending, ProxyRequest, Session};
use crate::era;
use crate::jsonrpc;

/// Which protocol era the client speaks, and whether the session translates for it.
#[derive(Debug)]
pub(super) enum ClientEra {
    /// No request seen yet.
    Unknown,
    /// Both sides speak the same era: nothing is translated.
    Same,
    /// A 2026-07-28 client in front of a handshake-only upstream that the proxy initialized.
    Bridged(Box<Bridged>),
}

/// The state of a bridged session.
#[derive(Debug, Default)]
pub(super) struct Bridged {
    /// The upstream's `initialize` result, to answer `server/discover` from.
    initialize_result: String,
    /// Whether the upstream supports `resources/subscribe`.
    can_subscribe: bool,
    /// The most verbose log level sent upstream, as an index into [`LOG_LEVELS`].
    upstream_log_level: Option<usize>,
    /// The log level each pending request asked for in its envelope, by upstream id.
    log_levels: HashMap<u64, usize>,
    /// Open input rounds, by the `requestState` the client was given.
    rounds: HashMap<String, InputRound>,
    next_round: u64,
    /// The client's open `subscriptions/listen` streams.
    listeners: Vec<Listener>,
}

impl Bridged {
    /// Forgets every input round and log opt-in: their requests died with the upstream.
    pub(super) fn clear_requests(&mut self) {
        self.rounds.clear();
        self.log_levels.clear();
    }
}

/// An upstream call suspended while the client answers the upstream's requests.
#[derive(Debug)]
struct InputRound {
    /// The upstream request that is still running.
    uid: u64,
    method: Box<str>,
    /// The call's tool, prompt or resource URI: the retry must name the same.
    target: Option<Box<str>>,
    /// The upstream's requests put to the client in this round: (key, upstream request id).
    asked: Vec<(String, Box<str>)>,
    /// Requests the upstream sent after the round went out; they open the next round.
    waiting: Vec<AskedInput>,
    /// The upstream's final answer, if it came before the client's retry.
    answer: Option<Result<String, String>>,
}

/// One request of the upstream, to be put to the client as an input request.
#[derive(Debug)]
struct AskedInput {
    key: String,
    upstream_id: Box<str>,
    /// `{"method": ..., "params": ...}`
    request: String,
}

/// A `subscriptions/listen` stream.
#[derive(Debug)]
struct Listener {
    /// The listen request's id, raw JSON: the stream's subscription id.
    id: Box<str>,
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
}

/// MCP's log levels (RFC 5424 names), least severe first.
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

fn severity(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|known| *known == level)
}

impl Bridged {
    /// Whether a log message may go to the client: on 2026-07-28 only while a request that
    /// asked for logs at or below its level is pending.
    pub(super) fn wants_log(&self, params: Option<&str>, pending: &HashMap<u64, Pending>) -> bool {
        let level = params
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
            .and_then(|p| p.get("level").and_then(Value::as_str).and_then(severity));
        level.is_some_and(|level| {
            self.log_levels
                .iter()
                .any(|(uid, wanted)| *wanted <= level && pending.contains_key(uid))
        })
    }

    /// The upstream answered request `uid`.
    pub(super) fn request_done(&mut self, uid: u64) {
        self.log_levels.remove(&uid);
    }
}

/// What a bridged input round's state starts with, inside its seal.
pub(super) const BRIDGE_ROUND: &str = "bridge/";

/// Methods whose results may ask the client for input on 2026-07-28.
pub(super) fn takes_input_rounds(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
}

impl Session {
    pub(super) fn bridged(&mut self) -> Option<&mut Bridged> {
        match &mut self.era {
            ClientEra::Bridged(bridged) => Some(bridged),
            _ => None,
        }
    }

    /// Decides the client's era from its first request. A stateless (2026-07-28) request that is
    /// not `server/discover` makes the proxy probe the upstream first: the request waits until
    /// the proxy knows whether it must bridge. Returns whether the request was held.
    pub(super) fn probe_era(&mut self, line: &str, method: &str, params: Option<&str>) -> bool {
        let stateless = method != "initialize"
            && method != "server/discover"
            && params.is_some_and(era::has_envelope);
        if !stateless {
            // `initialize` or an era-less request: the handshake era, as it comes. A client's own
            // `server/discover` is forwarded as is: an upstream without it answers with an
            // error, and an auto-mode client falls back to `initialize` exactly as it would
            // without the proxy.
            if method != "server/discover" {
                self.era = ClientEra::Same;
            }
            return false;
        }
        let request_params = params.map_or_else(String::new, |p| p.to_owned());
        let probe = era::discover_params(&request_params);
        let uid = self.next_upstream_id();
        self.pending
            .insert(uid, Pending::Proxy(ProxyRequest::Probe { request_params }));
        self.hold_client(uid, line.to_owned());
        self.send_upstream(jsonrpc::request(
            itoa::Buffer::new().format(uid),
            "server/discover",
            Some(&probe),
        ));
        true
    }

    /// The upstream answered the probe: bridge unless it speaks 2026-07-28.
    pub(super) fn on_probe_answer(&mut self, request_params: &str, outcome: Result<&str, &str>) {
        if outcome.is_ok_and(era::discover_offers_stateless) {
            tracing::debug!("the upstream speaks 2026-07-28; nothing to bridge");
            self.era = ClientEra::Same;
            self.release_held();
            return;
        }
        tracing::info!(
            "the upstream has no 2026-07-28; bridging the stateless client to its handshake"
        );
        let params = era::initialize_params_for(request_params);
        let uid = self.next_upstream_id();
        self.pending.insert(
            uid,
            Pending::Proxy(ProxyRequest::BridgeInitialize {
                params: params.clone(),
            }),
        );
        self.send_upstream(jsonrpc::request(
            itoa::Buffer::new().format(uid),
            "initialize",
            Some(&params),
        ));
    }

    /// The upstream accepted the proxy's `initialize`: the session is bridged from now on.
    pub(super) fn on_bridge_initialized(&mut self, params: String, outcome: Result<&str, &str>) {
        let result = match outcome {
            Ok(result) => result,
            Err(error) => {
                self.give_up_start(format!(
                    "the upstream rejected the initialize the proxy sent for a 2026-07-28 client: {}",
                    error
                ));
                return;
            }
        };
        let can_subscribe = serde_json::from_str::<Value>(result)
            .ok()
            .and_then(|r| r.pointer("/capabilities/resources/subscribe").cloned())
            == Some(Value::Bool(true));
        self.era = ClientEra::Bridged(Box::new(Bridged {
            initialize_result: result.to_owned(),
            can_subscribe,
            ..Bridged::default()
        }));
        self.handshake.initialize = Some(params);
        self.handshake.initialized = true;
        self.send_upstream(jsonrpc::notification("notifications/initialized", None));
        self.release_held();
    }

    /// Requests of a bridged client that the proxy answers itself. Returns whether the request
    /// was answered here.
    pub(super) fn answer_for_bridged_client(
        &mut self,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> bool {
        match method {
            "server/discover" => {
                let Some(bridged) = self.bridged() else {
                    return false;
                };
                let result = era::discover_result_from_initialize(&bridged.initialize_result);
                self.to_client(jsonrpc::result(id, &result));
                true
            }
            "initialize" => {
                self.to_client(jsonrpc::error(
                    Some(id),
                    era::UNSUPPORTED_PROTOCOL_VERSION,
                    "this connection serves the 2026-07-28 protocol; the initialize handshake is not accepted on it",
                ));
                true
            }
            "subscriptions/listen" => {
                self.open_listener(id, params);
                true
            }
            _ => false,
        }
    }

    /// A bridged request asked for log messages at `level` and above: make the upstream send
    /// them (the handshake has one level per session, so it gets the most verbose one asked for
    /// and the proxy filters per request).
    pub(super) fn opt_in_logs(&mut self, uid: u64, level: &str) {
        let Some(wanted) = severity(level) else {
            return;
        };
        let Some(bridged) = self.bridged() else {
            return;
        };
        bridged.log_levels.insert(uid, wanted);
        if bridged.upstream_log_level.is_some_and(|set| set <= wanted) {
            return;
        }
        bridged.upstream_log_level = Some(wanted);
        let params = serde_json::json!({ "level": level }).to_string();
        self.handshake.log_level = Some(params.clone());
        self.send_proxy_request("logging/setLevel", &params);
    }

    // ------------------------------------------------------------------ input rounds

    /// A request the upstream sent to a bridged client. Returns whether it was handled here.
    pub(super) fn on_bridged_upstream_request(
        &mut self,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> bool {
        if method == "ping" {
            self.send_upstream(jsonrpc::result(id, "{}"));
            return true;
        }
        if !matches!(
            method,
            "sampling/createMessage" | "elicitation/create" | "roots/list"
        ) {
            return false;
        }
        // The request belongs to a call in progress; stdio does not say which, so it goes to the
        // newest call that can take input.
        let target = self
            .pending
            .iter()
            .filter(|(_, pending)| match pending {
                Pending::Client { method, .. } => takes_input_rounds(method),
                Pending::Suspended { .. } => true,
                Pending::Proxy(_) | Pending::Hook { .. } => false,
            })
            .map(|(uid, _)| *uid)
            .max();
        let Some(uid) = target else {
            self.send_upstream(jsonrpc::error(
                Some(id),
                jsonrpc::METHOD_NOT_FOUND,
                &format!(
                    "the client speaks MCP 2026-07-28 and can answer `{method}` only within a \
                     tools/call, prompts/get or resources/read"
                ),
            ));
            return true;
        };
        let Some(bridged) = self.bridged() else {
            return false;
        };
        bridged.next_round += 1;
        let asked = AskedInput {
            key: format!("mcp-middleware/{}", bridged.next_round),
            upstream_id: id.into(),
            request: {
                let mut request = String::from(r#"{"method":"#);
                request.push_str(&Value::from(method).to_string());
                if let Some(params) = params {
                    request.push_str(r#","params":"#);
                    request.push_str(params);
                }
                request.push('}');
                request
            },
        };
        match self.pending.get(uid) {
            Some(Pending::Suspended { state, .. }) => {
                let state = state.clone();
                if let Some(round) = self.bridged().and_then(|b| b.rounds.get_mut(&state)) {
                    round.waiting.push(asked);
                }
            }
            _ => self.ask_client(uid, vec![asked]),
        }
        true
    }

    /// Answers the client's pending call `uid` with an input round and suspends it.
    fn ask_client(&mut self, uid: u64, inputs: Vec<AskedInput>) {
        let Some(Pending::Client {
            id,
            method,
            deadline,
            target,
            ..
        }) = self.pending.remove(uid)
        else {
            return;
        };
        let Some(bridged) = self.bridged() else {
            return;
        };
        bridged.next_round += 1;
        // What the proxy keeps; the client gets it sealed (`rounds`).
        let state = format!("{}{}", BRIDGE_ROUND, bridged.next_round);
        let mut requests = String::from("{");
        for (i, input) in inputs.iter().enumerate() {
            if i > 0 {
                requests.push(',');
            }
            requests.push_str(&Value::from(input.key.as_str()).to_string());
            requests.push(':');
            requests.push_str(&input.request);
        }
        requests.push('}');
        let sealed = self.seal_state(&state);
        let result = format!(
            r#"{{"resultType":"input_required","inputRequests":{requests},"requestState":{}}}"#,
            Value::from(sealed)
        );
        let Some(bridged) = self.bridged() else {
            return;
        };
        bridged.rounds.insert(
            state.clone(),
            InputRound {
                uid,
                method,
                target,
                asked: inputs.into_iter().map(|i| (i.key, i.upstream_id)).collect(),
                waiting: Vec::new(),
                answer: None,
            },
        );
        tracing::debug!(%state, "asked the client for input");
        self.pending
            .insert(uid, Pending::Suspended { state, deadline });
        self.to_client(jsonrpc::result(&id, &result));
    }

    /// The client's retry of a call that was answered with an input round (`state`: what its
    /// sealed `requestState` opened to): its answers go to the upstream's waiting requests and
    /// the retry takes over the upstream call.
    pub(super) fn resume_round(
        &mut self,
        id: &str,
        method: &str,
        map: &Map<String, Value>,
        state: &str,
    ) -> bool {
        let Some(round) = self.bridged().and_then(|b| b.rounds.remove(state)) else {
            self.to_client(jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                "requestState is unknown or expired (the upstream may have restarted); send the request again without it",
            ));
            return true;
        };
        let other = if *round.method == *method {
            super::rounds::other_target(
                method,
                round.target.as_deref(),
                super::rounds::target_of(method, map),
            )
        } else {
            Some(format!(
                "requestState belongs to a `{}` request, not `{method}`; send it with the request \
                 it came with",
                round.method
            ))
        };
        if let Some(message) = other {
            if let Some(bridged) = self.bridged() {
                bridged.rounds.insert(state.to_owned(), round);
            }
            self.to_client(jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, &message));
            return true;
        }
        let responses = map.get("inputResponses").and_then(Value::as_object);
        for (key, upstream_id) in &round.asked {
            let line = match responses.and_then(|r| r.get(key)) {
                Some(response) => jsonrpc::result(upstream_id, &response.to_string()),
                None => jsonrpc::error(
                    Some(upstream_id),
                    jsonrpc::INTERNAL_ERROR,
                    &format!("the client gave no answer to input request `{key}`"),
                ),
            };
            self.send_upstream(line);
        }
        if let Some(answer) = round.answer {
            let line = match answer {
                Ok(result) => {
                    let completed = era::complete_result(method, &result);
                    jsonrpc::result(id, completed.as_deref().unwrap_or(&result))
                }
                Err(error) => jsonrpc::error_response(id, &error),
            };
            self.to_client(line);
            return true;
        }
        let progress_token = map
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .map(|t| t.to_string().into_boxed_str());
        let client_id: Box<str> = id.into();
        self.pending.insert(
            round.uid,
            Pending::Client {
                id: client_id,
                method: round.method,
                progress_token,
                deadline: self.options.request_timeout.map(|t| Instant::now() + t),
                // The next round of the same call is bound to the same name.
                target: round.target,
            },
        );
        if !round.waiting.is_empty() {
            self.ask_client(round.uid, round.waiting);
        }
        true
    }

    /// The upstream answered a call while the client was still answering its input round.
    pub(super) fn on_suspended_answer(&mut self, state: &str, outcome: Result<&str, &str>) {
        if let Some(round) = self.bridged().and_then(|b| b.rounds.get_mut(state)) {
            round.answer = Some(outcome.map(|r| r.to_owned()).map_err(|e| e.to_owned()));
        }
    }

    /// Forgets an input round whose client never came back.
    pub(super) fn drop_round(&mut self, state: &str) {
        if let Some(bridged) = self.bridged() {
            bridged.rounds.remove(state);
        }
    }

    // ------------------------------------------------------------------ subscriptions/listen

    /// With routes, `params` are the router's checked reading: no hidden URI is among the
    /// subscriptions, and each is in its normalised form (`crate::routing`).
    fn open_listener(&mut self, id: &str, params: Option<&str>) {
        let filter = params
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
            .and_then(|p| p.get("notifications").cloned())
            .unwrap_or(Value::Null);
        let flag = |name: &str| filter.get(name).and_then(Value::as_bool) == Some(true);
        let Some(bridged) = self.bridged() else {
            return;
        };
        let uris: Vec<String> = if bridged.can_subscribe {
            filter
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
                .map(|uris| {
                    uris.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let listener = Listener {
            id: id.into(),
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            uris,
        };
        let mut honored = Map::new();
        for (name, on) in [
            ("toolsListChanged", listener.tools),
            ("promptsListChanged", listener.prompts),
            ("resourcesListChanged", listener.resources),
        ] {
            if on {
                honored.insert(name.into(), Value::Bool(true));
            }
        }
        if !listener.uris.is_empty() {
            honored.insert(
                "resourceSubscriptions".into(),
                serde_json::json!(listener.uris),
            );
        }
        let new_uris: Vec<String> = listener
            .uris
            .iter()
            .filter(|uri| !self.handshake.subscriptions.contains(*uri))
            .cloned()
            .collect();
        let subscription_id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
        if let Some(bridged) = self.bridged() {
            bridged.listeners.push(listener);
        }
        for uri in new_uris {
            self.handshake.subscriptions.insert(uri.clone());
            self.send_proxy_request(
                "resources/subscribe",
                &serde_json::json!({ "uri": uri }).to_string(),
            );
        }
        let ack = serde_json::json!({
            "_meta": { "io.modelcontextprotocol/subscriptionId": subscription_id },
            "notifications": honored,
        });
        self.to_client(jsonrpc::notification(
            "notifications/subscriptions/acknowledged",
            Some(&ack.to_string()),
        ));
    }

    /// The client cancelled request `id`: if it is a listen stream, close it. Returns whether it
    /// was one.
    pub(super) fn close_listener(&mut self, id: &str) -> bool {
        let Some(bridged) = self.bridged() else {
            return false;
        };
        let Some(at) = bridged.listeners.iter().position(|l| &*l.id == id) else {
            return false;
        };
        let closed = bridged.listeners.remove(at);
        let still: Vec<&String> = bridged.listeners.iter().flat_map(|l| &l.uris).collect();
        let gone: Vec<String> = closed
            .uris
            .iter()
            .filter(|uri| !still.contains(uri))
            .cloned()
            .collect();
        for uri in gone {
            self.handshake.subscriptions.remove(&uri);
            self.send_proxy_request(
                "resources/unsubscribe",
                &serde_json::json!({ "uri": uri }).to_string(),
            );
        }
        true
    }

    /// Routes an upstream change notification to the listen streams that asked for it. Returns
    /// the lines to send (none when no stream wants it: 2026-07-28 clients get change
    /// notifications only on listen streams).
    pub(super) fn route_to_listeners(
        &mut self,
        method: &str,
        params: Option<&str>,
    ) -> Option<Vec<String>> {
        let bridged = self.bridged()?;
        let uri = || {
            params
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .and_then(|p| p.get("uri").and_then(Value::as_str).map(str::to_owned))
        };
        let wanted: Vec<&Listener> = match method {
            "notifications/tools/list_changed" => {
                bridged.listeners.iter().filter(|l| l.tools).collect()
            }
            "notifications/prompts/list_changed" => {
                bridged.listeners.iter().filter(|l| l.prompts).collect()
            }
            "notifications/resources/list_changed" => {
                bridged.listeners.iter().filter(|l| l.resources).collect()
            }
            "notifications/resources/updated" => {
                let uri = uri()?;
                bridged
                    .listeners
                    .iter()
                    .filter(|l| l.uris.contains(&uri))
                    .collect()
            }
            _ => return None,
        };
        let mut base: Map<String, Value> = params
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_default();
        Some(
            wanted
                .iter()
                .map(|listener| {
                    let id: Value = serde_json::from_str(&listener.id).unwrap_or(Value::Null);
                    let meta = base
                        .entry("_meta")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(meta) = meta {
                        meta.insert("io.modelcontextprotocol/subscriptionId".into(), id);
                    }
                    jsonrpc::notification(method, Some(&Value::Object(base.clone()).to_string()))
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending_request() -> Pending {
        Pending::Client {
            id: "1".into(),
            method: "tools/call".into(),
            progress_token: None,
            deadline: None,
            target: None,
        }
    }

    #[test]
    fn a_log_reaches_a_bridged_client_only_while_a_request_that_asked_for_it_is_pending() {
        let mut bridged = Bridged::default();
        bridged.log_levels.insert(5, severity("warning").unwrap());
        let mut pending = HashMap::new();
        let error = Some(r#"{"level":"error","data":"x"}"#);
        assert!(
            !bridged.wants_log(error, &pending),
            "its request is not pending"
        );
        pending.insert(5, pending_request());
        assert!(bridged.wants_log(error, &pending));
        assert!(
            !bridged.wants_log(Some(r#"{"level":"info"}"#), &pending),
            "less severe than it asked for"
        );
        assert!(!bridged.wants_log(Some(r#"{"level":"loud"}"#), &pending));
        assert!(!bridged.wants_log(None, &pending));

        bridged.request_done(5);
        assert!(
            !bridged.wants_log(error, &pending),
            "answered: no more logs"
        );

        bridged.log_levels.insert(6, 0);
        bridged.clear_requests();
        assert!(bridged.log_levels.is_empty() && bridged.rounds.is_empty());
    }

    #[test]
    fn input_rounds_belong_to_the_three_methods_that_may_ask() {
        for method in ["tools/call", "prompts/get", "resources/read"] {
            assert!(takes_input_rounds(method), "{method}");
        }
        assert!(!takes_input_rounds("tools/list"));
    }
}
