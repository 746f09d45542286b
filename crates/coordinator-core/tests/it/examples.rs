//! The shipped examples check clean.

use crate::support::{check, example, summary};

fn assert_clean(name: &str) {
    let report = check(&example(name));
    let errors: Vec<_> = report.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "{name}:\n{}\n{errors:#?}", summary(&report));
    assert!(report.revision().is_some_and(|r| r.starts_with("sha256:") && r.len() == 71));
}

#[test]
fn reviewed_notice_checks_clean() {
    assert_clean("reviewed-notice");
}

#[test]
fn appointment_reminder_checks_clean() {
    assert_clean("appointment-reminder");
}

#[test]
fn permit_check_checks_clean() {
    assert_clean("permit-check");
}

#[test]
fn desk_digest_checks_clean() {
    assert_clean("desk-digest");
}

#[test]
fn examples_have_no_warnings() {
    for name in ["reviewed-notice", "appointment-reminder", "permit-check", "desk-digest"] {
        let report = check(&example(name));
        assert!(report.diagnostics.is_empty(), "{name}:\n{}", summary(&report));
    }
}
