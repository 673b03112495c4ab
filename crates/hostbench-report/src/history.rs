//! The history store: every run in an embedded SQLite database.
//!
//! One file (default `<data dir>/hostbench/history.sqlite`, `HOSTBENCH_DB` or `--db` to choose)
//! in WAL mode, so readers never block the run that is writing. Each run is inserted in one
//! transaction — the whole result document plus one row per record — so a crash or SIGKILL
//! leaves either the complete run or none of it, and earlier runs are never touched.
//!
//! The schema is versioned with `PRAGMA user_version` and migrated forward on open, each step in
//! its own transaction; a database from a newer hostbench is refused rather than guessed at, and
//! `PRAGMA application_id` tells our databases from other SQLite files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hostbench_core::model::{Metric, RunResult};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension};

use crate::compare::identity;
use crate::error::ReportError;
use crate::load::parse_run;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 2;
/// "hbch": marks a hostbench history database.
const APPLICATION_ID: i64 = 0x6862_6368;
/// Environment variable that overrides the default database path.
pub const DB_ENV: &str = "HOSTBENCH_DB";

/// Migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: [&str; 2] = [
    "
    CREATE TABLE runs (
        id            INTEGER PRIMARY KEY,
        started_at    TEXT NOT NULL,
        finished_at   TEXT,
        hostname      TEXT NOT NULL,
        tool_version  TEXT NOT NULL,
        profile       TEXT,
        results_dir   TEXT,
        records       INTEGER NOT NULL,
        skipped       INTEGER NOT NULL,
        inserted_at   TEXT NOT NULL,
        document      TEXT NOT NULL
    );
    CREATE TABLE records (
        run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq        INTEGER NOT NULL,
        benchmark  TEXT NOT NULL,
        identity   TEXT NOT NULL,
        params     TEXT NOT NULL,
        metric     TEXT NOT NULL,
        unit       TEXT NOT NULL,
        value      REAL NOT NULL,
        mean       REAL NOT NULL,
        stddev     REAL NOT NULL,
        n          INTEGER NOT NULL,
        peak       REAL,
        efficiency REAL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX records_by_identity ON records(identity, run_id);
",
    "
    ALTER TABLE runs ADD COLUMN fleet TEXT;
    ALTER TABLE runs ADD COLUMN node TEXT;
    CREATE INDEX runs_by_fleet ON runs(fleet, node);
",
];

/// The default database path: `$HOSTBENCH_DB`, else the user's data directory.
pub fn default_path() -> Result<PathBuf, ReportError> {
    if let Some(p) = std::env::var_os(DB_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    dirs::data_dir()
        .map(|d| d.join("hostbench").join("history.sqlite"))
        .ok_or_else(|| {
            ReportError::bad(format!(
                "no user data directory (HOME unset?): give --db FILE or set {DB_ENV}"
            ))
        })
}

/// One stored run, as `history list` shows it.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub id: i64,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub hostname: String,
    pub tool_version: String,
    pub profile: Option<String>,
    pub results_dir: Option<String>,
    pub records: i64,
    pub skipped: i64,
    /// The fleet run this run belongs to (`fleet run`), and the node it measured.
    pub fleet: Option<String>,
    pub node: Option<String>,
    /// The signal that stopped the run (`RunResult::interrupted`), if one did.
    pub interrupted: Option<String>,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Open (creating if needed) and migrate the database at `path`.
    pub fn open(path: &Path) -> Result<Self, ReportError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
        }
        let conn = Connection::open(path).map_err(|e| db_err(path, e))?;
        let mut store = Self {
            conn,
            path: path.to_path_buf(),
        };
        store
            .conn
            .busy_timeout(Duration::from_secs(10))
            .map_err(|e| db_err(path, e))?;
        store.check_identity()?;
        let mode: String = store
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| db_err(path, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(ReportError::Db {
                path: path.to_path_buf(),
                message: format!("cannot switch to WAL mode (journal mode is {mode})"),
            });
        }
        store
            .conn
            .execute_batch("PRAGMA foreign_keys = ON;")
            .map_err(|e| db_err(path, e))?;
        store.migrate()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn pragma_i64(&self, name: &str) -> Result<i64, ReportError> {
        self.conn
            .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .map_err(|e| db_err(&self.path, e))
    }

    /// Refuse SQLite files that are not ours, and databases from a newer hostbench.
    fn check_identity(&self) -> Result<(), ReportError> {
        // The first read parses the header: a corrupted or foreign file fails here.
        let app = self.pragma_i64("application_id")?;
        let version = self.pragma_i64("user_version")?;
        let tables: i64 = self
            .conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| db_err(&self.path, e))?;
        let ours = app == APPLICATION_ID || (app == 0 && version == 0 && tables == 0);
        if !ours {
            return Err(ReportError::bad(format!(
                "{}: not a hostbench history database (another application's SQLite file)",
                self.path.display()
            )));
        }
        if version > SCHEMA_VERSION {
            return Err(ReportError::bad(format!(
                "{}: database schema version {version} is newer than this hostbench supports \
                 ({SCHEMA_VERSION}); use a newer hostbench or another --db",
                self.path.display()
            )));
        }
        Ok(())
    }

    fn migrate(&mut self) -> Result<(), ReportError> {
        let path = self.path.clone();
        loop {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| db_err(&path, e))?;
            // Read the version inside the write lock: two processes may open a new file at once.
            let version: i64 = tx
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(|e| db_err(&path, e))?;
            if version >= SCHEMA_VERSION {
                return Ok(());
            }
            let step = MIGRATIONS.get(version as usize).ok_or_else(|| {
                ReportError::bad(format!(
                    "{}: unknown schema version {version}",
                    path.display()
                ))
            })?;
            tx.execute_batch(step).map_err(|e| db_err(&path, e))?;
            tx.execute_batch(&format!(
                "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {};",
                version + 1
            ))
            .map_err(|e| db_err(&path, e))?;
            tx.commit().map_err(|e| db_err(&path, e))?;
        }
    }

    /// Store a run in one transaction; returns its id.
    pub fn insert(
        &mut self,
        run: &RunResult,
        profile: Option<&str>,
        results_dir: Option<&Path>,
    ) -> Result<i64, ReportError> {
        self.insert_tagged(run, profile, results_dir, None)
    }

    /// Store one node's run of a fleet run: `fleet` = (fleet id, node name).
    pub fn insert_tagged(
        &mut self,
        run: &RunResult,
        profile: Option<&str>,
        results_dir: Option<&Path>,
        fleet: Option<(&str, &str)>,
    ) -> Result<i64, ReportError> {
        let path = self.path.clone();
        let e = |err| db_err(&path, err);
        let document = serde_json::to_string(run)
            .map_err(|x| ReportError::bad(format!("serialising the run: {x}")))?;
        let tx = self.conn.transaction().map_err(e)?;
        tx.execute(
            "INSERT INTO runs (started_at, finished_at, hostname, tool_version, profile,
                               results_dir, records, skipped, inserted_at, document, fleet, node)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                run.started_at,
                run.finished_at,
                run.host.hostname,
                run.tool.version,
                profile,
                results_dir.map(|d| d.display().to_string()),
                run.records.len() as i64,
                run.skipped.len() as i64,
                hostbench_core::model::now_rfc3339(),
                document,
                fleet.map(|f| f.0),
                fleet.map(|f| f.1),
            ],
        )
        .map_err(e)?;
        let id = tx.last_insert_rowid();
        {
            let mut stmt = tx
                .prepare(
                    "INSERT INTO records (run_id, seq, benchmark, identity, params, metric, unit,
                                          value, mean, stddev, n, peak, efficiency)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                )
                .map_err(e)?;
            for (seq, r) in run.records.iter().enumerate() {
                let metric = match r.metric {
                    Metric::Throughput => "throughput",
                    Metric::Latency => "latency",
                };
                stmt.execute(params![
                    id,
                    seq as i64,
                    r.benchmark,
                    identity(r),
                    serde_json::Value::Object(r.params.clone()).to_string(),
                    metric,
                    r.unit,
                    r.value,
                    r.stats.mean,
                    r.stats.stddev,
                    r.stats.n as i64,
                    r.peak.as_ref().map(|p| p.value),
                    r.efficiency,
                ])
                .map_err(e)?;
            }
        }
        tx.commit().map_err(e)?;
        Ok(id)
    }

    /// One figure's history on one host: (run start time, value, standard deviation) of the
    /// last `limit` stored runs that measured `identity` (benchmark and parameters), oldest
    /// first. Nodes of a fleet run count as their host's runs.
    pub fn trend(
        &self,
        hostname: &str,
        identity: &str,
        limit: usize,
    ) -> Result<Vec<(String, f64, f64)>, ReportError> {
        let e = |err| db_err(&self.path, err);
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT started_at, value, stddev FROM (
                     SELECT runs.started_at, records.value, records.stddev, runs.id
                     FROM records JOIN runs ON runs.id = records.run_id
                     WHERE records.identity = ?1 AND runs.hostname = ?2
                     ORDER BY runs.started_at DESC, runs.id DESC LIMIT ?3)
                 ORDER BY started_at, id",
            )
            .map_err(e)?;
        let rows = stmt
            .query_map(params![identity, hostname, limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// The stored history of `run`'s headline figures on its host (the last `limit` runs each,
    /// `run` itself included once it is stored), for report.html's trend charts.
    pub fn headline_trends(
        &self,
        run: &RunResult,
        limit: usize,
    ) -> Result<Vec<crate::chart::Trend>, ReportError> {
        let mut out = Vec::new();
        for h in crate::export::summary::all_headlines(run) {
            let r = h.record;
            let points = self.trend(&run.host.hostname, &identity(r), limit)?;
            let at = h.at;
            out.push(crate::chart::Trend {
                benchmark: r.benchmark.clone(),
                label: [h.what.as_str(), at.as_str()]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(" "),
                metric: r.metric,
                unit: r.unit.clone(),
                points,
            });
        }
        Ok(out)
    }

    /// Every stored run, oldest first.
    pub fn list(&self) -> Result<Vec<RunSummary>, ReportError> {
        let e = |err| db_err(&self.path, err);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, started_at, finished_at, hostname, tool_version, profile, results_dir,
                        records, skipped, fleet, node,
                        json_extract(document, '$.interrupted.signal')
                 FROM runs ORDER BY id",
            )
            .map_err(e)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(RunSummary {
                    id: r.get(0)?,
                    started_at: r.get(1)?,
                    finished_at: r.get(2)?,
                    hostname: r.get(3)?,
                    tool_version: r.get(4)?,
                    profile: r.get(5)?,
                    results_dir: r.get(6)?,
                    records: r.get(7)?,
                    skipped: r.get(8)?,
                    fleet: r.get(9)?,
                    node: r.get(10)?,
                    interrupted: r.get(11)?,
                })
            })
            .map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Resolve a run reference: an id, `latest`, `latest~N` (N runs before the latest), or the
    /// name of the run's results directory.
    pub fn resolve(&self, text: &str) -> Result<i64, ReportError> {
        let e = |err| db_err(&self.path, err);
        let unknown = || {
            ReportError::bad(format!(
                "unknown run id '{text}' (see `hostbench history list`; also latest, latest~N)"
            ))
        };
        let t = text.trim();
        if let Ok(id) = t.trim_start_matches('#').parse::<i64>() {
            let found: Option<i64> = self
                .conn
                .query_row("SELECT id FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .optional()
                .map_err(e)?;
            return found.ok_or_else(unknown);
        }
        if let Some(back) = t.strip_prefix("latest") {
            let back = match back {
                "" => 0,
                b => b
                    .strip_prefix('~')
                    .and_then(|n| n.parse::<i64>().ok())
                    .filter(|n| *n >= 0)
                    .ok_or_else(unknown)?,
            };
            let found: Option<i64> = self
                .conn
                .query_row(
                    "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1",
                    [back],
                    |r| r.get(0),
                )
                .optional()
                .map_err(e)?;
            return found.ok_or_else(unknown);
        }
        // A results directory name, e.g. 20250102T030405Z-myhost.
        for s in self.list()? {
            let dir_name = s
                .results_dir
                .as_deref()
                .and_then(|d| Path::new(d).file_name())
                .map(|n| n.to_string_lossy().into_owned());
            if dir_name.as_deref() == Some(t) {
                return Ok(s.id);
            }
        }
        Err(unknown())
    }

    /// The runs of fleet `fleet` (`latest` for the newest fleet): (node, run id) by node name.
    pub fn fleet_runs(&self, fleet: &str) -> Result<(String, Vec<(String, i64)>), ReportError> {
        let runs = self.list()?;
        let id = if fleet == "latest" {
            runs.iter().rev().find_map(|r| r.fleet.clone())
        } else {
            runs.iter()
                .find(|r| r.fleet.as_deref() == Some(fleet))
                .and_then(|r| r.fleet.clone())
        }
        .ok_or_else(|| {
            ReportError::bad(format!(
                "unknown fleet '{fleet}' (see the Fleet column of `hostbench history list`)"
            ))
        })?;
        let mut nodes: Vec<(String, i64)> = runs
            .into_iter()
            .filter(|r| r.fleet.as_deref() == Some(id.as_str()))
            .map(|r| (r.node.unwrap_or(r.hostname), r.id))
            .collect();
        // A fleet imported twice keeps the newest run per node.
        nodes.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        nodes.dedup_by(|a, b| a.0 == b.0);
        Ok((id, nodes))
    }

    /// The stored result document of run `id`.
    pub fn load(&self, id: i64) -> Result<(RunSummary, RunResult), ReportError> {
        let summary = self
            .list()?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| ReportError::bad(format!("unknown run id '{id}'")))?;
        let doc: String = self
            .conn
            .query_row("SELECT document FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .map_err(|e| db_err(&self.path, e))?;
        let run = parse_run(&doc, &format!("{} run {id}", self.path.display()))?;
        Ok((summary, run))
    }
}

/// Corruption and foreign files are the user's input (exit 2); the rest is a runtime failure.
fn db_err(path: &Path, e: rusqlite::Error) -> ReportError {
    let code = e.sqlite_error_code();
    let one_line = e
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    match code {
        Some(ErrorCode::NotADatabase) | Some(ErrorCode::DatabaseCorrupt) => {
            ReportError::bad(format!(
                "{}: corrupted or not a database ({one_line})",
                path.display()
            ))
        }
        Some(ErrorCode::CannotOpen)
        | Some(ErrorCode::ReadOnly)
        | Some(ErrorCode::PermissionDenied) => ReportError::bad(format!(
            "{}: cannot open the database ({one_line})",
            path.display()
        )),
        _ => ReportError::Db {
            path: path.to_path_buf(),
            message: one_line,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::synthetic_run;

    #[test]
    fn insert_list_resolve_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/history.sqlite");
        let mut s = Store::open(&path).unwrap();
        let run = synthetic_run();
        let a = s
            .insert(
                &run,
                Some("quick"),
                Some(Path::new("/r/20250102T030405Z-testhost")),
            )
            .unwrap();
        let b = s.insert(&run, None, None).unwrap();
        let list = s.list().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].records as usize, run.records.len());
        assert_eq!(list[0].profile.as_deref(), Some("quick"));
        assert_eq!(s.resolve("latest").unwrap(), b);
        assert_eq!(s.resolve("latest~1").unwrap(), a);
        assert_eq!(s.resolve(&a.to_string()).unwrap(), a);
        assert_eq!(s.resolve("20250102T030405Z-testhost").unwrap(), a);
        for bad in ["99", "latest~5", "nope", "latest~x"] {
            let e = s.resolve(bad).unwrap_err();
            assert!(e.is_bad_input() && e.to_string().contains(bad), "{e}");
        }
        let (_, loaded) = s.load(a).unwrap();
        assert_eq!(loaded.records.len(), run.records.len());
        drop(s);
        // Reopening keeps everything and does not migrate again.
        let s = Store::open(&path).unwrap();
        assert_eq!(s.list().unwrap().len(), 2);
        assert_eq!(s.pragma_i64("user_version").unwrap(), SCHEMA_VERSION);
        let mode: String = s
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn a_trend_is_one_hosts_last_runs_of_one_figure_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("h.sqlite")).unwrap();
        let mut run = synthetic_run();
        let id = identity(&run.records[0]);
        for (day, v) in [(1, 10.0), (2, 20.0), (3, 30.0)] {
            run.started_at = format!("2026-01-0{day}T00:00:00Z");
            run.records[0].value = v;
            s.insert(&run, None, None).unwrap();
        }
        let mut other = run.clone();
        other.host.hostname = "elsewhere".into();
        s.insert(&other, None, None).unwrap();
        let t = s.trend("testhost", &id, 10).unwrap();
        let values: Vec<f64> = t.iter().map(|p| p.1).collect();
        assert_eq!(values, [10.0, 20.0, 30.0]);
        assert_eq!(t[0].0, "2026-01-01T00:00:00Z");
        // The limit keeps the newest.
        let last2: Vec<f64> = s
            .trend("testhost", &id, 2)
            .unwrap()
            .iter()
            .map(|p| p.1)
            .collect();
        assert_eq!(last2, [20.0, 30.0]);
        assert!(s
            .trend("testhost", "no such figure", 10)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn newer_foreign_and_corrupted_databases_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let newer = dir.path().join("newer.sqlite");
        drop(Store::open(&newer).unwrap());
        Connection::open(&newer)
            .unwrap()
            .execute_batch("PRAGMA user_version = 7;")
            .unwrap();
        let e = Store::open(&newer).err().unwrap();
        assert!(e.is_bad_input() && e.to_string().contains("newer"), "{e}");

        let foreign = dir.path().join("foreign.sqlite");
        Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t (x);")
            .unwrap();
        let e = Store::open(&foreign).err().unwrap();
        assert!(
            e.to_string().contains("not a hostbench history database"),
            "{e}"
        );

        let junk = dir.path().join("junk.sqlite");
        std::fs::write(&junk, vec![0x5au8; 8192]).unwrap();
        let e = Store::open(&junk).err().unwrap();
        assert!(
            e.is_bad_input() && e.to_string().contains("corrupted"),
            "{e}"
        );
    }

    #[test]
    fn a_failed_insert_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("h.sqlite")).unwrap();
        s.insert(&synthetic_run(), None, None).unwrap();
        // A trigger makes the 3rd record row fail: the run row must roll back with it.
        s.conn
            .execute_batch(
                "CREATE TRIGGER boom BEFORE INSERT ON records WHEN NEW.seq = 2
                 BEGIN SELECT RAISE(ABORT, 'boom'); END;",
            )
            .unwrap();
        assert!(s.insert(&synthetic_run(), None, None).is_err());
        assert_eq!(s.list().unwrap().len(), 1);
        let rows: i64 = s
            .conn
            .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows as usize, synthetic_run().records.len());
    }
}
