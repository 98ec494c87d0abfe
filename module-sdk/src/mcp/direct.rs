//! The common `/mcp` request answered in place: a stateless `tools/call` or
//! `tools/list` from a client of the 2025 (or 2024) protocol, the request an
//! MCP client sends for every call once it has run `initialize`.
//!
//! rmcp's streamable HTTP transport answers such a request by starting a
//! one-shot MCP service for it (a serve loop task, a handler task, channels,
//! a peer and tracing spans), which costs more than the call itself. Here
//! the same message is read with rmcp's own types (`ClientJsonRpcMessage`),
//! [`ModuleMcp`]'s `tools/call` and `tools/list` run as rmcp's
//! `ServerHandler` runs them, and rmcp's `ServerJsonRpcMessage` is written
//! out, so the answer is the one rmcp gives, byte for byte (tested below).
//! A successful call's answer is written around the result's serialized
//! bytes instead (`serialized.rs`), the same JSON without parsing them back.
//!
//! Only requests whose every check rmcp's transport would pass are taken:
//! no `Origin` (rmcp refuses a foreign one with `403`), no `Host` list to
//! check, a simple `Accept` naming JSON and event streams, JSON content of a
//! declared length within the body limit, an `MCP-Protocol-Version` header of
//! a known version before 2026-07-28 (which adds per-request `_meta` and the
//! `Mcp-Method`/`Mcp-Name` headers), no other `Mcp-*` header, and no protocol
//! version in the request's `_meta`. Everything else (initialize, discovery,
//! notifications, a 2026-07-28 request, any request rmcp would refuse) goes
//! to rmcp's transport untouched.

use axum::body::Bytes;
use axum::http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, uri::Authority};
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcRequest,
    JsonRpcVersion2_0, ListToolsResult, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
    ServerResult,
};
use std::marker::PhantomData;

use rmcp::model::ConstString;
use serde::Deserialize;
use serde::de::{Deserializer, Unexpected, Visitor};

use crate::mcp::handler::ModuleMcp;
use crate::mcp::serialized::CallAnswer;

/// The header naming the client's protocol version.
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

/// [`PROTOCOL_VERSION_HEADER`] as a header name: looked up without parsing
/// the name again for every request (as a `&str` name is).
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static(PROTOCOL_VERSION_HEADER);

/// The `/mcp` requests a module answers without rmcp's per-request service.
#[derive(Clone)]
pub(crate) struct DirectAnswers {
    server: ModuleMcp,
    max_body_bytes: usize,
    /// Whether `MCP_ALLOWED_HOSTS` is set: rmcp then checks `Host`.
    checks_hosts: bool,
}

impl DirectAnswers {
    /// Answers for `server`, bodies up to `max_body_bytes` (rmcp's limit),
    /// none when rmcp has a `Host` list to check.
    pub(crate) fn new(server: ModuleMcp, max_body_bytes: usize, checks_hosts: bool) -> Self {
        Self { server, max_body_bytes, checks_hosts }
    }

    /// The answer to a `POST /mcp` request (its head and its body, read
    /// whole) when it is one this path takes; `None` leaves it to rmcp's
    /// transport.
    pub(crate) async fn answer(&self, head: &Parts, bytes: &Bytes) -> Option<Response> {
        if self.checks_hosts || !self.headers_pass(&head.headers) {
            return None;
        }
        let (id, reply) = if let Some((id, params, meta)) = call_request(bytes) {
            (id, self.server.call(params, meta).await.map(Reply::Called))
        } else {
            let (id, mut request) = taken_request(bytes)?;
            // The request's `_meta`, taken out as rmcp hands it to a handler.
            let meta = std::mem::take(request.get_meta_mut());
            let reply = match request {
                ClientRequest::CallToolRequest(call) => self.server.call(call.params, meta).await.map(Reply::Called),
                ClientRequest::ListToolsRequest(list) => self.server.list(list.params.as_ref()).map(Reply::Listed),
                _ => return None,
            };
            (id, reply)
        };
        let json = match reply {
            // The result's serialized bytes, spliced in as they are.
            Ok(Reply::Called(CallAnswer::Success(result))) => result.legacy_response(&id),
            // As rmcp's `ServerHandler` turns a handler's answer into a result.
            Ok(Reply::Called(failure)) => {
                legacy_message(id, Ok(ServerResult::CallToolResult(failure.into_call_result())))
            }
            Ok(Reply::Listed(list)) => legacy_message(id, Ok(ServerResult::ListToolsResult(list))),
            Err(error) => legacy_message(id, Err(error)),
        };
        Some(match json {
            Ok(json) => ([(CONTENT_TYPE, HeaderValue::from_static("application/json"))], json).into_response(),
            Err(error) => text_answer(StatusCode::INTERNAL_SERVER_ERROR, "serialize json response", error),
        })
    }

    /// Whether the headers are ones rmcp's transport lets through to the
    /// handler without looking at them further.
    fn headers_pass(&self, headers: &HeaderMap) -> bool {
        let host_parses = single(headers, &HOST).is_some_and(|host| Authority::try_from(host).is_ok());
        let length_fits = single(headers, &CONTENT_LENGTH)
            .and_then(|length| length.parse::<usize>().ok())
            .is_some_and(|length| length <= self.max_body_bytes);
        let is_json = single(headers, &CONTENT_TYPE)
            .is_some_and(|value| value.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case(JSON));
        let version_is_legacy = single(headers, &PROTOCOL_VERSION).is_some_and(|version| {
            version < ProtocolVersion::V_2026_07_28.as_str()
                && ProtocolVersion::KNOWN_VERSIONS.iter().any(|known| known.as_str() == version)
        });
        let other_mcp_headers =
            headers.keys().any(|name| name.as_str().starts_with("mcp-") && name.as_str() != PROTOCOL_VERSION_HEADER);
        host_parses
            && length_fits
            && is_json
            && version_is_legacy
            && !other_mcp_headers
            && !headers.contains_key(ORIGIN)
            && accepts_json_and_event_streams(headers)
    }
}

/// `application/json`.
const JSON: &str = "application/json";

/// The value of header `name` when it is sent once, as text.
fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    values.next().is_none().then(|| value.to_str().ok()).flatten()
}

/// Whether `Accept` plainly names both `application/json` and
/// `text/event-stream` (no parameters or weights, which rmcp reads itself).
fn accepts_json_and_event_streams(headers: &HeaderMap) -> bool {
    let (mut json, mut event_stream) = (false, false);
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else { return false };
        for media_type in value.split(',').map(str::trim) {
            if media_type.contains([';', '"']) {
                return false;
            }
            json |= media_type.eq_ignore_ascii_case(JSON);
            event_stream |= media_type.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && event_stream
}

/// A `tools/call` request as JSON-RPC frames it, every field known: read
/// straight into rmcp's types, without the buffered message deserializer
/// (shape checks, untagged variants, flattened `params`) that costs more
/// than a whole `/execute` call. Anything else fails to read here and is
/// read by rmcp's deserializer instead.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallEnvelope {
    #[serde(rename = "jsonrpc")]
    _version: Literal<JsonRpcVersion2_0>,
    id: RequestId,
    #[serde(rename = "method")]
    _method: Literal<CallToolRequestMethod>,
    params: CallToolRequestParams,
}

/// One of rmcp's constant strings (`"2.0"`, `"tools/call"`), accepted
/// exactly as rmcp's type accepts it but compared in place (rmcp's own
/// deserializer copies the text into a `String` first).
struct Literal<T>(PhantomData<T>);

impl<'de, T: ConstString> Deserialize<'de> for Literal<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(LiteralVisitor(PhantomData))
    }
}

/// Reads a [`Literal`].
struct LiteralVisitor<T>(PhantomData<T>);

impl<T: ConstString> Visitor<'_> for LiteralVisitor<T> {
    type Value = Literal<T>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(formatter, "the string {:?}", T::VALUE)
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
        if text == T::VALUE { Ok(Literal(PhantomData)) } else { Err(E::invalid_value(Unexpected::Str(text), &self)) }
    }
}

/// The id, params and `_meta` of `body` when it is a plain `tools/call`
/// request without a protocol version in its `_meta`; the `_meta` is taken
/// out of the params, as rmcp's `Request` deserializer takes it.
fn call_request(body: &Bytes) -> Option<(RequestId, CallToolRequestParams, RequestMetaObject)> {
    let CallEnvelope { id, mut params, .. } = serde_json::from_slice(body).ok()?;
    let meta = params.meta.take().unwrap_or_default();
    meta.protocol_version().is_none().then_some((id, params, meta))
}

/// The id and request of `body` when it is a single `tools/call` or
/// `tools/list` request without a protocol version in its `_meta`.
fn taken_request(body: &Bytes) -> Option<(RequestId, ClientRequest)> {
    let ClientJsonRpcMessage::Request(JsonRpcRequest { id, request, .. }) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    let taken = matches!(request, ClientRequest::CallToolRequest(_) | ClientRequest::ListToolsRequest(_))
        && request.get_meta().protocol_version().is_none();
    taken.then_some((id, request))
}

/// What a request this path takes was answered with.
enum Reply {
    Called(CallAnswer),
    Listed(ListToolsResult),
}

/// The JSON-RPC message rmcp writes for `result` to a peer of a protocol
/// before 2026-07-28: without `resultType: "complete"`, object output only.
fn legacy_message(id: RequestId, result: Result<ServerResult, ErrorData>) -> serde_json::Result<Vec<u8>> {
    let message = match result {
        Ok(mut result) => {
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            ServerJsonRpcMessage::response(result, id)
        }
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    };
    serde_json::to_vec(&message)
}

/// A plain-text failure answer, worded as rmcp words its own.
fn text_answer(status: StatusCode, what: &str, error: impl std::fmt::Display) -> Response {
    (status, format!("{what}: {error}")).into_response()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::extract::Request;
    use axum::http::Method;
    use http_body_util::BodyExt;
    use rmcp::transport::StreamableHttpService;
    use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
    use serde_json::{Value, json};

    use super::*;
    use crate::mcp::serialized::SerializedResult;
    use crate::mcp::{McpSettings, transport_config};
    use crate::{Context, Module, ToolError, tool};

    /// The body limit of the tests.
    const LIMIT: usize = 4096;

    /// Text and a number.
    #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
    struct Echo {
        /// Some text.
        text: String,
        /// A number.
        count: u32,
    }

    /// Send the arguments back.
    #[tool(read_only)]
    async fn echo(_ctx: Context, args: Echo) -> Result<Echo, ToolError> {
        Ok(args)
    }

    /// Count the text's characters (a result that is not an object).
    #[tool]
    async fn count(_ctx: Context, args: Echo) -> Result<usize, ToolError> {
        Ok(args.text.chars().count())
    }

    /// Always fail.
    #[tool]
    async fn fail(_ctx: Context, _args: Echo) -> Result<(), ToolError> {
        Err(ToolError::not_found("nothing here; try another text"))
    }

    /// Panic.
    #[tool]
    async fn boom(_ctx: Context, _args: Echo) -> Result<(), ToolError> {
        panic!("a bug")
    }

    /// The module's MCP server, three tools per `tools/list` page.
    fn server() -> ModuleMcp {
        let module = Module::new("m", "Tools.").tool(echo).tool(count).tool(fail).tool(boom);
        ModuleMcp::new(Arc::new(module.build().unwrap()), 3)
    }

    /// rmcp's transport alone, as `/mcp` was before this path.
    fn transport(server: ModuleMcp) -> StreamableHttpService<ModuleMcp, NeverSessionManager> {
        StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::default(),
            transport_config(&McpSettings::default(), LIMIT),
        )
    }

    /// A `POST /mcp` of `body` with a 2025-11-25 client's headers, changed by `headers`
    /// (an empty value removes the header).
    fn request(headers: &[(&str, &str)], body: &str) -> Request {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri("/mcp")
            .header(HOST, "localhost:8080")
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream, application/json")
            .header(PROTOCOL_VERSION_HEADER, "2025-11-25")
            .header(CONTENT_LENGTH, body.len());
        let defaults = builder.headers_mut().unwrap();
        for (name, value) in headers {
            defaults.remove(*name);
            if !value.is_empty() {
                defaults.append(axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
            }
        }
        builder.body(Body::from(body.to_owned())).unwrap()
    }

    /// `request`'s head and its body read whole, as `/mcp` hands them over.
    async fn head_and_body(request: Request) -> (Parts, Bytes) {
        let (head, body) = request.into_parts();
        (head, body.collect().await.unwrap().to_bytes())
    }

    /// What a client sees of an answer: status, `Content-Type` and body.
    async fn seen(response: Response) -> (StatusCode, Option<HeaderValue>, Bytes) {
        let status = response.status();
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        (status, content_type, response.into_body().collect().await.unwrap().to_bytes())
    }

    fn call(id: Value, name: &str, arguments: Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
            .to_string()
    }

    fn hello() -> Value {
        json!({"text": "hello", "count": 7})
    }

    #[tokio::test]
    async fn the_calls_it_takes_are_answered_as_rmcp_answers_them_byte_for_byte() {
        let server = server();
        let (direct, transport) = (DirectAnswers::new(server.clone(), LIMIT, false), transport(server));
        let with_user = json!({"jsonrpc": "2.0", "id": "a-7", "method": "tools/call",
            "params": {"name": "echo", "arguments": hello(), "_meta": {"io.github.tool-modules/user_id": "u1"}}});
        let list = |params: Value| json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": params});
        let bodies = [
            call(json!(1), "echo", hello()),
            with_user.to_string(),
            call(json!(2), "count", hello()),
            call(json!(3), "fail", hello()),
            call(json!(4), "boom", hello()),
            call(json!(5), "echo", json!({"text": 5})),
            call(json!(6), "nope", hello()),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo"}}).to_string(),
            list(json!({})).to_string(),
            list(json!({"cursor": "3"})).to_string(),
            list(json!({"cursor": "x"})).to_string(),
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}).to_string(),
            // Read by rmcp's deserializer (a field JSON-RPC does not define), or by the direct one.
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": hello()},
                "extra": true})
            .to_string(),
            json!({"params": {"arguments": hello(), "name": "count", "_meta": null, "requestState": "s"},
                "method": "tools/call", "id": "x", "jsonrpc": "2.0"})
            .to_string(),
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\u00e9\n","count":1,"count":2}}}"#.to_owned(),
            // The constant strings escaped: read by the direct deserializer all the same.
            r#"{"jsonrpc":"2\u002e0","id":11,"method":"tools\/call","params":{"name":"echo","arguments":{"text":"x","count":1}}}"#.to_owned(),
        ];
        let header_sets: [&[(&str, &str)]; 5] = [
            &[],
            &[(PROTOCOL_VERSION_HEADER, "2025-06-18")],
            &[(PROTOCOL_VERSION_HEADER, "2025-03-26")],
            &[(PROTOCOL_VERSION_HEADER, "2024-11-05")],
            &[("accept", "Application/JSON,text/event-stream"), ("content-type", "application/json; charset=utf-8")],
        ];
        for headers in header_sets {
            for body in &bodies {
                let expected = seen(transport.handle(request(headers, body)).await.into_response()).await;
                let (head, bytes) = head_and_body(request(headers, body)).await;
                let Some(answer) = direct.answer(&head, &bytes).await else { panic!("not taken: {headers:?} {body}") };
                assert_eq!(seen(answer).await, expected, "{headers:?} {body}");
            }
        }
    }

    #[test]
    fn a_result_written_around_its_bytes_is_the_one_rmcp_writes_whatever_its_kind() {
        let results = [
            (r#""d\u00f6ne \"x\"\n""#, false),
            (r#""done""#, true),
            ("[1,2]", false),
            ("[1,2]", true),
            (r#"{"a":1}"#, false),
            ("3", false),
        ];
        for (json, wrapped) in results {
            let raw = || serde_json::value::RawValue::from_string(json.to_owned()).unwrap();
            let id = RequestId::Number(7);
            let direct = SerializedResult::new(raw(), wrapped).legacy_response(&id).unwrap();
            let parsed = CallAnswer::Success(SerializedResult::new(raw(), wrapped)).into_call_result();
            let rmcp = legacy_message(id, Ok(ServerResult::CallToolResult(parsed))).unwrap();
            assert_eq!(String::from_utf8(direct).unwrap(), String::from_utf8(rmcp).unwrap(), "{json} {wrapped}");
        }
    }

    #[test]
    fn a_plain_call_is_read_without_rmcp_s_message_deserializer() {
        let plain = Bytes::from(call(json!(1), "echo", hello()));
        let escaped = r#"{"jsonrpc":"2\u002e0","id":1,"method":"tools\/call","params":{"name":"echo"}}"#;
        assert!(call_request(&Bytes::from(escaped)).is_some(), "escaped constants are read as rmcp reads them");
        let (id, params, meta) = call_request(&plain).expect("read directly");
        assert_eq!(
            (id, params.name.as_ref(), params.meta, meta.is_empty()),
            (RequestId::Number(1), "echo", None, true)
        );
        for other in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}, "extra": 1}),
            json!({"jsonrpc": "2.1", "id": 1, "method": "tools/call", "params": {"name": "echo"}}),
            json!({"jsonrpc": 2.0, "id": 1, "method": "tools/call", "params": {"name": "echo"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}}}),
        ] {
            assert!(call_request(&Bytes::from(other.to_string())).is_none(), "{other}");
        }
    }

    #[tokio::test]
    async fn everything_else_is_left_to_rmcp_intact() {
        let server = server();
        let (direct, transport) = (DirectAnswers::new(server.clone(), LIMIT, false), transport(server.clone()));
        let echo = call(json!(1), "echo", hello());
        let with_version = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}}});
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}});
        let cases: [(&[(&str, &str)], String); 16] = [
            (&[("origin", "https://evil.example")], echo.clone()),
            (&[("origin", "null")], echo.clone()),
            (&[(PROTOCOL_VERSION_HEADER, "")], echo.clone()),
            (&[(PROTOCOL_VERSION_HEADER, "2026-07-28")], echo.clone()),
            (&[(PROTOCOL_VERSION_HEADER, "1999-01-01")], echo.clone()),
            (&[("mcp-method", "tools/call")], echo.clone()),
            (&[("accept", "application/json;q=0, text/event-stream")], echo.clone()),
            (&[("accept", "application/json")], echo.clone()),
            (&[("content-length", "")], echo.clone()),
            (&[], with_version.to_string()),
            (&[], initialize.to_string()),
            (&[], json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string()),
            (&[], format!("[{echo}]")),
            (&[], "{not json".to_owned()),
            (
                &[],
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}, "result": {}})
                    .to_string(),
            ),
            (&[], json!({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}).to_string()),
        ];
        for (headers, body) in &cases {
            let (head, bytes) = head_and_body(request(headers, body)).await;
            assert!(direct.answer(&head, &bytes).await.is_none(), "taken: {headers:?} {body}");
            let declined = Request::from_parts(head, Body::from(bytes));
            let expected = seen(transport.handle(request(headers, body)).await.into_response()).await;
            assert_eq!(seen(transport.handle(declined).await.into_response()).await, expected, "{headers:?} {body}");
        }
        let large = call(json!(1), "echo", json!({"text": "x".repeat(LIMIT), "count": 1}));
        let (head, bytes) = head_and_body(request(&[], &large)).await;
        assert!(direct.answer(&head, &bytes).await.is_none(), "over the limit: rmcp answers 413");
        let with_hosts = DirectAnswers::new(server, LIMIT, true);
        let (head, bytes) = head_and_body(request(&[], &echo)).await;
        assert!(with_hosts.answer(&head, &bytes).await.is_none(), "rmcp checks Host against its list");
    }
}
