//! `coordinatorctl activate --package FILE [--digest sha256:…]`: activate a
//! package on a running service (`POST /v1/packages?digest=…` with the file's
//! bytes, unchanged). Without `--digest` the digest of the file is computed
//! here; with it, the service refuses a file whose bytes do not hash to it
//! (`409 package.digest-mismatch`), which is how a deployment pins what it
//! reviewed.

use std::path::Path;

use coordinator_core::definition::sha256_id;
use serde_json::Value;

use crate::Exit;
use crate::client::{Body, Client, ClientError, ServiceArgs};
use crate::operate::{self, text};

/// Runs `activate`.
pub fn run(args: &ServiceArgs, package: &Path, digest: Option<&str>) -> Exit {
    let bytes = match std::fs::read(package) {
        Ok(bytes) => bytes,
        Err(source) => {
            let error = ClientError::File { path: package.to_path_buf(), source };
            return operate::failed(args.format, "activate", &error);
        }
    };
    let digest = digest.map_or_else(|| sha256_id(&bytes), str::to_owned);
    let result = Client::connect(args)
        .and_then(|client| client.post(&["v1", "packages"], &[("digest", &digest)], Body::Bytes(bytes)));
    operate::report(args, "activate", result, human)
}

fn human(activated: &Value) -> String {
    let revision = text(activated, "revision");
    let mut out = format!("activated {} {revision}\n", text(activated, "workflow"));
    out.push_str(&format!("  digest:            {}\n", text(activated, "digest")));
    let previous = match activated["previousRevision"].as_str() {
        Some(previous) if previous == revision => format!("{previous} (it was already active)"),
        Some(previous) => previous.to_owned(),
        None => "none".to_owned(),
    };
    out.push_str(&format!("  previous revision: {previous}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn re_activating_says_so() {
        let answer =
            json!({"workflow": "w", "revision": "sha256:1", "digest": "sha256:2", "previousRevision": "sha256:1"});
        assert!(human(&answer).contains("previous revision: sha256:1 (it was already active)"));
        let answer = json!({"workflow": "w", "revision": "sha256:1", "digest": "sha256:2", "previousRevision": null});
        assert!(human(&answer).contains("previous revision: none"));
    }
}
