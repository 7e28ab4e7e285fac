//! Shared test machinery: run vloer-run with a hard time limit, parse its verdict, and end every
//! process a test started, by pid.
#![allow(dead_code)]

use std::collections::HashSet;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// A wrapper that runs what follows as uid and gid 65534, with no supplementary groups.
pub const AS_NOBODY: [&str; 6] = [
    "setpriv",
    "--reuid",
    "65534",
    "--regid",
    "65534",
    "--clear-groups",
];

/// The binary under test: the one cargo built for these tests, or `VLOER_TEST_BIN`, so that the
/// same tests can run against the static binary a user deploys (.ci/run does).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    reset_inherited_ignores();
    BIN.get_or_init(|| match std::env::var("VLOER_TEST_BIN") {
        Ok(path) if !path.is_empty() => std::fs::canonicalize(&path)
            .unwrap_or_else(|e| panic!("VLOER_TEST_BIN={path}: {e}"))
            .to_string_lossy()
            .into_owned(),
        _ => env!("CARGO_BIN_EXE_vloer-run").to_string(),
    })
}

/// A test run started with `nohup`, or as a background job of a script, inherits SIGHUP, SIGINT
/// or SIGQUIT ignored, and so would every vloer-run it starts, which rightly neither forwards nor
/// stops on a signal ignored at start. The tests are about vloer-run, not about how they were
/// launched: the test process puts such signals back to default once, before it starts anything.
/// (SIGPIPE is Rust's own, and std resets it in every child.)
fn reset_inherited_ignores() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in 1..libc::SIGRTMIN() {
            if matches!(sig, libc::SIGKILL | libc::SIGSTOP | libc::SIGPIPE) || sig >= 32 {
                continue;
            }
            let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
            // SAFETY: a query into zeroed, writable memory, then SIG_DFL (no handler) for a
            // signal that was ignored; the test process installs no handlers of its own.
            unsafe {
                if libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) == 0
                    && old.assume_init().sa_sigaction == libc::SIG_IGN
                {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
        }
    });
}

/// The misbehaving-child helper (tests/helpers/child.rs), an example target: `cargo test` builds
/// it into `examples/` beside the `deps/` folder this test binary runs from.
pub fn helper() -> &'static str {
    reset_inherited_ignores();
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test binary runs from target/<profile>/deps");
        let helper = profile_dir.join("examples").join("vloer-test-child");
        assert!(
            helper.exists(),
            "{} is missing: plain `cargo test` builds it, or `cargo build --examples` \
             before `cargo test --test integration ...`",
            helper.display()
        );
        helper.to_str().expect("a UTF-8 target path").to_string()
    })
}

/// The binary under test, copied where any user can run it: for the tests that run it as
/// another uid (see `reachable`).
pub fn bin_for_others() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| reachable(bin(), "vloer-run"))
}

/// The helper program, copied where any user can run it (see `reachable`).
pub fn helper_for_others() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| reachable(helper(), "vloer-test-child"))
}

/// `program` copied into a folder every user can enter, named after this test process. The clone,
/// and so `target/`, may sit under a folder only its owner can enter (root's home, any
/// `mktemp -d`), where another uid cannot run what it holds. The folder is in /tmp, not in
/// TMPDIR, which may be private too; folders of test processes that are gone are removed here,
/// since a test process has no end of its own to clean up at.
fn reachable(program: &str, name: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    const PREFIX: &str = "vloer-run-tests.";
    let dir = Path::new("/tmp").join(format!("{PREFIX}{}", std::process::id()));
    if let Ok(entries) = std::fs::read_dir("/tmp") {
        for entry in entries.flatten() {
            let file = entry.file_name();
            let Some(pid) = file.to_str().and_then(|f| f.strip_prefix(PREFIX)) else {
                continue;
            };
            if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let open = std::fs::Permissions::from_mode(0o755);
    std::fs::set_permissions(&dir, open.clone()).expect("chmod 755 the copies' folder");
    let copy = dir.join(name);
    // Copied to a new name and renamed: a copy over a file that a parallel test runs fails with
    // ETXTBSY, and a half-written copy must never be run.
    let partial = dir.join(format!("{name}.partial"));
    std::fs::copy(program, &partial)
        .unwrap_or_else(|e| panic!("copying {program} to {}: {e}", partial.display()));
    std::fs::set_permissions(&partial, open).expect("chmod 755 the copy");
    std::fs::rename(&partial, &copy).expect("renaming the copy into place");
    copy.to_str().expect("a UTF-8 /tmp path").to_string()
}

/// A generous bound for anything a test waits on; these machines are noisy.
pub const LIMIT: Duration = Duration::from_secs(60);

/// A mount a test made, detached (`umount -l`) on drop.
pub struct Mounted(pub PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Tests that read every process on the machine (the folder sweep) and tests that fork without
/// pause take turns: a scan that keeps finding new processes proves nothing, by design, so a
/// fork storm in another test would make a sweep test's verdict false for a reason of its own.
static MACHINE: RwLock<()> = RwLock::new(());

/// Held by a test whose verdict needs a scan of every process to settle; many may hold it at once.
pub fn quiet() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(PoisonError::into_inner)
}

/// Held by a test that forks without pause (or makes thousands of processes at once) while it
/// runs: no `quiet` test runs meanwhile. A test holds one of the two, never both.
pub fn storm() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(PoisonError::into_inner)
}

/// Held by a test that leaves a process holding a file on a mount detached on the shared
/// temporary filesystem: no other scan can tell where such a file lies (it may be in that
/// scan's folder), so a `quiet` test would rightly find its verdict false meanwhile.
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(PoisonError::into_inner)
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Prints why a test is skipped; returns true so callers can `if skip(...) { return; }`.
/// Under `VLOER_TESTS_NO_SKIP=1` (what `.ci/run` sets where it runs as root, where every test
/// can run) a skip is a failure, so that a missing tool or mount cannot hide a regression.
pub fn skip(reason: &str) -> bool {
    if std::env::var_os("VLOER_TESTS_NO_SKIP").is_some_and(|v| v == "1") {
        panic!("a test would be skipped where every test must run: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
    true
}

/// Whether io_uring is refused to the tests (a kernel built without it, the
/// `kernel.io_uring_disabled` sysctl, a container's seccomp profile); then prints why a test of
/// it does not run. Not a `skip`, which `VLOER_TESTS_NO_SKIP` makes a failure: that is for a
/// tool or mount missing from the test machine, which root can add, while this is a setting of
/// the kernel or of the container the tests run in, and no ring can be made to test with. Only
/// ENOSYS and EPERM count as refused; any other failure of the probe fails the test.
pub fn io_uring_refused() -> bool {
    let out = std::process::Command::new(helper())
        .arg("uring-check")
        .stdin(Stdio::null())
        .output()
        .expect("the helper");
    match out.status.code() {
        Some(0) => false,
        Some(3) => {
            let why = String::from_utf8_lossy(&out.stdout);
            let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled");
            let sysctl = sysctl.map_or("no such sysctl".into(), |s| s.trim().to_string());
            eprintln!(
                "SKIPPED: io_uring is refused here ({}; kernel.io_uring_disabled: {sysctl})",
                why.trim()
            );
            true
        }
        _ => panic!(
            "the io_uring probe failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Whether `argv` followed by `true` runs and succeeds here (a namespace, a mount, a tool); when
/// not, prints the skip reason, naming `what`, and returns false.
pub fn works_here(argv: &[&str], what: &str) -> bool {
    let Some((program, args)) = argv.split_first() else {
        return false;
    };
    match std::process::Command::new(program)
        .args(args)
        .arg("true")
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => true,
        Ok(o) => !skip(&format!(
            "{what} does not work here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => !skip(&format!("cannot run {program}: {e}")),
    }
}

/// The result of one finished run.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Finished {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The signal the process ended by (vloer-run ends by the child's, as the bare command would).
    pub fn signal(&self) -> Option<i32> {
        std::os::unix::process::ExitStatusExt::signal(&self.status)
    }

    /// The verdict line from stderr (the default sink).
    pub fn verdict(&self) -> serde_json::Value {
        parse_verdict(&self.stderr).unwrap_or_else(|| panic!("no verdict on stderr:\n{self}"))
    }
}

impl std::fmt::Display for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Finds the last line of `text` that is a JSON object with `"schema":1`.
pub fn parse_verdict(text: &str) -> Option<serde_json::Value> {
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .find(|v| v.get("schema").is_some())
}

/// A started vloer-run (or other process) that is SIGKILLed with its whole tree if still alive
/// when dropped.
pub struct Running {
    pub child: Child,
    pub started: Instant,
    pub guard: TreeGuard,
}

impl Running {
    /// Takes a spawned process in charge: it and its whole tree are ended on drop.
    pub fn of(child: Child) -> Running {
        let pid = child.id() as i32;
        Running {
            child,
            started: Instant::now(),
            guard: TreeGuard {
                roots: vec![pid],
                extra: HashSet::new(),
            },
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits (bounded by LIMIT) and collects the output.
    ///
    /// The pipes are drained without blocking, while waiting and once more after the exit: a
    /// process the run left behind on purpose (a daemon, a survivor) may hold them open for
    /// much longer, and must not make the test wait for it.
    pub fn finish(mut self) -> Finished {
        let deadline = self.started + LIMIT;
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut stdout = self.child.stdout.take();
        let mut stderr = self.child.stderr.take();
        for fd in [
            stdout.as_ref().map(|p| p.as_fd()),
            stderr.as_ref().map(|p| p.as_fd()),
        ]
        .into_iter()
        .flatten()
        {
            set_nonblocking(fd);
        }
        let status = loop {
            drain(&mut stdout, &mut out);
            drain(&mut stderr, &mut err);
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            if Instant::now() > deadline {
                self.guard.kill_all();
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "vloer-run did not finish within {LIMIT:?}\n--- stdout\n{}\n--- stderr\n{}",
                    String::from_utf8_lossy(&out),
                    String::from_utf8_lossy(&err)
                );
            }
            // Poll the exit with a short sleep: std offers no pidfd wait on stable.
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.started.elapsed();
        // Everything vloer-run wrote is in the pipes now that it has exited (up to 64 MiB each:
        // a process it left behind may still be writing).
        (0..64).take_while(|_| drain(&mut stdout, &mut out)).count();
        (0..64).take_while(|_| drain(&mut stderr, &mut err)).count();
        Finished {
            status,
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            elapsed,
        }
    }

    /// Sends `sig` to vloer-run (it is our unreaped child, so its pid cannot be recycled).
    pub fn signal(&self, sig: i32) {
        kill_pid(self.pid(), sig);
    }

    /// Sends `sig` to vloer-run, then waits for it as `finish` does.
    pub fn finish_after(self, sig: i32) -> Finished {
        self.signal(sig);
        self.finish()
    }
}

fn set_nonblocking(fd: std::os::fd::BorrowedFd<'_>) {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = fcntl(fd, FcntlArg::F_GETFL).expect("F_GETFL");
    fcntl(
        fd,
        FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )
    .expect("F_SETFL");
}

/// Reads what a non-blocking pipe holds right now, up to 1 MiB; drops it at end of file. True
/// when it stopped at that bound, so that more may be waiting.
fn drain<R: Read>(pipe: &mut Option<R>, into: &mut Vec<u8>) -> bool {
    let Some(p) = pipe else { return false };
    let mut buf = [0u8; 8192];
    // Bounded, so that a writer as fast as this reader cannot keep the caller from its deadline.
    for _ in 0..128 {
        match p.read(&mut buf) {
            Ok(0) => {
                *pipe = None;
                return false;
            }
            Ok(n) => into.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    true
}

impl Drop for Running {
    fn drop(&mut self) {
        self.guard.kill_all();
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Learns the pids a test must end (by walking /proc from a root pid) and SIGKILLs them on drop.
#[derive(Default)]
pub struct TreeGuard {
    pub roots: Vec<i32>,
    pub extra: HashSet<i32>,
}

impl TreeGuard {
    /// Adds a pid to end at drop time (for processes that left the tree on purpose).
    pub fn adopt(&mut self, pid: i32) {
        self.extra.insert(pid);
    }

    pub fn kill_all(&mut self) {
        let mut pids: Vec<i32> = self.extra.iter().copied().collect();
        for r in &self.roots {
            pids.extend(descendants(*r));
        }
        for pid in pids {
            kill_pid(pid, libc::SIGKILL);
        }
    }
}

pub fn kill_pid(pid: i32, sig: i32) {
    // Only pids learned from this test's own tree (or adopted by it) ever get here.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::try_from(sig).ok(),
    );
}

/// Every live descendant of `root` (not `root` itself), read from /proc.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut queue = vec![root];
    let mut seen = HashSet::new();
    while let Some(pid) = queue.pop() {
        if !seen.insert(pid) {
            continue;
        }
        for c in children(pid) {
            out.push(c);
            queue.push(c);
        }
    }
    out
}

/// Whether `pid` runs the program `comm` (its /proc comm, so after its exec).
pub fn runs(pid: i32, comm: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
}

/// The children of `pid`, from every one of its threads (zombies included).
pub fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(s) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|t| t.parse::<i32>().ok()));
        }
    }
    out
}

/// Whether `pid` is alive (exists and is not a zombie).
pub fn alive(pid: i32) -> bool {
    state(pid).is_some_and(|s| !matches!(s, 'Z' | 'X'))
}

/// The one-letter state of `pid` (`?` when it cannot be read), or None when it is gone.
pub fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(
        stat.rsplit_once(')')
            .and_then(|(_, r)| r.trim_start().chars().next())
            .unwrap_or('?'),
    )
}

/// Waits until `cond` holds, checking every few milliseconds, for at most LIMIT.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for a file to exist and hold a non-empty first line, and returns that line.
pub fn wait_for_line(path: &Path) -> String {
    let mut line = String::new();
    wait_until(&format!("{}", path.display()), || {
        line = std::fs::read_to_string(path).unwrap_or_default();
        line.ends_with('\n')
    });
    line.trim().to_string()
}

/// A builder for one vloer-run invocation.
pub struct Run {
    pub cmd: Command,
}

impl Run {
    pub fn new<I, S>(args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(bin());
        cmd.args(args);
        Run::of(cmd)
    }

    /// Any command (a wrapper, a shell that starts vloer-run, a script), run as vloer-run itself
    /// is: stdin closed, output captured, bounded in time and its tree ended on drop.
    pub fn of(mut cmd: Command) -> Run {
        reset_inherited_ignores();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A test's environment must not configure the run by accident.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("VLOER_") {
                cmd.env_remove(k);
            }
        }
        Run { cmd }
    }

    /// `vloer-run FLAGS -- vloer-test-child ARGS...`.
    pub fn helper(flags: &[&str], args: &[&str]) -> Run {
        Run::new(helper_argv(flags, args))
    }

    pub fn env(mut self, k: &str, v: &str) -> Run {
        self.cmd.env(k, v);
        self
    }

    pub fn start(mut self) -> Running {
        // Timed from before the spawn: a test thread that resumes late after it must not make
        // vloer-run's own timers look early (a 300 ms timeout measured as 298 ms).
        let before = Instant::now();
        let mut running = Running::of(self.cmd.spawn().expect("spawning vloer-run"));
        running.started = before;
        running
    }

    pub fn finish(self) -> Finished {
        self.start().finish()
    }

    /// Starts the run and waits until the helper has published its pids in `pidfile`; returns
    /// them, the helper's own first. Should the helper never get there, the run is ended.
    pub fn start_until_ready(self, pidfile: &Path) -> (Running, Vec<i32>) {
        let run = self.start();
        let pids = wait_for_pids(pidfile);
        (run, pids)
    }
}

/// Writes `text` to `path` with permission bits `mode` (a script: 0o755).
pub fn write_file(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("writing a test file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A fresh temporary directory, removed on drop.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub fn path_str(p: &Path) -> String {
    p.to_str().expect("utf-8 temp path").to_string()
}

pub fn tmp_path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

/// The arguments of `vloer-run FLAGS -- vloer-test-child ARGS...`, for `Run::new` or `Run::via`.
pub fn helper_argv(flags: &[&str], args: &[&str]) -> Vec<String> {
    flags
        .iter()
        .copied()
        .chain(["--", helper()])
        .chain(args.iter().copied())
        .map(String::from)
        .collect()
}

impl Run {
    /// vloer-run started through a wrapper (`setpriv ...`, `unshare ...`): the wrapper execs it
    /// or runs it as its child, so the wrapper's pid is the root the guard walks from. With no
    /// wrapper, vloer-run is started directly.
    pub fn via<I, S>(wrapper: &[&str], args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let Some((program, rest)) = wrapper.split_first() else {
            return Run::new(args);
        };
        let mut cmd = Command::new(program);
        if *program != "setpriv" {
            cmd.args(rest).arg(bin()).args(args);
            return Run::of(cmd);
        }
        // Another uid may reach neither the binary where it was built nor the test's own working
        // folder (which an exec, say, would start in): both are in the clone.
        let vloer_run = bin_for_others();
        let reachable_folder = Path::new(vloer_run).parent().expect("the copies' folder");
        cmd.args(rest)
            .arg(vloer_run)
            .args(args)
            .current_dir(reachable_folder);
        Run::of(cmd)
    }

    pub fn current_dir(mut self, dir: &Path) -> Run {
        self.cmd.current_dir(dir);
        self
    }
}

impl Finished {
    /// The verdict line from stdout (`--verdict -`).
    pub fn stdout_verdict(&self) -> serde_json::Value {
        parse_verdict(&self.stdout).unwrap_or_else(|| panic!("no verdict on stdout:\n{self}"))
    }

    /// vloer-run's own lines on stderr, without the `vloer-run: ` prefix and a -v line's time
    /// (`+0.512s `); the child's lines and the verdict left out.
    pub fn own_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter_map(|l| l.strip_prefix("vloer-run: "))
            .map(|l| verbose_time(l).map_or(l, |(_, rest)| rest))
            .collect()
    }

    /// Lines on stderr that are not the verdict.
    pub fn messages(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| parse_verdict(l).is_none())
            .collect()
    }
}

/// Whether the verdict `v` lists `pid` among the sweep's holders, holding by `what` (`cwd`,
/// `fd`...) when given.
pub fn sweep_lists(v: &serde_json::Value, pid: i32, what: Option<&str>) -> bool {
    let holders = v["sweep"]["holders"].as_array();
    holders.is_some_and(|hs| {
        hs.iter().any(|h| {
            let by = |w: &str| {
                h["what"]
                    .as_array()
                    .is_some_and(|ws| ws.contains(&w.into()))
            };
            h["pid"] == pid && what.map_or(true, by)
        })
    })
}

/// A -v line's time since the run began (`+1.503s `), and the rest of the line.
pub fn verbose_time(line: &str) -> Option<(Duration, &str)> {
    let (time, rest) = line.strip_prefix('+')?.split_once("s ")?;
    let (secs, ms) = time.split_once('.')?;
    let ok = ms.len() == 3
        && [secs, ms]
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_digit()));
    ok.then(|| {
        let t = Duration::from_secs(secs.parse().ok()?) + Duration::from_millis(ms.parse().ok()?);
        Some((t, rest))
    })?
}

/// Waits for a helper's published pid file and returns the pids in it (its own first).
pub fn wait_for_pids(path: &Path) -> Vec<i32> {
    wait_for_line(path)
        .split_whitespace()
        .map(|t| {
            t.parse()
                .unwrap_or_else(|_| panic!("pid file {} holds {t:?}", path.display()))
        })
        .collect()
}

/// Prints every process (state, wait channel, command) to stderr if the test is still running
/// after `after`: what a test that is about to time out was waiting for. Stops when dropped.
pub fn ps_on_stall(after: Duration) -> impl Drop {
    struct Stop(std::sync::mpsc::Sender<()>);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if rx.recv_timeout(after) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            if let Ok(o) = Command::new("ps")
                .args(["-eo", "pid,ppid,pgid,sid,tpgid,stat,wchan:24,args"])
                .output()
            {
                eprintln!(
                    "--- ps after {after:?}\n{}",
                    String::from_utf8_lossy(&o.stdout)
                );
            }
        }
    });
    Stop(tx)
}

/// Signal numbers the `record` helper wrote to `out`, after its `ready` line.
pub fn recorded(out: &Path) -> Vec<i32> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The pids in a log that helpers append to (one per line), whatever is there now.
pub fn read_pids(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// Waits until a control socket is bound at `path`.
pub fn wait_for_socket(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    wait_until("the control socket", || {
        std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
    });
}

/// Waits until the file at `path` has a line equal to `line`.
pub fn wait_for_text(path: &Path, line: &str) {
    wait_until(&format!("the line {line:?} in {}", path.display()), || {
        has_line(path, line)
    });
}

pub fn has_line(path: &Path, line: &str) -> bool {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .any(|l| l == line)
}

/// Waits at most `limit` for `pid` to be gone (or a zombie); true when it is.
pub fn wait_gone(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// One field of /proc/PID/status-style text, e.g. `SigIgn`.
pub fn status_field<'a>(status: &'a str, field: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {field} in:\n{status}"))
}

/// One field of /proc/PID/status, e.g. `TracerPid` or `SigBlk`.
pub fn proc_status(pid: i32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status_field(&status, field).to_string()
}

/// `sh -c SCRIPT sh ARGS...` in a private mount namespace: as root directly, otherwise in a user
/// namespace; `None` (with the reason printed) where neither is possible here.
pub fn in_mount_ns(script: &str, args: &[&str]) -> Option<Command> {
    let unshare = |tail: &[&str]| {
        let mut cmd = Command::new("unshare");
        if !is_root() {
            cmd.args(["--user", "--map-root-user"]);
        }
        cmd.args(["--mount", "--propagation", "private"]).args(tail);
        cmd
    };
    match unshare(&["true"]).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            skip(&format!(
                "cannot make a mount namespace here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            return None;
        }
        Err(e) => {
            skip(&format!("unshare is not available: {e}"));
            return None;
        }
    }
    let mut cmd = unshare(&["sh", "-c", script, "sh"]);
    cmd.args(args);
    Some(cmd)
}

/// Whether `pid` is alive and its command line mentions `marker` (the test's own temporary
/// directory, which every helper it starts has in its arguments): a pid recycled by some other
/// process is never taken for the test's own.
pub fn alive_ours(pid: i32, marker: &Path) -> bool {
    alive(pid) && cmdline_mentions(pid, marker)
}

fn cmdline_mentions(pid: i32, marker: &Path) -> bool {
    let needle = marker.as_os_str().as_encoded_bytes();
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
}

/// Processes that left vloer-run's tree on purpose (or outlived it) and that the test must end
/// itself: held by pidfd, so a recycled pid is never hit, and SIGKILLed on drop, panics included.
/// With a marker (`Adopted::ours`), only processes whose command line mentions it (the test's
/// temporary directory) are taken, so a pid learned a while ago cannot catch a stranger.
#[derive(Default)]
pub struct Adopted {
    marker: Option<PathBuf>,
    procs: Vec<(i32, OwnedFd)>,
}

impl Adopted {
    /// Takes any live pid it is given: for pids known to be the test's own right now.
    pub fn new() -> Adopted {
        Adopted::default()
    }

    /// Takes only live processes whose command line mentions `marker`.
    pub fn ours(marker: &Path) -> Adopted {
        Adopted {
            marker: Some(marker.to_path_buf()),
            procs: Vec::new(),
        }
    }

    /// Takes `pid` in charge when it is alive (and ours); returns whether it was taken.
    pub fn add(&mut self, pid: i32) -> bool {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
        if fd < 0 {
            return false;
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // Checked after the pidfd pins the process: if the pid was recycled in between, the
        // pidfd names a dead process and signalling it is harmless.
        let taken = match &self.marker {
            Some(m) => alive_ours(pid, m),
            None => alive(pid),
        };
        if !taken {
            return false;
        }
        self.procs.push((pid, fd));
        true
    }

    pub fn pids(&self) -> Vec<i32> {
        self.procs.iter().map(|(p, _)| *p).collect()
    }

    /// SIGKILLs every adopted process, the last adopted first, and waits (bounded) until each is
    /// gone. A process whose parent is adopted too and still alive is given a moment to be reaped
    /// by it (the helpers reap their children), so that ending children before their parent
    /// leaves no zombies behind under an init that does not reap.
    pub fn end_all(&mut self) {
        let procs = std::mem::take(&mut self.procs);
        let ours: HashSet<i32> = procs.iter().map(|(p, _)| *p).collect();
        for (pid, fd) in procs.iter().rev() {
            pidfd_kill(fd);
            assert!(
                wait_gone(*pid, LIMIT),
                "pid {pid} survived SIGKILL from the test"
            );
            let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')').and_then(|(_, r)| {
                        r.split_whitespace()
                            .nth(1)
                            .and_then(|t| t.parse::<i32>().ok())
                    })
                });
            if let Some(ppid) = ppid.filter(|p| ours.contains(p) && alive(*p)) {
                let deadline = Instant::now() + Duration::from_secs(5);
                while Path::new(&format!("/proc/{pid}")).exists()
                    && alive(ppid)
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
}

/// SIGKILLs the process a pidfd holds (harmless once it is gone: the pid is never reused for it).
fn pidfd_kill(fd: &OwnedFd) {
    // SAFETY: `fd` is a live pidfd we own; info is NULL as the syscall allows.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        );
    }
}

impl Drop for Adopted {
    fn drop(&mut self) {
        for (_, fd) in &self.procs {
            pidfd_kill(fd);
        }
    }
}

/// SIGKILLs the process group `pgid` that the test's own run created (a process that keeps
/// forking cannot be chased pid by pid; its group holds all of it at once). Only for groups whose
/// leader the test knows, while the group still has members.
pub fn end_group(pgid: i32) {
    assert!(pgid > 1, "refusing to signal group {pgid}");
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The live children of `pid` with their states, from /proc (zombies included, state `Z`).
pub fn children_states(pid: i32) -> Vec<(i32, char)> {
    children(pid)
        .into_iter()
        .map(|c| (c, state(c).unwrap_or('?')))
        .collect()
}

/// The same run with the pidfd calls refused by a seccomp filter (the helper's `no-pidfd`),
/// as on a kernel before 5.3 or under a container profile that does not know them.
pub fn without_pidfds(run: Run) -> Run {
    under_filter("no-pidfd", run)
}

/// The same run with pidfd_send_signal's process-group flag refused (the helper's
/// `no-group-signal`), as on a kernel before 6.9.
pub fn without_group_signal(run: Run) -> Run {
    under_filter("no-group-signal", run)
}

/// The same run with kcmp refused (the helper's `no-kcmp`), as under a container's seccomp
/// profile.
pub fn without_kcmp(run: Run) -> Run {
    under_filter("no-kcmp", run)
}

/// `run` under one of the helper's seccomp filters.
fn under_filter(mode: &str, run: Run) -> Run {
    let mut cmd = Command::new(helper());
    cmd.arg(mode)
        .arg(run.cmd.get_program())
        .args(run.cmd.get_args());
    for (k, v) in run.cmd.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    Run::of(cmd)
}

/// `vloer-run FLAGS -- helper ignore-term`, stopped by SIGTERM once the child is ready: the
/// finished run and the child's pid.
pub fn stop_a_term_ignorer(dir: &tempfile::TempDir, flags: &[&str]) -> (Finished, i32) {
    let ready = tmp_path(dir, "ready");
    let (run, pids) =
        Run::helper(flags, &["ignore-term", &path_str(&ready)]).start_until_ready(&ready);
    (run.finish_after(libc::SIGTERM), pids[0])
}
