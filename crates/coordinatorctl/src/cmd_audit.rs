//! `coordinatorctl audit verify`: pages through `GET /v1/audit` (1000 entries
//! at a time) and recomputes the hash chain with
//! [`coordinator_core::audit::Verifier`] — every entry's hash, every link, no
//! gap, and the journal's recorded head. The tool trusts nothing the service
//! says about the chain: it only reads entries.
//!
//! Exit codes: 0 the chain verifies (prints the entries checked and the head
//! hash: keep it somewhere else, it anchors later checks), 1 it was tampered
//! with (names the first broken position and what is wrong there), 3 the
//! service or the journal cannot be read (as every operating command).

use coordinator_core::audit::{Entry, Head, Tampering, Verified, Verifier};
use serde_json::{Value, json};

use crate::client::{Answer, Client, ClientError, ServiceArgs};
use crate::operate;
use crate::render;
use crate::{Exit, Format};

/// The page size asked for (the service's largest).
const PAGE: &str = "1000";
/// The command's name in reports.
const COMMAND: &str = "audit verify";

/// How the check ended.
enum Outcome {
    /// Every entry verified.
    Verified(Verified),
    /// The chain is broken.
    Tampered(Tampering),
    /// The service refused or failed (printed already, with this exit code).
    Answered(Exit),
}

/// Runs `audit verify`.
pub fn verify(args: &ServiceArgs) -> Exit {
    match check(args) {
        Ok(Outcome::Verified(verified)) => {
            let (head, start) = (&verified.head, &verified.start);
            let cut = start.position > 0;
            match args.format {
                Format::Json => render::print_json(&json!({
                    "ok": true, "command": COMMAND, "checked": verified.checked,
                    "head": {"position": head.position, "hash": head.hash},
                    "checkpoint": cut.then(|| json!({"position": start.position, "hash": start.hash})),
                })),
                Format::Human => render::out(&format!(
                    "audit journal verified: {} entries{}, head at position {} with hash {}\n",
                    verified.checked,
                    if cut {
                        format!(" after the retention checkpoint at position {} ({})", start.position, start.hash)
                    } else {
                        String::new()
                    },
                    head.position,
                    head.hash
                )),
            }
            Exit::Ok
        }
        Ok(Outcome::Tampered(tampering)) => {
            match args.format {
                Format::Json => render::print_json(&json!({
                    "ok": false, "command": COMMAND, "code": "audit.tampered",
                    "position": tampering.position, "problem": tampering.problem.code(),
                    "message": tampering.to_string(),
                })),
                Format::Human => eprintln!("error[audit.tampered]: the audit journal was tampered with at {tampering}"),
            }
            Exit::Refused
        }
        Ok(Outcome::Answered(exit)) => exit,
        Err(error) => operate::failed(args.format, COMMAND, &error),
    }
}

/// Reads the journal page by page, feeding every entry to the verifier.
fn check(args: &ServiceArgs) -> Result<Outcome, ClientError> {
    let client = Client::connect(args)?;
    let mut verifier: Option<Verifier> = None;
    let mut after = 0_i64;
    loop {
        let after_text = after.to_string();
        let answer = client.get(&["v1", "audit"], &[("after", &after_text), ("limit", PAGE)])?;
        if operate::exit_of(answer.status) != Exit::Ok {
            return Ok(Outcome::Answered(operate::report(args, COMMAND, Ok(answer), |_| String::new())));
        }
        let (entries, head, next) = page(&client, &answer)?;
        // After a retention cut the chain starts after the checkpoint the first page names.
        let verifier = verifier.get_or_insert_with(|| Verifier::after(checkpoint(&answer)));
        for entry in &entries {
            if let Err(tampering) = verifier.feed(entry) {
                return Ok(Outcome::Tampered(tampering));
            }
        }
        match next {
            Some(next) if next > after => after = next,
            Some(_) => return Err(not_the_api(&client, &answer, "a cursor that does not move on")),
            None => {
                return Ok(match verifier.clone().finish(&head) {
                    Ok(verified) => Outcome::Verified(verified),
                    Err(tampering) => Outcome::Tampered(tampering),
                });
            }
        }
    }
}

/// The journal's checkpoint a page names (`null` or absent: none).
fn checkpoint(answer: &Answer) -> Option<Head> {
    serde_json::from_value(answer.body["checkpoint"].clone()).ok()
}

/// The entries, head and next cursor of a page.
fn page(client: &Client, answer: &Answer) -> Result<(Vec<Entry>, Head, Option<i64>), ClientError> {
    let entries: Vec<Entry> = serde_json::from_value(answer.body["entries"].clone())
        .map_err(|_| not_the_api(client, answer, "entries that are not audit entries"))?;
    let head: Head = serde_json::from_value(answer.body["head"].clone())
        .map_err(|_| not_the_api(client, answer, "no journal head"))?;
    let next = match &answer.body["next"] {
        Value::Null => None,
        value => Some(value.as_i64().ok_or_else(|| not_the_api(client, answer, "a cursor that is not a position"))?),
    };
    Ok((entries, head, next))
}

fn not_the_api(client: &Client, answer: &Answer, detail: &str) -> ClientError {
    ClientError::NotTheApi {
        url: client.url(&["v1", "audit"], &[]).to_string(),
        status: answer.status,
        detail: format!(", with {detail}"),
    }
}
