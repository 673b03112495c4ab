//! What the build stamped into the binary (build.rs): the git commit and the oldest glibc the
//! binary runs on, for `hostbench --version` and every result's `tool`. A site that copies one
//! binary to every node needs the floor to know which nodes it starts on.

/// The git commit built from, when the build had one (a checkout, or a `scripts/package`
/// source tarball's `REVISION` file).
pub const REVISION: Option<&str> = option_env!("HOSTBENCH_REVISION");

/// The oldest glibc the binary runs on: "glibc >= 2.17" for the portable build of
/// `scripts/package`, "glibc >= 2.36, the build host's" for a plain cargo build on Debian 12.
pub const GLIBC: &str = env!("HOSTBENCH_GLIBC");

/// The one line `hostbench --version` prints after the program name.
pub fn version_line() -> String {
    format!(
        "{} (commit {}, {})",
        env!("CARGO_PKG_VERSION"),
        REVISION.unwrap_or("unknown"),
        GLIBC
    )
}
