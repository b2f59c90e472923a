//! Search (v1.2) through the contract's names, against a real search
//! replica (`switchboard search`): only the caller's conversations, never
//! ciphertext nor another tenant; findable within 2 s of the `ack`;
//! edits and deletions leave the results as fast; pages; an index lost
//! with its replica is rebuilt from the store.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_client::RestClient;
use switchboard_protocol::ConversationKind;
use switchboard_tests::cluster::OTHER_TENANT;
use switchboard_tests::{Cluster, ClusterSpec, eventually};

use crate::support::*;

async fn search(rest: &RestClient, query: &str) -> (u16, Value) {
    call(rest, "GET", &format!("/v1/search?{query}"), None).await
}

fn texts(body: &Value) -> Vec<String> {
    let mut t: Vec<String> = body["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {body}"))
        .iter()
        .map(|r| {
            r["message"]["content"]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    t.sort();
    t
}

/// Waits (at most `within`) until searching `q` as `rest` finds exactly
/// `want`; how long it took.
async fn until_found(rest: &RestClient, q: &str, want: &[&str], within: Duration) -> Duration {
    let started = Instant::now();
    let mut want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    loop {
        let (status, body) = search(rest, &format!("q={q}")).await;
        if status == 200 && texts(&body) == want {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "searching {q:?}: wanted {want:?} within {within:?}, got {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_members_messages_fresh_and_nothing_else() {
    let mut cluster = Cluster::start(ClusterSpec::default()).await;
    cluster.add_search().await;
    let group = cluster
        .create(ConversationKind::Group, "se_ann", &["se_bob"])
        .await;
    let dm = cluster
        .create(ConversationKind::Direct, "se_ann", &["se_cid"])
        .await;
    let (ann, bob, cid) = (
        cluster.rest(0, "se_ann"),
        cluster.rest(0, "se_bob"),
        cluster.rest(0, "se_cid"),
    );
    let mut ann_ws = cluster.ws(0, "se_ann", "phone").await;
    let mut bob_ws = cluster.ws(0, "se_bob", "phone").await;
    let mut cid_ws = cluster.ws(0, "se_cid", "phone").await;
    // Whatever is sent first waits for the replica to have built its
    // (empty) index.
    eventually(
        "the search replica answers",
        Duration::from_secs(20),
        || async { (search(&ann, "q=anything").await.0 == 200).then_some(()) },
    )
    .await;

    let (bobs, _) = send_acked(&mut bob_ws, &group, "b1", "the quarterly report is ready").await;
    let took = until_found(
        &bob,
        "report",
        &["the quarterly report is ready"],
        Duration::from_secs(2),
    )
    .await;
    println!("findable {took:?} after its ack");
    let (draft, _) = send_acked(&mut ann_ws, &group, "a1", "report draft attached").await;
    send_acked(&mut cid_ws, &dm, "c1", "a private report for ann").await;
    // Ciphertext is never indexed, whatever it holds.
    send_with(
        &mut ann_ws,
        &group,
        "a2",
        "x",
        json!({"content": {"kind": "ciphertext", "algorithm": "olm", "body": "report"}}),
    )
    .await
    .unwrap();
    // Another tenant's report stays there.
    let mut stranger = cluster.ws_as(0, OTHER_TENANT, "se_ann", "phone").await;
    let other = RestClient::new(&cluster.gateways[0].http(), &{
        let spec = switchboard_client::TokenSpec::new(OTHER_TENANT, "se_ann", Some("d"), 600);
        switchboard_client::mint_hs256(switchboard_tests::cluster::OTHER_SECRET, &spec).unwrap()
    });
    let (elsewhere, _) = other
        .create_conversation(ConversationKind::Group, &["x"], None)
        .await
        .unwrap();
    send_acked(
        &mut stranger,
        elsewhere.conversation_id.as_str(),
        "o1",
        "another tenant's report",
    )
    .await;

    until_found(
        &ann,
        "report",
        &[
            "a private report for ann",
            "report draft attached",
            "the quarterly report is ready",
        ],
        Duration::from_secs(3),
    )
    .await;
    until_found(
        &bob,
        "report",
        &["report draft attached", "the quarterly report is ready"],
        Duration::from_secs(3),
    )
    .await;
    until_found(
        &cid,
        "report",
        &["a private report for ann"],
        Duration::from_secs(3),
    )
    .await;
    until_found(
        &other,
        "report",
        &["another tenant's report"],
        Duration::from_secs(3),
    )
    .await;
    let (_, body) = search(&bob, "q=quarterly").await;
    let highlight = body["results"][0]["highlights"][0].as_str().unwrap();
    assert!(highlight.contains("<b>quarterly</b>"), "{highlight}");
    assert_eq!(
        body["results"][0]["message"]["message_id"],
        bobs.to_string()
    );
    // One conversation, and only one's own.
    let (status, body) = search(&ann, &format!("q=report&conversation_id={dm}")).await;
    assert_eq!(
        (status, texts(&body)),
        (200, vec!["a private report for ann".to_owned()])
    );
    let (status, body) = search(&bob, &format!("q=report&conversation_id={dm}")).await;
    assert!(status == 403 || status == 404, "{status} {body}");
    let (status, body) = search(&bob, "q=").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
    let (status, _) = search(&bob, &format!("q={}", "x".repeat(501))).await;
    assert_eq!(status, 400);
    // The engine's own syntax is not ours: a range over the text field
    // is words (none of these messages has "text"), a prefix needs 3
    // letters, and 17 words are one too many.
    let (status, body) = search(&bob, "q=text%3A%5Ba%20TO%20z%5D").await;
    assert_eq!(
        (status, texts(&body)),
        (200, Vec::<String>::new()),
        "{body}"
    );
    let (status, body) = search(&bob, "q=quarter*").await;
    assert_eq!(status, 200, "{body}");
    assert!(!texts(&body).is_empty(), "a prefix finds quarterly: {body}");
    let (status, body) = search(&bob, "q=qu*").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
    let many = vec!["w"; 17].join("%20");
    let (status, _) = search(&bob, &format!("q={many}")).await;
    assert_eq!(status, 400);

    // An edit and a deletion leave the results within 2 s.
    ann_ws
        .send(&edit_frame(&group, draft, "final version attached"))
        .await
        .unwrap();
    expect_update(&mut ann_ws).await;
    until_found(&bob, "draft", &[], Duration::from_secs(2)).await;
    until_found(
        &bob,
        "final",
        &["final version attached"],
        Duration::from_secs(2),
    )
    .await;
    bob_ws.send(&delete_frame(&group, bobs)).await.unwrap();
    expect_update(&mut bob_ws).await;
    until_found(&bob, "quarterly", &[], Duration::from_secs(2)).await;

    // Pages: every match once.
    for i in 0..23 {
        send_acked(
            &mut ann_ws,
            &group,
            &format!("p{i}"),
            &format!("pageable note {i}"),
        )
        .await;
    }
    eventually("all 23 indexed", Duration::from_secs(5), || async {
        let (_, body) = search(&bob, "q=pageable&limit=50").await;
        (body["results"].as_array().map_or(0, Vec::len) == 23).then_some(())
    })
    .await;
    let mut seen = HashSet::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let query = match &cursor {
            Some(c) => format!("q=pageable&limit=10&cursor={c}"),
            None => "q=pageable&limit=10".to_owned(),
        };
        let (status, body) = search(&bob, &query).await;
        assert_eq!(status, 200, "{body}");
        pages += 1;
        for r in body["results"].as_array().unwrap() {
            assert!(
                seen.insert(r["message"]["seq"].as_u64().unwrap()),
                "a result twice"
            );
        }
        match body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!((seen.len(), pages), (23, 3));

    // A replica that lost its index rebuilds it from the store.
    cluster.searches[0].kill9().await;
    std::fs::remove_dir_all(cluster.dir.path().join("search-0")).unwrap();
    cluster.searches[0].restart().await;
    eventually(
        "found again after the rebuild",
        Duration::from_secs(30),
        || async {
            let (status, body) = search(&bob, "q=final").await;
            (status == 200 && texts(&body) == ["final version attached"]).then_some(())
        },
    )
    .await;
    until_found(&bob, "quarterly", &[], Duration::from_secs(2)).await;
    // And it follows the feed again.
    send_acked(&mut bob_ws, &group, "b2", "after the rebuild").await;
    until_found(
        &ann,
        "rebuild",
        &["after the rebuild"],
        Duration::from_secs(3),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_search_replica_search_is_unavailable() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    cluster
        .create(ConversationKind::Group, "su_ann", &["su_bob"])
        .await;
    let (status, body) = search(&cluster.rest(0, "su_ann"), "q=hello").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("unavailable")),
        "{body}"
    );
}

/// One user's burst of queries gets its bound at once (here 1) and 429
/// `rate_limited` past it, never a queue that holds others up; another
/// user of the tenant is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_burst_of_queries_is_bounded() {
    let mut spec = ClusterSpec::default();
    spec.extra_config
        .push_str("\n[search]\nuser_concurrent_queries = 1\n");
    let mut cluster = Cluster::start(spec).await;
    cluster.add_search().await;
    let group = cluster
        .create(ConversationKind::Group, "sb_ann", &["sb_bob"])
        .await;
    let (ann, bob) = (cluster.rest(0, "sb_ann"), cluster.rest(0, "sb_bob"));
    eventually(
        "the search replica answers",
        Duration::from_secs(20),
        || async { (search(&ann, "q=anything").await.0 == 200).then_some(()) },
    )
    .await;
    let mut ws = cluster.ws(0, "sb_ann", "phone").await;
    send_in_bursts(&mut ws, &group, 300, 50, "common words in every message").await;
    eventually("indexed", Duration::from_secs(20), || async {
        let (_, body) = search(&ann, "q=common").await;
        (body["results"].as_array().map(Vec::len) == Some(20)).then_some(())
    })
    .await;

    let burst = (0..40).map(|_| {
        let ann = ann.clone();
        tokio::spawn(async move { search(&ann, "q=comm*&limit=50").await })
    });
    let mut statuses = Vec::new();
    for answer in futures::future::join_all(burst).await {
        let (status, body) = answer.unwrap();
        if status == 429 {
            assert_eq!(body["code"], "rate_limited", "{body}");
            assert!(body["retry_after_ms"].as_u64().is_some(), "{body}");
        }
        statuses.push(status);
    }
    let refused = statuses.iter().filter(|s| **s == 429).count();
    println!("40 queries at once from one user: {refused} answered 429");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
    assert!(refused > 0, "one at a time per user: {statuses:?}");
    assert!(refused < 40, "the first is served: {statuses:?}");
    let (status, _) = search(&bob, "q=common").await;
    assert_eq!(status, 200, "another user of the tenant is served");
}
