//! A snippet before it runs: TypeScript types stripped (oxc), references to namespaces checked,
//! and positions in the JavaScript that runs mapped back to the snippet as sent.
//!
//! oxc was picked over swc for the stripper: one parser, semantic pass, transformer and code
//! generator of one project, with the source map the positions need. The snippet is parsed as
//! the body of an async function: `return` gives the result, `await` works at the top.
//! `import`/`export` are refused (there are no modules).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use oxc_allocator::Allocator;
use oxc_ast::ast::{Expression, Program};
use oxc_ast_visit::{Visit, walk};
use oxc_codegen::{Codegen, CodegenOptions};
use oxc_parser::{ParseOptions, Parser};
use oxc_semantic::{Scoping, SemanticBuilder};
use oxc_span::{GetSpan, SourceType, Span};
use oxc_transformer::{TransformOptions, Transformer};

use super::catalog::Catalog;
use super::declare;

/// The name positions are reported against.
pub(crate) const FILE: &str = "snippet.ts";

/// A snippet ready to run.
#[derive(Debug)]
pub(crate) struct Script {
    /// The JavaScript, types stripped.
    pub(crate) js: String,
    /// Global identifiers the snippet uses as objects (`x.y`) that are not namespaces: each with
    /// the error to raise if the sandbox has no such global either.
    pub(crate) unknown_globals: Vec<(String, String)>,
    /// (generated line, generated column, snippet line, snippet column), all 0-based, sorted.
    positions: Vec<(u32, u32, u32, u32)>,
}

/// Why a snippet cannot run.
#[derive(Debug)]
pub(crate) struct Refused(pub(crate) String);

impl Script {
    /// Strips and checks `source` against the namespaces of `catalog`.
    pub(crate) fn prepare(source: &str, catalog: &Catalog) -> Result<Self, Refused> {
        let allocator = Allocator::default();
        let options = ParseOptions {
            allow_return_outside_function: true,
            ..ParseOptions::default()
        };
        let parsed = Parser::new(&allocator, source, SourceType::ts())
            .with_options(options)
            .parse();
        if let Some(error) = parsed.diagnostics.first() {
            let at = error
                .labels
                .first()
                .map(|label| label.offset())
                .unwrap_or_default();
            return Err(Refused(format!(
                "SyntaxError at {}: {}",
                position(source, at),
                error.message
            )));
        }
        let mut program = parsed.program;
        if let Some(statement) = program.body.iter().find(|s| s.is_module_declaration()) {
            return Err(Refused(format!(
                "SyntaxError at {}: `import` and `export` are not available in a snippet (there \
                 are no modules; each server is a global namespace)",
                position(source, statement.span().start)
            )));
        }
        let semantic = SemanticBuilder::new().build(&program);
        let scoping = semantic.semantic.into_scoping();
        let mut check = References {
            source,
            catalog,
            scoping: &scoping,
            errors: Vec::new(),
            unknown_globals: Vec::new(),
        };
        check.visit_program(&program);
        if !check.errors.is_empty() {
            return Err(Refused(check.errors.join("\n")));
        }
        let unknown_globals = check.unknown_globals;
        let transformed =
            Transformer::new(&allocator, Path::new(FILE), &TransformOptions::default())
                .build_with_scoping(scoping, &mut program);
        if let Some(error) = transformed.diagnostics.first() {
            return Err(Refused(format!(
                "the snippet could not be compiled: {}",
                error.message
            )));
        }
        Ok(generate(&program, source, unknown_globals))
    }

    /// The snippet position (`line:column`, 1-based) of a 1-based position in [`Script::js`].
    pub(crate) fn original(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        let (line, column) = (line.checked_sub(1)?, column.saturating_sub(1));
        let index = self
            .positions
            .partition_point(|&(l, c, _, _)| (l, c) <= (line, column));
        let &(l, _, src_line, src_col) = self.positions.get(index.checked_sub(1)?)?;
        (l == line).then_some((src_line + 1, src_col + 1))
    }
}

fn generate(program: &Program<'_>, source: &str, unknown_globals: Vec<(String, String)>) -> Script {
    let options = CodegenOptions {
        source_map_path: Some(PathBuf::from(FILE)),
        ..CodegenOptions::default()
    };
    let generated = Codegen::new()
        .with_options(options)
        .with_source_text(source)
        .build(program);
    let mut positions: Vec<(u32, u32, u32, u32)> = generated
        .map
        .as_ref()
        .map(|map| {
            map.get_tokens()
                .map(|t| {
                    (
                        t.get_dst_line(),
                        t.get_dst_col(),
                        t.get_src_line(),
                        t.get_src_col(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    positions.sort_unstable();
    Script {
        js: generated.code,
        unknown_globals,
        positions,
    }
}

/// `line L, column C` (1-based) of byte `offset` in `source`.
pub(crate) fn position(source: &str, offset: u32) -> String {
    let offset = (offset as usize).min(source.len());
    let before = &source[..source.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}")
}

/// Finds `namespace.method` and `namespace["name"]` references to unknown tools, and global
/// objects that are not namespaces.
struct References<'s, 'c> {
    source: &'s str,
    catalog: &'c Catalog,
    scoping: &'s Scoping,
    errors: Vec<String>,
    unknown_globals: Vec<(String, String)>,
}

impl References<'_, '_> {
    /// The global (unresolved) identifier `expression` is, if it is one.
    fn global<'e>(&self, expression: &'e Expression<'_>) -> Option<&'e str> {
        let Expression::Identifier(ident) = expression else {
            return None;
        };
        let unresolved = ident
            .reference_id
            .get()
            .is_none_or(|id| self.scoping.get_reference(id).symbol_id().is_none());
        unresolved.then_some(ident.name.as_str())
    }

    fn member(&mut self, object: &Expression<'_>, property: Option<&str>, span: Span) {
        let Some(name) = self.global(object) else {
            return;
        };
        match self.catalog.namespace(name) {
            Some(namespace) => {
                let Some(property) = property else {
                    return;
                };
                if self.catalog.find(name, property).is_some() || is_object_member(property) {
                    return;
                }
                let wanted = format!("{name}.{property}");
                let mut message = format!(
                    "ReferenceError at {}: `{wanted}` is not a tool of namespace `{name}`",
                    position(self.source, span.start)
                );
                let candidates = self.catalog.suggestions(&wanted, 3);
                if candidates.is_empty() {
                    let methods: Vec<&str> = namespace
                        .tools
                        .iter()
                        .map(|e| e.method.as_str())
                        .take(20)
                        .collect();
                    let _ = write!(message, "; its methods: {}", methods.join(", "));
                } else {
                    message.push_str("; did you mean:");
                    for entry in candidates {
                        let _ = write!(message, "\n  {}", declare::signature(entry));
                    }
                }
                self.errors.push(message);
            }
            None => {
                if self.unknown_globals.iter().any(|(n, _)| n == name) {
                    return;
                }
                let names: Vec<&str> = self
                    .catalog
                    .namespaces
                    .iter()
                    .map(|ns| ns.name.as_str())
                    .collect();
                let close = super::naming::closest(name, &names, 3);
                let mut message = format!(
                    "ReferenceError at {}: `{name}` is not a namespace (namespaces: {})",
                    position(self.source, span.start),
                    names.join(", ")
                );
                if !close.is_empty() {
                    let _ = write!(message, "; did you mean {}?", close.join(", "));
                    if let (Some(ns), Some(property)) = (close.first(), property)
                        && let Some(entry) = self.catalog.find(ns, property)
                    {
                        let _ = write!(message, "\n  {}", declare::signature(entry));
                    }
                }
                self.unknown_globals.push((name.to_owned(), message));
            }
        }
    }
}

/// Members every object has (so `everything.toString` is not an unknown tool).
fn is_object_member(name: &str) -> bool {
    matches!(
        name,
        "toString" | "valueOf" | "hasOwnProperty" | "constructor" | "then"
    )
}

impl<'a> Visit<'a> for References<'_, '_> {
    fn visit_static_member_expression(&mut self, it: &oxc_ast::ast::StaticMemberExpression<'a>) {
        self.member(&it.object, Some(it.property.name.as_str()), it.span);
        walk::walk_static_member_expression(self, it);
    }

    fn visit_computed_member_expression(
        &mut self,
        it: &oxc_ast::ast::ComputedMemberExpression<'a>,
    ) {
        let property = match &it.expression {
            Expression::StringLiteral(literal) => Some(literal.value.as_str()),
            _ => None,
        };
        self.member(&it.object, property, it.span);
        walk::walk_computed_member_expression(self, it);
    }
}
