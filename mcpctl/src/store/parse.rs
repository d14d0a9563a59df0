//! Reading YAML into resources, with errors that name the file, line, column and field.
//!
//! A stream is read twice: once for each document's `kind`, then each document as that kind.
//! Reading straight into an internally tagged enum would buffer the document and lose every
//! position, which is exactly what a person fixing a file needs.

use serde::Deserialize;

use super::error::Located;
use super::project::{GATED_PROXY_MODEL, ProjectSpec};
use super::prompt::PromptSpec;
use super::resource::{AnyResource, Envelope, Header, Resource, Spec};
use super::server::ServerSpec;

/// Reads every resource in a multi-document YAML `text`; `file` names it in errors. Empty
/// documents (a stray `---`) are skipped. Logs a deprecation warning for each `gated:`.
pub fn parse_documents(file: &str, text: &str) -> Result<Vec<AnyResource>, Located> {
    parse_every_document(file, text).map_err(|mut errors| errors.remove(0))
}

/// Like [`parse_documents`], but a document that is wrong does not hide the next ones: the
/// error is every wrong document's, in file order (never empty). A YAML syntax error ends
/// the reading there, since the documents after it cannot be told apart.
pub fn parse_every_document(file: &str, text: &str) -> Result<Vec<AnyResource>, Vec<Located>> {
    // yaml_serde 0.10 panics on some malformed alias structures (found by the `project_yaml`
    // fuzz target: "unexpected end of mapping"); a bad file must be an error, never a panic.
    std::panic::catch_unwind(|| read_every_document(file, text)).unwrap_or_else(|_| {
        Err(vec![Located {
            file: file.to_owned(),
            line: None,
            column: None,
            field: None,
            message: "the YAML parser could not read this text (check anchors, aliases and \
                      indentation)"
                .to_owned(),
        }])
    })
}

fn read_every_document(file: &str, text: &str) -> Result<Vec<AnyResource>, Vec<Located>> {
    let mut errors = Vec::new();
    let mut kinds = Vec::new();
    for document in yaml_serde::Deserializer::from_str(text) {
        match read::<Option<Header>>(file, document) {
            Ok(header) => kinds.push(header.map(|h| h.kind)),
            Err(err) => {
                let syntax = err.field.is_none();
                errors.push(err);
                kinds.push(None);
                // A syntax error repeats for every later document: stop at the first.
                if syntax {
                    break;
                }
            }
        }
    }
    let mut resources = Vec::new();
    for (document, kind) in yaml_serde::Deserializer::from_str(text).zip(kinds) {
        let Some(kind) = kind else { continue };
        let resource = match kind {
            super::Kind::Server => typed::<ServerSpec>(file, document),
            super::Kind::Prompt => typed::<PromptSpec>(file, document),
            super::Kind::Project => typed::<ProjectSpec>(file, document),
        };
        match resource {
            Ok(resource) => resources.push(resource),
            Err(err) => errors.push(err),
        }
    }
    if !errors.is_empty() {
        errors.sort_by_key(|e| (e.line, e.column));
        return Err(errors);
    }
    for resource in &resources {
        if let AnyResource::Project(project) = resource {
            warn_gated(file, project);
        }
    }
    Ok(resources)
}

fn typed<S: Spec>(
    file: &str,
    document: yaml_serde::Deserializer<'_>,
) -> Result<AnyResource, Located> {
    let envelope = read::<Envelope<S>>(file, document)?;
    Ok(S::wrap(Resource {
        name: envelope.metadata.name,
        spec: envelope.spec,
    }))
}

/// Logs the deprecation of `gated:` in `project`, read from `file`.
pub(crate) fn warn_gated(file: &str, project: &Resource<ProjectSpec>) {
    match project.spec.legacy_gated {
        Some(true) => tracing::warn!(
            "{file}: project `{}` says `gated: true`, which is deprecated: it is read as `proxyModel: {GATED_PROXY_MODEL}`; write that instead",
            project.name
        ),
        Some(false) => tracing::warn!(
            "{file}: project `{}` says `gated: false`, which is deprecated and ignored; choose the model with `proxyModel`",
            project.name
        ),
        None => {}
    }
}

fn read<'de, T: Deserialize<'de>>(
    file: &str,
    document: yaml_serde::Deserializer<'de>,
) -> Result<T, Located> {
    serde_path_to_error::deserialize(document).map_err(|err| {
        let field = err.path().to_string();
        let inner = err.into_inner();
        located(file, (field != ".").then_some(field), &inner)
    })
}

/// Turns a YAML error into one sentence: the parser's message without the place it repeats
/// (we print the place in front, in the same words for every error).
fn located(file: &str, field: Option<String>, err: &yaml_serde::Error) -> Located {
    let location = err.location();
    let mut message = err.to_string();
    if let Some(at) = &location {
        message = message.replacen(
            &format!(" at line {} column {}", at.line(), at.column()),
            "",
            1,
        );
    }
    // The parser prefixes its own idea of the path (`spec: unknown field ...`); ours is finer.
    if let Some((prefix, rest)) = message.split_once(": ")
        && !prefix.contains(' ')
        && (prefix == "." || field.as_deref().is_some_and(|f| f.starts_with(prefix)))
    {
        message = rest.to_owned();
    }
    Located {
        file: file.to_owned(),
        line: location.as_ref().map(|l| l.line()),
        column: location.as_ref().map(|l| l.column()),
        field,
        message,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_text_the_yaml_library_panics_on_is_an_error() {
        // Found by the project_yaml fuzz target: an alias where yaml_serde expects a scalar.
        let text = "kind: Server\nmetadata: { name: *everything }\nspec:\nkind: Server\n\
                    meta  comdmankind: Server\nmetadata: { name: everything }\nspec:\n\
                    kind: Server\nmeta  comdmandadat";
        let err = parse_documents("crash.yaml", text).unwrap_err();
        assert_eq!(err.file, "crash.yaml");
        assert!(!err.message.is_empty());
    }

    use super::*;

    fn err(text: &str) -> Located {
        parse_documents("f.yaml", text).unwrap_err()
    }

    #[test]
    fn a_wrong_type_names_line_column_and_field() {
        let e = err("kind: Project\nmetadata:\n  name: a\nspec:\n  servers: 3\n");
        assert_eq!((e.line, e.column), (Some(5), Some(12)));
        assert_eq!(e.field.as_deref(), Some("spec.servers"));
        assert_eq!(
            e.to_string(),
            "f.yaml, line 5, column 12, field `spec.servers`: invalid type: integer `3`, expected a sequence"
        );
    }

    #[test]
    fn an_unknown_field_is_named() {
        let e = err("kind: Project\nmetadata: {name: a}\nspec:\n  proxymodel: gate\n");
        assert_eq!(e.line, Some(4));
        assert_eq!(e.field.as_deref(), Some("spec.proxymodel"));
        assert!(e.message.starts_with("unknown field `proxymodel`"), "{e}");
    }

    #[test]
    fn a_check_on_the_spec_points_at_the_spec() {
        let e = err("kind: Server\nmetadata: {name: a}\nspec:\n  command: x\n  url: http://y\n");
        assert_eq!(e.line, Some(4), "{e}");
        assert_eq!(e.field.as_deref(), Some("spec"));
        assert!(e.message.contains("not both"), "{e}");
    }

    #[test]
    fn a_bad_name_points_at_the_name() {
        let e = err("kind: Prompt\nmetadata:\n  name: ../etc\nspec: {content: x}\n");
        assert_eq!(e.line, Some(3), "{e}");
        assert_eq!(e.field.as_deref(), Some("metadata.name"));
    }

    #[test]
    fn syntax_errors_and_unknown_kinds_have_places() {
        let e = err("kind: Project\nmetadata: {name: a}\nspec:\n  servers: [a\n");
        assert!(e.line.is_some(), "{e}");
        let e = err("kind: Servr\nmetadata: {name: a}\nspec: {}\n");
        assert_eq!(e.line, Some(1), "{e}");
        assert!(e.message.contains("unknown variant `Servr`"), "{e}");
    }

    #[test]
    fn several_documents_and_empty_ones() {
        let text = "---\nkind: Server\nmetadata: {name: s}\nspec: {command: x, env: {K: '${env:K}'}}\n---\n---\nkind: Prompt\nmetadata: {name: p}\nspec: {content: hi, tags: [a]}\n";
        let all = parse_documents("f", text).unwrap();
        assert_eq!(all.len(), 2);
        let AnyResource::Server(server) = &all[0] else {
            panic!()
        };
        let ServerSpec::Stdio(stdio) = &server.spec else {
            panic!()
        };
        assert_eq!(stdio.env["K"], "${env:K}");
    }

    #[test]
    fn gated_maps_to_default_and_conflicts_with_another_model() {
        let all = parse_documents(
            "f",
            "kind: Project\nmetadata: {name: p}\nspec: {gated: true}\n",
        )
        .unwrap();
        let AnyResource::Project(project) = &all[0] else {
            panic!()
        };
        assert_eq!(project.spec.proxy_model.as_deref(), Some("default"));
        let e =
            err("kind: Project\nmetadata: {name: p}\nspec:\n  gated: true\n  proxyModel: gate\n");
        assert!(
            e.message
                .contains("cannot be combined with `proxyModel: gate`"),
            "{e}"
        );
        assert_eq!(e.line, Some(4));
    }
}
