//! An HTTP client for URLs a model chooses, shared by the modules that make
//! requests on a model's behalf (`research.fetch_webpage`, the scheduler's
//! `api_call` tasks).
//!
//! - [`AddressPolicy`]: which IP addresses may be connected to (public ones,
//!   plus networks allowed explicitly).
//! - [`GuardedResolver`]: name resolution that hands the HTTP client only
//!   permitted addresses, so the address checked is the address connected to.
//! - [`GuardedClient`]: a reqwest client built on that resolver, following
//!   redirects itself (each hop checked), bounded in time, redirects and bytes,
//!   refusing the ports browsers refuse (the Fetch standard's bad ports).

mod address_policy;
mod bad_ports;
mod client;
mod guarded_resolver;

pub use address_policy::{AddressPolicy, BlockedAddress, parse_networks};
pub use client::{ClientLimits, GuardedClient, GuardedError, GuardedRequest, read_capped, shown_url};
pub use guarded_resolver::{BlockedHost, GuardedResolver};
pub use reqwest::{Method, Response, StatusCode, header};
pub use url::Url;
