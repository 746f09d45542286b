//! The operating commands of the real `coordinatorctl` binary against the
//! in-process `coordinator dev` stack on `127.0.0.1:0`: status, inspect, list,
//! cancel, retry-same, reconcile, activate; the exit codes of refusals (1),
//! usage (2) and unavailable services or credentials (3); and that the token
//! never appears in anything the tool prints.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::stack::Stack;
use crate::support::{WRONG_TOKEN, code, ctl, ctl_in, example, json, read, repo, stderr, stdout, write};

#[test]
fn runs_are_shown_inspected_listed_and_cancelled() {
    let stack = Stack::start();
    let first = stack.admit("first");

    let out = stack.ctl(&["status", &first]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with(&format!("run {first}\n")), "{}", stdout(&out));
    assert!(stdout(&out).contains("  workflow  reviewed-notice sha256:"), "{}", stdout(&out));

    let finished = stack.wait_for(&first, &["finished", "failed", "attention"]);
    assert_eq!(finished["state"], "finished", "{finished}");
    assert_eq!((finished["ok"].clone(), finished["command"].clone()), (json!(true), json!("status")));
    assert_eq!(finished["httpStatus"], 200);
    assert_eq!(finished["outcome"], "notice-sent");

    let out = stack.ctl(&["inspect", &first]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "state             finished",
        "outcome           notice-sent",
        "actions           none",
        "1. read-application  call",
        "breg.",
        "effect accepted · 1 attempt",
        "3. await-review  wait-for",
        "ended: completed",
        "messaging.submit-message/v1 (mutation) via messaging",
    ] {
        assert!(text.contains(needle), "inspect lacks {needle:?}:\n{text}");
    }
    let applicant = read(&repo().join("examples/reviewed-notice/input.json"));
    assert!(!text.contains("person-4711") && applicant.contains("person-4711"), "inspect shows the input:\n{text}");

    let out = stack.ctl(&["inspect", &first, "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let inspection = json(&out);
    assert_eq!((inspection["ok"].clone(), inspection["command"].clone()), (json!(true), json!("inspect")));
    assert_eq!(inspection["runId"], first.as_str());
    assert_eq!(inspection["steps"].as_array().map(Vec::len), Some(6), "{inspection}");

    // Two more runs; the second is cancelled while it waits for the review.
    let second = stack.admit("second");
    let third = stack.admit("third");
    let out = stack.ctl(&["cancel", &second]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with(&format!("cancel: accepted for run {second}; the run is ")), "{}", stdout(&out));
    stack.wait_for(&second, &["cancelled", "cancelled-after-effect"]);
    let out = stack.ctl(&["cancel", &second, "--format", "json"]);
    assert_eq!(code(&out), 0, "a no-op cancel is answered: {}", stderr(&out));
    let noted = json(&out);
    assert_eq!((noted["httpStatus"].clone(), noted["note"].clone()), (json!(200), json!("the run has ended")));
    let out = stack.ctl(&["cancel", &second]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("nothing to do: the run has ended"), "{}", stdout(&out));

    let out = stack.ctl(&["list"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("RUN "), "{text}");
    for run in [&first, &second, &third] {
        assert!(text.contains(run.as_str()), "list lacks {run}:\n{text}");
    }
    let out = stack.ctl(&["list", "--limit", "1", "--format", "json"]);
    let page = json(&out);
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(1), "{page}");
    assert_eq!(page["runs"][0]["runId"], first.as_str());
    let next = page["next"].as_str().unwrap_or_else(|| panic!("a full page has a next cursor: {page}"));
    let out = stack.ctl(&["list", "--limit", "1", "--cursor", next, "--format", "json"]);
    assert_eq!(json(&out)["runs"][0]["runId"], second.as_str());
    let out = stack.ctl(&["list", "--limit", "1", "--all", "--format", "json"]);
    let all = json(&out);
    let ids: Vec<&str> = all["runs"].as_array().into_iter().flatten().filter_map(|r| r["runId"].as_str()).collect();
    assert_eq!(ids, [first.as_str(), second.as_str(), third.as_str()], "{all}");
    assert_eq!(all["next"], Value::Null);
    let out = stack.ctl(&["list", "--workflow", "reviewed-notice", "--state", "finished", "--format", "json"]);
    let finished = json(&out);
    assert!(finished["runs"].as_array().into_iter().flatten().all(|r| r["state"] == "finished"), "{finished}");
    assert!(finished["runs"].as_array().into_iter().flatten().any(|r| r["runId"] == first.as_str()), "{finished}");

    // Refusals: exit 1 with the code and the rule.
    let out = stack.ctl(&["retry-same", &first, "send-notice"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stderr(&out).starts_with("error[run.ended]: "), "{}", stderr(&out));
    assert!(stderr(&out).contains("rule: the run has ended"), "{}", stderr(&out));
    let out = stack.ctl(&["retry-same", &first, "send-notice", "--format", "json"]);
    assert_eq!(code(&out), 1);
    let refused = json(&out);
    assert_eq!((refused["ok"].clone(), refused["httpStatus"].clone()), (json!(false), json!(409)));
    assert_eq!((refused["command"].clone(), refused["code"].clone()), (json!("retry-same"), json!("run.ended")));
    let unknown = "0199c8a0-0000-7000-8000-000000000000";
    let out = stack.ctl(&["status", unknown]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).starts_with("error[run.unknown]: "), "{}", stderr(&out));
    let out = stack.ctl(&["list", "--state", "sleeping"]);
    assert_eq!(code(&out), 2, "an unknown state is a usage error: {}", stderr(&out));
}

#[test]
fn reconcile_settles_a_run_in_attention() {
    let stack = Stack::start();
    stack.lose_next_notice();
    let run = stack.admit("lost-notice");
    stack.wait_for(&run, &["attention"]);

    let out = stack.ctl(&["inspect", &run]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "state             attention",
        "attention         unknown-effect at step send-notice",
        "current step      send-notice",
        "5. send-notice  call  ◀ current",
        "effect unknown · 1 attempt · has a receipt",
        "recovery: reconcile, retry-same, cancel",
        &format!("coordinatorctl reconcile {run} send-notice"),
        &format!("coordinatorctl retry-same {run} send-notice"),
    ] {
        assert!(text.contains(needle), "inspect lacks {needle:?}:\n{text}");
    }
    let out = stack.ctl(&["inspect", &run, "--format", "json"]);
    let inspection = json(&out);
    assert_eq!(inspection["attention"], json!({"reason": "unknown-effect", "step": "send-notice"}));

    let out = stack.ctl(&["reconcile", &run, "read-application"]);
    assert_eq!(code(&out), 1, "a known effect has nothing to settle");
    assert!(stderr(&out).starts_with("error[step.effect-not-unknown]: "), "{}", stderr(&out));

    let out = stack.ctl(&["reconcile", &run, "send-notice"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with(&format!("reconcile: accepted for run {run} step send-notice")),
        "{}",
        stdout(&out)
    );
    let status = stack.wait_for(&run, &["finished", "failed"]);
    assert_eq!((status["state"].clone(), status["outcome"].clone()), (json!("finished"), json!("notice-sent")));
    assert_eq!(stack.dev.sims.messaging.effects().len(), 1, "reconcile sent nothing again");
}

#[test]
fn activate_sends_a_package_with_its_digest() {
    let stack = Stack::start();
    // The flagship with an edited functions.rhai: another revision of the same workflow.
    let project = stack.dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap_or_else(|e| panic!("{e}"));
    let example = Path::new(&example("reviewed-notice")).to_path_buf();
    write(&project.join("workflow.yaml"), &read(&example.join("workflow.yaml")));
    let functions = read(&example.join("functions.rhai"));
    write(&project.join("functions.rhai"), &format!("{functions}\n// revised\n"));
    let package = stack.dir.path().join("revised.pkg.json");
    let package_arg = package.display().to_string();
    let project_arg = project.display().to_string();
    let out = ctl(&["package", "--project", &project_arg, "--output", &package_arg, "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let built = json(&out);

    let out = stack.ctl(&["activate", "--package", &package_arg]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let revision = built["revision"].as_str().unwrap_or_default();
    assert_ne!(revision, stack.dev.revision);
    assert!(text.starts_with(&format!("activated reviewed-notice {revision}\n")), "{text}");
    assert!(text.contains(&format!("previous revision: {}\n", stack.dev.revision)), "{text}");

    let digest = built["digest"].as_str().unwrap_or_default();
    let out = stack.ctl(&["activate", "--package", &package_arg, "--digest", digest, "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let activated = json(&out);
    assert_eq!((activated["ok"].clone(), activated["command"].clone()), (json!(true), json!("activate")));
    assert_eq!((activated["digest"].clone(), activated["previousRevision"].clone()), (json!(digest), json!(revision)));

    let other = format!("sha256:{}", "0".repeat(64));
    let out = stack.ctl(&["activate", "--package", &package_arg, "--digest", &other]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).starts_with("error[package.digest-mismatch]: "), "{}", stderr(&out));
    let missing = stack.dir.path().join("missing.pkg.json").display().to_string();
    let out = stack.ctl(&["activate", "--package", &missing]);
    assert_eq!(code(&out), 3);
    assert!(stderr(&out).starts_with("error[client.file]: "), "{}", stderr(&out));
}

#[test]
fn unreachable_services_and_bad_credentials_exit_3() {
    let stack = Stack::start();
    let run_id = stack.admit("credentials");
    let token_file = stack.token_file.display().to_string();

    // The defaults come from the environment.
    let url = stack.url();
    let env = [("COORDINATOR_URL", Some(url.as_str())), ("COORDINATOR_TOKEN_FILE", Some(token_file.as_str()))];
    let out = ctl_in(None, &["status", &run_id], &env);
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    // Nothing listens on a port just given back.
    let closed =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).unwrap_or_else(|e| panic!("{e}"));
    let closed = format!("http://{closed}");
    let out = ctl(&["status", &run_id, "--url", &closed, "--token-file", &token_file]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).starts_with(&format!("error[client.unreachable]: cannot reach the service at {closed}/")));
    let out = ctl(&["list", "--url", &closed, "--token-file", &token_file, "--format", "json"]);
    assert_eq!(code(&out), 3);
    let report = json(&out);
    assert_eq!((report["ok"].clone(), report["code"].clone()), (json!(false), json!("client.unreachable")));
    assert_eq!(report["httpStatus"], Value::Null);

    let missing = stack.dir.path().join("no-token").display().to_string();
    let out = ctl(&["status", &run_id, "--url", &url, "--token-file", &missing]);
    assert_eq!(code(&out), 3);
    assert!(stderr(&out).starts_with("error[client.token-file]: cannot read the token file"), "{}", stderr(&out));

    let wrong = stack.dir.path().join("wrong-token");
    write(&wrong, WRONG_TOKEN);
    let wrong = wrong.display().to_string();
    for args in [vec!["status", &run_id], vec!["cancel", &run_id], vec!["inspect", &run_id]] {
        let mut args = args;
        args.extend(["--url", &url, "--token-file", &wrong]);
        let out = ctl(&args);
        assert_eq!(code(&out), 3, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).starts_with("error[auth.unauthenticated]: "), "{}", stderr(&out));
        assert!(stderr(&out).contains("did not accept the token in"), "{}", stderr(&out));
    }
    let out = ctl(&["status", &run_id, "--url", &url]);
    assert_eq!(code(&out), 2, "a token file is required: {}", stderr(&out));
    let out = ctl(&["status", &run_id, "--url", "ftp://example.org", "--token-file", &token_file]);
    assert_eq!(code(&out), 2);
    // The wrong token cancelled nothing.
    let status = stack.ctl(&["status", &run_id, "--format", "json"]);
    assert_ne!(json(&status)["state"], "cancelled");
}

#[test]
fn the_restore_hold_is_shown_placed_and_released() {
    let stack = Stack::start();
    let out = stack.ctl(&["restore-hold"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("restore hold: not placed"), "{}", stdout(&out));

    let out = stack.ctl(&["restore-hold", "place", "--reason", "restored from the 02:00 backup"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("restore hold: placed at "), "{}", stdout(&out));
    assert!(stdout(&out).contains("  reason: restored from the 02:00 backup\n"), "{}", stdout(&out));
    let out = stack.ctl(&["restore-hold", "show", "--format", "json"]);
    let hold = json(&out);
    assert_eq!((hold["ok"].clone(), hold["command"].clone()), (json!(true), json!("restore-hold")));
    assert_eq!((hold["placed"].clone(), hold["placedBy"].clone()), (json!(true), json!("dev-operator")));

    let out = stack.ctl(&["restore-hold", "release", "--reason", "every effect looked at"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("restore hold: not placed"), "{}", stdout(&out));
    let out = stack.ctl(&["restore-hold", "lift"]);
    assert_eq!(code(&out), 2);
}

#[test]
fn a_batch_is_dry_run_started_followed_and_listed_and_a_run_found_by_its_key() {
    let stack = Stack::start();
    let first = stack.admit("batch-first");
    stack.wait_for(&first, &["finished", "failed", "attention"]);

    let out = stack.ctl(&["list", "--idempotency-key", "batch-first", "--format", "json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&out)["runs"][0]["runId"], first.as_str());

    let filter = ["--workflow", "reviewed-notice", "--state", "finished"];
    let dry = [&["batch", "start", "--action", "cancel", "--reason", "tidy", "--dry-run"][..], &filter[..]].concat();
    let out = stack.ctl(&dry);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("1 run(s) match") && stdout(&out).contains("nothing was written"),
        "{}",
        stdout(&out)
    );

    let start =
        [&["batch", "start", "--action", "cancel", "--reason", "tidy", "--format", "json"][..], &filter[..]].concat();
    let out = stack.ctl(&start);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let id = json(&out)["batchId"].as_str().unwrap_or_default().to_owned();
    let ended = (0..600).find_map(|_| {
        let out = stack.ctl(&["batch", "status", &id, "--format", "json"]);
        let batch = json(&out);
        if batch["state"] == "done" {
            return Some(batch);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        None
    });
    let ended = ended.unwrap_or_else(|| panic!("batch {id} did not end"));
    assert_eq!(ended["refused"], json!({"nothing-to-do": 1}), "{ended}");

    let out = stack.ctl(&["batch", "list"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("{id}  cancel  done  matched 1, done 0, refused 1, remaining 0")),
        "{}",
        stdout(&out)
    );
    let out = stack.ctl(&["batch", "runs", &id, "--outcome", "refused"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{first}  refused (nothing-to-do)\n"));
    let out = stack.ctl(&["batch", "cancel", &id]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("had ended already"), "{}", stdout(&out));
    let out = stack.ctl(&["batch", "status", "0199c8a0-0000-7000-8000-000000000000"]);
    assert_eq!(code(&out), 1, "an unknown batch is refused: {}", stderr(&out));
}

#[test]
fn schedules_are_listed_paused_and_resumed() {
    let stack = Stack::start_on("desk-digest");
    // The service's options come before the subcommand (`schedules --url … pause …`), as the usage says.
    let (url, token_file) = (stack.url(), stack.token_file.display().to_string());
    let schedules = |rest: &[&str]| {
        let all = [&["schedules", "--url", &url, "--token-file", &token_file][..], rest].concat();
        ctl(&all)
    };
    // The service writes its schedules at its first round.
    let listed = (0..600).find_map(|_| {
        let out = schedules(&[]);
        let text = stdout(&out);
        if text.starts_with("desk-digest/weekday-morning") {
            return Some(text);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        None
    });
    let listed = listed.unwrap_or_else(|| panic!("the schedule was never listed"));
    assert!(
        listed.starts_with(
            "desk-digest/weekday-morning  cron \"30 7 * * MON-FRI\" in Europe/Berlin  overlap skip\n  next   "
        ),
        "{listed}"
    );
    assert!(listed.contains(" = ") && listed.contains("Z\n"), "next firing on the wall clock and in UTC: {listed}");

    let pause = ["pause", "desk-digest", "weekday-morning", "--reason", "desk closed this week"];
    let out = schedules(&pause);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("desk-digest/weekday-morning: paused\n"), "{}", stdout(&out));
    assert!(stdout(&out).contains("  paused by dev-operator at "), "{}", stdout(&out));
    let out = schedules(&pause);
    assert!(stdout(&out).starts_with("desk-digest/weekday-morning: was paused already"), "{}", stdout(&out));

    let out = ctl(&["schedules", "--url", &url, "--token-file", &token_file, "--format", "json", "list"]);
    let answer = json(&out);
    assert_eq!((answer["ok"].clone(), answer["command"].clone()), (json!(true), json!("schedules")));
    assert_eq!(answer["schedules"][0]["paused"]["reason"], "desk closed this week", "{answer}");

    let out = schedules(&["resume", "desk-digest", "weekday-morning", "--reason", "open again"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("desk-digest/weekday-morning: resumed\n"), "{}", stdout(&out));
    let out = schedules(&["pause", "desk-digest", "no-such", "--reason", "r"]);
    assert_eq!(code(&out), 1, "an unknown schedule is refused");
    assert!(stderr(&out).starts_with("error[schedule.unknown]: "), "{}", stderr(&out));
    let out = schedules(&["pause", "desk-digest", "weekday-morning"]);
    assert_eq!(code(&out), 2, "a reason is required");
}
