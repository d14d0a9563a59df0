//! Reading an HTTP upstream's server-sent events, as the streamable HTTP transport asks of a
//! client for both POST and GET streams: events parsed as they arrive (`sse_parser.rs`, the
//! WHATWG rules), each bounded to the proxy's message size; a large answer cut through while
//! it arrives ([`SseReader::next_cut`]); and [`Cursor`], what resuming a stream needs (the last
//! event id and the server's reconnection delay).

use std::pin::Pin;
use std::time::Duration;

use futures_util::{FutureExt, Stream, StreamExt};
use http_body_util::BodyDataStream;
use hyper::body::{Body, Bytes};

use super::cut_stream::{CutStream, CutTo, PIECE_MOST};
use super::sse_parser::{ParseError, Parser, RawEvent, Step};

/// The reconnection delay when the server announced none (the spec leaves it to the client;
/// browsers use a few seconds, the SDKs one).
pub(crate) const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// The longest reconnection delay honoured: a server asking for more is reconnected to after
/// this, so a request waiting on the stream is not held for hours.
pub(crate) const MAX_RETRY: Duration = Duration::from_secs(30);

/// One event of the stream: its data (one JSON-RPC message; `None` for an event with only
/// `id:` or `retry:`, such as a priming event, and for one cut through) and the fields resuming
/// needs.
///
/// The data is one line: where an event has several `data:` lines, the spec joins them with a
/// line feed, which is only whitespace between JSON tokens (inside a JSON string it is not
/// allowed at all), so they are joined with a space instead, and the message stays one line
/// of the session's line-framed stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) data: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) retry: Option<u64>,
    /// The upstream id of the request this event's message answered, when the message was cut
    /// through to the session as it arrived (completed, or ended with an error for that
    /// request): it is not in `data`.
    pub(crate) cut: Option<u64>,
}

impl Event {
    /// The event as the stream gave it, its data checked as UTF-8.
    fn read(raw: RawEvent) -> Result<Self, ParseError> {
        let data = match raw.data {
            Some(data) => Some(String::from_utf8(data).map_err(|_| ParseError::NotUtf8("data"))?),
            None => None,
        };
        Ok(Self {
            data: data.filter(|d| !d.trim().is_empty()),
            id: raw.id,
            retry: raw.retry,
            cut: None,
        })
    }
}

type Chunks = Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;

/// The events of one SSE response body.
pub(crate) struct SseReader {
    chunks: Chunks,
    /// What is left of the last chunk.
    current: Bytes,
    parser: Parser,
    /// What stopped an answer cut through, for the next call.
    held_back: Option<String>,
}

impl SseReader {
    /// Reads `body`, refusing an event over `max_event` bytes.
    pub(crate) fn new<B>(body: B, max_event: usize) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: std::fmt::Display,
    {
        let chunks: Chunks = Box::pin(
            BodyDataStream::new(body)
                .map(|chunk| chunk.map_err(|err| format!("the event stream broke: {err}"))),
        );
        Self {
            chunks,
            current: Bytes::new(),
            parser: Parser::new(max_event),
            held_back: None,
        }
    }

    /// The next event; `None` at the end of the stream; an error naming what broke it.
    pub(crate) async fn next(&mut self) -> Result<Option<Event>, String> {
        self.next_cut(None).await
    }

    /// Like [`next`](Self::next), and an event whose data grows past `CUT_AT` and is a result
    /// the session allows (`to`) is cut through while it arrives: its head, then its rest piece
    /// by piece, go to the session, and the event comes back with [`Event::cut`] set once it has
    /// ended. One that cannot be completed (the stream breaks or ends first, it passes the size
    /// limit, it is not UTF-8) is ended with an error for its request, and the event still comes
    /// back; what stopped it is the next call's error.
    pub(crate) async fn next_cut(
        &mut self,
        to: Option<&CutTo<'_>>,
    ) -> Result<Option<Event>, String> {
        if let Some(err) = self.held_back.take() {
            return Err(err);
        }
        self.parser.watch = to.is_some();
        let mut cut: Option<CutStream<'_>> = None;
        loop {
            match self.parser.feed(&mut self.current) {
                Ok(Step::Event(raw)) => {
                    let Some(mut stream) = cut else {
                        return Event::read(raw).map(Some).map_err(|err| err.to_string());
                    };
                    stream.part(raw.data.unwrap_or_default()).await;
                    stream.end().await;
                    return Ok(Some(Event {
                        data: None,
                        id: raw.id,
                        retry: raw.retry,
                        cut: Some(stream.uid()),
                    }));
                }
                Ok(Step::PastCutAt) => {
                    if let Some(to) = to
                        && let Some(claimed) = to.table.claim(self.parser.data())
                    {
                        let head = self.parser.take_data();
                        cut = Some(CutStream::start(to, claimed, &head).await);
                    }
                    continue;
                }
                Ok(Step::More) => {}
                Err(err) => {
                    let Some(stream) = &mut cut else {
                        return Err(err.to_string());
                    };
                    match err {
                        ParseError::TooLarge(max) => stream.over_limit(max).await,
                        ParseError::NotUtf8(_) => stream.broken(&err).await,
                    }
                    return Ok(Some(self.stopped(stream.uid(), err.to_string())));
                }
            }
            // Everything that came has been read: gather what else has arrived before sending a
            // piece of an answer cut through, then wait for more.
            let next = match &mut cut {
                Some(stream) => {
                    let ready = if self.parser.data().len() < PIECE_MOST {
                        self.chunks.next().now_or_never()
                    } else {
                        None
                    };
                    match ready {
                        Some(next) => next,
                        None => {
                            stream.part(self.parser.take_data()).await;
                            self.chunks.next().await
                        }
                    }
                }
                None => self.chunks.next().await,
            };
            match next {
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(err)) => {
                    let Some(stream) = &mut cut else {
                        return Err(err);
                    };
                    stream.broken(&err).await;
                    return Ok(Some(self.stopped(stream.uid(), err)));
                }
                None => {
                    let Some(stream) = &mut cut else {
                        return Ok(None);
                    };
                    let why = "the event stream ended before the answer did";
                    stream.broken(why).await;
                    return Ok(Some(self.stopped(stream.uid(), why.to_owned())));
                }
            }
        }
    }

    /// The event of an answer cut through that `why` stopped, which the next call reports.
    fn stopped(&mut self, uid: u64, why: String) -> Event {
        self.held_back = Some(why);
        Event {
            data: None,
            id: None,
            retry: None,
            cut: Some(uid),
        }
    }
}

/// Where a broken stream can be picked up again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// The last event id the server gave (`Last-Event-ID` on reconnecting); an empty `id:`
    /// clears it, as the spec says.
    pub(crate) last_event_id: Option<String>,
    /// The server's last `retry:`.
    retry: Option<Duration>,
}

impl Cursor {
    /// Takes in what `event` says about resuming.
    pub(crate) fn note(&mut self, event: &Event) {
        if let Some(id) = &event.id {
            self.last_event_id = (!id.is_empty()).then(|| id.clone());
        }
        if let Some(ms) = event.retry {
            self.retry = Some(Duration::from_millis(ms));
        }
    }

    /// How long to wait before reconnecting: the server's `retry:` (at most [`MAX_RETRY`]),
    /// else [`DEFAULT_RETRY`].
    pub(crate) fn delay(&self) -> Duration {
        self.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::StreamBody;
    use hyper::body::Frame;

    use super::*;

    /// Every event of `chunks` (fed as separate body frames), or the error that ended them.
    async fn read(chunks: &[&[u8]], max: usize) -> (Vec<Event>, Option<String>) {
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let body = StreamBody::new(futures_util::stream::iter(frames));
        let mut reader = SseReader::new(body, max);
        let mut events = Vec::new();
        loop {
            match reader.next().await {
                Ok(Some(event)) => events.push(event),
                Ok(None) => return (events, None),
                Err(err) => return (events, Some(err)),
            }
        }
    }

    fn data(events: &[Event]) -> Vec<&str> {
        events.iter().filter_map(|e| e.data.as_deref()).collect()
    }

    #[tokio::test]
    async fn every_line_ending_ends_lines_and_a_bom_is_skipped() {
        let (events, err) = read(
            &[b"\xEF\xBB\xBFdata: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\r\n\n"],
            1024,
        )
        .await;
        assert_eq!(err, None);
        assert_eq!(data(&events), ["a", "b", "c", "d"]);
    }

    #[tokio::test]
    async fn a_crlf_split_across_chunks_is_one_line_ending() {
        let (events, _) = read(&[b"data: a\r", b"\n", b"\r", b"\ndata: b\n\n"], 1024).await;
        assert_eq!(data(&events), ["a", "b"]);
    }

    #[tokio::test]
    async fn multi_line_data_joins_with_newlines_and_comments_are_ignored() {
        let (events, _) = read(
            &[
                b": keep-alive\ndata: {\"a\":\ndata:1}\n: between\n\n",
                b":only a comment\n\n",
            ],
            1024,
        )
        .await;
        assert_eq!(
            data(&events),
            ["{\"a\": 1}"],
            "one line, for the line-framed session"
        );
    }

    #[tokio::test]
    async fn ids_and_retry_are_kept_for_resuming() {
        let (events, _) = read(
            &[b"id: 7\nretry: 2500\ndata:\n\nid: 8\ndata: x\n\nretry: soon\nid\n\n"],
            1024,
        )
        .await;
        let mut cursor = Cursor::default();
        assert_eq!(cursor.delay(), DEFAULT_RETRY);
        cursor.note(&events[0]);
        assert_eq!(events[0].data, None, "a priming event carries no message");
        assert_eq!(cursor.last_event_id.as_deref(), Some("7"));
        assert_eq!(cursor.delay(), Duration::from_millis(2500));
        cursor.note(&events[1]);
        assert_eq!(cursor.last_event_id.as_deref(), Some("8"));
        // `retry:` that is not all digits is ignored; an empty `id` clears the last one.
        cursor.note(&events[2]);
        assert_eq!(cursor.delay(), Duration::from_millis(2500));
        assert_eq!(cursor.last_event_id, None);
        cursor.note(&Event {
            data: None,
            id: None,
            retry: Some(u64::MAX),
            cut: None,
        });
        assert_eq!(cursor.delay(), MAX_RETRY);
    }

    #[tokio::test]
    async fn an_id_with_nul_is_ignored() {
        let (events, _) = read(&[b"id: 1\n\nid: a\0b\ndata: x\n\n"], 1024).await;
        let mut cursor = Cursor::default();
        events.iter().for_each(|e| cursor.note(e));
        assert_eq!(cursor.last_event_id.as_deref(), Some("1"));
    }

    #[tokio::test]
    async fn an_unfinished_last_event_is_dropped() {
        let (events, err) = read(&[b"data: a\n\ndata: b\n"], 1024).await;
        assert_eq!((data(&events), err), (vec!["a"], None));
    }

    #[tokio::test]
    async fn an_event_that_never_ends_is_cut_off_at_the_limit() {
        let line = vec![b'x'; 600];
        let (events, err) = read(&[b"data: ok\n\n", b"data: ", &line, &line], 1000).await;
        assert_eq!(data(&events), ["ok"]);
        let err = err.expect("an error");
        assert!(err.contains("size limit of 1000 bytes"), "{err}");
        // Many small events in a row are fine: the limit is per event.
        let many: Vec<&[u8]> = std::iter::repeat_n(&b"data: 0123456789\n\n"[..], 200).collect();
        let (events, err) = read(&many, 100).await;
        assert_eq!((events.len(), err), (200, None));
    }
}
