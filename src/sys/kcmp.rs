//! kcmp(2): whether two threads share a kernel object (a file table, a working directory and
//! root), asked without reading either.

use super::*;
use std::cmp::Ordering as Order;

static NO_KCMP: AtomicBool = AtomicBool::new(false);

/// What two threads are compared by.
#[derive(Clone, Copy, Debug)]
pub enum Shared {
    /// The file table (`KCMP_FILES`): one thread that unshared it has descriptors of its own.
    Files,
    /// The working directory and root (`KCMP_FS`).
    Fs,
}

/// How `a`'s object compares with `b`'s in the kernel's own (boot-long, arbitrary) order: `Equal`
/// when they share it. `Unsupported` where the kernel has no kcmp (cached after the first try);
/// EPERM where we may not look at one of them or a seccomp profile refuses the call; ESRCH when
/// one has exited.
pub fn kcmp(a: Pid, b: Pid, what: Shared) -> io::Result<Order> {
    const KCMP_FILES: libc::c_int = 2;
    const KCMP_FS: libc::c_int = 3;
    if NO_KCMP.load(Ordering::Relaxed) {
        return Err(io::ErrorKind::Unsupported.into());
    }
    let kind = match what {
        Shared::Files => KCMP_FILES,
        Shared::Fs => KCMP_FS,
    };
    // SAFETY: kcmp takes two thread ids, a type and two indexes these types ignore; it reads no
    // memory of ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            a.as_raw(),
            b.as_raw(),
            kind,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    match rc {
        0 => Ok(Order::Equal),
        1 => Ok(Order::Less),
        2 => Ok(Order::Greater),
        _ if rc < 0 => {
            let err = io::Error::last_os_error();
            // ENOSYS: a kernel built without CONFIG_KCMP (or CHECKPOINT_RESTORE before 5.12).
            if err.raw_os_error() == Some(libc::ENOSYS) {
                NO_KCMP.store(true, Ordering::Relaxed);
                return Err(io::ErrorKind::Unsupported.into());
            }
            Err(err)
        }
        // Unequal without an order: no use for grouping.
        _ => Err(io::Error::other("kcmp gave no order")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's own id.
    fn tid() -> Pid {
        Pid::from_raw(nix::unistd::gettid().as_raw())
    }

    #[test]
    fn a_thread_that_unshared_its_file_table_compares_unequal_and_the_others_equal() {
        let me = tid();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let own = std::thread::spawn(move || {
            // SAFETY: plain integer argument; only this thread's file table is unshared.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_FILES) }, 0);
            tx.send(tid()).unwrap();
            let _ = done_rx.recv();
        });
        let other = rx.recv().unwrap();
        let files = kcmp(me, other, Shared::Files);
        let fs = kcmp(me, other, Shared::Fs);
        let itself = kcmp(me, me, Shared::Files);
        drop(done_tx);
        own.join().unwrap();
        if matches!(&itself, Err(e) if e.kind() == io::ErrorKind::Unsupported) {
            assert!(
                std::env::var_os("VLOER_TESTS_NO_SKIP").is_none(),
                "this kernel has no kcmp"
            );
            eprintln!("SKIPPED: this kernel has no kcmp");
            return;
        }
        assert_eq!(itself.unwrap(), Order::Equal);
        assert_ne!(files.unwrap(), Order::Equal, "its own file table");
        assert_eq!(fs.unwrap(), Order::Equal, "the same working directory");
    }
}
