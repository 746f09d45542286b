//! The recovery drills' common steps: runs of the flagship admitted and
//! carried up to their review wait, and the operator's release of the
//! restore hold.

use std::time::Duration;

use coordinator::process::serve::Service;

use super::{admit, authorized_client, inspection_until};

/// Admits one run of reviewed-notice per key and waits until each waits for its review.
pub async fn admit_to_review(service: &Service, keys: &[&str]) -> Vec<String> {
    let url = service.url();
    let mut runs = Vec::new();
    for key in keys {
        runs.push(admit(&url, &service.revision, key).await);
    }
    for run in &runs {
        inspection_until(&url, run, "the review wait", |v| v["currentStep"] == "await-review").await;
    }
    runs
}

/// The operator's release of the restore hold (`DELETE /v1/restore-hold`), answered `200`.
pub async fn release(url: &str) {
    let response = authorized_client(Duration::from_secs(60))
        .delete(format!("{url}/v1/restore-hold"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.status().as_u16(), 200);
}
