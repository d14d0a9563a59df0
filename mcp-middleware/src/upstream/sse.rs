//! Reading an HTTP upstream's server-sent events: the parsing is `sse-stream`'s (the WHATWG
//! event-stream rules: `LF`, `CR` and `CRLF` line endings, a leading BOM, comments, multi-line
//! `data:`, `id:` without NUL, `retry:` of digits only, an unfinished last event dropped),
//! bounded here to the proxy's message size; [`Cursor`] keeps what resuming a stream needs (the
//! last event id and the server's reconnection delay), as the streamable HTTP transport asks of
//! a client for both POST and GET streams.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use http_body_util::BodyDataStream;
use hyper::body::{Body, Bytes};
use sse_stream::SseByteStream;

/// The reconnection delay when the server announced none (the spec leaves it to the client;
/// browsers use a few seconds, the SDKs one).
pub(crate) const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// The longest reconnection delay honoured: a server asking for more is reconnected to after
/// this, so a request waiting on the stream is not held for hours.
pub(crate) const MAX_RETRY: Duration = Duration::from_secs(30);

/// One event of the stream: its data (one JSON-RPC message; `None` for an event with only
/// `id:` or `retry:`, such as a priming event) and the fields resuming needs.
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
}

/// Why reading the stream stopped short.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error("the event stream broke: {0}")]
    Body(String),
    #[error("an event over the size limit of {0} bytes")]
    TooLarge(usize),
}

type Chunks = Pin<Box<dyn Stream<Item = Result<Bytes, ReadError>> + Send>>;

/// The events of one SSE response body.
pub(crate) struct SseReader {
    events: Pin<Box<SseByteStream<Chunks>>>,
    /// Bytes received since the last event came out: what the parser may be holding, kept
    /// under the size limit so an event that never ends cannot grow without bound.
    pending: Arc<AtomicUsize>,
}

impl SseReader {
    /// Reads `body`, refusing an event over `max_event` bytes.
    pub(crate) fn new<B>(body: B, max_event: usize) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: std::fmt::Display,
    {
        let pending = Arc::new(AtomicUsize::new(0));
        let counted = pending.clone();
        let chunks: Chunks = Box::pin(BodyDataStream::new(body).map(move |chunk| {
            let chunk = chunk.map_err(|err| ReadError::Body(err.to_string()))?;
            let held = counted.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
            if held > max_event {
                return Err(ReadError::TooLarge(max_event));
            }
            Ok(chunk)
        }));
        Self {
            events: Box::pin(SseByteStream::new(chunks)),
            pending,
        }
    }

    /// The next event; `None` at the end of the stream; an error naming what broke it.
    pub(crate) async fn next(&mut self) -> Result<Option<Event>, String> {
        match self.events.next().await {
            None => Ok(None),
            Some(Err(err)) => Err(match err {
                sse_stream::Error::Body(inner) => inner.to_string(),
                other => format!("the event stream is malformed: {other}"),
            }),
            Some(Ok(sse)) => {
                self.pending.store(0, Ordering::Relaxed);
                Ok(Some(Event {
                    data: sse
                        .data
                        .filter(|d| !d.trim().is_empty())
                        .map(|d| d.replace('\n', " ")),
                    id: sse.id,
                    retry: sse.retry,
                }))
            }
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
