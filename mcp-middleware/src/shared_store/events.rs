//! The shared SSE event log and the deliveries between replicas that it carries: what lets a
//! client resume, on any replica, a request stream another replica served, and answer, through
//! any replica, a server request another replica's upstream sent.
//!
//! - Every event of a resumable request stream is appended to the log (bounded per stream by
//!   the event store's count, expiring after the idle timeout) as it is sent. A
//!   `Last-Event-ID` naming another replica's stream ([`ReplicaTag::of_stream`]) is served by
//!   reading the log after that id and then following what is appended later, until the
//!   stream's response, or until the replica serving it is gone (then the stream ends with an
//!   error saying so).
//! - The answer to a server request goes to the replica its id names (see `relay`) on that
//!   replica's own channel; a replica listens on its channel while it runs, which is also how
//!   the others tell it is alive.
//!
//! The Redis implementation is in `events_redis`.

use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};

use super::StoreError;
use super::relay::ReplicaTag;

/// One event of a request stream, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LoggedEvent {
    /// Its number in the stream (the part of the SSE id after the dash).
    pub(crate) seq: u64,
    /// Whether it is the stream's response (nothing follows it).
    pub(crate) last: bool,
    /// The id (raw JSON) of the client's request the stream answers, for the error a stream
    /// whose replica died ends with.
    pub(crate) request: Box<str>,
    /// The JSON-RPC message.
    pub(crate) line: String,
}

/// The events a replica appends in one step: stream number and event.
pub(crate) type Appended = (u64, LoggedEvent);

/// What a shared store does for streams and server requests across replicas. Every call is
/// bounded in time: a store that does not answer is [`StoreError::Unavailable`].
pub(crate) trait EventLog: Send + Sync + 'static {
    /// This replica's tag.
    fn replica(&self) -> ReplicaTag;
    /// Appends `events` of session `session` (each stream keeping its newest `bound`, for
    /// `ttl`) and announces each to whoever follows its stream.
    fn append<'a>(
        &'a self,
        session: &'a str,
        events: &'a [Appended],
        bound: usize,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The events of stream `stream` of session `session` the log still has, oldest first.
    fn read<'a>(
        &'a self,
        session: &'a str,
        stream: u64,
    ) -> BoxFuture<'a, Result<Vec<LoggedEvent>, StoreError>>;
    /// From now on, every event appended to stream `stream` of session `session` (the
    /// subscription is in place when this returns). The stream of events ends when the
    /// connection to the store breaks.
    fn follow<'a>(
        &'a self,
        session: &'a str,
        stream: u64,
    ) -> BoxFuture<'a, Result<BoxStream<'static, LoggedEvent>, StoreError>>;
    /// Whether replica `replica` is running (listening on its channel).
    fn alive(&self, replica: ReplicaTag) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// Hands `line` (a client's answer for session `session`) to replica `replica`; `false`
    /// when no such replica is running.
    fn relay<'a>(
        &'a self,
        replica: ReplicaTag,
        session: &'a str,
        line: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Listens on this replica's channel, calling `on_answer(session, line)` for each answer
    /// another replica relays here, until it returns `false`; reconnects when the store comes
    /// back.
    fn listen(&self, on_answer: Box<dyn Fn(String, String) -> bool + Send + Sync>);
}
