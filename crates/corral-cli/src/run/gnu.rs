//! GNU `timeout`'s syntax for `corral run`: `corral run [OPTION]... DURATION
//! COMMAND [ARG]...`, read as `getopt` reads it, turned into the `-t
//! DURATION -- COMMAND` form that clap parses.
//!
//! The rule: options end at the first operand or at `--` (see
//! `crate::getopt`). Without `-t`/`--timeout` and without `--`, the first
//! operand is the DURATION and the rest the command (GNU's form). With `-t`,
//! or after `--`, every operand is the command (corral's form: `corral run
//! -- cat` has no limit). Anything `getopt` refuses, and corral's form
//! without `--` (`-t 1 sleep 2`), goes to clap unchanged, which says what is
//! wrong.

use std::ffi::OsString;

use crate::getopt::{self, Opt};

/// `corral run`'s options, as `getopt` must know them to find where they
/// end (checked against clap's definition by a test).
pub const RUN_OPTIONS: &[Opt] = &[
    opt(Some('t'), "timeout", true),
    opt(Some('k'), "kill-after", true),
    opt(None, "final-bound", true),
    opt(Some('s'), "signal", true),
    opt(Some('p'), "preserve-status", false),
    opt(Some('f'), "foreground", false),
    opt(Some('v'), "verbose", false),
    opt(None, "backend", true),
    opt(Some('u'), "user", true),
    opt(None, "max-procs", true),
    opt(None, "max-memory", true),
    opt(None, "max-swap", true),
    opt(None, "cpus", true),
    opt(None, "cpu-time", true),
    opt(None, "max-open-files", true),
    opt(None, "max-core-size", true),
    opt(None, "max-address-space", true),
    opt(None, "limits-best-effort", false),
    opt(None, "report", true),
    opt(None, "report-fd", true),
    opt(Some('h'), "help", false),
];

const fn opt(short: Option<char>, long: &'static str, value: bool) -> Opt {
    Opt { short, long, value }
}

/// `args` (the whole command line) with a `corral run` in GNU's form
/// rewritten into corral's; any other command line unchanged.
///
/// # Errors
/// GNU's form with a DURATION that is not one: the message, to print as is
/// (exit status 125).
pub fn rewrite(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    if args.get(1).is_none_or(|sub| sub != "run") {
        return Ok(args);
    }
    let parsed = getopt::parse(RUN_OPTIONS, &args[2..]);
    if parsed.error.is_some() {
        return Ok(args);
    }
    let has_limit = parsed.options.iter().any(|(o, _)| o.long == "timeout");
    let help = parsed.options.iter().any(|(o, _)| o.long == "help");
    if help || parsed.double_dash || has_limit || parsed.operands.is_empty() {
        // corral's own form, or nothing to rewrite.
        return Ok(args);
    }
    let mut operands = parsed.operands.into_iter();
    let duration = operands.next().unwrap_or_default();
    if let Err(error) = crate::gnu_duration::parse_lenient(&duration.to_string_lossy()) {
        return Err(format!(
            "invalid duration {:?} ({error}); to run a command without a time limit, put it \
             after `--`, e.g. corral run -- {}",
            duration.to_string_lossy(),
            duration.to_string_lossy()
        ));
    }
    let mut out: Vec<OsString> = args[..2].to_vec();
    for (opt, value) in parsed.options {
        let mut arg = OsString::from(format!("--{}", opt.long));
        if let Some(value) = value {
            arg.push("=");
            arg.push(value);
        }
        out.push(arg);
    }
    let mut limit = OsString::from("--timeout=");
    limit.push(duration);
    out.push(limit);
    out.push("--".into());
    out.extend(operands);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(list: &[&str]) -> Vec<String> {
        let args = ["corral", "run"]
            .iter()
            .chain(list)
            .map(OsString::from)
            .collect();
        rewrite(args)
            .expect("rewrites")
            .into_iter()
            .skip(2)
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn gnu_form_becomes_corrals() {
        assert_eq!(
            rewritten(&["10", "sleep", "-s"]),
            ["--timeout=10", "--", "sleep", "-s"]
        );
        assert_eq!(
            rewritten(&["-sKILL", "--kill=1", "-vp", "2.5e0", "cmd", "--", "x"]),
            [
                "--signal=KILL",
                "--kill-after=1",
                "--verbose",
                "--preserve-status",
                "--timeout=2.5e0",
                "--",
                "cmd",
                "--",
                "x"
            ]
        );
    }

    #[test]
    fn corrals_form_is_left_alone() {
        for list in [
            &["-t", "1", "--", "sleep", "2"][..],
            &["--", "cat"],
            &["-t", "1", "sleep", "2"],
            &["--help"],
            &["--bogus", "1", "true"],
            &[],
        ] {
            assert_eq!(rewritten(list), *list, "{list:?}");
        }
        let other = vec![OsString::from("corral"), "capabilities".into()];
        assert_eq!(rewrite(other.clone()), Ok(other));
    }

    #[test]
    fn a_bad_duration_says_how_to_run_without_a_limit() {
        let args = ["corral", "run", "true"].map(OsString::from).to_vec();
        let error = rewrite(args).expect_err("not a duration");
        assert!(error.contains("after `--`"), "{error}");
    }

    /// The table and clap's definition name the same options, with the same
    /// short forms and the same need of a value.
    #[test]
    fn the_table_matches_clap() {
        use clap::CommandFactory;
        let mut cli = crate::cli::Cli::command();
        cli.build();
        let run = cli.find_subcommand("run").expect("run");
        let mut from_clap: Vec<(Option<char>, String, bool)> = run
            .get_arguments()
            .filter_map(|a| {
                let long = a.get_long()?.to_owned();
                Some((a.get_short(), long, a.get_action().takes_values()))
            })
            .collect();
        from_clap.sort();
        let mut table: Vec<(Option<char>, String, bool)> = RUN_OPTIONS
            .iter()
            .map(|o| (o.short, o.long.to_owned(), o.value))
            .collect();
        table.sort();
        assert_eq!(table, from_clap);
    }
}
