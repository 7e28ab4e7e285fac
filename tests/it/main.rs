//! The one integration-test binary: every test runs the real vloer-run against the real kernel.

mod harness;
