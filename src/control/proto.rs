//! The control protocol: one JSON request line in, JSON reply lines out. Pure data and framing;
//! the server and the clients both speak it through this module alone.
//!
//! Wire format (also in the manual):
//!   -> {"op":"stop","grace_ms":2000}          <- the run's verdict line, when the run has ended
//!   -> {"op":"status"}                        <- {"pid":..,"child":..,"processes":[..],"execs":[..]}
//!   -> {"op":"exec","argv":[..],"cwd":..,"env":[[k,v],..],"timeout_ms":..} + fds 0,1,2 (SCM_RIGHTS)
//!                                             <- {"exec":{"pid":N}} then, at the end,
//!                                                {"exit":{"status":N,"exit_code":..,"signal":..,"reason":..,"stopped":..}}
//!      while an exec runs, the client may send {"op":"cancel","signal":"SIGINT"} (the signal is
//!      optional: sent to the exec's group first) or just close the connection.
//! Any failure: {"error":"text","code":"bad_request|too_large|timeout|forbidden|unknown_op|
//! stopping|stop_unconfirmed|spawn_failed|proc_unreadable"} and the connection is closed.

use crate::signal::Sig;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::time::Duration;

/// A request line may be at most this long...
pub const MAX_REQUEST: usize = 64 * 1024;
/// ...except an exec request: it carries the client's argv and environment, which the kernel lets
/// reach ARG_MAX together (2 MiB with the usual 8 MiB stack limit, 6 MiB at most), and JSON adds
/// little to text.
pub const MAX_EXEC_REQUEST: usize = 8 * 1024 * 1024;

/// The limit for a request that begins with `prefix`: our own client always sends `op` first,
/// so an exec is known long before its line ends.
pub fn limit_for(prefix: &[u8]) -> usize {
    let head: Vec<u8> = prefix
        .iter()
        .take(64)
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if head.starts_with(br#"{"op":"exec""#) {
        MAX_EXEC_REQUEST
    } else {
        MAX_REQUEST
    }
}

/// A string that may not be UTF-8: a JSON string when it is, an array of bytes when not.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum WireStr {
    Text(String),
    Bytes(Vec<u8>),
}

impl From<&std::ffi::OsStr> for WireStr {
    fn from(s: &std::ffi::OsStr) -> WireStr {
        match s.to_str() {
            Some(t) => WireStr::Text(t.to_string()),
            None => WireStr::Bytes(s.as_bytes().to_vec()),
        }
    }
}

impl From<WireStr> for OsString {
    fn from(w: WireStr) -> OsString {
        match w {
            WireStr::Text(t) => OsString::from(t),
            WireStr::Bytes(b) => OsString::from_vec(b),
        }
    }
}

/// One request line, as sent by `vloer-run stop|status|exec` or by hand with socat.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum WireRequest {
    Stop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace_ms: Option<u64>,
    },
    Status {},
    Exec {
        argv: Vec<WireStr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<WireStr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        env: Option<Vec<(WireStr, WireStr)>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// The passed stdin is a terminal the exec gets as its controlling terminal, in a
        /// session of its own.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        tty: bool,
    },
    /// Stop the running exec; `signal` (one the client received, such as SIGINT) goes to its
    /// group first, as a forwarded signal does at the start of the run's stop.
    Cancel {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
    /// An `op` this protocol does not know: refused with `unknown_op`.
    #[serde(other, skip_serializing)]
    Unknown,
}

/// Only the `op` of a request, to name an unknown one.
#[derive(Deserialize)]
struct OpOnly {
    op: String,
}

/// A validated request handed to the supervisor.
#[derive(Debug)]
pub enum Request {
    Stop { grace: Option<Duration> },
    Status,
    Exec(ExecRequest),
}

/// What an exec needs: the command, where and with what it runs, and the client's stdio.
#[derive(Debug)]
pub struct ExecRequest {
    pub argv: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    pub env: Option<Vec<(OsString, OsString)>>,
    pub timeout: Option<Duration>,
    pub stdio: Vec<OwnedFd>,
    pub tty: bool,
}

/// The final line of an exec.
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq, Eq)]
pub struct ExitReport {
    pub status: i32,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub reason: String,
    pub stopped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a request was refused: the `code` of an error reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    BadRequest,
    TooLarge,
    Timeout,
    Forbidden,
    UnknownOp,
    Stopping,
    StopUnconfirmed,
    SpawnFailed,
    /// A status could not read /proc.
    ProcUnreadable,
}

impl ErrorCode {
    /// Every code, in the order the manual lists them.
    #[cfg(test)]
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::BadRequest,
        ErrorCode::TooLarge,
        ErrorCode::Timeout,
        ErrorCode::Forbidden,
        ErrorCode::UnknownOp,
        ErrorCode::Stopping,
        ErrorCode::StopUnconfirmed,
        ErrorCode::SpawnFailed,
        ErrorCode::ProcUnreadable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::UnknownOp => "unknown_op",
            ErrorCode::Stopping => "stopping",
            ErrorCode::StopUnconfirmed => "stop_unconfirmed",
            ErrorCode::SpawnFailed => "spawn_failed",
            ErrorCode::ProcUnreadable => "proc_unreadable",
        }
    }
}

/// An error reply line.
pub fn error_line(code: ErrorCode, text: &str) -> String {
    error_reply(code, text, None)
}

/// An error reply line, with the exit status a client should take (a failed exec's 126 or 127).
pub fn error_reply(code: ErrorCode, text: &str, status: Option<i32>) -> String {
    let mut v = serde_json::json!({ "error": text, "code": code.name() });
    if let Some(status) = status {
        v["status"] = status.into();
    }
    v.to_string() + "\n"
}

/// The signal a cancel line asks to send first (none for anything else, or one vloer-run would
/// never forward: SIGKILL, SIGSTOP, SIGCHLD).
pub fn cancel_signal(line: &[u8]) -> Option<Sig> {
    match serde_json::from_slice(line.trim_ascii_end()) {
        Ok(WireRequest::Cancel { signal: Some(name) }) => Sig::parse(&name, false)
            .ok()
            .filter(|s| ![Sig::KILL, Sig::STOP, Sig::CHLD].contains(s)),
        _ => None,
    }
}

/// Reads one request line (without its newline or with it); `stdio` are the descriptors that came
/// with it, for an exec.
pub fn parse_request(line: &[u8], stdio: Vec<OwnedFd>) -> Result<Request, (ErrorCode, String)> {
    let req: WireRequest = serde_json::from_slice(line)
        .map_err(|e| (ErrorCode::BadRequest, format!("malformed request: {e}")))?;
    Ok(match req {
        WireRequest::Unknown => {
            let op = serde_json::from_slice::<OpOnly>(line).map_or_else(|_| "?".into(), |o| o.op);
            return Err((
                ErrorCode::UnknownOp,
                format!("unknown op '{op}'; expected stop, status, exec or cancel"),
            ));
        }
        WireRequest::Stop { grace_ms } => Request::Stop {
            grace: grace_ms.map(Duration::from_millis),
        },
        WireRequest::Status {} => Request::Status,
        WireRequest::Cancel { .. } => {
            return Err((
                ErrorCode::BadRequest,
                "cancel is only valid while an exec runs".into(),
            ))
        }
        WireRequest::Exec {
            argv,
            cwd,
            env,
            timeout_ms,
            tty,
        } => {
            if argv.is_empty() {
                return Err((ErrorCode::BadRequest, "exec needs a non-empty argv".into()));
            }
            Request::Exec(ExecRequest {
                argv: argv.into_iter().map(OsString::from).collect(),
                cwd: cwd.map(|c| PathBuf::from(OsString::from(c))),
                env: env.map(|e| {
                    e.into_iter()
                        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                        .collect()
                }),
                timeout: timeout_ms.filter(|t| *t > 0).map(Duration::from_millis),
                stdio,
                tty,
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_is_known_by_its_first_bytes_and_gets_the_larger_limit() {
        assert_eq!(limit_for(br#"{"op":"exec","argv":"#), MAX_EXEC_REQUEST);
        assert_eq!(limit_for(br#"{ "op" : "exec""#), MAX_EXEC_REQUEST);
        assert_eq!(limit_for(br#"{"op":"status"}"#), MAX_REQUEST);
        assert_eq!(limit_for(br#"{"argv":[],"op":"exec"}"#), MAX_REQUEST);
    }

    #[test]
    fn requests_parse_and_refusals_carry_their_codes() {
        let stop = parse_request(br#"{"op":"stop","grace_ms":1500}"#, vec![]);
        assert!(
            matches!(stop, Ok(Request::Stop { grace: Some(g) }) if g == Duration::from_millis(1500))
        );
        let code = |line: &[u8]| parse_request(line, vec![]).err().map(|(c, _)| c);
        assert_eq!(code(br#"{"op":"reboot"}"#), Some(ErrorCode::UnknownOp));
        assert_eq!(
            code(br#"{"op":"reboot","grace_ms":1}"#),
            Some(ErrorCode::UnknownOp)
        );
        assert_eq!(code(br#"{"grace_ms":1}"#), Some(ErrorCode::BadRequest));
        assert_eq!(code(br#"{"op":7}"#), Some(ErrorCode::BadRequest));
        assert_eq!(
            code(br#"{"op":"stop","grace":1}"#),
            Some(ErrorCode::BadRequest)
        );
        assert_eq!(
            code(br#"{"op":"exec","argv":[]}"#),
            Some(ErrorCode::BadRequest)
        );
        assert_eq!(code(br#"{"op":"cancel"}"#), Some(ErrorCode::BadRequest));
        assert_eq!(code(b"not json"), Some(ErrorCode::BadRequest));
        let exec = parse_request(br#"{"op":"exec","argv":["a",[255]],"tty":true}"#, vec![]);
        match exec {
            Ok(Request::Exec(e)) => {
                assert_eq!(e.argv[1], OsString::from_vec(vec![255]));
                assert!(e.tty);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cancel_line_names_the_signal_the_client_received() {
        assert_eq!(
            cancel_signal(b"{\"op\":\"cancel\",\"signal\":\"SIGINT\"}\n"),
            Some(Sig::INT)
        );
        assert_eq!(cancel_signal(b"{\"op\":\"cancel\"}\n"), None);
        assert_eq!(
            cancel_signal(b"{\"op\":\"cancel\",\"signal\":\"SIGKILL\"}\n"),
            None
        );
        assert_eq!(cancel_signal(b"garbage\n"), None);
    }

    #[test]
    fn error_replies_are_one_line_with_a_code() {
        let line = error_reply(ErrorCode::SpawnFailed, "cannot run", Some(127));
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["code"], "spawn_failed");
        assert_eq!(v["status"], 127);
        assert_eq!(ErrorCode::StopUnconfirmed.name(), "stop_unconfirmed");
    }
}
