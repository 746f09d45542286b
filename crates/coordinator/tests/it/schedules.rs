//! Schedules in the service, on both stores, with the service's clock moved
//! by the test (`Engine::set_clock_offset`) so nothing waits for the wall
//! clock: three schedules of one workflow every hour (so the wall clock,
//! which goes on moving the service's, never reaches the next instant
//! however slow the machine), one per overlap policy,
//! whose runs wait for a review nobody gives (so a previous run has not ended
//! until the test cancels it):
//!
//! - each overlap policy at the instants that come while its previous run
//!   goes on (`allow` fires, `skip` journals a skip, `one-pending` holds one
//!   instant and fires it, with its own instant's key, once the run ends);
//! - a pause (with its reason, journaled) fires nothing, also across a
//!   restart; a resume fires from the next instant, not the ones it missed;
//! - after a stop, missed instants within the catch-up window fire oldest
//!   first and older ones are skipped with a journal line;
//! - `GET /v1/schedules`, its refusals, and `schedule:`-prefixed keys found
//!   by `GET /v1/runs?idempotencyKey=`.

use std::path::{Path, PathBuf};

use coordinator::process::serve::{Mode, Service};
use serde_json::{Value, json};

use crate::console::{Session, csrf};
use crate::openapi::conforms;
use crate::support::deploy::{self, DeploymentSpec, sims, sqlite_url, variant};
use crate::support::{get, get_as, on_runtime, pg, poll, post, post_as, tempdir};

/// Every schedule's interval.
const EVERY: i64 = 3_600_000;
/// `allow-it`'s catch-up window, ms.
const WINDOW: i64 = 10_000_000;

/// The schedules the tests fire (catch-up of `allow-it`: 10 000 s).
const SCHEDULES: &str = "schedules:
  - {id: allow-it, intervalSeconds: 3600, input: {function: scheduled_input}, overlap: allow, catchUpSeconds: 10000}
  - {id: skip-it, intervalSeconds: 3600, input: {function: scheduled_input}, overlap: skip}
  - {id: pend-it, intervalSeconds: 3600, input: {function: scheduled_input}, overlap: one-pending}
";

/// The schedule's input function: the flagship's input, its recipient naming the schedule and instant.
const INPUT_FUNCTION: &str = "\nfn scheduled_input(at, id) {\n    #{ applicationId: \
     \"0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10\", recipient: #{ kind: \"person\", id: `${id}@${at}` } }\n}\n";

/// The flagship with `schedules` (YAML, a whole `schedules:` block) in `dir/scheduled`.
pub fn scheduled_project(dir: &Path, schedules: &str) -> PathBuf {
    let edit = format!("\n{schedules}\nstart: read-application\n");
    let project = variant(dir, "scheduled", &[("\nstart: read-application\n", &edit)]);
    let functions = project.join("functions.rhai");
    let text = std::fs::read_to_string(&functions).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&functions, text + INPUT_FUNCTION).unwrap_or_else(|e| panic!("{e}"));
    project
}

/// The RFC 3339 text of instant `ms` (UTC, whole seconds as the key has it).
pub fn rfc(ms: i64) -> String {
    coordinator_core::machine::time::Instant(ms).to_rfc3339()
}

/// The runs admitted with schedule `id`'s key for instant `at`.
pub async fn runs_at(url: &str, id: &str, at: i64) -> Vec<String> {
    let key = format!("schedule:{id}:{}", rfc(at));
    let (status, page) = get(&format!("{url}/v1/runs?idempotencyKey={}", urlencoding(&key))).await;
    assert_eq!(status, 200, "{page}");
    page["runs"].as_array().into_iter().flatten().filter_map(|r| r["runId"].as_str().map(str::to_owned)).collect()
}

fn urlencoding(text: &str) -> String {
    text.replace(':', "%3A")
}

/// `GET /v1/schedules`' entry for `id`.
pub async fn schedule(url: &str, id: &str) -> Value {
    let (status, listed) = get(&format!("{url}/v1/schedules")).await;
    assert_eq!(status, 200, "{listed}");
    let all = listed["schedules"].as_array().cloned().unwrap_or_default();
    all.into_iter().find(|s| s["id"] == id).unwrap_or_else(|| panic!("no schedule {id}: {listed}"))
}

/// Waits until every unpaused schedule has moved past `now` (its next instant is later).
async fn settled(url: &str, now: i64) -> Value {
    poll(&format!("{url}/v1/schedules"), "the schedules to move past now", |listed| {
        let all = listed["schedules"].as_array().cloned().unwrap_or_default();
        !all.is_empty() && all.iter().all(|s| !s["paused"].is_null() || s["nextAt"].as_i64().is_some_and(|n| n > now))
    })
    .await
}

/// The journal's schedule lines.
async fn schedule_lines(url: &str) -> Vec<String> {
    crate::support::journal(url, None)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "schedule")
        .filter_map(|e| e["detail"].as_str().map(str::to_owned))
        .collect()
}

/// The service and the clock the test moves.
struct Scheduled {
    service: Service,
    runtime: PathBuf,
    url: String,
    /// The service's time, ms, as the test last set it.
    now: i64,
}

impl Scheduled {
    /// Sets the service's clock to `now` and waits until every due schedule was worked.
    async fn at(&mut self, now: i64) -> Value {
        self.now = now;
        self.service.engine.set_clock_offset(now - coordinator::engine::now_ms());
        settled(&self.url, now).await
    }

    /// Stops the service (a routine stop) and starts it again, its clock at `now`.
    async fn restart_at(&mut self, now: i64) {
        self.service.drain().await;
        self.service = deploy::start(&self.runtime, Mode::Normal).await;
        crate::support::process::ready(&self.url, Path::new("/dev/null")).await;
        self.at(now).await;
    }
}

async fn cancel(url: &str, run: &str) {
    let (status, answer) = post(&format!("{url}/v1/runs/{run}/cancel"), &json!({})).await;
    assert_eq!(status, 202, "{answer}");
    // The review was requested: the run ends `cancelled-after-effect` once withdrawn.
    crate::support::run_until(url, run, "cancelled", |v| {
        v["state"].as_str().is_some_and(|s| s.starts_with("cancelled"))
    })
    .await;
}

async fn policies_pause_and_catch_up(database_url: &str) {
    let dir = tempdir();
    let sims = sims(None, None).await;
    let mut spec = DeploymentSpec::new(database_url, &sims.base);
    spec.project = scheduled_project(dir.path(), SCHEDULES);
    spec.access = "{tokens: [{subject: operator, token: file:operator-token, roles: [admit, read, operate]}, \
                   {subject: reader, token: file:reader-token, roles: [read]}]}"
        .to_owned();
    spec.files.push(("reader-token".to_owned(), "reader-token\n".to_owned()));
    let runtime = spec.write(dir.path());
    let service = deploy::migrated(&runtime).await;
    let url = spec.url();
    let listed = poll(&format!("{url}/v1/schedules"), "three schedules", |l| {
        l["schedules"].as_array().is_some_and(|a| a.len() == 3 && a.iter().all(|s| s["nextAt"].is_i64()))
    })
    .await;
    let t0 = listed["schedules"][0]["nextAt"].as_i64().unwrap_or_default();
    assert_eq!(t0 % EVERY, 0, "{listed}");
    let mut s = Scheduled { service, runtime, url: url.clone(), now: 0 };

    // t0: each fires (no previous run).
    s.at(t0 + 1000).await;
    for id in ["allow-it", "skip-it", "pend-it"] {
        assert_eq!(runs_at(&url, id, t0).await.len(), 1, "{id} at t0");
    }
    // t0+1 h and t0+2 h while every run waits for its review.
    s.at(t0 + EVERY + 1000).await;
    let pend = schedule(&url, "pend-it").await;
    assert_eq!(pend["pendingAt"].as_i64(), Some(t0 + EVERY), "{pend}");
    s.at(t0 + 2 * EVERY + 1000).await;
    for k in 1..=2 {
        assert_eq!(runs_at(&url, "allow-it", t0 + k * EVERY).await.len(), 1, "allow-it fires while its run goes on");
        assert!(runs_at(&url, "skip-it", t0 + k * EVERY).await.is_empty(), "skip-it skips");
        assert!(runs_at(&url, "pend-it", t0 + k * EVERY).await.is_empty(), "pend-it holds");
    }
    let text = crate::support::metrics(&url).await;
    let instants = |id: &str, result: &str| {
        let series = format!(
            "coordinator_schedule_instants_total{{workflow=\"reviewed-notice\",schedule=\"{id}\",result=\"{result}\"}}"
        );
        crate::support::metric(&text, &series)
    };
    assert_eq!(
        [instants("allow-it", "fired"), instants("skip-it", "skipped"), instants("pend-it", "held")],
        [Some(3.0), Some(2.0), Some(1.0)],
        "{}",
        text.lines().filter(|l| l.contains("schedule_instants")).collect::<Vec<_>>().join("\n")
    );
    let lines = schedule_lines(&url).await;
    let skipped = |id: &str, at: i64, why: &str| {
        let (id, at) = (format!("schedule {id} "), rfc(at));
        lines.iter().any(|l| l.starts_with(&id) && l.contains(&at) && l.contains(why))
    };
    assert!(skipped("skip-it", t0 + EVERY, "overlap: skip") && skipped("skip-it", t0 + 2 * EVERY, "overlap: skip"));
    assert!(skipped("pend-it", t0 + 2 * EVERY, "pending already"), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("pend-it") && l.contains("pending until")), "{lines:?}");

    // The pending instant fires once pend-it's run ends, under its own instant's key.
    let first = runs_at(&url, "pend-it", t0).await;
    cancel(&url, &first[0]).await;
    poll(&format!("{url}/v1/schedules"), "the pending instant to fire", |l| {
        l["schedules"].as_array().into_iter().flatten().any(|s| s["id"] == "pend-it" && s["pendingAt"].is_null())
    })
    .await;
    assert_eq!(runs_at(&url, "pend-it", t0 + EVERY).await.len(), 1, "the held instant fired");
    // skip-it fires again at the first instant after its run ended.
    let skip_run = runs_at(&url, "skip-it", t0).await;
    cancel(&url, &skip_run[0]).await;
    s.at(t0 + 3 * EVERY + 1000).await;
    assert_eq!(runs_at(&url, "skip-it", t0 + 3 * EVERY).await.len(), 1);

    // Refusals change nothing.
    let pause = |id: &str| format!("{url}/v1/schedules/reviewed-notice/{id}/pause");
    let (status, answer) = post(&pause("no-such"), &json!({"reason": "r"})).await;
    assert_eq!((status, answer["code"].as_str()), (404, Some("schedule.unknown")), "{answer}");
    for body in [json!({}), json!({"reason": " "}), json!(["r"]), json!({"reason": "r", "more": 1})] {
        let (status, answer) = post(&pause("allow-it"), &body).await;
        assert_eq!((status, answer["code"].as_str()), (400, Some("request.invalid")), "{body}: {answer}");
    }
    let (status, answer) = post_as(&pause("allow-it"), Some("reader-token"), &json!({"reason": "r"})).await;
    assert_eq!((status, answer["code"].as_str()), (403, Some("auth.forbidden")), "{answer}");
    let (status, listed) = get_as(&format!("{url}/v1/schedules"), Some("reader-token")).await;
    assert_eq!((status, listed["schedules"].as_array().map(Vec::len)), (200, Some(3)), "{listed}");
    let (_, doc) = get(&format!("{url}/v1/openapi.json")).await;
    listed["schedules"].as_array().into_iter().flatten().for_each(|s| conforms(&doc, "Schedule", s));

    // A pause fires nothing, across a restart; the resume fires from the next instant on.
    let (status, paused) = post(&pause("allow-it"), &json!({"reason": "register maintenance"})).await;
    assert_eq!((status, paused["changed"].as_bool()), (200, Some(true)), "{paused}");
    assert_eq!(paused["paused"]["reason"], "register maintenance", "{paused}");
    let mut shown = paused.clone();
    assert_eq!(shown.as_object_mut().and_then(|o| o.remove("changed")), Some(json!(true)));
    conforms(&doc, "Schedule", &shown);
    s.at(t0 + 4 * EVERY + 1000).await;
    s.restart_at(t0 + 5 * EVERY + 1000).await;
    let after = schedule(&url, "allow-it").await;
    assert_eq!(
        (after["paused"]["by"].as_str(), after["paused"]["reason"].as_str()),
        (Some("operator"), Some("register maintenance"))
    );
    let (status, resumed) =
        post(&format!("{url}/v1/schedules/reviewed-notice/allow-it/resume"), &json!({"reason": "done"})).await;
    assert_eq!(
        (status, resumed["changed"].as_bool(), resumed["nextAt"].as_i64()),
        (200, Some(true), Some(t0 + 6 * EVERY))
    );
    s.at(t0 + 6 * EVERY + 1000).await;
    for k in 4..=5 {
        assert!(runs_at(&url, "allow-it", t0 + k * EVERY).await.is_empty(), "fired at {k} while paused");
    }
    assert_eq!(runs_at(&url, "allow-it", t0 + 6 * EVERY).await.len(), 1, "resumed");
    let lines = schedule_lines(&url).await;
    assert!(lines.iter().any(|l| l.ends_with("paused: register maintenance")), "{lines:?}");
    // Every kind the journal holds now is one the document names.
    let kinds = doc["components"]["schemas"]["AuditEntry"]["properties"]["kind"]["enum"].clone();
    for entry in crate::support::journal(&url, None).await {
        assert!(kinds.as_array().is_some_and(|k| k.contains(&entry["kind"])), "{} is not in {kinds}", entry["kind"]);
    }
    assert!(lines.iter().any(|l| l.ends_with("resumed: done")), "{lines:?}");

    // The console's deployment page lists them; an operator pauses and resumes one with a reason.
    let me = Session::sign_in(&url, crate::support::TOKEN).await;
    let (status, page) = me.page("/console/deployment").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("id=\"schedules-table\"") && page.contains("id=\"schedule-reviewed-notice-skip-it\""),
        "{page}"
    );
    assert!(page.contains("every 3600 s from 1970-01-01T00:00:00Z") && page.contains("id=\"pause-schedule-skip-it\""));
    assert!(!page.contains('`'), "no Markdown in page text");
    let token = csrf(&page);
    let form = [("csrf", token.as_str()), ("change", "pause"), ("reason", " ")];
    let blank = me.post_form("/console/schedules/reviewed-notice/skip-it", &form).await;
    assert_eq!(blank.status().as_u16(), 422, "a reason is required");
    let form = [("csrf", token.as_str()), ("change", "pause"), ("reason", "desk closed")];
    assert_eq!(me.post_form("/console/schedules/reviewed-notice/skip-it", &form).await.status().as_u16(), 303);
    let (_, page) = me.page("/console/deployment").await;
    assert!(page.contains("paused by operator at ") && page.contains("desk closed"), "{page}");
    assert!(page.contains("id=\"resume-schedule-skip-it\""));
    let form = [("csrf", token.as_str()), ("change", "resume"), ("reason", "open again")];
    assert_eq!(me.post_form("/console/schedules/reviewed-notice/skip-it", &form).await.status().as_u16(), 303);
    let reader = Session::sign_in(&url, "reader-token").await;
    let (_, page) = reader.page("/console/deployment").await;
    assert!(page.contains("id=\"schedules-table\"") && !page.contains("pause-schedule-"), "a reader sees, not steers");
    let forged = reader.post_form("/console/schedules/reviewed-notice/skip-it", &form).await;
    assert_eq!(forged.status().as_u16(), 403);

    // A stop of 10 h: allow-it (catch-up 10 000 s) fires the instants of the window, oldest
    // first, and skips the older ones in one journal line.
    let stopped_at = t0 + 7 * EVERY;
    let back = stopped_at + 10 * EVERY + 1000;
    s.restart_at(back).await;
    let window_start = back - WINDOW;
    let mut fired = Vec::new();
    for k in 7..=17 {
        let at = t0 + k * EVERY;
        let n = runs_at(&url, "allow-it", at).await.len();
        assert!(n <= 1, "instant {k} fired {n} times");
        if n == 1 {
            fired.push(at);
        }
    }
    assert!(fired.iter().all(|at| *at >= window_start - 2000), "fired outside the window: {fired:?}");
    assert!(fired.len() >= 2, "the instants of the window fired: {fired:?}");
    assert!(fired.windows(2).all(|w| w[1] - w[0] == EVERY), "oldest first, none missing: {fired:?}");
    let lines = schedule_lines(&url).await;
    let first_fired = rfc(fired[0] - EVERY);
    assert!(
        lines.iter().any(|l| l.starts_with("schedule allow-it ")
            && l.contains(&rfc(stopped_at))
            && l.contains(&first_fired)
            && l.contains("older than the catch-up window")),
        "{lines:?}"
    );
}

#[test]
fn schedules_fire_pause_and_catch_up_on_sqlite() {
    on_runtime(async {
        let data = tempdir();
        policies_pause_and_catch_up(&sqlite_url(data.path())).await;
    });
}

#[test]
fn schedules_fire_pause_and_catch_up_on_postgres() {
    on_runtime(async {
        let db = pg::database().await;
        policies_pause_and_catch_up(&db.url).await;
    });
}

/// A deployment's `scheduleFloorSeconds` refuses a package with a schedule
/// that fires more often: `serve`'s pinned one at start, and one activated
/// over the API (`422 package.invalid`, naming the schedule and the floor).
#[test]
fn a_deployment_refuses_schedules_under_its_floor() {
    on_runtime(async {
        let (dir, data) = (tempdir(), tempdir());
        let sims = sims(None, None).await;
        let mut spec = DeploymentSpec::new(&sqlite_url(data.path()), &sims.base);
        spec.extra.push_str("scheduleFloorSeconds: 7200\n");
        spec.project = scheduled_project(dir.path(), SCHEDULES);
        let runtime = spec.write(dir.path());
        let resolved = coordinator::process::deployment::RuntimeConfig::read(&runtime).and_then(|c| c.resolve());
        let refused = resolved.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            refused.contains("fires 3600000 ms apart") && refused.contains("scheduleFloorSeconds (7200)"),
            "{refused}"
        );

        // The flagship without schedules starts; the scheduled package is refused over the API.
        let scheduled = deploy::package_of(&spec.project);
        spec.project = crate::support::flagship();
        let runtime = spec.write(dir.path());
        let _service = deploy::migrated(&runtime).await;
        let response = reqwest::Client::new()
            .post(format!("{}/v1/packages?digest={}", spec.url(), scheduled.digest))
            .bearer_auth(crate::support::TOKEN)
            .header("content-type", "application/octet-stream")
            .body(scheduled.bytes)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.status().as_u16(), 422);
        let error: Value = response.json().await.unwrap_or(Value::Null);
        assert_eq!(error["code"], "package.invalid", "{error}");
        assert!(error["message"].as_str().is_some_and(|m| m.contains("schedule `allow-it`")), "{error}");
        let (_, listed) = get(&format!("{}/v1/schedules", spec.url())).await;
        assert_eq!(listed["schedules"], json!([]), "nothing was activated");
    });
}
