//! Several upstream servers served as one.
//!
//! To the session a [`ServerSet`] is one upstream, spoken to with JSON-RPC lines like a child
//! process; behind it a task (the *merger*) runs every server and routes:
//!
//! - `initialize` goes to every server; the answer merges their capabilities (union; a
//!   `listChanged` or `subscribe` true anywhere is true), server infos and instructions. A server
//!   that fails to start or to initialize is reported (log, status file) and left out; the
//!   others keep working. A server that dies is started again (and re-initialized) by the next
//!   request routed to it.
//! - `tools/list` and `prompts/list` name each entry `server{separator}name`; `tools/call`,
//!   `prompts/get` and prompt completions are routed by that prefix, which is removed on the
//!   way. `resources/list` and `resources/templates/list` keep their entries as they are; a
//!   resource URI (or a template, for a completion's `ref/resource`) goes back to the server that
//!   listed it, or, unknown, is tried on each server in turn (these methods only read). A
//!   completion whose `ref` picks no server (an unprefixed prompt, no `ref`) is refused with
//!   -32602.
//! - The four lists paginate on their own. A page is whole upstream pages, asked for one at a
//!   time, server after server in the set's order, until it holds at least
//!   [`ServerSet::page_size`] items (100 unless set) or every server is at its end; then
//!   `nextCursor` says where the next page starts: which server, and that server's own cursor.
//!   That cursor is sealed (HMAC-SHA256 under a key each running set draws, over the method too:
//!   `set/cursor.rs`), so a client cannot make the proxy send a cursor of its choosing to a server of
//!   its choosing; one that is malformed, forged, or from another list or session is refused
//!   with -32602 naming it. A server that is down or fails its page is left out of that page
//!   (logged); when no server answers, the first error is relayed. One page makes at most 64
//!   upstream requests, so servers answering empty pages cannot hold a request forever.
//! - `logging/setLevel` and client notifications go to every server; `ping` is answered here.
//! - Notifications from any server (list_changed, progress, log messages, updates) reach the
//!   client; requests from a server (sampling, elicitation, roots) reach it with ids the merger
//!   maps back.
//! - Any other request (vendor and `x/...` methods, methods this merger does not merge) is
//!   routed by its params: a `name` that starts with a server's prefix goes to that server with
//!   the prefix removed (as `tools/call`), else a `uri` a server listed goes to that server,
//!   else it is refused with -32601 naming the method and the servers. It used to go to the
//!   first server, which answered for servers it does not speak for (a vendor method of the
//!   second server reached the first) and made the order of `servers` a routing decision; a
//!   refusal that says how to address a server is what a client can act on.
//!
//! The merger reads names and URIs with serde_json (last duplicate wins). With routes that is
//! safe: the session hands it the router's canonical serialisation of the params it checked
//! (`crate::routing`), which has no duplicate and reads the same to any parser.
//!
//! A live change (`crate::live`) reaches a running set as a new [`ServerSet`] to become
//! (`Merger::reshape`): servers added, removed or changed start or stop, the others and their
//! requests in flight go on. Each server lives in a *slot* that is never moved or reused, and
//! requests, forwarding tasks and list cursors name servers by slot, so adding or removing a
//! server shifts nothing; a server added to a running set takes a new slot after the others.
//!
//! A set of one server is not merged: use the server itself.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::replay::Replay;
use super::{Upstream, UpstreamEvent, UpstreamLink};
use crate::error::UpstreamError;
use crate::exchange::{Handshake, IdMap, Step};
use crate::jsonrpc::{self, Message, range_in, splice};
use crate::transport::queue::{LineQueue, Queued};
use cursor::{CursorKey, Position};

mod cursor;

/// Upstream requests one merged page may take at most, so that servers answering empty pages
/// with cursors cannot keep one client request going.
const MAX_ASKS_PER_PAGE: usize = 64;

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
    page_size: usize,
}

impl ServerSet {
    /// An empty set, with `__` between a server's name and its tools' and prompts' names.
    pub fn new() -> Self {
        Self {
            servers: Vec::new(),
            separator: "__".to_owned(),
            status_file: None,
            page_size: 100,
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

    /// Sets how many items a merged list page (`tools/list`, `prompts/list`, `resources/list`,
    /// `resources/templates/list`) gathers before it ends: whole upstream pages are added, server
    /// after server, until the page holds at least `items` (default 100). With 0 each page is one
    /// upstream page.
    ///
    /// ```
    /// use mcp_middleware::upstream::{ServerSet, StdioServer};
    ///
    /// let set = ServerSet::new()
    ///     .server("a", StdioServer::new("server-a"))
    ///     .server("b", StdioServer::new("server-b"))
    ///     .page_size(500);
    /// assert_eq!(set.names(), ["a", "b"]);
    /// ```
    pub fn page_size(mut self, items: usize) -> Self {
        self.page_size = items;
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

    /// The set as one session's upstream (see `Upstream::for_caller`).
    pub(crate) fn for_caller(&self, caller: &super::token_exchange::Caller) -> Self {
        let mut bound = self.clone();
        for (_, server) in &mut bound.servers {
            *server = server.for_caller(caller);
        }
        bound
    }

    /// Whether a running set can become `next` server by server (its merger reshaped, see
    /// `Merger::reshape`) rather than by a restart of the whole set: both merge several servers
    /// and name, page and report them the same way. A set of one server is not merged, so going
    /// from one server to several (or back) restarts everything.
    pub(crate) fn reshapes_to(&self, next: &ServerSet) -> bool {
        self.servers.len() > 1
            && next.servers.len() > 1
            && self.separator == next.separator
            && self.status_file == next.status_file
            && self.page_size == next.page_size
    }

    pub(crate) fn spawn(
        &self,
        generation: u64,
        max_line: usize,
        events: super::Outlet,
    ) -> Result<UpstreamLink, UpstreamError> {
        let cursors = CursorKey::generate().map_err(|_| UpstreamError::Spawn {
            server: self.to_string(),
            cause: std::io::Error::other("no randomness for the key that seals list cursors"),
        })?;
        let (from_children, child_events) = mpsc::channel(256);
        let mut merger = Merger {
            cursors,
            walks: HashMap::new(),
            set: self.clone(),
            max_line,
            generation,
            up: Box::new(move |event| {
                let events = events.clone();
                Box::pin(async move { events.send(event).await })
            }),
            from_children,
            children: Vec::new(),
            waiting: IdMap::default(),
            gathers: HashMap::new(),
            server_requests: IdMap::default(),
            uri_owner: HashMap::new(),
            handshake: Handshake::default(),
        };
        for (index, (name, server)) in self.servers.iter().enumerate() {
            merger.children.push(ChildState::new(name, server));
            merger.start(index);
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
        let (reshape, reshapes) = mpsc::unbounded_channel();
        let task = tokio::spawn(merger.run(from_session, child_events, reshapes));
        Ok(UpstreamLink::new(outgoing, task).with_reshape(reshape))
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

/// One server of the set, in its slot. Slots are never reused nor moved: requests in flight,
/// forwarding tasks and cursors name a server by its slot, so a reshape that adds or removes
/// servers leaves the others' slots as they were.
struct ChildState {
    name: String,
    server: Upstream,
    /// Whether a reshape took the server out of the set: its slot stays, empty.
    removed: bool,
    link: Option<UpstreamLink>,
    generation: u64,
    /// Why it is down, when it is.
    down: Option<String>,
    /// While a restarted server is being handed the handshake: what waits for its answer.
    replay: Option<Replay<String>>,
}

impl ChildState {
    fn new(name: &str, server: &Upstream) -> Self {
        Self {
            name: name.to_owned(),
            server: server.clone(),
            removed: false,
            link: None,
            generation: 0,
            down: Some("not started yet".to_owned()),
            replay: None,
        }
    }
}

/// A request the merger sent a server, waiting for its answer.
struct Asked {
    /// The server it went to.
    server: usize,
    what: Waiting,
}

impl crate::exchange::Waiting for Asked {
    fn peer_id(&self) -> Option<&str> {
        match &self.what {
            Waiting::Relay { up_id } => Some(up_id),
            _ => None,
        }
    }
}

/// A request a server sent the client, waiting for the client's answer.
struct ServerRequest {
    server: usize,
    /// The id the server gave it (raw JSON).
    child_id: String,
}

impl crate::exchange::Waiting for ServerRequest {}

/// What an answer from a server is for.
enum Waiting {
    /// The session's request, answered by this one server: relay with the session's id.
    Relay { up_id: String },
    /// One part of a request sent to several servers.
    Part { gather: u64 },
    /// One upstream page of a merged list page.
    Page { walk: u64 },
    /// A request the merger made itself (a replayed handshake); the answer is only logged.
    Own,
    /// The `initialize` replayed to a restarted server: what waits for it goes on its answer.
    Replay,
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
    /// Everyone must answer; the result is `{}`.
    All,
    /// Servers tried in turn until one succeeds.
    FirstSuccess {
        method: String,
        params: Option<String>,
        untried: Vec<usize>,
    },
}

/// A merged list page being filled: upstream pages are asked for one at a time, server after
/// server, until the page is full or every server is at its end.
struct Walk {
    up_id: String,
    method: &'static str,
    /// The request's params without its cursor.
    params: Map<String, Value>,
    /// The result member holding the items.
    member: &'static str,
    /// Whether item names are prefixed with the server's name.
    prefix: bool,
    /// What to ask next: the server's index and its cursor.
    next: (usize, Option<String>),
    items: Vec<Value>,
    /// Upstream requests made for this page.
    asked: usize,
    /// Whether any server answered.
    answered: bool,
    /// The first server error, relayed when no server answered.
    error: Option<Value>,
}

struct Merger {
    /// The configured set (names in messages, separator, page size, status file); the servers
    /// themselves are in `children`, by slot.
    set: ServerSet,
    /// Seals the cursors of merged lists.
    cursors: CursorKey,
    walks: HashMap<u64, Walk>,
    max_line: usize,
    generation: u64,
    up: Up,
    from_children: mpsc::Sender<(usize, UpstreamEvent)>,
    children: Vec<ChildState>,
    /// Requests sent to servers, by the id the merger gave them (ids are the merger's own
    /// across all its servers, so the id alone names the request; gathers and walks are
    /// numbered from the same ids).
    waiting: IdMap<Asked>,
    gathers: HashMap<u64, Gather>,
    /// Requests from servers to the client, by the id the merger gave them.
    server_requests: IdMap<ServerRequest>,
    uri_owner: HashMap<String, usize>,
    /// What the session told the set, replayed to a server that is started again.
    handshake: Handshake,
}

impl Merger {
    fn name(&self, index: usize) -> &str {
        &self.children[index].name
    }

    /// The slots of the servers in the set, in order.
    fn members(&self) -> Vec<usize> {
        (0..self.children.len())
            .filter(|i| !self.children[*i].removed)
            .collect()
    }

    /// Starts server `index`; a failure leaves it down with the reason.
    fn start(&mut self, index: usize) {
        let child = &self.children[index];
        let (name, server) = (&child.name, &child.server);
        let generation = child.generation + 1;
        let (tx, mut rx) = mpsc::channel::<UpstreamEvent>(64);
        let (link, down) = match server.spawn(generation, self.max_line, super::Outlet::new(tx)) {
            Ok(link) => {
                let forward = self.from_children.clone();
                tokio::spawn(async move {
                    while let Some(event) = rx.recv().await {
                        if forward.send((index, event)).await.is_err() {
                            return;
                        }
                    }
                });
                (Some(link), None)
            }
            Err(err) => {
                tracing::warn!(server = %name, %err, "a server of the set did not start; the others go on");
                (None, Some(err.to_string()))
            }
        };
        let child = &mut self.children[index];
        child.generation = generation;
        child.link = link;
        child.down = down;
        child.replay = None;
    }

    async fn run(
        mut self,
        mut from_session: mpsc::UnboundedReceiver<Queued>,
        mut child_events: mpsc::Receiver<(usize, UpstreamEvent)>,
        mut reshapes: mpsc::UnboundedReceiver<ServerSet>,
    ) {
        loop {
            tokio::select! {
                // A reshape first: the session hands it over before it tells its client the
                // lists changed, so whatever the client sends next meets the new set.
                biased;
                Some(set) = reshapes.recv() => self.reshape(set).await,
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
        self.waiting.next_id()
    }

    /// Sends server `index` request `method` under a fresh id, remembering what it is for.
    fn ask(&mut self, index: usize, what: Waiting, method: &str, params: Option<&str>) {
        let id = self.waiting.allocate(Asked {
            server: index,
            what,
        });
        self.send_child(
            index,
            jsonrpc::request(itoa::Buffer::new().format(id), method, params),
        );
    }

    /// Makes sure server `index` runs, starting (and re-initializing) it if it died.
    fn ensure(&mut self, index: usize) -> bool {
        if self.children[index].removed {
            return false;
        }
        if self.children[index].link.is_some() {
            return true;
        }
        self.start(index);
        self.write_status();
        if self.children[index].link.is_none() {
            return false;
        }
        // The one restart of every connection (`replay.rs`): the handshake first, and what
        // else comes for this server waits for its answer.
        let id = self.next_id();
        if let Some((line, replay)) = Replay::restart(&self.handshake, id) {
            self.waiting.insert(
                id,
                Asked {
                    server: index,
                    what: Waiting::Replay,
                },
            );
            self.send_child_now(index, line);
            self.children[index].replay = Some(replay);
        }
        true
    }

    /// The restarted server `index` answered its replayed `initialize`: the rest of the
    /// handshake follows (its own subscriptions: those to resources it listed or answered
    /// for), then what waited for it.
    fn replayed(&mut self, index: usize, id: u64, outcome: Result<&str, &str>) {
        let Some(replay) = self.children[index]
            .replay
            .take_if(|replay| replay.awaits(id))
        else {
            return;
        };
        if let Err(error) = outcome {
            // Sent anyway: the server answers each request as it can.
            tracing::warn!(server = %self.name(index), %error, "a server refused the replayed handshake");
        }
        let owner = &self.uri_owner;
        let released = replay.answered(&self.handshake, outcome.is_ok(), |uri| {
            owner.get(uri) == Some(&index)
        });
        for step in released.steps {
            match step {
                Step::Notify(method) => {
                    self.send_child_now(index, jsonrpc::notification(method, None))
                }
                Step::Request { method, params } => {
                    let id = self.waiting.allocate(Asked {
                        server: index,
                        what: Waiting::Own,
                    });
                    self.send_child_now(
                        index,
                        jsonrpc::request(itoa::Buffer::new().format(id), method, Some(&params)),
                    );
                }
            }
        }
        for line in released.held {
            self.send_child_now(index, line);
        }
    }

    /// Sends server `index` one line, or holds it while the server is handed the handshake.
    fn send_child(&mut self, index: usize, line: String) {
        match &mut self.children[index].replay {
            Some(replay) => replay.hold(line),
            None => self.send_child_now(index, line),
        }
    }

    fn send_child_now(&self, index: usize, line: String) {
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
                let Some(request) = id
                    .parse::<u64>()
                    .ok()
                    .and_then(|mid| self.server_requests.remove(mid))
                else {
                    return;
                };
                let out = splice(line, &[(range_in(line, id), request.child_id.as_str())]);
                self.send_child(request.server, out);
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
                self.handshake.initialize = params.map(str::to_owned);
                let everyone = self.members();
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
                self.start_list(id, method, map).await
            }
            "logging/setLevel" => {
                self.handshake.remember(method, params);
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
                        let line = self.unknown_name(id, what, name);
                        self.send_up(line).await
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
                    let line = self.unknown_name(id, "prompt", name);
                    self.send_up(line).await;
                    return;
                }
                match reference["uri"].as_str() {
                    Some(uri) if reference["type"] == "ref/resource" => {
                        let uri = uri.to_owned();
                        self.route_uri(id, method, params, &uri);
                    }
                    _ => {
                        let line = jsonrpc::error(
                            Some(id),
                            jsonrpc::INVALID_PARAMS,
                            "completion/complete: its `ref` is neither a `ref/prompt` nor a `ref/resource` with a `uri`, so no server of this set can be picked",
                        );
                        self.send_up(line).await
                    }
                }
            }
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                self.handshake.remember(method, params);
                let uri = map.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
                self.route_uri(id, method, params, &uri);
            }
            _ => self.route_other(id, method, &map).await,
        }
    }

    /// The error for a tool or prompt name no server of the set has.
    fn unknown_name(&self, id: &str, what: &str, name: &str) -> String {
        jsonrpc::error(
            Some(id),
            jsonrpc::INVALID_PARAMS,
            &format!(
                "unknown {what} `{name}`: through this proxy {what}s are named `SERVER{}{what}`, with SERVER one of {}",
                self.set.separator,
                self.set.names().join(", ")
            ),
        )
    }

    /// Routes a method the merger does not know (see the module docs): by a `name` with a
    /// server's prefix (removed on the way), else by a `uri` a server listed, else refused.
    async fn route_other(&mut self, id: &str, method: &str, map: &Map<String, Value>) {
        if let Some(name) = map.get("name").and_then(Value::as_str)
            && let Some((index, inner)) = self.split(name)
        {
            let mut map = map.clone();
            map.insert("name".into(), inner.into());
            self.relay(index, id, method, &Value::Object(map).to_string());
            return;
        }
        if let Some(index) = map
            .get("uri")
            .and_then(Value::as_str)
            .and_then(|uri| self.uri_owner.get(uri))
            .copied()
        {
            self.relay(index, id, method, &Value::Object(map.clone()).to_string());
            return;
        }
        let line = jsonrpc::error(
            Some(id),
            jsonrpc::METHOD_NOT_FOUND,
            &format!(
                "method `{method}` is not routed: several servers are behind this proxy ({}) and its params name none of them (a `name` that starts with `SERVER{}` or the `uri` of a resource a server listed picks one)",
                self.set.names().join(", "),
                self.set.separator,
            ),
        );
        self.send_up(line).await;
    }

    // ------------------------------------------------------------ merged lists

    /// Starts a merged list page where the request's cursor says (the first server's first page
    /// without one).
    async fn start_list(&mut self, id: &str, method: &str, mut params: Map<String, Value>) {
        let (method, member, prefix) = match method {
            "tools/list" => ("tools/list", "tools", true),
            "prompts/list" => ("prompts/list", "prompts", true),
            "resources/list" => ("resources/list", "resources", false),
            _ => ("resources/templates/list", "resourceTemplates", false),
        };
        let next = match params.remove("cursor") {
            None | Some(Value::Null) => Ok((0, None)),
            Some(Value::String(cursor)) => self.open_cursor(method, &cursor),
            Some(other) => Err(format!(
                "invalid cursor {other} for {method}: a cursor is a string"
            )),
        };
        let next = match next {
            Ok(next) => next,
            Err(message) => {
                let line = jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, &message);
                return self.send_up(line).await;
            }
        };
        let walk = Walk {
            up_id: id.to_owned(),
            method,
            params,
            member,
            prefix,
            next,
            items: Vec::new(),
            asked: 0,
            answered: false,
            error: None,
        };
        let walk_id = self.next_id();
        self.walk_on(walk_id, walk).await;
    }

    /// Where a cursor the client sent says the list goes on.
    fn open_cursor(&self, method: &str, cursor: &str) -> Result<(usize, Option<String>), String> {
        let position = self
            .cursors
            .open(method, cursor)
            .map_err(|err| err.to_string())?;
        if self
            .children
            .get(position.server)
            .is_none_or(|child| child.removed)
        {
            // Sealed by this set, so only for a server a live change removed since.
            return Err(format!(
                "invalid cursor for {method}: its server is no longer in this set (the configuration changed; list again from the start)"
            ));
        }
        Ok((position.server, position.cursor.map(|c| c.into_owned())))
    }

    /// Asks for the walk's next upstream page, or answers the session when the page is full or
    /// every server is at its end. Servers that are down are passed over.
    async fn walk_on(&mut self, walk_id: u64, mut walk: Walk) {
        loop {
            let (index, cursor) = walk.next.clone();
            if index >= self.children.len() {
                return self.finish_walk(walk, false).await;
            }
            if walk.asked > 0
                && (walk.items.len() >= self.set.page_size || walk.asked >= MAX_ASKS_PER_PAGE)
            {
                return self.finish_walk(walk, true).await;
            }
            if self.children[index].removed {
                walk.next = (index + 1, None);
                continue;
            }
            if !self.ensure(index) {
                tracing::warn!(server = %self.name(index), "a server of the set is down; its items are left out of the list");
                walk.next = (index + 1, None);
                continue;
            }
            let mut params = walk.params.clone();
            if let Some(cursor) = cursor {
                params.insert("cursor".into(), cursor.into());
            }
            self.ask(
                index,
                Waiting::Page { walk: walk_id },
                walk.method,
                Some(&Value::Object(params).to_string()),
            );
            walk.asked += 1;
            self.walks.insert(walk_id, walk);
            return;
        }
    }

    /// A server's answer to one of a walk's upstream pages.
    async fn on_page(&mut self, walk_id: u64, index: usize, answer: Result<Value, Value>) {
        let Some(mut walk) = self.walks.remove(&walk_id) else {
            return;
        };
        match answer {
            Ok(result) => {
                walk.answered = true;
                let items = match result.get(walk.member) {
                    Some(Value::Array(items)) => items.as_slice(),
                    _ => &[],
                };
                for item in items {
                    let mut item = item.clone();
                    if walk.prefix
                        && let Some(name) = item.get("name").and_then(Value::as_str)
                    {
                        let named = format!("{}{}{name}", self.name(index), self.set.separator);
                        item["name"] = named.into();
                    }
                    // Templates too: a completion's `ref/resource` names one.
                    for key in ["uri", "uriTemplate"] {
                        if let Some(uri) = item.get(key).and_then(Value::as_str) {
                            self.uri_owner.insert(uri.to_owned(), index);
                        }
                    }
                    walk.items.push(item);
                }
                walk.next = match result.get("nextCursor").and_then(Value::as_str) {
                    Some(cursor) => (index, Some(cursor.to_owned())),
                    None => (index + 1, None),
                };
            }
            Err(error) => {
                tracing::warn!(server = %self.name(index), %error, "a server of the set failed its page of {}; the list goes on with the next server", walk.method);
                walk.error.get_or_insert(error);
                walk.next = (index + 1, None);
            }
        }
        self.walk_on(walk_id, walk).await;
    }

    /// Answers the session with the walk's page; `more`: with a cursor to where it stopped.
    async fn finish_walk(&mut self, walk: Walk, more: bool) {
        let line = if !walk.answered {
            match walk.error {
                Some(error) => jsonrpc::error_response(&walk.up_id, &error.to_string()),
                None => jsonrpc::error(
                    Some(&walk.up_id),
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    &format!("no server answered ({})", self.set.names().join(", ")),
                ),
            }
        } else {
            let mut result = Map::new();
            result.insert(walk.member.to_owned(), Value::Array(walk.items));
            if more {
                let (index, cursor) = &walk.next;
                let position = Position {
                    server: *index,
                    cursor: cursor.as_deref().map(Into::into),
                };
                let sealed = self.cursors.seal(walk.method, &position);
                result.insert("nextCursor".to_owned(), sealed.into());
            }
            jsonrpc::result(&walk.up_id, &Value::Object(result).to_string())
        };
        self.send_up(line).await;
    }

    fn live_or_restart(&mut self) -> Vec<usize> {
        for index in 0..self.children.len() {
            self.ensure(index);
        }
        self.live()
    }

    /// The server a prefixed name belongs to, and the name without the prefix.
    fn split<'n>(&self, name: &'n str) -> Option<(usize, &'n str)> {
        self.children
            .iter()
            .enumerate()
            .filter(|(_, child)| !child.removed)
            .find_map(|(index, child)| {
                name.strip_prefix(child.name.as_str())
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
        let what = Waiting::Relay {
            up_id: up_id.to_owned(),
        };
        self.ask(index, what, method, Some(params));
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
        self.ask(index, Waiting::Part { gather }, &method, params.as_deref());
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
            self.ask(index, Waiting::Part { gather }, method, params);
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
            "notifications/initialized" => self.handshake.remember_notification(method),
            "notifications/cancelled" => {
                let request = params
                    .and_then(|p| serde_json::from_str::<Map<String, Value>>(p).ok())
                    .and_then(|p| p.get("requestId").cloned());
                let Some(request) = request else { return };
                let up_id = request.to_string();
                let mut targets: Vec<(usize, u64)> = self
                    .waiting
                    .iter()
                    .filter(|(_, asked)| match &asked.what {
                        Waiting::Relay { up_id: id } => *id == up_id,
                        Waiting::Part { gather } => {
                            self.gathers.get(gather).is_some_and(|g| g.up_id == up_id)
                        }
                        Waiting::Page { walk } => {
                            self.walks.get(walk).is_some_and(|w| w.up_id == up_id)
                        }
                        Waiting::Own | Waiting::Replay => false,
                    })
                    .map(|(id, asked)| (asked.server, *id))
                    .collect();
                targets.sort_unstable();
                for (index, id) in targets {
                    self.waiting.remove(id);
                    let params = json!({"requestId": id, "reason": "cancelled by the client"});
                    self.send_child(
                        index,
                        jsonrpc::notification(method, Some(&params.to_string())),
                    );
                }
                self.gathers.retain(|_, g| g.up_id != up_id);
                self.walks.retain(|_, w| w.up_id != up_id);
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
            // A removed server's generation moved on when it was stopped, so what it still
            // says is dropped here too.
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
            // A set allows no cut-through (its merger reads every answer), so its servers'
            // readers stream nothing; dropping one would drop its answer.
            UpstreamEvent::Streamed { .. } => {}
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
                let mid = self.server_requests.allocate(ServerRequest {
                    server: index,
                    child_id: id.to_owned(),
                });
                let out = splice(
                    line,
                    &[(range_in(line, id), itoa::Buffer::new().format(mid))],
                );
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
                        .find(|(_, r)| r.server == index && r.child_id == child_id)
                        .map(|(mid, _)| *mid);
                    let Some(mid) = found else { return };
                    self.server_requests.remove(mid);
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
        // Only the server it was sent to answers a request: an id another server echoes is
        // not its to answer.
        let Some(Asked { what, .. }) = id
            .parse::<u64>()
            .ok()
            .filter(|id| self.waiting.get(*id).is_some_and(|a| a.server == index))
            .and_then(|id| self.waiting.remove(id))
        else {
            return;
        };
        match what {
            Waiting::Relay { up_id } => {
                let out = splice(line, &[(range_in(line, id), up_id.as_str())]);
                self.send_up(out).await;
            }
            Waiting::Replay => {
                if let Ok(id) = id.parse::<u64>() {
                    self.replayed(index, id, outcome);
                }
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
            Waiting::Page { walk } => {
                let parsed = match outcome {
                    Ok(result) => Ok(serde_json::from_str(result).unwrap_or(Value::Null)),
                    Err(error) => Err(serde_json::from_str(error).unwrap_or(Value::Null)),
                };
                self.on_page(walk, index, parsed).await;
            }
        }
    }

    async fn on_part(&mut self, gather_id: u64, index: usize, answer: Result<Value, Value>) {
        let Some(gather) = self.gathers.get_mut(&gather_id) else {
            return;
        };
        gather.outstanding = gather.outstanding.saturating_sub(1);
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
        // The server that took a subscription to a resource nobody listed owns it: a restart
        // of that server replays the subscription to it.
        let subscribed = match &gather.kind {
            GatherKind::FirstSuccess { method, params, .. }
                if answer.is_ok() && method == "resources/subscribe" =>
            {
                params
                    .as_deref()
                    .and_then(|p| serde_json::from_str::<Map<String, Value>>(p).ok())
                    .and_then(|p| p.get("uri").and_then(Value::as_str).map(str::to_owned))
            }
            _ => None,
        };
        gather.answers.push((index, answer));
        let done = gather.outstanding == 0;
        if let Some(uri) = subscribed {
            self.uri_owner.insert(uri, index);
        }
        if done && let Some(done) = self.gathers.remove(&gather_id) {
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
        // What waited for its handshake fails below with the rest of its requests.
        self.children[index].replay = None;
        self.children[index].down = Some(reason.clone());
        self.write_status();
        self.fail_pending(
            index,
            &format!("{reason} before answering; the next request starts it again"),
        )
        .await;
    }

    /// Fails what waits on server `index` with `message`: the session's requests get it as
    /// their error, gathers and list pages go on without the server.
    async fn fail_pending(&mut self, index: usize, message: &str) {
        let mut ids: Vec<u64> = self
            .waiting
            .iter()
            .filter(|(_, asked)| asked.server == index)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        let failed: Vec<Waiting> = ids
            .into_iter()
            .filter_map(|id| self.waiting.remove(id).map(|asked| asked.what))
            .collect();
        for waiting in failed {
            let error = json!({
                "code": jsonrpc::UPSTREAM_UNAVAILABLE,
                "message": message,
            });
            match waiting {
                Waiting::Relay { up_id } => {
                    self.send_up(jsonrpc::error_response(&up_id, &error.to_string()))
                        .await
                }
                Waiting::Part { gather } => self.on_part(gather, index, Err(error)).await,
                Waiting::Page { walk } => self.on_page(walk, index, Err(error)).await,
                Waiting::Own | Waiting::Replay => {}
            }
        }
        self.server_requests.retain(|_, r| r.server != index);
    }

    // ------------------------------------------------------------ live changes

    /// Becomes `next` server by server (a live change, `crate::live`): servers no longer named
    /// are stopped, servers whose configuration (command, env, URL) changed are stopped and
    /// started again with the handshake replayed, new servers are started (and handed the
    /// handshake) in new slots; what waits on a stopped server fails with an error saying so.
    /// Servers that did not change, and their requests in flight, are left alone.
    async fn reshape(&mut self, next: ServerSet) {
        for index in self.members() {
            let name = self.children[index].name.clone();
            let configured = next.servers.iter().find(|(n, _)| *n == name);
            match configured {
                None => {
                    tracing::info!(server = %name, "the configuration changed: a server of the set is removed");
                    self.stop(index, "was removed (the configuration changed)")
                        .await;
                    self.children[index].removed = true;
                    self.uri_owner.retain(|_, owner| *owner != index);
                }
                Some((_, server)) if *server != self.children[index].server => {
                    tracing::info!(server = %name, "the configuration changed: a server of the set restarts");
                    let server = server.clone();
                    self.stop(index, "was restarted (the configuration changed)")
                        .await;
                    self.children[index].server = server;
                    self.ensure(index);
                }
                Some(_) => {}
            }
        }
        for (name, server) in &next.servers {
            let present = self
                .children
                .iter()
                .any(|child| !child.removed && child.name == *name);
            if !present {
                tracing::info!(server = %name, "the configuration changed: a server joins the set");
                self.children.push(ChildState::new(name, server));
                self.ensure(self.children.len() - 1);
            }
        }
        self.set = next;
        self.write_status();
    }

    /// Stops server `index` for a live change: its later output is dropped (its generation
    /// moves on) and what waited on it fails with `server NAME {why}`.
    async fn stop(&mut self, index: usize, why: &str) {
        let child = &mut self.children[index];
        child.generation += 1;
        let reason = format!("server `{}` {why}", child.name);
        child.down = Some(reason.clone());
        child.replay = None;
        if let Some(link) = child.link.take() {
            tokio::spawn(link.shut_down(Duration::from_secs(2)));
        }
        self.fail_pending(index, &format!("{reason} before answering"))
            .await;
    }

    /// Writes every server's state to the status file, if there is one.
    fn write_status(&self) {
        let Some(path) = &self.set.status_file else {
            return;
        };
        let states: Vec<Value> = self
            .children
            .iter()
            .filter(|child| !child.removed)
            .map(|child| {
                let (name, command) = (&child.name, child.server.to_string());
                match &child.down {
                    None => json!({"name": name, "command": command, "state": "running"}),
                    Some(reason) => {
                        json!({"name": name, "command": command, "state": "down", "reason": reason})
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::StdioServer;

    fn set(names: &[&str]) -> ServerSet {
        names.iter().fold(ServerSet::new(), |set, name| {
            set.server(*name, StdioServer::new(format!("server-{name}")))
        })
    }

    #[test]
    fn only_sets_of_several_servers_named_alike_reshape() {
        assert!(set(&["a", "b"]).reshapes_to(&set(&["a", "c", "d"])));
        assert!(
            !set(&["a"]).reshapes_to(&set(&["a", "b"])),
            "one to several"
        );
        assert!(
            !set(&["a", "b"]).reshapes_to(&set(&["a"])),
            "several to one"
        );
        assert!(!set(&["a", "b"]).reshapes_to(&set(&["a", "b"]).separator(".")));
        assert!(!set(&["a", "b"]).reshapes_to(&set(&["a", "b"]).page_size(5)));
    }
}
