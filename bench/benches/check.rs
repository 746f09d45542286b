//! `check` of a generated 1 000-step project with 200 functions.
//! Run: `cargo bench -p coordinator-bench --bench check` (target: under 200 ms).

use std::time::{Duration, Instant};

use coordinator_bench::large_project;
use coordinator_core::check::check_project;

fn main() {
    let project = large_project(1000, 200);
    let mut times = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let report = match check_project(&project) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        times.push(start.elapsed());
        assert!(report.ok(), "the generated project must check clean: {:?}", report.diagnostics.first());
    }
    times.sort();
    let median = times[times.len() / 2];
    let min = times[0];
    let max = times[times.len() - 1];
    println!(
        "check, 1000 steps, 200 functions: median {} ms, min {} ms, max {} ms (20 runs)",
        ms(median),
        ms(min),
        ms(max)
    );
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}
