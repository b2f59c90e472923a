//! `bench backbone`: what JetStream keeps per conversation. Publishes one
//! command to each of C distinct ingest subjects and reports the
//! nats-server's memory and the ingest streams' contents before and after.
//! Also reads the ingest streams for `bench chat`'s report.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt;

use super::process::memory_kib;

#[derive(clap::Args)]
pub(super) struct BackboneArgs {
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    /// Distinct conversations (ingest subjects) to publish to.
    #[arg(long, default_value_t = 100_000)]
    conversations: usize,
    /// Pid of the nats-server, to report its memory.
    #[arg(long)]
    nats_pid: Option<u32>,
    #[arg(long, default_value_t = 16)]
    partitions: u16,
}

/// The state of every ingest stream.
async fn ingest_states(
    js: &async_nats::jetstream::Context,
    partitions: u16,
) -> anyhow::Result<Vec<async_nats::jetstream::stream::State>> {
    let mut states = Vec::with_capacity(usize::from(partitions));
    for p in 0..partitions {
        let name = switchboard_nats::definitions::ingest_stream_name(p);
        let mut stream = js
            .get_stream(&name)
            .await
            .with_context(|| format!("stream {name}"))?;
        let info = stream
            .info()
            .await
            .with_context(|| format!("stream {name}"))?;
        states.push(info.state.clone());
    }
    Ok(states)
}

/// How many messages the ingest streams have taken since they were
/// created: the sum of their last sequences.
pub(super) async fn ingest_messages(
    js: &async_nats::jetstream::Context,
    partitions: u16,
) -> anyhow::Result<u64> {
    let states = ingest_states(js, partitions).await?;
    Ok(states.iter().map(|s| s.last_sequence).sum())
}

pub(super) async fn run(a: BackboneArgs) -> anyhow::Result<()> {
    use async_nats::jetstream;
    use switchboard_nats::definitions::{self, BackboneConfig};
    use switchboard_nats::envelope::{Command, SendCommand};
    use switchboard_nats::subject::{ingest, partition_of};
    use switchboard_protocol::{
        ClientMsgId, Content, ConversationId, DeviceId, TenantId, Timestamp, UserId,
    };

    let client = async_nats::connect(&a.nats_url).await?;
    let js = jetstream::new(client.clone());
    let config = BackboneConfig {
        partitions: a.partitions,
        ..Default::default()
    };
    definitions::ensure(&js, &config).await?;
    let report = |label: &str| {
        if let Some((rss, hwm)) = a.nats_pid.and_then(memory_kib) {
            println!(
                "  {label:<28} nats-server RSS {:.1} MiB (high-water {:.1} MiB)",
                rss as f64 / 1024.0,
                hwm as f64 / 1024.0
            );
        }
    };
    let partitions = config.partitions;
    let stream_state = |js: jetstream::Context| async move {
        let states = ingest_states(&js, partitions).await?;
        let messages: u64 = states.iter().map(|s| s.messages).sum();
        let subjects: u64 = states.iter().map(|s| s.subjects_count).sum();
        Ok::<_, anyhow::Error>((messages, subjects))
    };
    println!(
        "switchboard bench backbone: {} conversations",
        a.conversations
    );
    report("before");
    let tenant = TenantId::new("bench")?;
    let sender = UserId::new("bench-user")?;
    let started = Instant::now();
    let mut acks = futures::stream::FuturesUnordered::new();
    for i in 0..a.conversations {
        let conversation = ConversationId::new(format!("c{i}"))?;
        let command = Command::Send(SendCommand {
            tenant: tenant.clone(),
            conversation_id: conversation.clone(),
            sender: sender.clone(),
            device: DeviceId::default_device(),
            client_msg_id: ClientMsgId::new(format!("m{i}"))?,
            content: Content::Text {
                text: "x".repeat(64),
            },
            received_at: Timestamp::now(),
            options: Default::default(),
        });
        let subject = ingest(
            partition_of(&tenant, &conversation, a.partitions),
            &tenant,
            &conversation,
        );
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", command.dedupe_id().as_str());
        let publish = jetstream::message::PublishMessage::build()
            .payload(command.encode()?)
            .headers(headers);
        acks.push(std::future::IntoFuture::into_future(
            js.send_publish(subject, publish).await?,
        ));
        while acks.len() > 2000 {
            if let Some(r) = acks.next().await {
                r?;
            }
        }
    }
    while let Some(r) = acks.next().await {
        r?;
    }
    let (messages, subjects) = stream_state(js.clone()).await?;
    println!(
        "  published in {:.1}s; stream holds {messages} messages on {subjects} subjects",
        started.elapsed().as_secs_f64()
    );
    report("after publishing");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (messages, subjects) = stream_state(js.clone()).await?;
    println!("  5 s later: stream holds {messages} messages on {subjects} subjects");
    report("5 s later");
    Ok(())
}
