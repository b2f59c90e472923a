//! Issue 15: one message is one trace. With an OTLP endpoint set, the
//! gateway that takes a send starts its trace, the writer that stores it
//! continues it, and the gateway that delivers it (here the same one,
//! as the `ack` and the recipient's `message`) ends it. The trace
//! context crosses NATS in headers: alone, in a message of several
//! sends, and in a delivery to a gateway.
//!
//! The collector is a stand-in: an OTLP/HTTP endpoint that takes
//! protobuf (the default) and JSON (`OTEL_EXPORTER_OTLP_PROTOCOL`), and
//! keeps every span it is sent.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use futures::StreamExt;
use switchboard_protocol::ConversationKind;
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

/// One exported span, as the collector saw it.
#[derive(Debug, Clone)]
struct Span {
    process: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
}

/// What the collector was sent.
#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    /// Which process sent spans in which encoding (`protobuf`, `json`).
    encodings: HashSet<(String, &'static str)>,
}

#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Received>>);

impl Collector {
    /// Serves `POST /v1/traces` on a free loopback port; returns its base
    /// address.
    async fn start(&self) -> String {
        let spans = self.0.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let spans = spans.clone();
                    async move {
                        let json = headers
                            .get("content-type")
                            .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
                        let got = if json {
                            spans_of_json(&serde_json::from_slice(&body).unwrap())
                        } else {
                            spans_of_protobuf(&body)
                        };
                        let encoding = if json { "json" } else { "protobuf" };
                        let mut received = spans.lock().unwrap();
                        for span in &got {
                            received.encodings.insert((span.process.clone(), encoding));
                        }
                        received.spans.extend(got);
                        drop(received);
                        // An empty answer is a whole success in either encoding.
                        let answer = if json { &b"{}"[..] } else { &b""[..] };
                        (headers_for(json), answer)
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    fn spans(&self) -> Vec<Span> {
        self.0.lock().unwrap().spans.clone()
    }

    fn encodings(&self) -> HashSet<(String, &'static str)> {
        self.0.lock().unwrap().encodings.clone()
    }
}

fn headers_for(json: bool) -> [(axum::http::header::HeaderName, &'static str); 1] {
    let content_type = if json {
        "application/json"
    } else {
        "application/x-protobuf"
    };
    [(axum::http::header::CONTENT_TYPE, content_type)]
}

/// The spans of an OTLP protobuf export request, each with the
/// `switchboard.process` of its resource.
fn spans_of_protobuf(body: &[u8]) -> Vec<Span> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use prost::Message as _;
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let request = ExportTraceServiceRequest::decode(body).unwrap();
    let mut out = Vec::new();
    for resource in request.resource_spans {
        let process = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|a| a.key == "switchboard.process")
            .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                out.push(Span {
                    process: process.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                });
            }
        }
    }
    out
}

/// The spans of an OTLP JSON export request, each with the
/// `switchboard.process` of its resource.
fn spans_of_json(request: &serde_json::Value) -> Vec<Span> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let mut out = Vec::new();
    for resource in request["resourceSpans"].as_array().into_iter().flatten() {
        let process = resource["resource"]["attributes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["key"] == "switchboard.process")
            .map(|a| text(&a["value"]["stringValue"]))
            .unwrap_or_default();
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                out.push(Span {
                    process: process.clone(),
                    name: text(&span["name"]),
                    trace_id: text(&span["traceId"]),
                    span_id: text(&span["spanId"]),
                    parent_span_id: text(&span["parentSpanId"]),
                });
            }
        }
    }
    out
}

/// The traces of `spans` that go all the way: a gateway's `send_message`
/// root, the worker's `write` under it, and a gateway's `deliver` under
/// that. Keyed by trace id.
fn whole_traces(spans: &[Span]) -> HashSet<String> {
    let mut by_trace: HashMap<&str, Vec<&Span>> = HashMap::new();
    for s in spans {
        by_trace.entry(&s.trace_id).or_default().push(s);
    }
    by_trace
        .into_iter()
        .filter(|(_, spans)| {
            spans.iter().any(|root| {
                root.name == "send_message"
                    && root.process == "gateway"
                    && root.parent_span_id.is_empty()
                    && spans.iter().any(|write| {
                        write.name == "write"
                            && write.process == "worker"
                            && write.parent_span_id == root.span_id
                            && spans.iter().any(|deliver| {
                                deliver.name == "deliver"
                                    && deliver.process == "gateway"
                                    && deliver.parent_span_id == write.span_id
                            })
                    })
            })
        })
        .map(|(id, _)| id.to_owned())
        .collect()
}

/// Protobuf from the gateway (the default), JSON from the worker: the
/// collector sees one trace either way.
#[tokio::test]
async fn a_message_is_one_trace_from_gateway_to_writer_and_back() {
    let collector = Collector::default();
    let endpoint = collector.start().await;
    let otel = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), endpoint),
        // Export every 100 ms instead of every 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY".to_owned(), "100".to_owned()),
    ];
    let mut worker_env = otel.clone();
    worker_env.push((
        "OTEL_EXPORTER_OTLP_PROTOCOL".to_owned(),
        "http/json".to_owned(),
    ));
    let cluster = Cluster::start(ClusterSpec {
        worker_env,
        gateway_env: otel,
        ..ClusterSpec::default()
    })
    .await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    // What the gateway publishes to the ingest stream, headers included.
    let nats = cluster.nats.client().await;
    let mut ingest = nats.subscribe("sb.in.>").await.unwrap();
    nats.flush().await.unwrap();

    // One send alone: its context rides in the `traceparent` header.
    alice.send(&send_frame(&conv, "alone", "hi")).await.unwrap();
    expect_ack(&mut alice, "alone").await;
    expect_message(&mut bob).await;
    // A burst: sends that queue up share a message (`Sb-Commands`), each
    // with its context in `Sb-Traceparents`.
    let burst = 40;
    for i in 0..burst {
        alice
            .send(&send_frame(&conv, &format!("b{i}"), "hi"))
            .await
            .unwrap();
    }
    for i in 0..burst {
        expect_ack(&mut alice, &format!("b{i}")).await;
        expect_message(&mut bob).await;
    }

    let (mut alone, mut several) = (0, 0);
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(200), ingest.next()).await {
        let headers = m.headers.unwrap_or_default();
        if let Some(n) = headers.get("Sb-Commands") {
            let n: usize = n.as_str().parse().unwrap();
            let joined = headers.get("Sb-Traceparents").expect("Sb-Traceparents");
            assert_eq!(joined.as_str().split(',').count(), n, "{joined:?}");
            several += 1;
        } else {
            let traceparent = headers
                .get("traceparent")
                .unwrap_or_else(|| panic!("no traceparent on {}: {headers:?}", m.subject));
            assert!(
                traceparent.as_str().starts_with("00-") && traceparent.as_str().len() == 55,
                "{traceparent:?}"
            );
            alone += 1;
        }
    }
    // The first send of the burst goes alone and the rest queue behind
    // its pub-ack, so both kinds are seen.
    assert!(alone >= 1, "no send went alone");
    assert!(several >= 1, "no sends went together");

    // Every send is one whole trace: 41 of them.
    let sends = burst + 1;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let spans = collector.spans();
        let whole = whole_traces(&spans);
        if whole.len() >= sends {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {sends} traces whole ({several} messages of several sends); spans: {:#?}",
            whole.len(),
            spans.iter().take(12).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let encodings = collector.encodings();
    assert!(
        encodings.contains(&("gateway".to_owned(), "protobuf")),
        "{encodings:?}"
    );
    assert!(
        encodings.contains(&("worker".to_owned(), "json")),
        "{encodings:?}"
    );
}

#[tokio::test]
async fn without_an_endpoint_nothing_is_traced_or_carried() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "a").await;
    let mut bob = cluster.ws(0, "bob", "b").await;
    let nats = cluster.nats.client().await;
    let mut ingest = nats.subscribe("sb.in.>").await.unwrap();
    let mut deliveries = nats.subscribe("sb.gw.>").await.unwrap();
    nats.flush().await.unwrap();
    send_in_bursts(&mut alice, &conv, 20, 10, "hi").await;
    for _ in 0..20 {
        expect_message(&mut bob).await;
    }
    let mut seen = 0;
    for subscriber in [&mut ingest, &mut deliveries] {
        while let Ok(Some(m)) =
            tokio::time::timeout(Duration::from_millis(200), subscriber.next()).await
        {
            let headers = m.headers.unwrap_or_default();
            assert!(headers.get("traceparent").is_none(), "{headers:?}");
            assert!(headers.get("Sb-Traceparents").is_none(), "{headers:?}");
            let payload = String::from_utf8_lossy(&m.payload);
            assert!(!payload.contains("\"traceparent\""), "{payload}");
            seen += 1;
        }
    }
    assert!(seen >= 2, "the ingest and delivery messages were not seen");
}

/// A conversation that fans out on read publishes a message once on its
/// own subject: the context rides in that message's `traceparent` header,
/// and the gateway that listens for its members continues the trace.
#[tokio::test]
async fn a_message_that_fans_out_on_read_is_one_trace_too() {
    let collector = Collector::default();
    let endpoint = collector.start().await;
    let otel = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), endpoint),
        ("OTEL_BSP_SCHEDULE_DELAY".to_owned(), "100".to_owned()),
    ];
    let cluster = Cluster::start(ClusterSpec {
        worker_env: otel.clone(),
        gateway_env: otel,
        // Three members are past it: fan-out on read.
        extra_config: "fanout_threshold = 2\n".into(),
        ..ClusterSpec::default()
    })
    .await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    let group = cluster
        .create(ConversationKind::Group, "g0", &["g1", "g2"])
        .await;
    let mut g0 = cluster.ws(0, "g0", "d").await;
    let mut g1 = cluster.ws(0, "g1", "d").await;
    let nats = cluster.nats.client().await;
    let mut on_its_subject = nats.subscribe("sb.conv.>").await.unwrap();
    nats.flush().await.unwrap();
    g0.send(&send_frame(&group, "wide", "hi all"))
        .await
        .unwrap();
    expect_ack(&mut g0, "wide").await;
    expect_message(&mut g1).await;

    let published = tokio::time::timeout(Duration::from_secs(5), on_its_subject.next())
        .await
        .expect("the message on the conversation's subject")
        .unwrap();
    let traceparent = published
        .headers
        .as_ref()
        .and_then(|h| h.get("traceparent"))
        .expect("a traceparent header")
        .as_str()
        .to_owned();
    let trace_id = traceparent.split('-').nth(1).unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !whole_traces(&collector.spans()).contains(&trace_id) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the trace {trace_id} is not whole: {:#?}",
            collector
                .spans()
                .iter()
                .filter(|s| s.trace_id == trace_id)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
