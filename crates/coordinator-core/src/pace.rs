//! How fast one connection's product may be called: the pure rules behind
//! flow control, on a clock the caller hands in.
//!
//! [`Pace`] is one connection's state, shared by every process of a
//! deployment: kept in a database row and changed only under that row's lock
//! (docs/reference/service.md#connections): the service keeps its hold, its
//! breaker and its limits for connections served in-process. Two questions
//! change it:
//! - [`Pace::grant`]: how many of the requests waiting may be sent now,
//!   given the [`Limits`] and how many are in flight;
//! - [`Pace::answered`]: what an answer of the product says about its health.
//!
//! The rules, in the order they apply:
//! 1. **Hold.** Nothing is sent before `hold_until`: a product's `Retry-After`
//!    sets it for every run of the connection. A slow-down without one (a
//!    `429` or `503` without `Retry-After`, a connection refused) holds the
//!    connection for a shared backoff: [`BACKOFF_FIRST_MS`] after the first
//!    failure in a row, doubling with each ([`backoff_ms`]), until the breaker
//!    opens or a healthy answer ends the run of failures.
//! 2. **Breaker.** After [`BreakerSettings::open_after_failures`] failures in a
//!    row the breaker opens: nothing is sent until `probe_every_ms` has passed;
//!    then one request (a real one, the next due) is sent as a probe
//!    (half-open). A healthy answer closes the breaker; a failure opens it again.
//! 3. **Concurrency.** At most `concurrency × factor` (at least 1) in flight.
//! 4. **Rate.** A token bucket of `burst` tokens, refilled at
//!    `ratePerSecond × factor` per second; a request spends one.
//!
//! `factor` is the slow-down of the limits: 1 (full pace) until a failure
//! halves it (down to [`MIN_FACTOR`]); each healthy answer gives back
//! [`RECOVERY`] of the full pace (multiplicative decrease, additive
//! increase). A failure is a definite "not done" (`429`, `503`, could not
//! connect) or a request that got no usable answer (a timeout after sending,
//! a reset, `5xx`); a healthy answer is anything else the product answered,
//! a refusal included. Uncertainty about an effect is the run's business, not this
//! module's: here only the product's health counts.

/// The least `factor` falls to: a sixty-fourth of the configured pace.
pub const MIN_FACTOR: f64 = 1.0 / 64.0;
/// What one healthy answer gives back of the full pace.
pub const RECOVERY: f64 = 1.0 / 16.0;
/// The shared backoff after a first slow-down without a `Retry-After` (ms).
pub const BACKOFF_FIRST_MS: i64 = 100;
/// The longest shared backoff without a `Retry-After` (ms).
pub const BACKOFF_MAX_MS: i64 = 10_000;
/// Failures in a row that open the breaker, when not configured.
pub const DEFAULT_OPEN_AFTER_FAILURES: u32 = 5;
/// How long an open breaker waits between probes, when not configured (ms).
pub const DEFAULT_PROBE_EVERY_MS: i64 = 30_000;

/// A connection's limits, for the whole deployment. `None`: no such limit.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Limits {
    /// At most this many requests in flight.
    pub concurrency: Option<u32>,
    /// At most this many requests per second, on average.
    pub rate_per_second: Option<f64>,
    /// How many may be sent at once after a quiet spell (the bucket's size);
    /// `None`: one second's worth, at least 1.
    pub burst: Option<u32>,
}

impl Limits {
    /// The bucket's size: `burst`, or one second's worth of the rate (at least 1).
    pub fn bucket(&self) -> f64 {
        match (self.burst, self.rate_per_second) {
            (Some(burst), _) => f64::from(burst.max(1)),
            (None, Some(rate)) => rate.ceil().max(1.0),
            (None, None) => 1.0,
        }
    }

    /// The stricter of two limits, each bound the lower one that either sets
    /// (a deployment's limits with a remote worker's own).
    #[must_use]
    pub fn stricter(&self, other: &Limits) -> Limits {
        fn lower<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        Limits {
            concurrency: lower(self.concurrency, other.concurrency),
            rate_per_second: lower(self.rate_per_second, other.rate_per_second),
            burst: lower(self.burst, other.burst),
        }
    }

    /// Whether these limits bound nothing.
    pub fn is_none(&self) -> bool {
        self.concurrency.is_none() && self.rate_per_second.is_none()
    }
}

/// When the breaker opens and how often it probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Failures in a row that open it.
    pub open_after_failures: u32,
    /// While open, one probe this often (ms).
    pub probe_every_ms: i64,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings { open_after_failures: DEFAULT_OPEN_AFTER_FAILURES, probe_every_ms: DEFAULT_PROBE_EVERY_MS }
    }
}

/// The breaker of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breaker {
    /// Requests are sent; `failures` in a row so far.
    Closed {
        /// Failures since the last healthy answer.
        failures: u32,
    },
    /// Nothing is sent until `probe_at`.
    Open {
        /// When it opened (ms).
        since: i64,
        /// When the next probe may be sent (ms).
        probe_at: i64,
    },
    /// One probe may be in flight; its answer closes or opens the breaker.
    HalfOpen {
        /// When the breaker opened (ms).
        since: i64,
    },
}

impl Breaker {
    /// `closed`, `open` or `half-open`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Breaker::Closed { .. } => "closed",
            Breaker::Open { .. } => "open",
            Breaker::HalfOpen { .. } => "half-open",
        }
    }
}

/// What an answer of the product says about its health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// The product answered (accepted, refused, found, not found, pending…).
    Healthy,
    /// `429` or `503`, with the `Retry-After` it gave (ms), if any.
    SlowDown {
        /// How long the product asked everyone to wait (ms).
        retry_after_ms: Option<i64>,
    },
    /// No usable answer: could not connect, a timeout after sending, a reset, `5xx`.
    Failed,
}

/// What [`Pace::grant`] allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// How many requests may be sent now.
    pub send: u32,
    /// Whether the one request granted is the breaker's probe.
    pub probe: bool,
    /// When asking again may grant more (ms); `None`: once a request in flight ends.
    pub retry_at: Option<i64>,
}

/// A change of the breaker's state, to be journaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerChange {
    /// It opened (or opened again after a failed probe).
    Opened,
    /// A healthy answer closed it.
    Closed,
}

/// One connection's pace: the state the rules above keep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Tokens in the bucket.
    pub tokens: f64,
    /// When `tokens` was last brought up to date (ms).
    pub refilled_at: i64,
    /// The slow-down, [`MIN_FACTOR`] to 1.
    pub factor: f64,
    /// Nothing is sent before this instant (ms).
    pub hold_until: i64,
    /// The breaker.
    pub breaker: Breaker,
}

impl Pace {
    /// A connection never called: a full bucket, full pace, the breaker closed.
    pub fn new(limits: &Limits, now: i64) -> Pace {
        Pace {
            tokens: limits.bucket(),
            refilled_at: now,
            factor: 1.0,
            hold_until: now,
            breaker: Breaker::Closed { failures: 0 },
        }
    }

    /// Refills the bucket to `now`, holding back `outstanding` tokens of its
    /// size: tokens taken out ahead (a process's allowance) that may still be
    /// spent, so that the bucket and those together never hold more than its
    /// size.
    pub fn refill_less(&mut self, limits: &Limits, outstanding: f64, now: i64) {
        self.refill(limits, now);
        self.tokens = self.tokens.min((limits.bucket() - outstanding).max(0.0));
    }

    /// How many more requests the concurrency lets be in flight beyond
    /// `in_flight`, at the pace's slow-down; `None`: no concurrency limit.
    pub fn room(&self, limits: &Limits, in_flight: u32) -> Option<u32> {
        limits.concurrency.map(|limit| scaled(limit, self.factor).saturating_sub(in_flight))
    }

    /// Grants up to `wanted` of the requests waiting, with `in_flight` already
    /// sent and not answered, and spends what it grants.
    pub fn grant(&mut self, limits: &Limits, in_flight: u32, wanted: u32, now: i64) -> Grant {
        self.refill(limits, now);
        let none = |retry_at| Grant { send: 0, probe: false, retry_at };
        if wanted == 0 {
            return none(None);
        }
        if now < self.hold_until {
            return none(Some(self.hold_until));
        }
        match self.breaker {
            Breaker::Open { since, probe_at } => {
                if now < probe_at {
                    return none(Some(probe_at));
                }
                self.breaker = Breaker::HalfOpen { since };
                return self.probe(limits, in_flight, now);
            }
            Breaker::HalfOpen { .. } => return self.probe(limits, in_flight, now),
            Breaker::Closed { .. } => {}
        }
        let room = match limits.concurrency {
            Some(limit) => scaled(limit, self.factor).saturating_sub(in_flight),
            None => u32::MAX,
        };
        if room == 0 {
            return none(None);
        }
        let (send, retry_at) = match limits.rate_per_second {
            None => (wanted.min(room), None),
            Some(rate) => {
                let whole = whole_tokens(self.tokens);
                let send = wanted.min(room).min(whole);
                self.tokens = (self.tokens - f64::from(send)).max(0.0);
                let short = send < wanted.min(room);
                (send, short.then(|| self.next_token_at(rate, now)))
            }
        };
        Grant { send, probe: false, retry_at }
    }

    /// The probe of a half-open breaker: one request, when none is in flight
    /// (a probe whose lease ran out is replaced by the next one) and the
    /// bucket has a token.
    fn probe(&mut self, limits: &Limits, in_flight: u32, now: i64) -> Grant {
        if in_flight > 0 {
            return Grant { send: 0, probe: false, retry_at: None };
        }
        if let Some(rate) = limits.rate_per_second {
            if whole_tokens(self.tokens) == 0 {
                return Grant { send: 0, probe: false, retry_at: Some(self.next_token_at(rate, now)) };
            }
            self.tokens = (self.tokens - 1.0).max(0.0);
        }
        Grant { send: 1, probe: true, retry_at: None }
    }

    /// Takes in what an answer says about the product's health; returns the
    /// breaker's change, if any.
    pub fn answered(&mut self, health: Health, breaker: &BreakerSettings, now: i64) -> Option<BreakerChange> {
        match health {
            Health::Healthy => {
                self.factor = (self.factor + RECOVERY).min(1.0);
                let was_open = !matches!(self.breaker, Breaker::Closed { .. });
                self.breaker = Breaker::Closed { failures: 0 };
                was_open.then_some(BreakerChange::Closed)
            }
            Health::SlowDown { .. } | Health::Failed => {
                if let Health::SlowDown { retry_after_ms: Some(wait) } = health {
                    self.hold_until = self.hold_until.max(now.saturating_add(wait.max(0)));
                }
                self.factor = (self.factor / 2.0).max(MIN_FACTOR);
                let probe_at = now.saturating_add(breaker.probe_every_ms.max(0));
                match self.breaker {
                    Breaker::Closed { failures } => {
                        let failures = failures.saturating_add(1);
                        if failures >= breaker.open_after_failures.max(1) {
                            self.breaker = Breaker::Open { since: now, probe_at };
                            Some(BreakerChange::Opened)
                        } else {
                            if health == (Health::SlowDown { retry_after_ms: None }) {
                                // Asked to slow down without saying how long: everyone backs off.
                                self.hold_until = self.hold_until.max(now.saturating_add(backoff_ms(failures)));
                            }
                            self.breaker = Breaker::Closed { failures };
                            None
                        }
                    }
                    Breaker::HalfOpen { since } | Breaker::Open { since, .. } => {
                        self.breaker = Breaker::Open { since, probe_at };
                        Some(BreakerChange::Opened)
                    }
                }
            }
        }
    }

    /// Brings the bucket up to `now`: `rate × factor` tokens a second, at most the bucket's size.
    fn refill(&mut self, limits: &Limits, now: i64) {
        if let Some(rate) = limits.rate_per_second
            && now > self.refilled_at
        {
            let elapsed = (now - self.refilled_at) as f64 / 1000.0;
            self.tokens = (self.tokens + elapsed * rate * self.factor).min(limits.bucket());
        }
        self.refilled_at = self.refilled_at.max(now);
    }

    /// When the bucket next holds a whole token (ms), at the current pace.
    fn next_token_at(&self, rate: f64, now: i64) -> i64 {
        let per_second = rate * self.factor;
        if per_second <= 0.0 {
            return now.saturating_add(1000);
        }
        let missing = (1.0 - self.tokens.fract()).max(0.0);
        now.saturating_add(((missing / per_second) * 1000.0).ceil() as i64).max(now + 1)
    }
}

/// The shared backoff after the `failures`-th failure in a row that asked to
/// slow down without a `Retry-After`: [`BACKOFF_FIRST_MS`], doubling, at
/// most [`BACKOFF_MAX_MS`].
pub fn backoff_ms(failures: u32) -> i64 {
    BACKOFF_FIRST_MS.saturating_mul(1_i64 << failures.saturating_sub(1).min(20)).min(BACKOFF_MAX_MS)
}

/// `limit × factor`, rounded down, at least 1.
fn scaled(limit: u32, factor: f64) -> u32 {
    ((f64::from(limit) * factor).floor() as u32).clamp(1, limit.max(1))
}

/// The whole tokens of a bucket (a tiny rounding error short of one counts as one).
fn whole_tokens(tokens: f64) -> u32 {
    (tokens + 1e-9).floor().clamp(0.0, f64::from(u32::MAX)) as u32
}

#[cfg(test)]
#[path = "pace_tests.rs"]
mod tests;
