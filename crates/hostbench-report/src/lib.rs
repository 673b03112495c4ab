//! hostbench-report: everything that turns results into something a person or a pipeline reads.
//!
//! - `table`: the classic table (Workload | Concurrency | Block size | Measured | Reference |
//!   Theoretical | Efficiency | Reference efficiency), derived from records generically;
//! - `export`: the output formats behind one `Exporter` trait (terminal, Markdown, CSV, HTML,
//!   JSON) and the report files of a results directory;
//! - `burn`: the burn-in's page (`burn.html`: verdict, units, timeline charts);
//! - `chart`: charts derived from the parameters, drawn as SVG or PNG;
//! - `history`: the SQLite store of every run, versioned and migrated;
//! - `compare`: two runs record by record, with a statistical verdict per change;
//! - `fleet`: the fleet directory's layout and the fleet report (`hostbench/fleet/v1`);
//! - `load`: reading a saved `run.json` back with errors a person can act on;
//! - `side`: several runs side by side (overlaid charts, ratio columns).
//!
//! Nothing here names a subsystem's parameters beyond the roles in `table` (and the few that
//! make a matrix, a loaded-latency curve or a latency-vs-offered-load curve in `chart`), so a new
//! subsystem's records appear in every table, chart and comparison without a change.

pub mod burn;
pub mod chart;
pub mod compare;
pub mod error;
pub mod export;
pub mod fleet;
pub mod history;
pub mod load;
pub mod side;
pub mod table;
#[doc(hidden)]
pub mod testdata;
pub mod units;

pub use error::ReportError;
pub use export::{
    write_results_dir, CsvExporter, Exporter, HtmlExporter, JsonExporter, MarkdownExporter,
    OpenMetricsExporter, SummaryExporter, TerminalExporter,
};
