//! Newline-delimited JSON-RPC framing over byte streams: the stdio wire format of MCP.
//!
//! [`LineReader`] yields one line at a time with a bound on its length, so a peer cannot make the
//! proxy buffer without limit; [`write_lines`] drains a queue of outgoing lines, coalescing what is
//! already queued into one write.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;

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
        }
    }

    /// The longest line accepted, in bytes.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The next frame, or `None` at the end of the stream. Empty lines are skipped. A last line
    /// without a trailing newline is still returned.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            let unread = &self.buf[self.start + self.scanned..];
            if let Some(at) = memchr::memchr(b'\n', unread) {
                let end = self.start + self.scanned + at;
                let line = self.take(end, end + 1);
                if let Some(discarding) = self.discarding.take() {
                    return Ok(Some(Frame::TooLong {
                        len: discarding.seen + line.len(),
                        id: discarding.id,
                        has_method: discarding.has_method,
                    }));
                }
                if line.len() > self.max_len {
                    let (id, has_method) = head(&line);
                    return Ok(Some(Frame::TooLong {
                        len: line.len(),
                        id,
                        has_method,
                    }));
                }
                match frame(line) {
                    Some(frame) => return Ok(Some(frame)),
                    None => continue,
                }
            }
            self.scanned = self.buf.len() - self.start;
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
                    return Ok(Some(Frame::TooLong {
                        len: discarding.seen,
                        id: discarding.id,
                        has_method: discarding.has_method,
                    }));
                }
                if self.start == end {
                    return Ok(None);
                }
                let line = self.take(end, end);
                if let Some(frame) = frame(line) {
                    return Ok(Some(frame));
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
        if self.start >= self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        line
    }
}

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
pub async fn write_lines<W, L>(
    mut writer: W,
    mut queue: UnboundedReceiver<L>,
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
        while let Some(line) = next.take() {
            let bytes = line.as_ref();
            if bytes.len() >= GATHER {
                if !buf.is_empty() {
                    writer.write_all(&buf).await?;
                    buf.clear();
                }
                writer.write_all(bytes).await?;
                writer.write_all(b"\n").await?;
            } else {
                buf.extend_from_slice(bytes);
                buf.push(b'\n');
            }
            drop(line);
            if buf.len() < GATHER {
                next = queue.try_recv().ok();
            }
        }
        if !buf.is_empty() {
            writer.write_all(&buf).await?;
            buf.clear();
        }
        writer.flush().await?;
    }
    writer.shutdown().await
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
