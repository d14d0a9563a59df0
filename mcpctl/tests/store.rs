//! The project store, through the library and through `mcpctl apply|get|describe|delete|edit`
//! in a throwaway `$MCPCTL_HOME`.

#[path = "support/home.rs"]
mod home;

use std::sync::{Arc, Barrier};
use std::thread;

use home::Home;
use mcpctl::store::{Action, Kind, ProjectSpec, ServerSpec, Store, parse_documents};
use serde_json::json;

const BASE: &str = "\
kind: Server
metadata: {name: files}
spec:
  command: mcp-files
  args: [--root, /srv]
  env:
    API_TOKEN: ${env:FILES_TOKEN}
---
kind: Prompt
metadata: {name: style}
spec:
  tags: [style, review]
  content: Keep it short.
---
kind: Project
metadata: {name: demo}
spec:
  servers: [files]
  prompts: [style]
  proxyModel: gate
  alwaysVisible: [read_file]
";

#[test]
fn apply_get_describe_edit_delete_round_trip() {
    let home = Home::new();
    assert_eq!(
        home.apply(BASE),
        "server/files created\nprompt/style created\nproject/demo created\n"
    );
    assert_eq!(
        home.apply(BASE),
        "server/files unchanged\nprompt/style unchanged\nproject/demo unchanged\n"
    );
    let changed = BASE.replace("Keep it short.", "Keep it very short.");
    assert!(home.apply(&changed).contains("prompt/style configured"));

    // `get -o yaml` is what `apply` takes back, unchanged.
    let all = [
        home.run(&["get", "servers", "-o", "yaml"]).ok(),
        home.run(&["get", "prompts", "-o", "yaml"]).ok(),
        home.run(&["get", "projects", "-o", "yaml"]).ok(),
    ]
    .join("---\n");
    assert_eq!(
        home.apply(&all),
        "server/files unchanged\nprompt/style unchanged\nproject/demo unchanged\n"
    );

    let table = home.run(&["get", "projects"]).ok();
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("demo") && table.contains("gate"), "{table}");
    let listed = home.run(&["get", "servers", "-o", "json"]).json();
    assert_eq!(listed[0]["spec"]["args"], json!(["--root", "/srv"]));
    let one = home.run(&["get", "project", "demo", "-o", "json"]).json();
    assert_eq!(one["kind"], "Project");
    assert_eq!(one["spec"]["alwaysVisible"], json!(["read_file"]));

    let described = home.run(&["describe", "project", "demo"]).ok();
    assert!(
        described.contains("Proxy model:         gate"),
        "{described}"
    );
    assert!(
        described.contains("alwaysVisible"),
        "merged into gate's config: {described}"
    );
    let described = home
        .run(&["describe", "project", "demo", "-o", "json"])
        .json();
    assert_eq!(
        described["status"]["effectiveConfig"]["gate"]["alwaysVisible"],
        json!(["read_file"])
    );
    let prompt = home.run(&["describe", "prompt", "style"]).ok();
    assert!(prompt.contains("Keep it very short.") && prompt.contains("Used by:  demo"));

    let edited = home
        .run(&[
            "edit",
            "project",
            "demo",
            "--proxyModel",
            "passthrough",
            "--set-config",
            "gate.promptBudgetBytes=2048",
            "--always-visible",
            "list_*",
            "--remove-prompt",
            "style",
        ])
        .ok();
    assert_eq!(edited, "project/demo configured\n");
    let project = home.run(&["get", "project", "demo", "-o", "json"]).json();
    assert_eq!(project["spec"]["proxyModel"], "passthrough");
    assert_eq!(project["spec"]["config"]["gate"]["promptBudgetBytes"], 2048);
    assert_eq!(
        project["spec"]["alwaysVisible"],
        json!(["read_file", "list_*"])
    );
    assert!(project["spec"].get("prompts").is_none(), "{project}");

    assert_eq!(
        home.run(&["delete", "prompt", "style"]).ok(),
        "prompt/style deleted\n"
    );
    // A server a project names stays.
    let err = home.run(&["delete", "server", "files"]).fails(1);
    assert!(
        err.contains("server `files` is used by project `demo`"),
        "{err}"
    );
    home.run(&["delete", "project", "demo"]).ok();
    home.run(&["delete", "server", "files"]).ok();
    let err = home.run(&["describe", "project", "demo"]).fails(3);
    assert_eq!(
        err,
        "mcpctl: project `demo` not found (`mcpctl get projects` lists them)\n"
    );
    home.run(&["delete", "server", "files"]).fails(3);
    home.run(&["edit", "project", "demo", "--add-server", "x"])
        .fails(3);
    assert_eq!(
        home.files(),
        vec![".lock", "revision"],
        "nothing left but the lock and the revision"
    );
}

#[test]
fn a_bad_file_names_file_line_and_field_in_one_sentence() {
    let home = Home::new();
    let path = home.write(
        "in.yaml",
        "kind: Server\nmetadata: {name: s}\nspec:\n  command: x\n---\nkind: Project\nmetadata:\n  name: p\nspec:\n  servers: s\n",
    );
    let err = home.run(&["apply", "-f", path.to_str().unwrap()]).fails(1);
    assert_eq!(
        err,
        format!(
            "mcpctl: {}, line 10, column 12, field `spec.servers`: invalid type: string \"s\", expected a sequence\n",
            path.display()
        )
    );
    // A misspelt field, and a file hand-edited inside the store.
    home.write(
        "projects/p.yaml",
        "kind: Project\nmetadata: {name: p}\nspec:\n  proxymodel: gate\n",
    );
    let err = home.run(&["get", "projects"]).fails(1);
    assert!(
        err.contains(
            "projects/p.yaml, line 4, column 3, field `spec.proxymodel`: unknown field `proxymodel`"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // A file whose name is not its resource's.
    home.write(
        "projects/p.yaml",
        "kind: Project\nmetadata: {name: q}\nspec: {}\n",
    );
    let err = home.run(&["get", "projects"]).fails(1);
    assert!(err.contains("holds project `q`"), "{err}");
    // Nothing in the bad apply was written.
    home.run(&["get", "server", "s"]).fails(3);
}

#[test]
fn references_and_models_are_checked_on_apply() {
    let home = Home::new();
    let err = home
        .run_with_stdin(
            &["apply", "-f", "-"],
            "kind: Project\nmetadata: {name: p}\nspec: {servers: [ghost]}\n",
        )
        .fails(1);
    assert!(
        err.contains("project `p` names server `ghost`, which does not exist"),
        "{err}"
    );
    let err = home
        .run_with_stdin(
            &["apply", "-f", "-"],
            "kind: Project\nmetadata: {name: p}\nspec: {proxyModel: nope}\n",
        )
        .fails(1);
    assert!(
        err.contains("uses proxy model `nope`, which this binary does not have"),
        "{err}"
    );
    assert!(
        err.contains("passthrough"),
        "names the models that exist: {err}"
    );
    let err = home
        .run_with_stdin(
            &["apply", "-f", "-"],
            "kind: Project\nmetadata: {name: p}\nspec: {proxyModel: gate, config: {gate: {budget: 1}}}\n",
        )
        .fails(1);
    assert!(err.contains("`gate`, field `budget`"), "{err}");
    let err = home
        .run_with_stdin(
            &["apply", "-f", "-"],
            "kind: Prompt\nmetadata: {name: a}\nspec: {content: x}\n---\nkind: Prompt\nmetadata: {name: a}\nspec: {content: y}\n",
        )
        .fails(1);
    assert!(err.contains("prompt `a` is given twice"), "{err}");
    assert_eq!(
        home.files(),
        vec![".lock"],
        "a refused apply writes nothing"
    );
}

#[test]
fn gated_true_loads_as_default_with_a_warning_and_conflicts_with_another_model() {
    let home = Home::new();
    home.write(
        "projects/old.yaml",
        "kind: Project\nmetadata: {name: old}\nspec:\n  gated: true\n",
    );
    let run = home.run(&["get", "project", "old", "-o", "json"]);
    let stderr = run.stderr.clone();
    let project = run.json();
    assert_eq!(project["spec"]["proxyModel"], "default");
    assert!(project["spec"].get("gated").is_none(), "{project}");
    assert!(
        stderr.contains("`gated: true`, which is deprecated")
            && stderr.contains("`proxyModel: default`"),
        "{stderr}"
    );

    // Applying it needs `default` (gate + paginate) in the binary; without it, the error says
    // where the name came from.
    let applied = home.run_with_stdin(
        &["apply", "-f", "-"],
        "kind: Project\nmetadata: {name: new}\nspec:\n  gated: true\n",
    );
    if mcp_middleware_models::all().contains(&"default") {
        assert_eq!(applied.ok(), "project/new created\n");
        let described = home
            .run(&["describe", "project", "new", "-o", "json"])
            .json();
        assert_eq!(described["spec"]["proxyModel"], "default");
        let chain = described["status"]["chain"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(chain.contains(&json!("gate")), "{described}");
    } else {
        let err = applied.fails(1);
        assert!(
            err.contains("proxy model `default` (from `gated: true`)"),
            "{err}"
        );
    }

    let err = home
        .run_with_stdin(
            &["apply", "-f", "-"],
            "kind: Project\nmetadata: {name: p}\nspec:\n  gated: true\n  proxyModel: gate\n",
        )
        .fails(1);
    assert!(
        err.contains("<stdin>, line 4, column 3, field `spec`: `gated: true` cannot be combined with `proxyModel: gate`"),
        "{err}"
    );
}

#[test]
fn describe_server_shows_env_references_never_their_values() {
    let home = Home::new();
    home.apply(BASE);
    for output in ["table", "yaml", "json"] {
        let out = home
            .command(&["describe", "server", "files", "-o", output])
            .env("FILES_TOKEN", "hunter2-secret")
            .output()
            .expect("mcpctl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success());
        assert!(text.contains("${env:FILES_TOKEN}"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
    let stored = std::fs::read_to_string(home.path.join("servers/files.yaml")).unwrap();
    assert!(stored.contains("${env:FILES_TOKEN}"), "{stored}");
}

#[test]
fn concurrent_writers_lose_nothing() {
    let home = Home::new();
    let store = Store::new(&home.path);
    store
        .apply(parse_documents("base", "kind: Project\nmetadata: {name: p}\nspec: {}\n").unwrap())
        .unwrap();
    const THREADS: usize = 8;
    let barrier = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|i| {
            let store = store.clone();
            let barrier = barrier.clone();
            thread::spawn(move || {
                let text =
                    format!("kind: Server\nmetadata: {{name: s{i}}}\nspec: {{command: x}}\n");
                barrier.wait();
                store.apply(parse_documents("t", &text).unwrap()).unwrap();
                store
                    .update::<ProjectSpec>("p", |spec| {
                        spec.servers.push(format!("s{i}"));
                        Ok(())
                    })
                    .unwrap();
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    assert_eq!(store.list::<ServerSpec>().unwrap().len(), THREADS);
    let mut servers = store.get::<ProjectSpec>("p").unwrap().spec.servers;
    servers.sort();
    let mut expected: Vec<String> = (0..THREADS).map(|i| format!("s{i}")).collect();
    expected.sort();
    assert_eq!(servers, expected, "every thread's edit landed");

    // Processes too: each adds a prompt and then edits the project.
    let children: Vec<_> = (0..6)
        .map(|i| {
            let script = format!("kind: Prompt\nmetadata: {{name: q{i}}}\nspec: {{content: x}}\n");
            let path = home.write(&format!("in/q{i}.yaml"), &script);
            home.command(&["apply", "-f", path.to_str().unwrap()])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let children: Vec<_> = (0..6)
        .map(|i| {
            home.command(&["edit", "project", "p", "--add-prompt", &format!("q{i}")])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(store.get::<ProjectSpec>("p").unwrap().spec.prompts.len(), 6);
    assert!(
        !home.files().iter().any(|f| f.contains(".tmp-")),
        "no temporary file is left: {:?}",
        home.files()
    );
}

#[test]
fn writes_are_atomic_and_a_killed_writers_leftovers_are_swept() {
    let home = Home::new();
    let store = Store::new(&home.path);
    let applied = store
        .apply(
            parse_documents(
                "t",
                "kind: Server\nmetadata: {name: a}\nspec: {command: x}\n",
            )
            .unwrap(),
        )
        .unwrap();
    assert_eq!(applied[0].action, Action::Created);
    assert_eq!(applied[0].kind, Kind::Server);
    // What a writer killed between writing and renaming leaves behind.
    home.write("servers/.a.yaml.tmp-999-0", "kind: Serv");
    assert_eq!(
        store.list::<ServerSpec>().unwrap().len(),
        1,
        "ignored by readers"
    );
    store
        .apply(
            parse_documents(
                "t",
                "kind: Server\nmetadata: {name: b}\nspec: {command: y}\n",
            )
            .unwrap(),
        )
        .unwrap();
    assert_eq!(
        home.files(),
        vec![".lock", "revision", "servers/a.yaml", "servers/b.yaml"],
        "the next writer removed it"
    );
}

#[test]
fn edit_without_flags_opens_the_editor_and_applies_the_result() {
    let home = Home::new();
    home.apply(BASE);
    let out = home
        .command(&["edit", "prompt", "style"])
        .env_remove("VISUAL")
        .env("EDITOR", "sed -i s/Keep/Make/")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "prompt/style configured\n"
    );
    let prompt = home.run(&["get", "prompt", "style", "-o", "json"]).json();
    assert_eq!(prompt["spec"]["content"], "Make it short.");
    // Renaming in the editor is refused.
    let out = home
        .command(&["edit", "prompt", "style"])
        .env_remove("VISUAL")
        .env("EDITOR", "sed -i s/name:.style/name:\\ other/")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must hold prompt `style` alone"));
}
