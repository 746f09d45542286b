//! A `redis-server` of the test's own (Debian package `redis-server`, on
//! PATH) on a free loopback port, without persistence, so killing,
//! restarting or flushing it touches no other test and no developer's Redis.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A private `redis-server`, killed when dropped.
#[derive(Debug)]
pub struct RedisServer {
    /// Its port.
    pub port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one on a free port and waits until it answers.
    ///
    /// # Panics
    /// When no port is free, `redis-server` is not on PATH or does not
    /// answer: a test cannot go on without it.
    pub fn start() -> RedisServer {
        let port = crate::ports::free_port().unwrap_or_else(|e| panic!("no free loopback port: {e}"));
        RedisServer::start_on(port)
    }

    /// Starts one on `port` (a restart: empty, as without persistence) and
    /// waits until it answers.
    ///
    /// # Panics
    /// When `redis-server` is not on PATH or does not answer.
    pub fn start_on(port: u16) -> RedisServer {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("redis-server (Debian package redis-server) must be on PATH: {e}"));
        let server = RedisServer { port, child: Some(child) };
        for _ in 0..200 {
            if server.cli(&["PING"]).is_some_and(|reply| reply == "PONG") {
                return server;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("redis-server on port {port} did not answer");
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Runs a command with `redis-cli`; its reply, trimmed (`None` when it
    /// could not connect).
    pub fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli").args(["-h", "127.0.0.1", "-p", &self.port.to_string()]).args(args).output();
        let out = out.ok().filter(|o| o.status.success())?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (!text.starts_with("Could not connect")).then_some(text)
    }

    /// SIGKILL: gone at once, with everything it held.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
