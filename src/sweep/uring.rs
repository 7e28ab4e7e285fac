//! Files registered with an io_uring ring (its "fixed files"). A process may open a file,
//! register it with a ring, close its own descriptor and go on writing through the ring:
//! /proc/PID/fd then shows only the ring (`anon_inode:[io_uring]`), and the ring's `fdinfo` is
//! the one place that lists the file.
//!
//! What that `fdinfo` shows has changed over the kernel's versions:
//! - from 5.6, a line `UserFiles:\tN`, then one line per slot, `%5u: NAME` or `%5u: <none>`,
//!   where NAME is only the file's own name (not its path, and not even that for a long one);
//! - from about 6.14, one line per occupied slot only, `%5u: PATH`, the path written as a
//!   /proc link's text (` (deleted)` included) with space, tab, newline and backslash as `\ooo`.
//!
//! Reading it never waits on the ring's lock: the kernel only tries to take it. Where it could
//! not, older kernels print `UserFiles:` without the slots, newer ones leave out everything of
//! the ring. Either way the list is missing, not empty: the read is tried again at once a few
//! times, and when it never shows the list the process counts as not looked at in full.

use super::mounts::{self, Link};
use super::proc::{self, Got};
use nix::unistd::Pid;
use std::os::unix::ffi::OsStrExt;

/// The text of a ring's descriptor link.
pub fn is_ring(link: &[u8]) -> bool {
    link == b"anon_inode:[io_uring]"
}

/// Reads of a ring whose lock was busy, one right after another: a scan never sleeps (vloer-run
/// waits only in its event loop), so the lock holder is only let run (`yield_now`) in between.
/// A ring busy through all of them leaves the process unverified, which makes the verdict false
/// for one started during the run, never true. (Asking the stop for another scan instead would
/// let one ring kept busy anywhere on the machine hold every verdict false.)
const TRIES: u32 = 8;

/// The paths of the files registered with the ring at descriptor `fd` of `dir` (a process's or a
/// thread's folder, of process `pid`). Their mount is not shown: they are judged by path alone.
pub fn files(dir: &proc::Dir, pid: Pid, fd: &str) -> Got<Vec<Link>> {
    let name = format!("fdinfo/{fd}");
    for i in 0..TRIES {
        if i > 0 {
            std::thread::yield_now();
        }
        let text = match dir.read(&name) {
            Got::Text(t) => t,
            Got::Gone => return Got::Gone,
            Got::Denied(why) => return Got::Denied(why),
        };
        match listed(&text) {
            Listed::Paths(paths) => return Got::Text(paths),
            Listed::Names => {
                return Got::Denied(format!(
                    "/proc/{pid}/fdinfo/{fd}: the files registered with an io_uring ring are \
                     not listed by path (an older kernel names them without one)"
                ))
            }
            Listed::Missing => {}
        }
    }
    withheld(pid, fd, kernel_lists_rings())
}

/// Why a list withheld through every read is not known: a busy ring on a kernel that lists them
/// (from 5.6), or one that is never listed on an older kernel.
fn withheld(pid: Pid, fd: &str, lists: bool) -> Got<Vec<Link>> {
    Got::Denied(if lists {
        format!(
            "/proc/{pid}/fdinfo/{fd}: an io_uring ring stayed busy through {TRIES} reads of the \
             files registered with it"
        )
    } else {
        format!(
            "/proc/{pid}/fdinfo/{fd}: this kernel does not list the files registered with an \
             io_uring ring (Linux 5.6 and later do)"
        )
    })
}

/// Whether this kernel lists a ring's registered files in its `fdinfo`: from Linux 5.6. A release
/// that cannot be read is taken to (a withheld list then asks for another scan, which is slower,
/// never less true).
fn kernel_lists_rings() -> bool {
    static LISTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LISTS.get_or_init(|| {
        proc::read("sys/kernel/osrelease")
            .ok()
            .and_then(|r| release_at_least(r.trim_ascii(), (5, 6)))
            .unwrap_or(true)
    })
}

/// Whether a kernel release (`6.1.0-18-amd64`) is at least `(major, minor)`.
fn release_at_least(release: &[u8], (major, minor): (u32, u32)) -> Option<bool> {
    let text = std::str::from_utf8(release).ok()?;
    let mut parts = text.split(['.', '-']);
    let have_major: u32 = parts.next()?.parse().ok()?;
    let have_minor: u32 = parts.next()?.parse().ok()?;
    Some((have_major, have_minor) >= (major, minor))
}

#[derive(Debug, PartialEq)]
enum Listed {
    /// Every registered file's path (none when no slot is occupied).
    Paths(Vec<Link>),
    /// Slots named by something other than a path, or a list not understood: which folder
    /// the files lie in is not known.
    Names,
    /// The list was not printed.
    Missing,
}

fn listed(text: &[u8]) -> Listed {
    let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    // Slot lines of other lists (`SQEs:`, `CQEs:`) come before it: only those right after
    // `UserFiles:` are files.
    let Some(at) = lines.iter().position(|l| l.starts_with(b"UserFiles:")) else {
        return Listed::Missing;
    };
    let Some(count) = number(&lines[at]["UserFiles:".len()..]) else {
        return Listed::Missing;
    };
    let slots: Vec<&[u8]> = lines[at + 1..].iter().map_while(|l| slot(l)).collect();
    // `UserBufs:` follows the last slot in every version: anything else, or more slots than
    // files, is a list this reading does not understand.
    let after = lines.get(at + 1 + slots.len());
    let Some(bufs) = after.and_then(|l| l.strip_prefix(b"UserBufs:")) else {
        return Listed::Names;
    };
    if slots.len() as u64 > count {
        return Listed::Names;
    }
    // The buffers' list is printed under the same lock: when it is there, an empty list of
    // files is empty indeed (every slot of a sparse table is free).
    let locked = number(bufs).is_some_and(|n| n > 0)
        && lines
            .get(at + 2 + slots.len())
            .is_some_and(|l| slot(l).is_some());
    if count > 0 && slots.is_empty() && !locked {
        return Listed::Missing;
    }
    let mut paths = Vec::new();
    for text in slots {
        if text.first() == Some(&b'/') {
            let path = mounts::unescape(text);
            if let Some(p) = mounts::link_path(path.as_os_str().as_bytes()) {
                paths.push(p);
            }
        } else if !(text == b"<none>" || is_pseudo(text)) {
            return Listed::Names;
        }
    }
    Listed::Paths(paths)
}

/// A file with no path, as a link names it (`socket:[42]`, `pipe:[7]`, `anon_inode:[eventfd]`).
/// Older kernels never print this shape for a file (they print `TCP`, `[eventfd]`, or nothing).
fn is_pseudo(text: &[u8]) -> bool {
    if text.starts_with(b"anon_inode:") {
        return true;
    }
    let Some(open) = text.iter().position(|b| *b == b'[') else {
        return false;
    };
    let kind = &text[..open];
    kind.len() > 1
        && kind.ends_with(b":")
        && kind[..kind.len() - 1]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
        && text.ends_with(b"]")
}

fn number(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

/// The text of a `%5u: TEXT` line.
fn slot(line: &[u8]) -> Option<&[u8]> {
    let colon = line.iter().position(|b| *b == b':')?;
    let index = line[..colon].trim_ascii_start();
    if index.is_empty() || !index.iter().all(u8::is_ascii_digit) {
        return None;
    }
    line[colon + 1..].strip_prefix(b" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t1057\nSqMask:\t0x3\n\
                        SQEs:\t1\n    0: opcode:WRITE, fd:0, flags:1, off:0, addr:0x0, \
                        rw_flags:0x0, buf_index:0 user_data:0\nCQEs:\t0\nSqThread:\t-1\n";

    fn of(files: &str) -> Listed {
        listed(format!("{HEAD}{files}PollList:\nCqOverflowList:\n").as_bytes())
    }

    fn paths(list: &[&str]) -> Listed {
        let link = |t: &&str| mounts::link_path(t.as_bytes()).expect("a path");
        Listed::Paths(list.iter().map(link).collect())
    }

    #[test]
    fn a_list_withheld_through_every_read_is_never_an_answer() {
        let pid = Pid::from_raw(7);
        let why = |lists| match withheld(pid, "3", lists) {
            Got::Denied(why) => why,
            _ => panic!("a withheld list is never an answer"),
        };
        assert!(why(true).contains("stayed busy"));
        assert!(why(false).contains("does not list"));
        assert_eq!(release_at_least(b"6.1.0-18-amd64", (5, 6)), Some(true));
        assert_eq!(release_at_least(b"5.6.0", (5, 6)), Some(true));
        assert_eq!(release_at_least(b"5.5.19-rt", (5, 6)), Some(false));
        assert_eq!(release_at_least(b"4.19.0", (5, 6)), Some(false));
        assert_eq!(release_at_least(b"weird", (5, 6)), None);
    }

    #[test]
    fn paths_are_read_unescaped_and_deleted_is_kept() {
        let files = "UserFiles:\t4\n    0: /srv/a\\040b\n    2: /srv/gone\\040(deleted)\n\
                     \x20   3: socket:[991]\nUserBufs:\t0\n";
        assert_eq!(of(files), paths(&["/srv/a b", "/srv/gone (deleted)"]));
        assert_eq!(of("UserFiles:\t0\nUserBufs:\t0\n"), paths(&[]));
    }

    #[test]
    fn a_list_the_kernel_left_out_is_missing_not_empty() {
        // Older kernels: `UserFiles:` without its slots.
        assert_eq!(of("UserFiles:\t2\nUserBufs:\t0\n"), Listed::Missing);
        // Newer ones print nothing of the ring at all.
        assert_eq!(
            listed(b"pos:\t0\nflags:\t02\nmnt_id:\t16\n"),
            Listed::Missing
        );
        // The buffers' list shows the lock was taken: the sparse table is empty indeed.
        let sparse = "UserFiles:\t8\nUserBufs:\t1\n    0: 0x7f00/4096\n";
        assert_eq!(of(sparse), paths(&[]));
        // Buffers counted but not listed prove nothing.
        assert_eq!(of("UserFiles:\t8\nUserBufs:\t1\n"), Listed::Missing);
    }

    #[test]
    fn names_without_paths_are_not_judged() {
        let old = "UserFiles:\t3\n    0: data.log\n    1: <none>\n    2: TCP\nUserBufs:\t0\n";
        assert_eq!(of(old), Listed::Names);
        let empty = "UserFiles:\t2\n    0: <none>\n    1: <none>\nUserBufs:\t0\n";
        assert_eq!(of(empty), paths(&[]));
        // A name with a newline in it, unescaped as older kernels print it, ends the list early.
        let broken = "UserFiles:\t2\n    0: a\nb\n    1: <none>\nUserBufs:\t0\n";
        assert_eq!(of(broken), Listed::Names);
        assert_eq!(
            of("UserFiles:\t1\n    0: /a\n    1: /b\nUserBufs:\t0\n"),
            Listed::Names
        );
    }

    #[test]
    fn pseudo_files_are_told_from_names() {
        assert!(is_pseudo(b"socket:[12]"));
        assert!(is_pseudo(b"pipe:[7]"));
        assert!(is_pseudo(b"anon_inode:[eventfd]"));
        assert!(!is_pseudo(b"[eventfd]"));
        assert!(!is_pseudo(b"notes:[draft"));
        assert!(!is_pseudo(b"my notes:[1]"));
    }
}
