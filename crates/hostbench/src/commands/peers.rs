//! `hostbench peers`: every reference tool hostbench knows, whether this machine has it, its
//! version, the Debian package that provides it, what it stands beside and how hostbench runs it.
//! The list comes from the subsystems' registry, so a new subsystem's tools appear here without
//! a change.

use serde::Serialize;

use crate::cli::PeersArgs;
use crate::registry::SUBSYSTEMS;
use crate::Exit;

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
    how: &'static str,
}

pub fn run(args: &PeersArgs) -> anyhow::Result<Exit> {
    let mut peers: Vec<Peer> = Vec::new();
    for s in SUBSYSTEMS.iter() {
        for t in s.reference_tools() {
            let usage = Use {
                subsystem: s.name(),
                serves: t.serves,
                how: t.how,
            };
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
            outln!("  {:<7} run by: {}", "", u.how);
        }
    }
    Ok(Exit::Ok)
}
