//! An HTTP client of a module, or of the orchestrator, for tests.

use std::time::Duration;

use serde_json::{Value, json};

/// Calls one server's HTTP API; cheap to clone into concurrent tasks.
#[derive(Clone, Debug)]
pub struct ModuleClient {
    base_url: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl ModuleClient {
    /// A client of the server at `base_url` (`http://127.0.0.1:PORT`), with
    /// a 60 s limit on every request.
    pub fn new(base_url: impl Into<String>) -> Self {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("a plain client builds");
        Self { base_url: base_url.into(), token: None, http }
    }

    /// The same client, sending `Authorization: Bearer <token>`.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The base URL.
    pub fn url(&self) -> &str {
        &self.base_url
    }

    /// `POST /execute` of `tool` with `arguments` as `user_id`: the
    /// ToolResult. Panics unless the answer is `200` with JSON.
    pub async fn call(&self, tool: &str, arguments: Value, user_id: Option<&str>) -> Value {
        self.try_call(tool, arguments, user_id).await.unwrap_or_else(|e| panic!("POST /execute {tool}: {e}"))
    }

    /// The `result` of [`ModuleClient::call`]; panics, with the answer,
    /// unless the call succeeded.
    pub async fn call_ok(&self, tool: &str, arguments: Value, user_id: Option<&str>) -> Value {
        let answer = self.call(tool, arguments, user_id).await;
        assert_eq!(answer["success"], true, "{tool}: {answer}");
        answer["result"].clone()
    }

    /// [`ModuleClient::call`] that returns the transport error (for a
    /// process that may be gone) instead of panicking on it.
    pub async fn try_call(&self, tool: &str, arguments: Value, user_id: Option<&str>) -> Result<Value, reqwest::Error> {
        let body = json!({"tool_name": tool, "arguments": arguments, "user_id": user_id});
        let response = self.request(reqwest::Method::POST, "/execute").json(&body).send().await?;
        let status = response.status();
        let answer: Value = response.json().await?;
        assert_eq!(status, 200, "a tool call always gets 200; got {status}: {answer}");
        Ok(answer)
    }

    /// `POST /execute` with any JSON `body`: the status and the JSON answer
    /// (`null` when it is not JSON).
    pub async fn post_execute(&self, body: &Value) -> (u16, Value) {
        self.post("/execute", body).await
    }

    /// `POST path` with a JSON `body`: the status and the JSON answer
    /// (`null` when it is not JSON).
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self.request(reqwest::Method::POST, path).json(body).send().await;
        let response = response.unwrap_or_else(|e| panic!("POST {path}: {e}"));
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    }

    /// `GET path`: the status and the JSON answer (`null` when it is not JSON).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let response = self.request(reqwest::Method::GET, path).send().await;
        let response = response.unwrap_or_else(|e| panic!("GET {path}: {e}"));
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    }

    /// `GET /manifest`; panics unless it answers `200`.
    pub async fn manifest(&self) -> Value {
        self.get_ok("/manifest").await
    }

    /// `GET /health`; panics unless it answers `200`.
    pub async fn health(&self) -> Value {
        self.get_ok("/health").await
    }

    /// `GET path` as JSON; panics unless it answers `200`.
    pub async fn get_ok(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// A request to `path`, with the token when there is one.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base_url));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }
}

/// The `error_kind` of a ToolResult; panics, with the answer, unless it failed.
pub fn error_kind(answer: &Value) -> &str {
    assert_eq!(answer["success"], false, "{answer}");
    answer["error_kind"].as_str().unwrap_or_else(|| panic!("a failed ToolResult without error_kind: {answer}"))
}
