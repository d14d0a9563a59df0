//! What an upstream connection reports to its session: the one event type every kind of
//! upstream (stdio, HTTP, a set of servers) and the adapters between them hand on.

use crate::transport::cut_through::Tail;

/// The rest of an answer being cut through ([`UpstreamEvent::Streamed`]), as it arrives.
/// Opaque: the session hands it to the client's writer.
#[derive(Debug)]
pub struct AnswerTail(pub(crate) Tail);

/// What an upstream connection reports to its session.
#[derive(Debug)]
#[non_exhaustive]
pub enum UpstreamEvent {
    /// One line the server wrote.
    Line {
        /// Which start of the server wrote it.
        generation: u64,
        /// The line.
        line: String,
    },
    /// One message the server sent on the response stream of one of the session's requests
    /// (an HTTP upstream's SSE stream), so what the server asks there can be tied to that
    /// request.
    LineFor {
        /// Which start of the server sent it.
        generation: u64,
        /// The line.
        line: String,
        /// The id of the request whose stream carried it, as raw JSON.
        request: Box<str>,
    },
    /// The start of an answer still arriving, which the reader cut through
    /// (`transport/cut_through.rs`): `head` is its first bytes with the client's id in place,
    /// `tail` the rest as it comes. Dropping it drops the answer (its rest is read and
    /// discarded).
    Streamed {
        /// Which start of the server wrote it.
        generation: u64,
        /// The upstream id of the request it answers.
        uid: u64,
        /// The first bytes, with the id the client knows the request by.
        head: String,
        /// The rest of the line.
        tail: AnswerTail,
    },
    /// The server closed its stdout (it exited or is about to).
    Closed {
        /// Which start of the server closed.
        generation: u64,
        /// How it ended, in words ("exited with status 1").
        how: String,
    },
}
