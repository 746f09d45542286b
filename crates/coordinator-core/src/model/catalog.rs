//! Catalog files: host operations and product events described as data (docs/catalog.md).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ApiVersion;

/// `kind: Catalog`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub enum CatalogKind {
    /// The only kind of catalog file.
    #[default]
    Catalog,
}

/// One catalog file: one product's operations and events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "Coordinator operation catalog (catalog/*.yaml)")]
pub struct CatalogFile {
    /// Always `coordinator/v1`.
    pub api_version: ApiVersion,
    /// Always `Catalog`.
    pub kind: CatalogKind,
    /// The product name (lowercase letters, digits and `-`).
    pub product: String,
    /// `<name>/v<N>` -> descriptor.
    pub operations: BTreeMap<String, OperationDescriptor>,
    /// `<event>/v<N>` -> descriptor.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub events: BTreeMap<String, EventDescriptor>,
}

/// What an operation does to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// Reads; repeating it changes nothing.
    Read,
    /// Changes the product's state.
    Mutation,
    /// Computes a decision; never repeated once it may have been sent.
    Evaluation,
    /// Applies a proposal on someone's behalf; the coordinator refuses these.
    ProposalAction,
}

impl Effect {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Mutation => "mutation",
            Effect::Evaluation => "evaluation",
            Effect::ProposalAction => "proposal-action",
        }
    }
}

/// How an attempt whose effect is unknown may be recovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Recovery {
    /// Read again automatically.
    ReadAgain,
    /// The same saved command may be resent with the original key (operator's `retry-same`).
    SameCommand,
    /// Never resent.
    NeverRepeat,
}

impl Recovery {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::ReadAgain => "read-again",
            Recovery::SameCommand => "same-command",
            Recovery::NeverRepeat => "never-repeat",
        }
    }
}

/// One host operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperationDescriptor {
    /// What the operation does.
    pub effect: Effect,
    /// How an unknown effect may be recovered (absent only for proposal actions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// Whether the product can show the result of an original idempotency key.
    pub receipt: bool,
    /// Refusal codes the owner declares as "nothing happened".
    #[serde(default)]
    pub declared_refusals: Vec<String>,
    /// Named completions an accepted call exposes.
    #[serde(default)]
    pub completions: BTreeMap<String, CompletionDescriptor>,
    /// JSON Schema of the command.
    pub input: Value,
    /// JSON Schema of an accepted answer's output.
    pub output: Value,
}

/// A completion an accepted call exposes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompletionDescriptor {
    /// How often its source is observed by default.
    pub observe_every_seconds: u64,
    /// JSON Schema of the completion value.
    pub schema: Value,
}

/// A product event that triggers may admit runs from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventDescriptor {
    /// JSON Schema of the event body.
    pub schema: Value,
}
