//! systemd's readiness protocol (`sd_notify`): `READY=1` once the node is
//! up, `STOPPING=1` when a graceful stop begins, and `WATCHDOG=1` every
//! half `WATCHDOG_USEC` while the main loop runs, as datagrams on the Unix
//! socket `NOTIFY_SOCKET` names (`@name`: Linux's abstract namespace).
//! Without `NOTIFY_SOCKET`, nothing is sent.

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// The variables of the protocol, which the node's children must not
/// inherit (a gated command would otherwise speak for the unit).
pub const VARIABLES: [&str; 3] = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// Where the node reports to systemd, and when its watchdog is next due.
pub struct Notifier {
    socket: UnixDatagram,
    to: std::os::unix::net::SocketAddr,
    /// Half of `WATCHDOG_USEC`, if the watchdog is for this process.
    watchdog: Option<Duration>,
    next: Instant,
}

impl Notifier {
    /// The notifier the environment asks for: `None` without
    /// `NOTIFY_SOCKET`, or an error naming the variable that is wrong.
    pub fn from_env() -> Result<Option<Notifier>, String> {
        let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
            return Ok(None);
        };
        let to = address(&path)?;
        let socket = UnixDatagram::unbound()
            .map_err(|e| format!("NOTIFY_SOCKET: cannot create a datagram socket: {e}"))?;
        let watchdog = watchdog_period(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        )?;
        Ok(Some(Notifier {
            socket,
            to,
            watchdog,
            next: Instant::now(),
        }))
    }

    /// `READY=1`: state loaded, sockets bound, admin socket listening.
    pub fn ready(&mut self) {
        self.send("READY=1");
        self.watchdog();
    }

    /// `STOPPING=1`: a graceful stop has begun.
    pub fn stopping(&self) {
        self.send("STOPPING=1");
    }

    /// `WATCHDOG=1` if it is due; called from the node's loops, so that a
    /// hung loop stops the pings and systemd restarts the node.
    pub fn watchdog(&mut self) {
        let Some(period) = self.watchdog else { return };
        if Instant::now() >= self.next {
            self.next = Instant::now() + period;
            self.send("WATCHDOG=1");
        }
    }

    fn send(&self, message: &str) {
        // systemd may be gone or busy: a lost notification must not stop
        // the node (a missing READY=1 fails the start, visibly).
        if let Err(e) = self.socket.send_to_addr(message.as_bytes(), &self.to) {
            eprintln!("warning: cannot send {message} to NOTIFY_SOCKET: {e}");
        }
    }
}

/// The socket address `NOTIFY_SOCKET` names: a path, or `@name` in the
/// abstract namespace.
fn address(value: &std::ffi::OsStr) -> Result<std::os::unix::net::SocketAddr, String> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = value.as_bytes();
    let bad = |e: std::io::Error| format!("NOTIFY_SOCKET {value:?} is not a socket address: {e}");
    match bytes.strip_prefix(b"@") {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        Some(name) => {
            #[cfg(target_os = "android")]
            use std::os::android::net::SocketAddrExt;
            #[cfg(target_os = "linux")]
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name).map_err(bad)
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        Some(_) => Err(format!(
            "NOTIFY_SOCKET {value:?}: abstract socket names exist on Linux only"
        )),
        None if bytes.first() == Some(&b'/') => {
            std::os::unix::net::SocketAddr::from_pathname(value).map_err(bad)
        }
        None => Err(format!(
            "NOTIFY_SOCKET {value:?} is neither an absolute path nor @name"
        )),
    }
}

/// Half of `WATCHDOG_USEC` (systemd's advice), unless `WATCHDOG_PID` names
/// another process (the variables were inherited) or the watchdog is off.
fn watchdog_period(
    usec: Option<&str>,
    pid: Option<&str>,
    me: u32,
) -> Result<Option<Duration>, String> {
    let Some(usec) = usec else { return Ok(None) };
    let usec: u64 = usec
        .trim()
        .parse()
        .map_err(|_| format!("WATCHDOG_USEC {usec:?} is not a number of microseconds"))?;
    if let Some(pid) = pid {
        let pid: u32 = pid
            .trim()
            .parse()
            .map_err(|_| format!("WATCHDOG_PID {pid:?} is not a process id"))?;
        if pid != me {
            return Ok(None);
        }
    }
    Ok((usec > 0).then(|| Duration::from_micros(usec / 2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_period_is_half_the_interval_for_this_process_only() {
        let half = Some(Duration::from_millis(500));
        assert_eq!(watchdog_period(Some("1000000"), None, 7), Ok(half));
        assert_eq!(watchdog_period(Some("1000000"), Some("7"), 7), Ok(half));
        assert_eq!(watchdog_period(Some("1000000"), Some("8"), 7), Ok(None));
        assert_eq!(watchdog_period(None, Some("7"), 7), Ok(None));
        assert_eq!(watchdog_period(Some("0"), None, 7), Ok(None));
        let bad = watchdog_period(Some("10s"), None, 7).unwrap_err();
        assert!(bad.contains("WATCHDOG_USEC"), "{bad}");
        let bad = watchdog_period(Some("10"), Some("x"), 7).unwrap_err();
        assert!(bad.contains("WATCHDOG_PID"), "{bad}");
    }

    #[test]
    fn notify_socket_is_a_path_or_an_abstract_name() {
        assert!(address("/run/systemd/notify".as_ref()).is_ok());
        #[cfg(target_os = "linux")]
        assert!(address("@tenure-test".as_ref()).is_ok());
        let bad = address("relative/path".as_ref()).unwrap_err();
        assert!(bad.contains("NOTIFY_SOCKET"), "{bad}");
    }
}
