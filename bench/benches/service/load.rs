//! Load over HTTP: admissions by N closed-loop clients (each sends the next
//! admission when its previous one was answered) or on a fixed schedule (open
//! loop: each admission is sent at its planned instant whatever the earlier
//! ones are doing, and its latency counts from that instant, so a slow service
//! cannot slow down the offered load), and waiting for runs to finish.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail};
use serde_json::{Value, json};

use crate::stack::{API_TOKEN, Observer};

/// Milliseconds since the Unix epoch (the clock `runs.updated_at` is written with).
pub fn epoch_ms() -> i64 {
    epoch_us() / 1000
}

/// Microseconds since the Unix epoch.
pub fn epoch_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, micros)
}

/// `d` in whole microseconds (saturating).
pub fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Admits runs of one workflow over `POST /v1/runs`.
pub struct Admitter {
    client: reqwest::Client,
    url: String,
    workflow: String,
    revision: String,
    /// The input of the i-th admission.
    input: Box<dyn Fn(usize) -> Value + Send + Sync>,
    /// Keys are `<prefix>-<i>`.
    prefix: String,
}

impl Admitter {
    /// An admitter against a service's base URL.
    pub fn new(
        url: &str,
        workflow: &str,
        revision: &str,
        prefix: &str,
        input: impl Fn(usize) -> Value + Send + Sync + 'static,
    ) -> anyhow::Result<Admitter> {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).pool_max_idle_per_host(256).build()?;
        Ok(Admitter {
            client,
            url: format!("{url}/v1/runs"),
            workflow: workflow.to_owned(),
            revision: revision.to_owned(),
            input: Box::new(input),
            prefix: prefix.to_owned(),
        })
    }

    /// Admits the i-th run; fails unless the answer is `201`.
    pub async fn admit(&self, i: usize) -> anyhow::Result<()> {
        let body = json!({
            "workflow": self.workflow,
            "revision": self.revision,
            "idempotencyKey": format!("{}-{i}", self.prefix),
            "input": (self.input)(i),
        });
        let response = self.client.post(&self.url).bearer_auth(API_TOKEN).json(&body).send().await?;
        let status = response.status();
        if status.as_u16() != 201 {
            let text = response.text().await.unwrap_or_default();
            bail!("admission {i}: {status} {text}");
        }
        Ok(())
    }
}

/// What a batch of admissions did.
#[derive(Debug, Clone)]
pub struct Admissions {
    /// Runs admitted (`201`).
    pub admitted: usize,
    /// Admissions that failed (not `201`, or no answer).
    pub failed: usize,
    /// The first failure, if any.
    pub first_failure: Option<String>,
    /// When the first admission was sent (ms since the epoch).
    pub first_sent_ms: i64,
    /// From the first admission sent to the last answered.
    pub elapsed: Duration,
    /// Each admission's latency (open loop: from its planned instant), sorted.
    pub latencies: Vec<Duration>,
    /// The open loop's admissions in the order planned: when each was
    /// planned (µs since the epoch) and its latency (empty for a closed loop).
    pub timed: Vec<(i64, Duration)>,
}

impl Admissions {
    /// Admissions per second over the batch's wall time.
    pub fn rate(&self) -> f64 {
        self.admitted as f64 / self.elapsed.as_secs_f64()
    }

    /// The `p`-quantile (0..=1) latency, nearest rank.
    pub fn quantile(&self, p: f64) -> Duration {
        quantile(&self.latencies, p)
    }
}

/// The `p`-quantile (0..=1) of `sorted`, nearest rank (zero when empty).
pub fn quantile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `runs` admissions by `clients` closed-loop clients, stopping early at `stop` if given.
pub async fn closed_loop(
    admitter: Arc<Admitter>,
    clients: usize,
    runs: usize,
    stop: Option<Instant>,
) -> anyhow::Result<Admissions> {
    let next = Arc::new(AtomicUsize::new(0));
    let first_sent_ms = epoch_ms();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (admitter, next) = (Arc::clone(&admitter), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= runs || stop.is_some_and(|s| Instant::now() >= s) {
                    return (latencies, failures);
                }
                let sent = Instant::now();
                match admitter.admit(i).await {
                    Ok(()) => latencies.push(sent.elapsed()),
                    Err(e) => failures.push(e.to_string()),
                }
            }
        }));
    }
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    for task in tasks {
        let (l, f) = task.await?;
        latencies.extend(l);
        failures.extend(f);
    }
    let elapsed = started.elapsed();
    latencies.sort();
    Ok(Admissions {
        admitted: latencies.len(),
        failed: failures.len(),
        first_failure: failures.into_iter().next(),
        first_sent_ms,
        elapsed,
        latencies,
        timed: Vec::new(),
    })
}

/// Admissions offered at `rate` per second for `duration`, each sent at its
/// planned instant on its own task.
pub async fn open_loop(admitter: Arc<Admitter>, rate: f64, duration: Duration) -> anyhow::Result<Admissions> {
    let count = (rate * duration.as_secs_f64()).round() as usize;
    let period = Duration::from_secs_f64(1.0 / rate);
    let first_sent_ms = epoch_ms();
    let start = tokio::time::Instant::now();
    let start_us = epoch_us();
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let planned = start + period.mul_f64(i as f64);
        tokio::time::sleep_until(planned).await;
        let admitter = Arc::clone(&admitter);
        tasks.push(tokio::spawn(async move { admitter.admit(i).await.map(|()| planned.elapsed()) }));
    }
    let mut latencies = Vec::with_capacity(count);
    let mut timed = Vec::with_capacity(count);
    let mut failures = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await? {
            Ok(latency) => {
                latencies.push(latency);
                let planned = start_us + micros(period.mul_f64(i as f64));
                timed.push((planned, latency));
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    let elapsed = start.elapsed();
    latencies.sort();
    Ok(Admissions {
        admitted: latencies.len(),
        failed: failures.len(),
        first_failure: failures.into_iter().next(),
        first_sent_ms,
        elapsed,
        latencies,
        timed,
    })
}

/// Waits until `expected` runs are `finished` (polling the store every
/// `every`), at most `limit`; returns (finished, the earliest and the latest
/// finish in ms since the epoch). Fewer than expected means the limit was reached.
pub async fn wait_finished(
    observer: &Observer,
    expected: usize,
    every: Duration,
    limit: Duration,
) -> anyhow::Result<(usize, i64, i64)> {
    let give_up = Instant::now() + limit;
    loop {
        let (finished, first, last) = observer.count("finished").await?;
        let finished = usize::try_from(finished)?;
        if finished >= expected || Instant::now() >= give_up {
            return Ok((finished, first.unwrap_or(0), last.unwrap_or(0)));
        }
        tokio::time::sleep(every).await;
    }
}

/// How many runs the list API shows in `state` (`GET /v1/runs?state=…`, every page).
pub async fn listed(url: &str, state: &str) -> anyhow::Result<usize> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let mut total = 0;
    let mut cursor: Option<String> = None;
    loop {
        let mut page_url = format!("{url}/v1/runs?state={state}&limit=500");
        if let Some(c) = &cursor {
            page_url.push_str(&format!("&cursor={c}"));
        }
        let page: Value = client.get(&page_url).bearer_auth(API_TOKEN).send().await?.error_for_status()?.json().await?;
        total += page["runs"].as_array().ok_or_else(|| anyhow!("{page_url}: no runs"))?.len();
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(total),
        }
    }
}

/// The service's own count of admissions whose decision and commit took at
/// most each bucket's bound (`coordinator_decision_seconds{event="admitted"}`
/// of `GET /metrics`): (bound in seconds, count), then the total.
pub async fn admission_buckets(url: &str) -> anyhow::Result<(Vec<(String, u64)>, u64)> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let text =
        client.get(format!("{url}/metrics")).bearer_auth(API_TOKEN).send().await?.error_for_status()?.text().await?;
    let prefix = "coordinator_decision_seconds_bucket{event=\"admitted\",le=\"";
    let mut buckets = Vec::new();
    let mut total = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(prefix) {
            let (bound, count) = rest.split_once("\"} ").ok_or_else(|| anyhow!("unexpected metrics line {line}"))?;
            let count: u64 = count.trim().parse()?;
            if bound == "+Inf" {
                total = count;
            } else {
                buckets.push((bound.to_owned(), count));
            }
        }
    }
    Ok((buckets, total))
}
