//! Newline-delimited JSON-RPC framing over byte streams: the stdio wire format of MCP.
//!
//! [`LineReader`] yields one line at a time with a bound on its length, so a peer cannot make the
//! proxy buffer without limit; [`write_lines`] drains a queue of outgoing lines, coalescing what is
//! already queued into one write.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
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
/// `next_line` is cancel safe: a partial line stays in the reader and the next call continues it.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    line: Vec<u8>,
    max_len: usize,
    /// Bytes of an over-long line seen so far, while discarding it.
    discarding: Option<usize>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader that accepts lines of at most `max_len` bytes.
    pub fn new(inner: R, max_len: usize) -> Self {
        Self {
            inner,
            line: Vec::new(),
            max_len,
            discarding: None,
        }
    }

    /// The next frame, or `None` at the end of the stream. Empty lines are skipped. A last line
    /// without a trailing newline is still returned.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                if let Some(len) = self.discarding.take() {
                    return Ok(Some(Frame::TooLong { len }));
                }
                if self.line.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(self.take_line()));
            }
            let newline = memchr::memchr(b'\n', available);
            let chunk = newline.map_or(available.len(), |at| at);
            let consumed = newline.map_or(chunk, |at| at + 1);
            if let Some(seen) = self.discarding.as_mut() {
                *seen += chunk;
            } else if self.line.len() + chunk > self.max_len {
                self.discarding = Some(self.line.len() + chunk);
                self.line = Vec::new();
            } else {
                self.line.extend_from_slice(&available[..chunk]);
            }
            self.inner.consume(consumed);
            if newline.is_some() {
                if let Some(len) = self.discarding.take() {
                    return Ok(Some(Frame::TooLong { len }));
                }
                if self.line.last() == Some(&b'\r') {
                    self.line.pop();
                }
                if self.line.iter().all(u8::is_ascii_whitespace) {
                    self.line.clear();
                    continue;
                }
                return Ok(Some(self.take_line()));
            }
        }
    }

    fn take_line(&mut self) -> Frame {
        let bytes = std::mem::take(&mut self.line);
        match String::from_utf8(bytes) {
            Ok(line) => Frame::Line(line),
            Err(err) => Frame::NotUtf8 {
                at: err.utf8_error().valid_up_to(),
            },
        }
    }
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
    use tokio::io::BufReader;

    async fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut reader = LineReader::new(BufReader::with_capacity(4, input), max);
        let mut out = Vec::new();
        while let Some(frame) = reader.next_line().await.unwrap() {
            out.push(frame);
        }
        out
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
