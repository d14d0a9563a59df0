//! Writing lines to an upstream child's stdin pipe.
//!
//! While nothing waits before it, a line is written on the sender's own thread: one
//! non-blocking write to the pipe, under the queue's [`Inline`] lock, which keeps senders in
//! order. A line the pipe has no room for, a large one, and every line sent while one of them
//! is still queued go to the writer task, which waits for room. A request then reaches the
//! upstream without a wake-up of another task (on the HTTP front, a switch between threads).

use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::AsyncWrite;
use tokio::net::unix::pipe;

use super::lines::write_lines_counted;
use super::outbound::Belongs;
use super::queue::LineQueue;

/// Writes up to this size to a pipe are whole or not at all (POSIX `PIPE_BUF`: 4096 on Linux,
/// at least 512 anywhere), so a line written on the sender's thread is never cut.
#[cfg(any(target_os = "linux", target_os = "android"))]
const WHOLE_WRITE: usize = 4096;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const WHOLE_WRITE: usize = 512;

/// Starts writing lines to the child's stdin; the returned queue takes them. `server` names
/// the upstream in logs. Must run inside the runtime (the pipe registers with its reactor).
pub(crate) fn spawn(stdin: tokio::process::ChildStdin, server: String) -> io::Result<LineQueue> {
    start(stdin.into_owned_fd()?, server)
}

/// [`spawn`] on any pipe's writing end.
fn start(fd: OwnedFd, server: String) -> io::Result<LineQueue> {
    let pipe = Arc::new(pipe::Sender::from_owned_fd(fd)?);
    let (queue, lines) = LineQueue::new(usize::MAX);
    let (queue, inline) = queue.with_inline();
    let direct = pipe.clone();
    inline.start(Box::new(move |line, belongs| {
        write_now(&direct, line, belongs)
    }));
    tokio::spawn(async move {
        let counted = inline.clone();
        let result =
            write_lines_counted(SharedPipe(pipe), lines, move |n| counted.taken_many(n)).await;
        // Senders fail from now on, as they would on the closed channel.
        inline.close();
        if let Err(err) = result {
            tracing::debug!(%server, %err, "upstream stdin closed");
        }
    });
    Ok(queue)
}

/// Writes `line` and its newline now if the pipe takes them whole; what it does not take is
/// handed back, to be queued for the writer task.
fn write_now(pipe: &pipe::Sender, line: String, belongs: Belongs) -> Option<(String, Belongs)> {
    if line.len() >= WHOLE_WRITE {
        return Some((line, belongs));
    }
    let parts = [io::IoSlice::new(line.as_bytes()), io::IoSlice::new(b"\n")];
    match pipe.try_write_vectored(&parts) {
        Ok(n) if n > line.len() => None,
        // No room (or an error the writer task will meet and report).
        Ok(0) | Err(_) => Some((line, belongs)),
        Ok(n) => Some((rest_after(line, n), belongs)),
    }
}

/// What is left of `line` after its first `written` bytes went out. A pipe takes a write this
/// small whole or not at all; this is for a system that does otherwise.
fn rest_after(mut line: String, written: usize) -> String {
    let at = (written..=line.len())
        .find(|&at| line.is_char_boundary(at))
        .unwrap_or(line.len());
    if at != written {
        tracing::error!(
            written,
            "a pipe took part of a character of a small write; the rest of that character is lost"
        );
    }
    line.split_off(at)
}

/// The writer task's side of the pipe that senders also write to.
struct SharedPipe(Arc<pipe::Sender>);

impl AsyncWrite for SharedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(buf) {
                // Readiness was cleared: the next poll waits for room.
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                written => return Poll::Ready(written),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    // The pipe closes when the last holder (this task, or a sender's queue) lets it go.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn line(i: usize) -> String {
        // Small lines, written on the sender's thread, and large ones, always queued.
        let fill = if i.is_multiple_of(7) { 9000 } else { i % 50 };
        format!("{{\"n\":{i},\"x\":\"{}é\"}}", "y".repeat(fill))
    }

    /// Lines sent while the pipe is full wait for the writer task, and every line sent after
    /// them waits behind them: the reader gets every line whole and in the order sent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_arrive_whole_and_in_order_when_the_pipe_fills_up() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let queue = start(writer.into(), "test".into()).unwrap();
        let count = 400;
        // Far more than a pipe holds (64 KiB) before anyone reads.
        for i in 0..count {
            queue.send(line(i)).unwrap();
        }
        let read = tokio::task::spawn_blocking(move || {
            let mut text = String::new();
            let mut buf = vec![0; 1 << 16];
            while text.matches('\n').count() < count {
                let n = reader.read(&mut buf).unwrap();
                assert!(n > 0, "the pipe closed early");
                text.push_str(std::str::from_utf8(&buf[..n]).unwrap());
            }
            text
        });
        let text = tokio::time::timeout(std::time::Duration::from_secs(20), read)
            .await
            .expect("every line reached the pipe")
            .unwrap();
        let expected: String = (0..count).map(|i| line(i) + "\n").collect();
        assert!(text == expected, "lines out of order or cut");
    }

    /// Once the child's end is closed the writer stops, and sends fail from then on, as on a
    /// closed queue.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sends_fail_once_the_pipe_is_closed() {
        let (reader, writer) = std::io::pipe().unwrap();
        let queue = start(writer.into(), "test".into()).unwrap();
        drop(reader);
        let failed = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            loop {
                if queue.send(line(1)).is_err() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(failed.is_ok(), "sends kept succeeding on a closed pipe");
    }

    #[test]
    fn the_rest_of_a_cut_line_starts_at_a_character() {
        assert_eq!(rest_after("abc".into(), 1), "bc");
        assert_eq!(rest_after("abc".into(), 3), "");
        assert_eq!(rest_after("aéb".into(), 2), "b");
    }
}
