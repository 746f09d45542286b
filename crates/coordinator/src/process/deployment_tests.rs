//! Payload keys as hex, and a deployment with a remote connection: it is
//! exposed with its workers and the gRPC listener, gets no product client,
//! and still satisfies the package's operations.

use super::*;

#[test]
fn keys_are_64_hex_digits() {
    let key = "00ff".repeat(16);
    assert_eq!(decode_hex_key(&key).map(|k| (k.len(), k[1])), Some((32, 0xff)));
    assert_eq!(decode_hex_key(&key[..62]), None);
    assert_eq!(decode_hex_key(&"zz".repeat(32)), None);
    assert_eq!(decode_hex_key(&"é".repeat(32)), None);
}

/// An in-process connection of the simulators.
fn in_process(name: &str, product: &str) -> String {
    format!(
        "  {name}:\n    product: {product}\n    baseUrl: http://127.0.0.1:7401/sim/{product}\n    authorization:\n      \
         type: client-secret\n      tokenEndpoint: http://127.0.0.1:7401/sim/token\n      clientId: c\n      \
         clientSecret: file:client-secret\n"
    )
}

#[test]
fn a_remote_connection_is_exposed_with_its_workers_and_gets_no_product_client() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/reviewed-notice");
    let report = coordinator_core::check::check_project(&crate::process::project_dir::ProjectDir::new(&project))
        .unwrap_or_else(|e| panic!("{e}"));
    let Some(checked) = report.checked else { panic!("refused: {:?}", report.diagnostics) };
    let built = package::build(&checked, "test").unwrap_or_else(|e| panic!("{e}"));
    let files = [
        ("reviewed-notice.pkg", built.bytes),
        ("database-url", b"sqlite://unused.db".to_vec()),
        ("payload-key", "5a".repeat(32).into_bytes()),
        ("client-secret", b"s".to_vec()),
        ("worker-token", b"t-worker".to_vec()),
        ("grpc.crt", b"CERTIFICATE PEM\n".to_vec()),
        ("grpc.key", b"KEY PEM\n".to_vec()),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let runtime = format!(
        "apiVersion: coordinator/v1\nkind: Runtime\ndatabase: {{url: file:database-url}}\n\
         payloadKeys: {{active: k1, keys: {{k1: file:payload-key}}}}\nlisten: 127.0.0.1:7400\n\
         grpc: {{listen: \"127.0.0.1:7401\", tls: {{certificate: file:grpc.crt, privateKey: file:grpc.key}}}}\n\
         package: {{path: reviewed-notice.pkg, digest: \"{digest}\"}}\nconnections:\n\
         \x20 registry:\n    product: breg\n    dispatch: remote\n    workers: [registry-worker]\n{casework}{messaging}\
         access: {{tokens: [{{subject: registry-worker, token: file:worker-token, roles: [worker]}}]}}\n",
        digest = built.digest,
        casework = in_process("casework", "casework"),
        messaging = in_process("messaging", "messaging"),
    );
    let path = dir.path().join("runtime.yaml");
    std::fs::write(&path, runtime).unwrap_or_else(|e| panic!("{e}"));
    let config = RuntimeConfig::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let deployment = config.resolve().unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(deployment.remote, BTreeMap::from([("registry".to_owned(), vec!["registry-worker".to_owned()])]));
    let mut clients: Vec<&str> = deployment.connections.keys().map(String::as_str).collect();
    clients.sort_unstable();
    assert_eq!(clients, ["casework", "messaging"]);
    let Some(grpc) = &deployment.grpc else { panic!("no grpc") };
    assert_eq!(grpc.listen, "127.0.0.1:7401".parse::<SocketAddr>().unwrap_or_else(|e| panic!("{e}")));
    let tls = grpc.tls.as_ref().map(|t| (t.certificate.expose(), t.private_key.expose()));
    assert_eq!(tls, Some(("CERTIFICATE PEM", "KEY PEM")));
    // The worker authenticates, with no right on the HTTP API.
    let worker = deployment.access.authenticate("t-worker").unwrap_or_else(|| panic!("the worker's token"));
    assert!(worker.holds_somewhere(coordinator_core::model::runtime::Role::Worker));
    assert!(!worker.holds_somewhere(coordinator_core::model::runtime::Role::Read));
}

#[test]
fn the_redis_url_is_resolved_and_must_be_redis_without_being_shown() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let with = |url: &str| {
        std::fs::write(dir.path().join("redis-url"), url).unwrap_or_else(|e| panic!("{e}"));
        let text = "apiVersion: coordinator/v1\nkind: Runtime\ndatabase: {url: file:database-url}\n\
                    payloadKeys: {active: k1, keys: {k1: file:payload-key}}\nlisten: 127.0.0.1:7400\n\
                    dispatch: {redis: {url: file:redis-url}}\n\
                    package: {path: p.pkg, digest: \"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"}\n\
                    connections: {}\naccess: {}\n";
        let path = dir.path().join("runtime.yaml");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        RuntimeConfig::read(&path).unwrap_or_else(|e| panic!("{e}")).redis_url()
    };
    let resolved = with("redis://:hunter2@127.0.0.1:6379/2\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resolved.as_ref().map(Secret::expose), Some("redis://:hunter2@127.0.0.1:6379/2"));
    for wrong in ["rediss://:hunter2@cache:6380", "http://hunter2@cache", "hunter2"] {
        let e = match with(wrong) {
            Err(e) => e,
            Ok(_) => panic!("{wrong} accepted"),
        };
        let shown = e.to_string();
        assert!(shown.contains("file:redis-url") && !shown.contains("hunter2"), "{shown}");
        assert!(!e.is_unavailable(), "a wrong URL is a configuration error");
    }
}
