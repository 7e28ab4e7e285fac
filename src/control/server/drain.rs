//! The end of the server: final replies written, and, as PID 1, the answered clients waited for.

use super::*;

impl Server {
    /// From now on, a client whose reply is complete is kept (our side shut down, so it sees
    /// the end) until `drain` has waited for its process to exit: as PID 1, our exit makes the
    /// kernel SIGKILL every process left in the namespace, a client that has read its reply but
    /// not yet exited included (a failed preStop hook). Its closing the socket is not enough: a
    /// client may close before it prints the reply and exits.
    pub fn linger(&mut self) {
        self.lingering.get_or_insert_with(Vec::new);
    }

    /// Used once at exit so final replies are not lost: writes what is queued as the clients
    /// take it, within `budget`. After `linger`, then waits (within the same budget) for every
    /// client to exit. A reactor of its own: the run's has the signalfd, which would wake these
    /// waits for signals nobody reads any more.
    pub fn drain(&mut self, budget: Duration) {
        let end = Instant::now() + budget;
        let reactor = Reactor::new().ok();
        // Each client with a reply still queued, watched for room to write.
        let mut queued: BTreeMap<ConnId, Option<Registration>> = BTreeMap::new();
        for (id, c) in &self.conns {
            if !c.out.is_empty() {
                let reg = reactor.as_ref().and_then(|r| {
                    r.register(c.stream.as_fd(), Key::Conn(*id), EpollFlags::EPOLLOUT)
                        .ok()
                });
                queued.insert(*id, reg);
            }
        }
        loop {
            queued.retain(|id, _| self.conns.get_mut(id).is_some_and(|c| !c.write_queued()));
            if queued.is_empty() || Instant::now() >= end || queued.values().any(Option::is_none) {
                break;
            }
            let Some(Ok(_)) = reactor.as_ref().map(|r| r.wait(Some(end))) else {
                break;
            };
        }
        drop(queued);
        for c in self.conns.values_mut() {
            c.skip_peeked();
            c.out.clear();
            let _ = c.stream.shutdown(std::net::Shutdown::Write);
        }
        let conns = std::mem::take(&mut self.conns);
        if let (Some(mut open), Some(reactor)) = (self.lingering.take(), reactor) {
            open.extend(conns.into_values().map(|c| (c.stream, c.peer)));
            wait_gone(&reactor, open, end);
        }
    }
}

/// Waits until every client has exited (its pidfd, opened now from the SO_PEERCRED pid, reads
/// ready) or, where there is no pidfd, has closed its end; or until `end`.
fn wait_gone(reactor: &Reactor, clients: Vec<(UnixStream, i32)>, end: Instant) {
    use std::io::Read;
    // Each entry: its registration (dropped first), the stream, and the pidfd if any.
    let mut open: BTreeMap<u64, (Option<Registration>, UnixStream, Option<OwnedFd>)> = clients
        .into_iter()
        .zip(0u64..)
        .map(|((s, pid), i)| {
            let pidfd = (pid > 0)
                .then(|| crate::sys::pidfd_open(nix::unistd::Pid::from_raw(pid)).ok())
                .flatten();
            let fd = pidfd.as_ref().map_or(s.as_fd(), |fd| fd.as_fd());
            let reg = reactor.register(fd, Key::Conn(i), EpollFlags::EPOLLIN).ok();
            (i, (reg, s, pidfd))
        })
        .collect();
    while !open.is_empty() && Instant::now() < end {
        let Ok(ready) = reactor.wait(Some(end)) else {
            return;
        };
        for (key, _) in ready {
            let Key::Conn(i) = key else { continue };
            let Some((_, stream, pidfd)) = open.get(&i) else {
                continue;
            };
            let gone = pidfd.is_some() || {
                let mut scratch = [0u8; 512];
                match (&*stream).read(&mut scratch) {
                    Ok(n) => n == 0,
                    Err(e) => e.kind() != ErrorKind::WouldBlock,
                }
            };
            if gone {
                open.remove(&i);
            }
        }
    }
}
