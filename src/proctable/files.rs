//! /proc itself, proven once to be a procfs of vloer-run's own pid namespace and then held open:
//! every later read goes to that mount, whatever a child mounts over /proc or unmounts from it
//! afterwards. Also the files every scan reads, kept open and re-read from their start: our own
//! children list, and the main child's stat, children and command line (its "pin").

use super::ProcError;
use crate::sys::own_pid as me;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::unistd::Pid;
use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

static ROOT: OnceLock<OwnedFd> = OnceLock::new();

/// The proven /proc. Until a proof succeeds, each call tries again: in a container the child
/// itself may mount /proc after vloer-run started.
pub fn root() -> Result<BorrowedFd<'static>, ProcError> {
    if let Some(fd) = ROOT.get() {
        return Ok(fd.as_fd());
    }
    let fd = nix::fcntl::open(
        "/proc",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| ProcError(format!("cannot read /proc: {e}")))?;
    prove(fd.as_fd())?;
    Ok(ROOT.get_or_init(|| fd).as_fd())
}

/// Proves that `dir` is a procfs for our own pid namespace; anything else cannot be trusted.
fn prove(dir: BorrowedFd<'_>) -> Result<(), ProcError> {
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    let fs =
        nix::sys::statfs::fstatfs(dir).map_err(|e| ProcError(format!("cannot read /proc: {e}")))?;
    if fs.filesystem_type().0 as i64 != PROC_SUPER_MAGIC {
        return Err(ProcError(
            "/proc is not a procfs mount, so no process can be proven gone".into(),
        ));
    }
    // `self` resolves to our pid only in a procfs of our own pid namespace.
    let me = me();
    match nix::fcntl::readlinkat(dir, "self") {
        Ok(target) if target.as_encoded_bytes() == me.to_string().as_bytes() => Ok(()),
        Ok(_) => Err(ProcError(format!(
            "/proc does not show vloer-run itself (pid {me}): it belongs to another pid namespace"
        ))),
        Err(e) => Err(ProcError(format!("cannot read /proc/self: {e}"))),
    }
}

/// Why the proven /proc may not list every process: mounted with `hidepid`, it hides other
/// users' processes from a reader without CAP_SYS_PTRACE (root sees them all); `subset=pid` is
/// taken as hiding too, as the contract says. None when it shows everything. Asked once: the
/// proof is made once too.
pub fn hides_processes() -> Option<String> {
    static HIDES: OnceLock<Option<String>> = OnceLock::new();
    let root = root().ok()?;
    HIDES
        .get_or_init(|| {
            let options = mount_options(root).unwrap_or_default();
            options.split(',').find_map(|o| {
                let hides = match o.split_once('=') {
                    Some(("hidepid", v)) => {
                        !matches!(v, "0" | "off") && !nix::unistd::geteuid().is_root()
                    }
                    Some(("subset", "pid")) => true,
                    _ => false,
                };
                hides.then(|| {
                    format!(
                        "/proc is mounted with {o}, so it may hide processes from vloer-run, and \
                         no listing can prove them gone"
                    )
                })
            })
        })
        .clone()
}

/// The superblock options of the mount `dir` lies on, from its mount id in our fdinfo.
fn mount_options(dir: BorrowedFd<'_>) -> Option<String> {
    use std::os::fd::AsRawFd;
    let info = read_file(&format!("self/fdinfo/{}", dir.as_raw_fd())).ok()?;
    let info = String::from_utf8_lossy(&info);
    let id = info
        .lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))?
        .trim()
        .to_string();
    let mounts = read_file("self/mountinfo").ok()?;
    let mounts = String::from_utf8_lossy(&mounts);
    let line = mounts
        .lines()
        .find(|l| l.split(' ').next() == Some(id.as_str()))?;
    // "... - proc proc rw,hidepid=invisible"
    let (_, fs) = line.split_once(" - ")?;
    fs.split(' ').nth(2).map(str::to_string)
}

/// Opens `name` (such as `42/stat`) under the proven /proc.
pub fn open(name: &str) -> io::Result<File> {
    let root = root().map_err(|e| io::Error::other(e.0))?;
    let fd = nix::fcntl::openat(
        root,
        name,
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Reads `name` under /proc whole, until a read returns nothing: a seq_file with records longer
/// than `SHORT` (maps, mountinfo, an io_uring ring's fdinfo) stops a read short by up to one
/// record, so no short read ends it.
pub fn read_file(name: &str) -> io::Result<Vec<u8>> {
    let file = open(name)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match file.read_at(&mut chunk, buf.len() as u64) {
            Ok(0) => return Ok(buf),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// A read that comes back more than this many bytes short of what was asked reached the end of
/// the file: more than any one record of a seq_file (a children entry is at most 8 bytes).
const SHORT: usize = 64;

/// Reads a /proc file whole from its start, so a file kept open shows the process as it is now;
/// only for files whose records are at most `SHORT` bytes (stat, children, cmdline).
/// /proc files report size 0, so a plain read loop beats std's (which would stat the file and
/// grow its buffer from 32 bytes). The files read here (stat, children, cmdline, environ) fill a
/// read up to the end of their text, except that a seq_file (children) stops short by less than
/// one record when the next would not fit: a read shorter by more than `SHORT` bytes ended the
/// file, and the read that would only say so is skipped.
pub fn read_kept(file: &File) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match file.read_at(&mut chunk, buf.len() as u64) {
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if n + SHORT < chunk.len() {
                    return Ok(buf);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The names in the directory `name` under /proc (`.` for /proc itself).
pub fn list(name: &str) -> io::Result<Vec<String>> {
    let root = root().map_err(|e| io::Error::other(e.0))?;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let dir = nix::fcntl::openat(root, name, flags, Mode::empty())?;
    let entries = crate::sys::entries(dir.as_fd())?;
    Ok(entries
        .into_iter()
        .filter_map(|(_, n)| String::from_utf8(n).ok())
        .collect())
}

/// How many descriptors vloer-run has open, the one this count itself uses not included.
pub fn open_descriptors() -> io::Result<usize> {
    Ok(list("self/fd")?.len().saturating_sub(1))
}

/// Our own children list, kept open; None where the kernel has no children files (before 3.5,
/// or without CONFIG_PROC_CHILDREN). A kernel feature does not come and go, so it is asked once.
pub fn own_children() -> Option<&'static File> {
    static OWN: OnceLock<Option<File>> = OnceLock::new();
    if let Some(own) = OWN.get() {
        return own.as_ref();
    }
    let me = me();
    match open(&format!("{me}/task/{me}/children")) {
        Ok(f) => OWN.get_or_init(|| Some(f)).as_ref(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => OWN.get_or_init(|| None).as_ref(),
        // Not proven, or out of descriptors: no answer yet, so nothing is kept.
        Err(_) => None,
    }
}

/// The main child's files, opened while it is our unreaped child, so they can only ever show it.
struct Pin {
    pid: Pid,
    stat: File,
    children: File,
    cmdline: Arc<File>,
}

thread_local! {
    // Only the loop's thread scans; the reader thread gets the command line's file itself.
    static PIN: RefCell<Option<Pin>> = const { RefCell::new(None) };
}

/// Keeps the main child's files open; `pid` must be our child, not yet reaped. Without a proven
/// /proc yet, or on any error, nothing is kept and every read goes by path, as for the others.
pub fn pin(pid: Pid) {
    let files = (|| -> io::Result<Pin> {
        Ok(Pin {
            pid,
            stat: open(&format!("{pid}/stat"))?,
            children: open(&format!("{pid}/task/{pid}/children"))?,
            cmdline: Arc::new(open(&format!("{pid}/cmdline"))?),
        })
    })();
    PIN.with(|p| *p.borrow_mut() = files.ok());
}

/// Lets go of `pid`'s files, as it is reaped: from then on its pid may name another process. (A
/// pin left behind answers ESRCH for `stat` and `cmdline`, but an empty list for `children`.)
pub fn unpin(pid: Pid) {
    PIN.with(|p| {
        let mut p = p.borrow_mut();
        if p.as_ref().is_some_and(|pin| pin.pid == pid) {
            *p = None;
        }
    });
}

/// Which of a process's files the loop reads (its command line goes to the reader thread, see
/// `cmdline_reader`).
#[derive(Clone, Copy)]
pub enum ProcFile {
    Stat,
    Children,
}

impl ProcFile {
    /// Its name under /proc, for `pid`'s main thread.
    pub fn name(self, pid: Pid) -> String {
        match self {
            ProcFile::Stat => format!("{pid}/stat"),
            ProcFile::Children => format!("{pid}/task/{pid}/children"),
        }
    }
}

/// Reads `which` of `pid` whole: through its pin when it has one, else by path.
pub fn read_of(pid: Pid, which: ProcFile) -> io::Result<Vec<u8>> {
    read_pinned(pid, which).unwrap_or_else(|| read_file(&which.name(pid)))
}

/// A read through a pin, unless it shows the process reaped (ESRCH): the pid may name another
/// process by now, which only a read by path finds.
fn unless_reaped(got: io::Result<Vec<u8>>) -> Option<io::Result<Vec<u8>>> {
    match got {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => None,
        got => Some(got),
    }
}

/// Reads a file of `pid` through its pin; None when `pid` is not pinned, or its pin shows it
/// reaped (and the pin is let go).
fn read_pinned(pid: Pid, which: ProcFile) -> Option<io::Result<Vec<u8>>> {
    PIN.with(|p| {
        let mut p = p.borrow_mut();
        let pin = p.as_ref().filter(|pin| pin.pid == pid)?;
        let got = unless_reaped(match which {
            ProcFile::Stat => read_kept(&pin.stat),
            ProcFile::Children => read_kept(&pin.children),
        });
        if got.is_none() {
            *p = None;
        }
        got
    })
}

/// The read of `pid`'s command line, for the reader thread: through the pin's file when it has
/// one (the pin itself lives on the loop's thread), else by path.
pub fn cmdline_reader(pid: Pid) -> crate::slowread::Read {
    let kept = PIN.with(|p| {
        let p = p.borrow();
        p.as_ref()
            .filter(|pin| pin.pid == pid)
            .map(|pin| Arc::clone(&pin.cmdline))
    });
    Box::new(move || {
        kept.and_then(|file| unless_reaped(read_kept(&file)))
            .unwrap_or_else(|| read_file(&format!("{pid}/cmdline")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_shows_the_child_until_it_is_reaped_then_lets_go() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("sleep");
        let pid = Pid::from_raw(child.id() as i32);
        pin(pid);
        let stat = read_pinned(pid, ProcFile::Stat).expect("pinned").unwrap();
        assert!(String::from_utf8_lossy(&stat).starts_with(&format!("{pid} (sleep) ")));
        assert!(pinned(pid));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        // Exited, not yet reaped (WNOWAIT): the pin still shows it, as a zombie.
        use nix::sys::wait::{waitid, Id, WaitPidFlag};
        waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT).unwrap();
        let zombie = super::super::read(pid).unwrap().expect("not reaped yet");
        assert_eq!(zombie.state, "Z");
        child.wait().unwrap();
        // A reaped process's children list reads empty, not ESRCH: only the reaper can say it is
        // no longer the process pinned, so it unpins (see supervisor/reap.rs).
        assert!(read_pinned(pid, ProcFile::Children).is_some_and(|c| c.unwrap().is_empty()));
        // Reaped: the pin answers ESRCH, lets go, and the read goes by path.
        assert!(read_pinned(pid, ProcFile::Stat).is_none());
        assert!(!pinned(pid), "the pin was let go");
        let now = super::super::read(pid).unwrap();
        assert!(now.map_or(true, |p| p.starttime != zombie.starttime));
        // Unpinned at once, as the reaper does.
        let me = Pid::from_raw(std::process::id() as i32);
        pin(me);
        assert!(pinned(me));
        unpin(me);
        assert!(!pinned(me));
    }

    /// Ends and reaps, by pid, the processes a test started, even when it fails on the way.
    struct Started(Vec<std::process::Child>);

    impl Drop for Started {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    #[test]
    fn a_children_list_or_command_line_longer_than_one_read_is_read_whole() {
        use std::process::{Command, Stdio};
        // A children list is a seq_file, which fills a read only up to the last entry that fits:
        // several reads of nearly 4096 bytes, none of them the end.
        let mut started = Started(Vec::new());
        for _ in 0..1000 {
            started
                .0
                .push(Command::new("sleep").arg("60").spawn().expect("sleep"));
        }
        let mut want: Vec<u32> = started.0.iter().map(|k| k.id()).collect();
        let tid = nix::unistd::gettid();
        let got = read_file(&format!("{}/task/{tid}/children", me())).expect("our children");
        // A command line is read up to its end: 40 arguments of 200 bytes.
        let arg = "x".repeat(200);
        let sh = Command::new("sh")
            .args(["-c", "echo; read x", "sh"])
            .args(std::iter::repeat(&arg).take(40))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh");
        started.0.push(sh);
        let sh = started.0.last_mut().unwrap();
        // Its line says it runs: its command line is in place.
        let mut line = [0u8; 1];
        std::io::Read::read_exact(sh.stdout.as_mut().unwrap(), &mut line).unwrap();
        let cmdline = read_file(&format!("{}/cmdline", sh.id())).expect("its command line");
        drop(started);

        assert!(got.len() > 4096, "{} bytes", got.len());
        let mut listed: Vec<u32> = String::from_utf8(got)
            .unwrap()
            .split_ascii_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        listed.sort_unstable();
        want.sort_unstable();
        assert_eq!(listed, want);
        let mut expected = b"sh\0-c\0echo; read x\0sh\0".to_vec();
        for _ in 0..40 {
            expected.extend_from_slice(arg.as_bytes());
            expected.push(0);
        }
        assert!(
            cmdline == expected,
            "read {} bytes of a {}-byte command line",
            cmdline.len(),
            expected.len()
        );
    }

    fn pinned(pid: Pid) -> bool {
        PIN.with(|p| p.borrow().as_ref().is_some_and(|pin| pin.pid == pid))
    }
}
