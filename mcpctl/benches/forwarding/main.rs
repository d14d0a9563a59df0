//! Forwarding overhead of `mcpctl proxy --model passthrough`, measured against a direct
//! connection to the same upstream server, in one run.
//!
//! The upstream is this very binary: with `FORWARDING_BENCH_SERVER=1` in its environment it is a
//! minimal, fast MCP server on stdio (newline-delimited JSON-RPC 2.0, synchronous std I/O). It
//! answers `initialize`, ignores notifications, lists 1,000 realistic tools (a result of about
//! 1.25 MB) and has two tools: `echo`, which returns its `text` argument, and `blob`, which returns
//! a text content of exactly 1 MiB. Every answer that does not depend on the request is serialized
//! once at start-up, so the server's own cost is mostly the write.
//!
//! The driver opens three connections to it, over the child's stdin and stdout:
//! - direct: the server itself;
//! - proxied: `mcpctl proxy --model passthrough -- <this binary>`, which spawns the server;
//! - elsewhere: this binary as a proxy (`FORWARDING_BENCH_PROXY=1`, the library's
//!   `Proxy::run_stdio`) running a model whose only hooks are on methods the bench never sends:
//!   it shows that a hook no model implements costs nothing (SPEC F3).
//!
//! After `initialize` and `notifications/initialized` (and a check that every answer is what it
//! should be), it measures on each connection:
//! 1. latency of sequential `tools/call` to `echo` (p50, p90, p99, after a warm-up);
//! 2. throughput of `echo` calls with 16 requests in flight, pipelined on the one connection;
//! 3. `tools/list` with 1,000 tools (p50);
//! 4. `tools/call` to `blob`, 1 MiB of text (p50);
//!
//! and the proxy's CPU time per `tools/list` and per `blob` (the proxy's threads' on-CPU time from
//! `/proc`, before and after each batch; the direct server's own CPU time is shown beside it).
//!
//! The two connections are measured in rounds, phase by phase, alternating which goes first, so
//! that drift of the machine hits both alike; the table shows the median of the rounds. The driver
//! does the least a client can: it reads each answer's line and checks its id and that it is a
//! result, without parsing the rest, so the proxy's cost is not diluted by the client's.
//!
//! The last lines check the SPEC's targets: stdio p50 latency proxied <= 1.5x direct + 50 us, and
//! the 1,000-tool `tools/list` proxied <= 1.3x direct. They print PASS or MISS; the bench exits 0
//! either way, as it measures and does not test. It exits non-zero only when something breaks (a
//! child that crashes, a wrong answer).
//! A last line puts the `tools/list` numbers in scale: how long parsing that result into a
//! `serde_json::Value` takes in this process, and the ratio a client that does so would see.
//!
//! Each round's p50s go to stderr as it ends. Small latencies depend on where the scheduler puts
//! the processes: two processes that share a CPU hand a message over in a few microseconds, while
//! waking an idle CPU of a virtual machine can take tens of microseconds, so the direct baseline
//! may change from round to round and from run to run.
//!
//! Run it with
//!
//! ```text
//! cargo bench -p mcpctl --bench forwarding
//! FORWARDING_BENCH_QUICK=1 cargo bench -p mcpctl --bench forwarding   # every count ~10x smaller
//! ```
//!
//! When run without `--bench` (as `cargo test --benches` does), it runs the quick counts, as a
//! smoke test.

use std::fs::File;
use std::io::{self, BufRead as _, BufReader, BufWriter, Write as _};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Set to `1` in the environment of the bench binary to make it the upstream server.
const SERVER_ENV: &str = "FORWARDING_BENCH_SERVER";
/// Set to `1` to make the bench binary a proxy running [`elsewhere`] in front of itself as the
/// server.
const PROXY_ENV: &str = "FORWARDING_BENCH_PROXY";
/// Set to `1` to shrink every count about 10x.
const QUICK_ENV: &str = "FORWARDING_BENCH_QUICK";
/// How many tools `tools/list` returns.
const TOOL_COUNT: usize = 1_000;
/// The size of the `blob` tool's text, in bytes.
const BLOB_BYTES: usize = 1 << 20;
/// Requests in flight in the throughput phase.
const WINDOW: usize = 16;
/// The params of every `echo` call; the answer must carry the same text.
const ECHO_PARAMS: &str =
    r#"{"name":"echo","arguments":{"text":"hello from the forwarding bench"}}"#;

/// A model whose only hooks are on methods the bench never sends (`prompts/get`,
/// `completion/complete`): its proxy must forward everything else as `passthrough` does, since a
/// hook no model implements is never visited.
#[mcp_middleware::proxy_model(name = "bench-elsewhere")]
mod elsewhere {
    use mcp_middleware::prelude::*;

    pub(crate) async fn on_prompt_get(
        ctx: &Context,
        params: GetPromptRequestParams,
        next: Next<'_, hooks::PromptGet>,
    ) -> HookResult<GetPromptResult> {
        next.run(ctx, params).await
    }

    pub(crate) async fn on_completion(
        ctx: &Context,
        params: mcp_middleware::types::CompleteRequestParams,
        next: Next<'_, hooks::Completion>,
    ) -> HookResult<mcp_middleware::types::CompleteResult> {
        next.run(ctx, params).await
    }
}

fn main() {
    if std::env::var_os(PROXY_ENV).is_some_and(|v| v == "1") {
        let exe = std::env::current_exe().expect("cannot find the bench binary's own path");
        let server = mcp_middleware::upstream::StdioServer::new(exe)
            .env(PROXY_ENV, "0")
            .env(SERVER_ENV, "1");
        if let Err(err) = mcp_middleware::Proxy::new(server)
            .model::<elsewhere::Model>()
            .run_stdio()
        {
            eprintln!("forwarding bench proxy: {err}");
            std::process::exit(1);
        }
        return;
    }
    if std::env::var_os(SERVER_ENV).is_some_and(|v| v == "1") {
        if let Err(err) = server::run() {
            eprintln!("forwarding bench server: {err}");
            std::process::exit(1);
        }
        return;
    }
    let quick = std::env::var_os(QUICK_ENV).is_some_and(|v| v == "1")
        || !std::env::args().any(|arg| arg == "--bench");
    if let Err(err) = driver::run(&driver::Counts::new(quick)) {
        eprintln!("forwarding bench failed: {err}");
        std::process::exit(1);
    }
}

/// The upstream MCP server: one request at a time, answered and flushed before the next is read.
mod server {
    use super::*;

    pub(super) fn run() -> io::Result<()> {
        let tools_list = super::tools_list_result().to_string();
        let blob = json!({"content": [{"type": "text", "text": super::blob_text()}]}).to_string();
        // Plain files on the descriptors: no locking, no line buffering of stdout.
        let mut input = BufReader::with_capacity(
            64 * 1024,
            File::from(io::stdin().as_fd().try_clone_to_owned()?),
        );
        let mut out = BufWriter::with_capacity(
            64 * 1024,
            File::from(io::stdout().as_fd().try_clone_to_owned()?),
        );
        let mut line = String::new();
        loop {
            line.clear();
            if input.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line.trim().is_empty() {
                continue;
            }
            let request: Value = match serde_json::from_str(&line) {
                Ok(request) => request,
                Err(err) => {
                    eprintln!("forwarding bench server: ignoring a line that is not JSON: {err}");
                    continue;
                }
            };
            // Notifications (no id) and responses (no method) get no answer.
            let (Some(id), Some(method)) = (request.get("id"), request.get("method")) else {
                continue;
            };
            write!(out, r#"{{"jsonrpc":"2.0","id":{id},"#)?;
            let params = &request["params"];
            match method.as_str().unwrap_or_default() {
                "initialize" => {
                    let result = json!({
                        "protocolVersion": params["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "forwarding-bench", "version": "0.1.0"},
                    });
                    write!(out, r#""result":{result}"#)?;
                }
                "ping" => out.write_all(br#""result":{}"#)?,
                "tools/list" => {
                    out.write_all(br#""result":"#)?;
                    out.write_all(tools_list.as_bytes())?;
                }
                "tools/call" => match params["name"].as_str() {
                    Some("echo") => {
                        let text = &params["arguments"]["text"];
                        write!(
                            out,
                            r#""result":{{"content":[{{"type":"text","text":{text}}}]}}"#
                        )?;
                    }
                    Some("blob") => {
                        out.write_all(br#""result":"#)?;
                        out.write_all(blob.as_bytes())?;
                    }
                    _ => out.write_all(
                        br#""error":{"code":-32602,"message":"Unknown tool: only echo and blob"}"#,
                    )?,
                },
                _ => out.write_all(br#""error":{"code":-32601,"message":"Method not found"}"#)?,
            }
            out.write_all(b"}\n")?;
            out.flush()?;
        }
    }
}

/// The `tools/list` result: 1,000 tools with realistic names, descriptions and input schemas,
/// about 1.25 MB serialized.
fn tools_list_result() -> Value {
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
fn blob_text() -> String {
    const PATTERN: &str = "The quick brown fox jumps over the lazy dog 0123456789. ";
    PATTERN.chars().cycle().take(BLOB_BYTES).collect()
}

/// The client side: spawning, measuring, reporting.
mod driver {
    use super::*;

    /// How much of everything to do.
    pub(super) struct Counts {
        quick: bool,
        rounds: usize,
        latency_warmup: usize,
        latency_calls: usize,
        throughput_calls: usize,
        list_iterations: usize,
        blob_iterations: usize,
    }

    impl Counts {
        pub(super) fn new(quick: bool) -> Self {
            if quick {
                Self {
                    quick,
                    rounds: 2,
                    latency_warmup: 20,
                    latency_calls: 200,
                    throughput_calls: 300,
                    list_iterations: 5,
                    blob_iterations: 5,
                }
            } else {
                Self {
                    quick,
                    rounds: 5,
                    latency_warmup: 200,
                    latency_calls: 2_000,
                    throughput_calls: 3_000,
                    list_iterations: 50,
                    blob_iterations: 50,
                }
            }
        }
    }

    /// What one round measured on one connection.
    #[derive(Debug, Default, Clone)]
    struct Round {
        latency_p50_us: f64,
        latency_p90_us: f64,
        latency_p99_us: f64,
        calls_per_s: f64,
        list_p50_ms: f64,
        blob_p50_ms: f64,
        /// On-CPU time of the spawned process (the proxy, or the direct server) per call.
        list_cpu_ms: Option<f64>,
        blob_cpu_ms: Option<f64>,
    }

    pub(super) fn run(counts: &Counts) -> io::Result<()> {
        let started = Instant::now();
        let exe = std::env::current_exe().expect("cannot find the bench binary's own path");
        let mcpctl = Path::new(env!("CARGO_BIN_EXE_mcpctl"));
        let list_json = super::tools_list_result().to_string();
        let list_bytes = list_json.len();
        println!(
            "forwarding bench{}: {} rounds; echo {} calls (+{} warm-up), {} pipelined ({} in flight); \
             tools/list x{} ({} tools, {:.2} MB); blob x{} ({} bytes)",
            if counts.quick { " (quick)" } else { "" },
            counts.rounds,
            counts.latency_calls,
            counts.latency_warmup,
            counts.throughput_calls,
            WINDOW,
            counts.list_iterations,
            TOOL_COUNT,
            list_bytes as f64 / 1e6,
            counts.blob_iterations,
            BLOB_BYTES,
        );
        println!("proxy: {} proxy --model passthrough", mcpctl.display());

        let mut direct = Connection::spawn("direct", Command::new(&exe))?;
        let mut proxy_command = Command::new(mcpctl);
        proxy_command
            .args(["proxy", "--model", "passthrough", "--"])
            .arg(&exe);
        let mut proxied = Connection::spawn("proxied", proxy_command)?;
        let mut elsewhere_command = Command::new(&exe);
        elsewhere_command.env(super::PROXY_ENV, "1");
        let mut elsewhere = Connection::spawn("hooked-elsewhere", elsewhere_command)?;
        direct.handshake_and_check()?;
        proxied.handshake_and_check()?;
        elsewhere.handshake_and_check()?;

        let mut conns = [direct, proxied, elsewhere];
        let mut rounds: [Vec<Round>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        for round in 0..counts.rounds {
            // Rotate who goes first, so drift of the machine hits every connection alike.
            let order = [round % 3, (round + 1) % 3, (round + 2) % 3];
            let mut results = [Round::default(), Round::default(), Round::default()];
            for i in order {
                let (p50, p90, p99) = conns[i].latency(counts)?;
                results[i].latency_p50_us = p50;
                results[i].latency_p90_us = p90;
                results[i].latency_p99_us = p99;
            }
            for i in order {
                results[i].calls_per_s = conns[i].throughput(counts.throughput_calls)?;
            }
            for i in order {
                let (p50, cpu) = conns[i].big_calls("tools/list", "{}", counts.list_iterations)?;
                results[i].list_p50_ms = p50;
                results[i].list_cpu_ms = cpu;
            }
            for i in order {
                let (p50, cpu) = conns[i].big_calls(
                    "tools/call",
                    r#"{"name":"blob","arguments":{}}"#,
                    counts.blob_iterations,
                )?;
                results[i].blob_p50_ms = p50;
                results[i].blob_cpu_ms = cpu;
            }
            for (i, result) in results.into_iter().enumerate() {
                rounds[i].push(result);
            }
            eprintln!(
                "round {}/{} done: echo p50 {:.1} / {:.1} / {:.1} us, tools/list p50 {:.2} / {:.2} / {:.2} ms (direct / proxied / elsewhere)",
                round + 1,
                counts.rounds,
                rounds[0][round].latency_p50_us,
                rounds[1][round].latency_p50_us,
                rounds[2][round].latency_p50_us,
                rounds[0][round].list_p50_ms,
                rounds[1][round].list_p50_ms,
                rounds[2][round].list_p50_ms,
            );
        }
        for conn in conns {
            conn.close();
        }

        report(
            &rounds[0],
            &rounds[1],
            &rounds[2],
            client_parse_ms(&list_json, counts.list_iterations),
        );
        println!("total time {:.1} s", started.elapsed().as_secs_f64());
        Ok(())
    }

    /// How long parsing the `tools/list` result into a [`Value`] takes here (median), the work
    /// a client that reads its answers adds to both connections alike.
    fn client_parse_ms(list_json: &str, iterations: usize) -> f64 {
        let mut samples: Vec<f64> = (0..iterations.min(20))
            .map(|_| {
                let start = Instant::now();
                let value: Value =
                    serde_json::from_str(list_json).expect("the tools/list result is JSON");
                drop(std::hint::black_box(value));
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        percentile(&samples, 0.5)
    }

    fn report(direct: &[Round], proxied: &[Round], elsewhere: &[Round], client_parse_ms: f64) {
        let med = |rounds: &[Round], f: fn(&Round) -> f64| median(rounds.iter().map(f).collect());
        let med_opt = |rounds: &[Round], f: fn(&Round) -> Option<f64>| {
            let values: Option<Vec<f64>> = rounds.iter().map(f).collect();
            values.map(median)
        };
        struct Row {
            metric: &'static str,
            direct: f64,
            proxied: f64,
            /// Through a model whose hooks are on other methods.
            elsewhere: f64,
            /// The difference, proxied less direct, in microseconds.
            to_us: fn(f64, f64) -> f64,
            decimals: usize,
        }
        let us = |d: f64, p: f64| p - d;
        let ms = |d: f64, p: f64| (p - d) * 1e3;
        let per_call = |d: f64, p: f64| 1e6 / p - 1e6 / d;
        let rows = [
            Row {
                metric: "echo latency p50 (us)",
                direct: med(direct, |r| r.latency_p50_us),
                proxied: med(proxied, |r| r.latency_p50_us),
                elsewhere: med(elsewhere, |r| r.latency_p50_us),
                to_us: us,
                decimals: 1,
            },
            Row {
                metric: "echo latency p90 (us)",
                direct: med(direct, |r| r.latency_p90_us),
                proxied: med(proxied, |r| r.latency_p90_us),
                elsewhere: med(elsewhere, |r| r.latency_p90_us),
                to_us: us,
                decimals: 1,
            },
            Row {
                metric: "echo latency p99 (us)",
                direct: med(direct, |r| r.latency_p99_us),
                proxied: med(proxied, |r| r.latency_p99_us),
                elsewhere: med(elsewhere, |r| r.latency_p99_us),
                to_us: us,
                decimals: 1,
            },
            Row {
                metric: "echo, 16 in flight (calls/s) [1]",
                direct: med(direct, |r| r.calls_per_s),
                proxied: med(proxied, |r| r.calls_per_s),
                elsewhere: med(elsewhere, |r| r.calls_per_s),
                to_us: per_call,
                decimals: 0,
            },
            Row {
                metric: "tools/list, 1,000 tools p50 (ms)",
                direct: med(direct, |r| r.list_p50_ms),
                proxied: med(proxied, |r| r.list_p50_ms),
                elsewhere: med(elsewhere, |r| r.list_p50_ms),
                to_us: ms,
                decimals: 2,
            },
            Row {
                metric: "blob 1 MiB p50 (ms)",
                direct: med(direct, |r| r.blob_p50_ms),
                proxied: med(proxied, |r| r.blob_p50_ms),
                elsewhere: med(elsewhere, |r| r.blob_p50_ms),
                to_us: ms,
                decimals: 2,
            },
        ];
        println!();
        println!(
            "{:<34} | {:>10} | {:>10} | {:>6} | {:>9} | {:>10} | {:>8}",
            "metric", "direct", "proxied", "ratio", "+us", "elsewhere", "vs prox."
        );
        println!(
            "{:-<34}-|-{:->10}-|-{:->10}-|-{:->6}-|-{:->9}-|-{:->10}-|-{:->8}",
            "", "", "", "", "", "", ""
        );
        for row in &rows {
            println!(
                "{:<34} | {:>10.prec$} | {:>10.prec$} | {:>6.2} | {:>9.1} | {:>10.prec$} | {:>8.2}",
                row.metric,
                row.direct,
                row.proxied,
                row.proxied / row.direct,
                (row.to_us)(row.direct, row.proxied),
                row.elsewhere,
                row.elsewhere / row.proxied,
                prec = row.decimals,
            );
        }
        println!("[1] +us: the difference in time per call (1/throughput)");
        println!(
            "proxied: `mcpctl proxy --model passthrough`; elsewhere: a model whose only hooks are on \
             methods never sent here (prompts/get, completion/complete), so it must cost what \
             passthrough does (`vs prox.` ~1.00)"
        );
        println!();
        let cpu = |name: &str, proxy: Option<f64>, server: Option<f64>| match (proxy, server) {
            (Some(proxy), Some(server)) => println!(
                "proxy CPU per {name}: {proxy:.2} ms (the upstream server's own, direct: {server:.2} ms)"
            ),
            _ => println!("proxy CPU per {name}: n/a (/proc not readable)"),
        };
        cpu(
            "tools/list",
            med_opt(proxied, |r| r.list_cpu_ms),
            med_opt(direct, |r| r.list_cpu_ms),
        );
        cpu(
            "blob",
            med_opt(proxied, |r| r.blob_cpu_ms),
            med_opt(direct, |r| r.blob_cpu_ms),
        );
        match (
            med_opt(elsewhere, |r| r.list_cpu_ms),
            med_opt(elsewhere, |r| r.blob_cpu_ms),
        ) {
            (Some(list), Some(blob)) => println!(
                "proxy CPU with the model hooked elsewhere: {list:.2} ms per tools/list, {blob:.2} ms per blob"
            ),
            _ => println!("proxy CPU with the model hooked elsewhere: n/a"),
        }
        println!();
        let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
        let (d, p) = (rows[0].direct, rows[0].proxied);
        let limit = 1.5 * d + 50.0;
        println!(
            "SPEC stdio p50 <= 1.5x direct + 50 us: {p:.1} us <= {limit:.1} us: {}",
            verdict(p <= limit)
        );
        let (d, p) = (rows[4].direct, rows[4].proxied);
        let limit = 1.3 * d;
        println!(
            "SPEC 1,000-tool list <= 1.3x direct: {p:.2} ms <= {limit:.2} ms: {}",
            verdict(p <= limit)
        );
        println!(
            "  for scale: parsing the tools/list result into a serde_json::Value takes {client_parse_ms:.2} ms \
             here; a client that does would see {:.2} ms / {:.2} ms, a ratio of {:.2}",
            p + client_parse_ms,
            d + client_parse_ms,
            (p + client_parse_ms) / (d + client_parse_ms),
        );
    }

    /// One MCP connection over a child's stdin and stdout.
    struct Connection {
        name: &'static str,
        child: Child,
        to_server: BufWriter<ChildStdin>,
        from_server: BufReader<ChildStdout>,
        /// The last line read, reused to keep allocation out of the timed loops.
        line: Vec<u8>,
        next_id: u64,
    }

    impl Connection {
        /// Starts `command` with the server switch in its environment.
        fn spawn(name: &'static str, mut command: Command) -> io::Result<Self> {
            let program = PathBuf::from(command.get_program());
            let mut child = command
                .env(SERVER_ENV, "1")
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

        fn error(&self, message: impl std::fmt::Display) -> io::Error {
            io::Error::other(format!("{} connection: {message}", self.name))
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

        fn send_echo(&mut self) -> io::Result<u64> {
            self.send("tools/call", ECHO_PARAMS)
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

        /// Reads the next answer and returns its id, checking it is a result. The common shape,
        /// `{"jsonrpc":"2.0","id":N,"result":...`, is recognized without parsing the rest of the
        /// line; anything else is parsed in full.
        fn recv_result(&mut self) -> io::Result<u64> {
            self.read_line()?;
            if let Some(id) = fast_result_id(&self.line) {
                return Ok(id);
            }
            let message: Value = serde_json::from_slice(&self.line).map_err(|err| {
                self.error(format!(
                    "an answer that is not JSON ({err}): {}",
                    preview(&self.line)
                ))
            })?;
            match (
                message.get("id").and_then(Value::as_u64),
                message.get("result"),
            ) {
                (Some(id), Some(_)) => Ok(id),
                _ => Err(self.error(format!("expected a result, got: {}", preview(&self.line)))),
            }
        }

        /// Sends one request and waits for its result, parsed in full. For checks, not timing.
        fn call(&mut self, method: &str, params: &str) -> io::Result<Value> {
            let id = self.send(method, params)?;
            self.flush()?;
            self.read_line()?;
            let mut message: Value = serde_json::from_slice(&self.line).map_err(|err| {
                self.error(format!(
                    "the answer to `{method}` is not JSON ({err}): {}",
                    preview(&self.line)
                ))
            })?;
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                return Err(self.error(format!(
                    "expected the answer to `{method}` (id {id}), got: {}",
                    preview(&self.line)
                )));
            }
            message
                .get_mut("result")
                .map(Value::take)
                .ok_or_else(|| self.error(format!("`{method}` failed: {}", preview(&self.line))))
        }

        /// The MCP handshake, then one of each call checked in full.
        fn handshake_and_check(&mut self) -> io::Result<()> {
            let result = self.call(
                "initialize",
                r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"forwarding-bench","version":"0.1.0"}}"#,
            )?;
            if result["protocolVersion"] != "2025-06-18" {
                return Err(self.error(format!("unexpected initialize result: {result}")));
            }
            writeln!(
                self.to_server,
                r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
            )?;
            self.send_echo()?;
            self.flush()?;
            self.read_line()?;
            let echo: Value = serde_json::from_slice(&self.line)
                .map_err(|err| self.error(format!("echo answer is not JSON: {err}")))?;
            let sent: Value = serde_json::from_str(ECHO_PARAMS).expect("ECHO_PARAMS is JSON");
            if echo["result"]["content"][0]["text"] != sent["arguments"]["text"] {
                return Err(self.error(format!("wrong echo answer: {}", preview(&self.line))));
            }
            let tools = self.call("tools/list", "{}")?;
            let count = tools["tools"].as_array().map_or(0, Vec::len);
            if count != TOOL_COUNT {
                return Err(self.error(format!("tools/list returned {count} tools")));
            }
            let blob = self.call("tools/call", r#"{"name":"blob","arguments":{}}"#)?;
            let len = blob["content"][0]["text"].as_str().map_or(0, str::len);
            if len != BLOB_BYTES {
                return Err(self.error(format!("blob returned {len} bytes of text")));
            }
            Ok(())
        }

        /// One sequential echo call; the time from the write to the whole answer read.
        fn timed_echo(&mut self) -> io::Result<Duration> {
            let start = Instant::now();
            let id = self.send_echo()?;
            self.flush()?;
            let got = self.recv_result()?;
            let elapsed = start.elapsed();
            if got != id {
                return Err(self.error(format!("expected the answer to id {id}, got id {got}")));
            }
            Ok(elapsed)
        }

        /// Sequential echo latency: p50, p90, p99 in microseconds.
        fn latency(&mut self, counts: &Counts) -> io::Result<(f64, f64, f64)> {
            for _ in 0..counts.latency_warmup {
                self.timed_echo()?;
            }
            let mut samples = Vec::with_capacity(counts.latency_calls);
            for _ in 0..counts.latency_calls {
                samples.push(self.timed_echo()?.as_secs_f64() * 1e6);
            }
            samples.sort_by(f64::total_cmp);
            Ok((
                percentile(&samples, 0.50),
                percentile(&samples, 0.90),
                percentile(&samples, 0.99),
            ))
        }

        /// `total` echo calls with [`WINDOW`] in flight: calls per second. Each answer lets the
        /// next request go, so the window stays full until the end.
        fn throughput(&mut self, total: usize) -> io::Result<f64> {
            let first = self.next_id + 1;
            let start = Instant::now();
            let mut sent = 0;
            while sent < total.min(WINDOW) {
                self.send_echo()?;
                sent += 1;
            }
            self.flush()?;
            for _ in 0..total {
                let id = self.recv_result()?;
                if !(first..=self.next_id).contains(&id) {
                    return Err(self.error(format!("an answer to an unknown id {id}")));
                }
                if sent < total {
                    self.send_echo()?;
                    self.flush()?;
                    sent += 1;
                }
            }
            Ok(total as f64 / start.elapsed().as_secs_f64())
        }

        /// `iterations` sequential calls with a big answer: p50 in milliseconds, and the child's
        /// CPU time per call in milliseconds if `/proc` tells it.
        fn big_calls(
            &mut self,
            method: &str,
            params: &str,
            iterations: usize,
        ) -> io::Result<(f64, Option<f64>)> {
            let pid = self.child.id();
            let cpu_before = cpu_time(pid);
            let mut samples = Vec::with_capacity(iterations);
            for _ in 0..iterations {
                let start = Instant::now();
                let id = self.send(method, params)?;
                self.flush()?;
                let got = self.recv_result()?;
                samples.push(start.elapsed().as_secs_f64() * 1e3);
                if got != id {
                    return Err(self.error(format!("expected the answer to id {id}, got id {got}")));
                }
            }
            let cpu = cpu_before.zip(cpu_time(pid)).map(|(before, after)| {
                after.saturating_sub(before).as_secs_f64() * 1e3 / iterations as f64
            });
            samples.sort_by(f64::total_cmp);
            Ok((percentile(&samples, 0.50), cpu))
        }

        /// Closes the child's stdin and waits for it to exit (the proxy stops its upstream
        /// first); kills it if it takes more than 10 s.
        fn close(self) {
            let Self {
                name,
                mut child,
                to_server,
                ..
            } = self;
            drop(to_server);
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match child.try_wait() {
                    Ok(Some(status)) if status.success() => return,
                    Ok(Some(status)) => {
                        eprintln!("warning: the {name} connection's child exited with {status}");
                        return;
                    }
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Ok(None) | Err(_) => {
                        eprintln!(
                            "warning: the {name} connection's child did not exit; killing it"
                        );
                        let _ = child.kill();
                        let _ = child.wait();
                        return;
                    }
                }
            }
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

    /// The start of a line, for error messages.
    fn preview(line: &[u8]) -> String {
        let text = String::from_utf8_lossy(&line[..line.len().min(300)]);
        let text = text.trim_end();
        if line.len() > 300 {
            format!("{text}... ({} bytes)", line.len())
        } else {
            text.to_owned()
        }
    }

    /// Nearest-rank percentile of sorted samples.
    fn percentile(sorted: &[f64], q: f64) -> f64 {
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = (q * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    fn median(mut values: Vec<f64>) -> f64 {
        values.sort_by(f64::total_cmp);
        match values.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => values[n / 2],
            n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        }
    }

    /// The on-CPU time of every thread of process `pid`: the sum of the threads'
    /// `/proc/<pid>/task/<tid>/schedstat` (nanoseconds), or else utime + stime from
    /// `/proc/<pid>/stat` (clock ticks of 10 ms). `None` where `/proc` has neither.
    fn cpu_time(pid: u32) -> Option<Duration> {
        let from_schedstat = || -> Option<Duration> {
            let mut total = 0u64;
            for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
                let text = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
                total += text.split_whitespace().next()?.parse::<u64>().ok()?;
            }
            Some(Duration::from_nanos(total))
        };
        from_schedstat().or_else(|| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // Fields after the command name, which is in parentheses and may hold spaces:
            // state is field 3, utime field 14, stime field 15.
            let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
            let ticks: u64 =
                fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
            Some(Duration::from_millis(ticks * 10))
        })
    }
}
