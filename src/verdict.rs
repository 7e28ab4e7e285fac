//! The JSON verdict (schema 1): built once per run, fitted to 4096 bytes, written to its sink.

use crate::proctable::Proc;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// A Kubernetes termination message holds at most this many bytes; the newline counts.
pub const MAX_BYTES: usize = 4096;
const MAX_ERROR_CHARS: usize = 1024;

/// Why the stop began.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    ChildExited,
    Signal,
    Timeout,
    Control,
    ParentDied,
    /// vloer-run itself failed after the child started (`error` says how); the contract has no
    /// reason for this, and naming another would be a lie.
    Error,
}

impl Reason {
    /// The reason in words, for `-v`.
    pub fn words(self) -> &'static str {
        match self {
            Reason::ChildExited => "the child exited",
            Reason::Signal => "a stop signal arrived",
            Reason::Timeout => "the timeout passed",
            Reason::Control => "a control client asked",
            Reason::ParentDied => "the parent process exited",
            Reason::Error => "vloer-run failed",
        }
    }
}

/// The main child's end, as far as it is known.
#[derive(Clone, Debug, Serialize, Default, PartialEq, Eq)]
pub struct ChildReport {
    pub pid: Option<i32>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
}

/// The verdict, schema 1, field for field as the contract lists them.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub stopped: bool,
    pub survivors: Vec<Proc>,
    #[serde(skip_serializing_if = "is_zero")]
    pub survivors_omitted: usize,
    pub reason: Reason,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    pub child: ChildReport,
    pub exit_code: i32,
    pub scope: &'static str,
    pub sent: BTreeMap<String, u64>,
    pub reaped: u64,
    pub elapsed_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub schema: u32,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Verdict {
    /// One line of JSON with its newline, at most 4096 bytes: survivors are dropped from the end
    /// (and counted in `survivors_omitted`) until it fits.
    pub fn to_line(&self) -> String {
        let mut v = self.clone();
        if let Some(e) = &mut v.error {
            if e.chars().count() > MAX_ERROR_CHARS {
                *e = e.chars().take(MAX_ERROR_CHARS).collect::<String>() + "…";
            }
        }
        loop {
            let line = serde_json::to_string(&v).expect("a verdict always serialises") + "\n";
            if line.len() <= MAX_BYTES {
                return line;
            }
            if v.survivors.is_empty() {
                // Only the error can still be too long: in JSON a control character takes six
                // bytes and many others three or four, so 1024 characters may be far over 4096.
                let Some(e) = v.error.as_mut() else {
                    return line;
                };
                let body = e.strip_suffix('…').unwrap_or(e);
                if body.is_empty() {
                    return line;
                }
                // Every character is at least one byte of JSON, so this always shrinks the line.
                let keep = body
                    .chars()
                    .count()
                    .saturating_sub(line.len() - MAX_BYTES + 1);
                *e = body.chars().take(keep).collect::<String>() + "…";
                continue;
            }
            // Drop in proportion to the excess so 5000 survivors do not take 5000 passes.
            let over = line.len() - MAX_BYTES;
            let per = (line.len() / (v.survivors.len() + 1)).max(1);
            let drop = (over / per).clamp(1, v.survivors.len());
            let keep = v.survivors.len() - drop;
            v.survivors.truncate(keep);
            v.survivors_omitted += drop;
        }
    }
}

/// Where the verdict goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sink {
    Off,
    Stdout,
    Stderr,
    Path(PathBuf),
}

impl Sink {
    /// Parses `--verdict`: `off`, `-`, `stderr`, or a path whose folder exists.
    pub fn parse(text: &str) -> Result<Sink, String> {
        match text {
            "off" => return Ok(Sink::Off),
            "-" | "stdout" => return Ok(Sink::Stdout),
            "stderr" => return Ok(Sink::Stderr),
            "" => return Err("empty path; expected a file path, -, stderr or off".into()),
            _ => {}
        }
        let path = PathBuf::from(text);
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() {
            return Err(format!("folder '{}' does not exist; expected a file path in an existing folder, -, stderr or off", parent.display()));
        }
        Ok(Sink::Path(path))
    }

    /// Writes the line. A regular file is replaced atomically; a FIFO, a character device or
    /// `/dev/fd/N` gets a single write.
    pub fn write(&self, line: &str) -> Result<(), String> {
        if let Some(fd) = self.std_fd().filter(|fd| crate::sys::closed_at_start(*fd)) {
            let name = ["stdin", "stdout", "stderr"][fd as usize];
            return Err(format!(
                "writing the verdict to {name}: {name} was closed when vloer-run started"
            ));
        }
        match self {
            Sink::Off => Ok(()),
            Sink::Stdout => write_all_once(&mut std::io::stdout().lock(), line)
                .map_err(|e| format!("writing the verdict to stdout: {e}")),
            Sink::Stderr => write_all_once(&mut std::io::stderr().lock(), line)
                .map_err(|e| format!("writing the verdict to stderr: {e}")),
            Sink::Path(path) => write_path(path, line)
                .map_err(|e| format!("writing the verdict to {}: {e}", path.display())),
        }
    }
}

impl Sink {
    /// The standard descriptor (0-2) this sink writes to, if it is one.
    fn std_fd(&self) -> Option<i32> {
        match self {
            Sink::Stdout => Some(1),
            Sink::Stderr => Some(2),
            Sink::Path(p) => match p.to_str()? {
                "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" => Some(0),
                "/dev/stdout" | "/dev/fd/1" | "/proc/self/fd/1" => Some(1),
                "/dev/stderr" | "/dev/fd/2" | "/proc/self/fd/2" => Some(2),
                _ => None,
            },
            Sink::Off => None,
        }
    }
}

fn write_all_once(w: &mut dyn Write, line: &str) -> std::io::Result<()> {
    w.write_all(line.as_bytes())?;
    w.flush()
}

/// One write(2) of the whole line: a reader of a FIFO or device sees all of it or nothing.
fn write_once(f: &mut std::fs::File, line: &str) -> std::io::Result<()> {
    let n = f.write(line.as_bytes())?;
    if n != line.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("short write: {n} of {} bytes", line.len()),
        ));
    }
    Ok(())
}

fn write_path(path: &Path, line: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let special = path.starts_with("/dev/fd")
        || path.starts_with("/proc/self/fd")
        || std::fs::metadata(path)
            .map(|m| {
                let t = m.file_type();
                t.is_fifo() || t.is_char_device() || t.is_socket()
            })
            .unwrap_or(false);
    if special {
        // O_NONBLOCK so a FIFO without a reader is an error (ENXIO), not a hang.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)?;
        return write_once(&mut f, line);
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let result = (|| {
        let (tmp, mut f) = create_temporary(&dir, &name)?;
        let written = f
            .write_all(line.as_bytes())
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    })();
    match result {
        // No temporary file can be made beside it (a folder only root may write, as /dev is for
        // a non-root pod's /dev/termination-log; a read-only one), or the file cannot be renamed
        // over (EBUSY: it is itself a mount point, as Kubernetes bind-mounts that file; EXDEV):
        // replace its contents in place instead, in one write, then cut what an older, longer
        // content left behind.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::EBUSY | libc::EXDEV)
            ) =>
        {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(path)
                .map_err(|_| e)?;
            write_once(&mut f, line)?;
            f.set_len(line.len() as u64)?;
            f.sync_all()
        }
        other => other,
    }
}

/// Creates a new temporary file in `dir` under a name nobody can guess or has left behind: a
/// leftover of an earlier crash (as PID 1 every run has the same pid) never blocks a verdict.
fn create_temporary(dir: &Path, name: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::hash::{BuildHasher, Hasher};
    use std::os::unix::fs::OpenOptionsExt;
    let mut last = None;
    for attempt in 0..8u64 {
        // std seeds each RandomState from the kernel's random numbers.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(attempt);
        let tmp = dir.join(format!(".{name}.vloer-run.{:016x}", h.finish()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::unistd::Pid;

    fn verdict(n: usize) -> Verdict {
        Verdict {
            stopped: n == 0,
            survivors: (0..n)
                .map(|i| Proc {
                    pid: Pid::from_raw(100000 + i as i32),
                    ppid: Pid::from_raw(1),
                    pgid: Pid::from_raw(1),
                    sid: Pid::from_raw(1),
                    state: "S".into(),
                    comm: "a \"weird\"\u{1}name".into(),
                    starttime: 0,
                    threads: 1,
                    doubt: None,
                })
                .collect(),
            survivors_omitted: 0,
            reason: Reason::Signal,
            signal: Some("SIGTERM".into()),
            child: ChildReport {
                pid: Some(5),
                exit_code: None,
                signal: Some("SIGKILL".into()),
            },
            exit_code: 125,
            scope: "tree",
            sent: BTreeMap::from([("SIGTERM".into(), 3)]),
            reaped: 2,
            elapsed_ms: 10,
            error: Some("x".repeat(10_000)),
            schema: 1,
        }
    }

    /// Property tests: whatever the run found, the verdict is one line of valid JSON that fits.
    mod props {
        use super::*;
        use proptest::prelude::*;

        /// Text as hostile as JSON gets: control characters (six bytes each once escaped), quotes,
        /// backslashes, three- and four-byte characters.
        fn nasty(max: usize) -> impl Strategy<Value = String> {
            let ch = prop_oneof![2 => any::<char>(), 4 => (0u8..0x20).prop_map(char::from), 1 => Just('"'), 1 => Just('\\'), 1 => Just('€'), 1 => Just('𝄞')];
            prop::collection::vec(ch, 0..max).prop_map(String::from_iter)
        }

        fn survivor() -> impl Strategy<Value = Proc> {
            let state = prop::sample::select(vec!["R", "S", "D", "T", "t", "I"]);
            (
                any::<i32>(),
                any::<i32>(),
                any::<i32>(),
                any::<i32>(),
                state,
                nasty(20),
            )
                .prop_map(|(pid, ppid, pgid, sid, state, comm)| Proc {
                    pid: Pid::from_raw(pid),
                    ppid: Pid::from_raw(ppid),
                    pgid: Pid::from_raw(pgid),
                    sid: Pid::from_raw(sid),
                    state: state.into(),
                    comm,
                    starttime: 0,
                    threads: 1,
                    doubt: None,
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn every_verdict_is_one_line_of_json_within_4096_bytes(
                survivors in prop::collection::vec(survivor(), 0..300),
                error in prop::option::of(nasty(6000)),
                signal in prop::option::of(nasty(40)),
                sent in prop::collection::btree_map(nasty(12), any::<u64>(), 0..8),
                stopped in any::<bool>(),
                exit_code in any::<i32>(),
                reaped in any::<u64>(),
            ) {
                let n = survivors.len();
                let v = Verdict { stopped, survivors: survivors.clone(), error: error.clone(), signal, sent, exit_code, reaped, ..verdict(0) };
                let line = v.to_line();
                prop_assert!(line.len() <= MAX_BYTES, "{} bytes", line.len());
                prop_assert!(line.ends_with('\n') && line.matches('\n').count() == 1, "not one line: {line:?}");
                let j: serde_json::Value = serde_json::from_str(&line).map_err(|e| TestCaseError::fail(format!("{e}: {line}")))?;
                prop_assert_eq!(&j["stopped"], &serde_json::json!(stopped));
                prop_assert_eq!(&j["exit_code"], &serde_json::json!(exit_code));
                prop_assert_eq!(&j["reaped"], &serde_json::json!(reaped));
                prop_assert_eq!(&j["schema"], &serde_json::json!(1));
                // Survivors are dropped from the end, and every dropped one is counted.
                let kept = j["survivors"].as_array().unwrap();
                let omitted = j.get("survivors_omitted").map_or(0, |o| o.as_u64().unwrap() as usize);
                prop_assert_eq!(kept.len() + omitted, n);
                for (k, s) in kept.iter().zip(&survivors) {
                    prop_assert_eq!(&k["pid"], &serde_json::json!(s.pid.as_raw()));
                    prop_assert_eq!(&k["comm"], &serde_json::json!(s.comm));
                }
                // An error is never lost, only shortened (ending in an ellipsis).
                match (&error, j.get("error")) {
                    (None, None) => {}
                    (Some(e), Some(out)) => {
                        let out = out.as_str().unwrap();
                        let cut = out.strip_suffix('…').unwrap_or(out);
                        prop_assert!(out == e || (out.ends_with('…') && e.starts_with(cut)), "{out:?} is not a prefix of the error");
                    }
                    (e, out) => prop_assert!(false, "error {e:?} became {out:?}"),
                }
            }
        }
    }

    #[test]
    fn fits_in_4096_bytes() {
        for n in [0, 1, 10, 300, 5000] {
            let line = verdict(n).to_line();
            assert!(line.len() <= MAX_BYTES, "{n}: {}", line.len());
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let kept = v["survivors"].as_array().unwrap().len();
            let omitted = v
                .get("survivors_omitted")
                .and_then(|x| x.as_u64())
                .unwrap_or(0) as usize;
            assert_eq!(kept + omitted, n);
            assert_eq!(v.get("survivors_omitted").is_none(), omitted == 0);
        }
    }
}
