//! The control socket: its protocol (`proto`, shared with the clients) and its server.

pub mod proto;
mod server;

pub use proto::{ExecRequest, Request};
pub use server::*;
