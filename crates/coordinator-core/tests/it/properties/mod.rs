//! Property tests of the state machine (docs/reference/runs.md): random product answers,
//! operators, cancels, notifications and restore holds drive real projects
//! through `decide` on a virtual clock, and every recorded trace must keep the
//! invariants in [`invariants`].
//!
//! [`broken`] shows each invariant catching a deliberately broken rule, so a
//! property that can never fail would be noticed; [`regressions`] spells out,
//! as fixed event sequences, the machine bugs the properties found. The
//! projects driven are the examples and `tests/properties/mix` ([`fixtures`]). On failure proptest
//! prints the world (and saves its seed under `proptest-regressions/`); the
//! message names the invariant, the event and an excerpt of the trace.

mod broken;
mod driver;
mod fixtures;
mod invariants;
mod regressions;
mod trace;
mod world;

use coordinator_core::machine::decide;
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

use self::driver::drive;
use self::fixtures::Fixture;
use self::world::{World, world};

/// Drives a fixture through the real machine and checks every invariant.
fn holds(fixture: &'static Fixture, world: &World) -> Result<(), TestCaseError> {
    let trace = drive(fixture, world, &decide);
    invariants::all(&fixture.workflow, &trace, &decide).map_err(TestCaseError::fail)
}

/// Few enough cases to run in seconds in a debug build; failures are saved (relative to the crate) and replayed first.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 64,
        max_shrink_iters: 2_000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/properties.txt"))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn reviewed_notice_keeps_the_invariants(world in world()) {
        holds(fixtures::reviewed_notice(), &world)?;
    }

    #[test]
    fn appointment_reminder_keeps_the_invariants(world in world()) {
        holds(fixtures::appointment_reminder(), &world)?;
    }

    #[test]
    fn permit_check_keeps_the_invariants(world in world()) {
        holds(fixtures::permit_check(), &world)?;
    }

    #[test]
    fn property_mix_keeps_the_invariants(world in world()) {
        holds(fixtures::mix(), &world)?;
    }
}

/// The calm world runs every fixture to a finish, so the driver and the tables are sound.
#[test]
fn a_calm_world_finishes_every_fixture() {
    for fixture in
        [fixtures::reviewed_notice(), fixtures::appointment_reminder(), fixtures::permit_check(), fixtures::mix()]
    {
        let trace = drive(fixture, &World::calm(), &decide);
        let last = trace.last();
        assert_eq!(
            last.state,
            coordinator_core::model::run::RunState::Finished,
            "{}: {:?}\n{}",
            fixture.name,
            last.failure,
            trace.excerpt(trace.entries.len().saturating_sub(1))
        );
        if let Err(e) = invariants::all(&fixture.workflow, &trace, &decide) {
            panic!("{e}");
        }
    }
}
