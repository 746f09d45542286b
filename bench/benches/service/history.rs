//! `history`: flat cost as history grows. For each size in `sizes` (default
//! `0,1000000`) a PostgreSQL stack of its own gets that many ended runs written
//! straight into its tables — generated in SQL, admitted over the 30 days
//! before now (time-ordered UUIDv7-shaped ids), 96 % finished, 2 % failed, 2 %
//! cancelled, each with its idempotency key and `entries` sealed journal
//! entries (default 12, about what a 3-call run writes, in rows of three as a
//! decision's are) — then `VACUUM
//! ANALYZE` and a `CHECKPOINT` (so the load's writes are not the measurement's), then
//! what `throughput` and `latency` measure, on that stack: completed 3-call
//! runs/s with `clients` clients (`runs` of them), and admission latency at
//! `rate` admissions/s for `seconds`. Every size is loaded first; then each
//! of `rounds` rounds (default 1) measures the sizes in turn (in the order
//! given in odd rounds, the other way round in even ones), so that the
//! machine's drift over minutes and the first measurement's warm-up fall on
//! every size alike, and prints each size's figures with their ratio to the
//! first size's in that round, and last each size's medians over the rounds
//! with their ratio to the first size's (each round's keys its own; round 0, a
//! measurement of each size before the first round, is not reported); after each
//! measurement, a `CHECKPOINT` and a wait for autovacuum to finish. Each
//! latency row's line also says what the server did meanwhile besides the
//! admissions (checkpoints begun, autovacuum workers seen, by database and
//! relation), so a slow row can be told from the server's maintenance. `idle=S`
//! (default 0) lets every stack sit idle S seconds before its first
//! measurement (a service idle for 30 s ran its next burst at a fraction of
//! its rate: bench/RESULTS.md, tenth sitting). The stacks not
//! being measured stay up, idle. Last, a retention cut of each history. Runs
//! are counted by `admitted_at` (an indexed range of the new runs only),
//! never by scanning the history.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use sqlx::PgPool;

use crate::load::{Admitter, closed_loop, epoch_ms, open_loop};
use crate::stack::{Backend, Observer, Stack};
use crate::watch::Watch;
use crate::{FINISH_LIMIT, Options, ms, three_calls_input};

/// The history's run numbers `$4..=$5` of `$2`, admitted over the `$3` ms before
/// `$1` in number order: `i`, `at` (ms) and a time-ordered UUIDv7-shaped `id`
/// (so id order is number order).
const SERIES: &str = "SELECT i, at, (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid AS id \
     FROM (SELECT i, $1::bigint - $3::bigint + i * ($3::bigint / $2::bigint) AS at, \
             lpad(to_hex($1::bigint - $3::bigint + i * ($3::bigint / $2::bigint)), 12, '0') AS h \
           FROM generate_series($4::bigint, $5::bigint) AS i) AS t";
/// The runs of [`SERIES`]: ended (96 % finished, 2 % failed, 2 % cancelled), of
/// workflow `$6` on revision `$7`, each with an idempotency key.
const RUNS: &str = "INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, \
     admitted_at, updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since) \
     SELECT id, $6, $7, 'bench', 'past-' || i, 'sha256:00', \
       CASE i % 50 WHEN 0 THEN 'failed' WHEN 1 THEN 'cancelled' ELSE 'finished' END, \
       false, at, at + 5000, 12, decode(repeat(md5(i::text), 22), 'hex'), NULL, \
       CASE WHEN i % 50 > 1 THEN 'done' END, NULL, NULL FROM (SERIES) AS s";
const KEYS: &str = "INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id) \
     SELECT 'bench', $6, 'past-' || i, id FROM (SERIES) AS s";
/// The SQL of 64 hex digits `$hex` as the journal stores a hash: its 32
/// bytes in unpadded URL-safe base64 (`coordinator_store`'s `audit::rows`).
macro_rules! b64 {
    ($hex:literal) => {
        concat!("rtrim(translate(encode(decode(", $hex, ", 'hex'), 'base64'), '+/', '-_'), '=')")
    };
}

/// `$6` entries per run of [`SERIES`] (a multiple of [`ROW_ENTRIES`]), each
/// sealed at its own position (run number order, then entry order), written
/// as the service writes them: a row per decision holding [`ROW_ENTRIES`]
/// entries, the later ones in `more` (`audit::rows`), no `prev_hash`, each
/// hash 32 bytes in unpadded URL-safe base64 (`b64!`).
const ENTRIES: &str = concat!(
    "INSERT INTO audit (run_id, at, kind, step, detail, actor, position, hash, more) \
     SELECT s.id, s.at + g, 'decision', 'call-one', 'entered call step', NULL, \
       (s.i - 1) * $6::bigint + g * $7::bigint + 1, ",
    b64!("md5(s.id::text) || md5(g::text)"),
    ", '[[\"dispatch\",\"call-one\",\"attempt 1 queued\",\"' || ",
    b64!("md5(s.id::text) || md5(g::text || 'b')"),
    " || '\"],[\"classification\",\"call-one\",\"accepted\",\"' || ",
    b64!("md5(s.id::text) || md5(g::text || 'c')"),
    " || '\"]]' FROM (SERIES) AS s, generate_series(0, $6::bigint / $7::bigint - 1) AS g"
);
/// Entries per journal row in the history (a decision's, as a 3-call run writes them).
const ROW_ENTRIES: i64 = 3;
/// The head at the last row's last entry (`$1` entries a row).
const HEAD: &str = "UPDATE audit_head SET position = (SELECT COALESCE(max(position) + $1::bigint - 1, 0) FROM audit), \
     hash = repeat('ab', 32) WHERE singleton = 1";
/// The longest [`settle`] waits for autovacuum.
const SETTLE_LIMIT: Duration = Duration::from_secs(180);
/// Runs written per transaction while loading (each chunk its own statements,
/// so no sort or transaction spans the whole history).
const CHUNK: i64 = 500_000;
/// Space a chunk needs on PostgreSQL's disk, with room to spare (a million
/// runs with 12 entries each took 6.1 GB).
const CHUNK_BYTES: u64 = 4 << 30;
/// Space left free on PostgreSQL's disk whatever happens: loading stops before it.
const RESERVE_BYTES: u64 = 12 << 30;
/// The new runs in `$1` admitted at or after `$2`: how many, the first and the last update.
const SINCE: &str =
    "SELECT COUNT(*), MIN(updated_at), MAX(updated_at) FROM runs WHERE admitted_at >= $2 AND state = $1";

/// One size's stack, loaded with its history.
struct Loaded {
    stack: Stack,
    size: i64,
    load_seconds: f64,
    database_mb: f64,
}

/// One measurement on one size's stack.
struct Measured {
    completed: f64,
    p50: Duration,
    p99: Duration,
}

/// Everything ended by now: a retention cut 45 days on, keeping one day,
/// removes the whole history and the bench's runs (`Store::retain`, as the
/// janitor calls it).
async fn retention_cut(stack: &Stack) -> anyhow::Result<(u64, f64, f64)> {
    let Some(url) = stack.pg_url() else { bail!("the history bench runs on PostgreSQL") };
    let store = coordinator_store::Store::connect(url).await?;
    let started = Instant::now();
    let cut = store.retain(epoch_ms() + 45 * 86_400_000, 1).await?;
    let seconds = started.elapsed().as_secs_f64();
    store.close().await;
    println!("  retention: {cut:?} in {seconds:.1} s");
    Ok((cut.runs, seconds, cut.drop_ms))
}

pub async fn history(options: &Options) -> anyhow::Result<()> {
    let sizes: Vec<i64> =
        options.list("sizes", "0,1000000").iter().map(|s| s.parse()).collect::<Result<_, _>>().context("sizes")?;
    let entries: i64 = options.number("entries", 12)?;
    if entries <= 0 || entries % ROW_ENTRIES != 0 {
        anyhow::bail!(
            "entries={entries}: give a positive multiple of {ROW_ENTRIES} (the history's journal rows hold {ROW_ENTRIES} entries each)"
        );
    }
    let clients: usize = options.number("clients", 32)?;
    let runs: usize = options.number("runs", 3000)?;
    let rate: f64 = options.number("rate", 200.0)?;
    let seconds: f64 = options.number("seconds", 20.0)?;
    let rounds: usize = options.number("rounds", 1)?;
    let idle: f64 = options.number("idle", 0.0)?;
    println!(
        "history of N ended runs ({entries} journal entries each), then {runs} 3-call runs with {clients} clients \
         and {seconds} s of admissions at {rate}/s, PostgreSQL, each size on a database and service of its own, \
         {rounds} round(s) measuring the sizes in turn"
    );
    let mut loaded = Vec::new();
    for &size in &sizes {
        loaded.push(load(options, size, entries).await?);
    }
    println!(
        "| round | ended runs | loaded in s | database MB | completed runs/s | ratio | admission p50 ms | p99 ms | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    // `idle=S`: every stack waits S seconds, idle, before its first measurement.
    tokio::time::sleep(Duration::from_secs_f64(idle)).await;
    // A fresh service's first measurement ran at a third of the rate of the
    // ones after it (its tables' statistics still those of empty ones): each
    // size is measured once first, unreported.
    for l in &loaded {
        let _ = measure(l, 0, clients, runs, rate, seconds).await?;
        settle(&l.stack).await?;
    }
    let mut rows = Vec::new();
    // Each size's figures of every round, for the medians.
    let mut all: Vec<Vec<(f64, f64)>> = loaded.iter().map(|_| Vec::new()).collect();
    for round in 1..=rounds {
        // Odd rounds measure the sizes in the order given, even rounds the other way round.
        let mut order: Vec<usize> = (0..loaded.len()).collect();
        if round % 2 == 0 {
            order.reverse();
        }
        let mut measured: Vec<Option<Measured>> = loaded.iter().map(|_| None).collect();
        for i in order {
            measured[i] = Some(measure(&loaded[i], round, clients, runs, rate, seconds).await?);
            settle(&loaded[i].stack).await?;
        }
        let Some(Some(base)) = measured.first() else { continue };
        let (completed, p99) = (base.completed, base.p99.as_secs_f64().max(1e-9));
        for ((l, m), figures) in loaded.iter().zip(&measured).zip(&mut all) {
            let Some(m) = m else { continue };
            figures.push((m.completed, m.p99.as_secs_f64() * 1000.0));
            let row = format!(
                "| {round} | {} | {:.0} | {:.0} | {:.0} | {:.2} | {} | {} | {:.2} |",
                l.size,
                l.load_seconds,
                l.database_mb,
                m.completed,
                m.completed / completed,
                ms(m.p50),
                ms(m.p99),
                m.p99.as_secs_f64() / p99,
            );
            println!("{row}");
            rows.push(row);
        }
    }
    println!(
        "\nAll rounds:\n| round | ended runs | loaded in s | database MB | completed runs/s | ratio | admission p50 ms | p99 ms | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{row}");
    }
    println!(
        "\nMedians over the rounds:\n| ended runs | completed runs/s | ratio | admission p99 ms | ratio |\n|---|---|---|---|---|"
    );
    let medians: Vec<(f64, f64)> = all
        .iter()
        .map(|f| (median(f.iter().map(|x| x.0).collect()), median(f.iter().map(|x| x.1).collect())))
        .collect();
    if let Some(&(completed, p99)) = medians.first() {
        for (l, (c, p)) in loaded.iter().zip(&medians) {
            println!("| {} | {c:.0} | {:.2} | {p:.2} | {:.2} |", l.size, c / completed.max(1e-9), p / p99.max(1e-9));
        }
    }
    println!("\n| ended runs | retention cut afterwards: runs, s, of which DROP ms |\n|---|---|");
    for l in loaded {
        if l.size > 0 {
            let (runs, s, drop) = retention_cut(&l.stack).await?;
            println!("| {} | {runs}, {s:.1}, {drop:.0} |", l.size);
        }
        l.stack.stop().await;
    }
    Ok(())
}

/// The median of `values` (the mean of the middle two of an even count; 0 when none).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Starts a stack for `size` and writes its history.
async fn load(options: &Options, size: i64, entries: i64) -> anyhow::Result<Loaded> {
    let stack = Stack::start(Backend::Pg, "three-calls", &options.pg_params()).await?;
    let Observer::Pg(pool) = &stack.observer else { bail!("the history bench runs on PostgreSQL") };
    let started = Instant::now();
    if size > 0 {
        let span: i64 = 30 * 24 * 3600 * 1000;
        let now = epoch_ms() - 60_000;
        let data_directory: (String,) = sqlx::query_as("SHOW data_directory").fetch_one(pool).await?;
        let mut lo = 1;
        while lo <= size {
            let hi = (lo + CHUNK - 1).min(size);
            let free = free_bytes(&data_directory.0)?;
            if free < CHUNK_BYTES + RESERVE_BYTES {
                bail!(
                    "stopped loading at {} of {size} runs: {} GB free on PostgreSQL's disk ({}), and a chunk \
                     takes up to {} GB with {} GB kept free; free space or load fewer runs (sizes=…)",
                    lo - 1,
                    free >> 30,
                    data_directory.0,
                    CHUNK_BYTES >> 30,
                    RESERVE_BYTES >> 30
                );
            }
            let series = |sql: &str| sql.replace("SERIES", SERIES);
            let (runs_sql, keys_sql, entries_sql) = (series(RUNS), series(KEYS), series(ENTRIES));
            let chunk = |sql| sqlx::query(sql).bind(now).bind(size).bind(span).bind(lo).bind(hi);
            let writes = [
                ("runs", chunk(&runs_sql).bind(&stack.workflow).bind(&stack.revision)),
                ("keys", chunk(&keys_sql).bind(&stack.workflow)),
                ("journal", chunk(&entries_sql).bind(entries).bind(ROW_ENTRIES)),
            ];
            for (what, query) in writes {
                query.execute(pool).await.with_context(|| format!("writing the history's {what} ({lo}..={hi})"))?;
            }
            if hi % 2_000_000 == 0 || hi == size {
                println!("  {hi} of {size} ended runs written after {:.0} s", started.elapsed().as_secs_f64());
            }
            lo = hi + 1;
        }
        sqlx::query(HEAD).bind(ROW_ENTRIES).execute(pool).await?;
    }
    sqlx::query("VACUUM ANALYZE").execute(pool).await?;
    // The load's dirty pages are written now, not by a checkpoint during the measurement.
    sqlx::query("CHECKPOINT").execute(pool).await?;
    let load_seconds = started.elapsed().as_secs_f64();
    let (bytes,): (i64,) = sqlx::query_as("SELECT pg_database_size(current_database())").fetch_one(pool).await?;
    println!("  {size} ended runs written in {load_seconds:.0} s");
    Ok(Loaded { stack, size, load_seconds, database_mb: bytes as f64 / 1_048_576.0 })
}

/// Completed runs/s with `clients` clients, then admission latency at `rate`/s.
/// Round `round`'s admissions carry keys of their own.
async fn measure(
    l: &Loaded,
    round: usize,
    clients: usize,
    runs: usize,
    rate: f64,
    seconds: f64,
) -> anyhow::Result<Measured> {
    let (stack, size) = (&l.stack, l.size);
    let Observer::Pg(pool) = &stack.observer else { bail!("the history bench runs on PostgreSQL") };
    let t0 = epoch_ms();
    let admitter = Arc::new(Admitter::new(
        &stack.url,
        &stack.workflow,
        &stack.revision,
        &format!("hist{round}"),
        three_calls_input,
    )?);
    let admissions = closed_loop(Arc::clone(&admitter), clients, runs, None).await?;
    let (finished, last) = finished_since(pool, t0, admissions.admitted).await?;
    let completed = finished as f64 / ((last - admissions.first_sent_ms).max(1) as f64 / 1000.0);
    println!("  {size}: {finished} of {} finished, {completed:.0} completed runs/s", admissions.admitted);
    slowest(pool, t0).await?;

    let t1 = epoch_ms();
    let latency = Arc::new(Admitter::new(
        &stack.url,
        &stack.workflow,
        &stack.revision,
        &format!("lat{round}"),
        three_calls_input,
    )?);
    let watch = Watch::start(pool.clone()).await?;
    let open = open_loop(latency, rate, Duration::from_secs_f64(seconds)).await?;
    let seen = watch.stop().await?;
    let (done, _) = finished_since(pool, t1, open.admitted).await?;
    println!(
        "  {size}: {} admitted at {:.1}/s, p99 {}, {} failed, {done} finished; meanwhile {seen}",
        open.admitted,
        open.rate(),
        ms(open.quantile(0.99)),
        open.failed
    );
    Ok(Measured { completed, p50: open.quantile(0.5), p99: open.quantile(0.99) })
}

/// Lets one measurement's aftermath pass before the next begins: a
/// `CHECKPOINT`, then until no autovacuum worker is running anywhere on the
/// server (at most [`SETTLE_LIMIT`]). Without it the second size measured in a
/// round ran 19–26 % slower whichever it was (bench/RESULTS.md, ninth sitting).
async fn settle(stack: &Stack) -> anyhow::Result<()> {
    let Observer::Pg(pool) = &stack.observer else { bail!("the history bench runs on PostgreSQL") };
    let started = Instant::now();
    sqlx::query("CHECKPOINT").execute(pool).await?;
    loop {
        let (busy,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")
                .fetch_one(pool)
                .await?;
        if busy == 0 || started.elapsed() >= SETTLE_LIMIT {
            println!("  settled in {:.1} s ({busy} autovacuum workers still running)", started.elapsed().as_secs_f64());
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A journal row as [`slowest`] reads it: at, kind, step, detail, more.
type JournalRow = (i64, String, Option<String>, String, Option<String>);

/// Prints the run admitted since `since` that took longest from admission to
/// its last update, with its journal (kinds, steps, details, ms after
/// admission): what a straggler waited for.
async fn slowest(pool: &PgPool, since: i64) -> anyhow::Result<()> {
    let run: Option<(String, i64, i64)> = sqlx::query_as(
        "SELECT id::text, admitted_at, updated_at FROM runs WHERE admitted_at >= $1 ORDER BY updated_at - admitted_at DESC LIMIT 1",
    )
    .bind(since)
    .fetch_optional(pool)
    .await?;
    let Some((id, admitted, updated)) = run else { return Ok(()) };
    let rows: Vec<JournalRow> =
        sqlx::query_as("SELECT at, kind, step, detail, more FROM audit WHERE run_id = $1::uuid ORDER BY seq")
            .bind(&id)
            .fetch_all(pool)
            .await?;
    let mut journal = Vec::new();
    for (at, kind, step, detail, more) in rows {
        let later: Vec<(String, Option<String>, String, Option<String>)> =
            more.as_deref().and_then(|m| serde_json::from_str(m).ok()).unwrap_or_default();
        let all = std::iter::once((kind, step, detail)).chain(later.into_iter().map(|(k, s, d, _)| (k, s, d)));
        for (kind, step, detail) in all {
            journal.push(format!("+{} {kind} {} {detail}", at - admitted, step.as_deref().unwrap_or("-")));
        }
    }
    println!("  slowest run {id}: {} ms; {}", updated - admitted, journal.join("; "));
    Ok(())
}

/// Bytes free for PostgreSQL on the file system holding `dir` (`df`: the bench
/// runs beside its PostgreSQL).
fn free_bytes(dir: &str) -> anyhow::Result<u64> {
    let out = std::process::Command::new("df").args(["-B1", "--output=avail", dir]).output().context("running df")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("df said nothing usable about {dir} (is PostgreSQL on this machine?)"))
}

/// Waits until `expected` runs admitted since `since` finished (or [`FINISH_LIMIT`]); (finished, last finish ms).
async fn finished_since(pool: &PgPool, since: i64, expected: usize) -> anyhow::Result<(usize, i64)> {
    let give_up = Instant::now() + FINISH_LIMIT;
    loop {
        let (n, _, last): (i64, Option<i64>, Option<i64>) =
            sqlx::query_as(SINCE).bind("finished").bind(since).fetch_one(pool).await?;
        let n = usize::try_from(n)?;
        if n >= expected || Instant::now() >= give_up {
            return Ok((n, last.unwrap_or(0)));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
