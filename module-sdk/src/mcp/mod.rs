//! Every module is an MCP server too, with no code in the module: the same
//! tools at `/mcp` (streamable HTTP, next to `/execute`) and, when the binary
//! is started with `--stdio`, on standard input and output. Built on `rmcp`,
//! the official Rust SDK of the Model Context Protocol.

mod direct;
mod handler;
pub(crate) mod http;
mod in_flight;
mod line_reader;
mod line_writer;
mod message_head;
mod pages;
mod serialized;
mod settings;
mod shown;
mod stdio;
mod stdio_lines;
mod tools;

pub use handler::USER_ID_META_KEY;
pub use http::transport_config;
pub use line_reader::{Line, LineReader};
pub use line_writer::LineWriter;
pub use message_head::{HeadScan, MAX_ID_BYTES, MessageHead, has_long_id, long_id_message};
pub use pages::page_range;
pub use settings::{DEFAULT_MCP_PAGE_SIZE, McpSettings};
pub use shown::{MAX_SHOWN_CHARS, shown};
pub(crate) use stdio::serve_stdio;
pub use stdio::{STDIO_FLAG, SdkFlags};
pub use tools::McpTool;
