//! The text formats: Mermaid and Graphviz DOT.
//!
//! Owns each format's shapes and escaping. One node per step (call = box,
//! choose = diamond, waits = rounded box, finish = stadium in Mermaid and a
//! double ellipse in DOT), one edge per route labelled with
//! [`RouteKind::label`], dashed where [`dashed`] says; a `start` marker points
//! at the first step. Run marks are the SVG's business only.
//!
//! [`RouteKind::label`]: coordinator_core::model::workflow::RouteKind::label

use coordinator_core::definition::Definition;
use coordinator_core::model::workflow::Step;

use crate::order::{dashed, drawing};

/// Copies `text`, replacing what `rule` names and any other control character by a space.
fn escape(text: &str, rule: impl Fn(char) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match rule(c) {
            Some(replacement) => out.push_str(replacement),
            None if c.is_control() => out.push(' '),
            None => out.push(c),
        }
    }
    out
}

/// Text inside a quoted Mermaid label: markup characters become entity codes.
fn mermaid_text(text: &str) -> String {
    escape(text, |c| match c {
        '"' => Some("#quot;"),
        '#' => Some("#35;"),
        '&' => Some("#amp;"),
        '<' => Some("#lt;"),
        '>' => Some("#gt;"),
        '|' => Some("#124;"),
        '`' => Some("#96;"),
        _ => None,
    })
}

/// A DOT quoted string; a line break becomes Graphviz's centred `\n`.
fn dot_string(text: &str) -> String {
    let escaped = escape(text, |c| match c {
        '"' => Some("\\\""),
        '\\' => Some("\\\\"),
        '\n' => Some("\\n"),
        _ => None,
    });
    format!("\"{escaped}\"")
}

/// A Mermaid `flowchart`. Node ids are `s<N>` (N = position in
/// [`step_order`](crate::step_order)) because step ids may hold `-` and words
/// Mermaid reserves; the step id is in the label.
pub fn mermaid(definition: &Definition) -> String {
    let (nodes, edges) = drawing(definition);
    let mut out = String::from("flowchart TD\n    start((\"start\"))\n");
    for (i, (id, step, caption)) in nodes.iter().enumerate() {
        let (open, close) = match step {
            Step::Call(_) => ("[", "]"),
            Step::Choose(_) => ("{", "}"),
            Step::WaitUntil(_) | Step::WaitFor(_) => ("(", ")"),
            Step::Finish(_) => ("([", "])"),
        };
        let label = format!("{}<br/>{}", mermaid_text(id), mermaid_text(caption));
        out.push_str(&format!("    s{i}{open}\"{label}\"{close}\n"));
    }
    if !nodes.is_empty() {
        out.push_str("    start --> s0\n");
    }
    for (from, to, kind) in edges {
        let arrow = if dashed(kind) { "-.->" } else { "-->" };
        let label = mermaid_text(&kind.label());
        out.push_str(&format!("    s{from} {arrow}|\"{label}\"| s{to}\n"));
    }
    out
}

/// A Graphviz `digraph`. Node ids are the quoted step ids; the start marker
/// is `__start`, which no step id can be (they start with a letter or digit).
pub fn dot(definition: &Definition) -> String {
    let (nodes, edges) = drawing(definition);
    let mut out = format!("digraph {} {{\n", dot_string(&definition.workflow));
    out.push_str("    graph [rankdir=TB];\n    node [fontname=\"Helvetica\", fontsize=11];\n");
    out.push_str("    edge [fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("    \"__start\" [label=\"start\", shape=circle];\n");
    for (id, step, caption) in &nodes {
        let attributes = match step {
            Step::Call(_) => "shape=box",
            Step::Choose(_) => "shape=diamond",
            Step::WaitUntil(_) | Step::WaitFor(_) => "shape=box, style=rounded",
            Step::Finish(_) => "shape=ellipse, peripheries=2",
        };
        let (id, label) = (dot_string(id), dot_string(&format!("{id}\n{caption}")));
        out.push_str(&format!("    {id} [label={label}, {attributes}];\n"));
    }
    if let Some((first, _, _)) = nodes.first() {
        out.push_str(&format!("    \"__start\" -> {};\n", dot_string(first)));
    }
    for (from, to, kind) in edges {
        let (from, to) = (dot_string(nodes[from].0), dot_string(nodes[to].0));
        let style = if dashed(kind) { ", style=dashed" } else { "" };
        let label = dot_string(&kind.label());
        out.push_str(&format!("    {from} -> {to} [label={label}{style}];\n"));
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::fixture;

    #[test]
    fn mermaid_draws_shaped_nodes_and_one_labelled_edge_per_route() {
        let text = mermaid(&fixture());
        for line in [
            "flowchart TD\n    start((\"start\"))\n    s0[\"read-subject<br/>call: breg.read-record/v1\"]\n",
            "    s2(\"await<br/>wait-for: request.result\")\n    s3([\"refused<br/>finish: refused\"])\n",
            "    s4{\"decide<br/>choose\"}\n",
            "    start --> s0\n    s0 -->|\"next\"| s1\n",
            "    s1 -.->|\"refusal: review-already-open\"| s3\n",
            "    s2 -.->|\"timeout\"| s5\n    s2 -.->|\"cancel\"| s6\n",
            "    s4 -->|\"case: approved\"| s7\n    s4 -->|\"case: rejected #quot;#lt;x#gt;#quot;\"| s8\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert_eq!(text.matches("->|").count(), 9, "{text}");
    }

    #[test]
    fn dot_quotes_ids_and_escapes_labels() {
        let text = dot(&fixture());
        for line in [
            "digraph \"tiny-review\" {\n",
            "    \"decide\" [label=\"decide\\nchoose\", shape=diamond];\n",
            "    \"await\" [label=\"await\\nwait-for: request.result\", shape=box, style=rounded];\n",
            "    \"__start\" -> \"read-subject\";\n",
            "    \"await\" -> \"cancelled\" [label=\"cancel\", style=dashed];\n",
            "    \"decide\" -> \"rejected\" [label=\"case: rejected \\\"<x>\\\"\"];\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(text.ends_with("}\n"));
        assert_eq!(text.matches(" -> ").count(), 10, "{text}");
        assert_eq!(dot_string("a\\b\"c\nd\u{7}"), "\"a\\\\b\\\"c\\nd \"");
    }

    #[test]
    fn text_drawings_are_deterministic() {
        let (a, b) = (fixture(), fixture());
        assert_eq!((mermaid(&a), dot(&a)), (mermaid(&b), dot(&b)));
    }
}
