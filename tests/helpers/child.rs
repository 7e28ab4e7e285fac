//! Misbehaving children for the integration tests (built only with `--features test-helpers`).
fn main() {}
