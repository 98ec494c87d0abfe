//! The ports browsers never fetch from: the Fetch standard's "bad ports"
//! (<https://fetch.spec.whatwg.org/#bad-port>).
//!
//! Other protocols listen there (mail, IRC, FTP, LDAP...), and most of
//! them read a request line by line, so an HTTP request whose method,
//! headers or body a model chose could be read as that protocol's commands
//! (cross-protocol request forgery: a POST body of SMTP commands sent to
//! port 25 of a mail relay that trusts this host). Browsers refuse these
//! ports whatever the address; so does this client, on every redirect hop
//! and for allowed networks too.

use url::Url;

/// The Fetch standard's bad ports, each with the protocol it protects.
const BAD_PORTS: &[(u16, &str)] = &[
    (1, "tcpmux"),
    (7, "echo"),
    (9, "discard"),
    (11, "systat"),
    (13, "daytime"),
    (15, "netstat"),
    (17, "qotd"),
    (19, "chargen"),
    (20, "ftp-data"),
    (21, "ftp"),
    (22, "ssh"),
    (23, "telnet"),
    (25, "smtp"),
    (37, "time"),
    (42, "name"),
    (43, "nicname"),
    (53, "domain"),
    (69, "tftp"),
    (77, "priv-rjs"),
    (79, "finger"),
    (87, "ttylink"),
    (95, "supdup"),
    (101, "hostname"),
    (102, "iso-tsap"),
    (103, "gppitnp"),
    (104, "acr-nema"),
    (109, "pop2"),
    (110, "pop3"),
    (111, "sunrpc"),
    (113, "auth"),
    (115, "sftp"),
    (117, "uucp-path"),
    (119, "nntp"),
    (123, "ntp"),
    (135, "epmap"),
    (137, "netbios-ns"),
    (139, "netbios-ssn"),
    (143, "imap"),
    (161, "snmp"),
    (179, "bgp"),
    (389, "ldap"),
    (427, "svrloc"),
    (465, "smtp+ssl"),
    (512, "exec"),
    (513, "login"),
    (514, "shell"),
    (515, "printer"),
    (526, "tempo"),
    (530, "courier"),
    (531, "chat"),
    (532, "netnews"),
    (540, "uucp"),
    (548, "afp"),
    (554, "rtsp"),
    (556, "remotefs"),
    (563, "nntp+ssl"),
    (587, "smtp submission"),
    (601, "syslog-conn"),
    (636, "ldap+ssl"),
    (989, "ftps-data"),
    (990, "ftps"),
    (993, "imap+ssl"),
    (995, "pop3+ssl"),
    (1719, "h323gatestat"),
    (1720, "h323hostcall"),
    (1723, "pptp"),
    (2049, "nfs"),
    (3659, "apple-sasl"),
    (4045, "npp"),
    (4190, "sieve"),
    (5060, "sip"),
    (5061, "sips"),
    (6000, "x11"),
    (6566, "sane-port"),
    (6665, "ircu"),
    (6666, "ircu"),
    (6667, "ircu"),
    (6668, "ircu"),
    (6669, "ircu"),
    (6679, "osaut"),
    (6697, "ircs-u"),
    (10080, "amanda"),
];

/// Why `url` may not be fetched when its port is a bad port (the scheme's
/// default port counts when none is written).
pub(crate) fn bad_port(url: &Url) -> Option<String> {
    let port = url.port_or_known_default()?;
    let (_, protocol) = BAD_PORTS.iter().find(|(bad, _)| *bad == port)?;
    Some(format!(
        "port {port} ({protocol}) is one of the Fetch standard's bad ports, which browsers never fetch because other protocols listen there"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> Option<String> {
        bad_port(&Url::parse(url).unwrap())
    }

    #[test]
    fn bad_ports_are_named_and_web_ports_pass() {
        let smtp = refused("http://mail.example.org:25/").unwrap();
        assert!(smtp.starts_with("port 25 (smtp) is one of the Fetch standard's bad ports"), "{smtp}");
        for url in ["http://example.org:6667/", "http://example.org:10080/x"] {
            assert!(refused(url).is_some(), "{url}");
        }
        for url in
            ["http://example.org/", "https://example.org/", "http://example.org:8080/", "http://example.org:6379/"]
        {
            assert_eq!(refused(url), None, "{url}");
        }
        assert!(BAD_PORTS.windows(2).all(|pair| pair[0].0 < pair[1].0), "sorted, each once");
        assert_eq!(BAD_PORTS.len(), 82);
    }
}
