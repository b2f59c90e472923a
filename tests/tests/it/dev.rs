//! `switchboard dev` as one process: kill -9 of the whole thing loses no
//! acked message, takes its nats-server down with it, and a restart on
//! the same data directory keeps everything.

use std::time::Duration;

use switchboard_client::rest::HistoryParams;
use switchboard_client::{RestClient, TokenSpec, mint_hs256};
use switchboard_protocol::ConversationKind;
use switchboard_tests::Proc;

use crate::support::*;

const DEMO_SECRET: &str = "dev-test-secret-0123456789";

fn token(user: &str) -> String {
    mint_hs256(DEMO_SECRET, &TokenSpec::new("demo", user, None, 3600)).unwrap()
}

fn nats_pid(data: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(data.join("nats/nats-server.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .contains("State:\tZ")
}

async fn wait_dead(pid: u32) {
    for _ in 0..100 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nats-server {pid} outlived switchboard dev");
}

#[tokio::test]
async fn dev_keeps_acked_messages_across_kill9_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = vec![
        "dev".to_owned(),
        "--data-dir".into(),
        data.display().to_string(),
        "--nats-port".into(),
        "0".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ];
    let envs = vec![
        ("SWITCHBOARD_DEMO_SECRET".to_owned(), DEMO_SECRET.to_owned()),
        (
            "SWITCHBOARD_NATS_SERVER".to_owned(),
            switchboard_tests::nats_server_bin().display().to_string(),
        ),
    ];
    let mut dev = Proc::start(
        args,
        envs,
        dir.path().join("dev.log"),
        "Switchboard dev is running",
    )
    .await;

    // The browser client and its dev-only token endpoint.
    let http = reqwest::Client::new();
    let page = http
        .get(dev.http())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("<title>Switchboard</title>"));
    // Its script and the SDK it runs on, from the same origin.
    for asset in ["/web/app.js", "/web/switchboard.js"] {
        let script = http
            .get(format!("{}{asset}", dev.http()))
            .send()
            .await
            .unwrap();
        assert_eq!(script.status(), 200, "{asset}");
        assert!(
            script.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/javascript")
        );
    }
    let minted: serde_json::Value = http
        .post(format!("{}/v1/dev/token", dev.http()))
        .json(&serde_json::json!({"user": "carol", "device": "browser"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let carol = RestClient::new(&dev.http(), minted["token"].as_str().unwrap());
    assert!(
        carol
            .conversations()
            .await
            .unwrap()
            .conversations
            .is_empty()
    );
    let spec: serde_json::Value = http
        .get(format!("{}/v1/openapi.json", dev.http()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(spec["openapi"], "3.1.0");

    // The demo tenant is a record like any tenant's: its admin sets a
    // webhook, which may be a loopback receiver here.
    let (hook, arrivals) = hook_endpoint(axum::http::StatusCode::OK).await;
    let admin = RestClient::new(
        &dev.http(),
        &mint_hs256(
            DEMO_SECRET,
            &TokenSpec::new("demo", "root", None, 3600).admin(),
        )
        .unwrap(),
    );
    let hooks = serde_json::json!({"webhooks": [{"url": hook, "secret": "demo-webhook-secret-0123", "events": ["message.created"]}]});
    let (status, body) = call(&admin, "PUT", "/v1/admin/webhooks", Some(hooks)).await;
    assert_eq!(status, 200, "{body}");

    let rest = RestClient::new(&dev.http(), &token("alice"));
    let (view, _) = rest
        .create_conversation(ConversationKind::Direct, &["bob"], None)
        .await
        .unwrap();
    let conv = view.conversation_id.as_str().to_owned();
    let mut alice = switchboard_tests::connect_ws(&dev.ws(), &token("alice"))
        .await
        .unwrap();
    let mut acked = Vec::new();
    for i in 0..20 {
        acked.push(send_acked(&mut alice, &conv, &format!("d{i}"), "durable").await);
    }
    switchboard_tests::eventually(
        "the demo tenant's webhook gets the messages",
        Duration::from_secs(20),
        || async {
            let got = arrivals.lock().unwrap();
            (got.iter()
                .filter(|(body, _)| body.contains("message.created"))
                .count()
                >= 20)
                .then_some(())
        },
    )
    .await;
    let nats = nats_pid(&data).expect("dev wrote nats-server's pid");

    dev.kill9().await;
    wait_dead(nats).await;

    dev.restart().await;
    let page = RestClient::new(&dev.http(), &token("bob"))
        .history(
            &conv,
            HistoryParams {
                limit: Some(200),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut stored: Vec<_> = page
        .messages
        .iter()
        .map(|m| (m.message_id, m.seq))
        .collect();
    stored.reverse();
    assert_eq!(stored, acked, "every acked message is back, unchanged");
    let mut alice = switchboard_tests::connect_ws(&dev.ws(), &token("alice"))
        .await
        .unwrap();
    let (_, seq) = send_acked(&mut alice, &conv, "after", "still counting").await;
    assert_eq!(seq, 21);

    // A second dev on the same data directory refuses to start, and leaves
    // the running one (and its nats-server) alone.
    let second = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(switchboard_tests::switchboard_bin())
            .args(["dev", "--data-dir", &data.display().to_string()])
            .args(["--nats-port", "0", "--listen", "127.0.0.1:0"])
            .env(
                "SWITCHBOARD_NATS_SERVER",
                switchboard_tests::nats_server_bin(),
            )
            .output(),
    )
    .await
    .expect("a second dev exits at once")
    .unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("in use by another `switchboard dev`"),
        "{stderr}"
    );
    let (_, seq) = send_acked(&mut alice, &conv, "after-second", "still here").await;
    assert_eq!(seq, 22);

    // SIGTERM stops it cleanly, nats-server included.
    let nats = nats_pid(&data).unwrap();
    let status = dev.terminate().await.expect("dev exits on SIGTERM");
    assert!(status.success(), "{status:?}\n{}", dev.log());
    wait_dead(nats).await;
}

/// A production gateway serves the browser client only when the file
/// says `web_client = true`, and has no dev tokens either way (the page
/// then asks for a token).
#[tokio::test]
async fn a_gateway_serves_the_browser_client_only_when_configured() {
    use switchboard_tests::{Cluster, ClusterSpec};
    let plain = Cluster::start(ClusterSpec::default()).await;
    let with_client = Cluster::start(ClusterSpec {
        extra_config: "web_client = true\n".into(),
        ..ClusterSpec::default()
    })
    .await;
    let get = |cluster: &Cluster, path: &str| {
        let url = format!("{}{path}", cluster.rest(0, "alice").base());
        async move { reqwest::get(url).await.unwrap().status().as_u16() }
    };
    assert_eq!(get(&plain, "/").await, 404);
    assert_eq!(get(&plain, "/web/app.js").await, 404);
    assert_eq!(get(&with_client, "/").await, 200);
    assert_eq!(get(&with_client, "/web/switchboard.js").await, 200);
    for cluster in [&plain, &with_client] {
        let minted = reqwest::Client::new()
            .post(format!("{}/v1/dev/token", cluster.rest(0, "alice").base()))
            .json(&serde_json::json!({"user": "mallory"}))
            .send()
            .await
            .unwrap();
        assert_eq!(minted.status(), 404);
    }
}
