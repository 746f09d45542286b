//! PostgreSQL clusters of a test's own (the fence's drills),
//! made with the server's tools the way an operator makes them: `initdb`,
//! `pg_ctl`, `pg_basebackup` (for a backup, or a streaming standby with `-R`).
//! The tools refuse to run as root, so as root they run as `postgres`. Every
//! cluster listens on 127.0.0.1 on a port of its own, with its socket in its
//! own directory; dropping a [`Clusters`] stops what it started, at once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::deploy::free_port;

/// Where the server's programs are (Debian: `/usr/lib/postgresql/<version>/bin`, the newest).
fn bin(tool: &str) -> PathBuf {
    let versions = std::fs::read_dir("/usr/lib/postgresql").unwrap_or_else(|e| panic!("/usr/lib/postgresql: {e}"));
    let newest = versions
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str().and_then(|v| v.parse::<u32>().ok()))
        .max()
        .unwrap_or_else(|| panic!("no PostgreSQL server under /usr/lib/postgresql"));
    PathBuf::from(format!("/usr/lib/postgresql/{newest}/bin/{tool}"))
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// A server tool's command, run as `postgres` when root.
fn command(name: &str) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin(name));
        c
    } else {
        Command::new(bin(name))
    }
}

/// Runs a server tool; panics with its output when it fails.
fn tool(name: &str, args: &[&str]) -> String {
    let out = command(name).args(args).output().unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The clusters of one test, under one directory owned by `postgres`.
pub struct Clusters {
    root: tempfile::TempDir,
    started: std::sync::Mutex<Vec<PathBuf>>,
}

/// One cluster's data directory and port.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The data directory.
    pub data: PathBuf,
    /// The port it listens on.
    pub port: u16,
}

impl Clusters {
    /// A directory for clusters.
    pub fn new() -> Clusters {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        if is_root() {
            let chown = Command::new("chown").arg("postgres:").arg(root.path()).status();
            assert!(chown.is_ok_and(|s| s.success()), "chown postgres {}", root.path().display());
        }
        Clusters { root, started: std::sync::Mutex::new(Vec::new()) }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// A new cluster `name` (trust authentication, streaming replication
    /// allowed), started, with an empty database `coordinator`.
    pub fn primary(&self, name: &str) -> Cluster {
        let data = self.path(name);
        let data_arg = data.display().to_string();
        tool("initdb", &["-D", &data_arg, "-A", "trust", "-U", "postgres", "--no-sync", "--no-instructions"]);
        let cluster = Cluster { data, port: free_port() };
        let settings = format!(
            "listen_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nshared_buffers = 32MB\n\
             max_connections = 60\nwal_keep_size = 256MB\nfsync = off\n",
            self.root.path().display()
        );
        cluster.configure(&settings);
        self.start(&cluster);
        cluster.sql("CREATE DATABASE coordinator");
        cluster
    }

    /// A base backup of `of` into `name` (`pg_basebackup -X stream -c fast`),
    /// as a standby of it (`-R`) when `standby`. Not started.
    pub fn base_backup(&self, of: &Cluster, name: &str, standby: bool) -> Cluster {
        let data = self.path(name);
        let (data_arg, port) = (data.display().to_string(), of.port.to_string());
        let mut args =
            vec!["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-D", &data_arg, "-X", "stream", "-c", "fast"];
        if standby {
            args.push("-R");
        }
        tool("pg_basebackup", &args);
        Cluster { data, port: of.port }
    }

    /// Starts `cluster` on its port (waits until it accepts connections).
    pub fn start(&self, cluster: &Cluster) {
        let (data, log) = (cluster.data.display().to_string(), format!("{}.log", cluster.data.display()));
        let port = format!("-p {}", cluster.port);
        tool("pg_ctl", &["-D", &data, "-l", &log, "-o", &port, "-w", "-t", "120", "start"]);
        self.started.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(cluster.data.clone());
    }

    /// Stops `cluster` (`mode`: `fast` or `immediate`, as a crash).
    pub fn stop(&self, cluster: &Cluster, mode: &str) {
        stop(&cluster.data, mode);
    }
}

fn stop(data: &Path, mode: &str) {
    let data = data.display().to_string();
    tool("pg_ctl", &["-D", &data, "-m", mode, "-w", "-t", "120", "stop"]);
}

impl Drop for Clusters {
    fn drop(&mut self) {
        let started = std::mem::take(&mut *self.started.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for data in started {
            // A cluster already stopped answers with an error: nothing more to do.
            let stopped =
                command("pg_ctl").args(["-D", &data.display().to_string(), "-m", "immediate", "-w", "stop"]).output();
            drop(stopped);
        }
    }
}

impl Cluster {
    /// Appends settings to its `postgresql.conf` (a later line wins).
    pub fn configure(&self, settings: &str) {
        use std::io::Write as _;
        let conf = self.data.join("postgresql.conf");
        let mut file = std::fs::OpenOptions::new().append(true).open(&conf).unwrap_or_else(|e| panic!("{e}"));
        file.write_all(format!("\n{settings}\n").as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    }

    /// The URL of its database `coordinator`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/coordinator", self.port)
    }

    /// Runs one statement (`psql -Atc`) and returns what it printed, trimmed.
    pub fn sql(&self, statement: &str) -> String {
        let port = self.port.to_string();
        tool("psql", &["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-d", "postgres", "-Atc", statement])
            .trim()
            .to_owned()
    }

    /// Promotes a standby (waits until it is a primary).
    pub fn promote(&self) {
        tool("pg_ctl", &["-D", &self.data.display().to_string(), "-w", "-t", "120", "promote"]);
    }

    /// Waits until `standby` has replayed everything this primary has flushed.
    pub async fn wait_replayed(&self, standby: &Cluster) {
        let flushed = self.sql("SELECT pg_current_wal_flush_lsn()");
        for _ in 0..600 {
            let caught_up = standby.sql(&format!("SELECT pg_last_wal_replay_lsn() >= '{flushed}'::pg_lsn"));
            if caught_up == "t" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the standby never replayed up to {flushed}");
    }

    /// Cuts a standby off its primary (`primary_conninfo` emptied and
    /// reloaded): from now on it lags behind every commit.
    pub async fn detach(&self) {
        self.sql("ALTER SYSTEM SET primary_conninfo = ''");
        self.sql("SELECT pg_reload_conf()");
        for _ in 0..600 {
            if self.sql("SELECT count(*) FROM pg_stat_wal_receiver") == "0" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the standby's WAL receiver never stopped");
    }
}
