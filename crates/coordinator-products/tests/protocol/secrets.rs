//! No secret, token or payload in anything returned: errors are forced from every
//! direction (token endpoints that quote the secret back, products that echo the
//! token and the command into error bodies) and every rendering of every result is
//! searched for the values.

use std::time::Duration;

use coordinator_products::{ProductClient, Sending, TokenSource};
use serde_json::json;

use crate::support::{CLIENT_SECRET, Product, RUN_ID, Recorded, Reply, Tokens, command, nothing_listening, reply, url};

const TOKEN_PREFIX: &str = "issued-bearer-7c1d";
const PAYLOAD: &str = "payload-marker-e41b";

/// Echoes the request (its token and body) back in an answer with `status`.
fn echo(status: u16, r: &Recorded) -> Reply {
    let quoted = format!(
        "{{\"error\": \"{}\", \"body\": {:?}}}",
        r.header("authorization").unwrap_or_default(),
        String::from_utf8_lossy(&r.body)
    );
    reply(status, &[], quoted)
}

/// Every rendering of the outcomes of a call, a receipt and an observation.
async fn renderings(conn: &coordinator_products::Connection) -> Vec<String> {
    let client = ProductClient::new().with_max_response_bytes(4096);
    let input = command(json!({"text": PAYLOAD}));
    let call = client.call_explained(conn, "submit-message/v1", &input, RUN_ID, 1, Sending::Keyed).await;
    let receipt = client.receipt_explained(conn, "k").await;
    let observation = client.observe_explained(conn, "result", "r-1").await;
    let mut out = vec![
        format!("{call:?}"),
        format!("{call:#?}"),
        format!("{:?}", call.answer),
        format!("{:?}", receipt.answer),
        format!("{:?}", observation.answer),
        call.reason.to_string(),
        format!("{receipt:?}"),
        receipt.reason.to_string(),
        format!("{observation:?}"),
        observation.reason.to_string(),
    ];
    for reason in [&call.reason, &receipt.reason, &observation.reason] {
        let mut source = std::error::Error::source(reason);
        while let Some(e) = source {
            out.push(format!("{e} / {e:?}"));
            source = e.source();
        }
    }
    out.push(format!("{conn:?}"));
    out.push(format!("{client:?}"));
    out
}

fn assert_clean(what: &str, renderings: &[String]) {
    for text in renderings {
        for value in [CLIENT_SECRET, TOKEN_PREFIX, PAYLOAD] {
            assert!(!text.contains(value), "{what}: `{value}` leaked into: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_failures_never_show_the_client_secret() {
    for tokens in [Tokens::Refuse(400), Tokens::Refuse(401), Tokens::Refuse(500), Tokens::Garbage] {
        let product = Product::start_with(tokens, |r| echo(500, r)).await;
        let texts = renderings(&product.connection()).await;
        assert_clean(&format!("{tokens:?}"), &texts);
        assert!(product.requests().is_empty());
    }
    let product = Product::start(|r| echo(500, r)).await;
    let mut conn = product.connection();
    if let TokenSource::ClientSecret { token_endpoint, .. } = &mut conn.token {
        *token_endpoint = url(&format!("http://{}/oauth/token", nothing_listening().await));
    }
    assert_clean("token endpoint down", &renderings(&conn).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn product_failures_never_show_the_token_or_the_payload() {
    for status in [200, 302, 400, 404, 409, 429, 500, 502, 503, 504] {
        let product = Product::start_with(Tokens::Issue(TOKEN_PREFIX), move |r| echo(status, r)).await;
        let texts = renderings(&product.connection()).await;
        assert_clean(&format!("HTTP {status}"), &texts);
        assert_eq!(product.requests().len(), 3, "HTTP {status}: the echo scenario did not run");
        let echoed = String::from_utf8_lossy(&product.requests()[0].body).into_owned();
        assert!(echoed.contains(PAYLOAD), "the payload was not in the request, so the test proves nothing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_failures_never_show_the_token_or_the_payload() {
    let product = Product::start_with(Tokens::Issue(TOKEN_PREFIX), |_| Reply::Hang).await;
    let conn = product.connection().with_timeouts(Duration::from_millis(200), Duration::from_millis(200));
    assert_clean("timeout", &renderings(&conn).await);
    // A body over the limit that quotes the token.
    let product = Product::start_with(Tokens::Issue(TOKEN_PREFIX), |r| {
        reply(200, &[], format!("{}{}", r.header("authorization").unwrap_or_default(), " ".repeat(8192)))
    })
    .await;
    assert_clean("too large", &renderings(&product.connection()).await);
}

#[test]
fn configuration_never_shows_the_client_secret() {
    let source = TokenSource::ClientSecret {
        token_endpoint: url("https://idp.example/oauth/token"),
        client_id: "coordinator".into(),
        client_secret: coordinator_products::Secret::new(CLIENT_SECRET),
        scope: None,
    };
    let conn = coordinator_products::Connection::new(url("https://messaging.example"), source.clone());
    assert_clean("config", &[format!("{source:?}"), format!("{source:#?}"), format!("{conn:?}"), format!("{conn:#?}")]);
    let static_source = TokenSource::Static(coordinator_products::Secret::new(TOKEN_PREFIX));
    assert_clean("static", &[format!("{static_source:?}")]);
}
