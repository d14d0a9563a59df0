//! Cut-through: an answer no hook touches goes to the client while it arrives, instead of
//! after its last byte.
//!
//! The session says which upstream requests qualify ([`CutThrough::allow`]: raw path, no
//! observer, no era bridging, a client transport that takes streamed lines). The upstream's
//! reader, once a line has grown past [`CUT_AT`] bytes without its end, looks at its head: a
//! result for an allowed request is claimed ([`CutThrough::claim`]), its id replaced, and the
//! rest of the line follows as [`TailPiece`]s through a bounded channel (the client's
//! back-pressure reaches the upstream through it; nothing is held whole). The writer of the
//! client's queue writes the head, then the tail as it comes, before anything queued after it,
//! so the stream's order is kept.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

/// How long a line must have grown, without its end, before it is cut through: below that
/// reading it whole costs less than streaming it.
pub(crate) const CUT_AT: usize = 64 * 1024;

/// The smallest line limit under which lines are cut through. A limit that small is a
/// deliberate "small messages only" setting: there every line is held and checked whole, so
/// an answer over it is refused cleanly instead of being cut short after its head went out.
pub(crate) const CUT_MIN_LIMIT: usize = 4 * CUT_AT;

/// How many pieces of a tail may wait for the client's writer: the bound of what a streamed
/// line holds in the proxy (about this many reads).
pub(crate) const TAIL_PIECES: usize = 8;

/// The upstream requests whose answers may be cut through, with the id the client knows each
/// by. Shared by the session (which allows and forgets) and the upstream's reader (which
/// claims); a request is claimed at most once, so its answer goes one way only.
#[derive(Debug)]
pub(crate) struct CutThrough {
    allowed: Mutex<HashMap<u64, Box<str>>>,
    /// Whether answers may be claimed now: an adapter between the reader and the session
    /// that translates what it reads (the reverse era bridge, while it does) closes it.
    open: AtomicBool,
}

impl Default for CutThrough {
    fn default() -> Self {
        Self {
            allowed: Mutex::default(),
            open: AtomicBool::new(true),
        }
    }
}

/// A line the reader claimed: the request it answers and where its id is in the head.
#[derive(Debug)]
pub(crate) struct Claimed {
    /// The upstream id of the request.
    pub(crate) uid: u64,
    /// The id the client knows the request by (raw JSON).
    pub(crate) client_id: Box<str>,
    /// Where the upstream id is in the head.
    pub(crate) id: Range<usize>,
}

impl Claimed {
    /// `head` (the line's first bytes, where [`id`](Self::id) points) with the client's id in
    /// place of the upstream's.
    pub(crate) fn splice_head(&self, head: &[u8]) -> Vec<u8> {
        let mut spliced = Vec::with_capacity(head.len() + self.client_id.len());
        spliced.extend_from_slice(&head[..self.id.start]);
        spliced.extend_from_slice(self.client_id.as_bytes());
        spliced.extend_from_slice(&head[self.id.end..]);
        spliced
    }
}

impl CutThrough {
    /// Lets the answer to upstream request `uid` be cut through, under `client_id`.
    pub(crate) fn allow(&self, uid: u64, client_id: Box<str>) {
        if let Ok(mut allowed) = self.allowed.lock() {
            allowed.insert(uid, client_id);
        }
    }

    /// The answer to `uid` is no longer to be cut through (it was answered whole, cancelled,
    /// timed out).
    pub(crate) fn forget(&self, uid: u64) {
        if let Ok(mut allowed) = self.allowed.lock() {
            allowed.remove(&uid);
        }
    }

    /// Opens or closes the table: while closed nothing is claimed.
    pub(crate) fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::Release);
    }

    /// Claims the line whose first bytes are `head`, when it is a result for an allowed
    /// request and the table is open. Only the first [`CUT_AT`] bytes are read, and the result
    /// must run past them. What follows is not read before it goes out, wherever the head
    /// ends: an HTTP upstream's reader may hold several times `CUT_AT` by now, and reading all
    /// of it (UTF-8, then JSON) was about 6% of the proxy's CPU per 1.25 MB answer.
    pub(crate) fn claim(&self, head: &[u8]) -> Option<Claimed> {
        if !self.open.load(Ordering::Acquire) {
            return None;
        }
        let head = &head[..head.len().min(CUT_AT)];
        let text = match std::str::from_utf8(head) {
            Ok(text) => text,
            // Cut inside a character: what comes before it is text.
            Err(err) => std::str::from_utf8(&head[..err.valid_up_to()]).ok()?,
        };
        let id = crate::jsonrpc::result_head(text)?;
        let uid = text[id.clone()].parse::<u64>().ok()?;
        let client_id = self.allowed.lock().ok()?.remove(&uid)?;
        Some(Claimed { uid, client_id, id })
    }

    /// How many requests are allowed and not yet answered (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.allowed.lock().map_or(0, |allowed| allowed.len())
    }
}

/// The rest of a line being cut through, piece by piece.
pub(crate) type Tail = mpsc::Receiver<TailPiece>;

/// One piece of a [`Tail`].
#[derive(Debug)]
pub(crate) enum TailPiece {
    /// More of the line (UTF-8: a character cut between reads goes with the next piece).
    Part(String),
    /// The line is complete.
    End,
    /// The line cannot be completed (over the limit, not UTF-8, the upstream closed): it is
    /// ended where it is, and this message (an error for the request) follows it.
    Abort(String),
}

/// UTF-8 checking of a line that arrives in pieces: a character cut between two reads is
/// carried to the next.
#[derive(Debug, Default)]
pub(crate) struct Utf8Pieces {
    carry: Vec<u8>,
}

impl Utf8Pieces {
    /// The text of `bytes` (with what was carried before it) up to a character cut at its end,
    /// or `Err` with where the first invalid byte is (counted from what was carried).
    pub(crate) fn text(&mut self, bytes: Vec<u8>) -> Result<String, usize> {
        let bytes = if self.carry.is_empty() {
            bytes
        } else {
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(&bytes);
            joined
        };
        // Checked once; a piece that ends inside a character (rare) is checked again up to it.
        match String::from_utf8(bytes) {
            Ok(text) => Ok(text),
            Err(err) if err.utf8_error().error_len().is_none() => {
                let valid = err.utf8_error().valid_up_to();
                let mut bytes = err.into_bytes();
                self.carry = bytes.split_off(valid);
                String::from_utf8(bytes).map_err(|err| err.utf8_error().valid_up_to())
            }
            Err(err) => Err(err.utf8_error().valid_up_to()),
        }
    }

    /// Whether a character was left cut at the end of the line.
    pub(crate) fn incomplete(&self) -> bool {
        !self.carry.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_for_an_allowed_request_is_claimed_once() {
        let table = CutThrough::default();
        table.allow(7, "\"client-7\"".into());
        table.allow(8, "8".into());
        assert!(
            table
                .claim(br#"{"jsonrpc":"2.0","id":9,"result":{"#)
                .is_none()
        );
        assert!(
            table
                .claim(br#"{"jsonrpc":"2.0","id":7,"error":{"#)
                .is_none()
        );
        assert!(table.claim(br#"{"id":7,"method":"x","params":{"#).is_none());
        let claimed = table
            .claim(br#"{"jsonrpc":"2.0","id" : 7,"result":{"text":"xx"#)
            .unwrap();
        assert_eq!((claimed.uid, &*claimed.client_id), (7, "\"client-7\""));
        assert_eq!(claimed.id, 24..25);
        assert!(
            table.claim(br#"{"id":7,"result":{"#).is_none(),
            "claimed once"
        );
        table.allow(9, "9".into());
        table.set_open(false);
        assert!(table.claim(br#"{"id":9,"result":{"#).is_none(), "closed");
        table.set_open(true);
        assert!(table.claim(br#"{"id":9,"result":{"#).is_some());
        table.forget(8);
        assert_eq!(table.len(), 0);
    }

    /// A reader may have far more than `CUT_AT` in hand when it claims: only the first
    /// `CUT_AT` bytes are read, so a result that runs past them is claimed wherever it ends.
    #[test]
    fn only_the_first_cut_at_bytes_of_a_head_are_read() {
        let table = CutThrough::default();
        table.allow(7, "\"c\"".into());
        table.allow(8, "\"d\"".into());
        let filler = "x".repeat(CUT_AT);
        let ends_later =
            format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"t":"{filler}"}},"more":1"#);
        let claimed = table.claim(ends_later.as_bytes()).unwrap();
        assert_eq!((claimed.uid, &ends_later[claimed.id]), (7, "7"));
        let ends_early = format!(r#"{{"jsonrpc":"2.0","id":8,"result":{{}},"t":"{filler}"#);
        assert!(
            table.claim(ends_early.as_bytes()).is_none(),
            "a result that ends within the first CUT_AT bytes is read whole"
        );
    }

    #[test]
    fn characters_cut_between_pieces_are_carried_and_bad_bytes_are_found() {
        let mut pieces = Utf8Pieces::default();
        let text = "añb€".as_bytes();
        assert_eq!(pieces.text(text[..2].to_vec()).unwrap(), "a");
        assert!(pieces.incomplete());
        assert_eq!(pieces.text(text[2..5].to_vec()).unwrap(), "ñb");
        assert_eq!(pieces.text(text[5..].to_vec()).unwrap(), "€");
        assert!(!pieces.incomplete());
        assert_eq!(pieces.text(b"ok\xffno".to_vec()), Err(2));
    }
}
