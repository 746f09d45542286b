//! What the service's answers mean for the operating commands: the exit code,
//! the error line (`error[CODE]: message`, naming the rule of a refusal), and
//! the JSON report — the service's JSON with `ok`, `command` and `httpStatus`
//! added, or `{ok: false, command, httpStatus: null, code, message}` when
//! there is no answer (`client.*` codes).
//!
//! Exit codes: `0` the service accepted or answered (`2xx`, a no-op's `note`
//! included); `1` it refused (`4xx` with a code, `403 auth.forbidden`
//! included: the request is wrong for this caller); `3` a needed resource is
//! unavailable: no connection, no answer in time, an unreadable token file,
//! `401 auth.unauthenticated` (the credential is missing or not valid), a
//! `5xx`, or an answer that is not the API's. `2` (usage) is clap's.

use serde_json::{Map, Value, json};

use crate::client::{Answer, ClientError, ServiceArgs};
use crate::render;
use crate::{Exit, Format};

/// The exit code of an HTTP status.
pub fn exit_of(status: u16) -> Exit {
    match status {
        200..=299 => Exit::Ok,
        401 => Exit::Unavailable,
        400..=499 => Exit::Refused,
        _ => Exit::Unavailable,
    }
}

/// Prints the outcome of one request and returns its exit code. `human`
/// renders an accepted answer's body for people.
pub fn report(
    args: &ServiceArgs,
    command: &str,
    result: Result<Answer, ClientError>,
    human: impl FnOnce(&Value) -> String,
) -> Exit {
    match result {
        Ok(answer) => answered(args, command, &answer, human),
        Err(error) => failed(args.format, command, &error),
    }
}

/// Prints an answer.
fn answered(args: &ServiceArgs, command: &str, answer: &Answer, human: impl FnOnce(&Value) -> String) -> Exit {
    let exit = exit_of(answer.status);
    match args.format {
        Format::Json => render::print_json(&wrap(command, exit == Exit::Ok, Some(answer.status), &answer.body)),
        Format::Human if exit == Exit::Ok => render::out(&human(&answer.body)),
        Format::Human => {
            let code = answer.body["code"].as_str().unwrap_or("?");
            let message = answer.body["message"].as_str().unwrap_or("");
            eprintln!("error[{code}]: {message}");
            if let Some(rule) = rule(code) {
                eprintln!("  rule: {rule}");
            }
            if let Some(help) = help(args, answer.status, code) {
                eprintln!("  help: {help}");
            }
        }
    }
    exit
}

/// Prints a request that got no readable answer; always exit code 3.
pub fn failed(format: Format, command: &str, error: &ClientError) -> Exit {
    match format {
        Format::Json => {
            let body = json!({"code": error.code(), "message": error.to_string()});
            render::print_json(&wrap(command, false, None, &body));
        }
        Format::Human => eprintln!("error[{}]: {error}", error.code()),
    }
    Exit::Unavailable
}

/// The report: `ok`, `command`, `httpStatus`, then the answer's fields.
pub fn wrap(command: &str, ok: bool, status: Option<u16>, body: &Value) -> Value {
    let mut report = Map::new();
    report.insert("ok".into(), json!(ok));
    report.insert("command".into(), json!(command));
    report.insert("httpStatus".into(), json!(status));
    match body {
        Value::Object(fields) => {
            for (key, value) in fields {
                if !report.contains_key(key) {
                    report.insert(key.clone(), value.clone());
                }
            }
        }
        Value::Null => {}
        other => {
            report.insert("answer".into(), other.clone());
        }
    }
    Value::Object(report)
}

/// What the rule behind a `409` refusal of an operator command says.
pub fn rule(code: &str) -> Option<&'static str> {
    Some(match code {
        "operation.never-repeat" => {
            "the step's operation is never repeated (never-repeat, or an evaluation): its command is not sent \
             again; reconcile or cancel"
        }
        "operation.no-receipt" => {
            "the step's operation has no receipt lookup, so reconcile cannot settle it; retry-same or cancel"
        }
        "run.deadline-reached" => "the run has expired: nothing more is dispatched; reconcile can still settle it",
        "run.ended" => "the run has ended: nothing more is done on it",
        "run.restore-hold" => "a restore hold is placed: no command is resent until it is released",
        "step.effect-not-unknown" => "the step's effect is known (or there is none): there is nothing to settle",
        "step.not-a-call" => "the step is not a call this run has made",
        "step.receipt-pending" => "a receipt lookup is under way: its answer settles the effect",
        "step.attempt-pending" => "an attempt of the saved command is under way: its answer settles the effect",
        "operation.refused" => "the rules do not allow this now",
        _ => return None,
    })
}

/// A hint on what to do about an error.
fn help(args: &ServiceArgs, status: u16, code: &str) -> Option<String> {
    match (status, code) {
        (401, _) => Some(format!(
            "the service did not accept the token in {} (--token-file or COORDINATOR_TOKEN_FILE)",
            args.token_file.display()
        )),
        (403, _) => Some("the token's subject lacks the role for this workflow (docs/access.md)".into()),
        (404, "run.unknown") => Some("no such run, or a run this token's subject may not see".into()),
        (409, _) if rule(code).is_some() => {
            Some("`coordinatorctl inspect RUN` lists the recovery actions that apply now".into())
        }
        _ => None,
    }
}

/// A JSON string field, or `-`.
pub fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_the_documented_exit_codes() {
        assert_eq!(exit_of(200), Exit::Ok);
        assert_eq!(exit_of(202), Exit::Ok);
        assert_eq!(exit_of(400), Exit::Refused);
        assert_eq!(exit_of(401), Exit::Unavailable);
        assert_eq!(exit_of(403), Exit::Refused);
        assert_eq!(exit_of(404), Exit::Refused);
        assert_eq!(exit_of(409), Exit::Refused);
        assert_eq!(exit_of(422), Exit::Refused);
        assert_eq!(exit_of(500), Exit::Unavailable);
        assert_eq!(exit_of(503), Exit::Unavailable);
        assert_eq!(exit_of(302), Exit::Unavailable);
    }

    #[test]
    fn reports_put_ok_and_command_first_and_keep_the_answer() {
        let report = wrap("cancel", true, Some(200), &json!({"runId": "r", "state": "cancelled", "note": "n"}));
        assert_eq!(
            report,
            json!({"ok": true, "command": "cancel", "httpStatus": 200, "runId": "r", "state": "cancelled", "note": "n"})
        );
        let report = wrap("status", false, None, &json!({"code": "client.unreachable", "message": "m"}));
        assert_eq!(report["httpStatus"], Value::Null);
        assert_eq!(report["code"], "client.unreachable");
    }

    #[test]
    fn every_operator_refusal_names_its_rule() {
        for code in coordinator_core::machine::REFUSAL_CODES {
            assert!(rule(code).is_some(), "{code}");
        }
    }
}
