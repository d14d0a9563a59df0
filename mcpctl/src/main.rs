//! `mcpctl`: run the proxy models linked into this binary in front of real MCP servers, and
//! manage the projects (servers, prompts, a model and its config) they serve.
//!
//! Exit codes: 0 success (for `proxy`, the client closed the session or a stop signal
//! arrived); 1 an error (the message on stderr says what and where); 2 a usage error; 3 a
//! named resource (project, server, prompt or proxy model) does not exist.
#![forbid(unsafe_code)]

mod apply;
mod audit;
mod cli;
mod client;
mod completion;
mod edit;
mod model_config;
mod models;
mod output;
mod proxy;
mod resources;
mod serve;

use std::process::ExitCode;

use clap::Parser;

/// Exit status for an error.
const EXIT_ERROR: u8 = 1;
/// Exit status when a named resource does not exist.
const EXIT_NOT_FOUND: u8 = 3;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let Err(err) = cli::init_logging(&cli) {
        eprintln!("mcpctl: {err:#}");
        return ExitCode::from(EXIT_ERROR);
    }
    // Keep the stock models linked: their `inventory` registrations live in that crate.
    let _ = mcp_middleware_models::all();
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped reading (`mcpctl get projects | head -1`) is not an error.
        Err(err) if stdout_closed(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("mcpctl: {err:#}");
            ExitCode::from(exit_code(&err))
        }
    }
}

/// Whether the error is stdout's reader going away. (Writes to anything else that can break a
/// pipe, the client's child, are reported as messages without the I/O error inside.)
fn stdout_closed(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// 3 when the error says that something named does not exist, else 1.
fn exit_code(err: &anyhow::Error) -> u8 {
    let not_found = err.chain().any(|cause| {
        cause
            .downcast_ref::<mcpctl::store::StoreError>()
            .is_some_and(mcpctl::store::StoreError::is_not_found)
            || matches!(
                cause.downcast_ref::<mcp_middleware::ProxyError>(),
                Some(mcp_middleware::ProxyError::UnknownModel { .. })
            )
    });
    if not_found {
        EXIT_NOT_FOUND
    } else {
        EXIT_ERROR
    }
}
