//! Acquiring the bearer token for ONE attempt
//! (docs/reference/protection.md#fresh-credentials-per-attempt): an OAuth 2.0
//! client-credentials grant, `POST {token_endpoint}` with the form
//! `grant_type=client_credentials&client_id=…&client_secret=…[&scope=…]` (or,
//! with `private_key_jwt`, `client_assertion_type` and a freshly signed
//! `client_assertion` instead of the secret), answered by `{"access_token":
//! "…"}`. The token lives only as long as the attempt that asked for it: it is
//! never cached, stored or logged. Failures are described by kind and status
//! only: the endpoint's error text may quote what it was sent.

use reqwest::header::ACCEPT;
use serde_json::Value;

use crate::assertion::ASSERTION_TYPE;
use crate::body;
use crate::connection::TokenSource;
use crate::secret::Secret;

/// The largest token response read; real ones are a few kilobytes.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;

/// Why no token could be acquired. Whatever the kind, the operation was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The token endpoint could not be connected to (refused, DNS, TLS, timeout).
    #[error("the token endpoint could not be connected to")]
    Unreachable,
    /// The token endpoint did not answer in time, or the connection broke.
    #[error("the token endpoint did not answer")]
    NoAnswer,
    /// The token endpoint refused (any status other than 2xx).
    #[error("the token endpoint answered HTTP {status}")]
    Refused {
        /// The HTTP status.
        status: u16,
    },
    /// The answer carries no usable `access_token`.
    #[error("the token endpoint's answer carries no usable access_token")]
    InvalidResponse,
    /// The client assertion (`private_key_jwt`) could not be signed.
    #[error("the client assertion could not be signed")]
    Unsigned,
    /// A static token is empty or cannot be sent in an `Authorization` header.
    #[error("the static token is empty or not visible ASCII")]
    Unusable,
}

/// A fresh token for one attempt.
pub(crate) async fn acquire(http: &reqwest::Client, source: &TokenSource) -> Result<Secret, TokenError> {
    let assertion;
    let (token_endpoint, client_id, scope, mut form) = match source {
        TokenSource::Static(token) if usable(token.expose()) => return Ok(token.clone()),
        TokenSource::Static(_) => return Err(TokenError::Unusable),
        TokenSource::ClientSecret { token_endpoint, client_id, client_secret, scope } => {
            (token_endpoint, client_id, scope, vec![("client_secret", client_secret.expose())])
        }
        TokenSource::PrivateKeyJwt { token_endpoint, client_id, key, scope } => {
            assertion = key.sign(client_id, token_endpoint.url().as_str()).map_err(|_| TokenError::Unsigned)?;
            let form = vec![("client_assertion_type", ASSERTION_TYPE), ("client_assertion", assertion.as_str())];
            (token_endpoint, client_id, scope, form)
        }
    };
    form.extend([("grant_type", "client_credentials"), ("client_id", client_id.as_str())]);
    if let Some(scope) = scope {
        form.push(("scope", scope.as_str()));
    }
    let request = http.post(token_endpoint.url().clone()).header(ACCEPT, "application/json").form(&form);
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) if e.is_connect() || e.is_builder() => return Err(TokenError::Unreachable),
        Err(_) => return Err(TokenError::NoAnswer),
    };
    let status = response.status();
    if !status.is_success() {
        return Err(TokenError::Refused { status: status.as_u16() });
    }
    let body = body::read(response, MAX_TOKEN_RESPONSE_BYTES).await.map_err(|_| TokenError::NoAnswer)?;
    let Ok(Value::Object(mut answer)) = serde_json::from_slice::<Value>(&body) else {
        return Err(TokenError::InvalidResponse);
    };
    match answer.remove("access_token") {
        Some(Value::String(token)) if usable(&token) => Ok(Secret::new(token)),
        _ => Err(TokenError::InvalidResponse),
    }
}

/// A token must be non-empty visible ASCII (RFC 6750 `b64token` is a subset), so
/// that `Bearer <token>` is one well-formed header value.
fn usable(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())
}
