//! One chart per section of BENCHMARKS.md that compares contenders, each
//! drawn from its bench's results file (skipped if the file is missing).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{
    draw::{Bar, BarPanel, Curve, CurvePanel, bar_chart, curve_chart},
    numbers::{short, thousands},
    results::{Results, Run, num, scale_targets},
};

/// Draws every chart whose results exist into `out`; returns the files.
pub fn draw_all(results: &Results, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    type Section = fn(&Run, &Path) -> anyhow::Result<()>;
    let sections: [(&str, Section); 10] = [
        ("spawn", spawn),
        ("kill", kill),
        ("cli", cli),
        ("watchdog", watchdog),
        ("relay", relay),
        ("scale", scale),
        ("growth", growth),
        ("mcp_clients", mcp_clients),
        ("serve", serve),
        ("container", container),
    ];
    let mut drawn = Vec::new();
    for (bench, draw) in sections {
        let Some(run) = results.get(bench) else {
            continue;
        };
        let path = out.join(format!("{bench}.svg"));
        draw(run, &path)?;
        drawn.push(path);
    }
    Ok(drawn)
}

/// Timing rows (`contender`, `median_ms`, `p90_ms`) as bars, with the ratio
/// to the baseline row as the note and `targets` as (contender, ratio).
fn timing_bars(
    run: &Run,
    base: &str,
    keep: impl Fn(&str) -> bool,
    targets: &[(&str, f64)],
) -> Vec<Bar> {
    let base_ms = run.row("contender", base).and_then(|r| num(r, "median_ms"));
    run.rows
        .iter()
        .filter_map(|row| {
            let label = row["contender"].as_str()?;
            let median = num(row, "median_ms")?;
            let target = targets
                .iter()
                .find(|(c, _)| *c == label)
                .and_then(|(_, t)| Some(t * base_ms?));
            let ratio = base_ms.map_or(String::new(), |b| format!(", {:.2}x", median / b));
            keep(label).then(|| {
                Bar::new(label, median)
                    .whisker(num(row, "p90_ms"))
                    .target(target)
                    .note(format!("{} ms{ratio}", short(median)))
                    .alarm(target.is_some_and(|t| median > t))
            })
        })
        .collect()
}

fn caption(what: &str, run: &Run) -> String {
    format!("{what} ({})", run.when())
}

fn spawn(run: &Run, path: &Path) -> anyhow::Result<()> {
    let base = "tokio::process status()";
    let bars = timing_bars(
        run,
        base,
        |l| !l.starts_with("(diag)"),
        &[("corral cgroup", 1.5), ("corral group", 1.2)],
    );
    let panel = BarPanel {
        title: "median, whisker to p90; tick: the target (x tokio's median)".to_owned(),
        axis: "spawn + wait of /bin/true (ms)".to_owned(),
        bars,
    };
    bar_chart(path, &caption("1. spawn + wait", run), &[panel])
}

/// The container bench: spawn + wait against tokio, and the kill against a
/// bare `cgroup.kill`, each in a panel of its own.
fn container(run: &Run, path: &Path) -> anyhow::Result<()> {
    let in_section = |section: &'static str| {
        move |label: &str| {
            run.row("contender", label)
                .is_some_and(|r| r["section"] == section)
        }
    };
    let spawn = BarPanel {
        title: "spawn + wait of /bin/true in the shape: median, whisker to p90; tick: 1.3x tokio"
            .to_owned(),
        axis: "ms".to_owned(),
        bars: timing_bars(
            run,
            "tokio::process status()",
            in_section("spawn"),
            &[("corral (auto: subreaper)", 1.3)],
        ),
    };
    let kill = BarPanel {
        title:
            "kill of 1,001 TERM-ignoring processes: trigger to empty; tick: 2x the bare cgroup.kill"
                .to_owned(),
        axis: "ms".to_owned(),
        bars: timing_bars(
            run,
            "bare cgroup.kill (host)",
            in_section("kill"),
            &[("corral subreaper (in the shape)", 2.0)],
        ),
    };
    bar_chart(
        path,
        &caption("10. in an unprivileged container", run),
        &[spawn, kill],
    )
}

fn kill(run: &Run, path: &Path) -> anyhow::Result<()> {
    let mut sizes: Vec<u64> = run.rows.iter().filter_map(|r| r["n"].as_u64()).collect();
    sizes.dedup();
    let panels = sizes
        .iter()
        .map(|&n| {
            let rows = run.rows_where(|r| r["n"].as_u64() == Some(n));
            let bare = rows
                .iter()
                .find(|r| r["contender"].as_str().is_some_and(|c| c.contains("bare")))
                .and_then(|r| num(r, "cleanup_median_ms"));
            let bars = rows.iter().map(|row| kill_bar(row, n, bare)).collect();
            BarPanel {
                title: format!(
                    "N = {n}: trigger to empty tree (process-wrap: kill to return), whisker to p90"
                ),
                axis: "ms".to_owned(),
                bars,
            }
        })
        .collect::<Vec<_>>();
    bar_chart(path, &caption("2. kill a TERM-ignoring tree", run), &panels)
}

fn kill_bar(row: &Value, n: u64, bare: Option<f64>) -> Bar {
    let label = row["contender"].as_str().unwrap_or("?");
    let cleanup = num(row, "cleanup_median_ms");
    let value = cleanup
        .or_else(|| num(row, "wall_median_ms"))
        .unwrap_or(0.0);
    let p90 = num(row, "cleanup_p90_ms").or_else(|| num(row, "wall_p90_ms"));
    let factor = match label {
        "corral cgroup" => Some(1.2),
        "corral subreaper" | "corral group" => Some(2.0),
        _ => None,
    };
    let target = factor.filter(|_| n >= 1000).and_then(|f| Some(f * bare?));
    let tree = num(row, "tree").unwrap_or(0.0);
    let (at_return, settled) = (
        num(row, "alive_at_return").unwrap_or(0.0),
        num(row, "alive_after_settle").unwrap_or(0.0),
    );
    let mut note = format!("{} ms", short(value));
    if let (Some(b), Some(_)) = (bare, cleanup) {
        note.push_str(&format!(", {:.2}x bare", value / b));
    }
    if at_return > 0.0 {
        note.push_str(&format!(
            "; {at_return}/{tree} alive at return, {settled} after 200 ms"
        ));
    }
    Bar::new(label, value)
        .whisker(p90)
        .target(target)
        .note(note)
        .alarm(at_return > 0.0 || target.is_some_and(|t| value > t))
}

fn cli(run: &Run, path: &Path) -> anyhow::Result<()> {
    let bars = timing_bars(
        run,
        "timeout 10 true (GNU)",
        |_| true,
        &[("corral run -- true", 1.3)],
    );
    let panel = BarPanel {
        title: "median, whisker to p90; tick: the target (x GNU timeout's median)".to_owned(),
        axis: "whole process, ms".to_owned(),
        bars,
    };
    bar_chart(path, &caption("3. corral run -- true", run), &[panel])
}

fn watchdog(run: &Run, path: &Path) -> anyhow::Result<()> {
    let bars = timing_bars(run, "guard off (no ledger, no watchdog)", |_| true, &[]);
    let panel = BarPanel {
        title: "spawn + wait of /bin/true, cgroup backend; median, whisker to p90".to_owned(),
        axis: "ms".to_owned(),
        bars,
    };
    bar_chart(path, &caption("4. the owner-death guard", run), &[panel])
}

fn serve(run: &Run, path: &Path) -> anyhow::Result<()> {
    let bars = timing_bars(run, "direct spawn (corral::Command, piped)", |_| true, &[]);
    let panel = BarPanel {
        title: "run of true, cgroup backend; median, whisker to p90".to_owned(),
        axis: "ms".to_owned(),
        bars,
    };
    bar_chart(
        path,
        &caption("9. corral mcp serve: a run through MCP", run),
        &[panel],
    )
}

fn relay(run: &Run, path: &Path) -> anyhow::Result<()> {
    let Some(row) = run.rows.first() else {
        return Ok(());
    };
    let get = |k: &str| num(row, k).unwrap_or(0.0);
    let latency = |label: &str, median: f64, p90: f64| {
        Bar::new(label, median)
            .whisker(Some(p90))
            .note(format!("{} us", short(median)))
    };
    let trip = BarPanel {
        title: "round trip of a small request; tick: direct + 100 us (the target)".to_owned(),
        axis: "us".to_owned(),
        bars: vec![
            latency("direct", get("direct_median_us"), get("direct_p90_us")),
            latency(
                "through corral mcp wrap (cgroup)",
                get("guard_median_us"),
                get("guard_p90_us"),
            )
            .target(Some(get("direct_median_us") + 100.0)),
        ],
    };
    let rate = |label: &str, v: f64| Bar::new(label, v).note(format!("{}/s", thousands(v)));
    let throughput = BarPanel {
        title: "small messages per second, pipelined; tick: 50,000/s (the target)".to_owned(),
        axis: "messages/s".to_owned(),
        bars: vec![
            rate("direct", get("direct_msgs_per_sec")),
            rate(
                "through corral mcp wrap (cgroup)",
                get("guard_msgs_per_sec"),
            )
            .target(Some(50_000.0)),
        ],
    };
    bar_chart(
        path,
        &caption("5. corral mcp wrap", run),
        &[trip, throughput],
    )
}

fn scale(run: &Run, path: &Path) -> anyhow::Result<()> {
    type Measure = (&'static str, &'static str, fn((f64, f64, f64)) -> f64);
    let measures: [Measure; 3] = [
        ("resident memory, all trees running", "MiB", |t| t.0),
        ("CPU while every tree waits", "% of a core", |t| t.1),
        ("last result after the common deadline", "s", |t| t.2),
    ];
    let keys = ["rss_mib", "idle_cpu_percent", "back_after_deadline_secs"];
    let panels: Vec<BarPanel> = measures
        .iter()
        .zip(keys)
        .map(|((title, unit, pick), key)| {
            let bars = run
                .rows
                .iter()
                .filter_map(|row| {
                    let backend = row["backend"].as_str()?;
                    let value = num(row, key)?;
                    let target = pick(scale_targets(backend));
                    let trees = num(row, "trees").unwrap_or(0.0);
                    Some(
                        Bar::new(format!("corral {backend}, {trees} trees"), value)
                            .target(Some(target))
                            .note(format!("{} {unit}", short(value)))
                            .alarm(value > target),
                    )
                })
                .collect();
            BarPanel {
                title: format!("{title}; tick: the target"),
                axis: (*unit).to_owned(),
                bars,
            }
        })
        .collect();
    bar_chart(
        path,
        &caption("6. scale: many trees in one host", run),
        &panels,
    )
}

fn growth(run: &Run, path: &Path) -> anyhow::Result<()> {
    let scenarios = [
        ("spawn-to-exit", "spawn to exit status (ms)"),
        (
            "deadline-to-empty",
            "deadline to return, 50 ms grace included (ms)",
        ),
    ];
    let panels = scenarios
        .iter()
        .map(|(scenario, axis)| {
            let rows = run.rows_where(|r| r["scenario"].as_str() == Some(scenario));
            let mut labels: Vec<&str> = rows
                .iter()
                .filter_map(|r| r["contender"].as_str())
                .collect();
            let mut seen = Vec::new();
            labels.retain(|l| {
                !seen.contains(l) && {
                    seen.push(*l);
                    true
                }
            });
            let curves = labels
                .iter()
                .map(|label| Curve {
                    label: (*label).to_owned(),
                    points: rows
                        .iter()
                        .filter(|r| r["contender"].as_str() == Some(label))
                        .filter_map(|r| {
                            let left = r["alive_after_settle"].as_u64().unwrap_or(0);
                            Some((num(r, "n")?, num(r, "median_ms")?, left as usize))
                        })
                        .collect(),
                })
                .collect();
            CurvePanel {
                title: (*scenario).to_owned(),
                axis: (*axis).to_owned(),
                curves,
            }
        })
        .collect::<Vec<_>>();
    curve_chart(
        path,
        &caption("growth: median time by tree size", run),
        &panels,
    )
}

/// What each MCP client left alive (of the fixture's server and three
/// helpers), and how long its close took.
fn mcp_clients(run: &Run, path: &Path) -> anyhow::Result<()> {
    let label = |row: &Value| row["contender"].as_str().unwrap_or("?").to_owned();
    let left = run
        .rows
        .iter()
        .map(|row| {
            let max = num(row, "survivors_max").unwrap_or(0.0);
            let min = num(row, "survivors_min").unwrap_or(0.0);
            let of = num(row, "of").unwrap_or(4.0);
            let range = if min == max {
                format!("{max}")
            } else {
                format!("{min}-{max}")
            };
            Bar::new(label(row), max)
                .note(format!("{range} of {of} left"))
                .alarm(max > 0.0)
        })
        .collect();
    let close = run
        .rows
        .iter()
        .filter_map(|row| {
            let median = num(row, "close_median_ms")?;
            Some(
                Bar::new(label(row), median)
                    .whisker(num(row, "close_p90_ms"))
                    .note(format!("{} ms", short(median))),
            )
        })
        .collect();
    let settle = run
        .rows
        .first()
        .and_then(|row| num(row, "settle_secs"))
        .unwrap_or(0.0);
    let panels = [
        BarPanel {
            title: format!(
                "alive after a normal close + {settle} s (worst run): server and 3 escaping helpers"
            ),
            axis: "processes left running (of 4)".to_owned(),
            bars: left,
        },
        BarPanel {
            title: "how long the close took; median, whisker to p90".to_owned(),
            axis: "ms".to_owned(),
            bars: close,
        },
    ];
    bar_chart(
        path,
        &caption("8. what each MCP client leaves behind", run),
        &panels,
    )
}
