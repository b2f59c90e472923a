//! Link previews (v1.3) from outside, against hostile servers: a card
//! made after the ack and sent as `message_updated`, its image kept in
//! the blob store (S3 here) and served to members only; a redirect to a
//! private address, an endless body, a slow drip, a huge image and a
//! page that claims another page's address get no card (or no image)
//! and reach nothing private; `previews: false`, the tenant's switch and
//! deletion.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::{RestClient, WsClient};
use switchboard_protocol::{ConversationKind, Message, MessageId, ServerFrame};
use switchboard_tests::s3::S3Server;
use switchboard_tests::{Cluster, ClusterSpec, TENANT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::*;

/// A PNG's signature and a little more: enough to be known as one.
fn png(len: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.resize(len.max(8), 0);
    bytes
}

fn page(head: &str) -> String {
    format!("<!doctype html><html><head>{head}</head><body><p>hello</p></body></html>")
}

/// The hostile site on 127.0.0.1, and what it saw.
struct Site {
    base: String,
    /// Bytes the endless page wrote.
    endless_bytes: Arc<AtomicU64>,
    /// Requests the private server (127.0.0.2) got: there must be none.
    private_hits: Arc<AtomicU64>,
}

async fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        let n = s.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).into_owned();
            return head.split_whitespace().nth(1).map(str::to_owned);
        }
    }
}

async fn answer(s: &mut TcpStream, status: &str, headers: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(body).await;
}

async fn serve(mut s: TcpStream, base: String, private: String, endless: Arc<AtomicU64>) {
    let Some(path) = read_head(&mut s).await else {
        return;
    };
    let html = "content-type: text/html; charset=utf-8\r\n";
    match path.as_str() {
        "/page" => {
            let body = page(
                r#"<meta property="og:title" content="The card">
                <meta property="og:description" content="What it says">
                <meta property="og:site_name" content="Example">
                <meta property="og:image" content="/img.png">"#,
            );
            answer(&mut s, "200 OK", html, body.as_bytes()).await;
        }
        "/img.png" => answer(&mut s, "200 OK", "content-type: image/png\r\n", &png(64)).await,
        "/private" => {
            let to = format!("location: {private}/secret\r\n");
            answer(&mut s, "302 Found", &to, b"").await;
        }
        "/endless" => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ntransfer-encoding: chunked\r\n\r\n";
            let first = "<html><head><title>Endless</title>";
            let opening = format!("{:x}\r\n{first}\r\n", first.len());
            if s.write_all(head.as_bytes()).await.is_err()
                || s.write_all(opening.as_bytes()).await.is_err()
            {
                return;
            }
            let filler = format!("4000\r\n{}\r\n", "x".repeat(0x4000));
            while s.write_all(filler.as_bytes()).await.is_ok() {
                endless.fetch_add(filler.len() as u64, Ordering::SeqCst);
            }
        }
        "/drip" => {
            let body = page(r#"<meta property="og:title" content="Dripped">"#);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for b in body.bytes() {
                if s.write_all(&[b]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        "/huge" => {
            let body = page(
                r#"<meta property="og:title" content="Huge"><meta property="og:image" content="/huge.png">"#,
            );
            answer(&mut s, "200 OK", html, body.as_bytes()).await;
        }
        "/huge.png" => {
            answer(
                &mut s,
                "200 OK",
                "content-type: image/png\r\n",
                &png(3 << 20),
            )
            .await;
        }
        "/claims" => {
            let body = page(&format!(
                r#"<meta property="og:title" content="Imposter"><meta property="og:url" content="{base}/page">"#
            ));
            answer(&mut s, "200 OK", html, body.as_bytes()).await;
        }
        "/hop" => answer(&mut s, "302 Found", "location: /claims\r\n", b"").await,
        _ => answer(&mut s, "404 Not Found", "", b"").await,
    }
}

async fn site() -> Site {
    let private = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let private_url = format!("http://{}", private.local_addr().unwrap());
    let private_hits = Arc::new(AtomicU64::new(0));
    let hits = private_hits.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = private.accept().await {
            hits.fetch_add(1, Ordering::SeqCst);
            answer(
                &mut s,
                "200 OK",
                "content-type: text/html\r\n",
                page("<title>Secret</title>").as_bytes(),
            )
            .await;
        }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let endless_bytes = Arc::new(AtomicU64::new(0));
    let (b, e) = (base.clone(), endless_bytes.clone());
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve(s, b.clone(), private_url.clone(), e.clone()));
        }
    });
    Site {
        base,
        endless_bytes,
        private_hits,
    }
}

/// Sends `text` (with `extra` fields) and waits for its ack.
async fn send_text(ws: &mut WsClient, conv: &str, id: &str, text: &str, extra: Value) -> MessageId {
    send_with(ws, conv, id, text, extra).await.unwrap().0
}

/// The `message_updated` of `id` that brings cards.
async fn carded(ws: &mut WsClient, id: MessageId) -> Message {
    expect(ws, "the message's previews", |f| match f {
        ServerFrame::MessageUpdated { message }
            if message.message_id == id && !message.previews.is_empty() =>
        {
            Some(message)
        }
        _ => None,
    })
    .await
}

fn titles(m: &Message) -> Vec<(String, Option<String>)> {
    m.previews
        .iter()
        .map(|p| {
            (
                p.url.rsplit('/').next().unwrap_or_default().to_owned(),
                p.title.clone(),
            )
        })
        .collect()
}

async fn media_status(rest: &RestClient, blob_ref: &str) -> u16 {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/v1/media/{blob_ref}", rest.base()))
        .bearer_auth(rest.token())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_get_cards_after_the_ack_and_hostile_servers_get_nothing() {
    let s3_dir = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(s3_dir.path()).await;
    let site = site().await;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{}\"\n{}\n[previews]\nallow_private = [\"127.0.0.1/32\"]\ntimeout_ms = 1500\nmax_image_bytes = 1048576\n",
            switchboard_tests::cluster::OPERATOR_TOKEN,
            s3.config()
        ),
        ..Default::default()
    })
    .await;
    let group = cluster
        .create(ConversationKind::Group, "pv_ann", &["pv_bob"])
        .await;
    let mut ann = cluster.ws(0, "pv_ann", "phone").await;
    let mut bob = cluster.ws(0, "pv_bob", "phone").await;
    let base = &site.base;

    // The card comes after the message, as its update.
    let first = send_text(
        &mut ann,
        &group,
        "l1",
        &format!("look: {base}/page."),
        json!({}),
    )
    .await;
    let got = expect_message(&mut bob).await;
    assert!(
        got.previews.is_empty(),
        "the message goes out before its card"
    );
    let card = carded(&mut bob, first).await;
    let p = &card.previews[0];
    assert_eq!(p.url, format!("{base}/page"));
    assert_eq!(p.title.as_deref(), Some("The card"));
    assert_eq!(p.description.as_deref(), Some("What it says"));
    assert_eq!(p.site_name.as_deref(), Some("Example"));
    let image = p.image.clone().expect("the page's image");
    assert_eq!((image.mime.as_str(), image.size), ("image/png", 64));
    // Served like media, to members only.
    assert_eq!(
        media_status(&cluster.rest(0, "pv_bob"), &image.blob_ref).await,
        302
    );
    assert_eq!(
        media_status(&cluster.rest(0, "pv_eve"), &image.blob_ref).await,
        404
    );

    // Each hostile link beside the good one: the card of the good one
    // alone says the hostile one was tried and gave nothing.
    for (id, path) in [("h1", "private"), ("h2", "drip")] {
        let m = send_text(
            &mut ann,
            &group,
            id,
            &format!("{base}/{path} and {base}/page"),
            json!({}),
        )
        .await;
        let card = carded(&mut bob, m).await;
        assert_eq!(
            titles(&card),
            [("page".into(), Some("The card".into()))],
            "{path}"
        );
    }
    assert_eq!(
        site.private_hits.load(Ordering::SeqCst),
        0,
        "a private address was reached"
    );

    // An endless page is read to its cap: its head still makes a card.
    let m = send_text(
        &mut ann,
        &group,
        "h3",
        &format!("{base}/endless"),
        json!({}),
    )
    .await;
    let card = carded(&mut bob, m).await;
    assert_eq!(titles(&card), [("endless".into(), Some("Endless".into()))]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let written = site.endless_bytes.load(Ordering::SeqCst);
    assert!(written < 16 << 20, "the endless page wrote {written} bytes");

    // A huge image leaves the card without one.
    let m = send_text(&mut ann, &group, "h4", &format!("{base}/huge"), json!({})).await;
    let card = carded(&mut bob, m).await;
    assert_eq!(titles(&card), [("huge".into(), Some("Huge".into()))]);
    assert!(card.previews[0].image.is_none());

    // A page reached through a redirect shows under the link as posted,
    // and its claim to be another page's (og:url) changes nothing of that
    // page's card.
    let m = send_text(&mut ann, &group, "h5", &format!("{base}/hop"), json!({})).await;
    let card = carded(&mut bob, m).await;
    assert_eq!(card.previews[0].url, format!("{base}/hop"));
    assert_eq!(card.previews[0].title.as_deref(), Some("Imposter"));
    let m = send_text(
        &mut ann,
        &group,
        "h6",
        &format!("again {base}/page"),
        json!({}),
    )
    .await;
    let card = carded(&mut bob, m).await;
    assert_eq!(titles(&card), [("page".into(), Some("The card".into()))]);

    // An edit that takes the link away takes its card.
    ann.send_text(
        json!({"type": "edit_message", "conversation_id": group, "message_id": m.to_string(),
               "content": {"kind": "text", "text": "again, no link"}})
        .to_string(),
    )
    .await
    .unwrap();
    let edited = expect(&mut bob, "the edit", |f| match f {
        ServerFrame::MessageUpdated { message }
            if message.message_id == m && message.edited_at.is_some() =>
        {
            Some(message)
        }
        _ => None,
    })
    .await;
    assert!(edited.previews.is_empty(), "{:?}", edited.previews);

    // The operator's view of the cache, with the commands of
    // nats/README.md as written (the docs' tenant `acme` is this test's,
    // their key this link's).
    let key = {
        let digest = ring::digest::digest(&ring::digest::SHA256, format!("{base}/page").as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("{TENANT}.{hex}")
    };
    let server = cluster.nats.url();
    let section = "## Consumer `previews` and KV bucket `sb_previews`";
    for line in switchboard_tests::nats_cli::documented("nats/README.md", section) {
        let line = line.replace("acme.5a3f...", &key);
        let ran = switchboard_tests::nats_cli::run(&server, &line, &[]).await;
        let shows: Vec<&str> = match line.as_str() {
            "nats consumer info SB_PUSH previews" => vec!["previews"],
            "nats kv ls sb_previews" => vec![key.as_str()],
            l if l.starts_with("nats kv purge sb_previews ") => vec![],
            other => panic!("{other:?} is documented but not checked here"),
        };
        switchboard_tests::nats_cli::expect(&ran, &shows);
    }
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let cache = js.get_key_value("sb_previews").await.unwrap();
    assert!(cache.get(&key).await.unwrap().is_none(), "purged");

    // `previews: false`, and the tenant's switch: no card; a later link's
    // card says the stage got that far.
    let quiet = send_text(
        &mut ann,
        &group,
        "q1",
        &format!("{base}/page"),
        json!({"previews": false}),
    )
    .await;
    // The tenant's switch lives in its record in sb_tenants.
    create_tenant_record(&cluster, TENANT, switchboard_tests::SECRET).await;
    let admin = cluster.rest_as(0, TENANT, "pv_root", true);
    let (status, body) = call(
        &admin,
        "PUT",
        "/v1/admin/previews",
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(
        (status, body["enabled"].as_bool()),
        (200, Some(false)),
        "{body}"
    );
    let (_, body) = call(&admin, "GET", "/v1/admin/previews", None).await;
    assert_eq!(body["enabled"], false);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let off = send_text(&mut ann, &group, "q2", &format!("{base}/page"), json!({})).await;
    let (status, _) = call(
        &admin,
        "PUT",
        "/v1/admin/previews",
        Some(json!({"enabled": true})),
    )
    .await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let on = send_text(&mut ann, &group, "q3", &format!("{base}/page"), json!({})).await;
    carded(&mut bob, on).await;
    let history = full_history(&cluster, &group, "pv_bob").await;
    for id in [quiet, off] {
        let m = history.iter().find(|m| m.message_id == id).unwrap();
        assert!(m.previews.is_empty(), "{id}: {:?}", m.previews);
    }

    // Deleted: the card goes with the message. Its image, a cached card's,
    // stays for the other messages that show it.
    ann.send_text(
        json!({"type": "delete_message", "conversation_id": group, "message_id": first.to_string()})
            .to_string(),
    )
    .await
    .unwrap();
    let gone = expect(&mut bob, "the deletion", |f| match f {
        ServerFrame::MessageUpdated { message } if message.message_id == first => Some(message),
        _ => None,
    })
    .await;
    assert!(gone.previews.is_empty());
    // Messages that showed the same (cached) card keep its image.
    assert_eq!(
        media_status(&cluster.rest(0, "pv_bob"), &image.blob_ref).await,
        302
    );
}

/// A page on 127.0.0.3 (another site, as far as a plugin can tell), for
/// any path: "Elsewhere".
async fn elsewhere() -> String {
    let listener = TcpListener::bind("127.0.0.3:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                if read_head(&mut s).await.is_some() {
                    let body = page("<title>Elsewhere</title>");
                    answer(
                        &mut s,
                        "200 OK",
                        "content-type: text/html\r\n",
                        body.as_bytes(),
                    )
                    .await;
                }
            });
        }
    });
    base
}

/// The tenant's moderator (plugin package 0.4.0) decides each card on
/// the worker before the members see it: etiquette drops the cards of a
/// blocked site and shows the others without their images.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_moderator_drops_or_rewrites_cards() {
    let s3_dir = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(s3_dir.path()).await;
    let site = site().await;
    let other = elsewhere().await;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "{}\n[previews]\nallow_private = [\"127.0.0.1/32\", \"127.0.0.3/32\"]\n",
            s3.config()
        ),
        ..Default::default()
    })
    .await;
    let group = cluster
        .create(ConversationKind::Group, "pm_ann", &["pm_bob"])
        .await;
    let mut ann = cluster.ws(0, "pm_ann", "phone").await;
    let mut bob = cluster.ws(0, "pm_bob", "phone").await;
    let base = &site.base;

    // Without a plugin, both sites give cards.
    let m = send_text(
        &mut ann,
        &group,
        "p0",
        &format!("{base}/page {other}/x"),
        json!({}),
    )
    .await;
    let card = carded(&mut bob, m).await;
    assert_eq!(card.previews.len(), 2, "{:?}", card.previews);
    assert!(card.previews[0].image.is_some());

    let admin = cluster.rest_as(0, TENANT, "pm_root", true);
    let other_host = other
        .trim_start_matches("http://")
        .split(':')
        .next()
        .unwrap();
    admin
        .deploy_plugin(
            "moderation",
            switchboard_tests::plugin("etiquette"),
            &[("blocked_sites", other_host), ("preview_images", "false")],
            None,
        )
        .await
        .unwrap();
    // The worker follows the deploy within moments: until it does, cards
    // come as made.
    let mut moderated = None;
    for n in 0..20 {
        let m = send_text(
            &mut ann,
            &group,
            &format!("p{}", n + 1),
            &format!("{base}/page {other}/y"),
            json!({}),
        )
        .await;
        let card = carded(&mut bob, m).await;
        if card.previews.len() == 1 {
            moderated = Some(card);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let card = moderated.expect("the moderator's verdicts within 5 s");
    assert_eq!(titles(&card), [("page".into(), Some("The card".into()))]);
    assert!(card.previews[0].image.is_none(), "{:?}", card.previews);
    // As stored.
    let history = full_history(&cluster, &group, "pm_bob").await;
    let stored = history
        .iter()
        .find(|h| h.message_id == card.message_id)
        .unwrap();
    assert_eq!(stored.previews, card.previews);
}
