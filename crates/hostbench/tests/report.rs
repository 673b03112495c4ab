//! Integration tests of reports and history: the results directory of a real run, the HTML
//! rendered by a real browser, snapshots of the Markdown and CSV exporters, `report`
//! re-rendering, `history list/show/compare/import` with the regression exit code, and bad
//! input (truncated or foreign JSON, newer or corrupted databases, unknown run ids).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use common::*;
use hostbench_core::model::RunResult;
use hostbench_report::testdata::synthetic_run;
use serde_json::Value;

/// A small real run (CPU and a scaled-down quick memory profile) into `out`, stored in `db`.
fn real_run(out: &Path, db: &Path) -> PathBuf {
    let res = hostbench()
        .args([
            "run",
            "--only",
            "cpu,mem",
            "--profile",
            "quick",
            "--scale",
            "0.1",
        ])
        .args(["--repeat", "2", "--warmup", "0", "--out"])
        .arg(out)
        .arg("--db")
        .arg(db)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "{err}");
    assert!(err.contains("Results written to"), "{err}");
    assert!(err.contains("Stored as run #"), "{err}");
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("out")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// One small real run shared by the cases that read only its results directory (the files, the
/// history's first run, chromium's rendering), made once per test binary: `(results directory,
/// history database)`, in `common::shared_scratch`.
fn first_run() -> &'static (PathBuf, PathBuf) {
    static FIRST: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    FIRST.get_or_init(|| {
        let base = common::shared_scratch("report-first-run");
        let db = base.join("h.sqlite");
        (real_run(&base.join("results"), &db), db)
    })
}

fn write_json(dir: &Path, name: &str, run: &RunResult) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(run).expect("json")).expect("write");
    p
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn run_writes_every_report_file_and_stores_the_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The shared first run; the second run below goes into its history (no other case reads it).
    let (dir, db) = first_run();
    let (dir, db) = (dir.clone(), db.clone());
    for f in ["run.json", "records.csv", "report.md", "report.html"] {
        let len = std::fs::metadata(dir.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 100, "{f} missing or empty");
    }
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).expect("run.json"))
            .expect("json");
    let records = doc["records"].as_array().expect("records").len();
    let csv = std::fs::read_to_string(dir.join("records.csv")).expect("csv");
    assert_eq!(csv.lines().count(), records + 1);
    let md = std::fs::read_to_string(dir.join("report.md")).expect("md");
    for needle in [
        "## CPU",
        "## Memory",
        "| Workload | Concurrency | Block size |",
        "cpu.flops",
        "mem.latency",
    ] {
        assert!(md.contains(needle), "{needle} not in report.md");
    }
    // The run is in the history, under its results directory's name too.
    let list = run_ok(&format!("history list --db {}", s(&db)), &[]);
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.contains("quick") && list.contains(&records.to_string()),
        "{list}"
    );
    let name = dir
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let show = run_ok(&format!("history show {name} --db {}", s(&db)), &[]);
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.starts_with("Run #1 ") && show.contains("== Memory =="),
        "{show}"
    );
    // One stored run is no trend yet.
    let html = std::fs::read_to_string(dir.join("report.html")).expect("html");
    assert!(!html.contains("id=\"trends\""));
    // A second run into the same history: its report shows the headline figures' trend over
    // both runs, a chart per benchmark.
    let second = tmp.path().join("results2");
    let dir2 = real_run(&second, &db);
    let html = std::fs::read_to_string(dir2.join("report.html")).expect("html");
    let trends = html.find("id=\"trends\"").expect("a trends section");
    assert!(
        trends < html.find("<nav>").expect("nav"),
        "trends come before the sections"
    );
    for bench in ["cpu-flops", "mem-latency"] {
        assert!(
            html.contains(&format!("id=\"chart-trend-{bench}\"")),
            "{bench}"
        );
    }
    assert!(html.contains("over this host&#39;s last 2 stored runs"));
}

/// `report a.json b.json`: the runs side by side, in the terminal, Markdown, HTML (overlaid
/// charts) and CSV (every record with its run's label); more than eight is one line, exit 2.
#[test]
fn report_puts_runs_side_by_side() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let a = write_json(tmp.path(), "a.json", &synthetic_run());
    let mut faster = synthetic_run();
    faster.host.hostname = "faster".into();
    for r in &mut faster.records {
        r.value *= if r.unit == "s" { 0.5 } else { 2.0 };
    }
    let b = write_json(tmp.path(), "b.json", &faster);
    let out = run_ok(&format!("report {} {}", s(&a), s(&b)), &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Side by side: testhost, faster") && text.contains("×2.00"),
        "{text}"
    );
    let md = run_ok(&format!("report {} {} --md -", s(&a), s(&b)), &[]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(
        md.contains("| figure | testhost | faster | vs testhost |"),
        "{md}"
    );
    let html = tmp.path().join("side.html");
    let csv = tmp.path().join("side.csv");
    run_ok(
        &format!(
            "report {} {} --html {} --csv {} -q",
            s(&a),
            s(&b),
            s(&html),
            s(&csv)
        ),
        &[],
    );
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("<title>hostbench: testhost vs faster</title>"));
    assert!(page.contains("data-rows=\"headlines\"") && page.contains("data-rows=\"all\""));
    // Overlaid: the charts' legends name both runs.
    let charts = &page[page.find("<h2>Charts</h2>").expect("charts")
        ..page.find("<h2>Every common figure</h2>").expect("table")];
    assert!(charts.matches("<figure").count() >= 3);
    assert!(
        charts.contains("testhost") && charts.contains("faster"),
        "overlaid charts"
    );
    let csv = std::fs::read_to_string(&csv).expect("csv");
    let rows = synthetic_run().records.len() * 2;
    assert_eq!(csv.lines().count(), rows + 1);
    let nine: Vec<String> = (0..9).map(|_| s(&a).to_string()).collect();
    assert_usage_error(
        &std::iter::once("report")
            .chain(nine.iter().map(String::as_str))
            .collect::<Vec<_>>(),
        "2 to 8 runs",
    );
}

/// Headless Chromium renders a real run's report.html at a phone's and a desktop's width; a
/// script added to a copy measures what the browser laid out: the summary cards (host first, a
/// card per subsystem with headlines and gauges, one column on the phone, several on the
/// desktop), no sideways scrolling, no chart text lying on a data point (a legend covering
/// data), a line chart's HTML legend under its full-width plot on the phone and beside it on the
/// desktop, every chart an SVG of real size with drawn shapes, every table with visible, non-empty
/// rows; and a screenshot must not be blank.
#[test]
fn chromium_renders_the_charts_and_tables_of_a_real_run() {
    let Some(chromium) = ["chromium", "chromium-browser"].into_iter().find(|c| {
        StdCommand::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        // scripts/test installs chromium; in CI its absence is a failure, not a skip.
        assert!(std::env::var_os("CI").is_none(), "chromium missing in CI");
        eprintln!("chromium not installed: skipping");
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = &first_run().0;
    let html = std::fs::read_to_string(dir.join("report.html")).expect("html");
    // A figure with neither a limit nor a reference stands alone: its card says why once, never
    // a "no theoretical limit" line under every figure.
    assert!(!html.contains("no theoretical limit or reference to compare with"));
    for card in html.split("<div class=\"card subsystem").skip(1) {
        let card = &card[..card.find("</div>\n").unwrap_or(card.len())];
        let notes: Vec<&str> = card.matches("class=\"nolimit\"").collect();
        assert!(notes.len() <= 2, "{card}");
    }
    // The probe measures the report's layout from the page around it: the report sits in an
    // iframe of the width under test (headless Chromium makes no window narrower than 500 px).
    let probe = r#"<script>
    function probe(document, window) {
      const charts = [...document.querySelectorAll('figure.chart')].map(f => {
        const svg = f.querySelector('svg'); const r = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
        const shapes = svg ? svg.querySelectorAll('polyline, path, rect, circle, line').length : 0;
        const texts = svg ? [...svg.querySelectorAll('text')].filter(t => t.getBBox().width > 0).length : 0;
        // A line chart's legend is HTML after its plot: where it sits against the plot.
        const lg = f.querySelector('.legend'); const l = lg ? lg.getBoundingClientRect() : null;
        const legend = l && {top: l.top, left: l.left, w: l.width, h: l.height, items: lg.querySelectorAll('li').length};
        return {id: f.id, w: r.width, h: r.height, shapes, texts, fw: f.getBoundingClientRect().width,
                top: r.top, bottom: r.bottom, right: r.right, legend};
      });
      const tables = [...document.querySelectorAll('table.results')].map(t => ({
        bench: t.dataset.benchmark, h: t.getBoundingClientRect().height,
        rows: [...t.tBodies[0].rows].filter(r => r.getBoundingClientRect().height > 0 && r.cells[3].textContent.trim() !== '').length}));
      const boxes = els => [...els].map(e => e.getBoundingClientRect()).filter(b => b.width > 0);
      const meets = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
      // Text lying on a data point: a legend (or any label) covering data.
      const covered = [...document.querySelectorAll('figure.chart svg')].map(svg => {
        const texts = boxes(svg.querySelectorAll('text'));
        return boxes(svg.querySelectorAll('circle')).filter(c => texts.some(t => meets(c, t))).length;
      }).reduce((a, b) => a + b, 0);
      const cards = [...document.querySelectorAll('.cards .card')].map(c => {
        const r = c.getBoundingClientRect();
        return {cls: c.className, w: r.width, h: r.height, left: r.left, lines: c.querySelectorAll('li').length,
                gauges: c.querySelectorAll('svg.gauge').length,
                // Outside the marks (span.spread, the finding in their title), no card says it.
                nocause: (() => { const k = c.cloneNode(true);
                  k.querySelectorAll('span.spread').forEach(m => m.remove());
                  return k.textContent.toLowerCase().includes('no cause found'); })(),
                untitled: [...c.querySelectorAll('span.spread')].filter(m => !m.title).length};
      });
      const overflow = document.documentElement.scrollWidth - window.innerWidth;
      return {charts, tables, cards, covered, overflow, width: window.innerWidth};
    }
    window.addEventListener('load', () => {
      const f = document.getElementById('report');
      document.body.setAttribute('data-probe', JSON.stringify(probe(f.contentDocument, f.contentWindow)));
    });
    </script>"#;
    let profile = tmp.path().join("profile");
    let srcdoc = html.replace('&', "&amp;").replace('"', "&quot;");
    // A phone's width and a desktop's: the page must work at both.
    for (width, columns) in [(390, 1), (1280, 2)] {
        let page = tmp.path().join(format!("probe-{width}.html"));
        let wrapper = format!(
            "<!DOCTYPE html><html><body style=\"margin:0\"><iframe id=\"report\" \
             style=\"border:0\" width=\"{width}\" height=\"2000\" srcdoc=\"{srcdoc}\"></iframe>\
             {probe}</body></html>"
        );
        std::fs::write(&page, wrapper).expect("write probe page");
        let probe = probe_page(chromium, &profile, &format!("file://{}", s(&page)));
        let cards = probe["cards"].as_array().expect("cards");
        assert!(cards.len() >= 3, "host, cpu and mem cards: {probe}");
        assert!(cards[0]["cls"].as_str().expect("class").contains("host"));
        // Issue 54: a spread with no cause found is a mark with the finding on hover (its
        // title), never the sentence in a card.
        for c in cards {
            assert_eq!(c["nocause"], false, "a card holds 'no cause found': {c}");
            assert_eq!(c["untitled"], 0, "a mark without its finding: {c}");
        }
        for c in &cards[1..] {
            assert!(
                c["lines"].as_u64() > Some(0),
                "a card without headlines: {c}"
            );
            assert!(
                c["w"].as_f64() > Some(250.0) && c["h"].as_f64() > Some(40.0),
                "{c}"
            );
        }
        assert!(
            cards.iter().any(|c| c["gauges"].as_u64() > Some(0)),
            "no gauge"
        );
        // One column on the phone (every card at the same left edge), several on the desktop.
        let lefts: std::collections::BTreeSet<i64> = cards
            .iter()
            .filter_map(|c| c["left"].as_f64())
            .map(|l| l as i64)
            .collect();
        assert!(
            if columns == 1 {
                lefts.len() == 1
            } else {
                lefts.len() >= 2
            },
            "{width} px: card columns at {lefts:?}"
        );
        assert!(
            probe["overflow"].as_f64() <= Some(1.0),
            "{width} px scrolls sideways: {probe}"
        );
        assert_eq!(probe["covered"], 0, "{width} px: text lies on a data point");
        check_charts_and_tables(&probe, &html);
        check_line_legends(&probe, columns == 1);
    }
    // Screenshots at a desktop's and a phone's width: PNGs of that width, not blank.
    for width in [1280u32, 390] {
        let shot = tmp.path().join(format!("shot-{width}.png"));
        run_with_timeout(
            StdCommand::new(chromium)
                .args(BROWSER_FLAGS)
                .arg(format!("--window-size={width},2000"))
                .arg(format!("--user-data-dir={}", s(&profile)))
                .arg(format!("--screenshot={}", s(&shot)))
                .arg(format!("file://{}", s(&dir.join("report.html")))),
        );
        let bytes = std::fs::read(&shot).expect("screenshot");
        // The PNG signature, then IHDR's width (big-endian) at bytes 16..20.
        assert!(
            bytes.len() > 24 && bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{width} px: not a PNG"
        );
        let header_width = u32::from_be_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
        assert_eq!(header_width, width, "screenshot width");
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().expect("png");
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).expect("frame");
        let px = info.color_type.samples();
        let ink = buf[..info.buffer_size()]
            .chunks(px)
            .filter(|p| p[..3].iter().any(|&c| c < 200))
            .count();
        let total = (info.width * info.height) as usize;
        assert!(
            ink * 100 > total,
            "{width} px screenshot almost blank: {ink} of {total} pixels"
        );
    }
}

/// Headless Chromium renders `url` (the probe page around a report); the probe's JSON.
fn probe_page(chromium: &str, profile: &Path, url: &str) -> Value {
    let dom = run_with_timeout(
        StdCommand::new(chromium)
            .args(BROWSER_FLAGS)
            .arg("--window-size=1400,2000")
            .arg(format!("--user-data-dir={}", s(profile)))
            .args(["--dump-dom", url]),
    );
    let start = dom.find("data-probe=\"").expect("probe ran") + "data-probe=\"".len();
    let end = start + dom[start..].find('"').expect("attribute end");
    let json = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&json).expect("probe json")
}

/// Every chart an SVG of real size with drawn shapes and text, every table with visible rows.
fn check_charts_and_tables(probe: &Value, html: &str) {
    let charts = probe["charts"].as_array().expect("charts");
    let want_charts = html.matches("<figure class=\"chart\"").count();
    assert!(want_charts >= 3, "only {want_charts} charts");
    assert_eq!(charts.len(), want_charts);
    let min_w = (probe["width"].as_f64().unwrap_or(1280.0) * 0.6).min(300.0);
    for c in charts {
        assert!(
            c["w"].as_f64() > Some(min_w) && c["h"].as_f64() > Some(40.0),
            "{c}"
        );
        assert!(c["shapes"].as_u64() > Some(5), "no drawing in {c}");
        assert!(c["texts"].as_u64() > Some(3), "no axis text in {c}");
    }
    let ids: Vec<&str> = charts.iter().filter_map(|c| c["id"].as_str()).collect();
    assert!(
        ids.iter().any(|i| i.contains("latency-vs-working-set")),
        "{ids:?}"
    );
    assert!(ids.iter().any(|i| i.contains("vs-threads")), "{ids:?}");
    assert!(ids.iter().any(|i| i.contains("efficiency")), "{ids:?}");
    let tables = probe["tables"].as_array().expect("tables");
    for bench in ["cpu.flops", "mem.bandwidth", "mem.latency"] {
        let t = tables.iter().find(|t| t["bench"] == bench).expect(bench);
        assert!(
            t["rows"].as_u64() > Some(0) && t["h"].as_f64() > Some(20.0),
            "{t}"
        );
    }
}

/// Every line chart's legend is HTML outside its plot: on a phone (`narrow`) under the plot,
/// which has nearly the whole width of its figure; on a desktop beside it.
fn check_line_legends(probe: &Value, narrow: bool) {
    let charts = probe["charts"].as_array().expect("charts");
    let lined: Vec<&Value> = charts.iter().filter(|c| c["legend"].is_object()).collect();
    let ids: Vec<&str> = lined.iter().filter_map(|c| c["id"].as_str()).collect();
    assert!(
        ids.iter().any(|i| i.contains("vs-threads")),
        "no line chart with an HTML legend: {ids:?}"
    );
    let num = |c: &Value, k: &str| c[k].as_f64().unwrap_or(f64::NAN);
    for c in lined {
        let l = &c["legend"];
        assert!(
            l["items"].as_u64() > Some(0) && num(l, "h") > 10.0,
            "empty legend: {c}"
        );
        if narrow {
            assert!(
                num(c, "w") >= 0.85 * num(c, "fw"),
                "the plot is not the figure's width: {c}"
            );
            assert!(
                num(l, "top") >= num(c, "bottom") - 0.5,
                "legend not under the plot: {c}"
            );
        } else {
            assert!(
                num(l, "left") >= num(c, "right") - 0.5,
                "legend not beside the plot: {c}"
            );
            assert!(
                num(l, "top") < num(c, "bottom"),
                "legend not beside the plot: {c}"
            );
        }
    }
}

const BROWSER_FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
];

/// Run a browser with a hard time limit; its stdout.
fn run_with_timeout(cmd: &mut StdCommand) -> String {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut out = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).map(|_| s)
    });
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "chromium failed: {status}");
            break;
        }
        if t0.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish in 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().expect("reader").expect("read")
}

#[test]
fn report_rerenders_a_saved_run_in_every_format() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = write_json(tmp.path(), "run.json", &synthetic_run());
    let md = run_ok(&format!("report {} --md -", s(&file)), &[]);
    insta::assert_snapshot!("synthetic_markdown", String::from_utf8_lossy(&md.stdout));
    let csv = run_ok(&format!("report {} --csv -", s(&file)), &[]);
    insta::assert_snapshot!("synthetic_csv", String::from_utf8_lossy(&csv.stdout));
    // Files and PNG charts; the terminal table on stdout.
    let html = tmp.path().join("r.html");
    let pngs = tmp.path().join("png");
    let out = run_ok(
        &format!("report {} --html {} --png {}", s(&file), s(&html), s(&pngs)),
        &[],
    );
    let table = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "== Network ==",
        "net.throughput (bit/s",
        "== GPU ==",
        "gpu.transfer",
    ] {
        assert!(table.contains(needle), "{needle}: {table}");
    }
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("<svg") && page.contains("data-benchmark=\"net.latency\""));
    let n = std::fs::read_dir(&pngs).expect("png dir").count();
    assert_eq!(n, page.matches("<figure class=\"chart\"").count());
}

/// The Markdown of a real run has the same shape on every machine once numbers are masked.
#[test]
fn real_run_markdown_structure_snapshot() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let json = tmp.path().join("cpu.json");
    run_ok(
        "cpu --dtype f64,i8 --isa scalar --threads 1 --ops 1e6 --repeat 2 --warmup 0 --quiet --json",
        &[json.as_os_str()],
    );
    let md = run_ok(&format!("report {} --md -", s(&json)), &[]);
    let text = String::from_utf8_lossy(&md.stdout);
    // Keep the table structure; drop host facts, times and notes, mask digits.
    let kept: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("- ") && !l.starts_with("# ") && !l.starts_with("1. "))
        .filter(|l| !l.starts_with("2. ") && !l.starts_with("Notes") && !l.is_empty())
        .map(mask_digits)
        .collect();
    insta::assert_snapshot!("real_cpu_markdown_masked", kept.join("\n"));
}

/// Digits become `N`, and so does a scale prefix after a number (`N GFLOP/s` → `N FLOP/s`):
/// how fast the machine is must not change the snapshot.
fn mask_digits(line: &str) -> String {
    let mut out = mask_numbers(line);
    for p in ["k", "M", "G", "T", "m", "µ", "n"] {
        for unit in ["FLOP/s", "OP/s", "B/s", "s"] {
            out = out.replace(&format!("N {p}{unit}"), &format!("N {unit}"));
        }
    }
    out
}

fn mask_numbers(line: &str) -> String {
    let mut out = String::new();
    let mut in_num = false;
    for c in line.chars() {
        if c.is_ascii_digit() || (in_num && c == '.') {
            if !in_num {
                out.push('N');
            }
            in_num = true;
        } else {
            in_num = false;
            out.push(c);
        }
    }
    out
}

#[test]
fn compare_gives_verdicts_and_exit_4_on_regression() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("h.sqlite");
    let base = synthetic_run();
    let mut slower = synthetic_run();
    // cpu.flops 2 threads 20 % slower, net latency 20 % better; the rest unchanged.
    for r in &mut slower.records {
        let f = match r.benchmark.as_str() {
            "cpu.flops" if r.params["threads"] == 2 => 0.8,
            "net.latency" => 0.8,
            _ => continue,
        };
        r.samples.iter_mut().for_each(|v| *v *= f);
        r.stats = hostbench_core::stats::summarize(&r.samples);
        r.value = r.stats.median;
    }
    let a = write_json(tmp.path(), "a.json", &base);
    let b = write_json(tmp.path(), "b.json", &slower);
    for f in [&a, &b] {
        let out = run_ok(&format!("history import {} --db {}", s(f), s(&db)), &[]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("stored run #"));
    }
    let out = hostbench()
        .args(["history", "compare", "1", "2", "--db", s(&db)])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{text}");
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not in {text}"))
            .to_string()
    };
    assert!(line("cpu.flops dtype=f64 isa=avx2-fma threads=2").contains("regressed (beyond 5 %)"));
    assert!(line("-20.0 %").contains("regressed"));
    assert!(line("net.latency proto=tcp").contains("improved"));
    assert!(line("cpu.iops").contains("within noise"));
    assert!(text.contains("1 regressed (1 beyond 5 %)"), "{text}");
    // Reversed, the regression is an improvement and the improvement a regression.
    let out = hostbench()
        .args(["history", "compare", "latest", "latest~1", "--db", s(&db)])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(
        text.contains("+25.0 %") && text.contains("1 improved, 2 regressed"),
        "{text}"
    );
    // A threshold above the 20 % regression passes.
    let out = hostbench()
        .args([
            "history",
            "compare",
            "1",
            "2",
            "--threshold",
            "25%",
            "--db",
            s(&db),
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let full = serde_json::to_string(&synthetic_run()).expect("json");
    let truncated = tmp.path().join("truncated.json");
    std::fs::write(&truncated, &full[..full.len() / 2]).expect("write");
    assert_usage_error(&["report", s(&truncated)], "truncated JSON");
    let foreign = tmp.path().join("foreign.json");
    std::fs::write(
        &foreign,
        r#"{"start": {"version": "iperf 3.12"}, "end": {}}"#,
    )
    .expect("w");
    assert_usage_error(&["report", s(&foreign)], "not a hostbench result");
    assert_usage_error(
        &[
            "history",
            "import",
            s(&foreign),
            "--db",
            "/tmp/unused.sqlite",
        ],
        "foreign.json",
    );
    assert_usage_error(
        &["report", "/nonexistent/run.json"],
        "/nonexistent/run.json",
    );
    let good = write_json(tmp.path(), "good.json", &synthetic_run());
    assert_usage_error(
        &["report", s(&good), "--md", "/nonexistent/r.md"],
        "--md: /nonexistent/r.md",
    );

    let db = tmp.path().join("h.sqlite");
    let run = write_json(tmp.path(), "run.json", &synthetic_run());
    run_ok(&format!("history import {} --db {}", s(&run), s(&db)), &[]);
    assert_usage_error(
        &["history", "show", "42", "--db", s(&db)],
        "unknown run id '42'",
    );
    assert_usage_error(
        &["history", "compare", "1", "latest~3", "--db", s(&db)],
        "latest~3",
    );
    assert_usage_error(
        &[
            "history",
            "compare",
            "1",
            "1",
            "--threshold",
            "lots",
            "--db",
            s(&db),
        ],
        "lots",
    );
    assert_usage_error(
        &[
            "history",
            "show",
            "1",
            "--db",
            s(&tmp.path().join("none.sqlite")),
        ],
        "no history database",
    );

    let newer = tmp.path().join("newer.sqlite");
    std::fs::copy(&db, &newer).expect("copy");
    rusqlite::Connection::open(&newer)
        .expect("open")
        .execute_batch("PRAGMA user_version = 99;")
        .expect("bump");
    assert_usage_error(&["history", "list", "--db", s(&newer)], "newer");
    // A newer database also stops `run` before it measures anything.
    assert_usage_error(
        &[
            "run",
            "--only",
            "cpu",
            "--db",
            s(&newer),
            "--out",
            s(tmp.path()),
        ],
        "newer",
    );

    let corrupt = tmp.path().join("corrupt.sqlite");
    std::fs::write(
        &corrupt,
        b"SQLite format 3\0 but then garbage and no pages at all....",
    )
    .expect("w");
    assert_usage_error(&["history", "list", "--db", s(&corrupt)], "corrupt");
    let garbage = tmp.path().join("garbage.sqlite");
    std::fs::write(&garbage, vec![0x42u8; 4096]).expect("w");
    assert_usage_error(&["history", "list", "--db", s(&garbage)], "garbage.sqlite");
    assert_usage_error(&["run", "--scale", "0"], "--scale");
    for bad in ["0", "-1", "abc", "inf"] {
        assert_usage_error(
            &["run", "--only", "cpu", &format!("--price-per-hour={bad}")],
            "--price-per-hour",
        );
    }
    let spec = tmp.path().join("free.toml");
    std::fs::write(&spec, "[cost]\nprice_per_hour = 0\n").expect("w");
    assert_usage_error(
        &["run", "--only", "cpu", "--spec", s(&spec)],
        "cost.price_per_hour",
    );
}

/// `--price-per-hour`: the JSON has the price, where it came from and each throughput figure
/// per dollar-hour; report.md says the price once and puts the figure beside each value.
#[test]
fn a_price_per_hour_gives_figures_per_dollar_hour() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("results");
    let res = hostbench()
        .args([
            "run",
            "--only",
            "cpu",
            "--profile",
            "quick",
            "--scale",
            "0.05",
        ])
        .args(["--repeat", "2", "--warmup", "0", "--no-history", "--quiet"])
        .args(["--price-per-hour", "2.5", "--out"])
        .arg(&out)
        .output()
        .expect("run");
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let dir = std::fs::read_dir(&out)
        .expect("out")
        .flatten()
        .next()
        .expect("a run directory")
        .path();
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).expect("run.json"))
            .expect("json");
    assert_eq!(json["invocation"]["price_per_hour"], 2.5);
    assert_eq!(json["invocation"]["price_source"], "--price-per-hour");
    let records = json["records"].as_array().expect("records");
    let mut priced = 0;
    for r in records {
        let v = r["value"].as_f64().expect("value");
        match r["metric"].as_str() {
            Some("throughput") => {
                let d = r["extra"]["per_dollar_hour"]
                    .as_f64()
                    .expect("per_dollar_hour");
                assert!((d - v / 2.5).abs() <= 1e-9 * v.abs(), "{r}");
                priced += 1;
            }
            _ => assert!(r["extra"].get("per_dollar_hour").is_none(), "{r}"),
        }
    }
    assert!(priced > 0, "no throughput record");
    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    assert_eq!(
        md.matches("- Price: 2.5 USD per hour (from --price-per-hour)")
            .count(),
        1,
        "{md}"
    );
    assert!(md.matches(" per $/h").count() >= priced, "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    assert!(html.contains("2.5 USD per hour (from --price-per-hour)"));
}

/// SIGKILL a run mid-measurement: the database still opens and lists the earlier run, whole.
#[test]
fn a_run_killed_mid_way_leaves_earlier_runs_intact() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("h.sqlite");
    let run = write_json(tmp.path(), "run.json", &synthetic_run());
    run_ok(&format!("history import {} --db {}", s(&run), s(&db)), &[]);
    // Once it has measured something (its partial run.json exists), kill it.
    let (mut child, partial) = start_run(&tmp.path().join("results"), &db);
    signal(&child, libc::SIGKILL);
    let status = child.wait().expect("wait");
    assert!(!status.success());
    let list = run_ok(&format!("history list --db {}", s(&db)), &[]);
    let list = String::from_utf8_lossy(&list.stdout);
    assert_eq!(list.lines().count(), 2, "{list}"); // header + the earlier run
    let conn = rusqlite::Connection::open(&db).expect("open");
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("check");
    assert_eq!(ok, "ok");
    // The killed run's partial result is readable and can be stored afterwards.
    run_ok(
        &format!("history import {} --db {}", s(&partial), s(&db)),
        &[],
    );
    let list = run_ok(&format!("history list --db {}", s(&db)), &[]);
    assert_eq!(String::from_utf8_lossy(&list.stdout).lines().count(), 3);
}

/// `run` started as a user would, and its first results file once a case has finished.
fn start_run(out: &Path, db: &Path) -> (std::process::Child, PathBuf) {
    start_run_with(out, db, &[])
}

/// As `start_run`, with `env` set for the run.
fn start_run_with(out: &Path, db: &Path, env: &[(&str, &str)]) -> (std::process::Child, PathBuf) {
    let bin = assert_cmd::cargo::cargo_bin("hostbench");
    let mut child = StdCommand::new(bin)
        .args(["run", "--only", "cpu,mem", "--profile", "standard", "--out"])
        .arg(out)
        .arg("--db")
        .arg(db)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let t0 = Instant::now();
    loop {
        let found = std::fs::read_dir(out)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("run.json"))
            .find(|p| p.exists());
        if let Some(p) = found {
            return (child, p);
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "run never started");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "run ended too early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Ctrl-C in the middle of a run says what it kept, in one line; run.json is marked interrupted
/// (finished_at null) and keeps the records measured; report.md, report.html (rendered by a real
/// browser) and records.csv are written from them; the history lists the run as interrupted; the
/// exit status is 130, as the shell's convention for SIGINT.
#[test]
fn ctrl_c_keeps_the_partial_run_with_its_reports_and_says_so() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("h.sqlite");
    let out = tmp.path().join("results");
    let (child, partial) = start_run(&out, &db);
    signal(&child, libc::SIGINT);
    let res = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(130), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("interrupted (SIGINT) after"))
        .unwrap_or_else(|| panic!("no interrupted line: {err}"));
    assert!(
        line.contains("kept in") && line.contains("stored as run #1"),
        "{line}"
    );
    let dir = partial.parent().expect("run dir");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(&partial).expect("run.json")).expect("json");
    assert_eq!(
        doc["interrupted"]["signal"], "SIGINT",
        "{}",
        doc["interrupted"]
    );
    assert!(doc["finished_at"].is_null());
    let n = doc["records"].as_array().expect("records").len();
    assert!(
        n >= 1 && line.contains(&format!("after {n} record")),
        "{n}: {line}"
    );
    let csv = std::fs::read_to_string(dir.join("records.csv")).expect("records.csv");
    assert_eq!(csv.lines().count(), n + 1);
    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    assert!(md.contains("interrupted by SIGINT"), "{md}");
    let list = run_ok(&format!("history list --db {}", s(&db)), &[]);
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("interrupted (SIGINT)"), "{list}");
    if let Some(chromium) = ["chromium", "chromium-browser"].into_iter().find(|c| {
        StdCommand::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) {
        let profile = tempfile::tempdir().expect("profile");
        let dom = run_with_timeout(
            StdCommand::new(chromium)
                .args(BROWSER_FLAGS)
                .arg(format!("--user-data-dir={}", s(profile.path())))
                .args([
                    "--dump-dom",
                    &format!("file://{}", s(&dir.join("report.html"))),
                ]),
        );
        assert!(dom.contains("interrupted by SIGINT"), "{dom}");
        assert!(dom.contains("data-benchmark=\"cpu.flops\""), "no cpu table");
    } else {
        assert!(std::env::var_os("CI").is_none(), "chromium missing in CI");
    }
}

/// A second Ctrl-C while the first one's reports are being written ends the process at once,
/// saying so, without waiting for them: the test hook `HOSTBENCH_TEST_SLOW_REPORTS_MS` holds the
/// report writing for two minutes, and the second signal is sent once the run says it is there.
#[test]
fn a_second_ctrl_c_ends_at_once() {
    use std::io::BufRead;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut child, _) = start_run_with(
        &tmp.path().join("results"),
        &tmp.path().join("h.sqlite"),
        &[("HOSTBENCH_TEST_SLOW_REPORTS_MS", "120000")],
    );
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    let fail = |child: &mut std::process::Child, why: String| -> ! {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{why}");
    };
    signal(&child, libc::SIGINT);
    let t0 = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(l) => {
                let there = l.contains("test hook: writing the reports in");
                said.push(l);
                if there {
                    break;
                }
            }
            Err(_) if t0.elapsed() < Duration::from_secs(60) => {}
            Err(_) => fail(
                &mut child,
                format!("the first Ctrl-C never reached the reports: {said:?}"),
            ),
        }
    }
    signal(&child, libc::SIGINT);
    // The reports would take two minutes; the second signal ends it long before.
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            fail(
                &mut child,
                format!("still running 20 s after the second Ctrl-C: {said:?}"),
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    reader.join().expect("stderr reader");
    said.extend(rx.try_iter());
    assert_eq!(status.code(), Some(130), "{said:?}");
    assert!(
        said.iter()
            .any(|l| l == "hostbench: interrupted again; exiting now"),
        "{said:?}"
    );
    // The first handler never finished: no line says what it kept.
    assert!(!said.iter().any(|l| l.contains("kept in")), "{said:?}");
}

#[test]
fn scale_shrinks_the_workload() {
    let tmp = tempfile::tempdir().expect("tempdir");
    run_ok(
        "run --only linpack --scale 0.001 --repeat 1 --warmup 0 --quiet --no-history --out",
        &[tmp.path().as_os_str()],
    );
    let dir = std::fs::read_dir(tmp.path())
        .expect("dir")
        .flatten()
        .next()
        .expect("run dir");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).expect("run.json"))
            .expect("json");
    let n = doc["records"][0]["params"]["n"].as_u64().expect("n");
    // A 2 ms solve (the standard 2 s × 0.001) at this build's FMA rate, and the floor of
    // 1024 lowered by the cube root of 0.001.
    assert!((64..=1024).contains(&n), "n = {n}");
}

/// A real run's records (a `run --profile quick --reference` of cpu, linpack, mem, disk and net
/// on a 2-vCPU VM, kept as it was written): what the one-screen summary is laid out from.
const STORED_RUN: &str = include_str!("data/quick-run-2vcpu.json");

fn stored_run() -> RunResult {
    serde_json::from_str(STORED_RUN).expect("the stored run parses")
}

/// Every line of `text` at most `width` characters wide.
fn assert_fits(text: &str, width: usize) {
    for l in text.lines() {
        assert!(
            l.chars().count() <= width,
            "{} > {width} characters: {l}\n{text}",
            l.chars().count()
        );
    }
}

/// Every headline of `run` in `summary`: its figure with its unit, its share of the peak and its
/// ratio to the reference tool, on one line.
fn assert_headlines_in(summary: &str, run: &RunResult) {
    use hostbench_report::units::human;
    let mut benches: Vec<&str> = Vec::new();
    for r in &run.records {
        if !benches.contains(&r.benchmark.as_str()) {
            benches.push(&r.benchmark);
        }
    }
    let mut n = 0;
    for b in benches {
        let recs: Vec<_> = run.records.iter().filter(|r| r.benchmark == b).collect();
        for h in hostbench_report::export::headlines(&recs) {
            let figure = human(h.value, &h.unit);
            let line = summary
                .lines()
                .find(|l| l.starts_with(&format!("{b} ")) && l.contains(&format!("  {figure}")))
                .unwrap_or_else(|| panic!("{b} {figure} not in:\n{summary}"));
            if let Some(e) = h.efficiency {
                let pct = format!("{:.1} %", 100.0 * e);
                assert!(line.contains(&pct), "{pct} not in: {line}");
            }
            if let Some(x) = &h.reference {
                let ratio = format!("{:.2} × {}", x.ratio, x.tool);
                assert!(line.contains(&ratio), "{ratio} not in: {line}");
            }
            n += 1;
        }
    }
    assert!(n > 0, "no headlines in the run");
}

/// The summary of a real run's records fits 80, 100 and 120 columns (and a narrow 60) without
/// losing a headline; at 80 and 120 its layout is kept as text for review.
#[test]
fn the_summary_of_a_stored_run_fits_the_terminal() {
    use hostbench_report::Exporter;
    let run = stored_run();
    for width in [60, 80, 100, 120] {
        let text = hostbench_report::SummaryExporter::new(width)
            .render(&run)
            .expect("summary");
        assert_fits(&text, width);
        // 60 columns are fewer than the columns need: lines are cut, never wrapped.
        if width >= 80 {
            assert_headlines_in(&text, &run);
        }
        // No cause found is a mark and one sentence, not a line under each figure.
        assert!(!text.contains("↳ CV"), "{text}");
        assert!(!text.contains("none_found"), "{text}");
        let prose = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(prose.matches("no cause found among").count(), 1, "{text}");
        match width {
            80 => insta::assert_snapshot!("summary_stored_run_80", text),
            120 => insta::assert_snapshot!("summary_stored_run_120", text),
            _ => {}
        }
    }
}

/// A real run through the binary, its stdout a pipe, at `COLUMNS=80` and `COLUMNS=120`: no line
/// wider, every headline figure there with its unit, share of peak and reference ratio; without
/// `COLUMNS` a pipe gets 100.
#[test]
fn run_prints_a_summary_that_fits_columns() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (columns, width) in [(Some("80"), 80), (Some("120"), 120), (None, 100)] {
        let out = tmp.path().join(format!("r{width}"));
        let mut cmd = hostbench();
        cmd.args(["run", "--only", "cpu,mem", "--profile", "quick"])
            .args(["--scale", "0.05", "--repeat", "2", "--warmup", "0"])
            .args(["--no-history", "--out"])
            .arg(&out);
        match columns {
            Some(c) => cmd.env("COLUMNS", c),
            None => cmd.env_remove("COLUMNS"),
        };
        let res = cmd.output().expect("run");
        let text = String::from_utf8_lossy(&res.stdout).to_string();
        assert!(
            res.status.success(),
            "{}",
            String::from_utf8_lossy(&res.stderr)
        );
        assert!(text.contains("Summary: "), "{text}");
        assert_fits(&text, width);
        let dir = std::fs::read_dir(&out)
            .expect("out")
            .flatten()
            .next()
            .expect("a results directory")
            .path();
        let run: RunResult =
            serde_json::from_slice(&std::fs::read(dir.join("run.json")).expect("run.json"))
                .expect("json");
        assert_headlines_in(&text, &run);
    }
}

/// In a real terminal 100 columns wide (a tmux pane, no `COLUMNS`), the summary is laid out for
/// the terminal's width: no line wraps. `capture-pane -J` joins wrapped lines back, so a line
/// wider than the pane shows as one long line.
#[test]
fn run_in_a_100_column_terminal_fits_it() {
    if !on_path("tmux") {
        assert!(std::env::var_os("CI").is_none(), "tmux missing under CI");
        eprintln!("skipped: tmux not found");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("results");
    let done = tmp.path().join("done");
    let bin = env!("CARGO_BIN_EXE_hostbench");
    let socket = tmp.path().join("tmux.sock");
    // The command's stdout is the pane (its progress and notices on stderr go to a file: the
    // summary is what is laid out); the marker file says when it finished.
    let script = format!(
        "env -u COLUMNS -u LINES {bin} run --only cpu --profile quick --scale 0.05 --repeat 2 \
         --warmup 0 --no-history --out {} 2>{}; echo $? > {}; sleep 600",
        s(&out),
        s(&tmp.path().join("stderr")),
        s(&done)
    );
    let tmux = |args: &[&str]| {
        StdCommand::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(args)
            .output()
            .expect("tmux")
    };
    let started = tmux(&[
        "new-session",
        "-d",
        "-x",
        "100",
        "-y",
        "200",
        "sh",
        "-c",
        &script,
    ]);
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let t0 = Instant::now();
    while !done.exists() && t0.elapsed() < Duration::from_secs(300) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let pane = tmux(&["capture-pane", "-p", "-J", "-S", "-200"]);
    let _ = tmux(&["kill-server"]);
    let text = String::from_utf8_lossy(&pane.stdout).to_string();
    assert!(done.exists(), "the run did not finish:\n{text}");
    assert_eq!(
        std::fs::read_to_string(&done).expect("rc").trim(),
        "0",
        "{text}"
    );
    assert!(text.contains("Summary: "), "{text}");
    assert!(text.contains("cpu.flops "), "{text}");
    for l in text.lines() {
        let l = l.trim_end();
        assert!(l.chars().count() <= 100, "wider than the pane: {l}\n{text}");
    }
}
