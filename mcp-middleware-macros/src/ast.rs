//! The module `#[proxy_model]` is written on, parsed: its doc comment, hook functions, synthetic
//! tools, observers and `State` / `Config` types.
//!
//! Parsing only classifies; whether a function has the right shape is for `check`. The inert
//! `#[tool]` and `#[observer]` attributes are removed from the module here (the compiler does not
//! know them), and matched by their exact one-word path, never by a last segment.

use proc_macro2::{Span, TokenStream};
use syn::{Attribute, Ident, Item, ItemMod, LitStr, Signature, UseTree};

use crate::catalogue;
use crate::ctxt::Errors;

/// A doc comment: the first paragraph, and the whole text.
#[derive(Debug, Default, Clone)]
pub(crate) struct Docs {
    /// The first paragraph, its lines joined with spaces.
    pub(crate) summary: String,
    /// The whole comment, unindented.
    pub(crate) text: String,
}

/// The parsed model module.
pub(crate) struct Module {
    /// The module, with `#[tool]` / `#[observer]` removed from its items.
    pub(crate) item: ItemMod,
    /// Its doc comment.
    pub(crate) docs: Docs,
    /// Its functions that play a part in the model, in source order.
    pub(crate) fns: Vec<Func>,
    /// The item named `State`, if any.
    pub(crate) state: Option<Ident>,
    /// The item named `Config`, if any.
    pub(crate) config: Option<Ident>,
    /// An item of the user's named `Model`, which the macro would clash with.
    pub(crate) own_model: Option<Ident>,
}

/// A function of the module that is a hook, a tool, an observer, or looks like a hook.
pub(crate) struct Func {
    /// Its position among the module's items.
    pub(crate) index: usize,
    /// What it is.
    pub(crate) role: Role,
    /// Its signature.
    pub(crate) sig: Signature,
    /// Its doc comment.
    pub(crate) docs: Docs,
}

/// What a function is to the model.
pub(crate) enum Role {
    /// A hook of the catalogue.
    Hook(&'static catalogue::Hook),
    /// A `#[tool]`.
    Tool {
        /// `#[tool(name = "..")]`.
        name: Option<LitStr>,
    },
    /// An `#[observer]`.
    Observer,
    /// Named `on_*` but not a hook.
    UnknownHook,
}

/// What the macro was given.
pub(crate) enum Parsed {
    /// An inline module.
    Module(Box<Module>),
    /// Something else: emitted unchanged after the error.
    Other(TokenStream),
}

/// Parses the item under the attribute.
pub(crate) fn parse(tokens: TokenStream, errors: &mut Errors) -> Parsed {
    let item: Item = match syn::parse2(tokens.clone()) {
        Ok(item) => item,
        Err(error) => {
            errors.push(error);
            return Parsed::Other(tokens);
        }
    };
    let mut item = match item {
        Item::Mod(item) => item,
        other => {
            let what = what_is(&other);
            errors.spanned(
                &other,
                format!(
                    "`#[proxy_model]` goes on a module, not {what}: `#[proxy_model] pub mod my_model {{ .. }}`"
                ),
            );
            return Parsed::Other(tokens);
        }
    };
    let Some((_, items)) = &mut item.content else {
        let ident = &item.ident;
        errors.spanned(
            &item,
            format!(
                "`#[proxy_model]` needs the module's body here: `mod {ident} {{ .. }}` (the macro sees only the tokens it is written on, not `{ident}.rs`)"
            ),
        );
        return Parsed::Other(TokenStream::new());
    };

    let mut fns = Vec::new();
    let (mut state, mut config, mut own_model) = (None, None, None);
    for (index, item) in items.iter_mut().enumerate() {
        if let Item::Fn(function) = item {
            let role = take_role(&mut function.attrs, errors);
            let name = function.sig.ident.to_string();
            let role = match role {
                Some(role) => Some(role),
                None => match catalogue::find(&name) {
                    Some(hook) => Some(Role::Hook(hook)),
                    None if name.starts_with("on_") => Some(Role::UnknownHook),
                    None => None,
                },
            };
            if let Some(role) = role {
                fns.push(Func {
                    index,
                    role,
                    sig: function.sig.clone(),
                    docs: docs(&function.attrs),
                });
            }
            continue;
        }
        if let Some(attrs) = attrs_mut(item) {
            for attr in attrs.iter() {
                if is_role(attr) {
                    errors.spanned(
                        attr,
                        format!("`{}` goes on a function of the model", quote::quote!(#attr)),
                    );
                }
            }
            attrs.retain(|attr| !is_role(attr));
        }
        for ident in names(item) {
            let slot = match ident.to_string().as_str() {
                "State" => &mut state,
                "Config" => &mut config,
                "Model" => &mut own_model,
                _ => continue,
            };
            slot.get_or_insert(ident);
        }
    }

    Parsed::Module(Box::new(Module {
        docs: docs(&item.attrs),
        item,
        fns,
        state,
        config,
        own_model,
    }))
}

/// Removes `#[tool]` / `#[observer]` from a function and reads them.
fn take_role(attrs: &mut Vec<Attribute>, errors: &mut Errors) -> Option<Role> {
    let mut role: Option<Role> = None;
    for attr in attrs.iter().filter(|attr| is_role(attr)) {
        let parsed = if attr.path().is_ident("tool") {
            tool_attr(attr).map(|name| Role::Tool { name })
        } else {
            match &attr.meta {
                syn::Meta::Path(_) => Ok(Role::Observer),
                other => Err(syn::Error::new_spanned(
                    other,
                    "`#[observer]` takes no arguments",
                )),
            }
        };
        match parsed {
            Err(error) => errors.push(error),
            Ok(_) if role.is_some() => errors.spanned(
                attr,
                "a function is one `#[tool]` or one `#[observer]`, not several",
            ),
            Ok(parsed) => role = Some(parsed),
        }
    }
    attrs.retain(|attr| !is_role(attr));
    role
}

/// `#[tool]` or `#[tool(name = "..")]`.
fn tool_attr(attr: &Attribute) -> syn::Result<Option<LitStr>> {
    let mut name = None;
    match &attr.meta {
        syn::Meta::Path(_) => {}
        syn::Meta::List(_) => attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                if name.is_some() {
                    return Err(meta.error("`name` is specified more than once"));
                }
                let value: LitStr = meta.value()?.parse()?;
                if value.value().trim().is_empty() {
                    return Err(syn::Error::new(value.span(), "a tool name cannot be empty"));
                }
                name = Some(value);
                Ok(())
            } else {
                Err(meta.error("unknown `#[tool]` argument: expected `name = \"..\"`"))
            }
        })?,
        syn::Meta::NameValue(value) => {
            return Err(syn::Error::new_spanned(
                value,
                "expected `#[tool]` or `#[tool(name = \"..\")]`",
            ));
        }
    }
    Ok(name)
}

fn is_role(attr: &Attribute) -> bool {
    attr.path().is_ident("tool") || attr.path().is_ident("observer")
}

/// The names an item puts in the module's type namespace (or, for `use`, may put there).
fn names(item: &Item) -> Vec<Ident> {
    match item {
        Item::Struct(item) => vec![item.ident.clone()],
        Item::Enum(item) => vec![item.ident.clone()],
        Item::Union(item) => vec![item.ident.clone()],
        Item::Type(item) => vec![item.ident.clone()],
        Item::Trait(item) => vec![item.ident.clone()],
        Item::Use(item) => {
            let mut out = Vec::new();
            use_names(&item.tree, &mut out);
            out
        }
        _ => Vec::new(),
    }
}

fn use_names(tree: &UseTree, out: &mut Vec<Ident>) {
    match tree {
        UseTree::Path(path) => use_names(&path.tree, out),
        UseTree::Name(name) => out.push(name.ident.clone()),
        UseTree::Rename(rename) => out.push(rename.rename.clone()),
        UseTree::Glob(_) => {}
        UseTree::Group(group) => group.items.iter().for_each(|tree| use_names(tree, out)),
    }
}

/// The attributes of an item other than a function, where it has them.
fn attrs_mut(item: &mut Item) -> Option<&mut Vec<Attribute>> {
    Some(match item {
        Item::Const(item) => &mut item.attrs,
        Item::Enum(item) => &mut item.attrs,
        Item::ExternCrate(item) => &mut item.attrs,
        Item::ForeignMod(item) => &mut item.attrs,
        Item::Impl(item) => &mut item.attrs,
        Item::Macro(item) => &mut item.attrs,
        Item::Mod(item) => &mut item.attrs,
        Item::Static(item) => &mut item.attrs,
        Item::Struct(item) => &mut item.attrs,
        Item::Trait(item) => &mut item.attrs,
        Item::TraitAlias(item) => &mut item.attrs,
        Item::Type(item) => &mut item.attrs,
        Item::Union(item) => &mut item.attrs,
        Item::Use(item) => &mut item.attrs,
        _ => return None,
    })
}

/// "a function", "a struct", ... for the error on a misplaced attribute.
fn what_is(item: &Item) -> &'static str {
    match item {
        Item::Fn(_) => "a function",
        Item::Struct(_) => "a struct",
        Item::Enum(_) => "an enum",
        Item::Impl(_) => "an impl block",
        Item::Trait(_) => "a trait",
        Item::Const(_) => "a constant",
        Item::Static(_) => "a static",
        Item::Type(_) => "a type alias",
        Item::Use(_) => "a `use` declaration",
        _ => "this item",
    }
}

/// Reads a doc comment: unindented, outer blank lines dropped; the summary is the first
/// paragraph on one line.
pub(crate) fn docs(attrs: &[Attribute]) -> Docs {
    let mut lines: Vec<String> = Vec::new();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("doc")) {
        if let syn::Meta::NameValue(syn::MetaNameValue {
            value:
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }),
            ..
        }) = &attr.meta
        {
            lines.extend(
                text.value()
                    .split('\n')
                    .map(|line| line.trim_end().to_owned()),
            );
        }
    }
    let indent = lines
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = lines
        .iter()
        .map(|line| line.get(indent..).unwrap_or(""))
        .collect();
    let start = lines.iter().position(|line| !line.is_empty());
    let end = lines.iter().rposition(|line| !line.is_empty());
    let lines = match (start, end) {
        (Some(start), Some(end)) => &lines[start..=end],
        _ => &[][..],
    };
    let summary = lines
        .iter()
        .take_while(|line| !line.is_empty())
        .map(|line| line.trim())
        .collect::<Vec<_>>()
        .join(" ");
    Docs {
        summary,
        text: lines.join("\n"),
    }
}

/// The span of a function's `fn name` (or `async fn name`), where signature errors point.
pub(crate) fn head_span(sig: &Signature) -> Span {
    let start = sig
        .asyncness
        .map(|token| token.span)
        .unwrap_or(sig.fn_token.span);
    start.join(sig.ident.span()).unwrap_or(sig.ident.span())
}
