//! Stamps the git revision hostbench is built from into `HOSTBENCH_REVISION`, so every result
//! says which code produced it (`tool.revision`). A build outside a git checkout (a crate
//! tarball) simply has none.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
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
    if let Some(rev) = git(&["rev-parse", "--short=12", "HEAD"]) {
        println!("cargo:rustc-env=HOSTBENCH_REVISION={rev}");
    }
}
