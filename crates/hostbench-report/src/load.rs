//! Reading a saved `run.json` back, with errors a person can act on.
//!
//! `hostbench report` and `history import` accept any file a user points them at, so a truncated
//! file (a run killed while writing, a partial copy) and a foreign JSON document (another tool's
//! output, a future schema) each get one line that says which it is.

use std::path::Path;

use hostbench_core::model::{RunResult, SCHEMA};
use serde_json::Value;

use crate::error::ReportError;

/// Parse a result document, naming `origin` (a path) in every error.
pub fn parse_run(text: &str, origin: &str) -> Result<RunResult, ReportError> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        let what = if e.is_eof() {
            "truncated JSON"
        } else {
            "not valid JSON"
        };
        ReportError::bad(format!(
            "{origin}: {what} (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    match value.get("schema").and_then(Value::as_str) {
        Some(SCHEMA) => {}
        Some(other) => {
            return Err(ReportError::bad(format!(
                "{origin}: schema '{other}' is not {SCHEMA} (a foreign or newer result file)"
            )))
        }
        None => {
            return Err(ReportError::bad(format!(
                "{origin}: not a hostbench result (no \"schema\": \"{SCHEMA}\" field)"
            )))
        }
    }
    serde_json::from_value(value).map_err(|e| {
        ReportError::bad(format!(
            "{origin}: does not follow {SCHEMA}: {}",
            one_line(&e.to_string())
        ))
    })
}

/// Read and parse a result file.
pub fn load_run(path: &Path) -> Result<RunResult, ReportError> {
    let bytes = std::fs::read(path).map_err(|e| {
        ReportError::bad(format!("{}: {}", path.display(), one_line(&e.to_string())))
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ReportError::bad(format!("{}: not UTF-8 text", path.display())))?;
    parse_run(&text, &path.display().to_string())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_foreign_and_wrong_shape_are_named() {
        let e = parse_run("{\"schema\": \"hostbench/res", "a.json").unwrap_err();
        assert!(e.is_bad_input());
        assert!(e.to_string().contains("a.json: truncated JSON"), "{e}");
        let e = parse_run("[1, 2]", "b.json").unwrap_err();
        assert!(e.to_string().contains("not a hostbench result"), "{e}");
        let e = parse_run("{\"schema\": \"other/v9\"}", "c.json").unwrap_err();
        assert!(e.to_string().contains("'other/v9'"), "{e}");
        let e = parse_run("{\"schema\": \"hostbench/result/v1\"}", "d.json").unwrap_err();
        assert!(e.to_string().contains("does not follow"), "{e}");
        assert!(!e.to_string().contains('\n'));
    }
}
