//! Pre-shared-token authentication by challenge–response, both ways.
//!
//! The client sends a fresh nonce; the server answers with its own fresh nonce; the client proves
//! it holds the token with HMAC-SHA256(token, "client" ‖ server nonce ‖ client nonce), and the
//! server proves the same with a differently labelled MAC over both nonces and the session
//! cookie. The token never crosses the wire, and because the server's nonce is new for every
//! connection a recorded exchange is useless on the next one (iperf3's RSA token carries only a
//! timestamp and can be replayed inside its skew window). MACs are compared in constant time.

use std::path::Path;

use hmac::{Hmac, Mac};
use hostbench_core::BenchError;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of every nonce and cookie (256 bits).
pub const NONCE_BYTES: usize = 32;

/// A shared secret. `Debug` never prints it.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// The token file's contents without surrounding whitespace (so `echo secret > f` works).
    pub fn from_file(path: &Path) -> Result<Self, BenchError> {
        let raw = std::fs::read(path)
            .map_err(|e| BenchError::invalid(format!("--token-file {}: {e}", path.display())))?;
        let text = raw.trim_ascii();
        if text.len() < 8 {
            return Err(BenchError::invalid(format!(
                "--token-file {}: the token must be at least 8 bytes (it has {})",
                path.display(),
                text.len()
            )));
        }
        Ok(Self(text.to_vec()))
    }

    /// A random token for the in-process loopback server.
    pub fn random() -> Result<Self, BenchError> {
        Ok(Self(random_bytes()?.to_vec()))
    }

    pub fn from_bytes(b: &[u8]) -> Self {
        Self(b.to_vec())
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> HmacSha256 {
        // HMAC takes keys of any length, so this cannot fail.
        let mut m = <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC accepts any key");
        m.update(b"hostbench-net/v1 ");
        m.update(label);
        for p in parts {
            m.update(&(p.len() as u32).to_be_bytes());
            m.update(p);
        }
        m
    }

    /// The client's proof.
    pub fn client_mac(&self, server_nonce: &[u8], client_nonce: &[u8]) -> String {
        hex(&self
            .mac(b"client", &[server_nonce, client_nonce])
            .finalize()
            .into_bytes())
    }

    /// The server's proof, bound to the cookie it hands out.
    pub fn server_mac(&self, client_nonce: &[u8], server_nonce: &[u8], cookie: &[u8]) -> String {
        hex(&self
            .mac(b"server", &[client_nonce, server_nonce, cookie])
            .finalize()
            .into_bytes())
    }

    /// Constant-time check of a client's proof.
    pub fn verify_client(&self, server_nonce: &[u8], client_nonce: &[u8], mac_hex: &str) -> bool {
        let Some(given) = unhex(mac_hex) else {
            return false;
        };
        self.mac(b"client", &[server_nonce, client_nonce])
            .verify_slice(&given)
            .is_ok()
    }

    /// Constant-time check of the server's proof.
    pub fn verify_server(
        &self,
        client_nonce: &[u8],
        server_nonce: &[u8],
        cookie: &[u8],
        mac_hex: &str,
    ) -> bool {
        let Some(given) = unhex(mac_hex) else {
            return false;
        };
        self.mac(b"server", &[client_nonce, server_nonce, cookie])
            .verify_slice(&given)
            .is_ok()
    }
}

/// 32 bytes from the kernel's CSPRNG.
pub fn random_bytes() -> Result<[u8; NONCE_BYTES], BenchError> {
    let mut buf = [0u8; NONCE_BYTES];
    let mut got = 0;
    while got < buf.len() {
        // The raw system call: glibc's `getrandom` wrapper arrived in 2.25, and the portable
        // binary (scripts/package) links against glibc 2.17.
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getrandom,
                buf[got..].as_mut_ptr(),
                buf.len() - got,
                0,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(BenchError::Failed(format!("getrandom: {e}")));
        }
        got += n as usize;
    }
    Ok(buf)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lower- or upper-case hex to bytes; `None` for odd lengths or other characters.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    let t = text.as_bytes();
    if !t.len().is_multiple_of(2) || t.len() > 2 * 1024 {
        return None;
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    t.chunks(2)
        .map(|p| Some(nib(p[0])? << 4 | nib(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_only_with_the_same_token_and_nonces() {
        let t = Token::from_bytes(b"correct horse");
        let wrong = Token::from_bytes(b"battery staple");
        let (sn, cn, cookie) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        let mac = t.client_mac(&sn, &cn);
        assert!(t.verify_client(&sn, &cn, &mac));
        assert!(!wrong.verify_client(&sn, &cn, &mac));
        // A new server nonce: the recorded proof no longer fits (replay).
        assert!(!t.verify_client(&[9u8; 32], &cn, &mac));
        // The server's proof is not the client's with the arguments swapped.
        let smac = t.server_mac(&cn, &sn, &cookie);
        assert_ne!(smac, mac);
        assert!(t.verify_server(&cn, &sn, &cookie, &smac));
        assert!(!t.verify_server(&cn, &sn, &[4u8; 32], &smac));
        assert!(!t.verify_client(&sn, &cn, "zz"));
        assert!(!t.verify_client(&sn, &cn, ""));
    }

    #[test]
    fn hex_round_trips_and_rejects_junk() {
        let b = random_bytes().expect("getrandom");
        assert_eq!(unhex(&hex(&b)).as_deref(), Some(&b[..]));
        assert_ne!(random_bytes().expect("getrandom"), b);
        assert_eq!(unhex("0aFf"), Some(vec![0x0a, 0xff]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("g0"), None);
    }

    #[test]
    fn token_files_are_trimmed_and_short_ones_refused() {
        let dir = std::env::temp_dir().join(format!("hb-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("t");
        std::fs::write(&f, "  s3cret-token\n").expect("write");
        let t = Token::from_file(&f).expect("token");
        assert!(t.verify_client(
            &[0; 32],
            &[1; 32],
            &Token::from_bytes(b"s3cret-token").client_mac(&[0; 32], &[1; 32])
        ));
        assert!(!format!("{t:?}").contains("s3cret"));
        std::fs::write(&f, "short\n").expect("write");
        let e = Token::from_file(&f).expect_err("short");
        assert!(e.to_string().contains("at least 8"), "{e}");
        let e = Token::from_file(&dir.join("missing")).expect_err("missing");
        assert!(e.to_string().contains("--token-file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
