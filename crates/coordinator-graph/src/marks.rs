//! How a run is marked on its step graph: [`StepMark`], [`Marks`], [`legend`].
//!
//! Owns each mark's tag, legend words and fill, so the SVG and a page's
//! legend cannot disagree. A mark must be recognisable without colour: its
//! tag (a glyph and a word) is written before the step id and its outline is
//! [`MARKED_LINE_WIDTH`] wide. It does not decide which mark a step gets:
//! the caller reads that from the run.

use std::collections::{BTreeMap, BTreeSet};

/// The outline of a marked step and the line of a route the run took, in
/// pixels; everything else is drawn 1 px wide.
pub const MARKED_LINE_WIDTH: usize = 3;

/// What a run did at one step. A step without a mark was not entered and
/// is drawn as in the unmarked graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StepMark {
    /// Entered and left.
    Done,
    /// The run is at this step now (a call in progress, a choice being made).
    Current,
    /// The run is at this step now, waiting (a wait-until's timer, a wait-for's completion).
    Waiting,
    /// The run is at this step and needs an operator (an unknown effect, a restore hold).
    Attention,
    /// The run failed at this step.
    Failed,
    /// The run was cancelled or expired at this step (not by a finish step).
    Stopped,
    /// The finish step the run reached.
    Finished,
}

impl StepMark {
    /// Every mark, in the legend's order.
    pub const ALL: [StepMark; 7] = [
        StepMark::Done,
        StepMark::Current,
        StepMark::Waiting,
        StepMark::Attention,
        StepMark::Failed,
        StepMark::Stopped,
        StepMark::Finished,
    ];

    /// The glyph and word written before the step id in the drawing. The
    /// glyphs are text symbols with no emoji form, in fonts as common as
    /// DejaVu (so `◷`, not `⏸` or `⧗`).
    pub fn tag(self) -> &'static str {
        match self {
            StepMark::Done => "✓ done",
            StepMark::Current => "► now",
            StepMark::Waiting => "◷ waiting",
            StepMark::Attention => "⚠ attention",
            StepMark::Failed => "✗ failed",
            StepMark::Stopped => "⊘ stopped",
            StepMark::Finished => "■ finished",
        }
    }

    /// The words of the legend.
    pub fn label(self) -> &'static str {
        match self {
            StepMark::Done => "entered and left",
            StepMark::Current => "the run is here now",
            StepMark::Waiting => "the run is waiting here",
            StepMark::Attention => "needs an operator here",
            StepMark::Failed => "the run failed here",
            StepMark::Stopped => "cancelled or expired here",
            StepMark::Finished => "the finish reached",
        }
    }

    /// The fill of a step with this mark, `#rrggbb`. Each is darker than
    /// every unmarked step's fill and light enough for the dark text.
    pub fn fill(self) -> &'static str {
        match self {
            StepMark::Done => "#b7dfb2",
            StepMark::Current => "#7db4f5",
            StepMark::Waiting => "#c2a3f0",
            StepMark::Attention => "#ffb547",
            StepMark::Failed => "#f28b82",
            StepMark::Stopped => "#bdbdbd",
            StepMark::Finished => "#66bb6a",
        }
    }

    /// [`StepMark::fill`] as layout-rs's opaque RGBA.
    pub(crate) fn rgba(self) -> u32 {
        match self {
            StepMark::Done => 0xb7dfb2ff,
            StepMark::Current => 0x7db4f5ff,
            StepMark::Waiting => 0xc2a3f0ff,
            StepMark::Attention => 0xffb547ff,
            StepMark::Failed => 0xf28b82ff,
            StepMark::Stopped => 0xbdbdbdff,
            StepMark::Finished => 0x66bb6aff,
        }
    }
}

/// One row of the legend: everything a page needs to draw a key matching the SVG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegendEntry {
    /// The mark.
    pub mark: StepMark,
    /// Its fill, `#rrggbb` ([`StepMark::fill`]).
    pub fill: &'static str,
    /// Its tag, as written in the drawing ([`StepMark::tag`]).
    pub tag: &'static str,
    /// Its words ([`StepMark::label`]).
    pub label: &'static str,
}

/// The legend, one entry per mark in [`StepMark::ALL`] order. Marked steps
/// and taken routes are drawn [`MARKED_LINE_WIDTH`] px wide.
pub fn legend() -> Vec<LegendEntry> {
    StepMark::ALL
        .into_iter()
        .map(|mark| LegendEntry { mark, fill: mark.fill(), tag: mark.tag(), label: mark.label() })
        .collect()
}

/// A run drawn on its graph: the mark of each entered step and the routes
/// it took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// Step id -> its mark. Ids that are not steps of the definition draw nothing.
    pub steps: BTreeMap<String, StepMark>,
    /// The routes taken, `(from, to)` step ids. Every route between the two
    /// steps is drawn thicker: a run's path of steps cannot tell a `next`
    /// from a refusal that leads to the same step. Pairs that are no route
    /// of the definition draw nothing.
    pub routes: BTreeSet<(String, String)>,
}

impl Marks {
    /// A run that entered `path` in order: each step [`StepMark::Done`]
    /// except the last, which is `last`, and each consecutive pair a route.
    /// (A run's `path` lists every step entered, in order.)
    pub fn along<S: AsRef<str>>(path: &[S], last: StepMark) -> Marks {
        let mut marks = Marks::default();
        for (i, step) in path.iter().enumerate() {
            let mark = if i + 1 == path.len() { last } else { StepMark::Done };
            marks.steps.insert(step.as_ref().to_owned(), mark);
        }
        for pair in path.windows(2) {
            marks.routes.insert((pair[0].as_ref().to_owned(), pair[1].as_ref().to_owned()));
        }
        marks
    }

    /// These marks with `step` marked `mark` (replacing its mark, if any).
    #[must_use]
    pub fn with(mut self, step: &str, mark: StepMark) -> Marks {
        self.steps.insert(step.to_owned(), mark);
        self
    }

    /// Whether nothing is marked (the drawing is the unmarked graph's).
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.routes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn along_marks_each_step_done_but_the_last_and_each_pair_a_route() {
        let marks = Marks::along(&["a", "b", "c"], StepMark::Waiting);
        let steps: Vec<(&str, StepMark)> = marks.steps.iter().map(|(id, m)| (id.as_str(), *m)).collect();
        assert_eq!(steps, [("a", StepMark::Done), ("b", StepMark::Done), ("c", StepMark::Waiting)]);
        let routes: Vec<(&str, &str)> = marks.routes.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(routes, [("a", "b"), ("b", "c")]);
        assert!(Marks::along::<&str>(&[], StepMark::Current).is_empty());
    }

    #[test]
    fn tags_labels_and_fills_are_distinct_and_fills_agree_with_the_drawing() {
        let entries = legend();
        assert_eq!(entries.iter().map(|e| e.mark).collect::<Vec<_>>(), StepMark::ALL);
        for (i, a) in entries.iter().enumerate() {
            assert_eq!(format!("#{:06x}", a.mark.rgba() >> 8), a.fill, "{:?}", a.mark);
            assert_eq!(a.mark.rgba() & 0xff, 0xff, "{:?} is opaque", a.mark);
            assert!(a.tag.chars().count() <= 11, "{:?}'s tag is short", a.mark);
            for b in &entries[i + 1..] {
                assert!(a.fill != b.fill && a.tag != b.tag && a.label != b.label, "{:?} vs {:?}", a.mark, b.mark);
            }
        }
    }

    /// The tag's glyph is what tells marks apart without colour, so each
    /// starts with a different one.
    #[test]
    fn each_tag_starts_with_its_own_glyph() {
        let glyphs: BTreeSet<char> = StepMark::ALL.iter().filter_map(|m| m.tag().chars().next()).collect();
        assert_eq!(glyphs.len(), StepMark::ALL.len());
        assert!(glyphs.iter().all(|g| !g.is_ascii()));
    }
}
