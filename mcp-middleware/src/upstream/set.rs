//! Several upstream servers served as one (SPEC T4).
//!
//! To the session a [`ServerSet`] is one upstream, spoken to with JSON-RPC lines like a child
//! process; behind it a task (the *merger*) runs every server and routes:
//!
//! - `initialize` goes to every server; the answer merges their capabilities (union; a
//!   `listChanged` or `subscribe` true anywhere is true), server infos and instructions. A server
//!   that fails to start or to initialize is reported (log, status file) and left out; the
//!   others keep working. A server that dies is started again (and re-initialized) by the next
//!   request routed to it.
//! - `tools/list` and `prompts/list` ask every server (following their cursors) and name each
//!   entry `server{separator}name`; `tools/call`, `prompts/get` and prompt completions are routed
//!   by that prefix, which is removed on the way. `resources/list` and
//!   `resources/templates/list` are merged as they are; a resource URI goes back to the server
//!   that listed it (or, unknown, is tried on each server in turn).
//! - `logging/setLevel` and client notifications go to every server; `ping` is answered here.
//! - Notifications from any server (list_changed, progress, log messages, updates) reach the
//!   client; requests from a server (sampling, elicitation, roots) reach it with ids the merger
//!   maps back.
//! - Any other method goes to the first server, as it is.
//!
//! The merger reads names and URIs with serde_json (last duplicate wins). With routes that is
//! safe: the session hands it the router's canonical serialisation of the params it checked
//! (`crate::routing`), which has no duplicate and reads the same to any parser.
//!
//! A set of one server is not merged: use the server itself.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::{Upstream, UpstreamEvent, UpstreamLink};
use crate::error::UpstreamError;
use crate::jsonrpc::{self, Message, range_in, splice};
use crate::transport::queue::{LineQueue, Queued};

/// Several servers, each with a name, served as one.
///
/// ```
/// use mcp_middleware::upstream::{ServerSet, StdioServer};
///
/// let set = ServerSet::new()
///     .server("everything", StdioServer::new("npx").args(["-y", "@modelcontextprotocol/server-everything"]))
///     .server("files", StdioServer::new("mcp-server-filesystem").arg("/srv"))
///     .separator("__");
/// assert_eq!(set.to_string(), "servers everything, files");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerSet {
    servers: Vec<(String, Upstream)>,
    separator: String,
    status_file: Option<PathBuf>,
}

impl ServerSet {
    /// An empty set, with `__` between a server's name and its tools' and prompts' names.
    pub fn new() -> Self {
        Self {
            servers: Vec::new(),
            separator: "__".to_owned(),
            status_file: None,
        }
    }

    /// Adds a server called `name`: a [`StdioServer`](super::StdioServer) or an
    /// [`HttpUpstream`](super::HttpUpstream).
    pub fn server(mut self, name: impl Into<String>, server: impl Into<Upstream>) -> Self {
        self.servers.push((name.into(), server.into()));
        self
    }

    /// Sets what goes between a server's name and a tool's or prompt's name.
    pub fn separator(mut self, separator: impl Into<String>) -> Self {
        self.separator = separator.into();
        self
    }

    /// Keeps each server's state (running, or down and why) in `path`, as JSON, rewritten
    /// atomically whenever it changes: how `mcpctl describe project` reports a server that failed.
    pub fn status_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.status_file = Some(path.into());
        self
    }

    /// The servers' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.servers.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// What goes between a server's name and a tool's or prompt's name (`__` unless set).
    pub fn namespace_separator(&self) -> &str {
        &self.separator
    }

    pub(crate) fn spawn<E>(
        &self,
        generation: u64,
        max_line: usize,
        events: mpsc::Sender<E>,
    ) -> Result<UpstreamLink, UpstreamError>
    where
        E: From<UpstreamEvent> + Send + 'static,
    {
        let (from_children, child_events) = mpsc::channel(256);
        let mut merger = Merger {
            set: self.clone(),
            max_line,
            generation,
            up: Box::new(move |event| {
                let events = events.clone();
                Box::pin(async move { events.send(E::from(event)).await.is_ok() })
            }),
            from_children,
            children: Vec::new(),
            next_id: 0,
            waiting: HashMap::new(),
            gathers: HashMap::new(),
            server_requests: HashMap::new(),
            uri_owner: HashMap::new(),
            initialize: None,
            initialized: false,
            log_level: None,
        };
        for index in 0..self.servers.len() {
            let state = merger.start(index);
            merger.children.push(state);
        }
        merger.write_status();
        if merger.children.iter().all(|c| c.link.is_none()) {
            return Err(UpstreamError::Spawn {
                server: self.to_string(),
                cause: std::io::Error::other(
                    merger
                        .children
                        .iter()
                        .map(|c| c.down.clone().unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
            });
        }
        let (outgoing, from_session) = LineQueue::new(usize::MAX);
        let task = tokio::spawn(merger.run(from_session, child_events));
        Ok(UpstreamLink::new(outgoing, task))
    }
}

impl fmt::Display for ServerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "servers {}", self.names().join(", "))
    }
}

type Up = Box<
    dyn Fn(UpstreamEvent) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync,
>;

/// One server of the set.
struct ChildState {
    link: Option<UpstreamLink>,
    generation: u64,
    /// Why it is down, when it is.
    down: Option<String>,
}

/// What an answer from a server is for.
enum Waiting {
    /// The session's request, answered by this one server: relay with the session's id.
    Relay { up_id: String },
    /// One part of a request sent to several servers.
    Part { gather: u64 },
    /// A request the merger made itself (a replayed handshake); the answer is only logged.
    Own,
}

/// A request of the session answered by several servers together.
struct Gather {
    up_id: String,
    kind: GatherKind,
    /// Parts still out.
    outstanding: usize,
    /// Answers so far, by server.
    answers: Vec<(usize, Result<Value, Value>)>,
}

enum GatherKind {
    Initialize,
    /// A list request: the result member holding the items, and whether item names are
    /// prefixed with the server's name.
    List {
        method: String,
        params: Map<String, Value>,
        member: &'static str,
        prefix: bool,
    },
    /// Everyone must answer; the result is `{}`.
    All,
    /// Servers tried in turn until one succeeds.
    FirstSuccess {
        method: String,
        params: Option<String>,
        untried: Vec<usize>,
    },
}

struct Merger {
    set: ServerSet,
    max_line: usize,
    generation: u64,
    up: Up,
    from_children: mpsc::Sender<(usize, UpstreamEvent)>,
    children: Vec<ChildState>,
    next_id: u64,
    /// By server and the id the merger gave the request.
    waiting: HashMap<(usize, u64), Waiting>,
    gathers: HashMap<u64, Gather>,
    /// Requests from servers to the client, by the id the merger gave them.
    server_requests: HashMap<u64, (usize, String)>,
    uri_owner: HashMap<String, usize>,
    initialize: Option<String>,
    initialized: bool,
    log_level: Option<String>,
}

impl Merger {
    fn name(&self, index: usize) -> &str {
        &self.set.servers[index].0
    }

    /// Starts server `index`; a failure leaves it down with the reason.
    fn start(&mut self, index: usize) -> ChildState {
        let (name, server) = &self.set.servers[index];
        let generation = self.children.get(index).map_or(1, |c| c.generation + 1);
        let (tx, mut rx) = mpsc::channel::<UpstreamEvent>(64);
        match server.spawn(generation, self.max_line, tx) {
            Ok(link) => {
                let forward = self.from_children.clone();
                tokio::spawn(async move {
                    while let Some(event) = rx.recv().await {
                        if forward.send((index, event)).await.is_err() {
                            return;
                        }
                    }
                });
                ChildState {
                    link: Some(link),
                    generation,
                    down: None,
                }
            }
            Err(err) => {
                tracing::warn!(server = %name, %err, "a server of the set did not start; the others go on");
                ChildState {
                    link: None,
                    generation,
                    down: Some(err.to_string()),
                }
            }
        }
    }

    async fn run(
        mut self,
        mut from_session: mpsc::UnboundedReceiver<Queued>,
        mut child_events: mpsc::Receiver<(usize, UpstreamEvent)>,
    ) {
        loop {
            tokio::select! {
                line = from_session.recv() => match line {
                    Some(line) => self.on_session_line(line.as_str()).await,
                    None => break,
                },
                Some((index, event)) = child_events.recv() => self.on_child_event(index, event).await,
            }
        }
        for child in self.children.drain(..) {
            if let Some(link) = child.link {
                link.shut_down(Duration::from_secs(2)).await;
            }
        }
    }

    async fn send_up(&self, line: String) {
        let _ = (self.up)(UpstreamEvent::Line {
            generation: self.generation,
            line,
        })
        .await;
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Makes sure server `index` runs, starting (and re-initializing) it if it died.
    fn ensure(&mut self, index: usize) -> bool {
        if self.children[index].link.is_some() {
            return true;
        }
        let state = self.start(index);
        self.children[index] = state;
        self.write_status();
        if self.children[index].link.is_none() {
            return false;
        }
        if let Some(params) = self.initialize.clone() {
            // Servers read their input in order, so the request can follow the handshake
            // without waiting for its answer.
            let id = self.next_id();
            self.waiting.insert((index, id), Waiting::Own);
            self.send_child(
                index,
                jsonrpc::request(&id.to_string(), "initialize", Some(&params)),
            );
            if self.initialized {
                self.send_child(
                    index,
                    jsonrpc::notification("notifications/initialized", None),
                );
            }
            if let Some(level) = self.log_level.clone() {
                let id = self.next_id();
                self.waiting.insert((index, id), Waiting::Own);
                self.send_child(
                    index,
                    jsonrpc::request(&id.to_string(), "logging/setLevel", Some(&level)),
                );
            }
        }
        true
    }

    fn send_child(&self, index: usize, line: String) {
        if let Some(link) = &self.children[index].link {
            link.send(line);
        }
    }

    fn live(&self) -> Vec<usize> {
        (0..self.children.len())
            .filter(|i| self.children[*i].link.is_some())
            .collect()
    }

    // ------------------------------------------------------------ from the session

    async fn on_session_line(&mut self, line: &str) {
        let Ok(message) = Message::parse(line) else {
            return;
        };
        match message {
            Message::Request { id, method, params } => self.on_request(id, &method, params).await,
            Message::Notification { method, params } => self.on_notification(line, &method, params),
            Message::Result { id, .. } | Message::Error { id: Some(id), .. } => {
                // The client's answer to a server's request.
                let Some((index, child_id)) = id
                    .parse::<u64>()
                    .ok()
                    .and_then(|mid| self.server_requests.remove(&mid))
                else {
                    return;
                };
                let out = splice(line, &[(range_in(line, id), child_id.as_str())]);
                self.send_child(index, out);
            }
            Message::Error { id: None, .. } => {}
        }
    }

    async fn on_request(&mut self, id: &str, method: &str, params: Option<&str>) {
        let map: Map<String, Value> = params
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_default();
        match method {
            "initialize" => {
                self.initialize = params.map(str::to_owned);
                let everyone = (0..self.children.len()).collect::<Vec<_>>();
                self.gather(id, GatherKind::Initialize, everyone, method, params);
            }
            "ping" => self.send_up(jsonrpc::result(id, "{}")).await,
            "server/discover" => {
                self.send_up(jsonrpc::error(
                    Some(id),
                    jsonrpc::METHOD_NOT_FOUND,
                    "Method not found: several servers are served together with the 2025-11-25 handshake",
                ))
                .await
            }
            "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
                let (member, prefix) = match method {
                    "tools/list" => ("tools", true),
                    "prompts/list" => ("prompts", true),
                    "resources/list" => ("resources", false),
                    _ => ("resourceTemplates", false),
                };
                let mut params = map;
                params.remove("cursor");
                let everyone = self.live_or_restart();
                let text = Value::Object(params.clone()).to_string();
                self.gather(
                    id,
                    GatherKind::List {
                        method: method.to_owned(),
                        params,
                        member,
                        prefix,
                    },
                    everyone,
                    method,
                    Some(&text),
                );
            }
            "logging/setLevel" => {
                self.log_level = params.map(str::to_owned);
                let everyone = self.live_or_restart();
                self.gather(id, GatherKind::All, everyone, method, params);
            }
            "tools/call" | "prompts/get" => {
                let name = map.get("name").and_then(Value::as_str).unwrap_or_default();
                match self.split(name) {
                    Some((index, inner)) => {
                        let mut map = map.clone();
                        map.insert("name".into(), inner.into());
                        self.relay(index, id, method, &Value::Object(map).to_string());
                    }
                    None => {
                        let what = if method == "tools/call" { "tool" } else { "prompt" };
                        self.send_up(jsonrpc::error(
                            Some(id),
                            jsonrpc::INVALID_PARAMS,
                            &format!(
                                "unknown {what} `{name}`: through this proxy {what}s are named `SERVER{}{what}`, with SERVER one of {}",
                                self.set.separator,
                                self.set.names().join(", ")
                            ),
                        ))
                        .await
                    }
                }
            }
            "completion/complete" => {
                let reference = map.get("ref").cloned().unwrap_or(Value::Null);
                if reference["type"] == "ref/prompt" {
                    let name = reference["name"].as_str().unwrap_or_default();
                    if let Some((index, inner)) = self.split(name) {
                        let mut map = map.clone();
                        map.insert("ref".into(), json!({"type": "ref/prompt", "name": inner}));
                        self.relay(index, id, method, &Value::Object(map).to_string());
                        return;
                    }
                }
                let uri = reference["uri"].as_str().unwrap_or_default().to_owned();
                self.route_uri(id, method, params, &uri);
            }
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                let uri = map.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
                self.route_uri(id, method, params, &uri);
            }
            _ => match self.live_or_restart().first() {
                Some(first) => {
                    let first = *first;
                    self.relay(first, id, method, params.unwrap_or("{}"))
                }
                None => self.all_down(id).await,
            },
        }
    }

    fn live_or_restart(&mut self) -> Vec<usize> {
        for index in 0..self.children.len() {
            self.ensure(index);
        }
        self.live()
    }

    async fn all_down(&self, id: &str) {
        self.send_up(jsonrpc::error(
            Some(id),
            jsonrpc::UPSTREAM_UNAVAILABLE,
            &format!("every server is down ({})", self.set.names().join(", ")),
        ))
        .await
    }

    /// The server a prefixed name belongs to, and the name without the prefix.
    fn split<'n>(&self, name: &'n str) -> Option<(usize, &'n str)> {
        self.set
            .servers
            .iter()
            .enumerate()
            .find_map(|(index, (server, _))| {
                name.strip_prefix(server.as_str())
                    .and_then(|rest| rest.strip_prefix(self.set.separator.as_str()))
                    .map(|inner| (index, inner))
            })
    }

    /// Sends the session's request to one server; the answer is relayed as it is.
    fn relay(&mut self, index: usize, up_id: &str, method: &str, params: &str) {
        if !self.ensure(index) {
            let reason = self.children[index].down.clone().unwrap_or_default();
            let line = jsonrpc::error(
                Some(up_id),
                jsonrpc::UPSTREAM_UNAVAILABLE,
                &format!("server `{}` is unavailable: {reason}", self.name(index)),
            );
            tokio::spawn((self.up)(UpstreamEvent::Line {
                generation: self.generation,
                line,
            }));
            return;
        }
        let id = self.next_id();
        self.waiting.insert(
            (index, id),
            Waiting::Relay {
                up_id: up_id.to_owned(),
            },
        );
        self.send_child(
            index,
            jsonrpc::request(&id.to_string(), method, Some(params)),
        );
    }

    fn route_uri(&mut self, id: &str, method: &str, params: Option<&str>, uri: &str) {
        if let Some(index) = self.uri_owner.get(uri).copied() {
            self.relay(index, id, method, params.unwrap_or("{}"));
            return;
        }
        let untried = self.live_or_restart();
        let kind = GatherKind::FirstSuccess {
            method: method.to_owned(),
            params: params.map(str::to_owned),
            untried: untried.clone(),
        };
        self.start_first_success(id, kind);
    }

    fn start_first_success(&mut self, up_id: &str, mut kind: GatherKind) {
        let GatherKind::FirstSuccess {
            method,
            params,
            untried,
        } = &mut kind
        else {
            return;
        };
        if untried.is_empty() {
            let line = jsonrpc::error(
                Some(up_id),
                jsonrpc::UPSTREAM_UNAVAILABLE,
                "every server is down",
            );
            tokio::spawn((self.up)(UpstreamEvent::Line {
                generation: self.generation,
                line,
            }));
            return;
        }
        let index = untried.remove(0);
        let (method, params) = (method.clone(), params.clone());
        let gather = self.next_id();
        let id = self.next_id();
        self.waiting.insert((index, id), Waiting::Part { gather });
        self.send_child(
            index,
            jsonrpc::request(&id.to_string(), &method, params.as_deref()),
        );
        self.gathers.insert(
            gather,
            Gather {
                up_id: up_id.to_owned(),
                kind,
                outstanding: 1,
                answers: Vec::new(),
            },
        );
    }

    /// Sends a request to several servers and answers once all have.
    fn gather(
        &mut self,
        up_id: &str,
        kind: GatherKind,
        servers: Vec<usize>,
        method: &str,
        params: Option<&str>,
    ) {
        let gather = self.next_id();
        let mut outstanding = 0;
        for index in servers {
            if self.children[index].link.is_none() {
                continue;
            }
            let id = self.next_id();
            self.waiting.insert((index, id), Waiting::Part { gather });
            self.send_child(index, jsonrpc::request(&id.to_string(), method, params));
            outstanding += 1;
        }
        self.gathers.insert(
            gather,
            Gather {
                up_id: up_id.to_owned(),
                kind,
                outstanding,
                answers: Vec::new(),
            },
        );
        if outstanding == 0 {
            self.finish_later(gather);
        }
    }

    fn finish_later(&mut self, gather: u64) {
        if let Some(done) = self.gathers.remove(&gather) {
            let line = self.merge(done);
            tokio::spawn((self.up)(UpstreamEvent::Line {
                generation: self.generation,
                line,
            }));
        }
    }

    fn on_notification(&mut self, line: &str, method: &str, params: Option<&str>) {
        match method {
            "notifications/initialized" => self.initialized = true,
            "notifications/cancelled" => {
                let request = params
                    .and_then(|p| serde_json::from_str::<Map<String, Value>>(p).ok())
                    .and_then(|p| p.get("requestId").cloned());
                let Some(request) = request else { return };
                let up_id = request.to_string();
                let targets: Vec<(usize, u64)> = self
                    .waiting
                    .iter()
                    .filter(|(_, w)| match w {
                        Waiting::Relay { up_id: id } => *id == up_id,
                        Waiting::Part { gather } => {
                            self.gathers.get(gather).is_some_and(|g| g.up_id == up_id)
                        }
                        Waiting::Own => false,
                    })
                    .map(|(key, _)| *key)
                    .collect();
                for (index, id) in targets {
                    self.waiting.remove(&(index, id));
                    let params = json!({"requestId": id, "reason": "cancelled by the client"});
                    self.send_child(
                        index,
                        jsonrpc::notification(method, Some(&params.to_string())),
                    );
                }
                self.gathers.retain(|_, g| g.up_id != up_id);
                return;
            }
            _ => {}
        }
        for index in self.live() {
            self.send_child(index, line.to_owned());
        }
    }

    // ------------------------------------------------------------ from the servers

    async fn on_child_event(&mut self, index: usize, event: UpstreamEvent) {
        match event {
            UpstreamEvent::Line { generation, line }
            | UpstreamEvent::LineFor {
                generation, line, ..
            } => {
                if generation == self.children[index].generation {
                    self.on_child_line(index, &line).await;
                }
            }
            UpstreamEvent::Closed { generation, how } => {
                if generation == self.children[index].generation {
                    self.on_child_closed(index, &how).await;
                }
            }
        }
    }

    async fn on_child_line(&mut self, index: usize, line: &str) {
        let message = match Message::parse(line) {
            Ok(message) => message,
            Err(err) => {
                tracing::warn!(server = %self.name(index), error = %err.message, "dropped a malformed message from a server of the set");
                return;
            }
        };
        match message {
            Message::Result { id, result } => {
                self.on_child_answer(index, line, id, Ok(result)).await
            }
            Message::Error {
                id: Some(id),
                error,
            } => self.on_child_answer(index, line, id, Err(error)).await,
            Message::Error { id: None, .. } => self.send_up(line.to_owned()).await,
            Message::Request { id, .. } => {
                let mid = self.next_id();
                self.server_requests.insert(mid, (index, id.to_owned()));
                let out = splice(line, &[(range_in(line, id), mid.to_string().as_str())]);
                self.send_up(out).await;
            }
            Message::Notification { method, params } => {
                if method == "notifications/cancelled"
                    && let Some(params) = params
                    && let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(params)
                {
                    // The server withdrew a request it sent the client: name it as the client knows it.
                    let child_id = map
                        .get("requestId")
                        .map(Value::to_string)
                        .unwrap_or_default();
                    let found = self
                        .server_requests
                        .iter()
                        .find(|(_, (i, id))| *i == index && *id == child_id)
                        .map(|(mid, _)| *mid);
                    let Some(mid) = found else { return };
                    self.server_requests.remove(&mid);
                    map.insert("requestId".into(), mid.into());
                    let out = jsonrpc::notification(&method, Some(&Value::Object(map).to_string()));
                    self.send_up(out).await;
                    return;
                }
                self.send_up(line.to_owned()).await;
            }
        }
    }

    async fn on_child_answer(
        &mut self,
        index: usize,
        line: &str,
        id: &str,
        outcome: Result<&str, &str>,
    ) {
        let Some(waiting) = id
            .parse::<u64>()
            .ok()
            .and_then(|id| self.waiting.remove(&(index, id)))
        else {
            return;
        };
        match waiting {
            Waiting::Relay { up_id } => {
                let out = splice(line, &[(range_in(line, id), up_id.as_str())]);
                self.send_up(out).await;
            }
            Waiting::Own => {
                if let Err(error) = outcome {
                    tracing::warn!(server = %self.name(index), %error, "a server refused the replayed handshake");
                }
            }
            Waiting::Part { gather } => {
                let parsed = match outcome {
                    Ok(result) => Ok(serde_json::from_str(result).unwrap_or(Value::Null)),
                    Err(error) => Err(serde_json::from_str(error).unwrap_or(Value::Null)),
                };
                self.on_part(gather, index, parsed).await;
            }
        }
    }

    async fn on_part(&mut self, gather_id: u64, index: usize, answer: Result<Value, Value>) {
        let Some(gather) = self.gathers.get_mut(&gather_id) else {
            return;
        };
        gather.outstanding = gather.outstanding.saturating_sub(1);
        // A list that has more pages: ask for the next one from the same server.
        if let (GatherKind::List { method, params, .. }, Ok(result)) = (&gather.kind, &answer)
            && let Some(cursor) = result.get("nextCursor").and_then(Value::as_str)
            && gather.answers.iter().filter(|(i, _)| *i == index).count() < 1000
        {
            let mut params = params.clone();
            params.insert("cursor".into(), cursor.into());
            let method = method.clone();
            gather.outstanding += 1;
            gather.answers.push((index, answer));
            let id = self.next_id();
            self.waiting
                .insert((index, id), Waiting::Part { gather: gather_id });
            self.send_child(
                index,
                jsonrpc::request(
                    &id.to_string(),
                    &method,
                    Some(&Value::Object(params).to_string()),
                ),
            );
            return;
        }
        // Tried in turn: an error moves on to the next server.
        if let GatherKind::FirstSuccess { untried, .. } = &gather.kind
            && answer.is_err()
            && !untried.is_empty()
        {
            let Some(gather) = self.gathers.remove(&gather_id) else {
                return;
            };
            let up_id = gather.up_id.clone();
            self.start_first_success(&up_id, gather.kind);
            return;
        }
        gather.answers.push((index, answer));
        if gather.outstanding == 0
            && let Some(done) = self.gathers.remove(&gather_id)
        {
            let line = self.merge(done);
            self.send_up(line).await;
        }
    }

    /// The session's answer from the servers' answers.
    fn merge(&mut self, gather: Gather) -> String {
        let Gather {
            up_id,
            kind,
            mut answers,
            ..
        } = gather;
        // Servers in the set's order whatever order they answered in; a server's pages stay in
        // order (the sort is stable).
        answers.sort_by_key(|(index, _)| *index);
        let successes: Vec<(usize, &Value)> = answers
            .iter()
            .filter_map(|(index, answer)| answer.as_ref().ok().map(|value| (*index, value)))
            .collect();
        if successes.is_empty() {
            return match answers.iter().find_map(|(_, answer)| answer.as_ref().err()) {
                Some(error) => jsonrpc::error_response(&up_id, &error.to_string()),
                None => jsonrpc::error(
                    Some(&up_id),
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    &format!("no server answered ({})", self.set.names().join(", ")),
                ),
            };
        }
        for (index, answer) in &answers {
            if let Err(error) = answer {
                tracing::warn!(server = %self.name(*index), %error, "a server of the set failed its part");
            }
        }
        let result = match kind {
            GatherKind::Initialize => self.merge_initialize(&successes),
            GatherKind::List { member, prefix, .. } => {
                let mut items = Vec::new();
                for (index, value) in &successes {
                    for item in value
                        .get(member)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let mut item = item.clone();
                        if prefix && let Some(name) = item.get("name").and_then(Value::as_str) {
                            let named =
                                format!("{}{}{name}", self.name(*index), self.set.separator);
                            item["name"] = named.into();
                        }
                        if let Some(uri) = item.get("uri").and_then(Value::as_str) {
                            self.uri_owner.insert(uri.to_owned(), *index);
                        }
                        items.push(item);
                    }
                }
                json!({ member: items })
            }
            GatherKind::All => json!({}),
            GatherKind::FirstSuccess { .. } => successes[0].1.clone(),
        };
        jsonrpc::result(&up_id, &result.to_string())
    }

    fn merge_initialize(&mut self, successes: &[(usize, &Value)]) -> Value {
        let mut capabilities = Map::new();
        let mut names = Vec::new();
        let mut versions = Vec::new();
        let mut instructions = Vec::new();
        for (index, result) in successes {
            if let Some(Value::Object(caps)) = result.get("capabilities") {
                merge_capabilities(&mut capabilities, caps);
            }
            if let Some(info) = result.get("serverInfo") {
                names.push(info["name"].as_str().unwrap_or_default().to_owned());
                versions.push(info["version"].as_str().unwrap_or_default().to_owned());
            }
            if let Some(text) = result.get("instructions").and_then(Value::as_str)
                && !text.is_empty()
            {
                instructions.push(format!("Server `{}`:\n{text}", self.name(*index)));
            }
        }
        let mut merged = json!({
            "protocolVersion": successes[0].1.get("protocolVersion").cloned().unwrap_or(Value::Null),
            "capabilities": capabilities,
            "serverInfo": {"name": names.join(" + "), "version": versions.join(" + ")},
        });
        if !instructions.is_empty() {
            merged["instructions"] = instructions.join("\n\n").into();
        }
        merged
    }

    async fn on_child_closed(&mut self, index: usize, how: &str) {
        let reason = format!("server `{}` {how}", self.name(index));
        tracing::warn!("{reason}; the other servers go on");
        self.children[index].link = None;
        self.children[index].down = Some(reason.clone());
        self.write_status();
        let failed: Vec<((usize, u64), Waiting)> = self
            .waiting
            .iter()
            .filter(|((i, _), _)| *i == index)
            .map(|(key, _)| *key)
            .collect::<Vec<_>>()
            .into_iter()
            .filter_map(|key| self.waiting.remove(&key).map(|w| (key, w)))
            .collect();
        for (_, waiting) in failed {
            let error = json!({
                "code": jsonrpc::UPSTREAM_UNAVAILABLE,
                "message": format!("{reason} before answering; the next request starts it again"),
            });
            match waiting {
                Waiting::Relay { up_id } => {
                    self.send_up(jsonrpc::error_response(&up_id, &error.to_string()))
                        .await
                }
                Waiting::Part { gather } => self.on_part(gather, index, Err(error)).await,
                Waiting::Own => {}
            }
        }
        self.server_requests.retain(|_, (i, _)| *i != index);
    }

    /// Writes every server's state to the status file, if there is one.
    fn write_status(&self) {
        let Some(path) = &self.set.status_file else {
            return;
        };
        let states: Vec<Value> = self
            .set
            .servers
            .iter()
            .zip(&self.children)
            .map(|((name, server), child)| match &child.down {
                None => json!({"name": name, "command": server.to_string(), "state": "running"}),
                Some(reason) => {
                    json!({"name": name, "command": server.to_string(), "state": "down", "reason": reason})
                }
            })
            .collect();
        let text = Value::Array(states).to_string();
        let tmp = path.with_extension("tmp");
        let written = std::fs::create_dir_all(path.parent().unwrap_or(path.as_path()))
            .and_then(|()| std::fs::write(&tmp, text))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(err) = written {
            tracing::warn!(path = %path.display(), %err, "could not write the servers' status file");
        }
    }
}

/// Adds a server's capabilities to the merged ones: a capability any server has is there; where
/// both have an object, `true` flags (listChanged, subscribe) win.
fn merge_capabilities(merged: &mut Map<String, Value>, caps: &Map<String, Value>) {
    for (key, value) in caps {
        match (merged.get_mut(key), value) {
            (None, _) => {
                merged.insert(key.clone(), value.clone());
            }
            (Some(Value::Object(into)), Value::Object(from)) => {
                for (flag, set) in from {
                    match into.get(flag) {
                        None => {
                            into.insert(flag.clone(), set.clone());
                        }
                        Some(Value::Bool(false)) if set == &Value::Bool(true) => {
                            into.insert(flag.clone(), Value::Bool(true));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}
