//! A secured backbone: NATS with TLS (a private CA, client certificates
//! required) on the client and route ports and one user per role, as
//! shipped in `nats/server/secure/`; and each authentication method a
//! Switchboard process accepts (user and password, token, NKey seed,
//! `.creds` file). Wrong credentials or a TLS setup the server refuses end
//! start-up with a clear error instead of retrying forever.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use switchboard_protocol::ConversationKind;
use switchboard_tests::proc::{NodePlace, plain_config, run_switchboard};
use switchboard_tests::tls::fixture;
use switchboard_tests::{Cluster, ClusterSpec, Nats, workspace_root};

use crate::support::*;

const PASSWORDS: [(&str, &str); 4] = [
    ("SB_NATS_ADMIN_PASSWORD", "admin-test-password"),
    ("SB_NATS_WORKER_PASSWORD", "worker-test-password"),
    ("SB_NATS_GATEWAY_PASSWORD", "gateway-test-password"),
    ("SB_NATS_MONITOR_PASSWORD", "monitor-test-password"),
];

fn fixture_str(name: &str) -> String {
    fixture(name).display().to_string()
}

/// The shipped node configuration `nats/server/secure/n<i>.conf`, moved
/// onto loopback ports, the test's directories and the test certificates.
fn shipped_secure_config(i: usize, places: &[NodePlace]) -> String {
    let secure = workspace_root().join("nats/server/secure");
    let node = &places[i];
    let mut conf = std::fs::read_to_string(secure.join(format!("n{}.conf", i + 1))).unwrap();
    let swaps = [
        (
            "0.0.0.0:4222".to_owned(),
            format!("127.0.0.1:{}", node.port),
        ),
        (
            "0.0.0.0:6222".to_owned(),
            format!("127.0.0.1:{}", node.cluster_port),
        ),
        ("http: 127.0.0.1:8222\n".to_owned(), String::new()),
        (
            "/etc/nats/tls/server-cert.pem".to_owned(),
            fixture_str("nats-server-cert.pem"),
        ),
        (
            "/etc/nats/tls/server-key.pem".to_owned(),
            fixture_str("nats-server-key.pem"),
        ),
        (
            "/etc/nats/tls/ca.pem".to_owned(),
            fixture_str("nats-ca.pem"),
        ),
        (
            "/var/lib/nats/jetstream".to_owned(),
            node.dir.join("jetstream").display().to_string(),
        ),
    ];
    // nats-server reads includes relative to the configuration file.
    std::fs::create_dir_all(&node.dir).unwrap();
    std::fs::copy(secure.join("accounts.conf"), node.dir.join("accounts.conf")).unwrap();
    for (from, to) in swaps {
        assert!(conf.contains(&from), "n{}.conf has {from:?}", i + 1);
        conf = conf.replace(&from, &to);
    }
    for (n, place) in places.iter().enumerate() {
        conf = conf.replace(
            &format!("nats-route://n{}:6222", n + 1),
            &format!("nats-route://127.0.0.1:{}", place.cluster_port),
        );
    }
    conf
}

/// The environment of a Switchboard process of `role` on the secured
/// backbone: its user, the CA and its client certificate.
fn role_env(role: &str, password: &str) -> Vec<(String, String)> {
    vec![
        ("SWITCHBOARD_NATS_USER".into(), role.into()),
        ("SWITCHBOARD_NATS_PASSWORD".into(), password.into()),
        ("SWITCHBOARD_NATS_CA".into(), fixture_str("nats-ca.pem")),
        (
            "SWITCHBOARD_NATS_CERT".into(),
            fixture_str("nats-client-cert.pem"),
        ),
        (
            "SWITCHBOARD_NATS_KEY".into(),
            fixture_str("nats-client-key.pem"),
        ),
    ]
}

fn tls_url(nats: &Nats) -> String {
    nats.urls()
        .iter()
        .map(|u| u.replace("nats://", "tls://"))
        .collect::<Vec<_>>()
        .join(",")
}

async fn tls_client(nats: &Nats, user: &str, password: &str) -> async_nats::Client {
    let options = async_nats::ConnectOptions::with_user_and_password(user.into(), password.into());
    // A gateway's replies come under its own prefix: it may subscribe to
    // no other inbox.
    let options = if user == "gateway" {
        options.custom_inbox_prefix(switchboard_nats::GATEWAY_INBOX_PREFIX)
    } else {
        options
    };
    options
        .add_root_certificates(fixture("nats-ca.pem"))
        .add_client_certificate(
            fixture("nats-client-cert.pem"),
            fixture("nats-client-key.pem"),
        )
        .require_tls(true)
        .connect(nats.urls().as_slice())
        .await
        .unwrap()
}

/// The shipped secure cluster (three nodes, TLS, a user per role) with a
/// worker and a gateway on it, each as its role's user.
pub(crate) async fn shipped_secure_cluster() -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let env: Vec<(String, String)> = PASSWORDS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let nats = Nats::start_custom(&dir.path().join("nats"), 3, env, shipped_secure_config).await;
    let mut gateway_env = role_env("gateway", PASSWORDS[2].1);
    // Gateways may not manage JetStream: they only check the definitions.
    gateway_env.push(("SWITCHBOARD_DEFINE_BACKBONE".into(), "false".into()));
    Cluster::start_on(
        ClusterSpec {
            workers: 1,
            gateways: 1,
            partitions: 4,
            worker_env: role_env("worker", PASSWORDS[1].1),
            gateway_env,
            ..Default::default()
        },
        nats,
        dir,
    )
    .await
}

/// A NATS client of the shipped secure cluster as `role`'s user.
pub(crate) async fn role_client(cluster: &Cluster, role: &str) -> async_nats::Client {
    let password = match role {
        "admin" => PASSWORDS[0].1,
        "worker" => PASSWORDS[1].1,
        _ => PASSWORDS[2].1,
    };
    tls_client(&cluster.nats, role, password).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_secure_cluster_serves_with_tls_and_role_users() {
    let cluster = shipped_secure_cluster().await;
    // The seed list the harness gives is nats://; TLS is required by the
    // settings, so the client upgrades.
    let conv = cluster
        .create(ConversationKind::Direct, "tlsa", &["tlsb"])
        .await;
    let mut a = cluster.ws(0, "tlsa", "a").await;
    let mut b = cluster.ws(0, "tlsb", "b").await;
    send_acked(&mut a, &conv, "over-tls", "secured").await;
    assert_eq!(text_of(&expect_message(&mut b).await), "secured");

    // A tenant admin's ban and its audit entry, through a gateway that
    // runs as the `gateway` user: it may write `sb_tenant_bans`, record
    // on `sb.audit.>` and read `SB_AUDIT`.
    let root = cluster.rest_as(0, switchboard_tests::TENANT, "root", true);
    let (status, body) = call(
        &root,
        "PUT",
        "/v1/admin/bans/tlsb",
        Some(serde_json::json!({})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&cluster.rest(0, "tlsb"), "GET", "/v1/conversations", None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("banned")),
        "{body}"
    );
    let (status, log) = call(&root, "GET", "/v1/admin/audit", None).await;
    assert_eq!(status, 200, "{log}");
    assert_eq!(log["entries"][0]["action"], "user_banned", "{log}");
    let (status, _) = call(&root, "DELETE", "/v1/admin/bans/tlsb", None).await;
    assert_eq!(status, 204);

    // The gateway's user cannot write tenants; the admin's can.
    let gateway = tls_client(&cluster.nats, "gateway", PASSWORDS[2].1).await;
    let js = async_nats::jetstream::new(gateway);
    let tenants = js.get_key_value("sb_tenants").await.unwrap();
    let put =
        tokio::time::timeout(Duration::from_secs(5), tenants.put("forged", "{}".into())).await;
    assert!(
        !matches!(put, Ok(Ok(_))),
        "a gateway must not write sb_tenants"
    );
    let admin = tls_client(&cluster.nats, "admin", PASSWORDS[0].1).await;
    let js = async_nats::jetstream::new(admin);
    let tenants = js.get_key_value("sb_tenants").await.unwrap();
    assert!(tenants.get("forged").await.unwrap().is_none());

    // `switchboard tenant` as the admin, over TLS.
    let url = tls_url(&cluster.nats);
    let admin_env = role_env("admin", PASSWORDS[0].1);
    let admin_env: Vec<(&str, &str)> = admin_env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (status, stderr) = run_switchboard(
        &[
            "tenant",
            "--nats-url",
            &url,
            "create",
            "secured-tenant",
            "--hs256-secret",
            "secured-tenant-secret-0123",
        ],
        &admin_env,
        Duration::from_secs(30),
    )
    .await;
    assert!(status.is_some_and(|s| s.success()), "{stderr}");
    assert!(tenants.get("secured-tenant").await.unwrap().is_some());

    // Wrong password, no client certificate, an untrusted CA: each is
    // refused at start-up, at once and with a clear error.
    let mut wrong_password = admin_env.clone();
    wrong_password.retain(|(k, _)| *k != "SWITCHBOARD_NATS_PASSWORD");
    wrong_password.push(("SWITCHBOARD_NATS_PASSWORD", "not-the-password"));
    let mut no_cert = admin_env.clone();
    no_cert
        .retain(|(k, _)| !k.starts_with("SWITCHBOARD_NATS_CERT") && *k != "SWITCHBOARD_NATS_KEY");
    let other_ca = fixture_str("test-ca.pem");
    let mut wrong_ca = admin_env.clone();
    wrong_ca.retain(|(k, _)| *k != "SWITCHBOARD_NATS_CA");
    wrong_ca.push(("SWITCHBOARD_NATS_CA", &other_ca));
    for (case, env, expect) in [
        ("wrong password", &wrong_password, "authorization violation"),
        (
            "no client certificate",
            &no_cert,
            "NATS refused the connection",
        ),
        ("untrusted CA", &wrong_ca, "NATS refused the connection"),
    ] {
        let (status, stderr) = run_switchboard(
            &["tenant", "--nats-url", &url, "list"],
            env,
            Duration::from_secs(20),
        )
        .await;
        assert!(
            status.is_some_and(|s| !s.success()),
            "{case}: start-up must be refused, not retried ({status:?})\n{stderr}"
        );
        assert!(stderr.contains(expect), "{case}: {stderr}");
    }
}

/// Starts one plain node whose configuration ends with `auth`.
async fn node_with(dir: &Path, auth: &str) -> Nats {
    let auth = auth.to_owned();
    Nats::start_custom(dir, 1, Vec::new(), move |i, places| {
        let mut conf = plain_config(i, places);
        conf.push_str(&auth);
        conf
    })
    .await
}

/// `switchboard tenant list` against `nats`, with `env`: whether it got in.
async fn tenant_list(nats: &Nats, env: &[(&str, &str)]) -> (bool, String) {
    let (status, stderr) = run_switchboard(
        &["tenant", "--nats-url", &nats.url(), "list"],
        env,
        Duration::from_secs(20),
    )
    .await;
    (status.is_some_and(|s| s.success()), stderr)
}

#[tokio::test]
async fn token_and_nkey_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let nats = node_with(
        &dir.path().join("token"),
        "authorization { token: \"s3cret-token-0123\" }\n",
    )
    .await;
    let (ok, stderr) = tenant_list(&nats, &[("SWITCHBOARD_NATS_TOKEN", "s3cret-token-0123")]).await;
    assert!(ok, "{stderr}");
    let (ok, stderr) = tenant_list(&nats, &[("SWITCHBOARD_NATS_TOKEN", "wrong-token")]).await;
    assert!(
        !ok && stderr.contains("authorization violation"),
        "{stderr}"
    );

    let user = nkeys::KeyPair::new_user();
    let seed_file = dir.path().join("user.nk");
    std::fs::write(&seed_file, user.seed().unwrap()).unwrap();
    let nats = node_with(
        &dir.path().join("nkey"),
        &format!(
            "authorization {{ users = [ {{ nkey: \"{}\" }} ] }}\n",
            user.public_key()
        ),
    )
    .await;
    let seed_path = seed_file.display().to_string();
    let (ok, stderr) = tenant_list(&nats, &[("SWITCHBOARD_NATS_NKEY_SEED_FILE", &seed_path)]).await;
    assert!(ok, "{stderr}");
    let stranger = nkeys::KeyPair::new_user();
    let stranger_file = dir.path().join("stranger.nk");
    std::fs::write(&stranger_file, stranger.seed().unwrap()).unwrap();
    let stranger_path = stranger_file.display().to_string();
    let (ok, stderr) = tenant_list(
        &nats,
        &[("SWITCHBOARD_NATS_NKEY_SEED_FILE", &stranger_path)],
    )
    .await;
    assert!(
        !ok && stderr.contains("authorization violation"),
        "{stderr}"
    );
}

/// A NATS JWT: `claims` signed by `issuer`.
fn jwt(issuer: &nkeys::KeyPair, claims: serde_json::Value) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = b64.encode(r#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let body = b64.encode(claims.to_string());
    let signing_input = format!("{header}.{body}");
    let signature = issuer.sign(signing_input.as_bytes()).unwrap();
    format!("{signing_input}.{}", b64.encode(signature))
}

fn claims(
    issuer: &nkeys::KeyPair,
    subject: &nkeys::KeyPair,
    name: &str,
    nats: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({
        "jti": format!("{name}-{}", std::process::id()),
        "iat": 1_700_000_000u64,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject.public_key(),
        "nats": nats,
    })
}

/// Decentralised JWT auth: an operator, an account with JetStream, and a
/// user whose `.creds` file Switchboard is given.
#[tokio::test]
async fn creds_file_authentication() {
    let operator = nkeys::KeyPair::new_operator();
    let system = nkeys::KeyPair::new_account();
    let account = nkeys::KeyPair::new_account();
    let user = nkeys::KeyPair::new_user();
    let operator_jwt = jwt(
        &operator,
        claims(
            &operator,
            &operator,
            "test-operator",
            serde_json::json!({"type": "operator", "version": 2}),
        ),
    );
    let unlimited = serde_json::json!({
        "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
        "wildcards": true, "conn": -1, "leaf": -1,
        "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1,
    });
    let account_jwt = jwt(
        &operator,
        claims(
            &operator,
            &account,
            "switchboard",
            serde_json::json!({"type": "account", "version": 2, "limits": unlimited}),
        ),
    );
    let system_jwt = jwt(
        &operator,
        claims(
            &operator,
            &system,
            "SYS",
            serde_json::json!({"type": "account", "version": 2}),
        ),
    );
    let user_jwt = jwt(
        &account,
        claims(
            &account,
            &user,
            "worker",
            serde_json::json!({
                "type": "user", "version": 2, "pub": {}, "sub": {},
                "subs": -1, "data": -1, "payload": -1,
            }),
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let nats = node_with(
        &dir.path().join("jwt"),
        &format!(
            "operator: \"{operator_jwt}\"\nsystem_account: {sys}\nresolver: MEMORY\n\
             resolver_preload: {{ {sys}: \"{system_jwt}\", {acc}: \"{account_jwt}\" }}\n",
            sys = system.public_key(),
            acc = account.public_key(),
        ),
    )
    .await;
    let creds = |jwt: &str, seed: &str| {
        format!(
            "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
        )
    };
    let creds_file: PathBuf = dir.path().join("worker.creds");
    std::fs::write(&creds_file, creds(&user_jwt, &user.seed().unwrap())).unwrap();
    let creds_path = creds_file.display().to_string();
    let (ok, stderr) = tenant_list(&nats, &[("SWITCHBOARD_NATS_CREDS", &creds_path)]).await;
    assert!(ok, "{stderr}\n{}", nats.node_log(0));

    // The same JWT with another user's seed proves nothing.
    let impostor = nkeys::KeyPair::new_user();
    let bad_file = dir.path().join("impostor.creds");
    std::fs::write(&bad_file, creds(&user_jwt, &impostor.seed().unwrap())).unwrap();
    let bad_path = bad_file.display().to_string();
    let (ok, stderr) = tenant_list(&nats, &[("SWITCHBOARD_NATS_CREDS", &bad_path)]).await;
    assert!(!ok && stderr.contains("NATS refused"), "{stderr}");
}

/// The system account of the shipped secure configuration: its `monitor`
/// user sees every server through the real CLI (`nats server ls`, `nats
/// server report jetstream`, as deploy/README.md and the runbooks use
/// them), and can change nothing: no reload, no kick, no lame-duck mode,
/// no JetStream of its own, no Switchboard message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_monitoring_user_sees_every_server_and_changes_nothing() {
    use switchboard_tests::nats_cli;

    let cluster = shipped_secure_cluster().await;
    let url = tls_url(&cluster.nats);
    let (ca, cert, key) = (
        fixture_str("nats-ca.pem"),
        fixture_str("nats-client-cert.pem"),
        fixture_str("nats-client-key.pem"),
    );
    let as_user = |user: &'static str, password: &'static str| {
        vec![
            ("NATS_USER", user.to_owned()),
            ("NATS_PASSWORD", password.to_owned()),
            ("NATS_CA", ca.clone()),
            ("NATS_CERT", cert.clone()),
            ("NATS_KEY", key.clone()),
        ]
    };
    let monitor = as_user("monitor", PASSWORDS[3].1);
    let run = |line: &str, env: Vec<(&'static str, String)>| {
        let (url, line) = (url.clone(), line.to_owned());
        async move {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            nats_cli::run(&url, &line, &env).await
        }
    };

    // The docs' commands, as written: a context for the monitor, then
    // the two views, in a home of the test's own.
    let home = tempfile::tempdir().unwrap();
    let home = home.path().display().to_string();
    let docs_env = vec![
        ("HOME", home.clone()),
        ("XDG_CONFIG_HOME", home.clone()),
        ("SB_NATS_MONITOR_PASSWORD", PASSWORDS[3].1.to_owned()),
    ];
    let section = "## The system account and its `monitor` user";
    for line in nats_cli::documented("nats/server/secure/README.md", section) {
        let line = line
            .replace("tls://n1:4222,tls://n2:4222,tls://n3:4222", &url)
            .replace("/etc/nats/tls/ca.pem", &ca)
            .replace("client-cert.pem", &cert)
            .replace("client-key.pem", &key);
        let ran = run(&line, docs_env.clone()).await;
        assert!(ran.ok, "{ran:?}");
        let shows: &[&str] = match line.as_str() {
            l if l.starts_with("nats context add sb-monitor ") => &["sb-monitor"],
            "nats --context sb-monitor server report jetstream" => {
                &["n1", "n2", "n3", "streams", "leader"]
            }
            "nats --context sb-monitor server ls" => &["n1", "n2", "n3"],
            other => panic!("{other:?} is documented but not checked here"),
        };
        for s in shows {
            assert!(
                ran.text.to_lowercase().contains(s),
                "{line}: {s}: {}",
                ran.text
            );
        }
    }

    // The views the README's table names besides.
    for line in [
        "nats server info",
        "nats server report connections",
        "nats server report accounts",
    ] {
        let ran = run(line, monitor.clone()).await;
        assert!(ran.ok, "{ran:?}");
    }

    // Nothing that changes a server: each request is refused by the
    // server's permissions, not merely unanswered.
    let client = tls_client(&cluster.nats, "monitor", PASSWORDS[3].1).await;
    let pong = client
        .request("$SYS.REQ.SERVER.PING", "".into())
        .await
        .unwrap();
    let pong: serde_json::Value = serde_json::from_slice(&pong.payload).unwrap();
    let id = pong["server"]["id"].as_str().unwrap().to_owned();
    for action in ["RELOAD", "KICK", "LDM", "PROFILEZ"] {
        let line = format!("nats req '$SYS.REQ.SERVER.{id}.{action}' ''");
        // The CLI reports the server's refusal, and exits 0 all the same.
        let refused = run(&line, monitor.clone()).await;
        assert!(
            refused.text.contains("Permissions Violation"),
            "{action}: {refused:?}"
        );
    }
    // Another account: none of Switchboard's streams or subjects.
    let streams = run("nats stream ls", monitor.clone()).await;
    assert!(!streams.ok, "{streams:?}");
    let sub = run("nats sub 'sb.>' --count 1 --timeout 1s", monitor.clone()).await;
    assert!(
        !sub.ok && sub.text.contains("Permissions Violation"),
        "{sub:?}"
    );

    // The Switchboard admin is not in the system account: the report
    // needs the monitor.
    let report = run(
        "nats server report jetstream",
        as_user("admin", PASSWORDS[0].1),
    )
    .await;
    assert!(!report.ok, "{report:?}");
}
