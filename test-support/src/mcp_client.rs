//! rmcp's streamable HTTP client transport for tests. Its HTTP client is
//! reqwest 0.13, which this workspace builds with rustls but without a
//! crypto provider of its own (the orchestrator hands it a configuration on
//! ring, keeping aws-lc-rs out): a client built in a process without a
//! provider installed panics, so ring's is installed first.

use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// rmcp's transport for `config`, with ring installed as the process's
/// rustls provider (once; an installed one is kept).
pub fn transport(config: StreamableHttpClientTransportConfig) -> StreamableHttpClientTransport<reqwest_mcp::Client> {
    // An error means a provider is installed already, which is what is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    StreamableHttpClientTransport::from_config(config)
}
