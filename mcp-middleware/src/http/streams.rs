//! The streams of one HTTP session, and which of them each message for the client goes to.
//!
//! The core session writes every message for the client to one queue, as it would to stdout.
//! Over HTTP a message must travel on the right SSE stream:
//!
//! - a **response** on the stream of the POST that carried its request (found by id), which
//!   then ends;
//! - **progress** on the stream of the request whose `progressToken` it carries;
//! - a **request from the server** (sampling, elicitation, roots, ping), a **log message** or a
//!   **cancellation** of a server request on the newest request stream a client is connected
//!   to, else on the standalone (GET) stream, else stored on the newest open request stream
//!   or the standalone stream for the client to collect;
//! - a notification tagged with an `io.modelcontextprotocol/subscriptionId` on the stream of
//!   that `subscriptions/listen` request;
//! - **everything else** (list changes, resource updates, custom notifications) on the
//!   standalone stream, kept in its backlog while no GET stream is open.
//!
//! Every event of a resumable stream is stored ([`EventStore`]) before it is sent, under an id
//! `STREAM-SEQ` that names its stream, so `Last-Event-ID` resumes exactly the stream that
//! broke. A stream whose connection broke keeps collecting events until the client comes back
//! or the request completes.
//!
//! With a shared store, request streams are numbered from the replica's tag (so an event id
//! names the replica that served it), each event of a request stream is written to the shared
//! event log as it is sent ([`Streams::take_held`]: the router releases, then writes), and
//! a server request's id names this replica ([`relay`]) so that its answer, POSTed to any
//! replica, comes back here.
//!
//! In a stateless session (2026-07-28 clients, shared by every client with the same key) the
//! requests of different clients may carry the same ids and progress tokens: each request gets
//! an id (and token) of the session's own on its way in, and the client's are put back on what
//! comes out. Its streams are not resumable, and closing one cancels its request.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::body::{Delivery, DeliveryText, Framing, OnDrop};
use super::event_store::{EventStore, Kept, StreamId};
use super::reject::{Reject, SERVER_ERROR};
use crate::jsonrpc::{self, Message, range_in, splice};
use crate::session::Event;
use crate::shared_store::events::{Appended, LoggedEvent};
use crate::shared_store::relay::{self, ReplicaTag};
use crate::transport::Frame;
use crate::transport::outbound::Belongs;
use crate::transport::queue::Gauge;

/// The standalone stream, opened by GET.
pub(crate) const STANDALONE: StreamId = 0;

/// Streams kept before the first sweep of finished ones ([`Streams::prune`]).
const MIN_SWEEP: usize = 64;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The streams of one session.
pub(crate) struct Streams {
    stateless: bool,
    next_stream: StreamId,
    /// Ids of the session's own for stateless requests (the hop from the HTTP front to the
    /// core session).
    request_ids: crate::exchange::IdSource,
    next_conn: u64,
    /// Open request streams by the request's id as the core session knows it (raw JSON).
    by_request: HashMap<Box<str>, StreamId>,
    /// Open request streams by the progress token the core session gives back (normalised).
    by_token: HashMap<String, StreamId>,
    streams: BTreeMap<StreamId, Stream>,
    store: EventStore,
    retry_ms: u64,
    /// Why the session ended, once it has.
    ended: Option<String>,
    /// How many streams may be kept before the next sweep for those the store has dropped
    /// every event of; doubles with what a sweep keeps, so sweeping costs O(1) per request.
    sweep_above: usize,
    /// Into the core session, for what the streams must tell it themselves.
    session: mpsc::Sender<Event>,
    /// What waits for the client: messages in a connected stream's queue count until the
    /// stream takes them.
    backlog: Arc<Gauge>,
    /// With a shared store: where a message for the standalone stream goes when no GET stream
    /// is attached here (the client may hold it on another replica).
    elsewhere: Option<Elsewhere>,
    /// With a shared store: this replica's tag, and the request streams' events waiting to be
    /// written to the shared event log as they are sent.
    shared: Option<SharedEvents>,
}

struct SharedEvents {
    tag: ReplicaTag,
    held: Vec<Held>,
}

/// An event of a request stream, kept back until the shared event log has it.
pub(crate) struct Held {
    stream: StreamId,
    event: LoggedEvent,
    delivery: Delivery,
    /// The connection the stream had when the event was made. A connection that replaces it
    /// meanwhile gets the event by replay from the local store, so it is sent only here.
    sink: Option<mpsc::UnboundedSender<Delivery>>,
}

impl Held {
    /// What the shared event log keeps of it.
    pub(crate) fn appended(&self) -> Appended {
        (self.stream, self.event.clone())
    }

    /// Sends it to the client (if the connection is still there).
    pub(crate) fn release(self) {
        if let Some(sink) = self.sink {
            let _ = sink.send(self.delivery);
        }
    }
}

/// Where [`Streams`] hands a message for a GET stream another replica holds.
pub(crate) type Elsewhere = Box<dyn Fn(&str) + Send>;

#[derive(Default)]
struct Stream {
    request: Option<RequestInfo>,
    sink: Option<Sink>,
    /// The last event number used (0 is the priming event).
    seq: u64,
    /// The response was sent (or the request was cancelled): no more events.
    finished: bool,
    /// Standalone stream: the last event handed to a connection.
    delivered: u64,
}

struct Sink {
    conn: u64,
    tx: mpsc::UnboundedSender<Delivery>,
}

struct RequestInfo {
    /// The id the core session knows the request by (raw JSON).
    session_id: Box<str>,
    /// The id the client sent (raw JSON); differs from `session_id` in stateless sessions.
    client_id: Box<str>,
    /// The progress token the core session gives back, normalised.
    token: Option<String>,
    /// The client's own progress token (raw JSON), where it was replaced.
    client_token: Option<Value>,
    /// A `subscriptions/listen` request: it stays open and is not "in flight".
    listen: bool,
}

/// Where a response cut through goes ([`Streams::open_streamed`]).
pub(crate) enum Streaming {
    /// To its request's stream, piece by piece.
    Open(Streamed),
    /// Read whole, then routed as any message.
    Whole,
    /// Nowhere: its request's stream is gone (the rest is read past).
    Gone,
}

/// An event being streamed to a request's stream: the pieces go to the connection it had when
/// the event opened; a copy of the whole message is kept for the event store, which takes it as
/// it is (a 1.25 MB answer is not copied again at its end), while it is no longer than the
/// store keeps any message: past that the copy is let go, since the store would not keep it
/// (and an answer cut through is never held whole in the proxy).
pub(crate) struct Streamed {
    stream: StreamId,
    seq: u64,
    /// The connection the head went to.
    conn: Option<u64>,
    sink: Option<mpsc::UnboundedSender<Delivery>>,
    backlog: Arc<Gauge>,
    /// The message so far, while it is no longer than `keep`.
    whole: Option<String>,
    /// How long a message the event store keeps may be.
    keep: usize,
    /// How long the message is so far.
    len: usize,
}

impl Streamed {
    /// Sends the next piece of the message to the stream's connection (if it is still there).
    /// The piece itself goes to the connection (no copy); the whole keeps a copy of it while
    /// the message is no longer than the event store keeps.
    pub(crate) fn piece(&mut self, text: String) {
        self.len += text.len();
        if self.len > self.keep {
            self.whole = None;
        } else if let Some(whole) = &mut self.whole {
            whole.push_str(&text);
        }
        self.send(None, text, Framing::More, false);
    }

    fn send(
        &mut self,
        id: Option<Arc<str>>,
        text: impl Into<DeliveryText>,
        framing: Framing,
        last: bool,
    ) {
        let Some(sink) = &self.sink else { return };
        let line = text.into();
        let delivery = Delivery {
            id,
            _held: Some(self.backlog.ticket(line.len())),
            line,
            last,
            framing,
        };
        if sink.send(delivery).is_err() {
            self.sink = None;
        }
    }
}

/// A request stream just opened: the line to hand to the core session and the receiving end
/// of the stream.
pub(crate) struct Opened {
    pub(crate) stream: StreamId,
    pub(crate) line: String,
    pub(crate) deliveries: mpsc::UnboundedReceiver<Delivery>,
    pub(crate) guard: StreamGuard,
    /// The priming event for a resumable stream.
    pub(crate) priming: Option<hyper::body::Bytes>,
}

/// A stream attached for GET.
pub(crate) struct Attached {
    pub(crate) deliveries: mpsc::UnboundedReceiver<Delivery>,
    pub(crate) guard: Option<StreamGuard>,
    pub(crate) priming: hyper::body::Bytes,
}

impl Streams {
    pub(crate) fn new(
        stateless: bool,
        store: EventStore,
        retry_ms: u64,
        session: mpsc::Sender<Event>,
        backlog: Arc<Gauge>,
    ) -> Self {
        let mut streams = BTreeMap::new();
        streams.insert(STANDALONE, Stream::default());
        Self {
            stateless,
            next_stream: STANDALONE,
            request_ids: crate::exchange::IdSource::default(),
            next_conn: 0,
            by_request: HashMap::new(),
            by_token: HashMap::new(),
            streams,
            store,
            retry_ms,
            ended: None,
            sweep_above: MIN_SWEEP,
            session,
            backlog,
            elsewhere: None,
            shared: None,
        }
    }

    /// From now on (before any request), the session's request streams are shared through
    /// a store: numbered from this replica's `tag`, their events held until
    /// [`take_held`](Self::take_held) has them written, and server requests' ids naming the
    /// replica.
    pub(crate) fn share_events(&mut self, tag: ReplicaTag) {
        if self.next_stream == STANDALONE {
            self.next_stream = tag.first_stream();
        }
        self.shared = Some(SharedEvents {
            tag,
            held: Vec::new(),
        });
    }

    /// The events held for the shared event log since the last call, in order.
    pub(crate) fn take_held(&mut self) -> Vec<Held> {
        self.shared
            .as_mut()
            .map(|shared| std::mem::take(&mut shared.held))
            .unwrap_or_default()
    }

    /// From now on, messages for the standalone stream go to `elsewhere` while no GET stream
    /// is attached here (another replica of a shared store may hold it).
    pub(crate) fn send_standalone_elsewhere(&mut self, elsewhere: Elsewhere) {
        self.elsewhere = Some(elsewhere);
    }

    /// Whether a GET stream is attached here and still open.
    pub(crate) fn holds_standalone(&self) -> bool {
        self.streams
            .get(&STANDALONE)
            .and_then(|s| s.sink.as_ref())
            .is_some_and(|sink| !sink.tx.is_closed())
    }

    /// Delivers a message another replica produced for this session's GET stream.
    pub(crate) fn deliver_standalone(&mut self, line: String) {
        self.deliver(STANDALONE, line, false);
    }

    /// The number event ids give `stream`: with a shared store the standalone stream is
    /// numbered from the replica's tag too (request streams start one after it).
    fn external(&self, stream: StreamId) -> StreamId {
        match &self.shared {
            Some(shared) if stream == STANDALONE => shared.tag.first_stream(),
            _ => stream,
        }
    }

    fn resumable(&self) -> bool {
        !self.stateless
    }

    fn new_sink(&mut self) -> (Sink, mpsc::UnboundedReceiver<Delivery>) {
        self.next_conn += 1;
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Sink {
                conn: self.next_conn,
                tx,
            },
            rx,
        )
    }

    /// Opens the stream of a request the client POSTed: `line` is the request, `id` and
    /// `params` point into it. Returns the line the core session gets (in a stateless session
    /// with the session's own id and progress token).
    pub(crate) fn open_request(
        &mut self,
        this: &Arc<Mutex<Streams>>,
        line: &str,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> Result<Opened, Reject> {
        if let Some(reason) = &self.ended {
            return Err(Reject::unavailable(format!(
                "Service Unavailable: {reason}"
            )));
        }
        let client_token = params
            .filter(|p| p.contains("\"progressToken\""))
            .and_then(|p| serde_json::from_str::<Map<String, Value>>(p).ok())
            .and_then(|p| p.get("_meta")?.get("progressToken").cloned());
        let (session_id, token, line, client_token) = if self.stateless {
            let own_id = self.request_ids.next();
            let own = own_id.to_string();
            let mut new_params = None;
            if client_token.is_some()
                && let Some(params) = params
                && let Some((text, Some(_))) =
                    crate::exchange::swap_progress_token_in(params, own_id)
            {
                new_params = Some((range_in(line, params), text));
            }
            let mut replacements = vec![(range_in(line, id), own.as_str())];
            if let Some((range, text)) = &new_params {
                replacements.push((range.clone(), text.as_str()));
            }
            let token = new_params.is_some().then(|| own.clone());
            let line = splice(line, &replacements);
            (own.into_boxed_str(), token, line, client_token)
        } else {
            if let Some(open) = self.by_request.get(id)
                && self.streams.get(open).is_some_and(|s| !s.finished)
            {
                return Err(Reject::new(
                    hyper::StatusCode::CONFLICT,
                    jsonrpc::INVALID_REQUEST,
                    format!(
                        "Conflict: request id {id} is already in flight in this session; \
                         use a new id for each request"
                    ),
                )
                .with_id(Some(id)));
            }
            let token = client_token.as_ref().map(Value::to_string);
            (id.into(), token, line.to_owned(), None)
        };
        self.next_stream += 1;
        let stream = self.next_stream;
        let (sink, deliveries) = self.new_sink();
        let guard = StreamGuard {
            streams: this.clone(),
            stream,
            conn: sink.conn,
        };
        self.by_request.insert(session_id.clone(), stream);
        if let Some(token) = &token {
            self.by_token.insert(token.clone(), stream);
        }
        self.streams.insert(
            stream,
            Stream {
                request: Some(RequestInfo {
                    session_id,
                    client_id: id.into(),
                    token,
                    client_token,
                    listen: method == "subscriptions/listen",
                }),
                sink: Some(sink),
                ..Stream::default()
            },
        );
        let priming = self
            .resumable()
            .then(|| priming_for(stream, 0, self.retry_ms));
        Ok(Opened {
            stream,
            line,
            deliveries,
            guard,
            priming,
        })
    }

    /// The client cancelled request `request_id` (raw JSON): its stream ends without a
    /// response.
    pub(crate) fn cancelled_by_client(&mut self, request_id: &str) {
        if let Some(stream) = self.by_request.remove(request_id) {
            self.finish(stream);
        }
    }

    /// Attaches a GET: the standalone stream, or with `Last-Event-ID` the stream that event
    /// belongs to, replaying what the client missed.
    pub(crate) fn attach(
        &mut self,
        this: &Arc<Mutex<Streams>>,
        last_event_id: Option<&str>,
    ) -> Result<Attached, Reject> {
        if let Some(reason) = &self.ended {
            return Err(Reject::unavailable(format!(
                "Service Unavailable: {reason}"
            )));
        }
        let named = match last_event_id {
            Some(text) => Some(parse_event_id(text).ok_or_else(|| {
                Reject::bad_request(format!(
                    "Bad Request: Last-Event-ID `{text}` is not an event id of this proxy \
                     (they read STREAM-NUMBER)"
                ))
            })?),
            None => None,
        };
        let named = match (named, &self.shared) {
            // With a shared store the GET stream's ids name the replica: this one's is the
            // standalone stream; another's GET stream cannot be replayed here (its events are
            // not in the shared log), so the client gets a fresh one.
            (Some((stream, after)), Some(shared)) if stream == shared.tag.first_stream() => {
                Some((STANDALONE, after))
            }
            (Some((stream, _)), Some(_))
                if ReplicaTag::of_stream(stream).is_some_and(|t| t.first_stream() == stream) =>
            {
                None
            }
            (named, _) => named,
        };
        let (stream, after) = match named {
            Some(named) => named,
            None => (
                STANDALONE,
                self.streams.get(&STANDALONE).map_or(0, |s| s.delivered),
            ),
        };
        let Some(state) = self.streams.get(&stream) else {
            return Err(Reject::bad_request(format!(
                "Bad Request: Last-Event-ID `{}` names a stream this session no longer has \
                 (its events were dropped from the event store)",
                last_event_id.unwrap_or_default()
            )));
        };
        let finished = state.finished;
        let (replay, gap) = self.store.after(stream, after);
        if gap {
            tracing::warn!(
                stream,
                after,
                "resuming a stream whose events were partly dropped from the event store"
            );
        }
        let (sink, deliveries) = self.new_sink();
        let conn = sink.conn;
        let mut last_sent = after;
        for (seq, line) in replay {
            let _ = sink.tx.send(Delivery {
                id: Some(event_id(self.external(stream), seq).into()),
                last: finished && self.is_response_of(stream, &line),
                framing: Framing::Event,
                _held: Some(self.backlog.ticket(line.len())),
                line: line.into(),
            });
            last_sent = seq;
        }
        let priming = priming_for(self.external(stream), after, self.retry_ms);
        let Some(state) = self.streams.get_mut(&stream) else {
            return Err(Reject::session_not_found());
        };
        if stream == STANDALONE {
            state.delivered = state.delivered.max(last_sent);
        }
        if finished {
            // Everything is replayed; the stream ends when the replay is read.
            return Ok(Attached {
                deliveries,
                guard: None,
                priming,
            });
        }
        // A newer connection replaces an older one: a message is never sent on two.
        state.sink = Some(sink);
        Ok(Attached {
            deliveries,
            guard: Some(StreamGuard {
                streams: this.clone(),
                stream,
                conn,
            }),
            priming,
        })
    }

    fn is_response_of(&self, stream: StreamId, line: &str) -> bool {
        stream != STANDALONE
            && matches!(
                Message::parse(line),
                Ok(Message::Result { .. } | Message::Error { id: Some(_), .. })
            )
    }

    /// A connection went away (its body was dropped). In a stateless session that cancels
    /// the request.
    fn detached(&mut self, stream: StreamId, conn: u64) {
        let Some(state) = self.streams.get_mut(&stream) else {
            return;
        };
        if state.sink.as_ref().is_some_and(|s| s.conn == conn) {
            state.sink = None;
        }
        if self.stateless && !state.finished {
            let Some(request) = &state.request else {
                return;
            };
            let params = format!(
                r#"{{"requestId":{},"reason":"the client closed the response stream"}}"#,
                request.session_id
            );
            let session_id = request.session_id.clone();
            self.by_request.remove(&session_id);
            self.finish(stream);
            tracing::debug!(
                stream,
                "the client closed a stateless request's stream: cancelled"
            );
            self.tell_session(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        } else {
            self.prune(stream);
        }
    }

    fn tell_session(&self, line: String) {
        let event = Event::Client(Frame::Line(line));
        if let Err(mpsc::error::TrySendError::Full(event)) = self.session.try_send(event) {
            let session = self.session.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = session.send(event).await;
                });
            }
        }
    }

    /// Routes one message the core session wrote for the client, with what the session said
    /// it belongs to: a response goes to its request's stream without the line being read
    /// again, and a request the upstream sent while serving a client request goes to that
    /// request's stream while it is open. What the session did not say is found by reading.
    pub(crate) fn route_record(&mut self, line: String, belongs: Belongs) {
        let line = match (&self.shared, &belongs) {
            (Some(shared), Belongs::During(_) | Belongs::Unsaid) => {
                tag_server_request(shared.tag, line)
            }
            _ => line,
        };
        match belongs {
            // A stateless session puts the client's own id back: that needs the line read.
            Belongs::Response(id) if !self.stateless => {
                let Some(stream) = self.by_request.remove(&id) else {
                    tracing::debug!(%id, "dropped a response whose request stream is gone");
                    return;
                };
                self.deliver(stream, line, true);
            }
            Belongs::During(id) => {
                let open = self
                    .by_request
                    .get(&id)
                    .copied()
                    .filter(|stream| self.streams.get(stream).is_some_and(|s| !s.finished));
                match open {
                    Some(stream) => self.deliver(stream, line, false),
                    // Its request's stream is gone: placed as any server request.
                    None => self.route(line),
                }
            }
            Belongs::Response(_) | Belongs::Unsaid => self.route(line),
        }
    }

    /// Opens the event of a response the core session cuts through (`head` is its start,
    /// with the client's id in place): its head goes to its request's stream now, the rest
    /// through [`Streamed::piece`] and [`Streams::close_streamed`]. A session whose events a
    /// shared store logs, or whose ids are put back (stateless), takes the message whole.
    pub(crate) fn open_streamed(&mut self, id: &str, head: &str) -> Streaming {
        if self.stateless || self.shared.is_some() {
            return Streaming::Whole;
        }
        let Some(stream) = self.by_request.remove(id) else {
            tracing::debug!(%id, "dropped a response whose request stream is gone");
            return Streaming::Gone;
        };
        let Some(state) = self.streams.get_mut(&stream).filter(|s| !s.finished) else {
            return Streaming::Gone;
        };
        state.seq += 1;
        let seq = state.seq;
        let sink = state.sink.as_ref().map(|s| (s.conn, s.tx.clone()));
        let event: Arc<str> = event_id(self.external(stream), seq).into();
        let keep = if self.store.keeps() {
            self.store.max_bytes()
        } else {
            0
        };
        let mut streamed = Streamed {
            stream,
            seq,
            conn: sink.as_ref().map(|(conn, _)| *conn),
            sink: sink.map(|(_, tx)| tx),
            backlog: self.backlog.clone(),
            whole: (head.len() <= keep).then(|| {
                let mut whole = String::with_capacity((head.len() * 2).min(keep));
                whole.push_str(head);
                whole
            }),
            keep,
            len: head.len(),
        };
        streamed.send(Some(event), head, Framing::Open, false);
        Streaming::Open(streamed)
    }

    /// Ends the event `streamed` opened: stores the message (so `Last-Event-ID` resumes
    /// it), gives it whole to a connection that replaced the one it was streamed to, and ends
    /// the request's stream, with `after` (the error for a message cut short) as its last
    /// event when given. A complete message longer than the store keeps is replaced, for the
    /// store and for such a connection, by an error for its request ([`Streams::too_large`]).
    pub(crate) fn close_streamed(&mut self, mut streamed: Streamed, after: Option<String>) {
        streamed.send(None, "", Framing::Close, after.is_none());
        let Streamed {
            stream,
            seq,
            conn,
            whole,
            len,
            ..
        } = streamed;
        let message = match (whole, &after) {
            (Some(whole), _) => Some(Kept::Owned(whole)),
            // Cut short: the error after it is what counts.
            (None, Some(_)) => None,
            (None, None) => self
                .too_large(stream, len)
                .map(|error| Kept::Shared(error.into())),
        };
        let event = event_id(self.external(stream), seq);
        let Some(state) = self.streams.get_mut(&stream) else {
            if let Some(message) = message {
                self.store.push_kept(stream, seq, message);
            }
            return;
        };
        if let Some(sink) = &state.sink
            && Some(sink.conn) != conn
            && let Some(message) = &message
        {
            let whole = message.shared();
            let _ = sink.tx.send(Delivery {
                id: Some(event.into()),
                _held: Some(self.backlog.ticket(whole.len())),
                line: whole.into(),
                last: after.is_none(),
                framing: Framing::Event,
            });
        }
        if state.sink.is_some() {
            state.delivered = seq;
        }
        if let Some(message) = message {
            self.store.push_kept(stream, seq, message);
        }
        match after {
            Some(line) => self.deliver(stream, line, true),
            None => self.finish(stream),
        }
    }

    /// What the event store keeps in place of the response of `stream` when it is `len` bytes,
    /// longer than the store keeps any message (`HttpOptions::event_store_bytes`): an error for
    /// its request, so a client that lost the response and resumes is told so, instead of
    /// waiting for an answer that will not come. `None` for a stream with no request.
    fn too_large(&self, stream: StreamId, len: usize) -> Option<String> {
        let request = self.streams.get(&stream)?.request.as_ref()?;
        let max = self.store.max_bytes();
        let why = format!(
            "the answer ({len} bytes) was sent on a connection that broke, and is longer than \
             the proxy keeps for resuming a stream ({max} bytes, event_store_bytes); send the \
             request again"
        );
        Some(jsonrpc::error(
            Some(&request.client_id),
            jsonrpc::INTERNAL_ERROR,
            &why,
        ))
    }

    /// Routes one message the core session wrote for the client, reading it to find its
    /// stream.
    pub(crate) fn route(&mut self, line: String) {
        let message = match Message::parse(&line) {
            Ok(message) => message,
            Err(malformed) => {
                tracing::warn!(error = %malformed.message, "dropped a malformed message for the client");
                return;
            }
        };
        match message {
            Message::Result { id, .. } | Message::Error { id: Some(id), .. } => {
                let Some(stream) = self.by_request.remove(id) else {
                    tracing::debug!(id, "dropped a response whose request stream is gone");
                    return;
                };
                let line = self.restore_id(stream, &line, id);
                self.deliver(stream, line, true);
            }
            Message::Error { id: None, .. } => self.onto_standalone(line),
            Message::Request { id, method, .. } => {
                match self.for_server_message() {
                    Some(stream) => self.deliver(stream, line, false),
                    None if self.stateless => {
                        // No stream can carry it: answer for the client, so the server does
                        // not wait for ever.
                        tracing::debug!(%method, "no stream for a server request; refused");
                        self.tell_session(jsonrpc::error(
                            Some(id),
                            jsonrpc::METHOD_NOT_FOUND,
                            "the client has no open stream to receive server requests on",
                        ));
                    }
                    None => self.onto_standalone(line),
                }
            }
            Message::Notification { method, params } => {
                if method == "notifications/progress" {
                    self.route_progress(&line, params);
                    return;
                }
                if let Some(params) = params
                    && params.contains(SUBSCRIPTION_ID)
                {
                    self.route_subscription(&line, params);
                    return;
                }
                match method.as_ref() {
                    "notifications/message" | "notifications/cancelled" => {
                        match self.for_server_message() {
                            Some(stream) => self.deliver(stream, line, false),
                            None => self.onto_standalone(line),
                        }
                    }
                    _ => self.onto_standalone(line),
                }
            }
        }
    }

    fn route_progress(&mut self, line: &str, params: Option<&str>) {
        let Some(params) = params else { return };
        let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(params) else {
            return;
        };
        let Some(token) = map.get("progressToken").map(Value::to_string) else {
            return;
        };
        let Some(&stream) = self.by_token.get(&token) else {
            tracing::debug!(%token, "dropped progress for no open request stream");
            return;
        };
        let restored = self
            .streams
            .get(&stream)
            .and_then(|s| s.request.as_ref())
            .and_then(|r| r.client_token.clone());
        let line = match restored {
            Some(client_token) => {
                map.insert("progressToken".into(), client_token);
                match serde_json::to_string(&map) {
                    Ok(text) => splice(line, &[(range_in(line, params), text.as_str())]),
                    Err(_) => return,
                }
            }
            None => line.to_owned(),
        };
        self.deliver(stream, line, false);
    }

    fn route_subscription(&mut self, line: &str, params: &str) {
        let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(params) else {
            return;
        };
        let Some(subscription) = map
            .get("_meta")
            .and_then(|m| m.get(SUBSCRIPTION_ID))
            .map(Value::to_string)
        else {
            self.onto_standalone(line.to_owned());
            return;
        };
        let Some(&stream) = self.by_request.get(subscription.as_str()) else {
            tracing::debug!(%subscription, "dropped a notification for a closed subscription");
            return;
        };
        let client_id = self
            .streams
            .get(&stream)
            .and_then(|s| s.request.as_ref())
            .filter(|_| self.stateless)
            .and_then(|r| serde_json::from_str::<Value>(&r.client_id).ok());
        let line = match client_id {
            Some(client_id) => {
                if let Some(Value::Object(meta)) = map.get_mut("_meta") {
                    meta.insert(SUBSCRIPTION_ID.into(), client_id);
                }
                match serde_json::to_string(&map) {
                    Ok(text) => splice(line, &[(range_in(line, params), text.as_str())]),
                    Err(_) => return,
                }
            }
            None => line.to_owned(),
        };
        self.deliver(stream, line, false);
    }

    /// Puts the client's own id back on a response (stateless sessions).
    fn restore_id(&self, stream: StreamId, line: &str, id: &str) -> String {
        match self.streams.get(&stream).and_then(|s| s.request.as_ref()) {
            Some(request) if *request.client_id != *id => {
                splice(line, &[(range_in(line, id), &*request.client_id)])
            }
            _ => line.to_owned(),
        }
    }

    /// Where a server request or log message goes: the newest request stream a client is
    /// connected to, else the standalone stream if connected, else the newest open request
    /// stream (stored for when its client resumes).
    fn for_server_message(&self) -> Option<StreamId> {
        let open = |s: &&Stream| !s.finished && s.request.as_ref().is_some_and(|r| !r.listen);
        let connected = self
            .streams
            .iter()
            .rev()
            .find(|(id, s)| **id != STANDALONE && open(s) && s.sink.is_some())
            .map(|(id, _)| *id);
        if connected.is_some() {
            return connected;
        }
        if !self.stateless
            && self
                .streams
                .get(&STANDALONE)
                .is_some_and(|s| s.sink.is_some())
        {
            return Some(STANDALONE);
        }
        self.streams
            .iter()
            .rev()
            .find(|(id, s)| **id != STANDALONE && open(s) && self.resumable())
            .map(|(id, _)| *id)
    }

    fn onto_standalone(&mut self, line: String) {
        if self.stateless {
            tracing::debug!("dropped a message for the standalone stream of a stateless session");
            return;
        }
        if let Some(elsewhere) = &self.elsewhere
            && !self.holds_standalone()
        {
            elsewhere(&line);
            return;
        }
        self.deliver(STANDALONE, line, false);
    }

    fn deliver(&mut self, stream: StreamId, line: String, last: bool) {
        let resumable = self.resumable();
        let Some(state) = self.streams.get_mut(&stream) else {
            return;
        };
        if state.finished {
            return;
        }
        state.seq += 1;
        let seq = state.seq;
        let line: Arc<str> = line.into();
        let id: Option<Arc<str>> = resumable.then(|| event_id(self.external(stream), seq).into());
        if resumable {
            // A response too long to keep is kept as an error for its request.
            let too_long = last && line.len() > self.store.max_bytes() && self.store.keeps();
            let kept = too_long
                .then(|| self.too_large(stream, line.len()).map(Arc::from))
                .flatten();
            self.store
                .push(stream, seq, kept.unwrap_or_else(|| line.clone()));
        }
        let Some(state) = self.streams.get_mut(&stream) else {
            return;
        };
        if let Some(shared) = &mut self.shared
            && stream != STANDALONE
            && resumable
        {
            let request = state
                .request
                .as_ref()
                .map_or_else(|| "null".into(), |r| r.client_id.clone());
            shared.held.push(Held {
                stream,
                event: LoggedEvent {
                    seq,
                    last,
                    request,
                    line: line.to_string(),
                },
                delivery: Delivery {
                    id,
                    _held: Some(self.backlog.ticket(line.len())),
                    line: line.into(),
                    last,
                    framing: Framing::Event,
                },
                sink: state.sink.as_ref().map(|s| s.tx.clone()),
            });
            if last {
                self.finish(stream);
            }
            return;
        }
        if let Some(sink) = &state.sink {
            let held = Some(self.backlog.ticket(line.len()));
            if sink
                .tx
                .send(Delivery {
                    id,
                    line: line.into(),
                    last,
                    framing: Framing::Event,
                    _held: held,
                })
                .is_ok()
            {
                state.delivered = seq;
            } else {
                state.sink = None;
            }
        }
        if last {
            self.finish(stream);
        }
    }

    /// No more events for `stream`: its connection (if any) ends once it has read what was
    /// sent.
    fn finish(&mut self, stream: StreamId) {
        let Some(state) = self.streams.get_mut(&stream) else {
            return;
        };
        state.finished = true;
        state.sink = None;
        if let Some(request) = &state.request {
            if let Some(token) = &request.token {
                self.by_token.remove(token);
            }
            if !request.listen || self.by_request.get(&request.session_id) == Some(&stream) {
                self.by_request.remove(&request.session_id);
            }
        }
        self.prune(stream);
    }

    /// Forgets a finished stream that nothing can resume any more.
    fn prune(&mut self, stream: StreamId) {
        if stream == STANDALONE {
            return;
        }
        if self
            .streams
            .get(&stream)
            .is_some_and(|s| s.finished && s.sink.is_none() && self.store.count(stream) == 0)
        {
            self.streams.remove(&stream);
        }
        // Streams whose events have all been dropped from the store. Not on every request:
        // a session keeps up to the store's event count of finished streams, and scanning
        // them all each time was a fifth of the proxy's CPU per HTTP request.
        if self.streams.len() > self.sweep_above {
            let store = &self.store;
            self.streams.retain(|id, s| {
                *id == STANDALONE || !s.finished || s.sink.is_some() || store.count(*id) > 0
            });
            self.sweep_above = (2 * self.streams.len()).max(MIN_SWEEP);
        }
    }

    /// The session ended: every request still open is answered with an error saying why, and
    /// every stream closes.
    pub(crate) fn end(&mut self, reason: &str) {
        if self.ended.is_some() {
            return;
        }
        self.ended = Some(reason.to_owned());
        let open: Vec<(StreamId, Box<str>)> = self
            .streams
            .iter()
            .filter(|(_, s)| !s.finished)
            .filter_map(|(id, s)| Some((*id, s.request.as_ref()?.client_id.clone())))
            .collect();
        for (stream, client_id) in open {
            let line = jsonrpc::error(Some(&client_id), SERVER_ERROR, reason);
            self.deliver(stream, line, true);
        }
        for state in self.streams.values_mut() {
            state.sink = None;
            state.finished = true;
        }
        self.by_request.clear();
        self.by_token.clear();
    }

    /// Whether nothing is attached and no request is in flight: the session may expire.
    pub(crate) fn is_idle(&self) -> bool {
        self.streams.iter().all(|(id, s)| {
            s.sink.is_none() && (*id == STANDALONE || s.finished || s.request.is_none())
        })
    }

    /// Bytes waiting for the client (the session's queue and connected streams' queues).
    pub(crate) fn queued_bytes(&self) -> usize {
        self.backlog.queued()
    }

    /// How many requests are in flight (`subscriptions/listen` streams do not count).
    pub(crate) fn in_flight(&self) -> usize {
        self.streams
            .values()
            .filter(|s| !s.finished && s.request.as_ref().is_some_and(|r| !r.listen))
            .count()
    }
}

/// Held by a stream's body: when the body is dropped (the response completed, or the client
/// went away) the stream is detached from that connection.
pub(crate) struct StreamGuard {
    streams: Arc<Mutex<Streams>>,
    stream: StreamId,
    conn: u64,
}

impl StreamGuard {
    pub(crate) fn boxed(self) -> OnDrop {
        Box::new(self)
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Ok(mut streams) = self.streams.lock() {
            streams.detached(self.stream, self.conn);
        }
    }
}

/// With a shared store: a server request's id (and the id an upstream's cancellation of one
/// names) becomes one naming this replica, so its answer finds the way back here.
fn tag_server_request(tag: ReplicaTag, line: String) -> String {
    match Message::parse(&line) {
        Ok(Message::Request { id, .. }) => {
            let tagged = relay::encode(tag, id);
            splice(&line, &[(range_in(&line, id), tagged.as_str())])
        }
        Ok(Message::Notification {
            method,
            params: Some(params),
        }) if method == "notifications/cancelled" => {
            let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(params) else {
                return line;
            };
            let Some(id) = map.get("requestId").map(Value::to_string) else {
                return line;
            };
            map.insert("requestId".into(), Value::String(relay::tagged(tag, &id)));
            match serde_json::to_string(&map) {
                Ok(text) => splice(&line, &[(range_in(&line, params), text.as_str())]),
                Err(_) => line,
            }
        }
        _ => line,
    }
}

/// The SSE id of event `seq` of `stream`.
pub(crate) fn event_id(stream: StreamId, seq: u64) -> String {
    format!("{stream}-{seq}")
}

/// The stream and event number an SSE id names.
pub(crate) fn parse_event_id(text: &str) -> Option<(StreamId, u64)> {
    let (stream, seq) = text.trim().split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

fn priming_for(stream: StreamId, seq: u64, retry_ms: u64) -> hyper::body::Bytes {
    super::body::priming(&event_id(stream, seq), retry_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streams(stateless: bool) -> (Arc<Mutex<Streams>>, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(16);
        let streams = Streams::new(
            stateless,
            EventStore::new(100, 1 << 20),
            1000,
            tx,
            Gauge::new(1 << 20),
        );
        (Arc::new(Mutex::new(streams)), rx)
    }

    fn open(this: &Arc<Mutex<Streams>>, line: &str) -> Opened {
        let Ok(Message::Request { id, method, params }) = Message::parse(line) else {
            panic!("not a request: {line}");
        };
        this.lock()
            .unwrap()
            .open_request(this, line, id, &method, params)
            .unwrap()
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<Delivery>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(d) = rx.try_recv() {
            out.push(d.line.to_string());
        }
        out
    }

    #[tokio::test]
    async fn responses_progress_and_server_requests_find_their_streams() {
        let (this, _rx) = streams(false);
        let mut a = open(
            &this,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"t"}}}"#,
        );
        let mut b = open(&this, r#"{"jsonrpc":"2.0","id":"b","method":"tools/list"}"#);
        {
            let mut s = this.lock().unwrap();
            s.route(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#.into());
            s.route(r#"{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage"}"#.into());
            s.route(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#.into());
            s.route(r#"{"jsonrpc":"2.0","id":"b","result":{}}"#.into());
            s.route(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into());
        }
        let a_lines = drain(&mut a.deliveries);
        assert_eq!(a_lines.len(), 2, "{a_lines:?}");
        assert!(a_lines[0].contains("progress"));
        assert!(a_lines[1].contains(r#""id":1"#));
        let b_lines = drain(&mut b.deliveries);
        assert!(b_lines[0].contains("sampling/createMessage"), "{b_lines:?}");
        assert!(b_lines[1].contains(r#""id":"b""#));
        // The list change waits in the standalone backlog for a GET.
        let mut get = this.lock().unwrap().attach(&this, None).unwrap();
        assert_eq!(drain(&mut get.deliveries).len(), 1);
        drop((a, b));
    }

    #[tokio::test]
    async fn records_place_a_server_request_on_the_stream_of_its_request_and_a_response_unread() {
        for stateless in [false, true] {
            let (this, _rx) = streams(stateless);
            let mut a = open(&this, r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
            let mut b = open(&this, r#"{"jsonrpc":"2.0","id":2,"method":"tools/call"}"#);
            let a_id = this.lock().unwrap().streams[&a.stream]
                .request
                .as_ref()
                .unwrap()
                .session_id
                .clone();
            {
                let mut s = this.lock().unwrap();
                // Without a record this would go to the newest stream, b's.
                s.route_record(
                    r#"{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage"}"#.into(),
                    Belongs::During(a_id.clone()),
                );
                let answer = format!(r#"{{"jsonrpc":"2.0","id":{a_id},"result":{{}}}}"#);
                s.route_record(answer, Belongs::Response(a_id.clone()));
                // The stream is finished: a late server request for it goes where any would.
                s.route_record(
                    r#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#.into(),
                    Belongs::During(a_id),
                );
            }
            let a_lines = drain(&mut a.deliveries);
            assert_eq!(a_lines.len(), 2, "{a_lines:?}");
            assert!(a_lines[0].contains("sampling/createMessage"), "{a_lines:?}");
            assert_eq!(a_lines[1], r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
            let b_lines = drain(&mut b.deliveries);
            assert_eq!(b_lines.len(), 1, "{b_lines:?}");
            assert!(b_lines[0].contains("ping"), "{b_lines:?}");
        }
    }

    #[tokio::test]
    async fn a_broken_stream_resumes_from_its_last_event() {
        let (this, _rx) = streams(false);
        let opened = open(&this, r#"{"jsonrpc":"2.0","id":5,"method":"slow"}"#);
        let stream = opened.stream;
        this.lock().unwrap().route(
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}"#
                .into(),
        );
        drop(opened); // the client disconnects
        this.lock()
            .unwrap()
            .route(r#"{"jsonrpc":"2.0","id":5,"result":{"ok":true}}"#.into());
        let last_seen = format!("{stream}-1");
        let mut resumed = this
            .lock()
            .unwrap()
            .attach(&this, Some(&last_seen))
            .unwrap();
        let replay = drain(&mut resumed.deliveries);
        assert_eq!(
            replay,
            vec![r#"{"jsonrpc":"2.0","id":5,"result":{"ok":true}}"#]
        );
        assert!(
            this.lock().unwrap().attach(&this, Some("99-1")).is_err(),
            "an unknown stream is refused"
        );
    }

    /// Streams whose event store keeps messages of up to 400 bytes.
    fn small_store() -> Arc<Mutex<Streams>> {
        let (tx, _rx) = mpsc::channel(16);
        let streams = Streams::new(
            false,
            EventStore::new(100, 400),
            1000,
            tx,
            Gauge::new(1 << 20),
        );
        Arc::new(Mutex::new(streams))
    }

    /// What a client resuming `stream` after its priming event gets.
    fn resumed(this: &Arc<Mutex<Streams>>, stream: StreamId) -> Vec<String> {
        let last_seen = format!("{stream}-0");
        let mut resumed = this.lock().unwrap().attach(this, Some(&last_seen)).unwrap();
        drain(&mut resumed.deliveries)
    }

    #[tokio::test]
    async fn a_lost_response_too_long_to_keep_is_replayed_as_an_error_for_its_request() {
        let this = small_store();
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":"c","result":{{"t":"{}"}}}}"#,
            "x".repeat(500)
        );
        for (kind, stream_it) in [("read whole", false), ("streamed", true)] {
            let opened = open(&this, r#"{"jsonrpc":"2.0","id":"c","method":"tools/call"}"#);
            let stream = opened.stream;
            drop(opened); // the client disconnects
            if stream_it {
                let mut s = this.lock().unwrap();
                let Streaming::Open(mut streamed) = s.open_streamed(r#""c""#, &long[..60]) else {
                    panic!("not streamed");
                };
                streamed.piece(long[60..].to_owned());
                assert!(
                    streamed.whole.is_none(),
                    "no copy past what the store keeps"
                );
                s.close_streamed(streamed, None);
            } else {
                this.lock().unwrap().route(long.clone());
            }
            let replay = resumed(&this, stream);
            assert_eq!(replay.len(), 1, "{kind}: {replay:?}");
            let error: Value = serde_json::from_str(&replay[0]).unwrap();
            assert_eq!(error["id"], "c", "{kind}");
            assert_eq!(error["error"]["code"], jsonrpc::INTERNAL_ERROR, "{kind}");
            let message = error["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("(544 bytes)")
                    && message.contains("(400 bytes, event_store_bytes)"),
                "{kind}: {message}"
            );
        }
        // What fits is replayed as it was.
        let opened = open(&this, r#"{"jsonrpc":"2.0","id":"d","method":"tools/call"}"#);
        let stream = opened.stream;
        drop(opened);
        let short = r#"{"jsonrpc":"2.0","id":"d","result":{}}"#;
        this.lock().unwrap().route(short.into());
        assert_eq!(resumed(&this, stream), [short]);
    }

    #[tokio::test]
    async fn stateless_requests_get_ids_of_their_own_and_closing_cancels() {
        let (this, mut session) = streams(true);
        let a = open(
            &this,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1}}}"#,
        );
        let mut b = open(
            &this,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1}}}"#,
        );
        assert!(a.line.contains(r#""id":1,"#) && a.line.contains(r#""progressToken":1"#));
        assert!(b.line.contains(r#""id":2,"#) && b.line.contains(r#""progressToken":2"#));
        {
            let mut s = this.lock().unwrap();
            s.route(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":2,"progress":1}}"#.into());
            s.route(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#.into());
        }
        assert_eq!(
            drain(&mut b.deliveries),
            vec![
                r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
                r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
            ]
        );
        drop(a);
        let Some(Event::Client(Frame::Line(cancel))) = session.recv().await else {
            panic!("no cancellation");
        };
        assert!(cancel.contains(r#""requestId":1"#), "{cancel}");
    }

    #[tokio::test]
    async fn shared_streams_hold_events_until_stored_and_tag_server_requests() {
        let (this, _rx) = streams(false);
        let tag = ReplicaTag::new(0xabcd).unwrap();
        this.lock().unwrap().share_events(tag);
        let mut a = open(&this, r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
        assert_eq!(
            ReplicaTag::of_stream(a.stream),
            Some(tag),
            "numbered from the tag"
        );
        {
            let mut s = this.lock().unwrap();
            s.route_record(
                r#"{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage"}"#.into(),
                Belongs::During("1".into()),
            );
            s.route_record(
                r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into(),
                Belongs::Response("1".into()),
            );
        }
        assert!(
            drain(&mut a.deliveries).is_empty(),
            "nothing is sent before it is stored"
        );
        let held = this.lock().unwrap().take_held();
        let logged: Vec<_> = held.iter().map(Held::appended).collect();
        assert_eq!(logged.len(), 2);
        assert!(
            logged
                .iter()
                .all(|(stream, e)| *stream == a.stream && &*e.request == "1")
        );
        assert_eq!((logged[0].1.seq, logged[0].1.last), (1, false));
        assert_eq!((logged[1].1.seq, logged[1].1.last), (2, true));
        assert!(
            logged[0].1.line.contains(r#""id":"mcpm:0000abcd:4""#),
            "{}",
            logged[0].1.line
        );
        held.into_iter().for_each(Held::release);
        let lines = drain(&mut a.deliveries);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[1], r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        // The GET stream's ids name the replica too; another replica's is not replayed here.
        let mine = format!("{}-0", tag.first_stream());
        let other = format!("{}-3", ReplicaTag::new(7).unwrap().first_stream());
        this.lock()
            .unwrap()
            .route(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#.into());
        let mut get = this.lock().unwrap().attach(&this, Some(&mine)).unwrap();
        let replayed = get.deliveries.try_recv().unwrap();
        assert_eq!(
            replayed.id.as_deref(),
            Some(&*format!("{}-1", tag.first_stream()))
        );
        // A stream's guard locks the streams when dropped: never while they are locked here.
        let fresh = this.lock().unwrap().attach(&this, Some(&other));
        assert!(fresh.is_ok(), "a fresh GET stream");
        drop((fresh, get));
    }

    #[tokio::test]
    async fn ending_the_session_answers_what_is_in_flight() {
        let (this, _rx) = streams(false);
        let mut a = open(&this, r#"{"jsonrpc":"2.0","id":"x","method":"slow"}"#);
        this.lock().unwrap().end("the proxy is shutting down");
        let lines = drain(&mut a.deliveries);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains(r#""id":"x""#) && lines[0].contains("shutting down"));
        assert!(this.lock().unwrap().is_idle());
    }
}
