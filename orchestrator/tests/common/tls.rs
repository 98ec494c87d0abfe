//! A private certificate authority made at test time, as a cluster's or a
//! company's own CA is, and a TLS proxy presenting a certificate it signed:
//! the `https://` face of a plain module server, as an ingress or a
//! service mesh gives one. Like many ingresses the proxy insists on ALPN:
//! it prefers `h2`, and passes on only connections that agreed on
//! `http/1.1` (the module behind it speaks nothing else).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A root CA of its own, trusted by nobody until told.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    /// The root certificate, PEM.
    pem: String,
}

impl TestCa {
    /// A new CA (its key made now) named `name`.
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Self { issuer: Issuer::new(params, key), pem }
    }

    /// Writes the root certificate to `dir/name`; its path.
    pub fn write_pem(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, &self.pem).unwrap();
        path
    }

    /// A server's TLS configuration: a certificate for `names` signed by
    /// this CA, sent with nothing else (the client must know the root),
    /// offering `h2` then `http/1.1` by ALPN.
    fn server_config(&self, names: &[&str]) -> ServerConfig {
        let params = CertificateParams::new(names.iter().map(|name| name.to_string()).collect::<Vec<_>>()).unwrap();
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let chain: Vec<CertificateDer<'static>> = vec![certificate.der().clone()];
        let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), HTTP1.to_vec()];
        config
    }
}

/// The names the orchestrator reaches the proxy by: its certificate is
/// valid for them.
pub const LOCAL_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// HTTP/1.1's ALPN protocol name.
const HTTP1: &[u8] = b"http/1.1";

/// Terminates TLS on a free port and passes each connection's bytes to a
/// plain server; stopped when dropped.
pub struct TlsProxy {
    runtime: Option<Runtime>,
    /// The port it listens on.
    pub port: u16,
}

impl TlsProxy {
    /// Serves TLS with a certificate of `ca` for `names` (as [`LOCAL_NAMES`])
    /// in front of `127.0.0.1:target`.
    pub fn start(ca: &TestCa, names: &[&str], target: u16) -> Self {
        let acceptor = TlsAcceptor::from(Arc::new(ca.server_config(names)));
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        runtime.spawn(async move {
            let listener = TcpListener::from_std(listener).unwrap();
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that does not trust the certificate ends the handshake: nothing to pass on.
                    let Ok(mut client) = acceptor.accept(client).await else { return };
                    // No ALPN, or h2: refused, as by an ingress that requires it.
                    if client.get_ref().1.alpn_protocol() != Some(HTTP1) {
                        return;
                    }
                    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        });
        Self { runtime: Some(runtime), port }
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
