//! The proxy's own stdin and stdout as non-blocking async streams.
//!
//! `tokio::io::stdin()` and `stdout()` hand every read and write to the blocking thread pool, which
//! costs a thread hop per message (measured 2-3x slower per call than non-blocking pipes). When
//! stdin or stdout is a pipe or a socket, as it is when an MCP client spawns the proxy, this module
//! registers a duplicate of the descriptor with the reactor instead. Anything else (a terminal, a
//! file) falls back to tokio's blocking-pool streams.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// A boxed byte stream to read from.
pub type BoxRead = Pin<Box<dyn AsyncRead + Send>>;
/// A boxed byte stream to write to.
pub type BoxWrite = Pin<Box<dyn AsyncWrite + Send>>;

/// The process's stdin and stdout, non-blocking where the descriptors allow it.
///
/// Must be called inside a tokio runtime. Nothing else in the process may write to stdout: it
/// carries only protocol messages.
pub fn stdio() -> io::Result<(BoxRead, BoxWrite)> {
    let input = match nonblocking_descriptor(io::stdin().as_fd().try_clone_to_owned()?)? {
        Descriptor::Pipe(fd) => {
            Box::pin(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?) as BoxRead
        }
        Descriptor::Socket(socket) => Box::pin(tokio::net::UnixStream::from_std(socket)?),
        Descriptor::Other => Box::pin(tokio::io::stdin()),
    };
    let output = match nonblocking_descriptor(io::stdout().as_fd().try_clone_to_owned()?)? {
        Descriptor::Pipe(fd) => {
            Box::pin(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?) as BoxWrite
        }
        Descriptor::Socket(socket) => Box::pin(tokio::net::UnixStream::from_std(socket)?),
        Descriptor::Other => Box::pin(tokio::io::stdout()),
    };
    Ok((input, output))
}

enum Descriptor {
    Pipe(OwnedFd),
    Socket(std::os::unix::net::UnixStream),
    Other,
}

fn nonblocking_descriptor(fd: OwnedFd) -> io::Result<Descriptor> {
    let file = std::fs::File::from(fd);
    let kind = file.metadata()?.file_type();
    if kind.is_fifo() {
        Ok(Descriptor::Pipe(OwnedFd::from(file)))
    } else if kind.is_socket() {
        let socket = std::os::unix::net::UnixStream::from(OwnedFd::from(file));
        socket.set_nonblocking(true)?;
        Ok(Descriptor::Socket(socket))
    } else {
        Ok(Descriptor::Other)
    }
}
