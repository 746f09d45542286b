//! Test support: a `coordinator serve` child process, its log in a file,
//! signals sent to it, and its exit awaited without a busy loop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a child may take to exit (a failure guard, never a speed claim).
const EXIT_GUARD: Duration = Duration::from_secs(300);

/// A `coordinator serve` child, killed when dropped.
pub struct Serve {
    child: Child,
    /// Where its standard output and error go.
    pub log: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// `coordinator serve --log-format json --runtime RUNTIME`, output to `log`.
    pub fn spawn(runtime: &Path, log: &Path) -> Serve {
        Serve::spawn_with(runtime, log, "json", &[])
    }

    /// `coordinator serve` with `--log-format FORMAT` and extra environment variables.
    pub fn spawn_with(runtime: &Path, log: &Path, format: &str, env: &[(&str, &str)]) -> Serve {
        let out = std::fs::File::create(log).unwrap_or_else(|e| panic!("log: {e}"));
        let err = out.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_coordinator"));
        command.args(["serve", "--log-format", format, "--runtime"]).arg(runtime);
        command.env_remove("RUST_LOG");
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn coordinator serve: {e}"));
        Serve { child, log: log.to_path_buf() }
    }

    /// Sends `kill -NAME` to the process.
    pub fn signal(&self, name: &str) {
        let sent = Command::new("kill").args([&format!("-{name}"), &self.child.id().to_string()]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{name}");
    }

    /// Waits (polling) until the process exits.
    pub async fn exited(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(started.elapsed() < EXIT_GUARD, "coordinator serve did not exit:\n{}", read(&self.log));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `coordinator serve --runtime RUNTIME` as a bare child, its output
/// appended to `log` (a test that kills and starts it again keeps one log).
pub fn spawn_child(runtime: &Path, log: &Path) -> Child {
    let out = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap_or_else(|e| panic!("log: {e}"));
    let err = out.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
    Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .args(["serve", "--runtime"])
        .arg(runtime)
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn coordinator serve: {e}"))
}

/// Runs `coordinator migrate --runtime RUNTIME`; panics with its output when it fails.
pub fn migrate(runtime: &Path) {
    let migrated = Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .args(["migrate", "--runtime"])
        .arg(runtime)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
}

/// Waits until `url/readyz` answers 200; false after the guard.
pub async fn ready(client: &reqwest::Client, url: &str) -> bool {
    for _ in 0..600 {
        if let Ok(r) = client.get(format!("{url}/readyz")).send().await
            && r.status().is_success()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A file's text ("" when unreadable).
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The JSON objects of a JSON-lines log.
pub fn json_lines(path: &Path) -> Vec<Value> {
    read(path).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}
