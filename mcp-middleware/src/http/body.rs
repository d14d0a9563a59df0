//! Response bodies: empty, one JSON object, or a Server-Sent Events stream fed by a channel.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Bytes, Frame, SizeHint};
use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};

use crate::transport::queue::Ticket;

use super::authn::Validity;

/// One message on its way to a client's SSE stream.
#[derive(Debug)]
pub(crate) struct Delivery {
    /// The SSE event id; `None` on streams that are not resumable (2026-07-28 requests).
    pub(crate) id: Option<Arc<str>>,
    /// The JSON-RPC message (or, cut through, a piece of it).
    pub(crate) line: DeliveryText,
    /// Whether this is the response that completes the stream's request.
    pub(crate) last: bool,
    /// Whether `line` is a whole message or a piece of one cut through.
    pub(crate) framing: Framing,
    /// Counts the message toward what waits for the client until the stream has taken it
    /// (or is dropped), so a client that does not read holds the session's upstream back.
    pub(crate) _held: Option<Ticket>,
}

/// A delivery's text: a whole message shared with the event store, or a piece of a message cut
/// through, which the stream takes as it is (the event store keeps its own copy of the whole).
#[derive(Debug, Clone)]
pub(crate) enum DeliveryText {
    /// Shared: the event store keeps the same text.
    Shared(Arc<str>),
    /// The stream's own: handed to the connection without a copy.
    Owned(String),
}

impl DeliveryText {
    /// The text as a chunk of its own, without copying it.
    fn into_chunk(self) -> Bytes {
        match self {
            DeliveryText::Shared(text) => Bytes::from_owner(Shared(text)),
            DeliveryText::Owned(text) => Bytes::from(text),
        }
    }
}

impl std::ops::Deref for DeliveryText {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            DeliveryText::Shared(text) => text,
            DeliveryText::Owned(text) => text,
        }
    }
}

impl From<Arc<str>> for DeliveryText {
    fn from(text: Arc<str>) -> Self {
        DeliveryText::Shared(text)
    }
}

impl From<&str> for DeliveryText {
    fn from(text: &str) -> Self {
        DeliveryText::Shared(text.into())
    }
}

impl From<String> for DeliveryText {
    fn from(text: String) -> Self {
        DeliveryText::Owned(text)
    }
}

/// How a [`Delivery`]'s `line` is framed as SSE: a whole message is one event; a message cut
/// through (`transport/cut_through.rs`) is its head, pieces, then the event's end, so the
/// client gets each piece while the upstream is still writing the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// A whole message: one event.
    Event,
    /// The head of a message cut through: the event's `id:` and the start of its data.
    Open,
    /// More of the message opened last.
    More,
    /// The end of the message opened last (`line` is empty); `last` as for a whole message.
    Close,
}

/// Something that must happen when a stream's body goes away (the client disconnected, or
/// the stream ended): held by the body, run by its `Drop`.
pub(crate) type OnDrop = Box<dyn Send + Sync>;

/// The body of a response of the HTTP front.
pub(crate) enum Body {
    /// No body (`202 Accepted`, `200` to `DELETE`).
    Empty,
    /// A whole body sent at once.
    Full(Option<Bytes>),
    /// An SSE stream.
    Sse(Box<SseBody>),
}

impl Body {
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        Body::Full(Some(bytes.into()))
    }
}

/// An SSE stream: a first chunk (priming event, `retry:`), then one event per delivery, with a
/// comment line whenever the stream has been quiet for the keep-alive interval.
pub(crate) struct SseBody {
    head: Option<Bytes>,
    /// A delivery that arrived before the stream started: it goes out in the first chunk.
    first: Option<Delivery>,
    /// Chunks of a large event still to go, after the one just handed out.
    queued: VecDeque<Bytes>,
    deliveries: mpsc::UnboundedReceiver<Delivery>,
    keep_alive: Option<Interval>,
    /// Whether a message cut through has been opened and not yet closed.
    event_open: bool,
    ended: bool,
    /// The credential the stream was opened with: once it lapses the stream ends.
    validity: Option<Validity>,
    _on_drop: Option<OnDrop>,
}

impl SseBody {
    pub(crate) fn new(
        head: Option<Bytes>,
        deliveries: mpsc::UnboundedReceiver<Delivery>,
        keep_alive: Duration,
        on_drop: Option<OnDrop>,
    ) -> Self {
        let keep_alive = (!keep_alive.is_zero()).then(|| {
            let mut interval =
                tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            interval
        });
        Self {
            head,
            first: None,
            queued: VecDeque::new(),
            deliveries,
            keep_alive,
            event_open: false,
            ended: false,
            validity: None,
            _on_drop: on_drop,
        }
    }

    /// Starts the stream with `first`, a delivery taken from its channel before the response
    /// went out: it leaves in the same chunk as the head, so a quick answer costs the client one
    /// read and the connection one write.
    pub(crate) fn with_first(mut self, first: Option<Delivery>) -> Self {
        self.first = first;
        self
    }

    /// Whether nothing is left to hand out: the connection then ends the body with its last
    /// chunk instead of asking once more.
    fn done(&self) -> bool {
        self.ended && self.head.is_none() && self.first.is_none() && self.queued.is_empty()
    }

    /// Ends the stream when `validity` stops holding (checked before each chunk and at each
    /// keep-alive tick).
    pub(crate) fn until(mut self, validity: Validity) -> Self {
        self.validity = (!matches!(validity, Validity::Always)).then_some(validity);
        self
    }

    /// Whether the stream's credential has lapsed (then it is over).
    fn lapsed(&mut self) -> bool {
        let lapsed = self.validity.as_mut().is_some_and(|v| !v.holds());
        if lapsed {
            tracing::debug!("an SSE stream ends: the credential it was opened with lapsed");
            self.ended = true;
        }
        lapsed
    }
}

/// The largest chunk gathered from queued deliveries before it is handed to the connection.
const GATHER: usize = 64 * 1024;

/// The smallest piece of a message cut through that goes to the connection as a chunk of its
/// own instead of a copy in a gathered one (a 1.25 MB answer from an HTTP upstream comes in
/// pieces of up to 256 KiB).
const PIECE_ALONE: usize = 16 * 1024;

/// Whether `text` can go out as it is: SSE reads a line break in it as the end of a `data:`
/// line, so a piece or message with one is framed by copying.
fn has_no_line_break(text: &str) -> bool {
    memchr::memchr2(b'\r', b'\n', text.as_bytes()).is_none()
}

/// A message handed to the connection as it is (its own chunk), not copied into an event.
struct Shared(Arc<str>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Empty => Poll::Ready(None),
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Sse(sse) => sse
                .poll_chunk(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty | Body::Full(None) => true,
            Body::Full(Some(_)) => false,
            Body::Sse(sse) => sse.done(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Empty | Body::Full(None) => SizeHint::with_exact(0),
            Body::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Body::Sse(_) => SizeHint::default(),
        }
    }
}

impl SseBody {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Some(next) = self.queued.pop_front() {
            return Poll::Ready(Some(next));
        }
        let mut out = match self.head.take() {
            Some(head) => Vec::from(head),
            None if self.ended || self.lapsed() => return Poll::Ready(None),
            None => Vec::new(),
        };
        let mut full = match self.first.take() {
            Some(first) => self.frame(first, &mut out),
            None => false,
        };
        while !full && out.len() < GATHER {
            match self.deliveries.poll_recv(cx) {
                Poll::Ready(Some(delivery)) => full = self.frame(delivery, &mut out),
                Poll::Ready(None) => {
                    self.ended = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        if !out.is_empty() {
            if let Some(keep_alive) = &mut self.keep_alive {
                keep_alive.reset();
            }
            return Poll::Ready(Some(Bytes::from(out)));
        }
        // A piece that goes as it is, with nothing gathered before it.
        if let Some(next) = self.queued.pop_front() {
            if let Some(keep_alive) = &mut self.keep_alive {
                keep_alive.reset();
            }
            return Poll::Ready(Some(next));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        // No comment inside an event being cut through: it would end the event's `data:` line
        // mid-message. The next piece (or the event's end) wakes the stream instead.
        if !self.event_open
            && let Some(keep_alive) = &mut self.keep_alive
            && keep_alive.poll_tick(cx).is_ready()
        {
            if self.lapsed() {
                return Poll::Ready(None);
            }
            return Poll::Ready(Some(Bytes::from_static(b":\n\n")));
        }
        Poll::Pending
    }

    /// Frames one delivery onto `out`; `true` when the chunk must go now (the stream's last
    /// message is in, or a large message follows as chunks of its own).
    fn frame(&mut self, delivery: Delivery, out: &mut Vec<u8>) -> bool {
        if delivery.framing != Framing::Event {
            self.event_open = delivery.framing != Framing::Close;
            if delivery.framing == Framing::Open {
                write_event_id(out, delivery.id.as_deref());
                out.extend_from_slice(b"data: ");
            }
            // A large piece goes as it is, after what was gathered before it.
            if delivery.line.len() >= PIECE_ALONE && has_no_line_break(&delivery.line) {
                self.queued.push_back(delivery.line.into_chunk());
                return true;
            }
            write_data_piece(out, &delivery.line);
            if delivery.framing == Framing::Close {
                out.extend_from_slice(b"\n\n");
                if delivery.last {
                    self.ended = true;
                    return true;
                }
            }
            return false;
        }
        // A large message on one line (JSON's usual form) goes out as its own chunk, shared
        // with the event store, instead of a copy of a megabyte.
        if delivery.line.len() >= GATHER && has_no_line_break(&delivery.line) {
            write_event_id(out, delivery.id.as_deref());
            out.extend_from_slice(b"data: ");
            self.queued.push_back(delivery.line.into_chunk());
            self.queued.push_back(Bytes::from_static(b"\n\n"));
            self.ended = delivery.last;
            return true;
        }
        write_event(out, delivery.id.as_deref(), &delivery.line);
        if delivery.last {
            self.ended = true;
            return true;
        }
        false
    }
}

/// Appends one SSE event: `id:` when given, then the message as `data:`. A JSON message has no
/// newline, but may have a carriage return as whitespace, which SSE would read as a line end:
/// each such piece becomes a `data:` line of its own, and SSE joins them with `\n`, which is
/// JSON whitespace too.
pub(crate) fn write_event(out: &mut Vec<u8>, id: Option<&str>, data: &str) {
    write_event_id(out, id);
    out.reserve(data.len() + 8);
    // A JSON-RPC message is one line (JSON escapes line breaks in strings): found with
    // `memchr`, not char by char, which was a twentieth of the proxy's CPU per HTTP request.
    let mut rest = data.as_bytes();
    loop {
        let end = memchr::memchr2(b'\r', b'\n', rest).unwrap_or(rest.len());
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&rest[..end]);
        out.push(b'\n');
        if end == rest.len() {
            break;
        }
        rest = &rest[end + 1..];
    }
    out.push(b'\n');
}

/// Appends a piece of an event's data: a line break in it (JSON whitespace) starts a new
/// `data:` line, which SSE joins back with `\n`, as [`write_event`] does for a whole message.
fn write_data_piece(out: &mut Vec<u8>, piece: &str) {
    out.reserve(piece.len());
    let mut rest = piece.as_bytes();
    while let Some(end) = memchr::memchr2(b'\r', b'\n', rest) {
        out.extend_from_slice(&rest[..end]);
        out.extend_from_slice(b"\ndata: ");
        rest = &rest[end + 1..];
    }
    out.extend_from_slice(rest);
}

/// An event's `id:` line, when it has an id.
fn write_event_id(out: &mut Vec<u8>, id: Option<&str>) {
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
}

/// The first chunk of a resumable stream: the reconnection delay and a priming event (an id
/// with empty data), so a client that loses the connection before any message can resume.
pub(crate) fn priming(id: &str, retry_ms: u64) -> Bytes {
    let mut out = Vec::with_capacity(48);
    out.extend_from_slice(format!("retry: {retry_ms}\n").as_bytes());
    write_event(&mut out, Some(id), "");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_framed_as_sse() {
        let mut out = Vec::new();
        write_event(&mut out, Some("3-1"), r#"{"a":1}"#);
        write_event(&mut out, None, "{\"a\":\r1}");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "id: 3-1\ndata: {\"a\":1}\n\ndata: {\"a\":\ndata: 1}\n\n"
        );
        assert_eq!(&priming("1-0", 500)[..], b"retry: 500\nid: 1-0\ndata: \n\n");
    }

    /// A stream that starts with its answer already in hand hands out the priming event and
    /// the answer as one chunk and is then over, so the connection writes the response's
    /// head, the event and the body's end at once.
    #[test]
    fn a_first_answer_leaves_with_the_priming_event_in_one_chunk() {
        let (tx, rx) = mpsc::unbounded_channel();
        let answer = Delivery {
            id: Some("4-1".into()),
            line: r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into(),
            last: true,
            framing: Framing::Event,
            _held: None,
        };
        let mut body = Body::Sse(Box::new(
            SseBody::new(Some(priming("4-0", 500)), rx, Duration::ZERO, None)
                .with_first(Some(answer)),
        ));
        assert!(!hyper::body::Body::is_end_stream(&body));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let Poll::Ready(Some(Ok(frame))) =
            hyper::body::Body::poll_frame(Pin::new(&mut body), &mut cx)
        else {
            panic!("the first chunk is ready at once");
        };
        let mut expected = priming("4-0", 500).to_vec();
        write_event(
            &mut expected,
            Some("4-1"),
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        );
        assert_eq!(frame.into_data().ok().as_deref(), Some(&expected[..]));
        assert!(
            hyper::body::Body::is_end_stream(&body),
            "nothing is left after the stream's last message"
        );
        drop(tx);
    }

    /// A first message that is not the answer starts the stream, and the rest follows.
    #[test]
    fn a_first_message_before_the_answer_opens_the_stream() {
        let (tx, rx) = mpsc::unbounded_channel();
        let note = |line: &str, id: &str, last| Delivery {
            id: Some(id.into()),
            line: line.into(),
            last,
            framing: Framing::Event,
            _held: None,
        };
        let mut body =
            SseBody::new(Some(priming("5-0", 500)), rx, Duration::ZERO, None).with_first(Some(
                note(r#"{"method":"notifications/progress"}"#, "5-1", false),
            ));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let Poll::Ready(Some(first)) = body.poll_chunk(&mut cx) else {
            panic!("the first chunk is ready at once");
        };
        let mut expected = priming("5-0", 500).to_vec();
        write_event(
            &mut expected,
            Some("5-1"),
            r#"{"method":"notifications/progress"}"#,
        );
        assert_eq!(&first[..], &expected[..]);
        assert!(body.poll_chunk(&mut cx).is_pending());
        assert!(!body.done());
        tx.send(note(r#"{"id":1,"result":{}}"#, "5-2", true))
            .unwrap();
        let Poll::Ready(Some(second)) = body.poll_chunk(&mut cx) else {
            panic!("the answer follows");
        };
        let mut expected = Vec::new();
        write_event(&mut expected, Some("5-2"), r#"{"id":1,"result":{}}"#);
        assert_eq!(&second[..], &expected[..]);
        assert!(body.done());
    }

    /// A large message is handed over as its own chunk, and the stream reads exactly as if it
    /// had been copied into the event.
    #[test]
    fn a_large_message_is_framed_as_any_other() {
        let (tx, rx) = mpsc::unbounded_channel();
        let large: Arc<str> = format!("{{\"x\":\"{}\"}}", "y".repeat(3 * GATHER)).into();
        let send = |line: &Arc<str>, id: &str, last| {
            tx.send(Delivery {
                id: Some(id.into()),
                line: line.clone().into(),
                last,
                framing: Framing::Event,
                _held: None,
            })
            .unwrap();
        };
        send(&Arc::from(r#"{"a":1}"#), "1-1", false);
        send(&large, "1-2", false);
        send(&Arc::from(r#"{"b":2}"#), "1-3", true);
        let mut body = SseBody::new(None, rx, Duration::ZERO, None);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut got = Vec::new();
        let mut chunks = 0;
        while let Poll::Ready(Some(chunk)) = body.poll_chunk(&mut cx) {
            got.extend_from_slice(&chunk);
            chunks += 1;
        }
        let mut expected = Vec::new();
        write_event(&mut expected, Some("1-1"), r#"{"a":1}"#);
        write_event(&mut expected, Some("1-2"), &large);
        write_event(&mut expected, Some("1-3"), r#"{"b":2}"#);
        assert_eq!(
            String::from_utf8(got).unwrap(),
            String::from_utf8(expected).unwrap()
        );
        assert!(
            chunks >= 4,
            "the large message went out as a chunk of its own"
        );
    }

    /// A message cut through reads, once its pieces are in, exactly as the whole message
    /// framed at once, line breaks in its whitespace included; each piece goes out as it comes.
    #[test]
    fn a_message_cut_through_is_framed_as_the_whole_one() {
        let (tx, rx) = mpsc::unbounded_channel();
        let send = |line: &str, framing, last| {
            tx.send(Delivery {
                id: (framing == Framing::Open).then(|| "2-1".into()),
                line: line.into(),
                last,
                framing,
                _held: None,
            })
            .unwrap();
        };
        let mut body = SseBody::new(None, rx, Duration::ZERO, None);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        send(r#"{"id":1,"result":{"#, Framing::Open, false);
        let Poll::Ready(Some(first)) = body.poll_chunk(&mut cx) else {
            panic!("the head goes out before the rest arrives");
        };
        assert_eq!(&first[..], b"id: 2-1\ndata: {\"id\":1,\"result\":{");
        assert!(body.poll_chunk(&mut cx).is_pending());
        send("\"a\":\r1,", Framing::More, false);
        send("\"b\":2}}", Framing::More, false);
        send("", Framing::Close, true);
        let mut got = first.to_vec();
        while let Poll::Ready(Some(chunk)) = body.poll_chunk(&mut cx) {
            got.extend_from_slice(&chunk);
        }
        let mut expected = Vec::new();
        write_event(
            &mut expected,
            Some("2-1"),
            "{\"id\":1,\"result\":{\"a\":\r1,\"b\":2}}",
        );
        assert_eq!(
            String::from_utf8(got).unwrap(),
            String::from_utf8(expected).unwrap()
        );
    }

    /// Large pieces of a message cut through go to the connection as they are (the very
    /// buffers, not copies), between the gathered framing, and the stream still reads as the
    /// whole message framed at once.
    #[test]
    fn large_pieces_go_out_without_a_copy() {
        let (tx, rx) = mpsc::unbounded_channel();
        let head = format!(
            "{{\"id\":1,\"result\":{{\"x\":\"{}",
            "h".repeat(PIECE_ALONE)
        );
        let middle = "m".repeat(2 * PIECE_ALONE);
        let pieces = [
            (head.clone(), Framing::Open),
            ("\",\"a\":\r1,\"y\":\"".to_owned(), Framing::More),
            (middle.clone(), Framing::More),
            ("\"}}".to_owned(), Framing::More),
        ];
        let mut addresses = Vec::new();
        for (text, framing) in pieces {
            addresses.push((text.as_ptr() as usize, text.len()));
            tx.send(Delivery {
                id: (framing == Framing::Open).then(|| "3-1".into()),
                line: text.into(),
                last: false,
                framing,
                _held: None,
            })
            .unwrap();
        }
        tx.send(Delivery {
            id: None,
            line: "".into(),
            last: true,
            framing: Framing::Close,
            _held: None,
        })
        .unwrap();
        let mut body = SseBody::new(None, rx, Duration::ZERO, None);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut got = Vec::new();
        let mut chunks = Vec::new();
        while let Poll::Ready(Some(chunk)) = body.poll_chunk(&mut cx) {
            got.extend_from_slice(&chunk);
            chunks.push((chunk.as_ptr() as usize, chunk.len()));
        }
        assert!(body.done());
        for large in [0, 2] {
            assert!(
                chunks.contains(&addresses[large]),
                "piece {large} went out as its own buffer"
            );
        }
        assert!(
            !chunks.contains(&addresses[1]),
            "a small piece (with a line break) is framed in a gathered chunk"
        );
        let mut expected = Vec::new();
        let whole = format!("{head}\",\"a\":\r1,\"y\":\"{middle}\"}}}}");
        write_event(&mut expected, Some("3-1"), &whole);
        assert_eq!(got, expected);
    }

    /// A stream quiet for longer than its keep-alive interval while a message cut through is
    /// open (its upstream paused mid-answer) writes no comment into the message; once the
    /// message ends, keep-alives resume.
    #[tokio::test(start_paused = true)]
    async fn no_keep_alive_is_written_inside_a_message_cut_through() {
        let (tx, rx) = mpsc::unbounded_channel();
        let send = |line: &str, framing, last| {
            tx.send(Delivery {
                id: (framing == Framing::Open).then(|| "6-1".into()),
                line: line.into(),
                last,
                framing,
                _held: None,
            })
            .unwrap();
        };
        let mut body = SseBody::new(None, rx, Duration::from_secs(1), None);
        let poll = |body: &mut SseBody| {
            let mut cx = Context::from_waker(std::task::Waker::noop());
            match body.poll_chunk(&mut cx) {
                Poll::Ready(Some(chunk)) => Some(chunk),
                Poll::Ready(None) => panic!("the stream is not over"),
                Poll::Pending => None,
            }
        };
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(
            poll(&mut body).as_deref(),
            Some(&b":\n\n"[..]),
            "quiet: a keep-alive"
        );
        send(r#"{"id":1,"result":{"#, Framing::Open, false);
        let mut got = poll(&mut body).unwrap().to_vec();
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(poll(&mut body), None, "no comment inside the message");
        send("\"a\":1}}", Framing::More, false);
        send("", Framing::Close, false);
        while let Some(chunk) = poll(&mut body) {
            got.extend_from_slice(&chunk);
        }
        let mut expected = Vec::new();
        write_event(&mut expected, Some("6-1"), r#"{"id":1,"result":{"a":1}}"#);
        assert_eq!(
            String::from_utf8(got).unwrap(),
            String::from_utf8(expected).unwrap()
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(
            poll(&mut body).as_deref(),
            Some(&b":\n\n"[..]),
            "after it: keep-alives again"
        );
        drop(tx);
    }
}
