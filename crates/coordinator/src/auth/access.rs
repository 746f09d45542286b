//! Who may call the API and what they may do
//! (docs/reference/protection.md#access-and-roles): subjects, their static
//! bearer tokens and their roles per workflow.
//!
//! A token is kept only as its SHA-256 digest; a presented token is hashed
//! and compared with every known digest in constant time (`subtle`), without
//! stopping at a match. Nothing here renders a token or a digest.
//!
//! Roles hold per workflow (a grant names a workflow or `*`): `admit` starts
//! runs, `read` reads the subject's own runs, `operate` inspects and commands
//! any run of the workflow (and reads and lists it) and activates its
//! packages. A run the caller does not own and does not operate is not
//! revealed at all ([`RunAccess::Hidden`]). `worker` is no right on the
//! HTTP API: it lets a `coordinator worker` process serve, over gRPC, the
//! remote connections that list its subject.
//!
//! A bearer token that is no static token and has the shape of a JWT is
//! verified against the OIDC issuers ([`crate::auth::oidc`]); its `sub` is the
//! subject, holding the roles `access.grants` gives that subject.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use coordinator_core::model::runtime::{Grant, Role};
use coordinator_products::Secret;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::auth::oidc::{self, Issuer, JwtRefusal};

/// The subject `coordinator dev`'s operator token authenticates.
pub const DEV_SUBJECT: &str = "dev-operator";

/// Every role on the HTTP API (`worker` is none: `coordinator dev`'s operator is no worker).
const ALL_ROLES: [Role; 3] = [Role::Admit, Role::Read, Role::Operate];

/// Why an access configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// Two token entries hold the same token (which subject it is would be ambiguous).
    #[error("access.tokens: the entries of `{first}` and `{second}` hold the same token; give each its own")]
    DuplicateToken {
        /// The first entry's subject.
        first: String,
        /// The second entry's subject.
        second: String,
    },
    /// A subject is empty.
    #[error("access: a subject must not be empty")]
    EmptySubject,
    /// A token's subject starts with `trigger:` or `schedule:`, which name the
    /// owners of runs triggers and schedules admit.
    #[error(
        "access.tokens: the subject `{0}` is reserved: `trigger:` and `schedule:` subjects own the runs signed \
         events and schedules admit"
    )]
    ReservedSubject(String),
}

/// The prefix of the subject that owns the runs a trigger admits (`trigger:<connection>`).
pub const TRIGGER_SUBJECT_PREFIX: &str = "trigger:";
/// The prefix of the subject that owns the runs a schedule admits (`schedule:<workflow>/<id>`).
pub const SCHEDULE_SUBJECT_PREFIX: &str = "schedule:";

/// Whether `subject` names what admits runs by itself (a trigger, a schedule):
/// no token or identity may take it.
pub fn is_reserved_subject(subject: &str) -> bool {
    subject.starts_with(TRIGGER_SUBJECT_PREFIX) || subject.starts_with(SCHEDULE_SUBJECT_PREFIX)
}

/// A static bearer token with its subject and the roles it holds for every workflow.
#[derive(Debug)]
pub struct StaticCredential {
    /// The subject the token authenticates.
    pub subject: String,
    /// The token (resolved from its secret reference).
    pub token: Secret,
    /// Roles for every workflow (as a grant with workflow `*`).
    pub roles: Vec<Role>,
}

/// Where a role holds: every workflow or one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Scope {
    /// `*`.
    Any,
    /// One workflow.
    Workflow(String),
}

/// An authenticated caller: the subject and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    subject: String,
    grants: BTreeSet<(Scope, Role)>,
}

/// What a caller may know of one run for an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAccess {
    /// Allowed.
    Allowed,
    /// The caller knows of the run (owns it or operates its workflow) but lacks the role (`403`).
    Forbidden,
    /// Not the caller's run and not a workflow it operates: answered as if it did not exist (`404`).
    Hidden,
}

/// One slice of the runs a caller may list: runs of `workflow` (or every
/// workflow) owned by `owner` (or anyone). A listing is the union of its slices.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListSlice {
    /// Only this workflow.
    pub workflow: Option<String>,
    /// Only runs of this owner.
    pub owner: Option<String>,
}

impl Principal {
    /// A principal with `roles` for every workflow.
    fn everywhere(subject: &str, roles: &[Role]) -> Principal {
        Principal { subject: subject.to_owned(), grants: roles.iter().map(|r| (Scope::Any, *r)).collect() }
    }

    /// The subject (owner of the runs it admits).
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Whether the caller holds `role` for `workflow`.
    pub fn holds(&self, role: Role, workflow: &str) -> bool {
        self.grants.contains(&(Scope::Any, role)) || self.grants.contains(&(Scope::Workflow(workflow.to_owned()), role))
    }

    /// Whether the caller holds `role` for every workflow (a grant with workflow `*`):
    /// what deployment-wide actions such as the restore hold need.
    pub fn holds_everywhere(&self, role: Role) -> bool {
        self.grants.contains(&(Scope::Any, role))
    }

    /// The workflows the subject operates by name (a grant for `*` is [`Principal::holds_everywhere`]).
    pub fn operated_workflows(&self) -> Vec<String> {
        self.grants
            .iter()
            .filter_map(|(scope, role)| match (scope, role) {
                (Scope::Workflow(w), Role::Operate) => Some(w.clone()),
                _ => None,
            })
            .collect()
    }

    /// Whether the caller holds `role` for at least one workflow.
    pub fn holds_somewhere(&self, role: Role) -> bool {
        self.grants.iter().any(|(_, r)| *r == role)
    }

    /// What the caller may do with a run of `owner` in `workflow` when the
    /// action needs `role`: `read` is allowed on the caller's own runs, and
    /// `operate` includes reading any run of the workflow.
    pub fn run_access(&self, owner: &str, workflow: &str, role: Role) -> RunAccess {
        let operates = self.holds(Role::Operate, workflow);
        if owner != self.subject && !operates {
            return RunAccess::Hidden;
        }
        let allowed = match role {
            Role::Operate => operates,
            Role::Read => operates || self.holds(Role::Read, workflow),
            Role::Admit => self.holds(Role::Admit, workflow),
            // Serving remote connections gives no access to runs on the HTTP API.
            Role::Worker => false,
        };
        if allowed { RunAccess::Allowed } else { RunAccess::Forbidden }
    }

    /// The slices of `GET /v1/runs` for this caller: its own runs of workflows
    /// it reads, and every run of workflows it operates, narrowed to
    /// `workflow` when the query names one. `None` when the caller may list
    /// nothing there (neither `read` nor `operate`).
    pub fn listing(&self, workflow: Option<&str>) -> Option<Vec<ListSlice>> {
        let mine = Some(self.subject.clone());
        if let Some(w) = workflow {
            let owner = if self.holds(Role::Operate, w) {
                None
            } else if self.holds(Role::Read, w) {
                mine
            } else {
                return None;
            };
            return Some(vec![ListSlice { workflow: Some(w.to_owned()), owner }]);
        }
        if self.grants.contains(&(Scope::Any, Role::Operate)) {
            return Some(vec![ListSlice { workflow: None, owner: None }]);
        }
        let reads_all = self.grants.contains(&(Scope::Any, Role::Read));
        let mut slices = BTreeSet::new();
        if reads_all {
            slices.insert(ListSlice { workflow: None, owner: mine.clone() });
        }
        for (scope, role) in &self.grants {
            let Scope::Workflow(w) = scope else { continue };
            match role {
                Role::Operate => {
                    slices.insert(ListSlice { workflow: Some(w.clone()), owner: None });
                }
                Role::Read if !reads_all && !self.holds(Role::Operate, w) => {
                    slices.insert(ListSlice { workflow: Some(w.clone()), owner: mine.clone() });
                }
                _ => {}
            }
        }
        (!slices.is_empty()).then(|| slices.into_iter().collect())
    }
}

/// Why a bearer token does not authenticate anyone. The message may be
/// shown to the caller: it never holds the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unauthenticated {
    /// Neither a static token nor (when issuers are configured) a JWT.
    #[error("the bearer token is not valid")]
    UnknownToken,
    /// A JWT that is not accepted, and why.
    #[error(transparent)]
    Jwt(#[from] JwtRefusal),
}

/// Roles per scope of one subject.
type Grants = BTreeSet<(Scope, Role)>;

/// A known token: its digest and the subject it authenticates.
struct Credential {
    digest: [u8; 32],
    subject: usize,
}

/// The deployment's access rules: token digests, subjects and their
/// grants, and the OIDC issuers whose JWTs are accepted.
#[derive(Default)]
pub struct Access {
    credentials: Vec<Credential>,
    principals: Vec<Arc<Principal>>,
    /// `access.grants` by subject (what a JWT's subject holds).
    grants: HashMap<String, Grants>,
    issuers: Vec<Issuer>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let subjects: Vec<&str> = self.principals.iter().map(|p| p.subject()).collect();
        f.debug_struct("Access")
            .field("tokens", &self.credentials.len())
            .field("subjects", &subjects)
            .field("issuers", &self.issuers)
            .finish()
    }
}

impl Access {
    /// The access rules of a deployment: static tokens (each with roles for
    /// every workflow) and grants per subject and workflow. A grant to a
    /// subject no token authenticates has no effect.
    ///
    /// # Errors
    /// [`AccessError::DuplicateToken`] when two entries hold the same token,
    /// [`AccessError::EmptySubject`] for an empty subject.
    pub fn new(credentials: Vec<StaticCredential>, grants: &[Grant]) -> Result<Access, AccessError> {
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut principals: Vec<Principal> = Vec::new();
        let mut known: Vec<Credential> = Vec::new();
        for credential in credentials {
            if credential.subject.is_empty() {
                return Err(AccessError::EmptySubject);
            }
            if is_reserved_subject(&credential.subject) {
                return Err(AccessError::ReservedSubject(credential.subject));
            }
            let digest = digest(credential.token.expose());
            if let Some(first) = known.iter().find(|k| k.digest == digest).and_then(|k| principals.get(k.subject)) {
                return Err(AccessError::DuplicateToken { first: first.subject.clone(), second: credential.subject });
            }
            let subject = *index.entry(credential.subject.clone()).or_insert_with(|| {
                principals.push(Principal::everywhere(&credential.subject, &[]));
                principals.len() - 1
            });
            if let Some(principal) = principals.get_mut(subject) {
                principal.grants.extend(credential.roles.iter().map(|r| (Scope::Any, *r)));
            }
            known.push(Credential { digest, subject });
        }
        let mut by_subject: HashMap<String, Grants> = HashMap::new();
        for grant in grants {
            let scope = if grant.workflow == Grant::ANY_WORKFLOW {
                Scope::Any
            } else {
                Scope::Workflow(grant.workflow.clone())
            };
            let held = by_subject.entry(grant.subject.clone()).or_default();
            held.extend(grant.roles.iter().map(|r| (scope.clone(), *r)));
        }
        for principal in &mut principals {
            if let Some(held) = by_subject.get(&principal.subject) {
                principal.grants.extend(held.iter().cloned());
            }
        }
        let principals = principals.into_iter().map(Arc::new).collect();
        let credentials = known;
        Ok(Access { credentials, principals, grants: by_subject, issuers: Vec::new() })
    }

    /// These rules with OIDC issuers whose JWTs authenticate their `sub`.
    #[must_use]
    pub fn with_issuers(mut self, issuers: Vec<Issuer>) -> Access {
        self.issuers = issuers;
        self
    }

    /// The OIDC issuers.
    pub fn issuers(&self) -> &[Issuer] {
        &self.issuers
    }

    /// `coordinator dev`'s rules: `token` authenticates [`DEV_SUBJECT`] with
    /// every role for every workflow.
    pub fn dev(token: &str) -> Access {
        Access {
            credentials: vec![Credential { digest: digest(token), subject: 0 }],
            principals: vec![Arc::new(Principal::everywhere(DEV_SUBJECT, &ALL_ROLES))],
            grants: HashMap::new(),
            issuers: Vec::new(),
        }
    }

    /// Whether no token and no issuer is configured (every protected call is refused).
    pub fn is_empty(&self) -> bool {
        self.credentials.is_empty() && self.issuers.is_empty()
    }

    /// The principal a presented bearer token authenticates: a static token
    /// ([`Access::authenticate`]), else a JWT of an OIDC issuer, whose `sub`
    /// holds the roles `access.grants` gives it (a token entry's `roles`
    /// belong to that token, not to the subject).
    ///
    /// # Errors
    /// [`Unauthenticated`] saying why (never holding the token).
    pub async fn authenticate_bearer(&self, token: &str) -> Result<Arc<Principal>, Unauthenticated> {
        if let Some(principal) = self.authenticate(token) {
            return Ok(principal);
        }
        if self.issuers.is_empty() || !oidc::is_jwt(token) {
            return Err(Unauthenticated::UnknownToken);
        }
        let subject = oidc::verify(&self.issuers, token).await?;
        let grants = self.grants.get(&subject).cloned().unwrap_or_default();
        Ok(Arc::new(Principal { subject, grants }))
    }

    /// The principal a presented bearer token authenticates, if any. Every
    /// known digest is compared, in constant time, whatever matches.
    pub fn authenticate(&self, token: &str) -> Option<Arc<Principal>> {
        let presented = digest(token);
        let mut found = None;
        for credential in &self.credentials {
            let equal: bool = credential.digest[..].ct_eq(&presented[..]).into();
            if equal && found.is_none() {
                found = Some(credential.subject);
            }
        }
        found.and_then(|i| self.principals.get(i)).cloned()
    }
}

/// How a console session signed in, so each request can find its principal
/// again without keeping the token: the static token's digest, or a JWT's
/// subject (whose roles are `access.grants`') and when that JWT expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedIn {
    /// A static token, by the SHA-256 of the token (never the token).
    Static([u8; 32]),
    /// An OIDC JWT.
    Jwt {
        /// Its `sub`.
        subject: String,
        /// Its `exp` (seconds since the epoch), if it has one.
        expires_at: Option<i64>,
    },
}

impl Access {
    /// Authenticates a bearer token as [`Access::authenticate_bearer`] does,
    /// and says how, for a console session.
    ///
    /// # Errors
    /// [`Unauthenticated`] saying why (never holding the token).
    pub async fn sign_in(&self, token: &str) -> Result<(Arc<Principal>, SignedIn), Unauthenticated> {
        let principal = self.authenticate_bearer(token).await?;
        if self.authenticate(token).is_some() {
            return Ok((principal, SignedIn::Static(digest(token))));
        }
        // Verified above: only `exp` is read again.
        #[derive(serde::Deserialize)]
        struct Expiry {
            exp: Option<i64>,
        }
        let expires_at = jsonwebtoken::dangerous::insecure_decode_claims::<Expiry>(token).ok().and_then(|e| e.exp);
        let subject = principal.subject().to_owned();
        Ok((principal, SignedIn::Jwt { subject, expires_at }))
    }

    /// The principal of a static token whose digest `matches` (every digest is
    /// offered, whatever matched), if it is still configured.
    pub fn static_principal(&self, matches: impl Fn(&[u8; 32]) -> bool) -> Option<Arc<Principal>> {
        let mut found = None;
        for credential in &self.credentials {
            if matches(&credential.digest) && found.is_none() {
                found = Some(credential.subject);
            }
        }
        found.and_then(|i| self.principals.get(i)).cloned()
    }

    /// The principal of a JWT's subject: the roles `access.grants` gives it.
    pub fn jwt_principal(&self, subject: &str) -> Arc<Principal> {
        let grants = self.grants.get(subject).cloned().unwrap_or_default();
        Arc::new(Principal { subject: subject.to_owned(), grants })
    }
}

fn digest(token: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(&Sha256::digest(token.as_bytes()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(subject: &str, token: &str, roles: &[Role]) -> StaticCredential {
        StaticCredential { subject: subject.into(), token: Secret::new(token), roles: roles.to_vec() }
    }

    fn grant(subject: &str, workflow: &str, roles: &[Role]) -> Grant {
        Grant { subject: subject.into(), workflow: workflow.into(), roles: roles.to_vec() }
    }

    fn access() -> Access {
        let credentials = vec![
            credential("ops", "t-ops", &[Role::Operate]),
            credential("app", "t-app", &[]),
            credential("mixed", "t-mixed", &[]),
        ];
        let grants = [
            grant("app", "notice", &[Role::Admit, Role::Read]),
            grant("mixed", "notice", &[Role::Read]),
            grant("mixed", "permit", &[Role::Operate]),
            grant("nobody", "*", &[Role::Operate]),
        ];
        Access::new(credentials, &grants).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn tokens_authenticate_their_subject_only() {
        let access = access();
        assert_eq!(access.authenticate("t-ops").map(|p| p.subject().to_owned()), Some("ops".into()));
        assert_eq!(access.authenticate("t-app").map(|p| p.subject().to_owned()), Some("app".into()));
        assert!(access.authenticate("t-op").is_none());
        assert!(access.authenticate("").is_none());
        assert!(Access::default().authenticate("t-ops").is_none());
        let dev = Access::dev("secret");
        let principal = dev.authenticate("secret").unwrap_or_else(|| panic!("the dev token"));
        assert_eq!(principal.subject(), DEV_SUBJECT);
        assert!(ALL_ROLES.iter().all(|r| principal.holds(*r, "any-workflow")));
        assert!(!format!("{dev:?}").contains("secret"));
    }

    #[test]
    fn duplicate_tokens_and_empty_subjects_are_refused() {
        let twice = vec![credential("a", "same", &[]), credential("b", "same", &[])];
        assert_eq!(
            Access::new(twice, &[]).err(),
            Some(AccessError::DuplicateToken { first: "a".into(), second: "b".into() })
        );
        assert_eq!(Access::new(vec![credential("", "t", &[])], &[]).err(), Some(AccessError::EmptySubject));
    }

    #[test]
    fn run_access_hides_other_owners_runs_from_non_operators() {
        let access = access();
        let who = |token: &str| access.authenticate(token).unwrap_or_else(|| panic!("{token}"));
        let (ops, app, mixed) = (who("t-ops"), who("t-app"), who("t-mixed"));
        assert_eq!(ops.run_access("app", "notice", Role::Read), RunAccess::Allowed);
        assert_eq!(ops.run_access("app", "notice", Role::Operate), RunAccess::Allowed);
        assert_eq!(app.run_access("app", "notice", Role::Read), RunAccess::Allowed);
        assert_eq!(app.run_access("app", "notice", Role::Operate), RunAccess::Forbidden);
        assert_eq!(app.run_access("ops", "notice", Role::Read), RunAccess::Hidden);
        assert_eq!(app.run_access("app", "permit", Role::Read), RunAccess::Forbidden);
        assert_eq!(mixed.run_access("app", "permit", Role::Operate), RunAccess::Allowed);
        assert_eq!(mixed.run_access("app", "notice", Role::Read), RunAccess::Hidden);
    }

    #[test]
    fn listings_are_own_runs_read_and_all_runs_operated() {
        let access = access();
        let who = |token: &str| access.authenticate(token).unwrap_or_else(|| panic!("{token}"));
        let slice =
            |w: Option<&str>, o: Option<&str>| ListSlice { workflow: w.map(Into::into), owner: o.map(Into::into) };
        assert_eq!(who("t-ops").listing(None), Some(vec![slice(None, None)]));
        assert_eq!(who("t-app").listing(None), Some(vec![slice(Some("notice"), Some("app"))]));
        assert_eq!(who("t-app").listing(Some("permit")), None);
        assert_eq!(
            who("t-mixed").listing(None),
            Some(vec![slice(Some("notice"), Some("mixed")), slice(Some("permit"), None)])
        );
        assert_eq!(who("t-mixed").listing(Some("permit")), Some(vec![slice(Some("permit"), None)]));
        let admit_only = Access::new(vec![credential("a", "t", &[Role::Admit])], &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(admit_only.authenticate("t").and_then(|p| p.listing(None)), None);
    }

    #[test]
    fn a_worker_has_no_right_on_the_http_api() {
        let credentials = vec![credential("w", "t-w", &[Role::Worker])];
        let access = Access::new(credentials, &[grant("w", "*", &[Role::Worker])]).unwrap_or_else(|e| panic!("{e}"));
        let worker = access.authenticate("t-w").unwrap_or_else(|| panic!("the worker token"));
        assert!(worker.holds_somewhere(Role::Worker));
        for role in ALL_ROLES {
            assert!(!worker.holds_somewhere(role), "{role:?}");
        }
        assert_eq!(worker.listing(None), None);
        assert!(worker.operated_workflows().is_empty());
        for role in [Role::Admit, Role::Read, Role::Operate, Role::Worker] {
            assert_eq!(worker.run_access("w", "notice", role), RunAccess::Forbidden, "{role:?}");
            assert_eq!(worker.run_access("app", "notice", role), RunAccess::Hidden, "{role:?}");
        }
        assert!(!Access::dev("secret").authenticate("secret").is_some_and(|p| p.holds_somewhere(Role::Worker)));
    }
}
