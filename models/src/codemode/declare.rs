//! TypeScript declarations from JSON Schema (2020-12): what `inspect` shows and `search_tools`
//! signs with.
//!
//! Covered: `type` (one or a list), `enum`, `const`, `oneOf`/`anyOf` (unions), `allOf`
//! (intersections), `nullable`, objects (`properties`, `required`, `additionalProperties`,
//! `patternProperties`), arrays (`items`, `prefixItems`), `$ref` into `$defs`/`definitions`
//! (each definition becomes a type alias), and descriptions as JSDoc. Anything else is
//! `unknown`, never an error: a schema only informs the declaration. A tool's result type comes
//! from its `outputSchema`; without one a call returns the tool's text, a `string`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::catalog::Entry;

/// How deep a schema is followed before giving up with `unknown`.
const MAX_DEPTH: usize = 12;
/// How deep references are inlined in a one-line signature.
const INLINE_REF_DEPTH: usize = 4;

/// A schema written as TypeScript: inline (one line) or expanded (with JSDoc, indented).
struct Writer<'s> {
    root: &'s Value,
    /// Definitions referenced so far: the alias name and the definition's schema.
    aliases: BTreeMap<String, &'s Value>,
    /// The prefix of alias names (the method, in PascalCase), so tools do not collide.
    prefix: String,
    expanded: bool,
}

impl<'s> Writer<'s> {
    fn new(root: &'s Value, prefix: &str, expanded: bool) -> Self {
        Self {
            root,
            aliases: BTreeMap::new(),
            prefix: pascal(prefix),
            expanded,
        }
    }

    fn ty(&mut self, schema: &'s Value, depth: usize, indent: usize) -> String {
        let Some(map) = schema.as_object() else {
            // `true` (or a missing schema) accepts anything; `false` nothing.
            return if schema == &Value::Bool(false) {
                "never".into()
            } else {
                "unknown".into()
            };
        };
        if depth > MAX_DEPTH {
            return "unknown".into();
        }
        let mut ty = self.ty_inner(map, depth, indent);
        if map.get("nullable") == Some(&Value::Bool(true)) && ty != "unknown" {
            ty = format!("{} | null", paren(&ty));
        }
        ty
    }

    fn ty_inner(&mut self, map: &'s Map<String, Value>, depth: usize, indent: usize) -> String {
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            return self.reference(reference, depth, indent);
        }
        if let Some(value) = map.get("const") {
            return literal(value);
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let parts: Vec<String> = values.iter().map(literal).collect();
            return union(parts);
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(options)) = map.get(key) {
                let parts = options
                    .iter()
                    .map(|option| paren(&self.ty(option, depth + 1, indent)))
                    .collect();
                return union(parts);
            }
        }
        if let Some(Value::Array(parts)) = map.get("allOf") {
            let parts: Vec<String> = parts
                .iter()
                .map(|part| paren(&self.ty(part, depth + 1, indent)))
                .collect();
            return if parts.is_empty() {
                "unknown".into()
            } else {
                parts.join(" & ")
            };
        }
        match map.get("type") {
            Some(Value::String(kind)) => self.of_type(kind, map, depth, indent),
            Some(Value::Array(kinds)) => union(
                kinds
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|kind| paren(&self.of_type(kind, map, depth, indent)))
                    .collect(),
            ),
            _ if map.contains_key("properties") => self.object(map, depth, indent),
            _ if map.contains_key("items") => self.of_type("array", map, depth, indent),
            _ => "unknown".into(),
        }
    }

    fn of_type(
        &mut self,
        kind: &str,
        map: &'s Map<String, Value>,
        depth: usize,
        indent: usize,
    ) -> String {
        match kind {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "object" => self.object(map, depth, indent),
            "array" => {
                if let Some(Value::Array(prefix)) = map.get("prefixItems") {
                    let parts: Vec<String> = prefix
                        .iter()
                        .map(|item| self.ty(item, depth + 1, indent))
                        .collect();
                    return format!("[{}]", parts.join(", "));
                }
                match map.get("items") {
                    Some(Value::Array(items)) => {
                        let parts: Vec<String> = items
                            .iter()
                            .map(|item| self.ty(item, depth + 1, indent))
                            .collect();
                        format!("[{}]", parts.join(", "))
                    }
                    Some(items) => format!("{}[]", paren(&self.ty(items, depth + 1, indent))),
                    None => "unknown[]".into(),
                }
            }
            _ => "unknown".into(),
        }
    }

    fn object(&mut self, map: &'s Map<String, Value>, depth: usize, indent: usize) -> String {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut members: Vec<(Option<&str>, String)> = Vec::new();
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (name, schema) in properties {
                let optional = if required.contains(&name.as_str()) {
                    ""
                } else {
                    "?"
                };
                let ty = self.ty(schema, depth + 1, indent + 1);
                let description = schema.get("description").and_then(Value::as_str);
                members.push((description, format!("{}{optional}: {ty}", key(name))));
            }
        }
        let extra = match map.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some("unknown".to_owned()),
            Some(schema @ Value::Object(_)) => Some(self.ty(schema, depth + 1, indent + 1)),
            _ => match map.get("patternProperties") {
                Some(Value::Object(patterns)) if !patterns.is_empty() => Some(union(
                    patterns
                        .values()
                        .map(|s| self.ty(s, depth + 1, indent + 1))
                        .collect(),
                )),
                // An object without properties accepts any members.
                _ if members.is_empty() => Some("unknown".to_owned()),
                _ => None,
            },
        };
        if let Some(extra) = extra {
            members.push((None, format!("[key: string]: {extra}")));
        }
        if members.is_empty() {
            return "{}".into();
        }
        if !self.expanded {
            let inner: Vec<String> = members.into_iter().map(|(_, m)| m).collect();
            return format!("{{ {} }}", inner.join("; "));
        }
        let pad = "  ".repeat(indent + 1);
        let mut out = String::from("{\n");
        for (description, member) in members {
            if let Some(description) = description {
                push_doc(&mut out, description, &pad);
            }
            let _ = writeln!(out, "{pad}{member};");
        }
        let _ = write!(out, "{}}}", "  ".repeat(indent));
        out
    }

    /// A `$ref`: an alias when expanded (written by [`Writer::aliases`]), inlined (a few
    /// levels deep) on one line.
    fn reference(&mut self, reference: &str, depth: usize, indent: usize) -> String {
        let path = reference.strip_prefix("#/").unwrap_or_default();
        let target = if reference == "#" {
            Some(self.root)
        } else {
            path.split('/')
                .try_fold(self.root, |value, part| value.get(unescape(part).as_str()))
        };
        let Some(target) = target else {
            return "unknown".into();
        };
        let name = if reference == "#" {
            "Self".to_owned()
        } else {
            pascal(path.rsplit('/').next().unwrap_or("Def"))
        };
        if !self.expanded {
            return if depth < INLINE_REF_DEPTH {
                self.ty(target, depth + 1, indent)
            } else {
                name
            };
        }
        let alias = format!("{}{name}", self.prefix);
        self.aliases.entry(alias.clone()).or_insert(target);
        alias
    }

    /// The aliases referenced, written out (following references they make in turn).
    fn aliases(&mut self, indent: usize) -> String {
        let mut written: BTreeMap<String, String> = BTreeMap::new();
        loop {
            let pending: Vec<(String, &Value)> = self
                .aliases
                .iter()
                .filter(|(name, _)| !written.contains_key(*name))
                .map(|(name, schema)| (name.clone(), *schema))
                .collect();
            if pending.is_empty() {
                break;
            }
            for (name, schema) in pending {
                let ty = self.ty(schema, 0, indent);
                let mut text = String::new();
                let pad = "  ".repeat(indent);
                if self.expanded
                    && let Some(description) = schema.get("description").and_then(Value::as_str)
                {
                    push_doc(&mut text, description, &pad);
                }
                let _ = writeln!(text, "{pad}type {name} = {ty};");
                written.insert(name, text);
            }
        }
        written.into_values().collect()
    }
}

/// The one-line signature: `namespace.method(args: {...}): Result`.
pub(crate) fn signature(entry: &Entry) -> String {
    let input = Value::Object(entry.input_schema.clone());
    let mut writer = Writer::new(&input, &entry.method, false);
    let args = writer.ty(&input, 0, 0);
    let result = match &entry.output_schema {
        Some(output) => {
            let output = Value::Object(output.clone());
            let mut writer = Writer::new(&output, &entry.method, false);
            writer.ty(&output, 0, 0)
        }
        None => "string".into(),
    };
    let args = if args == "{}" || args == "{ [key: string]: unknown }" && no_properties(&input) {
        "args?: {}".to_owned()
    } else {
        format!("args: {args}")
    };
    format!("{}.{}({args}): {result}", entry.namespace, entry.method)
}

fn no_properties(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
}

/// The full declaration of one tool, inside `declare namespace` blocks written by
/// [`namespace_block`].
pub(crate) fn declaration(entry: &Entry) -> String {
    let input = Value::Object(entry.input_schema.clone());
    let mut writer = Writer::new(&input, &entry.method, true);
    let args = writer.ty(&input, 0, 1);
    let mut aliases = writer.aliases(1);
    let result = match &entry.output_schema {
        Some(output) => {
            let output = Value::Object(output.clone());
            let mut writer = Writer::new(&output, &format!("{}Result", entry.method), true);
            let ty = writer.ty(&output, 0, 1);
            aliases.push_str(&writer.aliases(1));
            ty
        }
        None => "string".into(),
    };
    let mut out = aliases;
    let mut doc = String::new();
    if let Some(title) = &entry.title {
        doc.push_str(title);
        doc.push_str("\n\n");
    }
    doc.push_str(&entry.description);
    if entry.original != entry.method {
        let _ = write!(
            doc,
            "\n\nTool `{}`: also callable as {}[{:?}](...).",
            entry.original, entry.namespace, entry.original
        );
    }
    if entry.output_schema.is_none() {
        doc.push_str("\n@returns the tool's text (its structuredContent when it sends one)");
    }
    push_doc(&mut out, doc.trim(), "  ");
    let optional = if no_properties(&input) && !required_any(&input) {
        "?"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  function {}(args{optional}: {args}): Promise<{result}>;",
        entry.method
    );
    out
}

fn required_any(schema: &Value) -> bool {
    schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
}

/// `declare namespace NAME { ... }` around declarations.
pub(crate) fn namespace_block(name: &str, declarations: &[String]) -> String {
    format!(
        "declare namespace {name} {{\n{}}}\n",
        declarations.join("\n")
    )
}

fn push_doc(out: &mut String, text: &str, pad: &str) {
    let text = text.replace("*/", "*\\/");
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= 1 {
        let _ = writeln!(out, "{pad}/** {} */", text.trim());
        return;
    }
    let _ = writeln!(out, "{pad}/**");
    for line in lines {
        let _ = writeln!(out, "{pad} * {}", line.trim_end());
    }
    let _ = writeln!(out, "{pad} */");
}

fn literal(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        _ => "unknown".into(),
    }
}

fn union(parts: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for part in parts {
        if !unique.contains(&part) {
            unique.push(part);
        }
    }
    if unique.is_empty() {
        "never".into()
    } else {
        unique.join(" | ")
    }
}

/// Parenthesises a union or intersection where it is an operand.
fn paren(ty: &str) -> String {
    let depth_zero_operator = {
        let mut depth = 0i32;
        let mut found = false;
        for c in ty.chars() {
            match c {
                '{' | '(' | '[' | '<' => depth += 1,
                '}' | ')' | ']' | '>' => depth -= 1,
                '|' | '&' if depth == 0 => found = true,
                _ => {}
            }
        }
        found
    };
    if depth_zero_operator {
        format!("({ty})")
    } else {
        ty.to_owned()
    }
}

/// A property name as TypeScript writes it: bare when it is an identifier, else quoted.
fn key(name: &str) -> String {
    if super::naming::is_identifier(name) {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

fn pascal(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn unescape(part: &str) -> String {
    part.replace("~1", "/").replace("~0", "~")
}
