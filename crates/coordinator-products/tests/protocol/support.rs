//! Small test products on 127.0.0.1:0: an axum server that records every request
//! and answers from a script (with its own OAuth token endpoint), raw TCP servers
//! that misbehave below HTTP, and an address where nothing listens.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use coordinator_core::machine::run::Command;
use coordinator_products::{Connection, HttpUrl, Secret, TokenSource};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// The client secret every test connection uses; it must never show up in output.
pub const CLIENT_SECRET: &str = "s3cr3t-client-secret-4f9a";

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `POST`.
    pub method: Method,
    /// The path exactly as sent (percent-encoding kept).
    pub path: String,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// The client's end of the TCP connection the request came on.
    pub peer: SocketAddr,
}

impl Recorded {
    /// A header's value as text, if present.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }
}

/// What the scripted product does with a request.
pub enum Reply {
    /// Answer with this response.
    Respond(Response),
    /// Never answer (until the client gives up).
    Hang,
}

/// Shorthand for a status, extra headers and a body.
pub fn reply(status: u16, headers: &[(&'static str, &'static str)], body: impl Into<String>) -> Reply {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, body.into()).into_response();
    for (name, value) in headers {
        response.headers_mut().insert(*name, axum::http::HeaderValue::from_static(value));
    }
    Reply::Respond(response)
}

/// How the product's token endpoint behaves.
#[derive(Debug, Clone, Copy)]
pub enum Tokens {
    /// Issues `<prefix>-<n>` for the n-th request (from 1).
    Issue(&'static str),
    /// Refuses with this status and a body that quotes the request it got.
    Refuse(u16),
    /// Answers 200 with something that is not a token response.
    Garbage,
}

type Script = dyn Fn(&Recorded) -> Reply + Send + Sync;

struct Shared {
    script: Box<Script>,
    tokens: Tokens,
    requests: Mutex<Vec<Recorded>>,
    token_requests: Mutex<Vec<Recorded>>,
}

/// A running scripted product.
pub struct Product {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Product {
    /// Starts a product that issues tokens and answers operations from `script`.
    pub async fn start(script: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Product {
        Product::start_with(Tokens::Issue("tok"), script).await
    }

    /// Starts a product whose token endpoint behaves as `tokens`.
    pub async fn start_with(tokens: Tokens, script: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Product {
        let shared = Arc::new(Shared {
            script: Box::new(script),
            tokens,
            requests: Mutex::new(Vec::new()),
            token_requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/oauth/token", axum::routing::post(token))
            .fallback(product)
            .with_state(shared.clone());
        let listener = bind().await;
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("local_addr: {e}"));
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Product { addr, shared }
    }

    /// The product's base URL (with a path, as under `coordinator dev`).
    pub fn base(&self) -> HttpUrl {
        url(&format!("http://{}/sim/messaging", self.addr))
    }

    /// The product's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A client-secret connection to this product through its own token endpoint.
    pub fn connection(&self) -> Connection {
        let token = TokenSource::ClientSecret {
            token_endpoint: url(&format!("http://{}/oauth/token", self.addr)),
            client_id: "coordinator".into(),
            client_secret: Secret::new(CLIENT_SECRET),
            scope: Some("messaging.send".into()),
        };
        connection(self.base(), token)
    }

    /// Every operation, receipt and completion request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Every token request so far.
    pub fn token_requests(&self) -> Vec<Recorded> {
        self.shared.token_requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

async fn product(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded { method, path: uri.path().to_owned(), headers, body, peer };
    let reply = (shared.script)(&recorded);
    shared.requests.lock().unwrap_or_else(PoisonError::into_inner).push(recorded);
    match reply {
        Reply::Respond(response) => response,
        Reply::Hang => std::future::pending().await,
    }
}

async fn token(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded { method: Method::POST, path: "/oauth/token".into(), headers, body: body.clone(), peer };
    let n = {
        let mut requests = shared.token_requests.lock().unwrap_or_else(PoisonError::into_inner);
        requests.push(recorded);
        requests.len()
    };
    match shared.tokens {
        Tokens::Issue(prefix) => {
            let answer =
                serde_json::json!({"access_token": format!("{prefix}-{n}"), "token_type": "Bearer", "expires_in": 300});
            axum::Json(answer).into_response()
        }
        Tokens::Refuse(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            let quoted = String::from_utf8_lossy(&body).into_owned();
            (status, axum::Json(serde_json::json!({"error": "invalid_client", "error_description": quoted})))
                .into_response()
        }
        Tokens::Garbage => (StatusCode::OK, "<html>token service</html>").into_response(),
    }
}

/// A raw TCP server that reads each request whole, then writes `answer` (possibly
/// nothing) and closes the connection. Returns its base URL and a count of
/// requests read.
pub async fn raw(answer: &'static [u8]) -> (HttpUrl, Arc<AtomicUsize>) {
    let listener = bind().await;
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("local_addr: {e}"));
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                if read_request(&mut socket).await {
                    seen.fetch_add(1, Ordering::SeqCst);
                    let _ = socket.write_all(answer).await;
                    let _ = socket.flush().await;
                }
                drop(socket);
            });
        }
    });
    (url(&format!("http://{addr}/raw")), count)
}

/// Reads one HTTP/1.1 request (headers and a `Content-Length` body).
async fn read_request(socket: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(n) = socket.read(&mut chunk).await else { return false };
        if n == 0 {
            return false;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if buf.len() >= end + 4 + length {
            return true;
        }
    }
}

/// An address where nothing listens (bound, then released).
pub async fn nothing_listening() -> SocketAddr {
    let listener = bind().await;
    listener.local_addr().unwrap_or_else(|e| panic!("local_addr: {e}"))
}

/// A listener that never accepts, with its backlog filled, so that connecting to it
/// hangs. Keep the returned parts alive for the test.
pub async fn unanswered() -> (HttpUrl, (TcpListener, Vec<TcpStream>)) {
    let socket = TcpSocket::new_v4().unwrap_or_else(|e| panic!("socket: {e}"));
    socket.bind("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("addr: {e}"))).unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = socket.local_addr().unwrap_or_else(|e| panic!("local_addr: {e}"));
    let listener = socket.listen(0).unwrap_or_else(|e| panic!("listen: {e}"));
    let mut fillers = Vec::new();
    for _ in 0..8 {
        if let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_millis(100), TcpStream::connect(addr)).await {
            fillers.push(stream);
        }
    }
    (url(&format!("http://{addr}/")), (listener, fillers))
}

async fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"))
}

/// Parses a URL the tests wrote.
pub fn url(text: &str) -> HttpUrl {
    HttpUrl::parse(text).unwrap_or_else(|e| panic!("{text} {e}"))
}

/// A connection with generous timeouts (the machine may be loaded).
pub fn connection(base: HttpUrl, token: TokenSource) -> Connection {
    Connection::new(base, token).with_timeouts(Duration::from_secs(5), Duration::from_secs(10))
}

/// A connection with a fixed token (no token endpoint).
pub fn static_connection(base: HttpUrl) -> Connection {
    connection(base, TokenSource::Static(Secret::new("static-token")))
}

/// A prepared command.
pub fn command(input: serde_json::Value) -> Command {
    Command { input, idempotency_key: "0190f3a4-7b1c-7cde-8f00-000000000001:send-notice".into() }
}

/// The run id the tests use.
pub const RUN_ID: &str = "0190f3a4-7b1c-7cde-8f00-000000000001";
