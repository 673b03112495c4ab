//! `hostbench peers`: every reference tool hostbench knows, whether this machine has it, its
//! version, the Debian package that provides it, what it stands beside and how hostbench runs it.
//! The list comes from the subsystems' registry, so a new subsystem's tools appear here without
//! a change; the "run by" lines are made from the CLI definition (the commands that take
//! `--reference`) and `run`'s own reference rule per profile, so they cannot fall behind what the
//! code does (a hand-written line said fio was "not yet run by the binary" long after it was).

use serde::Serialize;

use crate::cli::{PeersArgs, ProfileArg};
use crate::commands::run::scope_for;
use crate::registry::SUBSYSTEMS;
use crate::settings::profile;
use crate::Exit;
use hostbench_core::subsystem::{ReferenceScope, ReferenceTool};

#[derive(Debug, Serialize)]
struct Peer {
    name: &'static str,
    found: bool,
    path: Option<String>,
    /// The installed package's version (None: not installed, or not a Debian system).
    version: Option<String>,
    package: &'static str,
    /// What it serves per subsystem (likwid-bench serves cpu and mem).
    uses: Vec<Use>,
}

#[derive(Debug, Serialize)]
struct Use {
    subsystem: &'static str,
    serves: &'static str,
    /// The lines below, joined: how hostbench runs it.
    how: String,
    /// `hostbench run`: the profiles that run it beside `beside`, and those that run it beside
    /// every case it can express.
    run: RunUse,
    /// Commands whose `--reference` runs it beside every case.
    commands: Vec<String>,
    also: &'static str,
}

#[derive(Debug, Serialize)]
struct RunUse {
    beside: &'static str,
    headline_profiles: Vec<&'static str>,
    every_case_profiles: Vec<&'static str>,
}

impl Use {
    fn of(subsystem: &'static str, tool: &ReferenceTool) -> Use {
        let profiles = |want: ReferenceScope| {
            ProfileArg::ALL
                .into_iter()
                .filter(|&p| scope_for(p, false, false) == want)
                .map(|p| profile(p).name())
                .collect::<Vec<_>>()
        };
        let run = RunUse {
            beside: tool.in_run,
            // A subsystem whose run never runs the tool has no headline for it.
            headline_profiles: if tool.in_run.is_empty() {
                Vec::new()
            } else {
                profiles(ReferenceScope::Headline)
            },
            every_case_profiles: profiles(ReferenceScope::All),
        };
        let commands = crate::cli::reference_commands(subsystem)
            .into_iter()
            .map(|c| format!("hostbench {c} --reference"))
            .collect();
        let mut u = Use {
            subsystem,
            serves: tool.serves,
            how: String::new(),
            run,
            commands,
            also: tool.also,
        };
        u.how = u.lines().join("; ");
        u
    }

    /// How hostbench runs the tool, one line each.
    fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.run.headline_profiles.is_empty() {
            lines.push(format!(
                "hostbench run (profiles {}): beside {}",
                self.run.headline_profiles.join(", "),
                self.run.beside
            ));
        }
        let mut every = self
            .run
            .every_case_profiles
            .iter()
            .map(|p| format!("hostbench run --profile {p}"))
            .collect::<Vec<_>>();
        every.push("hostbench run --reference".into());
        every.extend(self.commands.iter().cloned());
        lines.push(format!("{}: beside every case", every.join(", ")));
        if !self.also.is_empty() {
            lines.push(format!("also: {}", self.also));
        }
        lines
    }
}

pub fn run(args: &PeersArgs) -> anyhow::Result<Exit> {
    let mut peers: Vec<Peer> = Vec::new();
    for s in SUBSYSTEMS.iter() {
        for t in s.reference_tools() {
            let usage = Use::of(s.name(), t);
            if let Some(p) = peers.iter_mut().find(|p| p.name == t.name) {
                p.uses.push(usage);
                continue;
            }
            let path = hostbench_core::reference::locate(t.name);
            peers.push(Peer {
                name: t.name,
                found: path.is_some(),
                path: path.map(|p| p.display().to_string()),
                version: hostbench_core::reference::package_version(t.package),
                package: t.package,
                uses: vec![usage],
            });
        }
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&peers)?);
        return Ok(Exit::Ok);
    }
    for p in &peers {
        let found = match (&p.path, &p.version) {
            (Some(path), Some(v)) => format!("{path}, {v}"),
            (Some(path), None) => path.clone(),
            (None, _) => format!("not installed (apt install {})", p.package),
        };
        outln!("{:<17} {found}", p.name);
        for u in &p.uses {
            outln!("  {:<7} {}", u.subsystem, u.serves);
            for (i, line) in u.lines().iter().enumerate() {
                let head = if i == 0 { "run by:" } else { "" };
                outln!("  {:<7} {head:<7} {line}", "");
            }
        }
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tool can be run from the command line, and every script a tool names exists.
    #[test]
    fn every_reference_tool_has_a_command_and_its_scripts_exist() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for s in SUBSYSTEMS.iter() {
            for t in s.reference_tools() {
                let u = Use::of(s.name(), t);
                assert!(
                    !u.commands.is_empty(),
                    "{}: no command of {} takes --reference",
                    t.name,
                    s.name()
                );
                for word in t.also.split_whitespace() {
                    let word = word.trim_matches(|c: char| !c.is_ascii_graphic() || c == ',');
                    if word.starts_with("scripts/") {
                        assert!(root.join(word).exists(), "{}: {word} missing", t.name);
                    }
                }
            }
        }
    }

    #[test]
    fn the_run_lines_follow_runs_reference_rule() {
        let fio = SUBSYSTEMS
            .iter()
            .find(|s| s.name() == "disk")
            .expect("disk")
            .reference_tools()[0];
        let u = Use::of("disk", &fio);
        assert_eq!(u.run.headline_profiles, ["standard", "full"]);
        assert_eq!(u.run.every_case_profiles, ["classic"]);
        assert_eq!(u.commands, ["hostbench disk --reference"]);
        assert!(
            u.how
                .starts_with("hostbench run (profiles standard, full): beside "),
            "{}",
            u.how
        );
        assert!(!u.how.contains("not yet"), "{}", u.how);
    }
}
