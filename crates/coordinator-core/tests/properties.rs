//! Property tests of the state machine (SPEC §3): random product answers,
//! operators, cancels, notifications and restore holds drive real projects
//! through `decide` on a virtual clock, and every recorded trace must keep the
//! invariants in `properties/invariants.rs`.
//!
//! `properties/broken.rs` shows each invariant catching a deliberately broken
//! rule, so a property that can never fail would be noticed;
//! `properties/regressions.rs` spells out, as fixed event sequences, the machine
//! bugs the properties found. On failure proptest
//! prints the world (and saves its seed under `proptest-regressions/`); the
//! message names the invariant, the event and an excerpt of the trace.

#[path = "support/mod.rs"]
mod support;

#[path = "properties/broken.rs"]
mod broken;
#[path = "properties/driver.rs"]
mod driver;
#[path = "properties/fixtures.rs"]
mod fixtures;
#[path = "properties/invariants.rs"]
mod invariants;
#[path = "properties/regressions.rs"]
mod regressions;
#[path = "properties/trace.rs"]
mod trace;
#[path = "properties/world.rs"]
mod world;

use coordinator_core::machine::decide;
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

use crate::driver::drive;
use crate::fixtures::Fixture;
use crate::world::{World, world};

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
