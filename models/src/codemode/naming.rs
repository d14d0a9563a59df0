//! How servers and tools are named inside code: the documented identifier rules.
//!
//! **Namespaces.** A server's namespace is its name with every character other than ASCII
//! letters, digits, `_` and `$` replaced by `_`, a leading digit prefixed with `_`, and a `_`
//! appended when the result is a JavaScript reserved word or a global of the sandbox (`console`,
//! `JSON`, `Promise`, ...). With one ad-hoc server the namespace is `upstream`; the synthetic
//! tools of models below code mode are under `proxy`. Two servers that come out the same get
//! `_2`, `_3`, ... in the order of their names.
//!
//! **Methods.** A tool whose name is already a valid identifier name (reserved words included:
//! they are fine after a `.`) keeps it. Otherwise its name is
//! split at every run of characters other than letters, digits, `_` and `$`, and the parts are
//! joined in camelCase (`get-sum` -> `getSum`, `list.files` -> `listFiles`), with a leading
//! digit prefixed with `_`. When two tools of one namespace come out the same, the tool whose
//! name already was that identifier keeps it, then the first by name; the others get `_2`,
//! `_3`, ... in the order of their names. `inspect` shows every tool's method and original name;
//! the original name always works by index: `everything["get-sum"](...)`.

use std::collections::BTreeMap;

/// The namespace of the one server of an ad-hoc proxy (`mcpctl proxy --model codemode -- CMD`).
pub(crate) const AD_HOC: &str = "upstream";
/// The namespace of the synthetic tools of the models below code mode.
pub(crate) const PROXY: &str = "proxy";

/// Words a namespace or method cannot be, or would shadow in the sandbox.
const RESERVED: &[&str] = &[
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "let",
    "new",
    "null",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "implements",
    "interface",
    "package",
    "private",
    "protected",
    "public",
    "arguments",
    "eval",
    "undefined",
    "NaN",
    "Infinity",
    "globalThis",
    "console",
    "JSON",
    "Math",
    "Object",
    "Array",
    "String",
    "Number",
    "Boolean",
    "Promise",
    "Error",
    "Date",
    "RegExp",
    "Map",
    "Set",
    "Symbol",
    "BigInt",
    "Reflect",
    "Proxy",
    "proxy",
    "upstream",
];

/// Whether `name` is a valid (ASCII) JavaScript identifier name: what can follow a `.`.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_' || first == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// The namespace for the server called `server` (before collisions are resolved).
pub(crate) fn namespace(server: &str) -> String {
    let mut out: String = server
        .chars()
        .map(|c| if word_char(c) { c } else { '_' })
        .collect();
    if out.is_empty() {
        out.push('_');
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    if RESERVED.contains(&out.as_str()) {
        out.push('_');
    }
    out
}

/// The method name for the tool called `tool` (before collisions are resolved).
pub(crate) fn method(tool: &str) -> String {
    if is_identifier(tool) {
        return tool.to_owned();
    }
    let mut out = String::new();
    for (index, part) in tool
        .split(|c| !word_char(c))
        .filter(|p| !p.is_empty())
        .enumerate()
    {
        if index == 0 {
            out.push_str(part);
        } else {
            let mut chars = part.chars();
            if let Some(first) = chars.next() {
                out.extend(first.to_uppercase());
                out.push_str(chars.as_str());
            }
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Gives each of `names` a unique identifier made by `rule`, deterministically: a name that
/// already is its identifier first, then by name; later ones get `_2`, `_3`, ... Returns the
/// identifiers in the order of `names`.
pub(crate) fn assign(names: &[&str], rule: fn(&str) -> String) -> Vec<String> {
    let mut order: Vec<usize> = (0..names.len()).collect();
    let wanted: Vec<String> = names.iter().map(|name| rule(name)).collect();
    order.sort_by(|&a, &b| {
        let renamed = |i: usize| wanted[i] != names[i];
        (renamed(a), names[a]).cmp(&(renamed(b), names[b]))
    });
    let mut taken: BTreeMap<String, ()> = BTreeMap::new();
    let mut out = vec![String::new(); names.len()];
    for index in order {
        let base = &wanted[index];
        let mut candidate = base.clone();
        let mut n = 2;
        while taken.contains_key(&candidate) {
            candidate = format!("{base}_{n}");
            n += 1;
        }
        taken.insert(candidate.clone(), ());
        out[index] = candidate;
    }
    out
}

/// The edit distance between `a` and `b`, case-insensitive (for "did you mean").
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            current[j + 1] = (previous[j] + cost)
                .min(previous[j + 1] + 1)
                .min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// Up to `limit` of `candidates` closest to `wanted`: those within a third of its length in
/// edits, or containing it (or contained in it), nearest first.
pub(crate) fn closest<'c>(wanted: &str, candidates: &[&'c str], limit: usize) -> Vec<&'c str> {
    let lower = wanted.to_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .iter()
        .filter_map(|candidate| {
            let d = distance(wanted, candidate);
            let other = candidate.to_lowercase();
            let related = !lower.is_empty() && (other.contains(&lower) || lower.contains(&other));
            (d <= (wanted.len() / 3).max(2) || related).then_some((d, *candidate))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(limit).map(|(_, c)| c).collect()
}
