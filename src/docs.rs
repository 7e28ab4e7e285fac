//! The manual page and the shell completions, generated from the one clap definition (cli.rs) plus
//! the hand-written sections below, and checked against the committed `man/` and `completions/`.
//!
//! When a test here says a file is out of date, regenerate every file with [`BLESS`] and commit
//! the result. Test-only: clap_mangen and clap_complete stay out of the shipped binary.

use crate::cli::Cli;
use clap::CommandFactory;
use clap_complete::Shell;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The one command that rewrites every generated file.
const BLESS: &str = "VLOER_BLESS=1 cargo test --bin vloer-run docs::";

// ---------------------------------------------------------------------------------------------
// The control protocol, kept in one place so it is easy to amend while the wire format settles.
// Mini-markup (see `to_roff`): "# " section, ": " tag of a tagged paragraph, "- " bullet, ``` for
// verbatim blocks, `code` for bold.

const CONTROL_PROTOCOL: &str = r#"
# CONTROL PROTOCOL
`--control PATH` makes a Unix stream socket at PATH, mode 0600, removed when vloer-run exits. A path held by a live instance is refused; a stale socket is replaced. Only peers with vloer-run's uid, or root, are served (SO_PEERCRED); anyone else gets an error reply, and vloer-run logs a line.

Each connection carries one request: one line of JSON from the client, at most 64 KiB (8 MiB for an exec, which carries its whole argv and environment), then JSON reply lines from vloer-run, and the connection is closed. A client that has not sent a whole line within 5 seconds gets the error `timeout`. The socket is served by the same event loop as the run, so no client can hold up the child or another client. `vloer-run stop`, `status` and `exec` speak it; so can `socat` (with `-t` longer than the stop takes: it shuts down its sending side after the request, which vloer-run answers all the same, and by default waits only 0.5 s for the reply).
: `{"op":"stop","grace_ms":N}`
Starts a stop (reason `control`; `grace_ms` is optional and replaces `--grace`), waits for it, and replies with the verdict line.
: `{"op":"status"}`
Replies with one line: vloer-run's pid, the child, every live process in the scope (pid, ppid, pgid, state, command line) and the running execs.
: `{"op":"exec","argv":[...],...}`
Also `cwd`, `env` (a list of [name, value] pairs), `timeout_ms` and `tty`, all optional; sent with the client's stdin, stdout and stderr as three file descriptors (SCM_RIGHTS). The instance starts argv as its own child in a new process group (with `"tty":true`, in a new session with the passed stdin, a terminal, as its controlling terminal: `vloer-run exec` sends a new pty there when its stdin and stdout are a terminal, unless `-T`) and replies `{"exec":{"pid":N}}`; when the command ends, `{"exit":{...}}` with `status`, `exit_code`, `signal`, `reason` and `stopped`. While it runs, the client may send `{"op":"cancel"}` or close the connection: either stops the exec. The exec is also stopped when its `timeout_ms` passes (`status` 124), when the main child exits and when the run stops. Its stop is the same four steps over the exec's process, its process group and their descendants; every exec's environment carries `VLOER_EXEC_ID=PID:N`, so that a descendant which left the group and lost its parent (vloer-run then adopts it) is still known as the exec's. What exec stops send is counted in the run's verdict. After a stop that was not confirmed, execs are refused with code `stop_unconfirmed`.
: errors
`{"error":"text","code":"..."}`, then the connection is closed. Codes: `bad_request`, `too_large`, `timeout`, `forbidden`, `unknown_op`, `stopping`, `stop_unconfirmed`, `spawn_failed`.

A stop by hand:
```
printf '{"op":"stop"}\n' | socat -t 30 - UNIX-CONNECT:/run/app.sock
```
"#;

// ---------------------------------------------------------------------------------------------
// The hand-written sections, in the order they appear after OPTIONS and COMMANDS.

const RUNNING: &str = r#"
# RUNNING A COMMAND
COMMAND starts as vloer-run's child in a new process group (`--session`: a new session). When stdin is a terminal and vloer-run is in its foreground, the child's group gets the terminal, and vloer-run hands it back when the run ends.

Ctrl-C ends a loop around vloer-run exactly when it would end around the bare command. At a prompt, vloer-run leads its own job and ends by the child's SIGINT (see EXIT STATUS), so the shell ends the loop. Inside a script's foreground job (vloer-run is in the terminal's foreground group but does not lead it), the child stays in that group instead, so the script's shell gets the Ctrl-C as well, as a non-interactive shell needs in order to end its loop; vloer-run then forwards only to the run's members of that group (never to the script), and not what the terminal sent the group itself. With `--scope group`, `--session` or a `--rewrite` of INT, QUIT, TSTP or WINCH the child always gets a group of its own.

vloer-run reaps every zombie that reaches it: as PID 1 by nature, otherwise as a child subreaper (PR_SET_CHILD_SUBREAPER, always on). It sleeps in the kernel until something happens; an idle run wakes it zero times.

Every signal it can catch (all but SIGCHLD, SIGKILL and SIGSTOP) is forwarded to the child's process group (`--forward-to child`: to the child alone), after `--rewrite`. SIGTSTP, SIGTTIN and SIGTTOU are forwarded and then, unless vloer-run is PID 1, vloer-run stops itself too, so Ctrl-Z and fg work in a shell. As PID 1 with a terminal (`docker run -t`) there is no shell to resume the job, so a child stopped by Ctrl-Z is continued at once.

The child starts with the signal mask and the ignored signals vloer-run started with; a signal ignored at start is not forwarded either. SIGCHLD is always at its default.

By default the child's exit ends the run and stops the rest of the tree (`--when-child-exits stop`). With `--when-child-exits wait` vloer-run waits for every descendant to exit on its own (still bounded by `--timeout`), then confirms.
"#;

const STOP: &str = r#"
# THE STOP
A stop begins when the child exits (reason `child_exited`), when vloer-run receives a `--stop-on` signal (`signal`; the signal is forwarded first), when `--timeout` passes (`timeout`), when a control client asks (`control`), or with `--parent-death` when vloer-run's parent exits (`parent_died`). Every exit path runs it exactly once, over every live process in the scope:
1. send `--stop-signal` (default SIGTERM) to the main child's process group at once, and to every other process in the scope once the main child has exited (at once when it was already gone): an entrypoint's TERM trap or a supervisor stops its own services in order, and nothing it started outside its group hears from vloer-run before it has exited or the grace has run out. `--stop-order all` sends it to every process at once. A process that was just forwarded the signal that started the stop does not get it twice; when `--stop-signal` differs from that signal, it gets `--stop-signal` too;
2. wait at most `--grace` (default 5s), returning the moment the scope is empty: the wait is driven by process-exit events, not a sleep;
3. send SIGKILL to each one left; rescan and repeat, so that processes forked during the stop are caught, until the scope is empty or `--kill-timeout` (default 2s) has passed;
4. confirm from /proc: no live process left in the scope (zombies and vloer-run itself do not count) gives "stopped":true. Otherwise "stopped":false, with every survivor listed. When /proc cannot be read, or a step could not be carried out, the answer is "stopped":false with `error` saying why: no proof, no true.

The scope is read afresh from /proc at every step. `--scope tree` (the default) is every descendant of vloer-run, including processes that called setsid(), changed their process group or double-forked: vloer-run is their reaper, so it still sees them. `--scope group` is the child's process group alone, as `tini -g` sees it.

A process is signalled through a pidfd, after its start time is checked against the scan, so a pid recycled between the scan and the signal is never hit.
"#;

const VERDICT: &str = r#"
# THE VERDICT
One JSON object on one line, at most 4096 bytes (a Kubernetes termination message), written once per run when the run ends; `vloer-run stop` prints it too. `--verdict` picks where: stderr (the default), `-` for stdout, `off`, or a file. A regular file is written to a temporary file and renamed into place, so no reader sees half of it; a FIFO, a character device such as /dev/termination-log, or /dev/fd/N gets a single write. Fields (schema 1):
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
how many processes got each signal, e.g. {"SIGTERM":3,"SIGKILL":1}.
: `reaped`
zombies reaped during the run besides the main child.
: `elapsed_ms`
how long the stop took.
: `error`
present when something kept vloer-run from proving the stop.
: `schema`
1.

A run stopped by SIGTERM (`docker stop`), shown over several lines:
```
{"stopped":true,"survivors":[],"reason":"signal","signal":"SIGTERM",
 "child":{"pid":7,"exit_code":null,"signal":"SIGTERM"},
 "exit_code":143,"scope":"tree","sent":{"SIGTERM":3},"reaped":2,
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

const EXIT_STATUS: &str = r#"
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

When the child was killed by signal N and the stop was confirmed, vloer-run writes the verdict (exit_code 128+N) and then ends by signal N itself, with core dumps off, as GNU timeout does: a shell shows 128+N, Python sees -N, and a loop ends on Ctrl-C as around the bare command. As PID 1, where the kernel would ignore the signal, and after a `--timeout` stop, it exits 128+N; an unconfirmed stop is always 125. `vloer-run exec` ends the same way as its command.

`--success-exit CODE` maps the child's CODE to 0 (a JVM exits 143 on SIGTERM). `vloer-run stop` exits 0 when the verdict says "stopped":true, 1 when false, 125 when it cannot ask. `vloer-run exec` exits with the command's status, 124 when its `--timeout` passes, 125 when it cannot ask.
"#;

const FORMATS: &str = r#"
# DURATIONS AND SIGNALS
A DURATION is 500ms, 5s, 1m30s, or a plain number of seconds (2.5). A SIG is a name with or without SIG, in any case (TERM, SIGTERM, sigterm), RTMIN+N or RTMAX-N, or a number.
"#;

const LIMITS: &str = r#"
# LIMITS
- `--scope group` covers the child's process group only, within vloer-run's tree: a process that leaves it (setsid(), setpgid()) is neither signalled nor checked, nor is a process from outside the run that joins it, and "stopped":true says nothing about them.
- Processes that are not descendants of vloer-run are not in the scope: those started with `docker exec` or `kubectl exec`, for example. Start them with `vloer-run exec` to make them part of the run.
- Some processes cannot be stopped, and are then reported as survivors with "stopped":false and exit 125: a process in uninterruptible sleep (state D, e.g. blocked on a dead NFS server) that outlasts `--kill-timeout`, and a process of another user that vloer-run has no permission to signal (SIGKILL fails with EPERM; a setuid program, or vloer-run running unprivileged).
- Where the kernel has no pidfds (before Linux 5.3, or under a seccomp profile that refuses pidfd_open), a process is signalled with kill(2) after the same start-time check, which narrows the pid-recycling window but does not close it, and the stop rescans /proc every 20 ms instead of waiting for exit events; each process still gets each signal once per stop.
- Under `--scope tree` the proof is the kernel's: once every zombie is reaped, waitid(2) answering "no child" means no descendant exists. /proc only names survivors; when the kernel still shows a child that /proc does not list (a hidepid mount, for example), the verdict is "stopped":false with an error. Under `--scope group` and for an exec's stop, the proof is a walk of /proc, whose children lists proc(5) calls possibly incomplete while siblings exit.
- A process is alive while any of its threads is: one whose main thread called pthread_exit shows state Z in /proc and is still signalled and waited for.
- An exec's descendants that lost their parent are known by `VLOER_EXEC_ID` in their environment. Where that cannot be read (another user's process, an undumpable one, a read blocked on the process's memory lock for 200 ms), the exec's stop neither signals it nor calls the exec stopped (the client exits 125); the run's own stop still covers it.
- As PID 1 of a pid namespace, vloer-run's own exit makes the kernel SIGKILL every process left in the namespace; the verdict is written before that.
- SIGKILL to vloer-run (`kill -9`, the OOM killer, `docker kill` where vloer-run is not PID 1) cannot be caught: no stop runs and no verdict is written, and the caller sees status 137. The kernel sends the main child and every exec their parent-death signal (`--child-pdeathsig`, default SIGKILL, 0 for none), so they do not silently outlive vloer-run; their descendants are orphaned to the next subreaper or init and live on unless they end with their parent. The kernel drops the parent-death signal when the child executes a set-user-ID, set-group-ID or file-capability program.
- A process held in a ptrace stop by a tracer outside the run that never resumes it cannot end, even after SIGKILL: it is reported as a survivor (state t).
- When stderr is closed at start and the verdict goes there (the default), or stdout with `--verdict -`, the verdict cannot be delivered: the tree is still stopped and confirmed, `vloer-run stop` clients still get the verdict (and exit 125), and the exit status is 125. Use `--verdict FILE` in such places.
"#;

const SEE_ALSO: &str = r#"
# SEE ALSO
tini(1), dumb-init(1), timeout(1), kill(1), signal(7), pid_namespaces(7), PR_SET_CHILD_SUBREAPER in prctl(2)
"#;

// ---------------------------------------------------------------------------------------------
// Generation.

/// The command as the documentation shows it. The `.TH` line carries the package version alone:
/// the git commit in `--version` would make every commit a change to the manual.
fn command() -> clap::Command {
    let mut cmd = Cli::command().version(env!("CARGO_PKG_VERSION"));
    cmd.build();
    cmd
}

/// Renders one clap_mangen section; every render repeats roff's apostrophe preamble, which only the
/// first section keeps.
fn section(
    render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
    keep_preamble: bool,
) -> String {
    let mut buf = Vec::new();
    render(&mut buf).expect("rendering to a Vec cannot fail");
    let text = String::from_utf8(buf).expect("clap_mangen writes UTF-8");
    if keep_preamble {
        return text;
    }
    let mut lines = text.lines().peekable();
    let mut out = String::new();
    while let Some(l) = lines.peek() {
        if l.starts_with(".ie \\n(.g .ds Aq") || l.starts_with(".el .ds Aq") {
            lines.next();
        } else {
            break;
        }
    }
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The manual page, `man/vloer-run.1`.
pub fn man_page() -> String {
    let cmd = command();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = String::new();
    out.push_str(&format!(
        ".\\\" Generated from src/cli.rs and src/docs.rs; do not edit. Regenerate: {BLESS}\n"
    ));
    out += &section(|w| man.render_title(w), true);
    out += &section(|w| man.render_name_section(w), false);
    out.push_str(".SH SYNOPSIS\n\\fBvloer\\-run\\fR [\\fIOPTIONS\\fR] [\\fB\\-\\-\\fR] \\fICOMMAND\\fR [\\fIARG\\fR]...\n");
    for sub in cmd.get_subcommands() {
        out.push_str(".br\n");
        out += &usage(sub);
    }
    out += &section(|w| man.render_description_section(w), false);
    out += &section(|w| man.render_options_section(w), false);
    out += &commands_section(&cmd);
    out += &to_roff(RUNNING);
    out += &to_roff(STOP);
    out += &to_roff(VERDICT);
    out += &to_roff(EXIT_STATUS);
    out += &environment_section(&cmd);
    out += &to_roff(FORMATS);
    out += &to_roff(CONTROL_PROTOCOL);
    out += &to_roff(LIMITS);
    out += &to_roff(&examples());
    out += &to_roff(SEE_ALSO);
    out
}

/// COMMANDS: each control client with its own synopsis and options, straight from clap.
fn commands_section(cmd: &clap::Command) -> String {
    let mut out = String::from(".SH COMMANDS\n");
    out += &escape_line(
        "These talk to a running instance through its control socket (see CONTROL PROTOCOL).",
    );
    for sub in cmd.get_subcommands() {
        let sub = sub
            .clone()
            .bin_name(format!("vloer-run {}", sub.get_name()));
        let man = clap_mangen::Man::new(sub.clone());
        let _ = writeln!(out, ".SS \"vloer-run {}\"", sub.get_name());
        out += &usage(&sub);
        out.push_str(".PP\n");
        let about = sub
            .get_long_about()
            .or(sub.get_about())
            .map(|s| s.to_string())
            .unwrap_or_default();
        out += &escape_line(&about);
        let options = section(|w| man.render_options_section(w), false);
        out += &options.replace(".SH OPTIONS\n", ".PP\nOptions:\n");
    }
    out
}

/// A client's synopsis from clap's own usage line: literals bold, <VALUES> italic.
fn usage(sub: &clap::Command) -> String {
    let text = sub.clone().render_usage().to_string();
    let text = text.trim().trim_start_matches("Usage:").trim();
    let words: Vec<String> = text
        .split(' ')
        .map(|w| {
            let (open, rest) = w.split_at(w.len() - w.trim_start_matches('[').len());
            let (core, close) = rest.split_at(rest.trim_end_matches([']', '.']).len());
            let core = if let Some(v) = core.strip_prefix('<').and_then(|c| c.strip_suffix('>')) {
                format!("\\fI{}\\fR", escape(v))
            } else if core == "OPTIONS" {
                "\\fIOPTIONS\\fR".to_string()
            } else {
                format!("\\fB{}\\fR", escape(core))
            };
            format!("{open}{core}{close}")
        })
        .collect();
    words.join(" ") + "\n"
}

/// ENVIRONMENT: every VLOER_* variable clap knows, with the option it sets.
fn environment_section(cmd: &clap::Command) -> String {
    let mut md = String::from(
        "\n# ENVIRONMENT\nEvery run option can be set by a variable, so a Dockerfile can configure vloer-run without changing its ENTRYPOINT; a flag on the command line beats the variable. Switches take true or false (also 1/0, yes/no, on/off); options that repeat take a comma-separated list (VLOER_REWRITE=TERM:QUIT,WINCH:0).\n",
    );
    for arg in cmd.get_arguments() {
        let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) else {
            continue;
        };
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let _ = write!(md, ": `{}`\n`--{long}`: {help}\n", env.to_string_lossy());
    }
    to_roff(&md)
}

/// EXAMPLES: the files in examples/, verbatim, so the manual shows what the tests run.
fn examples() -> String {
    format!(
        "\n# EXAMPLES\nWrap a command; the verdict goes to stderr:\n```\n{}```\nA shell script that reads the verdict and refuses to go on without proof (examples/run-and-check.sh):\n```\n{}```\nA Dockerfile with vloer-run as ENTRYPOINT (examples/Dockerfile):\n```\n{}```\nA Kubernetes pod: the verdict as termination message, a preStop stop (examples/pod.yaml):\n```\n{}```\n",
        "vloer-run --grace 2s -- sh -c 'sleep 60 & setsid sleep 60 & exit 3'\n",
        include_str!("../examples/run-and-check.sh"),
        include_str!("../examples/Dockerfile"),
        include_str!("../examples/pod.yaml"),
    )
}

/// Escapes text for a roff text line: backslashes, dashes, apostrophes, a leading period.
fn escape(text: &str) -> String {
    let s = text
        .replace('\\', "\\e")
        .replace('-', "\\-")
        .replace('\'', "\\(aq");
    if s.starts_with('.') {
        format!("\\&{s}")
    } else {
        s
    }
}

fn escape_line(text: &str) -> String {
    text.lines().map(|l| escape(l.trim()) + "\n").collect()
}

/// Escapes and turns `code` into bold.
fn inline(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.trim().split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "\\fB{}\\fR", escape(part).trim_start_matches("\\&"));
        } else {
            out += &escape(part);
        }
    }
    if out.starts_with('.') {
        out.insert_str(0, "\\&");
    }
    out + "\n"
}

/// The mini-markup of the hand-written sections, to roff: "# T" a section, "## T" a subsection, a
/// blank line a new paragraph, ": T" the tag of a tagged paragraph, "- " a bullet, "1. " a numbered
/// item, ``` fences a verbatim block; `code` is bold.
fn to_roff(md: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    let mut para = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            if in_code {
                out.push_str(".EE\n");
            } else {
                out.push_str(".PP\n.EX\n");
            }
            in_code = !in_code;
            para = true;
            continue;
        }
        if in_code {
            let l = escape(line);
            out += if l.is_empty() { "\\&" } else { &l };
            out.push('\n');
            continue;
        }
        if line.trim().is_empty() {
            para = true;
            continue;
        }
        if let Some(t) = line.strip_prefix("## ") {
            let _ = writeln!(out, ".SS \"{}\"", t.trim());
            para = false;
        } else if let Some(t) = line.strip_prefix("# ") {
            let _ = writeln!(out, ".SH \"{}\"", t.trim().to_uppercase());
            para = false;
        } else if let Some(t) = line.strip_prefix(": ") {
            out.push_str(".TP\n");
            out += &inline(t);
            para = false;
        } else if let Some(t) = line.strip_prefix("- ") {
            out.push_str(".IP \\(bu 2\n");
            out += &inline(t);
            para = false;
        } else if let Some((n, t)) = line
            .split_once(". ")
            .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            let _ = writeln!(out, ".IP {n}. 4");
            out += &inline(t);
            para = false;
        } else {
            if para {
                out.push_str(".PP\n");
                para = false;
            }
            out += &inline(line);
        }
    }
    assert!(!in_code, "unclosed ``` block");
    out
}

/// The completion script for one shell.
fn completion(shell: Shell) -> String {
    let mut cmd = command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "vloer-run", &mut buf);
    let script = String::from_utf8(buf).expect("clap_complete writes UTF-8");
    if shell == Shell::Fish {
        return repair_fish(script);
    }
    script
}

/// clap_complete's fish script offers the top-level options and their values only while
/// `argparse` accepts the words typed so far, and it refuses `vloer-run --scope` (the value is
/// still missing), so `--scope <TAB>` fell back to file names. A line argparse cannot read yet
/// is still at the top level: say so.
fn repair_fish(script: String) -> String {
    let guard =
        "argparse -s (__fish_vloer_run_global_optspecs) -- $cmd 2>/dev/null\n    or return\n";
    assert!(
        script.contains(guard),
        "clap_complete's fish output changed: repair_fish in src/docs.rs no longer finds its guard; check `--scope <TAB>` in fish by hand"
    );
    script.replace(guard, "argparse -s (__fish_vloer_run_global_optspecs) -- $cmd 2>/dev/null\n    or return 0 # vloer-run: an option still waits for its value\n")
}

/// Every generated file: its path under the crate root and what it must contain.
fn generated() -> Vec<(&'static str, String)> {
    vec![
        ("man/vloer-run.1", man_page()),
        ("completions/vloer-run.bash", completion(Shell::Bash)),
        ("completions/_vloer-run", completion(Shell::Zsh)),
        ("completions/vloer-run.fish", completion(Shell::Fish)),
    ]
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_temp(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn have(program: &str) -> bool {
        Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// The committed files are what the code generates now; `VLOER_BLESS=1` rewrites them.
    #[test]
    fn generated_files_are_current() {
        let bless = std::env::var_os("VLOER_BLESS").is_some_and(|v| v == "1");
        let mut stale = Vec::new();
        for (rel, text) in generated() {
            let path = root().join(rel);
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            if committed == text {
                continue;
            }
            if bless {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &text).unwrap();
                eprintln!("blessed {rel}");
            } else {
                let line = committed
                    .lines()
                    .zip(text.lines())
                    .position(|(a, b)| a != b)
                    .map_or_else(
                        || committed.lines().count().min(text.lines().count()) + 1,
                        |i| i + 1,
                    );
                stale.push(format!("  {rel} (first difference at line {line})"));
            }
        }
        assert!(
            stale.is_empty(),
            "generated files are out of date with src/cli.rs, src/docs.rs or examples/:\n{}\nregenerate them with:\n  {BLESS}\nand commit the result",
            stale.join("\n")
        );
    }

    /// `man --warnings` renders the page without a single warning, and nothing is wider than 80
    /// columns.
    #[test]
    fn man_page_renders_without_warnings() {
        if !have("man") {
            eprintln!("skipped: `man` is not installed (apt-get install man-db; .ci/run does)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let page = write_temp(dir.path(), "vloer-run.1", &man_page());
        let out = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(&page)
            .env("MANWIDTH", "80")
            .env_remove("MAN_KEEP_FORMATTING")
            .env_remove("MANPAGER")
            .env("PAGER", "cat")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stderr.trim().is_empty(),
            "man --warnings -l: {}\n{stderr}",
            out.status
        );
        for needle in [
            "VLOER_GRACE",
            "EXIT STATUS",
            "CONTROL PROTOCOL",
            "stopped\":true",
            "STOPSIGNAL",
            "preStop",
            "LIMITS",
        ] {
            assert!(
                stdout.contains(needle),
                "the rendered page lacks {needle:?}"
            );
        }
        let wide: Vec<&str> = stdout.lines().filter(|l| l.chars().count() > 80).collect();
        assert!(
            wide.is_empty(),
            "lines wider than 80 columns:\n{}",
            wide.join("\n")
        );
    }

    /// Every VLOER_* variable of the clap definition is in the manual.
    #[test]
    fn man_page_lists_every_variable() {
        let page = man_page();
        let cmd = command();
        let vars: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
            .collect();
        assert!(vars.len() >= 18, "{vars:?}");
        for v in vars {
            assert!(
                page.contains(&format!("\\fB{}\\fR", v.replace('-', "\\-"))),
                "{v} is not in the ENVIRONMENT section"
            );
        }
    }

    /// Runs the bash completion function for the words given (the last one is being completed).
    fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let program = format!(
            "source '{}' || exit 3\nf=$(complete -p vloer-run | sed -E 's/.* -F ([^ ]+) .*/\\1/')\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE=\"${{COMP_WORDS[*]}}\"\nCOMP_POINT=${{#COMP_LINE}}\n\"$f\" vloer-run '{}' '{}' || exit 4\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
            script.display(),
            quoted.join(" "),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        let out = Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &program])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "bash completion for {words:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn bash_completion_completes_scopes_and_signals() {
        if !have("bash") {
            eprintln!("skipped: bash is not installed");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = write_temp(dir.path(), "vloer-run.bash", &completion(Shell::Bash));
        let load = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}' && complete -p vloer-run",
                script.display()
            ))
            .output()
            .unwrap();
        assert!(
            load.status.success(),
            "sourcing the completion failed: {}",
            String::from_utf8_lossy(&load.stderr)
        );

        let mut scopes = bash_complete(&script, &["vloer-run", "--scope", ""]);
        scopes.sort();
        assert_eq!(scopes, ["group", "tree"]);

        let sigs = bash_complete(&script, &["vloer-run", "--stop-signal", ""]);
        for s in ["TERM", "KILL", "INT", "HUP", "USR1", "RTMIN"] {
            assert!(
                sigs.iter().any(|x| x == s),
                "{s} missing from --stop-signal completions {sigs:?}"
            );
        }
        let mut t = bash_complete(&script, &["vloer-run", "--stop-signal", "TT"]);
        t.sort();
        assert_eq!(t, ["TTIN", "TTOU"]);
        assert!(
            bash_complete(&script, &["vloer-run", "--stop-on", "US"]).contains(&"USR2".to_string())
        );
        assert!(
            bash_complete(&script, &["vloer-run", "--child-pdeathsig", ""])
                .contains(&"0".to_string())
        );
        let opts = bash_complete(&script, &["vloer-run", "--gr"]);
        assert_eq!(opts, ["--grace"]);
        let subs = bash_complete(&script, &["vloer-run", "st"]);
        assert!(
            subs.contains(&"stop".to_string()) && subs.contains(&"status".to_string()),
            "{subs:?}"
        );
    }

    /// zsh and fish read their scripts without a syntax error, where they are installed.
    #[test]
    fn zsh_and_fish_completions_parse() {
        let dir = tempfile::tempdir().unwrap();
        for (shell, name, args) in [
            (Shell::Zsh, "_vloer-run", &["-n"][..]),
            (Shell::Fish, "vloer-run.fish", &["--no-execute"][..]),
        ] {
            let program = if shell == Shell::Zsh { "zsh" } else { "fish" };
            if !have(program) {
                eprintln!("skipped {program}: not installed");
                continue;
            }
            let script = write_temp(dir.path(), name, &completion(shell));
            let out = Command::new(program)
                .args(args)
                .arg(&script)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{program} rejects {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if have("fish") {
            let script = write_temp(dir.path(), "vloer-run.fish", &completion(Shell::Fish));
            let ask = |line: &str| -> Vec<String> {
                let program = format!("source '{}'; complete -C '{line}'", script.display());
                let out = Command::new("fish")
                    .args(["--no-config", "-c", &program])
                    .current_dir(dir.path())
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "fish: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(|l| l.split('\t').next().unwrap_or("").to_string())
                    .collect()
            };
            let mut scopes = ask("vloer-run --scope ");
            scopes.sort();
            assert_eq!(scopes, ["group", "tree"]);
            assert_eq!(ask("vloer-run --stop-signal TE"), ["TERM"]);
            assert!(ask("vloer-run --gra").contains(&"--grace".to_string()));
        }
        // Without the shells, at least the signal names reached the scripts.
        assert!(completion(Shell::Zsh).contains("TERM"));
        assert!(completion(Shell::Fish).contains("TERM"));
    }

    /// Each signal name offered to completions is one vloer-run accepts.
    #[test]
    fn completion_signal_names_parse() {
        for name in crate::cli::SIGNAL_NAMES {
            assert!(crate::signal::Sig::parse(name, false).is_ok(), "{name}");
        }
    }

    /// The mini-markup escapes what roff would misread.
    #[test]
    fn roff_escaping() {
        let r = to_roff("# t\n.starts with a dot, it's `--x`\n```\n.x 'a' \\ -b\n\n```\n");
        assert_eq!(r, ".SH \"T\"\n\\&.starts with a dot, it\\(aqs \\fB\\-\\-x\\fR\n.PP\n.EX\n\\&.x \\(aqa\\(aq \\e \\-b\n\\&\n.EE\n");
    }
}
