//! The pause between two tries to reach Redis: from [`FIRST`], doubling up to
//! [`LONGEST`], back to the first after a success.

use std::time::Duration;

/// The first pause after a failure.
pub(crate) const FIRST: Duration = Duration::from_millis(100);
/// The longest pause.
pub(crate) const LONGEST: Duration = Duration::from_secs(5);

/// Exponential backoff without jitter (each process's parts retry on their own).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(FIRST)
    }
}

impl Backoff {
    /// The pause to take now; the next one is twice as long, at most [`LONGEST`].
    pub(crate) fn next(&mut self) -> Duration {
        let now = self.0;
        self.0 = self.0.saturating_mul(2).min(LONGEST);
        now
    }

    /// After a success: the next failure waits [`FIRST`] again.
    pub(crate) fn reset(&mut self) {
        self.0 = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_longest_and_start_over_after_a_success() {
        let mut backoff = Backoff::default();
        let pauses: Vec<u128> = (0..8).map(|_| backoff.next().as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        backoff.reset();
        assert_eq!(backoff.next(), FIRST);
    }
}
