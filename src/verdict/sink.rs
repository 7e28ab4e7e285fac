//! Where the verdict goes: stderr, stdout, off, or a file (by rename, or in place where that
//! cannot be done), a FIFO or a device in one write.

use crate::cli::VerdictTo;
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Where the verdict goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sink {
    Off,
    Stdout,
    Stderr,
    Path(PathBuf),
}

impl From<VerdictTo> for Sink {
    fn from(to: VerdictTo) -> Sink {
        match to {
            VerdictTo::Off => Sink::Off,
            VerdictTo::Stdout => Sink::Stdout,
            VerdictTo::Stderr => Sink::Stderr,
            // The run leaves its working directory once the child has started; a relative path
            // still names the file the caller meant.
            VerdictTo::Path(p) => Sink::Path(std::path::absolute(&p).unwrap_or(p)),
        }
    }
}

impl Sink {
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
