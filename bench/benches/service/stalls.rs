//! The machine's own stalls during a row, sampled at no load of their own: a
//! thread wakes every [`PERIOD`] and notes how late it woke and how much of
//! the machine the hypervisor took since its last wake-up (`steal` in
//! /proc/stat). A window where it woke over [`LATE`] late, or where the
//! hypervisor took [`STOLEN`] of one core or more, is a stall of the
//! machine's: every process on it, the database server's included, waited.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::load::{epoch_us, micros};
use crate::stack::Ticks;

/// How often the sampler wakes.
const PERIOD: Duration = Duration::from_millis(20);
/// Woken this much later than asked: the machine had no core for it.
const LATE: Duration = Duration::from_millis(5);
/// Taken by the hypervisor within one window: at least this much of one core.
const STOLEN: Duration = Duration::from_millis(10);

/// One window between two wake-ups: when it began and ended (µs since the
/// epoch) and whether the machine stalled in it.
struct Window {
    from: i64,
    to: i64,
    late: bool,
    stolen: bool,
}

/// The sampling thread; [`Sampler::finish`] stops it.
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<anyhow::Result<Vec<Window>>>,
}

impl Sampler {
    pub(crate) fn start() -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut windows = Vec::new();
            let (mut from, mut ticks) = (epoch_us(), Ticks::read()?);
            while !stopping.load(Ordering::Relaxed) {
                let asked = Instant::now();
                std::thread::sleep(PERIOD);
                let late = asked.elapsed().saturating_sub(PERIOD);
                let (to, now) = (epoch_us(), Ticks::read()?);
                // /proc/stat counts in hundredths of a second.
                let stolen = Duration::from_millis(10 * now.since(&ticks).steal());
                windows.push(Window { from, to, late: late > LATE, stolen: stolen >= STOLEN });
                (from, ticks) = (to, now);
            }
            Ok(windows)
        });
        Sampler { stop, thread }
    }

    pub(crate) fn finish(self) -> anyhow::Result<Stalls> {
        self.stop.store(true, Ordering::Relaxed);
        let windows = self.thread.join().map_err(|_| anyhow::anyhow!("the stall sampler panicked"))??;
        Ok(Stalls { windows })
    }
}

/// What the sampler saw.
pub(crate) struct Stalls {
    windows: Vec<Window>,
}

impl Stalls {
    /// How the admissions of `timed` (planned start µs, latency) slower than
    /// `slow` fell against the machine's stalls, with the share of the time
    /// the stalls covered (what overlapping them by chance would give).
    pub(crate) fn attribute(&self, timed: &[(i64, Duration)], slow: Duration) -> String {
        let stalled = |w: &&Window| w.late || w.stolen;
        let spans: Vec<(i64, i64)> = self.windows.iter().filter(stalled).map(|w| (w.from, w.to)).collect();
        let covered: i64 = spans.iter().map(|(from, to)| to - from).sum();
        let all = match (self.windows.first(), self.windows.last()) {
            (Some(first), Some(last)) => (last.to - first.from).max(1),
            _ => 1,
        };
        let slow_spans = slow_intervals(timed, slow);
        format!(
            "the machine's own stalls ({} ms windows; a thread woke over {} ms late in {}, the hypervisor took \
             {} ms or more in {}; {:.1} % of the time): of the {} admissions over {} ms, {} overlapped one",
            PERIOD.as_millis(),
            LATE.as_millis(),
            self.windows.iter().filter(|w| w.late).count(),
            STOLEN.as_millis(),
            self.windows.iter().filter(|w| w.stolen).count(),
            100.0 * covered as f64 / all as f64,
            slow_spans.len(),
            slow.as_millis(),
            overlapping(&slow_spans, &spans),
        )
    }
}

/// The spans (start, end µs) of the entries of `timed` (start µs, latency) slower than `slow`.
pub(crate) fn slow_intervals(timed: &[(i64, Duration)], slow: Duration) -> Vec<(i64, i64)> {
    timed
        .iter()
        .filter(|(_, latency)| *latency > slow)
        .map(|(start, latency)| (*start, start + micros(*latency)))
        .collect()
}

/// How many of `spans` overlap one of `others`.
pub(crate) fn overlapping(spans: &[(i64, i64)], others: &[(i64, i64)]) -> usize {
    spans.iter().filter(|(s, e)| others.iter().any(|(os, oe)| os < e && s < oe)).count()
}
