//! Snapshots of a run's page as rendered for each example project (the HTML
//! a browser gets, with a fixed run, clock and session): a change to a
//! template or to what a page says shows up as a reviewed diff. The graph's
//! own SVG is snapshotted by `coordinator-graph`.

use std::path::PathBuf;

use askama::Template;
use coordinator_core::check::check_project;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::Event;
use coordinator_core::machine::run::Run;
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Settings, advance};
use coordinator_functions::Limits;
use coordinator_store::RunRow;

use super::{EntryRow, JournalView, render_body, run_page};
use crate::console::Chrome;
use crate::process::project_dir::ProjectDir;

const RUN: &str = "01900000-0000-7000-8000-000000000001";
const ADMITTED: Instant = Instant(1_780_000_000_000);

fn example(name: &str) -> (Workflow, serde_json::Value) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    let checked = match check_project(&ProjectDir::new(dir.clone())).map(|r| r.checked) {
        Ok(Some(checked)) => checked,
        other => panic!("{name}: {other:?}"),
    };
    let wf = match Workflow::compile(checked.definition, Limits::default()) {
        Ok(wf) => wf,
        Err(e) => panic!("{name}: {e}"),
    };
    let input = match std::fs::read_to_string(dir.join("input.json")).map(|t| serde_json::from_str(&t)) {
        Ok(Ok(input)) => input,
        other => panic!("{name}: {other:?}"),
    };
    (wf, input)
}

fn rendered(name: &str) -> String {
    let (wf, input) = example(name);
    let settings = Settings::default();
    let mut run = Run::new(RUN, &wf.revision, ADMITTED, input);
    let _ = advance(&wf, &mut run, &Event::Admitted, ADMITTED, &settings);
    let row = RunRow {
        id: RUN.to_owned(),
        workflow: wf.definition.workflow.clone(),
        revision: wf.revision.clone(),
        owner: "operator".to_owned(),
        idempotency_key: Some("snapshot".to_owned()),
        input_digest: "sha256:00".to_owned(),
        state: run.state,
        held: run.held,
        admitted_at: ADMITTED.0,
        updated_at: ADMITTED.0,
        version: 1,
        snapshot: Vec::new(),
        trace_parent: None,
        outcome: run.outcome.clone(),
        attention_step: None,
        attention_since: None,
    };
    let entries = vec![EntryRow {
        position: 1,
        at: ADMITTED.to_rfc3339(),
        kind: "admission".to_owned(),
        step: String::new(),
        actor: "operator".to_owned(),
        detail: format!("admitted on revision {}", wf.revision),
    }];
    let journal = JournalView { entries, total: 1, skipped: 0, older: None };
    let body = render_body(&wf, &run, &row, ADMITTED, &settings, true, journal);
    let chrome = Chrome { subject: "operator".to_owned(), csrf: "csrf-token".to_owned(), section: "runs", hold: None };
    match run_page(chrome, body).render() {
        Ok(html) => html,
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn the_run_page_of_each_example() {
    for name in ["reviewed-notice", "appointment-reminder", "permit-check"] {
        let html = rendered(name);
        assert!(!html.contains("person-4711"), "no input on the page");
        insta::assert_snapshot!(format!("run-page-{name}"), html);
    }
}
