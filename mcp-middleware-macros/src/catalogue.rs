//! The hook catalogue as the macro knows it: every hook function name, the `HookId` variant and
//! marker type it maps to in `mcp_middleware::__private`, and the signature it must have.
//!
//! It is built from the library's hook table (`mcp-middleware/src/model/hook_table.rs`), taken in
//! here with `include!`, so the macro and the library cannot disagree about a hook.

use std::sync::LazyLock;

// `hook_table.rs` here is a symbolic link to the library's file, so that a packaged crate
// carries the table itself.
include!("hook_table.rs");

/// How a hook is called, which fixes its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `async fn(ctx: &Context, params: P, next: Next<'_, hooks::Marker>) -> HookResult<R>`.
    Request,
    /// `async fn(ctx: &Context, content: Content) -> HookResult<String>`.
    Transform,
    /// `async fn(ctx: &Context) -> HookResult<()>`.
    Session,
}

/// One hook of the catalogue.
#[derive(Debug)]
pub(crate) struct Hook {
    /// The function name a model defines.
    pub(crate) name: &'static str,
    /// The `HookId` variant, which is also the marker type's name in `hooks` for request hooks.
    pub(crate) id: &'static str,
    /// How it is called.
    pub(crate) kind: Kind,
    /// The params type, as the expected signature shows it.
    params: String,
    /// The result type, as the expected signature shows it.
    output: String,
}

impl Hook {
    /// How many parameters the hook function takes.
    pub(crate) fn arity(&self) -> usize {
        match self.kind {
            Kind::Request => 3,
            Kind::Transform => 2,
            Kind::Session => 1,
        }
    }

    /// The type of the second parameter (`params`, `content`), as [`type_text`] renders it.
    pub(crate) fn params(&self) -> Option<&str> {
        (self.kind != Kind::Session).then_some(self.params.as_str())
    }

    /// The result type, as the expected signature shows it.
    pub(crate) fn output(&self) -> &str {
        &self.output
    }

    /// The signature a model's function must have, for error messages.
    pub(crate) fn signature(&self) -> String {
        let name = self.name;
        match self.kind {
            Kind::Request => format!(
                "async fn {name}(ctx: &Context, params: {}, next: Next<'_, hooks::{}>) -> HookResult<{}>",
                self.params, self.id, self.output
            ),
            Kind::Transform => {
                format!("async fn {name}(ctx: &Context, content: Content) -> HookResult<String>")
            }
            Kind::Session => format!("async fn {name}(ctx: &Context) -> HookResult<()>"),
        }
    }
}

/// A type as `stringify!` spells it, without the spaces it puts between tokens
/// (`Option < P >` is `Option<P>`), which is how [`type_text`] and the signatures write it.
fn spelled(tokens: &str) -> String {
    tokens.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The catalogue, from the hook table.
macro_rules! catalogue {
    (
        typed { $( $(#[$tdoc:meta])* $tid:ident, $tfn:ident, $method:literal: $tp:ty => $to:ty; )* }
        raw { $( $(#[$rdoc:meta])* $rid:ident, $rfn:ident: $rp:ty => $ro:ty; )* }
        transform { $( $(#[$xdoc:meta])* $xid:ident, $xfn:ident; )* }
        session { $( $(#[$sdoc:meta])* $sid:ident, $sfn:ident; )* }
    ) => {
        vec![
            $(Hook {
                name: stringify!($tfn),
                id: stringify!($tid),
                kind: Kind::Request,
                params: spelled(stringify!($tp)),
                output: spelled(stringify!($to)),
            },)*
            $(Hook {
                name: stringify!($rfn),
                id: stringify!($rid),
                kind: Kind::Request,
                params: spelled(stringify!($rp)),
                output: spelled(stringify!($ro)),
            },)*
            $(Hook {
                name: stringify!($xfn),
                id: stringify!($xid),
                kind: Kind::Transform,
                params: "Content".to_owned(),
                output: "String".to_owned(),
            },)*
            $(Hook {
                name: stringify!($sfn),
                id: stringify!($sid),
                kind: Kind::Session,
                params: String::new(),
                output: "()".to_owned(),
            },)*
        ]
    };
}

/// Every hook, in the library's `HookId` order.
pub(crate) static HOOKS: LazyLock<Vec<Hook>> = LazyLock::new(|| for_each_hook!(catalogue));

/// `ty` as the catalogue writes types: the last segment of each path with its type arguments
/// (`rmcp::model::CallToolRequestParams` is `CallToolRequestParams`, `Option<P>` stays so).
pub(crate) fn type_text(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(path) if path.qself.is_none() => {
            let Some(last) = path.path.segments.last() else {
                return String::new();
            };
            let mut text = last.ident.to_string();
            if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
                let args: Vec<String> = args
                    .args
                    .iter()
                    .map(|arg| match arg {
                        syn::GenericArgument::Type(ty) => type_text(ty),
                        syn::GenericArgument::Lifetime(lifetime) => lifetime.to_string(),
                        _ => String::from("_"),
                    })
                    .collect();
                text = format!("{text}<{}>", args.join(", "));
            }
            text
        }
        syn::Type::Paren(inner) => type_text(&inner.elem),
        syn::Type::Group(inner) => type_text(&inner.elem),
        _ => String::new(),
    }
}

/// Whether `text` (from [`type_text`]) is the params type of some hook.
pub(crate) fn is_params_type(text: &str) -> bool {
    HOOKS
        .iter()
        .any(|hook| hook.params().is_some_and(|params| params == text))
}

/// The marker of `Next<'_, hooks::Marker>`: the last segment of its type argument.
pub(crate) fn next_marker(ty: &syn::Type) -> Option<String> {
    let syn::Type::Path(path) = ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    if last.ident != "Next" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    args.args.iter().find_map(|arg| match arg {
        syn::GenericArgument::Type(syn::Type::Path(marker)) => {
            marker.path.segments.last().map(|s| s.ident.to_string())
        }
        _ => None,
    })
}

/// Whether `name` is the marker type of some request hook.
pub(crate) fn is_marker(name: &str) -> bool {
    HOOKS
        .iter()
        .any(|hook| hook.kind == Kind::Request && hook.id == name)
}

/// The hook called `name`.
pub(crate) fn find(name: &str) -> Option<&'static Hook> {
    HOOKS.iter().find(|hook| hook.name == name)
}

/// The closest known name to `unknown`, if one is close enough to be what was meant: a small
/// edit distance, or the same words in another order (`on_call_tool`).
pub(crate) fn closest<'a>(
    unknown: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let words = |name: &str| {
        let mut words: Vec<String> = name
            .trim_start_matches("on_")
            .split('_')
            .filter(|w| !w.is_empty())
            .map(|w| w.trim_end_matches('s').to_owned())
            .collect();
        words.sort();
        words
    };
    let unknown_words = words(unknown);
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in known {
        let distance = if words(candidate) == unknown_words {
            1
        } else {
            levenshtein(unknown, candidate)
        };
        let limit = (candidate.len().max(unknown.len()) / 4).clamp(1, 3);
        if distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, name)| name)
}

/// The closest hook name to `unknown`.
pub(crate) fn closest_hook(unknown: &str) -> Option<&'static str> {
    closest(unknown, HOOKS.iter().map(|hook| hook.name))
}

/// Edit distance (insertions, deletions, substitutions) between two names.
fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names() {
        assert_eq!(closest_hook("on_tool_calls"), Some("on_tool_call"));
        assert_eq!(closest_hook("on_toolcall"), Some("on_tool_call"));
        assert_eq!(closest_hook("on_call_tool"), Some("on_tool_call"));
        assert_eq!(closest_hook("on_list_tools"), Some("on_tools_list"));
        assert_eq!(closest_hook("on_session_stat"), Some("on_session_start"));
        assert_eq!(
            closest_hook("transform_contents"),
            Some("transform_content")
        );
        assert_eq!(closest_hook("on_prompt"), None);
        assert_eq!(closest_hook("on_everything"), None);
    }

    #[test]
    fn table_matches_kinds() {
        for hook in HOOKS.iter() {
            assert_eq!(hook.signature().matches(": ").count(), hook.arity());
        }
    }
}
