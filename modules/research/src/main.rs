//! Placeholder: built by its own issue.
fn main() {}
