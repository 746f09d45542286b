//! A `scenarios.yaml` from bytes, decoded (`decode::scenarios`, as
//! `coordinatorctl test` does) and, when it decodes cleanly, run against an
//! example workflow on the virtual clock (`scenario::run_all`). Every
//! diagnostic points inside the text; each case gets one report, in order,
//! under its id; a passed case has no problem; the runner, being pure, gives
//! the same reports twice.
#![no_main]

use std::sync::LazyLock;

use coordinator_core::decode::{self, Decoder};
use coordinator_core::machine::Settings;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::{scenario, yaml};
use coordinator_fuzz::{EXAMPLES, assert_spans_inside, compiled};
use libfuzzer_sys::fuzz_target;

const SCENARIOS_FILE: &str = "scenarios.yaml";

static WORKFLOWS: LazyLock<Vec<Workflow>> = LazyLock::new(|| EXAMPLES.iter().map(compiled).collect());

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let root = match yaml::parse(SCENARIOS_FILE, text) {
        Ok(root) => root,
        Err(d) => return assert_spans_inside(&[d], &|_| Some(text.to_owned())),
    };
    let mut decoder = Decoder::new(SCENARIOS_FILE);
    let scenarios = decode::scenarios::decode(&mut decoder, &root);
    assert_spans_inside(&decoder.diagnostics, &|_| Some(text.to_owned()));
    let Some(scenarios) = scenarios.filter(|_| decoder.diagnostics.is_empty()) else { return };
    let workflow = &WORKFLOWS[usize::from(which) % WORKFLOWS.len()];
    let reports = scenario::run_all(workflow, &scenarios.cases, &Settings::default());
    assert_eq!(reports.len(), scenarios.cases.len());
    for (report, case) in reports.iter().zip(&scenarios.cases) {
        assert_eq!(report.id, case.id);
        assert!(!report.passed || report.problem.is_none(), "case {} passed with a problem", case.id);
    }
    assert_eq!(
        scenario::run_all(workflow, &scenarios.cases, &Settings::default()),
        reports,
        "the runner is not deterministic"
    );
});
