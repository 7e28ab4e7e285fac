//! name_to_handle_at(2), asked only for the mount id: the mount a /proc link leads to, in one
//! call where an `fdinfo` read takes three (open, read, close).

use super::*;
use std::ffi::CStr;

/// The kernel has no such call (ENOSYS): not asked again.
static NO_HANDLES: AtomicBool = AtomicBool::new(false);

/// The kernel knows `AT_HANDLE_FID` (Linux 6.5), which lets a filesystem whose handles cannot be
/// opened again answer too; cleared after the first EINVAL.
static FID: AtomicBool = AtomicBool::new(true);

const AT_HANDLE_FID: libc::c_int = 0x200;

/// `struct file_handle` with no room for a handle: the kernel then writes only this header.
#[repr(C)]
struct Header {
    handle_bytes: libc::c_uint,
    handle_type: libc::c_int,
}

/// The id of the mount that the link `name` under `dir` leads to, the same id `fdinfo` gives.
/// Following a /proc link jumps to the file without a lookup on its filesystem, and a handle
/// with no room is refused after a length check, so a hung server is never asked.
/// `Unsupported` where the call cannot tell (a filesystem that makes no handles, a kernel or a
/// seccomp profile without the call); ENOENT when the link is gone.
pub fn mount_id_at(dir: BorrowedFd, name: &CStr) -> io::Result<u64> {
    if NO_HANDLES.load(Ordering::Relaxed) {
        return Err(io::ErrorKind::Unsupported.into());
    }
    loop {
        let fid = if FID.load(Ordering::Relaxed) {
            AT_HANDLE_FID
        } else {
            0
        };
        let mut header = Header {
            handle_bytes: 0,
            handle_type: 0,
        };
        let mut mount_id: libc::c_int = 0;
        // SAFETY: `name` is NUL-terminated; the kernel reads `header.handle_bytes` (0) and writes
        // at most the header itself (8 bytes, `#[repr(C)]` as `struct file_handle` without its
        // handle) and one int to `mount_id`, both ours and alive for the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_name_to_handle_at,
                dir.as_raw_fd(),
                name.as_ptr(),
                &mut header as *mut Header,
                &mut mount_id as *mut libc::c_int,
                libc::AT_SYMLINK_FOLLOW | fid,
            )
        };
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            // EOVERFLOW: no room for the handle, which is all that was asked; the id is written.
            _ if rc == 0 => return Ok(mount_id as u64),
            Some(libc::EOVERFLOW) => return Ok(mount_id as u64),
            Some(libc::EINVAL) if fid != 0 => FID.store(false, Ordering::Relaxed),
            Some(libc::ENOSYS) => {
                NO_HANDLES.store(true, Ordering::Relaxed);
                return Err(io::ErrorKind::Unsupported.into());
            }
            // EPERM: a seccomp profile (which may refuse it for some callers only).
            Some(libc::EOPNOTSUPP | libc::EPERM) => return Err(io::ErrorKind::Unsupported.into()),
            _ => return Err(err),
        }
    }
}

/// The type and mode bits and the mount id (Linux 5.8, else None) of the file `fd` (one opened
/// O_PATH). statx(2) with `AT_STATX_DONT_SYNC`: a network filesystem answers from what it has
/// cached where it can, but one may still ask its server, so this is for the reader thread.
pub fn file_at(fd: BorrowedFd) -> io::Result<(u32, Option<u64>)> {
    const STATX_TYPE: libc::c_uint = 0x1;
    const STATX_MNT_ID: libc::c_uint = 0x1000;
    // struct statx is 256 bytes; the fields read here are at fixed offsets in every version.
    let mut buf = [0u8; 256];
    // SAFETY: the path is an empty NUL-terminated string (AT_EMPTY_PATH: `fd` itself); the
    // kernel writes at most 256 bytes, the size of `buf`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC,
            STATX_TYPE | STATX_MNT_ID,
            buf.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let u32_at = |at: usize| u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_ne_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
    // stx_mask at 0, stx_mode (u16) at 28, stx_mnt_id at 144.
    let mode = u32::from(u16::from_ne_bytes(buf[28..30].try_into().expect("2 bytes")));
    let mnt = (u32_at(0) & STATX_MNT_ID != 0).then(|| u64_at(144));
    Ok((mode, mnt))
}
