//! The benches' results files: `BENCH.json` with `bench`, `quick`,
//! `unix_time`, `load_average`, `machine` and `rows` (see
//! `corral_tests::bench::write_results`).

use std::{collections::BTreeMap, path::Path};

use anyhow::Context;
use serde_json::Value;

/// Every bench whose results the charts and the summary read.
pub const BENCHES: [&str; 10] = [
    "spawn",
    "kill",
    "cli",
    "watchdog",
    "relay",
    "scale",
    "growth",
    "mcp_clients",
    "serve",
    "container",
];

/// One results file.
#[derive(Debug)]
pub struct Run {
    pub rows: Vec<Value>,
    pub quick: bool,
    pub unix_time: u64,
    pub load_average: String,
}

impl Run {
    /// The first row whose `key` is the string `value`.
    pub fn row(&self, key: &str, value: &str) -> Option<&Value> {
        self.rows.iter().find(|r| r[key].as_str() == Some(value))
    }

    /// The rows for which `keep` holds.
    pub fn rows_where(&self, keep: impl Fn(&Value) -> bool) -> Vec<&Value> {
        self.rows.iter().filter(|r| keep(r)).collect()
    }

    /// "2026-11-30, load 0.57" (the 1-minute load average), "quick" added
    /// for a CI-sized run.
    pub fn when(&self) -> String {
        let load = self.load_average.split_whitespace().next().unwrap_or("?");
        let quick = if self.quick { ", quick" } else { "" };
        format!("{}, load {load}{quick}", date(self.unix_time))
    }
}

/// The results files found in a directory, by bench name.
#[derive(Debug, Default)]
pub struct Results(pub BTreeMap<String, Run>);

impl Results {
    /// Reads every `BENCH.json` of [`BENCHES`] present in `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let mut runs = BTreeMap::new();
        for bench in BENCHES {
            let path = dir.join(format!("{bench}.json"));
            if !path.exists() {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let doc: Value = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()))?;
            let run = Run {
                rows: doc["rows"].as_array().cloned().unwrap_or_default(),
                quick: doc["quick"].as_bool().unwrap_or(false),
                unix_time: doc["unix_time"].as_u64().unwrap_or(0),
                load_average: doc["load_average"].as_str().unwrap_or("").to_owned(),
            };
            runs.insert(bench.to_owned(), run);
        }
        Ok(Self(runs))
    }

    pub fn get(&self, bench: &str) -> Option<&Run> {
        self.0.get(bench)
    }
}

/// `row[key]` as a number.
pub fn num(row: &Value, key: &str) -> Option<f64> {
    row[key].as_f64()
}

/// The civil date (UTC) of a Unix time, `YYYY-MM-DD` (Howard Hinnant's
/// `civil_from_days`); "unknown date" for 0.
pub fn date(unix_time: u64) -> String {
    if unix_time == 0 {
        return "unknown date".to_owned();
    }
    let z = (unix_time / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The scale targets per backend: RSS (MiB), idle CPU (%), back after the
/// deadline (s).
pub fn scale_targets(backend: &str) -> (f64, f64, f64) {
    if backend == "cgroup" {
        (64.0, 1.0, 2.0)
    } else {
        (64.0, 5.0, 5.0)
    }
}

#[cfg(test)]
mod tests {
    use super::date;

    #[test]
    fn dates_are_civil_utc_dates() {
        assert_eq!(date(0), "unknown date");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(1_796_083_200), "2026-12-01");
    }
}
