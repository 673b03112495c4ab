//! hostbench-fleet: a whole cluster measured through Slurm, the engine HPC sites already run.
//!
//! - `slurm`: the Slurm client tools, asked (`sinfo`, `scontrol`, `squeue`) and driven (`sbatch`);
//! - `schedule`: which node pairs the network phase measures, in rounds of disjoint pairs;
//! - `script`: the batch script (`--print-script` shows it; `submit` hands it to `sbatch`);
//! - `submit`: outside an allocation: pick the nodes, make the fleet directory, submit, follow
//!   the job with progress until it leaves the queue;
//! - `driver`: inside an allocation: phase 1, one `hostbench run` per node at once (one `srun`
//!   step each), then phase 2, `net server` / `net client` per pair, round by round.
//!
//! Everything a node measures is written by that node into the fleet directory as it goes
//! (`hostbench_report::fleet::layout`), so a cancelled job, a dead node or a killed driver loses
//! nothing already measured; the report is made from the directory, not from this process's
//! memory.

pub mod driver;
pub mod schedule;
pub mod script;
pub mod slurm;
pub mod submit;

use std::io::Read as _;
use std::path::{Path, PathBuf};

use hostbench_core::BenchError;
use hostbench_report::fleet::layout::{FleetDir, Plan, Status, StatusFile, PLAN_SCHEMA};

pub use schedule::PairSchedule;

/// What to do with nodes other users' jobs hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// Submit anyway: Slurm queues the job until enough nodes are free.
    Wait,
    /// Measure only the idle nodes now; the busy ones are listed as not measured.
    Skip,
}

/// What each node runs in phase 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeJob {
    /// `hostbench run`: the benchmarks, into the node's run.json (`fleet run`).
    Run,
    /// `hostbench check`: the verdict, into the node's check.json (`fleet check`); no network
    /// phase.
    Check,
}

impl NodeJob {
    /// The `fleet` subcommand that drives this job (the batch script repeats it).
    pub fn verb(self) -> &'static str {
        match self {
            NodeJob::Run => "run",
            NodeJob::Check => "check",
        }
    }
}

/// A fleet run, resolved from the command line.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub nodes: usize,
    pub nodelist: Option<String>,
    pub partition: Option<String>,
    pub time: Option<String>,
    pub profile: String,
    pub scale: f64,
    pub pairs: PairSchedule,
    pub busy: Busy,
    /// The directory of fleets (absolute): the run goes into `out/<fleet id>/`.
    pub out: PathBuf,
    pub fleet_id: Option<String>,
    /// Node-local scratch for the disk benchmark; None: `$TMPDIR` on the node, else /tmp.
    pub scratch: Option<PathBuf>,
    /// Arguments of every node's `hostbench run` beyond the fleet's own (profile, scale, only…).
    pub run_args: Vec<String>,
    /// The `fleet run` arguments the batch script repeats, so the job does what was asked.
    pub forward_args: Vec<String>,
    /// This binary, as every node runs it (on the shared filesystem, like the fleet directory).
    pub exe: PathBuf,
    pub quiet: bool,
    /// What each node runs (`run_args` are that command's arguments).
    pub job: NodeJob,
}

/// What a fleet run leaves: the directory to report from, and whether this process submitted
/// the job (then it stores the runs in the history, not the job's own driver).
#[derive(Debug, Clone)]
pub struct Outcome {
    pub dir: FleetDir,
    pub job_id: Option<String>,
}

/// Measure the fleet: inside an allocation (`SLURM_JOB_ID` set) drive it here; otherwise submit
/// it with `sbatch` and wait for it.
pub fn run(cfg: &FleetConfig) -> Result<Outcome, BenchError> {
    match std::env::var("SLURM_JOB_ID").ok().filter(|j| !j.is_empty()) {
        Some(job) => driver::drive(cfg, &job),
        None => submit::submit_and_wait(cfg),
    }
}

/// A new fleet id: the UTC time, as run directories are named, and the job when known.
pub fn new_fleet_id(job: Option<&str>) -> String {
    let stamp = hostbench_core::model::now_rfc3339().replace([':', '-'], "");
    match job {
        Some(j) => format!("{stamp}-j{j}"),
        None => stamp,
    }
}

/// Create `out/<id>/` with its token (mode 0600) unless it exists; a directory that cannot be
/// written is the user's mistake (exit 2), found before anything is submitted.
pub fn open_fleet_dir(out: &Path, id: &str) -> Result<FleetDir, BenchError> {
    if id.is_empty() || id.contains('/') || id == "." || id == ".." {
        return Err(BenchError::invalid(format!(
            "--fleet-id '{id}': not a directory name"
        )));
    }
    let dir = FleetDir::new(out.join(id));
    let unwritable = |e: std::io::Error| {
        BenchError::invalid(format!(
            "--out {}: the fleet directory cannot be written ({e})",
            out.display()
        ))
    };
    std::fs::create_dir_all(dir.nodes_dir()).map_err(unwritable)?;
    std::fs::create_dir_all(dir.net_dir()).map_err(unwritable)?;
    if !dir.token().exists() {
        write_token(&dir.token()).map_err(unwritable)?;
    }
    Ok(dir)
}

/// 32 random bytes, hex: the pre-shared token of this fleet's network tests. Created with mode
/// 0600 from the start, so it is never readable by others, even for an instant.
fn write_token(path: &Path) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut raw = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut raw)?;
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(hex.as_bytes())?;
    f.write_all(b"\n")
}

/// The plan, when there is a readable one (the report's reader, lenient here: a job that has
/// not written it yet is a normal state while following it).
pub fn read_plan(dir: &FleetDir) -> Option<Plan> {
    hostbench_report::fleet::read_plan(dir).ok()
}

pub fn write_plan(dir: &FleetDir, plan: &Plan) -> Result<(), BenchError> {
    hostbench_core::runner::write_json_atomic(&dir.plan(), plan)
}

pub fn new_plan(cfg: &FleetConfig, id: &str) -> Plan {
    Plan {
        schema: PLAN_SCHEMA.into(),
        fleet_id: id.into(),
        created_at: hostbench_core::model::now_rfc3339(),
        nodes: Vec::new(),
        not_measured: Vec::new(),
        net_pairs: cfg.pairs.name(),
        rounds: Vec::new(),
        profile: cfg.profile.clone(),
        scale: cfg.scale,
        job_id: None,
        partition: cfg.partition.clone(),
    }
}

pub fn read_status(path: &Path) -> Option<StatusFile> {
    hostbench_report::fleet::read_status(path, "status")
        .ok()
        .flatten()
}

pub fn write_status(path: &Path, status: &StatusFile) -> Result<(), BenchError> {
    hostbench_core::runner::write_json_atomic(path, status)
}

/// Counts of node statuses, for progress lines.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    pub pending: usize,
    pub running: usize,
    pub ok: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl Tally {
    pub fn of(dir: &FleetDir, nodes: &[String]) -> Self {
        let mut t = Tally::default();
        for n in nodes {
            match read_status(&dir.node_status(n)).map(|s| s.status) {
                None | Some(Status::Pending) => t.pending += 1,
                Some(Status::Running) => t.running += 1,
                Some(Status::Ok) => t.ok += 1,
                Some(Status::Failed) => t.failed += 1,
                Some(Status::Skipped) => t.skipped += 1,
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn fleet_dir_has_a_private_token() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = open_fleet_dir(tmp.path(), "f1").expect("dir");
        let mode = std::fs::metadata(dir.token())
            .expect("token")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let token = std::fs::read_to_string(dir.token()).expect("read");
        assert_eq!(token.trim().len(), 64);
        // Opening it again keeps the token (the job reuses what the submitter made).
        open_fleet_dir(tmp.path(), "f1").expect("again");
        assert_eq!(std::fs::read_to_string(dir.token()).expect("read"), token);
        assert!(open_fleet_dir(tmp.path(), "../x").is_err());
    }

    #[test]
    fn unwritable_out_is_bad_input() {
        let e = open_fleet_dir(Path::new("/proc/hostbench-no"), "f").err();
        assert!(matches!(e, Some(BenchError::InvalidInput(m)) if m.contains("cannot be written")));
    }
}
