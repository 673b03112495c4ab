//! Stamps what `hostbench --version` and every result's `tool` say about the build:
//!
//! - `HOSTBENCH_REVISION`, the git commit built from (`tool.revision`), so every result says which
//!   code produced it. A source tarball made by `scripts/package` has no `.git` and carries the
//!   commit in a `REVISION` file at its root instead; a tree that has neither has none.
//! - `HOSTBENCH_GLIBC`, the oldest glibc the binary runs on: `scripts/package` links against
//!   glibc 2.17 and says so in `HOSTBENCH_GLIBC_FLOOR`; any other build links against the build
//!   host's glibc, whose version is then the floor.

use std::path::{Path, PathBuf};
use std::process::Command;

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn git(args: &[&str]) -> Option<String> {
    output("git", args)
}

fn revision(workspace: &Path) -> Option<String> {
    let file = workspace.join("REVISION");
    if file.is_file() {
        println!("cargo:rerun-if-changed={}", file.display());
        let rev = std::fs::read_to_string(&file).ok()?.trim().to_string();
        return (!rev.is_empty()).then_some(rev);
    }
    // Only this workspace's own repository: a source tarball unpacked inside some other
    // checkout (a build directory under a project's tree) must not take that project's commit.
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != workspace.canonicalize().ok()? {
        return None;
    }
    // Rebuild when HEAD moves (a commit, a checkout), not on every edit of the tree, so the
    // revision is the commit built from, without a "dirty" mark that could not stay current.
    if let Some(p) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={p}");
    }
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &head_ref]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}

/// The phrase `hostbench --version` ends with: "glibc >= 2.17" and the like.
fn glibc_floor() -> String {
    println!("cargo:rerun-if-env-changed=HOSTBENCH_GLIBC_FLOOR");
    if let Ok(floor) = std::env::var("HOSTBENCH_GLIBC_FLOOR") {
        return format!("glibc >= {floor}");
    }
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu") {
        return "not a glibc build".to_string();
    }
    // A cross build links against the cross toolchain's glibc, which this host cannot name.
    if std::env::var("TARGET").ok() != std::env::var("HOST").ok() {
        return "glibc unknown (cross build)".to_string();
    }
    // getconf says "glibc 2.36".
    match output("getconf", &["GNU_LIBC_VERSION"])
        .and_then(|s| s.strip_prefix("glibc ").map(str::to_string))
    {
        Some(v) => format!("glibc >= {v}, the build host's"),
        None => "glibc unknown".to_string(),
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    // crates/hostbench-core -> the workspace root.
    let workspace = manifest.join("../..");
    if let Some(rev) = revision(&workspace) {
        println!("cargo:rustc-env=HOSTBENCH_REVISION={rev}");
    }
    println!("cargo:rustc-env=HOSTBENCH_GLIBC={}", glibc_floor());
}
