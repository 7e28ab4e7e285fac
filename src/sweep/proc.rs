//! The few reads of `/proc/PID/...` the sweep makes, through the proven /proc, none of which
//! reaches the filesystem a link points into: link texts, `fdinfo`, `stat`, `status`.

use crate::proctable::files;
use crate::slowread;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::unistd::Pid;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// One open descriptor: its number, its link's text, and (for a path) its mount id.
pub struct Fd {
    pub num: String,
    pub text: Vec<u8>,
    pub mount: Got<u64>,
}

/// See `Dir::mount_id`; `at` is the folder `name` is in.
fn mount_id_at(at: &OwnedFd, name: &str, pid: Pid) -> Got<u64> {
    let Ok(c) = std::ffi::CString::new(name) else {
        return Got::Denied(format!("/proc/{pid}/{name}: not a name"));
    };
    match crate::sys::mount_id_at(at.as_fd(), &c) {
        Ok(id) => Got::Text(id),
        Err(e) => judged(&format!("{pid}/{name}"), e),
    }
}

/// A read of one process's file.
pub enum Got<T> {
    Text(T),
    /// The process or the file is gone (exited, a zombie, a kernel thread).
    Gone,
    /// Not readable by us: why, in words.
    Denied(String),
}

impl<T> Got<T> {
    pub fn ok(self) -> Option<T> {
        match self {
            Got::Text(t) => Some(t),
            _ => None,
        }
    }
}

fn judged<T>(name: &str, err: io::Error) -> Got<T> {
    match err.raw_os_error().map(Errno::from_raw) {
        Some(Errno::ENOENT | Errno::ESRCH) => Got::Gone,
        Some(Errno::EACCES | Errno::EPERM) => {
            Got::Denied(format!("/proc/{name}: permission denied"))
        }
        _ => Got::Denied(format!("/proc/{name}: {err}")),
    }
}

/// The text of the link `name` (such as `42/cwd`).
pub fn link(name: &str) -> Got<Vec<u8>> {
    let root = match files::root() {
        Ok(r) => r,
        Err(e) => return Got::Denied(e.0),
    };
    match nix::fcntl::readlinkat(root, name) {
        Ok(t) => Got::Text(t.into_encoded_bytes()),
        Err(e) => judged(name, io::Error::from(e)),
    }
}

/// The whole file `name`.
pub fn read(name: &str) -> Got<Vec<u8>> {
    match files::read_file(name) {
        Ok(b) => Got::Text(b),
        Err(e) => judged(name, e),
    }
}

/// Judges a read made elsewhere (on the reader thread).
pub fn got(name: &str, read: io::Result<Vec<u8>>) -> Got<Vec<u8>> {
    read.map_or_else(|e| judged(name, e), Got::Text)
}

/// The entries of the folder `name` whose names are numbers (pids, tids), each with the inode
/// number the listing gave it (see `listing`).
pub fn numbered(name: &str) -> Got<Vec<(Pid, u64)>> {
    match files::root() {
        Ok(root) => numbered_at(root, name),
        Err(e) => Got::Denied(e.0),
    }
}

fn numbered_at(at: impl AsFd, name: &str) -> Got<Vec<(Pid, u64)>> {
    let entries = match listed(at, name) {
        Ok((e, _)) => e,
        Err(e) => return judged(name, e),
    };
    let number = |n: &[u8]| std::str::from_utf8(n).ok()?.parse().ok();
    Got::Text(
        entries
            .into_iter()
            .filter_map(|(ino, n)| Some((Pid::from_raw(number(&n)?), ino)))
            .collect(),
    )
}

/// The entries of the folder `name` under `at` (each with its inode number), and the folder,
/// open.
fn listed(at: impl AsFd, name: &str) -> io::Result<(crate::sys::Entries, OwnedFd)> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let dir = nix::fcntl::openat(at, name, flags, Mode::empty())?;
    Ok((crate::sys::entries(dir.as_fd())?, dir))
}

/// One process's folder under /proc, held open: each name under it is then looked up from there,
/// not from /proc (a third of a scan's kernel time went to looking up `PID/` again), and a pid
/// reused since cannot answer for the process it was opened for.
pub struct Dir {
    pid: Pid,
    pub(super) fd: OwnedFd,
}

impl Dir {
    pub fn open(pid: Pid) -> Got<Dir> {
        let name = pid.to_string();
        match files::root() {
            Ok(root) => Dir::open_at(pid, root, &name, &name),
            Err(e) => Got::Denied(e.0),
        }
    }

    /// One of this process's threads' folder (`task/TID`): its own working directory, root and
    /// file table, where it unshared them. Only a thread of this very process answers.
    pub fn task(&self, tid: Pid) -> Got<Dir> {
        let name = format!("task/{tid}");
        Dir::open_at(self.pid, &self.fd, &name, &format!("{}/{name}", self.pid))
    }

    fn open_at(pid: Pid, at: impl AsFd, name: &str, shown: &str) -> Got<Dir> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        match nix::fcntl::openat(at, name, flags, Mode::empty()) {
            Ok(fd) => Got::Text(Dir { pid, fd }),
            Err(e) => judged(shown, io::Error::from(e)),
        }
    }

    /// This very process's threads (`task`), each with its listing's inode number.
    pub fn tasks(&self) -> Got<Vec<(Pid, u64)>> {
        match numbered_at(&self.fd, "task") {
            Got::Denied(_) => Got::Denied(format!("/proc/{}/task: cannot be listed", self.pid)),
            got => got,
        }
    }

    /// The whole file `name` (`stat`, `status`) of this very process.
    pub fn read(&self, name: &str) -> Got<Vec<u8>> {
        use std::io::Read;
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let fd = match nix::fcntl::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => return judged(&format!("{}/{name}", self.pid), io::Error::from(e)),
        };
        let mut out = Vec::new();
        match std::fs::File::from(fd).read_to_end(&mut out) {
            Ok(_) => Got::Text(out),
            Err(e) => judged(&format!("{}/{name}", self.pid), e),
        }
    }

    /// The text of the link `name` (`cwd`, `ns/mnt`).
    pub fn link(&self, name: &str) -> Got<Vec<u8>> {
        match nix::fcntl::readlinkat(&self.fd, name) {
            Ok(t) => Got::Text(t.into_encoded_bytes()),
            Err(e) => judged(&format!("{}/{name}", self.pid), io::Error::from(e)),
        }
    }

    /// The id of the mount the link `name` (`cwd`, `root`, `exe`) leads to, as `fdinfo` gives
    /// it, in one call (see `sys::mount_id_at`). `Denied` where that call cannot tell (`fdinfo`
    /// can).
    pub fn mount_id(&self, name: &str) -> Got<u64> {
        mount_id_at(&self.fd, name, self.pid)
    }

    /// Whether the link `name` leads, while it is on mount `id`, to a character device, asked
    /// on the reader thread (see `sys::file_at`); false when that cannot be told in time, or
    /// when the link leads elsewhere by now.
    pub fn is_device(&self, name: &str, id: u64) -> bool {
        let Ok(at) = self.fd.try_clone() else {
            return false;
        };
        let name = name.to_string();
        let read = slowread::read(Box::new(move || {
            let flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
            let fd = nix::fcntl::openat(&at, name.as_str(), flags, Mode::empty())?;
            let (mode, mnt) = crate::sys::file_at(fd.as_fd())?;
            if mnt.is_some_and(|m| m != id) {
                return Err(io::Error::other("on another mount by now"));
            }
            Ok(vec![u8::from(mode & libc::S_IFMT == libc::S_IFCHR)])
        }));
        read.is_ok_and(|answer| answer == [1])
    }

    /// What this process's (or thread's) own `fdinfo` says of descriptor `fd`: the mount id
    /// it was opened through, and its inode number.
    /// `Gone` when the descriptor is closed (or the process gone).
    pub fn fdinfo(&self, fd: &str) -> Got<FdInfo> {
        match self.read(&format!("fdinfo/{fd}")) {
            Got::Text(text) => Got::Text(FdInfo::of(Some(text))),
            Got::Gone => Got::Gone,
            Got::Denied(why) => Got::Denied(why),
        }
    }

    /// What the link `name` (`cwd`, `root`, `exe`) points to, as seen through a descriptor of
    /// our own: the link has no `fdinfo`, ours has. Opening with O_PATH follows the link without
    /// a lookup or an open of the filesystem's own, so a hung server is never asked (NFS checks
    /// a dentry reached through such a link, `d_weak_revalidate`, but asks its server only for
    /// an open's intent or a forced revalidation, and O_PATH carries neither).
    pub fn link_info(&self, name: &str) -> FdInfo {
        let flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
        let Ok(fd) = nix::fcntl::openat(&self.fd, name, flags, Mode::empty()) else {
            return FdInfo::default();
        };
        let info = FdInfo::of(read(&format!("self/fdinfo/{}", fd.as_raw_fd())).ok());
        drop(fd);
        info
    }

    /// Each open descriptor's number and link text; a descriptor closed meanwhile is left out.
    pub fn fds(&self) -> Got<Vec<Fd>> {
        let (entries, fd) = match listed(&self.fd, "fd") {
            Ok(l) => l,
            Err(e) => return judged(&format!("{}/fd", self.pid), e),
        };
        let mut out = Vec::new();
        for (_, name) in entries {
            let Ok(name) = String::from_utf8(name) else {
                continue;
            };
            match nix::fcntl::readlinkat(&fd, name.as_str()) {
                Ok(t) => {
                    let text = t.into_encoded_bytes();
                    // A path's mount, asked from the same folder (see `Dir::mount_id`).
                    let mount = match text.first() {
                        Some(b'/') => mount_id_at(&fd, &name, self.pid),
                        _ => Got::Denied("not a path".into()),
                    };
                    out.push(Fd {
                        num: name,
                        text,
                        mount,
                    });
                }
                Err(nix::errno::Errno::ENOENT) => {}
                Err(e) => return judged(&format!("{}/fd/{name}", self.pid), io::Error::from(e)),
            }
        }
        Got::Text(out)
    }
}

/// Where the link or path `name` (`42/map_files/RANGE`, or an absolute path) leads: the mount
/// and inode that the `fdinfo` of a descriptor of our own (O_PATH, see `Dir::link_info`) gives,
/// and that descriptor's link text (its name, a newline in it unescaped).
pub fn reached(name: &str) -> io::Result<(FdInfo, Vec<u8>)> {
    let root = files::root().map_err(|e| io::Error::other(e.0))?;
    let flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(root, name, flags, Mode::empty())?;
    let info = FdInfo::of(read(&format!("self/fdinfo/{}", fd.as_raw_fd())).ok());
    let raw = nix::fcntl::readlinkat(root, format!("self/fd/{}", fd.as_raw_fd()).as_str())?;
    Ok((info, raw.into_encoded_bytes()))
}

/// What the `fdinfo` file `name` says.
pub fn fdinfo(name: &str) -> FdInfo {
    FdInfo::of(read(name).ok())
}

/// The mount id an `fdinfo` file gives.
pub fn mnt_id(name: &str) -> Option<u64> {
    mnt_id_in(&read(name).ok()?)
}

/// The fields of an `fdinfo` file the sweep uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct FdInfo {
    /// The mount the file was opened through (0: one of the kernel's own, as for a memfd).
    pub mnt_id: Option<u64>,
    /// The file's inode number.
    pub ino: Option<u64>,
}

impl FdInfo {
    pub(super) fn of(text: Option<Vec<u8>>) -> FdInfo {
        let Some(text) = text else {
            return FdInfo::default();
        };
        let number = |key| field(&text, key)?.first()?.parse().ok();
        FdInfo {
            mnt_id: number("mnt_id:"),
            ino: number("ino:"),
        }
    }
}

fn mnt_id_in(text: &[u8]) -> Option<u64> {
    field(text, "mnt_id:")?.first()?.parse().ok()
}

/// The words after `key` on its line of a `Key: value` file.
fn field<'a>(text: &'a [u8], key: &str) -> Option<Vec<&'a str>> {
    let text = std::str::from_utf8(text).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix(key))?;
    Some(line.split_whitespace().collect())
}

/// The real and saved uid of `pid` (what decides whether we may signal it), and its effective
/// uid, shown as its owner.
pub fn uids(pid: Pid) -> Option<[u32; 3]> {
    uids_in(&read(&format!("{pid}/status")).ok()?)
}

/// The uids in the text of a `status` file (see `uids`).
pub fn uids_in(text: &[u8]) -> Option<[u32; 3]> {
    let ids = field(text, "Uid:")?;
    let n = |i: usize| ids.get(i)?.parse().ok();
    Some([n(0)?, n(1)?, n(2)?])
}

/// The fields of `/proc/PID/stat` the sweep uses.
pub struct Stat {
    pub pid: Pid,
    pub comm: String,
    pub state: char,
    pub ppid: Pid,
    pub kernel_thread: bool,
    pub starttime: u64,
    pub threads: u64,
}

impl Stat {
    /// Alive while any of its threads is: a zombie main thread with others left still works.
    pub fn is_live(&self) -> bool {
        match self.state {
            'Z' => self.threads > 1,
            'X' | 'x' => false,
            _ => true,
        }
    }
}

/// Parses a stat line: comm is what lies between the first `(` and the last `)`.
pub fn stat(bytes: &[u8]) -> Option<Stat> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let open = bytes.iter().position(|b| *b == b'(')?;
    let close = bytes.iter().rposition(|b| *b == b')')?;
    let pid = std::str::from_utf8(bytes.get(..open)?)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let comm = String::from_utf8_lossy(bytes.get(open + 1..close)?).into_owned();
    let rest = std::str::from_utf8(bytes.get(close + 2..)?).ok()?;
    // state ppid pgrp session tty_nr tpgid flags ... starttime is the 20th after ")".
    let f: Vec<&str> = rest.split(' ').take(20).collect();
    Some(Stat {
        pid: Pid::from_raw(pid),
        comm,
        state: f.first()?.chars().next()?,
        ppid: Pid::from_raw(f.get(1)?.parse().ok()?),
        kernel_thread: f.get(6)?.parse::<u64>().ok()? & PF_KTHREAD != 0,
        starttime: f.get(19)?.parse().ok()?,
        threads: f.get(17)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_stat_and_uids_read() {
        let me = crate::sys::own_pid();
        let s = stat(&read("self/stat").ok().unwrap()).unwrap();
        assert_eq!(s.pid, me);
        assert!(!s.kernel_thread);
        assert!(s.starttime > 0);
        let uid = nix::unistd::getuid().as_raw();
        assert_eq!(uids(me).unwrap()[0], uid);
        if let Some(k) = read("2/stat")
            .ok()
            .and_then(|b| stat(&b))
            .filter(|k| k.comm == "kthreadd")
        {
            assert!(k.kernel_thread, "pid 2 is kthreadd");
        }
        assert!(matches!(link("self/cwd"), Got::Text(_)));
        assert!(matches!(link("999999999/cwd"), Got::Gone));
    }
}
