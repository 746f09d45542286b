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
    match format {
        Format::Human => render::out(&explain::human(&checked)),
        Format::Json => render::print_json(&explain::json(&checked)),
    }
    Exit::Ok
}
