//! Decisions per second of the state machine alone, on reviewed-notice runs
//! (Rhai mappings included): admission, three calls, one observation, a choose
//! and a finish per run. Target: at least 20 000 decisions per second on one core.
//! Run: `cargo bench -p coordinator-bench --bench machine`

use std::path::Path;
use std::time::Instant as Clock;

use coordinator_bench::DirProject;
use coordinator_core::check::check_project;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event, Observation, Timer};
use coordinator_core::machine::run::Run;
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Settings, decide};
use coordinator_functions::Limits;
use serde_json::json;

fn main() {
    // The service's workers run with a stack that fits function calls; so does this bench.
    coordinator_functions::with_call_stack(&Limits::default(), bench);
}

fn bench() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/reviewed-notice");
    let report = match check_project(&DirProject(dir)) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    let Some(checked) = report.checked else { panic!("reviewed-notice must check clean") };
    let wf = match Workflow::compile(checked.definition, Limits::default()) {
        Ok(w) => w,
        Err(e) => panic!("{e}"),
    };
    let settings = Settings::default();
    let input =
        json!({"applicationId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", "recipient": {"kind": "person", "id": "p-1"}});
    let record = json!({"recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", "recordType": "application", "revision": 1, "data": {}});
    let runs = 2000;
    let mut decisions = 0u64;
    let start = Clock::now();
    for i in 0..runs {
        let t0 = Instant(1_760_000_000_000 + i);
        let mut run = Run::new(&format!("run-{i}"), &wf.revision, t0, input.clone());
        let mut now = t0;
        let step = |run: &mut Run, event: Event, now: Instant| {
            let t = decide(&wf, run, &event, now, &settings);
            assert_eq!(t.outcome, Outcome::Applied, "{event:?}");
            for a in &t.actions {
                run.apply(a);
            }
        };
        step(&mut run, Event::Admitted, now);
        let answer = |output| CallAnswer::Accepted { output, completions: Default::default() };
        step(
            &mut run,
            Event::CallAnswered { step: "read-application".into(), attempt: 1, answer: answer(record.clone()) },
            now,
        );
        let review = CallAnswer::Accepted {
            output: json!({"reviewRequestId": "r-1"}),
            completions: [("result".to_owned(), "r-1".to_owned())].into(),
        };
        step(&mut run, Event::CallAnswered { step: "request-review".into(), attempt: 1, answer: review }, now);
        now = now.plus_seconds(900);
        step(&mut run, Event::TimerDue { timer: Timer::Observation { step: "await-review".into() } }, now);
        let done = Observation::Complete { value: json!({"decision": "approved"}) };
        step(&mut run, Event::CompletionObserved { step: "await-review".into(), seq: 1, answer: done }, now);
        let sent = answer(json!({"messageId": "m-1", "status": "queued"}));
        step(&mut run, Event::CallAnswered { step: "send-notice".into(), attempt: 1, answer: sent }, now);
        assert!(run.state.is_terminal());
        decisions += 6;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "machine: {runs} reviewed-notice runs, {decisions} decisions in {:.3} s: {:.0} decisions/s, {:.0} runs/s",
        seconds,
        decisions as f64 / seconds,
        runs as f64 / seconds
    );
}
