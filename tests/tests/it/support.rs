//! Small helpers so tests read like the behaviour they check.

use std::collections::{HashMap, HashSet};
use std::time::Duration;
use switchboard_protocol::SendAck;

use serde_json::{Value, json};
use switchboard_client::rest::HistoryParams;
use switchboard_client::{RestClient, WsClient};
use switchboard_protocol::AckStatus;
use switchboard_protocol::{
    ClientFrame, ClientMsgId, Content, ConversationId, ErrorCode, Message, MessageId, ServerFrame,
};
use switchboard_tests::Cluster;
use switchboard_tests::reliable::Acked;
use switchboard_tests::steady::{AckedSends, Conversation, SendTimes};
use tokio::time::Instant;

pub const WAIT: Duration = Duration::from_secs(15);

pub fn send_frame(conversation: &str, client_msg_id: &str, text: &str) -> ClientFrame {
    ClientFrame::send_message(
        ClientMsgId::new(client_msg_id).unwrap(),
        ConversationId::new(conversation).unwrap(),
        Content::Text {
            text: text.to_owned(),
        },
    )
}

pub fn edit_frame(conversation: &str, id: MessageId, text: &str) -> ClientFrame {
    ClientFrame::EditMessage {
        conversation_id: ConversationId::new(conversation).unwrap(),
        message_id: id,
        content: Content::Text { text: text.into() },
        custom: None,
    }
}

pub fn delete_frame(conversation: &str, id: MessageId) -> ClientFrame {
    ClientFrame::DeleteMessage {
        conversation_id: ConversationId::new(conversation).unwrap(),
        message_id: id,
    }
}

/// The next `message_updated`: an edit or a deletion as it is now.
pub async fn expect_update(ws: &mut WsClient) -> Message {
    expect(ws, "message_updated", |f| match f {
        ServerFrame::MessageUpdated { message } => Some(message),
        _ => None,
    })
    .await
}

pub fn text_of(m: &Message) -> &str {
    match &m.content {
        Some(Content::Text { text }) => text,
        other => panic!("not a text message: {other:?}"),
    }
}

/// The next frame that `pick` accepts; frames it rejects are skipped.
pub async fn expect<T>(
    ws: &mut WsClient,
    what: &str,
    mut pick: impl FnMut(ServerFrame) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match ws.next_frame_within(left).await {
            Ok(frame) => {
                if let Some(v) = pick(frame) {
                    return v;
                }
            }
            Err(e) => panic!("waiting for {what}: {e}"),
        }
    }
}

/// Sends a text and waits for its ack: (message_id, seq).
pub async fn send_acked(
    ws: &mut WsClient,
    conversation: &str,
    client_msg_id: &str,
    text: &str,
) -> (MessageId, u64) {
    ws.send(&send_frame(conversation, client_msg_id, text))
        .await
        .unwrap();
    expect_ack(ws, client_msg_id).await
}

pub async fn expect_ack(ws: &mut WsClient, client_msg_id: &str) -> (MessageId, u64) {
    expect(ws, &format!("ack of {client_msg_id}"), |f| match f {
        ServerFrame::Ack(SendAck {
            client_msg_id: id,
            message_id: Some(message_id),
            seq: Some(seq),
            status,
            ..
        }) if id.as_str() == client_msg_id => {
            assert_eq!(status, AckStatus::Sent);
            Some((message_id, seq))
        }
        ServerFrame::Error {
            code,
            message,
            client_msg_id: Some(id),
            ..
        } if id == client_msg_id => {
            panic!("{client_msg_id} refused: {code} {message}")
        }
        _ => None,
    })
    .await
}

pub async fn expect_message(ws: &mut WsClient) -> Message {
    expect(ws, "a message", |f| match f {
        ServerFrame::Message { message } => Some(message),
        _ => None,
    })
    .await
}

/// The next `error` frame: (code, request_type, client_msg_id).
pub async fn expect_error(
    ws: &mut WsClient,
) -> (ErrorCode, Option<String>, Option<String>, String) {
    expect(ws, "an error", |f| match f {
        ServerFrame::Error {
            code,
            request_type,
            client_msg_id,
            message,
            ..
        } => Some((code, request_type, client_msg_id, message)),
        _ => None,
    })
    .await
}

/// The next `error` frame about a message: (code, request_type,
/// message_id), as a refused `react`, edit or delete names it.
pub async fn expect_refusal(ws: &mut WsClient) -> (ErrorCode, Option<String>, Option<String>) {
    expect(ws, "a refusal", |f| match f {
        ServerFrame::Error {
            code,
            request_type,
            message_id,
            ..
        } => Some((code, request_type, message_id)),
        _ => None,
    })
    .await
}

/// The connection still works: a ping gets a pong.
pub async fn assert_alive(ws: &mut WsClient) {
    ws.send(&ClientFrame::Ping {}).await.unwrap();
    expect(ws, "pong", |f| {
        matches!(f, ServerFrame::Pong {}).then_some(())
    })
    .await;
}

/// Messages from `pull_backlog` until its `backlog_done`: (messages, last_seq, more).
pub async fn pull(
    ws: &mut WsClient,
    conversation: Option<&str>,
    since_seq: Option<u64>,
    limit: Option<u32>,
) -> (Vec<Message>, u64, bool) {
    ws.send(&ClientFrame::PullBacklog {
        conversation_id: conversation.map(|c| ConversationId::new(c).unwrap()),
        since_seq,
        limit,
    })
    .await
    .unwrap();
    let mut messages = Vec::new();
    loop {
        let frame = expect(ws, "backlog", |f| match f {
            f @ (ServerFrame::Message { .. } | ServerFrame::BacklogDone { .. }) => Some(f),
            ServerFrame::Error { code, message, .. } => {
                panic!("pull_backlog failed: {code} {message}")
            }
            _ => None,
        })
        .await;
        match frame {
            ServerFrame::Message { message } => messages.push(message),
            ServerFrame::BacklogDone { last_seq, more, .. } => return (messages, last_seq, more),
            _ => unreachable!(),
        }
    }
}

/// A conversation's whole history, oldest first, as `reader` reads it.
pub async fn full_history(cluster: &Cluster, conv: &str, reader: &str) -> Vec<Message> {
    let mut all = Vec::new();
    let mut before = None;
    loop {
        let page = cluster
            .rest(0, reader)
            .history(
                conv,
                HistoryParams {
                    before_seq: before,
                    after_seq: None,
                    limit: Some(200),
                },
            )
            .await
            .unwrap_or_else(|e| panic!("history: {e}\n{}", cluster.logs()));
        all.extend(page.messages);
        match page.next_before_seq {
            Some(b) => before = Some(b),
            None => break,
        }
    }
    all.reverse();
    all
}

/// Checks I1-I3 for one conversation against what its senders were
/// acked, `(sender, client_msg_id, ack)`: `seq` gap-free from 1, no
/// duplicate message ids, one message per `client_msg_id`, every acked
/// message stored with its ack's `message_id` and `seq`, and each
/// sender's messages in the order it sent them (ids sort in send order).
/// Returns the history.
pub async fn check_history_against_acks(
    cluster: &Cluster,
    conv: &str,
    reader: &str,
    acked: &[(String, String, Acked)],
) -> Vec<Message> {
    let history = full_history(cluster, conv, reader).await;
    let seqs: Vec<u64> = history.iter().map(|m| m.seq).collect();
    assert_eq!(
        seqs,
        (1..=history.len() as u64).collect::<Vec<_>>(),
        "gap-free {conv}"
    );
    let ids: HashSet<_> = history.iter().map(|m| m.message_id).collect();
    assert_eq!(
        ids.len(),
        history.len(),
        "no duplicate message ids in {conv}"
    );
    let by_key: HashMap<(&str, &str), &Message> = history
        .iter()
        .map(|m| ((m.sender_id.as_str(), m.client_msg_id.as_str()), m))
        .collect();
    assert_eq!(
        by_key.len(),
        history.len(),
        "one message per client_msg_id in {conv}"
    );
    for (user, id, ack) in acked {
        let stored = by_key
            .get(&(user.as_str(), id.as_str()))
            .unwrap_or_else(|| panic!("acked {id} lost from {conv}"));
        assert_eq!(
            (stored.message_id, stored.seq),
            (ack.message_id, ack.seq),
            "{id}"
        );
    }
    let mut last: HashMap<&str, String> = HashMap::new();
    for m in &history {
        let prev = last.insert(m.sender_id.as_str(), m.client_msg_id.as_str().to_owned());
        if let Some(prev) = prev {
            assert!(
                prev.as_str() < m.client_msg_id.as_str(),
                "{prev} before {}",
                m.client_msg_id
            );
        }
    }
    history
}

/// Sends `n` messages of `text` in bursts of `burst`, reading the acks of
/// each burst before the next: a sender that keeps up.
pub async fn send_in_bursts(ws: &mut WsClient, conv: &str, n: usize, burst: usize, text: &str) {
    for b in 0..n / burst {
        for i in 0..burst {
            ws.send(&send_frame(conv, &format!("m{}", b * burst + i), text))
                .await
                .unwrap();
        }
        for _ in 0..burst {
            expect(ws, "an ack", |f| match f {
                ServerFrame::Ack(SendAck { .. }) => Some(()),
                ServerFrame::Error { message, .. } => panic!("send refused: {message}"),
                _ => None,
            })
            .await;
        }
    }
}

/// The samples of a scrape: `name{labels}` to value.
pub async fn scrape(addr: std::net::SocketAddr) -> HashMap<String, f64> {
    let response = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The sum of every sample of a family whose labels include each of the
/// comma-separated `labels` (`a="1",b="2"`), in any order.
pub fn sum(samples: &HashMap<String, f64>, family: &str, labels: &str) -> f64 {
    samples
        .iter()
        .filter(|(name, _)| {
            (name.as_str() == family || name.starts_with(&format!("{family}{{")))
                && labels
                    .split(',')
                    .filter(|l| !l.is_empty())
                    .all(|l| name.contains(l))
        })
        .map(|(_, v)| v)
        .sum()
}

/// A REST call: the status and the JSON answer (null when none).
pub async fn call(
    rest: &RestClient,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("{}{path}", rest.base());
    let request = rest
        .raw()
        .request(method.parse().unwrap(), url)
        .bearer_auth(rest.token());
    let request = match body {
        Some(b) => request.json(&b),
        None => request,
    };
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    let text = answer.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A send with extra fields (reply, thread, mentions); waits for its
/// ack or error.
pub async fn send_with(
    ws: &mut WsClient,
    conv: &str,
    id: &str,
    text: &str,
    extra: Value,
) -> Result<(MessageId, u64), (ErrorCode, String)> {
    let mut frame = json!({
        "type": "send_message",
        "client_msg_id": id,
        "conversation_id": conv,
        "content": {"kind": "text", "text": text},
    });
    for (k, v) in extra.as_object().unwrap() {
        frame[k] = v.clone();
    }
    let ack = send_json(ws, frame).await?;
    Ok((ack.message_id.unwrap(), ack.seq.unwrap()))
}

/// Sends `frame` (a `send_message` as JSON, any fields); waits for its
/// ack or error.
pub async fn send_json(ws: &mut WsClient, frame: Value) -> Result<SendAck, (ErrorCode, String)> {
    let id = frame["client_msg_id"].as_str().unwrap().to_owned();
    ws.send_text(frame.to_string()).await.unwrap();
    expect(ws, &format!("the answer to {id}"), |f| match f {
        ServerFrame::Ack(ack) if ack.client_msg_id.as_str() == id => Some(Ok(ack)),
        ServerFrame::Error {
            code,
            message,
            client_msg_id: Some(c),
            ..
        } if c == id => Some(Err((code, message))),
        _ => None,
    })
    .await
}

/// Checks every conversation's history against what its sender had
/// acked (each acked message stored once, gap-free, in send order): the
/// number of acked messages, and the histories.
pub async fn check_every_ack(
    cluster: &Cluster,
    conversations: &[Conversation],
    acked: &HashMap<String, AckedSends>,
) -> (usize, Vec<Vec<switchboard_protocol::Message>>) {
    let mut total = 0;
    let mut histories = Vec::new();
    for c in conversations {
        let acked = &acked[&c.id];
        let history = check_history_against_acks(cluster, &c.id, &c.reader, acked).await;
        total += acked.len();
        assert!(history.len() >= acked.len());
        histories.push(history);
    }
    (total, histories)
}

/// No process that was not killed ended by itself, or panicked.
pub fn assert_all_alive(cluster: &mut Cluster) {
    for (i, w) in cluster.workers.iter_mut().enumerate() {
        assert_eq!(w.exited(), None, "worker {i} exited\n{}", w.log());
        assert!(!w.log().contains("panicked"), "worker {i} panicked");
    }
    for (i, g) in cluster.gateways.iter_mut().enumerate() {
        assert_eq!(g.exited(), None, "gateway {i} exited\n{}", g.log());
        assert!(!g.log().contains("panicked"), "gateway {i} panicked");
    }
}

/// For each conversation, how long after `from` its first ack came.
pub fn resumed_after(
    sends: &[SendTimes],
    conversations: usize,
    from: Instant,
    to: Instant,
) -> Vec<Duration> {
    first_acks_after(sends, conversations, from, to, |s| s.acked >= from)
}

/// For each conversation, how long after `from` the first ack of a send
/// made after `from` came. An ack of an earlier send is no sign that its
/// partition writes again: a gateway answers a send its writer committed
/// just before stopping from the store once it is overdue.
pub fn sends_after_acked_after(
    sends: &[SendTimes],
    conversations: usize,
    from: Instant,
    to: Instant,
) -> Vec<Duration> {
    first_acks_after(sends, conversations, from, to, |s| s.sent >= from)
}

pub fn first_acks_after(
    sends: &[SendTimes],
    conversations: usize,
    from: Instant,
    to: Instant,
    counts: impl Fn(&SendTimes) -> bool,
) -> Vec<Duration> {
    (0..conversations)
        .map(|c| {
            sends
                .iter()
                .filter(|s| s.conversation == c && counts(s))
                .map(|s| s.acked - from)
                .min()
                .unwrap_or(to - from)
        })
        .collect()
}

/// Waits until every ingest stream has all replicas current and no NATS
/// node leads two more of them than another (`worker/src/duties/balance.rs`).
pub async fn wait_for_spread_leaders(cluster: &Cluster, partitions: u16, within: Duration) {
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let deadline = Instant::now() + within;
    let mut last = String::new();
    while Instant::now() < deadline {
        let mut load: HashMap<String, usize> = HashMap::new();
        let mut settled = true;
        for p in 0..partitions {
            let info = match js.get_stream(format!("SB_INGEST_{p}")).await {
                Ok(mut s) => s.info().await.ok().cloned(),
                Err(_) => None,
            };
            let Some(cluster_info) = info.and_then(|i| i.cluster) else {
                settled = false;
                break;
            };
            let Some(leader) = cluster_info.leader.clone() else {
                settled = false;
                break;
            };
            if cluster_info
                .replicas
                .iter()
                .any(|r| !r.current || r.offline)
            {
                settled = false;
            }
            for r in &cluster_info.replicas {
                load.entry(r.name.clone()).or_default();
            }
            *load.entry(leader).or_default() += 1;
        }
        let high = load.values().max().copied().unwrap_or(0);
        let low = load.values().min().copied().unwrap_or(0);
        last = format!("{load:?}");
        if settled && load.len() == cluster.nats.len() && high <= low + 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!(
        "the ingest leaders did not spread: {last}\n{}",
        cluster.logs()
    );
}

/// Creates `tenant` in `sb_tenants` through the operator API (the
/// cluster serves it: `ClusterSpec::with_operator_api`), its tokens
/// signed with `secret`. A tenant of the configuration file may be
/// created too: its record then holds what the file cannot (webhooks).
pub async fn create_tenant_record(
    cluster: &switchboard_tests::Cluster,
    tenant: &str,
    secret: &str,
) {
    let (status, body) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({"id": tenant, "hs256_secrets": [secret]})),
            Some(switchboard_tests::cluster::OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

/// Gives TENANT a record in `sb_tenants` (webhooks live there) and a
/// webhook to `url` for `message.created`, set through the admin API
/// once the record has reached the gateway. The cluster serves the
/// operator API and allows private webhook targets.
pub async fn give_tenant_a_webhook(cluster: &switchboard_tests::Cluster, url: &str) {
    use switchboard_tests::cluster::{SECRET, TENANT};
    create_tenant_record(cluster, TENANT, SECRET).await;
    let admin = cluster.rest_as(0, TENANT, "hook_admin", true);
    let hooks = json!({"webhooks": [{"url": url, "secret": "acme-webhook-secret-0123", "events": ["message.created"]}]});
    switchboard_tests::eventually(
        "the webhook is set",
        std::time::Duration::from_secs(10),
        || async {
            let (status, _) = call(&admin, "PUT", "/v1/admin/webhooks", Some(hooks.clone())).await;
            (status == 200).then_some(())
        },
    )
    .await;
}

/// What reached a [`hook_endpoint`]: each POST's body, and when.
pub type Arrivals = std::sync::Arc<std::sync::Mutex<Vec<(String, std::time::Instant)>>>;

/// A local endpoint answering `status` to every POST at `/hook`, for
/// webhooks: its URL, and what reached it.
pub async fn hook_endpoint(status: axum::http::StatusCode) -> (String, Arrivals) {
    use axum::extract::State;
    let got = Arrivals::default();
    let app = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(
                move |State(got): State<Arrivals>, body: axum::body::Bytes| async move {
                    let text = String::from_utf8_lossy(&body).into_owned();
                    if let Ok(mut got) = got.lock() {
                        got.push((text, std::time::Instant::now()));
                    }
                    status
                },
            ),
        )
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

/// A group of TENANT between `rb_ann` and `rb_bob` whose commands go to
/// `partition` (of `partitions`).
pub async fn conversation_on(
    cluster: &switchboard_tests::Cluster,
    partition: u16,
    partitions: u16,
) -> String {
    let tenant = switchboard_protocol::TenantId::new(switchboard_tests::cluster::TENANT).unwrap();
    // rb_bob writes to rb_ann first: a stranger may be put into at most
    // 20 groups a day, and this may take more tries than that.
    let first = cluster
        .create(
            switchboard_protocol::ConversationKind::Group,
            "rb_ann",
            &["rb_bob"],
        )
        .await;
    let mut bob = cluster.ws(0, "rb_bob", "introduction").await;
    send_acked(&mut bob, &first, "rb-hello", "hello").await;
    drop(bob);
    for _ in 0..200 {
        let conv = cluster
            .create(
                switchboard_protocol::ConversationKind::Group,
                "rb_ann",
                &["rb_bob"],
            )
            .await;
        let id = switchboard_protocol::ConversationId::new(&conv).unwrap();
        if switchboard_nats::subject::partition_of(&tenant, &id, partitions) == partition {
            return conv;
        }
    }
    panic!("no conversation on partition {partition}");
}

/// The embedded store's row of a conversation, replaced by `with` (its
/// worker stopped meanwhile, since it holds the database); the row it
/// had.
pub async fn swap_conversation_row(
    cluster: &mut switchboard_tests::Cluster,
    conversation: &str,
    with: Vec<u8>,
) -> Vec<u8> {
    cluster.workers[0].kill9().await;
    let was = {
        let path = cluster
            .dir
            .path()
            .join("store-owner")
            .join("store")
            .join("db");
        let db = fjall::Database::builder(&path).open().unwrap();
        let rows = db
            .keyspace("conversations", fjall::KeyspaceCreateOptions::default)
            .unwrap();
        // The store's key: each part's bytes and a 0x00.
        let key = [
            switchboard_tests::cluster::TENANT.as_bytes(),
            &[0],
            conversation.as_bytes(),
            &[0],
        ]
        .concat();
        let was = fjall::Readable::get(&db.snapshot(), &rows, &key)
            .unwrap()
            .unwrap()
            .to_vec();
        let mut batch = db.batch().durability(Some(fjall::PersistMode::SyncAll));
        batch.insert(&rows, key, with);
        batch.commit().unwrap();
        was
    };
    cluster.workers[0].restart().await;
    cluster
        .wait_for_writers(1, std::time::Duration::from_secs(30))
        .await;
    was
}

/// Waits (bounded) for the server to close `ws`; its close code.
pub async fn closed_within(ws: &mut WsClient, within: Duration) -> u16 {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match ws
            .next_frame_within(left.max(Duration::from_millis(1)))
            .await
        {
            Ok(_) => {}
            Err(switchboard_client::WsError::ClosedBy { code, .. }) => return code,
            Err(e) => panic!("expected a close within {within:?}, got {e}"),
        }
    }
}
