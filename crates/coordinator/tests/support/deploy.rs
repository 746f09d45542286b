//! Test support for `coordinator serve`: a deployment directory (runtime.yaml,
//! the packaged flagship example, a payload key and secrets in files) pointing
//! at simulators served on their own listener, as an operator would set it up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use coordinator::process::project_dir::ProjectDir;
use coordinator_core::check::check_project;
use coordinator_core::package;
use coordinator_sim::{DEFAULT_CLIENT, SimConfig, Simulators};

use crate::support::repo;

/// Simulators on their own listener (as a separate product deployment would be).
pub struct SimServer {
    /// Their base URL (`http://127.0.0.1:PORT`); products are under `/sim/{product}`.
    pub base: String,
    /// The simulators (effect counts, faults).
    pub sims: Simulators,
    _task: tokio::task::JoinHandle<()>,
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self._task.abort();
    }
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
    SimServer { base: format!("http://{addr}"), sims, _task: task }
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

/// The package of a project directory, as `coordinatorctl package` of this
/// workspace version writes it: (bytes, digest).
pub fn package_of(project: &Path) -> (Vec<u8>, String) {
    let report = check_project(&ProjectDir::new(project)).unwrap_or_else(|e| panic!("check: {e}"));
    let Some(checked) = report.checked else { panic!("{} was refused: {:?}", project.display(), report.diagnostics) };
    let built = package::build(&checked, env!("CARGO_PKG_VERSION")).unwrap_or_else(|e| panic!("package: {e}"));
    (built.bytes, built.digest)
}

/// What a deployment directory is made of; the defaults describe a working one.
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
    /// its token [`support::TOKEN`](crate::support::TOKEN) in the file `operator-token`).
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
            project: repo().join("examples/reviewed-notice"),
            access: "{tokens: [{subject: operator, token: file:operator-token, roles: [admit, read, operate]}]}"
                .to_owned(),
            files: vec![("operator-token".to_owned(), format!("{}\n", crate::support::TOKEN))],
            payload_keys: "{active: k1, keys: {k1: file:payload-key}}".to_owned(),
            remote: Vec::new(),
            grpc: None,
            grpc_tls: None,
        }
    }

    /// Writes runtime.yaml, the package, the key and the secret files into `dir`; returns runtime.yaml's path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let (bytes, digest) = package_of(&self.project);
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
            std::fs::write(dir.join(name), content).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let connection = |product: &str| {
            if let Some((_, workers)) = self.remote.iter().find(|(name, _)| name == product) {
                return format!(
                    "  {product}:\n    product: {p}\n    dispatch: remote\n    workers: [{w}]\n",
                    p = if product == "registry" { "breg" } else { product },
                    w = workers.join(", "),
                );
            }
            format!(
                "  {product}:\n    product: {p}\n    baseUrl: {sims}/sim/{p}\n    authorization:\n      type: client-secret\n      tokenEndpoint: {sims}/sim/token\n      clientId: {client}\n      clientSecret: file:client-secret\n    timeouts: {{connectSeconds: {cs}, requestSeconds: {rs}}}\n",
                p = if product == "registry" { "breg" } else { product },
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
}

/// A copy of reviewed-notice in `dir` whose review wait observes casework every
/// second (a notification lost with a killed process then costs a second, not 15 minutes).
pub fn eager_reviewed_notice(dir: &Path) -> PathBuf {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap_or_else(|e| panic!("{e}"));
    let source = repo().join("examples/reviewed-notice");
    for file in ["functions.rhai", "input.json"] {
        std::fs::copy(source.join(file), project.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    let workflow = std::fs::read_to_string(source.join("workflow.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let eager =
        workflow.replace("    timeoutSeconds: 1209600", "    observeEverySeconds: 1\n    timeoutSeconds: 1209600");
    assert_ne!(eager, workflow, "the review wait was not found in workflow.yaml");
    std::fs::write(project.join("workflow.yaml"), eager).unwrap_or_else(|e| panic!("{e}"));
    project
}

/// How many runs are in `state`, counted through the list API's pages.
pub async fn runs_in_state(client: &reqwest::Client, url: &str, state: &str) -> usize {
    let mut total = 0;
    let mut cursor: Option<String> = None;
    loop {
        let mut page_url = format!("{url}/v1/runs?state={state}&limit=500");
        if let Some(c) = &cursor {
            page_url.push_str(&format!("&cursor={c}"));
        }
        let Ok(response) = client.get(page_url).send().await else { return total };
        let page: serde_json::Value = response.json().await.unwrap_or(serde_json::Value::Null);
        total += page["runs"].as_array().map_or(0, Vec::len);
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return total,
        }
    }
}
