//! Name resolution that refuses internal addresses, plugged into reqwest so
//! that the address checked is the address connected to.
//!
//! Checking a host name and then letting the HTTP client resolve it again
//! leaves a gap: a hostile DNS server can answer a public address to the
//! check and `127.0.0.1` to the connection (DNS rebinding). Here the
//! client's only resolver is this one, and it hands the client nothing but
//! the addresses that passed the policy, so the connection is pinned to
//! checked addresses. Hosts written as IP literals never reach a resolver;
//! the client checks those itself before each request.
//!
//! A refusal tells the caller (a model) only that the name resolves to
//! internal addresses, not which: inside a private network the addresses
//! of its service names are not the model's business. The module's log
//! has them, at `info`, for operators.

use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::address_policy::{AddressPolicy, BlockedAddress};

/// A host name whose every address is refused; its message leaves the
/// addresses out.
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves only to internal or reserved addresses, which are not fetched")]
pub struct BlockedHost {
    /// The name that was resolved.
    pub host: String,
    /// The first refused address and why (for the log, not the caller).
    pub blocked: BlockedAddress,
}

/// A host name the system resolver found no address for (no such name,
/// or the lookup failed): the resolver's own error.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct UnresolvedHost(pub std::io::Error);

/// How the C library's `gai_strerror` words the lookup failures that may
/// pass, in glibc's and musl's English (a Rust program never calls
/// `setlocale`, so the C library speaks its C locale): the name service
/// failed or did not answer (`EAI_AGAIN`), or memory ran out (`EAI_MEMORY`).
const TEMPORARY_LOOKUP_FAILURES: [&str; 4] =
    ["Temporary failure in name resolution", "Try again", "Memory allocation failure", "Out of memory"];

impl UnresolvedHost {
    /// True when the lookup failed for now rather than finding that the
    /// name has no address, so trying again later can succeed: the name
    /// service failed or did not answer in time (`EAI_AGAIN`, which glibc
    /// also answers for a DNS server's `SERVFAIL`), memory ran out
    /// (`EAI_MEMORY`), or a system call failed (`EAI_SYSTEM`, which std
    /// turns into the OS error).
    ///
    /// std keeps only `gai_strerror`'s words of getaddrinfo's error code, so
    /// the code is read back from them; the words of a C library other than
    /// glibc and musl read as "no such name". What the code itself cannot
    /// tell: a domain whose name servers all fail (a broken delegation)
    /// looks temporary like a resolver that is down, and a name missing from
    /// a misconfigured local resolver looks like a name that does not exist.
    pub fn is_temporary(&self) -> bool {
        if self.0.raw_os_error().is_some() {
            return true;
        }
        let message = self.0.to_string();
        TEMPORARY_LOOKUP_FAILURES.iter().any(|words| message.ends_with(words))
    }
}

/// A reqwest resolver that filters the system resolver's answers through
/// an [`AddressPolicy`].
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: Arc<AddressPolicy>) -> Self {
        Self { policy }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // The port is replaced by the connector; 0 is a placeholder.
            let resolved: Vec<SocketAddr> = match tokio::net::lookup_host((host.as_str(), 0)).await {
                Ok(resolved) => resolved.collect(),
                Err(source) => return Err(Box::new(UnresolvedHost(source)) as _),
            };
            let mut first_refusal = None;
            let mut permitted = Vec::with_capacity(resolved.len());
            for address in resolved {
                match policy.check(address.ip()) {
                    Ok(()) => permitted.push(address),
                    Err(blocked) => {
                        first_refusal.get_or_insert(blocked);
                    }
                }
            }
            match (permitted.is_empty(), first_refusal) {
                (true, Some(blocked)) => {
                    tracing::info!(%host, reason = %blocked, "refused a host name: every address it resolves to is refused");
                    Err(Box::new(BlockedHost { host, blocked }) as _)
                }
                _ => Ok(Box::new(permitted.into_iter()) as Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[tokio::test]
    async fn localhost_is_refused_and_names_the_range() {
        let resolver = GuardedResolver::new(Arc::new(AddressPolicy::new(Vec::new())));
        let error = resolver.resolve(Name::from_str("localhost").unwrap()).await.err().unwrap();
        let blocked = error.downcast_ref::<BlockedHost>().expect("a BlockedHost error");
        assert_eq!(blocked.host, "localhost");
        assert_eq!(blocked.blocked.range, "loopback");
        let message = blocked.to_string();
        assert!(!message.contains("127.0.0.1") && !message.contains("::1"), "no address for the caller: {message}");
    }

    /// A lookup failure as std reports getaddrinfo's error `words`.
    fn lookup_failure(words: &str) -> UnresolvedHost {
        UnresolvedHost(std::io::Error::other(format!("failed to lookup address information: {words}")))
    }

    #[test]
    fn a_failing_name_service_is_told_from_a_name_without_address() {
        for words in TEMPORARY_LOOKUP_FAILURES {
            assert!(lookup_failure(words).is_temporary(), "{words}");
        }
        // EAI_NONAME (glibc, musl), EAI_NODATA and EAI_FAIL (glibc), EAI_FAIL (musl).
        for words in [
            "Name or service not known",
            "Name does not resolve",
            "No address associated with hostname",
            "Non-recoverable failure in name resolution",
            "Non-recoverable error",
        ] {
            assert!(!lookup_failure(words).is_temporary(), "{words}");
        }
        // EAI_SYSTEM: std reports the OS error, here EMFILE (too many open files).
        assert!(UnresolvedHost(std::io::Error::from_raw_os_error(24)).is_temporary());
    }

    #[tokio::test]
    async fn allowed_addresses_are_the_only_ones_returned() {
        let policy = AddressPolicy::new(vec!["127.0.0.1/32".parse().unwrap()]);
        let resolver = GuardedResolver::new(Arc::new(policy));
        let addresses: Vec<SocketAddr> =
            resolver.resolve(Name::from_str("localhost").unwrap()).await.unwrap().collect();
        assert!(!addresses.is_empty());
        assert!(addresses.iter().all(|a| a.ip() == std::net::Ipv4Addr::LOCALHOST), "{addresses:?}");
    }
}
