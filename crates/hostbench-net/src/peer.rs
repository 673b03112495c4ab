//! Telling a server that went away from a test that failed.
//!
//! A test that breaks on the wire (a connection reset, a control connection closed mid-test)
//! fails its case, and the next case reconnects: the server may only have dropped that one
//! session, and a fresh one often works. But when that reconnect is *refused* after such a
//! break, nothing listens at the address any more: the server is gone (killed, crashed, its
//! host rebooting), and every later case would try anew and be refused the same way, burying
//! the one error that matters under a list of identical ones. [`Watch`] follows a link's tests
//! and connects and says when that happened, so the client stops trying, keeps what it
//! measured, and says once where the server was, when it went away and how many cases did not
//! run.
//!
//! A refusal with no break before it is not this: at the first connect it is a wrong target
//! (the user's input), and it is reported as such by the caller.

use std::net::SocketAddr;

use crate::client::ClientError;

/// A server that went away: where it was, when its session broke, and with what error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gone {
    pub addr: SocketAddr,
    /// When the break that preceded the refusal happened (RFC 3339).
    pub at: String,
    /// The break's error, as the failed test reported it.
    pub why: String,
}

impl Gone {
    /// The reason every case that was not run carries (one reason, so they can be counted).
    pub fn not_run(&self) -> String {
        format!(
            "not run: the server at {} went away at {}",
            self.addr, self.at
        )
    }

    /// The one line the client says when it stops, `cases` being how many did not run.
    pub fn line(&self, cases: usize) -> String {
        format!(
            "hostbench: the server at {} went away at {} ({}; reconnecting was refused): \
             stopped, {cases} case{} not run",
            self.addr,
            self.at,
            self.why,
            if cases == 1 { "" } else { "s" }
        )
    }
}

/// What a link has seen of its server, test by test.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// The first break since the last test that worked: when and why.
    broke: Option<(String, String)>,
    gone: Option<Gone>,
}

impl Watch {
    /// A test worked: the server is there, whatever broke before.
    pub fn test_ok(&mut self) {
        self.broke = None;
    }

    /// A test failed. A break on the wire is remembered (the first since the last test that
    /// worked: the server went away then, later failures are its echo); a failure the server
    /// answered, or a connect that never became a session, is not a break.
    pub fn test_failed(&mut self, e: &ClientError, at: impl FnOnce() -> String) {
        if breaks_session(e) && self.broke.is_none() {
            self.broke = Some((at(), e.to_string()));
        }
    }

    /// A connect to `addr` was refused: after a break, the server is gone (and stays gone for
    /// this run). `None` where nothing broke before: an ordinary refusal for the caller.
    pub fn refused(&mut self, addr: SocketAddr) -> Option<&Gone> {
        if self.gone.is_none() {
            if let Some((at, why)) = self.broke.take() {
                self.gone = Some(Gone { addr, at, why });
            }
        }
        self.gone.as_ref()
    }

    /// The server, once it is known to be gone.
    pub fn gone(&self) -> Option<&Gone> {
        self.gone.as_ref()
    }
}

/// Whether a failed test broke on the wire (the session's control connection or a data
/// stream): the errors a server that dies mid-test leaves behind. Busy, refused and handshake
/// failures never had a session to break; a validation failure was answered by the server.
fn breaks_session(e: &ClientError) -> bool {
    matches!(e, ClientError::Session(_) | ClientError::Test(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 5201))
    }

    fn reset() -> ClientError {
        ClientError::Test("sending: Connection reset by peer (os error 104)".into())
    }

    #[test]
    fn a_reset_then_a_refusal_is_a_server_gone() {
        let mut w = Watch::default();
        w.test_ok();
        w.test_failed(&reset(), || "2026-11-28T04:30:00Z".into());
        let g = w.refused(addr()).cloned().expect("gone");
        assert_eq!(g.addr, addr());
        assert_eq!(g.at, "2026-11-28T04:30:00Z");
        assert!(g.why.contains("Connection reset by peer"), "{}", g.why);
        // It stays gone, and every later refusal is the same departure.
        assert_eq!(w.refused(addr()), Some(&g));
        assert_eq!(w.gone(), Some(&g));
        let line = g.line(7);
        assert!(
            line.contains("127.0.0.1:5201") && line.contains("04:30:00"),
            "{line}"
        );
        assert!(line.ends_with("7 cases not run"), "{line}");
        assert!(g.line(1).ends_with("1 case not run"));
        assert!(g
            .not_run()
            .starts_with("not run: the server at 127.0.0.1:5201"));
    }

    #[test]
    fn a_closed_control_connection_is_a_break_too() {
        let mut w = Watch::default();
        w.test_failed(
            &ClientError::Session("control connection: closed".into()),
            || "t".into(),
        );
        assert!(w.refused(addr()).is_some());
    }

    #[test]
    fn a_refusal_without_a_break_is_not_a_server_gone() {
        // The first connect, or a refusal after tests that all worked: the caller's error.
        let mut w = Watch::default();
        assert_eq!(w.refused(addr()), None);
        w.test_ok();
        assert_eq!(w.refused(addr()), None);
        assert_eq!(w.gone(), None);
    }

    #[test]
    fn a_test_that_works_after_a_break_clears_it() {
        // The server dropped one session and took the next: it is there.
        let mut w = Watch::default();
        w.test_failed(&reset(), || "t".into());
        w.test_ok();
        assert_eq!(w.refused(addr()), None);
    }

    #[test]
    fn failures_the_server_answered_or_that_never_connected_are_not_breaks() {
        let mut w = Watch::default();
        for e in [
            ClientError::Validation("sender and receiver disagree".into()),
            ClientError::Busy("busy".into()),
            ClientError::Peer("handshake failed".into()),
            ClientError::Refused("Connection refused".into()),
        ] {
            w.test_failed(&e, || "t".into());
        }
        assert_eq!(w.refused(addr()), None);
    }

    #[test]
    fn the_first_break_dates_the_departure() {
        let mut w = Watch::default();
        w.test_failed(&reset(), || "first".into());
        w.test_failed(&reset(), || "second".into());
        assert_eq!(w.refused(addr()).map(|g| g.at.as_str()), Some("first"));
    }
}
