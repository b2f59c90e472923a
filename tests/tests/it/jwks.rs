//! A tenant that brings its identity provider: tokens signed RS256 and
//! ES256 by keys the provider publishes as a JSON Web Key Set at the
//! tenant's `jwks_url`, fetched by the gateway from a stand-in provider
//! on loopback. Rotation, removal, made-up key ids and oversized sets.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use jsonwebtoken::Algorithm;
use switchboard_client::{TokenSpec, WsError, mint_with_key};
use switchboard_tests::tls::fixture;
use switchboard_tests::{Cluster, ClusterSpec};

/// What the stand-in provider serves, and how often it was asked.
#[derive(Clone, Default)]
struct Provider {
    document: Arc<Mutex<Vec<u8>>>,
    fetches: Arc<AtomicUsize>,
}

impl Provider {
    async fn start() -> (Self, String) {
        let provider = Self::default();
        let app = axum::Router::new()
            .route(
                "/jwks.json",
                axum::routing::get(|State(p): State<Provider>| async move {
                    p.fetches.fetch_add(1, Ordering::SeqCst);
                    let body = p.document.lock().unwrap().clone();
                    ([("content-type", "application/jwk-set+json")], body)
                }),
            )
            .with_state(provider.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (provider, url)
    }

    /// Serves the public keys `kids`, padded with spaces to `size` bytes
    /// if given.
    fn serve(&self, kids: &[&str], size: Option<usize>) {
        let all = std::fs::read_to_string(fixture("jwks-public.json")).unwrap();
        let mut set: serde_json::Value = serde_json::from_str(&all).unwrap();
        set["keys"]
            .as_array_mut()
            .unwrap()
            .retain(|k| kids.contains(&k["kid"].as_str().unwrap()));
        let mut document = serde_json::to_vec(&set).unwrap();
        if let Some(size) = size {
            assert!(document.len() <= size);
            document.resize(size, b' ');
        }
        *self.document.lock().unwrap() = document;
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

/// A token of the `idp` tenant signed by the provider's key `kid`.
fn token(kid: &str, user: &str) -> String {
    let (algorithm, file) = match kid {
        "ec-1" => (Algorithm::ES256, "jwks-ec-1.p8.der"),
        "rsa-2" => (Algorithm::RS256, "jwks-rsa-2.der"),
        _ => (Algorithm::RS256, "jwks-rsa-1.der"),
    };
    let der = std::fs::read(fixture(file)).unwrap();
    mint_with_key(
        algorithm,
        &der,
        kid,
        &TokenSpec::new("idp", user, Some("web"), 600),
    )
    .unwrap()
}

/// A token signed by `signer`'s key but naming `kid`.
fn token_naming(kid: &str, signer: &str) -> String {
    let file = if signer == "rsa-2" {
        "jwks-rsa-2.der"
    } else {
        "jwks-rsa-1.der"
    };
    let der = std::fs::read(fixture(file)).unwrap();
    let spec = TokenSpec::new("idp", "mallory", Some("web"), 600);
    mint_with_key(Algorithm::RS256, &der, kid, &spec).unwrap()
}

const MAX_BYTES: usize = 4096;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_of_an_identity_providers_key_set_verify_and_follow_its_rotation() {
    let (provider, url) = Provider::start().await;
    provider.serve(&["rsa-1", "ec-1"], None);
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "[[tenants]]\nid = \"idp\"\njwks_url = \"{url}\"\n\n[limits]\njwks_min_refetch_secs = 1\njwks_max_bytes = {MAX_BYTES}\n\
             jwks_allow_private_targets = true\n"
        ),
        ..Default::default()
    })
    .await;
    let base = cluster.gateways[0].http();
    let ws = cluster.gateways[0].ws();
    let http = reqwest::Client::new();
    let list = |token: String| {
        http.get(format!("{base}/v1/conversations"))
            .bearer_auth(token)
            .send()
    };

    // RS256 and ES256 tokens of the provider's keys, on both planes.
    let mut live = switchboard_tests::connect_ws(&ws, &token("rsa-1", "alice"))
        .await
        .unwrap();
    assert_eq!(list(token("ec-1", "bob")).await.unwrap().status(), 200);
    assert_eq!(list(token("rsa-1", "bob")).await.unwrap().status(), 200);

    // Made-up key ids cost the provider at most one fetch per
    // jwks_min_refetch_secs, however many come.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = provider.fetches();
    for i in 0..30 {
        let status = list(token_naming(&format!("made-up-{i}"), "rsa-2"))
            .await
            .unwrap()
            .status();
        assert_eq!(status, 401);
    }
    let asked = provider.fetches() - before;
    assert!(
        (1..=2).contains(&asked),
        "{asked} fetches for 30 unknown kids"
    );

    // Rotation: the provider moves to rsa-2. Its first token verifies at
    // once (the set is fetched again for it); rsa-1 is gone, so its open
    // session ends and its tokens are refused.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    provider.serve(&["rsa-2"], None);
    assert_eq!(list(token("rsa-2", "carol")).await.unwrap().status(), 200);
    match live.next_frame_within(Duration::from_secs(5)).await {
        Err(WsError::ClosedBy { code, .. }) => assert_eq!(code, 4003),
        other => panic!("the session of a removed key stayed: {other:?}"),
    }
    assert_eq!(list(token("rsa-1", "alice")).await.unwrap().status(), 401);

    // A set of exactly jwks_max_bytes is read...
    tokio::time::sleep(Duration::from_millis(1100)).await;
    provider.serve(&["rsa-1"], Some(MAX_BYTES));
    assert_eq!(list(token("rsa-1", "alice")).await.unwrap().status(), 200);
    // ...one byte more is not: the fetch fails and the keys held stay.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    provider.serve(&["rsa-2"], Some(MAX_BYTES + 1));
    let before = provider.fetches();
    assert_eq!(list(token("rsa-2", "carol")).await.unwrap().status(), 401);
    assert_eq!(provider.fetches(), before + 1, "the set was asked for");
    assert_eq!(list(token("rsa-1", "alice")).await.unwrap().status(), 200);
}

/// A key set on a private address (here loopback, where a gateway's own
/// NATS monitoring or an admin API could answer), directly or by a
/// redirect, is never fetched unless `jwks_allow_private_targets`: the
/// provider is not asked, and the tenant's tokens do not verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_set_on_a_private_address_is_not_fetched_by_default() {
    let (provider, url) = Provider::start().await;
    provider.serve(&["rsa-1"], None);
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "[[tenants]]\nid = \"idp\"\njwks_url = \"{url}\"\n\n[limits]\njwks_min_refetch_secs = 1\n"
        ),
        ..Default::default()
    })
    .await;
    let base = cluster.gateways[0].http();
    for _ in 0..3 {
        let status = reqwest::Client::new()
            .get(format!("{base}/v1/conversations"))
            .bearer_auth(token("rsa-1", "alice"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 401);
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    assert_eq!(provider.fetches(), 0, "a private address was called");
    let log = cluster.gateways[0].log();
    assert!(log.contains("is a private address"), "{log}");
}
