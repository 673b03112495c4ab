//! `hostbench --version`: the version, the git commit and the glibc floor, the three facts a site
//! needs to know which build runs on which nodes (scripts/package's portable binary says 2.17).

mod common;

use std::process::Command as StdCommand;

use common::*;

fn stdout_of(program: &str, args: &[&str]) -> Option<String> {
    let out = StdCommand::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn version_names_the_commit_and_the_glibc_floor() {
    let out = hostbench().arg("--version").output().expect("run");
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).expect("utf-8");
    let expected_start = format!("hostbench {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&expected_start), "{line}");
    assert!(line.ends_with(")\n"), "{line}");
    assert_eq!(line.lines().count(), 1, "{line}");

    // Built from this checkout: the commit is its HEAD (a source tarball without .git says
    // its REVISION file's commit, or "unknown").
    let workspace = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let in_checkout = stdout_of("git", &["-C", workspace, "rev-parse", "--show-toplevel"])
        .is_some_and(|top| {
            std::fs::canonicalize(top).ok() == std::fs::canonicalize(workspace).ok()
        });
    if in_checkout && !std::path::Path::new(workspace).join("REVISION").exists() {
        let head = stdout_of("git", &["-C", workspace, "rev-parse", "--short=12", "HEAD"])
            .expect("git rev-parse");
        assert!(
            line.contains(&format!("(commit {head}, ")),
            "{line} vs {head}"
        );
    }

    // A plain cargo build links against this host's glibc, so that is its floor; the portable
    // build sets HOSTBENCH_GLIBC_FLOOR (scripts/package) and says 2.17.
    match option_env!("HOSTBENCH_GLIBC_FLOOR") {
        Some(floor) => assert!(line.contains(&format!(", glibc >= {floor})")), "{line}"),
        None if cfg!(target_env = "gnu") => {
            let host = stdout_of("getconf", &["GNU_LIBC_VERSION"]).expect("getconf");
            let version = host.trim_start_matches("glibc ");
            assert!(
                line.contains(&format!(", glibc >= {version}, the build host's)")),
                "{line} vs {host}"
            );
        }
        None => {}
    }

    // Every subcommand answers --version the same way, under its own name (clap's).
    let sub = hostbench()
        .args(["cpu", "--version"])
        .output()
        .expect("run");
    assert_eq!(
        String::from_utf8_lossy(&sub.stdout),
        line.replacen("hostbench ", "hostbench-cpu ", 1)
    );
}
