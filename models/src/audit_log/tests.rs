//! The log's chain, restarts and anchors, written and checked in process.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use super::*;

#[test]
fn hmac_sha256_matches_rfc_4231() {
    // The `hmac` crate under the log's key type: the published vectors.
    // Test case 2.
    let key = AuditKey::new("Jefe").unwrap();
    assert_eq!(
        key.mac(b"what do ya want for nothing?"),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    // Test case 6: a key longer than the block is hashed first.
    let key = AuditKey::new([0xaa; 131]).unwrap();
    assert_eq!(
        key.mac(b"Test Using Larger Than Block-Size Key - Hash Key First"),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
}

#[test]
fn times_are_rfc_3339_utc() {
    let at = |secs: u64, millis: u64| {
        rfc3339(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis))
    };
    assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
    assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.007Z");
    assert_eq!(at(1_796_000_000, 999), "2026-11-30T00:53:20.999Z");
}

fn temp_log(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("audit-log-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

fn write(path: &Path, key: &AuditKey, methods: &[&str]) {
    let mut writer = Writer::open(path, key, None).unwrap();
    for method in methods {
        writer
            .append(key, |seq, prev| {
                serde_json::to_string(&Record {
                    seq,
                    time: "2026-11-30T00:00:00.000Z",
                    session: "s",
                    identity: "alice",
                    principal: "local:alice",
                    method,
                    target: None,
                    outcome: "ok",
                    duration_ms: 0.5,
                    error: None,
                    arguments: None,
                    prev,
                })
            })
            .unwrap();
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn broken_at(path: &Path, key: &AuditKey) -> (u64, String) {
    match verify(path, key).unwrap() {
        Verdict::Broken { line, reason } => (line, reason),
        intact => panic!("expected a broken log, got {intact:?}"),
    }
}

#[test]
fn the_chain_survives_restarts_and_breaks_where_the_log_was_touched() {
    let key = AuditKey::new("k3y").unwrap();
    let path = temp_log("chain.log");
    write(&path, &key, &["a", "b"]);
    write(&path, &key, &["c", "d", "e"]); // a restart continues the chain
    let Verdict::Intact {
        records, last_mac, ..
    } = verify(&path, &key).unwrap()
    else {
        panic!("intact")
    };
    assert_eq!(records, 5);
    assert!(lines(&path)[4].ends_with(&format!("\"mac\":\"{}\"}}", last_mac.unwrap())));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let original = lines(&path);
    let rewrite = |lines: &[String]| {
        let tampered = temp_log("tampered.log");
        std::fs::write(&tampered, lines.join("\n") + "\n").unwrap();
        tampered
    };

    let mut edited = original.clone();
    edited[2] = edited[2].replace("\"method\":\"c\"", "\"method\":\"x\"");
    let (line, reason) = broken_at(&rewrite(&edited), &key);
    assert_eq!(line, 3);
    assert!(reason.contains("does not match its MAC"), "{reason}");

    let mut removed = original.clone();
    removed.remove(1);
    let (line, reason) = broken_at(&rewrite(&removed), &key);
    assert_eq!(line, 2);
    assert!(
        reason.contains("record 3, but record 2 was expected"),
        "{reason}"
    );

    let mut reordered = original.clone();
    reordered.swap(3, 4);
    let (line, reason) = broken_at(&rewrite(&reordered), &key);
    assert_eq!(line, 4);
    assert!(reason.contains("removed or reordered"), "{reason}");

    let mut repeated = original.clone();
    repeated.insert(3, original[1].clone());
    let (line, reason) = broken_at(&rewrite(&repeated), &key);
    assert_eq!(line, 4);
    assert!(reason.contains("reordered or repeated"), "{reason}");

    let mut first_gone = original.clone();
    first_gone.remove(0);
    assert_eq!(broken_at(&rewrite(&first_gone), &key).0, 1);

    let (line, reason) = broken_at(&path, &AuditKey::new("other").unwrap());
    assert_eq!(line, 1);
    assert!(reason.contains("not the key"), "{reason}");
}

#[test]
fn a_line_cut_short_is_closed_and_reported_and_another_key_is_refused() {
    let key = AuditKey::new("k3y").unwrap();
    let path = temp_log("cut.log");
    write(&path, &key, &["a", "b"]);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"{\"seq\":3,\"ti").unwrap();
    assert_eq!(broken_at(&path, &key).0, 3);
    write(&path, &key, &["c"]);
    let all = lines(&path);
    assert_eq!(all.len(), 4);
    assert!(all[3].starts_with("{\"seq\":3,"), "{}", all[3]);
    assert_eq!(broken_at(&path, &key).0, 3);

    let fresh = temp_log("keyed.log");
    write(&fresh, &key, &["a"]);
    let refused = Writer::open(&fresh, &AuditKey::new("other").unwrap(), None)
        .err()
        .unwrap()
        .to_string();
    assert!(refused.contains("another key"), "{refused}");
}

fn append_minimal(writer: &mut Writer, key: &AuditKey) {
    writer
        .append(key, |seq, prev| {
            Ok(format!(r#"{{"seq":{seq},"prev":"{prev}"}}"#))
        })
        .unwrap()
}

fn restarts(path: &Path, key: &AuditKey) -> (u64, Vec<Restart>) {
    match verify(path, key).unwrap() {
        Verdict::Intact {
            records, restarts, ..
        } => (records, restarts),
        broken => panic!("expected an intact log: {broken:?}"),
    }
}

fn head(path: &Path) -> (u64, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    (
        last["seq"].as_u64().unwrap(),
        last["mac"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn a_rotated_log_starts_a_new_chain_that_names_the_old_head() {
    let key = AuditKey::new("k3y").unwrap();
    let path = temp_log("rotated.log");
    let rotated = temp_log("rotated.log.1");
    let mut writer = Writer::open(&path, &key, None).unwrap();
    append_minimal(&mut writer, &key);
    append_minimal(&mut writer, &key);
    let old_head = head(&path);
    std::fs::rename(&path, &rotated).unwrap();
    append_minimal(&mut writer, &key);
    assert_eq!(restarts(&rotated, &key), (2, vec![]));
    let (records, found) = restarts(&path, &key);
    assert_eq!(records, 2, "a restart record, then the record");
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].line, found[0].seq), (1, 1));
    assert_eq!(
        (found[0].previous_seq, found[0].previous_mac.clone()),
        old_head
    );
    assert!(found[0].reason.contains("rotated"), "{}", found[0].reason);
}

#[test]
fn a_log_truncated_or_emptied_while_written_restarts_with_the_previous_head() {
    let key = AuditKey::new("k3y").unwrap();
    let path = temp_log("truncated.log");
    let mut writer = Writer::open(&path, &key, None).unwrap();
    for _ in 0..4 {
        append_minimal(&mut writer, &key);
    }
    let before = lines(&path);
    let old_head = head(&path);
    // Cut back to two whole records: a valid prefix, which alone would verify as intact.
    std::fs::write(&path, before[..2].join("\n") + "\n").unwrap();
    append_minimal(&mut writer, &key);
    let after = lines(&path);
    assert_eq!(after.len(), 4, "{after:?}");
    let (records, found) = restarts(&path, &key);
    assert_eq!(records, 4);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].line, found[0].seq), (3, 3));
    assert_eq!(
        (found[0].previous_seq, found[0].previous_mac.clone()),
        old_head
    );
    assert!(found[0].reason.contains("truncated"), "{}", found[0].reason);

    // Emptied: the restart record is the first of a new chain.
    let old_head = head(&path);
    std::fs::write(&path, "").unwrap();
    append_minimal(&mut writer, &key);
    let (records, found) = restarts(&path, &key);
    assert_eq!(records, 2);
    assert_eq!(found[0].seq, 1);
    assert_eq!(found[0].previous_seq, old_head.0);
    assert!(found[0].reason.contains("emptied"), "{}", found[0].reason);

    // Nothing touched: no restart.
    append_minimal(&mut writer, &key);
    assert_eq!(restarts(&path, &key).1.len(), 1);
}

#[test]
fn a_log_replaced_in_place_by_another_valid_chain_restarts() {
    let key = AuditKey::new("k3y").unwrap();
    let path = temp_log("replaced.log");
    let other = temp_log("replaced-other.log");
    write(&other, &key, &["x", "y"]);
    let mut writer = Writer::open(&path, &key, None).unwrap();
    writer
        .append(&key, |seq, prev| {
            serde_json::to_string(&Record {
                seq,
                time: "2026-11-30T00:00:00.000Z",
                session: "s",
                identity: "alice",
                principal: "local:alice",
                method: "y",
                target: None,
                outcome: "ok",
                duration_ms: 0.5,
                error: None,
                arguments: None,
                prev,
            })
        })
        .unwrap();
    // `cp other.log path`: the same file, now holding another (longer) valid chain.
    std::fs::copy(&other, &path).unwrap();
    append_minimal(&mut writer, &key);
    let (records, found) = restarts(&path, &key);
    assert_eq!(records, 4);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].seq, 3);
    assert_eq!(found[0].previous_seq, 1);
    assert!(found[0].reason.contains("replaced"), "{}", found[0].reason);
}

#[test]
fn another_writer_appending_is_not_a_restart() {
    let key = AuditKey::new("k3y").unwrap();
    let path = temp_log("two-writers.log");
    let mut one = Writer::open(&path, &key, None).unwrap();
    let mut two = Writer::open(&path, &key, None).unwrap();
    for _ in 0..3 {
        append_minimal(&mut one, &key);
        append_minimal(&mut two, &key);
    }
    assert_eq!(restarts(&path, &key), (6, vec![]));
}

#[test]
fn an_anchor_detects_a_cut_tail_and_a_replaced_log() {
    let key = AuditKey::new("k3y").unwrap();
    let path = temp_log("anchored.log");
    let anchor_path = temp_log("anchored.anchor");
    let mut writer = Writer::open(&path, &key, Some(&anchor_path)).unwrap();
    for _ in 0..3 {
        append_minimal(&mut writer, &key);
    }
    let anchor = Anchor::read(&anchor_path).unwrap();
    assert_eq!((anchor.seq, anchor.mac.clone()), head(&path));
    assert!(matches!(
        verify_with_anchor(&path, &key, &anchor).unwrap(),
        Verdict::Intact { records: 3, .. }
    ));
    drop(writer);

    // The last record cut off while no writer runs: the chain alone still verifies.
    let all = lines(&path);
    std::fs::write(&path, all[..2].join("\n") + "\n").unwrap();
    assert!(matches!(
        verify(&path, &key).unwrap(),
        Verdict::Intact { .. }
    ));
    match verify_with_anchor(&path, &key, &anchor).unwrap() {
        Verdict::Truncated {
            records, last_seq, ..
        } => assert_eq!((records, last_seq), (2, 2)),
        other => panic!("expected a truncated log: {other:?}"),
    }

    // A different record 3 in its place.
    std::fs::write(&path, all[..2].join("\n") + "\n").unwrap();
    let mut other = Writer::open(&path, &key, None).unwrap();
    other
        .append(&key, |seq, prev| {
            Ok(format!(r#"{{"seq":{seq},"prev":"{prev}","x":1}}"#))
        })
        .unwrap();
    match verify_with_anchor(&path, &key, &anchor).unwrap() {
        Verdict::Broken { line, reason } => {
            assert_eq!(line, 3);
            assert!(
                reason.contains("not the record the anchor names"),
                "{reason}"
            );
        }
        other => panic!("expected a broken log: {other:?}"),
    }

    // A writer starting on a log behind its anchor restarts the chain, naming the anchor.
    std::fs::write(&path, all[..1].join("\n") + "\n").unwrap();
    let mut writer = Writer::open(&path, &key, Some(&anchor_path)).unwrap();
    append_minimal(&mut writer, &key);
    let (records, found) = restarts(&path, &key);
    assert_eq!(records, 3);
    assert_eq!((found[0].seq, found[0].previous_seq), (2, 3));
    assert_eq!(found[0].previous_mac, anchor.mac);
    assert!(found[0].reason.contains("anchor"), "{}", found[0].reason);
    assert_eq!(Anchor::read(&anchor_path).unwrap().seq, 3);
}

#[test]
fn a_forged_restart_record_or_mac_is_refused() {
    let key = AuditKey::new("k3y").unwrap();
    let path = temp_log("forged.log");
    write(&path, &key, &["a", "b"]);
    let all = lines(&path);
    // A MAC of the right shape but wrong value, and one with upper-case digits.
    let (body, mac) = split_line(&all[1]).unwrap();
    let flipped = format!(
        "{}{}",
        if mac.starts_with('0') { '1' } else { '0' },
        &mac[1..]
    );
    assert!(!key.verifies(body.as_bytes(), &flipped));
    assert!(!key.verifies(body.as_bytes(), &mac.to_uppercase()));
    assert!(key.verifies(body.as_bytes(), mac));
    let forged = format!(
        r#"{{"seq":3,"time":"t","event":"restart","reason":"r","previousSeq":9,"previousMac":"{GENESIS}","prev":"{mac}","mac":"{}"}}"#,
        "ab".repeat(32)
    );
    std::fs::write(&path, format!("{}\n{}\n{forged}\n", all[0], all[1])).unwrap();
    assert_eq!(broken_at(&path, &key).0, 3);
}

#[test]
fn lines_split_into_body_and_mac() {
    let mac = "ab".repeat(32);
    let line = format!(r#"{{"seq":1,"prev":"{GENESIS}","mac":"{mac}"}}"#);
    let (body, found) = split_line(&line).unwrap();
    assert_eq!(body, format!(r#"{{"seq":1,"prev":"{GENESIS}"}}"#));
    assert_eq!(found, mac);
    assert!(split_line(r#"{"seq":1}"#).is_none());
    assert!(split_line(&line.replace("ab", "AB")).is_none());
}
