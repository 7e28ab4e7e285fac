//! Where the verdict goes: stderr, stdout, off, a descriptor the caller passed, or a file (by
//! rename, or in place where that cannot be done), a FIFO or a device in one write.

use std::io::Write;
use std::os::fd::RawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Where the verdict goes, as `--verdict` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sink {
    Off,
    Stdout,
    Stderr,
    /// A descriptor vloer-run inherited (`/dev/fd/N`, `/proc/self/fd/N`, `/dev/stdout`).
    Fd(RawFd),
    Path(PathBuf),
}

impl Sink {
    /// Parses `--verdict`: `off`, `-`, `stderr`, a descriptor path whose descriptor is open, or a
    /// path whose folder exists.
    pub fn parse(text: &str) -> Result<Sink, String> {
        match text {
            "off" => return Ok(Sink::Off),
            "-" | "stdout" => return Ok(Sink::Stdout),
            "stderr" => return Ok(Sink::Stderr),
            "" => return Err("empty path; expected a file path, -, stderr or off".into()),
            _ => {}
        }
        let path = PathBuf::from(text);
        if let Some(fd) = descriptor_of(&path) {
            // 0-2 closed at start are reported when the verdict is written, after the run.
            if fd > 2 && !crate::sys::fd_is_open(fd) {
                return Err(format!(
                    "descriptor {fd} is not open; expected an open descriptor, a file path in an existing folder, -, stderr or off"
                ));
            }
            return Ok(Sink::Fd(fd));
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() {
            return Err(format!("folder '{}' does not exist; expected a file path in an existing folder, -, stderr or off", parent.display()));
        }
        // The run leaves its working directory once the child has started; a relative path
        // still names the file the caller meant.
        Ok(Sink::Path(std::path::absolute(&path).unwrap_or(path)))
    }

    /// Writes the line. A regular file is replaced atomically; a FIFO, a character device or
    /// an inherited descriptor gets a single write.
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
            Sink::Fd(fd) => write_fd(*fd, line)
                .map_err(|e| format!("writing the verdict to descriptor {fd}: {e}")),
            Sink::Path(path) => match descriptor_of(path) {
                // A link made to point at a descriptor after the run started.
                Some(fd) => write_fd(fd, line),
                None => write_path(path, line),
            }
            .map_err(|e| format!("writing the verdict to {}: {e}", path.display())),
        }
    }

    /// The standard descriptor (0-2) this sink writes to, if it is one.
    fn std_fd(&self) -> Option<i32> {
        match self {
            Sink::Stdout => Some(1),
            Sink::Stderr => Some(2),
            Sink::Fd(fd) => Some(*fd).filter(|fd| *fd <= 2),
            Sink::Path(_) | Sink::Off => None,
        }
    }
}

/// The descriptor a path names, following symbolic links: `/dev/fd/N`, `/proc/self/fd/N`,
/// `/proc/PID/fd/N` with vloer-run's own pid, `/dev/stdout` and the like. Opening such a path
/// would make a new open file at offset 0 (over what the child wrote to a regular file, or ENXIO
/// for a socket); writing to the descriptor itself goes where the caller's shell pointed it.
fn descriptor_of(path: &Path) -> Option<RawFd> {
    let own = format!("/proc/{}/fd/", std::process::id());
    let mut path = path.to_path_buf();
    // As many links as the kernel itself follows in one lookup.
    for _ in 0..40 {
        let text = path.to_str()?;
        let fixed = match text {
            "/dev/stdin" => Some(0),
            "/dev/stdout" => Some(1),
            "/dev/stderr" => Some(2),
            _ => None,
        };
        let numbered = [
            "/dev/fd/",
            "/proc/self/fd/",
            "/proc/thread-self/fd/",
            own.as_str(),
        ]
        .iter()
        .find_map(|prefix| text.strip_prefix(prefix))
        .and_then(|n| n.parse::<RawFd>().ok());
        if let Some(fd) = fixed.or(numbered) {
            return Some(fd);
        }
        path = next_link(&path)?;
    }
    None
}

/// Where the symbolic link at `path` points (relative targets made absolute), or None when
/// `path` is not a link.
fn next_link(path: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_symlink() {
        return None;
    }
    let target = std::fs::read_link(path).ok()?;
    Some(match path.parent() {
        Some(dir) if target.is_relative() => dir.join(target),
        _ => target,
    })
}

/// The file a verdict path finally names, every symbolic link followed: the link itself is
/// left in place and its target replaced (or created, for a link that points nowhere yet).
fn follow_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        match next_link(&path) {
            Some(next) => path = next,
            None => return Ok(path),
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ELOOP))
}

/// One write(2) of the whole line to an inherited descriptor: a reader of a pipe or socket sees
/// all of it or nothing, and a regular file gets it where its shared offset stands (after the
/// child's output), or at its end when it was opened for appending.
fn write_fd(fd: RawFd, line: &str) -> std::io::Result<()> {
    let n = loop {
        match crate::sys::write_inherited(fd, line.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other?,
        }
    };
    short_write(n, line)
}

fn short_write(n: usize, line: &str) -> std::io::Result<()> {
    if n != line.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("short write: {n} of {} bytes", line.len()),
        ));
    }
    Ok(())
}

fn write_all_once(w: &mut dyn Write, line: &str) -> std::io::Result<()> {
    w.write_all(line.as_bytes())?;
    w.flush()
}

/// One write(2) of the whole line: a reader of a FIFO or device sees all of it or nothing.
fn write_once(f: &mut std::fs::File, line: &str) -> std::io::Result<()> {
    let n = f.write(line.as_bytes())?;
    short_write(n, line)
}

fn write_path(path: &Path, line: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = &follow_links(path)?;
    let special = std::fs::metadata(path)
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
