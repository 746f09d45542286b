//! `coordinatorctl test`: run the project's `scenarios.yaml` on a virtual clock
//! through the same state machine as the service, and its schedules' firings.

use std::path::Path;

use coordinator_core::check::ProjectSource;
use coordinator_core::decode::{self, Decoder};
use coordinator_core::machine::Settings;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::scenario::{self, CaseReport};
use coordinator_core::yaml;
use coordinator_functions::Limits;

use crate::cmd_check;
use crate::project_dir::ProjectDir;
use crate::render::{self, Sources};
use crate::{Exit, Format};

/// The scenarios file of a project.
pub const SCENARIOS_FILE: &str = "scenarios.yaml";

/// Runs `test`.
pub fn run(project: &Path, format: Format) -> Exit {
    let report = match cmd_check::load(project, format, "test", false) {
        Ok(report) => report,
        Err(exit) => return exit,
    };
    let Some(checked) = report.checked else { return Exit::Refused };
    let dir = ProjectDir::new(project);
    let text = match dir.read(SCENARIOS_FILE) {
        Ok(Some(text)) => text,
        Ok(None) => {
            let message = format!("{} has no {SCENARIOS_FILE}", project.display());
            match format {
                Format::Human => {
                    eprintln!("error: {message}");
                    eprintln!("help: write cases in {SCENARIOS_FILE} (see docs/reference/scenarios.md)");
                }
                Format::Json => render::print_json(&serde_json::json!({
                    "ok": false, "command": "test", "workflow": checked.definition.workflow,
                    "revision": checked.revision, "error": message, "diagnostics": [],
                })),
            }
            return Exit::Refused;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Unavailable;
        }
    };
    let root = match yaml::parse(SCENARIOS_FILE, &text) {
        Ok(root) => root,
        Err(d) => return refuse_file(vec![d], &text, format),
    };
    let mut decoder = Decoder::new(SCENARIOS_FILE);
    let scenarios = decode::scenarios::decode(&mut decoder, &root);
    let Some(scenarios) = scenarios.filter(|_| decoder.diagnostics.is_empty()) else {
        return refuse_file(decoder.diagnostics, &text, format);
    };
    let workflow = match Workflow::compile(checked.definition, Limits::default()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Refused;
        }
    };
    let (cases, firings) = (&scenarios.cases, &scenarios.firings);
    let reports = coordinator_functions::with_call_stack(&Limits::default(), || {
        let mut reports = scenario::run_all(&workflow, cases, &Settings::default());
        reports.extend(firings.iter().map(|case| scenario::run_firings(&workflow, case)));
        reports
    });
    let failed = reports.iter().filter(|r| !r.passed).count();
    match format {
        Format::Human => render::out(&human(&reports)),
        Format::Json => {
            let mut value = scenario::summary(&reports);
            value["ok"] = serde_json::json!(failed == 0);
            value["command"] = serde_json::json!("test");
            value["workflow"] = serde_json::json!(workflow.definition.workflow);
            value["revision"] = serde_json::json!(workflow.revision);
            render::print_json(&value);
        }
    }
    if failed == 0 { Exit::Ok } else { Exit::Refused }
}

fn refuse_file(diagnostics: Vec<coordinator_core::diagnostic::Diagnostic>, text: &str, format: Format) -> Exit {
    match format {
        Format::Human => render::human(&diagnostics, &Sources::new(vec![(SCENARIOS_FILE, text)])),
        Format::Json => render::print_json(&render::report("test", false, None, None, &diagnostics)),
    }
    Exit::Refused
}

fn human(reports: &[CaseReport]) -> String {
    let mut out = String::new();
    for r in reports {
        if r.passed {
            out.push_str(&format!("pass  {}\n", r.id));
        } else {
            let problem = r.problem.as_ref().map_or_else(String::new, ToString::to_string);
            out.push_str(&format!("FAIL  {}\n      {problem}\n", r.id));
            if let Some(actual) = &r.actual {
                out.push_str(&format!(
                    "      the run: state {}, path {}, {} s\n",
                    actual.state.as_str(),
                    actual.path.join(" → "),
                    actual.elapsed_seconds
                ));
            }
        }
    }
    let passed = reports.iter().filter(|r| r.passed).count();
    out.push_str(&format!("{passed} passed, {} failed\n", reports.len() - passed));
    out
}
