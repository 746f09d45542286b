//! Graph proofs: every route names an existing step, the graph is acyclic, and
//! every step is reachable from `start` (`graph.*`). Every route then ends in a
//! `finish`, because only `finish` steps have no routes out.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnostic::Code;
use crate::model::workflow::{Source, Step};
use crate::yaml::{Part, Path};

use super::context::{Ctx, step_path};

/// What later checks need to know about the graph.
pub struct Graph {
    /// Steps reachable from `start`, in an order where every step comes after its predecessors.
    /// Empty when the graph has a cycle.
    pub order: Vec<String>,
    /// Whether the graph has no cycle (data-flow is only defined then).
    pub acyclic: bool,
}

/// Runs the graph proofs.
pub fn check(cx: &mut Ctx<'_>) -> Graph {
    let wf = cx.wf;
    if !wf.steps.contains_key(&wf.start) {
        cx.error(
            Code::GraphUnknownStep,
            &Path::root().key("start"),
            Part::Value,
            format!("`start` names `{}`, which is not a step", wf.start),
            hint(cx, &wf.start),
        );
    }
    for (id, step) in &wf.steps {
        for route in step.routes() {
            if !wf.steps.contains_key(route.target) {
                let mut path = step_path(id);
                for f in &route.field {
                    path = path.key(f);
                }
                cx.error(
                    Code::GraphUnknownStep,
                    &path,
                    Part::Value,
                    format!("the {} route of `{id}` names `{}`, which is not a step", route.kind.label(), route.target),
                    hint(cx, route.target),
                );
            }
        }
        if let Step::WaitFor(w) = step
            && !wf.steps.contains_key(&w.completion.step)
        {
            let path = step_path(id).key("completion").key("step");
            cx.error(
                Code::GraphUnknownStep,
                &path,
                Part::Value,
                format!("`{id}` waits for a completion of `{}`, which is not a step", w.completion.step),
                hint(cx, &w.completion.step),
            );
        }
        for (field, mapping) in step.mappings() {
            for (i, source) in mapping.arguments.iter().enumerate() {
                if let Source::Step { step: read } = source
                    && !wf.steps.contains_key(read)
                {
                    let path = step_path(id).key(field).key("arguments").index(i).key("step");
                    cx.error(
                        Code::GraphUnknownStep,
                        &path,
                        Part::Value,
                        format!("`{id}` reads `{read}`, which is not a step"),
                        hint(cx, read),
                    );
                }
            }
        }
    }
    let acyclic = cycles(cx);
    let reachable = reachable(cx);
    if wf.steps.contains_key(&wf.start) {
        unreachable(cx, &reachable);
    }
    let order = if acyclic { topological(cx, &reachable) } else { Vec::new() };
    Graph { order, acyclic }
}

fn hint(cx: &Ctx<'_>, name: &str) -> String {
    let ids: Vec<&str> = cx.wf.steps.keys().map(String::as_str).collect();
    match crate::decode::closest(name, &ids) {
        Some(near) => format!("did you mean `{near}`?"),
        None => "name one of the steps under `steps`".to_owned(),
    }
}

fn successors<'w>(step: &'w Step, steps: &BTreeMap<String, Step>) -> Vec<(&'w String, Vec<String>)> {
    step.routes().into_iter().filter(|r| steps.contains_key(r.target)).map(|r| (r.target, r.field)).collect()
}

/// Reports each edge that closes a cycle; returns whether there was none.
fn cycles(cx: &mut Ctx<'_>) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let steps = &cx.wf.steps;
    let mut marks: BTreeMap<&str, Mark> = steps.keys().map(|k| (k.as_str(), Mark::New)).collect();
    let mut found = Vec::new();
    // From `start` first, so the edge reported is the one that routes back to an earlier step.
    let roots = std::iter::once(&cx.wf.start).chain(steps.keys()).filter(|id| steps.contains_key(*id));
    for root in roots {
        if marks[root.as_str()] != Mark::New {
            continue;
        }
        // Iterative depth-first search: (step, index of the next successor to visit).
        let mut stack: Vec<(&String, usize)> = vec![(root, 0)];
        marks.insert(root, Mark::Active);
        while let Some((id, next)) = stack.pop() {
            let succ = successors(&steps[id], steps);
            if let Some((target, field)) = succ.get(next) {
                stack.push((id, next + 1));
                match marks[target.as_str()] {
                    Mark::New => {
                        marks.insert(target, Mark::Active);
                        stack.push((target, 0));
                    }
                    Mark::Active => {
                        let start = stack.iter().position(|(s, _)| *s == *target).unwrap_or(0);
                        let mut ring: Vec<&str> = stack[start..].iter().map(|(s, _)| s.as_str()).collect();
                        ring.push(target);
                        found.push((id.clone(), field.clone(), ring.join(" → ")));
                    }
                    Mark::Done => {}
                }
            } else {
                marks.insert(id, Mark::Done);
            }
        }
    }
    for (id, field, ring) in &found {
        let mut path = step_path(id);
        for f in field {
            path = path.key(f);
        }
        cx.error(
            Code::GraphCycle,
            &path,
            Part::Value,
            format!("the steps form a cycle: {ring}"),
            "the step graph must be acyclic: route to a new step instead of an earlier one",
        );
    }
    found.is_empty()
}

/// Steps reachable from `start`. A route to an unknown step counts as a route to
/// the step its name is closest to (the one its diagnostic suggests), so that one
/// typo is not reported again as an unreachable step.
fn reachable<'w>(cx: &Ctx<'w>) -> BTreeSet<&'w str> {
    let steps = &cx.wf.steps;
    let ids: Vec<&str> = steps.keys().map(String::as_str).collect();
    let resolve = |target: &'w str| -> Option<&'w str> {
        match steps.get_key_value(target) {
            Some((id, _)) => Some(id.as_str()),
            None => crate::decode::closest(target, &ids)
                .and_then(|near| steps.get_key_value(near))
                .map(|(id, _)| id.as_str()),
        }
    };
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = resolve(cx.wf.start.as_str()).into_iter().collect();
    while let Some(id) = todo.pop() {
        if seen.insert(id) {
            todo.extend(steps[id].routes().into_iter().filter_map(|r| resolve(r.target.as_str())));
        }
    }
    seen
}

/// Reports each unreachable region once, at its entry steps (those no other
/// unreachable step routes to), counting the steps behind them.
fn unreachable(cx: &mut Ctx<'_>, reachable: &BTreeSet<&str>) {
    let steps = &cx.wf.steps;
    let lost: BTreeSet<&str> = steps.keys().map(String::as_str).filter(|id| !reachable.contains(id)).collect();
    let mut entered: BTreeSet<&str> = BTreeSet::new();
    for id in &lost {
        for (target, _) in successors(&steps[*id], steps) {
            if target != id {
                entered.insert(target.as_str());
            }
        }
    }
    let mut entries: Vec<&str> = lost.iter().copied().filter(|id| !entered.contains(id)).collect();
    if entries.is_empty() {
        // An unreachable cycle has no entry; report its first step.
        entries.extend(lost.first().copied());
    }
    let mut reports = Vec::new();
    for entry in entries {
        let mut behind = BTreeSet::new();
        let mut todo = vec![entry];
        while let Some(id) = todo.pop() {
            for (target, _) in successors(&steps[id], steps) {
                if lost.contains(target.as_str()) && target != entry && behind.insert(target.as_str()) {
                    todo.push(target.as_str());
                }
            }
        }
        let tail = match behind.len() {
            0 => String::new(),
            1 => " (nor can the step after it)".to_owned(),
            n => format!(" (nor can the {n} steps after it)"),
        };
        reports.push((entry.to_owned(), tail));
    }
    for (id, tail) in reports {
        cx.error(
            Code::GraphUnreachableStep,
            &step_path(&id),
            Part::Key,
            format!("step `{id}` cannot be reached from `start`{tail}"),
            "route to it from another step, or remove it",
        );
    }
}

/// Kahn's algorithm over the reachable steps; ties broken by id for a stable order.
fn topological(cx: &Ctx<'_>, reachable: &BTreeSet<&str>) -> Vec<String> {
    let steps = &cx.wf.steps;
    let mut indegree: BTreeMap<&str, usize> = reachable.iter().map(|id| (*id, 0)).collect();
    for id in reachable {
        for (target, _) in successors(&steps[*id], steps) {
            if let Some(n) = indegree.get_mut(target.as_str()) {
                *n += 1;
            }
        }
    }
    let mut ready: BTreeSet<&str> = indegree.iter().filter(|(_, n)| **n == 0).map(|(id, _)| *id).collect();
    let mut order = Vec::with_capacity(reachable.len());
    while let Some(id) = ready.pop_first() {
        order.push(id.to_owned());
        for (target, _) in successors(&steps[id], steps) {
            if let Some(n) = indegree.get_mut(target.as_str()) {
                *n -= 1;
                if *n == 0 {
                    ready.insert(target);
                }
            }
        }
    }
    order
}
