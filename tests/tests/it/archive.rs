//! Tiered storage (F14) end to end, on the local blob directory and on a
//! real S3-compatible server: a conversation with edits and deletes is
//! read through REST, the worker is restarted with archiving on, and once
//! its buckets are in the blob store every history page, replay and
//! version list reads exactly as before. Archived messages can still be
//! edited and deleted; a lost archive object is a clear error.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use switchboard_client::WsClient;
use switchboard_protocol::ClientFrame;
use switchboard_protocol::{ConversationKind, ErrorCode};
use switchboard_tests::s3::S3Server;
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[derive(Clone, Copy, Debug)]
enum Backend {
    Local,
    S3,
}

/// Everything bob can read of the conversation over REST, as JSON texts:
/// the whole history, the history page by page (as a client scrolls
/// back), pages after a seq, and the versions of every message.
async fn everything(cluster: &Cluster, conv: &str) -> Vec<String> {
    let rest = cluster.rest(0, "bob");
    let get = |path: String| {
        let rest = rest.clone();
        async move {
            let r = rest
                .raw()
                .get(format!("{}{path}", rest.base()))
                .bearer_auth(rest.token())
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap();
            assert_eq!(status, 200, "GET {path}: {body}");
            body
        }
    };
    let mut out = Vec::new();
    let all = get(format!("/v1/conversations/{conv}/messages?limit=200")).await;
    out.push(all.to_string());
    let mut before: Option<u64> = None;
    loop {
        let mut path = format!("/v1/conversations/{conv}/messages?limit=3");
        if let Some(b) = before {
            path.push_str(&format!("&before_seq={b}"));
        }
        let page = get(path).await;
        let messages = page["messages"].as_array().unwrap().clone();
        let Some(last) = messages.last() else { break };
        before = last["seq"].as_u64();
        out.push(page.to_string());
    }
    for after in [0, 4, 9] {
        let page = get(format!(
            "/v1/conversations/{conv}/messages?after_seq={after}&limit=5"
        ))
        .await;
        out.push(page.to_string());
    }
    for m in all["messages"].as_array().unwrap() {
        let id = m["message_id"].as_str().unwrap();
        let versions = get(format!("/v1/conversations/{conv}/messages/{id}/versions")).await;
        out.push(format!("{id}: {versions}"));
    }
    out
}

async fn updated(ws: &mut WsClient, frame: ClientFrame) {
    ws.send(&frame).await.unwrap();
    expect_update(ws).await;
}

/// The archive objects of `conv`, once there are `n`.
async fn wait_for_objects(dir: &Path, n: usize, cluster: &Cluster) -> Vec<PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        // The mark follows the object's write: wait for the writer's word.
        if found.len() >= n && cluster.logs().contains("bucket archived") {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no archive object in {} after 30 s; logs:\n{}",
            dir.display(),
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn history_status(cluster: &Cluster, conv: &str) -> (u16, Value) {
    let rest = cluster.rest(0, "bob");
    let r = rest
        .raw()
        .get(format!(
            "{}/v1/conversations/{conv}/messages?limit=200",
            rest.base()
        ))
        .bearer_auth(rest.token())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn archive_round_trip(backend: Backend) {
    let s3_dir = tempfile::tempdir().unwrap();
    let s3 = match backend {
        Backend::S3 => Some(S3Server::start(s3_dir.path()).await),
        Backend::Local => None,
    };
    let blobs = s3.as_ref().map(|s| s.config()).unwrap_or_default();
    let mut cluster = Cluster::start(ClusterSpec {
        extra_config: format!("inbox_ttl_secs = 1\n{blobs}"),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut ids = Vec::new();
    for i in 1..=12 {
        let (id, _) = send_acked(&mut alice, &conv, &format!("m{i}"), &format!("text {i}")).await;
        ids.push(id);
    }
    updated(&mut alice, edit_frame(&conv, ids[1], "two, edited")).await;
    updated(&mut alice, edit_frame(&conv, ids[1], "two, edited again")).await;
    updated(&mut alice, edit_frame(&conv, ids[4], "five, edited")).await;
    updated(&mut alice, delete_frame(&conv, ids[4])).await;
    updated(&mut alice, delete_frame(&conv, ids[6])).await;
    let before = everything(&cluster, &conv).await;

    // Archiving on: today's bucket is old enough with `after_days = 0`.
    let mut config = std::fs::read_to_string(&cluster.config).unwrap();
    config.push_str("\n[archive]\nafter_days = 0\nevery_secs = 1\n");
    std::fs::write(&cluster.config, config).unwrap();
    cluster.workers[0].terminate().await;
    cluster.workers[0].restart().await;
    let objects_dir = match &s3 {
        Some(s3) => s3.object_path(&format!("archive/acme/{conv}")),
        None => cluster
            .dir
            .path()
            .join("store-owner/blobs/archive/acme")
            .join(&conv),
    };
    let objects = wait_for_objects(&objects_dir, 1, &cluster).await;
    assert_eq!(objects.len(), 1, "one object per day: {objects:?}");
    let bytes = std::fs::read(&objects[0]).unwrap();
    assert!(
        !bytes.windows(7).any(|w| w == b"text 10"),
        "the object is compressed"
    );
    assert_eq!(everything(&cluster, &conv).await, before);

    // Archived messages can still be edited and deleted, and new ones
    // join the same day.
    let mut alice = cluster.ws(0, "alice", "a").await;
    updated(
        &mut alice,
        edit_frame(&conv, ids[0], "one, edited after archiving"),
    )
    .await;
    updated(&mut alice, delete_frame(&conv, ids[1])).await;
    send_acked(&mut alice, &conv, "m13", "text 13").await;
    let (status, page) = history_status(&cluster, &conv).await;
    assert_eq!(status, 200);
    let messages = page["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 13);
    let by_seq = |seq: u64| {
        messages
            .iter()
            .find(|m| m["seq"].as_u64() == Some(seq))
            .unwrap()
    };
    assert_eq!(by_seq(1)["content"]["text"], "one, edited after archiving");
    assert!(by_seq(2)["content"].is_null() && !by_seq(2)["deleted_at"].is_null());
    assert_eq!(by_seq(13)["content"]["text"], "text 13");

    // A lost object: the history says what is missing instead of
    // shrinking (a restart empties the worker's cache of archives).
    std::fs::remove_file(&objects[0]).unwrap();
    cluster.workers[0].terminate().await;
    cluster.workers[0].restart().await;
    let (status, body) = history_status(&cluster, &conv).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], serde_json::json!(ErrorCode::Unavailable));
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("archive/acme/{conv}/")),
        "names the object: {message}"
    );
    // The newest messages are live and still read.
    let rest = cluster.rest(0, "bob");
    let recent = rest
        .raw()
        .get(format!(
            "{}/v1/conversations/{conv}/messages?after_seq=12",
            rest.base()
        ))
        .bearer_auth(rest.token())
        .send()
        .await
        .unwrap();
    assert_eq!(recent.status().as_u16(), 200);
}

#[tokio::test]
async fn history_reads_the_same_after_archiving_to_s3() {
    archive_round_trip(Backend::S3).await;
}

#[tokio::test]
async fn history_reads_the_same_after_archiving_to_the_local_directory() {
    archive_round_trip(Backend::Local).await;
}

/// Retention and disappearing messages (v1.2) reach archived buckets:
/// messages that were archived before their time are taken out of the
/// bucket's object when it comes (the object is rewritten), and history
/// shows them deleted, as it shows live ones.
#[tokio::test]
async fn disappearing_messages_go_from_archived_buckets_too() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "expiry_pass_secs = 1\n[archive]\nafter_days = 0\nevery_secs = 1\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let alice = cluster.rest(0, "alice");
    let (status, _) = call(
        &alice,
        "PATCH",
        &format!("/v1/conversations/{conv}"),
        Some(serde_json::json!({"disappearing_secs": 8})),
    )
    .await;
    assert_eq!(status, 200);
    let mut ws = cluster.ws(0, "alice", "a").await;
    for i in 1..=3 {
        send_acked(&mut ws, &conv, &format!("d{i}"), &format!("secret {i}")).await;
    }
    let objects_dir = cluster
        .dir
        .path()
        .join("store-owner/blobs/archive/acme")
        .join(&conv);
    let object = wait_for_objects(&objects_dir, 1, &cluster).await.remove(0);
    let read = |path: &Path| {
        let bytes = std::fs::read(path).unwrap();
        let contents = switchboard_store::archive::decode("object", &bytes).unwrap();
        serde_json::to_string(&contents).unwrap()
    };
    assert!(
        read(&object).contains("secret 1"),
        "archived before its time"
    );

    // Gone at its time, from the object and from history.
    switchboard_tests::eventually(
        "the archived messages expire",
        Duration::from_secs(30),
        || async {
            let (status, page) = history_status(&cluster, &conv).await;
            assert_eq!(status, 200, "{page}");
            let texts = page["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| !m["content"].is_null())
                .count();
            (texts == 0).then_some(())
        },
    )
    .await;
    let now = read(&object);
    assert!(!now.contains("secret"), "{now}");
    let (_, page) = history_status(&cluster, &conv).await;
    let seqs: Vec<u64> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.contains(&1) && seqs.contains(&3),
        "rows keep their seq: {seqs:?}"
    );
}
