//! Issue 26, the HTTP edge: who may send a body is decided from the head,
//! a client that never reads its answers is let go, and the request's
//! `Host` and query are not trusted further than they should be. Each
//! limit is set low in the test's configuration and met over real sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_client::{TokenSpec, WsError, mint_hs256};
use switchboard_tests::cluster::{OPERATOR_TOKEN, SECRET};
use switchboard_tests::{Cluster, ClusterSpec, Proc, TENANT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn gateway_addr(cluster: &Cluster) -> SocketAddr {
    cluster.gateways[0].addr.expect("the gateway listens")
}

/// The first response line and headers, waiting at most `within`.
async fn response_head(stream: &mut TcpStream, within: Duration) -> String {
    let deadline = tokio::time::Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Reads until the server closes (true) or `within` passes (false),
/// keeping at most the first 64 KiB; also counts what was read.
async fn drain(stream: &mut TcpStream, within: Duration) -> (bool, usize, String) {
    let deadline = tokio::time::Instant::now() + within;
    let mut kept = Vec::new();
    let mut total = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (true, total, String::from_utf8_lossy(&kept).into_owned());
            }
            Ok(Ok(n)) => {
                total += n;
                if kept.len() < 64 * 1024 {
                    kept.extend_from_slice(&buf[..n]);
                }
            }
            Err(_) => return (false, total, String::from_utf8_lossy(&kept).into_owned()),
        }
    }
}

/// A request head as a client sends it, declaring `length` body bytes.
fn head(method: &str, path: &str, token: Option<&str>, length: usize) -> String {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "{method} {path} HTTP/1.1\r\nHost: gw\r\n{auth}Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// 22 MB: about what a plugin upload may be.
const BIG: usize = 22 << 20;

#[tokio::test]
async fn admin_and_operator_requests_are_refused_from_their_head() {
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    let addr = gateway_addr(&cluster);
    let user = cluster.token("mallory", "phone");
    let admin = mint_hs256(
        SECRET,
        &TokenSpec::new(TENANT, "root", Some("phone"), 600).admin(),
    )
    .unwrap();
    let refused_at_once = |request: String, status: &'static str| async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let started = Instant::now();
        let answer = response_head(&mut s, Duration::from_secs(5)).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{request}: {answer}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{request}: answered after {:?}",
            started.elapsed()
        );
        // And not kept open to read the rest of the body.
        let (closed, _, _) = drain(&mut s, Duration::from_secs(3)).await;
        assert!(closed, "{request}: the connection stays open for the body");
    };
    // A user without the admin role, declaring 22 MB and sending nothing.
    for (method, path) in [
        ("PUT", "/v1/admin/plugins/moderation"),
        ("PUT", "/v1/admin/plugins/moderation/shadow"),
        ("POST", "/v1/admin/plugins/moderation/replay"),
    ] {
        refused_at_once(head(method, path, Some(&user), BIG), "403").await;
    }
    // The operator API with a wrong token, and with a tenant's token.
    for token in ["operator-token-guessed-wrong", user.as_str()] {
        refused_at_once(
            head("POST", "/v1/operator/tenants", Some(token), BIG),
            "401",
        )
        .await;
        refused_at_once(
            head("PATCH", "/v1/operator/tenants/acme", Some(token), BIG),
            "401",
        )
        .await;
    }
    // Also when part of the body is on its way: the refusal still reads.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head("PUT", "/v1/admin/plugins/moderation", Some(&user), BIG).as_bytes())
        .await
        .unwrap();
    s.write_all(&vec![b'x'; 256 * 1024]).await.unwrap();
    let answer = response_head(&mut s, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");

    // The positive control: an admin's head alone is not answered, since
    // the gateway waits for the upload it may read.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head("PUT", "/v1/admin/plugins/moderation", Some(&admin), BIG).as_bytes())
        .await
        .unwrap();
    let answer = response_head(&mut s, Duration::from_secs(1)).await;
    assert_eq!(answer, "", "the admin's upload is waited for");
    // And the operator's token is let through to its body.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head("POST", "/v1/operator/tenants", Some(OPERATOR_TOKEN), 1000).as_bytes())
        .await
        .unwrap();
    let answer = response_head(&mut s, Duration::from_secs(1)).await;
    assert_eq!(answer, "", "the operator's body is waited for");
}

/// A path of the OpenAPI document with its parameters filled in.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|segment| match segment {
            "{hook}" => "moderation",
            "{id}" => "dm:a:b",
            "{user}" | "{device}" => "someone",
            "{message_id}" => "1",
            "{blob_ref}" => "m0123456789abcdef0123456789abcdef",
            "{token}" => "bogus.token",
            other => other,
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_route_with_a_body_refuses_a_caller_without_credentials_from_the_head() {
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    let addr = gateway_addr(&cluster);
    let doc: Value = reqwest::get(format!("{}/v1/openapi.json", cluster.gateways[0].http()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if op.get("requestBody").is_none() {
                continue;
            }
            let method = method.to_ascii_uppercase();
            let mut s = TcpStream::connect(addr).await.unwrap();
            let request = head(&method, &concrete(path), None, 100_000);
            s.write_all(request.as_bytes()).await.unwrap();
            let answer = response_head(&mut s, Duration::from_secs(2)).await;
            let refused = ["401", "403", "404"]
                .iter()
                .any(|status| answer.starts_with(&format!("HTTP/1.1 {status}")));
            assert!(refused, "{method} {path} waited for its body: {answer:?}");
            checked += 1;
        }
    }
    assert!(checked >= 11, "{checked} routes with a body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_pipelines_and_never_reads_is_reset_within_the_write_timeout() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nhttp_write_timeout_ms = 1500\n".into(),
        ..Default::default()
    })
    .await;
    let addr = gateway_addr(&cluster);
    // 200 requests for a large document (about 120 KB each, 24 MB in all:
    // far more than the socket buffers hold), then nothing read.
    let n = 200;
    let pipelined = "GET /v1/openapi.json HTTP/1.1\r\nHost: gw\r\n\r\n".repeat(n);
    let flood = || async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(pipelined.as_bytes()).await.unwrap();
        s
    };
    let answers = |text: &str, total: usize| (text.matches("HTTP/1.1 200").count(), total);

    // Below the bound: a client that pauses less than the timeout, then
    // reads, gets every answer.
    let mut patient = flood().await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (closed, total, _) = drain(&mut patient, Duration::from_secs(3)).await;
    assert!(!closed, "a reader that pauses below the bound is kept");
    let per_answer = total / n;
    assert!(
        total >= n * 100_000,
        "every answer came: {total} bytes ({per_answer} each)"
    );

    // Past it: five connections flood and never read. Each is reset once
    // its answers have made no progress for 1.5 s.
    let mut floods = Vec::new();
    for _ in 0..5 {
        floods.push(flood().await);
    }
    tokio::time::sleep(Duration::from_millis(1500 + 2500)).await;
    for mut s in floods {
        let (closed, total, text) = drain(&mut s, Duration::from_secs(5)).await;
        assert!(closed, "the flood's connection was closed");
        let (whole, _) = answers(&text, total);
        assert!(
            total < n * 100_000,
            "it was cut off before it read ({total} bytes, {whole} answers seen)"
        );
    }
    assert!(
        cluster
            .logs()
            .contains("HTTP response made no write progress"),
        "the gateway says why"
    );
    // The gateway serves on.
    let ok = reqwest::get(format!("{}/healthz", cluster.gateways[0].http()))
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn request_heads_are_bounded_by_the_connection_buffer() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nhttp_buffer_bytes = 16384\n".into(),
        ..Default::default()
    })
    .await;
    let addr = gateway_addr(&cluster);
    let with_header = |bytes: usize| async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let filler = "a".repeat(bytes);
        let request = format!("GET /healthz HTTP/1.1\r\nHost: gw\r\nX-Filler: {filler}\r\n\r\n");
        s.write_all(request.as_bytes()).await.unwrap();
        response_head(&mut s, Duration::from_secs(5)).await
    };
    // A head just inside the buffer, and one just past it.
    let fits = with_header(16384 - 200).await;
    assert!(fits.starts_with("HTTP/1.1 200"), "{fits}");
    let past = with_header(16384 + 10).await;
    assert!(past.starts_with("HTTP/1.1 431"), "{past}");
}

const APP_ORIGIN: &str = "https://app.example";

#[tokio::test]
async fn a_percent_encoded_query_token_meets_the_same_origin_check() {
    let initech_secret = "initech-secret-0123456789";
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "[[tenants]]\nid = \"initech\"\nhs256_secrets = [\"{initech_secret}\"]\nallowed_origins = [\"{APP_ORIGIN}\"]\n"
        ),
        ..Default::default()
    })
    .await;
    let base = cluster.gateways[0].http();
    let http = reqwest::Client::new();
    let upgrade = |query_token: String| {
        http.get(format!("{base}/v1/ws?token={query_token}"))
            .header("origin", APP_ORIGIN)
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .send()
    };
    // One character percent-encoded: `%2E` for the first dot.
    let encoded = |token: &str| token.replacen('.', "%2E", 1);
    // acme does not list the origin (initech does): refused, also encoded.
    let acme = cluster.token("alice", "web");
    assert_eq!(upgrade(acme.clone()).await.unwrap().status(), 403);
    let r = upgrade(encoded(&acme)).await.unwrap();
    assert_eq!(r.status(), 403, "the encoded token is judged as decoded");
    // initech's token opens from its origin, encoded or not.
    let initech = mint_hs256(
        initech_secret,
        &TokenSpec::new("initech", "alice", Some("web"), 600),
    )
    .unwrap();
    assert_eq!(upgrade(encoded(&initech)).await.unwrap().status(), 101);
}

/// A browser offers its token as a subprotocol, out of the URL that
/// proxies and access logs keep: it opens the same session, meets the
/// same origin check, and the answer names `switchboard.v1`, never the
/// token.
#[tokio::test]
async fn a_token_offered_as_a_subprotocol_opens_a_session_without_the_url() {
    let initech_secret = "initech-secret-0123456789";
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "[[tenants]]\nid = \"initech\"\nhs256_secrets = [\"{initech_secret}\"]\nallowed_origins = [\"{APP_ORIGIN}\"]\n"
        ),
        ..Default::default()
    })
    .await;
    let base = cluster.gateways[0].http();
    let http = reqwest::Client::new();
    let upgrade = |protocols: String| {
        http.get(format!("{base}/v1/ws"))
            .header("origin", APP_ORIGIN)
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("sec-websocket-protocol", protocols)
            .send()
    };
    let initech = mint_hs256(
        initech_secret,
        &TokenSpec::new("initech", "alice", Some("web"), 600),
    )
    .unwrap();
    let opened = upgrade(format!("switchboard.v1, switchboard.token.{initech}"))
        .await
        .unwrap();
    assert_eq!(opened.status(), 101);
    assert_eq!(
        opened.headers()["sec-websocket-protocol"],
        "switchboard.v1",
        "the answer names the protocol, not the token"
    );
    // The token alone: the answer could select nothing the browser would
    // accept, so it is refused with the reason.
    let alone = upgrade(format!("switchboard.token.{initech}"))
        .await
        .unwrap();
    assert_eq!(alone.status(), 400);
    assert!(alone.text().await.unwrap().contains("switchboard.v1"));
    // The same origin check: acme does not list the origin.
    let acme = cluster.token("alice", "web");
    let refused = upgrade(format!("switchboard.v1, switchboard.token.{acme}"))
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    // No token anywhere: 401.
    assert_eq!(
        upgrade("switchboard.v1".into()).await.unwrap().status(),
        401
    );
}

#[tokio::test]
async fn websocket_connects_are_rated_per_user() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nconnects_per_second = 0.2\nconnect_burst = 3.0\n".into(),
        ..Default::default()
    })
    .await;
    let url = cluster.gateways[0].ws();
    let connect = |user: &str, device: &str| {
        let token = cluster.token(user, device);
        let url = url.clone();
        async move { switchboard_tests::connect_ws(&url, &token).await }
    };
    // At the burst: three connects of one user open.
    let mut open = Vec::new();
    for i in 0..3 {
        open.push(connect("alice", &format!("d{i}")).await.unwrap());
    }
    // Just past it: refused with 429 `rate_limited` before anything is
    // written, also for a device that never connected.
    match connect("alice", "d3").await {
        Err(WsError::Refused { status, body }) => {
            assert_eq!(status, 429, "{body}");
            assert!(body.contains("rate_limited"), "{body}");
        }
        Err(e) => panic!("refused otherwise: {e}"),
        Ok(_) => panic!("a fourth connect within the burst was let through"),
    }
    // Another user has a bucket of their own.
    open.push(connect("bob", "d0").await.unwrap());
    // The connections that opened stay open.
    for ws in &mut open {
        crate::support::assert_alive(ws).await;
    }
}

#[tokio::test]
async fn upload_urls_come_from_the_configuration_never_the_host_header() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "public_url = \"https://chat.example.com/\"\n".into(),
        ..Default::default()
    })
    .await;
    let rest = cluster.rest(0, "alice");
    let grant = |host: &'static str| {
        rest.raw()
            .post(format!("{}/v1/media", rest.base()))
            .bearer_auth(rest.token())
            .header("host", host)
            .header("x-forwarded-proto", "http")
            .json(&json!({"mime": "image/png", "size": 10}))
            .send()
    };
    let ticket: Value = grant("evil.example").await.unwrap().json().await.unwrap();
    let url = ticket["upload_url"].as_str().unwrap();
    assert!(
        url.starts_with("https://chat.example.com/v1/blobs/"),
        "{url}"
    );
    // Without public_url: the address the gateway listens on.
    let plain = Cluster::start(ClusterSpec::default()).await;
    let rest = plain.rest(0, "alice");
    let ticket: Value = rest
        .raw()
        .post(format!("{}/v1/media", rest.base()))
        .bearer_auth(rest.token())
        .header("host", "evil.example")
        .json(&json!({"mime": "image/png", "size": 10}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = ticket["upload_url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/v1/blobs/", plain.gateways[0].http())),
        "{url}"
    );
}

#[tokio::test]
async fn tokens_are_held_to_nbf_their_lifetime_and_their_tenants_issuer() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\n[limits]\nmax_token_lifetime_secs = 3600\n"
        ),
        ..Default::default()
    })
    .await;
    let base = cluster.gateways[0].http();
    let http = reqwest::Client::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mint = |secret: &str, claims: Value| {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    let status = |token: String| {
        let http = http.clone();
        let base = base.clone();
        async move {
            let r = http
                .get(format!("{base}/v1/conversations"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.text().await.unwrap())
        }
    };
    let acme = |extra: Value| {
        let mut claims = json!({"tenant": TENANT, "sub": "alice", "iat": now, "exp": now + 600});
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        mint(SECRET, claims)
    };
    assert_eq!(status(acme(json!({}))).await.0, 200);
    // Not valid before its nbf (past the 5 s leeway).
    let (code, text) = status(acme(json!({"nbf": now + 120}))).await;
    assert_eq!(code, 401, "{text}");
    assert!(text.contains("nbf"), "{text}");
    // A lifetime at the maximum, and past it.
    assert_eq!(status(acme(json!({"exp": now + 3600}))).await.0, 200);
    let (code, text) = status(acme(json!({"exp": now + 3600 + 60}))).await;
    assert_eq!(code, 401, "{text}");
    assert!(text.contains("3600"), "{text}");

    // A tenant that requires an issuer and an audience, set over the
    // operator API.
    let tenant_secret = "issuer-tenant-secret-0123456789";
    let created = http
        .post(format!("{base}/v1/operator/tenants"))
        .bearer_auth(OPERATOR_TOKEN)
        .json(&json!({
            "id": "issued",
            "hs256_secrets": [tenant_secret],
            "issuer": "https://id.issued.example",
            "audience": "chat",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let shown: Value = created.json().await.unwrap();
    assert_eq!(shown["issuer"], "https://id.issued.example");
    let issued = |extra: Value| {
        let mut claims = json!({"tenant": "issued", "sub": "alice", "exp": now + 600});
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        mint(tenant_secret, claims)
    };
    let good = issued(json!({"iss": "https://id.issued.example", "aud": ["mail", "chat"]}));
    switchboard_tests::eventually(
        "the new tenant verifies",
        Duration::from_secs(10),
        || async { (status(good.clone()).await.0 == 200).then_some(()) },
    )
    .await;
    for bad in [
        json!({}),
        json!({"iss": "https://id.issued.example"}),
        json!({"iss": "https://id.other.example", "aud": "chat"}),
        json!({"iss": "https://id.issued.example", "aud": "mail"}),
    ] {
        assert_eq!(status(issued(bad.clone())).await.0, 401, "{bad}");
    }
    // The requirement can be lifted again (null).
    let changed = http
        .patch(format!("{base}/v1/operator/tenants/issued"))
        .bearer_auth(OPERATOR_TOKEN)
        .json(&json!({"issuer": null, "audience": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);
    let plain = issued(json!({}));
    switchboard_tests::eventually(
        "the lifted requirement",
        Duration::from_secs(10),
        || async { (status(plain.clone()).await.0 == 200).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn metrics_are_off_the_public_listener_unless_asked_for() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let base = cluster.gateways[0].http();
    let r = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(
        r.status(),
        404,
        "a gateway does not serve /metrics by default"
    );
    // They are on the metrics listener.
    let m = crate::support::scrape(cluster.gateways[0].metrics_addr.unwrap()).await;
    assert!(!m.is_empty());
    let on = Cluster::start(ClusterSpec {
        extra_config: "metrics_on_listen = true\n".into(),
        ..Default::default()
    })
    .await;
    let r = reqwest::get(format!("{}/metrics", on.gateways[0].http()))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn dev_answers_only_loopback_and_configured_host_names() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("dev.toml");
    std::fs::write(&config, "allowed_hosts = [\"chat.test\"]\n").unwrap();
    let args = vec![
        "dev".to_owned(),
        "--config".into(),
        config.display().to_string(),
        "--data-dir".into(),
        dir.path().join("data").display().to_string(),
        "--nats-port".into(),
        "0".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ];
    let envs = vec![(
        "SWITCHBOARD_NATS_SERVER".to_owned(),
        switchboard_tests::nats_server_bin().display().to_string(),
    )];
    let dev = Proc::start(
        args,
        envs,
        dir.path().join("dev.log"),
        "Switchboard dev is running",
    )
    .await;
    let addr = dev.addr.unwrap();
    let http = reqwest::Client::new();
    let with_host = |method: reqwest::Method, path: &str, host: String| {
        http.request(method, format!("http://{addr}{path}"))
            .header("host", host)
    };
    let port = addr.port();
    // A page whose own name now points at 127.0.0.1 (DNS rebinding) still
    // sends its name: refused, also the token endpoint and the upgrade.
    for path in ["/healthz", "/v1/dev/token", "/v1/ws?token=x"] {
        let r = with_host(
            reqwest::Method::GET,
            path,
            format!("rebind.evil.example:{port}"),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status(), 403, "{path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["code"], "forbidden");
    }
    let minted = with_host(
        reqwest::Method::POST,
        "/v1/dev/token",
        format!("evil.example:{port}"),
    )
    .json(&json!({"user": "alice"}))
    .send()
    .await
    .unwrap();
    assert_eq!(minted.status(), 403);
    // Loopback names and the configured one are answered.
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("chat.test:{port}"),
    ] {
        let r = with_host(reqwest::Method::GET, "/healthz", host.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{host}");
    }
    // Dev keeps /metrics on its loopback port.
    let m = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(m.status(), 200);
    // A dev token names when it was issued, and it verifies.
    let minted: Value = http
        .post(format!("http://{addr}/v1/dev/token"))
        .json(&json!({"user": "alice"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = minted["token"].as_str().unwrap();
    let r = http
        .get(format!("http://{addr}/v1/conversations"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
