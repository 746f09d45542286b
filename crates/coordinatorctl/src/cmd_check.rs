//! `coordinatorctl check`: prove a project, optionally against a deployment's
//! `runtime.yaml`, and print its revision.

use std::path::Path;

use coordinator_core::check::runtime::{PackageSource, RuntimeInput, SecretProbe};
use coordinator_core::check::{Report, SourceError, check_project, check_project_with_runtime};

use crate::environment::Environment;
use crate::project_dir::ProjectDir;
use crate::render::{self, Sources};
use crate::{Exit, Format};

/// `--runtime FILE [--environment]`.
pub struct RuntimeArgs<'a> {
    /// The runtime file, as given (diagnostics name it so).
    pub file: &'a Path,
    /// Whether secret references must resolve on this machine.
    pub environment: bool,
}

/// Checks the project and prints the outcome; the loaded report is returned
/// to commands that go on with an accepted project.
pub fn load(project: &Path, format: Format, command: &str, deny_warnings: bool) -> Result<Report, Exit> {
    load_with(project, None, format, command, deny_warnings)
}

/// [`load`], checking against a runtime file too when one is given.
fn load_with(
    project: &Path,
    runtime: Option<&RuntimeArgs<'_>>,
    format: Format,
    command: &str,
    deny_warnings: bool,
) -> Result<Report, Exit> {
    let source = ProjectDir::new(project);
    let checked = match runtime {
        None => check_project(&source),
        Some(args) => {
            let text = std::fs::read_to_string(args.file).map_err(|e| {
                let message = format!("{}: cannot read the runtime file: {e}", args.file.display());
                unavailable_message(&message, format, command)
            })?;
            let file = args.file.display().to_string();
            let environment = args.environment.then(|| Environment::new(args.file));
            let input = RuntimeInput {
                file: &file,
                text: &text,
                secrets: environment.as_ref().map(|e| e as &dyn SecretProbe),
                package: environment.as_ref().map(|e| e as &dyn PackageSource),
            };
            check_project_with_runtime(&source, &input)
        }
    };
    let report = match checked {
        Ok(report) => report,
        Err(e) => return Err(unavailable(project, &e, format, command)),
    };
    let refused = !report.ok() || (deny_warnings && !report.diagnostics.is_empty());
    if format == Format::Human || refused {
        print(&report, format, command, refused);
    }
    if refused { Err(Exit::Refused) } else { Ok(report) }
}

/// Prints the diagnostics (human) or the whole report (JSON).
fn print(report: &Report, format: Format, command: &str, refused: bool) {
    match format {
        Format::Human => {
            let files: Vec<(&str, &str)> = report.files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
            render::human(&report.diagnostics, &Sources::new(files));
            let errors = report.diagnostics.iter().filter(|d| d.is_error()).count();
            let warnings = report.diagnostics.len() - errors;
            if refused {
                eprintln!("refused: {errors} error(s), {warnings} warning(s)");
            }
        }
        Format::Json => {
            let value =
                render::report(command, !refused, report.workflow.as_deref(), report.revision(), &report.diagnostics);
            render::print_json(&value);
        }
    }
}

/// Reports an unreadable project and returns exit code 3.
pub fn unavailable(project: &Path, error: &SourceError, format: Format, command: &str) -> Exit {
    unavailable_message(&format!("{}: {error}", project.display()), format, command)
}

/// Reports a resource that cannot be read and returns exit code 3.
fn unavailable_message(message: &str, format: Format, command: &str) -> Exit {
    match format {
        Format::Human => eprintln!("error: {message}"),
        Format::Json => render::print_json(&serde_json::json!({
            "ok": false, "command": command, "workflow": null, "revision": null, "diagnostics": [], "error": message,
        })),
    }
    Exit::Unavailable
}

/// The search keys of an accepted project: values taken from run inputs and
/// stored in clear (their authors declare them not secret).
fn clear_keys(report: &Report) -> Vec<String> {
    report.checked.iter().flat_map(|c| c.workflow.search_keys.keys().cloned()).collect()
}

/// Runs `check`.
pub fn run(project: &Path, runtime: Option<&RuntimeArgs<'_>>, format: Format, deny_warnings: bool) -> Exit {
    match load_with(project, runtime, format, "check", deny_warnings) {
        Err(exit) => exit,
        Ok(report) => {
            match format {
                Format::Human => {
                    let warnings = report.diagnostics.len();
                    crate::render::out(&format!(
                        "ok: {} {}{}\n",
                        report.workflow.as_deref().unwrap_or("?"),
                        report.revision().unwrap_or("?"),
                        if warnings > 0 { format!(" ({warnings} warning(s))") } else { String::new() }
                    ));
                    let keys = clear_keys(&report);
                    if !keys.is_empty() {
                        crate::render::out(&format!(
                            "note: stored in clear and indexed, declared not secret: search key(s) {}\n",
                            keys.join(", ")
                        ));
                    }
                }
                Format::Json => {
                    let mut value = render::report(
                        "check",
                        true,
                        report.workflow.as_deref(),
                        report.revision(),
                        &report.diagnostics,
                    );
                    // Only for a project that has search keys: the report keeps its shape otherwise.
                    let keys = clear_keys(&report);
                    if !keys.is_empty() {
                        value["searchKeysInClear"] = serde_json::json!(keys);
                    }
                    render::print_json(&value);
                }
            }
            Exit::Ok
        }
    }
}
