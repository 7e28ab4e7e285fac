//! epoll: the kernel's set of descriptors the run sleeps on (see `reactor`).

use super::*;

/// Creates an epoll set, closed on exec.
pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes only flags and returns a new descriptor or -1.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds `fd` to the set (`add`) or changes what it is watched for, with `key` as its data.
pub fn epoll_set(
    epfd: BorrowedFd<'_>,
    fd: BorrowedFd<'_>,
    events: u32,
    key: u64,
    add: bool,
) -> io::Result<()> {
    let op = if add {
        libc::EPOLL_CTL_ADD
    } else {
        libc::EPOLL_CTL_MOD
    };
    let mut ev = libc::epoll_event { events, u64: key };
    // SAFETY: both descriptors are borrowed, so open; `ev` is a valid event the call only reads.
    let rc = unsafe { libc::epoll_ctl(epfd.as_raw_fd(), op, fd.as_raw_fd(), &mut ev) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes `fd` from the set. The caller keeps `fd` open until this returns, so the number
/// cannot name another descriptor (see `reactor::Registration`).
pub fn epoll_remove(epfd: BorrowedFd<'_>, fd: RawFd) {
    // SAFETY: a NULL event is allowed for EPOLL_CTL_DEL (Linux 2.6.9 on); an fd that is not in
    // the set only gets ENOENT, which changes nothing.
    unsafe {
        libc::epoll_ctl(
            epfd.as_raw_fd(),
            libc::EPOLL_CTL_DEL,
            fd,
            std::ptr::null_mut(),
        )
    };
}

/// The most events one wait returns; the rest wait for the next turn (level-triggered).
pub const EPOLL_BATCH: usize = 256;

/// Sleeps until a descriptor in the set is ready or `timeout_ms` passes (-1: no limit); fills
/// `ready` with (key, events). An interrupted wait returns nothing.
pub fn epoll_wait(
    epfd: BorrowedFd<'_>,
    ready: &mut Vec<(u64, u32)>,
    timeout_ms: i32,
) -> io::Result<()> {
    // On the stack: a heap buffer would be allocated and freed on every wake-up, and musl's
    // allocator hands a 3 KiB one back to the kernel each time (an mmap and a munmap per wait).
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; EPOLL_BATCH];
    // SAFETY: the kernel writes at most EPOLL_BATCH events into the array, which holds that many.
    let n = unsafe {
        libc::epoll_wait(
            epfd.as_raw_fd(),
            events.as_mut_ptr(),
            EPOLL_BATCH as libc::c_int,
            timeout_ms,
        )
    };
    if n < 0 {
        let err = io::Error::last_os_error();
        return if err.raw_os_error() == Some(libc::EINTR) {
            Ok(())
        } else {
            Err(err)
        };
    }
    let n = n as usize;
    ready.extend(events[..n].iter().map(|e| (e.u64, e.events)));
    Ok(())
}
