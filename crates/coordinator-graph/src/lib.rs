//! Drawings of a workflow's step graph: Mermaid, Graphviz DOT and SVG.
//!
//! Owns the order in which steps are listed ([`step_order`]), each format's
//! escaping, the SVG layout (through layout-rs, which no other crate uses)
//! and how a run is marked on it ([`svg_marked`], [`Marks`], [`StepMark`],
//! [`legend`]). `coordinatorctl graph` and the service's console draw from
//! these same functions, so both show the same picture.
//!
//! Every function takes a [`Definition`](coordinator_core::definition::Definition):
//! a checked project's or a stored package's. It proves nothing (the graph is
//! already checked), decides nothing about runs (the caller says what each
//! step's mark is) and does no IO. The same definition and marks always give
//! the same bytes.

mod marks;
mod order;
mod svg;
mod text;

#[cfg(test)]
mod fixture;

pub use marks::{LegendEntry, MARKED_LINE_WIDTH, Marks, StepMark, legend};
pub use order::step_order;
pub use svg::{svg, svg_marked};
pub use text::{dot, mermaid};
