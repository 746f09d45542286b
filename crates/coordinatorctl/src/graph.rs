//! Drawings of a checked workflow's step graph: Mermaid, Graphviz DOT and SVG.
//!
//! Owns the order in which steps are listed ([`step_order`]: breadth-first
//! from `start`, each step's routes in `Step::routes` order) and each format's
//! escaping, so the same project always draws to the same bytes. One node per
//! step (call = box, choose = diamond (ellipse in SVG), waits = rounded box,
//! finish = double ellipse (stadium in Mermaid)), one edge per route labelled with
//! `RouteKind::label`; routes taken because something did NOT happen
//! (refusal, timeout, cancel) are dashed; a `start` marker points at the first
//! step. It proves nothing (the graph is already checked) and does no IO.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use coordinator_core::check::Checked;
use coordinator_core::definition::Definition;
use coordinator_core::model::workflow::{RouteKind, Step};
use layout::backends::svg::SVGWriter;
use layout::core::base::Orientation;
use layout::core::color::Color;
use layout::core::geometry::Point;
use layout::core::style::{LineStyleKind, StyleAttr};
use layout::std_shapes::shapes::{Arrow, Element, ShapeKind};
use layout::topo::layout::VisualGraph;

/// The steps of a definition breadth-first from `start`, routes in order.
/// A checked graph has no unreachable step; any would follow in id order.
pub(crate) fn step_order(definition: &Definition) -> Vec<(&str, &Step)> {
    let mut order = Vec::with_capacity(definition.steps.len());
    let mut seen = BTreeSet::new();
    let mut queue = VecDeque::from([definition.start.as_str()]);
    while let Some(id) = queue.pop_front() {
        if let Some((id, step)) = definition.steps.get_key_value(id)
            && seen.insert(id.as_str())
        {
            order.push((id.as_str(), step));
            queue.extend(step.routes().into_iter().map(|r| r.target.as_str()));
        }
    }
    for (id, step) in &definition.steps {
        if seen.insert(id.as_str()) {
            order.push((id.as_str(), step));
        }
    }
    order
}

/// A step to draw: its id, the step, and its caption (type, plus the host
/// operation, completion or outcome where it has one).
type Node<'a> = (&'a str, &'a Step, String);
/// A route to draw between two indexes of the node list.
type Edge<'a> = (usize, usize, RouteKind<'a>);

fn drawing(definition: &Definition) -> (Vec<Node<'_>>, Vec<Edge<'_>>) {
    let order = step_order(definition);
    let index: BTreeMap<&str, usize> = order.iter().enumerate().map(|(i, s)| (s.0, i)).collect();
    let mut edges = Vec::new();
    for (from, (_, step)) in order.iter().enumerate() {
        for route in step.routes() {
            if let Some(&to) = index.get(route.target.as_str()) {
                edges.push((from, to, route.kind));
            }
        }
    }
    let nodes = order.into_iter().map(|(id, step)| (id, step, caption(definition, step))).collect();
    (nodes, edges)
}

fn caption(definition: &Definition, step: &Step) -> String {
    let detail = match step {
        Step::Call(c) => {
            let pinned = definition.operations.get(&c.operation);
            pinned.map_or(&c.operation, |p| &p.operation).clone()
        }
        Step::WaitFor(w) => format!("{}.{}", w.completion.step, w.completion.name),
        Step::Finish(f) => f.outcome.clone(),
        Step::Choose(_) | Step::WaitUntil(_) => return step.type_name().to_owned(),
    };
    format!("{}: {detail}", step.type_name())
}

fn dashed(kind: RouteKind<'_>) -> bool {
    match kind {
        RouteKind::Next | RouteKind::Case(_) => false,
        RouteKind::Refusal(_) | RouteKind::Timeout | RouteKind::Cancel => true,
    }
}

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
/// [`step_order`]) because step ids may hold `-` and words Mermaid reserves;
/// the step id is in the label.
pub fn mermaid(checked: &Checked) -> String {
    let (nodes, edges) = drawing(&checked.definition);
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
pub fn dot(checked: &Checked) -> String {
    let (nodes, edges) = drawing(&checked.definition);
    let mut out = format!("digraph {} {{\n", dot_string(&checked.definition.workflow));
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

/// The one font size of the SVG. `SVGWriter` lists one CSS class per size
/// from a `HashMap`, so a second size would make the bytes vary between runs.
const FONT_SIZE: usize = 14;
const INK: u32 = 0x333333ff;

/// An SVG laid out by layout-rs, top to bottom. Each route label is the text
/// of the connector layout-rs inserts into its edge.
pub fn svg(checked: &Checked) -> String {
    let (nodes, edges) = drawing(&checked.definition);
    let mut graph = VisualGraph::new(Orientation::TopToBottom);
    let start = graph.add_node(svg_node(ShapeKind::new_circle("start"), 0xe8e8e8ff, 0));
    let handles: Vec<_> = nodes
        .iter()
        .map(|(id, step, caption)| {
            let (shape, fill, rounded): (fn(String) -> ShapeKind, _, _) = match step {
                Step::Call(_) => (ShapeKind::Box, 0xe6f0ffff, 0),
                Step::Choose(_) => (ShapeKind::Circle, 0xfff6d6ff, 0),
                Step::WaitUntil(_) | Step::WaitFor(_) => (ShapeKind::Box, 0xf3ecffff, 18),
                Step::Finish(_) => (ShapeKind::DoubleCircle, 0xe3f5e1ff, 0),
            };
            graph.add_node(svg_node(shape(format!("{id}\n{caption}")), fill, rounded))
        })
        .collect();
    let look = StyleAttr::new(Color::new(INK), 1, None, 0, FONT_SIZE);
    let arrow = |text: String, dashed: bool| {
        let line_style = if dashed { LineStyleKind::Dashed } else { LineStyleKind::Normal };
        Arrow { line_style, text, look: look.clone(), ..Arrow::default() }
    };
    if let Some(&first) = handles.first() {
        graph.add_edge(arrow(String::new(), false), start, first);
    }
    for (from, to, kind) in edges {
        graph.add_edge(arrow(kind.label(), dashed(kind)), handles[from], handles[to]);
    }
    let mut writer = SVGWriter::new();
    graph.do_it(false, false, false, &mut writer);
    fit_canvas(writer.finalize(), &graph)
}

fn svg_node(kind: ShapeKind, fill: u32, rounded: usize) -> Element {
    let text = match &kind {
        ShapeKind::Box(t) | ShapeKind::Circle(t) | ShapeKind::DoubleCircle(t) => t.as_str(),
        ShapeKind::None | ShapeKind::Record(_) | ShapeKind::Connector(_) => "",
    };
    // About 0.62 em per character of the serif font, 1.2 em per line.
    let font = FONT_SIZE as f64;
    let columns = text.lines().map(|l| l.chars().count()).max().unwrap_or(1) as f64;
    let rows = text.lines().count().max(1) as f64;
    let (width, height) = (columns * font * 0.62, rows * font * 1.2);
    let size = match kind {
        // An ellipse holds its text's box when each axis is √2 times longer.
        ShapeKind::Circle(_) | ShapeKind::DoubleCircle(_) => Point::new(width * 1.42 + 12., height * 1.42 + 12.),
        ShapeKind::None | ShapeKind::Box(_) | ShapeKind::Record(_) | ShapeKind::Connector(_) => {
            Point::new(width + 24., height + 16.)
        }
    };
    let fill = Some(Color::new(fill));
    let look = StyleAttr::new(Color::new(INK), 1, fill, rounded, FONT_SIZE);
    // layout-rs's own DOT builder gives shapes the graph's flipped orientation;
    // that puts edge labels beside their edge rather than across it.
    Element::create(kind, look, Orientation::TopToBottom.flip(), size)
}

/// layout-rs 0.1.3 grows the canvas downwards by the length of every text it
/// draws (`draw_text` swaps width and height), leaving a blank band under the
/// graph; cut the canvas back to the laid-out shapes and their halos, plus a
/// margin for curves that bulge past a label.
fn fit_canvas(svg: String, graph: &VisualGraph) -> String {
    let (mut width, mut height) = (0f64, 0f64);
    for node in graph.iter_nodes() {
        let (_, bottom_right) = graph.pos(node).bbox(true);
        (width, height) = (width.max(bottom_right.x), height.max(bottom_right.y));
    }
    let (width, height) = ((width + 10.).ceil(), (height + 10.).ceil());
    let found = svg.find("<svg ").and_then(|start| Some((start, start + svg[start..].find(" xmlns=")?)));
    let Some((start, end)) = found else { return svg };
    let (head, tail) = (&svg[..start], &svg[end..]);
    let size = format!("width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\"");
    format!("{head}<svg {size}{tail}")
}

#[cfg(test)]
pub(crate) mod tests {
    //! Also the fixture of `explain`'s tests: a small project checked in memory.

    use std::collections::HashMap;

    use coordinator_core::check::{ProjectSource, SourceError, check_project};

    use super::*;

    struct Files(HashMap<&'static str, &'static str>);

    impl ProjectSource for Files {
        fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
            Ok(self.0.get(path).map(|text| (*text).to_owned()))
        }
        fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
            Ok(Vec::new())
        }
    }

    /// Checks an in-memory project; panics with the diagnostics if it is refused.
    pub(crate) fn checked(workflow: &'static str, functions: &'static str) -> Checked {
        let files = Files(HashMap::from([("workflow.yaml", workflow), ("functions.rhai", functions)]));
        let report = check_project(&files).expect("in-memory files are always readable");
        let diagnostics = format!("{:#?}", report.diagnostics);
        report.checked.unwrap_or_else(|| panic!("the fixture must check clean: {diagnostics}"))
    }

    /// Every route kind: a read, a mutation with one of its two declared
    /// refusals routed, a wait-for with timeout and cancel routes, a choose
    /// (one case needing escapes), a mutation with a receipt and a retry policy.
    const WORKFLOW: &str = r#"
apiVersion: coordinator/v1
kind: Workflow
workflow: {id: tiny-review, title: Tiny review}
functions: functions.rhai
deadlineSeconds: 86400
input: {type: object}
operations:
  read: {operation: breg.read-record/v1, connection: registry}
  submit: {operation: casework.submit-review-request/v1, connection: casework}
  notify: {operation: messaging.submit-message/v1, connection: messaging}
start: read-subject
steps:
  read-subject: {type: call, operation: read, input: {function: subject, arguments: [{type: input}]}, next: request}
  request: {type: call, operation: submit, input: {function: request, arguments: [{type: step, step: read-subject}]},
            onDeclaredRefusal: {review-already-open: refused}, next: await}
  await: {type: wait-for, completion: {step: request, name: result}, timeoutSeconds: 3600, onTimeout: timed-out,
          onCancel: cancelled, next: decide}
  decide: {type: choose, choose: {function: decision, arguments: [{type: step, step: await}]},
           cases: {approved: send, "rejected \"<x>\"": rejected}}
  send: {type: call, operation: notify, input: {function: message, arguments: [{type: input}]}, next: approved,
         retry: {maxAttempts: 5, initialIntervalSeconds: 2}}
  approved: {type: finish, outcome: approved}
  rejected: {type: finish, outcome: rejected}
  refused: {type: finish, outcome: refused}
  timed-out: {type: finish, outcome: timed-out}
  cancelled: {type: finish, outcome: cancelled}
outcomes: {approved: {type: "null"}, rejected: {type: "null"}, refused: {type: "null"}, timed-out: {type: "null"},
           cancelled: {type: "null"}}
"#;

    const FUNCTIONS: &str = r#"
fn subject(input) { #{ recordType: "application", recordId: input.id } }
fn request(record) { #{ subject: record, reviewType: "approval" } }
fn decision(result) { result.decision }
fn message(input) { #{ to: input.id } }
"#;

    pub(crate) fn fixture() -> Checked {
        checked(WORKFLOW, FUNCTIONS)
    }

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

    /// Each route label is drawn as many times as routes carry it, and every step is drawn.
    fn assert_svg_draws_every_route(checked: &Checked) {
        let svg = svg(checked);
        assert!(svg.starts_with("<?xml") && svg.ends_with("</svg>") && !svg.contains("NaN"), "{svg}");
        let mut routed: BTreeMap<String, usize> = BTreeMap::new();
        for (id, step) in &checked.definition.steps {
            assert!(svg.contains(&format!(">{id}</tspan>")), "step {id} is not drawn");
            for route in step.routes() {
                *routed.entry(route.kind.label()).or_default() += 1;
            }
        }
        for (label, count) in routed {
            let escaped = label.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
            let drawn = svg.matches(&format!(">{escaped}</tspan>")).count();
            assert_eq!(drawn, count, "label `{label}` drawn {drawn} times for {count} routes");
        }
    }

    #[test]
    fn svg_draws_every_route_label_and_step() {
        assert_svg_draws_every_route(&fixture());
    }

    /// reviewed-notice has pairs of routes between the same two steps (`next`
    /// and a refusal); both labels must be drawn.
    #[test]
    fn svg_of_reviewed_notice_draws_every_route_label() {
        assert_svg_draws_every_route(&checked(
            include_str!("../../../examples/reviewed-notice/workflow.yaml"),
            include_str!("../../../examples/reviewed-notice/functions.rhai"),
        ));
    }

    #[test]
    fn drawings_are_deterministic() {
        let (a, b) = (fixture(), fixture());
        assert_eq!((mermaid(&a), dot(&a), svg(&a)), (mermaid(&b), dot(&b), svg(&b)));
    }
}
