//! The nodes and edges every format draws, in one order.
//!
//! Owns [`step_order`] (breadth-first from `start`, each step's routes in
//! [`Step::routes`] order), the caption under each step id, and which routes
//! are dashed. One node per step, one edge per route. Formats take their
//! shapes and escaping from here down; nothing here knows a format.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use coordinator_core::definition::Definition;
use coordinator_core::model::workflow::{RouteKind, Step};

/// The steps of a definition breadth-first from `start`, routes in order.
/// A checked graph has no unreachable step; any would follow in id order.
pub fn step_order(definition: &Definition) -> Vec<(&str, &Step)> {
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
pub(crate) type Node<'a> = (&'a str, &'a Step, String);
/// A route to draw between two indexes of the node list.
pub(crate) type Edge<'a> = (usize, usize, RouteKind<'a>);

/// The nodes in [`step_order`] and the edges in that order, each step's routes in turn.
pub(crate) fn drawing(definition: &Definition) -> (Vec<Node<'_>>, Vec<Edge<'_>>) {
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

/// Routes taken because something did NOT happen (refusal, timeout, cancel) are dashed.
pub(crate) fn dashed(kind: RouteKind<'_>) -> bool {
    match kind {
        RouteKind::Next | RouteKind::Case(_) => false,
        RouteKind::Refusal(_) | RouteKind::Timeout | RouteKind::Cancel => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::fixture;

    #[test]
    fn steps_are_listed_breadth_first_from_start_routes_in_order() {
        let definition = fixture();
        let ids: Vec<&str> = step_order(&definition).into_iter().map(|(id, _)| id).collect();
        let expected = [
            "read-subject",
            "request",
            "await",
            "refused",
            "decide",
            "timed-out",
            "cancelled",
            "send",
            "rejected",
            "approved",
        ];
        assert_eq!(ids, expected);
    }

    #[test]
    fn an_unreachable_step_follows_in_id_order() {
        let mut definition = fixture();
        let Some(orphan) = definition.steps.get("approved").cloned() else {
            panic!("the fixture has `approved`");
        };
        definition.steps.insert("0-orphan".to_owned(), orphan);
        let order = step_order(&definition);
        assert_eq!(order.last().map(|(id, _)| *id), Some("0-orphan"));
    }
}
