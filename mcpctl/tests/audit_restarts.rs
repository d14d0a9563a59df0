//! End to end through the `mcpctl` binary: the audit model's log truncated and replaced while
//! `mcpctl proxy` writes it (a warning, restart records, `mcpctl audit verify` reporting them),
//! its anchor catching a cut tail, and tampering still found.

#[path = "support/home.rs"]
mod home;
mod support;

use std::path::Path;
use std::time::Instant;

use home::{Home, Run};
use serde_json::{Value, json};
use support::{Client, WAIT};

const KEY_VAR: &str = "MCPCTL_TEST_AUDIT_RESTART_KEY";
const KEY: &str = "a key for the restart tests";

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until the log holds `n` lines: the model writes a record just after the answer went
/// out, so a test that has its answer waits for the record.
fn wait_for_lines(log: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let now = lines(log);
        if now.len() >= n {
            assert_eq!(now.len(), n, "{now:#?}");
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the log did not reach {n} lines: {now:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn verify(home: &Home, log: &Path, anchor: Option<&Path>) -> Run {
    let log = log.display().to_string();
    let mut args = vec!["audit", "verify", &log, "--key-env", KEY_VAR];
    let anchor = anchor.map(|a| a.display().to_string());
    if let Some(anchor) = &anchor {
        args.extend(["--anchor", anchor]);
    }
    Run::from(
        home.command(&args)
            .env(KEY_VAR, KEY)
            .output()
            .expect("mcpctl runs"),
    )
}

fn call(client: &mut Client, id: u64) {
    let answer = client.request(
        json!(id),
        "tools/call",
        json!({"name": "t", "arguments": {}}),
    );
    assert!(answer.get("result").is_some(), "{answer}");
}

#[test]
fn a_log_truncated_and_replaced_while_the_proxy_runs_restarts_and_verify_reports_it() {
    let home = Home::new();
    let log = home.path.join("audit.log");
    let anchor = home.path.join("anchors/audit.anchor");
    std::fs::create_dir_all(anchor.parent().unwrap()).unwrap();
    let sets = [
        format!("audit.path={}", log.display()),
        format!("audit.keyEnv={KEY_VAR}"),
        format!("audit.anchorPath={}", anchor.display()),
    ];
    let mut args = vec!["--model", "audit"];
    for set in &sets {
        args.extend(["--set", set]);
    }
    let mut client = Client::scripted(&args, &[(KEY_VAR, KEY), ("MCPCTL_LOG", "warn")]);
    client.initialize();
    for id in 1..=3 {
        call(&mut client, id);
    }
    let written = wait_for_lines(&log, 4);
    let record: Value = serde_json::from_str(&written[1]).unwrap();
    let user = record["identity"].as_str().unwrap().to_owned();
    assert_eq!(record["principal"], format!("local:{user}"), "{record}");
    let head: Value = serde_json::from_str(&written[3]).unwrap();

    // Cut back to a valid prefix of two records: alone, it would verify as intact.
    std::fs::write(&log, written[..2].join("\n") + "\n").unwrap();
    call(&mut client, 4);
    let after = wait_for_lines(&log, 4);
    let restart: Value = serde_json::from_str(&after[2]).unwrap();
    assert_eq!(restart["event"], "restart", "{restart}");
    assert_eq!(restart["seq"], 3);
    assert_eq!(restart["previousSeq"], head["seq"]);
    assert_eq!(restart["previousMac"], head["mac"]);

    // Replaced: a new file renamed over the log, holding its first record only.
    let head: Value = serde_json::from_str(&after[3]).unwrap();
    let replacement = home.path.join("replacement.log");
    std::fs::write(&replacement, after[0].clone() + "\n").unwrap();
    std::fs::rename(&replacement, &log).unwrap();
    call(&mut client, 5);
    let after = wait_for_lines(&log, 3);
    let restart: Value = serde_json::from_str(&after[1]).unwrap();
    assert_eq!(restart["event"], "restart", "{restart}");
    assert_eq!(restart["previousSeq"], head["seq"]);
    let (status, stderr) = client.close_with_stderr();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("audit: the log was truncated while this proxy wrote it"),
        "{stderr}"
    );
    assert!(stderr.contains("audit: the log was replaced"), "{stderr}");
    assert!(!stderr.contains(KEY), "{stderr}");

    // The log verifies, and every restart is reported; the anchor names its last record.
    let out = verify(&home, &log, Some(&anchor)).ok();
    assert!(out.contains("is intact: 3 record(s)"), "{out}");
    assert!(out.contains("it holds the record its anchor"), "{out}");
    assert!(
        out.contains("the chain restarted at line 2 (record 2): the log was replaced"),
        "{out}"
    );
    assert!(
        out.contains(&format!("the head before was record {}", head["seq"])),
        "{out}"
    );

    // The tail cut off: the chain alone still verifies; with the anchor it does not.
    let all = lines(&log);
    std::fs::write(&log, all[..2].join("\n") + "\n").unwrap();
    assert!(
        verify(&home, &log, None)
            .ok()
            .contains("is intact: 2 record(s)")
    );
    let err = verify(&home, &log, Some(&anchor)).fails(1);
    assert!(
        err.contains("is truncated: it ends at record 2")
            && err.contains("record 3 is missing from its end"),
        "{err}"
    );

    // A restart record altered (its previous head hidden) is tampering, found at its line.
    let mut forged = all.clone();
    forged[1] = forged[1].replacen("\"previousSeq\":", "\"previousSeq\":1", 1);
    std::fs::write(&log, forged.join("\n") + "\n").unwrap();
    let err = verify(&home, &log, None).fails(1);
    assert!(
        err.contains("is not intact at line 2") && err.contains("does not match its MAC"),
        "{err}"
    );
}

#[test]
fn a_proxy_starting_on_a_log_behind_its_anchor_restarts_the_chain() {
    let home = Home::new();
    let log = home.path.join("audit.log");
    let anchor = home.path.join("audit.anchor");
    let sets = [
        format!("audit.path={}", log.display()),
        format!("audit.keyEnv={KEY_VAR}"),
        format!("audit.anchorPath={}", anchor.display()),
    ];
    let mut args = vec!["--model", "audit"];
    for set in &sets {
        args.extend(["--set", set]);
    }
    let mut client = Client::scripted(&args, &[(KEY_VAR, KEY)]);
    client.initialize();
    call(&mut client, 1);
    let written = wait_for_lines(&log, 2);
    assert!(client.close().success());
    // Cut while no proxy runs.
    std::fs::write(&log, written[0].clone() + "\n").unwrap();
    let mut client = Client::scripted(&args, &[(KEY_VAR, KEY), ("MCPCTL_LOG", "warn")]);
    client.initialize();
    let after = wait_for_lines(&log, 3);
    let (_, stderr) = client.close_with_stderr();
    assert!(stderr.contains("not at the record its anchor"), "{stderr}");
    let restart: Value = serde_json::from_str(&after[1]).unwrap();
    assert_eq!(restart["event"], "restart", "{restart}");
    assert_eq!(restart["previousSeq"], 2);
    let out = verify(&home, &log, Some(&anchor)).ok();
    assert!(
        out.contains("the chain restarted at line 2 (record 2)"),
        "{out}"
    );
}
