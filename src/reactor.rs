//! The one place vloer-run sleeps: an epoll set in which each source registers its descriptor
//! once, under a key, and which it leaves by dropping its `Registration`.

use crate::sys;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::unistd::Pid;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::time::Instant;

/// What a ready descriptor stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Signals,
    /// The parent's pidfd (`--parent-death`).
    Parent,
    /// The control socket's listening socket.
    Listener,
    /// One control connection (for a client: its connection to the instance).
    Conn(u64),
    /// A member of a stop: owner 0 is the run's own stop, n the stop of exec n.
    Member {
        owner: u64,
        pid: Pid,
    },
    /// A client's terminal: the keys typed into it.
    Keys,
    /// A client's terminal: the exec's output from the pty.
    Output,
}

const TAG_SHIFT: u32 = 60;
/// Linux pids are below 2^22 (PID_MAX_LIMIT).
const PID_BITS: u32 = 22;
const LOW: u64 = (1 << TAG_SHIFT) - 1;

impl Key {
    /// The key as epoll's 64-bit data: a tag in the top four bits, the ids below.
    fn code(self) -> u64 {
        let (tag, low) = match self {
            Key::Signals => (1, 0),
            Key::Parent => (2, 0),
            Key::Listener => (3, 0),
            Key::Conn(id) => (4, id),
            Key::Member { owner, pid } => (5, owner << PID_BITS | pid.as_raw() as u64),
            Key::Keys => (6, 0),
            Key::Output => (7, 0),
        };
        debug_assert!(low <= LOW, "key {self:?} does not fit");
        tag << TAG_SHIFT | (low & LOW)
    }

    fn of(code: u64) -> Option<Key> {
        let low = code & LOW;
        Some(match code >> TAG_SHIFT {
            1 => Key::Signals,
            2 => Key::Parent,
            3 => Key::Listener,
            4 => Key::Conn(low),
            5 => Key::Member {
                owner: low >> PID_BITS,
                pid: Pid::from_raw((low & ((1 << PID_BITS) - 1)) as i32),
            },
            6 => Key::Keys,
            7 => Key::Output,
            _ => return None,
        })
    }
}

/// The most events one wait returns; the rest wait for the next turn (level-triggered).
const BATCH: usize = 256;

/// The epoll set; clones share it.
#[derive(Clone)]
pub struct Reactor {
    epoll: Rc<Epoll>,
}

/// One registered descriptor. Dropping it takes the descriptor out of the set, so it must be
/// dropped while the descriptor is still open (its owner declares it first, or drops it first).
pub struct Registration {
    epoll: Rc<Epoll>,
    fd: RawFd,
    key: u64,
    events: std::cell::Cell<EpollFlags>,
}

/// A descriptor the reactor watches, owned together with its registration.
pub struct Watched {
    /// Declared first, so it leaves the set before the descriptor closes.
    _reg: Registration,
    fd: OwnedFd,
}

impl Watched {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Reactor {
    /// Watches `fd`, owned from now on, for `events` under `key`.
    pub fn watch(&self, fd: OwnedFd, key: Key, events: EpollFlags) -> io::Result<Watched> {
        Ok(Watched {
            _reg: self.register(fd.as_fd(), key, events)?,
            fd,
        })
    }

    pub fn new() -> io::Result<Reactor> {
        Ok(Reactor {
            epoll: Rc::new(Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?),
        })
    }

    /// Watches `fd` for `events` (level-triggered); `wait` reports it under `key`.
    pub fn register(
        &self,
        fd: BorrowedFd<'_>,
        key: Key,
        events: EpollFlags,
    ) -> io::Result<Registration> {
        let key = key.code();
        self.epoll.add(fd, EpollEvent::new(events, key))?;
        Ok(Registration {
            epoll: Rc::clone(&self.epoll),
            fd: fd.as_raw_fd(),
            key,
            events: std::cell::Cell::new(events),
        })
    }

    /// Sleeps in the kernel until a registered descriptor is ready or `deadline` passes (no
    /// deadline: no wake-up at all). Returns the ready keys with what happened to them.
    pub fn wait(&self, deadline: Option<Instant>) -> io::Result<Vec<(Key, EpollFlags)>> {
        let timeout = match deadline {
            None => EpollTimeout::NONE,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                // Round up so we never wake just before the deadline and spin.
                let ms = left.as_nanos().div_ceil(1_000_000);
                EpollTimeout::try_from(ms).unwrap_or(EpollTimeout::MAX)
            }
        };
        // On the stack: a heap buffer would be allocated and freed on every wake-up, and musl's
        // allocator hands a 3 KiB one back to the kernel each time (an mmap and a munmap per
        // wait).
        let mut events = [EpollEvent::empty(); BATCH];
        let n = match self.epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            // Interrupted: nothing is ready, and the loop's next turn waits again.
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(e.into()),
        };
        Ok(events[..n]
            .iter()
            .filter_map(|e| Key::of(e.data()).map(|k| (k, e.events())))
            .collect())
    }
}

impl Registration {
    /// Changes what the descriptor (`fd`, the one registered) is watched for; a no-op when
    /// unchanged. Hang-ups and errors are always reported, as with poll.
    pub fn set(&self, fd: BorrowedFd<'_>, events: EpollFlags) -> io::Result<()> {
        debug_assert_eq!(fd.as_raw_fd(), self.fd);
        if self.events.get() == events {
            return Ok(());
        }
        self.epoll
            .modify(fd, &mut EpollEvent::new(events, self.key))?;
        self.events.set(events);
        Ok(())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        sys::epoll_forget(&self.epoll, self.fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_survives_epolls_data_word() {
        let keys = [
            Key::Signals,
            Key::Parent,
            Key::Listener,
            Key::Conn(1),
            Key::Conn(LOW),
            Key::Member {
                owner: 0,
                pid: Pid::from_raw(1),
            },
            Key::Member {
                owner: (1 << (TAG_SHIFT - PID_BITS)) - 1,
                pid: Pid::from_raw((1 << PID_BITS) - 1),
            },
            Key::Keys,
            Key::Output,
        ];
        for k in keys {
            assert_eq!(Key::of(k.code()), Some(k));
        }
        assert_eq!(Key::of(0), None);
    }

    #[test]
    fn a_ready_descriptor_wakes_with_its_key_and_a_dropped_one_does_not() {
        let r = Reactor::new().unwrap();
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let reg = r
            .register(b.as_fd(), Key::Conn(7), EpollFlags::EPOLLIN)
            .unwrap();
        let soon = Some(Instant::now() + std::time::Duration::from_millis(1));
        assert!(r.wait(soon).unwrap().is_empty());
        use std::io::Write;
        (&a).write_all(b"x").unwrap();
        let got = r.wait(None).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, Key::Conn(7));
        assert!(got[0].1.contains(EpollFlags::EPOLLIN));
        drop(reg);
        assert!(r.wait(soon).unwrap().is_empty());
    }
}
