//! `coordinator dev --data DIR` stopped (SIGKILL, then SIGTERM) and started
//! again on the same directory: it keeps its generated payload key, operator
//! token and event secret there, so every earlier run still opens (with a
//! new key per start they answered `500 internal`), the same token is
//! accepted, and work goes on.

use std::path::Path;

use serde_json::Value;

use crate::support::deploy::free_port;
use crate::support::process::{DevArgs, Process, ready};
use crate::support::{admission, admit_as, get_as, on_runtime, poll_as, tempdir};

/// `coordinator dev` on `data` listening on `port`, its log `dev-{n}.log`, ready.
async fn start(data: &Path, port: u16, n: u32) -> (Process, String) {
    let args = DevArgs { listen: format!("127.0.0.1:{port}"), data: Some(data), token: None };
    let dev = Process::dev(&args, &data.join(format!("dev-{n}.log")));
    let url = format!("http://{}", args.listen);
    ready(&url, &dev.log).await;
    (dev, url)
}

/// Stops the process with `signal` and waits until it is gone.
async fn stop(mut dev: Process, signal: &str) {
    dev.signal(signal);
    dev.exited().await;
}

/// Admits under `key` with `token`, on the revision of the `serving` line.
async fn admit(dev: &Process, url: &str, token: &str, key: &str) -> String {
    let serving = dev.serving().await;
    let revision = serving["revision"].as_str().unwrap_or_else(|| panic!("no revision: {serving}"));
    admit_as(url, token, &admission(revision, key)).await
}

async fn finished(url: &str, token: &str, run: &str) {
    poll_as(&format!("{url}/v1/runs/{run}"), Some(token), "finished", |v| v["state"] == "finished").await;
}

async fn view(url: &str, token: &str, path: &str) -> (u16, Value) {
    get_as(&format!("{url}{path}"), Some(token)).await
}

#[test]
fn dev_restarted_on_its_data_directory_keeps_every_run() {
    on_runtime(async {
        let data = tempdir();
        let port = free_port();
        let (dev, url) = start(data.path(), port, 1).await;
        let token = std::fs::read_to_string(data.path().join("dev-operator-token")).unwrap_or_default();
        let token = token.trim().to_owned();
        assert_eq!(token.len(), 64, "the generated operator token is kept in the data directory");
        let first = admit(&dev, &url, &token, "before-kill").await;
        finished(&url, &token, &first).await;
        let waiting = admit(&dev, &url, &token, "killed-mid-run").await;

        stop(dev, "KILL").await;
        let (dev, url) = start(data.path(), port, 2).await;
        // The same token; every earlier run opens (a new key would make these 500).
        let (status, shown) = view(&url, &token, &format!("/v1/runs/{first}")).await;
        assert_eq!((status, shown["state"].as_str()), (200, Some("finished")), "{shown}");
        let (status, inspection) = view(&url, &token, &format!("/v1/runs/{waiting}/inspection")).await;
        assert_eq!(status, 200, "{inspection}");
        let second = admit(&dev, &url, &token, "after-kill").await;
        finished(&url, &token, &second).await;

        stop(dev, "TERM").await;
        let (dev, url) = start(data.path(), port, 3).await;
        for run in [&first, &second] {
            let (status, shown) = view(&url, &token, &format!("/v1/runs/{run}")).await;
            assert_eq!((status, shown["state"].as_str()), (200, Some("finished")), "{shown}");
        }
        let third = admit(&dev, &url, &token, "after-term").await;
        finished(&url, &token, &third).await;
    });
}
