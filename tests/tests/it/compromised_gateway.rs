//! A compromised gateway on the shipped secure backbone
//! (`nats/server/secure/`): what the `gateway` NATS user tries beyond a
//! gateway's job is refused by NATS or by the service it asks (a forged
//! webhook event included), and no
//! process crashes or stops answering. Each case is one a review ran
//! against an earlier release, where it crash-looped every process,
//! silently ate sends, or let the gateway write anything.

use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use switchboard_protocol::ConversationKind;
use switchboard_tests::Cluster;

use crate::secured_backbone::{role_client, shipped_secure_cluster};
use crate::support::*;

/// A JetStream context that gives up quickly: a refused request is
/// dropped by the server, and the client only sees its timeout.
fn impatient(client: async_nats::Client) -> jetstream::Context {
    jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(2))
        .build(client)
}

/// The resident memory of a process, in bytes.
fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// Every process still runs, and a send on a fresh connection is acked
/// and delivered.
async fn still_serves(cluster: &mut Cluster, conv: &str, tag: &str) {
    for (i, w) in cluster.workers.iter_mut().enumerate() {
        assert!(w.exited().is_none(), "worker {i} exited after {tag}");
    }
    for (i, g) in cluster.gateways.iter_mut().enumerate() {
        assert!(g.exited().is_none(), "gateway {i} exited after {tag}");
    }
    let mut a = cluster.ws(0, "cga", &format!("a-{tag}")).await;
    let mut b = cluster.ws(0, "cgb", &format!("b-{tag}")).await;
    send_acked(&mut a, conv, &format!("after-{tag}"), tag).await;
    let got = expect_message(&mut b).await;
    assert_eq!(text_of(&got), tag, "{}", cluster.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compromised_gateway_is_refused_by_nats_or_the_services() {
    let mut cluster = shipped_secure_cluster().await;
    let conv = cluster
        .create(ConversationKind::Direct, "cga", &["cgb"])
        .await;
    still_serves(&mut cluster, &conv, "start").await;
    let gateway = role_client(&cluster, "gateway").await;
    let gjs = impatient(gateway.clone());
    let admin_client = role_client(&cluster, "admin").await;
    let admin = impatient(admin_client.clone());

    // Case 3: a plugin record that claims 2^50 bytes. The gateway may
    // not write it at all...
    let forged = serde_json::json!({
        "digest": "sha256:00",
        "size": 1u64 << 50,
        "on_failure": "closed",
        "activation": "deploy",
        "activated_at": "2026-01-01T00:00:00Z",
        "activated_by": "mallory",
    })
    .to_string();
    let plugins = gjs.get_key_value("sb_plugins").await.unwrap();
    let put = plugins
        .put("victim.moderation", forged.clone().into())
        .await;
    assert!(put.is_err(), "a gateway must not write sb_plugins");
    let admin_plugins = admin.get_key_value("sb_plugins").await.unwrap();
    assert!(
        admin_plugins
            .get("victim.moderation")
            .await
            .unwrap()
            .is_none(),
        "nothing was written"
    );
    let code = gjs.get_object_store("sb_plugin_code").await.unwrap();
    let planted = code
        .put("victim.sha256:00", &mut &b"not a component"[..])
        .await;
    assert!(planted.is_err(), "a gateway must not write sb_plugin_code");
    // Nor compiled code, which every process loads as machine code: a
    // gateway may read `sb_plugin_compiled`, never write it.
    let compiled = gjs.get_object_store("sb_plugin_compiled").await.unwrap();
    let planted = compiled
        .put("victim.sha256:00@wt48_0_8-00", &mut &b"SBPCODE1 forged"[..])
        .await;
    assert!(
        planted.is_err(),
        "a gateway must not write sb_plugin_compiled"
    );
    assert!(
        compiled.get("victim.sha256:00@wt48_0_8-00").await.is_err(),
        "nothing was written"
    );
    // ...and should such a record come (here from the admin user), every
    // process reads it within its bounds instead of allocating what it
    // claims: the object exists, the record lies about its size.
    let admin_code = admin.get_object_store("sb_plugin_code").await.unwrap();
    admin_code
        .put("victim.sha256:00", &mut &b"not a component"[..])
        .await
        .unwrap();
    admin_plugins
        .put("victim.moderation", forged.into())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    still_serves(&mut cluster, &conv, "forged-record").await;

    // Case 4: the writers' ingest consumers can be neither deleted nor
    // shadowed by a consumer of the gateway's own.
    let ingest = gjs.get_stream("SB_INGEST_0").await.unwrap();
    assert!(
        ingest.delete_consumer("writer-p0").await.is_err(),
        "a gateway must not delete a writer's consumer"
    );
    let own = ingest
        .create_consumer(consumer::pull::Config {
            durable_name: Some("mallory".into()),
            filter_subject: "sb.in.0.>".into(),
            ..Default::default()
        })
        .await;
    assert!(own.is_err(), "a gateway must not create an ingest consumer");
    let admin_ingest = admin.get_stream("SB_INGEST_0").await.unwrap();
    assert!(admin_ingest.consumer_info("writer-p0").await.is_ok());
    assert!(admin_ingest.consumer_info("mallory").await.is_err());

    // Case 5: no raw commits, no purge of plugin code. A commit on the
    // writers' subject is dropped by NATS (the request only times out)...
    let commit = serde_json::json!({"op": "commit", "mutations": []}).to_string();
    let raw = tokio::time::timeout(
        Duration::from_secs(3),
        gateway.request("sb.store.write", commit.clone().into()),
    )
    .await;
    assert!(
        !matches!(raw, Ok(Ok(_))),
        "a gateway must not reach the store's write endpoint"
    );
    // ...and asked where a gateway may ask, the store service refuses it.
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        gateway.request("sb.store.read", commit.clone().into()),
    )
    .await
    .unwrap()
    .unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap();
    assert_eq!(answer["err"]["kind"], "refused", "{answer}");
    let marks = tokio::time::timeout(
        Duration::from_secs(5),
        gateway.request("sb.store.marks", commit.into()),
    )
    .await
    .unwrap()
    .unwrap();
    let marks: serde_json::Value = serde_json::from_slice(&marks.payload).unwrap();
    assert_eq!(marks["err"]["kind"], "refused", "{marks}");
    let code_stream = gjs.get_stream("OBJ_sb_plugin_code").await.unwrap();
    assert!(
        code_stream.purge().await.is_err(),
        "a gateway must not purge plugin code"
    );
    assert!(admin_code.info("victim.sha256:00").await.is_ok());

    // Events: a `report.created` (or any event) made up by the gateway
    // would be signed by the dispatcher and delivered to the tenant's
    // webhooks. Only workers publish on `sb.events.>`.
    let made_up = serde_json::json!({
        "id": "report-forged", "type": "report.created", "tenant": "acme",
        "conversation_id": conv, "created_at": "2026-01-01T00:00:00Z",
        "data": {"report_id": "forged", "reporter": "mallory"},
    })
    .to_string();
    let subject = "sb.events.acme".to_owned();
    let stored = match gjs.publish(subject.clone(), made_up.into()).await {
        Ok(ack) => ack.await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    assert!(
        stored.is_err(),
        "a gateway must not publish events: {stored:?}"
    );
    let events = admin.get_stream("SB_EVENTS").await.unwrap();
    assert!(
        events
            .get_last_raw_message_by_subject(&subject)
            .await
            .is_err(),
        "nothing reached SB_EVENTS"
    );

    // Replies: a gateway can neither read another process's (here a
    // worker's, on the workers' `_INBOX` prefix) nor forge one. Interest
    // crosses the cluster's routes in its own time, so both publish over
    // and over: until the admin's watcher has seen the worker's, and a
    // second longer, by when the gateway's would have come too.
    let worker = role_client(&cluster, "worker").await;
    let mut spy = gateway.subscribe("_INBOX.>").await.unwrap();
    let mut watcher = admin_client.subscribe("_INBOX.probe.>").await.unwrap();
    gateway.flush().await.unwrap();
    admin_client.flush().await.unwrap();
    let mut seen_answer_at = None;
    let mut forged = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while seen_answer_at
        .is_none_or(|at: tokio::time::Instant| at.elapsed() < Duration::from_secs(1))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker's reply never reached the admin's watcher"
        );
        let _ = gateway.publish("_INBOX.probe.forged", "ok".into()).await;
        let _ = gateway.flush().await;
        worker
            .publish("_INBOX.probe.answer", "a store answer".into())
            .await
            .unwrap();
        worker.flush().await.unwrap();
        while let Ok(Some(m)) =
            tokio::time::timeout(Duration::from_millis(100), watcher.next()).await
        {
            match m.subject.as_str() {
                "_INBOX.probe.answer" => {
                    seen_answer_at.get_or_insert_with(tokio::time::Instant::now);
                }
                _ => forged += 1,
            }
        }
    }
    assert_eq!(
        forged, 0,
        "a gateway must not publish into another process's inbox"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(200), spy.next())
            .await
            .map_or(true, |m| m.is_none()),
        "a gateway must not read another process's replies"
    );

    // Rollups: a `Nats-Rollup: all` header on a bucket a gateway writes
    // would purge every key of it; those buckets refuse rollups.
    let admin_keys = admin.get_key_value("sb_keys").await.unwrap();
    admin_keys
        .put("victim.alice.phone", "{}".into())
        .await
        .unwrap();
    let mut rollup = async_nats::HeaderMap::new();
    rollup.insert("Nats-Rollup", "all");
    let purge = match gjs
        .publish_with_headers("$KV.sb_keys.mallory", rollup.clone(), "".into())
        .await
    {
        Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    assert!(purge.is_err(), "sb_keys took a rollup: {purge:?}");
    assert!(
        admin_keys
            .get("victim.alice.phone")
            .await
            .unwrap()
            .is_some(),
        "a rollup emptied sb_keys"
    );
    // The control: a bucket as `nats kv add` makes it takes the same
    // header, and loses every other key.
    let scratch = admin
        .create_key_value(async_nats::jetstream::kv::Config {
            bucket: "rollup_probe".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // A stream just made may not take a publish at once on a cluster
    // (StreamNotFound while its placement settles): retry a while.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while let Err(e) = scratch.put("kept", "1".into()).await {
        assert!(tokio::time::Instant::now() < deadline, "rollup_probe: {e}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    admin
        .publish_with_headers("$KV.rollup_probe.other", rollup, "".into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(scratch.get("kept").await.unwrap().is_none());

    // Case 6: a flood of registry syncs for a revision that never comes
    // costs the routers a bounded number of waiting answers, not one
    // task per request.
    let worker_pid = cluster.workers[0].pid().unwrap();
    let gateway_pid = cluster.gateways[0].pid().unwrap();
    let before = (rss_of(worker_pid), rss_of(gateway_pid));
    let inbox = gateway.new_inbox();
    for i in 0..200_000u32 {
        gateway
            .publish_with_reply(
                "sb.sessions.sync",
                format!("{inbox}.{}", i % 64),
                u64::MAX.to_string().into(),
            )
            .await
            .unwrap();
    }
    gateway.flush().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = (rss_of(worker_pid), rss_of(gateway_pid));
    for (who, b, a) in [
        ("worker", before.0, after.0),
        ("gateway", before.1, after.1),
    ] {
        assert!(
            a < b + 96 * 1024 * 1024,
            "the {who} grew from {b} to {a} bytes under a flood of syncs"
        );
    }
    still_serves(&mut cluster, &conv, "sync-flood").await;
}
