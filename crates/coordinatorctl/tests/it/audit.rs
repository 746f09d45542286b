//! `coordinatorctl audit verify` against the in-process `coordinator dev`
//! stack: an intact journal verifies (exit 0, human and JSON), the same
//! journal edited directly in the dev stack's SQLite file (with the `sqlite3`
//! command-line shell) is reported tampered at the edited position (exit 1),
//! and an unreachable service is exit 3; after a retention cut the check
//! starts at the journal's checkpoint and says so.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::stack::Stack;
use crate::support::{code, ctl, json, stderr, stdout};

/// Runs `coordinatorctl audit verify ARGS` against the stack.
fn verify(stack: &Stack, args: &[&str]) -> Output {
    stack.ctl(&[&["audit", "verify"], args].concat())
}

/// Runs SQL on the dev stack's database with the `sqlite3` shell (which waits for the stack's writers).
fn sqlite3(database: &Path, sql: &str) {
    let out = Command::new("sqlite3")
        .args(["-bail", "-cmd", ".timeout 10000"])
        .arg(database)
        .arg(sql)
        .output()
        .unwrap_or_else(|e| panic!("the sqlite3 shell is needed for this test: {e}"));
    assert!(out.status.success(), "sqlite3: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn audit_verify_passes_on_the_journal_and_fails_once_it_is_edited() {
    let stack = Stack::start();

    // A run, so the journal has more than the activation.
    stack.admit("audited");

    let started = Instant::now();
    let checked = loop {
        let out = verify(&stack, &["--format", "json"]);
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        let report = json(&out);
        assert_eq!((report["ok"].as_bool(), report["command"].as_str()), (Some(true), Some("audit verify")));
        assert_eq!(report["head"]["hash"].as_str().map(str::len), Some(64), "{report}");
        let checked = report["checked"].as_u64().unwrap_or(0);
        if checked >= 3 {
            break checked;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the journal stays short: {report}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = verify(&stack, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("audit journal verified: "), "{}", stdout(&out));
    assert!(checked >= 3);

    // Edit the second entry's detail in the database itself.
    let database = stack.database();
    sqlite3(&database, "UPDATE audit SET detail = detail || ' (edited)' WHERE position = 2;");
    let out = verify(&stack, &[]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("error[audit.tampered]") && stderr(&out).contains("position 2"), "{}", stderr(&out));
    let out = verify(&stack, &["--format", "json"]);
    assert_eq!(code(&out), 1);
    let report = json(&out);
    assert_eq!(
        (report["ok"].as_bool(), report["code"].as_str(), report["position"].as_i64(), report["problem"].as_str()),
        (Some(false), Some("audit.tampered"), Some(2), Some("hash-mismatch")),
        "{report}"
    );

    // Deleting the entry instead is a gap at its position.
    sqlite3(&database, "DELETE FROM audit WHERE position = 2;");
    let report = json(&verify(&stack, &["--format", "json"]));
    assert_eq!((report["position"].as_i64(), report["problem"].as_str()), (Some(2), Some("missing")), "{report}");

    let token_file = stack.token_file.display().to_string();
    let out = ctl(&["audit", "verify", "--url", "http://127.0.0.1:9", "--token-file", &token_file]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
}

#[test]
fn after_a_retention_cut_audit_verify_starts_at_the_checkpoint() {
    let stack = Stack::start();

    // Everything so far (the activation) is cut three days on, keeping one day.
    let now = stack.dev.engine.now() + 3 * 86_400_000;
    let cut = stack.runtime.block_on(stack.dev.engine.store().retain(now, 1)).unwrap_or_else(|e| panic!("retain: {e}"));
    let Some(checkpoint) = cut.checkpoint else { panic!("nothing was cut: {cut:?}") };
    assert!(checkpoint.position >= 1, "{checkpoint:?}");

    let report = json(&verify(&stack, &["--format", "json"]));
    assert_eq!(report["ok"].as_bool(), Some(true), "{report}");
    assert_eq!(report["checkpoint"]["position"].as_i64(), Some(checkpoint.position), "{report}");
    assert_eq!(report["checkpoint"]["hash"].as_str(), Some(checkpoint.hash.as_str()), "{report}");
    let out = verify(&stack, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let expected = format!("after the retention checkpoint at position {}", checkpoint.position);
    assert!(stdout(&out).contains(&expected), "{}", stdout(&out));

    // The checkpoint is where the chain starts, not a pass: the entry after it
    // (the cut's own, the journal's last) deleted is found missing there.
    let first = checkpoint.position + 1;
    sqlite3(&stack.database(), &format!("DELETE FROM audit WHERE position = {first};"));
    let report = json(&verify(&stack, &["--format", "json"]));
    assert_eq!(
        (report["position"].as_i64(), report["problem"].as_str()),
        (Some(first), Some("tail-missing")),
        "{report}"
    );
}
