//! The manual's hand-written sections, in a mini-markup `to_roff` turns into roff.

// ---------------------------------------------------------------------------------------------
// The control protocol, kept in one place so it is easy to amend while the wire format settles.
// Mini-markup (see `to_roff`): "# " section, ": " tag of a tagged paragraph, "- " bullet, ``` for
// verbatim blocks, `code` for bold.

pub(super) const CONTROL_PROTOCOL: &str = r#"
# CONTROL PROTOCOL
`--control PATH` makes a Unix stream socket at PATH, mode 0600, removed when vloer-run exits. A path held by a live instance is refused; a stale socket is replaced. Only peers with vloer-run's uid, or root, are served (SO_PEERCRED); anyone else gets an error reply, and vloer-run logs a line.

Each connection carries one request: one line of JSON from the client, at most 64 KiB (8 MiB for an exec, which carries its whole argv and environment), then JSON reply lines from vloer-run, and the connection is closed. A client that has not sent a whole line within 5 seconds gets the error `timeout`. The socket is served by the same event loop as the run, so no client can hold up the child or another client. `vloer-run stop`, `status` and `exec` speak it; so can `socat` (with `-t` longer than the stop takes: it shuts down its sending side after the request, which vloer-run answers all the same, and by default waits only 0.5 s for the reply).
: `{"op":"stop","grace_ms":N}`
Starts a stop (reason `control`; `grace_ms` is optional and replaces `--grace`), waits for it, and replies with the verdict line.
: `{"op":"status"}`
Replies with one line, its keys in this order: `pid` (vloer-run's), `child` (`pid`, `alive`, `exit_code`, `signal`), `processes` (every live process in the scope: `pid`, `ppid`, `pgid`, `state`, `comm`, `cmdline`), `execs` (the running execs: `pid`, `argv`, `state`, `elapsed_ms`), then `scope`, `state`, with `--sweep` `sweep` (every process that holds or names a swept folder now, inside the tree or not, as in the verdict, plus `error` when the scan proves nothing), `uptime_ms` and `schema`. When /proc cannot be read, the error `proc_unreadable`.
: `{"op":"exec","argv":[...],...}`
Also `cwd`, `env` (a list of [name, value] pairs), `timeout_ms` and `tty`, all optional; sent with the client's stdin, stdout and stderr as three file descriptors (SCM_RIGHTS). The instance starts argv as its own child in a new process group (with `"tty":true`, in a new session with the passed stdin, a terminal, as its controlling terminal: `vloer-run exec` sends a new pty there when its stdin and stdout are a terminal, unless `-T`) and replies `{"exec":{"pid":N}}`; when the command ends, `{"exit":{...}}` with `status`, `exit_code`, `signal`, `reason` and `stopped`. While it runs, the client may send `{"op":"cancel"}` (with `"signal":"SIGINT"`, say: the signal the client itself received, which the exec's group then gets first, as a forwarded signal at the start of the run's stop) or close the connection: either stops the exec. The exec is also stopped when its `timeout_ms` passes (`status` 124), when the main child exits and when the run stops. Its stop is the same four steps over the exec's process (known by its pid and start time, so a process that later takes the same pid is never taken for it), its process group and session while the number still names them, and their descendants. Every exec's environment carries `VLOER_EXEC_ID=PID:N`: a descendant that left the group and lost its parent (vloer-run then adopts it) is known as the exec's when it still carries that entry; one that carries none (or another exec's) and started during the exec cannot be told from the run's own, since a process can drop or change its environment (env -i, sudo): see NOTES. What exec stops send is counted in the run's verdict. After a stop that was not confirmed, execs are refused with code `stop_unconfirmed`.
: errors
`{"error":"text","code":"..."}`, then the connection is closed. Codes: `bad_request`, `too_large`, `timeout`, `forbidden`, `unknown_op`, `stopping`, `stop_unconfirmed`, `spawn_failed`, `proc_unreadable`.

A stop by hand:
```
printf '{"op":"stop"}\n' | socat -t 30 - UNIX-CONNECT:/run/app.sock
```
"#;

// ---------------------------------------------------------------------------------------------
// The hand-written sections, in the order they appear after OPTIONS and COMMANDS.

pub(super) const RUNNING: &str = r#"
# RUNNING A COMMAND
COMMAND starts as vloer-run's child in a new process group (`--session`: a new session). When stdin is a terminal and vloer-run is in its foreground, the child's group gets the terminal, and vloer-run hands it back when the run ends.

Ctrl-C ends a loop around vloer-run exactly when it would end around the bare command. At a prompt, vloer-run leads its own job and ends by the child's SIGINT (see EXIT STATUS), so the shell ends the loop. Inside a script's foreground job (vloer-run is in the terminal's foreground group but does not lead it), the child stays in that group instead, so the script's shell gets the Ctrl-C as well, as a non-interactive shell needs in order to end its loop; vloer-run then forwards only to the run's members of that group (never to the script), and not what the terminal sent the group itself. With `--scope group`, `--session` or a `--rewrite` of INT, QUIT, TSTP or WINCH the child always gets a group of its own.

vloer-run reaps every zombie that reaches it: as PID 1 by nature, otherwise as a child subreaper (PR_SET_CHILD_SUBREAPER, always on). It sleeps in the kernel until something happens; an idle run wakes it zero times.

Every signal it can catch (all but SIGCHLD, SIGKILL and SIGSTOP) is forwarded to the child's process group (`--forward-to child`: to the child alone), after `--rewrite`. SIGTSTP, SIGTTIN and SIGTTOU are forwarded and then, unless vloer-run is PID 1, vloer-run stops itself too, so Ctrl-Z and fg work in a shell. As PID 1 with a terminal (`docker run -t`) there is no shell to resume the job, so a child stopped by Ctrl-Z is continued at once. The same where vloer-run's own process group is orphaned, as when it leads its terminal's session (`script -c`, `ssh -t host vloer-run ...`, `docker exec -it`): the kernel discards Ctrl-Z for the bare command there, so vloer-run never stops itself, and a child that the terminal stopped is continued at once.

The child starts with the signal mask and the ignored signals vloer-run started with; a signal ignored at start is not forwarded either. SIGCHLD is always at its default.

By default the child's exit ends the run and stops the rest of the tree (`--when-child-exits stop`). With `--when-child-exits wait` vloer-run waits for every descendant to exit on its own (still bounded by `--timeout`), then confirms.
"#;

pub(super) const STOP: &str = r#"
# THE STOP
A stop begins when the child exits (reason `child_exited`), when vloer-run receives a `--stop-on` signal (`signal`; the signal is forwarded first), when `--timeout` passes (`timeout`), when a control client asks (`control`), or with `--parent-death` when vloer-run's parent exits (`parent_died`). Every exit path runs it exactly once, over every live process in the scope:
1. send `--stop-signal` (default SIGTERM) to the main child's process group at once (while the child runs, in one call through its pidfd, or killpg(2) while the unreaped child holds the group id, so every member hears it at the same moment and no recycled group id is hit), and to every other process in the scope once the main child has exited (at once when it was already gone): an entrypoint's TERM trap or a supervisor stops its own services in order, and nothing it started outside its group hears from vloer-run before it has exited or the grace has run out. A large group (one whose signal took vloer-run 1 ms of CPU, about a thousand members, or of which 256 have died) is left to die first: the rest hears the signal once no member has exited for 50 ms, and a quarter of the grace after the stop began at the latest, since reading a group of thousands from /proc while it dies costs more than its exits. `--stop-order all` sends it to every process at once. A process that was just forwarded the signal that started the stop does not get it twice; when `--stop-signal` differs from that signal, it gets `--stop-signal` too;
2. wait at most `--grace` (default 5s), returning the moment the scope is empty: the wait is driven by process-exit events, not a sleep;
3. send SIGKILL to each one left; rescan and repeat, so that processes forked during the stop are caught, until the scope is empty or `--kill-timeout` (default 2s) has passed;
4. confirm from /proc: no live process left in the scope (zombies and vloer-run itself do not count) gives "stopped":true. Otherwise "stopped":false, with every survivor listed. When /proc cannot be read, or a step could not be carried out, the answer is "stopped":false with `error` saying why: no proof, no true.

The scope is read afresh from /proc at every step. `--scope tree` (the default) is every descendant of vloer-run, including processes that called setsid(), changed their process group or double-forked: vloer-run is their reaper, so it still sees them. `--scope group` is the run's processes (vloer-run's descendants) in the child's process group, as `tini -g` sees it. Only step 1's signal goes to the whole group in one call (so a process from outside the run that joined the group hears it too, as under `tini -g`); every later signal, SIGKILL included, goes to one member of the scope at a time, through its pidfd. A scan that finds no live member ends the stop early only when the kernel agrees: for the tree, vloer-run has no child left; for the group, signal 0 to it finds no process, or every process /proc shows in it joined from outside the run. Otherwise the stop looks again and waits out the grace and the kill timeout as usual.

A process is signalled through a pidfd, after its start time is checked against the scan, so a pid recycled between the scan and the signal is never hit.

With `-v` the stop is told as it happens, each line with its time since vloer-run started: what began the stop, each signal and whom it went to, why SIGKILL followed (`the grace of 5s ran out with 1 process left: SIGKILL`), each process reaped with its command, and whether the stop was confirmed and how long it took (each line after its `vloer-run: ` prefix):
```
+0.300s stopping: the timeout passed
+0.300s sent SIGTERM to the child's process group 4711
+0.801s the grace of 500ms ran out with 1 process left: SIGKILL
+0.801s sent SIGKILL to 4711 (sh)
+0.802s child 4711 (sh) ended: killed by SIGKILL
+0.802s stop confirmed after 501ms: no process of the run is left
```
"#;

pub(super) const SWEEP: &str = r#"
# THE FOLDER SWEEP
The tree answers "is anything the run started still alive?". A script that exports, archives or deletes the run's folder afterwards needs a wider answer: "can anything still change this folder?". A container started through a daemon (`docker run -v "$PWD/work":/w`), a job handed to a system service, or a runner an earlier step detached can work in the folder without descending from the run. `--sweep DIR` (repeatable; `VLOER_SWEEP`, one path) adds DIR to the question.

A process **holds** DIR when its working directory, its root (chroot), its executable, an open file descriptor (a deleted file included, and a file registered with an io_uring ring the process has, even once its own descriptor is closed) or a file-backed memory map lies at DIR or below it. It **names** DIR when an argument of its command line, resolved by text as the process would resolve it (an absolute one from its root, so a chroot'ed process's `/data` is its root's `data`; a relative one from its working directory; `.` and `..`, never above its root), is DIR or a path below it, whether or not that path exists. A process whose working directory was deleted names nothing by a relative argument, and one whose root cannot be read or was deleted names nothing at all. Matching is by filesystem identity, not by spelling: DIR reached through a bind mount, a symlink, or from another mount namespace (a container's `/w`) matches; another folder with the same name does not. vloer-run itself, its ancestors (the shell waiting for it) and kernel threads never match.

DIR is resolved once, at start (symlinks followed): one that does not exist, or whose name ends in ` (deleted)` (which a live folder's link could then not be told from a deleted one's by), is bad input (exit 125, nothing started, a `vloer-run:` line naming it). Its identity (the device and the path within the filesystem, from vloer-run's own mountinfo) is what is matched from then on: vloer-run holds the folder itself (O_PATH) for the run, so a DIR renamed during the run is swept where it went (and a new folder that took its old name is not; a DIR given through a bind mount and moved out of the folder that mount shows is a DIR whose place the kernel no longer tells, so it matches nothing from then on and every scan says so in `error`: the verdict is false), and one deleted during the run is still swept by its identity. A deleted folder has no name any more, and what is left in it was deleted too (a folder is empty when it is removed, and nothing can be made in it afterwards): the kernel's links into it read ` (deleted)`, and only such links match it (a working directory there, a subfolder removed before it, a file removed while open; an open descriptor of the folder itself also by its inode number). A process in a new folder created under the old name does not match, nor does an argument naming that path, which now names the new folder; a process whose working directory is the deleted folder holds it anyway. A link to the folder's own path that reads ` (deleted)` (a working directory, root, executable or descriptor) is told by its inode number from one into a deleted namesake (a new folder of the name, deleted in turn) and from one into a folder that DIR replaced by a rename (`mv -T DIR b` over an empty `b`: a process working in `b` then reads `b (deleted)`, DIR's own path, and does not match). What lies below a deleted namesake, a file removed from the new folder while a process holds it open, or what was removed from a folder before DIR replaced it, reads ` (deleted)` under DIR's path too and is taken for DIR's: an over-match, never a miss. A DIR renamed during the run to a name that ends in ` (deleted)` reads as a deleted one: both readings are swept. (Holding it keeps its filesystem busy for `umount` while the run lasts; `umount -l` still works.) A process **started during the run** is one whose start time (`/proc/PID/stat`, in clock ticks) is later than the tick in which the run began (when vloer-run resolved DIR, not when its process was forked, which for `exec vloer-run` at the end of a script is when the script began). A process of that same tick cannot be told apart and counts as started before: it is never signalled.

Within every stop, from its step 1 on and on every way the run ends, a match that started during the run and that vloer-run may signal (its own uid, or vloer-run is root) is stopped with the tree's protocol: `--stop-signal`, the grace, SIGKILL, rescans every 20 ms until none is found (a match the run's own scope covers is left to the run's stop, so nothing gets a signal twice). A match that started before the run, or that vloer-run may not signal, is never signalled: it is listed, and the verdict is false. vloer-run's own control clients (a `vloer-run stop` that names a socket in DIR) and the processes waiting for them are never matches. `stopped` is true only when the tree is confirmed and two consecutive scans, made after the tree's own stop is over, find no holder and no namer.

A process that cannot be looked at is **unverified**: a read that /proc refused or that did not answer in time, or a link whose mount nothing tells (below); as non-root, another user's `/proc/PID/cwd`, `fd/` and `maps` answer EACCES, so every process of another user (root's daemons too) is listed under `unverified` with the reason. One that started during the run makes `stopped` false; one that started before does not, unless `--sweep-strict`. A non-root run is honest rather than convenient: a root process that something else starts during the run cannot be inspected, so the verdict is false. A /proc mounted with `subset=pid`, or with `hidepid` while vloer-run is not root (root sees every process), may hide processes: the sweep then proves nothing (`stopped` false, with `error`).

A scan never waits on a hung filesystem (a FUSE server that stopped answering, an NFS server that is gone): identities come from /proc alone, from the link texts of `cwd`, `root`, `exe` and `fd/N`, the mount id in `fdinfo`, the paths of the files registered with an io_uring ring in the ring's `fdinfo`, the device, inode and path in `maps`, and each mount namespace's `mountinfo`, never from a stat(2) that would reach the file's server. A map's path reads as a link's does (from a detached mount's own root, in vloer-run's terms for a mount the process's namespace does not list), so a mapped file on a swept folder's device is placed by the mount it was mapped through: the `fdinfo` of a descriptor vloer-run opens (O_PATH) through the map's link in `map_files/` gives it, as root; a run that is not root opens the map's path instead, and takes that mount only when the file there has the mapped inode (else the process is unverified, and a deleted mapped file's path, which cannot be opened, is taken as it reads). Each mapped file is looked up once per scan, by device and inode: a file lies where it lies whichever process maps it. The link also gives the name as it is, where `maps` writes a newline in a name as `\012`, as it writes those four characters (where the two readings disagree and no link tells, the process is unverified). The command line and maps, whose reads take the process's memory lock, and these lookups (opening a `map_files/` link takes it too; a path may lead through a hung server) are made on a helper thread and given up after 200 ms (the process is then unverified).

A scan is a walk through /proc, not a snapshot, so it proves only what it can show it saw. It lists /proc, reads every process listed, and lists /proc again until a listing shows no process it has not read yet (at most 16 listings). /proc lists processes in pid order and a new process gets a higher pid than every earlier one, so a process that keeps the folder held while it forks away from its pid (a child in the folder, the parent gone) is always in the last listing, and was read while alive. A listing knows a process by its pid together with the inode number /proc gives its entry, which is new for every new process: one that takes a pid the scan has already read, as another process, is new and is read too. A process's threads are followed the same way: its thread list is read again until it shows no thread not yet looked at (at most 16 times), so a file table or working directory that only ever lives in a thread newer than the last list (each thread starts the next, which shares it, and exits) is read, or the scan does not count. The pid order holds until the kernel's pid counter comes round to the bottom (at `pid_max`), so a scan also reads the counter (/proc/loadavg, /proc/stat) before and after, and one during which it came round, or could have, does not count; nor does one whose listings kept showing new processes. The stop then scans again every 20 ms, until the kill timeout: a process outside the tree that forks away from its pid faster than a scan can follow makes the verdict false, with the reason in `error`, unless one of the stop's signals ends it (then two settled, clean scans follow). `vloer-run status` makes up to three scans for one settled answer, or says why there is none.

Every thread of a process is looked at, however many it has: a thread that unshared its working directory and root (unshare(CLONE_FS)) or its file table (unshare(CLONE_FILES)) holds what its own links show, and once the main thread has exited only the other threads' links show anything (they are then read in a live thread's mount namespace, the main thread's being gone). A thread that made a mount namespace of its own (unshare(CLONE_NEWNS)) reads its links in a table the sweep does not read: its process is unverified. kcmp(2) tells which threads share what was already read (the main thread's, or the first live thread's), so each distinct file table and working directory is read once and a thread that shares them costs two system calls. Where kcmp is unavailable (a kernel built without it, or a seccomp profile that refuses it, as a container's default profile does without CAP_SYS_PTRACE), every thread's descriptors, working directory and root are read: the same answer, slower for processes with many threads.

`vloer-run status` lists the current holders and namers, inside the tree or not, under `sweep`, in the form of the verdict's `sweep` field.

A file registered with an io_uring ring (io_uring_register(2), a "fixed file") needs no descriptor of its own: a process may open a file in DIR, register it, close the descriptor and go on writing through the ring, and /proc/PID/fd then shows only the ring. The ring's `fdinfo` lists its registered files, and the sweep reads it: such a process holds DIR as `fd`. The kernel prints that list only when it can take the ring's lock at once, so a ring that stays busy through a few reads in a row, a kernel that does not list the files (before Linux 5.6), or one that names them without their paths (before about 6.14) leaves the process unverified (for one started during the run, the verdict is false), never taken for one that holds nothing. No mount is shown for them: a file is in DIR when the top mount at its path puts it there; one that only a mount beneath the top one would put there (something was mounted over DIR or a folder above it) leaves the process unverified.

A mount detached with `umount -l` is in no mount table any more, and the kernel reads a link into it as a path from the mount's own root (`/f` for a file at the top of a bind mount of DIR), which names another file. Its mount id stays: `fdinfo` gives it for a descriptor, and for a working directory, root or executable the `fdinfo` of a descriptor that vloer-run opens through the link (O_PATH, which asks the filesystem nothing). So every scan remembers, for the whole run, each mount it sees showing DIR or part of it (in its own mount table, from the start, and in every other namespace's it reads): its id, its device and the folder of the filesystem mounted there. A link on a remembered mount that is in no table now is placed under that mount's folder, on its device. A placement in DIR leaves its process unverified, never signalled: a detached mount is freed once nothing holds a file on it, and a mount made later may then take its id, so the placement is no proof. The exception is the mount vloer-run reached DIR through: its own hold keeps that mount alive, and its id its own, for the whole run. A placement outside DIR is taken as it reads. A link that could lie in DIR (by its path, or placed under a remembered mount that is gone) but whose mount is in no table and was never seen (a bind mount of DIR made and detached while no scan looked) leaves its process unverified, with the reason. Only such links cost more than their text: a mount that is still in the namespace that showed it (a container's view of DIR) is not taken for a detached one. Scans are made only within the stop and for `status`, so a mount of DIR made and detached between two of them was never seen: a link on it is noticed only where its text could lie in DIR (through a mount in a table, or under a remembered mount that is gone), and its process is then unverified; where its text looks like no path in DIR, it is not seen. A working directory, root or executable whose path the top mount there does not place in DIR, but a mount beneath it would (a filesystem mounted over DIR or a folder above it after the process went there), is judged by the mount it was reached through, read the same way. A mount that shows DIR in another namespace (a container's view of it) is remembered too: the kernel writes a link into a mount of a namespace that is not the holder's in that namespace's terms (a file opened through `/proc/PID/root` of a process of the other namespace), so a descriptor whose path that mount would place in DIR is judged by its mount id; the scan during which such a mount is first seen does not count, since a process looked at before it was read may hold a file through it. (DIR given as a path through a bind mount that is detached later): the mount it was reached through is known from the start, so DIR stays the folder it was. A descriptor on a mount of ours that the process's own namespace does not list (opened before it made a namespace of its own, or kept after its namespace unmounted that filesystem) reads as a path of ours, and is judged in our table.

What the sweep cannot see yet, outside the run's tree (inside it, the tree's own proof holds): a descriptor on a bind mount of DIR made and detached between two scans, whose link (read from that mount's root) names no path in DIR; and an io_uring ring the process keeps with no descriptor of its own (one it registered with the ring itself, or one only mapped in its memory) is not read. What no scan of /proc can show: a descriptor in flight in a unix socket message (SCM_RIGHTS) that no process has received yet; a process that writes to DIR by path between scans and keeps nothing open in it (the proof holds at the moments of the scans); and descriptors passed back and forth between two processes (pidfd_getfd(2)) faster than a scan reads them. A writer through an overlay filesystem whose upper or work directory is in DIR (a container whose writable layer was put there) holds files of the overlay, not of DIR, and the overlay's mountinfo line names its layers only in its options: it is not seen yet.
"#;

pub(super) const VERDICT: &str = r#"
# THE VERDICT
One JSON object on one line, at most 4096 bytes (a Kubernetes termination message), written once per run when the run ends; `vloer-run stop` prints it too. `--verdict` picks where: stderr (the default), `-` for stdout, `off`, or a file. A regular file is written to a temporary file and renamed into place, so no reader sees half of it; a path that is a symbolic link is followed, and its target replaced, never the link. A FIFO or a character device such as /dev/termination-log gets a single write. /dev/fd/N, /proc/self/fd/N, /dev/stdout and /dev/stderr name the descriptor vloer-run inherited, and the verdict is written to that descriptor in a single write, never by opening the path again: with stdout redirected to a file (> or >>), it comes after the child's output; a socket (a journal, a socketpair) works as with `-`. A descriptor above 2 that is not open when vloer-run starts is bad input. Fields (schema 1):
: `stopped`
true only when the confirmation found no live process in the scope.
: `survivors`
[{pid, ppid, pgid, sid, state, comm}] of the live processes left in the scope.
: `survivors_omitted`
how many survivors were left out to stay within 4096 bytes (absent when 0).
: `reason`
child_exited, signal, timeout, control or parent_died; `error` when vloer-run itself failed after the child started (the `error` field says how), so that no other reason is claimed.
: `signal`
the signal that started the stop, for reason signal.
: `child`
{pid, exit_code, signal} of the main child; exit_code or signal is null.
: `exit_code`
vloer-run's own exit status.
: `scope`
tree or group.
: `sent`
how many times vloer-run sent each signal, e.g. {"SIGTERM":3,"SIGKILL":1}: one for each process signalled on its own, and one for the call that reached the child's whole process group (step 1 while the child runs), as the kernel does not say how many processes such a call reached.
: `reaped`
zombies reaped during the run besides the main child.
: `elapsed_ms`
how long the stop took.
: `error`
present when something kept vloer-run from proving the stop.
: `sweep`
with `--sweep` (absent without): {dirs, holders: [{pid, comm, uid, started, what}], unverified: [{pid, comm, started, why}], omitted}. `started` is before or during (the run); `what` lists how the process matched: cwd, root, exe, fd, map, argv. `holders` lists every match the stop found, stopped by it or not (one still alive at the end is a survivor too); `omitted` counts entries left out to stay within 4096 bytes.
: `schema`
1.

A run stopped by SIGTERM (`docker stop`), shown over several lines:
```
{"stopped":true,"survivors":[],"reason":"signal","signal":"SIGTERM",
 "child":{"pid":7,"exit_code":null,"signal":"SIGTERM"},
 "exit_code":143,"scope":"tree","sent":{"SIGTERM":1},"reaped":2,
 "elapsed_ms":4,"schema":1}
```
A stop that could not be confirmed:
```
{"stopped":false,"survivors":[{"pid":31,"ppid":1,"pgid":31,
 "sid":31,"state":"D","comm":"flush"}],"reason":"child_exited",
 "child":{"pid":7,"exit_code":0,"signal":null},"exit_code":125,
 "scope":"tree","sent":{"SIGKILL":1,"SIGTERM":1},"reaped":0,
 "elapsed_ms":7004,"schema":1}
```
"#;

pub(super) const EXIT_STATUS: &str = r#"
# EXIT STATUS
: the child's
the child exited and the stop was confirmed.
: 128+N
the child was killed by signal N and the stop was confirmed.
: 124
the run was stopped by `--timeout` and the stop was confirmed (with `--preserve-status`: the child's, as above).
: 125
vloer-run itself failed (bad usage, a control socket it cannot make), or the stop was not confirmed.
: 126
COMMAND was found but could not be executed.
: 127
COMMAND was not found.

COMMAND is looked up in PATH as execvp(3) looks it up, and a file the kernel cannot execute as a program (a script without `#!`) is run with /bin/sh, as glibc's execvp, tini and dumb-init run it, whichever libc vloer-run was built with.

When the child was killed by signal N and the stop was confirmed, vloer-run writes the verdict (exit_code 128+N) and then ends by signal N itself, with core dumps off, as GNU timeout does: a shell shows 128+N, Python sees -N, and a loop ends on Ctrl-C as around the bare command. As PID 1, where the kernel would ignore the signal, and after a `--timeout` stop, it exits 128+N; an unconfirmed stop is always 125. Only a signal from outside vloer-run's own stop is passed on this way (the child's own doing, another process, a signal vloer-run forwarded): when the child died of a signal the stop sent on its own account (the `--stop-signal` of a control, child-exit or parent-death stop, or the SIGKILL after the grace), vloer-run exits 128+N as a plain exit, as GNU timeout does after it killed, so that a shell does not report vloer-run as `Killed`. `vloer-run exec` ends the same way as its command.

`--success-exit CODE` maps the child's CODE to 0 (a JVM exits 143 on SIGTERM). `vloer-run stop` exits 0 when the verdict says "stopped":true, 1 when false, 125 when it cannot ask. `vloer-run exec` exits with the command's status, 124 when its `--timeout` passes, 125 when it cannot ask.
"#;

pub(super) const FORMATS: &str = r#"
# DURATIONS AND SIGNALS
A DURATION is 500ms, 5s, 1m30s, or a plain number of seconds (2.5). A SIG is a name with or without SIG, in any case (TERM, SIGTERM, sigterm), RTMIN+N or RTMAX-N (numbered as glibc, kill -l, docker and podman number them: RTMIN is 34, RTMIN+3 is 37, RTMAX is 64, whichever libc vloer-run was built with), or a number.
"#;

pub(super) const LIMITS: &str = r#"
# LIMITS
- Step 1's signal, one call to the child's process group, reaches whoever is in the group at that moment, and the kernel does not say how many: the verdict's `sent` counts the call once. A member forked within the same clock tick (10 ms) after the call (by a TERM handler, say), or one that moved into the group after the call but before the scan that follows it, is taken as reached and not signalled again: it gets SIGKILL after the grace if it is still there. A member forked later gets the stop signal on its own. Like every signal forwarded to the group, it also reaches a process from outside the run that joined the group (setpgid()).
- `--scope group` covers the child's process group only, within vloer-run's tree: a process that leaves it (setsid(), setpgid()) is neither signalled nor checked, and "stopped":true says nothing about it. A process from outside the run that joins the group hears step 1's signal to the group (the kernel delivers it to every member), but is never signalled on its own, never SIGKILLed, and does not count in the verdict.
- Processes that are not descendants of vloer-run are not in the scope: those started with `docker exec` or `kubectl exec`, for example. Start them with `vloer-run exec` to make them part of the run.
- Some processes cannot be stopped, and are then reported as survivors with "stopped":false and exit 125: a process in uninterruptible sleep (state D, e.g. blocked on a dead NFS server) that outlasts `--kill-timeout`, and a process of another user that vloer-run has no permission to signal (SIGKILL fails with EPERM; a setuid program, or vloer-run running unprivileged).
- Where the kernel has no pidfds (before Linux 5.3, or under a seccomp profile that refuses pidfd_open), a process is signalled with kill(2) after the same start-time check, which narrows the pid-recycling window but does not close it, and the stop rescans /proc every 20 ms instead of waiting for exit events; each process still gets each signal once per stop.
- A stop holds a pidfd for each process it follows. Under a hard limit on open descriptors (RLIMIT_NOFILE) below the size of the tree, it keeps enough descriptors free to read /proc: past that, a process is still signalled through a pidfd, which is closed once it is signalled, and is then followed by its pid and start time, with a rescan every 20 ms, as without pidfds. vloer-run raises its own soft limit to the hard one; the child starts with the limits vloer-run was given.
- Under `--scope tree` the proof is the kernel's: once every zombie is reaped, waitid(2) answering "no child" means no descendant exists. /proc only names survivors; when the kernel still shows a child that /proc does not list (a hidepid mount, for example), the verdict is "stopped":false with an error. Under `--scope group` the kernel answers for the whole group (signal 0), and /proc names its members and tells them from outsiders; when the kernel shows the group alive but /proc lists none of its members, the verdict is "stopped":false with an error. For an exec's stop, the proof is a walk of /proc, whose children lists proc(5) calls possibly incomplete while siblings exit. Under `--scope group` and for an exec's stop, a /proc mounted with `hidepid` while vloer-run is not root hides processes that only /proc could name: the verdict is "stopped":false with an error that says so. /proc is proven a procfs of vloer-run's own pid namespace once (when the child starts, or at the first scan if it is not mounted yet) and held open: what the child mounts over /proc later, or unmounts, changes nothing. The main child's /proc files are opened (and kept open) as soon as it is started, so under hidepid vloer-run may still see a main child that went on to run a setuid program, and name it as a survivor; whether it can depends on which came first. Either way the verdict is "stopped":false while it lives.
- A process is alive while any of its threads is: one whose main thread called pthread_exit shows state Z in /proc and is still signalled and waited for.
- An orphan vloer-run adopted during an exec, without that exec's `VLOER_EXEC_ID` in its environment (it dropped or changed it, it is the run's own or another exec's, or its environment cannot be read: another user's process, an undumpable one, a read blocked on the process's memory lock for 200 ms), may be the exec's or the run's: the exec's stop neither signals it nor calls the exec stopped (the client exits 125, and new execs are refused); the run's own stop still covers it.
- As PID 1 of a pid namespace, vloer-run's own exit makes the kernel SIGKILL every process left in the namespace; the verdict is written before that.
- SIGKILL to vloer-run (`kill -9`, the OOM killer, `docker kill` where vloer-run is not PID 1) cannot be caught: no stop runs and no verdict is written, and the caller sees status 137. The kernel sends the main child and every exec their parent-death signal (`--child-pdeathsig`, default SIGKILL, 0 for none), so they do not silently outlive vloer-run; their descendants are orphaned to the next subreaper or init and live on unless they end with their parent. The kernel drops the parent-death signal when the child executes a set-user-ID, set-group-ID or file-capability program.
- A process held in a ptrace stop by a tracer outside the run that never resumes it cannot end, even after SIGKILL: it is reported as a survivor (state t). One that has ended while such a tracer holds it is a zombie that only the tracer may collect: vloer-run cannot reap it, so under `--scope tree` it is reported as a survivor too (state Z), and the verdict is "stopped":false.
- With `-v` and stderr a pipe or a socket, a -v line that stderr cannot take at once (its reader is behind) is left out, and the next line that gets through says how many were: vloer-run never waits for a reader of its -v lines, which would hold back its reaping and its stop. Errors, warnings and a verdict on stderr are never left out; they wait for the reader. A terminal or a file takes every line: `-v 2>FILE` keeps them all.
- When stderr is closed at start and the verdict goes there (the default), or stdout with `--verdict -`, the verdict cannot be delivered: the tree is still stopped and confirmed, `vloer-run stop` clients still get the verdict (and exit 125), and the exit status is 125. Use `--verdict FILE` in such places.
"#;

pub(super) const SEE_ALSO: &str = r#"
# SEE ALSO
tini(1), dumb-init(1), timeout(1), kill(1), signal(7), pid_namespaces(7), PR_SET_CHILD_SUBREAPER in prctl(2)
"#;
