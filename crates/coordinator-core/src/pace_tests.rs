use proptest::prelude::*;

use super::*;

const BREAKER: BreakerSettings = BreakerSettings { open_after_failures: 5, probe_every_ms: 30_000 };

fn rate(per_second: f64, burst: Option<u32>) -> Limits {
    Limits { concurrency: None, rate_per_second: Some(per_second), burst }
}

#[test]
fn a_full_bucket_sends_its_burst_then_one_request_per_token() {
    let limits = rate(10.0, Some(5));
    let mut pace = Pace::new(&limits, 0);
    assert_eq!(pace.grant(&limits, 0, 100, 0), Grant { send: 5, probe: false, retry_at: Some(100) });
    assert_eq!(pace.grant(&limits, 0, 100, 50).send, 0);
    assert_eq!(pace.grant(&limits, 0, 100, 100).send, 1);
    // A quiet spell fills the bucket up to its size, no further.
    assert_eq!(pace.grant(&limits, 0, 100, 60_000).send, 5);
    // Asking for fewer than there are tokens leaves the rest, and says nothing about later.
    assert_eq!(pace.grant(&limits, 0, 2, 120_000), Grant { send: 2, probe: false, retry_at: None });
}

#[test]
fn the_bucket_holds_one_second_of_the_rate_unless_told() {
    assert_eq!(rate(200.0, None).bucket(), 200.0);
    assert_eq!(rate(0.5, None).bucket(), 1.0);
    assert_eq!(rate(0.5, Some(3)).bucket(), 3.0);
    let limits = rate(0.5, None);
    let mut pace = Pace::new(&limits, 0);
    assert_eq!(pace.grant(&limits, 0, 10, 0).send, 1);
    assert_eq!(pace.grant(&limits, 0, 10, 1_999), Grant { send: 0, probe: false, retry_at: Some(2_000) });
    assert_eq!(pace.grant(&limits, 0, 10, 2_000).send, 1);
}

#[test]
fn concurrency_bounds_what_is_in_flight() {
    let limits = Limits { concurrency: Some(4), ..Limits::default() };
    let mut pace = Pace::new(&limits, 0);
    assert_eq!(pace.grant(&limits, 0, 10, 0).send, 4);
    assert_eq!(pace.grant(&limits, 3, 10, 0).send, 1);
    assert_eq!(pace.grant(&limits, 4, 10, 0), Grant { send: 0, probe: false, retry_at: None });
    assert_eq!(pace.grant(&limits, 0, 0, 0).send, 0);
    let unlimited = Limits::default();
    assert_eq!(Pace::new(&unlimited, 0).grant(&unlimited, 1_000, 10_000, 0).send, 10_000);
}

#[test]
fn the_stricter_of_two_limits_takes_each_lower_bound() {
    let deployment = Limits { concurrency: Some(8), rate_per_second: Some(50.0), burst: None };
    let worker = Limits { concurrency: Some(4), rate_per_second: Some(100.0), burst: Some(10) };
    let both = Limits { concurrency: Some(4), rate_per_second: Some(50.0), burst: Some(10) };
    assert_eq!(deployment.stricter(&worker), both);
    assert_eq!(worker.stricter(&deployment), both);
    assert_eq!(Limits::default().stricter(&worker), worker, "a bound only one sets holds");
    assert!(Limits::default().is_none() && !worker.is_none());
}

#[test]
fn a_retry_after_holds_every_send_of_the_connection() {
    let limits = Limits { concurrency: Some(10), ..Limits::default() };
    let mut pace = Pace::new(&limits, 0);
    assert_eq!(pace.answered(Health::SlowDown { retry_after_ms: Some(5_000) }, &BREAKER, 1_000), None);
    assert_eq!(pace.grant(&limits, 0, 10, 5_999), Grant { send: 0, probe: false, retry_at: Some(6_000) });
    assert!(pace.grant(&limits, 0, 10, 6_000).send > 0);
    // A shorter Retry-After later does not shorten the hold.
    pace.answered(Health::SlowDown { retry_after_ms: Some(10_000) }, &BREAKER, 7_000);
    pace.answered(Health::SlowDown { retry_after_ms: Some(1_000) }, &BREAKER, 8_000);
    assert_eq!(pace.hold_until, 17_000);
}

#[test]
fn a_slow_down_without_retry_after_holds_everyone_for_a_doubling_backoff() {
    let limits = Limits::default();
    let slow = Health::SlowDown { retry_after_ms: None };
    let mut pace = Pace::new(&limits, 0);
    assert_eq!(pace.answered(slow, &BREAKER, 1_000), None);
    assert_eq!(pace.hold_until, 1_000 + BACKOFF_FIRST_MS);
    assert_eq!(pace.grant(&limits, 0, 10, 1_099), Grant { send: 0, probe: false, retry_at: Some(1_100) });
    assert_eq!(pace.grant(&limits, 0, 10, 1_100).send, 10, "no limit: all of it once the backoff ends");
    pace.answered(slow, &BREAKER, 2_000);
    assert_eq!(pace.hold_until, 2_200, "doubled for the second in a row");
    // A failure that is not a slow-down counts in the row but holds nobody.
    pace.answered(Health::Failed, &BREAKER, 3_000);
    assert_eq!(pace.hold_until, 2_200);
    pace.answered(Health::Healthy, &BREAKER, 3_001);
    pace.answered(slow, &BREAKER, 4_000);
    assert_eq!(pace.hold_until, 4_100, "a healthy answer ends the run of failures");
    assert_eq!(
        (backoff_ms(1), backoff_ms(4), backoff_ms(8), backoff_ms(60)),
        (100, 800, BACKOFF_MAX_MS, BACKOFF_MAX_MS)
    );
}

#[test]
fn failures_slow_the_pace_down_and_healthy_answers_bring_it_back() {
    let limits = Limits { concurrency: Some(64), rate_per_second: Some(64.0), burst: None };
    let many = BreakerSettings { open_after_failures: 100, ..BREAKER };
    let mut pace = Pace::new(&limits, 0);
    for _ in 0..10 {
        pace.answered(Health::Failed, &many, 0);
    }
    assert_eq!(pace.factor, MIN_FACTOR, "halved down to the floor");
    assert_eq!(pace.grant(&limits, 0, 100, 0).send, 1, "concurrency 64 × 1/64");
    // Over one second at the floor: one token a second.
    let mut pace = Pace { tokens: 0.0, ..pace };
    assert_eq!(pace.grant(&limits, 0, 100, 1_000).send, 1);
    for _ in 0..16 {
        pace.answered(Health::Healthy, &many, 1_000);
    }
    assert_eq!(pace.factor, 1.0, "each healthy answer gives back a sixteenth");
    assert_eq!(pace.grant(&limits, 0, 100, 1_000).send, 0, "the bucket refills at the pace it had");
    assert_eq!(pace.grant(&limits, 0, 100, 2_000).send, 64);
}

#[test]
fn the_breaker_opens_after_failures_in_a_row_probes_and_closes() {
    let limits = Limits { concurrency: Some(8), ..Limits::default() };
    let mut pace = Pace::new(&limits, 0);
    for at in 1..5 {
        assert_eq!(pace.answered(Health::Failed, &BREAKER, at), None);
    }
    pace.answered(Health::Healthy, &BREAKER, 5);
    assert_eq!(pace.breaker, Breaker::Closed { failures: 0 }, "a healthy answer breaks the run");
    for at in 10..14 {
        pace.answered(Health::SlowDown { retry_after_ms: None }, &BREAKER, at);
    }
    assert_eq!(pace.answered(Health::Failed, &BREAKER, 14), Some(BreakerChange::Opened));
    assert_eq!(pace.breaker, Breaker::Open { since: 14, probe_at: 30_014 });
    assert_eq!(pace.breaker.as_str(), "open");

    assert_eq!(pace.grant(&limits, 0, 10, 30_013), Grant { send: 0, probe: false, retry_at: Some(30_014) });
    assert_eq!(pace.grant(&limits, 0, 10, 30_014), Grant { send: 1, probe: true, retry_at: None });
    assert_eq!(pace.breaker.as_str(), "half-open");
    assert_eq!(pace.grant(&limits, 1, 10, 30_015).send, 0, "one probe at a time");
    assert!(pace.grant(&limits, 0, 10, 90_000).probe, "a probe whose lease ran out is replaced");

    assert_eq!(pace.answered(Health::Failed, &BREAKER, 90_001), Some(BreakerChange::Opened));
    assert_eq!(pace.breaker, Breaker::Open { since: 14, probe_at: 120_001 }, "open since it first opened");
    assert!(pace.grant(&limits, 0, 10, 120_001).probe);
    assert_eq!(pace.answered(Health::Healthy, &BREAKER, 120_002), Some(BreakerChange::Closed));
    assert_eq!(pace.breaker.as_str(), "closed");
    assert!(pace.grant(&limits, 0, 10, 120_003).send >= 1);
}

/// One step of a random connection's life.
#[derive(Debug, Clone)]
enum Step {
    /// Time passes (ms), then up to `wanted` requests are asked for.
    Ask { after: i64, wanted: u32 },
    /// The oldest request in flight is answered with this health.
    Answer(u8),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        (0i64..3_000, 0u32..40).prop_map(|(after, wanted)| Step::Ask { after, wanted }),
        (0u8..3).prop_map(Step::Answer),
    ];
    prop::collection::vec(step, 1..200)
}

proptest! {
    /// Whatever the product answers and whenever requests are asked for: the
    /// requests sent in any stretch of time fit the bucket (its size plus the
    /// rate over the stretch), and never more are in flight than allowed.
    #[test]
    fn what_is_sent_never_exceeds_the_limits(
        steps in steps(),
        concurrency in 1u32..10,
        per_second in 0.5f64..50.0,
        burst in prop::option::of(1u32..20),
    ) {
        let limits = Limits { concurrency: Some(concurrency), rate_per_second: Some(per_second), burst };
        let breaker = BreakerSettings { open_after_failures: 3, probe_every_ms: 2_000 };
        let mut pace = Pace::new(&limits, 0);
        let mut now = 0i64;
        let mut in_flight = 0u32;
        let mut sent: Vec<i64> = Vec::new();
        for step in steps {
            match step {
                Step::Ask { after, wanted } => {
                    now += after;
                    let grant = pace.grant(&limits, in_flight, wanted, now);
                    prop_assert!(grant.send <= wanted);
                    prop_assert!(!grant.probe || grant.send == 1);
                    in_flight += grant.send;
                    prop_assert!(in_flight <= concurrency, "{in_flight} in flight, limit {concurrency}");
                    sent.extend(std::iter::repeat_n(now, grant.send as usize));
                    if let Some(at) = grant.retry_at {
                        prop_assert!(at > now);
                    }
                }
                Step::Answer(kind) if in_flight > 0 => {
                    in_flight -= 1;
                    let health = match kind {
                        0 => Health::Healthy,
                        1 => Health::SlowDown { retry_after_ms: Some(1_000) },
                        _ => Health::Failed,
                    };
                    pace.answered(health, &breaker, now);
                    prop_assert!((MIN_FACTOR..=1.0).contains(&pace.factor));
                }
                Step::Answer(_) => {}
            }
        }
        let bucket = limits.bucket();
        for (i, first) in sent.iter().enumerate() {
            for (j, last) in sent.iter().enumerate().skip(i) {
                let count = (j - i + 1) as f64;
                let allowed = bucket + per_second * ((last - first) as f64 / 1000.0);
                prop_assert!(count <= allowed + 1e-6, "{count} sent in {} ms; the bucket allows {allowed}", last - first);
            }
        }
    }
}
