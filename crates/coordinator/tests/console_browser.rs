//! The operator console in a real browser (Debian's `chromium`, driven by
//! `playwright-core` from npm — both installed by `.ci/run`): sign in; the
//! flagship finishing on its page without a reload; filters surviving a
//! reload; reconcile, retry-same and cancel through their confirmations; a
//! bulk reconcile of three runs; a POST without the CSRF token refused; the
//! restore-hold banner placed and released; a `read` caller offered no
//! action and its forged POST forbidden; axe-core finding no serious
//! violation on any page. The script is `tests/browser/console.mjs`;
//! screenshots are kept under `target/console-screenshots/`.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/stack.rs"]
mod stack;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stack::{Stack, StackOptions};
use support::{TOKEN, on_runtime, sample_input};

const READER_TOKEN: &str = "reader-token-for-the-browser";

async fn until_state(stack: &Stack, run: &str, state: &str) {
    let started = Instant::now();
    while stack.view(run).await["state"] != state {
        assert!(started.elapsed() < stack::GUARD, "{run} never became {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

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
        let secrets = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let reader_file = secrets.path().join("reader-token");
        std::fs::write(&reader_file, READER_TOKEN).unwrap_or_else(|e| panic!("{e}"));
        let reader_file = reader_file.display().to_string();
        let stack = Stack::start(StackOptions {
            auto_decide: Some(Duration::from_millis(1500)),
            edit_runtime: Some(Box::new(move |text| {
                text.replacen(
                    "access: {tokens: [",
                    &format!(
                        "access: {{tokens: [{{subject: reader, token: \"file:{reader_file}\", roles: [admit, read]}}, "
                    ),
                    1,
                )
            })),
            ..StackOptions::default()
        })
        .await;
        stack
            .fault(
                "messaging",
                json!({"operation": "submit-message/v1", "fault": "drop-response-after-effect", "count": 7}),
            )
            .await;
        let mut runs = Vec::new();
        for i in 0..6 {
            runs.push(stack.admit(&format!("browser-{i}")).await);
        }
        let body = json!({"workflow": "reviewed-notice", "revision": stack.revision, "idempotencyKey": "browser-reader", "input": sample_input()});
        let (status, admitted) = support::post_as(&format!("{}/v1/runs", stack.url), Some(READER_TOKEN), &body).await;
        assert_eq!(status, 201, "{admitted}");
        let reader_run = admitted["runId"].as_str().unwrap_or_default().to_owned();
        for run in runs.iter().chain([&reader_run]) {
            until_state(&stack, run, "attention").await;
        }
        let shots = here.join("../../target/console-screenshots");
        let config = json!({
            "url": stack.url, "token": TOKEN, "readerToken": READER_TOKEN, "revision": stack.revision,
            "attention": {"reconcile": runs[0], "retrySame": runs[1], "cancel": runs[2], "bulk": &runs[3..6], "reader": reader_run},
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
        assert_eq!(report["results"].as_array().map(Vec::len), Some(7), "{report}");
    });
}
