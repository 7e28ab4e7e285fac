//! The folder sweep as `status` shows it: each way a process holds or names DIR, identity across
//! bind mounts, symlinks and mount namespaces, what never matches, and what cannot be looked at.

use crate::harness::{self, is_root, path_str, skip, wait_until, Mounted, Run, Running, AS_NOBODY};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A temporary folder with the swept folder `work` in it.
struct Folder {
    tmp: tempfile::TempDir,
}

impl Folder {
    fn new() -> Folder {
        let tmp = harness::tempdir();
        std::fs::create_dir_all(tmp.path().join("work/sub/deeper")).unwrap();
        std::fs::write(tmp.path().join("work/file"), "data").unwrap();
        Folder { tmp }
    }

    fn top(&self) -> &Path {
        self.tmp.path()
    }

    fn dir(&self) -> PathBuf {
        self.tmp.path().join("work")
    }
}

/// A vloer-run serving a control socket, sweeping `--sweep` folders, around a long sleep.
struct Instance {
    run: Running,
    sock: PathBuf,
}

impl Instance {
    fn start(folder: &Folder, sweep: &[&Path]) -> Instance {
        Instance::via(folder, sweep, &[])
    }

    fn via(folder: &Folder, sweep: &[&Path], wrapper: &[&str]) -> Instance {
        let sock = folder.top().join("ctl.sock");
        let mut args = vec!["--control".to_string(), path_str(&sock)];
        for d in sweep {
            args.extend(["--sweep".to_string(), path_str(d)]);
        }
        args.extend(["--".into(), "sleep".into(), "1000".into()]);
        let run = Run::via(wrapper, &args).current_dir(Path::new("/")).start();
        harness::wait_for_socket(&sock);
        // What the test starts from now on starts in a later clock tick (10 ms) than the run:
        // a process of the run's own tick counts as started before it.
        std::thread::sleep(std::time::Duration::from_millis(30));
        Instance { run, sock }
    }

    /// The `sweep` key of a status.
    fn sweep(&self) -> serde_json::Value {
        let out = Run::new(["status", "--control", &path_str(&self.sock)]).finish();
        assert_eq!(out.code(), Some(0), "{out}");
        let status: serde_json::Value = serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("status is not JSON ({e}): {out}"));
        status["sweep"].clone()
    }

    /// How `pid` holds or names a swept folder, per a status; None when it is not listed.
    fn what(&self, pid: i32) -> Option<Vec<String>> {
        let sweep = self.sweep();
        let holder = sweep["holders"]
            .as_array()
            .unwrap_or_else(|| panic!("no holders in {sweep}"))
            .iter()
            .find(|h| h["pid"] == pid)?;
        Some(
            holder["what"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_str().unwrap().to_string())
                .collect(),
        )
    }
}

/// A process the test started outside any vloer-run: SIGKILLed by pid and reaped on drop.
struct Outside(Child);

impl Outside {
    /// Starts `sh -c SCRIPT` in `cwd`, with `env`, and waits until it runs `comm`.
    fn start(script: &str, cwd: &Path, env: &[(&str, &Path)], comm: &str) -> Outside {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script])
            .current_dir(cwd)
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Outside::of(cmd, comm)
    }

    fn of(mut cmd: Command, comm: &str) -> Outside {
        let p = Outside(cmd.spawn().expect("spawning a holder"));
        let pid = p.pid();
        wait_until(&format!("{pid} to run {comm}"), || harness::runs(pid, comm));
        p
    }

    /// Starts the helper with `args` and a ready file (in `f`'s top), its `HELPER_DIR` the
    /// swept folder and its working directory `/`, and waits until it is ready.
    fn helper(f: &Folder, args: &[&str]) -> Outside {
        let ready = f.top().join("ready");
        let child = Command::new(harness::helper())
            .args(args)
            .arg(&ready)
            .env("HELPER_DIR", f.dir())
            .current_dir("/")
            .stdin(Stdio::null())
            .spawn()
            .expect("the helper");
        let p = Outside(child);
        assert_eq!(harness::wait_for_pids(&ready), [p.pid()]);
        p
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

/// The link texts of process `pid`'s descriptors.
fn fd_links(pid: i32) -> Vec<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .collect()
}

impl Drop for Outside {
    fn drop(&mut self) {
        // Its children first (an `sh` waiting for its `sleep`), while it still holds them.
        for pid in harness::descendants(self.pid()) {
            harness::kill_pid(pid, libc::SIGKILL);
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Mounted {
    /// A tmpfs mounted at `at` (which exists), or None after saying why the test is skipped.
    fn tmpfs(at: &Path) -> Option<Mounted> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "none", &path_str(at)])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            skip("mount -t tmpfs does not work here");
            return None;
        }
        Some(Mounted(at.to_path_buf()))
    }

    fn bind(from: &Path, to: &Path) -> Option<Mounted> {
        std::fs::create_dir_all(to).unwrap();
        let ok = Command::new("mount")
            .args(["--bind", &path_str(from), &path_str(to)])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            skip("mount --bind does not work here");
            return None;
        }
        Some(Mounted(to.to_path_buf()))
    }
}

fn what(list: &[&str]) -> Option<Vec<String>> {
    Some(list.iter().map(|s| s.to_string()).collect())
}

fn needs_root(what: &str) -> bool {
    !is_root() && skip(&format!("{what} needs root"))
}

#[test]
fn a_working_directory_in_the_folder_or_below_it_holds_it() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let at = Outside::start("exec sleep 1000", &f.dir(), &[], "sleep");
    let deep = Outside::start("exec sleep 1000", &f.dir().join("sub/deeper"), &[], "sleep");
    let beside = Outside::start("exec sleep 1000", f.top(), &[], "sleep");
    // A relative argument is made absolute against the working directory: `1000` in the
    // folder names the folder too.
    assert_eq!(inst.what(at.pid()), what(&["cwd", "argv"]));
    assert_eq!(inst.what(deep.pid()), what(&["cwd", "argv"]));
    assert_eq!(inst.what(beside.pid()), None);
    let sweep = inst.sweep();
    assert_eq!(sweep["dirs"], serde_json::json!([path_str(&f.dir())]));
    let holder = &sweep["holders"].as_array().unwrap()[0];
    assert_eq!(holder["started"], "during", "{sweep}");
    assert_eq!(holder["comm"], "sleep", "{sweep}");
    assert_eq!(holder["uid"], nix::unistd::geteuid().as_raw(), "{sweep}");
}

#[test]
fn a_root_in_the_folder_holds_it() {
    let _quiet = harness::quiet();
    if needs_root("chroot") {
        return;
    }
    let f = Folder::new();
    let busybox = f.dir().join("busybox");
    if std::fs::copy("/bin/busybox", &busybox).is_err() {
        skip("no static /bin/busybox (Debian package busybox-static)");
        return;
    }
    let inst = Instance::start(&f, &[&f.dir()]);
    let mut cmd = Command::new("chroot");
    cmd.args([&path_str(&f.dir()), "/busybox", "sleep", "1000"])
        .current_dir("/");
    let jailed = Outside::of(cmd, "busybox");
    let got = inst
        .what(jailed.pid())
        .expect("the chrooted process is listed");
    assert!(got.contains(&"root".to_string()), "{got:?}");
}

#[test]
fn an_executable_in_the_folder_holds_it() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let copy = f.dir().join("napper");
    std::fs::copy("/bin/sleep", &copy).unwrap();
    let inst = Instance::start(&f, &[&f.dir()]);
    // Its argv[0] is a plain name and its working directory is /: only the executable (and its
    // mapping) matches.
    let mut cmd = Command::new(&copy);
    cmd.arg0("napper").arg("1000").current_dir("/");
    let p = Outside::of(cmd, "napper");
    assert_eq!(inst.what(p.pid()), what(&["exe", "map"]));
}

#[test]
fn an_open_file_holds_the_folder_even_once_deleted() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let file = f.dir().join("file");
    let gone = f.dir().join("sub/gone");
    std::fs::write(&gone, "x").unwrap();
    let script = "exec 3<\"$F\" 4<\"$G\"; exec sleep 1000";
    let open = Outside::start(
        script,
        Path::new("/"),
        &[("F", &file), ("G", &gone)],
        "sleep",
    );
    assert_eq!(inst.what(open.pid()), what(&["fd"]));
    let deleted = Outside::start(
        "exec 3<\"$G\"; exec sleep 1000",
        Path::new("/"),
        &[("G", &gone)],
        "sleep",
    );
    std::fs::remove_file(&gone).unwrap();
    let link = std::fs::read_link(format!("/proc/{}/fd/3", deleted.pid())).unwrap();
    assert!(path_str(&link).ends_with(" (deleted)"), "{link:?}");
    assert_eq!(inst.what(deleted.pid()), what(&["fd"]));
}

#[test]
fn a_thread_with_a_file_table_of_its_own_holds_the_folder_among_any_number_of_threads() {
    let _quiet = harness::quiet();
    // One thread besides the main one, then 300 (more than a scan once looked at), the last
    // holding the file: the main thread's descriptors and the others' show nothing of it.
    for threads in ["1", "300"] {
        let f = Folder::new();
        let inst = Instance::start(&f, &[&f.dir()]);
        let p = Outside::helper(&f, &["thread-files", threads]);
        let main_fds = fd_links(p.pid());
        assert!(
            !main_fds.iter().any(|l| l.starts_with(f.dir())),
            "the main thread holds nothing in the folder: {main_fds:?}"
        );
        assert_eq!(inst.what(p.pid()), what(&["fd"]), "{threads} threads");
    }
}

#[test]
fn a_file_registered_with_an_io_uring_ring_holds_the_folder() {
    let _quiet = harness::quiet();
    if harness::io_uring_refused() {
        return;
    }
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let p = Outside::helper(&f, &["uring-file"]);
    // Its descriptors show the ring and nothing in the folder; only the ring's fdinfo names the
    // file.
    let links = fd_links(p.pid());
    assert!(
        !links.iter().any(|l| l.starts_with(f.dir())),
        "no descriptor of the file is left: {links:?}"
    );
    assert!(
        links
            .iter()
            .any(|l| l == Path::new("anon_inode:[io_uring]")),
        "{links:?}"
    );
    assert_eq!(inst.what(p.pid()), what(&["fd"]));
}

#[test]
fn a_mapping_far_down_a_long_maps_file_holds_the_folder() {
    let _quiet = harness::quiet();
    // maps is a seq_file whose lines are longer than a short read's slack: a read that stopped
    // at the first short answer saw its first 4 KiB only. Python maps many libraries; its map
    // of the file is listed among them.
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let p = mapping(&f.dir().join("mapped"));
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", p.pid())).unwrap();
    let at = maps.find("/mapped").expect("the map is listed");
    assert!(
        at > 8192,
        "the map is listed {at} bytes in, not far enough to show the bug"
    );
    // (Python's mmap keeps a descriptor of its own.)
    let got = inst.what(p.pid()).unwrap_or_default();
    assert!(got.contains(&"map".into()), "{}", inst.sweep());
}

/// A Python that maps the file `path` (named in its environment, not its arguments) among
/// many libraries, and sleeps.
fn mapping(path: &Path) -> Outside {
    let script = "import mmap, os, time\n\
                  f = open(os.environ['MAPPED'], 'w+b'); f.write(b'x' * 4096); f.flush()\n\
                  m = mmap.mmap(f.fileno(), 4096); f.close()\n\
                  import json, decimal, ssl, sqlite3, ctypes, hashlib, zlib, bz2, lzma\n\
                  print('ready', flush=True); time.sleep(1000)\n";
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script])
        .env("MAPPED", path)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut p = Outside(cmd.spawn().expect("python3"));
    let mut line = String::new();
    let out = p.0.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    p
}

#[test]
fn a_mapped_file_whose_name_has_a_newline_is_told_from_one_that_reads_the_same() {
    let _quiet = harness::quiet();
    if needs_root("reading /proc/PID/map_files") {
        return;
    }
    // maps writes a newline in a name as `\012`, and the four characters `\012` as they are:
    // the swept folder `x<newline>y` and its neighbour `x\012y` read the same there. The map's
    // own link tells them apart.
    let f = Folder::new();
    let swept = f.top().join("x\ny");
    let lookalike = f.top().join("x\\012y");
    std::fs::create_dir(&swept).unwrap();
    std::fs::create_dir(&lookalike).unwrap();
    let inst = Instance::start(&f, &[&swept]);
    let holder = mapping(&swept.join("lib"));
    let other = mapping(&lookalike.join("lib"));
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", holder.pid())).unwrap();
    assert!(maps.contains("x\\012y/lib"), "{maps}");
    let sweep = inst.sweep();
    let got = inst.what(holder.pid()).unwrap_or_default();
    assert!(got.contains(&"map".into()), "{sweep}");
    assert_eq!(inst.what(other.pid()), None, "{sweep}");
    let unverified = sweep["unverified"].as_array().cloned().unwrap_or_default();
    assert!(
        !unverified.iter().any(|u| u["pid"] == other.pid()),
        "{sweep}"
    );
}

#[test]
fn a_file_backed_mapping_holds_the_folder() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let lib = f.dir().join("libpreload.so");
    let Some(source) = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists()) else {
        skip("no libm.so.6 to map");
        return;
    };
    std::fs::copy(source, &lib).unwrap();
    let inst = Instance::start(&f, &[&f.dir()]);
    // The loader maps the library and closes its descriptor: only the mapping is left.
    let p = Outside::start(
        "LD_PRELOAD=\"$L\" exec sleep 1000",
        Path::new("/"),
        &[("L", &lib)],
        "sleep",
    );
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", p.pid())).unwrap();
    assert!(
        maps.contains("libpreload.so"),
        "the library is mapped: {maps}"
    );
    assert_eq!(inst.what(p.pid()), what(&["map"]));
}

#[test]
fn an_argument_names_the_folder_absolute_or_relative_to_the_working_directory() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    // `sleep 1000; :` keeps sh from becoming sleep: the sh holds the arguments.
    let script = "sleep 1000; :";
    let absolute = format!("{}/sub/../not-yet", path_str(&f.dir()));
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script, "sh", &absolute]).current_dir("/");
    let abs = Outside::of(cmd, "sh");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script, "sh", "./work/./sub/../x"])
        .current_dir(f.top());
    let rel = Outside::of(cmd, "sh");
    // The same relative argument from elsewhere names another folder.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script, "sh", "./work/./sub/../x"])
        .current_dir("/");
    let elsewhere = Outside::of(cmd, "sh");
    for p in [&abs, &rel, &elsewhere] {
        wait_until("the sh to start its sleep", || {
            !harness::children(p.pid()).is_empty()
        });
    }
    assert_eq!(inst.what(abs.pid()), what(&["argv"]));
    assert_eq!(inst.what(rel.pid()), what(&["argv"]));
    assert_eq!(inst.what(elsewhere.pid()), None);
}

#[test]
fn a_bind_mount_of_the_folder_is_the_folder() {
    let _quiet = harness::quiet();
    if needs_root("mount --bind") {
        return;
    }
    let f = Folder::new();
    let view = f.top().join("elsewhere/view");
    let Some(_mounted) = Mounted::bind(&f.dir(), &view) else {
        return;
    };
    let inst = Instance::start(&f, &[&f.dir()]);
    let p = Outside::start("exec sleep 1000", &view.join("sub"), &[], "sleep");
    let link = std::fs::read_link(format!("/proc/{}/cwd", p.pid())).unwrap();
    assert!(
        link.starts_with(&view),
        "the kernel shows the view: {link:?}"
    );
    assert_eq!(inst.what(p.pid()), what(&["cwd", "argv"]));
}

/// A command in a mount namespace of its own: a tmpfs over `ns` (in `f`'s top) that only that
/// namespace sees, the folder bound at `ns/w` in it (as a container sees its volume at /w), and
/// `then` run in `ns/w/sub` by `sh`, with `ns` and the folder as `$1` and `$2`, then `extra`.
/// None (and a printed reason) where no mount namespace can be made.
fn working_at_a_view_only_inside(
    f: &Folder,
    then: &str,
    extra: &[&str],
) -> Option<(PathBuf, Command)> {
    let ns = f.top().join("ns");
    std::fs::create_dir(&ns).unwrap();
    let script = format!(
        "mount -t tmpfs none \"$1\" && mkdir \"$1/w\" && mount --bind \"$2\" \"$1/w\" \
         && cd \"$1/w/sub\" && {then}"
    );
    let (ns_s, dir_s) = (path_str(&ns), path_str(&f.dir()));
    let args: Vec<&str> = [ns_s.as_str(), &dir_s]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let mut cmd = harness::in_mount_ns(&script, &args)?;
    cmd.current_dir("/");
    Some((ns, cmd))
}

#[test]
fn another_mount_namespace_s_view_of_the_folder_is_the_folder() {
    let _quiet = harness::quiet();
    if needs_root("a mount namespace of root's") {
        return;
    }
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    // Inside, a working directory at the folder's view there: its links read `.../ns/w/sub`,
    // which in our namespace is no view of the folder at all.
    let Some((ns, cmd)) = working_at_a_view_only_inside(&f, "exec sleep 1000", &[]) else {
        return;
    };
    let p = Outside::of(cmd, "sleep");
    // The unshare became sh (exec), which became sleep: the pid is the sleeper's.
    let link = std::fs::read_link(format!("/proc/{}/cwd", p.pid())).unwrap();
    assert_eq!(link, ns.join("w/sub"));
    assert!(!ns.join("w").exists(), "our namespace has no w in ns");
    let got = inst
        .what(p.pid())
        .expect("the namespaced process is listed");
    assert!(got.contains(&"cwd".to_string()), "{got:?}");
    // The same path in our namespace, held by a process of ours, is not the folder.
    std::fs::create_dir_all(ns.join("w/sub")).unwrap();
    let ours = Outside::start("exec sleep 1000", &ns.join("w/sub"), &[], "sleep");
    assert_eq!(inst.what(ours.pid()), None);
}

#[test]
fn a_descriptor_kept_into_a_namespace_without_the_folder_s_mount_holds_it() {
    let _quiet = harness::quiet();
    if needs_root("mounting a tmpfs") {
        return;
    }
    // The folder is on a filesystem of its own; a process opens a file in it, then makes a
    // mount namespace and unmounts that filesystem there. Its namespace lists no mount of the
    // folder's; the descriptor is on our mount, and its link reads in our terms.
    let f = Folder::new();
    let fs = f.top().join("fs");
    std::fs::create_dir(&fs).unwrap();
    let Some(_mounted) = Mounted::tmpfs(&fs) else {
        return;
    };
    let data = fs.join("data");
    std::fs::create_dir(&data).unwrap();
    let inst = Instance::start(&f, &[&data]);
    let script = "exec 3>\"$1/u\" && exec unshare --mount --propagation private sh -c \
                  'umount -l \"$0\" && cd / && exec sleep 1000' \"$2\"";
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script, "sh", &path_str(&data), &path_str(&fs)])
        .current_dir("/")
        .stdin(Stdio::null());
    let p = Outside::of(cmd, "sleep");
    let own_ns = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    wait_until("the holder's namespace to lose the folder's mount", || {
        std::fs::read_link(format!("/proc/{}/ns/mnt", p.pid())).is_ok_and(|n| n != own_ns)
            && !std::fs::read_to_string(format!("/proc/{}/mountinfo", p.pid()))
                .unwrap_or_default()
                .contains(&path_str(&fs))
    });
    assert_eq!(inst.what(p.pid()), what(&["fd"]));
}

#[test]
fn a_thread_in_a_mount_namespace_of_its_own_is_never_taken_for_nothing() {
    let _quiet = harness::quiet();
    if needs_root("a mount namespace of one thread's") {
        return;
    }
    // With the main thread alive (the thread's own table places its view), and once it has
    // exited (its namespace is gone then, and the process is read in the live thread's).
    for how in ["ns", "ns-leader"] {
        a_thread_in_a_mount_namespace_of_its_own(how);
    }
}

fn a_thread_in_a_mount_namespace_of_its_own(how: &str) {
    // One thread makes a mount namespace of its own and works in a view of the folder there
    // (`view`, an empty folder in ours): its link reads `.../view`, which in the process's
    // table is no view of the folder. Its mount is in no table the scan read, so the thread's
    // own table, read then, places it: the process holds the folder (before, it was left
    // unverified; never "holds nothing").
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let view = f.top().join("view");
    std::fs::create_dir(&view).unwrap();
    let ready = f.top().join("ready");
    let mut cmd = Command::new(harness::helper());
    cmd.args(["thread-cwd", how, &path_str(&ready)])
        .env("HELPER_DIR", f.dir())
        .env("HELPER_VIEW", &view)
        .current_dir("/")
        .stdin(Stdio::null());
    let p = Outside(cmd.spawn().expect("the helper"));
    assert_eq!(harness::wait_for_pids(&ready), [p.pid()]);
    if how == "ns-leader" {
        wait_until("the main thread to exit", || {
            harness::state(p.pid()) == Some('Z')
        });
    }
    // Read in the live thread's namespace (`ns-leader`, which is that thread's own), or in the
    // thread's own table (`ns`): its view is seen.
    let sweep = inst.sweep();
    let got = inst.what(p.pid()).unwrap_or_default();
    assert!(got.contains(&"cwd".into()), "{how}: {sweep}");
}

#[test]
fn a_working_directory_under_a_mount_stacked_over_the_folder_s_parent_still_holds_it() {
    let _quiet = harness::quiet();
    if needs_root("mounting a tmpfs") {
        return;
    }
    // A process works in the folder (`work/sub`); then a filesystem is mounted over the folder
    // above it (`work`). Its link still reads the old path, which the top mount now answers
    // for: the mount the link was reached through tells.
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir().join("sub")]);
    let p = Outside::start("exec sleep 1000", &f.dir().join("sub/deeper"), &[], "sleep");
    let has_cwd = || {
        inst.what(p.pid())
            .is_some_and(|w| w.contains(&"cwd".into()))
    };
    assert!(has_cwd());
    let Some(_mounted) = Mounted::tmpfs(&f.dir()) else {
        return;
    };
    assert!(!f.dir().join("sub").exists(), "the folder is covered");
    assert!(has_cwd(), "{}", inst.sweep());
}

#[test]
fn a_file_opened_through_another_namespace_s_view_of_the_folder_holds_it() {
    let _quiet = harness::quiet();
    if needs_root("a mount namespace of root's") {
        return;
    }
    // A process of another mount namespace has the folder bound at `view` (an empty folder in
    // ours) and works elsewhere; a process of ours opens a file through that namespace's view
    // (`/proc/PID/root/.../view/g`). Its link reads in that namespace's terms, `.../view/g`,
    // which in its own table (ours) is no file of the folder.
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let view = f.top().join("view");
    std::fs::create_dir(&view).unwrap();
    let script = "mount --bind \"$2\" \"$1\" && cd / && exec sleep 1000";
    let Some(mut cmd) = harness::in_mount_ns(script, &[&path_str(&view), &path_str(&f.dir())])
    else {
        return;
    };
    cmd.current_dir("/");
    let x = Outside::of(cmd, "sleep");
    let through = format!("/proc/{}/root{}/g", x.pid(), path_str(&view));
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "exec 3>\"$1\" && exec sleep 1000", "sh", &through])
        .current_dir("/")
        .stdin(Stdio::null());
    let y = Outside::of(cmd, "sleep");
    assert!(f.dir().join("g").exists(), "the file is in the folder");
    let link = std::fs::read_link(format!("/proc/{}/fd/3", y.pid())).unwrap();
    assert_eq!(
        link,
        view.join("g"),
        "the kernel writes it in the other namespace's terms"
    );
    // The scan that first reads the other namespace's table does not count (a process looked
    // at before may hold a file through its view); `status` scans again.
    assert_eq!(inst.what(y.pid()), what(&["fd"]), "{}", inst.sweep());
    assert_eq!(inst.what(x.pid()), None);
}

#[test]
fn a_folder_renamed_to_a_name_that_ends_as_a_deleted_one_s_is_still_swept() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let renamed = f.top().join("work (deleted)");
    std::fs::rename(f.dir(), &renamed).unwrap();
    let p = Outside::start("exec sleep 1000", &renamed.join("sub"), &[], "sleep");
    let got = inst.what(p.pid()).unwrap_or_default();
    assert!(got.contains(&"cwd".into()), "{}", inst.sweep());
}

#[test]
fn a_deleted_namesake_of_a_deleted_folder_is_not_it() {
    let _quiet = harness::quiet();
    // The folder is deleted, a new one made under its name, and a process started in the new
    // one deletes it: both links read `.../work (deleted)`; the inode tells them apart.
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let old = Outside::start("exec sleep 1000", &f.dir(), &[], "sleep");
    std::fs::remove_dir_all(f.dir()).unwrap();
    std::fs::create_dir(f.dir()).unwrap();
    let script = "cd \"$D\" && rmdir \"$D\" && exec sleep 1000";
    let namesake = Outside::start(script, Path::new("/"), &[("D", &f.dir())], "sleep");
    let link = std::fs::read_link(format!("/proc/{}/cwd", namesake.pid())).unwrap();
    assert_eq!(
        link,
        PathBuf::from(format!("{} (deleted)", path_str(&f.dir())))
    );
    let sweep = inst.sweep();
    assert_eq!(inst.what(namesake.pid()), None, "{sweep}");
    assert!(
        inst.what(old.pid())
            .is_some_and(|w| w.contains(&"cwd".into())),
        "{sweep}"
    );
}

#[test]
fn a_folder_the_swept_one_replaced_by_a_rename_is_not_it() {
    let _quiet = harness::quiet();
    // A process works in an empty folder `b`, with a relative argument; then the swept folder
    // is renamed onto `b` (`mv -T`), which replaces it. The process's working directory now
    // reads `.../b (deleted)`, the swept folder's own path: the inode tells them apart, and a
    // relative argument is resolved against no deleted folder.
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let b = f.top().join("b");
    std::fs::create_dir(&b).unwrap();
    // `1000` is a relative argument too: `b/1000`.
    let replaced = Outside::start("exec sleep 1000", &b, &[], "sleep");
    let inside = Outside::start("exec sleep 1000", &f.dir(), &[], "sleep");
    let ok = Command::new("mv")
        .args(["-T", &path_str(&f.dir()), &path_str(&b)])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mv -T");
    let link = std::fs::read_link(format!("/proc/{}/cwd", replaced.pid())).unwrap();
    assert_eq!(link, PathBuf::from(format!("{} (deleted)", path_str(&b))));
    let sweep = inst.sweep();
    assert_eq!(sweep["dirs"], serde_json::json!([path_str(&f.dir())]));
    assert_eq!(inst.what(replaced.pid()), None, "{sweep}");
    assert!(
        inst.what(inside.pid())
            .is_some_and(|w| w.contains(&"cwd".into())),
        "{sweep}"
    );
}

#[test]
fn a_chrooted_process_s_arguments_are_read_from_its_own_root() {
    let _quiet = harness::quiet();
    if needs_root("chroot") {
        return;
    }
    // Two processes chroot'ed into folders beside the swept one, each naming a path in an
    // argument. `/work/x` from a root at the folder's parent is in the folder; the folder's own
    // full path, from a root of its own, is another folder (and `..` never climbs above it).
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let jail = f.top().join("jail");
    std::fs::create_dir(&jail).unwrap();
    let in_jail = |root: &Path, names: &[&str]| {
        let ready = root.join("ready");
        let _ = std::fs::remove_file(&ready);
        let child = Command::new(harness::helper())
            .args(["chroot", &path_str(root), "/ready"])
            .args(names)
            .current_dir("/")
            .stdin(Stdio::null())
            .spawn()
            .expect("the helper");
        let p = Outside(child);
        assert_eq!(harness::wait_for_pids(&ready), [p.pid()]);
        p
    };
    let naming = in_jail(f.top(), &["/work/x"]);
    let dir = path_str(&f.dir());
    let climbing = format!("/../../..{dir}");
    let beside = in_jail(&jail, &[&dir, &climbing]);
    let sweep = inst.sweep();
    assert_eq!(
        inst.what(naming.pid()),
        Some(vec!["argv".into()]),
        "{sweep}"
    );
    assert_eq!(inst.what(beside.pid()), None, "{sweep}");
}

#[test]
fn a_ring_file_that_only_a_mount_beneath_the_top_one_places_in_the_folder_is_not_held() {
    let _quiet = harness::quiet();
    if needs_root("mounting a tmpfs") || harness::io_uring_refused() {
        return;
    }
    // The folder is `p/d`; then a tmpfs is mounted over `p`, and a process registers a file of
    // the tmpfs, `p/d/registered`, with a ring. A ring shows no mount for its files: by its path
    // alone, the mount beneath would put it in the folder, the top one does not. It is not
    // taken for a holder (which would be signalled); it is unverified.
    let f = Folder::new();
    let p = f.dir().join("sub");
    let d = p.join("deeper");
    let inst = Instance::start(&f, &[&d]);
    let Some(_mounted) = Mounted::tmpfs(&p) else {
        return;
    };
    std::fs::create_dir(&d).unwrap();
    let ready = f.top().join("ready");
    let mut cmd = Command::new(harness::helper());
    cmd.args(["uring-file", &path_str(&ready)])
        .env("HELPER_DIR", &d)
        .current_dir("/")
        .stdin(Stdio::null());
    let ringer = Outside(cmd.spawn().expect("the helper"));
    assert_eq!(harness::wait_for_pids(&ready), [ringer.pid()]);
    let sweep = inst.sweep();
    assert_eq!(inst.what(ringer.pid()), None, "{sweep}");
    let unverified = sweep["unverified"].as_array().cloned().unwrap_or_default();
    let entry = unverified.iter().find(|u| u["pid"] == ringer.pid());
    let why = entry.and_then(|e| e["why"].as_str()).unwrap_or_default();
    assert!(why.contains("io_uring"), "{sweep}");
}

#[test]
fn a_thread_left_by_its_exited_main_thread_is_read_in_its_own_namespace() {
    let _quiet = harness::quiet();
    if needs_root("a mount namespace of root's") {
        return;
    }
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    // As above, the folder is at `ns/w` only inside; there the main thread exits and the other
    // one works on in `ns/w/sub`. An exited main thread has no namespace left to read the
    // process's links in: its live thread still has one.
    let ready = f.top().join("ready");
    let then = "exec \"$3\" pthread-exit \"$4\"";
    let extra = [harness::helper(), &path_str(&ready)];
    let Some((ns, mut cmd)) = working_at_a_view_only_inside(&f, then, &extra) else {
        return;
    };
    let p = Outside(cmd.stdin(Stdio::null()).spawn().unwrap());
    let pids = harness::wait_for_pids(&ready);
    let (leader, forked) = (pids[0], pids[1]);
    assert_eq!(leader, p.pid());
    harness::wait_until("the main thread to exit", || {
        harness::state(leader) == Some('Z')
    });
    // The child it forked is in the folder too; it goes first, so that only the thread is left.
    harness::kill_pid(forked, libc::SIGKILL);
    assert!(harness::wait_gone(forked, harness::LIMIT));
    let thread = std::fs::read_dir(format!("/proc/{leader}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|t| *t != leader)
        .expect("the thread left");
    let thread_cwd = std::fs::read_link(format!("/proc/{leader}/task/{thread}/cwd")).unwrap();
    assert_eq!(thread_cwd, ns.join("w/sub"), "the folder's inside view");
    assert_eq!(inst.what(leader), what(&["cwd"]));
}

#[test]
fn a_symlink_to_the_folder_sweeps_the_folder_and_a_namesake_is_not_it() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let link = f.top().join("link");
    std::os::unix::fs::symlink(f.dir(), &link).unwrap();
    let namesake = f.top().join("other/work");
    std::fs::create_dir_all(&namesake).unwrap();
    let inst = Instance::start(&f, &[&link]);
    assert_eq!(
        inst.sweep()["dirs"],
        serde_json::json!([path_str(&f.dir())])
    );
    let p = Outside::start("exec sleep 1000", &link.join("sub"), &[], "sleep");
    let q = Outside::start("exec sleep 1000", &namesake, &[], "sleep");
    assert_eq!(inst.what(p.pid()), what(&["cwd", "argv"]));
    assert_eq!(inst.what(q.pid()), None);
}

/// The kernel's clock in the ticks /proc/PID/stat counts start times in.
fn ticks_now() -> u64 {
    let up = std::fs::read_to_string("/proc/uptime").unwrap();
    let secs: f64 = up.split_whitespace().next().unwrap().parse().unwrap();
    (secs * 100.0) as u64
}

fn starttime(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

#[test]
fn a_holder_from_before_the_run_is_listed_as_before_and_the_caller_never_matches() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let early = Outside::start("exec sleep 1000", &f.dir(), &[], "sleep");
    let since = starttime(early.pid());
    wait_until("a clock tick after the holder started", || {
        ticks_now() > since + 1
    });
    // The caller: a shell in the folder that waits for vloer-run.
    let sock = f.top().join("ctl.sock");
    let script = "cd \"$1\" && \"$2\" --control \"$3\" --sweep \"$1\" -- sleep 1000; :";
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        script,
        "sh",
        &path_str(&f.dir()),
        harness::bin(),
        &path_str(&sock),
    ])
    .current_dir("/");
    let run = Running::of(cmd.stdin(Stdio::null()).spawn().unwrap());
    harness::wait_for_socket(&sock);
    let inst = Instance { run, sock };
    let sweep = inst.sweep();
    let holders = sweep["holders"].as_array().unwrap();
    let early_entry = holders.iter().find(|h| h["pid"] == early.pid());
    assert_eq!(
        early_entry.map(|h| &h["started"]),
        Some(&serde_json::json!("before")),
        "{sweep}"
    );
    assert!(
        !holders.iter().any(|h| h["pid"] == inst.run.pid()),
        "the caller's shell is not listed: {sweep}"
    );
    let vloer = harness::children(inst.run.pid());
    assert!(
        !holders
            .iter()
            .any(|h| vloer.contains(&(h["pid"].as_i64().unwrap() as i32))),
        "{sweep}"
    );
}

#[test]
fn a_folder_that_does_not_exist_is_refused_and_nothing_starts() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let marker = f.top().join("started");
    let missing = f.top().join("missing");
    let script = format!("touch {}", path_str(&marker));
    // Named as it was given: the flag, or the variable.
    for (run, named) in [
        (
            Run::new(["--sweep", &path_str(&missing), "--", "sh", "-c", &script]),
            "--sweep",
        ),
        (
            Run::new(["--", "sh", "-c", &script]).env("VLOER_SWEEP", &path_str(&missing)),
            "VLOER_SWEEP",
        ),
        (
            Run::new([
                "--sweep",
                &path_str(&f.dir().join("file")),
                "--",
                "sh",
                "-c",
                &script,
            ]),
            "--sweep",
        ),
    ] {
        let out = run.finish();
        assert_eq!(out.code(), Some(125), "{out}");
        let messages = out.messages();
        assert_eq!(messages.len(), 1, "{out}");
        assert!(
            messages[0].starts_with(&format!("vloer-run: {named} ")),
            "{out}"
        );
        assert!(
            messages[0].contains(&path_str(f.top())),
            "it names the path: {out}"
        );
        assert!(!messages[0].contains("os error"), "in words: {out}");
        assert!(!marker.exists(), "nothing was started: {out}");
    }
}

#[test]
fn a_run_that_is_not_root_cannot_look_at_root_s_processes() {
    let _quiet = harness::quiet();
    if needs_root("a root holder beside a run as nobody")
        || !harness::works_here(&AS_NOBODY, "setpriv")
    {
        return;
    }
    let f = Folder::new();
    std::fs::set_permissions(f.top(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(f.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let inst = Instance::via(&f, &[&f.dir()], &AS_NOBODY);
    let root_holder = Outside::start("exec sleep 1000", &f.dir(), &[], "sleep");
    let sweep = inst.sweep();
    assert_eq!(inst.what(root_holder.pid()), None, "{sweep}");
    let unverified = sweep["unverified"].as_array().expect("unverified");
    let entry = unverified
        .iter()
        .find(|u| u["pid"] == root_holder.pid())
        .unwrap_or_else(|| panic!("the root holder is unverified: {sweep}"));
    assert_eq!(entry["started"], "during");
    assert!(
        entry["why"].as_str().unwrap().contains("permission denied"),
        "{entry}"
    );
    // Root's processes from before the run are there too, as before (the test's own are
    // vloer-run's ancestors, which are never looked at).
    assert!(
        unverified.iter().any(|u| u["started"] == "before"),
        "{sweep}"
    );
    assert!(
        !unverified.iter().any(|u| u["pid"] == std::process::id()),
        "{sweep}"
    );
}

#[test]
fn a_proc_that_hides_processes_proves_nothing() {
    let _quiet = harness::quiet();
    // hidepid hides other users' processes from a run that is not root (root sees them all).
    if needs_root("mounting /proc") || !harness::works_here(&AS_NOBODY, "setpriv") {
        return;
    }
    let f = Folder::new();
    std::fs::set_permissions(f.top(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock = f.top().join("ctl.sock");
    let script = "mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid 65534 \
                  --regid 65534 --clear-groups \"$1\" --control \"$2\" --sweep \"$3\" -- sleep 1000";
    let Some(mut cmd) = harness::in_mount_ns(
        script,
        &[
            harness::bin_for_others(),
            &path_str(&sock),
            &path_str(&f.dir()),
        ],
    ) else {
        return;
    };
    let run = Running::of(cmd.current_dir("/").stdin(Stdio::null()).spawn().unwrap());
    harness::wait_for_socket(&sock);
    let inst = Instance { run, sock };
    let sweep = inst.sweep();
    let error = sweep["error"]
        .as_str()
        .unwrap_or_else(|| panic!("an error: {sweep}"));
    assert!(error.contains("hidepid"), "{error}");
}

#[test]
fn a_hung_filesystem_in_the_folder_does_not_hang_a_scan() {
    let _quiet = harness::quiet();
    if needs_root("mounting a FUSE filesystem") {
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        skip("no /dev/fuse here");
        return;
    }
    let f = Folder::new();
    let mnt = f.dir().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let _mounted = Mounted(mnt.clone());
    let server = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helpers/hung_fuse.py");
    let mut cmd = Command::new("python3");
    cmd.args([server, &path_str(&mnt)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut server = Outside(cmd.spawn().expect("python3"));
    let mut ready = String::new();
    let stdout = server.0.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready).unwrap();
    if ready.trim() != "ready" {
        skip("the FUSE server could not mount here");
        return;
    }
    let file = mnt.join("f");
    let holder = Outside::start(
        "exec 3<\"$F\"; exec sleep 1000",
        Path::new("/"),
        &[("F", &file)],
        "sleep",
    );
    let inside = Outside::start("exec sleep 1000", &mnt, &[], "sleep");
    // Ended before the holders, whose exit flushes their files through the server.
    let _server_first = KillFirst(server.pid());
    let inst = Instance::start(&f, &[&f.dir()]);
    // A run that sweeps another folder asks each of their links for its mount (none of them
    // could lie in its folder by its path): that must not wait on the server either.
    let g = Folder::new();
    let other = Instance::start(&g, &[&g.dir()]);
    harness::kill_pid(server.pid(), libc::SIGSTOP);
    wait_until("the server to stop", || {
        harness::state(server.pid()) == Some('T')
    });
    // The filesystem is hung now: a stat of the file waits for the server until it is killed
    // (`timeout -s KILL` kills its own group, itself included).
    let start = std::time::Instant::now();
    let stat = Command::new("timeout")
        .args(["-s", "KILL", "1", "stat", &path_str(&file)])
        .status()
        .unwrap();
    assert!(!stat.success(), "stat waited for the stopped server");
    assert!(
        start.elapsed() >= std::time::Duration::from_millis(900),
        "{stat:?}"
    );
    let start = std::time::Instant::now();
    let got = inst.what(holder.pid());
    let took = start.elapsed();
    assert!(
        took < std::time::Duration::from_secs(10),
        "the scan took {took:?}"
    );
    // A file on a filesystem mounted inside the folder lies in the folder.
    assert_eq!(got, what(&["fd"]));
    // (Its `1000` names a path in the folder too, resolved from there.)
    assert_eq!(inst.what(inside.pid()), what(&["cwd", "argv"]));
    let start = std::time::Instant::now();
    let sweep = other.sweep();
    let took = start.elapsed();
    assert!(
        took < std::time::Duration::from_secs(10),
        "the other scan took {took:?}"
    );
    for p in [&holder, &inside] {
        assert_eq!(other.what(p.pid()), None, "{sweep}");
        assert_eq!(unverified_why(&sweep, p.pid()), None, "{sweep}");
    }
}

/// SIGKILLs a process of the test's own (its unreaped child) when dropped.
struct KillFirst(i32);

impl Drop for KillFirst {
    fn drop(&mut self) {
        harness::kill_pid(self.0, libc::SIGKILL);
    }
}

#[test]
fn a_folder_deleted_during_the_run_is_told_from_a_new_one_of_its_name() {
    let _quiet = harness::quiet();
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    // In the folder, in a subfolder of it, and a file of it held open.
    let at = Outside::start("exec sleep 1000", &f.dir(), &[], "sleep");
    let deep = Outside::start("exec sleep 1000", &f.dir().join("sub/deeper"), &[], "sleep");
    let file = f.dir().join("file");
    let open = Outside::start(
        "exec 3<\"$F\"; exec sleep 1000",
        Path::new("/"),
        &[("F", &file)],
        "sleep",
    );
    std::fs::remove_dir_all(f.dir()).unwrap();
    let link = std::fs::read_link(format!("/proc/{}/cwd", at.pid())).unwrap();
    assert_eq!(
        link,
        PathBuf::from(format!("{} (deleted)", path_str(&f.dir())))
    );
    // A new folder of the same name, with the same contents, and processes in it.
    std::fs::create_dir_all(f.dir().join("sub/deeper")).unwrap();
    std::fs::write(&file, "new").unwrap();
    let new_at = Outside::start("exec sleep 1000", &f.dir(), &[], "sleep");
    let new_deep = Outside::start("exec sleep 1000", &f.dir().join("sub/deeper"), &[], "sleep");
    let new_open = Outside::start(
        "exec 3<\"$F\"; exec sleep 1000",
        Path::new("/"),
        &[("F", &file)],
        "sleep",
    );
    // A command line naming the old path names what has that name now: the new folder.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "sleep 1000; :", "sh", &path_str(&file)])
        .current_dir("/");
    let named = Outside::of(cmd, "sh");
    wait_until("the sh to start its sleep", || {
        !harness::children(named.pid()).is_empty()
    });
    for p in [&new_at, &new_deep, &new_open, &named] {
        assert_eq!(inst.what(p.pid()), None, "{}", inst.sweep());
    }
    // What lies in the deleted folder is found by its links (a folder by the `..` it still
    // has); an argument relative to a working directory there names nothing (the process holds
    // the folder anyway).
    assert_eq!(inst.what(at.pid()), what(&["cwd"]));
    assert_eq!(inst.what(deep.pid()), what(&["cwd"]));
    // A deleted file below the path reads the same whether it was the deleted folder's or the
    // new one's (removed from it while open): a holder either way (doubted: never signalled,
    // see sweep_stop).
    assert_eq!(inst.what(open.pid()), what(&["fd"]));
    std::fs::remove_file(&file).unwrap();
    assert_eq!(inst.what(new_open.pid()), what(&["fd"]));
}

/// Starts, in a mount namespace of its own, `sleep` with the folder `dir` bound at `view` (an
/// empty folder of ours), working in `view/sub` and holding `view/file` open. None where that
/// cannot be done.
fn on_a_bind_mount(dir: &Path, view: &Path) -> Option<Outside> {
    std::fs::create_dir_all(view).unwrap();
    let script = "mount --bind \"$2\" \"$1\" && cd \"$1/sub\" && exec 3<\"$1/file\" \
                  && exec sleep 1000";
    let mut cmd = harness::in_mount_ns(script, &[&path_str(view), &path_str(dir)])?;
    cmd.current_dir("/");
    Some(Outside::of(cmd, "sleep"))
}

/// Detaches `view` (`umount -l`) in the mount namespace of `pid`.
fn detach(pid: i32, view: &Path) {
    let ok = Command::new("nsenter")
        .args([
            "-t",
            &pid.to_string(),
            "-m",
            "umount",
            "-l",
            &path_str(view),
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "umount -l {} in the namespace of {pid}", view.display());
    // The kernel now reads its links from the detached mount's own root.
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(cwd, PathBuf::from("/sub"));
    let fd = std::fs::read_link(format!("/proc/{pid}/fd/3")).unwrap();
    assert_eq!(fd, PathBuf::from("/file"));
}

#[test]
fn a_folder_whose_name_ends_as_a_deleted_one_s_link_is_refused() {
    let _quiet = harness::quiet();
    // A link into a deleted folder ends in " (deleted)": such a name would make a live folder
    // look deleted, and only deleted links would match it.
    let f = Folder::new();
    let odd = f.top().join("x (deleted)");
    std::fs::create_dir(&odd).unwrap();
    let out = Run::new(["--sweep", &path_str(&odd), "--", "true"]).finish();
    assert_eq!(out.code(), Some(125), "{out}");
    assert!(
        out.stderr.contains("cannot be told from a deleted one"),
        "{out}"
    );
    let fine = f.top().join("x (deleted) 2");
    std::fs::create_dir(&fine).unwrap();
    let out = Run::new(["--sweep", &path_str(&fine), "--", "true"]).finish();
    assert_eq!(out.code(), Some(0), "{out}");
}

#[test]
fn a_folder_swept_through_a_bind_mount_detached_since_is_still_that_folder() {
    let _quiet = harness::quiet();
    if needs_root("mount --bind") {
        return;
    }
    // DIR given through a view of it (a bind mount), once as the view itself and once as a
    // folder below it; then the view is detached. vloer-run's own hold on DIR now reads as a
    // path from the view's root (`/`, `/sub`), which in our table is another folder: the root
    // filesystem, or `/sub` on it.
    let f = Folder::new();
    let view = f.top().join("view");
    let Some(mounted) = Mounted::bind(&f.dir(), &view) else {
        return;
    };
    let inst = Instance::start(&f, &[&view, &view.join("sub")]);
    let inside = Outside::start("exec sleep 1000", &f.dir().join("sub/deeper"), &[], "sleep");
    // One in the folder through the view: once the view is detached, only the mount's id
    // places it, and vloer-run's own hold on the folder keeps that id the view's.
    let through = Outside::start("exec sleep 1000", &view.join("sub/deeper"), &[], "sleep");
    let beside = Outside::start("exec sleep 1000", f.top(), &[], "sleep");
    let cwd = |pid| inst.what(pid).is_some_and(|w| w.contains(&"cwd".into()));
    assert!(cwd(inside.pid()));
    assert!(cwd(through.pid()));
    drop(mounted);
    assert!(!view.join("sub").exists(), "the view is detached");
    let sweep = inst.sweep();
    assert!(cwd(inside.pid()), "{sweep}");
    assert!(cwd(through.pid()), "{sweep}");
    assert_eq!(inst.what(beside.pid()), None, "{sweep}");
    assert_eq!(
        sweep["dirs"],
        serde_json::json!([path_str(&view), path_str(&view.join("sub"))])
    );
}

#[test]
fn a_bind_mount_of_the_folder_detached_while_held_leaves_its_holder_unverified() {
    let _alone = harness::alone();
    if needs_root("mount --bind in a mount namespace") {
        return;
    }
    // A detached mount's links read from its own root, and only its id says which mount it
    // is. Once such a mount is freed its id may be another's (one made and detached between
    // two scans), so a file a scan places in the folder through a remembered id is no proof:
    // its holder is unverified, never signalled, and never taken for holding nothing.
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let view = f.top().join("view");
    let Some(p) = on_a_bind_mount(&f.dir(), &view) else {
        return;
    };
    let holds = |pid| inst.what(pid).unwrap_or_default();
    let got = holds(p.pid());
    assert!(
        got.contains(&"cwd".into()) && got.contains(&"fd".into()),
        "{got:?}"
    );
    let why = |sweep: &serde_json::Value, pid: i32| {
        let entry = sweep["unverified"]
            .as_array()
            .and_then(|u| u.iter().find(|u| u["pid"] == pid))
            .unwrap_or_else(|| panic!("{pid} is not unverified: {sweep}"));
        assert_eq!(entry["started"], "during", "{sweep}");
        entry["why"].as_str().unwrap().to_string()
    };
    // A scan saw the mount: detached, it may still show the folder.
    detach(p.pid(), &view);
    let sweep = inst.sweep();
    assert_eq!(inst.what(p.pid()), None, "{sweep}");
    let said = why(&sweep, p.pid());
    assert!(said.contains("not proven"), "{said}");
    // One that no scan saw before it was detached: nothing tells where its files lie.
    let unseen_view = f.top().join("unseen");
    let Some(q) = on_a_bind_mount(&f.dir(), &unseen_view) else {
        return;
    };
    detach(q.pid(), &unseen_view);
    let sweep = inst.sweep();
    let said = why(&sweep, q.pid());
    assert!(said.contains("no mount table lists"), "{said}");
    // A process beside them is neither.
    let beside = Outside::start("exec sleep 1000", f.top(), &[], "sleep");
    let sweep = inst.sweep();
    assert_eq!(inst.what(beside.pid()), None, "{sweep}");
    let unverified = sweep["unverified"].as_array().cloned().unwrap_or_default();
    assert!(
        !unverified.iter().any(|u| u["pid"] == beside.pid()),
        "{sweep}"
    );
}

/// Starts the helper mapping `file` in a mount namespace of its own, after `setup` (a shell
/// line, `$1` the file) ran there, and waits until it is ready.
fn mapping_in_a_namespace(f: &Folder, setup: &str, file: &Path) -> Option<Outside> {
    let ready = f.top().join("ready-ns");
    let script = format!("{setup} && exec \"$2\" map \"$1\" \"$3\"");
    let mut cmd = harness::in_mount_ns(
        &script,
        &[&path_str(file), harness::helper(), &path_str(&ready)],
    )?;
    cmd.current_dir("/").stdin(Stdio::null());
    let p = Outside(cmd.spawn().expect("the helper"));
    assert_eq!(harness::wait_for_pids(&ready), [p.pid()]);
    Some(p)
}

fn unverified_why(sweep: &serde_json::Value, pid: i32) -> Option<String> {
    let unverified = sweep["unverified"].as_array()?;
    let entry = unverified.iter().find(|u| u["pid"] == pid)?;
    entry["why"].as_str().map(str::to_string)
}

#[test]
fn a_file_mapped_through_a_bind_mount_detached_since_a_scan_saw_it_is_not_taken_for_nothing() {
    let _alone = harness::alone();
    if needs_root("mount --bind in a mount namespace") {
        return;
    }
    // Its map reads `/mapped`, from the detached mount's own root: a name that no table places
    // in the folder, but the mount a scan saw would. The mount the file was mapped through, in
    // no table now (its id may be another mount's since), leaves its holder unverified. A file
    // mapped beside the folder is neither.
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let file = f.dir().join("mapped");
    std::fs::write(&file, [0u8; 4096]).unwrap();
    let view = f.top().join("view");
    std::fs::create_dir_all(&view).unwrap();
    let setup = format!("mount --bind {} {}", path_str(&f.dir()), path_str(&view));
    let Some(p) = mapping_in_a_namespace(&f, &setup, &view.join("mapped")) else {
        return;
    };
    let sweep = inst.sweep();
    assert!(
        inst.what(p.pid()).is_some(),
        "mapped through the view: {sweep}"
    );
    let umount = Command::new("nsenter")
        .args([
            "-t",
            &p.pid().to_string(),
            "-m",
            "umount",
            "-l",
            &path_str(&view),
        ])
        .status();
    assert!(umount.is_ok_and(|s| s.success()), "umount -l the view");
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", p.pid())).unwrap();
    assert!(maps.lines().any(|l| l.ends_with(" /mapped")), "{maps}");
    let sweep = inst.sweep();
    assert_eq!(inst.what(p.pid()), None, "{sweep}");
    let why = unverified_why(&sweep, p.pid()).unwrap_or_else(|| panic!("{sweep}"));
    assert!(why.contains("not proven"), "{why}");
    let other = f.top().join("beside");
    std::fs::write(&other, [0u8; 4096]).unwrap();
    let beside = Outside::helper(&f, &["map", &path_str(&other)]);
    let sweep = inst.sweep();
    assert_eq!(inst.what(beside.pid()), None, "{sweep}");
    assert_eq!(unverified_why(&sweep, beside.pid()), None, "{sweep}");
}

#[test]
fn a_file_mapped_through_a_mount_of_ours_that_its_namespace_dropped_holds_the_folder() {
    let _quiet = harness::quiet();
    if needs_root("mounting a tmpfs") {
        return;
    }
    // The folder is on a tmpfs of ours; a process maps a file there, then makes a namespace
    // of its own, which unmounts the tmpfs. Its map reads as a path of ours, which its own
    // table does not place on the tmpfs: the mount the file was mapped through, ours, does.
    let f = Folder::new();
    let t = f.top().join("t");
    std::fs::create_dir(&t).unwrap();
    let Some(_mounted) = Mounted::tmpfs(&t) else {
        return;
    };
    let d = t.join("d");
    std::fs::create_dir(&d).unwrap();
    let file = d.join("mapped");
    std::fs::write(&file, [0u8; 4096]).unwrap();
    let inst = Instance::start(&f, &[&d]);
    let p = Outside::helper(&f, &["map", &path_str(&file), &path_str(&t)]);
    let theirs = std::fs::read_to_string(format!("/proc/{}/mountinfo", p.pid())).unwrap();
    assert!(!theirs.contains(&path_str(&t)), "{theirs}");
    let sweep = inst.sweep();
    assert_eq!(inst.what(p.pid()), what(&["map"]), "{sweep}");
}

#[test]
fn a_process_chroot_ed_in_a_namespace_of_its_own_is_placed_by_the_whole_table_of_it() {
    let _quiet = harness::quiet();
    if needs_root("chroot in a mount namespace") {
        return;
    }
    // In a namespace of its own, the folder is bind-mounted at `view` (an empty folder in
    // ours) and a process chroot'ed into `view/jail`: its links read `view/jail`, which our
    // table does not place in the folder, and its own mountinfo shows no mount at all (none is
    // below its root). The shell it was started from shows the whole table, which places it
    // in the folder; one jailed beside the folder holds nothing. With no such shell, nothing
    // places its links: unverified, never "holds nothing".
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let jailed = |jail: &Path, ready: &Path, script: &str| -> Option<(Outside, i32)> {
        let view = f.top().join("view");
        std::fs::create_dir_all(&view).unwrap();
        std::fs::create_dir_all(ready.parent().unwrap()).unwrap();
        let args = [
            harness::helper(),
            &path_str(jail),
            &path_str(&f.dir()),
            &path_str(&view),
        ];
        let mut cmd = harness::in_mount_ns(script, &args)?;
        cmd.current_dir("/").stdin(Stdio::null());
        let p = Outside(cmd.spawn().expect("the helper"));
        let pid = harness::wait_for_pids(ready)[0];
        let theirs = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
        assert_eq!(theirs, "", "a jail on no mount of its own shows no mount");
        Some((p, pid))
    };
    let bound = "mount --bind \"$3\" \"$4\" && ";
    let view_jail = f.top().join("view/jail");
    let under_a_shell = format!("{bound}{{ \"$1\" chroot \"$2\" /ready & wait; }}");
    let Some((_inside, inside)) = jailed(&view_jail, &f.dir().join("jail/ready"), &under_a_shell)
    else {
        return;
    };
    let beside_jail = f.top().join("jail");
    let (_beside, beside) = jailed(
        &beside_jail,
        &beside_jail.join("ready"),
        "\"$1\" chroot \"$2\" /ready & wait",
    )
    .unwrap();
    let (_alone, alone) = jailed(
        &f.top().join("view/alone"),
        &f.dir().join("alone/ready"),
        &format!("{bound}exec \"$1\" chroot \"$2\" /ready"),
    )
    .unwrap();
    let sweep = inst.sweep();
    let got = inst.what(inside).unwrap_or_default();
    assert!(
        got.contains(&"cwd".into()) && got.contains(&"root".into()),
        "{sweep}"
    );
    assert_eq!(inst.what(beside), None, "{sweep}");
    assert_eq!(unverified_why(&sweep, beside), None, "{sweep}");
    assert_eq!(inst.what(alone), None, "{sweep}");
    let why = unverified_why(&sweep, alone).unwrap_or_else(|| panic!("{sweep}"));
    assert!(why.contains("chroot'ed"), "{why}");
}

#[test]
fn what_a_folder_replaced_by_a_rename_left_deleted_is_not_taken_for_the_swept_one_s() {
    let _quiet = harness::quiet();
    // `b` is emptied while a process holds its file open and another works in its subfolder;
    // then the swept folder is renamed over it (`mv -T work b`). Their links now read
    // `b/file (deleted)` and `b/sub (deleted)`, below the swept folder's new path. The
    // subfolder's `..` leads to the old `b`, not the swept folder: it holds nothing. The file
    // tells nothing: a doubted holder, never signalled (see sweep_stop). A subfolder of the
    // swept one, removed while a process works in it, leads there: held.
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let b = f.top().join("b");
    std::fs::create_dir_all(b.join("sub")).unwrap();
    std::fs::write(b.join("file"), "b's").unwrap();
    let file = Outside::start(
        "exec 3<\"$F\"; exec sleep 1000",
        Path::new("/"),
        &[("F", &b.join("file"))],
        "sleep",
    );
    let in_sub = Outside::start("exec sleep 1000", &b.join("sub"), &[], "sleep");
    let own = Outside::start("exec sleep 1000", &f.dir().join("sub/deeper"), &[], "sleep");
    std::fs::remove_file(b.join("file")).unwrap();
    std::fs::remove_dir(b.join("sub")).unwrap();
    std::fs::remove_dir(f.dir().join("sub/deeper")).unwrap();
    std::fs::rename(f.dir(), &b).unwrap();
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", in_sub.pid())).unwrap();
    assert_eq!(
        cwd,
        PathBuf::from(format!("{}/sub (deleted)", path_str(&b)))
    );
    let sweep = inst.sweep();
    assert_eq!(inst.what(in_sub.pid()), None, "{sweep}");
    assert_eq!(unverified_why(&sweep, in_sub.pid()), None, "{sweep}");
    assert_eq!(inst.what(file.pid()), what(&["fd"]), "{sweep}");
    assert_eq!(inst.what(own.pid()), what(&["cwd"]), "{sweep}");
}

#[test]
fn a_deleted_working_directory_is_told_by_its_own_way_up_on_its_own_mount() {
    let _quiet = harness::quiet();
    if needs_root("mounting a tmpfs and a bind mount") {
        return;
    }
    // The folder is the first one made on a tmpfs: inode 2, as `/` of an ext4 is. It is
    // removed and a new folder of its name made, with a subfolder a process works in, removed
    // in turn. Its way up leads to the tmpfs's root, another folder: it holds nothing (a way
    // that went on across mounts and compared inode numbers alone met `/`, inode 2, and took
    // it for the folder). A subfolder of the folder bound elsewhere, with a process in a
    // removed subfolder of it: its way up ends at the bind mount's root, which lies in the
    // folder by the mount's own folder.
    let f = Folder::new();
    let t = f.top().join("t");
    std::fs::create_dir(&t).unwrap();
    let Some(_mounted) = Mounted::tmpfs(&t) else {
        return;
    };
    let d = t.join("d");
    std::fs::create_dir_all(d.join("s1/s2")).unwrap();
    let view = f.top().join("view");
    let Some(_bound) = Mounted::bind(&d.join("s1"), &view) else {
        return;
    };
    let inst = Instance::start(&f, &[&d]);
    let bound = Outside::start("exec sleep 1000", &view.join("s2"), &[], "sleep");
    std::fs::remove_dir(d.join("s1/s2")).unwrap();
    // Renamed away and back: its own path again, its inode the same.
    let away = t.join("away");
    std::fs::rename(&d, &away).unwrap();
    std::fs::create_dir_all(d.join("sub")).unwrap();
    let namesake = Outside::start("exec sleep 1000", &d.join("sub"), &[], "sleep");
    std::fs::remove_dir(d.join("sub")).unwrap();
    std::fs::remove_dir(&d).unwrap();
    std::fs::rename(&away, &d).unwrap();
    let sweep = inst.sweep();
    assert_eq!(inst.what(namesake.pid()), None, "{sweep}");
    assert_eq!(unverified_why(&sweep, namesake.pid()), None, "{sweep}");
    assert_eq!(inst.what(bound.pid()), what(&["cwd"]), "{sweep}");
}

#[test]
fn a_file_mapped_on_a_filesystem_mounted_in_the_folder_holds_it() {
    let _quiet = harness::quiet();
    if needs_root("mounting a tmpfs") {
        return;
    }
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let m = f.dir().join("m");
    std::fs::create_dir(&m).unwrap();
    let Some(_mounted) = Mounted::tmpfs(&m) else {
        return;
    };
    let file = m.join("x");
    std::fs::write(&file, [0u8; 4096]).unwrap();
    // Its argument would name the file: the path comes through a symlink beside the folder.
    let link = f.top().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let p = Outside::helper(&f, &["map", &path_str(&link)]);
    assert_eq!(inst.what(p.pid()), what(&["map"]), "{}", inst.sweep());
}

#[test]
fn a_deleted_working_directory_on_a_filesystem_mounted_in_the_folder_holds_it() {
    let _quiet = harness::quiet();
    if needs_root("mounting a tmpfs and a bind mount") {
        return;
    }
    // A tmpfs mounted in the folder, and a folder beside it bound into it: a process works in
    // a subfolder of each, which is then removed. The way up of each ends at its mount's root,
    // whose folder lies in no swept one; the mount point above that root does (it was taken
    // for nothing, and the verdict said quiet while both worked on).
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let (m, b, beside) = (f.dir().join("m"), f.dir().join("b"), f.top().join("beside"));
    for d in [&m, &b, &beside] {
        std::fs::create_dir(d).unwrap();
    }
    let Some(_mounted) = Mounted::tmpfs(&m) else {
        return;
    };
    let Some(_bound) = Mounted::bind(&beside, &b) else {
        return;
    };
    let mut outside = Vec::new();
    for at in [&m, &b] {
        std::fs::create_dir(at.join("sub")).unwrap();
        outside.push(Outside::start(
            "exec sleep 1000",
            &at.join("sub"),
            &[],
            "sleep",
        ));
        std::fs::remove_dir(at.join("sub")).unwrap();
    }
    let sweep = inst.sweep();
    for p in &outside {
        assert_eq!(inst.what(p.pid()), what(&["cwd"]), "{sweep}");
    }
}

#[test]
fn a_removed_folder_with_a_swept_folder_s_inode_number_on_another_filesystem_is_not_it() {
    let _quiet = harness::quiet();
    if needs_root("mounting two tmpfs") {
        return;
    }
    // Two folders are swept, each on a tmpfs of its own. A process works in a subfolder of a
    // namesake of the second, removed with it before the second is made: its link reads as a
    // path below the second. The subfolder's inode number is the first one's, on the other
    // filesystem: it is neither (it was taken for the first by its number alone).
    let f = Folder::new();
    let (a, b) = (f.top().join("a"), f.top().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let (Some(_a), Some(_b)) = (Mounted::tmpfs(&a), Mounted::tmpfs(&b)) else {
        return;
    };
    let (second, sub) = (b.join("d"), b.join("d/sub"));
    std::fs::create_dir_all(&sub).unwrap();
    let ino = std::fs::metadata(&sub).unwrap().ino();
    let bystander = Outside::start("exec sleep 1000", &sub, &[], "sleep");
    std::fs::remove_dir(&sub).unwrap();
    std::fs::remove_dir(&second).unwrap();
    std::fs::create_dir(&second).unwrap();
    // tmpfs numbers the inodes of each mount from the bottom up.
    let first = (0..64).map(|i| a.join(format!("f{i}"))).find(|p| {
        std::fs::create_dir(p).unwrap();
        std::fs::metadata(p).unwrap().ino() == ino
    });
    let Some(first) = first else {
        skip("tmpfs here does not number inodes per mount: no folder with a given number");
        return;
    };
    let inst = Instance::start(&f, &[&first, &second]);
    let sweep = inst.sweep();
    assert_eq!(inst.what(bystander.pid()), None, "{sweep}");
    assert_eq!(unverified_why(&sweep, bystander.pid()), None, "{sweep}");
}

#[test]
fn a_folder_covered_by_a_bind_mount_of_a_removed_one_is_still_held_by_its_workers() {
    let _quiet = harness::quiet();
    if needs_root("a bind mount") {
        return;
    }
    // Once the folder is covered by a bind mount of a folder that is then removed, the top
    // mount at its path shows a removed folder; the processes working in the folder and in a
    // subfolder of it are on the mount beneath, which tells (they were taken for deleted by the
    // top mount, and for nothing).
    let f = Folder::new();
    let sub = f.dir().join("sub");
    let gone = f.top().join("gone");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir(&gone).unwrap();
    let inst = Instance::start(&f, &[&f.dir()]);
    let workers = [&f.dir(), &sub].map(|at| Outside::start("exec sleep 1000", at, &[], "sleep"));
    let Some(_covered) = Mounted::bind(&gone, &f.dir()) else {
        return;
    };
    std::fs::remove_dir(&gone).unwrap();
    let sweep = inst.sweep();
    // (Its argument names the folder too, wherever the top mount leads.)
    for w in &workers {
        assert_eq!(inst.what(w.pid()), what(&["cwd", "argv"]), "{sweep}");
    }
}

#[test]
fn a_way_up_that_meets_a_mount_stacked_on_a_folder_above_proves_nothing() {
    let _quiet = harness::quiet();
    if needs_root("mounting a tmpfs") {
        return;
    }
    // A process works in a subfolder of the folder's subfolder `m`, which is removed; then a
    // tmpfs is mounted on `m`. The way up `..` from the removed folder steps onto that tmpfs
    // (the kernel follows mounts on `..`), whose root and mount point are not the way the
    // process came: it is a holder no one can prove, listed (it was taken for nothing).
    let f = Folder::new();
    let (m, q) = (f.dir().join("m"), f.dir().join("m/q"));
    std::fs::create_dir_all(&q).unwrap();
    let inst = Instance::start(&f, &[&f.dir()]);
    let p = Outside::start("exec sleep 1000", &q, &[], "sleep");
    std::fs::remove_dir(&q).unwrap();
    let Some(_over) = Mounted::tmpfs(&m) else {
        return;
    };
    let sweep = inst.sweep();
    assert_eq!(inst.what(p.pid()), what(&["cwd"]), "{sweep}");
}

/// Starts `sh -c SCRIPT` in a mount namespace of its own, with `W` the folder, `V` an empty
/// folder beside it, `H` the helper and `R` a ready file, and waits until it is ready.
fn detaching_in_a_namespace(f: &Folder, script: &str) -> Option<Outside> {
    detaching_in_a_namespace_of(f, &f.dir(), script)
}

/// `detaching_in_a_namespace` with `W` the folder `w`.
fn detaching_in_a_namespace_of(f: &Folder, w: &Path, script: &str) -> Option<Outside> {
    let view = f.top().join("view");
    std::fs::create_dir_all(&view).unwrap();
    let ready = f.top().join("ready-ns");
    let _ = std::fs::remove_file(&ready);
    let mut cmd = harness::in_mount_ns(script, &[])?;
    cmd.env("W", w)
        .env("V", &view)
        .env("H", harness::helper())
        .env("R", &ready)
        .current_dir("/")
        .stdin(Stdio::null());
    let p = Outside(cmd.spawn().expect("the helper"));
    assert_eq!(harness::wait_for_pids(&ready), [p.pid()]);
    Some(p)
}

#[test]
fn a_mount_of_the_folder_made_and_detached_before_any_scan_leaves_its_holders_unverified() {
    let _alone = harness::alone();
    if needs_root("mount --bind in a mount namespace") {
        return;
    }
    // Each process bind-mounts the folder, opens a file (or goes into a subfolder, or maps a
    // file) through that mount, and detaches it (umount -l) before the run's first scan. Its
    // links then read as paths from the detached mount's root (`/f`, `/sub`), which no table
    // places in the folder, and no scan ever saw the mount: only the mount id tells. Taken at
    // their word they would be nothing, and a stop would say true while they write on.
    let f = Folder::new();
    std::fs::write(f.dir().join("f"), [0u8; 4096]).unwrap();
    let inst = Instance::start(&f, &[&f.dir()]);
    let bind = r#"mount --bind "$W" "$V" || exit 1"#;
    let scripts = [
        (
            "fd",
            format!(r#"{bind}; exec 3>>"$V/f"; umount -l "$V" && exec "$H" sleep "$R""#),
        ),
        (
            "cwd",
            format!(r#"{bind}; cd "$V/sub" && umount -l "$V" && exec "$H" sleep "$R""#),
        ),
        ("map", format!(r#"{bind}; exec "$H" map "$V/f" "$V" "$R""#)),
    ];
    for (how, script) in scripts {
        let Some(p) = detaching_in_a_namespace(&f, &script) else {
            return;
        };
        let sweep = inst.sweep();
        let why = unverified_why(&sweep, p.pid());
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("no mount table lists")),
            "{how}: {sweep}"
        );
        assert_eq!(inst.what(p.pid()), None, "{how}: {sweep}");
    }
    // The same with a tmpfs instead of the folder: that filesystem may be mounted in the folder
    // in a namespace no process shows, so its file is unverified too.
    let script = r#"mount -t tmpfs none "$V" || exit 1; exec 3>>"$V/g"; umount -l "$V" && exec "$H" sleep "$R""#;
    let Some(p) = detaching_in_a_namespace(&f, script) else {
        return;
    };
    let sweep = inst.sweep();
    assert!(unverified_why(&sweep, p.pid()).is_some(), "{sweep}");
    // A character device reached so (a container's stdin, /dev/null opened by its runtime in a
    // namespace no process here shows) writes into no folder: neither listed nor unverified.
    let script = r#"mount --bind /dev "$V" || exit 1; exec 3>"$V/null"; umount -l "$V" && exec "$H" sleep "$R""#;
    let Some(p) = detaching_in_a_namespace(&f, script) else {
        return;
    };
    let sweep = inst.sweep();
    assert_eq!(unverified_why(&sweep, p.pid()), None, "{sweep}");
    assert_eq!(inst.what(p.pid()), None, "{sweep}");
}

#[test]
fn a_file_on_an_overlay_is_not_placed_by_the_device_it_reports() {
    let _alone = harness::alone();
    if needs_root("mounting an overlay") {
        return;
    }
    // An overlay whose layers are on two filesystems reports, for a file, a device of its own
    // for each layer, neither the overlay's (the one mountinfo shows) nor the layer's: a file
    // of the folder, on a bind mount of it made and detached before any scan, must not be
    // taken for a file elsewhere by that device.
    let f = Folder::new();
    let t = f.top().join("t");
    std::fs::create_dir(&t).unwrap();
    let Some(_t) = Mounted::tmpfs(&t) else {
        return;
    };
    let (lower, up, o) = (t.join("l"), t.join("up"), t.join("o"));
    for d in [&lower, &up, &o] {
        std::fs::create_dir(d).unwrap();
    }
    let Some(_up) = Mounted::tmpfs(&up) else {
        return;
    };
    std::fs::create_dir(up.join("u")).unwrap();
    std::fs::create_dir(up.join("w")).unwrap();
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        path_str(&lower),
        path_str(&up.join("u")),
        path_str(&up.join("w"))
    );
    let ok = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &options, &path_str(&o)])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip("mount -t overlay does not work here");
        return;
    }
    let _o = Mounted(o.clone());
    let dir = o.join("d");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("f"), "x").unwrap();
    let overlay = std::fs::metadata(&o).unwrap().dev();
    assert_ne!(std::fs::metadata(dir.join("f")).unwrap().dev(), overlay);
    let inst = Instance::start(&f, &[&dir]);
    let script = r#"mount --bind "$W" "$V" || exit 1; exec 3>>"$V/f"; umount -l "$V" && exec "$H" sleep "$R""#;
    let Some(p) = detaching_in_a_namespace_of(&f, &dir, script) else {
        return;
    };
    let sweep = inst.sweep();
    let why = unverified_why(&sweep, p.pid());
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains("no mount table lists")),
        "{sweep}"
    );
}

#[test]
fn a_file_on_a_filesystem_mounted_in_the_folder_in_another_namespace_is_never_taken_for_nothing() {
    let _alone = harness::alone();
    if needs_root("mounting in a mount namespace") {
        return;
    }
    // One process mounts a tmpfs on `sub` of the folder in a namespace of its own; another, in
    // ours, opens a file there through the first one's root. Its descriptor is on a mount that
    // neither its table nor ours lists, on a device no folder is on: only the first one's
    // table, which the scan reads too, tells that that filesystem lies in the folder.
    let f = Folder::new();
    let inst = Instance::start(&f, &[&f.dir()]);
    let script = r#"mount -t tmpfs none "$W/sub" || exit 1; exec "$H" sleep "$R""#;
    let Some(p) = detaching_in_a_namespace(&f, script) else {
        return;
    };
    let through = format!("/proc/{}/root{}/sub/f", p.pid(), path_str(&f.dir()));
    let q = Outside::start(
        "exec 3>>\"$F\"; exec sleep 1000",
        Path::new("/"),
        &[("F", Path::new(&through))],
        "sleep",
    );
    let sweep = inst.sweep();
    let found = inst.what(q.pid()).is_some() || unverified_why(&sweep, q.pid()).is_some();
    assert!(found, "{sweep}");
}
