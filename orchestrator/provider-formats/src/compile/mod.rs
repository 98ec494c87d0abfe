//! Schema compilation per provider: pure functions from one JSON Schema to
//! another that the provider accepts, keeping as much meaning as it can
//! (what a provider cannot take as a keyword goes into the description).
//!
//! - [`prepare`]: the shape every target starts from (no `$schema`, bare
//!   `#/$defs` references only, unused definitions pruned). Anthropic and
//!   Gemini's `parametersJsonSchema` take it as it is.
//! - [`openai`]: strict structured outputs when possible, else non-strict.
//! - [`anthropic()`]: Anthropic strict tool use when possible, else the prepared schema.
//!   Both strict compilers are one walk (`strict`) with each provider's rules.
//! - [`gemini`]: Gemini's OpenAPI subset for `parameters`.

mod anthropic;
mod combine;
mod gemini;
mod keywords;
mod node;
mod notes;
mod openai;
mod prepare;
mod prepared;
mod size;
mod strict;
pub(crate) mod walk;

use std::borrow::Cow;

use module_sdk::contract::ToolDefinition;
use module_sdk::schema::{is_object_schema, schema_from_parameters};
use serde_json::Value;

pub(crate) use anthropic::with_anthropic;
pub use anthropic::{
    ANTHROPIC_STRICT_FORMATS, ANTHROPIC_STRICT_KEYWORDS, MAX_STRICT_OPTIONAL, MAX_STRICT_TOOLS, MAX_STRICT_UNIONS,
    StrictBudget, StrictCost, anthropic, is_recursive,
};
pub(crate) use gemini::with_gemini;
pub use gemini::{GEMINI_FORMATS, GEMINI_KEYWORDS, GEMINI_TYPES, GEMINI_UNTYPED_KEYWORDS, gemini};
pub(crate) use node::Node;
pub use notes::phrase;
pub(crate) use openai::with_openai;
pub use openai::{
    Compiled, MAX_DEPTH, MAX_ENUM_VALUES, MAX_PROPERTIES, NotStrict, STRICT_BLOCKERS, STRICT_FORMATS, STRICT_KEYWORDS,
    openai, strict_schema,
};
pub use prepare::prepare;
pub(crate) use prepare::prepare_json;
pub(crate) use prepared::write_str;
pub use size::{Size, measure};

/// The JSON Schema of a tool's arguments: its `input_schema` when that is
/// an object schema, otherwise one built from its `parameters` (modules
/// that send only the contract's base fields).
pub fn input_schema(tool: &ToolDefinition) -> Cow<'_, Value> {
    match &tool.input_schema {
        Some(schema) if is_object_schema(schema) => Cow::Borrowed(schema),
        _ => Cow::Owned(schema_from_parameters(&tool.parameters)),
    }
}
