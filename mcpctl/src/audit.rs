//! `mcpctl audit verify FILE`: checks a log the `audit` model wrote.
//!
//! It recomputes every record's HMAC and checks that each record's `prev` is the MAC of the
//! line before and its `seq` the next number, and reports the first line that is not where it
//! should be or not what was written (edited, removed, reordered, inserted, cut short). Every
//! restart record (the proxy found the log truncated, emptied, replaced or rotated while it
//! wrote) is reported on its own line; the log still verifies. With `--anchor FILE` (the
//! model's `anchorPath`) it also fails when the log ends before the anchor's record (records
//! cut off the end) or holds another record in its place. Exit status 0 when the log is intact,
//! 1 when it is not (or cannot be read).

use std::path::PathBuf;

use anyhow::bail;
use clap::ArgGroup;
use mcp_middleware_models::audit_log::{Anchor, AuditKey, Verdict, verify, verify_with_anchor};

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
    /// The log's anchor (the audit model's `anchorPath`): fail when the log ends before the
    /// record it names.
    #[arg(long, value_name = "FILE")]
    pub(crate) anchor: Option<PathBuf>,
}

/// Checks the log; an `Err` (exit 1) when it is not intact.
pub(crate) fn verify_command(args: &VerifyArgs) -> anyhow::Result<()> {
    let key = match (&args.key_env, &args.key_file) {
        (Some(name), _) => AuditKey::from_env(name)?,
        (None, Some(path)) => AuditKey::from_file(path)?,
        (None, None) => bail!("give the log's key with --key-env VAR or --key-file FILE"),
    };
    let file = args.file.display();
    let verdict = match &args.anchor {
        Some(path) => verify_with_anchor(&args.file, &key, &Anchor::read(path)?)?,
        None => verify(&args.file, &key)?,
    };
    match verdict {
        Verdict::Intact {
            records,
            last_mac,
            restarts,
        } => {
            match last_mac {
                Some(mac) => crate::output::outln!(
                    "audit log {file} is intact: {records} record(s), the last one's MAC is {mac}"
                )?,
                None => crate::output::outln!("audit log {file} is intact: it is empty")?,
            }
            if let Some(anchor) = &args.anchor {
                println!("it holds the record its anchor {} names", anchor.display());
            }
            for restart in &restarts {
                println!(
                    "the chain restarted at line {} (record {}): {}; the head before was record {} (MAC {})",
                    restart.line,
                    restart.seq,
                    restart.reason,
                    restart.previous_seq,
                    restart.previous_mac
                );
            }
            Ok(())
        }
        Verdict::Broken { line, reason } => {
            bail!("audit log {file} is not intact at line {line}: {reason}")
        }
        Verdict::Truncated {
            records,
            last_seq,
            anchor,
        } => {
            let ends = match last_seq {
                0 => "is empty".to_owned(),
                seq => format!("ends at record {seq} ({records} line(s))"),
            };
            let missing = if last_seq + 1 == anchor.seq {
                format!("record {} is", anchor.seq)
            } else {
                format!("records {} to {} are", last_seq + 1, anchor.seq)
            };
            bail!(
                "audit log {file} is truncated: it {ends}, but its anchor names record {} (MAC {}): {missing} missing from its end",
                anchor.seq,
                anchor.mac
            )
        }
        _ => bail!("audit log {file}: unknown verdict"),
    }
}
