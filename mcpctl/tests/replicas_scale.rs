//! The replicas' scale run: 100 sessions x 200 calls spread over three `mcpctl serve
//! --store redis://...` replicas of one project behind a round-robin balancer without
//! affinity, with none lost or misrouted.
//!
//! What runs: a real `redis-server` (no persistence: what this test proves is routing and
//! restoring, which fsync does not change; `tests/interop/test_replicas.py` restarts a
//! persistent one), three debug `mcpctl serve shared --store` processes, one shared HTTP
//! upstream (a minimal one in this process: every replica-session opens its own upstream
//! session on it, no child per session), and the balancer and client here, on tokio. The
//! balancer sends every request to the next replica, whichever replica had the session's
//! request before (connections kept alive on both sides, as an HTTP load balancer does). It
//! records which replica each session's requests reached: every session must have been
//! served by all three. The project's model is `gate`, so each replica must restore the session's model
//! state (the gate opened by `begin_session`) from Redis before it forwards a call.
//!
//! Each answer is checked to carry its request's id and the echo of its own session's and
//! call's token. Its own test binary: it takes both cores while it runs.

#[path = "support/home.rs"]
mod home;
#[path = "../../mcp-middleware/tests/support/http_client.rs"]
mod http_client;
#[path = "support/process.rs"]
mod process;
#[path = "../../mcp-middleware/tests/support/redis_server.rs"]
mod redis_server;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use http_client::{Conn, MCP_HEADERS, WAIT, initialize_request, request};

const SESSIONS: usize = 100;
const CALLS: usize = 200;
const REPLICAS: usize = 3;

// --------------------------------------------------------------------------- upstream

/// Answers one JSON-RPC message of a replica to the shared upstream: `initialize`, `ping`,
/// `tools/list` (one tool, `echo`) and `tools/call` of `echo` (its arguments as JSON text);
/// `None` for a notification; with whether it answers an `initialize`. Lean on purpose: the
/// upstream is not what this test measures.
fn upstream_answer(body: &[u8]) -> Option<(Value, bool)> {
    let message: Value = serde_json::from_slice(body).ok()?;
    let id = message.get("id")?.clone();
    let params = &message["params"];
    let method = message["method"].as_str()?;
    let result = match method {
        "initialize" => json!({
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "replicas-scale-echo", "version": "0.1.0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "echo",
            "description": "Answers with its arguments.",
            "inputSchema": {"type": "object"},
        }]}),
        "tools/call" if params["name"] == "echo" => {
            json!({"content": [{"type": "text", "text": params["arguments"].to_string()}]})
        }
        "tools/call" => {
            let error = json!({"code": -32602, "message": "only echo"});
            return Some((json!({"jsonrpc": "2.0", "id": id, "error": error}), false));
        }
        _ => json!({}),
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    Some((answer, method == "initialize"))
}

/// The shared upstream: a minimal streamable HTTP MCP server on a free loopback port, on this
/// runtime, until the test ends (keep-alive connections, every answer one `application/json`
/// body, a session id per `initialize`): its address. Every replica-session opens its own
/// upstream session here, so the test needs no child process per session.
async fn start_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the upstream");
    let addr = listener.local_addr().expect("the upstream's address");
    tokio::spawn(async move {
        let sessions = Arc::new(AtomicUsize::new(0));
        while let Ok((stream, _)) = listener.accept().await {
            let sessions = sessions.clone();
            tokio::spawn(async move {
                if let Err(err) = upstream_connection(stream, &sessions).await
                    && err.kind() != std::io::ErrorKind::UnexpectedEof
                    && err.kind() != std::io::ErrorKind::ConnectionReset
                {
                    eprintln!("upstream: {err}");
                }
            });
        }
    });
    addr
}

/// One keep-alive connection to the upstream: requests in, answers out, until it closes.
async fn upstream_connection(stream: TcpStream, sessions: &AtomicUsize) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (read, mut write) = stream.into_split();
    let mut input = BufReader::new(read);
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let post = line.starts_with("POST ");
        let mut length = 0usize;
        loop {
            line.clear();
            if input.read_line(&mut line).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().map_err(std::io::Error::other)?;
            }
        }
        let mut body = vec![0u8; length];
        input.read_exact(&mut body).await?;
        let head = match upstream_answer(&body).filter(|_| post) {
            Some((answer, initialize)) => {
                let answer = answer.to_string();
                let session = if initialize {
                    let n = sessions.fetch_add(1, Ordering::Relaxed);
                    format!("mcp-session-id: upstream-{n}\r\n")
                } else {
                    String::new()
                };
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{session}content-length: {}\r\n\r\n{answer}",
                    answer.len()
                )
            }
            // Notifications, DELETE: nothing to answer.
            None if post => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned(),
            None => "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_owned(),
        };
        write.write_all(head.as_bytes()).await?;
    }
}

// --------------------------------------------------------------------------- replicas

/// An `mcpctl serve` replica, killed when dropped (also when the test fails).
struct Replica {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn replica(home: &home::Home, store: &str) -> Replica {
    // The secret the replicas authenticate the store's records with: the same for all.
    let key = home.write(
        "store.key",
        "a secret of at least thirty-two bytes, for the replicas",
    );
    let mut child = home
        .command(&[
            "serve",
            "shared",
            "--listen",
            "127.0.0.1:0",
            "--store",
            store,
            "--state-key-file",
            key.to_str().expect("a UTF-8 path"),
            // Every session (and every connection the balancer pools) of this test comes from
            // 127.0.0.1: room for all on every replica.
            "--max-sessions",
            "512",
            "--max-sessions-per-principal",
            "512",
            "--max-connections-per-address",
            "512",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpctl serve starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let listening = process::listening_address(stderr);
    let replica = |addr| Replica { child, addr };
    match listening.recv_timeout(WAIT) {
        Ok(authority) => replica(authority.parse().expect("a socket address")),
        Err(err) => {
            drop(replica("0.0.0.0:0".parse().expect("an address")));
            panic!("mcpctl serve --store did not listen: {err}")
        }
    }
}

// --------------------------------------------------------------------------- balancer

/// Which replicas served each session's requests (by `mcp-session-id`; `initialize` has none).
type Served = Arc<Mutex<HashMap<String, [usize; REPLICAS]>>>;

/// A kept-alive connection to a replica.
type Backend = (BufReader<OwnedReadHalf>, OwnedWriteHalf);

/// A round-robin HTTP balancer without affinity on a free loopback port: every request goes to
/// the next replica, whichever connection it came on and whichever replica had the one before.
/// Connections are kept alive on both sides (each replica's idle ones pooled), so what the
/// replicas spend is on requests, not on connections. Requests are read by `content-length`,
/// answers by `content-length` or chunks (the replicas' SSE answers), as this test's client
/// sends and the replicas answer.
async fn start_balancer(backends: Vec<SocketAddr>, served: Served) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the balancer");
    let addr = listener.local_addr().expect("the balancer's address");
    let balancer = Arc::new(Balancer {
        pools: backends.iter().map(|_| Mutex::new(Vec::new())).collect(),
        backends,
        next: AtomicUsize::new(0),
        served,
    });
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let balancer = balancer.clone();
            tokio::spawn(async move {
                if let Err(err) = balancer.client(client).await
                    && err.kind() != std::io::ErrorKind::UnexpectedEof
                {
                    eprintln!("balancer: {err}");
                }
            });
        }
    });
    addr
}

struct Balancer {
    backends: Vec<SocketAddr>,
    pools: Vec<Mutex<Vec<Backend>>>,
    next: AtomicUsize,
    served: Served,
}

/// Reads a head (up to and with its empty line) into `head`; false at a clean end of input.
async fn read_head(
    input: &mut BufReader<impl tokio::io::AsyncRead + Unpin>,
    head: &mut String,
) -> std::io::Result<bool> {
    head.clear();
    loop {
        let before = head.len();
        if input.read_line(head).await? == 0 {
            return if before == 0 {
                Ok(false)
            } else {
                Err(std::io::ErrorKind::UnexpectedEof.into())
            };
        }
        if head[before..].trim_end().is_empty() {
            return Ok(true);
        }
    }
}

/// The value of header `name` in `head`.
fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().skip(1).find_map(|line| {
        let (n, value) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

impl Balancer {
    /// One client connection: its requests, each to the next replica, until it closes.
    async fn client(&self, client: TcpStream) -> std::io::Result<()> {
        client.set_nodelay(true)?;
        let (read, mut write) = client.into_split();
        let mut input = BufReader::new(read);
        let mut head = String::new();
        while read_head(&mut input, &mut head).await? {
            let length: usize = header(&head, "content-length")
                .map_or(Ok(0), str::parse)
                .map_err(std::io::Error::other)?;
            let mut request = head.clone().into_bytes();
            let at = request.len();
            request.resize(at + length, 0);
            input.read_exact(&mut request[at..]).await?;
            let index = self.next.fetch_add(1, Ordering::Relaxed) % self.backends.len();
            if let Some(session) = header(&head, "mcp-session-id")
                && let Ok(mut served) = self.served.lock()
            {
                served.entry(session.to_owned()).or_default()[index] += 1;
            }
            self.exchange(index, &request, &mut write).await?;
        }
        Ok(())
    }

    /// Sends `request` to replica `index` and its answer to `client`. A pooled connection the
    /// replica closed meanwhile (it read no request on it) is replaced by a new one.
    async fn exchange(
        &self,
        index: usize,
        request: &[u8],
        client: &mut OwnedWriteHalf,
    ) -> std::io::Result<()> {
        let pooled = self.pools[index]
            .lock()
            .ok()
            .and_then(|mut pool| pool.pop());
        let mut head = String::new();
        let reused = match pooled {
            Some(mut backend) => {
                let sent = backend.1.write_all(request).await;
                let answered =
                    sent.is_ok() && read_head(&mut backend.0, &mut head).await.unwrap_or(false);
                answered.then_some(backend)
            }
            None => None,
        };
        let mut backend = match reused {
            Some(backend) => backend,
            None => {
                let stream = TcpStream::connect(self.backends[index]).await?;
                stream.set_nodelay(true)?;
                let (read, mut write) = stream.into_split();
                let mut read = BufReader::new(read);
                write.write_all(request).await?;
                if !read_head(&mut read, &mut head).await? {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                (read, write)
            }
        };
        client.write_all(head.as_bytes()).await?;
        let answer = &mut backend.0;
        if header(&head, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            let mut line = String::new();
            loop {
                line.clear();
                answer.read_line(&mut line).await?;
                client.write_all(line.as_bytes()).await?;
                let size = usize::from_str_radix(line.trim(), 16).map_err(std::io::Error::other)?;
                if size == 0 {
                    // Trailers (none here) up to the empty line.
                    while read_head_line(answer, &mut line).await? {
                        client.write_all(line.as_bytes()).await?;
                    }
                    client.write_all(b"\r\n").await?;
                    break;
                }
                let mut chunk = vec![0u8; size + 2];
                answer.read_exact(&mut chunk).await?;
                client.write_all(&chunk).await?;
            }
        } else {
            let length: usize = header(&head, "content-length")
                .map_or(Ok(0), str::parse)
                .map_err(std::io::Error::other)?;
            let mut body = vec![0u8; length];
            answer.read_exact(&mut body).await?;
            client.write_all(&body).await?;
        }
        if !header(&head, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
            && let Ok(mut pool) = self.pools[index].lock()
        {
            pool.push(backend);
        }
        Ok(())
    }
}

/// Reads one line into `line`; false (and nothing kept) when it is the empty line.
async fn read_head_line(
    input: &mut BufReader<OwnedReadHalf>,
    line: &mut String,
) -> std::io::Result<bool> {
    line.clear();
    if input.read_line(line).await? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(!line.trim_end().is_empty())
}

// --------------------------------------------------------------------------- client

/// POSTs `body` on the session's kept-alive connection to the balancer and returns the status,
/// the session id it names, and its messages.
async fn post(
    conn: &mut Conn,
    session: Option<&str>,
    body: &str,
) -> (u16, Option<String>, Vec<Value>) {
    let mut headers = MCP_HEADERS.to_vec();
    if let Some(session) = session {
        headers.push(("mcp-session-id", session));
        headers.push(("mcp-protocol-version", "2025-11-25"));
    }
    let reply = conn
        .send("POST", &headers, body.as_bytes())
        .await
        .expect("a response from the balancer");
    let status = reply.status;
    let id = reply.header("mcp-session-id").map(str::to_owned);
    (status, id, reply.messages().await)
}

/// The last message of an answer: a result with `id`.
fn answer(what: &str, id: u64, messages: &[Value]) -> Value {
    let last = messages
        .last()
        .unwrap_or_else(|| panic!("{what}: no answer"));
    assert_eq!(last["id"], id, "{what}: misrouted: {last}");
    assert!(last.get("result").is_some(), "{what}: {last}");
    last["result"].clone()
}

/// Session `s`: initialize, open the gate, then its calls one after another, each checked.
async fn run_session(balancer: SocketAddr, s: usize) -> String {
    let conn = &mut Conn::connect(balancer).await;
    let (status, session, messages) =
        post(conn, None, &initialize_request(&format!("scale-{s}"))).await;
    assert_eq!(status, 200, "session {s}: initialize");
    let session = session.unwrap_or_else(|| panic!("session {s}: no session id"));
    answer(&format!("session {s}: initialize"), 0, &messages);
    let (status, _, _) = post(
        conn,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(status, 202, "session {s}: notifications/initialized");
    let opened = request(
        1,
        "tools/call",
        json!({"name": "begin_session", "arguments": {"intent": format!("session {s}")}}),
    );
    let (status, _, messages) = post(conn, Some(&session), &opened).await;
    assert_eq!(status, 200, "session {s}: begin_session");
    let result = answer(&format!("session {s}: begin_session"), 1, &messages);
    assert_ne!(
        result["isError"], true,
        "session {s}: begin_session: {result}"
    );
    for call in 0..CALLS {
        let id = (s * CALLS + call) as u64 + 2;
        let arguments = json!({"session": s, "call": call, "token": format!("{s}:{call}:{id}")});
        let body = request(
            id,
            "tools/call",
            json!({"name": "echo", "arguments": arguments}),
        );
        let what = format!("session {s} call {call}");
        let (status, _, messages) = post(conn, Some(&session), &body).await;
        assert_eq!(status, 200, "{what}: {messages:?}");
        let result = answer(&what, id, &messages);
        assert_ne!(result["isError"], true, "{what}: {result}");
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no text: {result}"));
        let echoed: Value = serde_json::from_str(text).expect("the echo is JSON");
        assert_eq!(echoed, arguments, "{what} got another's answer");
    }
    session
}

// --------------------------------------------------------------------------- the test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_sessions_of_two_hundred_calls_over_three_replicas_lose_and_misroute_nothing() {
    let redis = redis_server::Redis::start().await;
    let upstream = start_upstream().await;
    let home = home::Home::new();
    home.apply(&format!(
        "kind: Server\nmetadata: {{ name: echo }}\nspec:\n  url: http://{upstream}/mcp\n---\n\
         kind: Project\nmetadata: {{ name: shared }}\nspec:\n  servers: [echo]\n  proxyModel: gate\n"
    ));
    let replicas: Vec<Replica> = (0..REPLICAS).map(|_| replica(&home, &redis.url)).collect();
    let served = Served::default();
    let balancer = start_balancer(replicas.iter().map(|r| r.addr).collect(), served.clone()).await;

    let started = Instant::now();
    let runs: Vec<_> = (0..SESSIONS)
        .map(|s| tokio::spawn(run_session(balancer, s)))
        .collect();
    let mut sessions = Vec::new();
    for run in runs {
        sessions.push(run.await.expect("a session's calls"));
    }
    let took = started.elapsed();

    let served = served.lock().expect("the balancer's record").clone();
    let mut per_replica = [0usize; REPLICAS];
    for (s, session) in sessions.iter().enumerate() {
        let counts = served
            .get(session)
            .unwrap_or_else(|| panic!("session {s} never reached the balancer"));
        assert!(
            counts.iter().all(|n| *n > 0),
            "session {s} was not spread over every replica: {counts:?}"
        );
        // notifications/initialized, begin_session and the calls.
        assert_eq!(counts.iter().sum::<usize>(), CALLS + 2, "session {s}");
        for (total, n) in per_replica.iter_mut().zip(counts) {
            *total += n;
        }
    }
    let unique: std::collections::HashSet<&String> = sessions.iter().collect();
    assert_eq!(unique.len(), SESSIONS, "two sessions got one id");
    eprintln!(
        "{SESSIONS} sessions x {CALLS} calls over {REPLICAS} replicas: {:.1} s, requests per replica {per_replica:?}",
        took.as_secs_f64()
    );
    drop(replicas);
    drop(redis);
}
