//! Type checking a snippet, when a TypeScript checker is at hand: `tsgo` (or the native `tsc`
//! of the npm package `typescript@7`), or any `tsc`, found on `PATH` or configured
//! (`typeChecker`).
//!
//! The snippet is checked against the declarations `inspect` shows (each namespace also
//! indexable by the tools' original names), inside `async function` so `return` and `await`
//! work, with the ES2022 library only (no DOM, no Node types) and TypeScript's default,
//! non-strict options, so the checker flags what is wrong rather than what is merely loose.
//! Errors in the snippet come back as diagnostics at the snippet's own lines and nothing runs;
//! a checker that cannot be started, takes too long, or only objects to the generated
//! declarations does not stop the snippet (it is logged): nothing fails for want of a checker.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use super::catalog::Catalog;
use super::declare;

/// How long one check may take.
const TIMEOUT: Duration = Duration::from_secs(20);
/// The checked file's name, as diagnostics name it.
const FILE: &str = "snippet.ts";

/// A checker program.
#[derive(Debug, Clone)]
pub(crate) struct Checker {
    program: PathBuf,
}

impl Checker {
    /// The checker `configured` names: `""` finds `tsgo`, then `tsc`, on `PATH`; `"off"` is
    /// none; anything else is the program's path.
    pub(crate) fn find(configured: &str) -> Option<Self> {
        match configured {
            "off" => None,
            "" => ["tsgo", "tsc"]
                .iter()
                .find_map(|name| on_path(name))
                .map(|program| Self { program }),
            path => Some(Self {
                program: PathBuf::from(path),
            }),
        }
    }

    /// What `overview` says it is.
    pub(crate) fn describe(&self) -> String {
        format!("`{}`", self.program.display())
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// One type error in the snippet.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Diagnostic {
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) code: String,
    pub(crate) message: String,
}

/// The declarations a snippet is checked against, and how many lines they take.
fn header(catalog: &Catalog) -> String {
    let mut out = String::from(
        "declare const console: { log(...data: unknown[]): void; info(...data: unknown[]): void; \
         warn(...data: unknown[]): void; error(...data: unknown[]): void; debug(...data: unknown[]): void };\n",
    );
    for namespace in &catalog.namespaces {
        let inner = format!("__ns_{}", namespace.name);
        let declarations: Vec<String> = namespace.tools.iter().map(declare::declaration).collect();
        out.push_str(&declare::namespace_block(&inner, &declarations));
        let _ = write!(out, "declare const {}: typeof {inner}", namespace.name);
        let renamed: Vec<String> = namespace
            .tools
            .iter()
            .filter(|e| e.original != e.method)
            .map(|e| format!("{:?}: typeof {inner}.{}", e.original, e.method))
            .collect();
        if !renamed.is_empty() {
            let _ = write!(out, " & {{ {} }}", renamed.join("; "));
        }
        out.push_str(";\n");
    }
    out.push_str("async function __snippet(): Promise<unknown> {\n");
    out
}

/// Checks `code`; `Err` holds the snippet's type errors.
pub(crate) async fn check(
    checker: &Checker,
    catalog: &Catalog,
    code: &str,
) -> Result<(), Vec<Diagnostic>> {
    let header = header(catalog);
    let offset = header.matches('\n').count() as u32;
    let source = format!("{header}{code}\n}}\n");
    let dir = match TempDir::new() {
        Ok(dir) => dir,
        Err(err) => {
            tracing::warn!(%err, "no directory for the type check; the snippet runs unchecked");
            return Ok(());
        }
    };
    if let Err(err) = std::fs::write(dir.0.join(FILE), source) {
        tracing::warn!(%err, "could not write the snippet for the type check; it runs unchecked");
        return Ok(());
    }
    let mut command = tokio::process::Command::new(&checker.program);
    command
        .args([
            "--noEmit",
            // TypeScript 7 is strict by default; snippets are checked for errors, not style.
            "--strict",
            "false",
            "--pretty",
            "false",
            "--target",
            "es2022",
            "--lib",
            "es2022",
            "--types",
            "",
            "--skipLibCheck",
            FILE,
        ])
        .current_dir(&dir.0)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(TIMEOUT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(err)) => {
            tracing::warn!(checker = %checker.program.display(), %err, "the type checker did not start; the snippet runs unchecked");
            return Ok(());
        }
        Err(_) => {
            tracing::warn!(checker = %checker.program.display(), "the type checker took too long; the snippet runs unchecked");
            return Ok(());
        }
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let lines = code.lines().count().max(1) as u32;
    let mut in_snippet = Vec::new();
    let mut elsewhere = 0;
    for diagnostic in parse(&text) {
        match diagnostic.line.checked_sub(offset) {
            Some(line) if line >= 1 && line <= lines => {
                in_snippet.push(Diagnostic { line, ..diagnostic })
            }
            _ => elsewhere += 1,
        }
    }
    if elsewhere > 0 {
        tracing::debug!(
            elsewhere,
            "the type checker objected to the generated declarations"
        );
    }
    if in_snippet.is_empty() {
        Ok(())
    } else {
        Err(in_snippet)
    }
}

/// `snippet.ts(L,C): error TSnnnn: message` lines (continuation lines joined).
pub(crate) fn parse(output: &str) -> Vec<Diagnostic> {
    let mut found: Vec<Diagnostic> = Vec::new();
    for line in output.lines() {
        let Some(rest) = line.strip_prefix(FILE).and_then(|r| r.strip_prefix('(')) else {
            if let Some(last) = found.last_mut()
                && line.starts_with(' ')
            {
                last.message.push('\n');
                last.message.push_str(line.trim());
            }
            continue;
        };
        let Some((position, rest)) = rest.split_once("): ") else {
            continue;
        };
        let Some((l, c)) = position.split_once(',') else {
            continue;
        };
        let (Ok(line_number), Ok(column)) = (l.parse(), c.parse()) else {
            continue;
        };
        let rest = rest.strip_prefix("error ").unwrap_or(rest);
        let (code, message) = rest.split_once(": ").unwrap_or(("", rest));
        found.push(Diagnostic {
            line: line_number,
            column,
            code: code.to_owned(),
            message: message.to_owned(),
        });
    }
    found
}

/// A directory of its own for one check, removed afterwards.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcpctl-codemode-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(Path::new(&self.0));
    }
}
