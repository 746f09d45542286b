//! `private_key_jwt` (RFC 7523) against the simulators' token endpoint: a
//! connection with a private key gets a token for every request with a fresh
//! signed assertion; an assertion signed by another key, for another audience,
//! or replayed gets none. The keys under tests/keys exist for these tests only.

use coordinator_products::{AssertionKey, Connection, HttpUrl, ProductClient, TokenSource};
use coordinator_sim::{Client, SimConfig, Simulators};

const PRIVATE: &str = include_str!("keys/client-es256.pem");
const PUBLIC: &str = include_str!("keys/client-es256.pub.pem");
/// A second key the endpoint does not know.
const OTHER_PRIVATE: &str = include_str!("keys/other-es256.pem");

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"))
}

/// The simulators with one `private_key_jwt` client, served on `127.0.0.1:0`: (base URL, simulators).
async fn serve() -> (String, Simulators) {
    let sims = Simulators::new(SimConfig {
        clients: vec![Client::with_assertion_key("coordinator-jwt", "k1", PUBLIC)],
        ..SimConfig::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let router = coordinator_sim::app(&sims);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (format!("http://{addr}"), sims)
}

fn connection(base: &str, pem: &str) -> Connection {
    let key = AssertionKey::from_pem(pem.as_bytes(), "k1").unwrap_or_else(|e| panic!("{e}"));
    let url = |path: &str| HttpUrl::parse(&format!("{base}{path}")).unwrap_or_else(|e| panic!("{e}"));
    Connection::new(
        url("/sim/casework"),
        TokenSource::PrivateKeyJwt {
            token_endpoint: url("/sim/token"),
            client_id: "coordinator-jwt".into(),
            key,
            scope: None,
        },
    )
}

#[test]
fn every_request_gets_a_token_with_a_fresh_assertion_and_a_wrong_key_gets_none() {
    runtime().block_on(async {
        let (base, sims) = serve().await;
        let client = ProductClient::new();
        let good = connection(&base, PRIVATE);
        for _ in 0..3 {
            let _ = client.observe(&good, "result", "review-404").await;
        }
        assert_eq!(sims.tokens.issued(), 3, "one token per request");
        let wrong = connection(&base, OTHER_PRIVATE);
        let _ = client.observe(&wrong, "result", "review-404").await;
        assert_eq!(sims.tokens.issued(), 3, "an assertion signed by an unknown key gets no token");
    });
}

#[test]
fn a_replayed_assertion_or_one_for_another_audience_is_refused() {
    runtime().block_on(async {
        let (base, _sims) = serve().await;
        let key = AssertionKey::from_pem(PRIVATE.as_bytes(), "k1").unwrap_or_else(|e| panic!("{e}"));
        let endpoint = format!("{base}/sim/token");
        let post = |assertion: String| {
            let endpoint = endpoint.clone();
            async move {
                let form = [
                    ("grant_type", "client_credentials".to_owned()),
                    ("client_assertion_type", coordinator_products::ASSERTION_TYPE.to_owned()),
                    ("client_assertion", assertion),
                ];
                let response = reqwest::Client::new().post(&endpoint).form(&form).send().await;
                response.map(|r| r.status().as_u16()).unwrap_or_else(|e| panic!("{e}"))
            }
        };
        let assertion = key.sign("coordinator-jwt", &endpoint).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(post(assertion.clone()).await, 200);
        assert_eq!(post(assertion).await, 401, "a replayed assertion");
        let elsewhere = key.sign("coordinator-jwt", "http://elsewhere.test/token").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(post(elsewhere).await, 401, "another audience");
        let impostor = key.sign("someone-else", &endpoint).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(post(impostor).await, 401, "another issuer");
    });
}
