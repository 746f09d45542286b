//! [`Connection`]: where one product lives, how a fresh credential for it is
//! acquired, and how long to wait for it. Plain configuration: resolving secret
//! references (`env:`, `file:`) is the caller's job; this crate only ever holds the
//! resolved value inside a [`Secret`].

use std::time::Duration;

use crate::assertion::AssertionKey;
use crate::endpoint::HttpUrl;
use crate::secret::Secret;

/// One product connection (docs/reference/products.md; `runtime.yaml`
/// `connections`: docs/reference/runtime.md#a-connection).
#[derive(Debug, Clone)]
pub struct Connection {
    /// The product's base URL; its path is kept (`http://127.0.0.1:7400/sim/messaging`).
    pub base_url: HttpUrl,
    /// How a fresh bearer token is acquired for every attempt.
    pub token: TokenSource,
    /// How long establishing a connection (TCP, TLS) may take. Running out of it means
    /// nothing was sent: a definite "not done".
    pub connect_timeout: Duration,
    /// How long the request may take once the connection is up, reading the whole
    /// response included. Running out of it after sending leaves the effect uncertain.
    /// The HTTP client's overall timeout is `connect_timeout + request_timeout`, so a
    /// slow connect never eats into it.
    pub request_timeout: Duration,
}

impl Connection {
    /// Connect timeout when none is configured (as in `runtime.yaml`).
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// Request timeout when none is configured (as in `runtime.yaml`).
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

    /// A connection with the default timeouts.
    pub fn new(base_url: HttpUrl, token: TokenSource) -> Self {
        Connection {
            base_url,
            token,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// The same connection with other timeouts.
    pub fn with_timeouts(mut self, connect_timeout: Duration, request_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self.request_timeout = request_timeout;
        self
    }
}

/// Where the bearer token for a connection comes from.
#[derive(Debug, Clone)]
pub enum TokenSource {
    /// OAuth 2.0 client credentials (RFC 6749 §4.4), client authentication in the
    /// form body (`client_secret_post`). A token is requested for every attempt and
    /// dropped after it: never cached, never stored, never logged.
    ClientSecret {
        /// The authorization server's token endpoint.
        token_endpoint: HttpUrl,
        /// The coordinator's client id at that server.
        client_id: String,
        /// The client secret.
        client_secret: Secret,
        /// The `scope` parameter, when the server wants one.
        scope: Option<String>,
    },
    /// OAuth 2.0 client credentials with `private_key_jwt` client authentication
    /// (RFC 7523): a fresh signed assertion for every token request.
    PrivateKeyJwt {
        /// The authorization server's token endpoint (also the assertion's audience).
        token_endpoint: HttpUrl,
        /// The coordinator's client id at that server (the assertion's issuer and subject).
        client_id: String,
        /// The private key that signs assertions.
        key: AssertionKey,
        /// The `scope` parameter, when the server wants one.
        scope: Option<String>,
    },
    /// A fixed bearer token: for tests and `coordinator dev` only, where the
    /// simulators accept any token.
    Static(Secret),
}
