//! The operator console over HTTP (its pages as a browser gets them; the
//! browser itself is driven in the module `console_browser`): sign-in and the
//! session cookie, the run list and its filters, a run's page and graph,
//! confirmations computed as dry runs, actions with their reasons in the
//! journal, bulk actions, roles and CSRF enforced on the server, the restore
//! hold's banner, the live event stream — and no page carrying anything
//! protected.

use std::time::Duration;

use crate::support::deploy::{DeploymentSpec, EAGER, deployment, free_ports};
use crate::support::process::serve_each;
use crate::support::stack::{Stack, StackOptions};
use crate::support::{GUARD, TOKEN, get, on_runtime, pg, sample_input, tempdir, until_state};
use serde_json::Value;

/// The token of a subject that may only read (its own runs) — written by the test.
const READER_TOKEN: &str = "reader-token-for-the-console";

/// A browser without a browser: keeps the session cookie, follows nothing by itself.
pub(crate) struct Session {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
}

impl Session {
    fn new(base: &str) -> Session {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        Session { http, base: base.to_owned(), cookie: None }
    }

    pub(crate) async fn sign_in(base: &str, token: &str) -> Session {
        let mut session = Session::new(base);
        let response = session.post_form("/console/sign-in", &[("token", token), ("next", "/console/runs")]).await;
        assert_eq!(response.status().as_u16(), 303, "signed in");
        let set = response.headers().get("set-cookie").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/console"), "{set}");
        assert!(!set.contains("Secure"), "no Secure on loopback: {set}");
        assert!(!set.contains(token), "the cookie does not carry the token");
        session.cookie = set.split(';').next().map(str::to_owned);
        session
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", cookie);
        }
        request.send().await.unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// A page's status and HTML; every page is in words, without a Markdown backtick.
    pub(crate) async fn page(&self, path: &str) -> (u16, String) {
        let response = self.get(path).await;
        let status = response.status().as_u16();
        let html = response.text().await.unwrap_or_default();
        assert!(!html.contains('`'), "{path} shows a backtick: {html}");
        (status, html)
    }

    pub(crate) async fn post_form(&self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        let mut request = self.http.post(format!("{}{path}", self.base)).form(form);
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", cookie);
        }
        request.send().await.unwrap_or_else(|e| panic!("{path}: {e}"))
    }
}

/// The CSRF token a page's forms carry.
pub(crate) fn csrf(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).map(|i| i + marker.len()).unwrap_or_else(|| panic!("no csrf in {html}"));
    html[start..].split('"').next().unwrap_or_default().to_owned()
}

/// The flagship, reviews decided by themselves, and a reader token. The
/// review wait observes every second: a decision announced before the run
/// entered its wait (a notification only brings an open wait's observation
/// forward) then costs a second, not casework's 15 minutes.
async fn stack() -> Stack {
    Stack::start(StackOptions {
        edits: vec![EAGER],
        auto_decide: Some(Duration::from_millis(100)),
        reader: Some((READER_TOKEN, "[read]")),
        ..StackOptions::default()
    })
    .await
}

/// Runs admitted under `keys` whose notices' answers are lost: each waits in `attention`.
async fn uncertain(stack: &Stack, keys: &[&str]) -> Vec<String> {
    stack.lose_notices(u32::try_from(keys.len()).unwrap_or(u32::MAX)).await;
    let mut runs = Vec::new();
    for key in keys {
        runs.push(stack.admit(key).await);
    }
    for run in &runs {
        until_state(&stack.url, run, "attention").await;
    }
    runs
}

/// Nothing protected on a page — but a finished run's published output, which is the run's to publish.
fn protected(html: &str) {
    let html = match (html.find("<pre class=\"output\""), html.find("</pre>")) {
        (Some(start), Some(end)) if end > start => format!("{}{}", &html[..start], &html[end..]),
        _ => html.to_owned(),
    };
    let html = html.as_str();
    let input = sample_input();
    for value in [input["applicationId"].as_str().unwrap_or("?"), "person-4711", TOKEN, READER_TOKEN] {
        assert!(!html.contains(value), "`{value}` is on a console page");
    }
}

#[test]
fn signing_in_listing_reading_and_the_graph() {
    on_runtime(async {
        let stack = stack().await;
        let run = stack.admit("console-1").await;
        until_state(&stack.url, &run, "finished").await;

        // Without a session every page sends the browser to sign in, and says where it was going.
        let anonymous = Session::new(&stack.url);
        let response = anonymous.get("/console/runs?state=finished").await;
        assert_eq!(response.status().as_u16(), 303);
        let location = response.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert_eq!(location, "/console/sign-in?next=/console/runs%3Fstate%3Dfinished");
        let refused = anonymous.post_form("/console/sign-in", &[("token", "not-a-token")]).await;
        assert_eq!(refused.status().as_u16(), 401);
        assert!(refused.headers().get("set-cookie").is_none());

        let me = Session::sign_in(&stack.url, TOKEN).await;
        let (status, html) = me.page("/console/runs").await;
        assert_eq!(status, 200);
        assert!(html.contains(&format!("href=\"/console/runs/{run}\"")), "{html}");
        assert!(html.contains("notice-sent"), "the outcome is listed");
        let (_, filtered) = me.page("/console/runs?state=attention").await;
        assert!(filtered.contains("No run matches.") && !filtered.contains(&run));
        let (status, bad) = me.page("/console/runs?state=nonsense").await;
        assert_eq!(status, 400);
        assert!(bad.contains("is not a run state"), "{bad}");
        let (_, one) = me.page(&format!("/console/runs?run={run}")).await;
        assert!(one.contains(&run));
        let (_, fragment) = me.page("/console/runs?fragment=1").await;
        assert!(fragment.contains(&run) && !fragment.contains("<html"), "the live fragment is the table alone");

        let (status, page) = me.page(&format!("/console/runs/{run}")).await;
        assert_eq!(status, 200);
        for expected in ["send-notice", "accepted", "Published output", "Journal", "notice-sent"] {
            assert!(page.contains(expected), "`{expected}` missing from the run page");
        }
        protected(&page);
        let graph = me.get(&format!("/console/runs/{run}/graph.svg")).await;
        assert_eq!(graph.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("image/svg+xml"));
        let svg = graph.text().await.unwrap_or_default();
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{svg}");
        assert!(!svg.contains("<script"));
        let csp = me.get("/console/runs").await;
        let policy =
            csp.headers().get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert!(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"), "{policy}");
    });
}

#[test]
fn an_uncertain_notice_is_reconciled_from_its_confirmation_with_a_reason_in_the_journal() {
    on_runtime(async {
        let stack = stack().await;
        let run = uncertain(&stack, &["console-2"]).await.remove(0);
        let me = Session::sign_in(&stack.url, TOKEN).await;
        let (_, inbox) = me.page("/console/attention").await;
        assert!(inbox.contains("unknown-effect") && inbox.contains("send-notice"), "{inbox}");
        let (_, page) = me.page(&format!("/console/runs/{run}")).await;
        assert!(page.contains("Needs an operator"));
        assert!(page.contains(&format!("/console/runs/{run}/actions/reconcile?step=send-notice")));
        let (status, confirm) = me.page(&format!("/console/runs/{run}/actions/reconcile?step=send-notice")).await;
        assert_eq!(status, 200);
        assert!(confirm.contains("What it will do") && confirm.contains("receipt"), "{confirm}");
        // The confirmation was a dry run: nothing changed.
        assert_eq!(stack.view(&run).await["state"], "attention");
        let token = csrf(&confirm);
        let forged = me
            .post_form(
                &format!("/console/runs/{run}/actions/reconcile"),
                &[("csrf", "forged"), ("step", "send-notice"), ("reason", "x")],
            )
            .await;
        assert_eq!(forged.status().as_u16(), 403, "no CSRF token, no action");
        let no_reason = me
            .post_form(
                &format!("/console/runs/{run}/actions/reconcile"),
                &[("csrf", &token), ("step", "send-notice"), ("reason", " ")],
            )
            .await;
        assert_eq!(no_reason.status().as_u16(), 400);
        let done = me
            .post_form(
                &format!("/console/runs/{run}/actions/reconcile"),
                &[("csrf", &token), ("step", "send-notice"), ("reason", "the notice was sent; checking the receipt")],
            )
            .await;
        assert_eq!(done.status().as_u16(), 303);
        until_state(&stack.url, &run, "finished").await;
        let (_, after) = me.page(&format!("/console/runs/{run}")).await;
        assert!(
            after.contains("reason given: the notice was sent; checking the receipt"),
            "the journal keeps the reason"
        );
        assert!(after.contains("operator"), "and who gave it");
    });
}

#[test]
fn a_reader_sees_no_action_and_a_forged_post_is_forbidden() {
    on_runtime(async {
        let stack = stack().await;
        let run = uncertain(&stack, &["console-3"]).await.remove(0);
        let reader = Session::sign_in(&stack.url, READER_TOKEN).await;
        let (status, _) = reader.page(&format!("/console/runs/{run}")).await;
        assert_eq!(status, 404, "another subject's run is not the reader's to know of");
        let (status, _) = reader.page("/console/attention").await;
        assert_eq!(status, 403, "the inbox is for operators");
        let (_, runs) = reader.page("/console/runs").await;
        assert!(!runs.contains(&run));
        let token = csrf(&runs);
        let forged = reader
            .post_form(&format!("/console/runs/{run}/actions/cancel"), &[("csrf", &token), ("reason", "because")])
            .await;
        assert_eq!(forged.status().as_u16(), 404);
        let hold = reader.post_form("/console/restore-hold", &[("csrf", &token), ("change", "place")]).await;
        assert_eq!(hold.status().as_u16(), 403);
        assert_eq!(stack.view(&run).await["state"], "attention", "nothing changed");
    });
}

#[test]
fn three_uncertain_notices_are_reconciled_in_bulk_with_a_result_each() {
    on_runtime(async {
        let stack = stack().await;
        let runs = uncertain(&stack, &["console-bulk-0", "console-bulk-1", "console-bulk-2"]).await;
        let me = Session::sign_in(&stack.url, TOKEN).await;
        let (status, preview) = me
            .page("/console/bulk?action=reconcile&workflow=reviewed-notice&reason=unknown-effect&step=send-notice")
            .await;
        assert_eq!(status, 200);
        assert!(runs.iter().all(|r| preview.contains(r.as_str())), "{preview}");
        assert!(preview.contains("Reconcile 3 runs"), "{preview}");
        let marker = "name=\"runs\" value=\"";
        let start = preview.find(marker).map(|i| i + marker.len()).unwrap_or_else(|| panic!("no runs field"));
        let selected = preview[start..].split('"').next().unwrap_or_default().to_owned();
        let token = csrf(&preview);
        let done = me
            .post_form(
                "/console/bulk",
                &[
                    ("csrf", &token),
                    ("action", "reconcile"),
                    ("workflow", "reviewed-notice"),
                    ("step", "send-notice"),
                    ("runs", &selected),
                    ("reason", "bulk reconcile after a messaging outage"),
                ],
            )
            .await;
        // Redirected to a batch over exactly the previewed runs: a reload acts on nothing again.
        let page = batch_ended(&me, &done).await;
        assert!(page.contains("every one of its 3 runs"), "{page}");
        for run in &runs {
            until_state(&stack.url, run, "finished").await;
        }
        let (_, page) = me.page(&location_of(&done)).await;
        for run in &runs {
            let row = format!("<tr data-run=\"{run}\" data-outcome=\"done\">");
            assert!(page.contains(&row), "{run} is not listed done: {page}");
        }
        assert!(page.contains("finished: notice-sent"), "where each run stands, in words: {page}");
        let (_, journal) = get(&format!("{}/v1/audit?run={}&limit=1000", stack.url, runs[0])).await;
        let entries = journal["entries"].as_array().cloned().unwrap_or_default();
        let said =
            |e: &&Value| e["detail"].as_str().is_some_and(|d| d.contains("bulk reconcile after a messaging outage"));
        assert_eq!(entries.iter().filter(said).count(), 1, "{journal}");
    });
}

/// The run page's journal is newest first, counted, and paged: a page
/// before a position says which entries it shows and links the newest.
#[test]
fn the_journal_is_newest_first_counted_and_paged() {
    on_runtime(async {
        let stack = stack().await;
        let run = stack.admit("console-journal").await;
        until_state(&stack.url, &run, "finished").await;
        let (_, journal) = get(&format!("{}/v1/audit?run={run}&limit=1000", stack.url)).await;
        let positions: Vec<i64> =
            journal["entries"].as_array().into_iter().flatten().filter_map(|e| e["position"].as_i64()).collect();
        let total = positions.len();
        assert!(total > 4, "{journal}");
        let me = Session::sign_in(&stack.url, TOKEN).await;
        let rows = |page: &str| -> Vec<i64> {
            let table = page.split("<table id=\"journal\">").nth(1).unwrap_or_default();
            let table = table.split("</table>").next().unwrap_or_default();
            table.split("<tr><td>").skip(1).filter_map(|row| row.split('<').next()?.parse().ok()).collect()
        };
        let (_, page) = me.page(&format!("/console/runs/{run}")).await;
        assert!(page.contains(&format!("{total} entries, newest first.")), "{page}");
        let newest_first: Vec<i64> = positions.iter().rev().copied().collect();
        assert_eq!(rows(&page), newest_first);
        // Before the third newest: the two newest are skipped and said so.
        let before = newest_first[2];
        let (status, page) = me.page(&format!("/console/runs/{run}?before={before}")).await;
        assert_eq!(status, 200);
        assert_eq!(rows(&page), newest_first[3..].to_vec());
        assert!(page.contains(&format!("{total} entries, newest first; showing 4 to {total}.")), "{page}");
        assert!(page.contains("id=\"journal-newest\""), "{page}");
        assert!(
            page.contains(&format!("data-live=\"/console/runs/{run}?before={before}\"")),
            "the live region keeps the page"
        );
        let (status, bad) = me.page(&format!("/console/runs/{run}?before=soon")).await;
        assert_eq!(status, 400);
        assert!(bad.contains("<code>before</code> is a journal position"), "{bad}");
    });
}

/// A review decided without a notification: the run would wait for its
/// next look, 15 minutes on; "observe now" looks at once, then the run goes on.
#[test]
fn observe_now_brings_a_decided_review_forward() {
    on_runtime(async {
        // The flagship's 900 s between looks: only "observe now" can finish the run within the test.
        let stack = Stack::start(StackOptions { notify: false, ..StackOptions::default() }).await;
        let run = stack.admit("console-observe").await;
        stack.until(&run, "waiting for its review", |i| i["currentStep"] == "await-review").await;
        let me = Session::sign_in(&stack.url, TOKEN).await;
        let (_, page) = me.page(&format!("/console/runs/{run}")).await;
        assert!(page.contains("id=\"observe-await-review\""), "{page}");
        let (status, answer) = stack.decide("review-1", "approved").await;
        assert_eq!(status, 200, "{answer}");
        let token = csrf(&page);
        let observed =
            me.post_form(&format!("/console/runs/{run}/observe"), &[("csrf", &token), ("step", "await-review")]).await;
        assert_eq!(location_of(&observed), format!("/console/runs/{run}"));
        until_state(&stack.url, &run, "finished").await;
        let (_, page) = me.page(&format!("/console/runs/{run}")).await;
        assert!(!page.contains("id=\"observe-await-review\""), "nothing to observe once the wait ended");
        let forged = me.post_form(&format!("/console/runs/{run}/observe"), &[("step", "await-review")]).await;
        assert_ne!(forged.status().as_u16(), 303, "a POST without the CSRF token is refused");
    });
}

/// Where a console POST redirected to (`303`).
fn location_of(response: &reqwest::Response) -> String {
    assert_eq!(response.status().as_u16(), 303, "a POST redirects");
    response.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// The page of the batch `started` redirected to, once the batch ended.
async fn batch_ended(me: &Session, started: &reqwest::Response) -> String {
    let location = location_of(started);
    assert!(location.starts_with("/console/batches/"), "{location}");
    let watch = std::time::Instant::now();
    loop {
        let (status, page) = me.page(&location).await;
        assert_eq!(status, 200);
        if page.contains("<dd id=\"batch-state\">done</dd>") {
            return page;
        }
        assert!(watch.elapsed() < GUARD, "the batch did not end: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn the_restore_hold_banner_comes_and_goes_and_the_live_stream_answers() {
    on_runtime(async {
        let stack = stack().await;
        let me = Session::sign_in(&stack.url, TOKEN).await;
        let (_, deployment) = me.page("/console/deployment").await;
        assert!(deployment.contains("reviewed-notice") && deployment.contains("No restore hold is placed"));
        let token = csrf(&deployment);
        // Placing is confirmed with a reason; without one nothing is placed.
        let (status, confirm) = me.page("/console/restore-hold?change=place").await;
        assert_eq!(status, 200);
        assert!(
            confirm.contains("name=\"reason\"") && confirm.contains("Place the restore hold</button>"),
            "{confirm}"
        );
        let unsaid = me.post_form("/console/restore-hold", &[("csrf", &token), ("change", "place")]).await;
        assert_eq!(unsaid.status().as_u16(), 400);
        assert!(unsaid.text().await.unwrap_or_default().contains("Say why"));
        let (_, hold) = get(&format!("{}/v1/restore-hold", stack.url)).await;
        assert_eq!(hold["placed"], false, "nothing placed without a reason: {hold}");
        let reason = [("csrf", token.as_str()), ("change", "place"), ("reason", "restored from the 02:00 backup")];
        let placed = me.post_form("/console/restore-hold", &reason).await;
        assert_eq!(location_of(&placed), "/console/deployment");
        let (_, hold) = get(&format!("{}/v1/restore-hold", stack.url)).await;
        assert_eq!(hold["reason"], "restored from the 02:00 backup", "{hold}");
        let (_, runs) = me.page("/console/runs").await;
        assert!(runs.contains("id=\"hold-banner\""), "the banner is on every page while the hold is placed");
        let reason = [("csrf", token.as_str()), ("change", "release"), ("reason", "every effect looked at")];
        let released = me.post_form("/console/restore-hold", &reason).await;
        assert_eq!(location_of(&released), "/console/deployment");
        let (_, runs) = me.page("/console/runs").await;
        assert!(!runs.contains("id=\"hold-banner\""));
        let (_, journal) = get(&format!("{}/v1/audit?limit=1000", stack.url)).await;
        let details: Vec<&str> =
            journal["entries"].as_array().into_iter().flatten().filter_map(|e| e["detail"].as_str()).collect();
        assert!(details.contains(&"restore hold released for the deployment; reason given: every effect looked at"));
        // Verifying redirects to a page that recomputes: a reload posts nothing.
        let verified = me.post_form("/console/audit/verify", &[("csrf", &token)]).await;
        assert_eq!(location_of(&verified), "/console/audit/verification");
        let (status, text) = me.page("/console/audit/verification").await;
        assert_eq!(status, 200);
        assert!(text.contains("the chain is intact"), "{text}");

        let live = me.get("/console/live").await;
        assert_eq!(live.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("text/event-stream"));
        let mut live = live;
        let first = tokio::time::timeout(GUARD, live.chunk()).await;
        let chunk = first.ok().and_then(Result::ok).flatten().unwrap_or_default();
        assert!(String::from_utf8_lossy(&chunk).contains("event: ready"), "{chunk:?}");
    });
}

#[test]
fn a_connection_is_paused_and_resumed_from_the_deployment_page_and_its_runs_say_so() {
    on_runtime(async {
        let stack = stack().await;
        let me = Session::sign_in(&stack.url, TOKEN).await;
        let (_, deployment) = me.page("/console/deployment").await;
        assert!(deployment.contains("id=\"connection-registry\"") && deployment.contains("id=\"pause-registry\""));
        let token = csrf(&deployment);

        let form = [("csrf", token.as_str()), ("change", "pause"), ("reason", " ")];
        let blank = me.post_form("/console/connections/registry", &form).await;
        assert_eq!(blank.status().as_u16(), 422, "a reason is required");
        let text = blank.text().await.unwrap_or_default();
        assert!(
            text.contains("id=\"connection-refused\"") && text.contains("a reason of 1 to 500 characters"),
            "{text}"
        );

        let reason = "registry maintenance <b>tonight</b>";
        let form = [("csrf", token.as_str()), ("change", "pause"), ("reason", reason)];
        assert_eq!(me.post_form("/console/connections/registry", &form).await.status().as_u16(), 303);
        let (_, deployment) = me.page("/console/deployment").await;
        assert!(deployment.contains("paused by operator at "), "{deployment}");
        assert!(deployment.contains("registry maintenance &"), "the reason is shown, escaped");
        assert!(!deployment.contains("<b>tonight"), "the reason is escaped");
        assert!(deployment.contains("id=\"resume-registry\""));

        let run = stack.admit("console-paused").await;
        stack.until(&run, "waiting on the registry", |i| i["waiting"].is_object()).await;
        let (_, page) = me.page(&format!("/console/runs/{run}")).await;
        assert!(
            page.contains("id=\"run-waiting\"") && page.contains("waiting: connection registry paused by operator")
        );

        let reader = Session::sign_in(&stack.url, READER_TOKEN).await;
        let form = [("csrf", token.as_str()), ("change", "resume"), ("reason", "r")];
        let forged = reader.post_form("/console/connections/registry", &form).await;
        assert_eq!(forged.status().as_u16(), 403, "a reader may not resume it");

        let form = [("csrf", token.as_str()), ("change", "resume"), ("reason", "the registry is back")];
        assert_eq!(me.post_form("/console/connections/registry", &form).await.status().as_u16(), 303);
        until_state(&stack.url, &run, "finished").await;
        let (_, page) = me.page(&format!("/console/runs/{run}")).await;
        assert!(!page.contains("id=\"run-waiting\""));
    });
}

/// Signing out ends the session on the server, for every process: the old
/// cookie, replayed, opens nothing on the process that signed it out nor on
/// another of the same deployment (two `serve` processes on one database).
#[test]
fn signing_out_ends_the_session_on_every_process() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempdir();
        let (spec, _sims) = deployment(&db.url, None, false).await;
        let ports = free_ports::<2>();
        let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        let mut runtimes = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let place = dir.path().join(format!("p{i}"));
            std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("{e}"));
            let one = DeploymentSpec { listen: format!("127.0.0.1:{port}"), ..spec.clone() };
            runtimes.push(one.write(&place));
        }
        let _serve = serve_each(&runtimes, &urls, dir.path()).await;

        let first = Session::sign_in(&urls[0], TOKEN).await;
        let mut second = Session::new(&urls[1]);
        second.cookie.clone_from(&first.cookie);
        let (status, html) = second.page("/console/runs").await;
        assert_eq!(status, 200, "one session for the deployment");
        let out = first.post_form("/console/sign-out", &[("csrf", &csrf(&html))]).await;
        assert_eq!(out.status().as_u16(), 303);
        for (session, which) in [(&first, "the process that signed out"), (&second, "another process")] {
            let replayed = session.get("/console/runs").await;
            let to = replayed.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            assert_eq!(replayed.status().as_u16(), 303, "the old cookie is refused by {which}");
            assert!(to.starts_with("/console/sign-in"), "{which} asks to sign in again: {to}");
            let posted = session.post_form("/console/sign-out", &[("csrf", &csrf(&html))]).await;
            assert_eq!(posted.status().as_u16(), 303, "no action either");
        }
        // Signing in again opens a new session.
        let again = Session::sign_in(&urls[1], TOKEN).await;
        assert_eq!(again.page("/console/runs").await.0, 200);
    });
}

/// Every console error is a page in words with the way back: an unknown
/// console path (`404`), a form from another session (`403`), a role not
/// held (`403`) — HTML with the sections' links, names shown as code, not
/// bare text with Markdown backticks.
#[test]
fn console_errors_are_pages_in_words_with_navigation() {
    on_runtime(async {
        let stack = stack().await;
        let session = Session::sign_in(&stack.url, TOKEN).await;
        let reader = Session::sign_in(&stack.url, READER_TOKEN).await;
        let unknown = session.get("/console/no-such-page").await;
        let forged = session.post_form("/console/audit/verify", &[("csrf", "not-this-sessions")]).await;
        let (_, html) = reader.page("/console/deployment").await;
        let refused = reader.post_form("/console/audit/verify", &[("csrf", &csrf(&html))]).await;
        for (response, status, words) in [
            (unknown, 404, "There is no console page at <code>/console/no-such-page</code>."),
            (forged, 403, "reload the page and send it again"),
            (refused, 403, "You do not hold the <code>operate</code> role for every workflow"),
        ] {
            assert_eq!(response.status().as_u16(), status);
            let kind = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            let page = response.text().await.unwrap_or_default();
            assert!(kind.starts_with("text/html"), "{kind}: {page}");
            assert!(page.contains(words), "{page}");
            assert!(!page.contains('`'), "no Markdown backticks: {page}");
            for link in ["href=\"/console/runs\"", "href=\"/console/attention\"", "href=\"/console/deployment\""] {
                assert!(page.contains(link), "{link} missing: {page}");
            }
        }
    });
}

/// A bulk action over one run speaks of one run ("Reconcile 1 run", "its 1 run was").
#[test]
fn a_bulk_action_over_one_run_says_run() {
    on_runtime(async {
        let stack = stack().await;
        uncertain(&stack, &["console-bulk-one"]).await;
        let me = Session::sign_in(&stack.url, TOKEN).await;
        let (status, preview) = me
            .page("/console/bulk?action=reconcile&workflow=reviewed-notice&reason=unknown-effect&step=send-notice")
            .await;
        assert_eq!(status, 200);
        assert!(preview.contains("Reconcile 1 run<") && !preview.contains("1 runs"), "{preview}");
        let marker = "name=\"runs\" value=\"";
        let start = preview.find(marker).map(|i| i + marker.len()).unwrap_or_else(|| panic!("no runs field"));
        let selected = preview[start..].split('"').next().unwrap_or_default().to_owned();
        let token = csrf(&preview);
        let form = [
            ("csrf", token.as_str()),
            ("action", "reconcile"),
            ("workflow", "reviewed-notice"),
            ("step", "send-notice"),
            ("runs", selected.as_str()),
            ("reason", "one notice lost in the outage"),
        ];
        let done = me.post_form("/console/bulk", &form).await;
        let result = batch_ended(&me, &done).await;
        assert!(result.contains("every one of its 1 run was") && !result.contains("1 runs"), "{result}");
    });
}

/// A group's bulk preview offers a batch over all its matching runs; starting
/// it redirects to the batch's page (a reload starts nothing), which follows
/// it to the end.
#[test]
fn a_batch_over_a_whole_group_is_started_from_its_preview_and_followed_on_its_page() {
    on_runtime(async {
        let stack = stack().await;
        let runs = uncertain(&stack, &["console-batch-0", "console-batch-1"]).await;
        let me = Session::sign_in(&stack.url, TOKEN).await;
        let (status, preview) = me
            .page("/console/bulk?action=reconcile&workflow=reviewed-notice&reason=unknown-effect&step=send-notice")
            .await;
        assert_eq!(status, 200);
        assert!(preview.contains("Reconcile all 2 matching runs"), "{preview}");
        let token = csrf(&preview);
        let form = |reason: &'static str| -> Vec<(&'static str, String)> {
            [("action", "reconcile"), ("workflow", "reviewed-notice"), ("reason", "unknown-effect")]
                .into_iter()
                .chain([("step", "send-notice"), ("why", reason)])
                .map(|(k, v)| (k, v.to_owned()))
                .chain([("csrf", token.clone())])
                .collect()
        };
        let refused = me.post_form("/console/batches", &borrowed(&form("   "))).await;
        assert_eq!(refused.status().as_u16(), 400);
        assert!(refused.text().await.unwrap_or_default().contains("Say why"));

        let said = form("messaging outage");
        let said = borrowed(&said);
        let started = me.post_form("/console/batches", &said).await;
        assert_eq!(started.status().as_u16(), 303, "redirect after the POST");
        let location = started.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert!(location.starts_with("/console/batches/"), "{location}");
        let watch = std::time::Instant::now();
        loop {
            let (status, page) = me.page(&location).await;
            assert_eq!(status, 200);
            // Followed by the live updates (its region's own URL), never by reloading the page.
            assert!(page.contains(&format!("data-live=\"{location}\"")), "{page}");
            assert!(!page.contains("http-equiv=\"refresh\""), "{page}");
            if page.contains("<dd id=\"batch-state\">done</dd>") {
                assert!(page.contains("<dd id=\"batch-done\">2</dd>"), "{page}");
                let (_, fragment) = me.page(&format!("{location}?fragment=1")).await;
                assert!(fragment.contains("id=\"batch-state\"") && !fragment.contains("<html"), "{fragment}");
                break;
            }
            assert!(watch.elapsed() < GUARD, "the batch did not end: {page}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for run in &runs {
            until_state(&stack.url, run, "finished").await;
        }
        let (status, missing) = me.page("/console/batches/0199c8a0-0000-7000-8000-000000000000").await;
        assert_eq!(status, 404);
        assert!(missing.contains("There is no batch"), "{missing}");
    });
}

/// The run list's filters start a batch over every run they match: the
/// machine's dry run first (counted, refusals by code), then the batch.
#[test]
fn a_batch_over_every_run_a_filter_matches_shows_its_dry_run_first() {
    on_runtime(async {
        let stack = stack().await;
        let mut runs = Vec::new();
        for key in ["console-filter-0", "console-filter-1"] {
            let run = stack.admit(key).await;
            until_state(&stack.url, &run, "finished").await;
            runs.push(run);
        }
        let me = Session::sign_in(&stack.url, TOKEN).await;
        let (_, list) = me.page("/console/runs?workflow=reviewed-notice&state=finished").await;
        let links = list.split("id=\"runs-batch\"").nth(1).unwrap_or_default().split("</p>").next().unwrap_or_default();
        let links = links.replace("&#38;", "&").replace("&amp;", "&");
        assert!(links.contains("/console/batches/new?action=cancel&workflow=reviewed-notice&state=finished"), "{list}");
        let (status, dry) = me.page("/console/batches/new?action=cancel&workflow=reviewed-notice&state=finished").await;
        assert_eq!(status, 200, "{dry}");
        assert!(dry.contains("2 runs match now"), "{dry}");
        assert!(dry.contains("The rules would refuse 2: <code>nothing-to-do</code>"), "{dry}");
        assert!(dry.contains("Cancel all 2 matching runs"), "{dry}");
        let (status, unusable) = me.page("/console/batches/new?action=cancel&state=sleeping").await;
        assert_eq!(status, 400, "{unusable}");
        let token = csrf(&dry);
        let form = [
            ("csrf", token.as_str()),
            ("action", "cancel"),
            ("workflow", "reviewed-notice"),
            ("state", "finished"),
            ("why", "tidying the finished runs"),
        ];
        let started = me.post_form("/console/batches", &form).await;
        let page = batch_ended(&me, &started).await;
        assert!(page.contains("<dt>Refused</dt><dd><code>nothing-to-do</code>: 2</dd>"), "{page}");
        for run in &runs {
            assert!(page.contains(&format!("<tr data-run=\"{run}\" data-outcome=\"refused\">")), "{page}");
        }
        assert!(page.contains("refused by the rules: nothing-to-do"), "{page}");
        let (_, batch) =
            get(&format!("{}/v1/batches/{}", stack.url, location_of(&started).rsplit('/').next().unwrap_or_default()))
                .await;
        assert_eq!(batch["filter"], serde_json::json!({"workflow": "reviewed-notice", "state": "finished"}), "{batch}");
    });
}

fn borrowed<'a>(pairs: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// A filter the console cannot use is named on a 400 page, never answered
/// with "No run matches." or ignored.
#[test]
fn an_unusable_filter_is_named_not_silently_ignored() {
    on_runtime(async {
        let stack = stack().await;
        let me = Session::sign_in(&stack.url, TOKEN).await;
        for (path, words) in [
            ("/console/runs?revision=sha256:abc", "<code>revision</code> is a whole revision"),
            ("/console/runs?run=not-a-run", "<code>run</code> is a run id"),
            ("/console/runs?from=2026-12-02&to=2026-12-01", "<code>admitted from</code> must be before"),
            ("/console/runs?colour=blue", "<code>colour</code> is not a filter"),
            ("/console/attention?colour=blue", "<code>colour</code> is not a filter"),
            ("/console/bulk?action=cancel", "needs its group&#39;s <code>workflow</code>"),
        ] {
            let (status, page) = me.page(path).await;
            assert_eq!(status, 400, "{path}: {page}");
            assert!(page.contains(words), "{path}: {page}");
            assert!(!page.contains("No run matches."), "{path}: {page}");
        }
    });
}
