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

/// Sleeps until a descriptor in the set is ready or `timeout_ms` passes (-1: no limit); fills
/// `ready` with (key, events). An interrupted wait returns nothing.
pub fn epoll_wait(
    epfd: BorrowedFd<'_>,
    ready: &mut Vec<(u64, u32)>,
    max: usize,
    timeout_ms: i32,
) -> io::Result<()> {
    let mut events: Vec<libc::epoll_event> = Vec::with_capacity(max);
    // SAFETY: the kernel writes at most `max` events into the spare capacity, which holds `max`;
    // `set_len` then covers exactly the ones it wrote.
    let n = unsafe {
        libc::epoll_wait(
            epfd.as_raw_fd(),
            events.as_mut_ptr(),
            max as libc::c_int,
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
    // SAFETY: see above; 0 <= n <= max.
    unsafe { events.set_len(n as usize) };
    ready.extend(events.iter().map(|e| (e.u64, e.events)));
    Ok(())
}
