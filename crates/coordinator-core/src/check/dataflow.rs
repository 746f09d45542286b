//! Data-flow proof (definite assignment over the step DAG).
//!
//! A `{type: step, step: X}` source is available at step S only if X produced
//! its output on EVERY route from `start` to S. A call produces its output on
//! its `next` route only (its refusal routes carry nothing); a `wait-for`
//! produces its completion value on `next` only (timeout and cancel routes carry
//! nothing). The same rule places each `wait-for` after its call.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnostic::Code;
use crate::model::workflow::{RouteKind, Source, Step};
use crate::yaml::Part;

use super::context::{Ctx, step_path};
use super::graph::Graph;

/// Outputs available on entry to each reachable step.
pub struct Availability<'w> {
    available: BTreeMap<&'w str, BTreeSet<&'w str>>,
    /// Step -> (predecessor, route kind) for every route into it.
    predecessors: BTreeMap<&'w str, Vec<(&'w str, RouteKind<'w>)>>,
}

impl<'w> Availability<'w> {
    /// Computes availability in topological order.
    pub fn compute(steps: &'w BTreeMap<String, Step>, order: &'w [String]) -> Self {
        let mut available: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut predecessors: BTreeMap<&str, Vec<(&str, RouteKind<'_>)>> = BTreeMap::new();
        if let Some(first) = order.first() {
            available.insert(first.as_str(), BTreeSet::new());
        }
        for id in order {
            let step = &steps[id];
            let inbound = available.get(id.as_str()).cloned().unwrap_or_default();
            for route in step.routes() {
                let Some((target, _)) = steps.get_key_value(route.target) else { continue };
                let mut out = inbound.clone();
                if route.kind.produces_output() && step.has_output() {
                    out.insert(id.as_str());
                }
                predecessors.entry(target.as_str()).or_default().push((id.as_str(), route.kind));
                available.entry(target.as_str()).and_modify(|set| set.retain(|s| out.contains(s))).or_insert(out);
            }
        }
        Availability { available, predecessors }
    }

    /// Whether `output` is available on entry to `step`.
    pub fn is_available(&self, step: &str, output: &str) -> bool {
        self.available.get(step).is_some_and(|set| set.contains(output))
    }

    /// The outputs available on entry to `step`.
    pub fn at(&self, step: &str) -> Option<&BTreeSet<&'w str>> {
        self.available.get(step)
    }

    /// A route from `start` to `step` on which `output` was not produced, for messages.
    pub fn route_without(&self, step: &'w str, output: &str) -> String {
        let mut route = vec![step.to_owned()];
        let mut current = step;
        while let Some((pred, kind)) = self.hop_without(current, output) {
            if pred == output {
                // The step itself, left by a route on which it produced nothing.
                route.push(format!("{pred} ({})", kind.label()));
                break;
            }
            route.push(match kind {
                RouteKind::Next => pred.to_owned(),
                other => format!("{pred} ({})", other.label()),
            });
            current = pred;
        }
        route.reverse();
        route.join(" → ")
    }

    /// A route into `step` on which `output` is not available.
    fn hop_without(&self, step: &str, output: &str) -> Option<(&'w str, RouteKind<'w>)> {
        self.predecessors.get(step)?.iter().copied().find(|(pred, kind)| {
            let produced_here = *pred == output && kind.produces_output();
            !produced_here && !self.is_available(pred, output)
        })
    }
}

/// Runs the data-flow proof and the wait ordering proof.
pub fn check<'w>(cx: &mut Ctx<'w>, graph: &'w Graph) -> Option<Availability<'w>> {
    if !graph.acyclic {
        return None;
    }
    let steps = &cx.wf.steps;
    let avail = Availability::compute(steps, &graph.order);
    for id in &graph.order {
        let step = &steps[id];
        for (field, mapping) in step.mappings() {
            for (i, source) in mapping.arguments.iter().enumerate() {
                let Source::Step { step: read } = source else { continue };
                let Some(read_step) = steps.get(read) else { continue };
                let path = step_path(id).key(field).key("arguments").index(i).key("step");
                if !read_step.has_output() {
                    cx.error(
                        Code::DataflowNoOutput,
                        &path,
                        Part::Value,
                        format!("`{id}` reads `{read}`, a {} step, which has no output", read_step.type_name()),
                        "read a call or a wait-for step",
                    );
                } else if !avail.is_available(id, read) {
                    let route = avail.route_without(id, read);
                    cx.error(
                        Code::DataflowUnavailableOnRoute,
                        &path,
                        Part::Value,
                        format!("`{id}` reads `{read}`, which has no output on the route {route}"),
                        format!("read `{read}` only where it completed on every route: refusal, timeout and cancel routes carry no output"),
                    );
                }
            }
        }
        if let Step::WaitFor(w) = step
            && let Some(Step::Call(_)) = steps.get(&w.completion.step)
            && !avail.is_available(id, &w.completion.step)
        {
            let route = avail.route_without(id, &w.completion.step);
            cx.error(
                Code::WaitCompletionNotBefore,
                &step_path(id).key("completion").key("step"),
                Part::Value,
                format!("`{id}` can be reached without `{}` having been accepted: {route}", w.completion.step),
                "place the wait after its call on every route",
            );
        }
    }
    Some(avail)
}
