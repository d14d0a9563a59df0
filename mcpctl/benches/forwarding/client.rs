//! The load driver's clients: one MCP connection over a child's stdin and stdout, and one MCP
//! session over HTTP/1.1 (a blocking keep-alive connection, written by hand so the client costs
//! as little as possible). Both read only as much of an answer as they need to check it: the
//! id, and that it is a result. Checks that parse whole answers are outside the timed loops.

use std::io::{self, BufRead as _, BufReader, BufWriter, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What the scenarios need of a connection.
pub(super) trait Rpc {
    /// Which connection this is, for messages.
    fn name(&self) -> &str;

    /// Sends one request and waits for its answer, checking that it is a result for that
    /// request, without parsing the rest.
    fn roundtrip(&mut self, method: &str, params: &str) -> io::Result<()>;

    /// Sends one request and returns its result, parsed in full. For checks, not timing.
    fn call(&mut self, method: &str, params: &str) -> io::Result<Value>;

    /// Sends a notification.
    fn notify(&mut self, method: &str) -> io::Result<()>;

    fn error(&self, message: impl std::fmt::Display) -> io::Error {
        io::Error::other(format!("{} connection: {message}", self.name()))
    }
}

/// One MCP connection over a child's stdin and stdout.
pub(super) struct StdioConnection {
    name: String,
    child: Child,
    to_server: BufWriter<ChildStdin>,
    from_server: BufReader<ChildStdout>,
    /// The last line read, reused to keep allocation out of the timed loops.
    line: Vec<u8>,
    next_id: u64,
}

impl StdioConnection {
    /// Starts `command`, which speaks MCP on its stdin and stdout.
    pub(super) fn spawn(name: String, mut command: Command) -> io::Result<Self> {
        let program = command.get_program().to_owned();
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|err| {
                io::Error::other(format!(
                    "cannot start the {name} connection's {}: {err}",
                    program.display()
                ))
            })?;
        let to_server = child.stdin.take().expect("stdin was piped");
        let from_server = child.stdout.take().expect("stdout was piped");
        Ok(Self {
            name,
            child,
            to_server: BufWriter::with_capacity(64 * 1024, to_server),
            from_server: BufReader::with_capacity(64 * 1024, from_server),
            line: Vec::with_capacity(2 * 1024 * 1024),
            next_id: 0,
        })
    }

    /// The child's process id (the proxy's, or the direct server's).
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes a request (not flushed) and returns its id.
    fn send(&mut self, method: &str, params: &str) -> io::Result<u64> {
        self.next_id += 1;
        let id = self.next_id;
        writeln!(
            self.to_server,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        )
        .map_err(|err| self.error(format!("writing `{method}` failed: {err}")))?;
        Ok(id)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.to_server
            .flush()
            .map_err(|err| self.error(format!("writing to the child failed: {err}")))
    }

    /// Reads the next line into `self.line`.
    fn read_line(&mut self) -> io::Result<()> {
        self.line.clear();
        let read = self
            .from_server
            .read_until(b'\n', &mut self.line)
            .map_err(|err| self.error(format!("reading from the child failed: {err}")))?;
        if read == 0 {
            return Err(
                self.error("the child closed its stdout (did it crash? its stderr is above)")
            );
        }
        Ok(())
    }

    /// Reads answers until one that is not a notification, and returns its id, checking it is
    /// a result.
    fn recv_result(&mut self) -> io::Result<u64> {
        loop {
            self.read_line()?;
            if let Some(id) = fast_result_id(&self.line) {
                return Ok(id);
            }
            match result_id(&self.line) {
                Ok(Some(id)) => return Ok(id),
                Ok(None) => continue,
                Err(message) => return Err(self.error(message)),
            }
        }
    }

    /// `total` echo calls with `window` in flight, pipelined on the one connection: calls per
    /// second. Each answer lets the next request go, so the window stays full to the end.
    pub(super) fn pipelined(
        &mut self,
        params: &str,
        total: usize,
        window: usize,
    ) -> io::Result<f64> {
        let first = self.next_id + 1;
        let start = Instant::now();
        let mut sent = 0;
        while sent < total.min(window) {
            self.send("tools/call", params)?;
            sent += 1;
        }
        self.flush()?;
        for _ in 0..total {
            let id = self.recv_result()?;
            if !(first..=self.next_id).contains(&id) {
                return Err(self.error(format!("an answer to an unknown id {id}")));
            }
            if sent < total {
                self.send("tools/call", params)?;
                self.flush()?;
                sent += 1;
            }
        }
        Ok(total as f64 / start.elapsed().as_secs_f64())
    }

    /// Closes the child's stdin and waits for it to exit (a proxy stops its upstream first);
    /// kills it if it takes more than 10 s.
    pub(super) fn close(self) {
        let Self {
            name,
            mut child,
            to_server,
            ..
        } = self;
        drop(to_server);
        wait_or_kill(&name, &mut child, Duration::from_secs(10));
    }
}

impl Rpc for StdioConnection {
    fn name(&self) -> &str {
        &self.name
    }

    fn roundtrip(&mut self, method: &str, params: &str) -> io::Result<()> {
        let id = self.send(method, params)?;
        self.flush()?;
        let got = self.recv_result()?;
        if got != id {
            return Err(self.error(format!("expected the answer to id {id}, got id {got}")));
        }
        Ok(())
    }

    fn call(&mut self, method: &str, params: &str) -> io::Result<Value> {
        let id = self.send(method, params)?;
        self.flush()?;
        loop {
            self.read_line()?;
            match whole_result(&self.line, id, method) {
                Ok(Some(result)) => return Ok(result),
                Ok(None) => continue,
                Err(message) => return Err(self.error(message)),
            }
        }
    }

    fn notify(&mut self, method: &str) -> io::Result<()> {
        writeln!(self.to_server, r#"{{"jsonrpc":"2.0","method":"{method}"}}"#)?;
        self.flush()
    }
}

/// Waits up to `limit` for `child` to exit, then kills it.
pub(super) fn wait_or_kill(name: &str, child: &mut Child, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return,
            Ok(Some(status)) => {
                eprintln!("warning: the {name} process exited with {status}");
                return;
            }
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
        }
    }
}

/// One MCP session over HTTP/1.1 on one keep-alive connection.
pub(super) struct HttpSession {
    name: String,
    /// Where to connect again when the server closed an idle connection.
    url: String,
    host: String,
    path: String,
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    /// The `Mcp-Session-Id`, once `initialize` gave one.
    session: Option<String>,
    next_id: u64,
    /// The last response's body, reused to keep allocation out of the timed loops.
    body: Vec<u8>,
    header: String,
    request: Vec<u8>,
}

/// What one HTTP response was.
struct Response {
    status: u16,
    event_stream: bool,
    session: Option<String>,
}

impl HttpSession {
    /// Connects to `url` (`http://HOST:PORT/PATH`); no MCP traffic yet.
    pub(super) fn connect(name: String, url: &str) -> io::Result<Self> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| io::Error::other(format!("not an http:// URL: {url}")))?;
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let stream = TcpStream::connect(host)
            .map_err(|err| io::Error::other(format!("{name}: cannot connect to {url}: {err}")))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            name,
            url: url.to_owned(),
            host: host.to_owned(),
            path: if path.is_empty() { "/" } else { path }.to_owned(),
            reader: BufReader::with_capacity(64 * 1024, stream.try_clone()?),
            writer: BufWriter::with_capacity(64 * 1024, stream),
            session: None,
            next_id: 0,
            body: Vec::with_capacity(2 * 1024 * 1024),
            header: String::new(),
            request: Vec::with_capacity(1024),
        })
    }

    /// Drops the connection, keeping the session open on the server (an idle session).
    pub(super) fn disconnect(self) -> Option<String> {
        self.session
    }

    /// The `Mcp-Session-Id`, once `initialize` gave one.
    pub(super) fn session_id(&self) -> Option<String> {
        self.session.clone()
    }

    /// Speaks for session `session` on this connection.
    pub(super) fn set_session(&mut self, session: Option<String>) {
        self.session = session;
    }

    /// Ends the session (HTTP DELETE) on a new connection to `url`.
    pub(super) fn delete(url: &str, session: &str) -> io::Result<()> {
        let mut conn = Self::connect("delete".to_owned(), url)?;
        conn.session = Some(session.to_owned());
        let response = conn.exchange("DELETE", b"")?;
        if response.status >= 300 && response.status != 404 {
            return Err(conn.error(format!("DELETE answered {}", response.status)));
        }
        Ok(())
    }

    /// Sends one HTTP request and reads its response. A keep-alive connection the server
    /// closed while it was idle (the proxy's 30 s header timeout, which a path meets while the
    /// others are measured) is opened again and the request sent once more: the server had
    /// not read it.
    fn exchange(&mut self, verb: &str, body: &[u8]) -> io::Result<Response> {
        let first = self
            .send_http(verb, body)
            .and_then(|()| self.read_response_head_or_closed());
        match first {
            Ok(Some(response)) => return Ok(response),
            Ok(None) => {}
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) => {}
            Err(err) => return Err(err),
        }
        let fresh = Self::connect(self.name.clone(), &self.url)?;
        self.reader = fresh.reader;
        self.writer = fresh.writer;
        self.send_http(verb, body)?;
        self.read_response()
    }

    /// [`Self::read_response`], or `None` when the server had closed the connection before
    /// answering a byte.
    fn read_response_head_or_closed(&mut self) -> io::Result<Option<Response>> {
        if self.reader.fill_buf()?.is_empty() {
            return Ok(None);
        }
        self.read_response().map(Some)
    }

    fn send_http(&mut self, verb: &str, body: &[u8]) -> io::Result<()> {
        self.request.clear();
        write!(
            self.request,
            "{verb} {} HTTP/1.1\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n",
            self.path,
            self.host,
            body.len()
        )?;
        if let Some(session) = &self.session {
            write!(
                self.request,
                "mcp-session-id: {session}\r\nmcp-protocol-version: 2025-06-18\r\n"
            )?;
        }
        self.request.extend_from_slice(b"\r\n");
        self.writer.write_all(&self.request)?;
        self.writer.write_all(body)?;
        self.writer.flush()
    }

    fn read_header_line(&mut self) -> io::Result<()> {
        self.header.clear();
        if self.reader.read_line(&mut self.header)? == 0 {
            return Err(self.error("the server closed the connection"));
        }
        Ok(())
    }

    /// Reads one response; its body lands in `self.body`.
    fn read_response(&mut self) -> io::Result<Response> {
        self.read_header_line()?;
        let status = self
            .header
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse::<u16>().ok())
            .ok_or_else(|| self.error(format!("not an HTTP status line: {:?}", self.header)))?;
        let mut response = Response {
            status,
            event_stream: false,
            session: None,
        };
        let (mut length, mut chunked) = (None, false);
        loop {
            self.read_header_line()?;
            let line = self.header.trim_end();
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse::<usize>().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("content-type") {
                response.event_stream = value.starts_with("text/event-stream");
            } else if name.eq_ignore_ascii_case("mcp-session-id") {
                response.session = Some(value.to_owned());
            }
        }
        self.body.clear();
        if chunked {
            loop {
                self.read_header_line()?;
                let size = self.header.trim_end();
                let size = size.split(';').next().unwrap_or_default();
                let size = usize::from_str_radix(size, 16)
                    .map_err(|_| self.error(format!("bad chunk size {size:?}")))?;
                if size == 0 {
                    // Trailers, then the empty line.
                    loop {
                        self.read_header_line()?;
                        if self.header.trim_end().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                let at = self.body.len();
                self.body.resize(at + size, 0);
                self.reader.read_exact(&mut self.body[at..])?;
                let mut crlf = [0u8; 2];
                self.reader.read_exact(&mut crlf)?;
            }
        } else if let Some(length) = length {
            self.body.resize(length, 0);
            self.reader.read_exact(&mut self.body)?;
        }
        Ok(response)
    }

    /// POSTs one request and reads its response; the JSON-RPC answer's range in `self.body`.
    fn post_request(&mut self, method: &str, params: &str) -> io::Result<(u64, Response)> {
        self.next_id += 1;
        let id = self.next_id;
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
        let response = self.exchange("POST", body.as_bytes())?;
        if response.status != 200 {
            return Err(self.error(format!(
                "`{method}` answered HTTP {}: {}",
                response.status,
                preview(&self.body)
            )));
        }
        if let Some(session) = &response.session {
            self.session = Some(session.clone());
        }
        Ok((id, response))
    }

    /// The JSON-RPC messages of the last body: the body itself, or each SSE event's data.
    fn messages(&self, event_stream: bool) -> Vec<&[u8]> {
        if !event_stream {
            return vec![&self.body[..]];
        }
        self.body
            .split(|b| *b == b'\n')
            .filter_map(|line| line.strip_prefix(b"data:"))
            .map(|data| data.strip_prefix(b" ").unwrap_or(data))
            .filter(|data| data.first() == Some(&b'{'))
            .collect()
    }
}

impl Rpc for HttpSession {
    fn name(&self) -> &str {
        &self.name
    }

    fn roundtrip(&mut self, method: &str, params: &str) -> io::Result<()> {
        let (id, response) = self.post_request(method, params)?;
        for message in self.messages(response.event_stream) {
            let got = match fast_result_id(message) {
                Some(got) => Some(got),
                None => result_id(message).map_err(|m| self.error(m))?,
            };
            match got {
                Some(got) if got == id => return Ok(()),
                Some(got) => {
                    return Err(self.error(format!("expected the answer to id {id}, got {got}")));
                }
                None => {}
            }
        }
        Err(self.error(format!(
            "no answer to `{method}` in the response: {}",
            preview(&self.body)
        )))
    }

    fn call(&mut self, method: &str, params: &str) -> io::Result<Value> {
        let (id, response) = self.post_request(method, params)?;
        for message in self.messages(response.event_stream) {
            if let Some(result) = whole_result(message, id, method).map_err(|m| self.error(m))? {
                return Ok(result);
            }
        }
        Err(self.error(format!(
            "no answer to `{method}` in the response: {}",
            preview(&self.body)
        )))
    }

    fn notify(&mut self, method: &str) -> io::Result<()> {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#);
        let response = self.exchange("POST", body.as_bytes())?;
        if response.status != 202 {
            return Err(self.error(format!(
                "`{method}` answered HTTP {}, not 202",
                response.status
            )));
        }
        Ok(())
    }
}

/// The id of `{"jsonrpc":"2.0","id":N,"result":...`, the shape the bench server writes and
/// the proxy keeps; `None` for any other shape.
fn fast_result_id(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(br#"{"jsonrpc":"2.0","id":"#)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 || !rest[digits..].starts_with(br#","result":"#) {
        return None;
    }
    rest[..digits].iter().try_fold(0u64, |n, b| {
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// The id of a result, parsing the message in full; `None` for a notification or a request
/// (which the bench ignores: `notifications/tools/list_changed` after `begin_session`, say).
fn result_id(line: &[u8]) -> Result<Option<u64>, String> {
    let message: Value = serde_json::from_slice(line)
        .map_err(|err| format!("an answer that is not JSON ({err}): {}", preview(line)))?;
    if message.get("method").is_some() {
        return Ok(None);
    }
    match (
        message.get("id").and_then(Value::as_u64),
        message.get("result"),
    ) {
        (Some(id), Some(_)) => Ok(Some(id)),
        _ => Err(format!("expected a result, got: {}", preview(line))),
    }
}

/// The result of the answer to request `id`, parsed; `None` for a notification or request.
fn whole_result(line: &[u8], id: u64, method: &str) -> Result<Option<Value>, String> {
    let mut message: Value = serde_json::from_slice(line).map_err(|err| {
        format!(
            "the answer to `{method}` is not JSON ({err}): {}",
            preview(line)
        )
    })?;
    if message.get("method").is_some() {
        return Ok(None);
    }
    if message.get("id").and_then(Value::as_u64) != Some(id) {
        return Err(format!(
            "expected the answer to `{method}` (id {id}), got: {}",
            preview(line)
        ));
    }
    message
        .get_mut("result")
        .map(Value::take)
        .map(Some)
        .ok_or_else(|| format!("`{method}` failed: {}", preview(line)))
}

/// The start of a message, for error messages.
pub(super) fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(300)]);
    let text = text.trim_end();
    if line.len() > 300 {
        format!("{text}... ({} bytes)", line.len())
    } else {
        text.to_owned()
    }
}
