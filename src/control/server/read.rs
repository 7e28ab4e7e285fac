//! What a client sends: its request (with the exec's descriptors), a cancel, or its hang-up.

use super::*;

/// A request that came whole with its connection is answered from a peek if it is at most this
/// long (a status, a stop); longer ones are read the usual way.
const PEEK: usize = 1024;

impl Server {
    /// Answers a request that came whole with its connection without taking it from the socket
    /// (MSG_PEEK): taking it would free room in the client's send buffer, which wakes a client
    /// already blocked in its read, only for it to sleep again until the reply. On a VM, waking
    /// an idle CPU costs tens of microseconds, and the waker pays a share. An exec is read the
    /// usual way, for its descriptors; so is anything not whole yet (None). A malformed request
    /// is answered here (no event).
    pub(super) fn peek_request(&mut self, id: ConnId) -> Option<Vec<Event>> {
        let conn = self.conns.get_mut(&id)?;
        let mut buf = [0u8; PEEK];
        let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
        let n = socket::recv(conn.stream.as_raw_fd(), &mut buf, flags).ok()?;
        let end = buf[..n].iter().position(|b| *b == b'\n')?;
        let parsed = parse_request(&buf[..=end], Vec::new());
        if matches!(parsed, Ok(Request::Exec(_))) {
            return None;
        }
        conn.unread = end + 1;
        conn.phase = Phase::Waiting;
        match parsed {
            Ok(req) => Some(vec![Event::Request(id, req)]),
            Err((code, text)) => {
                self.fail(id, code, &text);
                Some(Vec::new())
            }
        }
    }

    pub(super) fn on_conn(&mut self, id: ConnId, revents: EpollFlags, now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        if revents.intersects(EpollFlags::EPOLLOUT) {
            self.flush(id);
        }
        let Some(conn) = self.conns.get_mut(&id) else {
            return events;
        };
        if !revents.intersects(EpollFlags::EPOLLIN | EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR) {
            return events;
        }
        // The peeked request is still queued: skip it first.
        conn.skip_input(conn.unread);
        let mut buf = [0u8; 8192];
        let mut cmsg = nix::cmsg_space!([RawFd; 4]);
        let mut eof = false;
        loop {
            let mut iov = [IoSliceMut::new(&mut buf)];
            let got = socket::recvmsg::<()>(
                conn.stream.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
            );
            let (n, fds) = match got {
                Ok(m) => {
                    let mut fds = Vec::new();
                    if let Ok(cmsgs) = m.cmsgs() {
                        for c in cmsgs {
                            if let ControlMessageOwned::ScmRights(raw) = c {
                                fds.extend(raw.into_iter().map(crate::sys::own_received_fd));
                            }
                        }
                    }
                    (m.bytes, fds)
                }
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => {
                    eof = true;
                    break;
                }
            };
            // Keep the descriptors of a request still being read, up to three; close any others
            // at once, so that no client can make vloer-run hoard them (it would run out of
            // descriptors, and then could not read /proc to prove a stop).
            if conn.phase == Phase::Reading {
                let room = MAX_FDS.saturating_sub(conn.fds.len());
                conn.fds.extend(fds.into_iter().take(room));
            }
            if n == 0 {
                eof = true;
                break;
            }
            if conn.phase == Phase::Reading || conn.phase == Phase::Attached {
                conn.inbuf.extend_from_slice(&buf[..n]);
            }
            if conn.inbuf.len() > limit_for(&conn.inbuf) {
                break;
            }
            // A whole request line is all there is to read (its descriptors came with its first
            // byte); the read that would only say EAGAIN is skipped.
            if conn.phase == Phase::Reading && buf[..n].contains(&b'\n') {
                break;
            }
        }
        match conn.phase {
            Phase::Reading => {
                if let Some(pos) = conn.inbuf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = conn.inbuf.drain(..=pos).collect();
                    let limit = limit_for(&line);
                    if line.len() > limit + 1 {
                        self.fail(
                            id,
                            ErrorCode::TooLarge,
                            &format!("request longer than {limit} bytes"),
                        );
                    } else {
                        match self.parse(id, &line) {
                            Ok(req) => {
                                if let Some(c) = self.conns.get_mut(&id) {
                                    c.phase = if matches!(req, Request::Exec(_)) {
                                        Phase::Attached
                                    } else {
                                        Phase::Waiting
                                    };
                                }
                                events.push(Event::Request(id, req));
                            }
                            Err((code, text)) => self.fail(id, code, &text),
                        }
                    }
                } else if conn.inbuf.len() > limit_for(&conn.inbuf) {
                    let limit = limit_for(&conn.inbuf);
                    self.fail(
                        id,
                        ErrorCode::TooLarge,
                        &format!("request longer than {limit} bytes"),
                    );
                } else if eof {
                    self.conns.remove(&id);
                }
            }
            Phase::Attached => {
                let line = conn.inbuf.iter().position(|b| *b == b'\n');
                let cancel = line.is_some() || conn.inbuf.len() > MAX_REQUEST;
                let signal = line.and_then(|end| cancel_signal(&conn.inbuf[..=end]));
                conn.inbuf.clear();
                if eof || cancel {
                    events.push(Event::Cancel(id, signal));
                }
                if eof {
                    // Nobody is left to read the final line.
                    if let Some(c) = self.conns.get_mut(&id) {
                        c.phase = Phase::Closing;
                        c.out.clear();
                    }
                    self.conns.remove(&id);
                }
            }
            Phase::Waiting | Phase::Closing => {
                // A hang-up is a client gone for good; an end of input alone is a half-close.
                if revents.intersects(EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR) {
                    self.conns.remove(&id);
                } else if eof {
                    conn.read_closed = true;
                }
            }
        }
        let _ = now;
        events
    }

    fn parse(&mut self, id: ConnId, line: &[u8]) -> Result<Request, (ErrorCode, String)> {
        let stdio = std::mem::take(&mut self.conns.get_mut(&id).expect("connection").fds);
        parse_request(line, stdio)
    }
}
