//! `corral-charts`: draws BENCHMARKS.md's charts and regenerates its tables
//! from the benches' results files.
//!
//! ```text
//! corral-charts [--results DIR] [--out DIR] [--markdown FILE]
//! ```
//!
//! Reads `DIR/*.json` (default `docs/bench`), writes one SVG per section
//! into the output directory (default: the results directory), and
//! `summary.md` (the Summary and Growth tables) beside them, unless
//! `--markdown` is given: then those tables are rewritten in FILE between
//! `<!-- summary:begin -->` / `<!-- summary:end -->` and
//! `<!-- growth:begin -->` / `<!-- growth:end -->`.

mod charts;
mod draw;
mod markdown;
mod numbers;
mod results;
mod summary;

use std::path::PathBuf;

use anyhow::{Context, bail};

struct Args {
    results: PathBuf,
    out: PathBuf,
    markdown: Option<PathBuf>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut results = PathBuf::from("docs/bench");
    let mut out = None;
    let mut markdown = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .map(PathBuf::from)
                .context("a value after the flag")
        };
        match arg.as_str() {
            "--results" => results = value()?,
            "--out" => out = Some(value()?),
            "--markdown" => markdown = Some(value()?),
            other => {
                bail!("unknown argument {other:?} (use --results DIR, --out DIR, --markdown FILE)")
            }
        }
    }
    Ok(Args {
        out: out.unwrap_or_else(|| results.clone()),
        results,
        markdown,
    })
}

fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    let results = results::Results::load(&args.results)?;
    if results.0.is_empty() {
        bail!("no results files in {}", args.results.display());
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for path in charts::draw_all(&results, &args.out)? {
        println!("chart: {}", path.display());
    }
    let summary = summary::summary(&results);
    let growth = summary::growth(&results);
    print!("\n{summary}");
    if args.markdown.is_none() {
        let tables = args.out.join("summary.md");
        std::fs::write(&tables, format!("{summary}\n{growth}"))
            .with_context(|| format!("writing {}", tables.display()))?;
        println!("\ntables: {}", tables.display());
    }
    if let Some(file) = &args.markdown {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let text = markdown::replace_block(&text, "summary", &summary)?;
        let text = markdown::replace_block(&text, "growth", &growth)?;
        std::fs::write(file, text).with_context(|| format!("writing {}", file.display()))?;
        println!("\nupdated: {}", file.display());
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("corral-charts: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
