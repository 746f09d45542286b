//! Trigger proofs: every trigger names a product event that a catalog describes.
//! (`trigger.unknown-connection` needs the runtime configuration: [`runtime`](super::runtime)
//! checks it when the project is checked with `--runtime`.)

use crate::diagnostic::Code;
use crate::yaml::{Part, Path};

use super::context::Ctx;

/// Runs the trigger proofs.
pub fn check(cx: &mut Ctx<'_>) {
    let wf = cx.wf;
    for (name, trigger) in &wf.triggers {
        if !cx.catalog.events.contains_key(&trigger.event) && !cx.catalog.may_be_broken(&trigger.event) {
            let events: Vec<&str> = cx.catalog.events.keys().map(String::as_str).collect();
            let help = match crate::decode::closest(&trigger.event, &events) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!("catalogued events: {}", events.join(", ")),
            };
            cx.error(
                Code::TriggerUnknownEvent,
                &Path::root().key("triggers").key(name).key("event"),
                Part::Value,
                format!("no catalog describes the event `{}`", trigger.event),
                help,
            );
        }
    }
}
