//! The upstream MCP server the bench measures against: the same answers over stdio
//! (newline-delimited JSON-RPC, synchronous std I/O, one request at a time) and over HTTP (a
//! minimal HTTP/1.1 server, one thread per connection, every answer one `application/json`
//! body). Both are as lean as a server can be, so that neither is the bottleneck: every answer
//! that does not depend on the request is serialized once, on first use.

use std::fs::File;
use std::io::{self, BufRead as _, BufReader, BufWriter, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::{BLOB_BYTES, TOOL_COUNT};

/// The `tools/list` result and the `blob` result, serialized once.
fn canned() -> &'static (String, String) {
    static CANNED: OnceLock<(String, String)> = OnceLock::new();
    CANNED.get_or_init(|| {
        let blob = json!({"content": [{"type": "text", "text": blob_text()}]}).to_string();
        (tools_list_result().to_string(), blob)
    })
}

/// Appends the answer to one request line to `out` (no newline); `false` when the line gets
/// no answer (a notification, a response, a line that is not JSON).
pub(super) fn answer(line: &[u8], out: &mut Vec<u8>) -> bool {
    let request: Value = match serde_json::from_slice(line) {
        Ok(request) => request,
        Err(err) => {
            eprintln!("forwarding bench server: ignoring a line that is not JSON: {err}");
            return false;
        }
    };
    // Notifications (no id) and responses (no method) get no answer.
    let (Some(id), Some(method)) = (request.get("id"), request.get("method")) else {
        return false;
    };
    let _ = write!(out, r#"{{"jsonrpc":"2.0","id":{id},"#);
    let params = &request["params"];
    match method.as_str().unwrap_or_default() {
        "initialize" => {
            let result = json!({
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "forwarding-bench", "version": "0.1.0"},
            });
            let _ = write!(out, r#""result":{result}"#);
        }
        "ping" => out.extend_from_slice(br#""result":{}"#),
        "tools/list" => {
            out.extend_from_slice(br#""result":"#);
            out.extend_from_slice(canned().0.as_bytes());
        }
        "tools/call" => match params["name"].as_str() {
            Some("echo") => {
                let text = &params["arguments"]["text"];
                let _ = write!(
                    out,
                    r#""result":{{"content":[{{"type":"text","text":{text}}}]}}"#
                );
            }
            Some("blob") => {
                out.extend_from_slice(br#""result":"#);
                out.extend_from_slice(canned().1.as_bytes());
            }
            _ => out.extend_from_slice(
                br#""error":{"code":-32602,"message":"Unknown tool: only echo and blob"}"#,
            ),
        },
        _ => out.extend_from_slice(br#""error":{"code":-32601,"message":"Method not found"}"#),
    }
    out.push(b'}');
    true
}

/// Serves MCP on stdin and stdout until stdin closes.
pub(super) fn run_stdio() -> io::Result<()> {
    // Plain files on the descriptors: no locking, no line buffering of stdout.
    let mut input = BufReader::with_capacity(
        64 * 1024,
        File::from(io::stdin().as_fd().try_clone_to_owned()?),
    );
    let mut output = File::from(io::stdout().as_fd().try_clone_to_owned()?);
    let mut line = Vec::new();
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        out.clear();
        if answer(&line, &mut out) {
            out.push(b'\n');
            output.write_all(&out)?;
        }
    }
}

/// Serves MCP over HTTP on a free loopback port until killed; prints `listening on URL` on
/// stdout first.
pub(super) fn run_http() -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}/mcp");
    io::stdout().flush()?;
    for stream in listener.incoming() {
        let stream = stream?;
        std::thread::spawn(move || {
            if let Err(err) = http_connection(stream)
                && err.kind() != io::ErrorKind::UnexpectedEof
                && err.kind() != io::ErrorKind::ConnectionReset
            {
                eprintln!("forwarding bench HTTP server: {err}");
            }
        });
    }
    Ok(())
}

/// One keep-alive connection: requests in, answers out, until the client closes it.
fn http_connection(stream: TcpStream) -> io::Result<()> {
    static SESSIONS: AtomicU64 = AtomicU64::new(0);
    stream.set_nodelay(true)?;
    let mut input = BufReader::with_capacity(64 * 1024, stream.try_clone()?);
    let mut output = BufWriter::with_capacity(64 * 1024, stream);
    let mut header = String::new();
    let mut body = Vec::new();
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        let mut method = String::new();
        if input.read_line(&mut method)? == 0 {
            return Ok(());
        }
        let mut length = 0usize;
        loop {
            header.clear();
            if input.read_line(&mut header)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let line = header.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().map_err(io::Error::other)?;
            }
        }
        body.clear();
        body.resize(length, 0);
        input.read_exact(&mut body)?;
        out.clear();
        if !method.starts_with("POST ") {
            // DELETE (ending a session) and anything else: nothing to do.
            output.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")?;
        } else if answer(&body, &mut out) {
            let session = if body.windows(14).any(|w| w == br#""initialize","#) {
                format!(
                    "mcp-session-id: direct-{}\r\n",
                    SESSIONS.fetch_add(1, Ordering::Relaxed)
                )
            } else {
                String::new()
            };
            write!(
                output,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{session}content-length: {}\r\n\r\n",
                out.len()
            )?;
            output.write_all(&out)?;
        } else {
            output.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")?;
        }
        output.flush()?;
    }
}

/// The `tools/list` result: 1,000 tools with realistic names, descriptions and input schemas,
/// about 1.25 MB serialized.
pub(super) fn tools_list_result() -> Value {
    const SERVICES: [&str; 10] = [
        "github", "jira", "slack", "postgres", "storage", "cluster", "calendar", "drive",
        "billing", "alerts",
    ];
    const VERBS: [&str; 10] = [
        "list", "get", "create", "update", "delete", "search", "archive", "sync", "export",
        "import",
    ];
    const OBJECTS: [&str; 10] = [
        "issues",
        "pull_requests",
        "messages",
        "tables",
        "buckets",
        "deployments",
        "events",
        "documents",
        "invoices",
        "incidents",
    ];
    let mut tools = Vec::with_capacity(TOOL_COUNT);
    for service in SERVICES {
        for verb in VERBS {
            for object in OBJECTS {
                let things = object.replace('_', " ");
                let read_only = matches!(verb, "list" | "get" | "search" | "export");
                let sentence_start = verb[..1].to_uppercase() + &verb[1..];
                let description = format!(
                    "{sentence_start} {things} in the connected {service} workspace. Accepts filters for \
                     owner, state and time range, and returns at most `limit` {things} per page \
                     together with a cursor for the next page; results are ordered by last \
                     update, newest first. Requires the `{service}:{verb}` scope. Read-only \
                     calls are cached for 30 seconds, so a change made by another client may \
                     take that long to show. Use `{service}_get_{object}` to fetch a single item \
                     by id once you know it."
                );
                tools.push(json!({
                    "name": format!("{service}_{verb}_{object}"),
                    "description": description,
                    "inputSchema": {
                        "type": "object",
                        "properties": {
                            "owner": {
                                "type": "string",
                                "description": format!("The account, team or project that owns the {things}; defaults to the caller's own."),
                            },
                            "state": {
                                "type": "string",
                                "enum": ["open", "closed", "all"],
                                "default": "open",
                                "description": format!("Which {things} to include, by their state."),
                            },
                            "since": {
                                "type": "string",
                                "format": "date-time",
                                "description": "Only items updated at or after this time (RFC 3339).",
                            },
                            "limit": {
                                "type": "integer",
                                "minimum": 1,
                                "maximum": 100,
                                "default": 30,
                                "description": "Largest number of items per page.",
                            },
                            "cursor": {
                                "type": "string",
                                "description": "Cursor from the previous page; omit it for the first page.",
                            },
                        },
                        "required": ["owner"],
                        "additionalProperties": false,
                    },
                    "annotations": {"readOnlyHint": read_only, "openWorldHint": true},
                }));
            }
        }
    }
    json!({ "tools": tools })
}

/// The `blob` tool's text: exactly [`BLOB_BYTES`] bytes of ASCII that JSON needs no escapes for.
pub(super) fn blob_text() -> String {
    const PATTERN: &str = "The quick brown fox jumps over the lazy dog 0123456789. ";
    PATTERN.chars().cycle().take(BLOB_BYTES).collect()
}
