//! Which IP addresses a page fetch may connect to.
//!
//! A model chooses the URLs, so without this check it could make the module
//! read the cloud metadata service, an admin panel on localhost or any
//! service of the internal network (server-side request forgery). Every
//! address is checked after name resolution, on every redirect hop; IPv6
//! forms that embed an IPv4 address (mapped, NAT64, 6to4) are judged by the
//! IPv4 address inside. The local-use NAT64 prefix `64:ff9b:1::/48`
//! (RFC 8215) is refused whole: it is not globally reachable, and what it
//! translates to is the local network's choice, private IPv4 included.
//!
//! An allowed network names exactly the addresses written: allowing
//! `127.0.0.2` does not allow its IPv6 embeddings (`::ffff:127.0.0.2`,
//! `64:ff9b::7f00:2`, `2002:7f00:2::`), which stay refused unless they are
//! listed too. An allowance is an exception to the rule, so it is read as
//! narrowly as it is written.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Address ranges that are never fetched unless allowed explicitly, each
/// with the name a refusal gives it.
const BLOCKED: &[(&str, &str)] = &[
    ("0.0.0.0/8", "unspecified (\"this network\")"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "carrier-grade NAT (shared)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignment"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "6to4 relay"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved or broadcast"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "IPv4-compatible (deprecated)"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("2001::/32", "Teredo tunnel"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("fc00::/7", "unique local (private)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local (deprecated)"),
    ("ff00::/8", "multicast"),
];

/// Why an address may not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{address} is in the {range} range, which this module does not fetch")]
pub struct BlockedAddress {
    /// The refused address.
    pub address: IpAddr,
    /// The name of the range it falls in.
    pub range: &'static str,
}

/// The rule every connection of a fetch obeys: public addresses only,
/// unless a network is allowed explicitly.
#[derive(Clone)]
pub struct AddressPolicy {
    allowed: Vec<IpNet>,
    blocked: Vec<(IpNet, &'static str)>,
}

impl fmt::Debug for AddressPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressPolicy").field("allowed", &self.allowed).finish_non_exhaustive()
    }
}

impl AddressPolicy {
    /// Public addresses, plus every address in `allowed`.
    pub fn new(allowed: Vec<IpNet>) -> Self {
        let blocked = BLOCKED
            .iter()
            .map(|(network, range)| (network.parse().expect("the built-in ranges are valid CIDRs"), *range))
            .collect();
        Self { allowed, blocked }
    }

    /// `Ok` when a connection to `address` is permitted: it is in an
    /// allowed network as written, or it (or the IPv4 address it embeds)
    /// is in no blocked range.
    pub fn check(&self, address: IpAddr) -> Result<(), BlockedAddress> {
        if self.is_allowed(address) {
            return Ok(());
        }
        let judged = embedded_ipv4(address).map_or(address, IpAddr::V4);
        match self.blocked.iter().find(|(network, _)| network.contains(&judged)) {
            Some((_, range)) => Err(BlockedAddress { address, range }),
            None if judged.is_ipv6() && !GLOBAL_UNICAST.contains(&judged) => {
                Err(BlockedAddress { address, range: "non-global IPv6" })
            }
            None => Ok(()),
        }
    }

    fn is_allowed(&self, address: IpAddr) -> bool {
        self.allowed.iter().any(|network| network.contains(&address))
    }
}

/// Networks written comma-separated as CIDRs or single addresses (a network
/// of one), e.g. `127.0.0.1, 10.20.0.0/16`; empty text is no network. For
/// settings such as `FETCH_ALLOW_NETWORKS`.
pub fn parse_networks(text: &str) -> Result<Vec<IpNet>, String> {
    let parse = |item: &str| {
        item.parse::<IpNet>()
            .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
            .map_err(|_| format!("`{item}` is neither a CIDR network (10.0.0.0/8) nor an IP address (127.0.0.1)"))
    };
    text.split(',').map(str::trim).filter(|item| !item.is_empty()).map(parse).collect()
}

/// 2000::/3, the only IPv6 range routed on the public internet.
const GLOBAL_UNICAST: IpNet = IpNet::V6(match ipnet::Ipv6Net::new(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3) {
    Ok(net) => net,
    Err(_) => panic!("2000::/3 is a valid network"),
});

/// The IPv4 address an IPv6 address stands for: IPv4-mapped
/// (`::ffff:a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:aabb:ccdd::/48`).
fn embedded_ipv4(address: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = address else { return None };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let o = v6.octets();
    match v6.segments() {
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(Ipv4Addr::new(o[12], o[13], o[14], o[15])),
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(policy: &AddressPolicy, address: &str) -> Option<&'static str> {
        policy.check(address.parse().unwrap()).err().map(|blocked| blocked.range)
    }

    #[test]
    fn internal_ranges_are_refused_by_default() {
        let policy = AddressPolicy::new(Vec::new());
        let cases = [
            ("127.0.0.1", "loopback"),
            ("127.255.1.2", "loopback"),
            ("0.0.0.0", "unspecified (\"this network\")"),
            ("10.1.2.3", "private"),
            ("172.31.255.255", "private"),
            ("192.168.0.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.100.100.200", "carrier-grade NAT (shared)"),
            ("224.0.0.251", "multicast"),
            ("255.255.255.255", "reserved or broadcast"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00::1", "unique local (private)"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"),
            ("64:ff9b::a00:1", "private"),
            ("2002:7f00:1::", "loopback"),
            ("::127.0.0.1", "IPv4-compatible (deprecated)"),
            ("3fff::1", "documentation"),
            ("4000::1", "non-global IPv6"),
        ];
        for (address, range) in cases {
            assert_eq!(refused(&policy, address), Some(range), "{address}");
        }
    }

    #[test]
    fn the_local_use_nat64_prefix_is_refused_whatever_it_embeds() {
        let policy = AddressPolicy::new(Vec::new());
        for address in ["64:ff9b:1::a00:1", "64:ff9b:1::808:808", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff"] {
            assert_eq!(refused(&policy, address), Some("local-use NAT64"), "{address}");
        }
        assert_eq!(refused(&policy, "64:ff9b::808:808"), None, "the well-known prefix is judged by its IPv4");
    }

    #[test]
    fn public_addresses_pass() {
        let policy = AddressPolicy::new(Vec::new());
        for address in
            ["93.184.215.14", "1.1.1.1", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]
        {
            assert_eq!(refused(&policy, address), None, "{address}");
        }
    }

    #[test]
    fn allowed_networks_open_exactly_what_they_name() {
        let policy = AddressPolicy::new(vec!["127.0.0.1/32".parse().unwrap()]);
        assert_eq!(refused(&policy, "127.0.0.1"), None);
        assert_eq!(refused(&policy, "127.0.0.2"), Some("loopback"));
        assert_eq!(refused(&policy, "::1"), Some("loopback"));
        assert_eq!(refused(&policy, "10.0.0.1"), Some("private"));
    }

    #[test]
    fn an_allowed_ipv4_network_does_not_allow_its_ipv6_embeddings() {
        let policy = AddressPolicy::new(parse_networks("127.0.0.2").unwrap());
        assert_eq!(refused(&policy, "127.0.0.2"), None);
        for embedding in ["::ffff:127.0.0.2", "64:ff9b::7f00:2", "2002:7f00:2::", "2002:7f00:2:1::5"] {
            assert_eq!(refused(&policy, embedding), Some("loopback"), "{embedding}");
        }
        let listed = AddressPolicy::new(parse_networks("127.0.0.2, ::ffff:127.0.0.2, 2002:7f00:2::/48").unwrap());
        for address in ["127.0.0.2", "::ffff:127.0.0.2", "2002:7f00:2::1"] {
            assert_eq!(refused(&listed, address), None, "{address} is listed");
        }
        assert_eq!(refused(&listed, "64:ff9b::7f00:2"), Some("loopback"), "NAT64 is not listed");
    }

    #[test]
    fn networks_are_read_from_settings_text() {
        assert_eq!(parse_networks(" ").unwrap(), Vec::<IpNet>::new());
        let networks = parse_networks("127.0.0.1, 10.20.0.0/16").unwrap();
        assert_eq!(networks, ["127.0.0.1/32".parse::<IpNet>().unwrap(), "10.20.0.0/16".parse().unwrap()]);
        assert!(parse_networks("localhost").unwrap_err().contains("`localhost` is neither"));
    }

    #[test]
    fn the_refusal_names_address_and_range() {
        let error = AddressPolicy::new(Vec::new()).check("10.0.0.7".parse().unwrap()).unwrap_err();
        assert_eq!(error.to_string(), "10.0.0.7 is in the private range, which this module does not fetch");
    }
}
