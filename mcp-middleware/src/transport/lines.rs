//! Newline-delimited JSON-RPC framing over byte streams: the stdio wire format of MCP.
//!
//! [`LineReader`] yields one line at a time with a bound on its length, so a peer cannot make the
//! proxy buffer without limit; [`write_lines`] drains a queue of outgoing lines, coalescing what is
//! already queued into one write.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;

use super::cut_through::{Tail, TailPiece};

/// What [`LineReader::next_line`] read.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One line, without its `\n` (or `\r\n`).
    Line(String),
    /// A line longer than the limit; its bytes were discarded up to the next `\n` (never held
    /// whole: at most the limit and one read are buffered).
    TooLong {
        /// How many bytes the line had.
        len: usize,
        /// The message's id, when its first bytes show a valid one, so a refusal can be
        /// addressed to it ([`head_of`](crate::jsonrpc::head_of)).
        id: Option<String>,
        /// Whether its first bytes show a `method`: a request or notification, not a response.
        has_method: bool,
    },
    /// A line that is not UTF-8. JSON-RPC messages are UTF-8 text.
    NotUtf8 {
        /// Where the first invalid byte is.
        at: usize,
    },
}

/// Reads newline-delimited frames with a maximum line length.
///
/// Reads go straight into the reader's own buffer; a large line is handed out without another
/// copy (the buffer becomes the line), small lines are copied out of it. `next_line` is cancel
/// safe: a partial line stays in the reader and the next call continues it.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Where the unread part of `buf` starts.
    start: usize,
    /// How far past `start` has been searched for a newline.
    scanned: usize,
    max_len: usize,
    /// An over-long line being discarded.
    discarding: Option<Discarding>,
    /// How long the last line handed over as the buffer itself was: a line that outgrows
    /// the first read chunk gets room for that much at once.
    hint: usize,
    /// The line being handed out in parts ([`LineReader::next_part`]): how many bytes of it
    /// went out so far.
    streaming: Option<usize>,
    /// Whether the line being read was offered to a claim and declined: it is not offered
    /// again.
    declined: bool,
}

/// What [`LineReader::next_piece`] read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A whole frame, as [`LineReader::next_line`] gives it.
    Frame(Frame),
    /// The first bytes of a long line its caller claimed: the rest comes from
    /// [`LineReader::next_part`].
    Head(Vec<u8>),
}

/// What [`LineReader::next_part`] read of a line handed out in parts.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// More of the line.
    More(Vec<u8>),
    /// The line's last bytes, without its `\n`.
    Last(Vec<u8>),
    /// The line went past the limit after `len` bytes: its rest is discarded (the next
    /// [`LineReader::next_piece`] ends with [`Frame::TooLong`] at its end).
    TooLong {
        /// How many bytes of it were handed out.
        len: usize,
    },
    /// The stream ended inside the line.
    Eof,
}

/// What is kept of an over-long line while the rest of it is read and thrown away.
#[derive(Debug)]
struct Discarding {
    /// Bytes seen so far.
    seen: usize,
    id: Option<String>,
    has_method: bool,
}

/// How much of an over-long line is looked at for its id.
const HEAD: usize = 4096;

/// The id and whether there is a method, from the first bytes of an over-long line.
fn head(line: &[u8]) -> (Option<String>, bool) {
    crate::jsonrpc::head_of(&line[..line.len().min(HEAD)])
}

/// How much room each read asks for at least; the buffer starts this small (an idle
/// connection holds little) and doubles while lines or bursts need more.
const READ_CHUNK: usize = 16 * 1024;

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader that accepts lines of at most `max_len` bytes.
    pub fn new(inner: R, max_len: usize) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            max_len,
            discarding: None,
            hint: 0,
            streaming: None,
            declined: false,
        }
    }

    /// The longest line accepted, in bytes.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The next frame, or `None` at the end of the stream. Empty lines are skipped. A last line
    /// without a trailing newline is still returned.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Frame>> {
        match self.next_piece(CLAIM_NONE, |_| false).await? {
            Some(Piece::Frame(frame)) => Ok(Some(frame)),
            Some(Piece::Head(_)) | None => Ok(None),
        }
    }

    /// Like [`next_line`](Self::next_line), but a line that has grown past `claim_at` bytes
    /// without its end (and is within the limit) is offered once to `claim`, with its first
    /// bytes; a line claimed is handed out as [`Piece::Head`] with what has been read of it,
    /// and its rest by [`next_part`](Self::next_part) until that says it ended. Not cancel
    /// safe once a head is out: the parts must be read.
    pub(crate) async fn next_piece(
        &mut self,
        claim_at: usize,
        mut claim: impl FnMut(&[u8]) -> bool,
    ) -> std::io::Result<Option<Piece>> {
        debug_assert!(
            self.streaming.is_none(),
            "the parts of a line were not read"
        );
        loop {
            let unread = &self.buf[self.start + self.scanned..];
            if let Some(at) = memchr::memchr(b'\n', unread) {
                let end = self.start + self.scanned + at;
                let line = self.take(end, end + 1);
                if let Some(discarding) = self.discarding.take() {
                    return Ok(Some(Piece::Frame(Frame::TooLong {
                        len: discarding.seen + line.len(),
                        id: discarding.id,
                        has_method: discarding.has_method,
                    })));
                }
                if line.len() > self.max_len {
                    let (id, has_method) = head(&line);
                    return Ok(Some(Piece::Frame(Frame::TooLong {
                        len: line.len(),
                        id,
                        has_method,
                    })));
                }
                match frame(line) {
                    Some(frame) => return Ok(Some(Piece::Frame(frame))),
                    None => continue,
                }
            }
            self.scanned = self.buf.len() - self.start;
            if self.discarding.is_none()
                && !self.declined
                && self.scanned >= claim_at
                && self.scanned <= self.max_len
            {
                if claim(&self.buf[self.start..]) {
                    let head = if self.start == 0 {
                        std::mem::take(&mut self.buf)
                    } else {
                        let head = self.buf[self.start..].to_vec();
                        self.buf.clear();
                        head
                    };
                    (self.start, self.scanned) = (0, 0);
                    self.streaming = Some(head.len());
                    return Ok(Some(Piece::Head(head)));
                }
                self.declined = true;
            }
            if let Some(discarding) = self.discarding.as_mut() {
                discarding.seen += self.scanned;
                self.buf.clear();
                (self.start, self.scanned) = (0, 0);
            } else if self.scanned > self.max_len {
                let (id, has_method) = head(&self.buf[self.start..]);
                self.discarding = Some(Discarding {
                    seen: self.scanned,
                    id,
                    has_method,
                });
                self.buf = Vec::new();
                (self.start, self.scanned) = (0, 0);
            }
            if self.start > 0 && self.start >= self.buf.len() / 2 {
                // Keep the buffer from growing without bound under a stream of small lines.
                self.buf.drain(..self.start);
                self.start = 0;
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK {
                // Grow by doubling (a large line is copied O(1) times), but never past what
                // the limit needs: an over-long line is never held whole.
                // A line that outgrew the first chunk is likely as large as the last large
                // one (the same listing again, say): room for that at once instead of
                // doubling up to it, each doubling a copy onto fresh pages.
                let floor = self.buf.len() + READ_CHUNK;
                let ceiling = (self.start + self.max_len + 2 * READ_CHUNK).max(floor);
                let mut wanted = 2 * self.buf.capacity();
                if self.buf.len() - self.start >= READ_CHUNK {
                    wanted = wanted.max(self.start + self.hint + READ_CHUNK);
                }
                let wanted = wanted.clamp(floor, ceiling);
                self.buf.reserve_exact(wanted - self.buf.len());
            }
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                let end = self.buf.len();
                if let Some(discarding) = self.discarding.take() {
                    return Ok(Some(Piece::Frame(Frame::TooLong {
                        len: discarding.seen,
                        id: discarding.id,
                        has_method: discarding.has_method,
                    })));
                }
                if self.start == end {
                    return Ok(None);
                }
                let line = self.take(end, end);
                if let Some(frame) = frame(line) {
                    return Ok(Some(Piece::Frame(frame)));
                }
                return Ok(None);
            }
        }
    }

    /// Takes `buf[start..end]` as a line and moves past `next`.
    fn take(&mut self, end: usize, next: usize) -> Vec<u8> {
        let line = if self.start == 0 && end >= self.buf.len() / 2 {
            // A large line: hand over the buffer itself, keep only what follows it.
            let rest = self.buf.split_off(next.min(self.buf.len()));
            let mut line = std::mem::replace(&mut self.buf, rest);
            line.truncate(end);
            self.start = 0;
            self.hint = line.len();
            line
        } else {
            let line = self.buf[self.start..end].to_vec();
            self.start = next;
            line
        };
        self.scanned = 0;
        self.declined = false;
        if self.start >= self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        line
    }

    /// The next part of the line handed out as [`Piece::Head`]: what is buffered of it, or the
    /// next read. The limit still holds: past it the line is discarded ([`Part::TooLong`]).
    pub(crate) async fn next_part(&mut self) -> std::io::Result<Part> {
        let Some(sent) = self.streaming else {
            return Ok(Part::Eof);
        };
        loop {
            if self.start < self.buf.len() {
                let unread = &self.buf[self.start..];
                let (end, next) = match memchr::memchr(b'\n', unread) {
                    Some(at) => (self.start + at, Some(self.start + at + 1)),
                    None => (self.buf.len(), None),
                };
                let len = end - self.start;
                if sent + len > self.max_len {
                    self.streaming = None;
                    match next {
                        Some(next) => self.start = next,
                        None => {
                            self.discarding = Some(Discarding {
                                seen: sent + len,
                                id: None,
                                has_method: false,
                            });
                            self.buf.clear();
                            self.start = 0;
                        }
                    }
                    self.scanned = 0;
                    return Ok(Part::TooLong { len: sent });
                }
                let part = self.buf[self.start..end].to_vec();
                return Ok(match next {
                    Some(next) => {
                        self.start = next;
                        self.scanned = 0;
                        self.streaming = None;
                        if self.start >= self.buf.len() {
                            self.buf.clear();
                            self.start = 0;
                        }
                        Part::Last(part)
                    }
                    None => {
                        self.buf.clear();
                        self.start = 0;
                        self.streaming = Some(sent + len);
                        Part::More(part)
                    }
                });
            }
            self.buf.clear();
            self.start = 0;
            if self.buf.capacity() < 4 * READ_CHUNK {
                self.buf.reserve_exact(4 * READ_CHUNK);
            }
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                self.streaming = None;
                return Ok(Part::Eof);
            }
        }
    }
}

/// `claim_at` that never offers a line.
const CLAIM_NONE: usize = usize::MAX;

/// A line as a frame: without its `\r`, checked to be UTF-8; `None` if it is blank.
fn frame(mut line: Vec<u8>) -> Option<Frame> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(match String::from_utf8(line) {
        Ok(line) => Frame::Line(line),
        Err(err) => Frame::NotUtf8 {
            at: err.utf8_error().valid_up_to(),
        },
    })
}

/// Writes each queued line followed by `\n` until the queue closes, then flushes and shuts the
/// writer down. Lines already queued are written together, so a burst costs one write. Each
/// line is dropped as soon as it is written (or copied into the next write).
pub async fn write_lines<W, L>(writer: W, queue: UnboundedReceiver<L>) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
    L: AsRef<[u8]>,
{
    write_out(writer, queue, |_| None, |_| {}).await
}

/// [`write_lines`] that reports, after each write, how many queued lines it has now written
/// whole (`written`), for a queue whose senders may write themselves while it is idle
/// ([`Inline`](super::queue::Inline)).
pub(crate) async fn write_lines_counted<W, L>(
    writer: W,
    queue: UnboundedReceiver<L>,
    written: impl FnMut(usize),
) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
    L: AsRef<[u8]>,
{
    write_out(writer, queue, |_| None, written).await
}

/// [`write_lines`] for a queue that may hold lines cut through: such a line's head is
/// written, then its tail as it arrives, before the lines queued after it.
pub(crate) async fn write_queued<W>(
    writer: W,
    queue: UnboundedReceiver<super::queue::Queued>,
) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    write_out(writer, queue, super::queue::Queued::take_tail, |_| {}).await
}

async fn write_out<W, L>(
    mut writer: W,
    mut queue: UnboundedReceiver<L>,
    tail_of: impl Fn(&mut L) -> Option<Tail>,
    mut written: impl FnMut(usize),
) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
    L: AsRef<[u8]>,
{
    /// Small lines are gathered into one buffer up to this size; larger ones are written directly.
    const GATHER: usize = 64 * 1024;
    // Grows to what the bursts need (at most about GATHER): an idle writer holds nothing.
    let mut buf: Vec<u8> = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        let mut lines = 0;
        while let Some(mut line) = next.take() {
            lines += 1;
            let tail = tail_of(&mut line);
            let bytes = line.as_ref();
            if let Some(tail) = tail {
                if !buf.is_empty() {
                    writer.write_all(&buf).await?;
                    buf.clear();
                }
                writer.write_all(bytes).await?;
                drop(line);
                write_tail(&mut writer, tail).await?;
            } else if bytes.len() >= GATHER {
                if !buf.is_empty() {
                    writer.write_all(&buf).await?;
                    buf.clear();
                }
                writer.write_all(bytes).await?;
                writer.write_all(b"\n").await?;
                drop(line);
            } else {
                buf.extend_from_slice(bytes);
                buf.push(b'\n');
                drop(line);
            }
            if buf.len() < GATHER {
                next = queue.try_recv().ok();
            }
        }
        if !buf.is_empty() {
            writer.write_all(&buf).await?;
            buf.clear();
        }
        writer.flush().await?;
        written(lines);
    }
    writer.shutdown().await
}

/// Writes the rest of a line cut through as it arrives, and its end. A tail that stops
/// without saying so (its reader is gone) still gets its line ended, so what follows is a
/// line of its own.
async fn write_tail<W: AsyncWrite + Unpin>(writer: &mut W, mut tail: Tail) -> std::io::Result<()> {
    while let Some(piece) = tail.recv().await {
        match piece {
            TailPiece::Part(text) => {
                writer.write_all(text.as_bytes()).await?;
                // The client sees each part as it comes: that is the point of cutting through.
                writer.flush().await?;
            }
            TailPiece::End => break,
            TailPiece::Abort(message) => {
                writer.write_all(b"\n").await?;
                writer.write_all(message.as_bytes()).await?;
                break;
            }
        }
    }
    writer.write_all(b"\n").await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` a few bytes per read, so lines straddle reads.
    async fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut builder = tokio_test_reader(input);
        let mut reader = LineReader::new(&mut builder, max);
        let mut out = Vec::new();
        while let Some(frame) = reader.next_line().await.unwrap() {
            out.push(frame);
        }
        out
    }

    fn tokio_test_reader(input: &[u8]) -> impl AsyncRead + Unpin + use<> {
        let (rx, mut tx) = tokio::io::simplex(3);
        let input = input.to_vec();
        tokio::spawn(async move {
            let _ = tx.write_all(&input).await;
            // The halves share one stream: only a shutdown tells the reader it ended.
            let _ = tx.shutdown().await;
        });
        rx
    }

    #[tokio::test]
    async fn splits_lines_across_small_reads() {
        let got = frames(b"{\"a\":1}\r\n\n  \n{\"b\":2}\nlast", 100).await;
        assert_eq!(
            got,
            vec![
                Frame::Line("{\"a\":1}".into()),
                Frame::Line("{\"b\":2}".into()),
                Frame::Line("last".into())
            ]
        );
    }

    #[tokio::test]
    async fn discards_over_long_lines_and_goes_on() {
        let got = frames(b"0123456789abc\nok\n0123456789", 8).await;
        let mut whole = LineReader::new(&b"0123456789\nok\n"[..], 8);
        assert_eq!(
            whole.next_line().await.unwrap(),
            Some(Frame::TooLong {
                len: 10,
                id: None,
                has_method: false
            })
        );
        assert_eq!(
            whole.next_line().await.unwrap(),
            Some(Frame::Line("ok".into()))
        );
        assert_eq!(
            got,
            vec![
                Frame::TooLong {
                    len: 13,
                    id: None,
                    has_method: false
                },
                Frame::Line("ok".into()),
                Frame::TooLong {
                    len: 10,
                    id: None,
                    has_method: false
                }
            ]
        );
    }

    #[tokio::test]
    async fn an_over_long_message_keeps_its_id_but_is_never_held_whole() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":"req-1","method":"x","params":{{"pad":"{}"}}}}"#,
            "y".repeat(1 << 20)
        );
        let input = format!("{big}\n{{\"id\":2}}\n");
        let mut reader = LineReader::new(tokio_test_reader(input.as_bytes()), 4096);
        assert_eq!(
            reader.next_line().await.unwrap(),
            Some(Frame::TooLong {
                len: big.len(),
                id: Some(r#""req-1""#.into()),
                has_method: true
            })
        );
        assert_eq!(
            reader.next_line().await.unwrap(),
            Some(Frame::Line(r#"{"id":2}"#.into()))
        );
    }

    #[tokio::test]
    async fn reports_invalid_utf8() {
        let got = frames(b"ab\xffcd\nok\n", 100).await;
        assert_eq!(
            got,
            vec![Frame::NotUtf8 { at: 2 }, Frame::Line("ok".into())]
        );
    }

    #[tokio::test]
    async fn reads_many_lines_from_one_read_and_large_ones_whole() {
        let big = "y".repeat(200_000);
        let mut input = String::new();
        for i in 0..50 {
            input.push_str(&format!("{{\"n\":{i}}}\n"));
        }
        input.push_str(&big);
        input.push_str("\ntail\n");
        let mut reader = LineReader::new(input.as_bytes(), 1 << 20);
        for i in 0..50 {
            let expected = Frame::Line(format!("{{\"n\":{i}}}"));
            assert_eq!(reader.next_line().await.unwrap(), Some(expected));
        }
        assert_eq!(reader.next_line().await.unwrap(), Some(Frame::Line(big)));
        assert_eq!(
            reader.next_line().await.unwrap(),
            Some(Frame::Line("tail".into()))
        );
        assert_eq!(reader.next_line().await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_large_line_after_a_large_line_is_read_whole() {
        // The second line outgrows the first chunk and gets room for the first's length at
        // once; a third, longer one still grows past that; the limit still holds.
        let (a, b, c) = ("a".repeat(70_000), "b".repeat(60_000), "c".repeat(150_000));
        let input = format!("{a}\n{b}\nsmall\n{c}\n{}\nend\n", "d".repeat(200_001));
        let got = frames(input.as_bytes(), 200_000).await;
        assert_eq!(
            got,
            vec![
                Frame::Line(a),
                Frame::Line(b),
                Frame::Line("small".into()),
                Frame::Line(c),
                Frame::TooLong {
                    len: 200_001,
                    id: None,
                    has_method: false
                },
                Frame::Line("end".into()),
            ]
        );
    }

    #[tokio::test]
    async fn a_claimed_long_line_comes_out_as_its_head_and_parts_within_the_limit() {
        let long = format!("{{\"id\":1,\"result\":\"{}\"}}", "y".repeat(100_000));
        let input = format!("short\n{long}\nafter\n{}\nend\n", "z".repeat(300_000));
        let mut reader = LineReader::new(tokio_test_reader(input.as_bytes()), 200_000);
        let mut offered = Vec::new();
        let next = async |reader: &mut LineReader<_>, offered: &mut Vec<usize>| {
            reader
                .next_piece(50_000, |head| {
                    offered.push(head.len());
                    head.starts_with(b"{")
                })
                .await
                .unwrap()
        };
        assert_eq!(
            next(&mut reader, &mut offered).await,
            Some(Piece::Frame(Frame::Line("short".into())))
        );
        let Some(Piece::Head(head)) = next(&mut reader, &mut offered).await else {
            panic!("the long line is claimed");
        };
        assert!(head.len() >= 50_000 && offered.len() == 1);
        let mut line = head;
        loop {
            match reader.next_part().await.unwrap() {
                Part::More(part) => line.extend_from_slice(&part),
                Part::Last(part) => {
                    line.extend_from_slice(&part);
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(line, long.as_bytes());
        assert_eq!(
            next(&mut reader, &mut offered).await,
            Some(Piece::Frame(Frame::Line("after".into())))
        );
        // Declined ("z" does not start with "{"): offered once, then held and refused whole.
        assert_eq!(
            next(&mut reader, &mut offered).await,
            Some(Piece::Frame(Frame::TooLong {
                len: 300_000,
                id: None,
                has_method: false
            }))
        );
        assert_eq!(offered.len(), 2);
        assert_eq!(
            next(&mut reader, &mut offered).await,
            Some(Piece::Frame(Frame::Line("end".into())))
        );
    }

    #[tokio::test]
    async fn a_claimed_line_past_the_limit_is_cut_and_the_reader_goes_on() {
        let input = format!("{}\nok\n{}", "a".repeat(300_000), "b".repeat(100_000));
        let mut reader = LineReader::new(tokio_test_reader(input.as_bytes()), 200_000);
        let Some(Piece::Head(head)) = reader.next_piece(10_000, |_| true).await.unwrap() else {
            panic!("claimed");
        };
        let mut sent = head.len();
        let cut = loop {
            match reader.next_part().await.unwrap() {
                Part::More(part) => sent += part.len(),
                Part::TooLong { len } => break len,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(cut, sent);
        assert!(sent <= 200_000);
        assert_eq!(
            reader.next_piece(10_000, |_| false).await.unwrap(),
            Some(Piece::Frame(Frame::TooLong {
                len: 300_000,
                id: None,
                has_method: false
            }))
        );
        assert_eq!(
            reader.next_piece(10_000, |_| false).await.unwrap(),
            Some(Piece::Frame(Frame::Line("ok".into())))
        );
        let Some(Piece::Head(_)) = reader.next_piece(10_000, |_| true).await.unwrap() else {
            panic!("claimed");
        };
        while let Part::More(_) = reader.next_part().await.unwrap() {}
        assert_eq!(reader.next_part().await.unwrap(), Part::Eof);
    }

    #[tokio::test]
    async fn a_tail_is_written_before_what_was_queued_after_it_and_an_abort_ends_its_line() {
        use crate::transport::outbound::Belongs;
        use crate::transport::queue::LineQueue;
        let (queue, rx) = LineQueue::new(usize::MAX);
        let queue = queue.taking_tails();
        let (tx, tail) = tokio::sync::mpsc::channel(2);
        queue.send("first".into()).unwrap();
        queue
            .send_with_tail("head-".into(), tail, Belongs::Unsaid)
            .unwrap();
        queue.send("after".into()).unwrap();
        let (tx2, tail2) = tokio::sync::mpsc::channel(2);
        queue
            .send_with_tail("cut-".into(), tail2, Belongs::Unsaid)
            .unwrap();
        drop(queue);
        let feeder = tokio::spawn(async move {
            tx.send(TailPiece::Part("middle-".into())).await.unwrap();
            tx.send(TailPiece::Part("end".into())).await.unwrap();
            tx.send(TailPiece::End).await.unwrap();
            tx2.send(TailPiece::Part("so-far".into())).await.unwrap();
            tx2.send(TailPiece::Abort("{\"error\":1}".into()))
                .await
                .unwrap();
        });
        let mut out = Vec::new();
        write_queued(&mut out, rx).await.unwrap();
        feeder.await.unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "first\nhead-middle-end\nafter\ncut-so-far\n{\"error\":1}\n"
        );
    }

    #[tokio::test]
    async fn writes_each_line_with_a_newline() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tx.send("a".to_owned()).unwrap();
        tx.send("x".repeat(70_000)).unwrap();
        tx.send("b".to_owned()).unwrap();
        drop(tx);
        let mut out = Vec::new();
        write_lines(&mut out, rx).await.unwrap();
        let expected = format!("a\n{}\nb\n", "x".repeat(70_000));
        assert_eq!(out, expected.as_bytes());
    }
}
