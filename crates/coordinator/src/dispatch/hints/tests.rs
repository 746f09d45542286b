//! The hints against a real `redis-server` of the test's own (a free port,
//! no persistence), so killing or flushing it touches nobody else: another
//! process's hint wakes the worker and stays pending until the round that
//! follows; a group gone with `FLUSHALL` is created again and hints flow on;
//! this process's own hints wake nothing; a lane is read only while a poll
//! waits; Redis killed is noticed (the short interval again, hints dropped and
//! counted) and a restarted one is taken up again.

use std::time::{Duration, Instant};

use coordinator_products::Secret;
use coordinator_testdb::redis::RedisServer;
use redis::aio::MultiplexedConnection;

use super::stream::{GROUP, Lane, xadd};
use super::*;

/// A connection of the test's own to `server`, once it answers.
async fn connection(server: &RedisServer) -> MultiplexedConnection {
    let client = redis::Client::open(server.url()).unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..100 {
        if let Ok(mut con) = client.get_multiplexed_async_connection().await
            && redis::cmd("PING").query_async::<String>(&mut con).await.is_ok()
        {
            return con;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("redis-server on port {} did not answer", server.port)
}

fn start(server: &RedisServer, owner: &str, remote: &[String], in_process: bool) -> Hints {
    Hints::start(&Secret::new(server.url()), owner, remote, in_process).unwrap_or_else(|e| panic!("{e}"))
}

/// Waits until `done` holds, at most `limit`.
async fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done()
}

fn health(hints: &Hints) -> &Health {
    hints.live.as_ref().map(|l| l.health.as_ref()).unwrap_or_else(|| panic!("hints are off"))
}

async fn pending(con: &mut MultiplexedConnection, lane: &Lane) -> i64 {
    let summary: redis::Value =
        redis::cmd("XPENDING").arg(lane.key()).arg(GROUP).query_async(con).await.unwrap_or_else(|e| panic!("{e}"));
    match summary {
        redis::Value::Array(parts) => match parts.first() {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("XPENDING: {other:?}"),
        },
        other => panic!("XPENDING: {other:?}"),
    }
}

async fn add(con: &mut MultiplexedConnection, lane: &Lane, from: &str) {
    xadd(lane, from, 1).query_async::<String>(con).await.unwrap_or_else(|e| panic!("XADD: {e}"));
}

#[tokio::test]
async fn another_process_hint_wakes_the_worker_until_a_flushall_and_again_after_it() {
    let server = RedisServer::start();
    let mut con = connection(&server).await;
    let hints = start(&server, "coordinator-b", &[], true);
    assert_eq!(hints.interval(Duration::from_millis(250)), Duration::from_millis(250), "not up yet: short");
    assert!(eventually(Duration::from_secs(5), || health(&hints).is_up()).await, "never reached Redis");
    assert_eq!(hints.interval(Duration::from_millis(250)), SWEEP, "up: the long sweep");
    let mut woken = hints.in_process();

    add(&mut con, &Lane::InProcess, "coordinator-a").await;
    tokio::time::timeout(Duration::from_secs(3), woken.next()).await.unwrap_or_else(|_| panic!("not woken"));
    assert_eq!(pending(&mut con, &Lane::InProcess).await, 1, "pending until the round that follows");
    let round = hints.round_begins();
    hints.round_ended(round);
    let mut acked = false;
    for _ in 0..100 {
        if pending(&mut con, &Lane::InProcess).await == 0 {
            acked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(acked, "acknowledged after the round");

    // Redis forgets everything: the reader finds NOGROUP, creates the group again and goes on.
    redis::cmd("FLUSHALL").query_async::<()>(&mut con).await.unwrap_or_else(|e| panic!("{e}"));
    let mut woke_again = false;
    for _ in 0..30 {
        add(&mut con, &Lane::InProcess, "coordinator-a").await;
        if tokio::time::timeout(Duration::from_millis(500), woken.next()).await.is_ok() {
            woke_again = true;
            break;
        }
    }
    assert!(woke_again, "no wake-up after FLUSHALL");
    assert!(health(&hints).groups_recreated.load(Ordering::Relaxed) >= 1, "NOGROUP was not what it recovered from");
    assert!(health(&hints).woke_in_process.load(Ordering::Relaxed) >= 2);
    let metrics = Metrics::new();
    hints.record(&metrics);
    let text = metrics.render();
    assert!(text.contains("coordinator_dispatch_hints_redis_up 1"), "{text}");
    assert!(text.contains("coordinator_dispatch_hint_wakeups_total{path=\"in-process\"}"), "{text}");
}

#[tokio::test]
async fn own_hints_wake_nothing_and_a_lane_is_read_only_while_a_poll_waits() {
    let server = RedisServer::start();
    let mut con = connection(&server).await;
    let hints = start(&server, "coordinator-b", &["registry".to_owned()], true);
    assert!(eventually(Duration::from_secs(5), || health(&hints).is_up()).await, "never reached Redis");
    let mut woken = hints.in_process();
    add(&mut con, &Lane::InProcess, "coordinator-b").await;
    assert!(tokio::time::timeout(Duration::from_millis(1500), woken.next()).await.is_err(), "its own hint woke it");
    assert_eq!(pending(&mut con, &Lane::InProcess).await, 0, "acknowledged at once");

    // A drained worker's process reads no more: another process's hint is left for the others.
    hints.worker_stopped();
    tokio::time::sleep(reader::BLOCK * 2).await;
    let id: String =
        xadd(&Lane::InProcess, "coordinator-a", 1).query_async(&mut con).await.unwrap_or_else(|e| panic!("XADD: {e}"));
    assert!(tokio::time::timeout(reader::BLOCK * 2, woken.next()).await.is_err(), "woken after the drain");
    let groups: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(Lane::InProcess.key())
        .query_async(&mut con)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let delivered = groups
        .first()
        .and_then(|g| g.get("last-delivered-id").cloned())
        .and_then(|v| redis::from_redis_value::<String>(v).ok());
    assert_ne!(delivered.as_deref(), Some(id.as_str()), "the hint was taken after the drain");

    let lane = Lane::Remote("registry".into());
    add(&mut con, &lane, "coordinator-a").await;
    tokio::time::sleep(reader::BLOCK * 2).await;
    assert_eq!(pending(&mut con, &lane).await, 0, "no poll waits: the lane's hint is left for others");
    let mut polling = hints.polling(&["registry".to_owned()]);
    tokio::time::timeout(Duration::from_secs(4), polling.next()).await.unwrap_or_else(|_| panic!("poll not woken"));
    polling.offer(async {}).await;
    assert!(health(&hints).woke_remote.load(Ordering::Relaxed) >= 1);
}

#[tokio::test]
async fn redis_killed_is_noticed_counted_and_taken_up_again_once_back() {
    let mut server = RedisServer::start();
    let _ = connection(&server).await;
    let hints = start(&server, "coordinator-b", &[], true);
    assert!(eventually(Duration::from_secs(5), || health(&hints).is_up()).await, "never reached Redis");
    let mut woken = hints.in_process();
    server.kill();
    assert!(eventually(Duration::from_secs(5), || !health(&hints).is_up()).await, "the loss went unnoticed");
    assert_eq!(hints.interval(Duration::from_millis(250)), Duration::from_millis(250), "back to the short interval");
    tokio::time::timeout(Duration::from_millis(100), woken.next()).await.unwrap_or_else(|_| panic!("loss not told"));
    let live = hints.live.as_ref().unwrap_or_else(|| panic!("off"));
    for _ in 0..5 {
        live.announcer.announce(vec![Lane::InProcess]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        eventually(Duration::from_secs(5), || health(&hints).dropped_unavailable.load(Ordering::Relaxed) > 0).await,
        "hints to a dead Redis are dropped and counted"
    );

    // Back, empty: every part reaches it again and another process's hint wakes the worker.
    let server = RedisServer::start_on(server.port);
    let mut con = connection(&server).await;
    assert!(eventually(Duration::from_secs(15), || health(&hints).is_up()).await, "not taken up again");
    assert!(
        eventually(Duration::from_secs(5), || health(&hints).groups_recreated.load(Ordering::Relaxed) >= 1).await,
        "the group the restart lost was not counted as created again"
    );
    let mut woke = false;
    for _ in 0..30 {
        add(&mut con, &Lane::InProcess, "coordinator-a").await;
        if tokio::time::timeout(Duration::from_millis(500), woken.next()).await.is_ok() {
            woke = true;
            break;
        }
    }
    assert!(woke, "no wake-up after the restart");
    live.announcer.announce(vec![Lane::InProcess]);
    assert!(eventually(Duration::from_secs(5), || health(&hints).sent.load(Ordering::Relaxed) > 0).await, "not sent");
}
