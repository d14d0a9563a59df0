//! The `#[proxy_model(...)]` arguments, parsed with their spans kept: `extends = [..]`,
//! `chain = [..]`, `name = ".."` and `crate = path`.
//!
//! Parsing recovers after a bad argument (it skips to the next `,`), so every mistake in the
//! attribute is reported at once, each under its own tokens.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Ident, LitStr, Path, Token};

use crate::catalogue;
use crate::ctxt::Errors;

/// The keys the attribute accepts.
const KEYS: [&str; 4] = ["extends", "chain", "name", "crate"];

/// The parsed arguments.
#[derive(Default)]
pub(crate) struct Args {
    /// `extends = [a, b]`, as written (resolved in the scope around the module).
    pub(crate) extends: Vec<Path>,
    /// `chain = [on_x]`.
    pub(crate) chain: Vec<Ident>,
    /// The `chain` key, for errors about the list as a whole.
    pub(crate) chain_key: Option<Ident>,
    /// `name = "..."`.
    pub(crate) name: Option<LitStr>,
    /// `crate = path`: where `mcp_middleware` is, for crates that re-export it.
    pub(crate) krate: Option<Path>,
}

impl Args {
    /// The path of the `mcp-middleware` crate in generated code.
    pub(crate) fn krate(&self) -> TokenStream {
        match &self.krate {
            Some(path) => path.to_token_stream(),
            None => quote!(::mcp_middleware),
        }
    }
}

/// Parses the attribute's arguments, recording every error in `errors`.
pub(crate) fn parse(tokens: TokenStream, errors: &mut Errors) -> Args {
    let mut args = Args::default();
    let parser = |input: ParseStream<'_>| {
        parse_args(input, &mut args, errors);
        Ok(())
    };
    if let Err(error) = parser.parse2(tokens) {
        errors.push(error);
    }
    args
}

fn parse_args(input: ParseStream<'_>, args: &mut Args, errors: &mut Errors) {
    let mut seen: Vec<String> = Vec::new();
    while !input.is_empty() {
        if let Err(error) = parse_one(input, args, &mut seen) {
            errors.push(error);
            skip_past_comma(input);
            continue;
        }
        if input.is_empty() {
            break;
        }
        if let Err(error) = input.parse::<Token![,]>() {
            errors.push(syn::Error::new(
                error.span(),
                "expected `,` between `#[proxy_model]` arguments",
            ));
            skip_past_comma(input);
        }
    }
}

fn parse_one(input: ParseStream<'_>, args: &mut Args, seen: &mut Vec<String>) -> syn::Result<()> {
    let key = input.call(Ident::parse_any).map_err(|error| {
        syn::Error::new(
            error.span(),
            "expected a `#[proxy_model]` argument: `extends = [..]`, `chain = [..]`, `name = \"..\"` or `crate = path`",
        )
    })?;
    let name = key.to_string();
    if !KEYS.contains(&name.as_str()) {
        let hint = match catalogue::closest(&name, KEYS) {
            Some(close) => format!("did you mean `{close}`? "),
            None => String::new(),
        };
        return Err(syn::Error::new(
            key.span(),
            format!(
                "unknown `#[proxy_model]` argument `{name}`: {hint}(expected `extends`, `chain`, `name` or `crate`)"
            ),
        ));
    }
    if seen.contains(&name) {
        return Err(syn::Error::new(
            key.span(),
            format!("`{name}` is specified more than once"),
        ));
    }
    seen.push(name.clone());
    input.parse::<Token![=]>().map_err(|error| {
        syn::Error::new(
            error.span(),
            format!("expected `=` after `{name}`: {}", usage(&name)),
        )
    })?;
    match name.as_str() {
        "extends" => args.extends = list(input, &name, Path::parse_mod_style)?,
        "chain" => {
            args.chain = list(input, &name, Ident::parse)?;
            args.chain_key = Some(key);
        }
        "name" => args.name = Some(string(input, &name)?),
        _ => {
            let expected = |error: syn::Error| {
                syn::Error::new(error.span(), format!("expected a path: {}", usage("crate")))
            };
            args.krate = Some(if input.peek(LitStr) {
                let text = input.parse::<LitStr>()?;
                text.parse_with(Path::parse_mod_style).map_err(|_| {
                    syn::Error::new(text.span(), format!("expected a path: {}", usage("crate")))
                })?
            } else {
                input.call(Path::parse_mod_style).map_err(expected)?
            });
        }
    }
    Ok(())
}

/// `[a, b, ..]`.
fn list<T>(
    input: ParseStream<'_>,
    key: &str,
    item: fn(ParseStream<'_>) -> syn::Result<T>,
) -> syn::Result<Vec<T>> {
    if !input.peek(syn::token::Bracket) {
        return Err(input.error(format!("`{key}` takes a list in brackets: {}", usage(key))));
    }
    let content;
    syn::bracketed!(content in input);
    let entries = Punctuated::<T, Token![,]>::parse_terminated_with(&content, item);
    match entries {
        Ok(entries) => Ok(entries.into_iter().collect()),
        Err(error) => {
            // Consume the rest of the list, so the parser reports only this error.
            skip_all(&content);
            let what = if key == "chain" {
                "a hook name"
            } else {
                "the path of a `#[proxy_model]` module"
            };
            Err(syn::Error::new(
                error.span(),
                format!("expected {what}: {}", usage(key)),
            ))
        }
    }
}

/// Skips everything left in `input`.
fn skip_all(input: ParseStream<'_>) {
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((_, next)) = rest.token_tree() {
            rest = next;
        }
        Ok(((), rest))
    });
}

/// A string literal.
fn string(input: ParseStream<'_>, key: &str) -> syn::Result<LitStr> {
    let value: syn::Expr = input.parse()?;
    match value {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) => {
            if text.value().trim().is_empty() {
                return Err(syn::Error::new(
                    text.span(),
                    format!("`{key}` cannot be empty"),
                ));
            }
            Ok(text)
        }
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{key}` takes a string literal: {}", usage(key)),
        )),
    }
}

/// How a key is written, for error messages.
fn usage(key: &str) -> &'static str {
    match key {
        "extends" => "`extends = [gate, crate::models::paginate]`",
        "chain" => "`chain = [on_tool_call, on_tools_list]`",
        "name" => "`name = \"my-model\"`",
        _ => {
            "`crate = ::my_reexport::mcp_middleware` (an absolute path: it is used inside the module and around it)"
        }
    }
}

/// Skips the rest of a bad argument, up to and including the next top-level `,`.
fn skip_past_comma(input: ParseStream<'_>) {
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tree, next)) = rest.token_tree() {
            rest = next;
            if matches!(&tree, TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
        }
        Ok(((), rest))
    });
}

/// A path as the user wrote it, without the spaces of `to_string`: `crate::models::gate`.
pub(crate) fn path_text(path: &Path) -> String {
    path.to_token_stream()
        .to_string()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}

/// The span of a whole path (first to last token where the compiler can join them).
pub(crate) fn path_span(path: &Path) -> Span {
    let first = path
        .leading_colon
        .map(|colon| colon.spans[0])
        .or_else(|| path.segments.first().map(|s| s.ident.span()))
        .unwrap_or_else(Span::call_site);
    let last = path
        .segments
        .last()
        .map(|s| s.ident.span())
        .unwrap_or(first);
    first.join(last).unwrap_or(last)
}
