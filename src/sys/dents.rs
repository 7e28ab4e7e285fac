//! getdents64(2) straight into a buffer: a folder of /proc listed without the C library's
//! `fdopendir`, which costs three more calls (fstat, two fcntl) per folder, and a scan lists
//! two folders of every process on the machine.

use super::*;

/// A folder's entries: each one's inode number and name.
pub type Entries = Vec<(u64, Vec<u8>)>;

/// The entries of the folder `dir` (opened O_RDONLY|O_DIRECTORY, read from its start); `.` and
/// `..` left out.
pub fn entries(dir: BorrowedFd) -> io::Result<Entries> {
    let mut buf = vec![0u8; 8192];
    let mut out = Vec::new();
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, which is ours and
        // alive for the call.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(out);
        }
        let mut at = 0usize;
        // struct linux_dirent64: d_ino (u64), d_off (i64), d_reclen (u16), d_type (u8), then
        // the NUL-terminated name; records are packed one after another.
        while at + 19 <= n as usize {
            let ino = u64::from_ne_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
            let len = u16::from_ne_bytes(buf[at + 16..at + 18].try_into().expect("2 bytes"));
            let len = usize::from(len);
            if len < 19 || at + len > n as usize {
                return Err(io::Error::other("getdents64 gave a broken record"));
            }
            let name = &buf[at + 19..at + len];
            let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
            if name != b"." && name != b".." {
                out.push((ino, name.to_vec()));
            }
            at += len;
        }
    }
}
