//! A PostgreSQL URL naming several hosts, as libpq reads one:
//! `postgres://user@h1:5432,h2:5433/db?target_session_attrs=read-write`. The
//! hosts are tried in order; with `read-write` (or `primary`) only one that
//! accepts writes will do, with `any` (the default) the first that answers.
//!
//! sqlx connects a pool to one host, so the pool is pointed at the host found
//! ([`Hosts::pick`]) and pointed again by [`follow`] once that host no longer
//! does (a failover: the old primary gone, or back as a standby): every
//! [`CHECK_EVERY`], and at once after a handle saw the server hang up.
//! Connections to the old host are dropped as they fail. Nothing here
//! decides whether a promoted server lost commits: the fence does.

use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};

use crate::StoreError;
use crate::db::hangup::Hangups;

/// How often [`follow`] checks that the pool's host still does.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long one host may take to answer a check.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// Which server will do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted {
    /// The first that answers.
    Any,
    /// One that accepts writes (`read-write`, `primary`).
    Writable,
}

/// The hosts of a URL, in order, each as the options of a URL naming it alone.
#[derive(Debug)]
pub(crate) struct Hosts {
    hosts: Vec<(String, PgConnectOptions)>,
    wanted: Wanted,
    /// The pools to point at the host found: the store's, and the listener's.
    pools: Mutex<Vec<PgPool>>,
}

/// `url` split at its first `/`, `?` or `#` after the authority: (authority, rest).
fn authority(rest: &str) -> (&str, &str) {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    rest.split_at(end)
}

impl Hosts {
    /// The hosts of `url` when it names more than one (`None`: one host,
    /// connected to as sqlx does). Errors never quote the URL (it may carry a password).
    pub(crate) fn parse(url: &str) -> Result<Option<Hosts>, StoreError> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| StoreError::BadUrl("no `://`".to_owned()))?;
        let (userinfo, after) = match rest.split_once('@') {
            Some((user, after)) if !user.contains('/') => (Some(user), after),
            _ => (None, rest),
        };
        let (hosts, tail) = authority(after);
        if !hosts.contains(',') {
            return Ok(None);
        }
        let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
        let mut wanted = Wanted::Any;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("target_session_attrs", value)) => {
                    wanted = match value {
                        "any" => Wanted::Any,
                        "read-write" | "primary" => Wanted::Writable,
                        _ => {
                            return Err(StoreError::BadUrl(
                                "target_session_attrs must be any, read-write or primary".to_owned(),
                            ));
                        }
                    };
                }
                _ => kept.push(pair),
            }
        }
        let query = if kept.is_empty() { String::new() } else { format!("?{}", kept.join("&")) };
        let user = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
        let mut parsed = Vec::new();
        for host in hosts.split(',') {
            if host.is_empty() {
                return Err(StoreError::BadUrl("a host of the list is empty".to_owned()));
            }
            let options = PgConnectOptions::from_str(&format!("{scheme}://{user}{host}{path}{query}"))
                .map_err(|_| StoreError::BadUrl(format!("host `{host}` does not make a PostgreSQL URL")))?;
            parsed.push((host.to_owned(), options));
        }
        Ok(Some(Hosts { hosts: parsed, wanted, pools: Mutex::new(Vec::new()) }))
    }

    /// Whether the server at `options` will do.
    async fn will_do(&self, options: &PgConnectOptions) -> bool {
        let checked = async {
            let mut conn = PgConnection::connect_with(options).await.ok()?;
            let fine = match self.wanted {
                Wanted::Any => true,
                Wanted::Writable => {
                    let read_only: Option<String> =
                        sqlx::query_scalar("SHOW transaction_read_only").fetch_one(&mut conn).await.ok();
                    read_only.as_deref() == Some("off")
                }
            };
            conn.close().await.ok();
            Some(fine)
        };
        matches!(tokio::time::timeout(ANSWER_WITHIN, checked).await, Ok(Some(true)))
    }

    /// The first host that will do, and its options.
    pub(crate) async fn pick(&self) -> Result<(String, PgConnectOptions), StoreError> {
        for (host, options) in &self.hosts {
            if self.will_do(options).await {
                return Ok((host.clone(), options.clone()));
            }
        }
        let wanted = if self.wanted == Wanted::Writable { "accepts writes" } else { "answers" };
        Err(StoreError::Unavailable(format!("no host of the database URL {wanted}")))
    }

    /// Points `pool` at the host found from now on, with the others.
    pub(crate) fn point(&self, pool: &PgPool) {
        self.pools.lock().unwrap_or_else(PoisonError::into_inner).push(pool.clone());
    }
}

/// Keeps [`follow`]'s task going: it ends once the last clone is dropped
/// (the store with it).
#[derive(Debug, Clone)]
pub(crate) struct Following {
    _alive: tokio::sync::mpsc::Sender<()>,
}

/// Keeps the pools pointed at a host that will do, starting from `current`,
/// while the returned [`Following`] lives.
pub(crate) fn follow(hosts: Arc<Hosts>, hangups: Arc<Hangups>, mut current: String) -> Following {
    let (alive, mut watched) = tokio::sync::mpsc::channel::<()>(1);
    tokio::spawn(async move {
        let mut seen = hangups.last_seen();
        loop {
            if matches!(watched.try_recv(), Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)) {
                return;
            }
            let mut waited = Duration::ZERO;
            while waited < CHECK_EVERY && hangups.last_seen() == seen {
                tokio::time::sleep(Duration::from_millis(100)).await;
                waited += Duration::from_millis(100);
            }
            seen = hangups.last_seen();
            let still = hosts.hosts.iter().find(|(h, _)| *h == current).map(|(_, o)| o.clone());
            if let Some(options) = still
                && hosts.will_do(&options).await
            {
                continue;
            }
            let Ok((host, options)) = hosts.pick().await else { continue };
            if host != current {
                tracing::warn!(from = %current, to = %host, "the database's host changed: new connections go to the new one");
                for pool in hosts.pools.lock().unwrap_or_else(PoisonError::into_inner).iter() {
                    pool.set_connect_options(options.clone());
                }
                hangups.seen();
                current = host;
            }
        }
    });
    Following { _alive: alive }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_is_left_to_sqlx_and_several_are_split_with_the_rest_kept() {
        assert!(matches!(Hosts::parse("postgres://u:p@h1:5432/db"), Ok(None)));
        let Ok(Some(hosts)) =
            Hosts::parse("postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write&application_name=c")
        else {
            panic!("two hosts")
        };
        assert_eq!(hosts.wanted, Wanted::Writable);
        let names: Vec<(&str, String, u16)> =
            hosts.hosts.iter().map(|(h, o)| (h.as_str(), o.get_host().to_owned(), o.get_port())).collect();
        assert_eq!(names, [("h1:5432", "h1".to_owned(), 5432), ("h2:5433", "h2".to_owned(), 5433)]);
        assert_eq!(hosts.hosts[1].1.get_database(), Some("db"));
        assert_eq!(hosts.hosts[1].1.get_application_name(), Some("c"));
    }

    #[test]
    fn what_cannot_be_used_is_named_without_the_url() {
        let refused = |url: &str| Hosts::parse(url).err().map(|e| e.to_string()).unwrap_or_default();
        let attrs = refused("postgres://u:secret@h1,h2/db?target_session_attrs=standby");
        assert!(attrs.contains("read-write") && !attrs.contains("secret"), "{attrs}");
        let empty = refused("postgres://u:secret@h1,,h2/db");
        assert!(empty.contains("empty") && !empty.contains("secret"), "{empty}");
        assert!(matches!(Hosts::parse("postgres://h1,h2/db"), Ok(Some(h)) if h.wanted == Wanted::Any));
    }
}
