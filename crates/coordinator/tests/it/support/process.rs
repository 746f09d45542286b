//! `coordinator serve`, `dev` and `worker` as child processes: each with
//! its log in a file (appended to, so a process started again on the same
//! log keeps one), signals sent to it, its exit awaited without a busy loop,
//! and killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::deploy::DeploymentSpec;
use super::{GUARD, flagship};

/// A child process of the `coordinator` binary, killed when dropped.
pub struct Process {
    child: std::process::Child,
    /// Where its standard output and error go.
    pub log: PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How `coordinator dev` is started by [`Process::dev`].
pub struct DevArgs<'a> {
    /// `--listen` (127.0.0.1 and a port).
    pub listen: String,
    /// `--data` (default: a temporary directory of its own).
    pub data: Option<&'a Path>,
    /// `--token` (default: one generated and kept in the data directory).
    pub token: Option<&'a str>,
}

impl Process {
    /// `coordinator ARGS`, its output appended to `log`, with `env` set and `RUST_LOG` unset unless given.
    fn spawn(args: &[&str], log: &Path, env: &[(&str, &str)]) -> Process {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log);
        let out = out.unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let err = out.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_coordinator"));
        command.args(args).env_remove("RUST_LOG");
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn coordinator {args:?}: {e}"));
        Process { child, log: log.to_path_buf() }
    }

    /// `coordinator serve --log-format json --runtime RUNTIME`.
    pub fn serve(runtime: &Path, log: &Path) -> Process {
        Process::serve_with(runtime, log, "json", &[])
    }

    /// `coordinator serve` with `--log-format FORMAT` and extra environment variables.
    pub fn serve_with(runtime: &Path, log: &Path, format: &str, env: &[(&str, &str)]) -> Process {
        let runtime = runtime.display().to_string();
        Process::spawn(&["serve", "--log-format", format, "--runtime", &runtime], log, env)
    }

    /// `coordinator dev --log-format json` on the flagship, as `args` say.
    pub fn dev(args: &DevArgs<'_>, log: &Path) -> Process {
        let project = flagship().display().to_string();
        let mut all = vec!["dev", "--log-format", "json", "--listen", &args.listen, "--project", &project];
        let data = args.data.map(|d| d.display().to_string());
        if let Some(data) = &data {
            all.extend(["--data", data]);
        }
        if let Some(token) = args.token {
            all.extend(["--token", token]);
        }
        Process::spawn(&all, log, &[])
    }

    /// `coordinator worker --log-format json --config CONFIG`, logging at `debug` for the coordinator's own lines.
    pub fn worker(config: &Path, log: &Path) -> Process {
        let config = config.display().to_string();
        let args = ["worker", "--log-format", "json", "--config", &config];
        Process::spawn(&args, log, &[("RUST_LOG", "info,coordinator=debug")])
    }

    /// Sends `kill -NAME` to the process.
    pub fn signal(&self, name: &str) {
        let sent = Command::new("kill").args([&format!("-{name}"), &self.child.id().to_string()]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{name}");
    }

    /// SIGKILL, and waits for the process to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits (polling) until the process exits.
    pub async fn exited(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(started.elapsed() < GUARD, "the process did not exit:\n{}", read(&self.log));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The `serving` line of a `serve` or `dev` process's JSON log. The listener
    /// answers `/readyz` a moment before that line is written, so it is waited for.
    pub async fn serving(&self) -> Value {
        let started = Instant::now();
        loop {
            if let Some(line) = json_lines(&self.log).into_iter().find(|l| l["message"] == "serving") {
                return line;
            }
            assert!(started.elapsed() < GUARD, "no serving line:\n{}", read(&self.log));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `coordinator serve` on `spec` written into `dir` (its database migrated
/// first, by `coordinator migrate`), logging to `dir/LOG`, ready.
pub async fn served(spec: &DeploymentSpec, dir: &Path, log: &str) -> Process {
    let runtime = spec.write(dir);
    migrate(&runtime);
    let serve = Process::serve(&runtime, &dir.join(log));
    ready(&spec.url(), &serve.log).await;
    serve
}

/// `coordinator serve` on each of `runtimes` (after migrating the database
/// of the first), logging to `dir/p{i}.log`, each ready at its URL of `urls`.
pub async fn serve_each(runtimes: &[PathBuf], urls: &[String], dir: &Path) -> Vec<Process> {
    migrate(&runtimes[0]);
    let mut processes = Vec::new();
    for (i, (runtime, url)) in runtimes.iter().zip(urls).enumerate() {
        let process = Process::serve(runtime, &dir.join(format!("p{i}.log")));
        ready(url, &process.log).await;
        processes.push(process);
    }
    processes
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

/// Waits until `url/readyz` answers 200; panics with `log` after [`GUARD`].
pub async fn ready(url: &str, log: &Path) {
    let client = reqwest::Client::new();
    let started = Instant::now();
    loop {
        if let Ok(r) = client.get(format!("{url}/readyz")).send().await
            && r.status().is_success()
        {
            return;
        }
        assert!(started.elapsed() < GUARD, "{url} did not become ready:\n{}", read(log));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A file's text ("" when unreadable).
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The JSON objects of a JSON-lines log.
pub fn json_lines(path: &Path) -> Vec<Value> {
    read(path).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The log's JSON lines once one of them satisfies `found`; panics with the
/// log after [`GUARD`]. The service writes its log off the request's path,
/// so a line may follow the response it belongs to.
pub async fn log_until(path: &Path, what: &str, found: impl Fn(&Value) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let lines = json_lines(path);
        if lines.iter().any(&found) {
            return lines;
        }
        assert!(started.elapsed() < GUARD, "{what} never appeared in the log:\n{}", read(path));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
