//! epoll: the one call nix's `Epoll` cannot make safely for the reactor (see `epoll_forget`).

use super::*;
use nix::sys::epoll::Epoll;

/// Takes `fd` out of `epoll`'s set. nix's `Epoll::delete` wants the descriptor borrowed, while a
/// `reactor::Registration` keeps only its number: it is dropped beside the descriptor's owner,
/// which cannot lend it. Its owner keeps `fd` open until this returns (see `Registration`).
pub fn epoll_forget(epoll: &Epoll, fd: RawFd) {
    // SAFETY: the registration's owner closes `fd` only after dropping the registration, whose
    // drop calls this, so `fd` is open here and names the descriptor that was registered.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    // An fd that is not in the set only gets ENOENT, which changes nothing.
    let _ = epoll.delete(fd);
}
