//! The verdict text `hostbench check` prints, snapshotted on a stored verdict document
//! (tests/data/check-node.json, from a real quick check with an expectation file the node
//! misses, its host replaced by the stored run's): every verdict, the reported figures with and
//! without a value, and the yardsticks line, so a change to the layout shows in review. No live
//! check runs here: the document is fixed, so the text is the same on any host.

use super::*;

const DOC: &str = include_str!("../../../tests/data/check-node.json");

fn doc() -> CheckDoc {
    serde_json::from_str(DOC).expect("check-node.json is a hostbench/check/v1 document")
}

#[test]
fn the_verdict_text_of_a_stored_check() {
    let doc = doc();
    // The fixture must keep exercising every line the renderer writes.
    for v in [
        Verdict::Fail,
        Verdict::Unknown,
        Verdict::Warn,
        Verdict::Pass,
    ] {
        assert!(doc.checks.iter().any(|c| c.verdict == v), "no {v:?} check");
    }
    assert!(doc.reported.iter().any(|r| r.measured.is_null()));
    assert!(doc.reported.iter().any(|r| r.measured.is_f64()));
    let text = render(&doc, false, false);
    insta::assert_snapshot!("check_verdict_text", text);
    // Quiet is the first line alone; long adds one line at the end.
    let first = text.lines().next().expect("a first line");
    assert_eq!(render(&doc, true, false), format!("{first}\n"));
    let long = render(&doc, false, true);
    assert_eq!(
        long.strip_prefix(text.as_str())
            .map(|rest| rest.lines().count()),
        Some(1),
        "{long}"
    );
}
