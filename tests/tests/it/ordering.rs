//! I2: one gap-free `seq` order per conversation, the same for every
//! member; one sender's send order kept.

use std::collections::{HashMap, HashSet};

use switchboard_client::rest::HistoryParams;
use switchboard_protocol::ConversationKind;
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[tokio::test]
async fn a_thousand_messages_over_twenty_conversations_keep_order_without_gaps_or_duplicates() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        ..Default::default()
    })
    .await;
    // 20 group conversations, each with two senders on different gateways
    // and a reader.
    let mut conversations = Vec::new();
    for i in 0..20 {
        let conv = cluster
            .create(
                ConversationKind::Group,
                &format!("s{i}a"),
                &[&format!("s{i}b"), "reader"],
            )
            .await;
        conversations.push(conv);
    }
    let mut reader = cluster.ws(1, "reader", "r").await;

    // 40 senders, 25 messages each, all at once, each pipelining its sends.
    let mut tasks = Vec::new();
    for (i, conv) in conversations.iter().enumerate() {
        for (side, gateway) in [("a", 0), ("b", 1)] {
            let user = format!("s{i}{side}");
            let mut ws = cluster.ws(gateway, &user, "d").await;
            let conv = conv.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..25 {
                    ws.send(&send_frame(
                        &conv,
                        &format!("{user}-{n}"),
                        &format!("{user} {n}"),
                    ))
                    .await
                    .unwrap();
                }
                let mut acks = Vec::new();
                for n in 0..25 {
                    acks.push(expect_ack(&mut ws, &format!("{user}-{n}")).await);
                }
                (user, conv, acks)
            }));
        }
    }
    let mut acked: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    for t in tasks {
        let (user, conv, acks) = t.await.unwrap();
        // One sender's acks carry increasing seqs: its order is kept.
        let seqs: Vec<u64> = acks.iter().map(|a| a.1).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{user}: {seqs:?}");
        acked.entry(conv).or_default().extend(
            acks.into_iter()
                .map(|(id, seq)| (format!("{user}:{id}"), seq)),
        );
    }

    // The reader got all 1,000 live, in seq order per conversation.
    let mut live: HashMap<String, Vec<u64>> = HashMap::new();
    let mut ids = HashSet::new();
    for _ in 0..1000 {
        let m = expect_message(&mut reader).await;
        assert!(
            ids.insert(m.message_id),
            "duplicate delivery {:?}",
            m.message_id
        );
        live.entry(m.conversation_id.as_str().to_owned())
            .or_default()
            .push(m.seq);
    }
    for conv in &conversations {
        let seqs = &live[conv];
        assert_eq!(
            seqs,
            &(1..=50).collect::<Vec<u64>>(),
            "live order of {conv}"
        );
    }

    // The store has exactly 1..=50 in each, matching the acks, and each
    // sender's messages in their send order.
    for conv in &conversations {
        let mut history = Vec::new();
        let mut before = None;
        loop {
            let page = cluster
                .rest(0, "reader")
                .history(
                    conv,
                    HistoryParams {
                        before_seq: before,
                        after_seq: None,
                        limit: Some(20),
                    },
                )
                .await
                .unwrap();
            history.extend(page.messages);
            match page.next_before_seq {
                Some(b) => before = Some(b),
                None => break,
            }
        }
        history.reverse();
        let seqs: Vec<u64> = history.iter().map(|m| m.seq).collect();
        assert_eq!(seqs, (1..=50).collect::<Vec<u64>>(), "history of {conv}");
        let mut by_sender: HashMap<&str, Vec<u32>> = HashMap::new();
        for m in &history {
            let n: u32 = text_of(m).rsplit(' ').next().unwrap().parse().unwrap();
            by_sender.entry(m.sender_id.as_str()).or_default().push(n);
        }
        for (sender, ns) in by_sender {
            assert_eq!(ns, (0..25).collect::<Vec<u32>>(), "{sender} in {conv}");
        }
        let acked_seqs: HashSet<u64> = acked[conv].iter().map(|a| a.1).collect();
        assert_eq!(acked_seqs.len(), 50);
    }
}
