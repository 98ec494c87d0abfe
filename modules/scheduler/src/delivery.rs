//! Delivering a fired run to the agent's webhook, signed in the style of
//! Standard Webhooks (also Svix's and close to Stripe's):
//!
//! - `webhook-id`: the idempotency key, `<task id>:<scheduled time in ms>`;
//!   the same for every attempt and every re-delivery of one run.
//! - `webhook-timestamp`: when this attempt was sent, in Unix seconds.
//! - `webhook-signature`: `v1,<base64 of HMAC-SHA256(DELIVERY_SECRET,
//!   "<webhook-id>.<webhook-timestamp>.<body>")>`.
//!
//! A 2xx answer acknowledges the run; anything else (or no answer) is
//! retried with exponential backoff and full jitter, up to a limit.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use rand::Rng;
use sha2::Sha256;

/// How failed deliveries are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Most attempts in all.
    pub max_attempts: u32,
    /// The wait before the first retry; it doubles with each attempt.
    pub base: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based): a random time
    /// between half and all of `base * 2^(attempt-1)`, at most `max`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.base.saturating_mul(1 << attempt.saturating_sub(1).min(20)).min(self.max);
        let half = ceiling / 2;
        half + rand::rng().random_range(Duration::ZERO..=ceiling - half)
    }
}

/// The webhook endpoint and the key that signs for it.
#[derive(Debug, Clone)]
pub struct Webhook {
    client: reqwest::Client,
    url: String,
    secret: Vec<u8>,
    retry: RetryPolicy,
}

/// One event to deliver: its idempotency key and JSON body (the `attempt`
/// field is filled in per attempt).
#[derive(Debug, Clone)]
pub struct Event {
    /// `<task id>:<scheduled ms>`.
    pub id: String,
    /// The event, without `attempt`.
    pub body: serde_json::Map<String, serde_json::Value>,
}

impl Webhook {
    /// A webhook at `url` (the operator's setting, so not address-checked),
    /// signing with `secret`, each request bounded by `timeout`.
    pub fn new(url: String, secret: &str, retry: RetryPolicy, timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("scheduler-module/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { client, url, secret: secret.as_bytes().to_vec(), retry })
    }

    /// Delivers `event`, retrying as the policy says; `Err` with the last
    /// failure when every attempt failed.
    pub async fn deliver(&self, event: &Event) -> Result<(), String> {
        let mut last_error = String::new();
        for attempt in 1..=self.retry.max_attempts {
            let mut body = event.body.clone();
            body.insert("attempt".into(), attempt.into());
            let body = serde_json::Value::Object(body).to_string();
            match self.post(&event.id, body).await {
                Ok(()) => return Ok(()),
                Err(error) => last_error = error,
            }
            if attempt < self.retry.max_attempts {
                tracing::debug!(event = %event.id, attempt, error = %last_error, "delivery failed; retrying");
                tokio::time::sleep(self.retry.backoff(attempt)).await;
            }
        }
        Err(format!("{} delivery attempts failed; the last: {last_error}", self.retry.max_attempts))
    }

    async fn post(&self, id: &str, body: String) -> Result<(), String> {
        let timestamp = jiff::Timestamp::now().as_second().to_string();
        let signature = sign(&self.secret, id, &timestamp, &body);
        let response = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", &timestamp)
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await
            // Without the URL: the reason reaches the model in `last_outcome`,
            // and the webhook's address is the operator's, not the model's.
            .map_err(|e| module_sdk::error_chain(&e.without_url()))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("the webhook answered HTTP {}", response.status()))
        }
    }
}

/// The `webhook-signature` value of one request.
pub fn sign(secret: &[u8], id: &str, timestamp: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_over_id_timestamp_and_body() {
        // A published HMAC-SHA256 test vector, cut at its dots into id, timestamp and body.
        let signature = sign(b"key", "The quick brown fox jumps over the lazy dog", "x", "y");
        let mut mac = Hmac::<Sha256>::new_from_slice(b"key").unwrap();
        mac.update(b"The quick brown fox jumps over the lazy dog.x.y");
        assert_eq!(signature, format!("v1,{}", BASE64.encode(mac.finalize().into_bytes())));
        let vector = Hmac::<Sha256>::new_from_slice(b"key")
            .unwrap()
            .chain_update(b"The quick brown fox jumps over the lazy dog")
            .finalize()
            .into_bytes();
        let hex: String = vector.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
        assert_ne!(signature, sign(b"other key", "The quick brown fox jumps over the lazy dog", "x", "y"));
    }

    #[tokio::test]
    async fn a_failed_delivery_does_not_name_the_webhook_url() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let url = format!("http://{closed}/internal-events");
        let retry = RetryPolicy { max_attempts: 1, base: Duration::from_millis(1), max: Duration::from_millis(1) };
        let webhook = Webhook::new(url, "k", retry, Duration::from_secs(5)).unwrap();
        let event = Event { id: "t:0".into(), body: serde_json::Map::new() };
        let why = webhook.deliver(&event).await.unwrap_err();
        assert!(why.contains("1 delivery attempts failed"), "{why}");
        assert!(!why.contains("internal-events") && !why.contains(&closed.port().to_string()), "{why}");
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_the_cap() {
        let policy = RetryPolicy { max_attempts: 5, base: Duration::from_secs(1), max: Duration::from_secs(5) };
        for _ in 0..100 {
            let first = policy.backoff(1);
            assert!(first >= Duration::from_millis(500) && first <= Duration::from_secs(1), "{first:?}");
            let third = policy.backoff(3);
            assert!(third >= Duration::from_secs(2) && third <= Duration::from_secs(4), "{third:?}");
            assert!(policy.backoff(30) <= Duration::from_secs(5));
        }
    }
}
