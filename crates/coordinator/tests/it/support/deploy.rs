//! Deployments as an operator sets them up: a directory with runtime.yaml,
//! the packaged project, a payload key and secrets in files, pointing at
//! simulators served on their own listener; copies of the flagship to
//! package instead; `serve` started in this process on such a directory;
//! and the run listing read through its pages.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use coordinator::process::deployment::RuntimeConfig;
use coordinator::process::project_dir::ProjectDir;
use coordinator::process::serve::{self, Mode, Service};
use coordinator_core::check::check_project;
use coordinator_core::package;
use coordinator_sim::casework::CaseworkConfig;
use coordinator_sim::{DEFAULT_CLIENT, SimConfig, Simulators};
use serde_json::Value;

use super::{GUARD, TOKEN, flagship};

/// Simulators on their own listener (as a separate product deployment would be).
pub struct SimServer {
    /// Their base URL (`http://127.0.0.1:PORT`); products are under `/sim/{product}`.
    pub base: String,
    /// The simulators (effect counts, faults).
    pub sims: Simulators,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The simulators' settings: reviewers decide each review request by
/// themselves `decide_after` it was made (never, when `None`: the test
/// decides), and announce decisions to the coordinator at `notify` (its base
/// URL) when given.
pub fn sim_config(decide_after: Option<Duration>, notify: Option<&str>) -> SimConfig {
    let casework = CaseworkConfig {
        auto_decide_after: decide_after,
        notify_url: notify.map(|url| format!("{url}/v1/completions/casework")),
        ..CaseworkConfig::default()
    };
    SimConfig { casework, ..SimConfig::default() }
}

/// Simulators with [`sim_config`], served.
pub async fn sims(decide_after: Option<Duration>, notify: Option<&str>) -> SimServer {
    sim_server(sim_config(decide_after, notify)).await
}

/// A deployment of the flagship on `database_url` against simulators of its
/// own, [`sims`] whose reviewers decide each review request `decide_after` it
/// was made (by hand when `None`) and, when `notify`, announce the decisions
/// to this deployment: its spec (listening on a port of its own) and the simulators.
pub async fn deployment(
    database_url: &str,
    decide_after: Option<Duration>,
    notify: bool,
) -> (DeploymentSpec, SimServer) {
    let mut spec = DeploymentSpec::new(database_url, "");
    let sims = sims(decide_after, notify.then(|| spec.url()).as_deref()).await;
    spec.sims.clone_from(&sims.base);
    (spec, sims)
}

/// Starts the simulators with `config` on `127.0.0.1:0`.
pub async fn sim_server(config: SimConfig) -> SimServer {
    let sims = Simulators::new(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
    let router = coordinator_sim::app(&sims);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    SimServer { base: format!("http://{addr}"), sims, task }
}

/// A loopback port held bound but not listening: a connection to it is
/// refused, as to a product that is down, and no other listener (of this
/// test or another) can take it meanwhile. [`ClosedPort::open`] starts
/// listening on the same socket, so nothing else can slip in between.
pub struct ClosedPort {
    socket: tokio::net::TcpSocket,
    /// The port.
    pub port: u16,
}

impl ClosedPort {
    /// Reserves a port on 127.0.0.1.
    pub fn reserve() -> ClosedPort {
        let socket = tokio::net::TcpSocket::new_v4().unwrap_or_else(|e| panic!("socket: {e}"));
        socket.bind(([127, 0, 0, 1], 0).into()).unwrap_or_else(|e| panic!("bind: {e}"));
        let port = socket.local_addr().unwrap_or_else(|e| panic!("addr: {e}")).port();
        ClosedPort { socket, port }
    }

    /// Starts listening (the product comes up).
    pub fn open(self) -> tokio::net::TcpListener {
        self.socket.listen(1024).unwrap_or_else(|e| panic!("listen on {}: {e}", self.port))
    }
}

/// A free loopback port (bound, then released): runtime.yaml wants a real
/// port (`coordinator_testdb::ports`: below the ephemeral range).
pub fn free_port() -> u16 {
    free_ports::<1>()[0]
}

/// `N` distinct free loopback ports (all bound at once, then released).
pub fn free_ports<const N: usize>() -> [u16; N] {
    coordinator_testdb::ports::free_ports().unwrap_or_else(|e| panic!("{e}"))
}

/// A SQLite database in `dir` (the file `c.db`).
pub fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", dir.join("c.db").display())
}

/// A project packaged as `coordinatorctl package` of this workspace version writes it.
pub struct Package {
    /// The package's bytes.
    pub bytes: Vec<u8>,
    /// Their digest (what runtime.yaml pins).
    pub digest: String,
    /// The revision of the workflow in it.
    pub revision: String,
}

/// The package of a project directory.
pub fn package_of(project: &Path) -> Package {
    let report = check_project(&ProjectDir::new(project)).unwrap_or_else(|e| panic!("check: {e}"));
    let Some(checked) = report.checked else { panic!("{} was refused: {:?}", project.display(), report.diagnostics) };
    let built = package::build(&checked, env!("CARGO_PKG_VERSION")).unwrap_or_else(|e| panic!("package: {e}"));
    Package { bytes: built.bytes, digest: built.digest, revision: checked.revision }
}

/// A copy of the flagship in `dir/name` (workflow.yaml, functions.rhai,
/// input.json) with each `(from, to)` replaced once in workflow.yaml.
pub fn variant(dir: &Path, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let project = dir.join(name);
    std::fs::create_dir_all(&project).unwrap_or_else(|e| panic!("{e}"));
    for file in ["functions.rhai", "input.json"] {
        std::fs::copy(flagship().join(file), project.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    let mut workflow = std::fs::read_to_string(flagship().join("workflow.yaml")).unwrap_or_else(|e| panic!("{e}"));
    for (from, to) in edits {
        assert_eq!(workflow.matches(from).count(), 1, "`{from}` is not in workflow.yaml exactly once");
        workflow = workflow.replacen(from, to, 1);
    }
    std::fs::write(project.join("workflow.yaml"), workflow).unwrap_or_else(|e| panic!("{e}"));
    project
}

/// The review wait observes every second (instead of casework's 900 s).
pub const EAGER: (&str, &str) =
    ("    timeoutSeconds: 1209600", "    observeEverySeconds: 1\n    timeoutSeconds: 1209600");

/// A copy of the flagship in `dir/project` whose review wait observes casework every second
/// (a notification lost with a killed process then costs a second, not 15 minutes).
pub fn eager_flagship(dir: &Path) -> PathBuf {
    variant(dir, "project", &[EAGER])
}

/// What a deployment directory is made of; the defaults describe a working one.
#[derive(Clone)]
pub struct DeploymentSpec {
    /// The database URL (written to a secret file).
    pub database_url: String,
    /// The simulators' base URL.
    pub sims: String,
    /// `listen:`.
    pub listen: String,
    /// Extra top-level YAML (e.g. `observeFloorSeconds: 1`).
    pub extra: String,
    /// Connect timeout of every connection, seconds.
    pub connect_seconds: u64,
    /// Request timeout of every connection, seconds.
    pub request_seconds: u64,
    /// The project packaged (default: examples/reviewed-notice).
    pub project: PathBuf,
    /// `access:` as flow YAML (default: subject `operator` with every role,
    /// its token [`TOKEN`] in the file `operator-token`).
    pub access: String,
    /// Extra files written next to runtime.yaml (name, content), e.g. more tokens.
    pub files: Vec<(String, String)>,
    /// `payloadKeys:` as flow YAML (default: `k1`, the file `payload-key`).
    pub payload_keys: String,
    /// Connections served by remote workers (`dispatch: remote`): name → `workers` (default: none).
    pub remote: Vec<(String, Vec<String>)>,
    /// `grpc.listen` (default: none).
    pub grpc: Option<String>,
    /// `grpc.tls` as (certificate, privateKey) references (default: none, plain HTTP/2).
    pub grpc_tls: Option<(String, String)>,
}

impl DeploymentSpec {
    /// A deployment of reviewed-notice on `database_url` against `sims`.
    pub fn new(database_url: &str, sims: &str) -> Self {
        DeploymentSpec {
            database_url: database_url.to_owned(),
            sims: sims.to_owned(),
            listen: format!("127.0.0.1:{}", free_port()),
            extra: "observeFloorSeconds: 1\n".to_owned(),
            connect_seconds: 2,
            request_seconds: 5,
            project: flagship(),
            access: "{tokens: [{subject: operator, token: file:operator-token, roles: [admit, read, operate]}]}"
                .to_owned(),
            files: vec![("operator-token".to_owned(), format!("{TOKEN}\n"))],
            payload_keys: "{active: k1, keys: {k1: file:payload-key}}".to_owned(),
            remote: Vec::new(),
            grpc: None,
            grpc_tls: None,
        }
    }

    /// `http://` and the address it listens on.
    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }

    /// Writes runtime.yaml, the package, the key and the secret files into `dir`; returns runtime.yaml's path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let Package { bytes, digest, .. } = package_of(&self.project);
        let files: BTreeMap<&str, Vec<u8>> = BTreeMap::from([
            ("reviewed-notice.pkg", bytes),
            ("database-url", self.database_url.clone().into_bytes()),
            ("payload-key", format!("{}\n", "5a".repeat(32)).into_bytes()),
            ("client-secret", DEFAULT_CLIENT.1.as_bytes().to_vec()),
        ]);
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        for (name, content) in &self.files {
            let path = dir.join(name);
            path.parent().map(std::fs::create_dir_all).transpose().unwrap_or_else(|e| panic!("{name}: {e}"));
            std::fs::write(path, content).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let connection = |product: &str| {
            let p = if product == "registry" { "breg" } else { product };
            if let Some((_, workers)) = self.remote.iter().find(|(name, _)| name == product) {
                return format!(
                    "  {product}:\n    product: {p}\n    dispatch: remote\n    workers: [{w}]\n",
                    w = workers.join(", "),
                );
            }
            format!(
                "  {product}:\n    product: {p}\n    baseUrl: {sims}/sim/{p}\n    authorization:\n      type: client-secret\n      tokenEndpoint: {sims}/sim/token\n      clientId: {client}\n      clientSecret: file:client-secret\n    timeouts: {{connectSeconds: {cs}, requestSeconds: {rs}}}\n",
                sims = self.sims,
                client = DEFAULT_CLIENT.0,
                cs = self.connect_seconds,
                rs = self.request_seconds,
            )
        };
        let yaml = format!(
            "apiVersion: coordinator/v1\nkind: Runtime\ndatabase: {{url: file:database-url}}\npayloadKeys: {payload_keys}\nlisten: \"{listen}\"\npackage: {{path: reviewed-notice.pkg, digest: \"{digest}\"}}\nconnections:\n{c1}{c2}{c3}access: {access}\n{extra}",
            listen = self.listen,
            payload_keys = self.payload_keys,
            c1 = connection("registry"),
            c2 = connection("casework"),
            c3 = connection("messaging"),
            access = self.access,
            extra = self.extra,
        );
        let yaml = match (&self.grpc, &self.grpc_tls) {
            (Some(listen), None) => format!("{yaml}grpc: {{listen: \"{listen}\"}}\n"),
            (Some(listen), Some((cert, key))) => {
                format!("{yaml}grpc: {{listen: \"{listen}\", tls: {{certificate: {cert}, privateKey: {key}}}}}\n")
            }
            (None, _) => yaml,
        };
        let path = dir.join("runtime.yaml");
        std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("runtime.yaml: {e}"));
        path
    }

    /// The same deployment for processes listening on each of `ports`, each
    /// written into `dir/p{i}`: their runtime.yaml files.
    pub fn write_each(&self, dir: &Path, ports: &[u16]) -> Vec<PathBuf> {
        let mut runtimes = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let place = dir.join(format!("p{i}"));
            std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("{e}"));
            let spec = DeploymentSpec { listen: format!("127.0.0.1:{port}"), ..self.clone() };
            runtimes.push(spec.write(&place));
        }
        runtimes
    }
}

/// Starts `serve` in this process on the deployment of `runtime` in `mode` (its database migrated).
pub async fn start(runtime: &Path, mode: Mode) -> Service {
    let deployment = RuntimeConfig::read(runtime).and_then(RuntimeConfig::resolve);
    let deployment = deployment.unwrap_or_else(|e| panic!("{}: {e}", runtime.display()));
    serve::start_with(deployment, mode).await.unwrap_or_else(|e| panic!("serve: {e}"))
}

/// Migrates the database of `runtime` (as `coordinator migrate` does), in this process.
pub async fn migrate(runtime: &Path) {
    let config = RuntimeConfig::read(runtime).unwrap_or_else(|e| panic!("{}: {e}", runtime.display()));
    serve::migrate(&config).await.unwrap_or_else(|e| panic!("migrate: {e}"));
}

/// Migrates the database of `runtime` and starts `serve` on it, in this process.
pub async fn migrated(runtime: &Path) -> Service {
    migrate(runtime).await;
    start(runtime, Mode::Normal).await
}

/// Every run of the listing `GET {url}/v1/runs?{query}`, through its pages.
pub async fn listed(client: &reqwest::Client, url: &str, query: &str) -> Vec<Value> {
    let mut runs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut page_url = format!("{url}/v1/runs?limit=500&{query}");
        if let Some(c) = &cursor {
            page_url.push_str(&format!("&cursor={c}"));
        }
        let response = client.get(page_url).send().await.unwrap_or_else(|e| panic!("listing runs: {e}"));
        let page: Value = response.json().await.unwrap_or(Value::Null);
        runs.extend(page["runs"].as_array().into_iter().flatten().cloned());
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return runs,
        }
    }
}

/// How many runs are in each state, through the listing's pages.
pub async fn states(client: &reqwest::Client, url: &str) -> BTreeMap<String, usize> {
    let mut states = BTreeMap::new();
    for run in listed(client, url, "").await {
        *states.entry(run["state"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
    }
    states
}

/// Waits until `runs` runs finished (through the listing); panics with `logs` after [`GUARD`].
pub async fn until_finished(client: &reqwest::Client, url: &str, runs: usize, logs: &[PathBuf]) {
    let started = std::time::Instant::now();
    loop {
        let finished = listed(client, url, "state=finished").await.len();
        if finished == runs {
            return;
        }
        if started.elapsed() > GUARD {
            let texts: Vec<String> = logs.iter().map(|l| super::process::read(l)).collect();
            panic!("{finished} of {runs} runs finished; logs:\n{}", texts.join("\n---\n"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
