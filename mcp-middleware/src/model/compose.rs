//! Compile-time composition checks (conflicts are compile errors), evaluated in constants
//! that `#[proxy_model]` emits.
//!
//! A proc macro sees only its own module, so what the parents implement travels in their
//! [`ModelDescriptor`] constants. For each pair of parents the macro emits
//! `const _: () = if let Some(m) = conflict(..) { panic!("{}", m.as_str()) };` spanned at the
//! second parent's `extends` entry: a conflict becomes a compile error (E0080) whose text names
//! the composing model, the hook or tool, both parents and both fixes. This works the same for
//! parents in the same crate and in other crates.

use super::ModelDescriptor;
use super::hooks::{HookId, HookSet};

/// Longest conflict message, in bytes; longer ones are cut.
const MESSAGE_CAPACITY: usize = 1024;

/// A string built at compile time (no allocation in `const fn`).
#[derive(Clone, Copy)]
pub struct ConstMessage {
    buf: [u8; MESSAGE_CAPACITY],
    len: usize,
}

impl ConstMessage {
    const fn new() -> Self {
        Self {
            buf: [0; MESSAGE_CAPACITY],
            len: 0,
        }
    }

    const fn push(mut self, text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() && self.len < MESSAGE_CAPACITY {
            self.buf[self.len] = bytes[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    /// The message.
    pub const fn as_str(&self) -> &str {
        let (text, _) = self.buf.split_at(self.len);
        match core::str::from_utf8(text) {
            Ok(text) => text,
            Err(_) => "proxy model composition conflict",
        }
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn option_eq(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => str_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// For every hook, the model answering for it in a composition: the model itself if it defines
/// or chains the hook, else the first parent that has an owner for it.
pub const fn owners(
    id: &'static str,
    hooks: HookSet,
    chained: HookSet,
    parents: &[&'static ModelDescriptor],
) -> [Option<&'static str>; HookId::COUNT] {
    let mut out = [None; HookId::COUNT];
    let mine = hooks.union(chained);
    let mut hook = 0;
    while hook < HookId::COUNT {
        if mine.contains_index(hook) {
            out[hook] = Some(id);
        } else {
            let mut p = 0;
            while p < parents.len() {
                if let Some(owner) = parents[p].owners[hook] {
                    out[hook] = Some(owner);
                    break;
                }
                p += 1;
            }
        }
        hook += 1;
    }
    out
}

const HOOK_NAMES: [&str; HookId::COUNT] = {
    let mut names = [""; HookId::COUNT];
    let mut i = 0;
    while i < HookId::COUNT {
        names[i] = HookId::ALL[i].name();
        i += 1;
    }
    names
};

/// The model that defines synthetic tool `name` as seen from `model` (a model's own tool hides
/// its ancestors' of the same name), by `defined_at`.
const fn tool_owner(model: &'static ModelDescriptor, name: &str) -> Option<&'static str> {
    let mut t = 0;
    while t < model.tools.len() {
        if str_eq(model.tools[t].name, name) {
            return Some(model.defined_at);
        }
        t += 1;
    }
    let mut p = 0;
    while p < model.parents.len() {
        if let Some(owner) = tool_owner(model.parents[p], name) {
            return Some(owner);
        }
        p += 1;
    }
    None
}

/// The first synthetic tool that `a` and `b` both bring from different models, unless the child
/// defines a tool of that name itself.
const fn shared_tool(
    a: &'static ModelDescriptor,
    b: &'static ModelDescriptor,
    child_tools: &[&str],
) -> Option<&'static str> {
    // Depth-first over `a`'s ancestry with an explicit stack (no allocation in const fn).
    let mut stack: [Option<&'static ModelDescriptor>; 64] = [None; 64];
    stack[0] = Some(a);
    let mut depth = 1;
    while depth > 0 {
        depth -= 1;
        let Some(model) = stack[depth] else { break };
        let mut t = 0;
        while t < model.tools.len() {
            let name = model.tools[t].name;
            let mut overridden = false;
            let mut c = 0;
            while c < child_tools.len() {
                if str_eq(child_tools[c], name) {
                    overridden = true;
                }
                c += 1;
            }
            if !overridden {
                let (in_a, in_b) = (tool_owner(a, name), tool_owner(b, name));
                if in_b.is_some() && !option_eq(in_a, in_b) {
                    return Some(name);
                }
            }
            t += 1;
        }
        let mut p = 0;
        while p < model.parents.len() && depth < stack.len() {
            stack[depth] = Some(model.parents[p]);
            depth += 1;
            p += 1;
        }
    }
    None
}

/// Checks one pair of parents of the model `child` (its own hooks, `chain = [...]` and tool
/// names given): two different models answering for one hook, or bringing one tool name, is a
/// conflict the child must resolve. Returns the compile error's text.
#[allow(clippy::too_many_arguments)]
pub const fn conflict(
    child: &str,
    child_hooks: HookSet,
    child_chain: HookSet,
    child_tools: &[&str],
    a_name: &str,
    a: &'static ModelDescriptor,
    b_name: &str,
    b: &'static ModelDescriptor,
) -> Option<ConstMessage> {
    let resolved = child_hooks.union(child_chain);
    let mut hooks = ConstMessage::new();
    let mut chain = ConstMessage::new();
    let mut count = 0;
    let mut hook = 0;
    while hook < HookId::COUNT {
        if let (Some(x), Some(y)) = (a.owners[hook], b.owners[hook])
            && !str_eq(x, y)
            && !resolved.contains_index(hook)
        {
            if count > 0 {
                hooks = hooks.push(", ");
                chain = chain.push(", ");
            }
            hooks = hooks.push("`").push(HOOK_NAMES[hook]).push("`");
            if !str_eq(x, a.defined_at) || !str_eq(y, b.defined_at) {
                // Inherited: say which models the two implementations come from.
                hooks = hooks
                    .push(" (from `")
                    .push(x)
                    .push("` and `")
                    .push(y)
                    .push("`)");
            }
            chain = chain.push(HOOK_NAMES[hook]);
            count += 1;
        }
        hook += 1;
    }
    if count > 0 {
        let them = if count == 1 { "it" } else { "them" };
        return Some(
            ConstMessage::new()
                .push("proxy model `")
                .push(child)
                .push("` extends `")
                .push(a_name)
                .push("` and `")
                .push(b_name)
                .push("`, which both implement ")
                .push(hooks.as_str())
                .push(": implement ")
                .push(them)
                .push(" in `")
                .push(child)
                .push("` (it may call the parents' hook functions), or add `chain = [")
                .push(chain.as_str())
                .push("]` to run both in `extends` order"),
        );
    }
    if let Some(tool) = shared_tool(a, b, child_tools) {
        return Some(
            ConstMessage::new()
                .push("proxy model `")
                .push(child)
                .push("` extends `")
                .push(a_name)
                .push("` and `")
                .push(b_name)
                .push("`, which both define the synthetic tool `")
                .push(tool)
                .push("`: define a `#[tool] fn ")
                .push(tool)
                .push("` in `")
                .push(child)
                .push("` to replace both, or extend only one of them"),
        );
    }
    None
}
