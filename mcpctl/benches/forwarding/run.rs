//! The driver: starting the connections, the interleaved rounds, memory, the table.

use std::collections::BTreeMap;
use std::io::{self, BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{HttpSession, Rpc, StdioConnection, wait_or_kill};
use super::{
    BLOB_BYTES, MCPCTL_ENV, ONLY_ENV, PROXY_ENV, RELAY_ENV, RELAY_TO_ENV, SERVER_ENV, TOOL_COUNT,
    UPSTREAM_ENV,
};

/// The params of every `echo` call; the answer must carry the same text.
const ECHO_PARAMS: &str =
    r#"{"name":"echo","arguments":{"text":"hello from the forwarding bench"}}"#;
const ECHO_TEXT: &str = "hello from the forwarding bench";
const BLOB_PARAMS: &str = r#"{"name":"blob","arguments":{}}"#;
/// What `default` (through `gate`) needs before any other tool can be called.
const BEGIN_PARAMS: &str =
    r#"{"name":"begin_session","arguments":{"intent":"measure what the proxy costs"}}"#;
const INITIALIZE_PARAMS: &str = r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"forwarding-bench","version":"0.1.0"}}"#;
/// Requests in flight on one stdio connection in the throughput phase.
const STDIO_WINDOW: usize = 32;
/// Concurrent sessions in the HTTP throughput phases.
const HTTP_SESSIONS: [usize; 4] = [1, 4, 8, 32];
/// The bench is one client address holding 1 + 64 idle sessions, then 32: over the default
/// quota of 32 per principal, and near the default of 64 connections per address.
const SESSION_QUOTA: [&str; 4] = [
    "--max-sessions-per-principal",
    "256",
    "--max-connections-per-address",
    "1024",
];
/// The size of the large message every path must carry.
const BIG_MESSAGE_BYTES: usize = 16 << 20;

/// How much of everything to do.
pub(super) struct Counts {
    /// How the run is named in its first line: "", " (quick)" or " (smoke)".
    label: &'static str,
    rounds: usize,
    latency_warmup: usize,
    latency_calls: usize,
    pipelined_calls: usize,
    http_calls: usize,
    list_iterations: usize,
    blob_iterations: usize,
    idle_sessions: usize,
}

impl Counts {
    pub(super) fn new(quick: bool) -> Self {
        if quick {
            Self {
                label: " (quick)",
                rounds: 2,
                latency_warmup: 20,
                latency_calls: 200,
                pipelined_calls: 320,
                http_calls: 320,
                list_iterations: 3,
                blob_iterations: 3,
                idle_sessions: 8,
            }
        } else {
            Self {
                label: "",
                rounds: 5,
                latency_warmup: 200,
                latency_calls: 2_000,
                pipelined_calls: 4_000,
                http_calls: 3_200,
                list_iterations: 30,
                blob_iterations: 30,
                idle_sessions: 64,
            }
        }
    }

    /// The smoke run `cargo test` makes (a debug build, without `--bench`): every path once, a
    /// few calls each. Its figures judge nothing, so it does no more than prove the paths work.
    pub(super) fn smoke() -> Self {
        Self {
            label: " (smoke)",
            rounds: 1,
            latency_warmup: 5,
            latency_calls: 40,
            pipelined_calls: 64,
            // Two calls per session at 32 sessions.
            http_calls: 64,
            list_iterations: 1,
            blob_iterations: 1,
            idle_sessions: 4,
        }
    }
}

/// Who serves a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Variant {
    Direct,
    Passthrough,
    Default,
    /// `audit`: an observer that writes and MACs one record per call (what operators run).
    Audit,
    /// The library proxy with a model hooked on methods the bench never sends (stdio only).
    Elsewhere,
    /// A process that only copies bytes between the client and the server (stdio only): the
    /// floor of any proxy.
    Relay,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Direct => "direct",
            Variant::Passthrough => "passthrough",
            Variant::Default => "default",
            Variant::Audit => "audit",
            Variant::Elsewhere => "hooked-elsewhere",
            Variant::Relay => "relay",
        }
    }

    fn gated(self) -> bool {
        self == Variant::Default
    }

    /// Whether answers come back whole (`default` pages the 1 MiB result).
    fn whole(self) -> bool {
        self != Variant::Default
    }
}

/// Whether the upstream is rmcp's own server (`FORWARDING_BENCH_UPSTREAM=rmcp`) rather than
/// the hand-written one.
pub(super) fn rmcp_upstream() -> bool {
    std::env::var_os(UPSTREAM_ENV).is_some_and(|v| v == "rmcp")
}

/// What the proxy behind an HTTP front talks to: its own stdio child per session (`mcpctl
/// serve -- CMD`), or the direct HTTP server (`mcpctl serve --url URL`). The direct column
/// of both is the same: the server over HTTP, measured once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Up {
    Stdio,
    Http,
}

impl Up {
    fn label(self) -> &'static str {
        match self {
            Up::Stdio => "HTTP>stdio",
            Up::Http => "HTTP>HTTP",
        }
    }
}

/// A row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Metric {
    StdioEchoP50,
    StdioEchoP99,
    StdioEchoCpu,
    StdioInFlight,
    StdioListP50,
    StdioListCpu,
    StdioBlobP50,
    StdioBlobCpu,
    StdioIdleRss,
    StdioPeakRss,
    Http(Up, HttpRow),
}

/// A row of an HTTP front's part of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum HttpRow {
    EchoP50,
    EchoP99,
    EchoCpu,
    Sessions(usize),
    ListP50,
    ListCpu,
    BlobP50,
    BlobCpu,
    IdleRss,
    RssPerSession,
    PeakRss,
}

impl HttpRow {
    fn label(self) -> String {
        match self {
            HttpRow::EchoP50 => "echo p50 (us)".into(),
            HttpRow::EchoP99 => "echo p99 (us)".into(),
            HttpRow::EchoCpu => "CPU per echo (us) [1]".into(),
            HttpRow::Sessions(n) => format!("{n} session{} (calls/s)", plural(n)),
            HttpRow::ListP50 => "tools/list 1,000 p50 (ms)".into(),
            HttpRow::ListCpu => "CPU per tools/list (ms) [1]".into(),
            HttpRow::BlobP50 => "1 MiB result p50 (ms) [2]".into(),
            HttpRow::BlobCpu => "CPU per 1 MiB result (ms) [1]".into(),
            HttpRow::IdleRss => "idle RSS, 1 session (MB) [3]".into(),
            HttpRow::RssPerSession => "RSS per idle session (KiB) [3]".into(),
            HttpRow::PeakRss => "peak RSS (MB) [3]".into(),
        }
    }

    fn kind(self) -> Kind {
        match self {
            HttpRow::Sessions(_) => Kind::Rate,
            HttpRow::EchoP50 | HttpRow::EchoP99 | HttpRow::ListP50 | HttpRow::BlobP50 => Kind::Time,
            _ => Kind::Cost,
        }
    }

    fn decimals(self) -> usize {
        match self {
            HttpRow::Sessions(_) | HttpRow::RssPerSession => 0,
            HttpRow::EchoP50
            | HttpRow::EchoP99
            | HttpRow::EchoCpu
            | HttpRow::IdleRss
            | HttpRow::PeakRss => 1,
            _ => 2,
        }
    }
}

/// How a row is shown and compared.
#[derive(PartialEq)]
enum Kind {
    /// A time: lower is better; the difference is shown.
    Time,
    /// Calls per second: higher is better; the difference per call is shown, in us.
    Rate,
    /// CPU time or memory: the direct column is the server's own, for scale only.
    Cost,
}

impl Metric {
    fn label(self) -> String {
        match self {
            Metric::StdioEchoP50 => "stdio echo p50 (us)".into(),
            Metric::StdioEchoP99 => "stdio echo p99 (us)".into(),
            Metric::StdioEchoCpu => "stdio CPU per echo (us) [1]".into(),
            Metric::StdioInFlight => format!("stdio {STDIO_WINDOW} in flight (calls/s)"),
            Metric::StdioListP50 => "stdio tools/list 1,000 p50 (ms)".into(),
            Metric::StdioListCpu => "stdio CPU per tools/list (ms) [1]".into(),
            Metric::StdioBlobP50 => "stdio 1 MiB result p50 (ms) [2]".into(),
            Metric::StdioBlobCpu => "stdio CPU per 1 MiB result (ms) [1]".into(),
            Metric::StdioIdleRss => "stdio idle RSS (MB) [3]".into(),
            Metric::StdioPeakRss => "stdio peak RSS (MB) [3]".into(),
            Metric::Http(up, row) => format!("{} {}", up.label(), row.label()),
        }
    }

    fn kind(self) -> Kind {
        match self {
            Metric::Http(_, row) => row.kind(),
            Metric::StdioInFlight => Kind::Rate,
            Metric::StdioEchoP50
            | Metric::StdioEchoP99
            | Metric::StdioListP50
            | Metric::StdioBlobP50 => Kind::Time,
            _ => Kind::Cost,
        }
    }

    fn decimals(self) -> usize {
        match self {
            Metric::Http(_, row) => row.decimals(),
            Metric::StdioInFlight => 0,
            Metric::StdioEchoP50
            | Metric::StdioEchoP99
            | Metric::StdioEchoCpu
            | Metric::StdioIdleRss
            | Metric::StdioPeakRss => 1,
            _ => 2,
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Every measurement, by row and variant, one per round.
#[derive(Default)]
struct Samples(BTreeMap<(Metric, Variant), Vec<f64>>);

impl Samples {
    fn add(&mut self, metric: Metric, variant: Variant, value: f64) {
        self.0.entry((metric, variant)).or_default().push(value);
    }

    fn add_opt(&mut self, metric: Metric, variant: Variant, value: Option<f64>) {
        if let Some(value) = value {
            self.add(metric, variant, value);
        }
    }

    /// An HTTP row of `path`; the direct server's rows count for both kinds of upstream.
    fn add_http(&mut self, path: &HttpPath, row: HttpRow, value: Option<f64>) {
        let Some(value) = value else { return };
        if path.variant == Variant::Direct {
            self.add(Metric::Http(Up::Stdio, row), path.variant, value);
            self.add(Metric::Http(Up::Http, row), path.variant, value);
        } else {
            self.add(Metric::Http(path.up, row), path.variant, value);
        }
    }

    fn median(&self, metric: Metric, variant: Variant) -> Option<f64> {
        let mut values = self.0.get(&(metric, variant))?.clone();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(values[n / 2]),
            _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
        }
    }
}

/// A run that fails half-way leaves no server behind (an `mcpctl serve` takes its upstream
/// children with it: they die with their parent).
impl Drop for HttpPath {
    fn drop(&mut self) {
        if matches!(self.server.try_wait(), Ok(None)) {
            let _ = self.server.kill();
            let _ = self.server.wait();
        }
    }
}

impl HttpPath {
    /// Which path this is, for messages.
    fn name(&self) -> String {
        match (self.variant, self.up) {
            (Variant::Direct, _) => "HTTP direct".to_owned(),
            (variant, up) => format!("{} {}", up.label(), variant.name()),
        }
    }
}

/// A stdio connection and what serves it.
struct StdioPath {
    variant: Variant,
    conn: StdioConnection,
}

/// An HTTP endpoint and its sessions.
struct HttpPath {
    variant: Variant,
    /// Unused for the direct server.
    up: Up,
    server: Child,
    url: String,
    sessions: Vec<HttpSession>,
}

pub(super) fn run(counts: &Counts) -> io::Result<()> {
    let started = Instant::now();
    let exe = std::env::current_exe().expect("cannot find the bench binary's own path");
    // Another build's binary for an A/B run (the library proxy of the stdio part is always
    // this build's: it is this binary).
    let mcpctl_override = std::env::var_os(MCPCTL_ENV).map(PathBuf::from);
    let mcpctl = mcpctl_override
        .as_deref()
        .unwrap_or(Path::new(env!("CARGO_BIN_EXE_mcpctl")));
    let list_json = super::server::tools_list_result().to_string();
    println!(
        "forwarding bench{}: {} rounds; echo {} calls (+{} warm-up); stdio {} calls with {} in \
         flight; HTTP {} calls over 1, 4, 8 and 32 sessions; tools/list x{} ({} tools, {:.2} MB); \
         1 MiB result x{}; {} idle HTTP sessions",
        counts.label,
        counts.rounds,
        counts.latency_calls,
        counts.latency_warmup,
        counts.pipelined_calls,
        STDIO_WINDOW,
        counts.http_calls,
        counts.list_iterations,
        TOOL_COUNT,
        list_json.len() as f64 / 1e6,
        counts.blob_iterations,
        counts.idle_sessions,
    );
    println!("proxy: {}", mcpctl.display());
    println!(
        "upstream: {}",
        if rmcp_upstream() {
            "rmcp 3.11's own server (rmcp_server.rs; FORWARDING_BENCH_UPSTREAM=rmcp)"
        } else {
            "the hand-written server (server.rs)"
        }
    );
    if cfg!(debug_assertions) {
        println!(
            "note: a debug build (as `cargo test` makes): a smoke test, the figures mean \
             nothing; `cargo bench -p mcpctl --bench forwarding` measures"
        );
    }
    let mut samples = Samples::default();
    let mut notes = Vec::new();

    let only = std::env::var(ONLY_ENV).unwrap_or_default();
    // ---- stdio
    let stdio_variants: &[Variant] = if only == "http" {
        &[]
    } else {
        &[
            Variant::Direct,
            Variant::Passthrough,
            Variant::Default,
            Variant::Audit,
            Variant::Elsewhere,
            Variant::Relay,
        ]
    };
    let mut stdio = Vec::new();
    for &variant in stdio_variants {
        let mut command = match variant {
            Variant::Direct => Command::new(&exe),
            Variant::Passthrough | Variant::Default | Variant::Audit => {
                let mut command = Command::new(mcpctl);
                command
                    .args(["proxy", "--model", variant.name()])
                    .args(model_config(variant))
                    .arg("--")
                    .arg(&exe);
                command
            }
            Variant::Elsewhere => {
                let mut command = Command::new(&exe);
                command.env(PROXY_ENV, "1");
                command
            }
            Variant::Relay => {
                let mut command = Command::new(&exe);
                command.env(RELAY_ENV, "1");
                command
            }
        };
        command.env(SERVER_ENV, "1");
        let mut conn = StdioConnection::spawn(format!("stdio {}", variant.name()), command)?;
        handshake(&mut conn, variant)?;
        std::thread::sleep(Duration::from_millis(50));
        samples.add_opt(Metric::StdioIdleRss, variant, rss_mb(conn.pid(), "VmRSS"));
        check(&mut conn, variant)?;
        stdio.push(StdioPath { variant, conn });
    }
    for round in 0..counts.rounds {
        let order = rotation(stdio.len(), round);
        for &i in &order {
            let StdioPath { variant, conn } = &mut stdio[i];
            let pid = conn.pid();
            let (p50, p99, cpu) = latency(conn, pid, counts)?;
            samples.add(Metric::StdioEchoP50, *variant, p50);
            samples.add(Metric::StdioEchoP99, *variant, p99);
            samples.add_opt(Metric::StdioEchoCpu, *variant, cpu);
        }
        for &i in &order {
            let StdioPath { variant, conn } = &mut stdio[i];
            let rate = conn.pipelined(ECHO_PARAMS, counts.pipelined_calls, STDIO_WINDOW)?;
            samples.add(Metric::StdioInFlight, *variant, rate);
        }
        for (method, params, p50_metric, cpu_metric, iterations) in [
            (
                "tools/list",
                "{}",
                Metric::StdioListP50,
                Metric::StdioListCpu,
                counts.list_iterations,
            ),
            (
                "tools/call",
                BLOB_PARAMS,
                Metric::StdioBlobP50,
                Metric::StdioBlobCpu,
                counts.blob_iterations,
            ),
        ] {
            for &i in &order {
                let StdioPath { variant, conn } = &mut stdio[i];
                let pid = conn.pid();
                let (p50, cpu) = big_calls(conn, pid, method, params, iterations)?;
                samples.add(p50_metric, *variant, p50);
                samples.add_opt(cpu_metric, *variant, cpu);
            }
        }
        eprintln!(
            "stdio round {}/{} done: echo p50 {} us; tools/list p50 {} ms",
            round + 1,
            counts.rounds,
            last_of(&samples, Metric::StdioEchoP50, stdio_variants),
            last_of(&samples, Metric::StdioListP50, stdio_variants),
        );
    }
    for StdioPath { variant, conn } in &mut stdio {
        samples.add_opt(Metric::StdioPeakRss, *variant, rss_mb(conn.pid(), "VmHWM"));
        notes.push(format!(
            "16 MiB message, stdio {}: {}",
            variant.name(),
            big_message(conn, *variant)
        ));
    }
    for path in stdio {
        path.conn.close();
    }

    // ---- HTTP
    let http_paths: &[(Variant, Up)] = if only == "stdio" {
        &[]
    } else {
        &[
            (Variant::Direct, Up::Http),
            (Variant::Relay, Up::Http),
            (Variant::Passthrough, Up::Stdio),
            (Variant::Default, Up::Stdio),
            (Variant::Audit, Up::Stdio),
            (Variant::Passthrough, Up::Http),
            (Variant::Default, Up::Http),
        ]
    };
    let http_variants: &[Variant] = if http_paths.is_empty() {
        &[]
    } else {
        &[
            Variant::Direct,
            Variant::Passthrough,
            Variant::Default,
            Variant::Audit,
        ]
    };
    let mut http: Vec<HttpPath> = Vec::new();
    for &(variant, up) in http_paths {
        // The proxies with an HTTP upstream talk to the direct server, started first.
        let direct_url = http
            .iter()
            .find(|p| p.variant == Variant::Direct)
            .map(|p| p.url.clone());
        let upstream = match up {
            Up::Http if variant != Variant::Direct => Some(direct_url.ok_or_else(|| {
                io::Error::other("the direct HTTP server must start before its proxies")
            })?),
            _ => None,
        };
        let (server, url) = start_http(variant, upstream.as_deref(), &exe, mcpctl)?;
        let mut path = HttpPath {
            variant,
            up,
            server,
            url,
            sessions: Vec::new(),
        };
        let name = path.name();
        let pid = path.server.id();
        let mut first = HttpSession::connect(format!("{name} session 1"), &path.url)?;
        handshake(&mut first, variant)?;
        std::thread::sleep(Duration::from_millis(50));
        let idle = rss_mb(pid, "VmRSS");
        samples.add_http(&path, HttpRow::IdleRss, idle);
        // Idle sessions: opened, then left without a connection.
        let mut idle_ids = Vec::new();
        for n in 0..counts.idle_sessions {
            let mut session = HttpSession::connect(format!("{name} idle {n}"), &path.url)?;
            session.call("initialize", INITIALIZE_PARAMS)?;
            session.notify("notifications/initialized")?;
            idle_ids.extend(session.disconnect());
        }
        std::thread::sleep(Duration::from_millis(200));
        if let (Some(before), Some(after)) = (idle, rss_mb(pid, "VmRSS")) {
            let per_session = (after - before) * 1e6 / 1024.0 / counts.idle_sessions as f64;
            samples.add_http(&path, HttpRow::RssPerSession, Some(per_session));
        }
        for id in idle_ids {
            HttpSession::delete(&path.url, &id)?;
        }
        check(&mut first, variant)?;
        path.sessions.push(first);
        for n in 1..HTTP_SESSIONS[HTTP_SESSIONS.len() - 1] {
            let mut session = HttpSession::connect(format!("{name} session {}", n + 1), &path.url)?;
            handshake(&mut session, variant)?;
            path.sessions.push(session);
        }
        http.push(path);
    }
    for round in 0..counts.rounds {
        let order = rotation(http.len(), round);
        for &i in &order {
            let path = &mut http[i];
            let pid = path.server.id();
            let (p50, p99, cpu) = latency(&mut path.sessions[0], pid, counts)?;
            samples.add_http(path, HttpRow::EchoP50, Some(p50));
            samples.add_http(path, HttpRow::EchoP99, Some(p99));
            samples.add_http(path, HttpRow::EchoCpu, cpu);
        }
        for sessions in HTTP_SESSIONS {
            for &i in &order {
                let path = &mut http[i];
                let rate = concurrent(&mut path.sessions[..sessions], counts.http_calls)?;
                samples.add_http(path, HttpRow::Sessions(sessions), Some(rate));
            }
        }
        for (method, params, p50_row, cpu_row, iterations) in [
            (
                "tools/list",
                "{}",
                HttpRow::ListP50,
                HttpRow::ListCpu,
                counts.list_iterations,
            ),
            (
                "tools/call",
                BLOB_PARAMS,
                HttpRow::BlobP50,
                HttpRow::BlobCpu,
                counts.blob_iterations,
            ),
        ] {
            for &i in &order {
                let path = &mut http[i];
                let pid = path.server.id();
                let (p50, cpu) = big_calls(&mut path.sessions[0], pid, method, params, iterations)?;
                samples.add_http(path, p50_row, Some(p50));
                samples.add_http(path, cpu_row, cpu);
            }
        }
        eprintln!(
            "HTTP round {}/{} done: echo p50 {} us (stdio upstream), {} us (HTTP upstream); 32 sessions {} calls/s",
            round + 1,
            counts.rounds,
            last_of(
                &samples,
                Metric::Http(Up::Stdio, HttpRow::EchoP50),
                http_variants
            ),
            last_of(
                &samples,
                Metric::Http(Up::Http, HttpRow::EchoP50),
                http_variants
            ),
            last_of(
                &samples,
                Metric::Http(Up::Stdio, HttpRow::Sessions(32)),
                http_variants
            ),
        );
    }
    for path in &mut http {
        let peak = rss_mb(path.server.id(), "VmHWM");
        samples.add_http(path, HttpRow::PeakRss, peak);
        let outcome = match HttpSession::connect("HTTP 16 MiB".to_owned(), &path.url) {
            Ok(mut conn) => {
                conn.set_session(path.sessions[0].session_id());
                big_message(&mut conn, path.variant)
            }
            Err(err) => format!("FAILED: {err}"),
        };
        notes.push(format!("16 MiB message, {}: {outcome}", path.name()));
    }
    // The proxies first: they hold sessions on the direct server.
    http.sort_by_key(|path| path.variant == Variant::Direct);
    for mut path in http {
        path.sessions.clear();
        stop(&mut path.server, path.variant);
    }

    report(
        &samples,
        &notes,
        client_parse_ms(&list_json, 10),
        counts.idle_sessions,
    );
    let _ = std::fs::remove_file(audit_log());
    let _ = std::fs::remove_file(std::env::temp_dir().join(format!(
        "forwarding-bench-admin-tokens-{}",
        std::process::id()
    )));
    println!("total time {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Starts the HTTP endpoint of `variant`, in front of `upstream` (an HTTP server's URL) or
/// else of its own stdio child per session; its child and URL.
fn start_http(
    variant: Variant,
    upstream: Option<&str>,
    exe: &Path,
    mcpctl: &Path,
) -> io::Result<(Child, String)> {
    let mut command = if variant == Variant::Direct {
        let mut command = Command::new(exe);
        command.env(SERVER_ENV, "http").stdout(Stdio::piped());
        command
    } else if variant == Variant::Relay {
        let mut command = Command::new(exe);
        command
            .env(RELAY_ENV, "http")
            .env(RELAY_TO_ENV, upstream.unwrap_or_default())
            .stdout(Stdio::piped());
        command
    } else if let Some(url) = upstream {
        let mut command = Command::new(mcpctl);
        command
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--model",
                variant.name(),
                "--url",
                url,
            ])
            .args(model_config(variant))
            .args(operated(variant))
            .args(SESSION_QUOTA)
            .stderr(Stdio::piped());
        command
    } else {
        let mut command = Command::new(mcpctl);
        command
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--model",
                variant.name(),
            ])
            .args(model_config(variant))
            .args(operated(variant))
            .args(SESSION_QUOTA)
            .arg("--")
            .arg(exe)
            .env(SERVER_ENV, "1")
            .stderr(Stdio::piped());
        command
    };
    let mut child = command.stdin(Stdio::null()).spawn().map_err(|err| {
        io::Error::other(format!(
            "cannot start the HTTP {} server: {err}",
            variant.name()
        ))
    })?;
    // `mcpctl serve` says where it listens on stderr, the bench server on stdout.
    let output: Box<dyn io::Read + Send> = match (child.stdout.take(), child.stderr.take()) {
        (Some(stdout), _) => Box::new(stdout),
        (None, Some(stderr)) => Box::new(stderr),
        (None, None) => unreachable!("one of them was piped"),
    };
    let mut lines = BufReader::new(output);
    let mut line = String::new();
    let url = loop {
        line.clear();
        if lines.read_line(&mut line)? == 0 {
            let _ = child.kill();
            return Err(io::Error::other(format!(
                "the HTTP {} server exited before it listened",
                variant.name()
            )));
        }
        if let Some(url) = line.trim().strip_prefix("listening on ") {
            break url.to_owned();
        }
        eprint!("{line}");
    };
    // Whatever else it says goes to our stderr.
    std::thread::spawn(move || {
        let mut line = String::new();
        while lines.read_line(&mut line).is_ok_and(|n| n > 0) {
            eprint!("{line}");
            line.clear();
        }
    });
    Ok((child, url))
}

/// The `--set` arguments a variant's model needs: `audit` writes its records to a file of this
/// run's (removed when the run ends), with a key given inline.
fn model_config(variant: Variant) -> Vec<String> {
    if variant != Variant::Audit {
        return Vec::new();
    }
    vec![
        "--set".to_owned(),
        format!("audit.path={}", audit_log().display()),
        "--set".to_owned(),
        "audit.key=a-key-for-the-forwarding-bench".to_owned(),
    ]
}

/// Over HTTP the `audit` paths also run the admin listener (its request tap feeds `/metrics`):
/// the configuration operators run.
fn operated(variant: Variant) -> Vec<String> {
    if variant != Variant::Audit {
        return Vec::new();
    }
    let tokens = std::env::temp_dir().join(format!(
        "forwarding-bench-admin-tokens-{}",
        std::process::id()
    ));
    if std::fs::write(&tokens, "bench a-token-for-the-forwarding-bench\n").is_err() {
        return Vec::new();
    }
    vec![
        "--admin-listen".to_owned(),
        "127.0.0.1:0".to_owned(),
        "--admin-tokens".to_owned(),
        tokens.display().to_string(),
    ]
}

/// Where the `audit` paths of this run write.
fn audit_log() -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "forwarding-bench-audit-{}.jsonl",
        std::process::id()
    ))
}

/// Stops an HTTP endpoint: SIGTERM for `mcpctl serve` (it stops its upstreams), kill for the
/// bench server.
fn stop(server: &mut Child, variant: Variant) {
    if matches!(variant, Variant::Direct | Variant::Relay) {
        let _ = server.kill();
        let _ = server.wait();
        return;
    }
    let terminated = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    if !terminated {
        let _ = server.kill();
    }
    wait_or_kill(variant.name(), server, Duration::from_secs(15));
}

/// `initialize`, `notifications/initialized`, and `begin_session` where the model gates.
fn handshake(rpc: &mut impl Rpc, variant: Variant) -> io::Result<()> {
    let result = rpc.call("initialize", INITIALIZE_PARAMS)?;
    if result["protocolVersion"] != "2025-06-18" {
        return Err(rpc.error(format!("unexpected initialize result: {result}")));
    }
    rpc.notify("notifications/initialized")?;
    if variant.gated() {
        let opened = rpc.call("tools/call", BEGIN_PARAMS)?;
        if opened["isError"] == true {
            return Err(rpc.error(format!("begin_session failed: {opened}")));
        }
    }
    Ok(())
}

/// One of each call, its answer parsed and checked in full.
fn check(rpc: &mut impl Rpc, variant: Variant) -> io::Result<()> {
    let echo = rpc.call("tools/call", ECHO_PARAMS)?;
    if echo["content"][0]["text"] != ECHO_TEXT {
        return Err(rpc.error(format!("wrong echo answer: {echo}")));
    }
    let tools = rpc.call("tools/list", "{}")?;
    let count = tools["tools"].as_array().map_or(0, Vec::len);
    // `default` adds its synthetic tools (`read_page`, `read_prompts`).
    if count != TOOL_COUNT && (variant.whole() || count < TOOL_COUNT) {
        return Err(rpc.error(format!("tools/list returned {count} tools")));
    }
    let blob = rpc.call("tools/call", BLOB_PARAMS)?;
    let text = blob["content"][0]["text"].as_str().unwrap_or_default();
    let paged = !variant.whole() && text.len() < BLOB_BYTES && text.contains("read_page");
    if text.len() != BLOB_BYTES && !paged {
        return Err(rpc.error(format!(
            "the 1 MiB result came back as {} bytes of text",
            text.len()
        )));
    }
    Ok(())
}

/// Echoes 16 MiB of text; what happened, in words.
fn big_message(rpc: &mut impl Rpc, variant: Variant) -> String {
    let text = "x".repeat(BIG_MESSAGE_BYTES);
    let params = format!(r#"{{"name":"echo","arguments":{{"text":"{text}"}}}}"#);
    let start = Instant::now();
    match rpc.call("tools/call", &params) {
        Ok(result) => {
            let got = result["content"][0]["text"].as_str().map_or(0, str::len);
            let ms = start.elapsed().as_secs_f64() * 1e3;
            if got == BIG_MESSAGE_BYTES {
                format!("ok ({ms:.0} ms)")
            } else if !variant.whole() && got > 0 {
                format!("ok, paged: {got} bytes of text on page 1 ({ms:.0} ms)")
            } else {
                format!("FAILED: {got} bytes of text came back")
            }
        }
        Err(err) => format!("FAILED: {err}"),
    }
}

/// Sequential echo latency: p50 and p99 in us, and `pid`'s CPU time per call in us.
fn latency(rpc: &mut impl Rpc, pid: u32, counts: &Counts) -> io::Result<(f64, f64, Option<f64>)> {
    for _ in 0..counts.latency_warmup {
        rpc.roundtrip("tools/call", ECHO_PARAMS)?;
    }
    let mut samples = Vec::with_capacity(counts.latency_calls);
    let cpu_before = cpu_time(pid);
    for _ in 0..counts.latency_calls {
        let start = Instant::now();
        rpc.roundtrip("tools/call", ECHO_PARAMS)?;
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let cpu = per_call(cpu_before, cpu_time(pid), counts.latency_calls, 1e6);
    samples.sort_by(f64::total_cmp);
    Ok((percentile(&samples, 0.50), percentile(&samples, 0.99), cpu))
}

/// `iterations` sequential calls with a big answer: p50 in ms, and `pid`'s CPU time per call
/// in ms.
fn big_calls(
    rpc: &mut impl Rpc,
    pid: u32,
    method: &str,
    params: &str,
    iterations: usize,
) -> io::Result<(f64, Option<f64>)> {
    let cpu_before = cpu_time(pid);
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        rpc.roundtrip(method, params)?;
        samples.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let cpu = per_call(cpu_before, cpu_time(pid), iterations, 1e3);
    samples.sort_by(f64::total_cmp);
    Ok((percentile(&samples, 0.50), cpu))
}

/// `total` echo calls spread over `sessions`, each on its own thread and sequential: calls
/// per second over all of them.
fn concurrent(sessions: &mut [HttpSession], total: usize) -> io::Result<f64> {
    let count = sessions.len();
    let each = total.div_ceil(count).max(10);
    let barrier = Barrier::new(count + 1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = sessions
            .iter_mut()
            .map(|session| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    for _ in 0..each {
                        session.roundtrip("tools/call", ECHO_PARAMS)?;
                    }
                    Ok::<_, io::Error>(())
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for worker in workers {
            worker.join().expect("a load thread panicked")?;
        }
        Ok((each * count) as f64 / start.elapsed().as_secs_f64())
    })
}

/// The order connections go in, in round `round`.
fn rotation(len: usize, round: usize) -> Vec<usize> {
    (0..len).map(|i| (i + round) % len).collect()
}

/// The last round's values of a row, for the progress line.
fn last_of(samples: &Samples, metric: Metric, variants: &[Variant]) -> String {
    variants
        .iter()
        .map(|v| {
            samples
                .0
                .get(&(metric, *v))
                .and_then(|values| values.last())
                .map_or("-".to_owned(), |x| format!("{x:.1}"))
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// How long parsing the `tools/list` result into a [`Value`] takes here (median): what a
/// client that reads its answers adds to both sides alike.
fn client_parse_ms(list_json: &str, iterations: usize) -> f64 {
    let mut samples: Vec<f64> = (0..iterations)
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

fn report(samples: &Samples, notes: &[String], client_parse_ms: f64, idle_sessions: usize) {
    let columns = [Variant::Passthrough, Variant::Default, Variant::Audit];
    println!();
    print!("{:<38} | {:>10}", "scenario (median of rounds)", "direct");
    for v in columns {
        print!(" | {:>11} | {:>6} | {:>9}", v.name(), "ratio", "+");
    }
    println!();
    print!("{:-<38}-|-{:->10}", "", "");
    for _ in columns {
        print!("-|-{:->11}-|-{:->6}-|-{:->9}", "", "", "");
    }
    println!();
    let mut metrics: Vec<Metric> = samples.0.keys().map(|(m, _)| *m).collect();
    metrics.dedup();
    for metric in metrics {
        let prec = metric.decimals();
        let direct = samples.median(metric, Variant::Direct);
        print!("{:<38} | {:>10}", metric.label(), fmt(direct, prec));
        for v in columns {
            let value = samples.median(metric, v);
            let (ratio, diff) = match (direct, value, metric.kind()) {
                (Some(d), Some(p), Kind::Time) => {
                    (format!("{:.2}", p / d), format!("{:+.1}", p - d))
                }
                (Some(d), Some(p), Kind::Rate) => (
                    format!("{:.2}", p / d),
                    format!("{:+.1}", 1e6 / p - 1e6 / d),
                ),
                _ => (String::new(), String::new()),
            };
            print!(" | {:>11} | {ratio:>6} | {diff:>9}", fmt(value, prec));
        }
        println!();
    }
    println!(
        "+: proxied less direct, in the row's unit (for calls/s: the difference in time per \
         call, us)"
    );
    println!(
        "[1] on-CPU time of the proxy process per call (all its threads, not the upstream \
         children); direct: the server's own"
    );
    println!(
        "[2] default pages it: the client gets page 1 (32 KiB) and a read_page cursor; the \
         proxy keeps the rest"
    );
    println!(
        "[4] audit: one JSON record per call, MACed and chained; over HTTP also the admin \
         listener, whose request tap feeds /metrics (the configuration operators run)"
    );
    println!(
        "[3] the proxy process's VmRSS / VmHWM; direct: the server's own; per idle session: \
         RSS growth over {idle_sessions} sessions opened with initialize and left without a \
         connection, divided by their number"
    );
    for note in notes {
        println!("{note}");
    }
    let m = |metric, v| samples.median(metric, v);
    if let (Some(pass), Some(hooked)) = (
        m(Metric::StdioEchoP50, Variant::Passthrough),
        m(Metric::StdioEchoP50, Variant::Elsewhere),
    ) {
        println!(
            "unused hooks cost nothing: a model hooked only on methods never sent here (library \
             proxy, stdio): echo p50 {hooked:.1} us vs passthrough {pass:.1} us; CPU per \
             tools/list {} ms vs {} ms",
            fmt(m(Metric::StdioListCpu, Variant::Elsewhere), 2),
            fmt(m(Metric::StdioListCpu, Variant::Passthrough), 2),
        );
    }
    if let (Some(direct), Some(relay), Some(pass)) = (
        m(Metric::StdioEchoP50, Variant::Direct),
        m(Metric::StdioEchoP50, Variant::Relay),
        m(Metric::StdioEchoP50, Variant::Passthrough),
    ) {
        println!(
            "floor: a process that only copies bytes (relay.rs): stdio echo p50 {relay:.1} us \
             ({:.2}x direct; passthrough {pass:.1} us, {:.2}x the relay), CPU per echo {} us; \
             tools/list p50 {} ms; 1 MiB result p50 {} ms",
            relay / direct,
            pass / relay,
            fmt(m(Metric::StdioEchoCpu, Variant::Relay), 1),
            fmt(m(Metric::StdioListP50, Variant::Relay), 2),
            fmt(m(Metric::StdioBlobP50, Variant::Relay), 2),
        );
    }
    let h = |row| m(Metric::Http(Up::Http, row), Variant::Relay);
    if let (Some(direct), Some(relay), Some(pass)) = (
        m(Metric::Http(Up::Http, HttpRow::EchoP50), Variant::Direct),
        h(HttpRow::EchoP50),
        m(
            Metric::Http(Up::Http, HttpRow::EchoP50),
            Variant::Passthrough,
        ),
    ) {
        let sessions = |v| m(Metric::Http(Up::Http, HttpRow::Sessions(32)), v);
        println!(
            "floor: a TCP relay (relay.rs) in front of the direct HTTP server: echo p50 \
             {relay:.1} us ({:.2}x direct; HTTP>HTTP passthrough {pass:.1} us, {:.2}x the \
             relay), CPU per echo {} us; 32 sessions {} calls/s ({} direct); tools/list p50 \
             {} ms",
            relay / direct,
            pass / relay,
            fmt(h(HttpRow::EchoCpu), 1),
            fmt(sessions(Variant::Relay), 0),
            match (sessions(Variant::Relay), sessions(Variant::Direct)) {
                (Some(r), Some(d)) => format!("{:.2}x", r / d),
                _ => "-".to_owned(),
            },
            fmt(h(HttpRow::ListP50), 2),
        );
    }
    if let (Some(d), Some(p)) = (
        m(Metric::StdioListP50, Variant::Direct),
        m(Metric::StdioListP50, Variant::Passthrough),
    ) {
        println!(
            "for scale: parsing the tools/list result into a serde_json::Value takes \
             {client_parse_ms:.2} ms here; a client that does would see {:.2} / {:.2} ms, a \
             ratio of {:.2}",
            p + client_parse_ms,
            d + client_parse_ms,
            (p + client_parse_ms) / (d + client_parse_ms),
        );
    }

    println!();
    if cfg!(debug_assertions) {
        // A debug build is the smoke run `cargo test` makes: its figures say the paths work,
        // not how fast they are, so judging them against the targets would only mislead.
        println!(
            "targets: not judged in a smoke run (a debug build measures \
             nothing); `cargo bench -p mcpctl --bench forwarding` judges them"
        );
        return;
    }
    println!("Targets, for passthrough / default / audit:");
    type Check<'a> = dyn Fn(Variant) -> Option<(bool, String)> + 'a;
    let ratio =
        move |metric: Metric, v: Variant| Some((m(metric, v)?, m(metric, Variant::Direct)?));
    let http = |up, row| Metric::Http(up, row);
    let targets: Vec<(&str, Box<Check<'_>>)> = vec![
        (
            "stdio echo p50 <= 1.5x direct",
            Box::new(move |v| {
                let (p, d) = ratio(Metric::StdioEchoP50, v)?;
                Some((p <= 1.5 * d, format!("{:.2}x, {:+.1} us", p / d, p - d)))
            }),
        ),
        (
            "stdio proxy CPU per echo <= 20 us",
            Box::new(move |v| {
                let cpu = m(Metric::StdioEchoCpu, v)?;
                Some((cpu <= 20.0, format!("{cpu:.1} us")))
            }),
        ),
        (
            "default: stdio echo p50 <= 1.15x passthrough",
            Box::new(move |v| {
                if v != Variant::Default {
                    return None;
                }
                let d = m(Metric::StdioEchoP50, v)?;
                let p = m(Metric::StdioEchoP50, Variant::Passthrough)?;
                Some((d <= 1.15 * p, format!("{:.2}x", d / p)))
            }),
        ),
        (
            "default: stdio tools/list p50 <= 1.5x passthrough",
            Box::new(move |v| {
                if v != Variant::Default {
                    return None;
                }
                let d = m(Metric::StdioListP50, v)?;
                let p = m(Metric::StdioListP50, Variant::Passthrough)?;
                Some((d <= 1.5 * p, format!("{:.2}x", d / p)))
            }),
        ),
        (
            "audit: stdio echo p50 <= 1.1x passthrough",
            Box::new(move |v| {
                if v != Variant::Audit {
                    return None;
                }
                let a = m(Metric::StdioEchoP50, v)?;
                let p = m(Metric::StdioEchoP50, Variant::Passthrough)?;
                Some((a <= 1.1 * p, format!("{:.2}x", a / p)))
            }),
        ),
        (
            "audit: stdio CPU per echo <= 1.2x passthrough",
            Box::new(move |v| {
                if v != Variant::Audit {
                    return None;
                }
                let a = m(Metric::StdioEchoCpu, v)?;
                let p = m(Metric::StdioEchoCpu, Variant::Passthrough)?;
                Some((a <= 1.2 * p, format!("{:.2}x", a / p)))
            }),
        ),
        (
            "audit: stdio tools/list p50 <= 1.1x passthrough",
            Box::new(move |v| {
                if v != Variant::Audit {
                    return None;
                }
                let a = m(Metric::StdioListP50, v)?;
                let p = m(Metric::StdioListP50, Variant::Passthrough)?;
                Some((a <= 1.1 * p, format!("{:.2}x", a / p)))
            }),
        ),
        (
            "proxy CPU per tools/list <= 3 ms (stdio)",
            Box::new(move |v| {
                let cpu = m(Metric::StdioListCpu, v)?;
                Some((cpu <= 3.0, format!("{cpu:.2} ms")))
            }),
        ),
        (
            "32 in flight on stdio >= 0.7x direct throughput",
            Box::new(move |v| {
                let (p, d) = ratio(Metric::StdioInFlight, v)?;
                Some((p >= 0.7 * d, format!("{:.2}x", p / d)))
            }),
        ),
        (
            "1 MiB result <= +1 ms (stdio; default pages it)",
            Box::new(move |v| {
                let (p, d) = ratio(Metric::StdioBlobP50, v)?;
                Some((p <= d + 1.0, format!("{:+.2} ms", p - d)))
            }),
        ),
        (
            "HTTP>HTTP echo p50 <= 1.5x direct",
            Box::new(move |v| {
                let (p, d) = ratio(http(Up::Http, HttpRow::EchoP50), v)?;
                Some((p <= 1.5 * d, format!("{:.2}x, {:+.1} us", p / d, p - d)))
            }),
        ),
        (
            "HTTP>HTTP 32 sessions >= 0.6x direct throughput",
            Box::new(move |v| {
                let (p, d) = ratio(http(Up::Http, HttpRow::Sessions(32)), v)?;
                Some((p >= 0.6 * d, format!("{:.2}x", p / d)))
            }),
        ),
        (
            "HTTP>HTTP tools/list p50 <= 1.5x direct",
            Box::new(move |v| {
                let (p, d) = ratio(http(Up::Http, HttpRow::ListP50), v)?;
                Some((p <= 1.5 * d, format!("{:.2}x, {:+.2} ms", p / d, p - d)))
            }),
        ),
        (
            "HTTP>stdio CPU per echo <= 1.5x the stdio front's",
            Box::new(move |v| {
                let h = m(http(Up::Stdio, HttpRow::EchoCpu), v)?;
                let s = m(Metric::StdioEchoCpu, v)?;
                Some((h <= 1.5 * s, format!("{:.2}x ({h:.1} vs {s:.1} us)", h / s)))
            }),
        ),
        (
            "HTTP>stdio 4 sessions >= 1.8x 1 session",
            Box::new(move |v| {
                let four = m(http(Up::Stdio, HttpRow::Sessions(4)), v)?;
                let one = m(http(Up::Stdio, HttpRow::Sessions(1)), v)?;
                Some((four >= 1.8 * one, format!("{:.2}x", four / one)))
            }),
        ),
        (
            "peak RSS <= 40 MB (stdio, HTTP>stdio, HTTP>HTTP)",
            Box::new(move |v| {
                let stdio = m(Metric::StdioPeakRss, v)?;
                let a = m(http(Up::Stdio, HttpRow::PeakRss), v)?;
                let b = m(http(Up::Http, HttpRow::PeakRss), v)?;
                Some((
                    stdio <= 40.0 && a <= 40.0 && b <= 40.0,
                    format!("{stdio:.1}, {a:.1}, {b:.1} MB"),
                ))
            }),
        ),
        (
            "<= 64 KiB per extra idle HTTP session",
            Box::new(move |v| {
                let kib = m(http(Up::Stdio, HttpRow::RssPerSession), v)?;
                Some((kib <= 64.0, format!("{kib:.0} KiB")))
            }),
        ),
    ];
    for (name, check) in &targets {
        print!("  {name:<52}");
        for v in columns {
            match check(v) {
                Some((ok, figure)) => {
                    print!(" {:<4} {figure:<24}", if ok { "PASS" } else { "MISS" })
                }
                None => print!(" {:<29}", "n/a"),
            }
        }
        println!();
    }
    let big_ok = notes.iter().all(|n| !n.contains("FAILED"));
    println!(
        "  {:<50} {}",
        "no message size limit below 16 MiB",
        if big_ok {
            "PASS (every path)"
        } else {
            "MISS (see above)"
        }
    );
}

fn fmt(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn per_call(
    before: Option<Duration>,
    after: Option<Duration>,
    calls: usize,
    unit: f64,
) -> Option<f64> {
    let (before, after) = before.zip(after)?;
    Some(after.saturating_sub(before).as_secs_f64() * unit / calls as f64)
}

/// A `VmRSS` or `VmHWM` line of `/proc/<pid>/status`, in MB.
fn rss_mb(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0 / 1e6)
}

/// The on-CPU time of every thread of process `pid`: the sum of the threads'
/// `/proc/<pid>/task/<tid>/schedstat` (nanoseconds), or else utime + stime from
/// `/proc/<pid>/stat` (clock ticks of 10 ms). `None` where `/proc` has neither.
fn cpu_time(pid: u32) -> Option<Duration> {
    let from_schedstat = || -> Option<Duration> {
        let mut total = 0u64;
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
            let path: PathBuf = task.ok()?.path().join("schedstat");
            // A thread may end between the listing and the read.
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
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
