//! The simulated messaging product: `submit-message/v1` queues a message, with a
//! receipt per idempotency key, and refuses recipients who opted out with the
//! declared refusal `recipient-opted-out` (nothing is sent then).

use std::collections::BTreeSet;
use std::time::SystemTime;

use axum::Router;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::{self, Accepted, Completion, Product, Sim};
use crate::error::Refusal;

/// A message the product accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    /// The id it answered with.
    pub message_id: String,
    /// The recipient's id.
    pub recipient: String,
    /// The template name.
    pub template: String,
}

/// The messaging product's state.
#[derive(Debug, Default)]
pub struct Messaging {
    opted_out: BTreeSet<String>,
    sent: Vec<SentMessage>,
}

impl Messaging {
    /// A product where the recipients with these ids opted out.
    pub fn new(opted_out: impl IntoIterator<Item = String>) -> Self {
        Messaging { opted_out: opted_out.into_iter().collect(), sent: Vec::new() }
    }
}

#[derive(Deserialize)]
struct Recipient {
    id: String,
}

#[derive(Deserialize)]
struct SubmitMessage {
    recipient: Recipient,
    template: String,
}

impl Product for Messaging {
    const NAME: &'static str = "messaging";
    const OPERATIONS: &'static [&'static str] = &["submit-message/v1"];

    fn perform(&mut self, operation: &str, command: &Value, _now: SystemTime) -> Result<Accepted, Refusal> {
        match operation {
            "submit-message/v1" => {
                let message: SubmitMessage =
                    serde_json::from_value(command.clone()).map_err(|_| Refusal::invalid_command())?;
                if self.opted_out.contains(&message.recipient.id) {
                    return Err(Refusal::conflict("recipient-opted-out"));
                }
                let message_id = format!("msg-{}", self.sent.len() + 1);
                self.sent.push(SentMessage {
                    message_id: message_id.clone(),
                    recipient: message.recipient.id,
                    template: message.template,
                });
                Ok(Accepted::output(json!({"messageId": message_id, "status": "queued"})))
            }
            _ => Err(Refusal::not_found("unknown-operation")),
        }
    }

    fn completion(&self, _name: &str, _reference: &str) -> Option<Completion> {
        None
    }
}

impl Sim<Messaging> {
    /// Marks a recipient as opted out: later messages to it are refused.
    pub fn opt_out(&self, recipient_id: &str) {
        self.with_product(|m| m.opted_out.insert(recipient_id.to_owned()));
    }

    /// Every message accepted so far, in order.
    pub fn sent(&self) -> Vec<SentMessage> {
        self.with_product(|m| m.sent.clone())
    }
}

/// The messaging routes (protocol and control API), to be served at `/sim/messaging`.
pub fn router(sim: Sim<Messaging>) -> Router {
    engine::routes().with_state(sim)
}
