//! `mcpctl audit verify FILE`: checks a log the `audit` model wrote (SPEC M5).
//!
//! It recomputes every record's HMAC and checks that each record's `prev` is the MAC of the
//! line before and its `seq` the next number, and reports the first line that is not where it
//! should be or not what was written (edited, removed, reordered, inserted, cut short). Exit
//! status 0 when the log is intact, 1 when it is not (or cannot be read).

use std::path::PathBuf;

use anyhow::bail;
use clap::ArgGroup;
use mcp_middleware_models::audit_log::{AuditKey, Verdict, verify};

/// `audit verify`'s arguments.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("key").required(true).args(["key_env", "key_file"])))]
pub(crate) struct VerifyArgs {
    /// The audit log.
    pub(crate) file: PathBuf,
    /// The environment variable that holds the log's HMAC key.
    #[arg(long, value_name = "VAR")]
    pub(crate) key_env: Option<String>,
    /// A file that holds the log's HMAC key (trailing line breaks are ignored).
    #[arg(long, value_name = "FILE")]
    pub(crate) key_file: Option<PathBuf>,
}

/// Checks the log; an `Err` (exit 1) when it is not intact.
pub(crate) fn verify_command(args: &VerifyArgs) -> anyhow::Result<()> {
    let key = match (&args.key_env, &args.key_file) {
        (Some(name), _) => AuditKey::from_env(name)?,
        (None, Some(path)) => AuditKey::from_file(path)?,
        (None, None) => bail!("give the log's key with --key-env VAR or --key-file FILE"),
    };
    let file = args.file.display();
    match verify(&args.file, &key)? {
        Verdict::Intact { records, last_mac } => {
            match last_mac {
                Some(mac) => crate::output::outln!(
                    "audit log {file} is intact: {records} record(s), the last one's MAC is {mac}"
                )?,
                None => crate::output::outln!("audit log {file} is intact: it is empty")?,
            }
            Ok(())
        }
        Verdict::Broken { line, reason } => {
            bail!("audit log {file} is not intact at line {line}: {reason}")
        }
        _ => bail!("audit log {file}: unknown verdict"),
    }
}
