//! What a session's streams share with the other replicas of a shared store: request-stream
//! events written to the shared event log as they are sent ([`flush`]), a `Last-Event-ID`
//! resume of a stream another replica served ([`resume_elsewhere`]), and the client's answers
//! to server requests another replica's upstream sent ([`answer`], [`listen_for_answers`]).
//!
//! The log and the channels are the store's (`crate::shared_store::events`); which stream an
//! event id names, and which replica a server request's id names, are `Streams`' and `relay`'s.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use hyper::StatusCode;
use hyper::body::Bytes;
use tokio::sync::mpsc;

use super::body::{self, Delivery};
use super::reject::{Reject, SERVER_ERROR};
use super::sessions::{SessionHandle, SessionTable, short};
use super::streams::{STANDALONE, Streams, event_id, parse_event_id};
use crate::jsonrpc::{self, Message, range_in, splice};
use crate::shared_store::StoreError;
use crate::shared_store::events::{EventLog, LoggedEvent};
use crate::shared_store::relay::{self, ReplicaTag};

/// How often a replica following another's stream checks that the other still runs.
const LIVENESS_EVERY: Duration = Duration::from_millis(500);

/// Sends the events the streams hold back and writes them to the shared event log, the
/// client's copy first: the store's round trip is then off the client's path. A resume on
/// another replica misses nothing for it, since it subscribes to the stream before it reads
/// the log ([`resume_elsewhere`]), and the next line waits for this write, so the log keeps
/// the order. A store that fails is logged: only a resume on another replica would miss them.
pub(crate) async fn flush(
    streams: &Mutex<Streams>,
    log: &dyn EventLog,
    session: &str,
    bound: usize,
    ttl: Duration,
) {
    let held = match streams.lock() {
        Ok(mut streams) => streams.take_held(),
        Err(_) => return,
    };
    if held.is_empty() {
        return;
    }
    let appended: Vec<_> = held.iter().map(|h| h.appended()).collect();
    for held in held {
        held.release();
    }
    if let Err(err) = log.append(session, &appended, bound, ttl).await {
        tracing::warn!(session = %short(session), "{err}; events sent without being stored for a resume on another replica");
    }
}

/// A stream resumed from the shared event log.
pub(crate) struct Resumed {
    pub(crate) priming: Bytes,
    pub(crate) deliveries: mpsc::UnboundedReceiver<Delivery>,
}

/// A GET whose `Last-Event-ID` names a request stream another replica served: replays from
/// the shared event log what came after that event, then follows the stream until its
/// response (or, if that replica is gone, ends it with an error saying so). `None` when the
/// id is not another replica's (the local streams serve it).
pub(crate) async fn resume_elsewhere(
    table: &SessionTable,
    handle: &SessionHandle,
    last_event_id: Option<&str>,
) -> Result<Option<Resumed>, Reject> {
    let Some(log) = table.event_log() else {
        return Ok(None);
    };
    let Some((stream, after)) = last_event_id.and_then(parse_event_id) else {
        return Ok(None);
    };
    let Some(owner) = ReplicaTag::of_stream(stream) else {
        return Ok(None);
    };
    // Another replica's GET stream (numbered from its tag) is not in the log: `Streams`
    // starts a fresh one.
    if stream == STANDALONE || owner == log.replica() || stream == owner.first_stream() {
        return Ok(None);
    }
    let session: Arc<str> = handle.id.clone();
    // Subscribed before reading, so nothing appended in between is missed (duplicates are
    // dropped by number).
    let follow = log.follow(&session, stream).await.map_err(store_reject)?;
    let stored = log.read(&session, stream).await.map_err(store_reject)?;
    if stored.is_empty() && !log.alive(owner).await.map_err(store_reject)? {
        // Nothing to replay, and no one to carry on: the request died with its replica.
        return Err(Reject::new(
            StatusCode::GONE,
            SERVER_ERROR,
            format!(
                "Gone: the replica {owner} that served stream {stream} has stopped, and the \
                 shared event store has no events of that stream; its request was lost with it"
            ),
        ));
    }
    tracing::info!(session = %short(&session), stream, after, %owner, "resuming another replica's stream from the shared event store");
    let (tx, deliveries) = mpsc::unbounded_channel();
    let retry_ms = table.options().sse_retry_ms;
    tokio::spawn(tail(log, session, stream, after, owner, stored, follow, tx));
    Ok(Some(Resumed {
        priming: body::priming(&event_id(stream, after), retry_ms),
        deliveries,
    }))
}

/// What a resumed stream has sent.
struct Tail {
    stream: u64,
    last_sent: u64,
    request: Option<Box<str>>,
    done: bool,
    tx: mpsc::UnboundedSender<Delivery>,
}

impl Tail {
    /// Sends `event` unless it was sent already (the log and the subscription overlap).
    fn send(&mut self, event: LoggedEvent) {
        if self.request.is_none() {
            self.request = Some(event.request.clone());
        }
        if self.done || event.seq <= self.last_sent {
            return;
        }
        if event.seq > self.last_sent + 1 {
            tracing::warn!(
                stream = self.stream,
                after = self.last_sent,
                "resuming a stream whose events were partly dropped from the shared event store"
            );
        }
        self.last_sent = event.seq;
        self.done = event.last;
        let _ = self.tx.send(Delivery {
            id: Some(event_id(self.stream, event.seq).into()),
            line: event.line.into(),
            last: event.last,
            framing: body::Framing::Event,
            _held: None,
        });
    }
}

#[allow(clippy::too_many_arguments)]
async fn tail(
    log: Arc<dyn EventLog>,
    session: Arc<str>,
    stream: u64,
    after: u64,
    owner: ReplicaTag,
    stored: Vec<LoggedEvent>,
    mut follow: futures_util::stream::BoxStream<'static, LoggedEvent>,
    tx: mpsc::UnboundedSender<Delivery>,
) {
    let mut tail = Tail {
        stream,
        last_sent: after,
        request: None,
        done: false,
        tx: tx.clone(),
    };
    for event in stored {
        tail.send(event);
    }
    // The first check is at once: a replica found gone ends the stream without waiting.
    let mut check = tokio::time::interval(LIVENESS_EVERY);
    while !tail.done {
        tokio::select! {
            () = tx.closed() => return,
            event = follow.next() => match event {
                Some(event) => tail.send(event),
                None => {
                    // The subscription broke (the store went away): what the log has, then
                    // an end the client can resume from again.
                    if let Ok(stored) = log.read(&session, stream).await {
                        stored.into_iter().for_each(|e| tail.send(e));
                    }
                    return;
                }
            },
            _ = check.tick() => {
                match log.alive(owner).await {
                    Ok(true) => {}
                    Ok(false) => {
                        // Gone: anything it stored before it stopped, then an answer saying so.
                        if let Ok(stored) = log.read(&session, stream).await {
                            stored.into_iter().for_each(|e| tail.send(e));
                        }
                        if !tail.done {
                            let line = jsonrpc::error(
                                tail.request.as_deref(),
                                SERVER_ERROR,
                                &format!(
                                    "the replica {owner} that was serving this request has \
                                     stopped; the request was lost with it (its events up to \
                                     {} were replayed from the shared event store)",
                                    event_id(stream, tail.last_sent)
                                ),
                            );
                            let _ = tx.send(Delivery { id: None, line: line.into(), last: true, framing: body::Framing::Event, _held: None });
                        }
                        return;
                    }
                    Err(err) => tracing::debug!(%err, "cannot tell whether a replica still runs"),
                }
            }
        }
    }
}

/// Hands the client's answer to a server request to the replica whose upstream asked: this
/// one (with the original id put back), or, through the store, the one its id names. An answer
/// for a replica that has stopped is refused (410), naming it.
pub(crate) async fn answer(
    table: &SessionTable,
    handle: &SessionHandle,
    line: String,
) -> Result<(), Reject> {
    let Some(log) = table.event_log() else {
        return handle.send(line).await;
    };
    let id = match Message::parse(&line) {
        Ok(Message::Result { id, .. } | Message::Error { id: Some(id), .. }) => id,
        _ => return handle.send(line).await,
    };
    let Some((replica, original)) = relay::decode(id) else {
        return handle.send(line).await;
    };
    let restored = splice(&line, &[(range_in(&line, id), original.as_str())]);
    if replica == log.replica() {
        return handle.send(restored).await;
    }
    let id = id.to_owned();
    if log
        .relay(replica, &handle.id, &restored)
        .await
        .map_err(store_reject)?
    {
        handle.touch();
        return Ok(());
    }
    Err(Reject::new(
        StatusCode::GONE,
        SERVER_ERROR,
        format!(
            "Gone: the replica {replica} that sent request {id} has stopped; the upstream that \
             asked is gone with it, so the answer cannot be delivered"
        ),
    )
    .with_id(Some(&id)))
}

/// A client's `notifications/cancelled` whose `requestId` is a tagged server request's
/// (`relay`): like an answer, it goes with the original id to the replica whose upstream asked
/// (this one, or through the store the one the tag names), and `true` is returned. `false`
/// (nothing done) for any other cancellation. A cancellation for a replica that has stopped
/// is dropped: its request went with it.
pub(crate) async fn cancelled(
    table: &SessionTable,
    handle: &SessionHandle,
    line: &str,
    params: Option<&str>,
) -> Result<bool, Reject> {
    let Some(log) = table.event_log() else {
        return Ok(false);
    };
    let Some(params) = params else {
        return Ok(false);
    };
    let Ok(mut map) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(params)
    else {
        return Ok(false);
    };
    let Some((replica, original)) = map
        .get("requestId")
        .map(serde_json::Value::to_string)
        .and_then(|id| relay::decode(&id))
    else {
        return Ok(false);
    };
    let Ok(original_value) = serde_json::from_str::<serde_json::Value>(&original) else {
        return Ok(false);
    };
    map.insert("requestId".into(), original_value);
    let Ok(new_params) = serde_json::to_string(&map) else {
        return Ok(false);
    };
    let restored = splice(line, &[(range_in(line, params), new_params.as_str())]);
    if replica == log.replica() {
        handle.send(restored).await?;
        return Ok(true);
    }
    if log
        .relay(replica, &handle.id, &restored)
        .await
        .map_err(store_reject)?
    {
        handle.touch();
    } else {
        tracing::debug!(session = %short(&handle.id), %replica, "dropped a cancellation for a stopped replica's request");
    }
    Ok(true)
}

/// Takes the answers other replicas relay here into the sessions they belong to, for as long
/// as the table lives.
pub(crate) fn listen_for_answers(table: &Arc<SessionTable>) {
    let Some(log) = table.event_log() else {
        return;
    };
    let table = Arc::downgrade(table);
    log.listen(Box::new(move |session, line| {
        let Some(table) = table.upgrade() else {
            return false;
        };
        match table.local(&session) {
            Some(handle) => {
                tokio::spawn(async move {
                    if handle.send(line).await.is_err() {
                        tracing::debug!(session = %short(&handle.id), "a relayed answer arrived as the session ended");
                    }
                });
            }
            None => tracing::info!(session = %short(&session), "dropped a relayed answer for a session this replica no longer holds"),
        }
        true
    }));
}

/// The client sent `notifications/initialized` to this replica (already handed to `handle`'s
/// session): tells the other replicas running the session's upstream, the one that created it
/// above all, before the client gets its `202`, so that each tells its own upstream at once
/// and once (`Session::take_handshake`), before the client's next request can reach it. The
/// store records the change `initialized` (once: a second one is not announced). Nothing to do without a
/// shared store's fan-out, or for a stateless session; a store that fails is logged (a replica
/// that starts the upstream later replays the whole handshake).
pub(crate) async fn initialized(table: &SessionTable, handle: &SessionHandle) {
    let Some(store) = table.shared_store() else {
        return;
    };
    let Some(fanout) = &store.fanout else {
        return;
    };
    if handle.id.starts_with("stateless:") {
        return;
    }
    let ttl = table.options().idle_timeout;
    let changes = [crate::exchange::handshake::Change::Initialized];
    let numbered = match store
        .backend
        .save_handshake(&handle.id, &changes, ttl)
        .await
    {
        Ok(crate::shared_store::Changed::Numbered(numbered)) => numbered,
        Ok(_) => return,
        Err(err) => {
            tracing::warn!(session = %short(&handle.id), "{err}; other replicas' upstreams of the session were not told it initialized");
            return;
        }
    };
    if numbered.is_empty() {
        // Recorded already: every replica that started the upstream since replayed it.
        return;
    }
    if let Err(err) = fanout.announce(&handle.id, &numbered).await {
        tracing::warn!(session = %short(&handle.id), "{err}; other replicas' upstreams of the session were not told it initialized");
    }
}

fn store_reject(err: StoreError) -> Reject {
    Reject::unavailable(format!("Service Unavailable: {err}"))
}
