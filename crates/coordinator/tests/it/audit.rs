//! `GET /v1/audit` on the dev stack: the journal of a finished flagship run
//! holds none of the input's values; admissions, operator commands and hold
//! changes record the authenticated subject, the coordinator's own entries
//! none; the package activation at start is a deployment-level entry; pages
//! chain into a journal that verifies; and the query's bounds. The sealer
//! chains committed entries in the background; in recovery-only mode it does
//! not run, and `GET /v1/audit` seals what is pending before it reads.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator::Engine;
use coordinator::auth::access::Access;
use coordinator::process::audit_chain;
use coordinator_core::audit::{self, Entry, Head};
use coordinator_core::machine::Settings;
use coordinator_seal::Keyring;
use coordinator_store::Store;
use serde_json::json;

use crate::support::deploy::sqlite_url;
use crate::support::{
    TOKEN, admit, authorized_client, get, get_as, on_runtime, post, run_until, sample_input, start, strings_of,
    tempdir, whole_journal,
};

/// The dev token's subject.
const OPERATOR: &str = "dev-operator";

/// The whole journal (or one run's), 7 entries a page, and the last page's head.
async fn journal(url: &str, run: Option<&str>) -> (Vec<Entry>, Head) {
    let filter = run.map(|r| format!("&run={r}")).unwrap_or_default();
    whole_journal(7, |page| {
        let url = format!("{url}{page}{filter}");
        async move {
            let (status, page) = get(&url).await;
            assert_eq!(status, 200, "{page}");
            page
        }
    })
    .await
}

#[test]
fn the_journal_is_chained_attributed_and_free_of_payloads() {
    on_runtime(async {
        let dev = start().await;
        let url = dev.url();
        let run = admit(&url, &dev.revision, "audit-1").await;
        run_until(&url, &run, "finished", |view| {
            assert!(view["state"] == "running" || view["state"] == "finished", "{view}");
            view["state"] == "finished"
        })
        .await;
        let cancelled = admit(&url, &dev.revision, "audit-2").await;
        let (status, answer) = post(&format!("{url}/v1/runs/{cancelled}/cancel"), &json!({})).await;
        assert_eq!(status, 202, "{answer}");
        // An array is not an object, though serde would read one as a struct of its fields.
        for unusable in
            [json!({"reason": "  "}), json!({"why": "x"}), json!("restored"), json!([]), json!(["restored"])]
        {
            let (status, answer) = post(&format!("{url}/v1/restore-hold"), &unusable).await;
            assert_eq!((status, answer["code"].as_str()), (400, Some("request.invalid")), "{unusable}: {answer}");
        }
        let (status, answer) = post(&format!("{url}/v1/restore-hold"), &json!({"reason": "restored at 02:00"})).await;
        assert_eq!((status, answer["reason"].as_str()), (200, Some("restored at 02:00")), "{answer}");
        let client = authorized_client(Duration::from_secs(30));
        let released = client.delete(format!("{url}/v1/restore-hold")).send().await;
        assert_eq!(released.map(|r| r.status().as_u16()).ok(), Some(200));

        // The finished run's journal: no value of the input anywhere in it.
        let (entries, _) = journal(&url, Some(&run)).await;
        assert!(entries.iter().any(|e| e.kind == "classification") && entries.iter().any(|e| e.kind == "dispatch"));
        let text = serde_json::to_string(&entries).unwrap_or_default();
        let values = strings_of(&sample_input());
        assert!(!values.is_empty());
        for value in values {
            assert!(!text.contains(&value), "the journal contains the input value `{value}`: {text}");
        }
        let admission = entries.first().map(|e| (e.kind.as_str(), e.actor.as_deref()));
        assert_eq!(admission, Some(("admission", Some(OPERATOR))), "the admitting subject");
        let worker = entries.iter().filter(|e| e.kind == "classification").collect::<Vec<_>>();
        assert!(worker.iter().all(|e| e.actor.is_none()), "the coordinator's own entries have no actor");

        // The whole journal verifies, page by page, and attributes the operator's actions.
        let (all, head) = journal(&url, None).await;
        let verified = audit::verify(&all, &head).unwrap_or_else(|e| panic!("the journal must verify: {e}"));
        assert_eq!(verified.checked, u64::try_from(all.len()).unwrap_or(0));
        let first = all.first().map(|e| (e.kind.as_str(), e.run_id.is_none(), e.actor.is_none()));
        assert_eq!(first, Some(("activation", true, true)), "dev's activation at start");
        let cancel = all.iter().find(|e| e.run_id.as_deref() == Some(&cancelled) && e.kind == "operator");
        assert_eq!(cancel.and_then(|e| e.actor.as_deref()), Some(OPERATOR), "{cancel:?}");
        let holds: Vec<_> = all.iter().filter(|e| e.run_id.is_none() && e.kind == "hold").collect();
        assert_eq!(holds.len(), 2, "placed and released: {holds:?}");
        assert!(holds.iter().all(|e| e.actor.as_deref() == Some(OPERATOR)));

        // Bounds of the query, and callers without the role.
        for query in ["limit=0", "limit=1001", "after=-1", "before=3"] {
            let (status, answer) = get(&format!("{url}/v1/audit?{query}")).await;
            assert_eq!((status, answer["code"].as_str()), (400, Some("request.invalid")), "{query}");
        }
        let (status, _) = get_as(&format!("{url}/v1/audit"), None).await;
        assert_eq!(status, 401);
        let (status, answer) = get(&format!("{url}/v1/audit?run=0199c8a0-0000-7000-8000-000000000000")).await;
        assert_eq!((status, answer["code"].as_str()), (404, Some("run.unknown")));
    });
}

#[test]
fn the_sealer_chains_entries_in_the_background() {
    on_runtime(async {
        let dev = start().await;
        let run = admit(&dev.url(), &dev.revision, "sealed-1").await;
        // Read the store directly (a pure read, which seals nothing): the sealer did it.
        let started = Instant::now();
        loop {
            let page = dev.engine.store().audit(Some(&run), 0, 1000).await.unwrap_or_else(|e| panic!("audit: {e}"));
            if page.entries.first().map(|e| e.kind.as_str()) == Some("admission") {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(5), "the admission is still not chained");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
fn recovery_only_seals_nothing_by_itself_but_a_read_seals_first() {
    on_runtime(async {
        let data = tempdir();
        let url = sqlite_url(data.path());
        let store = Store::connect(&url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        store.migrate().await.unwrap_or_else(|e| panic!("migrate: {e}"));
        store.place_hold(1_791_968_400_000, "ops", None).await.unwrap_or_else(|e| panic!("hold: {e}"));
        let keyring = Keyring::new("k1", [("k1".to_owned(), vec![7; 32])]).unwrap_or_else(|e| panic!("{e}"));
        let engine = Engine::new(store.clone(), keyring, HashMap::new(), Settings::default()).with_recovery_only(true);
        let engine = Arc::new(engine);

        // The recovery-only sealer returns at once; the entry stays pending.
        let returned = tokio::time::timeout(Duration::from_secs(5), audit_chain::run(Arc::clone(&engine))).await;
        assert!(returned.is_ok(), "the sealer must not run in recovery-only mode");
        let page = store.audit(None, 0, 10).await.unwrap_or_else(|e| panic!("audit: {e}"));
        assert_eq!((page.entries.len(), page.head.position), (0, 0), "still pending");

        // A reader gets it chained.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let router = coordinator::api::app(Arc::clone(&engine), Arc::new(Access::dev(TOKEN)));
        let server = tokio::spawn(async move { axum::serve(listener, router).await });
        let (entries, head) = journal(&format!("http://{addr}"), None).await;
        server.abort();
        assert_eq!(
            entries.iter().map(|e| (e.kind.as_str(), e.actor.as_deref())).collect::<Vec<_>>(),
            [("hold", Some("ops"))]
        );
        assert_eq!(audit::verify(&entries, &head).map(|v| v.checked), Ok(1));
        assert_eq!(store.seal_audit(10).await.unwrap_or_else(|e| panic!("seal: {e}")), 0, "nothing left pending");
    });
}
