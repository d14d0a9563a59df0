//! End to end: what an upstream child's environment holds, read back through
//! server-everything's `get-env` tool, called through `mcpctl client` (which runs `mcpctl proxy`
//! as its child) for a project and for an ad-hoc command.

#[path = "support/home.rs"]
mod home;

use std::collections::BTreeMap;
use std::path::PathBuf;

use home::{Home, Run};

const AUDIT_VAR: &str = "MCPCTL_TEST_CHILD_ENV_AUDIT_KEY";
const AUDIT_KEY: &str = "the audit key, for the proxy only";
const SECRET_VAR: &str = "MCPCTL_TEST_CHILD_ENV_SECRET";
const SECRET: &str = "a secret the proxy's environment holds";

fn everything() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// The environment `get-env` printed, from `mcpctl client ... tools call get-env`'s output.
fn child_env(run: Run) -> BTreeMap<String, String> {
    let text = run.ok();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not get-env's JSON ({e}): {text}"))
}

/// `mcpctl ARGS` with the audit key, an unrelated secret and ordinary variables set.
fn run(home: &Home, args: &[&str]) -> Run {
    Run::from(
        home.command(args)
            .env(AUDIT_VAR, AUDIT_KEY)
            .env(SECRET_VAR, SECRET)
            .env("MCPCTL_TEST_ORDINARY", "ordinary")
            .env("MCPCTL_TEST_REF_SOURCE", "resolved by the proxy")
            .env("MCPCTL_TEST_INHERITED", "inherited by name")
            .output()
            .expect("mcpctl runs"),
    )
}

fn project(home: &Home, inherit: &str) -> String {
    let log = home.path.join("audit.log");
    format!(
        "kind: Server\nmetadata: {{name: everything}}\nspec:\n  command: node\n  args: ['{}', stdio]\n  env:\n    DECLARED: plain\n    FROM_REF: '${{env:MCPCTL_TEST_REF_SOURCE}}'\n  inheritEnv: [{inherit}]\n---\nkind: Project\nmetadata: {{name: envp}}\nspec:\n  servers: [everything]\n  proxyModel: audit\n  config:\n    audit: {{path: '{}', keyEnv: {AUDIT_VAR}}}\n",
        everything(),
        log.display()
    )
}

#[test]
fn a_projects_server_gets_the_sdk_defaults_its_env_and_inherit_env_only() {
    let home = Home::new();
    home.apply(&project(&home, "MCPCTL_TEST_INHERITED"));
    let env = child_env(run(&home, &["client", "envp", "tools", "call", "get-env"]));
    assert_eq!(env.get("DECLARED").map(String::as_str), Some("plain"));
    assert_eq!(
        env.get("FROM_REF").map(String::as_str),
        Some("resolved by the proxy")
    );
    assert_eq!(
        env.get("MCPCTL_TEST_INHERITED").map(String::as_str),
        Some("inherited by name")
    );
    for name in ["PATH", "HOME"] {
        assert_eq!(
            env.get(name),
            std::env::var(name).ok().as_ref(),
            "{name}: {env:?}"
        );
    }
    let allowed = [
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "DECLARED",
        "FROM_REF",
        "MCPCTL_TEST_INHERITED",
    ];
    let extra: Vec<&String> = env
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "variables the child was not given: {extra:?}"
    );
    let all = format!("{env:?}");
    assert!(!all.contains(SECRET) && !all.contains(AUDIT_KEY), "{all}");

    let described = home.run(&["describe", "server", "everything"]).ok();
    assert!(
        described.contains("Inherits:   HOME, LOGNAME, PATH, SHELL, TERM, USER (the SDK default set), and MCPCTL_TEST_INHERITED (inheritEnv)"),
        "{described}"
    );
    let yaml = home
        .run(&["describe", "server", "everything", "-o", "yaml"])
        .ok();
    assert!(
        yaml.contains("inheritEnv:\n  - MCPCTL_TEST_INHERITED"),
        "{yaml}"
    );
}

#[test]
fn inherit_env_cannot_name_the_audit_key_and_is_checked_at_apply() {
    let home = Home::new();
    home.apply(&project(&home, AUDIT_VAR));
    let err = run(&home, &["client", "envp", "tools", "call", "get-env"]).fails(1);
    assert!(
        err.contains(&format!("lists `{AUDIT_VAR}` in `inheritEnv`"))
            && err.contains("`audit`'s `keyEnv` key"),
        "{err}"
    );
    assert!(!err.contains(AUDIT_KEY), "{err}");

    let bad = "kind: Server\nmetadata: {name: bad}\nspec:\n  command: node\n  inheritEnv: [OK, 'NOT=OK']\n";
    let err = home.run_with_stdin(&["apply", "-f", "-"], bad).fails(1);
    assert!(
        err.contains("`inheritEnv` entry `NOT=OK` is not an environment variable name"),
        "{err}"
    );
    let http = "kind: Server\nmetadata: {name: bad}\nspec:\n  url: http://127.0.0.1:1/mcp\n  inheritEnv: [OK]\n";
    let err = home.run_with_stdin(&["apply", "-f", "-"], http).fails(1);
    assert!(err.contains("`inheritEnv` is for stdio servers"), "{err}");
}

#[test]
fn an_ad_hoc_command_inherits_the_environment_but_not_the_audit_key() {
    let home = Home::new();
    let log = home.path.join("adhoc.log").display().to_string();
    let path = format!("audit.path={log}");
    let key_env = format!("audit.keyEnv={AUDIT_VAR}");
    let everything = everything();
    let env = child_env(run(
        &home,
        &[
            "client",
            "--model",
            "audit",
            "--set",
            &path,
            "--set",
            &key_env,
            "tools",
            "call",
            "get-env",
            "--",
            "node",
            &everything,
            "stdio",
        ],
    ));
    assert_eq!(
        env.get("MCPCTL_TEST_ORDINARY").map(String::as_str),
        Some("ordinary")
    );
    assert_eq!(env.get(SECRET_VAR).map(String::as_str), Some(SECRET));
    assert!(!env.contains_key(AUDIT_VAR), "{env:?}");
    assert!(!format!("{env:?}").contains(AUDIT_KEY));
}
