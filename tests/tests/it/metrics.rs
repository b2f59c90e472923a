//! Issue 15: every process serves Prometheus metrics and health on
//! `--metrics-listen`, with `/healthz` and `/readyz` (a gateway also on its
//! own port with `metrics_on_listen`). The families move under traffic.

use std::time::Duration;

use switchboard_protocol::ConversationKind;
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[tokio::test]
async fn every_process_serves_metrics_that_move_under_traffic() {
    let cluster = Cluster::start(ClusterSpec {
        // The inbox size comes from the leader's expiry sweep.
        extra_config: "inbox_sweep_secs = 1\n".into(),
        ..ClusterSpec::default()
    })
    .await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    let gateway = cluster.gateways[0]
        .metrics_addr
        .expect("the gateway's metrics listener");
    let worker = cluster.workers[0]
        .metrics_addr
        .expect("the worker's metrics listener");
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    let gateway_before = scrape(gateway).await;
    let worker_before = scrape(worker).await;

    let sends = 20;
    for i in 0..sends {
        let id = format!("m{i}");
        alice.send(&send_frame(&conv, &id, "hello")).await.unwrap();
        expect_ack(&mut alice, &id).await;
        expect_message(&mut bob).await;
    }
    let rest = cluster.rest(0, "alice");
    let grant = rest
        .raw()
        .post(format!("{}/v1/media", rest.base()))
        .bearer_auth(rest.token())
        .json(&serde_json::json!({"mime": "image/png", "size": 1234}))
        .send()
        .await
        .unwrap();
    assert_eq!(grant.status(), 201);
    rest.conversation(&conv).await.unwrap();
    alice.send_text("{not json").await.unwrap();
    let (code, ..) = expect_error(&mut alice).await;
    assert_eq!(code, switchboard_protocol::ErrorCode::InvalidFrame);
    // Receipts and the store's other commits land within a window.
    tokio::time::sleep(Duration::from_millis(700)).await;

    let g = scrape(gateway).await;
    let moved =
        |family: &str, labels: &str| sum(&g, family, labels) - sum(&gateway_before, family, labels);
    assert!(
        sum(&g, "switchboard_gateway_connections", r#"tenant="acme""#) >= 2.0,
        "{g:?}"
    );
    assert!(
        moved(
            "switchboard_gateway_frames_in_total",
            r#"type="send_message""#
        ) >= sends as f64
    );
    assert!(moved("switchboard_gateway_frames_in_total", r#"type="invalid""#) >= 1.0);
    assert!(moved("switchboard_gateway_frames_out_total", r#"type="ack""#) >= sends as f64);
    assert!(moved("switchboard_gateway_frames_out_total", r#"type="message""#) >= sends as f64);
    assert!(moved("switchboard_gateway_sends_total", "") >= sends as f64);
    assert!(moved("switchboard_gateway_acks_total", "") >= sends as f64);
    assert!(
        moved(
            "switchboard_gateway_errors_total",
            r#"code="invalid_frame""#
        ) >= 1.0
    );
    assert!(moved("switchboard_gateway_send_ack_seconds_count", "") >= sends as f64);
    assert!(moved("switchboard_jetstream_publish_seconds_count", "") >= 1.0);
    assert!(sum(&g, "switchboard_jetstream_pending_acks", "") >= 0.0);
    assert!(moved("switchboard_blob_uploads_total", "") >= 1.0);
    assert!(moved("switchboard_blob_upload_bytes_total", "") >= 1234.0);
    assert!(sum(&g, "process_resident_memory_bytes", "") > 1e6);
    assert!(sum(&g, "process_open_fds", "") > 3.0);
    assert!(sum(&g, "process_cpu_seconds_total", "") > 0.0);
    assert!(sum(&g, "process_start_time_seconds", "") > 1.7e9);
    assert_eq!(
        sum(
            &g,
            "switchboard_build_info",
            &format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))
        ),
        1.0
    );
    // REST requests by the route they matched, never by their path.
    assert_eq!(
        moved(
            "switchboard_gateway_http_requests_total",
            r#"route="/v1/media",method="POST",status="201""#
        ),
        1.0,
        "{g:?}"
    );
    assert!(
        moved(
            "switchboard_gateway_http_request_seconds_count",
            r#"route="/v1/media""#
        ) >= 1.0
    );
    assert!(
        g.keys().any(
            |k| k.starts_with("switchboard_gateway_http_requests_total{")
                && k.contains(r#"route="/v1/conversations/{"#)
        ),
        "{g:?}"
    );
    assert!(
        g.keys().all(|k| !k.contains(&conv)),
        "a conversation id in a label"
    );

    let w = scrape(worker).await;
    let moved =
        |family: &str, labels: &str| sum(&w, family, labels) - sum(&worker_before, family, labels);
    assert!(
        moved("switchboard_store_commit_jobs_count", "") >= 1.0,
        "{w:?}"
    );
    assert!(moved("switchboard_store_commit_seconds_count", "") >= 1.0);
    assert!(moved("switchboard_writer_batch_commands_count", "") >= 1.0);
    assert!(moved("switchboard_writer_deliveries_total", r#"route="users""#) >= 2.0 * sends as f64);
    assert_eq!(sum(&w, "switchboard_writer_partitions_held", ""), 8.0);
    assert!(
        w.keys()
            .any(|k| k.starts_with("switchboard_writer_consumer_lag{"))
    );
    assert!(w.keys().all(|k| !k.contains("process=\"gateway\"")));
    // Bob acked none of the messages: his device's inbox holds them all,
    // as a sweep after them counts.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let w = scrape(worker).await;
        if sum(&w, "switchboard_writer_inbox_entries", "") >= sends as f64 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "inbox entries: {}",
            sum(&w, "switchboard_writer_inbox_entries", "")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Health on the worker's listener.
    let health = reqwest::get(format!("http://{worker}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready = reqwest::get(format!("http://{worker}/readyz"))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let ready: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(ready["nats"], "connected", "{ready}");
    assert_eq!(ready["store"], "ok", "{ready}");
    assert_eq!(ready["partitions"]["held"], 8, "{ready}");
}
