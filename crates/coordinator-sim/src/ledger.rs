//! What a simulator remembers per idempotency key: the accepted outcome (for
//! replays and receipts) and the count of requests and effects, which is how
//! tests prove that nothing was done twice.
//!
//! It knows nothing about any product's domain; it must not perform effects.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::engine::Accepted;
use crate::error::Refusal;

/// Requests and effects seen for one (operation, idempotency key); an entry of
/// `GET {base}/v1/effects`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectCount {
    /// The operation, `submit-message/v1`.
    pub operation: String,
    /// The key sent with the requests (`null` for reads sent without one).
    pub idempotency_key: Option<String>,
    /// Calls that reached the product, faulted or not.
    pub requests: u64,
    /// Effects performed: at most 1 per key for mutations and evaluations, whatever
    /// the number of requests; always 0 for reads.
    pub effects: u64,
}

/// The result of looking up a receipt.
#[derive(Debug, Clone, PartialEq)]
pub enum ReceiptLookup {
    /// The original outcome of the key.
    Found(Accepted),
    /// The receipt existed but has been expired.
    Expired,
    /// No receipt-keeping operation accepted this key.
    NotFound,
}

/// An accepted outcome remembered under its idempotency key.
#[derive(Debug)]
struct Recorded {
    operation: &'static str,
    command: Value,
    accepted: Accepted,
    receipt: bool,
    expired: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    requests: u64,
    effects: u64,
}

/// Outcomes and counts of one simulated product.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    counts: BTreeMap<(&'static str, Option<String>), Counts>,
    outcomes: BTreeMap<String, Recorded>,
}

impl Ledger {
    /// Counts one request of `operation` under `key`.
    pub(crate) fn count_request(&mut self, operation: &'static str, key: Option<&str>) {
        self.counts.entry((operation, key.map(str::to_owned))).or_default().requests += 1;
    }

    /// The earlier outcome of `key`, if it has one: the same operation and command
    /// replay it; anything else reusing the key is refused.
    pub(crate) fn replay(&self, operation: &str, key: &str, command: &Value) -> Option<Result<Accepted, Refusal>> {
        let recorded = self.outcomes.get(key)?;
        Some(if recorded.operation == operation && recorded.command == *command {
            Ok(recorded.accepted.clone())
        } else {
            Err(Refusal::conflict("idempotency-key-reused"))
        })
    }

    /// Remembers the accepted outcome of a first effect under `key` and counts the effect.
    pub(crate) fn record(
        &mut self,
        operation: &'static str,
        key: &str,
        command: Value,
        accepted: Accepted,
        receipt: bool,
    ) {
        self.counts.entry((operation, Some(key.to_owned()))).or_default().effects += 1;
        self.outcomes.insert(key.to_owned(), Recorded { operation, command, accepted, receipt, expired: false });
    }

    /// The receipt of `key`: only operations that keep receipts have one.
    pub(crate) fn receipt(&self, key: &str) -> ReceiptLookup {
        match self.outcomes.get(key) {
            Some(recorded) if recorded.receipt && recorded.expired => ReceiptLookup::Expired,
            Some(recorded) if recorded.receipt => ReceiptLookup::Found(recorded.accepted.clone()),
            Some(_) | None => ReceiptLookup::NotFound,
        }
    }

    /// Expires every receipt recorded so far (of `operation` only, when given);
    /// returns how many. Replays of the keys still work: the product still knows
    /// it did the effect, it just no longer shows the receipt.
    pub(crate) fn expire(&mut self, operation: Option<&str>) -> usize {
        let mut expired = 0;
        for recorded in self.outcomes.values_mut() {
            if recorded.receipt && !recorded.expired && operation.is_none_or(|op| op == recorded.operation) {
                recorded.expired = true;
                expired += 1;
            }
        }
        expired
    }

    /// Every (operation, key) seen, with its counts.
    pub(crate) fn effects(&self) -> Vec<EffectCount> {
        self.counts
            .iter()
            .map(|((operation, key), counts)| EffectCount {
                operation: (*operation).to_owned(),
                idempotency_key: key.clone(),
                requests: counts.requests,
                effects: counts.effects,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn accepted() -> Accepted {
        Accepted::output(json!({"messageId": "msg-1", "status": "queued"}))
    }

    #[test]
    fn a_key_replays_only_the_same_command_of_the_same_operation() {
        let mut ledger = Ledger::default();
        ledger.record("submit-message/v1", "k", json!({"a": 1}), accepted(), true);
        assert_eq!(ledger.replay("submit-message/v1", "k", &json!({"a": 1})), Some(Ok(accepted())));
        assert_eq!(
            ledger.replay("submit-message/v1", "k", &json!({"a": 2})),
            Some(Err(Refusal::conflict("idempotency-key-reused")))
        );
        assert_eq!(ledger.replay("submit-message/v1", "other", &json!({"a": 1})), None);
    }

    #[test]
    fn receipts_exist_only_for_receipt_keeping_operations_and_expire() {
        let mut ledger = Ledger::default();
        ledger.record("submit-message/v1", "m", json!({}), accepted(), true);
        ledger.record("invoke-action/v1", "b", json!({}), accepted(), false);
        assert_eq!(ledger.receipt("m"), ReceiptLookup::Found(accepted()));
        assert_eq!(ledger.receipt("b"), ReceiptLookup::NotFound);
        assert_eq!(ledger.expire(Some("other/v1")), 0);
        assert_eq!(ledger.expire(None), 1);
        assert_eq!(ledger.receipt("m"), ReceiptLookup::Expired);
        assert!(ledger.replay("submit-message/v1", "m", &json!({})).is_some_and(|r| r.is_ok()));
    }
}
