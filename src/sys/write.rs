//! A write to stderr that never waits for its reader, and one to a descriptor vloer-run inherited.

use super::*;

/// What `write_nowait` could do.
#[derive(Debug, PartialEq, Eq)]
pub enum NoWait {
    /// This many bytes went out (a pipe takes a line of at most 4096 bytes whole or not at all).
    Wrote(usize),
    /// The reader is behind: the pipe is full.
    Full,
    /// This descriptor (a terminal, a file, a kernel before 5.x) cannot refuse to wait.
    Unsupported,
    /// Any other failure (a closed stderr, a broken pipe).
    Failed,
}

/// Writes `buf` to `fd` only if that can be done without waiting (pwritev2 with RWF_NOWAIT), so
/// that a reader who stopped reading never blocks the caller. Leaves the descriptor's own
/// flags alone: stderr is shared with the child, which must keep its blocking writes.
pub fn write_nowait(fd: BorrowedFd<'_>, buf: &[u8]) -> NoWait {
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `iov` describes `buf`, which outlives the call and is only read; offset -1 is the
    // descriptor's own position, as write(2) uses.
    let n = unsafe { libc::pwritev2(fd.as_raw_fd(), &iov, 1, -1, libc::RWF_NOWAIT) };
    if n >= 0 {
        return NoWait::Wrote(n as usize);
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => NoWait::Full,
        Some(libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS | libc::ESPIPE) => NoWait::Unsupported,
        _ => NoWait::Failed,
    }
}

/// Whether descriptor `fd` is open in vloer-run now.
pub fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only asks about the descriptor number; a closed one gives EBADF.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1
}

/// One write(2) of `buf` to descriptor `fd`, which vloer-run inherited open from its caller.
pub fn write_inherited(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of its length. The number is the caller's descriptor:
    // vloer-run never closes an inherited descriptor, so it still names the caller's file, and a
    // write to it cannot corrupt memory whatever it names.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
