//! A transition's log lines are told only after its transaction committed
//! (docs/internals/engine.md#one-event-one-transaction): an operator's cancel
//! whose transaction the database rolls back (a trigger refuses the run's
//! update) logs no transition line and changes nothing; the same cancel once
//! the database accepts it logs its lines.

use serde_json::{Value, json};

use crate::support::deploy::{deployment, package_of};
use crate::support::process::{self, log_until, read};
use crate::support::{admit, get, on_runtime, pg, post, tempdir};

async fn execute(url: &str, statement: &str) {
    let pool = sqlx::PgPool::connect(url).await.unwrap_or_else(|e| panic!("{e}"));
    sqlx::raw_sql(statement).execute(&pool).await.unwrap_or_else(|e| panic!("{statement}: {e}"));
    pool.close().await;
}

/// The log lines about `run` for events of `kind` that say they were applied.
fn applied_in<'a>(lines: &'a [Value], run: &str, kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["run_id"] == run && l["event"] == kind && l["outcome"] == "applied").collect()
}

#[test]
fn a_decision_whose_transaction_rolled_back_logs_no_transition_line() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempdir();
        // Reviews are decided only by hand: the run waits for its review.
        let (spec, _sims) = deployment(&db.url, None, false).await;
        let url = spec.url();
        let serve = process::served(&spec, dir.path(), "serve.log").await;
        let run = admit(&url, &package_of(&spec.project).revision, "k").await;
        log_until(&serve.log, "the run's wait for its review", |l| {
            l["run_id"] == run.as_str() && l["message"] == "waiting for a completion"
        })
        .await;

        execute(
            &db.url,
            &format!(
                "CREATE FUNCTION refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected'; END $$; \
                 CREATE TRIGGER refuse BEFORE UPDATE ON runs FOR EACH ROW WHEN (NEW.id = '{run}') EXECUTE FUNCTION refuse_update();"
            ),
        )
        .await;
        let (status, _) = post(&format!("{url}/v1/runs/{run}/cancel"), &json!({})).await;
        assert_eq!(status, 500, "the database refused the decision's write");
        let (_, view) = get(&format!("{url}/v1/runs/{run}")).await;
        assert_eq!(view["state"], "running", "nothing changed: {view}");
        // The request's line is written after the decision's: once it is in the log, a
        // transition line would be too.
        let lines = log_until(&serve.log, "the refused cancel's request line", |l| {
            l["message"] == "request" && l["route"] == "/v1/runs/{id}/cancel" && l["status"] == 500
        })
        .await;
        assert!(
            applied_in(&lines, &run, "cancel-requested").is_empty(),
            "a rolled-back decision was logged:\n{}",
            read(&serve.log)
        );

        execute(&db.url, "DROP TRIGGER refuse ON runs").await;
        let (status, _) = post(&format!("{url}/v1/runs/{run}/cancel"), &json!({})).await;
        assert_eq!(status, 202);
        log_until(&serve.log, "the committed cancel's transition line", |l| {
            l["run_id"] == run.as_str()
                && l["event"] == "cancel-requested"
                && l["outcome"] == "applied"
                && l["message"] == "cancel requested"
        })
        .await;
    });
}
