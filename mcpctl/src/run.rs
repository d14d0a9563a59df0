//! The entry point of the command line: parse, set up logging, dispatch, and map the outcome to
//! an exit status.

use std::process::ExitCode;

use clap::Parser;

use crate::cli;

/// Exit status for an error.
const EXIT_ERROR: u8 = 1;
/// Exit status when a named resource does not exist.
const EXIT_NOT_FOUND: u8 = 3;

/// Runs the `mcpctl` command line on the process's arguments and returns its exit status.
///
/// Every `#[proxy_model]` linked into the calling binary is available to every command, beside
/// the stock models (this function keeps `mcp-middleware-models` linked). A downstream crate's
/// whole `main`:
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     mcpctl::run()
/// }
/// ```
///
/// A model defined in a crate nothing refers to can be dropped by the linker with its
/// registration: define models in the binary crate itself, or name their module from it.
pub fn run() -> ExitCode {
    mcp_middleware::heap::prepare();
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
            cli::say("ERROR", &format!("mcpctl: {err:#}"));
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
            .downcast_ref::<crate::store::StoreError>()
            .is_some_and(crate::store::StoreError::is_not_found)
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
