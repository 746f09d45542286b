//! Remote workers: a worker.yaml next to the product (its own client at the
//! token endpoint; the process itself is [`Process::worker`](super::process::Process::worker)),
//! certificates of a private CA, and a raw gRPC client of the coordinator's
//! `TaskService` for the cases a well-behaved worker never produces (a lapsed
//! offer, a late report).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use coordinator_sim::token::Client;
use coordinator_sim::{DEFAULT_CLIENT, SimConfig};

use coordinator_proto::v1::task_service_client::TaskServiceClient;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

use super::deploy::{SimServer, sim_config, sim_server};

/// The token of subject `worker-1` (role `worker`).
pub const WORKER_TOKEN: &str = "worker-token-1";
/// The product client the workers use at the token endpoint (their own identity).
pub const WORKER_CLIENT: (&str, &str) = ("remote-worker", "remote-worker-secret");

/// `access:` with the operator and `worker-1` holding the `worker` role.
pub fn access_with_worker() -> (String, Vec<(String, String)>) {
    let access = "{tokens: [{subject: operator, token: file:operator-token, roles: [admit, read, operate]}, \
                  {subject: worker-1, token: file:worker-token, roles: [worker]}]}"
        .to_owned();
    let files = vec![
        ("operator-token".to_owned(), format!("{}\n", super::TOKEN)),
        ("worker-token".to_owned(), format!("{WORKER_TOKEN}\n")),
    ];
    (access, files)
}

/// Simulators where only the worker's client gets tokens for `remote`
/// products (the coordinator's for the others), notifying completions to the
/// coordinator listening on `http_port`.
pub async fn sims(http_port: u16, remote: &[&str]) -> SimServer {
    let products = |names: &[&str]| Some(names.iter().map(|p| (*p).to_owned()).collect::<BTreeSet<String>>());
    let local: Vec<&str> = ["breg", "casework", "messaging"].into_iter().filter(|p| !remote.contains(p)).collect();
    let mut coordinator = Client::new(DEFAULT_CLIENT.0, DEFAULT_CLIENT.1);
    coordinator.products = products(&local);
    let mut worker = Client::new(WORKER_CLIENT.0, WORKER_CLIENT.1);
    worker.products = products(remote);
    let notify = format!("http://127.0.0.1:{http_port}");
    let config = sim_config(Some(Duration::from_millis(100)), Some(&notify));
    sim_server(SimConfig { clients: vec![coordinator, worker], ..config }).await
}

/// Writes a worker.yaml into `dir` serving `connections` (product names as the
/// flagship's connections name them) of the simulators at `sims`, for the
/// coordinator at `address`; returns its path.
pub fn write_worker(dir: &Path, address: &str, sims: &str, connections: &[&str], token: &str) -> PathBuf {
    write_worker_with(dir, address, None, sims, connections, token)
}

/// [`write_worker`] trusting the CA certificate at `ca` (a path) for an `https://` address.
pub fn write_worker_with(
    dir: &Path,
    address: &str,
    ca: Option<&Path>,
    sims: &str,
    connections: &[&str],
    token: &str,
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("token"), format!("{token}\n")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("client-secret"), WORKER_CLIENT.1).unwrap_or_else(|e| panic!("{e}"));
    let mut yaml = format!(
        "apiVersion: coordinator/v1\nkind: Worker\ncoordinator: {{address: \"{address}\", token: file:token{ca}}}\nconcurrency: 8\nconnections:\n",
        ca = ca.map(|p| format!(", caCertificate: \"file:{}\"", p.display())).unwrap_or_default(),
    );
    for name in connections {
        let product = if *name == "registry" { "breg" } else { name };
        yaml.push_str(&format!(
            "  {name}:\n    product: {product}\n    baseUrl: {sims}/sim/{product}\n    authorization:\n      type: client-secret\n      tokenEndpoint: {sims}/sim/token\n      clientId: {id}\n      clientSecret: file:client-secret\n    timeouts: {{connectSeconds: 2, requestSeconds: 5}}\n",
            id = WORKER_CLIENT.0,
        ));
    }
    let path = dir.join("worker.yaml");
    std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// A private CA and a certificate for 127.0.0.1 signed by it, made with
/// `openssl` in `dir`: `ca.pem`, `server.pem`, `server.key`.
pub fn make_certificates(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let steps: Vec<Vec<&str>> = vec![
        [&["req", "-x509"][..], &ec, &["-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=test-ca", "-days", "2"]]
            .concat(),
        [&["req"][..], &ec, &["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"]].concat(),
        vec![
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    ];
    for args in steps {
        let made =
            Command::new("openssl").args(&args).current_dir(dir).output().unwrap_or_else(|e| panic!("openssl: {e}"));
        assert!(made.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&made.stderr));
    }
}

/// Adds the bearer token to every call of a raw client.
pub type AddToken = Box<dyn FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Send>;

/// A raw client of the task service sending `token`.
pub type Raw = TaskServiceClient<tonic::service::interceptor::InterceptedService<Channel, AddToken>>;

/// A raw client of the task service at `address` sending `token` (none: no header).
pub async fn raw_client(address: &str, token: Option<&str>) -> Raw {
    let channel = Channel::from_shared(address.to_owned())
        .unwrap_or_else(|e| panic!("{e}"))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to {address}: {e}"));
    let header = token.map(|t| MetadataValue::try_from(format!("Bearer {t}")).unwrap_or_else(|e| panic!("{e}")));
    let add: AddToken = Box::new(move |mut request: tonic::Request<()>| {
        if let Some(header) = &header {
            request.metadata_mut().insert("authorization", header.clone());
        }
        Ok(request)
    });
    TaskServiceClient::with_interceptor(channel, add)
}
