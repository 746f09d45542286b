//! The operator console in a real browser (Debian's `chromium`, driven by
//! `playwright-core` from npm — both installed by `.ci/run`): sign in; the
//! flagship finishing on its page without a reload; filters surviving a
//! reload; reconcile, retry-same and cancel through their confirmations; a
//! bulk reconcile of three runs as a batch (its page says what became of
//! each; a reload posts nothing); a POST without the CSRF token refused; the
//! restore-hold confirmed with a reason, its banner placed and released;
//! verify-now redirected; the journal newest first and counted; "observe
//! now" on a decided review; copy buttons; the workflow filter a list; a connection paused with a
//! reason and resumed from the deployment page; a `read` caller offered no
//! action and its forged POST forbidden; axe-core finding no serious
//! violation on any page. The script is `tests/browser/console.mjs` (an npm
//! project of its own beside this binary's sources); screenshots are kept
//! under `target/console-screenshots/`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::deploy::EAGER;
use crate::support::stack::{Stack, StackOptions};
use crate::support::{TOKEN, admission, on_runtime, post_as, until_state};

const READER_TOKEN: &str = "reader-token-for-the-browser";

#[test]
fn the_console_works_in_a_real_browser() {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let scripts = here.join("tests/browser");
    assert!(
        scripts.join("node_modules/playwright-core").is_dir(),
        "playwright-core is not installed: run `npm ci` in {} (.ci/run does)",
        scripts.display()
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(PathBuf::from(&chromium).exists(), "{chromium} is missing: apt-get install chromium (.ci/run does)");
    on_runtime(async {
        // The review wait observes every second: a decision announced before a run
        // entered its wait costs a second, not casework's 15 minutes.
        let stack = Stack::start(StackOptions {
            edits: vec![EAGER],
            auto_decide: Some(Duration::from_millis(1500)),
            reader: Some((READER_TOKEN, "[admit, read]")),
            ..StackOptions::default()
        })
        .await;
        stack.lose_notices(7).await;
        let mut runs = Vec::new();
        for i in 0..6 {
            runs.push(stack.admit(&format!("browser-{i}")).await);
        }
        let body = admission(&stack.revision, "browser-reader");
        let (status, admitted) = post_as(&format!("{}/v1/runs", stack.url), Some(READER_TOKEN), &body).await;
        assert_eq!(status, 201, "{admitted}");
        let reader_run = admitted["runId"].as_str().unwrap_or_default().to_owned();
        for run in runs.iter().chain([&reader_run]) {
            until_state(&stack.url, run, "attention").await;
        }
        // A second deployment whose reviews are decided by hand and never
        // announced, its wait looking every 15 minutes: a decided review that
        // only "observe now" brings forward.
        let quiet = Stack::start(StackOptions { notify: false, ..StackOptions::default() }).await;
        let waiting = quiet.admit("browser-observe").await;
        quiet.until(&waiting, "waiting for its review", |i| i["currentStep"] == "await-review").await;
        let (status, answer) = quiet.decide("review-1", "approved").await;
        assert_eq!(status, 200, "{answer}");
        let shots = here.join("../../target/console-screenshots");
        let config = json!({
            "url": stack.url, "token": TOKEN, "readerToken": READER_TOKEN, "revision": stack.revision,
            "attention": {"reconcile": runs[0], "retrySame": runs[1], "cancel": runs[2], "bulk": &runs[3..6], "reader": reader_run},
            "observe": {"url": quiet.url, "run": waiting},
            "shots": shots.display().to_string(),
        });
        let url = stack.url.clone();
        let output = tokio::task::spawn_blocking(move || {
            Command::new("node")
                .arg("console.mjs")
                .arg(config.to_string())
                .current_dir(&scripts)
                .env("CHROMIUM", chromium)
                .output()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("node: {e}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let report: Value = stdout.lines().last().and_then(|l| serde_json::from_str(l).ok()).unwrap_or(Value::Null);
        assert!(
            output.status.success() && report["ok"] == true,
            "the browser run failed against {url}:\n{stdout}\n{stderr}"
        );
        assert_eq!(report["results"].as_array().map(Vec::len), Some(17), "{report}");
    });
}
