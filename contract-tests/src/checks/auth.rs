//! Bearer-token auth: with `--token`, `/manifest` and `/execute` refuse a
//! missing or wrong token (base), with `401` and a JSON error (full). (`/health` and
//! `/openapi.json` are always fetched without a token by their own checks.)

use crate::check::{Check, Findings, Level};
use crate::client::{Auth, ModuleClient, REQUEST_TIMEOUT};

/// A well-formed ToolCall, sent where only the auth answer matters.
const PROBE_CALL: &[u8] = br#"{"tool_name":"contract_tests.auth_probe","arguments":{},"user_id":null}"#;

/// The answers that refuse a caller: `401` (the contract's), and `403`,
/// which some frameworks give for a missing token (FastAPI's `HTTPBearer`);
/// anything but `401` is a warning at the base level.
const REFUSALS: [u16; 2] = [401, 403];

/// A token no module is configured with.
const WRONG_TOKEN: &str = "contract-tests-wrong-token";

/// Runs the auth checks, or skips them when no token was given.
pub async fn check_auth(client: &ModuleClient, findings: &mut Findings) {
    if !client.has_token() {
        let reason =
            "no --token given; start the module with SERVICE_AUTH_TOKEN and pass the same --token to check auth";
        findings.skip(Check::AuthMissingToken, reason);
        findings.skip(Check::AuthWrongToken, reason);
        return;
    }
    for (check, auth) in [(Check::AuthMissingToken, Auth::Without), (Check::AuthWrongToken, Auth::Bearer(WRONG_TOKEN))]
    {
        findings.ran(check);
        let answers = [
            ("GET /manifest", client.get("/manifest", auth).await),
            ("POST /execute", client.post("/execute", PROBE_CALL.to_vec(), auth, REQUEST_TIMEOUT).await),
        ];
        for (route, answer) in answers {
            match answer {
                Err(failure) => findings.fail(check, format!("{route}: {failure}")),
                Ok(reply) if !REFUSALS.contains(&reply.status) => {
                    findings.fail(check, format!("{route}: expected 401, got {}", reply.status));
                }
                Ok(reply) => {
                    if reply.status != 401 {
                        findings.fail_at(check, Level::Full, format!("{route}: expected 401, got {}", reply.status));
                    }
                    if let Some(problem) = reply.error_body_problem() {
                        findings.fail_at(check, Level::Full, format!("{route}: {} but {problem}", reply.status));
                    }
                }
            }
        }
    }
}
