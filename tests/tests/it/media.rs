//! Media (F13) end to end on two gateways, on the local blob store and on
//! a real S3-compatible server (s3s-fs, which checks the signatures):
//! grant, upload straight to the signed URL, send the reference, download
//! through a short-lived URL that only the uploader and members get; and
//! every bad request answered with a clear error.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::RestClient;
use switchboard_protocol::content::Media;
use switchboard_protocol::{
    ClientFrame, ClientMsgId, Content, ConversationId, ConversationKind, ErrorCode,
};
use switchboard_tests::cluster::OTHER_TENANT;
use switchboard_tests::s3::S3Server;
use switchboard_tests::{Cluster, ClusterSpec, TENANT, eventually};

use crate::support::*;

#[derive(Clone, Copy, Debug)]
enum Backend {
    Local,
    S3,
}

/// A cluster whose gateways keep media in `backend`.
struct MediaCluster {
    cluster: Cluster,
    s3: Option<S3Server>,
    _s3_dir: Option<tempfile::TempDir>,
}

impl MediaCluster {
    async fn start(backend: Backend, gateways: usize, extra_config: &str) -> Self {
        let (s3, dir) = match backend {
            Backend::Local => (None, None),
            Backend::S3 => {
                let dir = tempfile::tempdir().unwrap();
                (Some(S3Server::start(dir.path()).await), Some(dir))
            }
        };
        let mut config = extra_config.to_owned();
        if let Some(s3) = &s3 {
            config.push_str(&s3.config());
        }
        let cluster = Cluster::start(ClusterSpec {
            gateways,
            extra_config: config,
            ..Default::default()
        })
        .await;
        Self {
            cluster,
            s3,
            _s3_dir: dir,
        }
    }

    /// Where the blob's bytes are kept, to lose them on purpose.
    fn bytes_path(&self, blob_ref: &str) -> std::path::PathBuf {
        let tenant_hex: String = TENANT.bytes().map(|b| format!("{b:02x}")).collect();
        match &self.s3 {
            Some(s3) => s3.object_path(&format!("media/{tenant_hex}/{blob_ref}")),
            None => self
                .cluster
                .blob_root()
                .join("blobs")
                .join(tenant_hex)
                .join(blob_ref),
        }
    }
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `POST /v1/media`: the status and the answer.
pub(crate) async fn grant(rest: &RestClient, mime: &str, size: u64) -> (u16, Value) {
    let r = rest
        .raw()
        .post(format!("{}/v1/media", rest.base()))
        .bearer_auth(rest.token())
        .json(&json!({ "mime": mime, "size": size }))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// PUTs `bytes` to the grant's URL with the grant's headers, the
/// content type replaced when given.
pub(crate) async fn put(
    ticket: &Value,
    content_type: Option<&str>,
    bytes: Vec<u8>,
) -> (u16, Value) {
    put_to(
        ticket["upload_url"].as_str().unwrap(),
        ticket,
        content_type,
        bytes,
    )
    .await
}

async fn put_to(
    url: &str,
    ticket: &Value,
    content_type: Option<&str>,
    bytes: Vec<u8>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new().put(url).body(bytes);
    for (k, v) in ticket["headers"].as_object().unwrap() {
        let v = match (k.as_str(), content_type) {
            ("content-type", Some(ct)) => ct,
            _ => v.as_str().unwrap(),
        };
        // The body sets the length; a wrong one is the test's to send.
        if k != "content-length" {
            request = request.header(k.as_str(), v);
        }
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// `GET /v1/media/{blob_ref}` without following the redirect: the status
/// and the `Location`.
async fn download_url(rest: &RestClient, blob_ref: &str) -> (u16, Option<String>) {
    let r = no_redirects()
        .get(format!("{}/v1/media/{blob_ref}", rest.base()))
        .bearer_auth(rest.token())
        .send()
        .await
        .unwrap();
    let location = r
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned());
    (r.status().as_u16(), location)
}

/// The URL with one character of its signature changed.
fn tamper(url: &str) -> String {
    let at = match url.find("X-Amz-Signature=") {
        Some(i) => i + "X-Amz-Signature=".len(),
        // A local token: payload, a dot, the signature.
        None => url.rfind('.').unwrap() + 1,
    };
    let mut bytes = url.as_bytes().to_vec();
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    String::from_utf8(bytes).unwrap()
}

pub(crate) fn image_frame(conv: &str, id: &str, blob_ref: &str, size: u64) -> ClientFrame {
    ClientFrame::send_message(
        ClientMsgId::new(id).unwrap(),
        ConversationId::new(conv).unwrap(),
        Content::Image(Media {
            blob_ref: blob_ref.into(),
            mime: "image/png".into(),
            size,
            caption: Some("the whiteboard".into()),
        }),
    )
}

#[tokio::test]
async fn an_image_is_uploaded_sent_and_downloaded_by_members_only_local() {
    image_round_trip(Backend::Local).await;
}

#[tokio::test]
async fn an_image_is_uploaded_sent_and_downloaded_by_members_only_s3() {
    image_round_trip(Backend::S3).await;
}

async fn image_round_trip(backend: Backend) {
    let media = MediaCluster::start(backend, 2, "").await;
    let cluster = &media.cluster;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let alice = cluster.rest(0, "alice");
    let png: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    let size = png.len() as u64;

    let (status, ticket) = grant(&alice, "image/png", size).await;
    assert_eq!(status, 201, "{ticket}");
    let blob_ref = ticket["blob_ref"].as_str().unwrap().to_owned();
    assert_eq!(ticket["method"], "PUT");
    assert_eq!(ticket["headers"]["content-type"], "image/png");
    let upload_url = ticket["upload_url"].as_str().unwrap();
    assert!(upload_url.starts_with("http://"), "{upload_url}");
    let (status, body) = put(&ticket, None, png.clone()).await;
    assert_eq!(status, 200, "{backend:?}: {body}");

    // Before sending it, only the uploader may download it.
    assert_eq!(download_url(&alice, &blob_ref).await.0, 302);
    let bob = cluster.rest(1, "bob");
    assert_eq!(download_url(&bob, &blob_ref).await.0, 404);

    let mut alice_ws = cluster.ws(0, "alice", "phone").await;
    let mut bob_ws = cluster.ws(1, "bob", "phone").await;
    alice_ws
        .send(&image_frame(&conv, "img1", &blob_ref, size))
        .await
        .unwrap();
    expect_ack(&mut alice_ws, "img1").await;
    let m = expect_message(&mut bob_ws).await;
    let Some(Content::Image(sent)) = &m.content else {
        panic!("not an image: {m:?}");
    };
    assert_eq!(sent.blob_ref, blob_ref);

    // A member downloads it through the other gateway.
    let (status, location) = download_url(&bob, &blob_ref).await;
    assert_eq!(status, 302);
    let r = reqwest::get(location.unwrap()).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().await.unwrap().to_vec(), png);

    // Nobody else: not a stranger of the tenant, not another tenant.
    let carol = cluster.rest(0, "carol");
    assert_eq!(download_url(&carol, &blob_ref).await.0, 404);
    let globex = cluster.rest_as(0, OTHER_TENANT, "bob", false);
    assert_eq!(download_url(&globex, &blob_ref).await.0, 404);
    // Bob may forward what he can read; dave, who cannot read it, may not
    // send it.
    let dm = cluster
        .create(ConversationKind::Direct, "bob", &["carol"])
        .await;
    bob_ws
        .send(&image_frame(&dm, "fwd", &blob_ref, size))
        .await
        .unwrap();
    expect_ack(&mut bob_ws, "fwd").await;
    assert_eq!(
        download_url(&carol, &blob_ref).await.0,
        302,
        "forwarded to carol"
    );
    let other = cluster
        .create(ConversationKind::Group, "dave", &["erin"])
        .await;
    let mut dave_ws = cluster.ws(0, "dave", "phone").await;
    dave_ws
        .send(&image_frame(&other, "steal", &blob_ref, size))
        .await
        .unwrap();
    assert_eq!(expect_error(&mut dave_ws).await.0, ErrorCode::NotFound);
}

#[tokio::test]
async fn bad_uploads_and_downloads_get_clear_errors_local() {
    bad_uploads(Backend::Local).await;
}

#[tokio::test]
async fn bad_uploads_and_downloads_get_clear_errors_s3() {
    bad_uploads(Backend::S3).await;
}

async fn bad_uploads(backend: Backend) {
    let media = MediaCluster::start(
        backend,
        1,
        "[media]\nmax_bytes = 1000\nupload_url_secs = 1\ndownload_url_secs = 1\n",
    )
    .await;
    let cluster = &media.cluster;
    let local = matches!(backend, Backend::Local);
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let alice = cluster.rest(0, "alice");

    let (status, e) = grant(&alice, "image/png", 1001).await;
    assert_eq!((status, e["code"].as_str()), (400, Some("invalid_request")));
    let (status, e) = grant(&alice, "application/x-msdownload", 10).await;
    assert_eq!((status, e["code"].as_str()), (400, Some("invalid_request")));
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("may not be uploaded"),
        "{e}"
    );
    assert_eq!(
        grant(&alice, "png", 10).await.0,
        400,
        "a type without a subtype"
    );
    assert_eq!(
        grant(&alice, "image/png", 0).await.0,
        400,
        "an empty upload"
    );

    // The grant is for exactly this type and size: the local store
    // answers 400 with its error, S3 refuses the signature with 403.
    let refused = if local { 400 } else { 403 };
    let (_, ticket) = grant(&alice, "image/png", 10).await;
    let url = ticket["upload_url"].as_str().unwrap().to_owned();
    let blob_ref = ticket["blob_ref"].as_str().unwrap().to_owned();
    let (status, e) = put(&ticket, Some("image/jpeg"), vec![0; 10]).await;
    assert_eq!(status, refused, "another type: {e}");
    let (status, e) = put(&ticket, None, vec![0; 9]).await;
    assert_eq!(status, refused, "another size: {e}");
    let tampered = tamper(&url);
    let (status, e) = put_to(&tampered, &ticket, None, vec![0; 10]).await;
    assert_eq!(status, 403, "a tampered URL: {e}");
    let (status, e) = put(&ticket, None, vec![0; 10]).await;
    assert_eq!(status, 200, "{e}");
    if local {
        let (status, e) = put(&ticket, None, vec![0; 10]).await;
        assert_eq!(
            (status, e["code"].as_str()),
            (409, Some("conflict")),
            "written once"
        );
    }

    // Sends that describe the upload wrongly, or none.
    let mut ws = cluster.ws(0, "alice", "phone").await;
    ws.send(&image_frame(&conv, "wrong-size", &blob_ref, 11))
        .await
        .unwrap();
    let (code, _, _, message) = expect_error(&mut ws).await;
    assert_eq!(code, ErrorCode::InvalidFrame, "{message}");
    ws.send(&image_frame(
        &conv,
        "none",
        "m0123456789abcdef0123456789abcdef",
        10,
    ))
    .await
    .unwrap();
    assert_eq!(expect_error(&mut ws).await.0, ErrorCode::NotFound);
    ws.send(&image_frame(&conv, "junk", "../etc/passwd", 10))
        .await
        .unwrap();
    assert_eq!(expect_error(&mut ws).await.0, ErrorCode::NotFound);

    // Expired URLs.
    let (_, late) = grant(&alice, "image/png", 10).await;
    let (_, location) = download_url(&alice, &blob_ref).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, e) = put(&late, None, vec![0; 10]).await;
    assert_eq!(status, 403, "{e}");
    if local {
        assert!(e["message"].as_str().unwrap().contains("expired"), "{e}");
    }
    let r = reqwest::get(location.unwrap()).await.unwrap();
    assert_eq!(r.status().as_u16(), 403);

    // A blob whose bytes went missing from storage: a clear 404, no crash
    // (with S3 the object is gone, so the reference is unknown at once).
    std::fs::remove_file(media.bytes_path(&blob_ref)).unwrap();
    let (status, location) = download_url(&alice, &blob_ref).await;
    if local {
        assert_eq!(status, 302);
        let r = reqwest::get(location.unwrap()).await.unwrap();
        assert_eq!(r.status().as_u16(), 404);
    } else {
        assert_eq!(status, 404);
    }
    assert_alive(&mut ws).await;
}

#[tokio::test]
async fn uploads_no_message_refers_to_are_collected_local() {
    unreferenced_uploads_are_collected(Backend::Local).await;
}

#[tokio::test]
async fn uploads_no_message_refers_to_are_collected_s3() {
    unreferenced_uploads_are_collected(Backend::S3).await;
}

/// The blob collector: an upload no message refers to is deleted after
/// its grace; one a message refers to stays.
async fn unreferenced_uploads_are_collected(backend: Backend) {
    let media = MediaCluster::start(
        backend,
        1,
        "[media]\ngc_grace_secs = 2\ngc_every_secs = 1\n",
    )
    .await;
    let cluster = &media.cluster;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let alice = cluster.rest(0, "alice");
    let upload = |bytes: &'static [u8]| {
        let alice = alice.clone();
        async move {
            let (status, ticket) = grant(&alice, "image/png", bytes.len() as u64).await;
            assert_eq!(status, 201, "{ticket}");
            let (status, body) = put(&ticket, None, bytes.to_vec()).await;
            assert_eq!(status, 200, "{body}");
            ticket["blob_ref"].as_str().unwrap().to_owned()
        }
    };
    let orphan = upload(b"nobody sends this").await;
    let kept = upload(b"this one is sent").await;
    let mut ws = cluster.ws(0, "alice", "phone").await;
    ws.send(&image_frame(&conv, "img", &kept, 16))
        .await
        .unwrap();
    expect_ack(&mut ws, "img").await;
    assert_eq!(
        download_url(&alice, &orphan).await.0,
        302,
        "within its grace"
    );
    eventually(
        "the unreferenced upload is collected",
        Duration::from_secs(15),
        || async { (download_url(&alice, &orphan).await.0 == 404).then_some(()) },
    )
    .await;
    assert_eq!(
        download_url(&alice, &kept).await.0,
        302,
        "a referenced upload stays"
    );
    assert!(!media.bytes_path(&orphan).exists(), "its bytes are gone");
    assert!(media.bytes_path(&kept).exists());
    // The walk logs once it is over, a moment after its deletion.
    eventually("the walk's log line", Duration::from_secs(5), || async {
        cluster
            .logs()
            .contains("unreferenced uploads removed")
            .then_some(())
    })
    .await;
}

/// Issue 26: what is read back of the blob store whole (archive objects)
/// is bounded by `[blobs] max_object_bytes`, on the local directory and
/// on S3: an object of exactly the maximum is written and read, one byte
/// more is refused when written, and when found there (written behind
/// Switchboard's back, or by an S3 endpoint that lies) it is refused
/// without being read whole.
#[tokio::test]
async fn objects_are_read_back_up_to_the_configured_size_only() {
    use switchboard_blob::BlobStore;
    use switchboard_blob::local::LocalBlobs;
    use switchboard_blob::s3::{S3Blobs, S3Config};
    use switchboard_blob::token::Signer;
    use switchboard_tests::s3::{ACCESS_KEY, BUCKET, SECRET_KEY};

    const MAX: u64 = 1000;
    let dir = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(dir.path()).await;
    let s3_config = S3Config {
        bucket: BUCKET.into(),
        region: "us-east-1".into(),
        endpoint: Some(format!("http://127.0.0.1:{}", s3.port)),
        path_style: true,
        access_key_id: ACCESS_KEY.into(),
        secret_access_key: SECRET_KEY.into(),
    };
    let local_dir = dir.path().join("local");
    let stores: Vec<(Box<dyn BlobStore>, std::path::PathBuf)> = vec![
        (
            Box::new(
                LocalBlobs::new(local_dir.clone(), Signer::new(b"0123456789abcdef"))
                    .with_max_object_bytes(MAX),
            ),
            local_dir,
        ),
        (
            Box::new(S3Blobs::new(&s3_config).with_max_object_bytes(MAX)),
            s3.root.join(BUCKET),
        ),
    ];
    for (blobs, root) in stores {
        let at = "archive/acme/c1/1.json.lz4";
        blobs.put_object(at, vec![7; MAX as usize]).await.unwrap();
        assert_eq!(blobs.get_object(at).await.unwrap().len(), MAX as usize);
        let past = "archive/acme/c1/2.json.lz4";
        let refused = blobs.put_object(past, vec![7; MAX as usize + 1]).await;
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("max_object_bytes"),
            "{root:?}"
        );
        // An object past the maximum that is there anyway.
        std::fs::write(root.join(at), vec![7; MAX as usize + 1]).unwrap();
        let read = blobs.get_object(at).await;
        assert!(
            read.unwrap_err().to_string().contains("max_object_bytes"),
            "{root:?}"
        );
    }
}

#[tokio::test]
async fn a_deleted_messages_upload_is_collected_and_a_referenced_one_kept_local() {
    deleted_messages_uploads_are_collected(Backend::Local).await;
}

#[tokio::test]
async fn a_deleted_messages_upload_is_collected_and_a_referenced_one_kept_s3() {
    deleted_messages_uploads_are_collected(Backend::S3).await;
}

/// Issue 26, case 12: referenced media is collected once its messages
/// are gone. `gone` was in one message, deleted; `kept` was in two, one
/// deleted: the collector removes the first and keeps the second.
async fn deleted_messages_uploads_are_collected(backend: Backend) {
    let media = MediaCluster::start(
        backend,
        1,
        "[media]\ngc_grace_secs = 1\ngc_every_secs = 1\n",
    )
    .await;
    let cluster = &media.cluster;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let alice = cluster.rest(0, "alice");
    let bob = cluster.rest(0, "bob");
    let mut uploads = Vec::new();
    for bytes in [b"in one message".as_slice(), b"in two messages"] {
        let (status, ticket) = grant(&alice, "image/png", bytes.len() as u64).await;
        assert_eq!(status, 201, "{ticket}");
        let (status, body) = put(&ticket, None, bytes.to_vec()).await;
        assert_eq!(status, 200, "{body}");
        uploads.push((ticket["blob_ref"].as_str().unwrap().to_owned(), bytes.len()));
    }
    let (gone, kept) = (uploads[0].clone(), uploads[1].clone());
    let mut ws = cluster.ws(0, "alice", "phone").await;
    let mut sent = Vec::new();
    for (id, (blob, size)) in [("one", &gone), ("two", &kept), ("three", &kept)] {
        ws.send(&image_frame(&conv, id, blob, *size as u64))
            .await
            .unwrap();
        sent.push(expect_ack(&mut ws, id).await.0);
    }
    for id in &sent[..2] {
        ws.send(&delete_frame(&conv, *id)).await.unwrap();
        let deleted = expect_update(&mut ws).await;
        assert!(deleted.deleted_at.is_some());
    }
    // Past its grace, the collector walks every second.
    eventually(
        "the deleted message's upload is collected",
        Duration::from_secs(15),
        || async { (!media.bytes_path(&gone.0).exists()).then_some(()) },
    )
    .await;
    assert_eq!(download_url(&bob, &gone.0).await.0, 404);
    assert_eq!(download_url(&alice, &gone.0).await.0, 404);
    // A few more walks: the one a live message still carries stays.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(media.bytes_path(&kept.0).exists());
    assert_eq!(download_url(&bob, &kept.0).await.0, 302);
}

/// Issue 26, case 12: what a user and a tenant keep stored is bounded.
/// A grant that reaches a limit exactly is made; one byte past it gets
/// 429 `quota_exceeded`, per user and per tenant. Another gateway counts
/// the same from its own walk of the blob store (as a gateway does after
/// a restart), not from the grants it saw.
#[tokio::test]
async fn stored_media_is_bounded_per_user_and_per_tenant() {
    let media = MediaCluster::start(
        Backend::Local,
        2,
        "[media]\nmax_stored_bytes_per_user = 100\nmax_stored_bytes_per_tenant = 250\ngc_every_secs = 1\n",
    )
    .await;
    let cluster = &media.cluster;
    let stored = |who: &'static str, size: usize| async move {
        let rest = cluster.rest(0, who);
        let (status, ticket) = grant(&rest, "image/png", size as u64).await;
        assert_eq!(status, 201, "{who} {size}: {ticket}");
        let (status, body) = put(&ticket, None, vec![1; size]).await;
        assert_eq!(status, 200, "{body}");
    };
    let refused = |gateway: usize, who: &'static str| async move {
        let (status, body) = grant(&cluster.rest(gateway, who), "image/png", 1).await;
        (status == 429 && body["code"] == "quota_exceeded").then_some(body)
    };
    // A user: 60 and 40 reach 100 exactly; one byte more is refused.
    stored("alice", 60).await;
    stored("alice", 40).await;
    let body = refused(0, "alice")
        .await
        .expect("past the user's 100 bytes");
    assert!(
        body["message"].as_str().unwrap().contains("this user"),
        "{body}"
    );
    // The tenant: 100 + 100 + 50 reach 250 exactly.
    stored("bob", 100).await;
    stored("carol", 50).await;
    let body = refused(0, "dave")
        .await
        .expect("past the tenant's 250 bytes");
    assert!(
        body["message"].as_str().unwrap().contains("the tenant"),
        "{body}"
    );
    // Another tenant is counted apart.
    let other = cluster.rest_as(0, OTHER_TENANT, "alice", false);
    assert_eq!(grant(&other, "image/png", 100).await.0, 201);
    // The other gateway granted nothing: its walk finds what is stored.
    let body = eventually(
        "the second gateway counts what the first granted",
        Duration::from_secs(10),
        || refused(1, "alice"),
    )
    .await;
    assert!(
        body["message"].as_str().unwrap().contains("100 bytes"),
        "{body}"
    );
}

/// Avatars (v1.3): an image the user uploaded, named in their profile,
/// is served to every user of the tenant (and no other tenant's), and
/// the collector keeps it though no message refers to it. Another's
/// upload, or one that is no image, is no avatar.
#[tokio::test]
async fn an_avatar_is_everyones_to_see_in_the_tenant_and_kept() {
    let media = MediaCluster::start(
        Backend::Local,
        1,
        "[media]\ngc_grace_secs = 2\ngc_every_secs = 1\n",
    )
    .await;
    let cluster = &media.cluster;
    let upload = |rest: RestClient, mime: &'static str| async move {
        let bytes = b"an avatar's bytes".to_vec();
        let (status, ticket) = grant(&rest, mime, bytes.len() as u64).await;
        assert_eq!(status, 201, "{ticket}");
        let (status, body) = put(&ticket, None, bytes).await;
        assert_eq!(status, 200, "{body}");
        ticket["blob_ref"].as_str().unwrap().to_owned()
    };
    let alice = cluster.rest(0, "av_alice");
    let bob = cluster.rest(0, "av_bob");
    let avatar = upload(alice.clone(), "image/png").await;
    let text = upload(alice.clone(), "text/plain").await;
    let bobs = upload(bob.clone(), "image/png").await;

    let set = |blob: &str| json!({ "avatar": blob });
    for (blob, why) in [(&text, "not an image"), (&bobs, "someone else's")] {
        let (status, body) = call(&alice, "PATCH", "/v1/me/profile", Some(set(blob))).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("not_found")),
            "{why}"
        );
    }
    assert_eq!(
        download_url(&bob, &avatar).await.0,
        404,
        "not an avatar yet"
    );
    let (status, body) = call(&alice, "PATCH", "/v1/me/profile", Some(set(&avatar))).await;
    assert_eq!(
        (status, body["avatar"].as_str()),
        (200, Some(avatar.as_str()))
    );
    assert_eq!(
        download_url(&bob, &avatar).await.0,
        302,
        "shares nothing, same tenant"
    );
    let stranger = cluster.rest_as(0, OTHER_TENANT, "av_alice", false);
    assert_eq!(download_url(&stranger, &avatar).await.0, 404);

    // Past the grace the collector removes `text`, never the avatar.
    eventually(
        "the unreferenced upload is collected",
        Duration::from_secs(15),
        || async { (download_url(&alice, &text).await.0 == 404).then_some(()) },
    )
    .await;
    assert_eq!(download_url(&bob, &avatar).await.0, 302);
    assert!(media.bytes_path(&avatar).exists());
}
