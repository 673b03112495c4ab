//! The batch script: what `fleet run` submits outside an allocation, and what `--print-script`
//! prints for sites that submit by hand. It asks for whole nodes (`--exclusive`, one task each),
//! keeps the job alive when a node fails (`--no-kill`: the other nodes' results are the point)
//! and never requeues it (a requeued fleet would measure twice into one directory); its one
//! command is this binary's `fleet run` again, which inside the allocation drives the steps.

use std::fmt::Write as _;
use std::path::Path;

use crate::FleetConfig;

/// Quote `s` for a POSIX shell: as is when plainly safe, else in single quotes.
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+%@".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The script. `fleet_dir` (the submitter made it) receives Slurm's output file and is named to
/// the job; without it (`--print-script`) the job makes a fleet directory of its own. `nodelist`
/// is the nodes the submitter picked; without it the script names `--nodelist` as given.
pub fn batch_script(
    cfg: &FleetConfig,
    fleet: Option<(&str, &Path)>,
    nodelist: Option<&[String]>,
) -> String {
    let mut s = String::from("#!/bin/sh\n");
    let mut opt = |o: String| {
        let _ = writeln!(s, "#SBATCH {o}");
    };
    opt("--job-name=hostbench-fleet".into());
    let nodes = nodelist.map_or(cfg.nodes, <[String]>::len);
    opt(format!("--nodes={nodes}"));
    opt("--ntasks-per-node=1".into());
    opt("--exclusive".into());
    opt("--no-kill".into());
    opt("--no-requeue".into());
    if let Some(p) = &cfg.partition {
        opt(format!("--partition={p}"));
    }
    if let Some(t) = &cfg.time {
        opt(format!("--time={t}"));
    }
    // The submitter names the nodes it chose; a printed script keeps the user's own host list
    // (`n[1-4]`), which sbatch expands: the job then must contain exactly those nodes.
    match (nodelist, &cfg.nodelist) {
        (Some(list), _) => opt(format!("--nodelist={}", list.join(","))),
        (None, Some(expr)) => opt(format!("--nodelist={expr}")),
        (None, None) => {}
    }
    match fleet {
        Some((_, dir)) => opt(format!("--output={}/slurm-%j.out", dir.display())),
        None => opt(format!(
            "--output={}/hostbench-fleet-%j.out",
            cfg.out.display()
        )),
    }
    s.push_str(
        "# hostbench fleet: inside the allocation this runs one `hostbench run` per node (srun),\n\
         # then the network between node pairs, and writes the fleet report.\n",
    );
    let mut cmd = vec![
        cfg.exe.display().to_string(),
        "fleet".into(),
        cfg.job.verb().into(),
    ];
    cmd.extend(cfg.forward_args.iter().cloned());
    if let Some((id, _)) = fleet {
        // The submitter stores the runs in its history when the job is done.
        cmd.extend(["--fleet-id".into(), id.to_string()]);
        if cfg.job == crate::NodeJob::Run && !cmd.iter().any(|a| a == "--no-history") {
            cmd.push("--no-history".into());
        }
    }
    let line: Vec<String> = cmd.iter().map(|a| shell_quote(a)).collect();
    let _ = writeln!(s, "exec {}", line.join(" "));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Busy, PairSchedule};
    use std::path::PathBuf;

    fn cfg() -> FleetConfig {
        FleetConfig {
            nodes: 3,
            nodelist: None,
            partition: Some("batch".into()),
            time: Some("30".into()),
            profile: "quick".into(),
            scale: 1.0,
            pairs: PairSchedule::Ring,
            busy: Busy::Wait,
            out: PathBuf::from("/shared/fleet"),
            fleet_id: None,
            scratch: None,
            run_args: Vec::new(),
            forward_args: vec![
                "--nodes".into(),
                "3".into(),
                "--only".into(),
                "cpu mem".into(),
            ],
            exe: PathBuf::from("/opt/hostbench"),
            quiet: false,
            job: crate::NodeJob::Run,
        }
    }

    #[test]
    fn script_asks_for_whole_nodes_and_reruns_itself() {
        let s = batch_script(&cfg(), None, None);
        for want in [
            "#SBATCH --nodes=3",
            "#SBATCH --exclusive",
            "#SBATCH --no-kill",
            "#SBATCH --no-requeue",
            "#SBATCH --partition=batch",
            "#SBATCH --time=30",
            "#SBATCH --output=/shared/fleet/hostbench-fleet-%j.out",
            "exec /opt/hostbench fleet run --nodes 3 --only 'cpu mem'",
        ] {
            assert!(s.contains(want), "{want} in\n{s}");
        }
        assert!(!s.contains("--fleet-id") && !s.contains("--nodelist"));
        let mut named = cfg();
        named.nodelist = Some("n[1-3]".into());
        let s = batch_script(&named, None, None);
        assert!(s.contains("#SBATCH --nodes=3\n") && s.contains("#SBATCH --nodelist=n[1-3]\n"));
        let dir = PathBuf::from("/shared/fleet/f1");
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let s = batch_script(&cfg(), Some(("f1", &dir)), Some(&nodes));
        assert!(s.contains("#SBATCH --nodes=2\n") && s.contains("--nodelist=n1,n2"));
        assert!(s.contains("--fleet-id f1 --no-history"));
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a-b/c"), "a-b/c");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
