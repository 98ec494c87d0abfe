//! The certificates the orchestrator trusts when it connects over TLS:
//! Mozilla's roots (webpki-roots) and those of `TLS_EXTRA_ROOTS`, a PEM
//! file of the deployment's own CAs (a cluster's or a company's). One
//! rustls client configuration on ring (the provider already in the tree:
//! no aws-lc-rs) is used for `https://` modules (discovery and routed
//! calls), `mcp+https://` MCP servers and a `JWT_JWKS` URL alike.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::{self, PemObject};
use rustls::{ClientConfig, RootCertStore};

/// Why the `TLS_EXTRA_ROOTS` file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ExtraRootsError {
    /// The file cannot be read.
    #[error("cannot read it ({0})")]
    Read(#[source] std::io::Error),
    /// A section of the file is not valid PEM.
    #[error("it is not PEM text ({0})")]
    Pem(#[source] pem::Error),
    /// The file holds no `CERTIFICATE` section.
    #[error("it holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    NoCertificate,
    /// A certificate cannot be a root (not X.509, or not one rustls accepts).
    #[error("certificate {number} (counted from 1) cannot be a root certificate ({source})")]
    NotARoot {
        /// Its place in the file, from 1.
        number: usize,
        /// Why rustls refused it.
        source: rustls::Error,
    },
}

/// The certificates of the PEM file at `path`, each checked as a root
/// (other sections, such as keys, are skipped).
pub fn read_extra_roots(path: &Path) -> Result<Vec<CertificateDer<'static>>, ExtraRootsError> {
    let text = std::fs::read(path).map_err(ExtraRootsError::Read)?;
    let roots = CertificateDer::pem_slice_iter(&text).collect::<Result<Vec<_>, _>>().map_err(ExtraRootsError::Pem)?;
    if roots.is_empty() {
        return Err(ExtraRootsError::NoCertificate);
    }
    trust_store(&roots)?;
    Ok(roots)
}

/// Mozilla's roots and `extra_roots`.
fn trust_store(extra_roots: &[CertificateDer<'static>]) -> Result<RootCertStore, ExtraRootsError> {
    let mut store = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    for (index, root) in extra_roots.iter().enumerate() {
        store.add(root.clone()).map_err(|source| ExtraRootsError::NotARoot { number: index + 1, source })?;
    }
    Ok(store)
}

/// Why the TLS client configuration cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A root of `TLS_EXTRA_ROOTS` is refused.
    #[error("invalid TLS_EXTRA_ROOTS: {0}")]
    Roots(#[from] ExtraRootsError),
    /// rustls refused the protocol versions (it does not with ring's provider).
    #[error("cannot set up TLS: {0}")]
    Protocols(#[from] rustls::Error),
}

/// The client configuration of every TLS connection the orchestrator
/// makes: ring, TLS 1.2 and 1.3, no client certificate, servers verified
/// against Mozilla's roots and `extra_roots` (from [`read_extra_roots`]),
/// offering HTTP/1.1 by ALPN ([`ALPN_HTTP1`]).
pub fn client_config(extra_roots: &[CertificateDer<'static>]) -> Result<ClientConfig, TlsSetupError> {
    let store = trust_store(extra_roots)?;
    let mut config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
    Ok(config)
}

/// The one protocol every client offers by ALPN, `http/1.1`: each speaks
/// HTTP/1.1 only. Routed calls go through hyper's HTTP/1.1 connection API
/// (`module_client`, chosen and measured for many small calls); discovery
/// and the JWKS through a reqwest built `http1_only`; MCP servers
/// through rmcp's reqwest 0.13, built without its `http2` feature. reqwest
/// and hyper-rustls set no ALPN on a configuration handed to them whole, so
/// without this a server that requires ALPN (as some ingresses do) refuses
/// the handshake, and offering `h2` would let a server pick a protocol the
/// client cannot speak.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary file holding `text`.
    fn write(text: &[u8]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, text).unwrap();
        file
    }

    /// A new self-signed CA certificate, PEM, and its key, PEM.
    fn new_ca() -> (String, String) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    #[test]
    fn every_certificate_of_the_file_is_read_and_other_sections_skipped() {
        let ((first, key), (second, _)) = (new_ca(), new_ca());
        let file = write(format!("# the cluster's CAs\n{first}{key}\n{second}").as_bytes());
        let roots = read_extra_roots(file.path()).unwrap();
        assert_eq!(roots.len(), 2);
        assert_eq!(trust_store(&roots).unwrap().len(), webpki_roots::TLS_SERVER_ROOTS.len() + 2);
    }

    #[test]
    fn a_file_without_a_usable_certificate_is_refused_saying_why() {
        let missing = read_extra_roots(Path::new("/nonexistent/roots.pem")).unwrap_err();
        assert!(matches!(missing, ExtraRootsError::Read(_)), "{missing}");
        for text in [&b""[..], b"just text\n", b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"] {
            let error = read_extra_roots(write(text).path()).unwrap_err();
            assert!(matches!(error, ExtraRootsError::NoCertificate), "{error}");
        }
        let bad_base64 = write(b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n");
        let error = read_extra_roots(bad_base64.path()).unwrap_err();
        assert!(matches!(error, ExtraRootsError::Pem(_)), "{error}");
        let unterminated = write(b"-----BEGIN CERTIFICATE-----\nAAAA\n");
        assert!(matches!(read_extra_roots(unterminated.path()), Err(ExtraRootsError::Pem(_))));
        let not_x509 = write(b"-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n");
        let error = read_extra_roots(not_x509.path()).unwrap_err();
        assert!(matches!(error, ExtraRootsError::NotARoot { number: 1, .. }), "{error}");
        assert!(error.to_string().contains("certificate 1"), "{error}");
    }

    #[test]
    fn without_extra_roots_the_configuration_trusts_mozillas_roots() {
        let config = client_config(&[]).unwrap();
        assert_eq!(config.alpn_protocols, [ALPN_HTTP1], "every client speaks HTTP/1.1 only");
        let error = client_config(&[CertificateDer::from(b"not a certificate".to_vec())]).unwrap_err();
        assert!(error.to_string().contains("TLS_EXTRA_ROOTS"), "{error}");
    }
}
