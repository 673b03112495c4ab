//! The operating system: hostname and kernel release (uname, for the live machine) and the
//! distribution's name from os-release.
//!
//! Under a fixture root only its files count (no uname fallback), so tests are deterministic.

use std::path::Path;

use super::read_trimmed;

pub(super) struct Uname {
    pub(super) nodename: String,
    pub(super) release: String,
}

#[cfg(unix)]
pub(super) fn uname() -> Option<Uname> {
    fn field(chars: &[libc::c_char]) -> String {
        let bytes: Vec<u8> = chars
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c.to_ne_bytes()[0]) // c_char is i8 on x86, u8 on Arm
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
    // SAFETY: utsname is plain data (arrays of c_char), for which all zeroes is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname that outlives the call.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    Some(Uname {
        nodename: field(&u.nodename),
        release: field(&u.release),
    })
}

#[cfg(not(unix))]
pub(super) fn uname() -> Option<Uname> {
    None
}

/// `PRETTY_NAME` from os-release (either location the spec allows), else `NAME VERSION`.
pub(super) fn os_name(root: &Path) -> Option<String> {
    let text = read_trimmed(root, "etc/os-release")
        .or_else(|| read_trimmed(root, "usr/lib/os-release"))?;
    let field = |key: &str| {
        text.lines().find_map(|line| {
            line.trim()
                .strip_prefix(key)
                .and_then(|v| v.strip_prefix('='))
                .map(unquote)
                .filter(|v| !v.is_empty())
        })
    };
    field("PRETTY_NAME").or_else(|| match (field("NAME"), field("VERSION")) {
        (Some(n), Some(v)) => Some(format!("{n} {v}")),
        (n, _) => n,
    })
}

/// Undo os-release's shell-style quoting.
fn unquote(v: &str) -> String {
    let v = v.trim();
    let inner = v
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
        .unwrap_or(v);
    let mut out = String::with_capacity(inner.len());
    let mut escaped = false;
    for c in inner.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tests::put;

    #[test]
    fn os_release_quoting() {
        assert_eq!(unquote("\"Debian GNU/Linux 12\""), "Debian GNU/Linux 12");
        assert_eq!(unquote("'Arch Linux'"), "Arch Linux");
        assert_eq!(unquote("Fedora"), "Fedora");
        assert_eq!(unquote("\"say \\\"hi\\\"\""), "say \"hi\"");
        assert_eq!(unquote("\""), "\"");
        let dir = tempfile::tempdir().expect("tempdir");
        put(
            dir.path(),
            "usr/lib/os-release",
            "NAME=Alpine\nVERSION=3.19\n",
        );
        assert_eq!(os_name(dir.path()).as_deref(), Some("Alpine 3.19"));
    }
}
