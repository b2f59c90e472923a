//! Logs, and traces when a collector is configured: the process's one
//! `tracing` subscriber.
//!
//! Logs go to stderr (text, or JSON with `SWITCHBOARD_LOG_FORMAT=json`),
//! filtered by `--log`. Traces are off unless an OTLP endpoint is set
//! (`--otlp-endpoint`, which reads the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
//! Then the spans of the message path (`switchboard_backbone::trace`,
//! target `switchboard::message`), and warnings logged inside them, are
//! exported over OTLP/HTTP in batches, protobuf unless
//! `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`. The SDK reads the other
//! standard variables: `OTEL_SERVICE_NAME` (default `switchboard`),
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and its argument
//! (default: every message the sender's gateway starts is traced, and
//! the other processes follow its decision), `OTEL_BSP_*` (batching),
//! and `OTEL_EXPORTER_OTLP_HEADERS` (say, a collector's token).

use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use bytes::Bytes;
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
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

/// A collector's answer is a small status; anything longer is cut.
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

/// Installs the process's subscriber: logs filtered by `filter` (default
/// `info`), and traces to `endpoint` when set. `process` names the role
/// in every span (`switchboard.process`). Must run inside the runtime:
/// exports use it.
pub fn init(
    filter: Option<&str>,
    endpoint: Option<Endpoint>,
    process: &str,
) -> anyhow::Result<Traces> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter.unwrap_or("info"))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
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
                .with_target(switchboard_backbone::trace::TARGET, LevelFilter::INFO)
                .with_default(LevelFilter::WARN),
        );
    tracing_subscriber::registry().with(logs).with(spans).init();
    switchboard_backbone::trace::enable();
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
                let mut response = client.execute(request.try_into()?).await?;
                let mut body = Vec::new();
                while let Some(chunk) = response.chunk().await? {
                    let room = MAX_RESPONSE_BYTES.saturating_sub(body.len());
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                let mut answer = Response::builder()
                    .status(response.status())
                    .body(Bytes::from(body))?;
                *answer.headers_mut() = std::mem::take(response.headers_mut());
                Ok::<_, HttpError>(answer)
            })
            .await?
    }
}
