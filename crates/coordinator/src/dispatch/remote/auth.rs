//! A worker's credentials: every call carries `authorization: Bearer
//! <token>` of a subject holding the `worker` role, and a worker may only
//! take tasks of the remote connections whose `workers` list names its
//! subject. A missing or unknown token is `UNAUTHENTICATED`; a subject without
//! the role, or asking for a connection it may not serve, `PERMISSION_DENIED`.
//! Messages never carry the token.

use std::sync::Arc;

use coordinator_core::model::runtime::Role;
use tonic::{Request, Status};

use crate::auth::access::{Access, Principal};
use crate::dispatch::remote::RemoteConnections;

/// The authenticated worker of a call.
pub(crate) async fn worker<T>(access: &Access, request: &Request<T>) -> Result<Arc<Principal>, Status> {
    let Some(value) = request.metadata().get("authorization") else {
        return Err(Status::unauthenticated("send `authorization: Bearer <token>` with every call"));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Status::unauthenticated("the authorization metadata must be `Bearer <token>`"))?;
    let principal = access.authenticate_bearer(token).await.map_err(|e| Status::unauthenticated(e.to_string()))?;
    if !principal.holds_somewhere(Role::Worker) {
        return Err(Status::permission_denied(format!(
            "`{}` does not hold the `worker` role (runtime.yaml access)",
            principal.subject()
        )));
    }
    Ok(principal)
}

/// Checks that `subject` may serve every one of `connections` (none: every
/// connection that names it), and returns them.
pub(crate) fn lanes(remote: &RemoteConnections, subject: &str, connections: &[String]) -> Result<Vec<String>, Status> {
    if connections.is_empty() {
        let mut mine: Vec<String> =
            remote.iter().filter(|(_, workers)| workers.iter().any(|w| w == subject)).map(|(c, _)| c.clone()).collect();
        mine.sort();
        return Ok(mine);
    }
    for connection in connections {
        match remote.get(connection) {
            Some(workers) if workers.iter().any(|w| w == subject) => {}
            Some(_) => {
                return Err(Status::permission_denied(format!(
                    "`{subject}` may not serve connection `{connection}`: its `workers` list in runtime.yaml does not name it"
                )));
            }
            None => {
                return Err(Status::not_found(format!(
                    "no remote connection `{connection}`: runtime.yaml has none by that name with `dispatch: remote`"
                )));
            }
        }
    }
    Ok(connections.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote() -> RemoteConnections {
        RemoteConnections::from([
            ("messaging".to_owned(), vec!["worker-a".to_owned()]),
            ("casework".to_owned(), vec!["worker-a".to_owned(), "worker-b".to_owned()]),
        ])
    }

    #[test]
    fn a_worker_serves_only_the_connections_that_name_it() {
        let remote = remote();
        assert_eq!(lanes(&remote, "worker-a", &[]).ok(), Some(vec!["casework".to_owned(), "messaging".to_owned()]));
        assert_eq!(lanes(&remote, "worker-b", &[]).ok(), Some(vec!["casework".to_owned()]));
        assert_eq!(lanes(&remote, "worker-b", &["casework".to_owned()]).ok(), Some(vec!["casework".to_owned()]));
        let denied = lanes(&remote, "worker-b", &["messaging".to_owned()]).err().map(|s| s.code());
        assert_eq!(denied, Some(tonic::Code::PermissionDenied));
        let unknown = lanes(&remote, "worker-a", &["breg".to_owned()]).err().map(|s| s.code());
        assert_eq!(unknown, Some(tonic::Code::NotFound));
        assert_eq!(lanes(&remote, "nobody", &[]).ok(), Some(Vec::new()));
    }
}
