//! The clients of a running instance: `vloer-run stop`, `status` and `exec`.

use crate::cli::Client;
use crate::control::{ExitReport, WireRequest, WireStr};
use crate::msg;
use crate::signal::Sig;
use crate::sys;
use nix::poll::PollFlags;
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
            command,
        } => exec(&control, timeout, command),
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
    command: Vec<std::ffi::OsString>,
) -> anyhow::Result<u8> {
    // Interrupting the client stops the exec: these signals become a cancel request.
    let signals = sys::signalfd_for(&[Sig::INT, Sig::TERM, Sig::HUP, Sig::QUIT])?;
    let stream = connect(path)?;
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
    };
    let line = request_line(&req);
    let fds: Vec<RawFd> = (0..3)
        .filter(|fd| {
            nix::fcntl::fcntl(sys::borrow_std_fd(*fd), nix::fcntl::FcntlArg::F_GETFD).is_ok()
        })
        .collect();
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let bytes = line.as_bytes();
    // As in send_request: a refusal may arrive before the request is read, so write errors are
    // not final; the reply decides.
    match socket::sendmsg::<()>(
        stream.as_raw_fd(),
        &[IoSlice::new(bytes)],
        if fds.is_empty() { &[] } else { &cmsg },
        MsgFlags::MSG_NOSIGNAL,
        None,
    ) {
        Ok(sent) if sent < bytes.len() => {
            if let Err(e) = (&stream).write_all(&bytes[sent..]) {
                msg::verbose(format_args!("sending the request: {e}"));
            }
        }
        Ok(_) => {}
        Err(e) => msg::verbose(format_args!("sending the request: {e}")),
    }
    stream.set_nonblocking(true)?;
    let mut buf = Vec::new();
    let mut cancelled = false;
    loop {
        let ready = crate::event_loop::wait(
            &[
                crate::event_loop::Interest {
                    token: 0u8,
                    fd: stream.as_fd(),
                    events: PollFlags::POLLIN,
                },
                crate::event_loop::Interest {
                    token: 1u8,
                    fd: signals.as_fd(),
                    events: PollFlags::POLLIN,
                },
            ],
            None,
        )?;
        for (token, _) in ready {
            if token == 1 {
                let got = sys::read_signals(signals.as_fd())?;
                if !got.is_empty() && !cancelled {
                    cancelled = true;
                    let _ = (&stream).write_all(request_line(&WireRequest::Cancel {}).as_bytes());
                }
                continue;
            }
            let mut chunk = [0u8; 4096];
            let n = match (&stream).read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                anyhow::bail!("the instance closed the connection before the command ended");
            }
            buf.extend_from_slice(&chunk[..n]);
            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                let v: serde_json::Value = serde_json::from_slice(&line)
                    .map_err(|e| anyhow::anyhow!("malformed reply from the instance: {e}"))?;
                if let Some(e) = reply_error(&v) {
                    msg::error(format_args!("{e}"));
                    return Ok(v
                        .get("status")
                        .and_then(|s| s.as_u64())
                        .map(|s| s as u8)
                        .unwrap_or(125));
                }
                if let Some(exit) = v.get("exit") {
                    let report: ExitReport = serde_json::from_value(exit.clone())?;
                    if let Some(err) = &report.error {
                        msg::error(format_args!("the exec's stop was not confirmed: {err}"));
                    }
                    return Ok(report.status.clamp(0, 255) as u8);
                }
            }
        }
    }
}
