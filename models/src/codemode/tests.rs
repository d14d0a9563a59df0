//! Unit tests of the naming rules, TypeScript from JSON Schema, the ranking, the stripper and
//! the sandbox on its own.

use std::sync::Arc;

use mcp_middleware::Project;
use mcp_middleware::types::{JsonObject, Tool};
use serde_json::{Value, json};

use super::catalog::Catalog;
use super::{declare, naming, script, search};

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    Tool::new(
        name.to_owned(),
        description.to_owned(),
        Arc::new(object(schema)),
    )
}

fn everything() -> Vec<Tool> {
    vec![
        tool(
            "echo",
            "Echoes back the input string",
            json!({"type": "object", "properties": {"message": {"type": "string", "description": "Message to echo"}}, "required": ["message"]}),
        ),
        tool(
            "get-sum",
            "Returns the sum of two numbers",
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        ),
        tool(
            "get-env",
            "Returns all environment variables",
            json!({"type": "object", "properties": {}}),
        ),
        tool(
            "getSum",
            "A tool whose name is already the method of get-sum",
            json!({"type": "object"}),
        ),
    ]
}

#[test]
fn namespaces_are_identifiers() {
    assert_eq!(naming::namespace("everything"), "everything");
    assert_eq!(naming::namespace("my-server.v2"), "my_server_v2");
    assert_eq!(naming::namespace("2fa"), "_2fa");
    assert_eq!(naming::namespace("console"), "console_");
    assert_eq!(naming::namespace("proxy"), "proxy_");
    assert_eq!(naming::namespace("class"), "class_");
}

#[test]
fn methods_are_camel_case_and_collisions_resolve_by_name() {
    assert_eq!(naming::method("get-sum"), "getSum");
    assert_eq!(naming::method("list.files"), "listFiles");
    assert_eq!(naming::method("get_sum"), "get_sum");
    assert_eq!(naming::method("3d-render"), "_3dRender");
    assert_eq!(
        naming::method("delete"),
        "delete",
        "reserved words are fine after a dot"
    );
    // `getSum` already is its identifier, so it keeps it; then by name (" " sorts before "-").
    let names = ["get-sum", "getSum", "get sum"];
    assert_eq!(
        naming::assign(&names, naming::method),
        ["getSum_3", "getSum", "getSum_2"]
    );
}

#[test]
fn an_ad_hoc_server_is_upstream_and_a_project_splits_by_prefix() {
    let catalog = Catalog::build(&everything(), None, &[]);
    assert_eq!(catalog.namespaces.len(), 1);
    assert_eq!(catalog.namespaces[0].name, "upstream");
    let sum = catalog
        .find("upstream", "get-sum")
        .expect("by original name");
    assert_eq!(sum.method, "getSum_2");
    assert_eq!(
        catalog
            .find_qualified("upstream[\"get-sum\"]")
            .map(|e| &e.listed),
        Some(&"get-sum".to_owned())
    );

    let mut project = Project::new("p");
    project.servers = vec!["everything".into(), "files-2".into()];
    project.separator = Some("__".into());
    let tools = vec![
        tool("everything__echo", "Echo", json!({"type": "object"})),
        tool(
            "files-2__read-file",
            "Read a file",
            json!({"type": "object"}),
        ),
        tool("read_page", "Next page", json!({"type": "object"})),
    ];
    let catalog = Catalog::build(&tools, Some(&project), &["read_page"]);
    let names: Vec<&str> = catalog.namespaces.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["everything", "files_2", "proxy"]);
    let read = catalog
        .find("files_2", "readFile")
        .expect("split by prefix");
    assert_eq!(
        (read.original.as_str(), read.listed.as_str()),
        ("read-file", "files-2__read-file")
    );
    assert!(catalog.find("proxy", "read_page").is_some());
}

#[test]
fn schemas_become_typescript() {
    let schema = json!({
        "type": "object",
        "description": "root",
        "properties": {
            "mode": {"enum": ["fast", "slow"], "description": "How fast"},
            "count": {"type": ["integer", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "either": {"oneOf": [{"type": "string"}, {"$ref": "#/$defs/point"}]},
            "maybe": {"type": "string", "nullable": true},
            "extra": {"type": "object", "additionalProperties": {"type": "number"}},
            "weird-key": {"const": 3}
        },
        "required": ["mode"],
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}
    });
    let catalog = Catalog::build(&[tool("shape", "Makes a shape", schema)], None, &[]);
    let entry = catalog.find("upstream", "shape").expect("listed");
    let declaration = declare::declaration(entry);
    for expected in [
        "type ShapePoint = {",
        "/** How fast */",
        "mode: \"fast\" | \"slow\";",
        "count?: number | null;",
        "tags?: string[];",
        "either?: string | ShapePoint;",
        "maybe?: string | null;",
        "extra?: {",
        "[key: string]: number;",
        "\"weird-key\"?: 3;",
        "function shape(args: {",
        "Promise<string>",
    ] {
        assert!(
            declaration.contains(expected),
            "{expected:?} missing in\n{declaration}"
        );
    }
    let signature = declare::signature(entry);
    assert!(
        signature.starts_with(
            "upstream.shape(args: { mode: \"fast\" | \"slow\"; count?: number | null;"
        ),
        "{signature}"
    );
    assert!(
        signature.contains("either?: string | { x: number };"),
        "{signature}"
    );
    assert!(signature.ends_with("}): string"), "{signature}");

    let mut with_output = tool("out", "Has an output schema", json!({"type": "object"}));
    with_output.output_schema = Some(Arc::new(object(
        json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}),
    )));
    let catalog = Catalog::build(&[with_output], None, &[]);
    let entry = catalog.find("upstream", "out").expect("listed");
    assert_eq!(
        declare::signature(entry),
        "upstream.out(args?: {}): { sum: number }"
    );
    assert!(
        declare::declaration(entry).contains("): Promise<{\n"),
        "{}",
        declare::declaration(entry)
    );
}

#[test]
fn search_ranks_names_over_descriptions() {
    let catalog = Catalog::build(&everything(), None, &[]);
    let ranked = search::search(&catalog, "echo", 10);
    assert_eq!(ranked[0].1.original, "echo");
    let ranked = search::search(&catalog, "sum two numbers", 2);
    assert_eq!(
        ranked[0].1.original,
        "get-sum",
        "{:?}",
        ranked.iter().map(|r| &r.1.original).collect::<Vec<_>>()
    );
    assert_eq!(ranked.len(), 2);
    assert!(search::search(&catalog, "zebra", 10).is_empty());
    assert_eq!(
        search::words("getSum get-env HTTPServer"),
        ["get", "sum", "get", "env", "httpserver"]
    );
}

#[test]
fn the_stripper_maps_positions_back_and_checks_references() {
    let catalog = Catalog::build(&everything(), None, &[]);
    let source = "const x: number = 1;\ninterface A { b: string }\nreturn await upstream.echo({ message: String(x) });";
    let prepared = script::Script::prepare(source, &catalog).expect("valid");
    assert!(!prepared.js.contains("interface"), "{}", prepared.js);
    assert!(!prepared.js.contains(": number"), "{}", prepared.js);

    let error = script::Script::prepare("\nconst y = ;", &catalog).expect_err("syntax");
    assert!(
        error.0.starts_with("SyntaxError at line 2, column"),
        "{}",
        error.0
    );
    let error = script::Script::prepare("await upstream.ehco({});", &catalog).expect_err("unknown");
    assert!(
        error
            .0
            .contains("did you mean:\n  upstream.echo(args: { message: string }): string"),
        "{}",
        error.0
    );
    let error = script::Script::prepare("import x from 'y';", &catalog).expect_err("modules");
    assert!(
        error.0.contains("`import` and `export` are not available"),
        "{}",
        error.0
    );
    // A local variable shadowing a namespace is not a namespace reference.
    assert!(
        script::Script::prepare("const upstream = { x: 1 }; return upstream.x;", &catalog).is_ok()
    );
    // An unknown global used as an object is checked in the sandbox, where it might exist.
    let prepared = script::Script::prepare(
        "return Math.max(1, 2) + JSON.stringify(upstrem.x);",
        &catalog,
    )
    .expect("deferred");
    let names: Vec<&str> = prepared
        .unknown_globals
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["Math", "JSON", "upstrem"]);
}

#[test]
fn checker_output_is_read_into_diagnostics() {
    let output = "snippet.ts(12,7): error TS2322: Type 'string' is not assignable to type 'number'.\n  \
                  More detail.\nother.ts(1,1): error TS1: elsewhere\n";
    let found = super::typecheck::parse(output);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].line, found[0].column, found[0].code.as_str()),
        (12, 7, "TS2322")
    );
    assert!(
        found[0].message.ends_with("'number'.\nMore detail."),
        "{}",
        found[0].message
    );
    assert!(super::typecheck::Checker::find("off").is_none());
}
