//! A change to the store is in force when the command that made it returns: `mcpctl apply`
//! (and `edit` and `delete`, through the same wait) waits until every running proxy of the store has reloaded it, so a tool
//! hidden by an `apply` is refused from the very next request (there is no window in which the
//! proxies' file watch has not fired yet), and one shown again answers at once.

#[path = "support/home.rs"]
mod home;

use std::io::{BufRead, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use home::Home;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn scripted_upstream() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/scripted_upstream.py")
        .display()
        .to_string()
}

/// The project `fence` in front of the scripted upstream (tools `t` and `deploy`), with
/// `hidden` as its hidden routes.
fn project(hidden: &str) -> String {
    format!(
        "kind: Server\nmetadata: {{name: scripted}}\nspec:\n  command: python3\n  args: [-u, '{}']\n  env:\n    SCRIPTED_TOOLS: deploy\n---\nkind: Project\nmetadata: {{name: fence}}\nspec:\n  servers: [scripted]\n  routes:\n    hidden: [{hidden}]\n",
        scripted_upstream()
    )
}

/// `mcpctl proxy fence`, spoken to in raw lines; killed when dropped.
struct Proxy {
    child: Child,
    lines: Receiver<String>,
    next_id: u64,
}

impl Proxy {
    fn start(home: &Home) -> Self {
        let mut child = home
            .command(&["proxy", "fence"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("mcpctl starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut proxy = Self {
            child,
            lines,
            next_id: 0,
        };
        let init = proxy.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "fence", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        proxy.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        proxy
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.child.stdin.as_mut().expect("stdin is piped");
        writeln!(stdin, "{message}").expect("write to the proxy");
        stdin.flush().expect("flush");
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            let message: Value = serde_json::from_str(&line).expect("a JSON line");
            if message["id"] == id {
                return message;
            }
        }
    }

    fn call_deploy(&mut self) -> Value {
        self.request("tools/call", json!({"name": "deploy", "arguments": {}}))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_tool_hidden_by_apply_is_refused_from_the_next_request_after_apply_returns() {
    let home = Home::new();
    home.apply(&project(""));
    let mut proxy = Proxy::start(&home);
    let called = proxy.call_deploy();
    assert_eq!(
        called["result"]["content"][0]["text"], "called deploy",
        "{called}"
    );
    // Several rounds: a proxy that reloads some time after `apply` returns loses at least one.
    for round in 0..3 {
        home.apply(&project("deploy"));
        let refused = proxy.call_deploy();
        assert_eq!(refused["error"]["code"], -32602, "round {round}: {refused}");
        home.apply(&project(""));
        let called = proxy.call_deploy();
        assert_eq!(
            called["result"]["content"][0]["text"], "called deploy",
            "round {round}: {called}"
        );
    }
}

#[test]
fn a_proxy_that_is_gone_is_not_waited_for() {
    let home = Home::new();
    home.apply(&project(""));
    let mut proxy = Proxy::start(&home);
    drop(proxy.call_deploy());
    // Killed: its entry stays behind, but its lock went with it.
    let _ = proxy.child.kill();
    let _ = proxy.child.wait();
    let run = home.run_with_stdin(&["apply", "-f", "-"], &project("deploy"));
    assert!(!run.stderr.contains("has not reloaded"), "{}", run.stderr);
    run.ok();
    assert!(
        !home.files().iter().any(|f| f.starts_with("running/")),
        "the dead proxy's entry is removed: {:?}",
        home.files()
    );
}
