//! `mcpctl apply -f FILE...` and `mcpctl delete KIND NAME...`: writing the store.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use mcpctl::store::{AnyResource, Kind, Spec, parse_every_document};
use serde_json::json;

use crate::cli::{DeleteArgs, OutputArg};
use crate::output::{Output, print_documents};
use crate::resources::{store, wait_until_in_force};

/// `apply`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct ApplyArgs {
    /// A YAML file of one or more resources (`---` between documents), a directory (its
    /// `*.yaml` and `*.yml` files), or `-` for stdin. Repeatable: everything is applied together.
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    output: OutputArg,
}

/// Reads every file, then applies every resource in one go: checked together, written together.
pub(crate) fn apply(args: &ApplyArgs) -> anyhow::Result<()> {
    let mut resources: Vec<AnyResource> = Vec::new();
    // Every wrong document of every file is reported at once, so one run shows all to fix.
    let mut errors = Vec::new();
    for path in &args.files {
        for (label, text) in read_inputs(path)? {
            match parse_every_document(&label, &text) {
                Ok(read) => resources.extend(read),
                Err(wrong) => errors.extend(wrong),
            }
        }
    }
    match errors.len() {
        0 => {}
        1 => return Err(errors.remove(0).into()),
        n => bail!(
            "{n} documents are wrong, nothing was applied:\n  {}",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n  ")
        ),
    }
    if resources.is_empty() {
        bail!(
            "no resources in {}: expected documents with `kind: Server`, `kind: Prompt` or `kind: Project`",
            args.files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let store = store()?;
    let applied = store.apply(resources)?;
    let in_force = wait_until_in_force(&store);
    match args.output.output {
        Output::Table => {
            for outcome in &applied {
                crate::output::outln!("{outcome}")?;
            }
        }
        output => {
            let rows: Vec<_> = applied
                .iter()
                .map(|a| json!({"kind": a.kind.title(), "name": a.name, "action": a.action.as_str()}))
                .collect();
            print_documents(output, &[serde_json::Value::Array(rows)], true)?;
        }
    }
    in_force
}

/// The texts to read for one `-f`, each with the name errors give it.
fn read_inputs(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read stdin")?;
        return Ok(vec![("<stdin>".to_owned(), text)]);
    }
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot list {}", path.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        return files.iter().map(|file| read_file(file)).collect();
    }
    Ok(vec![read_file(path)?])
}

fn read_file(path: &Path) -> anyhow::Result<(String, String)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok((path.display().to_string(), text))
}

/// Deletes each named resource of kind `S`, stopping at the first that cannot be deleted.
pub(crate) fn delete<S: Spec>(args: &DeleteArgs) -> anyhow::Result<()> {
    let store = store()?;
    for name in &args.names {
        store.delete(S::KIND, name)?;
        if S::KIND == Kind::Project {
            // What the project's last proxy saw of its servers goes with it.
            let _ = std::fs::remove_file(crate::proxy::status_file(&store, name));
        }
        crate::output::outln!("{}/{name} deleted", S::KIND)?;
    }
    wait_until_in_force(&store)
}
