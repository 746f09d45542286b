//! Credentials in the running service
//! (docs/reference/protection.md#fresh-credentials-per-attempt): a fresh token for every
//! request to a product — one token request per operation attempt and per
//! observation — and no token in the database files or the service's output.
//! `coordinator serve` runs as its own process, its output captured in a file.

use std::time::Duration;

use crate::support::deploy::{deployment, eager_flagship, package_of, sqlite_url};
use crate::support::process;
use crate::support::{admit, contains, files_starting, inspection_until, on_runtime, tempdir};

#[test]
fn every_request_gets_a_fresh_token_and_no_token_is_kept_or_printed() {
    on_runtime(async {
        let dir = tempdir();
        let (mut spec, sims) = deployment(&sqlite_url(dir.path()), Some(Duration::from_millis(1500)), false).await;
        spec.project = eager_flagship(dir.path());
        let serve = process::served(&spec, dir.path(), "serve.log").await;
        let (url, log) = (spec.url(), serve.log.clone());

        let run = admit(&url, &package_of(&spec.project).revision, "t").await;
        let view = inspection_until(&url, &run, "finished", |v| v["state"] == "finished").await;

        // One token per request: each call attempt and each observation of the review.
        let steps = view["steps"].as_array().cloned().unwrap_or_default();
        let attempts: u64 = steps.iter().filter_map(|s| s["call"]["attempts"].as_u64()).sum();
        let observations: u64 = steps.iter().filter_map(|s| s["wait"]["observations"].as_u64()).sum();
        assert_eq!((attempts, observations > 0), (3, true), "{view}");
        assert_eq!(sims.sims.tokens.issued(), attempts + observations, "one token request per product request");

        // No token in the database files (the WAL included) or in anything the service printed.
        let tokens = sims.sims.tokens.live_tokens();
        assert_eq!(tokens.len() as u64, attempts + observations);
        let mut places = files_starting(dir.path(), "c.db");
        assert!(!places.is_empty(), "the database files");
        places.push((log.clone(), process::read(&log).into_bytes()));
        for (place, bytes) in places {
            for token in &tokens {
                assert!(!contains(&bytes, token), "a token is in {}", place.display());
            }
        }
    });
}
