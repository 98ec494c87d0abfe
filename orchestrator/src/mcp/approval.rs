//! Approvals over MCP. A call that needs a person's approval becomes a
//! pending approval, as through `/execute`. A client that can ask its user
//! (protocol 2026-07-28 or later, with form elicitation) gets the
//! specification's multi-round-trip `input_required` result: a yes/no form,
//! and the approval's id as `requestState`; its retry carries the user's
//! answer, which approves or denies the stored call (run once, as
//! `POST /approvals/{id}` would). Any other client, and every client with
//! `APPROVAL_SEPARATE_DECIDER` (its answer would be the asking identity's
//! decision), gets a result saying the call waits for a person, with its
//! approval id: never how to decide it, which a model would read.

use std::collections::BTreeMap;
use std::sync::Arc;

use module_sdk::mcp::McpTool;
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ElicitResult, ElicitationAction, InputRequest, InputRequiredResult,
    InputResponses, MetaObject, ProtocolVersion,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use unicode_general_category::{GeneralCategory, get_general_category};

use crate::app::Orchestrator;
use crate::approvals::{Approval, ApprovalError, Decision, count_decision, decide_to_the_end};
use crate::identity::Identity;
use crate::mcp::call_results;

/// The key of the confirmation in `inputRequests` and `inputResponses`.
const CONFIRMATION: &str = "approval";
/// The form field the user answers.
const APPROVE_FIELD: &str = "approve";
/// The `_meta` key of a waiting result that carries the approval's id.
pub const APPROVAL_META_KEY: &str = "io.github.tool-modules/approval_id";

/// Whether the client of `context` can ask its user within the call: it
/// speaks 2026-07-28 or later and declares form elicitation (an empty
/// `elicitation` capability means forms).
pub fn client_can_confirm(context: &RequestContext<RoleServer>) -> bool {
    let recent = context.protocol_version().is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
    let forms = context
        .client_capabilities()
        .and_then(|capabilities| capabilities.elicitation)
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none());
    recent && forms
}

/// Whether a call that waits for approval asks the user through the client
/// of `context` ([`client_can_confirm`]): not with
/// `APPROVAL_SEPARATE_DECIDER` (`separate_decider`), where the answer, sent
/// by the identity that asked for the call, could not decide it.
pub fn asks_the_client(separate_decider: bool, context: &RequestContext<RoleServer>) -> bool {
    !separate_decider && client_can_confirm(context)
}

/// The `input_required` result asking the user to confirm `approval`.
pub fn ask(approval: &Approval) -> Result<CallToolResponse, ErrorData> {
    let arguments = spelled_out(&serde_json::to_string(&approval.arguments).unwrap_or_default());
    let request = json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": format!(
                "Run `{}` with {arguments}? It needs your approval (approval {}).",
                // Names are checked against the contract's pattern; spelled out all the same, as on the console.
                spelled_out(&approval.tool_name),
                approval.id
            ),
            "requestedSchema": {
                "type": "object",
                "properties": {APPROVE_FIELD: {
                    "type": "boolean",
                    "title": "Approve",
                    "description": "Yes runs the call once; no declines it."
                }},
                "required": [APPROVE_FIELD]
            }
        }
    });
    let request: InputRequest = serde_json::from_value(request)
        .map_err(|error| ErrorData::internal_error(format!("cannot build the confirmation form: {error}"), None))?;
    let requests = BTreeMap::from([(CONFIRMATION.to_owned(), request)]);
    Ok(InputRequiredResult::new(Some(requests), Some(approval.id.clone())).into())
}

/// `text` with every invisible or direction-changing character (Unicode's
/// format and control characters, line and paragraph separators, and
/// [blank](is_blank) ones) spelled out as `\uXXXX`, as the console shows them
/// (`visible` in console.js): JSON leaves most as they are, and a model's
/// arguments could otherwise show the person confirming them other text
/// than what runs (a right-to-left override, a zero-width space) or hide
/// data in characters that take no room.
fn spelled_out(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        let category = get_general_category(c);
        use GeneralCategory::{Control, Format, LineSeparator, ParagraphSeparator};
        if matches!(category, Format | Control | LineSeparator | ParagraphSeparator) || is_blank(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                shown.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            shown.push(c);
        }
    }
    shown
}

/// Whether `c` is a letter, mark or symbol that shows as nothing: the
/// combining grapheme joiner, Hangul fillers, invisible Khmer vowels,
/// variation selectors, the braille blank.
fn is_blank(c: char) -> bool {
    matches!(c, '\u{34f}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}' | '\u{180b}'..='\u{180d}' | '\u{2800}'
        | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{ffa0}' | '\u{e0100}'..='\u{e01ef}')
}

/// The result of a call that waits for a person's approval, for a client
/// that is not asked ([`asks_the_client`]): an error result (the tool has
/// not run) addressed to the person, with the approval's id (also in
/// `_meta`). It says where a person decides it, not how: a model told the
/// request that approves it could send it itself.
pub fn waiting(approval: &Approval) -> CallToolResult {
    let expires = approval.expires_at.format(&Rfc3339).unwrap_or_default();
    let message = format!(
        "this call waits for a person's approval: approve or deny approval {id} (until {expires}) in the \
         orchestrator's console, or as an approver through its approvals API. It has not run; do not call it \
         again meanwhile.",
        id = approval.id
    );
    let mut result = CallToolResult::error(vec![ContentBlock::text(message)]);
    result.meta = Some(MetaObject(serde_json::Map::from_iter([(APPROVAL_META_KEY.to_owned(), json!(approval.id))])));
    result
}

/// The retry of a call that asked for confirmation: the user's answer in
/// `responses` decides the approval `state` names (for `identity`, who
/// must be allowed to decide it, as at `POST /approvals/{id}`).
pub async fn resume(
    orchestrator: &Arc<Orchestrator>,
    identity: &Identity,
    tool: &McpTool,
    state: &str,
    responses: Option<&InputResponses>,
) -> Result<CallToolResult, ErrorData> {
    let answer = responses
        .and_then(|responses| responses.get(CONFIRMATION))
        .and_then(|answer| serde_json::from_value::<ElicitResult>(answer.clone()).ok())
        .ok_or_else(|| {
            ErrorData::invalid_params(format!("the retry carries no `{CONFIRMATION}` answer in inputResponses"), None)
        })?;
    let approved = answer.action == ElicitationAction::Accept
        && answer.content.as_ref().and_then(|content| content.get(APPROVE_FIELD)).and_then(Value::as_bool)
            == Some(true);
    let (decision, reason) = match approved {
        true => (Decision::Approve, None),
        false => (Decision::Deny, Some("declined in the MCP client".to_owned())),
    };
    // Refusals here are counted as `POST /approvals/{id}` counts its own.
    match orchestrator.approvals.get_for(identity, state, &orchestrator.executor).await {
        Ok(approval) if approval.tool_name != tool.full_name => {
            // For this tool, the state names no approval.
            count_decision(orchestrator, Err(&ApprovalError::NotFound(state.to_owned())));
            let message = format!("requestState `{state}` belongs to a call of `{}`", approval.tool_name);
            return Err(ErrorData::invalid_params(message, None));
        }
        Ok(_) => {}
        Err(error) => {
            count_decision(orchestrator, Err(&error));
            return Ok(CallToolResult::error(vec![ContentBlock::text(error.to_string())]));
        }
    }
    let outcome = decide_to_the_end(orchestrator, identity, state, decision, reason).await;
    Ok(match outcome {
        Ok(approval) => match approval.result {
            Some(result) => call_results::call_result(tool, result),
            None => CallToolResult::error(vec![ContentBlock::text("the approval was decided without a result")]),
        },
        Err(error) => CallToolResult::error(vec![ContentBlock::text(error.to_string())]),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::approvals::record::Approval;
    use crate::approvals::store::tests::approval as pending_approval;

    #[test]
    fn the_confirmation_spells_out_invisible_characters_of_the_arguments() {
        let arguments = json!({"to": "\u{202e}lorac\u{200b}", "memo": "a\u{2028}b\u{85}\u{e0041}", "plain": "é 漢",
            "blank": "\u{3164}\u{2800}x\u{fe0f}\u{e0101}"});
        let approval = Approval {
            tool_name: "bank.transfer".into(),
            arguments: arguments.as_object().unwrap().clone(),
            ..pending_approval("a1", Duration::ZERO)
        };
        let CallToolResponse::InputRequired(asked) = ask(&approval).unwrap() else { panic!("not a confirmation") };
        let asked = serde_json::to_value(asked).unwrap();
        let message = asked["inputRequests"][CONFIRMATION]["params"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(r#""to":"\u202elorac\u200b""#), "{message}");
        assert!(message.contains(r#""memo":"a\u2028b\u0085\udb40\udc41""#), "{message}");
        assert!(message.contains("é 漢"), "{message}");
        assert!(message.contains(r#""blank":"\u3164\u2800x\ufe0f\udb40\udd01""#), "{message}");
    }
}
