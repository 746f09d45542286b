//! The SVG drawing, laid out by layout-rs top to bottom, and a run marked on it.
//!
//! Owns the shapes (call = box, choose = ellipse, waits = rounded box,
//! finish = double ellipse, `start` = grey circle), the fills, how marks are
//! drawn and what text reaches layout-rs. Each route label is the text of the
//! connector layout-rs inserts into its edge.
//!
//! Safe to inline in HTML: layout-rs's `SVGWriter` escapes `&`, `<`, `>`,
//! `"` and `'` in every text it writes (node labels and route labels), and
//! control characters, which XML cannot hold, are replaced by spaces before
//! text is handed to it. The output holds no script, no event attribute and
//! no external reference: its only references are `url(#…)` and `href="#…"`
//! to its own markers and paths.
//!
//! Deterministic: one font size ([`FONT_SIZE`]) and nodes and edges added in
//! [`step_order`](crate::step_order).

use coordinator_core::definition::Definition;
use coordinator_core::model::workflow::Step;
use layout::backends::svg::SVGWriter;
use layout::core::base::Orientation;
use layout::core::color::Color;
use layout::core::geometry::Point;
use layout::core::style::{LineStyleKind, StyleAttr};
use layout::std_shapes::shapes::{Arrow, Element, ShapeKind};
use layout::topo::layout::VisualGraph;

use crate::marks::{MARKED_LINE_WIDTH, Marks};
use crate::order::{dashed, drawing};

/// The one font size of the SVG. `SVGWriter` lists one CSS class per size
/// from a `HashMap`, so a second size would make the bytes vary between runs.
const FONT_SIZE: usize = 14;
const INK: u32 = 0x333333ff;
/// The outline of an unmarked step and the line of a route not taken.
const LINE_WIDTH: usize = 1;

/// An SVG of the step graph with no run on it: [`svg_marked`] with no marks.
pub fn svg(definition: &Definition) -> String {
    svg_marked(definition, &Marks::default())
}

/// An SVG of the step graph with a run on it. A marked step has its tag
/// ([`StepMark::tag`](crate::StepMark::tag)) before its id, its mark's fill
/// and a [`MARKED_LINE_WIDTH`] outline; a route the run took (and the start
/// arrow, when the first step is marked) is drawn [`MARKED_LINE_WIDTH`] wide.
/// Steps not entered look as in [`svg`]. Shapes, ranks and the order of
/// steps within a rank are the unmarked graph's; a tag widens its box, so
/// positions can shift by that much.
pub fn svg_marked(definition: &Definition, marks: &Marks) -> String {
    let (nodes, edges) = drawing(definition);
    let mut graph = VisualGraph::new(Orientation::TopToBottom);
    let start = graph.add_node(svg_node(ShapeKind::new_circle("start"), 0xe8e8e8ff, 0, LINE_WIDTH));
    let handles: Vec<_> = nodes
        .iter()
        .map(|(id, step, caption)| {
            let (shape, fill, rounded): (fn(String) -> ShapeKind, _, _) = match step {
                Step::Call(_) => (ShapeKind::Box, 0xe6f0ffff, 0),
                Step::Choose(_) => (ShapeKind::Circle, 0xfff6d6ff, 0),
                Step::WaitUntil(_) | Step::WaitFor(_) => (ShapeKind::Box, 0xf3ecffff, 18),
                Step::Finish(_) => (ShapeKind::DoubleCircle, 0xe3f5e1ff, 0),
            };
            let text = format!("{}\n{}", plain(id), plain(caption));
            let node = match marks.steps.get(*id) {
                None => svg_node(shape(text), fill, rounded, LINE_WIDTH),
                Some(mark) => {
                    let text = format!("{} · {text}", mark.tag());
                    svg_node(shape(text), mark.rgba(), rounded, MARKED_LINE_WIDTH)
                }
            };
            graph.add_node(node)
        })
        .collect();
    let arrow = |text: String, dashed: bool, taken: bool| {
        let width = if taken { MARKED_LINE_WIDTH } else { LINE_WIDTH };
        let look = StyleAttr::new(Color::new(INK), width, None, 0, FONT_SIZE);
        let line_style = if dashed { LineStyleKind::Dashed } else { LineStyleKind::Normal };
        Arrow { line_style, text: plain(&text), look, ..Arrow::default() }
    };
    if let (Some(&first), Some((id, _, _))) = (handles.first(), nodes.first()) {
        let entered = marks.steps.contains_key(*id);
        graph.add_edge(arrow(String::new(), false, entered), start, first);
    }
    for (from, to, kind) in edges {
        let taken = marks.routes.contains(&(nodes[from].0.to_owned(), nodes[to].0.to_owned()));
        graph.add_edge(arrow(kind.label(), dashed(kind), taken), handles[from], handles[to]);
    }
    let mut writer = SVGWriter::new();
    graph.do_it(false, false, false, &mut writer);
    fit_canvas(writer.finalize(), &graph)
}

/// `text` with every control character (XML 1.0 cannot hold most of them; a
/// line break would start a new label line) and noncharacter replaced by a
/// space. Markup characters are left for `SVGWriter`, which escapes them.
fn plain(text: &str) -> String {
    text.chars().map(|c| if c.is_control() || matches!(c, '\u{fffe}' | '\u{ffff}') { ' ' } else { c }).collect()
}

fn svg_node(kind: ShapeKind, fill: u32, rounded: usize, line_width: usize) -> Element {
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
    let look = StyleAttr::new(Color::new(INK), line_width, fill, rounded, FONT_SIZE);
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
#[path = "svg_tests.rs"]
mod tests;
