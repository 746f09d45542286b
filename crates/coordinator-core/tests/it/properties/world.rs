//! The world outside the machine, decided up front by proptest: how products
//! answer (and how long they take), what operators do and when, cancels,
//! completion notifications and restore holds. Every tape is consumed in order
//! and has a calm default once spent, so shrinking a world shortens its story.

use proptest::prelude::*;

/// A point in virtual time, relative to admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// Seconds after admission (the first minutes and hours, where calls and first observations happen).
    Seconds(u64),
    /// Thousandths of the workflow's deadline (up to past it, so ended runs get events too).
    Permille(u32),
}

impl Moment {
    pub fn seconds(self, deadline_seconds: u64) -> u64 {
        match self {
            Moment::Seconds(s) => s,
            Moment::Permille(p) => deadline_seconds.saturating_mul(u64::from(p)) / 1000,
        }
    }
}

/// How a product answers one attempt of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerPick {
    /// Success with the fixture's `variant`th output (one that breaks the schema if `invalid`).
    Accepted { variant: u8, invalid: bool },
    /// Refused with a code the operation's owner declares (or an undeclared one when it declares none).
    RefusedDeclared { index: u8 },
    /// Refused with a code nobody declares.
    RefusedUndeclared,
    /// Definitely not done, with an optional `Retry-After`.
    Retryable { after: Option<u64> },
    /// No answer: may have reached the product.
    Uncertain,
}

/// How one observation of a completion comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObservationPick {
    Pending,
    Complete { variant: u8, invalid: bool },
    Unavailable,
}

/// What one receipt lookup finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiptPick {
    Found { variant: u8, invalid: bool },
    NotFound,
    Expired,
    Unavailable,
}

/// What the operator does while the current call's effect is unknown (in attention, during a retry-same,
/// or after the run ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorPick {
    Reconcile,
    RetrySame,
    Cancel,
    /// The operator does nothing more.
    Stop,
}

/// A restore hold: placed at one moment, released some time later (or never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldPlan {
    pub place: Moment,
    pub release_after: Option<Moment>,
}

/// Everything outside the machine, decided up front.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    /// Which of the fixture's inputs the run is admitted with.
    pub input: u8,
    /// One answer per call attempt, in dispatch order; once spent, every attempt is accepted.
    pub answers: Vec<AnswerPick>,
    /// How long each product reply (answer, observation, receipt) takes, in the order they are sent;
    /// once spent, replies are instant.
    pub latencies: Vec<Moment>,
    /// Whether the answer with the same index is delivered twice (at-least-once delivery).
    pub duplicates: Vec<bool>,
    /// One per observation; once spent, `observation_tail` answers every further one.
    pub observations: Vec<ObservationPick>,
    pub observation_tail: ObservationPick,
    /// One per receipt lookup; once spent, the product cannot be asked.
    pub receipts: Vec<ReceiptPick>,
    /// One per time the run needs an operator; once spent (or at `Stop`), nobody comes.
    pub operator: Vec<OperatorPick>,
    /// Operator requests at any moment, whether or not the run needs one (the API allows them):
    /// what, and which call step (even: the current step; odd: a call step by index).
    pub requests: Vec<(Moment, OperatorPick, u8)>,
    pub cancel_at: Option<Moment>,
    /// Completion notifications: when, and which wait-for step (by index) they name.
    pub notifications: Vec<(Moment, u8)>,
    pub hold: Option<HoldPlan>,
}

impl World {
    /// Every product answers at once and successfully; nobody intervenes.
    pub fn calm() -> World {
        World {
            input: 0,
            answers: Vec::new(),
            latencies: Vec::new(),
            duplicates: Vec::new(),
            observations: Vec::new(),
            observation_tail: ObservationPick::Complete { variant: 0, invalid: false },
            receipts: Vec::new(),
            operator: Vec::new(),
            requests: Vec::new(),
            cancel_at: None,
            notifications: Vec::new(),
            hold: None,
        }
    }
}

fn moment() -> impl Strategy<Value = Moment> {
    prop_oneof![(0u64..4_000).prop_map(Moment::Seconds), (0u32..1_300).prop_map(Moment::Permille)]
}

fn latency() -> impl Strategy<Value = Moment> {
    prop_oneof![
        6 => Just(Moment::Seconds(0)),
        3 => (1u64..600).prop_map(Moment::Seconds),
        1 => (0u32..1_100).prop_map(Moment::Permille),
    ]
}

fn variant() -> impl Strategy<Value = (u8, bool)> {
    (0u8..6, prop::bool::weighted(0.08))
}

fn answer_pick() -> impl Strategy<Value = AnswerPick> {
    prop_oneof![
        20 => variant().prop_map(|(variant, invalid)| AnswerPick::Accepted { variant, invalid }),
        2 => (0u8..4).prop_map(|index| AnswerPick::RefusedDeclared { index }),
        1 => Just(AnswerPick::RefusedUndeclared),
        5 => prop::option::of(0u64..400).prop_map(|after| AnswerPick::Retryable { after }),
        7 => Just(AnswerPick::Uncertain),
    ]
}

fn observation_pick() -> impl Strategy<Value = ObservationPick> {
    prop_oneof![
        4 => Just(ObservationPick::Pending),
        2 => variant().prop_map(|(variant, invalid)| ObservationPick::Complete { variant, invalid }),
        1 => Just(ObservationPick::Unavailable),
    ]
}

fn receipt_pick() -> impl Strategy<Value = ReceiptPick> {
    prop_oneof![
        3 => variant().prop_map(|(variant, invalid)| ReceiptPick::Found { variant, invalid }),
        1 => Just(ReceiptPick::NotFound),
        1 => Just(ReceiptPick::Expired),
        1 => Just(ReceiptPick::Unavailable),
    ]
}

fn operator_pick() -> impl Strategy<Value = OperatorPick> {
    prop_oneof![
        3 => Just(OperatorPick::Reconcile),
        3 => Just(OperatorPick::RetrySame),
        1 => Just(OperatorPick::Cancel),
        1 => Just(OperatorPick::Stop),
    ]
}

/// A random world.
pub fn world() -> impl Strategy<Value = World> {
    let products = (
        0u8..8,
        prop::collection::vec(answer_pick(), 0..20),
        prop::collection::vec(latency(), 0..12),
        prop::collection::vec(prop::bool::weighted(0.1), 0..20),
        prop::collection::vec(observation_pick(), 0..10),
        prop_oneof![Just(ObservationPick::Pending), Just(ObservationPick::Complete { variant: 0, invalid: false })],
        prop::collection::vec(receipt_pick(), 0..6),
    );
    let people = (
        prop::collection::vec(operator_pick(), 0..8),
        prop::collection::vec((moment(), operator_pick(), any::<u8>()), 0..3),
        prop::option::weighted(0.35, moment()),
        prop::collection::vec((moment(), 0u8..4), 0..4),
        prop::option::weighted(
            0.35,
            (moment(), prop::option::weighted(0.7, moment()))
                .prop_map(|(place, release_after)| HoldPlan { place, release_after }),
        ),
    );
    (products, people).prop_map(
        |(
            (input, answers, latencies, duplicates, observations, observation_tail, receipts),
            (operator, requests, cancel_at, notifications, hold),
        )| World {
            input,
            answers,
            latencies,
            duplicates,
            observations,
            observation_tail,
            receipts,
            operator,
            requests,
            cancel_at,
            notifications,
            hold,
        },
    )
}
