//! The flagship example end to end under `coordinator dev`: admission, the
//! worker calling the simulators, the casework auto-decision and its
//! notification, the observation, the notice — `finished` with `notice-sent`,
//! with exactly one effect per idempotency key. Also: nothing of the input is
//! stored in clear.

use serde_json::Value;

use crate::support::{
    admission, contains, files_starting, flagship, on_runtime, post, sample_input, settled, start_project, tempdir,
};

fn effects_of(effects: &[coordinator_sim::EffectCount], operation: &str) -> Vec<(Option<String>, u64)> {
    effects.iter().filter(|e| e.operation == operation).map(|e| (e.idempotency_key.clone(), e.effects)).collect()
}

#[test]
fn reviewed_notice_runs_to_notice_sent_with_one_effect_per_key() {
    on_runtime(async {
        let data = tempdir();
        let dev = start_project(flagship(), Some(data.path().to_path_buf())).await;
        let body = admission(&dev.revision, "e2e-1");
        let (status, admitted) = post(&format!("{}/v1/runs", dev.url()), &body).await;
        assert_eq!(status, 201, "{admitted}");
        let run_id = admitted["runId"].as_str().unwrap_or_else(|| panic!("no runId: {admitted}")).to_owned();

        let view = settled(&dev.url(), &run_id).await;
        assert_eq!(view["state"], "finished", "{view}");
        assert_eq!(view["outcome"], "notice-sent", "{view}");
        assert_eq!(view["failure"], Value::Null);
        assert!(view.get("input").is_none(), "the input is never shown");

        let review_key = format!("{run_id}:request-review");
        let notice_key = format!("{run_id}:send-notice");
        assert_eq!(effects_of(&dev.sims.casework.effects(), "submit-review-request/v1"), vec![(Some(review_key), 1)]);
        assert_eq!(effects_of(&dev.sims.messaging.effects(), "submit-message/v1"), vec![(Some(notice_key), 1)]);

        // The same admission again is the same run.
        let (status, again) = post(&format!("{}/v1/runs", dev.url()), &body).await;
        assert_eq!((status, again["runId"].as_str()), (200, Some(run_id.as_str())));

        // Nothing of the input is stored in clear (database, WAL, shared memory).
        let recipient = sample_input()["recipient"]["id"].as_str().unwrap_or_default().to_owned();
        assert!(!recipient.is_empty());
        let store = dev.engine.store().clone();
        drop(dev);
        store.close().await;
        let files = files_starting(data.path(), "");
        assert!(files.iter().any(|(_, bytes)| !bytes.is_empty()), "the database was read");
        for (path, bytes) in files {
            assert!(!contains(&bytes, &recipient), "{} contains the recipient id in clear", path.display());
        }
    });
}
