//! A routed call's answer: the module's own bytes, passed on as they came
//! when they are a valid ToolResult for the call (checked without building
//! a tree of its `result`), or a ToolResult the orchestrator made (a
//! refusal, a failure, a pending approval).

use std::borrow::Cow;

use axum::body::Bytes;
use module_sdk::ErrorKind;
use module_sdk::contract::ToolResult;
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::json_body::read_json;

/// What a call answers.
#[derive(Debug, Clone)]
pub enum CallAnswer {
    /// A ToolResult made here.
    Made(ToolResult),
    /// The module's answer, a valid ToolResult for the call, as it came.
    Relayed {
        /// The answer's JSON text.
        body: Bytes,
        /// Its `error_kind`.
        error_kind: Option<ErrorKind>,
    },
}

/// The fields of a ToolResult, read to check it without keeping it: the
/// same rules as [`ToolResult`]'s own reading, `result` parsed but not built.
#[derive(Deserialize)]
struct Checked<'a> {
    #[serde(borrow)]
    tool_name: Cow<'a, str>,
    success: bool,
    #[serde(default, rename = "result")]
    _result: Parsed,
    #[serde(default, borrow, rename = "error")]
    _error: Option<Cow<'a, str>>,
    /// As sent: a name outside the contract's kinds is not relayed.
    #[serde(default, borrow)]
    error_kind: Option<Cow<'a, str>>,
}

/// Any JSON value, read through without being built: unlike
/// [`IgnoredAny`], which skips text unchecked, its numbers are parsed (so
/// `1e400` is refused) and serde_json's nesting limit applies.
#[derive(Default)]
struct Parsed;

impl<'de> Deserialize<'de> for Parsed {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ParsedVisitor)
    }
}

/// Visits a value for [`Parsed`], its elements and entries through [`Parsed`] again.
struct ParsedVisitor;

impl<'de> serde::de::Visitor<'de> for ParsedVisitor {
    type Value = Parsed;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Parsed, E> {
        Ok(Parsed)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Parsed, E> {
        Ok(Parsed)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Parsed, E> {
        Ok(Parsed)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Parsed, E> {
        Ok(Parsed)
    }

    fn visit_str<E>(self, _: &str) -> Result<Parsed, E> {
        Ok(Parsed)
    }

    fn visit_unit<E>(self) -> Result<Parsed, E> {
        Ok(Parsed)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Parsed, A::Error> {
        while seq.next_element::<Parsed>()?.is_some() {}
        Ok(Parsed)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        while map.next_entry::<IgnoredAny, Parsed>()?.is_some() {}
        Ok(Parsed)
    }
}

/// Why a module's answer cannot be relayed.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// It is not a ToolResult.
    #[error("not a ToolResult: {0}")]
    NotAToolResult(#[from] serde_json::Error),
    /// It is a ToolResult of another tool.
    #[error("answered for tool `{0}` instead")]
    OtherTool(String),
}

impl CallAnswer {
    /// `body`, a module's `200` answer to a call of `tool_name`, to relay as
    /// it is. A failure without an `error_kind` (a base-level module's) is
    /// counted as `execution_failed`; one whose `error_kind` is not among
    /// the contract's kinds is answered rebuilt with `execution_failed`, so
    /// clients only ever see the contract's kinds.
    pub fn relay(body: Bytes, tool_name: &str) -> Result<Self, RelayError> {
        let checked: Checked<'_> = read_json(&body)?;
        if checked.tool_name != tool_name {
            return Err(RelayError::OtherTool(checked.tool_name.into_owned()));
        }
        let error_kind = match checked.error_kind.as_deref().map(ErrorKind::from_name) {
            Some(Some(kind)) => Some(kind),
            Some(None) => return Ok(Self::Relayed { body, error_kind: Some(ErrorKind::ExecutionFailed) }.rebuilt()),
            None => (!checked.success).then_some(ErrorKind::ExecutionFailed),
        };
        Ok(Self::Relayed { body, error_kind })
    }

    /// The answer made anew from what it holds (a relayed one read, unknown
    /// `error_kind`s becoming `execution_failed`).
    fn rebuilt(self) -> Self {
        Self::Made(self.into_result())
    }

    /// The answer's `error_kind` (`None` on success).
    pub fn error_kind(&self) -> Option<ErrorKind> {
        match self {
            Self::Made(result) => result.error_kind,
            Self::Relayed { error_kind, .. } => *error_kind,
        }
    }

    /// The answer as a ToolResult (a relayed one is read now).
    pub fn into_result(self) -> ToolResult {
        match self {
            Self::Made(result) => result,
            Self::Relayed { body, .. } => serde_json::from_slice(&body).unwrap_or_else(|error| {
                // Checked before it was relayed; kept total all the same.
                ToolResult::failure(
                    "",
                    ErrorKind::ExecutionFailed,
                    format!("a relayed answer did not read back: {error}"),
                )
            }),
        }
    }

    /// The answer's JSON text, ready to send.
    pub fn into_body(self) -> Bytes {
        match self {
            Self::Made(result) => Bytes::from(serde_json::to_vec(&result).expect("a ToolResult always serializes")),
            Self::Relayed { body, .. } => body,
        }
    }
}

impl From<ToolResult> for CallAnswer {
    fn from(result: ToolResult) -> Self {
        Self::Made(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn valid_results_are_relayed_as_they_came_and_others_refused() {
        let text = r#"{"tool_name":"m.t","success":true,"result":{"deep":[1,{"x":"y"}]},"extra":1}"#;
        let answer = CallAnswer::relay(Bytes::from_static(text.as_bytes()), "m.t").unwrap();
        assert_eq!(answer.error_kind(), None);
        assert_eq!(answer.clone().into_result().result, json!({"deep": [1, {"x": "y"}]}));
        assert_eq!(answer.into_body(), text.as_bytes());
        let failed = r#"{"tool_name":"m.t","success":false,"error":"no \"luck\"","error_kind":"timeout"}"#;
        let answer = CallAnswer::relay(Bytes::from_static(failed.as_bytes()), "m.t").unwrap();
        assert_eq!(answer.error_kind(), Some(ErrorKind::Timeout));
        let deep = format!(r#"{{"tool_name":"m.t","success":true,"result":{}1{}}}"#, "[".repeat(200), "]".repeat(200));
        let error = CallAnswer::relay(Bytes::from(deep), "m.t").unwrap_err().to_string();
        assert!(error.contains("recursion limit"), "{error}");
        for (body, reason) in [
            (r#"{"tool_name":"m.other","success":true}"#, "instead"),
            (r#"{"tool_name":"m.t"}"#, "success"),
            (r#"{"tool_name":"m.t","success":true,"error":5}"#, "invalid type"),
            (r#"{"tool_name":"m.t","success":true,"result":[1,}"#, "expected"),
            (r#"{"tool_name":"m.t","success":true} trailing"#, "trailing"),
            (r#"{"tool_name":"m.t","success":true,"result":1e400}"#, "number out of range"),
        ] {
            let error = CallAnswer::relay(Bytes::from_static(body.as_bytes()), "m.t").unwrap_err().to_string();
            assert!(error.contains(reason), "{body}: {error}");
        }
        // A base-level module's failure, with no error_kind: relayed, counted as execution_failed.
        let base = r#"{"tool_name":"m.t","success":false,"error":"x"}"#;
        let answer = CallAnswer::relay(Bytes::from_static(base.as_bytes()), "m.t").unwrap();
        assert_eq!(answer.error_kind(), Some(ErrorKind::ExecutionFailed));
        assert_eq!(answer.into_body(), base.as_bytes());
        // A kind outside the contract is not passed on.
        let unknown = r#"{"tool_name":"m.t","success":false,"error":"slow down","error_kind":"rate_limited"}"#;
        let answer = CallAnswer::relay(Bytes::from_static(unknown.as_bytes()), "m.t").unwrap();
        assert_eq!(answer.error_kind(), Some(ErrorKind::ExecutionFailed));
        let sent: serde_json::Value = serde_json::from_slice(&answer.into_body()).unwrap();
        assert_eq!((&sent["error_kind"], &sent["error"]), (&json!("execution_failed"), &json!("slow down")));
        let made = CallAnswer::from(ToolResult::failure("m.t", ErrorKind::Unavailable, "down"));
        let body = made.into_body();
        assert_eq!(serde_json::from_slice::<ToolResult>(&body).unwrap().error_kind, Some(ErrorKind::Unavailable));
    }
}
