//! The sending side of an answer an HTTP upstream's reader cuts through
//! (`transport/cut_through.rs`): where it goes ([`CutTo`]) and how it goes ([`CutStream`]): its
//! head, with the client's id in place, to the session as [`UpstreamEvent::Streamed`], then its
//! rest piece by piece through a bounded channel to the client's writer, ending in
//! [`TailPiece::End`] or, when it cannot be completed, in [`TailPiece::Abort`] with an error for
//! its request. A JSON body (`http_body.rs`) and an SSE event (`sse.rs`) are cut through alike.

use std::fmt;

use tokio::sync::mpsc;

use super::{AnswerTail, ReaderOut, UpstreamEvent};
use crate::jsonrpc::{self, INTERNAL_ERROR, UPSTREAM_UNAVAILABLE};
use crate::transport::cut_through::{Claimed, CutThrough, TAIL_PIECES, TailPiece, Utf8Pieces};

/// The most one piece of an answer cut through gathers from what has already arrived (body
/// frames, event-stream chunks): about what the stdio reader hands over per read, so an answer
/// that arrives in many small chunks is handed on in few pieces.
pub(crate) const PIECE_MOST: usize = 256 * 1024;

/// Where a large answer may be cut through, and who it is reported to.
pub(crate) struct CutTo<'a> {
    /// The requests the session allows to be cut through.
    pub(crate) table: &'a CutThrough,
    /// Where the head and any error go.
    pub(crate) events: &'a ReaderOut,
    /// Which start of the server this is.
    pub(crate) generation: u64,
    /// The server, for messages.
    pub(crate) name: &'a str,
    /// The method of the request the answer is for, for messages.
    pub(crate) method: &'a str,
}

/// An answer being cut through: its head went up; its pieces follow.
pub(crate) struct CutStream<'a> {
    to: &'a CutTo<'a>,
    /// The upstream id of the request it answers.
    uid: u64,
    /// The id the client knows the request by, for an error that ends the answer.
    client_id: Box<str>,
    utf8: Utf8Pieces,
    /// `None` once nobody reads the tail (the session dropped the answer) or it was ended:
    /// the rest is then only read past.
    sink: Option<mpsc::Sender<TailPiece>>,
}

impl<'a> CutStream<'a> {
    /// Sends up the head of the answer `claimed` (its first bytes, upstream id in place) and
    /// opens its tail. A head that is not UTF-8 sends an error for the request instead; then,
    /// or when the session is gone, the answer is only read past.
    pub(crate) async fn start(to: &'a CutTo<'a>, claimed: Claimed, head: &[u8]) -> Self {
        let spliced = claimed.splice_head(head);
        let Claimed { uid, client_id, .. } = claimed;
        let mut stream = Self {
            to,
            uid,
            client_id,
            utf8: Utf8Pieces::default(),
            sink: None,
        };
        let event = match stream.utf8.text(spliced) {
            Ok(head) => {
                tracing::debug!(server = %to.name, uid, "cutting a large answer through");
                let (tx, tail) = mpsc::channel(TAIL_PIECES);
                stream.sink = Some(tx);
                UpstreamEvent::Streamed {
                    generation: to.generation,
                    uid,
                    head,
                    tail: AnswerTail(tail),
                }
            }
            Err(at) => {
                tracing::warn!(server = %to.name, at, "upstream answered with a message that is not UTF-8; dropped it");
                UpstreamEvent::Line {
                    generation: to.generation,
                    line: stream.not_utf8(),
                }
            }
        };
        if !to.events.send(event).await {
            stream.sink = None;
        }
        stream
    }

    /// The upstream id of the request the answer is for.
    pub(crate) fn uid(&self) -> u64 {
        self.uid
    }

    /// Whether the tail is still wanted: false once the session let the answer go or it was
    /// ended; what follows is then read past.
    pub(crate) fn wanted(&self) -> bool {
        self.sink.is_some()
    }

    /// Sends the next piece (a character cut at its end goes with the next one); one that is
    /// not UTF-8 ends the answer with an error.
    pub(crate) async fn part(&mut self, bytes: Vec<u8>) {
        if !self.wanted() {
            return;
        }
        match self.utf8.text(bytes) {
            Ok(text) if text.is_empty() => {}
            Ok(text) => self.give(TailPiece::Part(text)).await,
            Err(at) => {
                tracing::warn!(server = %self.to.name, at, "upstream answered with a message that is not UTF-8; cut it short");
                let error = self.not_utf8();
                self.abort(error).await;
            }
        }
    }

    /// The answer is complete (unless it ended inside a character).
    pub(crate) async fn end(&mut self) {
        if !self.wanted() {
            return;
        }
        if self.utf8.incomplete() {
            tracing::warn!(server = %self.to.name, "upstream answered with a message that is not UTF-8; cut it short");
            let error = self.not_utf8();
            self.abort(error).await;
        } else {
            self.give(TailPiece::End).await;
            self.sink = None;
        }
    }

    /// The answer passed the size limit of `max` bytes: ended where it is, with `-32603`.
    pub(crate) async fn over_limit(&mut self, max: usize) {
        if !self.wanted() {
            return;
        }
        tracing::warn!(server = %self.to.name, uid = self.uid, "upstream answered with a message over the size limit; cut it short");
        let name = self.to.name;
        let why = format!(
            "upstream `{name}` answered with a message of more than {max} bytes, over the \
             proxy's limit of {max} bytes (max_message_bytes); the part of it within the limit \
             had been forwarded"
        );
        let error = self.fail(INTERNAL_ERROR, &why);
        self.abort(error).await;
    }

    /// The answer broke off (`why`: the body or the event stream ended or failed): ended where
    /// it is, with `-32001` naming the server and the method.
    pub(crate) async fn broken(&mut self, why: impl fmt::Display) {
        if !self.wanted() {
            return;
        }
        tracing::warn!(server = %self.to.name, %why, "upstream's answer broke off; cut it short");
        let why = format!(
            "upstream `{}` failed `{}`: {why}",
            self.to.name, self.to.method
        );
        let error = self.fail(UPSTREAM_UNAVAILABLE, &why);
        self.abort(error).await;
    }

    fn fail(&self, code: i64, why: &str) -> String {
        jsonrpc::error(Some(&self.client_id), code, why)
    }

    fn not_utf8(&self) -> String {
        let why = format!(
            "upstream `{}` answered with a message that is not UTF-8",
            self.to.name
        );
        self.fail(INTERNAL_ERROR, &why)
    }

    /// Ends the answer with `error` for its request; nothing more is sent.
    async fn abort(&mut self, error: String) {
        self.give(TailPiece::Abort(error)).await;
        self.sink = None;
    }

    /// Sends one piece; a tail nobody reads any more is let go.
    async fn give(&mut self, piece: TailPiece) {
        if let Some(tx) = &self.sink
            && tx.send(piece).await.is_err()
        {
            self.sink = None;
        }
    }
}
