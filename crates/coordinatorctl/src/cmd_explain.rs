//! `coordinatorctl explain`: what each call does and how its run can go on.

use std::path::Path;

use crate::cmd_check;
use crate::explain;
use crate::render;
use crate::{Exit, Format};

/// Runs `explain`.
pub fn run(project: &Path, format: Format) -> Exit {
    let report = match cmd_check::load(project, format, "explain", false) {
        Ok(report) => report,
        Err(exit) => return exit,
    };
    let Some(checked) = report.checked else { return Exit::Refused };
    // The schedules' next firings are counted from now.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let now = i64::try_from(now).unwrap_or(i64::MAX);
    match format {
        Format::Human => render::out(&explain::human(&checked, now)),
        Format::Json => render::print_json(&explain::json(&checked, now)),
    }
    Exit::Ok
}
