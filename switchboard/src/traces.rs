//! Logs, and traces when a collector is configured: the process's one
//! `tracing` subscriber.
//!
//! Logs go to stderr (text, or JSON with `SWITCHBOARD_LOG_FORMAT=json`),
//! filtered by `--log`. Traces are off unless an OTLP endpoint is set
//! (`--otlp-endpoint`, which reads the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
//! Then the spans of the message path (`switchboard_nats::trace`,
//! target `switchboard::message`), and warnings logged inside them, are
//! exported over OTLP/HTTP in batches, protobuf unless
//! `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`. The SDK reads the other
//! standard variables: `OTEL_SERVICE_NAME` (default `switchboard`),
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and its argument
//! (default: every message the sender's gateway starts is traced, and
//! the other processes follow its decision), `OTEL_BSP_*` (batching),
//! and `OTEL_EXPORTER_OTLP_HEADERS` (say, a collector's token).
//!
//! A collector's answer is read within [`MAX_RESPONSE_BYTES`]: past it
//! the exporter gets `ResponseBodyTooLarge` (the export fails like any
//! other) and the connection is dropped unread, so a hostile or broken
//! collector cannot make the process read an endless answer.

use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use bytes::Bytes;
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError, Request, Response, ResponseBodyTooLarge};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The path OTLP/HTTP serves traces on, under a collector's base address.
const TRACES_PATH: &str = "/v1/traces";

/// How long one export may take, and how long the process waits for the
/// last spans when it stops.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// A collector's answer is a status and at most a partial-success
/// message: more than this is refused, unread.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Where to export traces; `None`: nowhere (the default). As the
/// standard says, the traces endpoint wins over the base address.
pub fn otlp_endpoint(flag: Option<&str>) -> Option<Endpoint> {
    let traces = std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_ok_and(|e| !e.is_empty());
    if traces {
        return Some(Endpoint::FromEnvironment);
    }
    flag.filter(|e| !e.is_empty())
        .map(|base| Endpoint::Base(base.trim_end_matches('/').to_owned()))
}

/// A collector to export to.
pub enum Endpoint {
    /// Its base address (`/v1/traces` is added, as the standard says of
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`).
    Base(String),
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, used as it is (the exporter
    /// reads it).
    FromEnvironment,
}

/// What flushes the last spans when the process stops.
pub struct Traces(Option<SdkTracerProvider>);

impl Traces {
    /// Exports what is left, waiting at most [`EXPORT_TIMEOUT`].
    pub async fn shutdown(self) {
        if let Some(provider) = self.0 {
            let stopped =
                tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(EXPORT_TIMEOUT))
                    .await;
            if let Ok(Err(e)) = stopped {
                eprintln!("switchboard: the last traces were not exported: {e}");
            }
        }
    }
}

/// `info`, but the search index library's own `info` lines (one per
/// commit, twice a second under load) only when asked for.
pub const DEFAULT_FILTER: &str = "info,tantivy=warn";

/// `switchboard dev`'s: its banner is the first screen, then only what
/// went wrong (and its own start and stop). The parts' routine `info`
/// (partitions taken, writers started, the store engine's ingestion)
/// is for `--log info`.
pub const DEV_FILTER: &str = "warn,switchboard::run=info";

/// Installs the process's subscriber: logs filtered by `filter` (default
/// [`DEV_FILTER`] for `dev`, else [`DEFAULT_FILTER`]), and traces to `endpoint` when set. `process`
/// names the role in every span (`switchboard.process`). Must run inside
/// the runtime: exports use it.
pub fn init(
    filter: Option<&str>,
    endpoint: Option<Endpoint>,
    process: &str,
) -> anyhow::Result<Traces> {
    let default = if process == "dev" {
        DEV_FILTER
    } else {
        DEFAULT_FILTER
    };
    let filter = tracing_subscriber::EnvFilter::try_new(filter.unwrap_or(default))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let json = std::env::var("SWITCHBOARD_LOG_FORMAT").is_ok_and(|f| f == "json");
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = if json {
        logs.json().with_filter(filter).boxed()
    } else {
        logs.with_filter(filter).boxed()
    };
    let Some(endpoint) = endpoint else {
        tracing_subscriber::registry().with(logs).init();
        return Ok(Traces(None));
    };
    let provider = provider(endpoint, process)?;
    // Only what a span says of the message: no code location, thread,
    // target or busy/idle times, which would double every span's size.
    let spans = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("switchboard"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(
            Targets::new()
                .with_target(switchboard_nats::trace::TARGET, LevelFilter::INFO)
                .with_default(LevelFilter::WARN),
        );
    tracing_subscriber::registry().with(logs).with(spans).init();
    switchboard_nats::trace::enable();
    Ok(Traces(Some(provider)))
}

fn provider(endpoint: Endpoint, process: &str) -> anyhow::Result<SdkTracerProvider> {
    let client = reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .context("the OTLP exporter's HTTP client")?;
    let http = OnRuntime {
        client,
        runtime: tokio::runtime::Handle::current(),
    };
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(http)
        .with_protocol(protocol()?)
        .with_timeout(EXPORT_TIMEOUT);
    if let Endpoint::Base(base) = endpoint {
        exporter = exporter.with_endpoint(format!("{base}{TRACES_PATH}"));
    }
    let exporter = exporter.build().context("the OTLP trace exporter")?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("switchboard");
    }
    let resource = resource
        .with_attribute(KeyValue::new("switchboard.process", process.to_owned()))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// OTLP/HTTP's encoding: protobuf, the standard's default, unless the
/// standard variables ask for JSON. (The exporter's own default is JSON
/// whenever JSON is built in, so it is always set here.)
fn protocol() -> anyhow::Result<Protocol> {
    let asked = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
    match asked.as_deref() {
        None | Some("http/protobuf") => Ok(Protocol::HttpBinary),
        Some("http/json") => Ok(Protocol::HttpJson),
        Some(other) => anyhow::bail!(
            "OTLP protocol {other:?} is not supported: use http/protobuf (the default) or http/json"
        ),
    }
}

/// The exporter's HTTP client: the process's reqwest, run on the
/// process's runtime. The SDK exports from a thread of its own, outside
/// the runtime, so each request is spawned onto it and awaited there.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move {
                let response = client.execute(request.try_into()?).await?;
                read_capped(response, MAX_RESPONSE_BYTES).await
            })
            .await?
    }
}

/// The answer with its body if that is at most `cap` bytes; past it
/// `ResponseBodyTooLarge`, and the response is dropped unread (which
/// closes its connection).
async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<Response<Bytes>, HttpError> {
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Err(Box::new(ResponseBodyTooLarge::new()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if chunk.len() > cap.saturating_sub(body.len()) {
            return Err(Box::new(ResponseBodyTooLarge::new()));
        }
        body.extend_from_slice(&chunk);
    }
    let mut answer = Response::builder()
        .status(response.status())
        .body(Bytes::from(body))?;
    *answer.headers_mut() = std::mem::take(response.headers_mut());
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A collector on loopback answering every request with `body`, in
    /// chunks and without a length, or endlessly when `body` is `None`.
    async fn collector(body: Option<usize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf).await;
                    let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
                    if s.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let mut left = body.unwrap_or(usize::MAX);
                    while left > 0 {
                        let n = left.min(1000);
                        let chunk = format!("{n:x}\r\n{}\r\n", "x".repeat(n));
                        if s.write_all(chunk.as_bytes()).await.is_err() {
                            return;
                        }
                        left -= n;
                    }
                    let _ = s.write_all(b"0\r\n\r\n").await;
                });
            }
        });
        url
    }

    async fn export(url: &str) -> Result<Response<Bytes>, HttpError> {
        let response = reqwest::Client::new()
            .post(url)
            .body("spans")
            .send()
            .await
            .unwrap();
        read_capped(response, MAX_RESPONSE_BYTES).await
    }

    #[tokio::test]
    async fn collector_answers_are_read_up_to_the_cap_and_refused_past_it() {
        let at = export(&collector(Some(MAX_RESPONSE_BYTES)).await).await;
        assert_eq!(at.unwrap().body().len(), MAX_RESPONSE_BYTES);
        let past = export(&collector(Some(MAX_RESPONSE_BYTES + 1)).await).await;
        assert!(past.unwrap_err().is::<ResponseBodyTooLarge>());
        let started = std::time::Instant::now();
        let endless = export(&collector(None).await).await;
        assert!(endless.unwrap_err().is::<ResponseBodyTooLarge>());
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
