//! The floor of any proxy process (`FORWARDING_BENCH_RELAY`). On stdio: a relay that starts the bench's server as its child
//! and copies bytes between its own stdio and the child's, one blocking thread each way,
//! without reading a message (std's `io::copy` splices pipe to pipe on Linux). What it costs
//! over a direct connection is what a second process and a second pair of pipes cost, before
//! any proxy does any work.

use std::io::{self, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};

use super::{RELAY_ENV, RELAY_TO_ENV, SERVER_ENV};

/// Relays until the client closes stdin and the child's stdout has ended.
pub(crate) fn run() -> io::Result<()> {
    let mut child = Command::new(std::env::current_exe()?)
        .env_remove(RELAY_ENV)
        .env(SERVER_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let (Some(mut to_child), Some(mut from_child)) = (child.stdin.take(), child.stdout.take())
    else {
        return Err(io::Error::other("the child's stdio was not piped"));
    };
    let requests = std::thread::spawn(move || {
        let copied = io::copy(&mut io::stdin().lock(), &mut to_child);
        // Closing the child's stdin tells it the client is gone.
        drop(to_child);
        copied
    });
    io::copy(&mut from_child, &mut io::stdout().lock())?;
    let _ = requests.join();
    child.wait()?;
    Ok(())
}

/// The same floor over HTTP: a TCP relay (no HTTP parsing) in front of the bench's HTTP server
/// at `RELAY_TO_ENV`'s URL, one pair of threads per connection. Prints `listening on URL` on
/// stdout, as the server does.
pub(crate) fn run_http() -> io::Result<()> {
    let to = std::env::var(RELAY_TO_ENV)
        .map_err(|_| io::Error::other(format!("{RELAY_TO_ENV} names no server")))?;
    let upstream = to
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .ok_or_else(|| io::Error::other(format!("{RELAY_TO_ENV}={to} is not an http:// URL")))?
        .to_owned();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut out = io::stdout().lock();
    writeln!(out, "listening on http://{}/mcp", listener.local_addr()?)?;
    out.flush()?;
    drop(out);
    for client in listener.incoming() {
        let client = client?;
        let upstream = upstream.clone();
        std::thread::spawn(move || {
            if let Err(err) = relay_connection(client, &upstream) {
                eprintln!("forwarding bench relay: {err}");
            }
        });
    }
    Ok(())
}

/// Copies one client connection to a new connection to `upstream` and back until either side
/// closes.
fn relay_connection(client: TcpStream, upstream: &str) -> io::Result<()> {
    let server = TcpStream::connect(upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut client_in, mut server_out) = (client.try_clone()?, server.try_clone()?);
    let requests = std::thread::spawn(move || {
        let _ = io::copy(&mut client_in, &mut server_out);
        let _ = server_out.shutdown(Shutdown::Write);
    });
    let (mut server_in, mut client_out) = (server, client);
    let _ = io::copy(&mut server_in, &mut client_out);
    let _ = client_out.shutdown(Shutdown::Both);
    let _ = requests.join();
    Ok(())
}
