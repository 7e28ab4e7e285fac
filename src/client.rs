//! The clients of a running instance: `vloer-run stop`, `status` and `exec`.

use crate::cli::Client;
use crate::control::proto::{ExitReport, WireRequest, WireStr};
use crate::exec_tty::ExecTty;
use crate::msg;
use crate::reactor::{Key, Reactor};
use crate::signal::Sig;
use crate::sys;
use nix::sys::epoll::EpollFlags;
use nix::sys::socket::{self, ControlMessage, MsgFlags};
use std::io::{BufRead, BufReader, IoSlice, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Runs one client subcommand and returns its exit status.
pub fn main(client: Client) -> u8 {
    let result = match client {
        Client::Stop { control, grace } => stop(&control, grace),
        Client::Status { control } => status(&control),
        Client::Exec {
            control,
            timeout,
            no_tty,
            command,
        } => exec(&control, timeout, no_tty, command),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            msg::error(format_args!("{e:#}"));
            125
        }
    }
}

fn connect(path: &Path) -> anyhow::Result<UnixStream> {
    UnixStream::connect(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot reach a vloer-run instance at {}: {e}",
            path.display()
        )
    })
}

fn request_line(req: &WireRequest) -> String {
    serde_json::to_string(req).expect("requests always serialise") + "\n"
}

/// Sends a request. A refusing instance may answer and close before reading it, so a failed
/// write is not final: the reply, if any, is still read.
fn send_request(stream: &mut UnixStream, req: &WireRequest) {
    if let Err(e) = stream.write_all(request_line(req).as_bytes()) {
        msg::verbose(format_args!("sending the request: {e}"));
    }
}

/// One reply line, both as sent (printed verbatim) and parsed.
fn read_line(reader: &mut impl BufRead) -> anyhow::Result<Option<(String, serde_json::Value)>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let v = serde_json::from_str(line.trim())
        .map_err(|e| anyhow::anyhow!("malformed reply from the instance: {e}"))?;
    Ok(Some((line.trim_end().to_string(), v)))
}

/// An error reply becomes a message and exit 125.
fn reply_error(v: &serde_json::Value) -> Option<String> {
    // A verdict may carry an `error` of its own; only replies without a schema are refusals.
    if v.get("schema").is_some() {
        return None;
    }
    v.get("error").map(|e| {
        format!(
            "the instance refused: {} ({})",
            e.as_str().unwrap_or("?"),
            v.get("code").and_then(|c| c.as_str()).unwrap_or("error")
        )
    })
}

fn stop(path: &Path, grace: Option<Duration>) -> anyhow::Result<u8> {
    let request = WireRequest::Stop {
        grace_ms: grace.map(|g| g.as_millis() as u64),
    };
    let verdict = ask(path, &request, "a verdict")?;
    let stopped = verdict.get("stopped") == Some(&serde_json::Value::Bool(true));
    Ok(match verdict.get("error").and_then(|e| e.as_str()) {
        // The run stopped, yet the instance failed after that (it could not deliver its own
        // verdict, and exits 125): a caller must not read that as a clean stop.
        Some(error) if stopped => {
            crate::msg::error(format_args!(
                "the run stopped, but vloer-run failed: {error}"
            ));
            125
        }
        _ if stopped => 0,
        _ => 1,
    })
}

fn status(path: &Path) -> anyhow::Result<u8> {
    ask(path, &WireRequest::Status {}, "a reply")?;
    Ok(0)
}

/// Sends one request, prints its one reply line verbatim, and returns the reply parsed; a
/// refusal, or a connection closed without `what`, is an error.
fn ask(path: &Path, request: &WireRequest, what: &str) -> anyhow::Result<serde_json::Value> {
    let mut stream = connect(path)?;
    send_request(&mut stream, request);
    let Some((line, v)) = read_line(&mut BufReader::new(stream))? else {
        anyhow::bail!(
            "the instance at {} closed the connection without {what}",
            path.display()
        );
    };
    if let Some(e) = reply_error(&v) {
        anyhow::bail!(e);
    }
    println!("{line}");
    Ok(v)
}

fn exec(
    path: &Path,
    timeout: Option<Duration>,
    no_tty: bool,
    command: Vec<std::ffi::OsString>,
) -> anyhow::Result<u8> {
    // Interrupting the client stops the exec: these signals become a cancel request.
    let signals = sys::signalfd_for(&[Sig::INT, Sig::TERM, Sig::HUP, Sig::QUIT, Sig::WINCH])?;
    let stream = connect(path)?;
    let mut tty = if no_tty { None } else { ExecTty::open()? };
    let cwd = std::env::current_dir().ok();
    let req = WireRequest::Exec {
        argv: command
            .iter()
            .map(|a| WireStr::from(a.as_os_str()))
            .collect(),
        cwd: cwd.as_ref().map(|c| WireStr::from(c.as_os_str())),
        env: Some(
            std::env::vars_os()
                .map(|(k, v)| (WireStr::from(k.as_os_str()), WireStr::from(v.as_os_str())))
                .collect(),
        ),
        timeout_ms: timeout.map(|t| t.as_millis() as u64),
        tty: tty.is_some(),
    };
    let fds: Vec<RawFd> = match tty.as_ref().and_then(|t| t.slave()) {
        Some(slave) => vec![slave.as_raw_fd(); 3],
        None => (0..3)
            .filter(|fd| {
                nix::fcntl::fcntl(sys::borrow_std_fd(*fd), nix::fcntl::FcntlArg::F_GETFD).is_ok()
            })
            .collect(),
    };
    send_with_fds(&stream, &request_line(&req), &fds);
    if let Some(t) = &mut tty {
        t.start()?;
    }
    stream.set_nonblocking(true)?;
    let mut buf = Vec::new();
    let mut cancelled = false;
    let reactor = Reactor::new()?;
    // Each registration is declared after its descriptor, so it is dropped (leaves the set)
    // before the descriptor closes.
    let _reply = reactor.register(stream.as_fd(), Key::Conn(0), EpollFlags::EPOLLIN)?;
    let _signals = reactor.register(signals.as_fd(), Key::Signals, EpollFlags::EPOLLIN)?;
    let (mut keys, mut output) = match &tty {
        Some(t) => (
            Some(reactor.register(sys::borrow_std_fd(0), Key::Keys, EpollFlags::EPOLLIN)?),
            Some(reactor.register(t.master(), Key::Output, EpollFlags::EPOLLIN)?),
        ),
        None => (None, None),
    };
    loop {
        let ready = reactor.wait(None)?;
        for (key, _) in ready {
            match (key, &mut tty) {
                (Key::Keys, Some(t)) => {
                    t.relay_keys();
                    if t.stdin_done {
                        drop(keys.take());
                    }
                }
                (Key::Output, Some(t)) => {
                    t.relay_output();
                    if t.master_done {
                        drop(output.take());
                    }
                }
                (Key::Signals, _) => {
                    let got = sys::read_signals(signals.as_fd())?;
                    if got.iter().any(|i| i.sig == Sig::WINCH) {
                        if let Some(t) = &tty {
                            t.resize();
                        }
                    }
                    if let Some(first) = got.iter().find(|i| i.sig != Sig::WINCH) {
                        if !cancelled {
                            cancelled = true;
                            // The command gets what we got first, then the stop: a Ctrl-C ends
                            // it as it would end the bare command, and so ends a script's loop.
                            let cancel = WireRequest::Cancel {
                                signal: Some(first.sig.name()),
                            };
                            let _ = (&stream).write_all(request_line(&cancel).as_bytes());
                        }
                    }
                }
                (Key::Conn(_), _) => {
                    let mut chunk = [0u8; 4096];
                    let n = match (&stream).read(&mut chunk) {
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                        Err(e) => return Err(e.into()),
                    };
                    if n == 0 {
                        anyhow::bail!(
                            "the instance closed the connection before the command ended"
                        );
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some((status, by_signal)) = exec_reply(&mut buf)? {
                        drop((keys.take(), output.take()));
                        if let Some(mut t) = tty.take() {
                            t.drain();
                        }
                        if let Some(sig) = by_signal {
                            sys::end_by_signal(sig);
                        }
                        return Ok(status);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Sends the request with `fds` attached. As in send_request: a refusal may arrive before the
/// request is read, so write errors are not final; the reply decides.
fn send_with_fds(stream: &UnixStream, line: &str, fds: &[RawFd]) {
    let cmsg = [ControlMessage::ScmRights(fds)];
    let bytes = line.as_bytes();
    match socket::sendmsg::<()>(
        stream.as_raw_fd(),
        &[IoSlice::new(bytes)],
        if fds.is_empty() { &[] } else { &cmsg },
        MsgFlags::MSG_NOSIGNAL,
        None,
    ) {
        Ok(sent) if sent < bytes.len() => {
            if let Err(e) = (&*stream).write_all(&bytes[sent..]) {
                msg::verbose(format_args!("sending the request: {e}"));
            }
        }
        Ok(_) => {}
        Err(e) => msg::verbose(format_args!("sending the request: {e}")),
    }
}

/// The client's end once a whole line in `buf` ends the exec: a refusal (its status, or 125), or
/// the exit report's status. A command killed by signal N ends the client by N too, as the bare
/// command would have ended; `None` while no such line has come.
fn exec_reply(buf: &mut Vec<u8>) -> anyhow::Result<Option<(u8, Option<Sig>)>> {
    while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
        let line: Vec<u8> = buf.drain(..=pos).collect();
        let v: serde_json::Value = serde_json::from_slice(&line)
            .map_err(|e| anyhow::anyhow!("malformed reply from the instance: {e}"))?;
        if let Some(e) = reply_error(&v) {
            msg::error(format_args!("{e}"));
            let status = v.get("status").and_then(|s| s.as_u64());
            return Ok(Some((status.map(|s| s as u8).unwrap_or(125), None)));
        }
        if let Some(exit) = v.get("exit") {
            let report: ExitReport = serde_json::from_value(exit.clone())?;
            if let Some(err) = &report.error {
                msg::error(format_args!("the exec's stop was not confirmed: {err}"));
            }
            // Only when the status says so: not after a timeout (124) or an unconfirmed stop.
            let by_signal = report
                .signal
                .as_deref()
                .and_then(|name| Sig::parse(name, false).ok())
                .filter(|s| report.status == 128 + s.raw());
            return Ok(Some((report.status.clamp(0, 255) as u8, by_signal)));
        }
    }
    Ok(None)
}
