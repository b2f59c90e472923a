//! A Switchboard deployment for one test: nats-server, workers (the first
//! holds the embedded store and serves it), gateways.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use switchboard_client::token::ed25519_public_key;
use switchboard_client::{RestClient, TokenSpec, WsClient, mint_hs256};
use switchboard_nats::definitions;
use switchboard_protocol::ConversationKind;
use tempfile::TempDir;

use crate::proc::{Nats, Proc};

pub const TENANT: &str = "acme";
/// The operator token of clusters made with `ClusterSpec::with_operator_api`.
pub const OPERATOR_TOKEN: &str = "operator-token-0123456789";
pub const SECRET: &str = "acme-test-secret-0123456789";
pub const OTHER_TENANT: &str = "globex";
pub const OTHER_SECRET: &str = "globex-test-secret-987654321";
/// Seed of acme's Ed25519 signing key.
pub const ED_SEED: [u8; 32] = [42; 32];

#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub workers: usize,
    pub gateways: usize,
    pub partitions: u16,
    /// JetStream's dedupe window for sends (default: the stream's 2 minutes).
    pub duplicate_window_ms: Option<u64>,
    /// Extra TOML appended to the configuration file.
    pub extra_config: String,
    /// nats-server nodes: 1, or 3 for a cluster whose streams and buckets
    /// are replicated on every node (`--replicas 3`).
    pub nats_nodes: usize,
    /// Run alone: no other cluster of this test binary runs meanwhile
    /// (fault tests that measure time, on a 2-core machine).
    pub exclusive: bool,
    /// Environment of the workers and of the gateways (NATS credentials
    /// per role).
    pub worker_env: Vec<(String, String)>,
    pub gateway_env: Vec<(String, String)>,
    /// CQL nodes (`host:port`): when set, every worker, gateway and search
    /// replica runs `--store scylla` on a keyspace of this cluster's own
    /// (replication factor: one per node, up to 3; consistency QUORUM),
    /// and no process holds an embedded store.
    pub cql: Vec<String>,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        Self {
            workers: 1,
            gateways: 1,
            partitions: 8,
            duplicate_window_ms: None,
            extra_config: String::new(),
            nats_nodes: 1,
            exclusive: false,
            worker_env: Vec::new(),
            gateway_env: Vec::new(),
            cql: Vec::new(),
        }
    }
}

/// Clusters share the machine (read) unless one must run alone (write).
static TURNS: std::sync::LazyLock<Arc<tokio::sync::RwLock<()>>> =
    std::sync::LazyLock::new(Default::default);

/// A turn on the machine taken ahead of a cluster's start
/// ([`Cluster::exclusive_turn`]), for what a test starts first.
pub struct ClusterTurn(Turn);

/// A cluster's turn on the machine, held while it lives.
enum Turn {
    Shared(#[allow(dead_code)] tokio::sync::OwnedRwLockReadGuard<()>),
    Alone(#[allow(dead_code)] tokio::sync::OwnedRwLockWriteGuard<()>),
}

async fn take_turn(exclusive: bool) -> Turn {
    if exclusive {
        Turn::Alone(TURNS.clone().write_owned().await)
    } else {
        Turn::Shared(TURNS.clone().read_owned().await)
    }
}

pub struct Cluster {
    pub nats: Nats,
    /// Replicas of every stream and bucket: one per NATS node.
    pub replicas: usize,
    worker_env: Vec<(String, String)>,
    gateway_env: Vec<(String, String)>,
    /// Whether the processes run on CQL (`ClusterSpec::cql`).
    on_cql: bool,
    pub workers: Vec<Proc>,
    pub gateways: Vec<Proc>,
    /// Search replicas (v1.2), started by [`Cluster::add_search`].
    pub searches: Vec<Proc>,
    pub dir: TempDir,
    pub config: PathBuf,
    /// Dropped last: the processes above are killed before the turn ends.
    _turn: Turn,
}

fn config_text(spec: &ClusterSpec) -> String {
    let ed = base64::engine::general_purpose::STANDARD.encode(ed25519_public_key(&ED_SEED));
    let mut text = format!(
        "partitions = {}\ncommand_timeout_ms = 15000\nreceipt_interval_ms = 200\nblob_url_secret = \"cluster-blob-url-secret-0123\"\n",
        spec.partitions
    );
    if let Some(w) = spec.duplicate_window_ms {
        text.push_str(&format!("duplicate_window_ms = {w}\n"));
    }
    // Tests poll REST (plugin convergence, tenants reaching gateways)
    // faster than a person would: the harness lifts the per-user REST rate
    // unless a test sets it. Into the test's own `[limits]` table when it
    // has one (a TOML table appears once).
    let mut extra = spec.extra_config.clone();
    if !extra.contains("rest_requests_per_second") {
        let lifted = "rest_requests_per_second = 100000.0\nrest_request_burst = 100000.0\n";
        match extra.find("[limits]\n") {
            Some(at) => extra.insert_str(at + "[limits]\n".len(), lifted),
            None => extra.push_str(&format!("\n[limits]\n{lifted}")),
        }
    }
    text.push_str(&extra);
    text.push_str(&format!(
        "\n[[tenants]]\nid = \"{TENANT}\"\nhs256_secrets = [\"{SECRET}\"]\ned25519_public_keys = [\"{ed}\"]\n\
         \n[[tenants]]\nid = \"{OTHER_TENANT}\"\nhs256_secrets = [\"{OTHER_SECRET}\"]\n"
    ));
    if !spec.cql.is_empty() {
        let nodes: Vec<String> = spec.cql.iter().map(|n| format!("\"{n}\"")).collect();
        text.push_str(&format!(
            "\n[scylla]\nnodes = [{}]\nkeyspace = \"sb_it_{:016x}\"\nconsistency = \"quorum\"\n\
             replication = {{ strategy = \"simple\", factor = {} }}\n",
            nodes.join(", "),
            rand_id(),
            spec.cql.len().min(3)
        ));
    }
    text
}

/// A keyspace name of a cluster's own.
fn rand_id() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

impl ClusterSpec {
    /// The default cluster, its gateways serving the operator API with
    /// `OPERATOR_TOKEN`.
    pub fn with_operator_api() -> Self {
        Self {
            extra_config: format!("operator_token = \"{OPERATOR_TOKEN}\"\n"),
            ..Default::default()
        }
    }
}

impl Cluster {
    pub async fn start(spec: ClusterSpec) -> Self {
        let turn = take_turn(spec.exclusive).await;
        Self::start_in_turn_of(spec, ClusterTurn(turn)).await
    }

    /// The machine to oneself (as `exclusive` clusters have it), taken
    /// before what the test starts ahead of its cluster.
    pub async fn exclusive_turn() -> ClusterTurn {
        ClusterTurn(take_turn(true).await)
    }

    /// [`Cluster::start`] in a turn taken already.
    pub async fn start_in_turn_of(spec: ClusterSpec, turn: ClusterTurn) -> Self {
        let turn = turn.0;
        let dir = tempfile::tempdir().unwrap();
        let nats = Nats::start_cluster(&dir.path().join("nats"), spec.nats_nodes).await;
        Self::start_in_turn(spec, nats, dir, turn).await
    }

    /// Starts the processes against NATS the test started (say, secured);
    /// `dir` is the test's directory.
    pub async fn start_on(spec: ClusterSpec, nats: Nats, dir: TempDir) -> Self {
        let turn = take_turn(spec.exclusive).await;
        Self::start_in_turn(spec, nats, dir, turn).await
    }

    async fn start_in_turn(spec: ClusterSpec, nats: Nats, mut dir: TempDir, turn: Turn) -> Self {
        // SWITCHBOARD_TEST_KEEP=1 keeps every log and data directory.
        if std::env::var_os("SWITCHBOARD_TEST_KEEP").is_some() {
            dir.disable_cleanup(true);
            eprintln!("keeping {}", dir.path().display());
        }
        let config = dir.path().join("switchboard.toml");
        std::fs::write(&config, config_text(&spec)).unwrap();
        let mut cluster = Self {
            replicas: nats.len().max(1),
            nats,
            workers: Vec::new(),
            gateways: Vec::new(),
            searches: Vec::new(),
            dir,
            config,
            worker_env: spec.worker_env.clone(),
            gateway_env: spec.gateway_env.clone(),
            on_cql: !spec.cql.is_empty(),
            _turn: turn,
        };
        for i in 0..spec.workers {
            cluster.add_worker(i == 0).await;
        }
        for _ in 0..spec.gateways {
            cluster.add_gateway().await;
        }
        cluster
    }

    fn common_args(&self, role: &str, nats_url: &str) -> Vec<String> {
        vec![
            role.to_owned(),
            "--config".into(),
            self.config.display().to_string(),
            "--nats-url".into(),
            nats_url.to_owned(),
            "--replicas".into(),
            self.replicas.to_string(),
        ]
    }

    /// Adds a worker seeded with every NATS node; the store owner opens
    /// the embedded store.
    pub async fn add_worker(&mut self, store_owner: bool) {
        self.add_worker_via(store_owner, &self.nats.url()).await;
    }

    /// Adds a worker seeded with `nats_url` only (it learns the other
    /// nodes from the one it reaches).
    pub async fn add_worker_via(&mut self, store_owner: bool, nats_url: &str) {
        let i = self.workers.len();
        let mut args = self.common_args("worker", nats_url);
        if self.on_cql {
            // Archived history in the directory every process shares.
            args.extend([
                "--store".into(),
                "scylla".into(),
                "--data-dir".into(),
                self.blob_root().display().to_string(),
            ]);
        } else if store_owner {
            args.extend([
                "--store".into(),
                "embedded".into(),
                "--data-dir".into(),
                self.dir.path().join("store-owner").display().to_string(),
            ]);
        } else {
            args.extend(["--store".into(), "nats".into()]);
        }
        // Every worker serves metrics and health on a port of its own.
        args.extend(["--metrics-listen".into(), "127.0.0.1:0".into()]);
        let log = self.dir.path().join(format!("worker-{i}.log"));
        // On CQL the first worker creates the keyspace: some seventy
        // schema changes, each waiting for the nodes to agree, which on
        // three fresh nodes sharing two cores took 52 s of a 60 s bound.
        let within = if self.on_cql {
            Duration::from_secs(180)
        } else {
            crate::proc::READY_WITHIN
        };
        let p = Proc::start_within(args, self.worker_env.clone(), log, "ready", within).await;
        self.workers.push(p);
    }

    /// Adds a search replica (v1.2) with an index directory of its own
    /// (`search-<i>`), reading the store through the store service.
    pub async fn add_search(&mut self) {
        let i = self.searches.len();
        let mut args = self.common_args("search", &self.nats.url());
        args.extend([
            "--store".into(),
            self.store_of_readers().into(),
            "--data-dir".into(),
            self.dir
                .path()
                .join(format!("search-{i}"))
                .display()
                .to_string(),
            "--metrics-listen".into(),
            "127.0.0.1:0".into(),
        ]);
        let log = self.dir.path().join(format!("search-{i}.log"));
        let p = Proc::start(args, self.worker_env.clone(), log, "ready").await;
        self.searches.push(p);
    }

    /// Adds a gateway seeded with every NATS node.
    pub async fn add_gateway(&mut self) {
        self.add_gateway_via(&self.nats.url()).await;
    }

    /// Adds a gateway seeded with `nats_url` only.
    pub async fn add_gateway_via(&mut self, nats_url: &str) {
        let i = self.gateways.len();
        let mut args = self.common_args("gateway", nats_url);
        args.extend([
            "--store".into(),
            self.store_of_readers().into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            // Every gateway serves the same blob directory, with the same
            // URL secret (in the configuration file).
            "--data-dir".into(),
            self.blob_root().display().to_string(),
            // Metrics on a port of their own: a gateway does not serve
            // them on its public listener by default.
            "--metrics-listen".into(),
            "127.0.0.1:0".into(),
        ]);
        let log = self.dir.path().join(format!("gateway-{i}.log"));
        let p = Proc::start(args, self.gateway_env.clone(), log, "listening on").await;
        self.gateways.push(p);
    }

    /// The store of gateways and search replicas: the store service over
    /// NATS, or CQL directly.
    fn store_of_readers(&self) -> &'static str {
        if self.on_cql { "scylla" } else { "nats" }
    }

    /// The data directory the gateways share; blobs are in `blobs/` below.
    pub fn blob_root(&self) -> PathBuf {
        self.dir.path().join("gateways")
    }

    pub fn token(&self, user: &str, device: &str) -> String {
        mint_hs256(SECRET, &TokenSpec::new(TENANT, user, Some(device), 3600)).unwrap()
    }

    /// A REST client of `tenant` (TENANT or OTHER_TENANT), an admin's
    /// token when `admin`.
    pub fn rest_as(&self, gateway: usize, tenant: &str, user: &str, admin: bool) -> RestClient {
        let secret = if tenant == OTHER_TENANT {
            OTHER_SECRET
        } else {
            SECRET
        };
        let mut spec = TokenSpec::new(tenant, user, Some("default"), 3600);
        if admin {
            spec = spec.admin();
        }
        RestClient::new(
            &self.gateways[gateway].http(),
            &mint_hs256(secret, &spec).unwrap(),
        )
    }

    /// A REST client of a bot user of TENANT (`"bot": true`).
    pub fn rest_bot(&self, gateway: usize, user: &str) -> RestClient {
        let spec = TokenSpec::new(TENANT, user, None, 3600).bot();
        RestClient::new(
            &self.gateways[gateway].http(),
            &mint_hs256(SECRET, &spec).unwrap(),
        )
    }

    /// A WebSocket of `user` of `tenant` (TENANT or OTHER_TENANT).
    pub async fn ws_as(&self, gateway: usize, tenant: &str, user: &str, device: &str) -> WsClient {
        let secret = if tenant == OTHER_TENANT {
            OTHER_SECRET
        } else {
            SECRET
        };
        let token = mint_hs256(secret, &TokenSpec::new(tenant, user, Some(device), 3600)).unwrap();
        crate::connect_ws(&self.gateways[gateway].ws(), &token)
            .await
            .unwrap()
    }

    pub fn rest(&self, gateway: usize, user: &str) -> RestClient {
        RestClient::new(&self.gateways[gateway].http(), &self.token(user, "default"))
    }

    pub async fn ws(&self, gateway: usize, user: &str, device: &str) -> WsClient {
        crate::connect_ws(&self.gateways[gateway].ws(), &self.token(user, device))
            .await
            .unwrap()
    }

    pub fn ws_urls(&self) -> Vec<String> {
        self.gateways.iter().map(|g| g.ws()).collect()
    }

    /// Creates a conversation through the first gateway. A command that
    /// JetStream did not store (a stream's leader moving on a NATS
    /// cluster: `503`, "storing a command") is sent again, as a client
    /// would; nothing was created by it.
    pub async fn create(&self, kind: ConversationKind, creator: &str, members: &[&str]) -> String {
        let rest = self.rest(0, creator);
        let mut attempts = 0;
        loop {
            attempts += 1;
            match rest.create_conversation(kind, members, None).await {
                Ok((view, _)) => return view.conversation_id.as_str().to_owned(),
                Err(e) if attempts < 10 && e.to_string().contains("storing a command") => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => panic!("creating a conversation: {e}\n{}", self.logs()),
            }
        }
    }

    /// The tail of every process log, for failure messages.
    /// A request to the first gateway's operator API, with `token` as the
    /// bearer token: the status and the JSON answer (`Null` if it is not
    /// JSON).
    pub async fn operator(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
        token: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let mut request =
            reqwest::Client::new().request(method, format!("{}{path}", self.gateways[0].http()));
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        if let Some(b) = body {
            request = request.json(&b);
        }
        let r = request.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
        )
    }

    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (name, p) in self
            .workers
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("worker-{i}"), p))
            .chain(
                self.gateways
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (format!("gateway-{i}"), p)),
            )
        {
            out.push_str(&format!(
                "--- {name} ---\n{}\n",
                crate::proc::tail(&p.log(), 25)
            ));
        }
        out
    }

    /// Who holds each partition's lease now (`sb_workers`, `p.<n>`), by
    /// worker id; `None` where nobody does or the bucket did not answer.
    pub async fn partition_holders(&self, partitions: u16) -> Vec<Option<String>> {
        let js = async_nats::jetstream::new(self.nats.client().await);
        let mut holders = vec![None; usize::from(partitions)];
        if let Ok(kv) = js.get_key_value("sb_workers").await {
            for (p, holder) in holders.iter_mut().enumerate() {
                if let Ok(Some(value)) = kv.get(format!("p.{p}")).await {
                    *holder = Some(String::from_utf8_lossy(&value).into_owned());
                }
            }
        }
        holders
    }

    /// Waits until every partition has a writer and each of `workers`
    /// holds its fair share (a worker started later takes its share over
    /// from the first within a few seconds).
    pub async fn wait_for_balanced_workers(
        &self,
        partitions: u16,
        workers: usize,
        within: Duration,
    ) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let holders = self.partition_holders(partitions).await;
            let mut held: std::collections::HashMap<&str, usize> = Default::default();
            for holder in holders.iter().flatten() {
                *held.entry(holder).or_default() += 1;
            }
            let owned: usize = held.values().sum();
            let high = held.values().max().copied().unwrap_or(0);
            let low = held.values().min().copied().unwrap_or(0);
            if owned == usize::from(partitions) && held.len() == workers && high <= low + 1 {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "partitions not balanced over {workers} workers: {holders:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Where the writer of `partition` stands: what its consumer acked
    /// through (0 without a consumer) and its ingest stream's last
    /// sequence; `None` while the stream cannot be read.
    pub async fn writer_progress(&self, partition: u16) -> Option<(u64, u64)> {
        let js = async_nats::jetstream::new(self.nats.client().await);
        let mut stream = js
            .get_stream(definitions::ingest_stream_name(partition))
            .await
            .ok()?;
        let last = stream.info().await.ok()?.state.last_sequence;
        let acked = definitions::writer_acked_floor(&stream, partition)
            .await
            .ok()
            .flatten()
            .unwrap_or(0);
        Some((acked, last))
    }

    /// Waits until the writers of `partitions` have acked every command
    /// in their streams: a writer acks its batches a little after it
    /// answers them, and a test that kills it meanwhile would see them
    /// again, as repeats.
    pub async fn wait_for_writers_acked(&self, partitions: u16, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let mut behind = Vec::new();
            for p in 0..partitions {
                match self.writer_progress(p).await {
                    Some((acked, last)) if acked >= last => {}
                    _ => behind.push(p),
                }
            }
            if behind.is_empty() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "partitions {behind:?} still hold commands not acked"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every partition has a writer again (after a kill).
    pub async fn wait_for_writers(&self, partitions: u16, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let holders = self.partition_holders(partitions).await;
            let owned = holders.iter().flatten().count();
            if owned == usize::from(partitions) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {owned} of {partitions} partitions have a writer\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
