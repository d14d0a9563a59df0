//! What the proxy costs, measured against a direct connection to the same upstream server in
//! one interleaved run: `mcpctl proxy` on stdio and `mcpctl serve` on streamable
//! HTTP, each with the `passthrough` model and with `default` (gate + paginate).
//!
//! The upstream is this very binary (see `server.rs`, and `rmcp_server.rs` for the second
//! baseline, rmcp's own server, with `FORWARDING_BENCH_UPSTREAM=rmcp`): with `FORWARDING_BENCH_SERVER=1` it is a
//! minimal MCP server on stdio, with `FORWARDING_BENCH_SERVER=http` the same server over HTTP
//! (one JSON body per answer). It answers `initialize`, lists 1,000 realistic tools (a result
//! of about 1.25 MB) and has two tools: `echo`, which returns its `text` argument, and `blob`,
//! which returns a text of exactly 1 MiB. Answers that do not depend on the request are
//! serialized once, so the server's own cost is mostly the write.
//!
//! The driver (`client.rs`) is Rust too, and does the least a client can: it reads each
//! answer and checks its id and that it is a result, without parsing the rest.
//!
//! Connections, each opened with `initialize` and `notifications/initialized`, then
//! `begin_session` where the model gates (`default`), then checked (one echo, one `tools/list`,
//! one `blob`, each parsed in full):
//! - stdio: the server itself (direct); `mcpctl proxy --model passthrough -- <this binary>`;
//!   the same with `--model default`; and this binary as a library proxy
//!   (`FORWARDING_BENCH_PROXY=1`, `Proxy::run_stdio`) running a model whose only hooks are on
//!   methods the bench never sends: it must cost what passthrough does; and this
//!   binary as a byte relay in front of itself (`FORWARDING_BENCH_RELAY=1`, `relay.rs`), the
//!   floor of any proxy process.
//! - HTTP: the server over HTTP (direct); `mcpctl serve --listen 127.0.0.1:0 --model M --
//!   <this binary>` for each model, where every HTTP session runs its own upstream child.
//!   Each has 32 sessions, each on its own keep-alive connection. Beside them a TCP relay in
//!   front of the direct server (`FORWARDING_BENCH_RELAY=http`): the floor of an HTTP proxy.
//!
//! Each round measures, phase by phase, every connection in turn (who goes first rotates, so
//! drift of the machine hits all alike); the table shows the median of the rounds:
//! 1. sequential `tools/call` echo latency, p50 and p99 (after a warm-up), and the proxy's CPU
//!    time per call;
//! 2. echo throughput: stdio with 32 requests in flight on the one connection; HTTP with 1, 8
//!    and 32 sessions, one thread and connection each, every session sequential;
//! 3. `tools/list` of 1,000 tools (p50) and the proxy's CPU time per list;
//! 4. the 1 MiB `blob` result (p50) and the proxy's CPU time per call (`default` pages it:
//!    the client gets page 1 and a cursor).
//!
//! CPU time is the on-CPU time of every thread of the proxy process from `/proc` (children
//! excluded), before and after a phase, divided by its calls; in the direct column it is the
//! server's own. Memory, once per proxy: RSS when idle after the handshake, RSS growth per
//! extra idle HTTP session (sessions opened with `initialize`, their connections closed; the
//! proxy process only, not the upstream children), and peak RSS (`VmHWM`) at the end. Last, a
//! 16 MiB message (an echo of 16 MiB of text) goes through every connection.
//!
//! The last lines check the performance targets and print PASS or MISS for each model.
//! The bench exits 0 either way, as it measures and does not test; it exits non-zero only when
//! something breaks (a child that crashes, a wrong answer).
//!
//! Small latencies depend on where the scheduler puts the processes: two processes that share
//! a CPU hand a message over in a few microseconds, while waking an idle CPU of a virtual
//! machine can take tens of microseconds, so the direct baseline moves from round to round.
//!
//! Run it with
//!
//! ```text
//! cargo bench -p mcpctl --bench forwarding
//! FORWARDING_BENCH_QUICK=1 cargo bench -p mcpctl --bench forwarding   # every count ~10x smaller
//! FORWARDING_BENCH_ONLY=http cargo bench -p mcpctl --bench forwarding  # or stdio: one half
//! ```
//!
//! When run without `--bench` (as `cargo test --benches` does), it runs every path once with a
//! few calls each (`Counts::smoke`), as a smoke test; a debug build (what `cargo test` makes) prints its table but judges no target,
//! since its figures measure nothing.

mod client;
mod relay;
mod rmcp_server;
mod run;
mod server;

/// `1` in the environment of the bench binary makes it the upstream server on stdio; `http`
/// makes it the server over HTTP.
const SERVER_ENV: &str = "FORWARDING_BENCH_SERVER";
/// `rmcp` makes the upstream server rmcp's own (`rmcp_server.rs`) instead of the hand-written
/// one: the second baseline. Children inherit it, so it holds for every path of the run.
const UPSTREAM_ENV: &str = "FORWARDING_BENCH_UPSTREAM";
/// `1` makes the bench binary a proxy running [`elsewhere`] in front of itself as the server.
const PROXY_ENV: &str = "FORWARDING_BENCH_PROXY";
/// `1` makes the bench binary a byte relay in front of itself as the server on stdio, `http` a
/// TCP relay in front of the HTTP server at [`RELAY_TO_ENV`] (`relay.rs`): the floor of any
/// proxy process.
const RELAY_ENV: &str = "FORWARDING_BENCH_RELAY";
/// The URL of the HTTP server the HTTP relay forwards to.
const RELAY_TO_ENV: &str = "FORWARDING_BENCH_RELAY_TO";
/// The `mcpctl` to measure instead of this build's (an A/B run against another build).
const MCPCTL_ENV: &str = "FORWARDING_BENCH_MCPCTL";
/// `1` shrinks every count about 10x.
const QUICK_ENV: &str = "FORWARDING_BENCH_QUICK";
/// `stdio` or `http` runs only that half.
const ONLY_ENV: &str = "FORWARDING_BENCH_ONLY";
/// How many tools `tools/list` returns.
const TOOL_COUNT: usize = 1_000;
/// The size of the `blob` tool's text, in bytes.
const BLOB_BYTES: usize = 1 << 20;

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
        let mut server = mcp_middleware::upstream::StdioServer::new(exe)
            .env(PROXY_ENV, "0")
            .env(SERVER_ENV, "1");
        // The library's children get the SDK default environment only: say which server.
        if let Some(upstream) = std::env::var_os(UPSTREAM_ENV) {
            server = server.env(UPSTREAM_ENV, upstream);
        }
        if let Err(err) = mcp_middleware::Proxy::new(server)
            .model::<elsewhere::Model>()
            .run_stdio()
        {
            eprintln!("forwarding bench proxy: {err}");
            std::process::exit(1);
        }
        return;
    }
    let relay = match std::env::var(RELAY_ENV).as_deref() {
        Ok("1") => Some(relay::run()),
        Ok("http") => Some(relay::run_http()),
        _ => None,
    };
    if let Some(relayed) = relay {
        if let Err(err) = relayed {
            eprintln!("forwarding bench relay: {err}");
            std::process::exit(1);
        }
        return;
    }
    let rmcp = run::rmcp_upstream();
    let served = match std::env::var(SERVER_ENV).as_deref() {
        Ok("1") if rmcp => Some(rmcp_server::run_stdio()),
        Ok("http") if rmcp => Some(rmcp_server::run_http()),
        Ok("1") => Some(server::run_stdio()),
        Ok("http") => Some(server::run_http()),
        _ => None,
    };
    if let Some(served) = served {
        if let Err(err) = served {
            eprintln!("forwarding bench server: {err}");
            std::process::exit(1);
        }
        return;
    }
    let counts = if !std::env::args().any(|arg| arg == "--bench") {
        run::Counts::smoke()
    } else {
        run::Counts::new(std::env::var_os(QUICK_ENV).is_some_and(|v| v == "1"))
    };
    if let Err(err) = run::run(&counts) {
        eprintln!("forwarding bench failed: {err}");
        std::process::exit(1);
    }
}
