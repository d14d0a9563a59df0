//! `mcpctl`: run the proxy models linked into this binary in front of real MCP servers.
//!
//! Exit codes: 0 when the client closed the session normally; 1 when the proxy could not run
//! (the upstream could not be started, an unknown model, an I/O failure); 2 for a usage error.
#![forbid(unsafe_code)]

mod cli;
mod model_config;
mod models;
mod output;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let Err(err) = cli::init_logging(&cli) {
        eprintln!("mcpctl: {err:#}");
        return ExitCode::from(1);
    }
    // Keep the stock models linked: their `inventory` registrations live in that crate.
    let _ = mcp_middleware_models::all();
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("mcpctl: {err:#}");
            ExitCode::from(1)
        }
    }
}
