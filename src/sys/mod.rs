//! Every raw syscall and `unsafe` block of vloer-run, each with the reason it is sound.
//!
//! Everything above this module speaks in `Pid`, `Sig` and `OwnedFd`.
#![allow(unsafe_code)]

mod dents;
mod epoll;
mod handle;
mod kcmp;
mod kill;
mod libc_signals;
mod reap;
mod settings;
mod signalfd;
mod spawn;
mod start;
mod write;

pub use dents::*;
pub use epoll::*;
pub use handle::*;
pub use kcmp::*;
pub use kill::*;
pub use libc_signals::*;
pub use reap::*;
pub use settings::*;
pub use signalfd::*;
pub use spawn::*;
pub use start::*;
pub use write::*;

use crate::signal::Sig;
use nix::unistd::Pid;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
