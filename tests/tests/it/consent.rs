//! Consent (issue 26, Deliver 4 and the lower item on presence): someone
//! a user has never spoken with may put them into a bounded number of
//! groups a day, and sees their presence only once they answer.

use std::time::Duration;

use serde_json::json;
use switchboard_client::{RestClient, TokenSpec, mint_hs256};
use switchboard_protocol::{ConversationKind, PresenceStatus};
use switchboard_tests::cluster::{OPERATOR_TOKEN, TENANT};
use switchboard_tests::{Cluster, ClusterSpec, eventually};

use crate::presence::{expect_presence, lookup, no_presence};
use crate::support::*;

/// The deployment's limit in these tests (the default is 20).
const LIMIT: usize = 3;

fn refused_as_forbidden(e: switchboard_client::rest::RestError, who: &str) {
    assert_eq!(
        (e.status(), e.code()),
        (Some(403), Some("forbidden")),
        "{e}"
    );
    assert!(e.to_string().contains(who), "the refusal names {who}: {e}");
}

#[tokio::test]
async fn strangers_put_a_user_into_at_most_the_limit_of_groups_a_day() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\nunsolicited_groups_per_day = {LIMIT}\n"
        ),
        ..Default::default()
    })
    .await;
    let rest = |user: &str| cluster.rest(0, user);
    let group = |creator: &str, members: &[&str]| {
        let (creator, members) = (
            creator.to_owned(),
            members.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>(),
        );
        let rest = rest(&creator);
        async move {
            let members: Vec<&str> = members.iter().map(String::as_str).collect();
            rest.create_conversation(ConversationKind::Group, &members, None)
                .await
                .map(|(view, _)| view.conversation_id.as_str().to_owned())
        }
    };

    // At the limit: three groups from someone the target never spoke with.
    let mut spam = Vec::new();
    for _ in 0..LIMIT {
        spam.push(group("spammer", &["target"]).await.unwrap());
    }
    // Just past it: the whole create is refused, naming the target.
    let e = group("spammer", &["target", "bystander"])
        .await
        .unwrap_err();
    refused_as_forbidden(e, "target");
    // The limit is the target's: another stranger meets it too, by
    // adding the target to a group that exists.
    let other = group("stranger", &["bystander"]).await.unwrap();
    refused_as_forbidden(
        rest("stranger")
            .add_members(&other, &["target"])
            .await
            .unwrap_err(),
        "target",
    );
    // Positive controls: anyone else may still be put into groups...
    group("spammer", &["bystander"]).await.unwrap();
    // ...someone the target opened a conversation with adds them freely...
    cluster
        .create(ConversationKind::Direct, "target", &["friend"])
        .await;
    group("friend", &["target"]).await.unwrap();
    // ...and so does a tenant admin.
    cluster
        .rest_as(0, TENANT, "boss", true)
        .add_members(&other, &["target"])
        .await
        .unwrap();
    // Once the target writes in one of the spammer's groups, the spammer
    // is someone they know.
    let mut target = cluster.ws(0, "target", "t").await;
    send_acked(&mut target, &spam[0], "hi", "who are you?").await;
    group("spammer", &["target"]).await.unwrap();

    // A tenant's own quota replaces the deployment's; 0 is no limit.
    let secret = "open-tenant-secret-0123456";
    let (status, body) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({"id": "open", "hs256_secrets": [secret],
                        "quotas": {"unsolicited_groups_per_day": 0}})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let open = RestClient::new(
        &cluster.gateways[0].http(),
        &mint_hs256(secret, &TokenSpec::new("open", "spammer", Some("d"), 600)).unwrap(),
    );
    let create = || async {
        open.create_conversation(ConversationKind::Group, &["target"], None)
            .await
            .ok()
    };
    // Until every process has the new tenant.
    eventually("the open tenant", Duration::from_secs(10), create).await;
    for _ in 0..LIMIT + 1 {
        create().await.expect("no limit in this tenant");
    }
}

#[tokio::test]
async fn presence_shows_only_to_whom_the_user_answered() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    cluster.wait_for_writers(8, Duration::from_secs(20)).await;
    // A stranger opens a direct conversation with the user.
    let dm = cluster
        .create(ConversationKind::Direct, "stalker", &["quiet"])
        .await;
    let mut stalker = cluster.ws(0, "stalker", "s").await;
    let mut quiet = cluster.ws(0, "quiet", "q").await;
    // The user comes online and sees the stalker's presence (the stalker
    // chose to open it); the stalker sees nothing of the user.
    no_presence(&mut stalker, Duration::from_millis(1500)).await;
    assert_eq!(lookup(&cluster, "stalker", "quiet").await.unwrap_err(), 403);
    assert_eq!(
        lookup(&cluster, "quiet", "stalker").await.unwrap().status,
        PresenceStatus::Online
    );

    // The user answers: from now on the other side sees them.
    send_acked(&mut quiet, &dm, "a1", "hello?").await;
    assert_eq!(
        lookup(&cluster, "stalker", "quiet").await.unwrap().status,
        PresenceStatus::Online
    );
    quiet.close().await;
    let (status, last_seen) = expect_presence(&mut stalker, "quiet", WAIT).await;
    assert_eq!(status, PresenceStatus::Offline);
    assert!(last_seen.is_some());
}
