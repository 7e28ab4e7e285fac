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

    /// Writes what is queued, blocking briefly: used once at exit so final replies are not lost.
    /// After `linger`, then waits (within `budget`) for every client to exit.
    pub fn drain(&mut self, budget: Duration) {
        use std::io::Write;
        let end = Instant::now() + budget;
        for c in self.conns.values_mut() {
            let _ = c.stream.set_nonblocking(false);
            let _ = c.stream.set_write_timeout(Some(
                end.saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
            ));
            let _ = c.stream.write_all(&c.out);
            c.out.clear();
            let _ = c.stream.shutdown(std::net::Shutdown::Write);
            let _ = c.stream.set_nonblocking(true);
        }
        let conns = std::mem::take(&mut self.conns);
        if let Some(mut open) = self.lingering.take() {
            open.extend(conns.into_values().map(|c| (c.stream, c.peer)));
            wait_gone(open, end);
        }
    }
}

/// Waits until every client has exited (its pidfd, opened now from the SO_PEERCRED pid, reads
/// ready) or, where there is no pidfd, has closed its end; or until `end`.
fn wait_gone(clients: Vec<(UnixStream, i32)>, end: Instant) {
    use std::io::Read;
    let mut open: Vec<(UnixStream, Option<OwnedFd>)> = clients
        .into_iter()
        .map(|(s, pid)| {
            let fd = (pid > 0)
                .then(|| crate::sys::pidfd_open(nix::unistd::Pid::from_raw(pid)).ok())
                .flatten();
            (s, fd)
        })
        .collect();
    while !open.is_empty() && Instant::now() < end {
        let ready = {
            let interests: Vec<crate::event_loop::Interest<'_, usize>> = open
                .iter()
                .enumerate()
                .map(|(i, (s, fd))| crate::event_loop::Interest {
                    token: i,
                    fd: fd.as_ref().map_or(s.as_fd(), |fd| fd.as_fd()),
                    events: PollFlags::POLLIN,
                })
                .collect();
            match crate::event_loop::wait(&interests, Some(end)) {
                Ok(r) => r,
                Err(_) => return,
            }
        };
        let mut gone: Vec<usize> = Vec::new();
        for (i, _) in ready {
            let (stream, pidfd) = &open[i];
            if pidfd.is_some() {
                gone.push(i);
                continue;
            }
            let mut scratch = [0u8; 512];
            match (&*stream).read(&mut scratch) {
                Ok(n) if n > 0 => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                _ => gone.push(i),
            }
        }
        gone.sort_unstable();
        for i in gone.into_iter().rev() {
            open.swap_remove(i);
        }
    }
}
