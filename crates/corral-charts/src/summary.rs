//! The Summary table (every target of every issue, with its latest figure
//! and whether it is met) and the Growth table, as Markdown, computed from
//! the results files.

use serde_json::Value;

use crate::{
    numbers::{short, thousands},
    results::{Results, Run, num, scale_targets},
};

/// One line of the Summary table.
struct Line {
    target: String,
    measured: String,
    verdict: String,
    run: String,
}

fn verdict(met: bool) -> String {
    if met { "**met**" } else { "missed" }.to_owned()
}

fn not_measured(target: &str, bench: &str) -> Line {
    Line {
        target: target.to_owned(),
        measured: format!("not measured (no {bench}.json)"),
        verdict: "-".to_owned(),
        run: "-".to_owned(),
    }
}

/// The median of `contender` in a timing run, and its ratio to `base`'s.
fn versus(run: &Run, contender: &str, base: &str) -> Option<(f64, f64, f64)> {
    let m = num(run.row("contender", contender)?, "median_ms")?;
    let b = num(run.row("contender", base)?, "median_ms")?;
    Some((m / b, m, b))
}

fn ratio_line(
    results: &Results,
    bench: &str,
    target: &str,
    (contender, base, limit): (&str, &str, f64),
) -> Line {
    let Some(run) = results.get(bench) else {
        return not_measured(target, bench);
    };
    match versus(run, contender, base) {
        Some((r, m, b)) => Line {
            target: target.to_owned(),
            measured: format!("**{r:.2}x** ({} vs {} ms)", short(m), short(b)),
            verdict: verdict(r <= limit),
            run: run.when(),
        },
        None => not_measured(target, bench),
    }
}

fn kill_lines(results: &Results) -> Vec<Line> {
    let targets = [
        (
            "corral cgroup",
            1.2,
            "kill 1,000 TERM-ignoring processes, cgroup: <= 25 ms, none left (read as <= 1.2x a bare `cgroup.kill`, same run)",
        ),
        (
            "corral subreaper",
            2.0,
            "kill 1,000, subreaper backend: <= 2x a bare `cgroup.kill`, none left",
        ),
        (
            "corral group",
            2.0,
            "kill 1,000, process group backend: <= 2x a bare `cgroup.kill`, none left",
        ),
    ];
    let Some(run) = results.get("kill") else {
        return targets
            .iter()
            .map(|(_, _, t)| not_measured(t, "kill"))
            .collect();
    };
    let at = |contender: &str| {
        run.rows
            .iter()
            .find(|r| r["n"].as_u64() == Some(1000) && r["contender"].as_str() == Some(contender))
    };
    let bare = at("(diag) bare cgroup.kill").and_then(|r| num(r, "cleanup_median_ms"));
    targets
        .iter()
        .map(|(contender, limit, target)| {
            let row = at(contender);
            let cleanup = row.and_then(|r| num(r, "cleanup_median_ms"));
            let (Some(row), Some(ms), Some(bare)) = (row, cleanup, bare) else {
                return not_measured(target, "kill (N = 1000)");
            };
            let left = num(row, "alive_at_return").unwrap_or(0.0);
            let tree = num(row, "tree").unwrap_or(0.0);
            let r = ms / bare;
            let mut measured = format!(
                "**{} ms** = **{r:.2}x** bare ({} ms), {left}/{tree} alive at return",
                short(ms),
                short(bare)
            );
            if *contender == "corral cgroup" {
                let literal = if ms <= 25.0 { "met" } else { "missed" };
                measured.push_str(&format!("; 25 ms as written: {literal}"));
            }
            Line {
                target: (*target).to_owned(),
                measured,
                verdict: verdict(r <= *limit && left == 0.0),
                run: run.when(),
            }
        })
        .collect()
}

fn watchdog_line(results: &Results) -> Line {
    let target = "owner-death guard: added spawn latency, helper memory (no target)";
    let Some(run) = results.get("watchdog") else {
        return not_measured(target, "watchdog");
    };
    let extra = run.rows.iter().find(|r| !r["added_median_ms"].is_null());
    let get = |k: &str| extra.and_then(|r| num(r, k));
    let mib = |k: &str| get(k).map_or("-".to_owned(), |v| format!("{:.1} MiB", v / 1024.0));
    Line {
        target: target.to_owned(),
        measured: format!(
            "**+{} ms**, helper {} executed / {} forked",
            get("added_median_ms").map_or("-".to_owned(), short),
            mib("executed_helper_rss_kib"),
            mib("forked_helper_rss_kib"),
        ),
        verdict: "measured".to_owned(),
        run: run.when(),
    }
}

fn serve_line(results: &Results) -> Line {
    let target =
        "`corral mcp serve`: added median of a `run` of `true` over a direct spawn (no target)";
    let Some(run) = results.get("serve") else {
        return not_measured(target, "serve");
    };
    let extra = run.rows.iter().find(|r| !r["added_median_ms"].is_null());
    let get = |k: &str| extra.and_then(|r| num(r, k)).unwrap_or(f64::NAN);
    let median = |contender: &str| {
        run.row("contender", contender)
            .and_then(|r| num(r, "median_ms"))
            .map_or("-".to_owned(), short)
    };
    Line {
        target: target.to_owned(),
        measured: format!(
            "**{:+.3} ms** = **{:.2}x** (direct {}, through MCP {} ms)",
            get("added_median_ms"),
            get("ratio_median"),
            median("direct spawn (corral::Command, piped)"),
            median("run through MCP (rmcp client, in-process pipe)"),
        ),
        verdict: "measured".to_owned(),
        run: run.when(),
    }
}

fn relay_lines(results: &Results) -> Vec<Line> {
    let trip = "`corral mcp wrap`: added median round trip <= 100 us";
    let rate = "`corral mcp wrap`: small messages >= 50,000/s";
    let Some((run, row)) = results
        .get("relay")
        .and_then(|r| Some((r, r.rows.first()?)))
    else {
        return vec![not_measured(trip, "relay"), not_measured(rate, "relay")];
    };
    let get = |k: &str| num(row, k).unwrap_or(f64::NAN);
    vec![
        Line {
            target: trip.to_owned(),
            measured: format!(
                "**+{} us** (direct {}, through the guard {} us)",
                short(get("added_median_us")),
                short(get("direct_median_us")),
                short(get("guard_median_us"))
            ),
            verdict: verdict(get("added_median_us") <= 100.0),
            run: run.when(),
        },
        Line {
            target: rate.to_owned(),
            measured: format!("**{}/s**", thousands(get("guard_msgs_per_sec"))),
            verdict: verdict(get("guard_msgs_per_sec") >= 50_000.0),
            run: run.when(),
        },
    ]
}

fn scale_line(results: &Results, backend: &str) -> Line {
    let (rss, cpu, back) = scale_targets(backend);
    let target = format!(
        "scale, 1,000 trees, {backend}: RSS <= {rss} MiB, no thread per tree, idle CPU <= {cpu} %, \
         all back <= {back} s after the deadline, 0 survivors"
    );
    let row = results
        .get("scale")
        .and_then(|run| Some((run, run.row("backend", backend)?)));
    let Some((run, row)) = row else {
        return not_measured(&target, "scale");
    };
    let get = |k: &str| num(row, k).unwrap_or(f64::NAN);
    let left = get("survivors_reported") + get("left_running");
    let met = get("rss_mib") <= rss
        && get("threads") <= 16.0
        && get("idle_cpu_percent") <= cpu
        && get("back_after_deadline_secs") <= back
        && left == 0.0;
    let verdict = if get("trees") < 1000.0 {
        "not at size".to_owned()
    } else {
        verdict(met)
    };
    Line {
        target,
        measured: format!(
            "{} trees: **{} MiB**, {} threads, **{} %**, **{} s**, {} survivors, {} left running",
            get("trees"),
            short(get("rss_mib")),
            get("threads"),
            short(get("idle_cpu_percent")),
            short(get("back_after_deadline_secs")),
            get("survivors_reported"),
            get("left_running"),
        ),
        verdict,
        run: run.when(),
    }
}

fn growth_line(results: &Results) -> Line {
    let target = "growth, 1 to 1,000 processes: spawn-to-exit, deadline-to-empty (no target)";
    let Some(run) = results.get("growth") else {
        return not_measured(target, "growth");
    };
    let largest = run
        .rows
        .iter()
        .filter_map(|r| r["n"].as_u64())
        .max()
        .unwrap_or(0);
    let parts: Vec<String> = run
        .rows_where(|r| {
            r["scenario"].as_str() == Some("deadline-to-empty") && r["n"].as_u64() == Some(largest)
        })
        .iter()
        .map(|r| growth_cell(r))
        .collect();
    Line {
        target: target.to_owned(),
        measured: format!("deadline-to-empty at N = {largest}: {}", parts.join("; ")),
        verdict: "measured".to_owned(),
        run: run.when(),
    }
}

fn growth_cell(row: &Value) -> String {
    let left = num(row, "alive_after_settle").unwrap_or(0.0);
    let tree = num(row, "tree").unwrap_or(0.0);
    format!(
        "{} {} ms{}",
        row["contender"].as_str().unwrap_or("?"),
        short(num(row, "median_ms").unwrap_or(f64::NAN)),
        if left > 0.0 {
            format!(" (**{left}/{tree} left**)")
        } else {
            String::new()
        }
    )
}

fn mcp_clients_line(results: &Results) -> Line {
    let target = "MCP clients, one leaky stdio server (server + 3 escaping helpers): \
                  corral's rows leave 0 after a normal close";
    let Some(run) = results.get("mcp_clients") else {
        return not_measured(target, "mcp_clients");
    };
    let left = |row: &Value| num(row, "survivors_max").unwrap_or(f64::NAN);
    let corral: Vec<&Value> = run.rows_where(|r| r["corral"].as_bool() == Some(true));
    let met = !corral.is_empty() && corral.iter().all(|r| left(r) == 0.0);
    let parts: Vec<String> = run
        .rows
        .iter()
        .map(|row| {
            let n = left(row);
            let of = num(row, "of").unwrap_or(4.0);
            let figure = if n > 0.0 {
                format!("**{n}/{of} left**")
            } else {
                format!("{n}/{of} left")
            };
            format!(
                "{} {figure}, close {} ms",
                row["contender"].as_str().unwrap_or("?"),
                short(num(row, "close_median_ms").unwrap_or(f64::NAN))
            )
        })
        .collect();
    Line {
        target: target.to_owned(),
        measured: parts.join("; "),
        verdict: verdict(met),
        run: run.when(),
    }
}

/// The Summary table.
pub fn summary(results: &Results) -> String {
    let mut lines = vec![
        ratio_line(
            results,
            "spawn",
            "spawn+wait, cgroup backend <= 1.5x tokio",
            ("corral cgroup", "tokio::process status()", 1.5),
        ),
        ratio_line(
            results,
            "spawn",
            "spawn+wait, process group backend <= 1.2x tokio",
            ("corral group", "tokio::process status()", 1.2),
        ),
    ];
    lines.extend(kill_lines(results));
    lines.push(ratio_line(
        results,
        "cli",
        "`corral run -- true` <= 1.3x `timeout 10 true`",
        ("corral run -- true", "timeout 10 true (GNU)", 1.3),
    ));
    lines.push(watchdog_line(results));
    lines.extend(relay_lines(results));
    lines.push(scale_line(results, "cgroup"));
    lines.push(scale_line(results, "group"));
    lines.push(growth_line(results));
    lines.push(mcp_clients_line(results));
    lines.push(serve_line(results));
    lines.push(ratio_line(
        results,
        "container",
        "unprivileged container (subreaper backend): spawn+wait <= 1.3x tokio",
        ("corral (auto: subreaper)", "tokio::process status()", 1.3),
    ));
    lines.push(ratio_line(
        results,
        "container",
        "unprivileged container: kill 1,000 (subreaper, in the shape) <= 2x a bare `cgroup.kill` on the host, none left",
        (
            "corral subreaper (in the shape)",
            "bare cgroup.kill (host)",
            2.0,
        ),
    ));
    let mut out = String::from("| target | latest figure | met? | run |\n|---|---|---|---|\n");
    for line in lines {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            line.target, line.measured, line.verdict, line.run
        ));
    }
    out
}

/// The Growth table: one line per scenario and size, one column per
/// contender (median ms, and what it left running).
pub fn growth(results: &Results) -> String {
    let Some(run) = results.get("growth") else {
        return "(no growth.json)\n".to_owned();
    };
    let mut contenders: Vec<&str> = Vec::new();
    let mut keys: Vec<(&str, u64)> = Vec::new();
    for row in &run.rows {
        let (Some(c), Some(s), Some(n)) = (
            row["contender"].as_str(),
            row["scenario"].as_str(),
            row["n"].as_u64(),
        ) else {
            continue;
        };
        if !contenders.contains(&c) {
            contenders.push(c);
        }
        if !keys.contains(&(s, n)) {
            keys.push((s, n));
        }
    }
    let mut out = format!("| scenario | N | {} |\n", contenders.join(" | "));
    out.push_str(&format!("|---|---|{}\n", "---|".repeat(contenders.len())));
    for (scenario, n) in keys {
        let cells: Vec<String> = contenders
            .iter()
            .map(|c| {
                run.rows
                    .iter()
                    .find(|r| {
                        r["scenario"].as_str() == Some(scenario)
                            && r["n"].as_u64() == Some(n)
                            && r["contender"].as_str() == Some(c)
                    })
                    .map_or("-".to_owned(), growth_figure)
            })
            .collect();
        out.push_str(&format!("| {scenario} | {n} | {} |\n", cells.join(" | ")));
    }
    out.push_str(&format!("\nRun: {}; median (p90) in ms.\n", run.when()));
    out
}

fn growth_figure(row: &Value) -> String {
    let left = num(row, "alive_after_settle").unwrap_or(0.0);
    let tree = num(row, "tree").unwrap_or(0.0);
    let time = format!(
        "{} ({})",
        short(num(row, "median_ms").unwrap_or(f64::NAN)),
        short(num(row, "p90_ms").unwrap_or(f64::NAN))
    );
    if left > 0.0 {
        format!("{time}, **{left}/{tree} left**")
    } else {
        time
    }
}
