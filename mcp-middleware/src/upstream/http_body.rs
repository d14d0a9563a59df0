//! An HTTP upstream's JSON answer body, read frame by frame: into one buffer sized from its
//! `Content-Length` (never more than the limit), refused as soon as it passes the limit (a
//! server cannot make the proxy hold more), and, when it is a large result for a request the
//! session allows, cut through to the client while it arrives (`transport/cut_through.rs`),
//! as the stdio reader does with a long line.

use std::fmt;
use std::pin::Pin;
use std::task::Poll;

use http_body_util::BodyExt;
use hyper::body::{Body, Bytes};

use super::cut_stream::{CutStream, CutTo, PIECE_MOST};
use crate::transport::cut_through::{CUT_AT, Claimed};

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// It is longer than the limit: `declared` is its `Content-Length` when that said so
    /// before any of it was read.
    OverLimit {
        /// The declared length, when that was over the limit.
        declared: Option<u64>,
        /// The limit.
        max: usize,
    },
    /// It broke off (the connection closed early, a chunk was malformed).
    Broken(String),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OverLimit {
                declared: Some(len),
                max,
            } => write!(
                f,
                "an answer of {len} bytes is over the limit of {max} bytes (max_message_bytes)"
            ),
            Self::OverLimit {
                declared: None,
                max,
            } => write!(
                f,
                "an answer of more than {max} bytes is over the limit of {max} bytes \
                 (max_message_bytes)"
            ),
            Self::Broken(err) => write!(f, "the answer broke off: {err}"),
        }
    }
}

/// A body being read, with what has been read of it counted against the limit.
pub(crate) struct BodyReader<B> {
    body: B,
    max: usize,
    /// The declared length (`Content-Length`), at most `max`.
    declared: Option<usize>,
    read: usize,
    /// What ended the last piece early, for the next call.
    held_back: Option<BodyError>,
    ended: bool,
}

impl<B> BodyReader<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: fmt::Display,
{
    /// Reads `body`, whose `Content-Length` is `declared`, up to `max` bytes. A declared length
    /// over `max` is refused before anything is read.
    pub(crate) fn new(body: B, declared: Option<u64>, max: usize) -> Result<Self, BodyError> {
        let declared = match declared {
            Some(len) if len > max as u64 => {
                return Err(BodyError::OverLimit {
                    declared: Some(len),
                    max,
                });
            }
            // Not over `max`, so it fits.
            Some(len) => Some(usize::try_from(len).unwrap_or(max)),
            None => None,
        };
        Ok(Self {
            body,
            max,
            declared,
            read: 0,
            held_back: None,
            ended: false,
        })
    }

    /// The whole body, in one buffer allocated once when its length was declared.
    pub(crate) async fn read_all(mut self) -> Result<Vec<u8>, BodyError> {
        let mut buf = Vec::with_capacity(self.declared.unwrap_or(0));
        self.fill(&mut buf, usize::MAX).await?;
        Ok(buf)
    }

    /// Appends the body to `buf` until it ends (true) or `buf` holds at least `until` bytes
    /// (false). On an error `buf` holds what came before it (never more than the limit).
    pub(crate) async fn fill(
        &mut self,
        buf: &mut Vec<u8>,
        until: usize,
    ) -> Result<bool, BodyError> {
        if let Some(err) = self.held_back.take() {
            return Err(err);
        }
        while buf.len() < until && !self.ended {
            match self.body.frame().await {
                None => self.ended = true,
                Some(Err(err)) => return Err(BodyError::Broken(err.to_string())),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.count(data.len())?;
                        buf.extend_from_slice(&data);
                    }
                }
            }
        }
        // A body whose declared length has all arrived says so without another frame.
        self.ended = self.ended || self.body.is_end_stream();
        Ok(self.ended)
    }

    /// The next piece of the body: the next frame's data with whatever else has already
    /// arrived (up to [`PIECE_MOST`] bytes), so a body in many small chunks is handed on in few
    /// pieces; `None` at its end.
    pub(crate) async fn next_piece(&mut self) -> Result<Option<Vec<u8>>, BodyError> {
        if let Some(err) = self.held_back.take() {
            return Err(err);
        }
        let mut piece = loop {
            if self.ended {
                return Ok(None);
            }
            match self.body.frame().await {
                None => self.ended = true,
                Some(Err(err)) => return Err(BodyError::Broken(err.to_string())),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        self.count(data.len())?;
                        break Vec::from(data);
                    }
                }
            }
        };
        while piece.len() < PIECE_MOST && !self.ended && !self.body.is_end_stream() {
            // Only what is here now: a server pausing mid-body must not hold back what came.
            let ready =
                std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut self.body).poll_frame(cx)));
            match ready.await {
                Poll::Pending => break,
                Poll::Ready(None) => self.ended = true,
                Poll::Ready(Some(Err(err))) => {
                    self.held_back = Some(BodyError::Broken(err.to_string()));
                    break;
                }
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        if let Err(err) = self.count(data.len()) {
                            self.held_back = Some(err);
                            break;
                        }
                        piece.extend_from_slice(&data);
                    }
                }
            }
        }
        self.ended = self.ended || self.body.is_end_stream();
        Ok(Some(piece))
    }

    /// Counts `len` more bytes read: an error once the body is past the limit.
    fn count(&mut self, len: usize) -> Result<(), BodyError> {
        self.read = self.read.saturating_add(len);
        if self.read > self.max {
            self.ended = true;
            return Err(BodyError::OverLimit {
                declared: None,
                max: self.max,
            });
        }
        Ok(())
    }
}

/// At most the first `most` bytes of `body` (an error page's text), the rest left unread.
pub(crate) async fn read_prefix<B>(body: B, most: usize) -> Vec<u8>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: fmt::Display,
{
    let mut buf = Vec::new();
    if let Ok(mut reader) = BodyReader::new(body, None, usize::MAX) {
        let _ = reader.fill(&mut buf, most).await;
    }
    buf.truncate(most);
    buf
}

/// A JSON body read whole (`Some`), or cut through to the session as it arrived (`None`:
/// its head went up as [`UpstreamEvent::Streamed`], its rest as [`TailPiece`]s ending in
/// `End`, or in `Abort` with an error for its request when it could not be completed).
///
/// A body is cut through when it has grown past [`CUT_AT`] bytes without its end and its head
/// is a result for a request the session allows (`CutThrough::claim`); anything else (a small
/// body, a batch, an error, what the session does not allow) is read whole as before.
pub(crate) async fn read_or_cut<B>(
    mut reader: BodyReader<B>,
    to: CutTo<'_>,
) -> Result<Option<Vec<u8>>, BodyError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: fmt::Display,
{
    let declared = reader.declared;
    if declared.is_some_and(|len| len <= CUT_AT) {
        return reader.read_all().await.map(Some);
    }
    // Room for the head (and the frame that carries it past CUT_AT); the rest once it is known
    // that the body is kept.
    let mut buf = Vec::with_capacity(declared.map_or(2 * CUT_AT, |len| len.min(2 * CUT_AT)));
    let ended = reader.fill(&mut buf, CUT_AT + 1).await?;
    // All that was declared is here: the body is whole (what may still follow is read too).
    if ended || declared.is_some_and(|len| buf.len() >= len) {
        reader.fill(&mut buf, usize::MAX).await?;
        return Ok(Some(buf));
    }
    let Some(claimed) = to.table.claim(&buf) else {
        if let Some(len) = declared {
            buf.reserve_exact(len.saturating_sub(buf.len()));
        }
        reader.fill(&mut buf, usize::MAX).await?;
        return Ok(Some(buf));
    };
    stream(reader, buf, claimed, &to).await;
    Ok(None)
}

/// Forwards a claimed answer while it arrives, as `stdio.rs::cut_through` does with a line
/// ([`CutStream`]). An answer the session no longer wants is read to its end (within the limit)
/// and dropped.
async fn stream<B>(mut reader: BodyReader<B>, mut head: Vec<u8>, claimed: Claimed, to: &CutTo<'_>)
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: fmt::Display,
{
    line_breaks_to_spaces(&mut head);
    let mut cut = CutStream::start(to, claimed, &head).await;
    drop(head);
    loop {
        match reader.next_piece().await {
            Ok(Some(mut bytes)) => {
                if cut.wanted() {
                    line_breaks_to_spaces(&mut bytes);
                    cut.part(bytes).await;
                }
            }
            Ok(None) => return cut.end().await,
            Err(BodyError::OverLimit { max, .. }) => return cut.over_limit(max).await,
            Err(err @ BodyError::Broken(_)) => return cut.broken(err).await,
        }
    }
}

/// JSON whitespace for the line breaks in a piece of an answer cut through: the client's
/// writer (a stdio line, an SSE `data:` field) must not see a raw `\r` or `\n` inside the
/// message. Between tokens they are whitespace, as a space is; inside a string they were
/// invalid JSON already.
fn line_breaks_to_spaces(bytes: &mut [u8]) {
    let mut from = 0;
    while let Some(at) = memchr::memchr2(b'\r', b'\n', &bytes[from..]) {
        bytes[from + at] = b' ';
        from += at + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::cut_through::{CutThrough, TailPiece};
    use crate::upstream::{ReaderOut, UpstreamEvent};
    use http_body_util::StreamBody;
    use hyper::body::Frame;
    use std::sync::Arc;
    use tokio::sync::mpsc;

    type TestBody =
        StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, String>>>>;

    /// A body of these frames (`Err`: the body breaks there).
    fn body(frames: Vec<Result<&[u8], &str>>) -> TestBody {
        let frames: Vec<Result<Frame<Bytes>, String>> = frames
            .into_iter()
            .map(|frame| match frame {
                Ok(bytes) => Ok(Frame::data(Bytes::copy_from_slice(bytes))),
                Err(err) => Err(err.to_owned()),
            })
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    async fn whole(
        frames: Vec<Result<&[u8], &str>>,
        declared: Option<u64>,
        max: usize,
    ) -> Result<Vec<u8>, BodyError> {
        BodyReader::new(body(frames), declared, max)?
            .read_all()
            .await
    }

    #[tokio::test]
    async fn a_chunked_body_is_read_whole_into_one_buffer() {
        let got = whole(vec![Ok(b"{\"a\":"), Ok(b""), Ok(b"1}")], None, 100).await;
        assert_eq!(got.unwrap(), b"{\"a\":1}");
        let got = whole(vec![Ok(b"12345"), Ok(b"67890")], Some(10), 10).await;
        assert_eq!(
            got.unwrap(),
            b"1234567890",
            "exactly the limit is within it"
        );
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_as_soon_as_it_passes_it() {
        // Declared over the limit: refused before a byte is read.
        let refused = BodyReader::new(body(vec![]), Some(100 << 30), 1024).err();
        assert_eq!(
            refused,
            Some(BodyError::OverLimit {
                declared: Some(100 << 30),
                max: 1024
            })
        );
        assert!(
            refused
                .unwrap()
                .to_string()
                .contains("107374182400 bytes is over the limit")
        );
        // Undeclared (chunked): refused at the frame that passes it; the frames after it are
        // never read (the last one would break the body).
        let mut reader = BodyReader::new(
            body(vec![Ok(b"123"), Ok(b"4567"), Err("never read")]),
            None,
            5,
        )
        .unwrap();
        let mut buf = Vec::new();
        let got = reader.fill(&mut buf, usize::MAX).await;
        assert_eq!(
            got,
            Err(BodyError::OverLimit {
                declared: None,
                max: 5
            })
        );
        assert_eq!(buf, b"123", "nothing past the limit is held");
        assert!(got.unwrap_err().to_string().contains("more than 5 bytes"));
    }

    #[tokio::test]
    async fn a_content_length_that_lies_changes_nothing_but_the_first_allocation() {
        // Says less than comes: the body is read as it comes, still within the limit.
        let got = whole(vec![Ok(b"1234"), Ok(b"5678")], Some(2), 100).await;
        assert_eq!(got.unwrap(), b"12345678");
        // Says less than comes, and what comes is over the limit: refused all the same.
        let got = whole(vec![Ok(b"1234"), Ok(b"5678")], Some(2), 6).await;
        assert!(matches!(
            got,
            Err(BodyError::OverLimit { declared: None, .. })
        ));
        // Says more than comes (the limit, not the lie, bounds what is allocated).
        let reader = BodyReader::new(body(vec![Ok(b"12")]), Some(1000), 1000).unwrap();
        assert_eq!(reader.read_all().await.unwrap(), b"12");
    }

    #[tokio::test]
    async fn a_body_that_breaks_off_is_an_error_not_an_empty_answer() {
        let got = whole(vec![Ok(b"{\"a\""), Err("connection closed")], None, 100).await;
        assert_eq!(got, Err(BodyError::Broken("connection closed".into())));
        assert!(
            got.unwrap_err()
                .to_string()
                .contains("broke off: connection closed")
        );
    }

    #[tokio::test]
    async fn pieces_gather_what_has_arrived_and_hold_an_error_for_the_next_call() {
        let mut reader = BodyReader::new(
            body(vec![Ok(b"ab"), Ok(b"cd"), Ok(b""), Ok(b"ef"), Err("cut")]),
            None,
            100,
        )
        .unwrap();
        assert_eq!(reader.next_piece().await.unwrap().unwrap(), b"abcdef");
        assert_eq!(
            reader.next_piece().await,
            Err(BodyError::Broken("cut".into()))
        );
        let mut reader = BodyReader::new(body(vec![Ok(b"ab"), Ok(b"cd")]), None, 3).unwrap();
        assert_eq!(reader.next_piece().await.unwrap().unwrap(), b"ab");
        assert!(matches!(
            reader.next_piece().await,
            Err(BodyError::OverLimit { .. })
        ));
        let mut reader = BodyReader::new(body(vec![Ok(b"ab")]), None, 3).unwrap();
        assert_eq!(reader.next_piece().await.unwrap().unwrap(), b"ab");
        assert_eq!(reader.next_piece().await, Ok(None));
        assert_eq!(
            read_prefix(body(vec![Ok(b"12345"), Ok(b"678")]), 6).await,
            b"123456"
        );
    }

    #[test]
    fn line_breaks_become_spaces() {
        let mut text = b"{\r\n \"a\":\n1}\n".to_vec();
        line_breaks_to_spaces(&mut text);
        assert_eq!(text, b"{   \"a\": 1} ");
    }

    /// What reading `frames` as the answer to request 7 (allowed under client id `"c"`) sends
    /// up, and what it returns.
    async fn cut(frames: Vec<Result<&[u8], &str>>, max: usize) -> (Option<Vec<u8>>, Vec<String>) {
        let table = Arc::new(CutThrough::default());
        table.allow(7, "\"c\"".into());
        let (tx, mut rx) = mpsc::channel(8);
        let (events, _step_out) = ReaderOut::new(tx);
        let reader = BodyReader::new(body(frames), None, max).unwrap();
        let to = CutTo {
            table: &table,
            events: &events,
            generation: 1,
            name: "up",
            method: "tools/list",
        };
        let kept = read_or_cut(reader, to).await.unwrap();
        drop(events);
        let mut seen = Vec::new();
        while let Some(event) = rx.recv().await {
            match event {
                UpstreamEvent::Streamed {
                    head, tail, uid, ..
                } => {
                    assert_eq!(uid, 7);
                    seen.push(format!("head {head}"));
                    let mut tail = tail.0;
                    while let Some(piece) = tail.recv().await {
                        seen.push(match piece {
                            TailPiece::Part(text) => format!("part {}", text.len()),
                            TailPiece::End => "end".into(),
                            TailPiece::Abort(error) => format!("abort {error}"),
                        });
                    }
                }
                UpstreamEvent::Line { line, .. } => seen.push(format!("line {line}")),
                _ => seen.push("other".into()),
            }
        }
        (kept, seen)
    }

    #[tokio::test]
    async fn a_large_result_is_cut_through_with_the_clients_id_and_its_end() {
        let head = br#"{"jsonrpc":"2.0","id":7,"result":{"text":""#;
        let filler = vec![b'x'; CUT_AT];
        let (kept, seen) = cut(
            vec![Ok(head), Ok(&filler), Ok(b"\n"), Ok(b"\"}}\r\n")],
            4 * CUT_AT,
        )
        .await;
        assert_eq!(kept, None);
        assert_eq!(seen.len(), 3, "{:.200?}", seen);
        assert!(seen[0].starts_with(r#"head {"jsonrpc":"2.0","id":"c","result":{"text":"xxx"#));
        assert_eq!(seen[1], "part 6");
        assert_eq!(seen[2], "end");
    }

    #[tokio::test]
    async fn a_cut_answer_that_breaks_or_passes_the_limit_ends_in_an_error_for_its_request() {
        let head = br#"{"jsonrpc":"2.0","id":7,"result":{"text":""#;
        let filler = vec![b'x'; CUT_AT];
        let (_, seen) = cut(vec![Ok(head), Ok(&filler), Err("reset")], 4 * CUT_AT).await;
        assert!(
            seen[1].starts_with(r#"abort {"jsonrpc":"2.0","id":"c","error":{"code":-32001"#),
            "{}",
            seen[1]
        );
        assert!(seen[1].contains("failed `tools/list`: the answer broke off: reset"));
        let (_, seen) = cut(vec![Ok(head), Ok(&filler), Ok(&filler)], CUT_AT + 100).await;
        assert!(
            seen[1].contains("over the proxy's limit of 65636 bytes"),
            "{}",
            seen[1]
        );
        let (_, seen) = cut(vec![Ok(head), Ok(&filler), Ok(b"\xff\"}}")], 4 * CUT_AT).await;
        assert!(seen[1].contains("not UTF-8"), "{}", seen[1]);
    }

    #[tokio::test]
    async fn small_bodies_batches_and_unclaimed_answers_are_read_whole() {
        let small = br#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        assert_eq!(
            cut(vec![Ok(small)], 4 * CUT_AT).await,
            (Some(small.to_vec()), vec![])
        );
        let filler = vec![b' '; CUT_AT];
        let batch = [
            &b"["[..],
            &filler,
            br#"{"jsonrpc":"2.0","id":7,"result":{}}]"#,
        ]
        .concat();
        assert_eq!(
            cut(vec![Ok(&batch[..10]), Ok(&batch[10..])], 4 * CUT_AT).await,
            (Some(batch.clone()), vec![])
        );
        let other = [
            &br#"{"jsonrpc":"2.0","id":8,"result":{"text":""#[..],
            &filler,
            b"\"}}",
        ]
        .concat();
        assert_eq!(
            cut(vec![Ok(&other)], 4 * CUT_AT).await.0,
            Some(other.clone()),
            "not allowed"
        );
        // Whole in its first frames although long: read whole.
        let whole_at_once = [
            &br#"{"jsonrpc":"2.0","id":7,"result":{"text":""#[..],
            &filler,
            b"\"}}",
        ]
        .concat();
        let reader = BodyReader::new(
            body(vec![Ok(&whole_at_once)]),
            Some(whole_at_once.len() as u64),
            4 * CUT_AT,
        )
        .unwrap();
        let table = CutThrough::default();
        table.allow(7, "1".into());
        let (tx, _rx) = mpsc::channel(8);
        let (events, _step_out) = ReaderOut::new(tx);
        let to = CutTo {
            table: &table,
            events: &events,
            generation: 1,
            name: "up",
            method: "m",
        };
        assert_eq!(
            read_or_cut(reader, to).await.unwrap(),
            Some(whole_at_once.clone())
        );
        assert_eq!(table.len(), 1, "not claimed");
    }
}
