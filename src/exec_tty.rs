//! The exec client's terminal: a new pty for the exec, this terminal in raw mode meanwhile, and
//! the bytes relayed between them, as `docker exec -it` and ssh do.
//!
//! Handing the client's own terminal to the exec cannot work: it is already the controlling
//! terminal of the caller's session. With a pty of its own the exec is a session leader with
//! job control, and Ctrl-C or Ctrl-Z typed here are bytes that its terminal turns into signals
//! for its own foreground job.

use crate::sys;
use nix::pty::{openpty, OpenptyResult};
use nix::sys::termios::{self, SetArg, Termios};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The pty of one exec, and this terminal's settings to restore.
pub struct ExecTty {
    master: OwnedFd,
    slave: Option<OwnedFd>,
    saved: Termios,
    raw: bool,
    /// The master reports end of file: every holder of the exec's side has closed it.
    pub master_done: bool,
    pub stdin_done: bool,
}

impl ExecTty {
    /// A pty with this terminal's size and settings, when stdin and stdout are a terminal.
    pub fn open() -> anyhow::Result<Option<ExecTty>> {
        let stdin = sys::borrow_std_fd(0);
        let (Some(size), Some(_)) = (
            sys::window_size(stdin),
            sys::window_size(sys::borrow_std_fd(1)),
        ) else {
            return Ok(None);
        };
        let saved = termios::tcgetattr(stdin)?;
        let OpenptyResult { master, slave } = openpty(Some(&size), Some(&saved))
            .map_err(|e| anyhow::anyhow!("opening a pseudo-terminal for the exec: {e}"))?;
        for fd in [&master, &slave] {
            nix::fcntl::fcntl(
                fd,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            )?;
        }
        Ok(Some(ExecTty {
            master,
            slave: Some(slave),
            saved,
            raw: false,
            master_done: false,
            stdin_done: false,
        }))
    }

    /// The exec's side, to pass as its stdin, stdout and stderr.
    pub fn slave(&self) -> Option<BorrowedFd<'_>> {
        self.slave.as_ref().map(|s| s.as_fd())
    }

    /// After the exec has its copy: ours goes, so the master sees the end once the exec's side
    /// is closed everywhere; this terminal goes raw, so every key reaches the exec.
    pub fn start(&mut self) -> anyhow::Result<()> {
        self.slave = None;
        let mut raw = self.saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(sys::borrow_std_fd(0), SetArg::TCSADRAIN, &raw)?;
        self.raw = true;
        Ok(())
    }

    pub fn master(&self) -> BorrowedFd<'_> {
        self.master.as_fd()
    }

    /// This terminal's new size goes to the exec's terminal, which signals its foreground group.
    pub fn resize(&self) {
        if let Some(ws) = sys::window_size(sys::borrow_std_fd(0)) {
            let _ = sys::set_window_size(self.master.as_fd(), &ws);
        }
    }

    /// Keys typed here go to the exec.
    pub fn relay_keys(&mut self) {
        let mut buf = [0u8; 4096];
        match nix::unistd::read(sys::borrow_std_fd(0), &mut buf) {
            Ok(0) => self.stdin_done = true,
            Ok(n) => {
                if write_all(self.master.as_fd(), &buf[..n]).is_err() {
                    self.stdin_done = true;
                }
            }
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            Err(_) => self.stdin_done = true,
        }
    }

    /// The exec's output goes to stdout.
    pub fn relay_output(&mut self) {
        let mut buf = [0u8; 4096];
        match nix::unistd::read(self.master.as_fd(), &mut buf) {
            Ok(n) if n > 0 => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(&buf[..n]).and_then(|_| out.flush());
            }
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            // EIO: no process holds the exec's side any more.
            _ => self.master_done = true,
        }
    }

    /// Copies out whatever the exec wrote before it ended.
    pub fn drain(&mut self) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        while !self.master_done {
            let mut fds = [PollFd::new(self.master.as_fd(), PollFlags::POLLIN)];
            if poll(&mut fds, PollTimeout::ZERO).unwrap_or(0) <= 0 {
                return;
            }
            self.relay_output();
        }
    }
}

impl Drop for ExecTty {
    /// This terminal gets its settings back, however the client ends.
    fn drop(&mut self) {
        if self.raw {
            let _ = termios::tcsetattr(sys::borrow_std_fd(0), SetArg::TCSADRAIN, &self.saved);
        }
    }
}

fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> nix::Result<()> {
    while !bytes.is_empty() {
        match nix::unistd::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
