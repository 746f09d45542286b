//! Authentication and authorization of the HTTP API
//! (docs/reference/protection.md#access-and-roles): every endpoint
//! against every kind of caller — no token, an invalid one, a subject with only
//! `admit`, only `read`, only `operate` for the workflow, `operate` for another
//! workflow, and every role — on the caller's own run and on another
//! subject's run. A `coordinator serve` stack, on SQLite and on PostgreSQL,
//! whose runtime.yaml holds static tokens (in `file:` secrets) and grants.
//! Expired and wrong-audience credentials are JWTs: the module `oidc`.

use std::collections::BTreeSet;

use coordinator::AdmitRequest;
use coordinator::process::deployment::{DeploymentError, RuntimeConfig};
use coordinator::process::serve::Service;
use reqwest::header::WWW_AUTHENTICATE;
use serde_json::{Value, json};

use crate::support::deploy::{DeploymentSpec, Package, SimServer, deployment, migrated, package_of, sqlite_url};
use crate::support::pg::{self, Backend, Database};
use crate::support::{TOKEN, get_as, on_runtime, post_as, sample_input, start, tempdir};

/// The workflow of the deployment.
const WORKFLOW: &str = "reviewed-notice";
/// The subject that owns "another subject's run".
const BYSTANDER: &str = "bystander";

/// A kind of caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Nobody,
    Invalid,
    Admit,
    Read,
    Operate,
    OperateElsewhere,
    All,
}

const EVERYONE: [Who; 7] =
    [Who::Nobody, Who::Invalid, Who::Admit, Who::Read, Who::Operate, Who::OperateElsewhere, Who::All];

impl Who {
    fn subject(self) -> Option<&'static str> {
        match self {
            Who::Nobody | Who::Invalid => None,
            Who::Admit => Some("admitter"),
            Who::Read => Some("reader"),
            Who::Operate => Some("operator-here"),
            Who::OperateElsewhere => Some("operator-elsewhere"),
            Who::All => Some("operator"),
        }
    }

    fn token(self) -> Option<String> {
        match self {
            Who::Nobody => None,
            Who::Invalid => Some("not-a-token-of-this-deployment".to_owned()),
            Who::All => Some(TOKEN.to_owned()),
            other => other.subject().map(|s| format!("token-of-{s}")),
        }
    }

    fn operates(self) -> bool {
        matches!(self, Who::Operate | Who::All)
    }
}

/// The access block: `operator` holds every role through its token; the others through grants.
fn access_yaml() -> (String, Vec<(String, String)>) {
    let mut files = vec![("operator-token".to_owned(), format!("{TOKEN}\n"))];
    let mut tokens = vec!["{subject: operator, token: file:operator-token, roles: [admit, read, operate]}".to_owned()];
    for who in [Who::Admit, Who::Read, Who::Operate, Who::OperateElsewhere] {
        let (Some(subject), Some(token)) = (who.subject(), who.token()) else { continue };
        files.push((format!("{subject}-token"), token));
        tokens.push(format!("{{subject: {subject}, token: file:{subject}-token}}"));
    }
    let grants = [
        format!("{{subject: admitter, workflow: {WORKFLOW}, roles: [admit]}}"),
        format!("{{subject: reader, workflow: {WORKFLOW}, roles: [read]}}"),
        format!("{{subject: operator-here, workflow: {WORKFLOW}, roles: [operate]}}"),
        "{subject: operator-elsewhere, workflow: permit-check, roles: [operate]}".to_owned(),
    ];
    (format!("{{tokens: [{}], grants: [{}]}}", tokens.join(", "), grants.join(", ")), files)
}

/// What a request must answer.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// One of these statuses, and no `auth.*` or `run.unknown` code.
    Allowed(&'static [u16]),
    /// This status and code.
    Denied(u16, &'static str),
}

const UNAUTHENTICATED: Expect = Expect::Denied(401, "auth.unauthenticated");
const FORBIDDEN: Expect = Expect::Denied(403, "auth.forbidden");
const HIDDEN: Expect = Expect::Denied(404, "run.unknown");

/// An endpoint of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Health,
    OpenApi,
    Completion,
    Metrics,
    Admit,
    List,
    Read,
    Inspect,
    RetrySame,
    Reconcile,
    Cancel,
    Activate,
    HoldShow,
    HoldPlace,
    HoldRelease,
    AuditAll,
    AuditRun,
    Event,
}

/// The rules of docs/access.md, written out.
fn expected(endpoint: Endpoint, who: Who, own: bool) -> Expect {
    match endpoint {
        Endpoint::Health | Endpoint::OpenApi => return Expect::Allowed(&[200]),
        Endpoint::Completion => return Expect::Allowed(&[202]),
        // Authenticated by the event's signature, not a bearer token: an unknown trigger for everyone.
        Endpoint::Event => return Expect::Allowed(&[404]),
        _ if matches!(who, Who::Nobody | Who::Invalid) => return UNAUTHENTICATED,
        _ => {}
    }
    let knows = own || who.operates();
    match endpoint {
        Endpoint::Metrics => {
            if matches!(who, Who::Operate | Who::OperateElsewhere | Who::All) {
                Expect::Allowed(&[200])
            } else {
                FORBIDDEN
            }
        }
        Endpoint::Admit => {
            if matches!(who, Who::Admit | Who::All) {
                Expect::Allowed(&[201])
            } else {
                FORBIDDEN
            }
        }
        Endpoint::List => {
            if who == Who::Admit {
                FORBIDDEN
            } else {
                Expect::Allowed(&[200])
            }
        }
        Endpoint::Read if !knows => HIDDEN,
        Endpoint::Read if who.operates() || who == Who::Read => Expect::Allowed(&[200]),
        Endpoint::Read => FORBIDDEN,
        Endpoint::Inspect | Endpoint::RetrySame | Endpoint::Reconcile | Endpoint::Cancel if !knows => HIDDEN,
        Endpoint::Inspect | Endpoint::RetrySame | Endpoint::Reconcile | Endpoint::Cancel if !who.operates() => {
            FORBIDDEN
        }
        Endpoint::Inspect => Expect::Allowed(&[200]),
        // The rules may refuse the command (409 with the machine's code): authorization let it through.
        Endpoint::RetrySame | Endpoint::Reconcile | Endpoint::Cancel => Expect::Allowed(&[200, 202, 409]),
        Endpoint::Activate => {
            if who.operates() {
                Expect::Allowed(&[200])
            } else {
                FORBIDDEN
            }
        }
        // Deployment-wide: `operate` for every workflow (a grant with workflow `*`).
        Endpoint::HoldShow | Endpoint::HoldPlace | Endpoint::HoldRelease | Endpoint::AuditAll => {
            if who == Who::All {
                Expect::Allowed(&[200])
            } else {
                FORBIDDEN
            }
        }
        // One run's journal: as its inspection.
        Endpoint::AuditRun if !knows => HIDDEN,
        Endpoint::AuditRun if !who.operates() => FORBIDDEN,
        Endpoint::AuditRun => Expect::Allowed(&[200]),
        Endpoint::Health | Endpoint::OpenApi | Endpoint::Completion | Endpoint::Event => Expect::Allowed(&[]),
    }
}

/// The stack under test.
struct Stack {
    service: Service,
    package: Package,
    _sims: SimServer,
    _db: Database,
    _dir: tempfile::TempDir,
}

async fn stack() -> Stack {
    stack_on(Backend::Sqlite).await
}

async fn stack_on(backend: Backend) -> Stack {
    let dir = tempdir();
    let db = pg::on(backend, dir.path()).await;
    let (mut spec, sims) = deployment(&db.url, None, false).await;
    (spec.access, spec.files) = access_yaml();
    let service = migrated(&spec.write(dir.path())).await;
    Stack { service, package: package_of(&spec.project), _sims: sims, _db: db, _dir: dir }
}

/// A run owned by `owner`, admitted through the engine (a reader cannot admit over HTTP).
async fn run_of(stack: &Stack, owner: &str) -> String {
    let request = AdmitRequest {
        workflow: WORKFLOW.to_owned(),
        revision: stack.service.revision.clone(),
        input: sample_input(),
        idempotency_key: None,
        run_id: None,
        trace_parent: None,
    };
    stack.service.engine.admit(request, owner).await.unwrap_or_else(|e| panic!("admit for {owner}: {e}")).run_id
}

/// Sends `endpoint` (on `run`) as `who`: (status, body, WWW-Authenticate).
async fn call(stack: &Stack, endpoint: Endpoint, who: Who, run: &str) -> (u16, Value, Option<String>) {
    let url = stack.service.url();
    let client = reqwest::Client::new();
    let request = match endpoint {
        Endpoint::Health => client.get(format!("{url}/healthz")),
        Endpoint::OpenApi => client.get(format!("{url}/v1/openapi.json")),
        Endpoint::Completion => client.post(format!("{url}/v1/completions/casework")).json(&json!({"reference": "r"})),
        Endpoint::Metrics => client.get(format!("{url}/metrics")),
        Endpoint::Admit => client.post(format!("{url}/v1/runs")).json(&json!({
            "workflow": WORKFLOW, "revision": stack.service.revision, "input": sample_input(),
        })),
        Endpoint::List => client.get(format!("{url}/v1/runs")),
        Endpoint::Read => client.get(format!("{url}/v1/runs/{run}")),
        Endpoint::Inspect => client.get(format!("{url}/v1/runs/{run}/inspection")),
        Endpoint::RetrySame => client.post(format!("{url}/v1/runs/{run}/steps/send-notice/retry-same")),
        Endpoint::Reconcile => client.post(format!("{url}/v1/runs/{run}/steps/send-notice/reconcile")),
        Endpoint::Cancel => client.post(format!("{url}/v1/runs/{run}/cancel")),
        Endpoint::Activate => client
            .post(format!("{url}/v1/packages?digest={}", stack.package.digest))
            .header("content-type", "application/octet-stream")
            .body(stack.package.bytes.clone()),
        Endpoint::HoldShow => client.get(format!("{url}/v1/restore-hold")),
        Endpoint::HoldPlace => client.post(format!("{url}/v1/restore-hold")),
        Endpoint::HoldRelease => client.delete(format!("{url}/v1/restore-hold")),
        Endpoint::AuditAll => client.get(format!("{url}/v1/audit")),
        Endpoint::AuditRun => client.get(format!("{url}/v1/audit?run={run}")),
        Endpoint::Event => client.post(format!("{url}/v1/events/{WORKFLOW}/no-such-trigger")).json(&json!({})),
    };
    let request = match who.token() {
        Some(token) => request.bearer_auth(token),
        None => request,
    };
    let response = request.send().await.unwrap_or_else(|e| panic!("{endpoint:?}: {e}"));
    let status = response.status().as_u16();
    let challenge = response.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let text = response.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null), challenge)
}

fn check(endpoint: Endpoint, who: Who, own: bool, (status, body, challenge): &(u16, Value, Option<String>)) {
    let case = format!("{endpoint:?} as {who:?} on {} run: {status} {body}", if own { "its own" } else { "another's" });
    let code = body["code"].as_str().unwrap_or_default();
    match expected(endpoint, who, own) {
        Expect::Allowed(statuses) => {
            assert!(statuses.contains(status), "{case}: expected one of {statuses:?}");
            assert!(!code.starts_with("auth.") && code != "run.unknown", "{case}");
        }
        Expect::Denied(want, want_code) => {
            assert_eq!((*status, code), (want, want_code), "{case}");
            assert!(body["message"].is_string(), "{case}: errors are {{code, message}}");
            if want == 401 {
                let challenge = challenge.as_deref().unwrap_or_default();
                assert!(challenge.starts_with("Bearer"), "{case}: WWW-Authenticate `{challenge}`");
            }
        }
    }
    if let Some(token) = who.token() {
        assert!(!body.to_string().contains(&token), "{case}: the token is echoed");
    }
}

/// The run ids a listing shows.
fn listed(body: &Value) -> BTreeSet<String> {
    body["runs"].as_array().into_iter().flatten().filter_map(|r| r["runId"].as_str().map(str::to_owned)).collect()
}

#[test]
fn every_endpoint_answers_every_kind_of_caller_by_its_roles_on_sqlite() {
    on_runtime(matrix(Backend::Sqlite));
}

#[test]
fn every_endpoint_answers_every_kind_of_caller_by_its_roles_on_postgres() {
    on_runtime(matrix(Backend::Postgres));
}

/// Every endpoint × every kind of caller × own run / another subject's run.
async fn matrix(backend: Backend) {
    {
        let stack = stack_on(backend).await;
        let other = run_of(&stack, BYSTANDER).await;
        let mut own = Vec::new();
        for who in EVERYONE {
            own.push(match who.subject() {
                Some(subject) => Some(run_of(&stack, subject).await),
                None => None,
            });
        }
        let all_runs: BTreeSet<String> = own.iter().flatten().cloned().chain([other.clone()]).collect();

        // Listings: own runs with `read`, every run of an operated workflow.
        for (who, own) in EVERYONE.iter().zip(&own) {
            let answer = call(&stack, Endpoint::List, *who, "").await;
            check(Endpoint::List, *who, true, &answer);
            let shown = listed(&answer.1);
            match who {
                Who::Read => assert_eq!(shown, own.iter().cloned().collect(), "{who:?}"),
                Who::Operate | Who::All => assert_eq!(shown, all_runs, "{who:?}"),
                _ => assert!(shown.is_empty(), "{who:?} sees {shown:?}"),
            }
        }
        let url = format!("{}/v1/runs?workflow={WORKFLOW}", stack.service.url());
        let elsewhere = get_as(&url, Who::OperateElsewhere.token().as_deref()).await;
        assert_eq!((elsewhere.0, elsewhere.1["code"].as_str()), (403, Some("auth.forbidden")), "{}", elsewhere.1);
        let reader = get_as(&url, Who::Read.token().as_deref()).await;
        assert_eq!(listed(&reader.1), own[3].iter().cloned().collect(), "{}", reader.1);

        let everywhere = [
            Endpoint::Health,
            Endpoint::OpenApi,
            Endpoint::Completion,
            Endpoint::Metrics,
            Endpoint::Admit,
            Endpoint::Activate,
            Endpoint::Event,
            Endpoint::AuditAll,
            Endpoint::HoldShow,
            // Last: placed and released again at once by the one caller allowed to.
            Endpoint::HoldPlace,
            Endpoint::HoldRelease,
        ];
        for who in EVERYONE {
            for endpoint in everywhere {
                let answer = call(&stack, endpoint, who, "").await;
                check(endpoint, who, false, &answer);
            }
        }
        // Cancel last: it ends the run the other commands are tried on.
        let on_runs = [
            Endpoint::Read,
            Endpoint::Inspect,
            Endpoint::AuditRun,
            Endpoint::RetrySame,
            Endpoint::Reconcile,
            Endpoint::Cancel,
        ];
        for (who, own) in EVERYONE.iter().zip(&own) {
            for endpoint in on_runs {
                if let Some(run) = own {
                    check(endpoint, *who, true, &call(&stack, endpoint, *who, run).await);
                }
                check(endpoint, *who, false, &call(&stack, endpoint, *who, &other).await);
            }
        }
        // A run that does not exist is `run.unknown` to everyone who may ask.
        let missing = "0199c8a0-0000-7000-8000-000000000000";
        for who in EVERYONE {
            let (status, body, _) = call(&stack, Endpoint::Read, who, missing).await;
            let want = if who.token().is_none() || who == Who::Invalid { 401 } else { 404 };
            assert_eq!(status, want, "{who:?}: {body}");
        }
    }
}

#[test]
fn malformed_credentials_are_unauthenticated_and_never_echoed() {
    on_runtime(async {
        let stack = stack().await;
        let url = format!("{}/v1/runs", stack.service.url());
        let client = reqwest::Client::new();
        for header in [format!("Basic {TOKEN}"), "Bearer".to_owned(), "Bearer ".to_owned(), TOKEN.to_owned()] {
            let response = client
                .get(&url)
                .header("authorization", &header)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{header}: {e}"));
            assert_eq!(response.status().as_u16(), 401, "{header}");
            assert!(response.headers().contains_key(WWW_AUTHENTICATE), "{header}");
            let text = response.text().await.unwrap_or_default();
            assert!(text.contains("auth.unauthenticated") && !text.contains(TOKEN), "{header}: {text}");
        }
        // The scheme is case-insensitive.
        let response = client.get(&url).header("authorization", format!("bearer {TOKEN}")).send().await;
        assert_eq!(response.map(|r| r.status().as_u16()).ok(), Some(200));
    });
}

#[test]
fn the_same_idempotency_key_of_two_subjects_admits_two_runs() {
    on_runtime(async {
        let stack = stack().await;
        let url = format!("{}/v1/runs", stack.service.url());
        let body = json!({"workflow": WORKFLOW, "revision": stack.service.revision, "input": sample_input(), "idempotencyKey": "shared-key"});
        let mut runs = Vec::new();
        for who in [Who::Admit, Who::All, Who::Admit] {
            let (status, admitted) = post_as(&url, who.token().as_deref(), &body).await;
            runs.push((status, admitted["runId"].as_str().unwrap_or_default().to_owned()));
        }
        assert_eq!((runs[0].0, runs[1].0, runs[2].0), (201, 201, 200), "{runs:?}");
        assert_ne!(runs[0].1, runs[1].1, "two subjects, one key: two runs");
        assert_eq!(runs[0].1, runs[2].1, "the same subject again: the same run");
        // Each run is owned by the subject that admitted it.
        let (_, mine) = get_as(&format!("{url}/{}", runs[1].1), Some(TOKEN)).await;
        assert_eq!(mine["runId"], runs[1].1.as_str());
        let (status, _) = get_as(&format!("{url}/{}", runs[0].1), Who::Read.token().as_deref()).await;
        assert_eq!(status, 404, "the reader does not see the admitter's run");
    });
}

#[test]
fn missing_jwks_and_shared_tokens_refuse_the_deployment() {
    let dir = tempdir();
    let mut spec = DeploymentSpec::new(&sqlite_url(dir.path()), "http://127.0.0.1:9");
    spec.access = "{oidc: [{issuer: \"https://id.example\", audience: coordinator, jwks: \"file:jwks.json\"}]}".into();
    let file = spec.write(dir.path());
    let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("{e}"));
    match config.resolve() {
        // The issuer's JWKS file does not exist (the module `oidc` tests working issuers).
        Err(e @ DeploymentError::Jwks { .. }) => assert!(e.to_string().contains("access.oidc"), "{e}"),
        other => panic!("expected a refusal of the missing JWKS, got {other:?}"),
    }

    spec.access =
        "{tokens: [{subject: a, token: file:operator-token}, {subject: b, token: file:operator-token}]}".into();
    let file = spec.write(dir.path());
    let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("{e}"));
    match config.resolve() {
        Err(e @ DeploymentError::Invalid(_)) => {
            let text = e.to_string();
            assert!(text.contains("same token") && !text.contains(TOKEN), "{text}");
        }
        other => panic!("expected a refusal of the shared token, got {other:?}"),
    }

    spec.access = "{tokens: [{subject: a, token: file:missing-token}]}".into();
    let file = spec.write(dir.path());
    let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("{e}"));
    match config.resolve() {
        Err(e @ DeploymentError::Secret { .. }) => assert!(e.to_string().contains("file:missing-token"), "{e}"),
        other => panic!("expected an unresolved token, got {other:?}"),
    }
}

#[test]
fn the_dev_token_holds_every_role_and_nothing_else_gets_in() {
    on_runtime(async {
        let dev = start().await;
        let url = format!("{}/v1/runs", dev.url());
        assert_eq!(get_as(&url, None).await.0, 401);
        assert_eq!(get_as(&url, Some("another-token")).await.0, 401);
        let body = json!({"workflow": WORKFLOW, "revision": dev.revision, "input": sample_input()});
        let (status, admitted) = post_as(&url, Some(TOKEN), &body).await;
        assert_eq!(status, 201, "{admitted}");
        let run = admitted["runId"].as_str().unwrap_or_default();
        let owner = dev.engine.store().load(run).await.unwrap_or_else(|e| panic!("{e}")).map(|r| r.owner);
        assert_eq!(owner.as_deref(), Some(coordinator::auth::access::DEV_SUBJECT));
        let (status, _) = get_as(&format!("{url}/{run}/inspection"), Some(TOKEN)).await;
        assert_eq!(status, 200);
    });
}
