//! Erasure (v1.2) through the contract's names: a user with a bit of
//! everything (messages live and archived, an edit, a reply in a thread,
//! a mention of them, reactions, a pin, blocks both ways, reports by and
//! about them, an upload, keys in the directory, a scheduled message, a
//! conversation they left) is erased by a tenant admin; the worker is
//! killed -9 halfway and the job still finishes; a second request is
//! harmless; another
//! tenant's admin is refused. Then every keyspace of the store, every
//! message of every JetStream stream and bucket, every archive object and
//! every blob is read, and nothing names the user but their direct
//! conversation's id, which is made of its members' ids (documented).

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use switchboard_protocol::{ClientFrame, ConversationKind, MessageId, ReactAction};
use switchboard_tests::cluster::{OPERATOR_TOKEN, OTHER_TENANT};
use switchboard_tests::{Cluster, ClusterSpec, eventually};

use crate::support::*;

const ADA: &str = "er_ada";
const BOB: &str = "er_bob";
const CY: &str = "er_cy";

/// Whether the user's id occurs in `hay` once the allowed ids are taken
/// out.
fn names(hay: &[u8], allowed: &[Vec<u8>]) -> bool {
    names_user(hay, allowed, ADA)
}

fn names_user(hay: &[u8], allowed: &[Vec<u8>], user: &str) -> bool {
    let mut hay = hay.to_vec();
    for a in allowed {
        while let Some(i) = hay.windows(a.len()).position(|w| w == a.as_slice()) {
            hay.drain(i..i + a.len());
        }
    }
    hay.windows(user.len()).any(|w| w == user.as_bytes())
}

/// Every key and value of every keyspace of the stopped embedded store
/// that names `user`.
fn store_rows_naming(db: &Path, allowed: &[Vec<u8>], user: &str) -> Vec<String> {
    assert!(db.exists(), "no store at {}", db.display());
    let db = fjall::Database::builder(db).open().unwrap();
    let mut found = Vec::new();
    let names = db.list_keyspace_names();
    assert!(names.len() > 25, "every keyspace: {names:?}");
    for name in names {
        let space = db
            .keyspace(&name, fjall::KeyspaceCreateOptions::default)
            .unwrap();
        for kv in space.iter() {
            let (k, v) = kv.into_inner().unwrap();
            if names_user(&k, allowed, user) || names_user(&v, allowed, user) {
                found.push(format!(
                    "{name}: {} = {}",
                    String::from_utf8_lossy(&k),
                    String::from_utf8_lossy(&v)
                ));
            }
        }
    }
    found
}

/// Every message of every stream (KV buckets included) that names the
/// user in its subject, headers or body.
async fn stream_messages_naming(client: &async_nats::Client, allowed: &[Vec<u8>]) -> Vec<String> {
    let js = async_nats::jetstream::new(client.clone());
    let streams: Vec<String> = js
        .stream_names()
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .map(|n| n.unwrap())
        .collect();
    let mut found = Vec::new();
    for name in streams {
        let mut stream = js.get_stream(&name).await.unwrap();
        let state = stream.info().await.unwrap().state.clone();
        if state.messages == 0 {
            continue;
        }
        for seq in state.first_sequence..=state.last_sequence {
            let Ok(m) = stream.get_raw_message(seq).await else {
                continue;
            };
            let headers = format!("{:?}", m.headers);
            if names(m.subject.as_bytes(), allowed)
                || names(headers.as_bytes(), allowed)
                || names(&m.payload, allowed)
            {
                found.push(format!(
                    "{name} #{seq} {}: {}",
                    m.subject,
                    String::from_utf8_lossy(&m.payload)
                ));
            }
        }
    }
    found
}

/// Every file under `dir` that names the user; archive objects are read
/// as the store reads them (they are compressed).
fn files_naming(dir: &Path, allowed: &[Vec<u8>]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            found.extend(files_naming(&path, allowed));
            continue;
        }
        let shown = path.display().to_string();
        let bytes = std::fs::read(&path).unwrap_or_default();
        let text = if shown.contains("/archive/") {
            match switchboard_store::archive::decode(&shown, &bytes) {
                Ok(contents) => serde_json::to_vec(&contents).unwrap(),
                Err(_) => bytes,
            }
        } else {
            bytes
        };
        if names(shown.as_bytes(), allowed) || names(&text, allowed) {
            found.push(shown);
        }
    }
    found
}

async fn react(ws: &mut switchboard_client::WsClient, conv: &str, id: MessageId, emoji: &str) {
    ws.send(&ClientFrame::React {
        conversation_id: conv.parse().unwrap(),
        message_id: id,
        emoji: emoji.into(),
        action: ReactAction::Add,
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_user_leaves_nothing_but_anonymous_tombstones() {
    let mut cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\n[media]\ngc_grace_secs = 3600\ngc_every_secs = 1\n\
             [push]\nallow_private_targets = true\n"
        ),
        ..Default::default()
    })
    .await;
    // A webhook, so that her messages are events on SB_EVENTS too.
    let (hook, _) = hook_endpoint(axum::http::StatusCode::OK).await;
    give_tenant_a_webhook(&cluster, &hook).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let group = cluster
        .create(ConversationKind::Group, ADA, &[BOB, CY])
        .await;
    let dm = cluster.create(ConversationKind::Direct, BOB, &[ADA]).await;
    let left = cluster.create(ConversationKind::Group, BOB, &[ADA]).await;
    let ada_rest = cluster.rest(0, ADA);
    let bob_rest = cluster.rest(0, BOB);
    let mut ada = cluster.ws(0, ADA, "phone").await;
    let mut bob = cluster.ws(0, BOB, "b").await;

    // Messages, an edit, a thread, a mention, reactions both ways.
    let (root, _) = send_acked(&mut bob, &group, "b1", "a thread root").await;
    let (mine, _) = send_acked(&mut ada, &group, "a1", "ada's secret plan").await;
    ada.send(&edit_frame(&group, mine, "ada's secret plan, edited"))
        .await
        .unwrap();
    expect_update(&mut ada).await;
    send_with(
        &mut ada,
        &group,
        "a2",
        "ada replies",
        json!({"thread_id": root.to_string()}),
    )
    .await
    .unwrap();
    send_with(
        &mut bob,
        &group,
        "b2",
        "hey ada",
        json!({"mentions": [ADA]}),
    )
    .await
    .unwrap();
    react(&mut ada, &group, root, "👍").await;
    react(&mut bob, &group, mine, "🎉").await;
    send_acked(&mut ada, &dm, "a3", "a private word").await;
    send_acked(&mut ada, &left, "a4", "said before leaving").await;
    // A pin, blocks both ways, reports by and about her.
    let (status, body) = call(
        &ada_rest,
        "POST",
        &format!("/v1/conversations/{group}/pins"),
        Some(json!({"message_id": root.to_string()})),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(
        call(&ada_rest, "PUT", &format!("/v1/blocks/{CY}"), None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(
            &cluster.rest(0, CY),
            "PUT",
            &format!("/v1/blocks/{ADA}"),
            None
        )
        .await
        .0,
        200
    );
    let report = json!({"reason": "spam"});
    let (status, body) = call(
        &ada_rest,
        "POST",
        &format!("/v1/conversations/{group}/messages/{root}/reports"),
        Some(report.clone()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = call(
        &bob_rest,
        "POST",
        &format!("/v1/conversations/{group}/messages/{mine}/reports"),
        Some(report),
    )
    .await;
    assert_eq!(status, 201);
    // An upload she sent, and keys in the directory.
    let image = b"ada's face";
    let (status, ticket) = crate::media::grant(&ada_rest, "image/png", image.len() as u64).await;
    assert_eq!(status, 201, "{ticket}");
    assert_eq!(
        crate::media::put(&ticket, None, image.to_vec()).await.0,
        200
    );
    let blob_ref = ticket["blob_ref"].as_str().unwrap().to_owned();
    ada.send(&crate::media::image_frame(
        &group,
        "a5",
        &blob_ref,
        image.len() as u64,
    ))
    .await
    .unwrap();
    expect_ack(&mut ada, "a5").await;
    let tenant_hex: String = switchboard_tests::cluster::TENANT
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    let bytes = cluster
        .blob_root()
        .join("blobs")
        .join(tenant_hex)
        .join(&blob_ref);
    assert!(bytes.exists(), "the upload is stored");
    let mut account = vodozemac::olm::Account::new();
    crate::e2ee::publish(&cluster, ADA, "phone", &mut account, 2).await;
    // A message of hers waiting for its time (v1.2).
    let far = switchboard_protocol::Timestamp::from_unix_ms(
        switchboard_protocol::Timestamp::now().unix_ms() + 20 * 24 * 3600 * 1000,
    );
    let (status, body) = call(
        &ada_rest,
        "POST",
        &format!("/v1/conversations/{group}/messages"),
        Some(json!({"client_msg_id": "a-later", "content": {"kind": "text", "text": "ada's plan"}, "send_at": far.to_rfc3339()})),
    )
    .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("scheduled")),
        "{body}"
    );
    // She leaves one conversation: her messages there are hers still.
    let (status, _) = call(
        &ada_rest,
        "DELETE",
        &format!("/v1/conversations/{left}/members/{ADA}"),
        None,
    )
    .await;
    assert_eq!(status, 204);

    // Today's bucket moves to the archive; one more message stays live.
    let mut config = std::fs::read_to_string(&cluster.config).unwrap();
    config.push_str("\n[archive]\nafter_days = 0\nevery_secs = 1\n");
    std::fs::write(&cluster.config, config).unwrap();
    drop((ada, bob));
    cluster.workers[0].terminate().await;
    cluster.workers[0].restart().await;
    eventually(
        "the buckets are archived",
        Duration::from_secs(30),
        || async { (cluster.logs().matches("bucket archived").count() >= 3).then_some(()) },
    )
    .await;
    let mut ada = cluster.ws(0, ADA, "phone").await;
    send_acked(&mut ada, &group, "a6", "ada after archiving").await;
    drop(ada);
    // Her devices are offline before she is erased (so nothing of her
    // presence is written after).
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Controls: the checks below see her before the erasure, so their
    // finding nothing after means something.
    let nats = cluster.nats.client().await;
    let allowed = vec![dm.clone().into_bytes(), dm.replace(':', "=3A").into_bytes()];
    let owner = cluster.dir.path().join("store-owner");
    let before = stream_messages_naming(&nats, &allowed).await;
    assert!(
        before.iter().any(|m| m.starts_with("SB_SCHEDULED")),
        "the scheduled message is seen: {before:?}"
    );
    assert!(
        before.iter().any(|m| m.starts_with("SB_EVENTS ")),
        "her messages' events are seen: {before:?}"
    );
    assert!(!files_naming(&owner.join("blobs"), &allowed).is_empty());

    // Hostile and plain misuse first.
    let (status, _) = call(&bob_rest, "DELETE", &format!("/v1/admin/users/{ADA}"), None).await;
    assert_eq!(status, 403, "only tenant admins erase");
    let other_admin = cluster.rest_as(0, OTHER_TENANT, "boss", true);
    let (status, body) = call(
        &other_admin,
        "DELETE",
        &format!("/v1/admin/users/{ADA}"),
        None,
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("not_found")),
        "another tenant's user"
    );
    let admin = cluster.rest_as(0, switchboard_tests::cluster::TENANT, "root", true);
    let (status, job) = call(&admin, "DELETE", &format!("/v1/admin/users/{ADA}"), None).await;
    assert_eq!(status, 202, "{job}");
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    let pseudonym = job["pseudonym"].as_str().unwrap().to_owned();
    assert!(pseudonym.starts_with("erased-"), "{job}");
    // Killed halfway: the job is in the bucket, and the next worker goes on.
    cluster.workers[0].kill9().await;
    cluster.workers[0].restart().await;
    let (status, again) = call(&admin, "DELETE", &format!("/v1/admin/users/{ADA}"), None).await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(
        again["job_id"],
        job_id.as_str(),
        "a second request finds the job"
    );
    let (status, _) = call(
        &other_admin,
        "GET",
        &format!("/v1/admin/jobs/{job_id}"),
        None,
    )
    .await;
    assert_eq!(status, 404, "another tenant's job");
    let done = eventually("the erasure finishes", Duration::from_secs(90), || async {
        let (status, job) = call(&admin, "GET", &format!("/v1/admin/jobs/{job_id}"), None).await;
        assert_eq!(status, 200, "{job}");
        assert_ne!(job["state"], "failed", "{job}");
        (job["state"] == "done").then_some(job)
    })
    .await;
    assert_eq!(done["conversations_left"], 0, "{done}");
    assert!(!done.to_string().contains(ADA), "{done}");

    // What members read: tombstones under the pseudonym, in order.
    let history = full_history(&cluster, &group, BOB).await;
    let seqs: Vec<u64> = history.iter().map(|m| m.seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "no seq is lost"
    );
    let hers: Vec<_> = history
        .iter()
        .filter(|m| m.sender_id.as_str() == pseudonym)
        .collect();
    assert!(hers.len() >= 4, "{history:?}");
    // What she wrote is gone; what she caused (the group's creation)
    // still says what happened, under the pseudonym.
    let system = |m: &switchboard_protocol::Message| {
        matches!(m.content, Some(switchboard_protocol::Content::System(_)))
    };
    assert!(
        hers.iter()
            .filter(|m| !system(m))
            .all(|m| m.content.is_none() && m.deleted_at.is_some())
    );
    assert!(hers.iter().any(|m| system(m)), "{hers:?}");
    let root_row = history.iter().find(|m| m.message_id == root).unwrap();
    assert!(
        root_row.reactions.is_empty(),
        "her reaction went: {root_row:?}"
    );
    let shown = serde_json::to_string(&history).unwrap();
    assert!(!shown.contains(ADA), "{shown}");
    let (_, pins) = call(
        &bob_rest,
        "GET",
        &format!("/v1/conversations/{group}/pins"),
        None,
    )
    .await;
    assert!(!pins.to_string().contains(ADA), "{pins}");
    let (_, detail) = call(
        &bob_rest,
        "GET",
        &format!("/v1/conversations/{group}"),
        None,
    )
    .await;
    assert!(!detail.to_string().contains(ADA), "{detail}");
    let (_, reports) = call(&admin, "GET", "/v1/admin/reports", None).await;
    assert_eq!(reports["reports"].as_array().unwrap().len(), 2, "{reports}");
    assert!(!reports.to_string().contains(ADA), "{reports}");
    let (_, blocks) = call(&cluster.rest(0, CY), "GET", "/v1/blocks", None).await;
    assert_eq!(blocks["blocks"], json!([]), "{blocks}");

    // Her upload goes with the collector's next walk, though a message
    // of hers (a tombstone now) referenced it.
    eventually(
        "her upload is collected",
        Duration::from_secs(20),
        || async { (!bytes.exists()).then_some(()) },
    )
    .await;

    // And below the API: nothing of her anywhere but the direct
    // conversation's id.
    let in_streams = stream_messages_naming(&nats, &allowed).await;
    assert!(in_streams.is_empty(), "{in_streams:#?}");
    for w in &mut cluster.workers {
        w.terminate().await;
    }
    for g in &mut cluster.gateways {
        g.terminate().await;
    }
    let rows = store_rows_naming(&owner.join("store").join("db"), &allowed, ADA);
    assert!(rows.is_empty(), "{rows:#?}");
    // A control: the same read finds the others.
    assert!(!store_rows_naming(&owner.join("store").join("db"), &[], BOB).is_empty());
    let objects = files_naming(&owner.join("blobs"), &allowed);
    assert!(objects.is_empty(), "{objects:#?}");
    let blobs = files_naming(&cluster.blob_root(), &allowed);
    assert!(blobs.is_empty(), "{blobs:#?}");
}

/// The promise of v1.2 kept: an erased user's open connections, on every
/// gateway and device, are closed (4004) while the job runs; another
/// user's stay open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasure_closes_the_users_connections() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let group = cluster.create(ConversationKind::Group, ADA, &[BOB]).await;
    let mut phone = cluster.ws(0, ADA, "phone").await;
    let mut laptop = cluster.ws(1, ADA, "laptop").await;
    let mut bob = cluster.ws(1, BOB, "b").await;
    send_acked(&mut phone, &group, "a1", "before the erasure").await;
    let admin = cluster.rest_as(0, switchboard_tests::cluster::TENANT, "root", true);
    let (status, job) = call(&admin, "DELETE", &format!("/v1/admin/users/{ADA}"), None).await;
    assert_eq!(status, 202, "{job}");
    for ws in [&mut phone, &mut laptop] {
        assert_eq!(closed_within(ws, Duration::from_secs(20)).await, 4004);
    }
    send_acked(&mut bob, &group, "b1", "still here").await;
}
