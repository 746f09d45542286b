//! `coordinatorctl test`'s work on 1 000 generated cases: check the project,
//! decode scenarios.yaml, compile, run every case. Target: under 2 s.
//! Run: `cargo bench -p coordinator-bench --bench scenarios`
//! (the same project is written to target/bench-scenarios for timing the binary:
//! `hyperfine 'target/release/coordinatorctl test --project target/bench-scenarios'`).

use std::path::Path;
use std::time::Instant as Clock;

use coordinator_bench::{DirProject, many_cases};
use coordinator_core::check::{ProjectSource, check_project};
use coordinator_core::decode::{Decoder, scenarios};
use coordinator_core::machine::Settings;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::scenario::run_all;
use coordinator_core::yaml;
use coordinator_functions::Limits;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = root.join("target/bench-scenarios");
    if let Err(e) = many_cases(&root.join("examples/reviewed-notice"), &out, 1000) {
        panic!("cannot write the generated project: {e}");
    }
    let start = Clock::now();
    let project = DirProject(out.clone());
    let report = match check_project(&project) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    let Some(checked) = report.checked else { panic!("the project must check clean") };
    let text = match project.read("scenarios.yaml") {
        Ok(Some(t)) => t,
        other => panic!("{other:?}"),
    };
    let node = match yaml::parse("scenarios.yaml", &text) {
        Ok(n) => n,
        Err(d) => panic!("{d:?}"),
    };
    let mut decoder = Decoder::new("scenarios.yaml");
    let Some(file) = scenarios::decode(&mut decoder, &node) else { panic!("{:?}", decoder.diagnostics) };
    let wf = match Workflow::compile(checked.definition, Limits::default()) {
        Ok(w) => w,
        Err(e) => panic!("{e}"),
    };
    let reports =
        coordinator_functions::with_call_stack(&Limits::default(), || run_all(&wf, &file.cases, &Settings::default()));
    let seconds = start.elapsed().as_secs_f64();
    let passed = reports.iter().filter(|r| r.passed).count();
    assert_eq!(passed, reports.len(), "every generated case passes");
    println!("scenarios: {} cases checked, decoded and run in {:.3} s", reports.len(), seconds);
}
