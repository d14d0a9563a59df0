//! One client connection through the proxy to its upstream: the forwarding event loop.
//!
//! A session owns everything that is per connection: the id and progress-token maps, the
//! handshake to replay when the upstream restarts, and the upstream link itself. All of it lives
//! in one task that handles one event at a time ([`Event`]), so there are no locks on the path.
//! Readers feed the task through bounded channels (back-pressure on a flooding peer); the task
//! writes through queues to writer tasks, so it never waits on a slow peer and a full pipe in
//! one direction can never deadlock the other. Those queues count their bytes
//! ([`LineQueue`]): when more than [`SessionOptions::client_queue_bytes`] waits for the client,
//! the loop stops reading the upstream until the client catches up (the upstream is slowed to
//! the client's pace, as it would be without the proxy; nothing is dropped), and a client that
//! lets that plus [`SessionOptions::max_message_bytes`] pile up (it sends but does not read)
//! ends its session. When more than [`SessionOptions::upstream_queue_bytes`] waits for the
//! upstream, requests are refused with [`jsonrpc::UPSTREAM_BACKLOG`].
//!
//! The path of a request, start to end:
//! 1. [`Session::on_client_line`] reads the envelope ([`Message::parse`]), gives the request a
//!    fresh upstream id, swaps a progress token for that id if the client sent one, and splices
//!    both into the original line, which goes to the upstream otherwise untouched.
//! 2. [`Session::on_upstream_line`] finds the pending entry by the upstream id and splices the
//!    client's id back into the response line.
//!
//! Requests the upstream sends (sampling, elicitation, roots, ping) travel the mirror path with
//! ids the proxy allocates toward the client.
//!
//! Request ids in both directions and the handshake memory are [`crate::exchange`]'s (the HTTP
//! front, the chain's upstream end and a `ServerSet` use the same types). Beside this file, one
//! part each: `hooked` runs the chain's tasks; `upstream_end`
//! lets those tasks write to the upstream themselves and get its answers straight from the
//! upstream's reader; `client_end` lets them write their final answers to the client
//! themselves (a hooked call crosses 5 tasks or channels on stdio, see `upstream_end`);
//! `lifecycle` starts a dead upstream again
//! and replays the handshake to it; `upstream_state` is the upstream as the session holds it
//! (down, starting with what waits for it in one queue, or up); `handshake_memory` keeps what
//! a restarted upstream is told again; `bridge` translates when a 2026-07-28 client meets a
//! handshake-only upstream. When both sides speak the same era nothing is translated. Which
//! path a request takes (refused, raw, hooks) is the chain's outermost step
//! (`Chain::enter`), decided once.
//! `reload` moves the session to a new configuration when the proxy follows live changes
//! (`crate::live`); `rounds` answers a 2026-07-28 client's hooked call with input rounds when a
//! hook asks the client something (`ctx.llm()`).

mod bridge;
mod client_end;
mod first_step;
mod handshake_memory;
mod hooked;
mod lifecycle;
mod reload;
mod rounds;
mod shared;
mod upstream_end;
mod upstream_state;

pub(crate) use client_end::ClientEnd;
pub(crate) use upstream_end::UpstreamEnd;
use upstream_state::UpstreamState;

use crate::exchange::{Handshake, IdMap, Waiting, swap_progress_token};

use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use bridge::ClientEra;

use std::sync::Arc;

use tokio::sync::oneshot;

use rmcp::model::{ErrorCode, ErrorData};

use crate::auth::Identity;
use crate::chain::{Chain, Path};
use crate::context::{LoopCall, RawOutcome, SessionLink, SessionScope};
use crate::era;
use crate::jsonrpc::{self, Message, range_in, splice};
use crate::model::{HookId, Outcome};
use crate::project::Project;
use crate::transport::Frame;
use crate::transport::outbound::Belongs;
use crate::transport::queue::LineQueue;
use crate::upstream::{AnswerTail, Order, Outlet, Upstream, UpstreamEvent};

/// Settings of a proxy session.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionOptions {
    /// How long a request may wait for the upstream's answer before the client gets
    /// [`jsonrpc::UPSTREAM_TIMEOUT`] and the upstream a cancellation. Each progress notification
    /// for the request starts the wait again. `None` waits for ever.
    pub request_timeout: Option<Duration>,
    /// The largest message accepted from either side, in bytes.
    pub max_message_bytes: usize,
    /// How long the upstream may take to exit after its stdin is closed before it is killed.
    pub shutdown_grace: Duration,
    /// How long requests already sent may still be answered after a stdio client closed its
    /// input (`printf '...' | mcpctl proxy ...`): as a server would, the proxy answers what
    /// it was asked before it exits. What is still unanswered then is cancelled upstream and
    /// named in a warning. Default 10 s (a request's own timeout may end it sooner).
    pub input_closed_grace: Duration,
    /// How many bytes of messages may wait for the client (not yet read by it) before the
    /// proxy stops reading the upstream until the client catches up. A client that lets this
    /// plus `max_message_bytes` pile up ends its session with an error. Default 16 MiB.
    pub client_queue_bytes: usize,
    /// How many bytes of messages may wait for the upstream to read them before the proxy
    /// refuses further requests with [`jsonrpc::UPSTREAM_BACKLOG`] (and drops client
    /// notifications other than cancellations, with a warning). Default 16 MiB.
    pub upstream_queue_bytes: usize,
    /// Told when each client request starts and ends, and may add `_meta` entries to what is
    /// forwarded for it (trace context): [`RequestTap`](crate::request_tap::RequestTap).
    /// `None` (the default): nothing is tapped and nothing changes.
    pub request_tap: Option<Arc<dyn crate::request_tap::RequestTap>>,
    /// Follow live changes of the proxy's configuration ([`Live`](crate::live::Live)): new
    /// servers, routes and models without a restart. `None` (the default): the configuration
    /// is fixed.
    pub live: Option<crate::live::Live>,

    /// The key every `requestState` the proxy hands a client is sealed with
    /// ([`crate::sealed_state`]). Replicas that serve the same clients share one
    /// ([`StateKey::from_file`](crate::sealed_state::StateKey::from_file)); the default is
    /// random per process.
    pub state_key: crate::sealed_state::StateKey,
    /// How long a `requestState` (an input round) stays valid: a client that does not retry
    /// within it gets invalid params, and a hook waiting for its answer gets an error then.
    /// Default 300 s.
    pub request_state_ttl: Duration,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            request_timeout: Some(Duration::from_secs(300)),
            max_message_bytes: 64 * 1024 * 1024,
            shutdown_grace: Duration::from_secs(2),
            input_closed_grace: Duration::from_secs(10),
            client_queue_bytes: 16 * 1024 * 1024,
            upstream_queue_bytes: 16 * 1024 * 1024,
            request_tap: None,
            live: None,

            state_key: crate::sealed_state::StateKey::process(),
            request_state_ttl: Duration::from_secs(300),
        }
    }
}

/// How a session ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The client closed its side (or the session was ended from outside).
    ClientClosed,
    /// The client let more pile up than the session may hold for it (it stopped reading); how
    /// much, in words.
    ClientNotReading(String),
}

/// What the session loop reacts to from the client's side (the upstream's events come on a
/// channel of their own, which the loop stops reading while the client falls behind).
#[derive(Debug)]
pub(crate) enum Event {
    /// A frame from the client.
    Client(Frame),
    /// The client closed its side, or reading it failed.
    ClientClosed,
    /// A stdio client's input ended: it sends nothing more but may still read what it asked
    /// for, so requests in flight are answered first (within `input_closed_grace`).
    InputEnded,
    /// Another replica's client changed the session's log level or subscriptions (announced
    /// through the shared store): tell this replica's upstream (`shared`).
    Handshake(crate::shared_store::handshake::News),
}

/// A request sent upstream whose answer has not arrived.
#[derive(Debug)]
enum Pending {
    /// A client's request: the answer goes back to the client under its own id.
    Client {
        id: Box<str>,
        method: Box<str>,
        progress_token: Option<Box<str>>,
        deadline: Option<Instant>,
        /// A bridged client's call: its tool, prompt or resource URI, which the retry of an
        /// input round it gets must name too.
        target: Option<Box<str>>,
    },
    /// A request a hook sent (through `next` or `ctx.upstream()`): the answer goes to the hook.
    Hook {
        /// The hooked client request it serves (0: none).
        call: u64,
        method: Box<str>,
        progress_token: Option<Box<str>>,
        deadline: Option<Instant>,
        reply: oneshot::Sender<RawOutcome>,
    },
    /// A request the proxy made itself; the answer is consumed here.
    Proxy(ProxyRequest),
    /// A bridged client's call waiting for the client's answers to an input round.
    Suspended {
        /// The `requestState` the client was given.
        state: String,
        deadline: Option<Instant>,
    },
}

impl Waiting for Pending {
    fn peer_id(&self) -> Option<&str> {
        match self {
            Pending::Client { id, .. } => Some(id),
            _ => None,
        }
    }

    fn progress_token(&self) -> Option<&str> {
        match self {
            Pending::Client { progress_token, .. } | Pending::Hook { progress_token, .. } => {
                progress_token.as_deref()
            }
            _ => None,
        }
    }

    fn deadline(&self) -> Option<Instant> {
        match self {
            Pending::Client { deadline, .. }
            | Pending::Hook { deadline, .. }
            | Pending::Suspended { deadline, .. } => *deadline,
            Pending::Proxy(_) => None,
        }
    }

    fn set_deadline(&mut self, new: Instant) {
        // Progress keeps a request alive; a suspended call waits for the client, not progress.
        if let Pending::Client { deadline, .. } | Pending::Hook { deadline, .. } = self {
            *deadline = Some(new);
        }
    }
}

/// Why the proxy itself sent a request upstream.
#[derive(Debug)]
enum ProxyRequest {
    /// `initialize` replayed after a restart.
    ReplayInitialize,
    /// `logging/setLevel` or `resources/subscribe` replayed after a restart, or a log level a
    /// stateless client asked for in its envelope.
    SetState,
    /// `server/discover` sent to learn whether the upstream speaks 2026-07-28, before the first
    /// request of a stateless client. Holds the client envelope's params.
    Probe { request_params: String },
    /// `initialize` sent on behalf of a stateless client to an upstream that only has the
    /// handshake.
    BridgeInitialize { params: String },
}

/// A request from the upstream to the client, waiting for the client's answer.
#[derive(Debug)]
struct UpstreamRequest {
    upstream_id: Box<str>,
    progress_token: Option<Box<str>>,
    /// Set when a hook asked the client (`ctx.downstream().request` or `on_server_request`'s
    /// `next`): the answer goes to the hook, not upstream.
    hook: Option<oneshot::Sender<RawOutcome>>,
}

impl Waiting for UpstreamRequest {
    fn peer_id(&self) -> Option<&str> {
        // One a hook sent the client has no upstream id.
        self.hook.is_none().then_some(&*self.upstream_id)
    }

    fn progress_token(&self) -> Option<&str> {
        self.progress_token.as_deref()
    }
}

pub(crate) struct Session {
    server: Upstream,
    options: SessionOptions,
    /// Where every start of the upstream reports.
    upstream_events: mpsc::Sender<UpstreamEvent>,
    upstream_inbox: Option<mpsc::Receiver<UpstreamEvent>>,
    to_client: LineQueue,
    upstream: UpstreamState,
    generation: u64,
    /// Shared with hook tasks, which number their upstream requests themselves and, while
    /// [`Session::direct`] holds, write them to the upstream directly.
    upstream_end: UpstreamEnd,
    /// Whether hooks may write to the upstream now (what `upstream_end` was last told).
    direct: bool,
    /// Shared with hook tasks, which write their final answers to the client themselves while
    /// it is open (`client_end`); whether it is, as last told.
    client_end: ClientEnd,
    client_direct: bool,
    /// How far the loop has handled what the upstream's outlet sent it: answers skip the loop
    /// only when it has caught up (`crate::upstream::Outlet`).
    order: Arc<Order>,
    chain: Arc<Chain>,
    scope: Arc<SessionScope>,
    calls: Option<mpsc::UnboundedReceiver<LoopCall>>,
    hooks: hooked::Hooked,
    /// Requests sent upstream, by upstream id (numbered from the ids hook tasks share).
    pending: IdMap<Pending>,
    /// Requests the upstream sent the client, by the id the client knows them by.
    upstream_requests: IdMap<UpstreamRequest>,
    handshake: Handshake,
    era: ClientEra,
    /// Input rounds of hooked calls and the questions hooks put to the client.
    hook_rounds: rounds::HookRounds,
    /// Lines from the upstream that were not JSON-RPC, dropped (logged sparingly).
    malformed_from_upstream: u64,
    /// Client notifications dropped because the upstream was not reading.
    dropped_for_backlog: u64,
    /// The client's requests in flight that the request tap follows.
    taps: crate::request_tap::Taps,
    /// Live changes of the configuration, when the proxy follows them (`session/reload.rs`).
    live: Option<crate::live::Follower>,
    /// Told of every change of `handshake` when a shared store keeps the session (`shared`).
    handshake_tap: Option<tokio::sync::watch::Sender<crate::shared_store::HandshakeRecord>>,
    /// Each handshake change the client makes here, for the store to number (`shared`).
    handshake_changes: Option<shared::HandshakeChanges>,
    /// Set for a session restored from the shared store: its `on_session_start` hooks ran on
    /// the replica that created it (`shared`).
    started_elsewhere: bool,
}

impl Session {
    /// Who the session acts as now: the HTTP front hands it each request's identity.
    pub(crate) fn identity(&self) -> Arc<crate::auth::CurrentIdentity> {
        self.scope.identity.clone()
    }

    /// Starts the upstream and returns the session ready to run.
    pub(crate) fn start(
        server: Upstream,
        options: SessionOptions,
        to_client: LineQueue,
        chain: Arc<Chain>,
        project: Option<Arc<Project>>,
        identity: Identity,
    ) -> Result<Self, crate::error::UpstreamError> {
        let (upstream_events, upstream_inbox) = mpsc::channel(256);
        let upstream_end = UpstreamEnd::new(options.request_timeout, options.upstream_queue_bytes)
            .through_loop(options.request_tap.is_some());
        let order = Arc::new(Order::default());
        let outlet = Outlet::tapped(
            upstream_events.clone(),
            Arc::new(upstream_end.clone()),
            order.clone(),
        );
        let link = server.spawn(1, options.max_message_bytes, outlet)?;
        let client_end = ClientEnd::new(to_client.clone());
        let pending = IdMap::new(upstream_end.ids().clone());
        let (calls_tx, calls) = mpsc::unbounded_channel();
        let scope = Arc::new(SessionScope::new(
            hooked::new_session_id(),
            identity,
            chain.clone(),
            SessionLink {
                calls: calls_tx,
                to_client: to_client.clone(),
                upstream: Arc::new(upstream_end.clone()),
            },
            project,
        ));
        let live = options.live.as_ref().map(|live| live.follow(&server));
        Ok(Self {
            live,
            taps: crate::request_tap::Taps::new(options.request_tap.clone()),
            server,
            options,
            upstream_events,
            upstream_inbox: Some(upstream_inbox),
            to_client,
            upstream: UpstreamState::Up(link),
            generation: 1,
            upstream_end,
            direct: false,
            client_end,
            client_direct: false,
            order,
            chain,
            scope,
            calls: Some(calls),
            hooks: hooked::Hooked::default(),
            pending,
            upstream_requests: IdMap::default(),
            handshake: Handshake::default(),
            era: ClientEra::Unknown,
            hook_rounds: rounds::HookRounds::default(),
            malformed_from_upstream: 0,
            dropped_for_backlog: 0,
            handshake_tap: None,
            handshake_changes: None,
            started_elsewhere: false,
        })
    }

    /// Runs until the client closes (or falls too far behind), then cancels what is still
    /// pending upstream and shuts the upstream down.
    pub(crate) async fn run(mut self, mut inbox: mpsc::Receiver<Event>) -> Ended {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (Some(mut calls), Some(mut upstream)) = (self.calls.take(), self.upstream_inbox.take())
        else {
            return Ended::ClientClosed;
        };
        let mut live = self.live.take();
        let backlog = self.to_client.gauge().clone();
        // Past this the client is not just slow: the session cannot hold more for it.
        let most = backlog
            .limit()
            .saturating_add(self.options.max_message_bytes);
        self.start_session_hooks();
        // Set once a stdio client's input ended with requests in flight: until then they
        // may still be answered.
        let mut draining: Option<tokio::time::Instant> = None;
        let ended = loop {
            if draining.is_some() && !self.requests_in_flight() {
                break Ended::ClientClosed;
            }
            self.hooks.forget_answered();
            // Hooks' calls first: a notification a hook let through is relayed before the
            // client's next message.
            while let Ok(call) = calls.try_recv() {
                self.on_loop_call(call);
            }
            self.sync_direct();
            let queued = backlog.queued();
            if queued > most {
                break Ended::ClientNotReading(format!(
                    "{queued} bytes of messages wait for it, over the session's limit of {most} \
                     bytes; the session ended"
                ));
            }
            // Client and upstream are served fairly: a flood from either side cannot starve
            // the other. While the client is behind, the upstream is not read (it waits, as it
            // would for a slow client without the proxy).
            let behind = backlog.over();
            tokio::select! {
                Some(call) = calls.recv() => self.on_loop_call(call),
                event = inbox.recv(), if draining.is_none() => match event {
                    Some(Event::Client(frame)) => {
                        // What hooks asked of the loop comes before the client's next
                        // message (a call that answered the client itself and whose id the
                        // client reuses at once is forgotten by `settle`).
                        while let Ok(call) = calls.try_recv() {
                            self.on_loop_call(call);
                        }
                        self.on_client_frame(frame)
                    }
                    Some(Event::InputEnded) if self.requests_in_flight() => {
                        tracing::debug!("the client's input ended; answering what is in flight first");
                        draining = Some(tokio::time::Instant::now() + self.options.input_closed_grace);
                    }
                    Some(Event::Handshake(news)) => self.take_handshake(news),
                    Some(Event::ClientClosed | Event::InputEnded) | None => break Ended::ClientClosed,
                },
                _ = tokio::time::sleep_until(draining.unwrap_or_else(tokio::time::Instant::now)), if draining.is_some() => {
                    self.warn_unanswered();
                    break Ended::ClientClosed;
                }
                Some(event) = upstream.recv(), if !behind => {
                    match event {
                        UpstreamEvent::Line { generation, line } => {
                            if generation == self.generation {
                                self.on_upstream_line(&line, None);
                            }
                        }
                        UpstreamEvent::LineFor { generation, line, request } => {
                            if generation == self.generation {
                                self.on_upstream_line(&line, Some(&request));
                            }
                        }
                        UpstreamEvent::Streamed { generation, uid, head, tail } => {
                            if generation == self.generation {
                                self.on_upstream_streamed(uid, head, tail);
                            }
                        }
                        UpstreamEvent::Closed { generation, how } => {
                            if generation == self.generation {
                                self.on_upstream_closed(&how);
                            }
                        }
                    }
                    self.order.handled_one();
                }
                _ = backlog.drained(), if behind => {}
                reload = crate::live::next(&mut live) => self.on_reload(reload),
                _ = tick.tick(), if self.options.request_timeout.is_some() => self.expire(Instant::now()),
            }
        };
        match &ended {
            Ended::ClientClosed => tracing::debug!("client closed; shutting the upstream down"),
            Ended::ClientNotReading(reason) => {
                tracing::error!("the client stopped reading: {reason}")
            }
        }
        // Hooks can no longer reach the loop: their calls fail at once instead of waiting.
        drop(calls);
        self.cancel_pending("the client went away");
        self.end_session().await;
        let grace = self.options.shutdown_grace;
        match std::mem::replace(
            &mut self.upstream,
            UpstreamState::Down {
                reason: "the session ended".to_owned(),
            },
        ) {
            UpstreamState::Up(link) | UpstreamState::Starting { link, .. } => {
                link.shut_down(grace).await
            }
            UpstreamState::Down { .. } => {}
        }
        ended
    }

    /// Whether a request sent upstream (by the client, or by a hook) still waits for its
    /// answer, or a hooked request has not answered the client yet.
    fn requests_in_flight(&self) -> bool {
        self.pending
            .values()
            .any(|p| matches!(p, Pending::Client { .. } | Pending::Hook { .. }))
            || self.upstream_end.any_waiting()
            || self.hooks.answering()
    }

    /// Hooks write to the upstream directly exactly while nothing of their requests needs the
    /// loop: the upstream is up (no replay, no probe held) and the client's era is settled and
    /// not bridged. Leaving that state is [`Session::stop_direct`]'s job, at the moment it happens.
    fn sync_direct(&mut self) {
        let client = matches!(self.era, ClientEra::Same)
            && self.options.request_tap.is_none()
            && !self.chain.observed()
            && !self.client_is_stateless();
        if client != self.client_direct {
            self.client_end.set_open(client);
            self.client_direct = client;
        }
        let wanted =
            matches!(self.era, ClientEra::Same) && matches!(self.upstream, UpstreamState::Up(_));
        if wanted == self.direct {
            return;
        }
        if let (true, UpstreamState::Up(link)) = (wanted, &self.upstream) {
            self.upstream_end.set_writer(Some(link.queue()));
            self.direct = true;
        }
    }

    /// Hooks may no longer write to the upstream directly; what they wrote and still await is
    /// returned, for the caller to fail.
    fn stop_direct(&mut self) -> Vec<(u64, upstream_end::Waiter)> {
        self.direct = false;
        self.upstream_end.set_writer(None)
    }

    /// Names the client's requests that had no answer when the input-closed grace ran out.
    fn warn_unanswered(&self) {
        let mut unanswered: Vec<String> = self
            .pending
            .values()
            .filter_map(|p| match p {
                Pending::Client { id, method, .. } => Some(format!("`{method}` (id {id})")),
                _ => None,
            })
            .collect();
        unanswered.sort();
        tracing::warn!(
            "the client closed its input; {} request(s) still had no answer {} s later and were \
             cancelled: {}",
            unanswered.len(),
            self.options.input_closed_grace.as_secs(),
            if unanswered.is_empty() {
                "those of hooks".to_owned()
            } else {
                unanswered.join(", ")
            }
        );
    }

    /// The session is over: every request still waiting for the upstream is cancelled there
    /// (the upstream may stop its work), and observers see it cancelled.
    fn cancel_pending(&mut self, reason: &str) {
        let mut waiting: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Client { .. } | Pending::Hook { .. }))
            .map(|(uid, _)| *uid)
            .collect();
        // A direct waiter dropped here tells its hook that the session ended.
        waiting.extend(self.stop_direct().into_iter().map(|(uid, _)| uid));
        waiting.sort_unstable();
        for uid in waiting {
            self.pending.remove(uid);
            self.observe_end(uid, Outcome::Cancelled, None);
            let params = serde_json::json!({ "requestId": uid, "reason": reason }).to_string();
            self.send_upstream(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }

    pub(super) fn to_client(&self, line: String) {
        self.taps.answered(&line);
        let _ = self.to_client.send(line);
    }

    /// Sends the client `line`, saying which of its requests the line belongs to.
    pub(super) fn to_client_as(&self, line: String, belongs: Belongs) {
        self.taps.answered(&line);
        let _ = self.to_client.send_record(line, belongs);
    }

    /// The id the client knows the request by that upstream request `uid` serves: the client's
    /// own request, or the hooked client request a hook sent it for.
    fn client_request_of(&self, uid: &str) -> Option<Box<str>> {
        let uid = uid.parse::<u64>().ok()?;
        let call = match self.pending.get(uid) {
            Some(Pending::Client { id, .. }) => return Some(id.clone()),
            Some(Pending::Hook { call, .. }) => *call,
            Some(_) => return None,
            None => self.upstream_end.call_of(uid)?,
        };
        self.hooks.client_id_of(call)
    }

    pub(super) fn next_upstream_id(&mut self) -> u64 {
        self.pending.next_id()
    }

    // ---------------------------------------------------------------- client → upstream

    fn on_client_frame(&mut self, frame: Frame) {
        match frame {
            Frame::Line(line) => self.on_client_line(line),
            // Answered under its id when its first bytes show one (a request), so the client's
            // call fails now instead of waiting for ever; a notification or response is only
            // refused.
            Frame::TooLong { len, id, .. } => self.to_client(jsonrpc::error(
                id.as_deref(),
                jsonrpc::INVALID_REQUEST,
                &format!(
                    "Invalid Request: message of {len} bytes is over the proxy's limit of {} bytes",
                    self.options.max_message_bytes
                ),
            )),
            Frame::NotUtf8 { at } => self.to_client(jsonrpc::error(
                None,
                jsonrpc::PARSE_ERROR,
                &format!("Parse error: message is not UTF-8 (invalid byte at offset {at})"),
            )),
        }
    }

    pub(super) fn on_client_line(&mut self, line: String) {
        if let UpstreamState::Starting { queued, .. } = &mut self.upstream {
            queued.hold(line);
            return;
        }
        let message = match Message::parse_validated(&line) {
            Ok(message) => message,
            Err(malformed) => {
                tracing::debug!(error = %malformed.message, "malformed message from the client");
                self.to_client(jsonrpc::error(
                    malformed.id.as_deref(),
                    malformed.code,
                    &malformed.message,
                ));
                return;
            }
        };
        match message {
            Message::Request { id, method, params } => {
                self.on_client_request(&line, id, &method, params)
            }
            Message::Notification { method, params } => {
                self.on_client_notification(&line, &method, params)
            }
            Message::Result { id, .. } => self.on_client_response(&line, Some(id)),
            Message::Error { id, .. } => self.on_client_response(&line, id),
        }
    }

    fn on_client_request(&mut self, line: &str, id: &str, method: &str, params: Option<&str>) {
        self.hooks.settle(id);
        // One id, one request in flight: a second would make both answers ambiguous.
        if self.pending.by_peer(id).is_some() || self.hooks.in_flight(id) {
            tracing::debug!(
                id,
                method,
                "refused a request whose id is already in flight"
            );
            self.to_client(jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_REQUEST,
                &format!(
                    "Invalid Request: id {id} is already in use by a request in flight; use a \
                     new id for each request"
                ),
            ));
            return;
        }
        self.taps
            .start(id, method, params, &self.scope, &self.server);
        // The chain's outermost step (routing paths, which fail closed): only when routes are
        // configured is anything parsed here.
        let entered = (self.scope.identity).with(|who| self.chain.enter(method, params, who));
        let hooked = match entered.path {
            Path::Refused(error) => {
                self.reject_routed(id, method, params, error);
                return;
            }
            Path::Hooks => true,
            Path::Raw => false,
        };
        match (entered.params, params) {
            // What the router checked is what goes on: its serialisation replaces the client's
            // params, for the chain and the upstream alike (`crate::routing`).
            (Some(canonical), Some(raw)) if canonical != raw => {
                let line = splice(line, &[(range_in(line, raw), canonical.as_str())]);
                match Message::parse(&line) {
                    Ok(Message::Request { id, method, params }) => {
                        self.forward_client_request(&line, id, &method, params, hooked)
                    }
                    _ => self.to_client(jsonrpc::error(
                        Some(id),
                        jsonrpc::INTERNAL_ERROR,
                        &format!("the proxy could not rewrite `{method}` as its routes checked it"),
                    )),
                }
            }
            _ => self.forward_client_request(line, id, method, params, hooked),
        }
    }

    /// A client request past the chain's outermost step: to the upstream, through the hooks
    /// (`hooked`) or raw.
    fn forward_client_request(
        &mut self,
        line: &str,
        id: &str,
        method: &str,
        params: Option<&str>,
        hooked: bool,
    ) {
        if !self.ensure_upstream(Some(id), method) {
            return;
        }
        if let UpstreamState::Starting { queued, .. } = &mut self.upstream {
            queued.hold(line.to_owned());
            return;
        }
        if let Some(queued) = self.upstream_backlog() {
            let message = self.backlog_message(method, queued);
            tracing::warn!("{message}");
            self.to_client(jsonrpc::error(
                Some(id),
                jsonrpc::UPSTREAM_BACKLOG,
                &message,
            ));
            return;
        }
        if matches!(self.era, ClientEra::Unknown) && self.probe_era(line, method, params) {
            return;
        }
        if self.resume_with_request_state(id, method, params) {
            return;
        }
        let bridged = matches!(self.era, ClientEra::Bridged(_));
        if bridged && self.answer_for_bridged_client(id, method, params) {
            return;
        }
        if hooked {
            self.start_hooked_request(id, method, params);
            return;
        }
        self.remember_state(method, params);
        let uid = self.next_upstream_id();
        let mut uid_text = itoa::Buffer::new();
        let uid_text = uid_text.format(uid);
        let mut progress_token = None;
        let mut new_params = None;
        if let Some(params) = params
            && (bridged || params.contains("\"progressToken\""))
            && let Some(rewritten) = self.rewrite_request_params(params, uid, bridged)
        {
            progress_token = rewritten.progress_token;
            new_params = Some((range_in(line, params), rewritten.params));
        }
        if method == "initialize" {
            self.handshake.initialize_sent(uid, params);
        }
        let mut replacements = vec![(range_in(line, id), uid_text)];
        if let Some((range, text)) = &new_params {
            replacements.push((range.clone(), text.as_str()));
        }
        let out = self.taps.forward(Some(id), splice(line, &replacements));
        let client_id: Box<str> = id.into();
        if self.chain.observed() {
            self.hooks.observe_start(uid, method, params);
        }
        self.allow_cut_through(uid, method, bridged, &client_id);
        self.pending.insert(
            uid,
            Pending::Client {
                id: client_id,
                method: method.into(),
                progress_token,
                deadline: self.options.request_timeout.map(|t| Instant::now() + t),
                target: bridged.then(|| rounds::target_in(method, params)).flatten(),
            },
        );
        self.send_upstream(out);
    }

    /// Sends a request a hook made upstream under `uid` (allocated by the hook's task). Goes the
    /// way a client request goes: state remembered for replay, progress token swapped, a bridged
    /// client's envelope removed.
    pub(super) fn forward_hook_request(
        &mut self,
        uid: u64,
        call: u64,
        method: &str,
        params: Option<String>,
        reply: oneshot::Sender<RawOutcome>,
    ) {
        self.remember_state(method, params.as_deref());
        let bridged = matches!(self.era, ClientEra::Bridged(_));
        let mut progress_token = None;
        let mut params = params;
        if let Some(text) = &params
            && (bridged || text.contains("\"progressToken\""))
            && let Some(rewritten) = self.rewrite_request_params(text, uid, bridged)
        {
            progress_token = rewritten.progress_token;
            params = Some(rewritten.params);
        }
        if method == "initialize" {
            self.handshake.initialize_sent(uid, params.as_deref());
        }
        let line = jsonrpc::request(itoa::Buffer::new().format(uid), method, params.as_deref());
        let line = self.taps.forward(self.hooks.client_id(call), line);
        self.pending.insert(
            uid,
            Pending::Hook {
                call,
                method: method.into(),
                progress_token,
                deadline: self.options.request_timeout.map(|t| Instant::now() + t),
                reply,
            },
        );
        self.send_upstream(line);
    }

    /// Rewrites request params on their way upstream: the progress token becomes the upstream
    /// id, and for a bridged client the envelope is removed (and its log level applied).
    fn rewrite_request_params(
        &mut self,
        params: &str,
        uid: u64,
        bridged: bool,
    ) -> Option<RewrittenParams> {
        let mut map: Map<String, Value> = serde_json::from_str(params).ok()?;
        let progress_token = swap_progress_token(&mut map, uid);
        if bridged && let Some(level) = era::strip_envelope(&mut map) {
            self.opt_in_logs(uid, &level);
        }
        Some(RewrittenParams {
            params: serde_json::to_string(&map).ok()?,
            progress_token,
        })
    }

    fn on_client_notification(&mut self, line: &str, method: &str, params: Option<&str>) {
        if method == "notifications/cancelled"
            && self.taps.active()
            && let Some((request_id, _)) = params.and_then(|p| field_rewriter(p, "requestId"))
        {
            self.taps.cancelled(&request_id);
        }
        if self.chain.has(HookId::ClientNotification) {
            self.hook_client_notification(method, params);
            return;
        }
        self.relay_client_notification(line, method, params);
    }

    /// Sends a client notification upstream, mapping what refers to this hop's ids.
    pub(super) fn relay_client_notification(
        &mut self,
        line: &str,
        method: &str,
        params: Option<&str>,
    ) {
        let out = match method {
            "notifications/cancelled" => {
                let Some(params) = params else { return };
                let Some((request_id, rewrite)) = field_rewriter(params, "requestId") else {
                    return;
                };
                if self.close_listener(&request_id) || self.cancel_hooked(&request_id) {
                    return;
                }
                let Some((uid, _)) = self.pending.remove_by_peer(request_id.as_str()) else {
                    // Or one the upstream sent the client (its answer will not come): the
                    // upstream is told under its own id (`shared`).
                    if let Some(upstream_id) = self.withdraw_upstream_request(&request_id) {
                        let new_params = rewrite(upstream_id);
                        let out = splice(line, &[(range_in(line, params), new_params.as_str())]);
                        self.send_upstream(out);
                        return;
                    }
                    tracing::debug!(%request_id, "client cancelled a request that is not pending");
                    return;
                };
                self.forget_cut_through(uid);
                self.observe_end(uid, Outcome::Cancelled, None);
                let new_params = rewrite(Value::from(uid));
                splice(line, &[(range_in(line, params), new_params.as_str())])
            }
            "notifications/progress" => {
                // Progress on a request the upstream sent to the client.
                let Some(params) = params else { return };
                let Some((token, rewrite)) = field_rewriter(params, "progressToken") else {
                    return;
                };
                let found = self
                    .upstream_requests
                    .progress(&token, None)
                    .and_then(|(_, request)| request.progress_token.as_deref());
                let Some(upstream_token) = found else {
                    return;
                };
                let token: Value = serde_json::from_str(upstream_token).unwrap_or(Value::Null);
                let new_params = rewrite(token);
                splice(line, &[(range_in(line, params), new_params.as_str())])
            }
            "notifications/initialized" if self.started_elsewhere && self.handshake.initialized => {
                // A session restored from the shared store replayed it (`shared`): its
                // upstream is told once.
                return;
            }
            _ => {
                self.handshake.remember_notification(method);
                if let Some(queued) = self.upstream_backlog() {
                    self.dropped_for_backlog += 1;
                    let dropped = self.dropped_for_backlog;
                    if dropped.is_power_of_two() {
                        tracing::warn!(
                            method,
                            dropped,
                            queued,
                            "dropped a client notification: the upstream is not reading its input"
                        );
                    }
                    return;
                }
                line.to_owned()
            }
        };
        match &mut self.upstream {
            UpstreamState::Up(link) => link.send(out),
            UpstreamState::Starting { queued, .. } => queued.hold(out),
            UpstreamState::Down { .. } => {
                tracing::debug!(
                    method,
                    "dropped a client notification: the upstream is down"
                )
            }
        }
    }

    fn on_client_response(&mut self, line: &str, id: Option<&str>) {
        let Some(id) = id else {
            tracing::warn!(%line, "the client sent an error without an id");
            return;
        };
        let Some(request) = id
            .parse::<u64>()
            .ok()
            .and_then(|did| self.upstream_requests.remove(did))
        else {
            tracing::debug!(id = id, "client answered a request that is not pending");
            return;
        };
        if let Some(reply) = request.hook {
            let outcome = match Message::parse(line) {
                Ok(Message::Result { result, .. }) => Ok(result.to_owned()),
                Ok(Message::Error { error, .. }) => Err(crate::dispatch::error_data(error)),
                _ => Err(ErrorData::internal_error(
                    "the client's answer was unreadable",
                    None,
                )),
            };
            let _ = reply.send(outcome);
            return;
        }
        let out = splice(line, &[(range_in(line, id), &*request.upstream_id)]);
        self.send_upstream(out);
    }

    // ---------------------------------------------------------------- upstream → client

    /// A line from the upstream; `during` is the upstream id of the request on whose response
    /// stream it came, when the upstream said.
    fn on_upstream_line(&mut self, line: &str, during: Option<&str>) {
        let message = match Message::parse(line) {
            Ok(message) => message,
            Err(malformed) => {
                // Logged sparingly: an upstream writing garbage in a loop must not flood the log.
                self.malformed_from_upstream += 1;
                let dropped = self.malformed_from_upstream;
                if dropped <= 10 || dropped.is_power_of_two() {
                    tracing::warn!(error = %malformed.message, dropped, "dropped a malformed message from the upstream");
                }
                return;
            }
        };
        match message {
            Message::Result { id, result } => self.on_upstream_response(line, id, Ok(result)),
            Message::Error {
                id: Some(id),
                error,
            } => self.on_upstream_response(line, id, Err(error)),
            Message::Error { id: None, error } => {
                // Not tied to a request (a parse error, say): the client sees it as it would
                // without the proxy.
                tracing::debug!(error, "the upstream reported an error without an id");
                self.to_client(line.to_owned());
            }
            Message::Request { id, method, params } => {
                self.on_upstream_request(line, id, &method, params, during)
            }
            Message::Notification { method, params } => {
                self.on_upstream_notification(line, &method, params)
            }
        }
    }

    /// Lets the answer to raw client request `uid` go to the client while it arrives
    /// (`transport/cut_through.rs`) when nothing here needs to see it whole: no observer, no
    /// request tap, no era bridging, not a handshake answer the session keeps, and a client
    /// transport that takes streamed lines (stdio).
    fn allow_cut_through(&self, uid: u64, method: &str, bridged: bool, client_id: &str) {
        if bridged
            || self.chain.observed()
            || self.options.request_tap.is_some()
            || matches!(method, "initialize" | "server/discover")
            || !self.to_client.takes_tails()
        {
            return;
        }
        if let UpstreamState::Up(link) = &self.upstream
            && let Some(cut) = link.cut_through()
        {
            cut.allow(uid, client_id.into());
        }
    }

    /// The answer to `uid` is no longer to be cut through (answered, cancelled, expired).
    fn forget_cut_through(&self, uid: u64) {
        if let UpstreamState::Up(link) = &self.upstream
            && let Some(cut) = link.cut_through()
        {
            cut.forget(uid);
        }
    }

    /// The start of an answer the upstream's reader cuts through: queued for the client with
    /// its tail while its request is pending; dropped when it is not (cancelled or timed out
    /// meanwhile: the client already has its error), which lets the reader skip the rest.
    fn on_upstream_streamed(&mut self, uid: u64, head: String, tail: AnswerTail) {
        match self.pending.remove(uid) {
            Some(Pending::Client { id, .. }) => {
                let _ = self
                    .to_client
                    .send_with_tail(head, tail.0, Belongs::Response(id));
            }
            Some(other) => {
                self.pending.insert(uid, other);
            }
            None => {}
        }
    }

    fn on_upstream_response(&mut self, line: &str, id: &str, outcome: Result<&str, &str>) {
        let uid = id.parse::<u64>().ok();
        if let Some(uid) = uid {
            self.forget_cut_through(uid);
        }
        if let Some(waiter) = uid.and_then(|uid| {
            (!self.pending.contains(uid))
                .then(|| self.upstream_end.take(uid))
                .flatten()
        }) {
            // A request a hook wrote itself.
            let _ = waiter.reply.send(match outcome {
                Ok(result) => Ok(result.to_owned()),
                Err(error) => Err(crate::dispatch::error_data(error)),
            });
            return;
        }
        let Some(pending) =
            uid.and_then(|uid| self.pending.remove(uid).map(|pending| (uid, pending)))
        else {
            tracing::debug!(
                id = id,
                "dropped a response to no pending request (cancelled or timed out)"
            );
            return;
        };
        match pending {
            (
                uid,
                Pending::Client {
                    id: client_id,
                    method,
                    ..
                },
            ) => {
                if let Some(bridged) = self.bridged() {
                    bridged.request_done(uid);
                }
                self.note_handshake_answer(uid, &method, outcome);
                let completed = match (&self.era, outcome) {
                    (ClientEra::Bridged(_), Ok(result)) => era::complete_result(&method, result)
                        .map(|text| (range_in(line, result), text)),
                    _ => None,
                };
                let mut replacements = vec![(range_in(line, id), &*client_id)];
                if let Some((range, text)) = &completed {
                    replacements.push((range.clone(), text.as_str()));
                }
                self.to_client_as(splice(line, &replacements), Belongs::Response(client_id));
                if self.chain.observed() {
                    let (kind, error) = hooked::outcome_of(&method, outcome);
                    self.observe_end(uid, kind, error);
                }
            }
            (uid, Pending::Hook { method, reply, .. }) => {
                self.note_handshake_answer(uid, &method, outcome);
                let _ = reply.send(match outcome {
                    Ok(result) => Ok(result.to_owned()),
                    Err(error) => Err(crate::dispatch::error_data(error)),
                });
            }
            (_, Pending::Proxy(purpose)) => self.on_proxy_response(purpose, outcome),
            (_, Pending::Suspended { state, .. }) => self.on_suspended_answer(&state, outcome),
        }
    }

    fn on_upstream_request(
        &mut self,
        line: &str,
        id: &str,
        method: &str,
        params: Option<&str>,
        during: Option<&str>,
    ) {
        if matches!(self.era, ClientEra::Bridged(_))
            && self.on_bridged_upstream_request(id, method, params)
        {
            return;
        }
        if self.chain.has(HookId::ServerRequest) {
            self.hook_server_request(id, method, params);
            return;
        }
        let did = self.upstream_requests.next_id();
        let mut did_text = itoa::Buffer::new();
        let did_text = did_text.format(did);
        let mut progress_token = None;
        let mut new_params = None;
        if let Some(params) = params
            && params.contains("\"progressToken\"")
            && let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(params)
            && let Some(token) = swap_progress_token(&mut map, did)
            && let Ok(rewritten) = serde_json::to_string(&map)
        {
            progress_token = Some(token);
            new_params = Some((range_in(line, params), rewritten));
        }
        self.upstream_requests.insert(
            did,
            UpstreamRequest {
                upstream_id: id.into(),
                progress_token,
                hook: None,
            },
        );
        let mut replacements = vec![(range_in(line, id), did_text)];
        if let Some((range, text)) = &new_params {
            replacements.push((range.clone(), text.as_str()));
        }
        tracing::debug!(method, did, "upstream request relayed to the client");
        let belongs = during
            .and_then(|uid| self.client_request_of(uid))
            .map_or(Belongs::Unsaid, Belongs::During);
        self.to_client_as(splice(line, &replacements), belongs);
    }

    fn on_upstream_notification(&mut self, line: &str, method: &str, params: Option<&str>) {
        // Routes: a hidden resource's updates never reach the client (nor listen streams).
        if method == "notifications/resources/updated"
            && self.chain.router().is_some_and(|router| {
                self.scope
                    .identity
                    .with(|who| router.hides_update(params, who))
            })
        {
            tracing::debug!("an update for a hidden resource was dropped");
            return;
        }
        let out = match method {
            "notifications/progress" => {
                let Some(params) = params else { return };
                let Some((token, rewrite)) = field_rewriter(params, "progressToken") else {
                    return;
                };
                let timeout = self.options.request_timeout;
                let (hooked_call, client_token) = match self.pending.progress(&token, timeout) {
                    Some((
                        _,
                        Pending::Hook {
                            call,
                            progress_token,
                            ..
                        },
                    )) => (Some(*call), progress_token.clone()),
                    Some((_, pending)) => (None, pending.progress_token().map(Box::from)),
                    // A request a hook wrote itself.
                    None => match token
                        .parse::<u64>()
                        .ok()
                        .and_then(|uid| self.upstream_end.touch(uid))
                    {
                        Some((call, token)) => (Some(call), token),
                        None => (None, None),
                    },
                };
                if let Some(call) = hooked_call {
                    self.hooked_alive(call);
                }
                let Some(client_token) = client_token else {
                    tracing::debug!(%token, "dropped progress for no pending request");
                    return;
                };
                let token: Value = serde_json::from_str(&client_token).unwrap_or(Value::Null);
                let new_params = rewrite(token);
                splice(line, &[(range_in(line, params), new_params.as_str())])
            }
            "notifications/message"
                if matches!(&self.era, ClientEra::Bridged(bridged)
                        if !bridged.wants_log(params, self.pending.entries())) =>
            {
                return;
            }
            "notifications/cancelled" => {
                // The upstream withdrew a request it had sent to the client.
                let Some(params) = params else { return };
                let Some((request_id, rewrite)) = field_rewriter(params, "requestId") else {
                    return;
                };
                let Some((did, _)) = self.upstream_requests.remove_by_peer(&request_id) else {
                    return;
                };
                let new_params = rewrite(Value::from(did));
                splice(line, &[(range_in(line, params), new_params.as_str())])
            }
            _ => {
                if let Some(lines) = self.route_to_listeners(method, params) {
                    for line in lines {
                        self.to_client(line);
                    }
                    return;
                }
                line.to_owned()
            }
        };
        if self.chain.has(HookId::ServerNotification) {
            self.hook_server_notification(out);
            return;
        }
        self.to_client(out);
    }

    /// Answers every request whose deadline has passed with a timeout error, and cancels it
    /// upstream.
    fn expire(&mut self, now: Instant) {
        self.expire_hook_rounds(now);
        self.expire_hooked(now);
        let expired = self.pending.expired(now);
        let waited = self.options.request_timeout.unwrap_or_default();
        for (uid, waiter) in self.upstream_end.expired(now) {
            let _ = waiter.reply.send(Err(ErrorData::new(
                ErrorCode(jsonrpc::UPSTREAM_TIMEOUT as i32),
                format!(
                    "upstream `{}` did not answer `{}` within {} s; the request was cancelled",
                    self.server,
                    waiter.method,
                    waited.as_secs()
                ),
                None,
            )));
            let params =
                format!(r#"{{"requestId":{uid},"reason":"the proxy's request timeout expired"}}"#);
            self.send_upstream(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
        for (uid, pending) in expired {
            self.forget_cut_through(uid);
            match pending {
                Pending::Client { id, method, .. } => {
                    let message = format!(
                        "upstream `{}` did not answer `{method}` within {} s; the request was cancelled",
                        self.server,
                        waited.as_secs()
                    );
                    self.to_client(jsonrpc::error(
                        Some(&id),
                        jsonrpc::UPSTREAM_TIMEOUT,
                        &message,
                    ));
                    self.observe_end(uid, Outcome::Error, Some(message));
                }
                Pending::Hook { method, reply, .. } => {
                    let _ = reply.send(Err(ErrorData::new(
                        ErrorCode(jsonrpc::UPSTREAM_TIMEOUT as i32),
                        format!(
                            "upstream `{}` did not answer `{method}` within {} s; the request was cancelled",
                            self.server,
                            waited.as_secs()
                        ),
                        None,
                    )));
                }
                // The client never came back for its input round.
                Pending::Suspended { state, .. } => self.drop_round(&state),
                Pending::Proxy(_) => continue,
            }
            let params =
                format!(r#"{{"requestId":{uid},"reason":"the proxy's request timeout expired"}}"#);
            self.send_upstream(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }
}

/// Reads `params.<field>` (as raw JSON text) and returns it with a function that writes the
/// params back with that field replaced.
fn field_rewriter(params: &str, field: &str) -> Option<(String, impl FnOnce(Value) -> String)> {
    let map: Map<String, Value> = serde_json::from_str(params).ok()?;
    let current = map.get(field)?.to_string();
    let field = field.to_owned();
    Some((current, move |value: Value| {
        let mut map = map;
        map.insert(field, value);
        serde_json::to_string(&map).unwrap_or_else(|_| "{}".to_owned())
    }))
}

/// Request params rewritten for the upstream.
struct RewrittenParams {
    params: String,
    progress_token: Option<Box<str>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: &str, token: Option<&str>) -> Pending {
        Pending::Client {
            id: id.into(),
            method: "tools/call".into(),
            progress_token: token.map(Into::into),
            deadline: Some(Instant::now()),
            target: None,
        }
    }

    #[test]
    fn a_client_request_is_found_by_the_clients_id_and_a_proxy_request_by_none() {
        let mut pending: IdMap<Pending> = IdMap::default();
        let uid = pending.allocate(client("\"a\"", None));
        let own = pending.allocate(Pending::Proxy(ProxyRequest::SetState));
        assert_eq!(pending.by_peer("\"a\""), Some(uid));
        let (cancelled, _) = pending.remove_by_peer("\"a\"").unwrap();
        assert_eq!(cancelled, uid);
        assert!(pending.contains(own), "the proxy's own request stays");
        assert!(
            pending
                .expired(Instant::now() + Duration::from_secs(3600))
                .is_empty(),
            "the proxy's own requests never expire"
        );
    }

    #[test]
    fn progress_keeps_a_request_alive_but_not_a_suspended_round() {
        let mut pending: IdMap<Pending> = IdMap::default();
        let uid = pending.allocate(client("1", Some("\"tok\"")));
        let suspended = pending.allocate(Pending::Suspended {
            state: "s".into(),
            deadline: Some(Instant::now()),
        });
        let (_, entry) = pending
            .progress(&uid.to_string(), Some(Duration::from_secs(3600)))
            .unwrap();
        assert_eq!(entry.progress_token(), Some("\"tok\""));
        pending.progress(&suspended.to_string(), Some(Duration::from_secs(3600)));
        let expired: Vec<u64> = pending
            .expired(Instant::now() + Duration::from_secs(1))
            .into_iter()
            .map(|(uid, _)| uid)
            .collect();
        assert_eq!(expired, vec![suspended]);
        assert!(pending.contains(uid));
    }

    #[test]
    fn a_request_the_upstream_sent_is_found_by_its_upstream_id_unless_a_hook_sent_it() {
        let mut relayed: IdMap<UpstreamRequest> = IdMap::default();
        let did = relayed.allocate(UpstreamRequest {
            upstream_id: "\"q-1\"".into(),
            progress_token: None,
            hook: None,
        });
        let (reply, _answer) = oneshot::channel();
        relayed.allocate(UpstreamRequest {
            upstream_id: "".into(),
            progress_token: None,
            hook: Some(reply),
        });
        assert_eq!(relayed.by_peer("\"q-1\""), Some(did));
        assert_eq!(relayed.by_peer(""), None);
    }
}
