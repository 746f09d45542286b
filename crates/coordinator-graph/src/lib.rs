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
//!
//! Modules (private; their items are re-exported here):
//! - [`order`]: the nodes and edges every format draws, in one order
//!   ([`step_order`]).
//! - [`text`]: the text formats, Mermaid ([`mermaid`]) and Graphviz DOT
//!   ([`dot`]).
//! - [`svg`](mod@svg): the SVG drawing laid out by layout-rs ([`svg()`]), and a
//!   run marked on it ([`svg_marked`]).
//! - [`marks`]: how a run is marked: each mark's tag, legend words and fill.
//! - `fixture` (tests only): the unit tests' small project, checked in memory.

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
