//! `mcpctl serve` where operators run it, end to end with the real binary: `/healthz` and
//! `/readyz` answer a probe whose `Host` no allow-list names, and `/readyz` follows the
//! upstream (down: 503 naming it, or a generic reason when clients must authenticate; up:
//! 200); `--log-format json` makes every stderr line a JSON object, with `session` on a
//! session's lines and, with traces on, a line per request joining its `trace_id` to the
//! session; flags come from `MCPCTL_*` variables; the Dockerfile's shape is checked.

mod support;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use support::WAIT;
use support::scratch::Scratch;

/// A running `mcpctl serve`, stopped with SIGTERM (and waited for) when dropped.
struct Served {
    child: Child,
    addr: String,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    /// `mcpctl ARGS` with `env`; its address from the `listening on` line, plain or JSON.
    fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpctl"));
        command
            .args(args)
            .env_remove("MCPCTL_LOG")
            .env_remove("MCPCTL_LOG_FORMAT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("mcpctl serve starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (url, reader) = read_stderr(stderr, lines.clone());
        let Ok(addr) = url.recv_timeout(WAIT) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mcpctl serve did not say where it listens: {lines:?}");
        };
        Self {
            child,
            addr,
            lines,
            reader: Some(reader),
        }
    }

    /// Stops the server and returns every line it wrote to stderr.
    fn stop(mut self) -> Vec<String> {
        self.terminate();
        // Every line is in once stderr has ended.
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        std::mem::take(&mut *self.lines.lock().expect("the lines"))
    }

    fn terminate(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Collects stderr's lines; sends the `listening on http://ADDR` address when it comes.
fn read_stderr(
    stderr: impl std::io::Read + Send + 'static,
    lines: Arc<Mutex<Vec<String>>>,
) -> (Receiver<String>, std::thread::JoinHandle<()>) {
    let (tx, rx) = channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("mcpctl: {line}");
            let message = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v.get("message")?.as_str().map(str::to_owned))
                .unwrap_or_else(|| line.clone());
            if let Some(url) = message.strip_prefix("listening on http://") {
                let _ = tx.send(url.trim_end_matches("/mcp").to_owned());
            }
            if let Ok(mut lines) = lines.lock() {
                lines.push(line);
            }
        }
    });
    (rx, reader)
}

/// One HTTP/1.1 request on its own connection: the status and the body.
fn http(addr: &str, method: &str, path: &str, host: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\
         accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the response");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"ops-test","version":"1"}}}"#;

/// A probe's `Host`: the pod's address, which no allow-list names.
const POD: &str = "10.1.2.3:8080";

fn serve_args(upstream: &[String]) -> Vec<&str> {
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--model",
        "passthrough",
        "--",
    ];
    args.extend(upstream.iter().map(String::as_str));
    args
}

#[test]
fn readyz_says_which_upstream_is_down_and_healthz_stays_up() {
    let down = vec!["/bin/false".to_owned()];
    let served = Served::start(&serve_args(&down), &[]);
    let (status, body) = http(&served.addr, "GET", "/healthz", POD, "");
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));
    let (status, body) = http(&served.addr, "GET", "/readyz", POD, "");
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).expect("a JSON body");
    assert_eq!(body["status"], "not ready");
    let reason = body["reason"].as_str().expect("a reason");
    assert!(reason.contains("upstream `/bin/false`"), "{reason}");
    // The exemption is for the health paths only: the MCP endpoint still refuses that Host.
    let (status, _) = http(&served.addr, "POST", "/mcp", POD, INITIALIZE);
    assert_eq!(status, 403);
}

#[test]
fn readyz_is_200_once_the_upstream_answers() {
    let served = Served::start(&serve_args(&support::scripted_upstream()), &[]);
    let (status, body) = http(&served.addr, "GET", "/readyz", POD, "");
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ready"}"#));
}

#[test]
fn readyz_names_nothing_when_clients_must_authenticate() {
    let scratch = Scratch::new("ops-tokens");
    let tokens = scratch.path("tokens");
    std::fs::write(&tokens, "alice 0123456789abcdef0123456789abcdef\n").expect("write tokens");
    let tokens = tokens.display().to_string();
    let mut args = vec!["serve", "--tokens", &tokens];
    let down = vec!["/bin/false".to_owned()];
    args.extend(serve_args(&down).into_iter().skip(1));
    let served = Served::start(&args, &[]);
    let (status, body) = http(&served.addr, "GET", "/readyz", POD, "");
    assert_eq!(status, 503, "{body}");
    assert!(!body.contains("/bin/false"), "{body}");
    assert!(body.contains("an upstream is not running"), "{body}");
}

#[test]
fn json_logs_are_one_object_per_line_with_the_session() {
    let served = Served::start(
        &serve_args(&support::scripted_upstream()),
        &[("MCPCTL_LOG_FORMAT", "json"), ("MCPCTL_LOG", "info")],
    );
    let (status, body) = http(&served.addr, "POST", "/mcp", "127.0.0.1", INITIALIZE);
    assert_eq!(status, 200, "{body}");
    let lines = served.stop();
    let mut sessions = 0;
    for line in &lines {
        let object: Value = serde_json::from_str(line)
            .unwrap_or_else(|err| panic!("not a JSON line ({err}): {line}"));
        assert!(
            object["level"].is_string() && object["timestamp"].is_string(),
            "{line}"
        );
        if let Some(session) = object.get("session").and_then(Value::as_str) {
            assert!(session.starts_with("http-"), "{line}");
            sessions += 1;
        }
    }
    assert!(sessions > 0, "no line names the session: {lines:#?}");
}

#[test]
fn proxy_json_logs_join_each_request_to_its_trace_and_session() {
    // Traces on (to an endpoint nothing listens on: the ids exist whether or not the export
    // succeeds), and the tap's lines let through.
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
        ("MCPCTL_LOG", "mcpctl::otel=debug"),
        ("MCPCTL_LOG_FORMAT", "json"),
    ];
    let mut client = support::Client::scripted(&["--model", "passthrough"], &env);
    client.initialize();
    let listed = client.request(serde_json::json!(1), "tools/list", serde_json::json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let (status, stderr) = client.close_with_stderr();
    assert!(status.success(), "{stderr}");
    let mut traced = Vec::new();
    for line in stderr.lines() {
        let object: Value = serde_json::from_str(line)
            .unwrap_or_else(|err| panic!("not a JSON line ({err}): {line}"));
        if let Some(trace) = object.get("trace_id").and_then(Value::as_str) {
            assert!(
                trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit()),
                "{line}"
            );
            assert!(object["session"].is_string(), "{line}");
            traced.push(object["method"].as_str().unwrap_or_default().to_owned());
        }
    }
    assert_eq!(traced, ["initialize", "tools/list"], "{stderr}");
}

#[test]
fn flag_variables_that_may_hold_credentials_stay_out_of_an_ad_hoc_command() {
    let scratch = Scratch::new("ops-env");
    let seen = scratch.path("env");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/scripted_upstream.py")
        .display()
        .to_string();
    let upstream = [
        "sh".to_owned(),
        "-c".to_owned(),
        format!("env > '{}'; exec python3 -u '{script}'", seen.display()),
    ];
    let env = [
        ("MCPCTL_STORE", "redis://:hunter2@127.0.0.1:1/0"),
        ("MCPCTL_HEADER", "Authorization: Bearer hunter3"),
        ("MCPCTL_HOME_UNRELATED", "kept"),
    ];
    let mut client = support::Client::start(&["--model", "passthrough"], &upstream, &env);
    client.initialize();
    let (status, stderr) = client.close_with_stderr();
    assert!(status.success(), "{stderr}");
    let seen = std::fs::read_to_string(&seen).expect("the child's environment");
    assert!(seen.contains("MCPCTL_HOME_UNRELATED=kept"), "{seen}");
    assert!(
        !seen.contains("hunter2") && !seen.contains("hunter3"),
        "{seen}"
    );
}

#[test]
fn flags_come_from_the_environment() {
    let mut args = vec!["serve", "--"];
    let upstream = support::scripted_upstream();
    args.extend(upstream.iter().map(String::as_str));
    let env = [
        ("MCPCTL_LISTEN", "127.0.0.1:0"),
        ("MCPCTL_MODEL", "passthrough"),
        ("MCPCTL_ALLOW_HOST", "mcp.internal,mcp.example.com"),
    ];
    let served = Served::start(&args, &env);
    for host in ["mcp.internal", "mcp.example.com"] {
        let (status, body) = http(&served.addr, "POST", "/mcp", host, INITIALIZE);
        assert_eq!(status, 200, "{host}: {body}");
    }
    let (status, _) = http(
        &served.addr,
        "POST",
        "/mcp",
        "elsewhere.example",
        INITIALIZE,
    );
    assert_eq!(status, 403);
}

#[test]
fn the_dockerfile_has_the_shape_the_image_needs() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let check = root.join("scripts/image-check");
    let out = Command::new(&check)
        .output()
        .expect("scripts/image-check runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // A Dockerfile that builds unlocked and runs as root is refused, each problem named.
    let scratch = Scratch::new("ops-image");
    let original = std::fs::read_to_string(root.join("Dockerfile")).expect("the Dockerfile");
    let broken = original
        .replace("--locked ", "")
        .replace("USER mcpctl\nWORKDIR", "USER root\nWORKDIR");
    let dockerfile = scratch.path("Dockerfile");
    std::fs::write(&dockerfile, broken).expect("write");
    std::fs::write(scratch.path(".dockerignore"), "target\n").expect("write");
    let out = Command::new(&check)
        .arg(&dockerfile)
        .output()
        .expect("scripts/image-check runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for problem in ["lacks --locked", "runs as root", "leave out .git"] {
        assert!(stderr.contains(problem), "{problem}: {stderr}");
    }
}
