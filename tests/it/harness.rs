//! Shared test machinery: run vloer-run with a hard time limit, parse its verdict, and end every
//! process a test started, by pid.
#![allow(dead_code)]

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_vloer-run")
}

/// The misbehaving-child helper (tests/helpers/child.rs).
pub fn helper() -> &'static str {
    env!("CARGO_BIN_EXE_vloer-test-child")
}

/// A generous bound for anything a test waits on; these machines are noisy.
pub const LIMIT: Duration = Duration::from_secs(60);

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Prints why a test is skipped; returns true so callers can `if skip(...) { return; }`.
pub fn skip(reason: &str) -> bool {
    eprintln!("SKIPPED: {reason}");
    true
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

    /// The verdict line from stderr (the default sink).
    pub fn verdict(&self) -> serde_json::Value {
        parse_verdict(&self.stderr).unwrap_or_else(|| panic!("no verdict on stderr:\n{self}"))
    }
}

impl std::fmt::Display for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "status {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}", self.status, self.elapsed, self.stdout, self.stderr)
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
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits (bounded by LIMIT) and collects the output.
    pub fn finish(mut self) -> Finished {
        let deadline = self.started + LIMIT;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            if Instant::now() > deadline {
                self.guard.kill_all();
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("vloer-run did not finish within {LIMIT:?}");
            }
            // Poll the exit with a short sleep: std offers no pidfd wait on stable.
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.started.elapsed();
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_string(&mut stdout);
        }
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut stderr);
        }
        Finished { status, stdout, stderr, elapsed }
    }
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

fn kill_pid(pid: i32, sig: i32) {
    // Only pids learned from this test's own tree (or adopted by it) ever get here.
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::try_from(sig).ok());
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
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
            if let Ok(s) = std::fs::read_to_string(task.path().join("children")) {
                for c in s.split_whitespace().filter_map(|t| t.parse::<i32>().ok()) {
                    out.push(c);
                    queue.push(c);
                }
            }
        }
    }
    out
}

/// Whether `pid` is alive (exists and is not a zombie).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s.rsplit_once(')').map(|(_, r)| r.trim_start().chars().next().unwrap_or('?')).unwrap_or('?');
            !matches!(state, 'Z' | 'X')
        }
        Err(_) => false,
    }
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
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // A test's environment must not configure the run by accident.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("VLOER_") {
                cmd.env_remove(k);
            }
        }
        Run { cmd }
    }

    pub fn env(mut self, k: &str, v: &str) -> Run {
        self.cmd.env(k, v);
        self
    }

    pub fn start(mut self) -> Running {
        let child = self.cmd.spawn().expect("spawning vloer-run");
        let pid = child.id() as i32;
        Running { child, started: Instant::now(), guard: TreeGuard { roots: vec![pid], extra: HashSet::new() } }
    }

    pub fn finish(self) -> Finished {
        self.start().finish()
    }
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
