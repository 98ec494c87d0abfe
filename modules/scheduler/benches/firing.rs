//! The firing benchmark.

fn main() {}
