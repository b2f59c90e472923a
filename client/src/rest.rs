//! The REST control plane.

use serde::de::DeserializeOwned;
use switchboard_protocol::conversation::{
    AddMembers, ConversationList, CreateConversation, HistoryPage,
};
use switchboard_protocol::server_api::{PostMessage, PostedMessage};
use switchboard_protocol::{ConversationKind, ConversationView, UserId};

#[derive(Debug, thiserror::Error)]
pub enum RestError {
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    /// The server answered with an error status; `code` is the protocol's.
    #[error("HTTP {status} {code}: {message}")]
    Status {
        status: u16,
        code: String,
        message: String,
    },
}

impl RestError {
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            Self::Http(_) => None,
        }
    }

    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Status { code, .. } => Some(code),
            Self::Http(_) => None,
        }
    }
}

#[derive(Clone)]
pub struct RestClient {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// Query of `GET .../messages`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryParams {
    pub before_seq: Option<u64>,
    pub after_seq: Option<u64>,
    pub limit: Option<usize>,
}

impl RestClient {
    /// `base` is `http://host:port`.
    pub fn new(base: &str, token: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
        }
    }

    pub fn with_token(&self, token: &str) -> Self {
        Self {
            http: self.http.clone(),
            base: self.base.clone(),
            token: token.to_owned(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// An answer without a body: success, or the error it carries.
    async fn no_content(response: reqwest::Response) -> Result<(), RestError> {
        if response.status().is_success() {
            return Ok(());
        }
        Self::parse::<serde_json::Value>(response).await.map(|_| ())
    }

    async fn parse<T: DeserializeOwned>(response: reqwest::Response) -> Result<T, RestError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response.json().await?);
        }
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        Err(RestError::Status {
            status: status.as_u16(),
            code: body["code"].as_str().unwrap_or("").to_owned(),
            message: body["message"].as_str().unwrap_or("").to_owned(),
        })
    }

    /// Creates a conversation; also returns whether it was new (201).
    pub async fn create_conversation(
        &self,
        kind: ConversationKind,
        members: &[&str],
        title: Option<&str>,
    ) -> Result<(ConversationView, bool), RestError> {
        let members = members
            .iter()
            .filter_map(|m| UserId::new(*m).ok())
            .collect();
        let body = CreateConversation {
            kind,
            members,
            title: title.map(str::to_owned),
        };
        let response = self
            .http
            .post(self.url("/v1/conversations"))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        let created = response.status().as_u16() == 201;
        Ok((Self::parse(response).await?, created))
    }

    pub async fn conversations(&self) -> Result<ConversationList, RestError> {
        let r = self
            .http
            .get(self.url("/v1/conversations"))
            .bearer_auth(&self.token)
            .send()
            .await?;
        Self::parse(r).await
    }

    /// One page of `GET /v1/conversations`: at most `limit` (the server's
    /// default when `None`) after `cursor` (a `next_cursor`).
    pub async fn conversation_page(
        &self,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<ConversationList, RestError> {
        let mut query = Vec::new();
        if let Some(n) = limit {
            query.push(("limit", n.to_string()));
        }
        if let Some(c) = cursor {
            query.push(("cursor", c.to_owned()));
        }
        let r = self
            .http
            .get(self.url("/v1/conversations"))
            .bearer_auth(&self.token)
            .query(&query)
            .send()
            .await?;
        Self::parse(r).await
    }

    pub async fn conversation(&self, id: &str) -> Result<ConversationView, RestError> {
        let r = self
            .http
            .get(self.url(&format!("/v1/conversations/{id}")))
            .bearer_auth(&self.token)
            .send()
            .await?;
        Self::parse(r).await
    }

    pub async fn add_members(
        &self,
        id: &str,
        members: &[&str],
    ) -> Result<ConversationView, RestError> {
        let body = AddMembers {
            members: members
                .iter()
                .filter_map(|m| UserId::new(*m).ok())
                .collect(),
            user_id: None,
        };
        let r = self
            .http
            .post(self.url(&format!("/v1/conversations/{id}/members")))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        Self::parse(r).await
    }

    /// Sends a message over REST (`POST /v1/conversations/{id}/messages`),
    /// answered once it is stored.
    pub async fn post_message(
        &self,
        id: &str,
        body: &PostMessage,
    ) -> Result<PostedMessage, RestError> {
        let r = self
            .http
            .post(self.url(&format!("/v1/conversations/{id}/messages")))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await?;
        Self::parse(r).await
    }

    pub async fn remove_member(&self, id: &str, user: &str) -> Result<(), RestError> {
        let r = self
            .http
            .delete(self.url(&format!("/v1/conversations/{id}/members/{user}")))
            .bearer_auth(&self.token)
            .send()
            .await?;
        Self::no_content(r).await
    }

    pub async fn history(&self, id: &str, params: HistoryParams) -> Result<HistoryPage, RestError> {
        let mut query = Vec::new();
        if let Some(v) = params.before_seq {
            query.push(("before_seq", v.to_string()));
        }
        if let Some(v) = params.after_seq {
            query.push(("after_seq", v.to_string()));
        }
        if let Some(v) = params.limit {
            query.push(("limit", v.to_string()));
        }
        let r = self
            .http
            .get(self.url(&format!("/v1/conversations/{id}/messages")))
            .bearer_auth(&self.token)
            .query(&query)
            .send()
            .await?;
        Self::parse(r).await
    }

    /// `PUT /v1/admin/plugins/{hook}?wait=true` with the raw component:
    /// deploys it with `config` and, for moderation, `on_failure`
    /// (`closed`, the default, or `open`), and waits until it is over.
    /// Needs an admin token. Returns the new version.
    pub async fn deploy_plugin(
        &self,
        hook: &str,
        component: Vec<u8>,
        config: &[(&str, &str)],
        on_failure: Option<&str>,
    ) -> Result<serde_json::Value, RestError> {
        let path = format!("/v1/admin/plugins/{hook}");
        self.upload_plugin(&path, component, config, on_failure)
            .await
    }

    /// `PUT /v1/admin/plugins/{hook}/shadow?wait=true`: as
    /// [`Self::deploy_plugin`], as the hook's shadow version.
    pub async fn deploy_shadow_plugin(
        &self,
        hook: &str,
        component: Vec<u8>,
        config: &[(&str, &str)],
    ) -> Result<serde_json::Value, RestError> {
        let path = format!("/v1/admin/plugins/{hook}/shadow");
        self.upload_plugin(&path, component, config, None).await
    }

    /// `GET /v1/admin/plugins/{hook}/shadow`: the shadow and how it
    /// compares on every process.
    pub async fn plugin_shadow(&self, hook: &str) -> Result<serde_json::Value, RestError> {
        let url = self.url(&format!("/v1/admin/plugins/{hook}/shadow"));
        let r = self.http.get(url).bearer_auth(&self.token).send().await?;
        Self::parse(r).await
    }

    /// `POST /v1/admin/plugins/{hook}/shadow/promote`.
    pub async fn promote_shadow_plugin(&self, hook: &str) -> Result<serde_json::Value, RestError> {
        let url = self.url(&format!("/v1/admin/plugins/{hook}/shadow/promote"));
        let r = self.http.post(url).bearer_auth(&self.token).send().await?;
        Self::parse(r).await
    }

    /// `DELETE /v1/admin/plugins/{hook}/shadow`.
    pub async fn remove_shadow_plugin(&self, hook: &str) -> Result<(), RestError> {
        let url = self.url(&format!("/v1/admin/plugins/{hook}/shadow"));
        let r = self
            .http
            .delete(url)
            .bearer_auth(&self.token)
            .send()
            .await?;
        Self::no_content(r).await
    }

    /// `PUT /v1/admin/plugins/{hook}?wait=false`: the status (202
    /// while the deploy goes on, 201 when it was over at once) and the
    /// answer (its progress, or the version).
    pub async fn start_plugin_deploy(
        &self,
        hook: &str,
        component: Vec<u8>,
        config: &[(&str, &str)],
    ) -> Result<(u16, serde_json::Value), RestError> {
        let path = format!("/v1/admin/plugins/{hook}");
        self.start_deploy(&path, component, config).await
    }

    /// `PUT /v1/admin/plugins/{hook}/shadow?wait=false`: as
    /// [`Self::start_plugin_deploy`], as the hook's shadow version.
    pub async fn start_shadow_plugin_deploy(
        &self,
        hook: &str,
        component: Vec<u8>,
        config: &[(&str, &str)],
    ) -> Result<(u16, serde_json::Value), RestError> {
        let path = format!("/v1/admin/plugins/{hook}/shadow");
        self.start_deploy(&path, component, config).await
    }

    async fn start_deploy(
        &self,
        path: &str,
        component: Vec<u8>,
        config: &[(&str, &str)],
    ) -> Result<(u16, serde_json::Value), RestError> {
        let mut query: Vec<(String, &str)> = config
            .iter()
            .map(|(k, v)| (format!("config.{k}"), *v))
            .collect();
        query.push(("wait".to_owned(), "false"));
        let r = self
            .http
            .put(self.url(path))
            .bearer_auth(&self.token)
            .header("content-type", "application/wasm")
            .query(&query)
            .body(component)
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, Self::parse(r).await?))
    }

    /// `GET /v1/admin/plugins/{hook}/deploys`: the hook's deploys, newest
    /// first.
    pub async fn plugin_deploys(&self, hook: &str) -> Result<serde_json::Value, RestError> {
        let url = self.url(&format!("/v1/admin/plugins/{hook}/deploys"));
        let r = self.http.get(url).bearer_auth(&self.token).send().await?;
        Self::parse(r).await
    }

    /// `GET /v1/admin/plugins/{hook}/deploys/{id}`: how far a deploy got.
    pub async fn plugin_deploy(
        &self,
        hook: &str,
        id: &str,
    ) -> Result<serde_json::Value, RestError> {
        let url = self.url(&format!("/v1/admin/plugins/{hook}/deploys/{id}"));
        let r = self.http.get(url).bearer_auth(&self.token).send().await?;
        Self::parse(r).await
    }

    async fn upload_plugin(
        &self,
        path: &str,
        component: Vec<u8>,
        config: &[(&str, &str)],
        on_failure: Option<&str>,
    ) -> Result<serde_json::Value, RestError> {
        let mut query: Vec<(String, &str)> = config
            .iter()
            .map(|(k, v)| (format!("config.{k}"), *v))
            .collect();
        if let Some(policy) = on_failure {
            query.push(("on_failure".to_owned(), policy));
        }
        query.push(("wait".to_owned(), "true"));
        let r = self
            .http
            .put(self.url(path))
            .bearer_auth(&self.token)
            .header("content-type", "application/wasm")
            .query(&query)
            .body(component)
            .send()
            .await?;
        Self::parse(r).await
    }

    /// `GET /v1/admin/plugins/{hook}`: the active version and the list.
    pub async fn plugin_versions(&self, hook: &str) -> Result<serde_json::Value, RestError> {
        let url = self.url(&format!("/v1/admin/plugins/{hook}"));
        let r = self.http.get(url).bearer_auth(&self.token).send().await?;
        Self::parse(r).await
    }

    /// `POST /v1/admin/plugins/{hook}/rollback`: back to the version before.
    pub async fn rollback_plugin(&self, hook: &str) -> Result<serde_json::Value, RestError> {
        let url = self.url(&format!("/v1/admin/plugins/{hook}/rollback"));
        let r = self.http.post(url).bearer_auth(&self.token).send().await?;
        Self::parse(r).await
    }

    /// `DELETE /v1/admin/plugins/{hook}`: the built-in default from now on.
    pub async fn remove_plugin(&self, hook: &str) -> Result<(), RestError> {
        let r = self
            .http
            .delete(self.url(&format!("/v1/admin/plugins/{hook}")))
            .bearer_auth(&self.token)
            .send()
            .await?;
        Self::no_content(r).await
    }

    /// A raw request, for testing the server's answers to bad input.
    pub fn raw(&self) -> &reqwest::Client {
        &self.http
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn token(&self) -> &str {
        &self.token
    }
}
