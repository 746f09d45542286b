//! `coordinatorctl graph`: draw the step graph as Mermaid, DOT or SVG.

use std::path::Path;

use crate::cmd_check;
use crate::{Exit, Format, GraphFormat};

/// Runs `graph`.
pub fn run(project: &Path, format: GraphFormat, output: Option<&Path>) -> Exit {
    let report = match cmd_check::load(project, Format::Human, "graph", false) {
        Ok(report) => report,
        Err(exit) => return exit,
    };
    let Some(checked) = report.checked else { return Exit::Refused };
    let text = match format {
        GraphFormat::Mermaid => coordinator_graph::mermaid(&checked.definition),
        GraphFormat::Dot => coordinator_graph::dot(&checked.definition),
        GraphFormat::Svg => coordinator_graph::svg(&checked.definition),
    };
    match output {
        None => {
            crate::render::out(&text);
            Exit::Ok
        }
        Some(path) => match std::fs::write(path, text) {
            Ok(()) => Exit::Ok,
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", path.display());
                Exit::Unavailable
            }
        },
    }
}
