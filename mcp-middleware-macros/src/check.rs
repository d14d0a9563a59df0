//! Checks on the parsed attribute and module: hook names and signatures, duplicates, tools,
//! observers, `chain` and `extends`. Each mistake becomes an error under its own tokens with a
//! hint; what passes becomes a [`Model`] for `expand`.
//!
//! A parameter that names another hook's type (`GetPromptRequestParams` in `on_tool_call`, or
//! `Next<'_, hooks::PromptGet>`) is reported here, reading forward: what the hook takes, then
//! what was found. What the macro cannot see is left to the compiler: other parameter types and
//! result types (the generated calls carry the user's spans, so a mismatch points at the user's
//! signature), and conflicts between parents, which are evaluated in constants
//! (`mcp_middleware::model::compose`).

use std::collections::HashSet;

use syn::{FnArg, Ident, Signature, Type};

use crate::ast::{self, Func, Module, Role};
use crate::attr::{self, Args};
use crate::catalogue::{self, Hook, Kind};
use crate::ctxt::Errors;

/// A model whose parts passed the checks.
pub(crate) struct Model {
    /// The model's name.
    pub(crate) name: String,
    /// Its hooks, in source order.
    pub(crate) hooks: Vec<HookFn>,
    /// Its synthetic tools, in source order.
    pub(crate) tools: Vec<ToolFn>,
    /// Its observers, in source order.
    pub(crate) observers: Vec<Signature>,
    /// The hooks of `chain = [..]`.
    pub(crate) chained: Vec<&'static Hook>,
    /// Module items to leave out of the output (duplicate definitions already reported).
    pub(crate) dropped: HashSet<usize>,
}

/// A hook function.
pub(crate) struct HookFn {
    /// Which hook.
    pub(crate) hook: &'static Hook,
    /// The user's signature.
    pub(crate) sig: Signature,
}

/// A `#[tool]` function.
pub(crate) struct ToolFn {
    /// The tool's name.
    pub(crate) name: String,
    /// The tool's description (the function's doc comment).
    pub(crate) description: String,
    /// The user's signature.
    pub(crate) sig: Signature,
    /// The arguments type, if the tool takes arguments.
    pub(crate) args: Option<Type>,
}

/// Checks the attribute and the module; every problem goes to `errors`.
pub(crate) fn check(args: &Args, module: &Module, errors: &mut Errors) -> Model {
    let name = args
        .name
        .as_ref()
        .map(|name| name.value())
        .unwrap_or_else(|| module.item.ident.to_string());
    let mut model = Model {
        name,
        hooks: Vec::new(),
        tools: Vec::new(),
        observers: Vec::new(),
        chained: Vec::new(),
        dropped: HashSet::new(),
    };
    if let Some(own) = &module.own_model {
        errors.spanned(
            own,
            "`Model` is the type `#[proxy_model]` adds to the module: rename this item",
        );
    }
    for func in &module.fns {
        match &func.role {
            Role::Hook(hook) => check_hook(hook, func, &mut model, errors),
            Role::UnknownHook => unknown_hook(&func.sig.ident, errors),
            Role::Tool { name } => check_tool(name.as_ref(), func, &mut model, errors),
            Role::Observer => check_observer(func, &mut model, errors),
        }
    }
    check_extends(args, errors);
    check_chain(args, &mut model, errors);
    model
}

fn check_hook(hook: &'static Hook, func: &Func, model: &mut Model, errors: &mut Errors) {
    let sig = &func.sig;
    if model.hooks.iter().any(|done| std::ptr::eq(done.hook, hook)) {
        errors.spanned(
            &sig.ident,
            format!(
                "duplicate hook: `{}` is defined more than once in proxy model `{}`",
                hook.name, model.name
            ),
        );
        model.dropped.insert(func.index);
        return;
    }
    let expected = || format!("expected `{}`", hook.signature());
    let mut ok = plain_fn(sig, "a hook", errors);
    if sig.asyncness.is_none() {
        errors.at(
            ast::head_span(sig),
            format!("hook `{}` must be an `async fn`: {}", hook.name, expected()),
        );
        ok = false;
    }
    if sig.inputs.len() != hook.arity() {
        errors.at(
            sig.paren_token.span.join(),
            format!(
                "hook `{}` takes {} parameter{}, found {}: {}",
                hook.name,
                hook.arity(),
                if hook.arity() == 1 { "" } else { "s" },
                sig.inputs.len(),
                expected()
            ),
        );
        ok = false;
    }
    if ok && !param_types(hook, sig, errors) {
        ok = false;
    }
    if ok {
        model.hooks.push(HookFn {
            hook,
            sig: sig.clone(),
        });
    }
}

/// Checks the types of a hook's parameters that name a different hook's types, and says what
/// the hook takes (rustc, checking the generated call, would report the user's type as the
/// expected one). Types the catalogue does not know (an alias, a typo) are left to rustc.
/// Whether they were right.
fn param_types(hook: &Hook, sig: &Signature, errors: &mut Errors) -> bool {
    let mut ok = true;
    let typed = |index: usize| match sig.inputs.iter().nth(index) {
        Some(syn::FnArg::Typed(arg)) => Some(&*arg.ty),
        _ => None,
    };
    if let (Some(expected), Some(ty)) = (hook.params(), typed(1)) {
        let found = catalogue::type_text(ty);
        if found != expected && catalogue::is_params_type(&found) {
            errors.spanned(
                ty,
                format!(
                    "`{}` takes `{expected}` as its second parameter, found `{found}`",
                    hook.name
                ),
            );
            ok = false;
        }
    }
    if hook.kind == Kind::Request
        && let Some(ty) = typed(2)
        && let Some(marker) = catalogue::next_marker(ty)
        && marker != hook.id
        && catalogue::is_marker(&marker)
    {
        errors.spanned(
            ty,
            format!(
                "`{}` takes `Next<'_, hooks::{}>` as its third parameter, found `Next<'_, hooks::{marker}>`",
                hook.name, hook.id
            ),
        );
        ok = false;
    }
    ok
}

fn unknown_hook(ident: &Ident, errors: &mut Errors) {
    let name = ident.to_string();
    let message = match catalogue::closest_hook(&name) {
        Some(close) => format!("unknown hook `{name}`: did you mean `{close}`?"),
        None => format!(
            "unknown hook `{name}`: in a proxy model, functions named `on_*` are hooks, and there is no hook `{name}` (the hooks are {}); rename the function if it is a helper",
            catalogue::HOOKS
                .iter()
                .map(|hook| format!("`{}`", hook.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    errors.spanned(ident, message);
}

fn check_tool(name: Option<&syn::LitStr>, func: &Func, model: &mut Model, errors: &mut Errors) {
    let sig = &func.sig;
    let (tool, name_span) = match name {
        Some(name) => (name.value(), name.span()),
        None => (sig.ident.to_string(), sig.ident.span()),
    };
    let usage = "a `#[tool]` is `async fn name(ctx: &Context) -> HookResult<R>` or `async fn name(ctx: &Context, args: A) -> HookResult<R>`, where `A: Deserialize + JsonSchema` and `R` is `CallToolResult`, `String` or `&str`";
    plain_fn(sig, "a `#[tool]`", errors);
    if let Some(bad) = tool
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        errors.at(
            name_span,
            format!(
                "tool name `{tool}` has `{bad}`: tool names are ASCII letters, digits, `_`, `-` and `.`"
            ),
        );
    }
    if model.tools.iter().any(|done| done.name == tool) {
        errors.at(
            name_span,
            format!(
                "duplicate tool: `{tool}` is defined more than once in proxy model `{}`",
                model.name
            ),
        );
        if model.tools.iter().any(|done| done.sig.ident == sig.ident) {
            model.dropped.insert(func.index);
        }
        return;
    }
    if sig.asyncness.is_none() {
        errors.at(
            ast::head_span(sig),
            format!("tool `{tool}` must be an `async fn`: {usage}"),
        );
    }
    if sig.inputs.is_empty() || sig.inputs.len() > 2 {
        errors.at(
            sig.paren_token.span.join(),
            format!(
                "tool `{tool}` takes 1 or 2 parameters, found {}: {usage}",
                sig.inputs.len()
            ),
        );
    }
    let args = match sig.inputs.iter().nth(1) {
        Some(FnArg::Typed(arg)) => Some((*arg.ty).clone()),
        _ => None,
    };
    // Kept even when malformed (an error was reported, so nothing is generated from it), so
    // that a later tool of the same name is still reported.
    model.tools.push(ToolFn {
        name: tool,
        description: func.docs.text.clone(),
        sig: sig.clone(),
        args,
    });
}

fn check_observer(func: &Func, model: &mut Model, errors: &mut Errors) {
    let sig = &func.sig;
    let usage = "an `#[observer]` is `fn name(ctx: &Context, observation: &Observation)`";
    let mut ok = plain_fn(sig, "an `#[observer]`", errors);
    if let Some(token) = sig.asyncness {
        errors.spanned(
            token,
            format!(
                "observer `{}` cannot be `async`: observers run after the answer and cannot wait; {usage} (spawn a task for slow work)",
                sig.ident
            ),
        );
        ok = false;
    }
    if sig.inputs.len() != 2 {
        errors.at(
            sig.paren_token.span.join(),
            format!(
                "observer `{}` takes 2 parameters, found {}: {usage}",
                sig.ident,
                sig.inputs.len()
            ),
        );
        ok = false;
    }
    if ok {
        model.observers.push(sig.clone());
    }
}

/// Errors common to hooks, tools and observers: a method receiver, type or const generics.
fn plain_fn(sig: &Signature, what: &str, errors: &mut Errors) -> bool {
    let mut ok = true;
    if let Some(receiver) = sig.receiver() {
        errors.spanned(
            receiver,
            format!("{what} is a free function of the module, it takes no `self`"),
        );
        ok = false;
    }
    for param in &sig.generics.params {
        if !matches!(param, syn::GenericParam::Lifetime(_)) {
            errors.spanned(
                param,
                format!("{what} cannot have type or const parameters"),
            );
            ok = false;
        }
    }
    if let Some(variadic) = &sig.variadic {
        errors.spanned(variadic, format!("{what} cannot be variadic"));
        ok = false;
    }
    ok
}

fn check_extends(args: &Args, errors: &mut Errors) {
    let mut seen: Vec<String> = Vec::new();
    for parent in &args.extends {
        let text = attr::path_text(parent);
        if seen.contains(&text) {
            errors.spanned(
                parent,
                format!("`{text}` is listed more than once in `extends`"),
            );
        }
        seen.push(text);
    }
}

fn check_chain(args: &Args, model: &mut Model, errors: &mut Errors) {
    if let (Some(key), true) = (&args.chain_key, args.extends.is_empty()) {
        errors.spanned(
            key,
            format!(
                "`chain` runs the parents' implementations of a hook in `extends` order, but `{}` has no `extends`",
                model.name
            ),
        );
    }
    for entry in &args.chain {
        let name = entry.to_string();
        let Some(hook) = catalogue::find(&name) else {
            let hint = match catalogue::closest_hook(&name) {
                Some(close) => format!("did you mean `{close}`?"),
                None => "`chain` lists hook names such as `on_tool_call`".to_owned(),
            };
            errors.spanned(entry, format!("unknown hook `{name}` in `chain`: {hint}"));
            continue;
        };
        if model.chained.iter().any(|done| std::ptr::eq(*done, hook)) {
            errors.spanned(
                entry,
                format!("`{name}` is listed more than once in `chain`"),
            );
            continue;
        }
        if model.hooks.iter().any(|own| std::ptr::eq(own.hook, hook)) {
            errors.spanned(
                entry,
                format!(
                    "`{name}` is both implemented in `{}` and listed in `chain`: pick one. Implementing it replaces the parents' implementations (call them from yours if you need them); `chain` runs the parents' implementations in `extends` order",
                    model.name
                ),
            );
            continue;
        }
        model.chained.push(hook);
    }
}
