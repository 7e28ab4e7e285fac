//! The control socket's server: a Unix stream socket served from the run's own event loop,
//! without threads (the protocol itself is in `proto`).

mod drain;
mod read;

use super::proto::*;
use crate::msg;
use crate::reactor::{Key, Reactor, Registration};
use anyhow::{bail, Context};
use nix::sys::epoll::EpollFlags;
use nix::sys::socket::{self, sockopt, ControlMessageOwned, MsgFlags};
use std::collections::BTreeMap;
use std::io::{ErrorKind, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A request comes with at most this many descriptors (an exec's stdin, stdout and stderr).
const MAX_FDS: usize = 3;
/// A client that has not sent a whole request by then is dropped.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this many clients at once; more wait in the listen backlog.
const MAX_CONNS: usize = 512;

/// Something the supervisor must act on.
#[derive(Debug)]
pub enum Event {
    Request(ConnId, Request),
    /// The client of an exec asked to stop it, or went away.
    Cancel(ConnId, Option<crate::signal::Sig>),
}

pub type ConnId = u64;

#[derive(Debug, PartialEq, Eq)]
enum Phase {
    Reading,
    /// The request was handed on; the connection waits for the supervisor's reply.
    Waiting,
    /// An exec runs for this client: watch for cancel or hang-up while replies are written.
    Attached,
    /// Write what is left, then close.
    Closing,
}

struct Conn {
    /// Declared before `stream`, so it leaves the reactor while the socket is still open. None
    /// until the loop next sleeps: a client answered at once never enters the reactor.
    reg: Option<Registration>,
    stream: UnixStream,
    phase: Phase,
    inbuf: Vec<u8>,
    fds: Vec<OwnedFd>,
    out: Vec<u8>,
    since: Instant,
    /// The client shut down its sending side (socat does once its request is sent): it still
    /// reads, and gets its reply.
    read_closed: bool,
    /// The client's pid from SO_PEERCRED (0: unknown, or outside our pid namespace).
    peer: i32,
    /// Bytes of the request that were peeked, not read: they stay queued in the socket until the
    /// reply is written (see `accept`), and are skipped before anything else is read.
    unread: usize,
}

impl Conn {
    /// Takes up to `upto` bytes of input out of the socket, as far as they have come: the peeked
    /// request before anything else is read, and, after an answer from a peek, whatever is
    /// queued before the socket is closed (closing with unread input resets the connection, and
    /// the client would read an error after its reply).
    fn skip_input(&mut self, upto: usize) {
        let mut buf = [0u8; 4096];
        let mut left = upto;
        while left > 0 {
            let take = left.min(buf.len());
            match socket::recv(
                self.stream.as_raw_fd(),
                &mut buf[..take],
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(0) => break,
                Ok(n) => left -= n,
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => break,
            }
        }
        self.unread = self.unread.saturating_sub(upto - left);
    }

    /// Before closing: see `skip_input`.
    fn skip_peeked(&mut self) {
        if self.unread > 0 {
            self.skip_input(MAX_REQUEST);
        }
    }

    /// Writes what is queued without blocking; false when the socket would block first. A
    /// client that cannot be written to any more is closed.
    fn write_queued(&mut self) -> bool {
        while !self.out.is_empty() {
            match socket::send(
                self.stream.as_raw_fd(),
                &self.out,
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            ) {
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(nix::errno::Errno::EAGAIN) => return false,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => {
                    self.out.clear();
                    // An exec's client that can no longer read is gone: its hang-up, read as a
                    // cancel, stops the exec. Dropping the connection here would lose that, and
                    // the exec would outlive its client (killed before its reply was written).
                    if self.phase != Phase::Attached {
                        self.phase = Phase::Closing;
                    }
                }
            }
        }
        true
    }
}

/// The listening socket and its clients.
pub struct Server {
    path: PathBuf,
    reactor: Reactor,
    /// Declared before `listener`, so it leaves the reactor while the socket is still open.
    listening: Registration,
    listener: UnixListener,
    conns: BTreeMap<ConnId, Conn>,
    /// Set at exit as PID 1 (`linger`): answered clients (our side shut) and their pids, kept
    /// until they have exited.
    lingering: Option<Vec<(UnixStream, i32)>>,
    next: ConnId,
    uid: u32,
}

impl Server {
    /// Creates the socket at `path` with mode 0600. A live instance's socket is refused; a stale
    /// one (nobody accepts on it) is replaced.
    pub fn bind(path: &Path, reactor: &Reactor) -> anyhow::Result<Server> {
        let shown = path.display();
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                bail!("creating control socket at {shown}: the path exists and is not a socket");
            }
            match UnixStream::connect(path) {
                Ok(_) => {
                    bail!("creating control socket at {shown}: another vloer-run is serving it")
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    msg::verbose(format_args!("replacing stale control socket {shown}"));
                    std::fs::remove_file(path)
                        .with_context(|| format!("removing stale control socket {shown}"))?;
                }
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("checking existing control socket {shown}"))
                }
            }
        }
        let listener =
            bind_in_place(path).with_context(|| format!("creating control socket at {shown}"))?;
        listener
            .set_nonblocking(true)
            .context("making the control socket non-blocking")?;
        let listening = reactor
            .register(listener.as_fd(), Key::Listener, EpollFlags::EPOLLIN)
            .context("watching the control socket (epoll)")?;
        Ok(Server {
            reactor: reactor.clone(),
            listening,
            // Removed at exit by its absolute name: the run leaves its working directory. The
            // socket itself was bound by the name given, which may be the shorter one (a
            // socket's path has a limit of 107 bytes).
            path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
            listener,
            conns: BTreeMap::new(),
            lingering: None,
            next: 1,
            uid: nix::unistd::geteuid().as_raw(),
        })
    }

    /// Tells the reactor what each descriptor now waits for: no new clients while full, input
    /// while a client may still send, output while a reply is queued. Called once before the
    /// loop sleeps, so a client answered in the same turn costs the reactor nothing.
    pub fn sync(&mut self) {
        let full = self.conns.len() >= MAX_CONNS;
        let listen = if full {
            EpollFlags::empty()
        } else {
            EpollFlags::EPOLLIN
        };
        let _ = self.listening.set(self.listener.as_fd(), listen);
        for (id, c) in self.conns.iter_mut() {
            let mut flags = EpollFlags::empty();
            if matches!(c.phase, Phase::Reading | Phase::Attached | Phase::Waiting)
                && !c.read_closed
            {
                flags |= EpollFlags::EPOLLIN;
            }
            if !c.out.is_empty() {
                flags |= EpollFlags::EPOLLOUT;
            }
            match &c.reg {
                // A failure leaves the old interest: at worst one more wake-up, never a lost one.
                Some(reg) => {
                    let _ = reg.set(c.stream.as_fd(), flags);
                }
                // Even with no interest, to hear of its hang-up (always reported).
                None => match self
                    .reactor
                    .register(c.stream.as_fd(), Key::Conn(*id), flags)
                {
                    Ok(reg) => c.reg = Some(reg),
                    Err(e) => {
                        msg::warn(format_args!("control socket: cannot watch a client: {e}"));
                        c.phase = Phase::Closing;
                        c.out.clear();
                    }
                },
            }
        }
        // Those that could not be watched could never be answered: closed now, not left hanging.
        self.conns.retain(|_, c| c.reg.is_some());
    }

    /// When the slowest silent client must be dropped.
    /// The pids of the clients connected now, where the kernel told them.
    pub fn peers(&self) -> Vec<nix::unistd::Pid> {
        self.conns
            .values()
            .filter(|c| c.peer > 0)
            .map(|c| nix::unistd::Pid::from_raw(c.peer))
            .collect()
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.conns
            .values()
            .filter(|c| c.phase == Phase::Reading)
            .map(|c| c.since + READ_TIMEOUT)
            .min()
    }

    /// Handles readiness of the listener or a connection; returns what the supervisor must do.
    pub fn on_ready(&mut self, key: Key, revents: EpollFlags, now: Instant) -> Vec<Event> {
        match key {
            Key::Listener => self.accept(now),
            Key::Conn(id) => self.on_conn(id, revents, now),
            _ => Vec::new(),
        }
    }

    fn accept(&mut self, now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        if self.conns.len() >= MAX_CONNS {
            return events;
        }
        // One connection per wake-up: the listener stays readable while others wait, so the next
        // poll returns at once, and a lone client does not pay for an accept that finds nobody.
        let stream = match crate::sys::accept_nonblocking(self.listener.as_fd()) {
            Ok(s) => s,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                return events
            }
            Err(e) => {
                // EMFILE and friends: the client waits in the backlog; we keep serving.
                msg::warn(format_args!("control socket: accept failed: {e}"));
                return events;
            }
        };
        let id = self.next;
        self.next += 1;
        let mut conn = Conn {
            reg: None,
            stream,
            phase: Phase::Reading,
            inbuf: Vec::new(),
            fds: Vec::new(),
            out: Vec::new(),
            since: now,
            read_closed: false,
            peer: 0,
            unread: 0,
        };
        match socket::getsockopt(&conn.stream, sockopt::PeerCredentials) {
            Ok(cred) if cred.uid() == self.uid || cred.uid() == 0 => conn.peer = cred.pid(),
            Ok(cred) => {
                msg::warn(format_args!(
                    "control socket: refused a client with uid {} (pid {})",
                    cred.uid(),
                    cred.pid()
                ));
                conn.out = error_line(
                    ErrorCode::Forbidden,
                    "only vloer-run's own user or root may use this socket",
                )
                .into_bytes();
                conn.phase = Phase::Closing;
            }
            Err(e) => {
                msg::warn(format_args!(
                    "control socket: cannot read peer credentials: {e}"
                ));
                conn.out =
                    error_line(ErrorCode::Forbidden, "peer credentials unavailable").into_bytes();
                conn.phase = Phase::Closing;
            }
        }
        let reading = conn.phase == Phase::Reading;
        self.conns.insert(id, conn);
        self.flush(id);
        // The request usually arrives with the connection; reading now saves a poll round.
        if reading {
            match self.peek_request(id) {
                Some(answered) => events.extend(answered),
                None => events.extend(self.on_conn(id, EpollFlags::EPOLLIN, now)),
            }
        }
        events
    }

    /// Drops clients that stayed silent too long.
    pub fn expire(&mut self, now: Instant) {
        let late: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.phase == Phase::Reading && now >= c.since + READ_TIMEOUT)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            self.fail(
                id,
                ErrorCode::Timeout,
                &format!("no complete request within {} s", READ_TIMEOUT.as_secs()),
            );
        }
    }

    fn fail(&mut self, id: ConnId, code: ErrorCode, text: &str) {
        msg::verbose(format_args!("control socket: {text}"));
        self.send(id, &error_line(code, text), true);
    }

    /// Queues a reply line; `last` closes the connection once it is written.
    pub fn send(&mut self, id: ConnId, line: &str, last: bool) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.out.extend_from_slice(line.as_bytes());
            c.fds.clear();
            if last {
                c.phase = Phase::Closing;
            }
        }
        self.flush(id);
    }

    fn flush(&mut self, id: ConnId) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !c.write_queued() {
            return;
        }
        if c.phase == Phase::Closing {
            c.skip_peeked();
            if let (Some(c), Some(lingering)) = (self.conns.remove(&id), &mut self.lingering) {
                let _ = c.stream.shutdown(std::net::Shutdown::Write);
                lingering.push((c.stream, c.peer));
            }
        }
    }
}

/// Binds and listens under a temporary name beside `path`, then links the socket in: the path
/// appears only once it accepts, so a client that waits for it (a script, a test) is never
/// refused in the moment between bind and listen. The link fails if the path exists meanwhile
/// (another instance won the race), as a bind to it would. A temporary name too long for a
/// socket address falls back to binding `path` itself.
fn bind_in_place(path: &Path) -> std::io::Result<UnixListener> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.{}", std::process::id()));
    // The mode is fixed at bind time from the umask, so no other user ever sees a wider one.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let direct = temp.as_os_str().len() >= 108;
    let bound = UnixListener::bind(if direct { path } else { &temp });
    nix::sys::stat::umask(old);
    let listener = bound?;
    if direct {
        return Ok(listener);
    }
    let linked = std::fs::hard_link(&temp, path);
    let _ = std::fs::remove_file(&temp);
    linked.map(|()| listener)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
