//! One service under test: a scratch database (SQLite file or a fresh
//! PostgreSQL database), a deployment directory (runtime.yaml, the fixture
//! packaged, key and secret files), the simulators on their own listener in
//! this process, and `coordinator serve` (the release binary) as a child
//! process. Everything is removed when the stack is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use coordinator_bench::DirProject;
use coordinator_core::check::check_project;
use coordinator_core::package;
use coordinator_sim::{DEFAULT_CLIENT, SimConfig, Simulators};
pub use coordinator_testdb::ScratchDb as PgScratch;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};

/// The bearer token of the bench's API caller (subject `bench`, every role).
pub const API_TOKEN: &str = "bench-api-token";

/// Which store the service runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Backend {
    /// An embedded SQLite file in the deployment directory.
    Sqlite,
    /// A fresh database on the local PostgreSQL (127.0.0.1:5432, user postgres).
    Pg,
}

impl Backend {
    /// The name used in reports and arguments.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Pg => "PostgreSQL",
        }
    }
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `coordinator` binary: `$COORDINATOR_BIN`, else the release build in the target directory.
pub fn coordinator_bin() -> anyhow::Result<PathBuf> {
    let bin = match std::env::var_os("COORDINATOR_BIN") {
        Some(path) => PathBuf::from(path),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from);
            target.join("release/coordinator")
        }
    };
    if !bin.is_file() {
        bail!("{} does not exist: build it first with `cargo build --release -p coordinator`", bin.display());
    }
    Ok(bin)
}

/// The simulators on their own listener (a separate product deployment would be).
pub struct SimServer {
    /// The simulators' base URL.
    pub base: String,
    /// The simulators themselves (their load and effects).
    pub sims: Simulators,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn sim_server() -> anyhow::Result<SimServer> {
    let sims = Simulators::new(SimConfig::default());
    let served = sims.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("bind the simulators")?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(e) = coordinator_sim::serve(listener, &sims).await {
            eprintln!("simulators stopped: {e}");
        }
    });
    Ok(SimServer { base: format!("http://{addr}"), sims: served, task })
}

/// Reads the store directly (counts and instants the API does not show), on a pool of its own.
pub enum Observer {
    /// A read-only connection to the SQLite file (WAL: readers do not block the writer).
    Sqlite(SqlitePool),
    /// A connection to the scratch database.
    Pg(PgPool),
}

impl Observer {
    /// Runs in `state`, and the earliest and latest `updated_at` (ms since the epoch) among them.
    pub async fn count(&self, state: &str) -> anyhow::Result<(i64, Option<i64>, Option<i64>)> {
        const SQL: &str = "SELECT COUNT(*), MIN(updated_at), MAX(updated_at) FROM runs WHERE state = $1";
        let row: (i64, Option<i64>, Option<i64>) = match self {
            Observer::Sqlite(pool) => sqlx::query_as(SQL).bind(state).fetch_one(pool).await?,
            Observer::Pg(pool) => sqlx::query_as(SQL).bind(state).fetch_one(pool).await?,
        };
        Ok(row)
    }

    /// How many runs are in each state.
    pub async fn states(&self) -> anyhow::Result<Vec<(String, i64)>> {
        const SQL: &str = "SELECT state, COUNT(*) FROM runs GROUP BY state ORDER BY state";
        Ok(match self {
            Observer::Sqlite(pool) => sqlx::query_as(SQL).fetch_all(pool).await?,
            Observer::Pg(pool) => sqlx::query_as(SQL).fetch_all(pool).await?,
        })
    }

    /// The PostgreSQL pool, when the store is PostgreSQL.
    pub fn pg_pool(&self) -> Option<&PgPool> {
        match self {
            Observer::Pg(pool) => Some(pool),
            Observer::Sqlite(_) => None,
        }
    }

    async fn close(&self) {
        match self {
            Observer::Sqlite(pool) => pool.close().await,
            Observer::Pg(pool) => pool.close().await,
        }
    }
}

/// A running `coordinator serve` with its database and simulators.
pub struct Stack {
    /// The API's base URL.
    pub url: String,
    /// The workflow of the fixture.
    pub workflow: String,
    /// Its active revision.
    pub revision: String,
    /// The store, read directly.
    pub observer: Observer,
    /// The `coordinator serve` process id.
    pub pid: u32,
    child: Child,
    log: PathBuf,
    _sims: SimServer,
    _pg: Option<PgScratch>,
    _dir: tempfile::TempDir,
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Stack {
    /// The scratch PostgreSQL database's URL (none on SQLite).
    pub fn pg_url(&self) -> Option<&str> {
        self._pg.as_ref().map(|pg| pg.url.as_str())
    }

    /// Sets up and starts the service on `backend` with the fixture project `fixture`
    /// (a directory under bench/fixtures). `pg_params` is appended to the
    /// PostgreSQL URL's query (e.g. `sslmode=disable`; empty: the URL as is).
    pub async fn start(backend: Backend, fixture: &str, pg_params: &str) -> anyhow::Result<Stack> {
        let bin = coordinator_bin()?;
        let dir = tempfile::Builder::new().prefix("coordinator-bench-").tempdir()?;
        let sims = sim_server().await?;
        let (database_url, pg) = match backend {
            Backend::Sqlite => (format!("sqlite://{}?mode=rwc", dir.path().join("coordinator.db").display()), None),
            Backend::Pg => {
                let pg = PgScratch::create("coordinator_bench").await?;
                let url = if pg_params.is_empty() { pg.url.clone() } else { format!("{}?{pg_params}", pg.url) };
                (url, Some(pg))
            }
        };
        let project = repo().join("bench/fixtures").join(fixture);
        let (workflow, revision) = write_deployment(dir.path(), &project, &database_url, &sims.base, None)?;
        let runtime = dir.path().join("runtime.yaml");
        let migrated = Command::new(&bin).args(["migrate", "--runtime"]).arg(&runtime).output()?;
        if !migrated.status.success() {
            bail!("coordinator migrate failed: {}", String::from_utf8_lossy(&migrated.stderr));
        }
        let log = dir.path().join("serve.log");
        let out = std::fs::File::create(&log)?;
        let child = Command::new(&bin)
            .args(["serve", "--runtime"])
            .arg(&runtime)
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out))
            .spawn()
            .with_context(|| format!("spawn {}", bin.display()))?;
        let pid = child.id();
        let observer = match backend {
            Backend::Sqlite => {
                let options = SqliteConnectOptions::new().filename(dir.path().join("coordinator.db")).read_only(true);
                Observer::Sqlite(SqlitePoolOptions::new().max_connections(1).connect_with(options).await?)
            }
            Backend::Pg => Observer::Pg(PgPoolOptions::new().max_connections(1).connect(&database_url).await?),
        };
        let listen = read_listen(&runtime)?;
        let stack = Stack {
            url: format!("http://{listen}"),
            workflow,
            revision,
            observer,
            pid,
            child,
            log,
            _sims: sims,
            _pg: pg,
            _dir: dir,
        };
        stack.wait_healthy().await?;
        Ok(stack)
    }

    async fn wait_healthy(&self) -> anyhow::Result<()> {
        let client = reqwest::Client::new();
        for _ in 0..600 {
            if let Ok(r) = client.get(format!("{}/healthz", self.url)).bearer_auth(API_TOKEN).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(anyhow!("coordinator serve did not become healthy:\n{}", self.log_text()))
    }

    /// What `coordinator serve` printed so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Closes the observer's pool before the database goes.
    pub async fn stop(self) {
        self.observer.close().await;
    }
}

/// The token of the bench's remote workers (subject `bench-worker`, role `worker`).
pub const WORKER_TOKEN: &str = "bench-worker-token";

/// Writes runtime.yaml, the package and the secret files into `dir`; returns
/// (workflow, revision). With `grpc` (a port), every connection is remote
/// (`dispatch: remote`, served by subject `bench-worker`) and gRPC listens there.
pub fn write_deployment(
    dir: &Path,
    project: &Path,
    database_url: &str,
    sims: &str,
    grpc: Option<u16>,
) -> anyhow::Result<(String, String)> {
    let report = check_project(&DirProject(project.to_path_buf()))?;
    let Some(checked) = report.checked else {
        bail!("{} was refused: {:?}", project.display(), report.diagnostics);
    };
    let built = package::build(&checked, "bench")?;
    let manifest = &built.package.manifest;
    let files: [(&str, Vec<u8>); 6] = [
        ("api-token", API_TOKEN.as_bytes().to_vec()),
        ("worker-token", WORKER_TOKEN.as_bytes().to_vec()),
        ("project.pkg", built.bytes.clone()),
        ("database-url", database_url.as_bytes().to_vec()),
        ("payload-key", format!("{}\n", "5a".repeat(32)).into_bytes()),
        ("client-secret", DEFAULT_CLIENT.1.as_bytes().to_vec()),
    ];
    for (name, content) in files {
        std::fs::write(dir.join(name), content).with_context(|| format!("write {name}"))?;
    }
    let connection = |name: &str, product: &str| {
        if grpc.is_some() {
            return format!("  {name}:\n    product: {product}\n    dispatch: remote\n    workers: [bench-worker]\n");
        }
        connection_yaml(name, product, sims)
    };
    let listen = free_port()?;
    let grpc_line = grpc.map(|port| format!("grpc: {{listen: \"127.0.0.1:{port}\"}}\n")).unwrap_or_default();
    let yaml = format!(
        "apiVersion: coordinator/v1\nkind: Runtime\ndatabase: {{url: file:database-url}}\n\
         payloadKeys: {{active: k1, keys: {{k1: file:payload-key}}}}\nlisten: \"127.0.0.1:{listen}\"\n{grpc_line}\
         package: {{path: project.pkg, digest: \"{digest}\"}}\nconnections:\n{c1}{c2}\
         access: {{tokens: [{{subject: bench, token: file:api-token, roles: [admit, read, operate]}}, \
         {{subject: bench-worker, token: file:worker-token, roles: [worker]}}]}}\n",
        digest = built.digest,
        c1 = connection("registry", "breg"),
        c2 = connection("messaging", "messaging"),
    );
    std::fs::write(dir.join("runtime.yaml"), yaml)?;
    Ok((manifest.workflow.clone(), manifest.revision.clone()))
}

/// One in-process connection to the simulators at `sims` (runtime.yaml and worker.yaml alike).
pub fn connection_yaml(name: &str, product: &str, sims: &str) -> String {
    format!(
        "  {name}:\n    product: {product}\n    baseUrl: {sims}/sim/{product}\n    authorization:\n      \
             type: client-secret\n      tokenEndpoint: {sims}/sim/token\n      clientId: {client}\n      \
             clientSecret: file:client-secret\n    timeouts: {{connectSeconds: 2, requestSeconds: 5}}\n",
        client = DEFAULT_CLIENT.0,
    )
}

/// A free loopback port (bound, then released): runtime.yaml wants a real
/// port (`coordinator_testdb::ports`: below the ephemeral range, which
/// outgoing connections take their local ports from).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(coordinator_testdb::ports::free_port()?)
}

pub fn read_listen(runtime: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(runtime)?;
    text.lines()
        .find_map(|l| l.strip_prefix("listen: \"").and_then(|rest| rest.strip_suffix('"')))
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("runtime.yaml has no listen line"))
}

/// Resident and peak resident memory of a process, in kB (`VmRSS`, `VmHWM` of /proc/PID/status).
pub fn memory_kb(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| anyhow!("/proc/{pid}/status has no {name}"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// CPU time (user + system) a process used so far, in seconds (/proc/PID/stat, 100 ticks per second).
pub fn cpu_seconds(pid: Option<u32>) -> anyhow::Result<f64> {
    let path = pid.map_or_else(|| "/proc/self/stat".to_owned(), |p| format!("/proc/{p}/stat"));
    let stat = std::fs::read_to_string(&path)?;
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or_else(|| anyhow!("{path}: unexpected format"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).ok_or_else(|| anyhow!("{path}: field"));
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    Ok((tick(11)? + tick(12)?) as f64 / 100.0)
}

/// The whole machine's CPU ticks so far, summed over its cores (the `cpu`
/// line of /proc/stat): busy is everything but `idle` and `iowait`, and
/// counts `steal`, the time the hypervisor ran something else while this
/// machine had work (a shared virtual machine's stalls).
#[derive(Clone, Copy)]
pub struct Ticks {
    busy: u64,
    steal: u64,
    total: u64,
}

impl Ticks {
    pub fn read() -> anyhow::Result<Ticks> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        let line = stat.lines().find(|l| l.starts_with("cpu ")).ok_or_else(|| anyhow!("/proc/stat has no cpu line"))?;
        let ticks: Vec<u64> = line.split_whitespace().skip(1).filter_map(|t| t.parse().ok()).collect();
        let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
        let total: u64 = ticks.iter().sum();
        Ok(Ticks { busy: total - at(3) - at(4), steal: at(7), total })
    }

    /// The ticks from `before` to these.
    pub fn since(&self, before: &Ticks) -> Ticks {
        Ticks { busy: self.busy - before.busy, steal: self.steal - before.steal, total: self.total - before.total }
    }

    pub fn busy_percent(&self) -> f64 {
        100.0 * self.busy as f64 / self.total.max(1) as f64
    }

    /// Ticks the hypervisor took (hundredths of a second, over all cores).
    pub fn steal(&self) -> u64 {
        self.steal
    }

    pub fn steal_percent(&self) -> f64 {
        100.0 * self.steal as f64 / self.total.max(1) as f64
    }
}

impl std::fmt::Display for Ticks {
    /// `85 % (9 % stolen)`: busy, and of it the hypervisor's share.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.0} % ({:.0} % stolen)", self.busy_percent(), self.steal_percent())
    }
}

/// CPU seconds used so far by every process whose command is `name` (the
/// PostgreSQL server's processes are all `postgres`).
pub fn cpu_seconds_of(name: &str) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let is_named = std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == name);
        // A process that ended between the listing and the read counts nothing.
        if is_named && let Ok(seconds) = cpu_seconds(Some(pid)) {
            total += seconds;
        }
    }
    Ok(total)
}
