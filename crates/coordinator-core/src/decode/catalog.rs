//! Decodes catalog files (`catalog/*.yaml` and the built-in ones) into [`CatalogFile`].

use crate::diagnostic::Span;
use crate::model::catalog::{
    CatalogFile, CatalogKind, CompletionDescriptor, Effect, EventDescriptor, OperationDescriptor, Recovery,
};
use crate::model::{API_VERSION, ApiVersion};
use crate::yaml::{Key, Node};

use super::{Decoder, versioned};

/// Decodes a parsed catalog file. `None` when any part of it is wrong.
pub fn decode(d: &mut Decoder<'_>, root: &Node) -> Option<CatalogFile> {
    let known = ["apiVersion", "kind", "product", "operations", "events"];
    let f =
        d.object(root, "the catalog file", Span::at(1, 1), &known, &["apiVersion", "kind", "product", "operations"])?;
    let api_version = f.get("apiVersion").and_then(|n| d.one_of(n, "apiVersion", &[(API_VERSION, ApiVersion::V1)]));
    let kind = f.get("kind").and_then(|n| d.one_of(n, "kind", &[("Catalog", CatalogKind::Catalog)]));
    let product = f.get("product").and_then(|n| {
        let name = d.string(n, "product")?;
        let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !ok {
            d.invalid(n.span, "the product name must be lowercase letters, digits and `-`", "write e.g. `permits`");
            return None;
        }
        Some(name)
    });
    let operations = f.get("operations").and_then(|n| d.map_of(n, "operations", false, operation));
    let events = match f.get("events") {
        None => Some(Default::default()),
        Some(n) => d.map_of(n, "events", false, event),
    };
    Some(CatalogFile {
        api_version: api_version?,
        kind: kind?,
        product: product?,
        operations: operations?,
        events: events?,
    })
}

fn versioned_key(d: &mut Decoder<'_>, key: &Key, what: &str) -> bool {
    if versioned(&key.text).is_some() {
        return true;
    }
    d.invalid(
        key.span,
        format!("{what} `{}` is not a versioned name", key.text.escape_default()),
        "write `<name>/v<N>`, e.g. `read-permit/v1`",
    );
    false
}

const EFFECTS: &[(&str, Effect)] = &[
    ("read", Effect::Read),
    ("mutation", Effect::Mutation),
    ("evaluation", Effect::Evaluation),
    ("proposal-action", Effect::ProposalAction),
];
const RECOVERIES: &[(&str, Recovery)] = &[
    ("read-again", Recovery::ReadAgain),
    ("same-command", Recovery::SameCommand),
    ("never-repeat", Recovery::NeverRepeat),
];

fn operation(d: &mut Decoder<'_>, key: &Key, node: &Node) -> Option<OperationDescriptor> {
    let named = versioned_key(d, key, "the operation");
    let what = format!("operation `{}`", key.text);
    let known = ["effect", "recovery", "receipt", "declaredRefusals", "completions", "input", "output"];
    let f = d.object(node, &what, key.span, &known, &["effect", "receipt", "input", "output"])?;
    let effect = f.get("effect").and_then(|n| d.one_of(n, "effect", EFFECTS));
    let recovery = match f.get("recovery") {
        Some(n) => d.one_of(n, "recovery", RECOVERIES).map(Some),
        None if effect == Some(Effect::ProposalAction) => Some(None),
        None => {
            d.report(
                crate::diagnostic::Code::SchemaMissingField,
                key.span,
                format!("{what} has no `recovery`"),
                "add `recovery: read-again | same-command | never-repeat` (only proposal actions go without)",
            );
            None
        }
    };
    let receipt = f.get("receipt").and_then(|n| d.boolean(n, "receipt"));
    let declared_refusals = match f.get("declaredRefusals") {
        None => Some(Vec::new()),
        Some(n) => d.seq_of(n, "declaredRefusals", |d, _, item| d.name(item, "a refusal code")),
    };
    let completions = match f.get("completions") {
        None => Some(Default::default()),
        Some(n) => d.map_of(n, "completion", true, |d, key, v| {
            let c = d.object(
                v,
                &format!("completion `{}`", key.text),
                key.span,
                &["observeEverySeconds", "schema"],
                &["observeEverySeconds", "schema"],
            )?;
            let every = c.get("observeEverySeconds").and_then(|n| d.uint(n, "observeEverySeconds", 1));
            let schema = c.get("schema").map(|n| d.json(n));
            Some(CompletionDescriptor { observe_every_seconds: every?, schema: schema? })
        }),
    };
    let input = f.get("input").map(|n| d.json(n));
    let output = f.get("output").map(|n| d.json(n));
    let descriptor = OperationDescriptor {
        effect: effect?,
        recovery: recovery?,
        receipt: receipt?,
        declared_refusals: declared_refusals?,
        completions: completions?,
        input: input?,
        output: output?,
    };
    named.then_some(descriptor)
}

fn event(d: &mut Decoder<'_>, key: &Key, node: &Node) -> Option<EventDescriptor> {
    let named = versioned_key(d, key, "the event");
    let f = d.object(node, &format!("event `{}`", key.text), key.span, &["schema"], &["schema"])?;
    let schema = f.get("schema").map(|n| d.json(n))?;
    named.then_some(EventDescriptor { schema })
}
