//! `guarded-proxy`: the `guarded` model (budget + redact) in front of any stdio MCP server.
//!
//! ```text
//! guarded-proxy [--max-calls N] -- npx -y @modelcontextprotocol/server-everything
//! ```
#![forbid(unsafe_code)]

mod models;

use mcp_middleware::upstream::StdioServer;
use mcp_middleware::{Proxy, serde_json::json};

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let mut max_calls = 20u32;
    while let Some(arg) = args.next_if(|arg| arg != "--") {
        match (arg.as_str(), args.next().map(|v| v.parse::<u32>())) {
            ("--max-calls", Some(Ok(n))) => max_calls = n,
            _ => return usage(&format!("unexpected argument `{arg}`")),
        }
    }
    args.next(); // the `--`
    let Some(program) = args.next() else {
        return usage("no server command after `--`");
    };
    let proxy = Proxy::new(StdioServer::new(program).args(args))
        .model::<models::guarded::Model>()
        .config("budget", json!({ "maxCalls": max_calls }));
    match proxy.run_stdio() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("guarded-proxy: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn usage(problem: &str) -> std::process::ExitCode {
    eprintln!("guarded-proxy: {problem}\nusage: guarded-proxy [--max-calls N] -- CMD ARGS...");
    std::process::ExitCode::from(2)
}
