//! The SVG's tests: every step and route drawn, marks, escaping, determinism.

use std::collections::BTreeMap;

use coordinator_core::definition::Definition;
use coordinator_core::model::workflow::Step;

use super::*;
use crate::fixture::{checked, fixture};
use crate::{StepMark, legend, step_order};

/// What `SVGWriter` makes of text.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

fn reviewed_notice() -> Definition {
    checked(
        include_str!("../../../examples/reviewed-notice/workflow.yaml"),
        include_str!("../../../examples/reviewed-notice/functions.rhai"),
    )
}

/// Each route label is drawn as many times as routes carry it, and every step is drawn.
fn assert_svg_draws_every_route(definition: &Definition) {
    let svg = svg(definition);
    assert!(svg.starts_with("<?xml") && svg.ends_with("</svg>") && !svg.contains("NaN"), "{svg}");
    let mut routed: BTreeMap<String, usize> = BTreeMap::new();
    for (id, step) in &definition.steps {
        assert!(svg.contains(&format!(">{id}</tspan>")), "step {id} is not drawn");
        for route in step.routes() {
            *routed.entry(route.kind.label()).or_default() += 1;
        }
    }
    for (label, count) in routed {
        let drawn = svg.matches(&format!(">{}</tspan>", escaped(&label))).count();
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
    assert_svg_draws_every_route(&reviewed_notice());
}

#[test]
fn drawings_are_deterministic() {
    let (a, b) = (fixture(), fixture());
    assert_eq!(svg(&a), svg(&b));
    let marks = Marks::along(&["read-subject", "request", "await"], StepMark::Waiting);
    assert_eq!(svg_marked(&a, &marks), svg_marked(&b, &marks.clone()));
}

/// `SVGWriter` lists one CSS class per font size from a `HashMap`.
#[test]
fn one_font_size_marked_or_not() {
    let marks = Marks::along(&["read-subject", "request", "await"], StepMark::Attention);
    for svg in [svg(&fixture()), svg_marked(&fixture(), &marks)] {
        assert_eq!(svg.matches("font-size").count(), 1, "{svg}");
    }
}

#[test]
fn svg_is_svg_marked_without_marks() {
    let definition = reviewed_notice();
    assert_eq!(svg(&definition), svg_marked(&definition, &Marks::default()));
}

#[test]
fn a_marked_step_carries_its_tag_fill_and_thick_outline() {
    let definition = fixture();
    let marks = Marks::along(&["read-subject", "request", "await"], StepMark::Waiting);
    let svg = svg_marked(&definition, &marks);
    for (id, mark) in [("read-subject", StepMark::Done), ("request", StepMark::Done), ("await", StepMark::Waiting)] {
        let line = format!(">{} · {id}</tspan>", mark.tag());
        assert!(svg.contains(&line), "missing {line:?} in\n{svg}");
    }
    assert!(svg.contains(">decide</tspan>"), "a step not entered keeps its plain id");
    assert_eq!(svg.matches(&format!("fill=\"{}ff\"", StepMark::Done.fill())).count(), 2);
    assert_eq!(svg.matches(&format!("fill=\"{}ff\"", StepMark::Waiting.fill())).count(), 1);
    assert_eq!(svg.matches("fill=\"#e6f0ffff\"").count(), 1, "only `send` is an unmarked call");
    // Three outlines, the start arrow and the two routes taken.
    assert_eq!(svg.matches("stroke-width=\"3\"").count(), 6, "{svg}");
}

/// A route taken is drawn thicker; so is every other route between the
/// same two steps, and none other.
#[test]
fn routes_taken_are_thick_and_others_are_not() {
    let definition = reviewed_notice();
    let plain = svg(&definition);
    let path = ["read-application", "request-review", "review-refused"];
    let marked = svg_marked(&definition, &Marks::along(&path, StepMark::Finished));
    assert_eq!(plain.matches("<path ").count(), marked.matches("<path ").count(), "the same routes are drawn");
    // The start arrow, next into request-review, and both refusals into review-refused.
    let thick_paths = marked.split("<path ").skip(1).filter(|p| p.contains("stroke-width=\"3\"")).count();
    assert_eq!(thick_paths, 4, "{marked}");
    assert!(!plain.contains("stroke-width=\"3\""));
}

#[test]
fn every_legend_fill_is_the_drawn_fill() {
    let definition = fixture();
    for entry in legend() {
        let svg = svg_marked(&definition, &Marks::default().with("decide", entry.mark));
        assert!(svg.contains(&format!("fill=\"{}ff\"", entry.fill)), "{:?}", entry.mark);
        assert!(svg.contains(&format!(">{} · decide</tspan>", entry.tag)), "{:?}", entry.mark);
    }
}

/// Marks on ids that are not steps, and routes that are not routes, draw nothing.
#[test]
fn marks_outside_the_graph_draw_nothing() {
    let definition = fixture();
    let mut marks = Marks::default().with("no-such-step", StepMark::Failed);
    marks.routes.insert(("read-subject".to_owned(), "approved".to_owned()));
    assert_eq!(svg_marked(&definition, &marks), svg(&definition));
}

/// A stored package is not necessarily one this checker accepted: a
/// hostile step id, outcome, operation and case value must come out as
/// text, never as markup.
fn hostile() -> (Definition, &'static str) {
    const EVIL: &str = "<script>alert(1)</script>&\"' onload=\"x\" <a href='https://e.test/'>";
    let mut definition = fixture();
    let Some(Step::Finish(mut approved)) = definition.steps.remove("approved") else {
        panic!("the fixture's `approved` is a finish");
    };
    approved.outcome = EVIL.to_owned();
    definition.steps.insert(EVIL.to_owned(), Step::Finish(approved));
    if let Some(Step::Call(send)) = definition.steps.get_mut("send") {
        send.next = EVIL.to_owned();
    }
    if let Some(Step::Choose(decide)) = definition.steps.get_mut("decide") {
        decide.cases.insert(format!("{EVIL}\u{7}\n"), "rejected".to_owned());
    }
    if let Some(pinned) = definition.operations.get_mut("read") {
        pinned.operation = EVIL.to_owned();
    }
    (definition, EVIL)
}

#[test]
fn text_is_escaped_and_the_svg_is_safe_to_inline() {
    let (definition, evil) = hostile();
    assert!(step_order(&definition).iter().any(|(id, _)| *id == evil));
    let path = ["read-subject", "request", "await", "decide", "send", evil];
    let marks = Marks::along(&path, StepMark::Finished);
    for svg in [svg(&definition), svg_marked(&definition, &marks)] {
        let text = escaped(evil);
        assert!(svg.contains(&format!("{text}</tspan>")), "the step id is drawn escaped");
        assert!(svg.contains(&format!(">finish: {text}</tspan>")), "the outcome is drawn escaped");
        assert!(svg.contains(&format!(">call: {text}</tspan>")), "the operation is drawn escaped");
        assert!(svg.contains(&format!(">case: {text}  </tspan>")), "the case label is drawn escaped");
        assert_safe_to_inline(&svg);
    }
}

/// The elements `SVGWriter` writes; anything else (a `<script>`, an `<a>`, a
/// `<foreignObject>`) would be markup that escaped from text.
const ELEMENTS: &[&str] =
    &["?xml", "svg", "defs", "marker", "polygon", "style", "g", "rect", "ellipse", "text", "tspan", "textPath", "path"];

/// The first thing in `svg` that would not be safe to inline in HTML: an
/// unknown element, an event attribute, a reference outside the document, a
/// control character or CSS other than the one font class.
fn unsafe_markup(svg: &str) -> Option<String> {
    if svg.chars().any(|c| c.is_control() && c != '\n') {
        return Some("a control character".to_owned());
    }
    for tag in svg.split('<').skip(1) {
        let head = tag.split('>').next().unwrap_or_default();
        let name = head.split_whitespace().next().unwrap_or_default().trim_start_matches('/');
        if !ELEMENTS.contains(&name) {
            return Some(format!("element <{head}>"));
        }
        let mut rest = head;
        while let Some(eq) = rest.find('=') {
            let attribute = rest[..eq].trim_end().rsplit([' ', '\n', '\t']).next().unwrap_or_default();
            let quoted = rest[eq + 1..].trim_start().strip_prefix('"').and_then(|r| r.split_once('"'));
            let Some((value, after)) = quoted else { return Some(format!("unquoted attribute in <{head}>")) };
            if attribute.to_ascii_lowercase().starts_with("on") {
                return Some(format!("event attribute in <{head}>"));
            }
            let local = value.starts_with('#') || value.starts_with("url(#");
            let reference = attribute.ends_with("href") || value.contains("url(") || value.contains(':');
            let namespace = attribute == "xmlns" && value == "http://www.w3.org/2000/svg";
            if reference && !local && !namespace {
                return Some(format!("reference {attribute}={value:?} in <{head}>"));
            }
            rest = after;
        }
    }
    let style = svg.split("<style>").nth(1).and_then(|s| s.split("</style>").next());
    let only_font = "\n.a14 { font-size: 14px; font-family: Times, serif; }\n";
    if style != Some(only_font) { Some(format!("CSS {style:?}")) } else { None }
}

fn assert_safe_to_inline(svg: &str) {
    if let Some(problem) = unsafe_markup(svg) {
        panic!("{problem} in\n{svg}");
    }
}

/// The check above would see what it must refuse.
#[test]
fn unsafe_markup_is_found() {
    let good = svg(&fixture());
    assert_eq!(unsafe_markup(&good), None);
    for (from, to) in [
        ("<text", "<script>alert(1)</script><text"),
        ("<g >", "<g onload=\"alert(1)\">"),
        ("href=\"#arrow0\"", "href=\"https://e.test/x.svg#a\""),
        ("url(#endarrow)", "url(https://e.test/#endarrow)"),
        ("<text", "<foreignObject></foreignObject><text"),
        ("</style>", ".x { background: url(https://e.test/) }\n</style>"),
        (">start<", ">st\u{7}art<"),
    ] {
        assert!(good.contains(from), "{from}");
        let bad = good.replacen(from, to, 1);
        assert!(unsafe_markup(&bad).is_some(), "{to} was not found");
    }
}

#[test]
fn the_examples_are_safe_to_inline() {
    let definition = reviewed_notice();
    assert_safe_to_inline(&svg(&definition));
    let marks = Marks::along(&["read-application", "request-review"], StepMark::Attention);
    assert_safe_to_inline(&svg_marked(&definition, &marks));
}
