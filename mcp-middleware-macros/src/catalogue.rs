//! The hook catalogue as the macro knows it: every hook function name, the `HookId` variant and
//! marker type it maps to in `mcp_middleware::__private`, and the signature it must have.
//!
//! This is the one table the macro shares with the library (`model/hooks.rs`); a hook added
//! there is added here too.

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
    params: &'static str,
    /// The result type, as the expected signature shows it.
    output: &'static str,
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
    pub(crate) fn params(&self) -> Option<&'static str> {
        (self.kind != Kind::Session).then_some(self.params)
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

const fn request(
    name: &'static str,
    id: &'static str,
    params: &'static str,
    output: &'static str,
) -> Hook {
    Hook {
        name,
        id,
        kind: Kind::Request,
        params,
        output,
    }
}

const PAGINATED: &str = "Option<PaginatedRequestParams>";

/// Every hook, in the library's `HookId` order.
pub(crate) const HOOKS: &[Hook] = &[
    request(
        "on_initialize",
        "Initialize",
        "InitializeRequestParams",
        "InitializeResult",
    ),
    request(
        "on_discover",
        "Discover",
        "DiscoverRequestParams",
        "DiscoverResult",
    ),
    request("on_tools_list", "ToolsList", PAGINATED, "ListToolsResult"),
    request(
        "on_tool_call",
        "ToolCall",
        "CallToolRequestParams",
        "CallToolResult",
    ),
    request(
        "on_resources_list",
        "ResourcesList",
        PAGINATED,
        "ListResourcesResult",
    ),
    request(
        "on_resource_templates_list",
        "ResourceTemplatesList",
        PAGINATED,
        "ListResourceTemplatesResult",
    ),
    request(
        "on_resource_read",
        "ResourceRead",
        "ReadResourceRequestParams",
        "ReadResourceResult",
    ),
    request(
        "on_resource_subscribe",
        "ResourceSubscribe",
        "SubscribeRequestParams",
        "EmptyResult",
    ),
    request(
        "on_resource_unsubscribe",
        "ResourceUnsubscribe",
        "UnsubscribeRequestParams",
        "EmptyResult",
    ),
    request(
        "on_prompts_list",
        "PromptsList",
        PAGINATED,
        "ListPromptsResult",
    ),
    request(
        "on_prompt_get",
        "PromptGet",
        "GetPromptRequestParams",
        "GetPromptResult",
    ),
    request(
        "on_completion",
        "Completion",
        "CompleteRequestParams",
        "CompleteResult",
    ),
    request(
        "on_set_level",
        "SetLevel",
        "SetLevelRequestParams",
        "EmptyResult",
    ),
    request("on_request", "Request", "RawRequest", "serde_json::Value"),
    request(
        "on_client_notification",
        "ClientNotification",
        "RawNotification",
        "()",
    ),
    request(
        "on_server_notification",
        "ServerNotification",
        "RawNotification",
        "()",
    ),
    request(
        "on_server_request",
        "ServerRequest",
        "RawRequest",
        "serde_json::Value",
    ),
    Hook {
        name: "transform_content",
        id: "TransformContent",
        kind: Kind::Transform,
        params: "Content",
        output: "String",
    },
    Hook {
        name: "on_session_start",
        id: "SessionStart",
        kind: Kind::Session,
        params: "",
        output: "()",
    },
    Hook {
        name: "on_session_end",
        id: "SessionEnd",
        kind: Kind::Session,
        params: "",
        output: "()",
    },
];

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
        for hook in HOOKS {
            assert_eq!(hook.signature().matches(": ").count(), hook.arity());
        }
    }
}
