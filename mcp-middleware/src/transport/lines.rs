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
    /// A line longer than the limit; its bytes were discarded up to the next `\n`.
    TooLong {
        /// How many bytes the line had.
        len: usize,
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
    /// Bytes of an over-long line seen so far, while discarding it.
    discarding: Option<usize>,
}

/// How much room each read asks for.
const READ_CHUNK: usize = 64 * 1024;

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader that accepts lines of at most `max_len` bytes.
    pub fn new(inner: R, max_len: usize) -> Self {
        Self {
            inner,
            buf: Vec::with_capacity(READ_CHUNK),
            start: 0,
            scanned: 0,
            max_len,
            discarding: None,
        }
    }

    /// The next frame, or `None` at the end of the stream. Empty lines are skipped. A last line
    /// without a trailing newline is still returned.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            let unread = &self.buf[self.start + self.scanned..];
            if let Some(at) = memchr::memchr(b'\n', unread) {
                let end = self.start + self.scanned + at;
                let line = self.take(end, end + 1);
                if let Some(len) = self.discarding.take() {
                    return Ok(Some(Frame::TooLong {
                        len: len + line.len(),
                    }));
                }
                if line.len() > self.max_len {
                    return Ok(Some(Frame::TooLong { len: line.len() }));
                }
                match frame(line) {
                    Some(frame) => return Ok(Some(frame)),
                    None => continue,
                }
            }
            self.scanned = self.buf.len() - self.start;
            if let Some(seen) = self.discarding.as_mut() {
                *seen += self.scanned;
                self.buf.clear();
                (self.start, self.scanned) = (0, 0);
            } else if self.scanned > self.max_len {
                self.discarding = Some(self.scanned);
                self.buf = Vec::with_capacity(READ_CHUNK);
                (self.start, self.scanned) = (0, 0);
            }
            if self.start > 0 && self.start >= self.buf.len() / 2 {
                // Keep the buffer from growing without bound under a stream of small lines.
                self.buf.drain(..self.start);
                self.start = 0;
            }
            self.buf.reserve(READ_CHUNK);
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                let end = self.buf.len();
                if let Some(len) = self.discarding.take() {
                    return Ok(Some(Frame::TooLong { len }));
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
/// writer down. Lines already queued are written together, so a burst costs one write.
pub async fn write_lines<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut queue: UnboundedReceiver<String>,
) -> std::io::Result<()> {
    /// Small lines are gathered into one buffer up to this size; larger ones are written directly.
    const GATHER: usize = 64 * 1024;
    let mut buf: Vec<u8> = Vec::with_capacity(GATHER);
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        while let Some(line) = next.take() {
            if line.len() >= GATHER {
                if !buf.is_empty() {
                    writer.write_all(&buf).await?;
                    buf.clear();
                }
                writer.write_all(line.as_bytes()).await?;
                writer.write_all(b"\n").await?;
            } else {
                buf.extend_from_slice(line.as_bytes());
                buf.push(b'\n');
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
            Some(Frame::TooLong { len: 10 })
        );
        assert_eq!(
            whole.next_line().await.unwrap(),
            Some(Frame::Line("ok".into()))
        );
        assert_eq!(
            got,
            vec![
                Frame::TooLong { len: 13 },
                Frame::Line("ok".into()),
                Frame::TooLong { len: 10 }
            ]
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
