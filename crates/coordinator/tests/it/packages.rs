//! `POST /v1/packages?digest=…` (docs/reference/project.md#packages,
//! docs/reference/runs.md#pinning): a package is
//! activated only with its pinned digest, only when it can be read and only
//! when the deployment configures every connection it uses; new admissions get
//! the activated revision while admitted runs keep theirs.

use coordinator::process::dev::Dev;
use serde_json::{Value, json};

use crate::support::deploy::{Package, package_of, variant};
use crate::support::{
    TOKEN, admission, console_cookie, console_page, get, lose_notices, on_runtime, poll, post, settled, start, tempdir,
    until_state,
};

/// A copy of examples/reviewed-notice in `dir` with `from` replaced by `to` in
/// its workflow.yaml, packaged as `coordinatorctl package` would.
fn modified_package(dir: &std::path::Path, from: &str, to: &str) -> Package {
    package_of(&variant(dir, "project", &[(from, to)]))
}

/// A schedule added to the flagship (`CRON` in Berlin), with its input function; `extra` appended to the functions.
fn scheduled(dir: &std::path::Path, cron: &str, extra: &str) -> Package {
    let schedules = format!(
        "\nschedules:\n  - {{id: weekly, cron: \"{cron}\", timeZone: Europe/Berlin, input: {{function: weekly_input}}}}\n\nstart: read-application"
    );
    let project = variant(dir, "project", &[("\nstart: read-application", &schedules)]);
    let input = "\nfn weekly_input(at, schedule) { #{ applicationId: \"0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10\", \
                 recipient: #{ kind: \"person\", id: \"person-4711\" } } }\n";
    let functions = std::fs::read_to_string(project.join("functions.rhai")).unwrap_or_default() + input + extra;
    std::fs::write(project.join("functions.rhai"), functions).unwrap_or_else(|e| panic!("{e}"));
    package_of(&project)
}

/// `POST /v1/packages` with `query` and the bytes as `content_type`: (status, body).
async fn activate(dev: &Dev, query: &str, bytes: &[u8], content_type: &str) -> (u16, Value) {
    let url = format!("{}/v1/packages{query}", dev.url());
    let response = reqwest::Client::new()
        .post(&url)
        .bearer_auth(TOKEN)
        .header("content-type", content_type)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn admit(dev: &Dev, revision: &str, key: &str) -> (u16, Value) {
    post(&format!("{}/v1/runs", dev.url()), &admission(revision, key)).await
}

#[test]
fn a_new_package_changes_new_admissions_and_admitted_runs_keep_their_revision() {
    on_runtime(async {
        let project = tempdir();
        let dev = start().await;
        let old = dev.revision.clone();
        // One more second of deadline: another definition, so another revision.
        let Package { bytes, digest, revision: new } =
            modified_package(project.path(), "deadlineSeconds: 2592000", "deadlineSeconds: 2592001");
        assert_ne!(new, old);

        let (status, admitted) = admit(&dev, &old, "before").await;
        assert_eq!(status, 201, "{admitted}");
        let before = admitted["runId"].as_str().unwrap_or_default().to_owned();

        let (status, activated) =
            activate(&dev, &format!("?digest={digest}"), &bytes, "application/octet-stream").await;
        assert_eq!(status, 200, "{activated}");
        let expected =
            json!({"workflow": "reviewed-notice", "revision": new, "digest": digest, "previousRevision": old});
        assert_eq!(activated, expected);
        // Activating the active package again changes nothing.
        let (status, again) = activate(&dev, &format!("?digest={digest}"), &bytes, "application/json").await;
        assert_eq!((status, &again["revision"], &again["previousRevision"]), (200, &json!(new), &json!(new)));

        // New admissions must name the new revision; the old one is no longer active.
        let (status, error) = admit(&dev, &old, "after-old").await;
        assert_eq!((status, error["code"].as_str()), (409, Some("revision.not-active")), "{error}");
        let (status, admitted) = admit(&dev, &new, "after-new").await;
        assert_eq!(status, 201, "{admitted}");
        let after = admitted["runId"].as_str().unwrap_or_default().to_owned();

        // Both run to the end, each on the revision it was admitted with.
        for (run, revision) in [(&before, &old), (&after, &new)] {
            let view = settled(&dev.url(), run).await;
            assert_eq!((&view["state"], &view["outcome"]), (&json!("finished"), &json!("notice-sent")), "{view}");
            assert_eq!(view["revision"], json!(revision), "{view}");
        }
    });
}

#[test]
fn packages_are_refused_without_their_digest_unreadable_or_with_unknown_connections() {
    on_runtime(async {
        let project = tempdir();
        let dev = start().await;
        let Package { bytes, digest, .. } =
            modified_package(project.path(), "deadlineSeconds: 2592000", "deadlineSeconds: 2592002");
        let octets = "application/octet-stream";

        let (status, error) = activate(&dev, "", &bytes, octets).await;
        assert_eq!((status, error["code"].as_str()), (400, Some("request.invalid")), "{error}");
        let (status, error) = activate(&dev, "?digest=md5:abc", &bytes, octets).await;
        assert_eq!((status, error["code"].as_str()), (400, Some("request.invalid")), "{error}");

        let other = format!("sha256:{}", "0".repeat(64));
        let (status, error) = activate(&dev, &format!("?digest={other}"), &bytes, octets).await;
        assert_eq!((status, error["code"].as_str()), (409, Some("package.digest-mismatch")), "{error}");
        assert!(error["message"].as_str().is_some_and(|m| m.contains(&digest)), "{error}");

        let garbage = b"{\"format\": \"not-a-package\", \"secret\": \"s3cr3t\"}".to_vec();
        let garbage_digest = coordinator_core::definition::sha256_id(&garbage);
        let (status, error) = activate(&dev, &format!("?digest={garbage_digest}"), &garbage, octets).await;
        assert_eq!((status, error["code"].as_str()), (422, Some("package.invalid")), "{error}");
        assert!(!error.to_string().contains("s3cr3t"), "{error}");
        let not_json = b"\x00\x01 not json".to_vec();
        let not_json_digest = coordinator_core::definition::sha256_id(&not_json);
        let (status, error) = activate(&dev, &format!("?digest={not_json_digest}"), &not_json, octets).await;
        assert_eq!((status, error["code"].as_str()), (422, Some("package.invalid")), "{error}");

        let (status, error) = activate(&dev, &format!("?digest={digest}"), &bytes, "text/plain").await;
        assert_eq!((status, error["code"].as_str()), (415, Some("request.unsupported-media-type")), "{error}");

        // A connection this deployment does not configure is named.
        let elsewhere = tempdir();
        let Package { bytes, digest, .. } =
            modified_package(elsewhere.path(), "connection: messaging}", "connection: post-office}");
        let (status, error) = activate(&dev, &format!("?digest={digest}"), &bytes, octets).await;
        assert_eq!((status, error["code"].as_str()), (422, Some("package.unknown-connection")), "{error}");
        assert!(error["message"].as_str().is_some_and(|m| m.contains("post-office")), "{error}");

        // Nothing was activated by any of these.
        let (status, admitted) = admit(&dev, &dev.revision, "still-old").await;
        assert_eq!(status, 201, "{admitted}");
    });
}

/// `GET /v1/workflows/reviewed-notice/revisions`: `(revision, active, unfinished total, oldest)` of each.
async fn revisions(dev: &Dev) -> Vec<(String, bool, u64, Option<i64>)> {
    let (status, body) = get(&format!("{}/v1/workflows/reviewed-notice/revisions", dev.url())).await;
    assert_eq!(status, 200, "{body}");
    let list = body["revisions"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|r| {
            let by_state: u64 = r["unfinished"].as_object().into_iter().flatten().filter_map(|(_, n)| n.as_u64()).sum();
            assert_eq!(r["unfinishedTotal"].as_u64(), Some(by_state), "{r}");
            let revision = r["revision"].as_str().unwrap_or_default().to_owned();
            (revision, r["active"] == json!(true), by_state, r["oldestUnfinishedAdmittedAt"].as_i64())
        })
        .collect()
}

#[test]
fn each_revision_says_what_it_holds_until_the_old_one_drains() {
    on_runtime(async {
        let project = tempdir();
        let dev = start().await;
        let old = dev.revision.clone();
        // A run of the old revision waits in attention: its notice's answer is lost.
        lose_notices(&dev.url(), 1).await;
        let (status, admitted) = admit(&dev, &old, "held").await;
        assert_eq!(status, 201, "{admitted}");
        let held = admitted["runId"].as_str().unwrap_or_default().to_owned();
        until_state(&dev.url(), &held, "attention").await;
        let (_, page) = get(&format!("{}/v1/runs?idempotencyKey=held", dev.url())).await;
        let admitted_at = page["runs"][0]["admittedAt"].as_i64();
        assert!(admitted_at.is_some(), "{page}");
        assert_eq!(revisions(&dev).await, vec![(old.clone(), true, 1, admitted_at)]);

        let Package { bytes, digest, revision: new } =
            modified_package(project.path(), "deadlineSeconds: 2592000", "deadlineSeconds: 2592001");
        let (status, activated) =
            activate(&dev, &format!("?digest={digest}"), &bytes, "application/octet-stream").await;
        assert_eq!(status, 200, "{activated}");
        let (status, admitted) = admit(&dev, &new, "after-new").await;
        assert_eq!(status, 201, "{admitted}");
        settled(&dev.url(), admitted["runId"].as_str().unwrap_or_default()).await;
        assert_eq!(revisions(&dev).await, vec![(new.clone(), true, 0, None), (old.clone(), false, 1, admitted_at)]);

        // The last run of the old revision ends: it has drained, and the console says so.
        let (status, cancelled) = post(&format!("{}/v1/runs/{held}/cancel", dev.url()), &json!({})).await;
        assert_eq!(status, 202, "{cancelled}");
        until_state(&dev.url(), &held, "cancelled-after-effect").await;
        assert_eq!(revisions(&dev).await, vec![(new.clone(), true, 0, None), (old.clone(), false, 0, None)]);
        let cookie = console_cookie(&dev.url()).await;
        let (status, html) = console_page(&dev.url(), &cookie, "/console/deployment").await;
        assert_eq!(status, 200);
        assert!(html.contains("id=\"revisions-held\"") && html.contains("drained: no run left"), "{html}");

        let (status, error) = get(&format!("{}/v1/workflows/no-such-workflow/revisions", dev.url())).await;
        assert_eq!((status, error["code"].as_str()), (404, Some("workflow.unknown")), "{error}");
    });
}

/// Activation moves the schedules to the new revision at the next round: an
/// unchanged calendar keeps its next instant, a changed one starts at its
/// first instant from then, and a revision without the schedule removes it
/// (journaled).
#[test]
fn activating_a_revision_moves_its_schedules() {
    on_runtime(async {
        let dev = start().await;
        let octets = "application/octet-stream";
        let schedule = |revision: String| {
            let url = format!("{}/v1/schedules", dev.url());
            async move {
                poll(&url, "the schedule at the revision", |l| {
                    l["schedules"].as_array().is_some_and(|a| a.len() == 1 && a[0]["revision"] == revision.as_str())
                })
                .await["schedules"][0]
                    .clone()
            }
        };
        let (first, second, third, fourth) = (tempdir(), tempdir(), tempdir(), tempdir());
        let mondays = scheduled(first.path(), "0 8 * * MON", "");
        let (status, body) = activate(&dev, &format!("?digest={}", mondays.digest), &mondays.bytes, octets).await;
        assert_eq!(status, 200, "{body}");
        let at_first = schedule(mondays.revision.clone()).await;
        assert!(at_first["nextLocal"].as_str().is_some_and(|l| l.contains(" 08:00:00 ")), "{at_first}");

        // Another revision, the same calendar: the next instant stays.
        let revised = scheduled(second.path(), "0 8 * * MON", "\n// revised\n");
        assert_ne!(revised.revision, mondays.revision);
        let (status, body) = activate(&dev, &format!("?digest={}", revised.digest), &revised.bytes, octets).await;
        assert_eq!(status, 200, "{body}");
        let kept = schedule(revised.revision.clone()).await;
        assert_eq!(kept["nextAt"], at_first["nextAt"], "{kept}");

        // Another calendar: its own next instant.
        let tuesdays = scheduled(third.path(), "0 9 * * TUE", "");
        let (status, body) = activate(&dev, &format!("?digest={}", tuesdays.digest), &tuesdays.bytes, octets).await;
        assert_eq!(status, 200, "{body}");
        let moved = schedule(tuesdays.revision.clone()).await;
        assert!(moved["nextLocal"].as_str().is_some_and(|l| l.contains(" 09:00:00 ")), "{moved}");
        assert_ne!(moved["nextAt"], at_first["nextAt"]);

        // The flagship again, without schedules: removed, and journaled.
        let plain = modified_package(fourth.path(), "deadlineSeconds: 2592000", "deadlineSeconds: 2592002");
        let (status, body) = activate(&dev, &format!("?digest={}", plain.digest), &plain.bytes, octets).await;
        assert_eq!(status, 200, "{body}");
        poll(&format!("{}/v1/schedules", dev.url()), "no schedule", |l| {
            l["schedules"].as_array().is_some_and(Vec::is_empty)
        })
        .await;
        let lines = crate::support::journal(&dev.url(), None).await;
        assert!(
            lines.iter().any(|e| e["kind"] == "schedule"
                && e["detail"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("schedule weekly of workflow reviewed-notice removed"))),
            "{lines:?}"
        );
    });
}
