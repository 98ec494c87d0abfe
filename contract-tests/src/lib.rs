//! Checks any tool module, in any language, against the module contract.
pub mod check;
pub mod checks;
pub mod client;
pub mod generate;
pub mod mutate;
pub mod schema_types;
pub mod suite;
