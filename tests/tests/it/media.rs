//! Media (F13) end to end on two gateways sharing the local blob store:
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
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `POST /v1/media`: the status and the answer.
async fn grant(rest: &RestClient, mime: &str, size: u64) -> (u16, Value) {
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

async fn put(url: &str, content_type: &str, bytes: Vec<u8>) -> (u16, Value) {
    let r = reqwest::Client::new()
        .put(url)
        .header("content-type", content_type)
        .body(bytes)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
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

fn image_frame(conv: &str, id: &str, blob_ref: &str, size: u64) -> ClientFrame {
    ClientFrame::SendMessage {
        client_msg_id: ClientMsgId::new(id).unwrap(),
        conversation_id: ConversationId::new(conv).unwrap(),
        content: Content::Image(Media {
            blob_ref: blob_ref.into(),
            mime: "image/png".into(),
            size,
            caption: Some("the whiteboard".into()),
        }),
    }
}

#[tokio::test]
async fn an_image_is_uploaded_sent_and_downloaded_by_members_only() {
    let cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let alice = cluster.rest(0, "alice");
    let png: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();

    let (status, ticket) = grant(&alice, "image/png", png.len() as u64).await;
    assert_eq!(status, 201, "{ticket}");
    let blob_ref = ticket["blob_ref"].as_str().unwrap().to_owned();
    assert_eq!(ticket["method"], "PUT");
    assert_eq!(ticket["headers"]["content-type"], "image/png");
    let upload_url = ticket["upload_url"].as_str().unwrap();
    assert!(upload_url.starts_with("http://"), "{upload_url}");
    let (status, body) = put(upload_url, "image/png", png.clone()).await;
    assert_eq!(status, 200, "{body}");

    // Before sending it, only the uploader may download it.
    assert_eq!(download_url(&alice, &blob_ref).await.0, 302);
    let bob = cluster.rest(1, "bob");
    assert_eq!(download_url(&bob, &blob_ref).await.0, 404);

    let mut alice_ws = cluster.ws(0, "alice", "phone").await;
    let mut bob_ws = cluster.ws(1, "bob", "phone").await;
    alice_ws
        .send(&image_frame(&conv, "img1", &blob_ref, png.len() as u64))
        .await
        .unwrap();
    expect_ack(&mut alice_ws, "img1").await;
    let m = expect_message(&mut bob_ws).await;
    let Some(Content::Image(media)) = &m.content else {
        panic!("not an image: {m:?}");
    };
    assert_eq!(media.blob_ref, blob_ref);

    // A member downloads it through the other gateway.
    let (status, location) = download_url(&bob, &blob_ref).await;
    assert_eq!(status, 302);
    let r = reqwest::get(location.unwrap()).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().await.unwrap().to_vec(), png);

    // Nobody else: not a stranger of the tenant, not another tenant.
    assert_eq!(
        download_url(&cluster.rest(0, "carol"), &blob_ref).await.0,
        404
    );
    let globex = cluster.rest_as(0, OTHER_TENANT, "bob", false);
    assert_eq!(download_url(&globex, &blob_ref).await.0, 404);
    // Bob may forward what he can read; dave, who cannot read it, may not
    // send it.
    let dm = cluster
        .create(ConversationKind::Direct, "bob", &["carol"])
        .await;
    bob_ws
        .send(&image_frame(&dm, "fwd", &blob_ref, png.len() as u64))
        .await
        .unwrap();
    expect_ack(&mut bob_ws, "fwd").await;
    let other = cluster
        .create(ConversationKind::Group, "carol", &["dave"])
        .await;
    let mut dave_ws = cluster.ws(0, "dave", "phone").await;
    dave_ws
        .send(&image_frame(&other, "steal", &blob_ref, png.len() as u64))
        .await
        .unwrap();
    let (code, _, _, _) = expect_error(&mut dave_ws).await;
    assert_eq!(code, ErrorCode::NotFound);
}

#[tokio::test]
async fn bad_uploads_and_downloads_get_clear_errors() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[media]\nmax_bytes = 1000\nupload_url_secs = 1\ndownload_url_secs = 1\n"
            .into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let alice = cluster.rest(0, "alice");

    let (status, e) = grant(&alice, "image/png", 1001).await;
    assert_eq!((status, e["code"].as_str()), (413, Some("too_large")));
    let (status, e) = grant(&alice, "application/x-msdownload", 10).await;
    assert_eq!((status, e["code"].as_str()), (400, Some("invalid_request")));
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("may not be uploaded"),
        "{e}"
    );
    let (status, _) = grant(&alice, "png", 10).await;
    assert_eq!(status, 400, "a mime without a subtype");
    let (status, _) = grant(&alice, "image/png", 0).await;
    assert_eq!(status, 400, "an empty upload");

    let (_, ticket) = grant(&alice, "image/png", 10).await;
    let url = ticket["upload_url"].as_str().unwrap().to_owned();
    let blob_ref = ticket["blob_ref"].as_str().unwrap().to_owned();
    let (status, e) = put(&url, "image/jpeg", vec![0; 10]).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (400, Some("invalid_request")),
        "{e}"
    );
    let (status, e) = put(&url, "image/png", vec![0; 9]).await;
    assert_eq!(status, 400, "{e}");
    let (status, e) = put(&format!("{url}x"), "image/png", vec![0; 10]).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (403, Some("forbidden")),
        "a tampered URL"
    );
    assert_eq!(put(&url, "image/png", vec![0; 10]).await.0, 200);
    let (status, e) = put(&url, "image/png", vec![0; 10]).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (409, Some("conflict")),
        "written once"
    );

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
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, e) = put(
        late["upload_url"].as_str().unwrap(),
        "image/png",
        vec![0; 10],
    )
    .await;
    assert_eq!(status, 403, "{e}");
    assert!(e["message"].as_str().unwrap().contains("expired"), "{e}");
    let r = reqwest::get(location.unwrap()).await.unwrap();
    assert_eq!(r.status().as_u16(), 403);

    // A blob whose bytes went missing from storage: a clear 404, no crash.
    let tenant_dir = std::fs::read_dir(cluster.blob_root().join("blobs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(tenant_dir.join(&blob_ref)).unwrap();
    let (status, location) = download_url(&alice, &blob_ref).await;
    assert_eq!(status, 302);
    let r = reqwest::get(location.unwrap()).await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_alive(&mut ws).await;
}
