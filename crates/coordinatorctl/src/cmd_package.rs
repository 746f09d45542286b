//! `coordinatorctl package`: freeze a checked project into a package file.

use std::path::Path;

use coordinator_core::package;
use serde_json::json;

use crate::cmd_check;
use crate::render;
use crate::{Exit, Format};

/// Runs `package`.
pub fn run(project: &Path, output: &Path, format: Format) -> Exit {
    let report = match cmd_check::load(project, format, "package", false) {
        Ok(report) => report,
        Err(exit) => return exit,
    };
    let Some(checked) = report.checked else { return Exit::Refused };
    let built = match package::build(&checked, env!("CARGO_PKG_VERSION")) {
        Ok(built) => built,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Refused;
        }
    };
    if let Err(e) = std::fs::write(output, &built.bytes) {
        eprintln!("error: cannot write {}: {e}", output.display());
        return Exit::Unavailable;
    }
    match format {
        Format::Human => {
            crate::render::out(&format!("packaged {} {}\n", checked.definition.workflow, checked.revision));
            crate::render::out(&format!("  file:   {}\n", output.display()));
            crate::render::out(&format!("  digest: {}\n", built.digest));
        }
        Format::Json => render::print_json(&json!({
            "ok": true,
            "command": "package",
            "workflow": checked.definition.workflow,
            "revision": checked.revision,
            "digest": built.digest,
            "output": output.display().to_string(),
            "diagnostics": report.diagnostics,
        })),
    }
    Exit::Ok
}
