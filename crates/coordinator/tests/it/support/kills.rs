//! Runs carried through `serve` processes killed and started again (the
//! crash and chaos tests): a deterministic schedule of where the kills land,
//! admissions sent again until a process answers, reads from whichever
//! process answers, and a run in `attention` settled as an operator would.

use std::time::Duration;

use serde_json::Value;

use super::admission;

/// A small deterministic generator (xorshift), so a failing schedule can be replayed.
pub struct Schedule(pub u64);

impl Schedule {
    /// The next number below `below`.
    pub fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }

    /// The next index below `below`.
    pub fn pick(&mut self, below: usize) -> usize {
        usize::try_from(self.next(u64::try_from(below).unwrap_or(1))).unwrap_or(0)
    }
}

/// Admits the sample input under `key` through one of `urls`, then the next,
/// until one answers; the same key always gives the same run.
pub async fn admit_through(client: reqwest::Client, urls: Vec<String>, revision: String, key: String) -> String {
    let body = admission(&revision, &key);
    for url in urls.iter().cycle() {
        if let Ok(r) = client.post(format!("{url}/v1/runs")).json(&body).send().await {
            let status = r.status().as_u16();
            let answer: Value = r.json().await.unwrap_or(Value::Null);
            if matches!(status, 200 | 201) {
                return answer["runId"].as_str().unwrap_or_else(|| panic!("no runId: {answer}")).to_owned();
            }
            assert!(status >= 500, "admission {key} refused: {status} {answer}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    unreachable!("a cycle of URLs never ends")
}

/// `GET path` from whichever of `urls` answers it with success.
pub async fn get_any(client: &reqwest::Client, urls: &[String], path: &str) -> Option<Value> {
    for url in urls {
        if let Ok(r) = client.get(format!("{url}{path}")).send().await
            && r.status().is_success()
        {
            return r.json().await.ok();
        }
    }
    None
}

/// Settles a run in `attention` as an operator would, from its inspection:
/// `reconcile` where the operation has a receipt and none was looked up yet;
/// `retry-same` when there is no receipt, or the receipt did not settle it
/// (a process killed after claiming an attempt but before sending it leaves a
/// receipt `not-found`: nothing proves the product did not act, so the saved
/// command is resent with its original key). Whether a command was sent.
pub async fn settle(client: &reqwest::Client, urls: &[String], run: &str) -> bool {
    let Some(view) = get_any(client, urls, &format!("/v1/runs/{run}/inspection")).await else { return false };
    let Some(step) = view["attention"]["step"].as_str() else { return false };
    let Some(record) = view["steps"].as_array().and_then(|s| s.iter().find(|s| s["step"] == step)) else {
        return false;
    };
    let offers = |action: &str| record["recoveryActions"].as_array().is_some_and(|a| a.iter().any(|x| x == action));
    let looked_up = !record["call"]["lastReceipt"].is_null();
    let command = if offers("reconcile") && !looked_up {
        "reconcile"
    } else if offers("retry-same") {
        "retry-same"
    } else {
        return false;
    };
    for url in urls {
        if client.post(format!("{url}/v1/runs/{run}/steps/{step}/{command}")).send().await.is_ok() {
            return true;
        }
    }
    false
}
