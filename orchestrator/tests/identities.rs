//! Whole-process tests of caller identities: API keys with different
//! permissions, modules and users; expired and wrong keys; JWTs verified
//! against a JWKS file.

mod common;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::identities::{
    ISSUER_KEY, KID, OTHER_KEY, TestKey, claims, hash_key, jwks, jwks_file, keys_file, now_plus, token, token_of,
};
use common::modules::{approval_module, sdk_module};
use common::{ModuleServer, OrchestratorProcess, free_port, module_services};
use orchestrator::identity::settings::DEFAULT_JWKS_MAX_BYTES;
use serde_json::{Value, json};

const SERVICE_TOKEN: &str = "service-token-for-tests-0123456789";

fn names(tools: &Value) -> Vec<&str> {
    tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect()
}

/// The orchestrator over `modules` (name and URL) with the API `keys`, the
/// service token (sent by default) and the `extra` settings, once every
/// module is up; its keys file, kept as long as it runs; and the keys'
/// secrets, in order.
async fn start_with_keys<const N: usize>(
    modules: &[(&str, String)],
    keys: [TestKey; N],
    extra: &[(&str, &str)],
) -> (OrchestratorProcess, tempfile::NamedTempFile, [String; N]) {
    let services = module_services(modules);
    let keys_file = keys_file(&keys);
    let mut env = vec![
        ("MODULE_SERVICES", services.as_str()),
        ("API_KEYS_FILE", keys_file.path().to_str().unwrap()),
        ("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN),
    ];
    env.extend_from_slice(extra);
    let orchestrator = OrchestratorProcess::start(&env).with_token(SERVICE_TOKEN);
    for (name, _) in modules {
        orchestrator.wait_for_module(name, "up", Duration::from_secs(10)).await;
    }
    (orchestrator, keys_file, keys.map(|key| key.key))
}

#[tokio::test]
async fn keys_see_and_call_only_what_they_allow_and_act_for_their_own_user() {
    let (alpha, alpha_calls) = sdk_module("alpha");
    let alpha = ModuleServer::sdk(alpha);
    let beta = ModuleServer::sdk(sdk_module("beta").0);
    let ada = TestKey::new("ada", "ada", "user");
    let mut admin = TestKey::new("root", "root", "admin");
    admin.modules = Some(&["alpha"]);
    let backend = TestKey::new("backend", "any", "admin");
    let modules = [("alpha", alpha.url()), ("beta", beta.url())];
    let (orchestrator, _keys, [ada, admin, backend]) = start_with_keys(&modules, [ada, admin, backend], &[]).await;

    // What each key lists: the intersection of what it asks and what it allows.
    let (status, tools) = orchestrator.get_with("/tools?permission=owner", Some(&ada)).await;
    assert_eq!(status, 200);
    assert_eq!(names(&tools), ["alpha.echo", "beta.echo"], "a user key never sees admin tools");
    let (_, tools) = orchestrator.get_with("/tools", Some(&admin)).await;
    assert_eq!(names(&tools), ["alpha.echo", "alpha.wipe"], "the admin key is limited to alpha");
    let (_, tools) = orchestrator.get_with("/tools?permission=guest", Some(&admin)).await;
    assert_eq!(names(&tools), ["alpha.echo"], "asking less gets less");

    // What each key may call.
    let wipe = json!({"tool_name": "alpha.wipe", "user_permission": "owner"});
    let (status, result) = orchestrator.post_with("/execute", Some(&ada), &wipe).await;
    assert_eq!((status, result["error_kind"].as_str()), (200, Some("permission_denied")), "{result}");
    assert_eq!(alpha_calls.count(), 0);
    let (_, result) = orchestrator.post_with("/execute", Some(&admin), &wipe).await;
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(alpha_calls.count(), 1);
    let beta_echo = json!({"tool_name": "beta.echo", "arguments": {"text": "hi"}});
    let (_, result) = orchestrator.post_with("/execute", Some(&admin), &beta_echo).await;
    assert_eq!(result["error_kind"], "unknown_tool", "a module outside the key's reads as unknown: {result}");

    // The user comes from the key; a user key cannot act as another user.
    let echo = json!({"tool_name": "alpha.echo", "arguments": {"text": "hi"}});
    let (_, result) = orchestrator.post_with("/execute", Some(&ada), &echo).await;
    assert_eq!(result["result"]["user_id"], "ada", "{result}");
    let as_bob = json!({"tool_name": "alpha.echo", "arguments": {"text": "hi"}, "user_id": "bob"});
    let (status, answer) = orchestrator.post_with("/execute", Some(&ada), &as_bob).await;
    assert_eq!(status, 403, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("ada"), "{answer}");
    let message = json!({"user_id": "bob", "message": {"role": "assistant", "tool_calls": []}});
    let (status, _) = orchestrator.post_with("/v1/tool-calls?format=openai", Some(&ada), &message).await;
    assert_eq!(status, 403);
    // A service key (user_id = "any") and the service token may name users.
    for service in [backend.as_str(), SERVICE_TOKEN] {
        let (status, result) = orchestrator.post_with("/execute", Some(service), &as_bob).await;
        assert_eq!((status, &result["result"]["user_id"]), (200, &json!("bob")), "{result}");
    }
}

#[tokio::test]
async fn expired_wrong_and_missing_keys_get_401_and_health_needs_none() {
    let alpha = ModuleServer::sdk(sdk_module("alpha").0);
    let services = module_services(&[("alpha", alpha.url())]);
    let live = TestKey::new("live", "ada", "user");
    let mut old = TestKey::new("old", "ada", "user");
    old.expires = Some("2001-01-01T00:00:00Z");
    let keys = keys_file(&[live, old]);
    let env = [("MODULE_SERVICES", services.as_str()), ("API_KEYS_FILE", keys.path().to_str().unwrap())];
    let orchestrator = OrchestratorProcess::start(&env);
    let [live, old] = ["live", "old"].map(|id| TestKey::new(id, "", "").key);

    assert_eq!(orchestrator.get_with("/health", None).await.0, 200);
    assert_eq!(orchestrator.get_with("/modules", Some(&live)).await.0, 200);
    let almost = format!("{}y", &live[..live.len() - 1]);
    for (token, says) in [(None, "missing"), (Some(almost.as_str()), "not a valid"), (Some(old.as_str()), "expired")] {
        for path in ["/modules", "/tools", "/approvals"] {
            let (status, answer) = orchestrator.get_with(path, token).await;
            assert_eq!(status, 401, "{path} with {token:?}: {answer}");
            assert!(answer["error"].as_str().unwrap().contains(says), "{answer}");
        }
        let (status, _) = orchestrator.post_with("/execute", token, &json!({"tool_name": "alpha.echo"})).await;
        assert_eq!(status, 401);
    }
    // The scheme is case-insensitive (RFC 9110).
    let response = reqwest::Client::new()
        .get(format!("{}/modules", orchestrator.url))
        .header("authorization", format!("bEaReR {live}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(orchestrator.logs().iter().all(|line| !line.contains(&live)), "a key never reaches the logs");
}

#[test]
fn hash_key_refuses_short_keys_and_generates_long_ones() {
    use std::process::{Command, Stdio};
    let generated = Command::new(common::BINARY).args(["hash-key", "--generate"]).env_clear().output().unwrap();
    let text = String::from_utf8(generated.stdout).unwrap();
    let key = text.lines().find_map(|l| l.strip_prefix("key:")).unwrap().trim();
    let hash = text.lines().find_map(|l| l.strip_prefix("hash:")).unwrap().trim();
    assert_eq!(hash_key(key), hash, "the printed hash is the key's");
    assert!(hash.starts_with("sha256:") && hash.len() == 7 + 64, "{hash}");
    let mut child = Command::new(common::BINARY)
        .arg("hash-key")
        .env_clear()
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"short\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 32"));
}

#[tokio::test]
async fn jwts_are_verified_against_the_jwks() {
    let alpha = ModuleServer::sdk(sdk_module("alpha").0);
    let services = module_services(&[("alpha", alpha.url())]);
    let jwks = jwks_file();
    let env = [
        ("MODULE_SERVICES", services.as_str()),
        ("JWT_JWKS", jwks.path().to_str().unwrap()),
        ("JWT_ISSUER", "test-issuer"),
        ("JWT_AUDIENCE", "orchestrator"),
        ("JWT_ALGORITHMS", "ES256"),
    ];
    let good = token(ISSUER_KEY, &claims("ada", "admin"));
    let orchestrator = OrchestratorProcess::start(&env).with_token(&good);
    orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;

    let (status, tools) = orchestrator.get_with("/tools", Some(&good)).await;
    assert_eq!(status, 200);
    assert_eq!(names(&tools), ["alpha.echo", "alpha.wipe"], "the permission claim counts");
    let echo = json!({"tool_name": "alpha.echo", "arguments": {"text": "hi"}});
    let (_, result) = orchestrator.post_with("/execute", Some(&good), &echo).await;
    assert_eq!(result["result"]["user_id"], "ada", "the user claim is the user: {result}");
    let mut limited = claims("ada", "user");
    limited["modules"] = json!(["beta"]);
    let (_, tools) = orchestrator.get_with("/tools", Some(&token(ISSUER_KEY, &limited))).await;
    assert_eq!(names(&tools), Vec::<&str>::new(), "the modules claim counts");

    let mut wrong_audience = claims("ada", "admin");
    wrong_audience["aud"] = json!("someone-else");
    let mut expired = claims("ada", "admin");
    expired["exp"] = json!(now_plus(-3600));
    let mut wrong_issuer = claims("ada", "admin");
    wrong_issuer["iss"] = json!("mallory");
    let unsigned = {
        use base64::Engine;
        let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.",
            b64(&json!({"alg": "none", "typ": "JWT", "kid": common::identities::KID})),
            b64(&claims("ada", "owner"))
        )
    };
    let refused = [
        ("bad signature", token(OTHER_KEY, &claims("ada", "admin"))),
        ("wrong audience", token(ISSUER_KEY, &wrong_audience)),
        ("wrong issuer", token(ISSUER_KEY, &wrong_issuer)),
        ("expired", token(ISSUER_KEY, &expired)),
        ("alg none", unsigned),
    ];
    for (what, bad) in refused {
        let (status, answer) = orchestrator.get_with("/tools", Some(&bad)).await;
        assert_eq!(status, 401, "{what}: {answer}");
        assert!(answer["error"].is_string(), "{what}: {answer}");
    }
}

#[tokio::test]
async fn a_jwks_url_is_fetched_at_start_up() {
    let jwks = std::fs::read_to_string(jwks_file().path()).unwrap();
    let issuer = ModuleServer::start(
        axum::Router::new()
            .route("/.well-known/jwks.json", axum::routing::get(move || std::future::ready(jwks.clone()))),
    );
    let url = format!("{}/.well-known/jwks.json", issuer.url());
    let orchestrator = OrchestratorProcess::start(&[
        ("JWT_JWKS", url.as_str()),
        ("JWT_AUDIENCE", "orchestrator"),
        ("JWT_ALGORITHMS", "ES256"),
    ]);
    let good = token(ISSUER_KEY, &claims("ada", "user"));
    assert_eq!(orchestrator.get_with("/modules", Some(&good)).await.0, 200);
    let bad = token(OTHER_KEY, &claims("ada", "user"));
    assert_eq!(orchestrator.get_with("/modules", Some(&bad)).await.0, 401);
}

#[test]
fn a_jwks_url_that_redirects_is_not_followed() {
    let jwks = std::fs::read_to_string(jwks_file().path()).unwrap();
    let issuer = ModuleServer::start(
        axum::Router::new()
            .route("/moved", axum::routing::get(|| std::future::ready(axum::response::Redirect::temporary("/keys"))))
            .route("/keys", axum::routing::get(move || std::future::ready(jwks.clone()))),
    );
    let url = format!("{}/moved", issuer.url());
    let mut command = std::process::Command::new(common::BINARY);
    command.arg("serve").env_clear().env("PORT", "0").env("JWT_JWKS", &url).env("JWT_AUDIENCE", "orchestrator");
    let output = test_support::Process::start_failing(command, 1);
    assert!(output.contains(&format!("cannot load the JWKS from {url}")), "{output}");
    assert!(output.contains("redirects (status 307, to /keys)"), "{output}");
}

#[test]
fn an_http_jwks_url_off_this_machine_stops_start_up() {
    let mut command = std::process::Command::new(common::BINARY);
    let url = "http://id.example/.well-known/jwks.json";
    command.arg("serve").env_clear().env("PORT", "0").env("JWT_JWKS", url).env("JWT_AUDIENCE", "orchestrator");
    let output = test_support::Process::start_failing(command, 2);
    assert!(output.contains("invalid JWT_JWKS") && output.contains("loopback"), "{output}");
}

#[test]
fn a_jwks_url_that_never_answers_stops_start_up_within_the_discovery_timeout() {
    // It accepts connections and never answers one.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/.well-known/jwks.json", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || silent.incoming().take(1).collect::<Vec<_>>());
    let mut command = std::process::Command::new(common::BINARY);
    command.arg("serve").env_clear().env("PORT", "0").env("JWT_JWKS", &url).env("JWT_AUDIENCE", "orchestrator");
    command.env("DISCOVERY_TIMEOUT", "1");
    let output = test_support::Process::start_failing(command, 1);
    assert!(output.contains(&format!("cannot load the JWKS from {url}")), "{output}");
    assert!(output.contains("DISCOVERY_TIMEOUT (1 s)"), "{output}");
    drop(held);
}

/// A JWKS server at `/.well-known/jwks.json` answering the test keys' JWKS,
/// padded with `padding` bytes of trailing whitespace (still a valid JWKS)
/// while `padded` is set: its URL and the switch.
fn jwks_server(padding: usize, padded: bool) -> (ModuleServer, String, Arc<AtomicBool>) {
    let jwks = std::fs::read_to_string(jwks_file().path()).unwrap();
    let long = format!("{jwks}{}", " ".repeat(padding));
    let switch = Arc::new(AtomicBool::new(padded));
    let padded = Arc::clone(&switch);
    let answer = move || {
        let body = if padded.load(Ordering::SeqCst) { long.clone() } else { jwks.clone() };
        std::future::ready(body)
    };
    let issuer = ModuleServer::start(axum::Router::new().route("/.well-known/jwks.json", axum::routing::get(answer)));
    let url = format!("{}/.well-known/jwks.json", issuer.url());
    (issuer, url, switch)
}

#[test]
fn a_jwks_url_answering_more_than_its_limit_stops_start_up() {
    for (setting, limit) in [(None, DEFAULT_JWKS_MAX_BYTES), (Some("4096"), 4096)] {
        let (_issuer, url, _) = jwks_server(limit, true);
        let mut command = std::process::Command::new(common::BINARY);
        command.arg("serve").env_clear().env("PORT", "0").env("JWT_JWKS", &url).env("JWT_AUDIENCE", "orchestrator");
        if let Some(setting) = setting {
            command.env("JWT_JWKS_MAX_BYTES", setting);
        }
        let output = test_support::Process::start_failing(command, 1);
        assert!(output.contains(&format!("cannot load the JWKS from {url}")), "{output}");
        assert!(output.contains(&format!("larger than {limit} bytes, the limit JWT_JWKS_MAX_BYTES sets")), "{output}");
    }
}

#[tokio::test]
async fn a_jwks_larger_than_the_default_limit_is_used_under_a_raised_one() {
    let (_issuer, url, _) = jwks_server(DEFAULT_JWKS_MAX_BYTES, true);
    let env = [
        ("JWT_JWKS", url.as_str()),
        ("JWT_AUDIENCE", "orchestrator"),
        ("JWT_ALGORITHMS", "ES256"),
        ("JWT_JWKS_MAX_BYTES", "2097152"),
    ];
    let orchestrator = OrchestratorProcess::start(&env);
    let good = token(ISSUER_KEY, &claims("ada", "user"));
    assert_eq!(orchestrator.get_with("/modules", Some(&good)).await.0, 200);
}

#[test]
fn a_jwks_size_limit_out_of_its_range_stops_start_up() {
    let mut command = std::process::Command::new(common::BINARY);
    command.arg("serve").env_clear().env("PORT", "0");
    command.env("JWT_JWKS", "https://id.example/jwks.json").env("JWT_AUDIENCE", "orchestrator");
    command.env("JWT_JWKS_MAX_BYTES", "100");
    let output = test_support::Process::start_failing(command, 2);
    assert!(output.contains("JWT_JWKS_MAX_BYTES") && output.contains("from 4096 to 67108864"), "{output}");
}

#[tokio::test]
async fn a_jwks_refresh_answering_more_than_its_limit_keeps_the_previous_keys() {
    let (_issuer, url, oversized) = jwks_server(4096, false);
    let env = [
        ("JWT_JWKS", url.as_str()),
        ("JWT_AUDIENCE", "orchestrator"),
        ("JWT_ALGORITHMS", "ES256"),
        ("JWT_JWKS_REFRESH_SECONDS", "1"),
        ("JWT_JWKS_MAX_BYTES", "4096"),
    ];
    let orchestrator = OrchestratorProcess::start(&env);
    let good = token(ISSUER_KEY, &claims("ada", "user"));
    assert_eq!(orchestrator.get_with("/modules", Some(&good)).await.0, 200);
    oversized.store(true, Ordering::SeqCst);
    let refused = |line: &str| line.contains("keeping the previous JWKS") && line.contains("JWT_JWKS_MAX_BYTES");
    assert!(orchestrator.logged(refused), "{:?}", orchestrator.logs());
    assert_eq!(orchestrator.get_with("/modules", Some(&good)).await.0, 200, "the previous keys still verify");
}

/// A JWKS server at `/.well-known/jwks.json` answering what its answer
/// holds (`None`: `503`), counting its fetches: its URL, the answer and the count.
fn rotating_jwks_server(first: String) -> (ModuleServer, String, Arc<Mutex<Option<String>>>, Arc<AtomicUsize>) {
    let answer = Arc::new(Mutex::new(Some(first)));
    let fetches = Arc::new(AtomicUsize::new(0));
    let (held, counted) = (Arc::clone(&answer), Arc::clone(&fetches));
    let handler = move || {
        counted.fetch_add(1, Ordering::SeqCst);
        let body = held.lock().unwrap().clone();
        std::future::ready(body.map_or((axum::http::StatusCode::SERVICE_UNAVAILABLE, String::new()), |body| {
            (axum::http::StatusCode::OK, body)
        }))
    };
    let issuer = ModuleServer::start(axum::Router::new().route("/.well-known/jwks.json", axum::routing::get(handler)));
    let url = format!("{}/.well-known/jwks.json", issuer.url());
    (issuer, url, answer, fetches)
}

#[tokio::test]
async fn a_token_of_a_key_rotated_in_fetches_the_jwks_again_at_most_once_an_interval() {
    let (_issuer, url, answer, fetches) = rotating_jwks_server(jwks(&[(ISSUER_KEY, KID)]));
    let env = [
        ("JWT_JWKS", url.as_str()),
        ("JWT_AUDIENCE", "orchestrator"),
        ("JWT_ALGORITHMS", "ES256"),
        ("JWT_JWKS_REFRESH_SECONDS", "3600"),
        ("JWT_UNKNOWN_KID_REFETCH_SECONDS", "3"),
    ];
    let orchestrator = OrchestratorProcess::start(&env);
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "at start-up");
    // The issuer rotates a new key in: its tokens are verified at once, not after the hour.
    *answer.lock().unwrap() = Some(jwks(&[(ISSUER_KEY, KID), (OTHER_KEY, "test-issuer-2")]));
    let rotated = token_of(OTHER_KEY, "test-issuer-2", &claims("ada", "user"));
    let (status, answer) = orchestrator.get_with("/modules", Some(&rotated)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(fetches.load(Ordering::SeqCst), 2);
    // Made-up kids are refused, and fetch nothing within the interval...
    let forged = |n: usize| token_of(ISSUER_KEY, &format!("forged-{n}"), &claims("ada", "admin"));
    let forged_calls = || {
        futures::future::join_all((0..20).map(|n| {
            let token = forged(n);
            let orchestrator = &orchestrator;
            async move { orchestrator.get_with("/modules", Some(&token)).await }
        }))
    };
    for (status, answer) in forged_calls().await {
        assert_eq!(status, 401, "{answer}");
        assert!(answer["error"].as_str().unwrap().contains("`kid`"), "{answer}");
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 2, "within JWT_UNKNOWN_KID_REFETCH_SECONDS");
    // ...and after it, one fetch for many at once.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    for (status, answer) in forged_calls().await {
        assert_eq!(status, 401, "{answer}");
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 3, "one fetch at a time");
}

#[tokio::test]
async fn jwks_keys_no_fetch_confirmed_for_too_long_verify_no_jwt() {
    let (_issuer, url, answer, _) = rotating_jwks_server(jwks(&[(ISSUER_KEY, KID)]));
    let env = [
        ("JWT_JWKS", url.as_str()),
        ("JWT_AUDIENCE", "orchestrator"),
        ("JWT_ALGORITHMS", "ES256"),
        ("JWT_JWKS_REFRESH_SECONDS", "1"),
        ("JWT_JWKS_MAX_STALE_SECONDS", "2"),
    ];
    let (orchestrator, _keys, [ada]) = start_with_keys(&[], [TestKey::new("ada", "ada", "user")], &env).await;
    let good = token(ISSUER_KEY, &claims("ada", "user"));
    assert_eq!(orchestrator.get_with("/modules", Some(&good)).await.0, 200);
    *answer.lock().unwrap() = None;
    let stale = |line: &str| line.contains("JWT_JWKS_MAX_STALE_SECONDS") && line.contains("ERROR");
    assert!(orchestrator.logged(stale), "{:?}", orchestrator.logs());
    let (status, refusal) = orchestrator.get_with("/modules", Some(&good)).await;
    assert_eq!(status, 401, "{refusal}");
    assert!(refusal["error"].as_str().unwrap().contains("JWT_JWKS_MAX_STALE_SECONDS (2 s)"), "{refusal}");
    assert_eq!(orchestrator.get_with("/modules", Some(&ada)).await.0, 200, "API keys do not depend on the JWKS");
    // Accepted again once a fetch succeeds.
    *answer.lock().unwrap() = Some(jwks(&[(ISSUER_KEY, KID)]));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while orchestrator.get_with("/modules", Some(&good)).await.0 != 200 {
        assert!(std::time::Instant::now() < deadline, "still refused after the JWKS answers again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `POST path` with `headers` and no body (what a page's `no-cors` fetch
/// sends), and `token` as the bearer: the status and the JSON answer.
async fn post_from(
    orchestrator: &OrchestratorProcess,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    send_from(orchestrator, reqwest::Method::POST, path, token, headers).await
}

/// `method path` with `headers`, no body, and `token` as the bearer: the
/// status and the JSON answer (`null` when it is none).
async fn send_from(
    orchestrator: &OrchestratorProcess,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", orchestrator.url));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn state_changing_requests_from_other_sites_are_refused_in_every_mode() {
    let alpha = ModuleServer::sdk(sdk_module("alpha").0);
    let services = module_services(&[("alpha", alpha.url())]);
    let development = OrchestratorProcess::start(&[("MODULE_SERVICES", services.as_str())]);
    let with_token = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", services.as_str()),
        ("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN),
    ])
    .with_token(SERVICE_TOKEN);
    for (orchestrator, token) in [(&development, None), (&with_token, Some(SERVICE_TOKEN))] {
        orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;
        let own = orchestrator.url.as_str();
        for path in ["/refresh-tools", "/api-keys/bob-user/revoke", "/api-keys/bob-user/restore", "/execute"] {
            for foreign in [&[("origin", "https://evil.example")][..], &[("sec-fetch-site", "cross-site")][..]] {
                let (status, answer) = post_from(orchestrator, path, token, foreign).await;
                assert_eq!(status, 403, "{path} with {foreign:?}: {answer}");
                assert!(answer["error"].as_str().unwrap().contains("cross-site"), "{answer}");
            }
        }
        // The console's own page, the CLI and agents (no `Origin`) are served.
        for headers in [&[][..], &[("origin", own)][..], &[("origin", own), ("sec-fetch-site", "same-origin")][..]] {
            let (status, answer) = post_from(orchestrator, "/refresh-tools", token, headers).await;
            assert_eq!(status, 200, "{headers:?}: {answer}");
        }
        let (status, _) = orchestrator.get_with("/modules", token).await;
        assert_eq!(status, 200);
    }
}

#[tokio::test]
async fn a_dns_rebinding_page_can_neither_read_nor_change_anything_in_development_mode() {
    let development = OrchestratorProcess::start(&[]);
    let port = development.address().port();
    // The page's own name, made to resolve to the orchestrator: the same
    // origin to the browser, by either header.
    let (host, origin) = (format!("evil.example:{port}"), format!("http://evil.example:{port}"));
    let rebound =
        [[("host", host.as_str()), ("origin", origin.as_str())], [("host", &host), ("sec-fetch-site", "same-origin")]];
    let refused = |path: &str, (status, answer): (u16, Value)| {
        assert_eq!(status, 403, "{path}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(&format!("`Host: {host}`")) && error.contains("MCP_ALLOWED_HOSTS"), "{error}");
    };
    for path in ["/refresh-tools", "/execute", "/approvals/x", "/mcp"] {
        for headers in &rebound {
            refused(path, post_from(&development, path, None, headers).await);
        }
        refused(path, post_from(&development, path, None, &[("host", &host)]).await);
    }
    // Its reads send neither `Origin` nor `Sec-Fetch-Site` (the page's
    // origin is not a trustworthy one): every approval, with its arguments
    // and results, the modules, the metrics and the tools would be its.
    for path in ["/approvals", "/modules", "/metrics", "/tools", "/openapi.json", "/mcp"] {
        refused(path, send_from(&development, reqwest::Method::GET, path, None, &[("host", &host)]).await);
    }
    let own = format!("localhost:{port}");
    for path in ["/approvals", "/modules", "/metrics", "/tools"] {
        let (status, answer) = send_from(&development, reqwest::Method::GET, path, None, &[("host", &own)]).await;
        assert_eq!(status, 200, "{path} at localhost: {answer}");
    }
    // Liveness and the console's files are served at any name.
    for path in ["/health", "/", "/console.js"] {
        let (status, _) = send_from(&development, reqwest::Method::GET, path, None, &[("host", &host)]).await;
        assert_eq!(status, 200, "{path}");
    }
    let own_origin = format!("http://{own}");
    let (status, answer) =
        post_from(&development, "/refresh-tools", None, &[("host", &own), ("origin", &own_origin)]).await;
    assert_eq!(status, 200, "the console opened at localhost: {answer}");

    // A host listed in MCP_ALLOWED_HOSTS is served; with identities, any is.
    let listed = OrchestratorProcess::start(&[("MCP_ALLOWED_HOSTS", "evil.example")]);
    let port = listed.address().port();
    let (host, origin) = (format!("evil.example:{port}"), format!("http://evil.example:{port}"));
    let (status, answer) = post_from(&listed, "/refresh-tools", None, &[("host", &host), ("origin", &origin)]).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = send_from(&listed, reqwest::Method::GET, "/approvals", None, &[("host", &host)]).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = send_from(&listed, reqwest::Method::GET, "/approvals", None, &[]).await;
    assert_eq!(status, 403, "the list replaces the loopback names: {answer}");
    let with_token = OrchestratorProcess::start(&[("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN)]);
    let port = with_token.address().port();
    let (host, origin) = (format!("evil.example:{port}"), format!("http://evil.example:{port}"));
    let headers = [("host", host.as_str()), ("origin", origin.as_str())];
    let (status, answer) = post_from(&with_token, "/refresh-tools", Some(SERVICE_TOKEN), &headers).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) =
        send_from(&with_token, reqwest::Method::GET, "/approvals", Some(SERVICE_TOKEN), &[("host", &host)]).await;
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test]
async fn only_known_keys_of_at_most_the_callers_permission_are_revoked_or_restored() {
    // No REDIS_URL: a request that passes every check gets 409.
    let keys = [
        TestKey::new("ada", "ada", "user"),
        TestKey::new("root", "root", "admin"),
        TestKey::new("boss", "boss", "owner"),
    ];
    let (orchestrator, _keys, [_, admin, owner]) = start_with_keys(&[], keys, &[]).await;
    for action in ["revoke", "restore"] {
        let path = |id: &str| format!("/api-keys/{id}/{action}");
        let (status, answer) = post_from(&orchestrator, &path("adaa"), Some(&admin), &[]).await;
        assert_eq!(status, 404, "{action} of a typo: {answer}");
        assert!(answer["error"].as_str().unwrap().contains("`adaa`"), "{answer}");
        let (status, answer) = post_from(&orchestrator, &path("boss"), Some(&admin), &[]).await;
        assert_eq!(status, 403, "an admin, {action} of an owner key: {answer}");
        assert!(answer["error"].as_str().unwrap().contains("permission owner"), "{answer}");
        assert_eq!(post_from(&orchestrator, &path("ada"), Some(&admin), &[]).await.0, 409, "{action}");
        assert_eq!(post_from(&orchestrator, &path("root"), Some(&admin), &[]).await.0, 409, "{action}");
        assert_eq!(post_from(&orchestrator, &path("boss"), Some(&owner), &[]).await.0, 409, "{action}");
    }
}

#[test]
fn the_key_commands_refuse_an_id_that_is_not_a_configured_key() {
    let keys = keys_file(&[TestKey::new("ada-laptop", "ada", "user")]);
    for command in ["revoke-key", "restore-key"] {
        let output = std::process::Command::new(common::BINARY)
            .args([command, "ada-laptp"])
            .env_clear()
            .env("REDIS_URL", "redis://127.0.0.1:1")
            .env("API_KEYS_FILE", keys.path())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{command}");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains("`ada-laptp` is not the id of an API key"), "{command}: {said}");
    }
}

#[tokio::test]
async fn development_mode_revokes_no_keys_on_the_redis_it_shares() {
    let Some(redis) = test_support::RedisServer::start() else { return };
    let redis_url = redis.url();
    let development = OrchestratorProcess::start(&[("REDIS_URL", redis_url.as_str())]);
    for action in ["revoke", "restore"] {
        let (status, answer) = post_from(&development, &format!("/api-keys/bob-user/{action}"), None, &[]).await;
        assert_eq!(status, 403, "{action}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains("development mode"), "{answer}");
    }
    // The command line, run by whoever runs the orchestrators, still can.
    let keys = keys_file(&[TestKey::new("bob-user", "bob", "user")]);
    let output = std::process::Command::new(common::BINARY)
        .args(["revoke-key", "bob-user"])
        .env_clear()
        .env("REDIS_URL", &redis_url)
        .env("API_KEYS_FILE", keys.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.starts_with("revoked API key `bob-user`"), "not revoked before: {said}");
}

#[tokio::test]
async fn modules_and_refreshes_show_internals_to_operators_only() {
    let alpha = ModuleServer::sdk(sdk_module("alpha").0);
    let beta = ModuleServer::sdk(sdk_module("beta").0);
    let guest = TestKey { modules: Some(&["alpha"]), ..TestKey::new("guest", "gus", "guest") };
    let keys = [guest, TestKey::new("root", "root", "admin"), TestKey::new("backend", "any", "guest")];
    let modules = [("alpha", alpha.url()), ("beta", beta.url())];
    let (orchestrator, _keys, [guest, root, backend]) = start_with_keys(&modules, keys, &[]).await;

    // A key limited to alpha sees alpha only, without its URL or errors.
    let (status, answer) = orchestrator.get_with("/modules", Some(&guest)).await;
    assert_eq!(status, 200, "{answer}");
    let shown = answer["modules"].as_array().unwrap();
    assert_eq!(shown.len(), 1, "{answer}");
    assert_eq!((&shown[0]["name"], &shown[0]["state"]), (&json!("alpha"), &json!("up")));
    assert!(shown[0].get("url").is_none() && shown[0]["last_error"].is_null(), "{answer}");
    assert!(!answer.to_string().contains("127.0.0.1"), "no address: {answer}");
    let (status, refused) = orchestrator.post_with("/refresh-tools", Some(&guest), &Value::Null).await;
    assert_eq!(status, 403, "{refused}");

    // Admins, owners and services see both with their URLs, and may refresh.
    for operator in [root.as_str(), backend.as_str(), SERVICE_TOKEN] {
        for (status, answer) in [
            orchestrator.get_with("/modules", Some(operator)).await,
            orchestrator.post_with("/refresh-tools", Some(operator), &Value::Null).await,
        ] {
            assert_eq!(status, 200, "{answer}");
            let urls: Vec<&str> =
                answer["modules"].as_array().unwrap().iter().map(|m| m["url"].as_str().unwrap()).collect();
            assert_eq!(urls, [alpha.url(), beta.url()], "{answer}");
        }
    }
}

#[tokio::test]
async fn why_a_module_was_never_reached_is_told_to_operators_only() {
    let gone = format!("http://127.0.0.1:{}", free_port());
    let services = module_services(&[("gone", gone)]);
    let keys = keys_file(&[TestKey::new("ada", "ada", "user"), TestKey::new("root", "root", "admin")]);
    let env = [
        ("MODULE_SERVICES", services.as_str()),
        ("API_KEYS_FILE", keys.path().to_str().unwrap()),
        ("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN),
    ];
    let orchestrator = OrchestratorProcess::start(&env).with_token(SERVICE_TOKEN);
    orchestrator.wait_for_module("gone", "down", Duration::from_secs(10)).await;
    let [ada, root] = ["ada", "root"].map(|id| TestKey::new(id, "", "").key);
    let call = json!({"tool_name": "gone.anything", "arguments": {}});

    // A caller allowed the module learns it is unavailable, not its address or error.
    let (status, result) = orchestrator.post_with("/execute", Some(&ada), &call).await;
    assert_eq!((status, result["error_kind"].as_str()), (200, Some("unavailable")), "{result}");
    assert_eq!(result["error"], "module `gone` is unavailable; try again later", "{result}");
    assert!(!result.to_string().contains("127.0.0.1"), "no address: {result}");

    // Admins, owners and services get the discovery error, as at GET /modules.
    for operator in [root.as_str(), SERVICE_TOKEN] {
        let (status, result) = orchestrator.post_with("/execute", Some(operator), &call).await;
        assert_eq!((status, result["error_kind"].as_str()), (200, Some("unavailable")), "{result}");
        let error = result["error"].as_str().unwrap();
        assert!(error.contains("has not been reached yet") && error.contains("127.0.0.1"), "{result}");
    }
}

#[tokio::test]
async fn a_service_key_decides_the_approvals_of_tools_it_may_use_itself() {
    let (bank, calls) = approval_module("bank");
    let bank = ModuleServer::sdk(bank);
    let keys = [TestKey::new("bob", "bob", "user"), TestKey::new("backend", "any", "user")];
    let extra = [("APPROVAL_FOR_DESTRUCTIVE", "true")];
    let (orchestrator, _keys, [bob, backend]) = start_with_keys(&[("bank", bank.url())], keys, &extra).await;

    // Bob's transfer (a guest tool) and, asked by the service token, an admin-only wipe wait.
    let transfer = json!({"tool_name": "bank.transfer", "arguments": {"to": "carol", "cents": 5}});
    let (_, result) = orchestrator.post_with("/execute", Some(&bob), &transfer).await;
    assert!(result["error"].as_str().unwrap().contains("approval"), "{result}");
    let wipe = json!({"tool_name": "bank.wipe", "user_id": "ada", "user_permission": "admin"});
    let (_, result) = orchestrator.post_with("/execute", Some(SERVICE_TOKEN), &wipe).await;
    assert!(result["error"].as_str().unwrap().contains("approval"), "{result}");
    let (_, all) = orchestrator.get_with("/approvals", Some(SERVICE_TOKEN)).await;
    let id_of = |tool: &str| {
        all["approvals"].as_array().unwrap().iter().find(|a| a["tool_name"] == tool).unwrap()["id"].clone()
    };
    let (transfer_id, wipe_id) = (id_of("bank.transfer"), id_of("bank.wipe"));

    // A `user` service key could send `"approved": true` for bob's transfer
    // (asked as `user`) itself, so it may decide bob's approval of it; the
    // wipe, beyond its permission, it neither sees nor decides.
    let (_, listed) = orchestrator.get_with("/approvals", Some(&backend)).await;
    let ids: Vec<&Value> = listed["approvals"].as_array().unwrap().iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&transfer_id], "{listed}");
    let approve = json!({"decision": "approve"});
    let (status, answer) =
        orchestrator.post_with(&format!("/approvals/{}", wipe_id.as_str().unwrap()), Some(&backend), &approve).await;
    assert_eq!(status, 404, "{answer}");
    let (status, decided) = orchestrator
        .post_with(&format!("/approvals/{}", transfer_id.as_str().unwrap()), Some(&backend), &approve)
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["approval"]["decided_by"], "key:backend", "{decided}");
    assert_eq!(decided["result"]["result"]["user_id"], "bob", "{decided}");
    assert_eq!(calls.count(), 1, "the transfer ran once, the wipe not at all");
}
