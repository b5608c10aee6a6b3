//! `corral generate man|completions DIR` (hidden): the files a package
//! installs beside the binary, generated from the clap definitions by the
//! binary itself, as ripgrep's `rg --generate` does — so `scripts/install`,
//! the Debian package and a distribution's recipe all take them from the
//! corral they install, and they cannot drift from `--help`.

use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use clap::CommandFactory;

use crate::{
    cli::{Cli, Generated, VERSION},
    kit::exit,
    timeout,
};

/// Writes `what` into `dir` (created if missing), one line per file on
/// standard output.
///
/// # Errors
/// A file that cannot be written, named.
pub fn main(what: Generated, dir: &Path) -> anyhow::Result<exit::Status> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let written = match what {
        Generated::Man => man_pages(dir)?,
        Generated::Completions => completions(dir)?,
    };
    let mut out = std::io::stdout().lock();
    for path in written {
        let _ = writeln!(out, "{}", path.display());
    }
    Ok(exit::Status::Exited(0))
}

/// The man pages: one per visible command, and the `timeout` personality's.
fn man_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    let mut written = Vec::new();
    page_tree(&command, dir, &mut written)?;
    let path = dir.join("corral-timeout.1");
    write(&path, timeout_page().as_bytes())?;
    written.push(path);
    Ok(written)
}

fn page_tree(
    command: &clap::Command,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let man = clap_mangen::Man::new(command.clone())
        .date(DATE)
        .source(format!("corral {VERSION}"))
        .manual("corral");
    let mut page = Vec::new();
    man.render(&mut page).context("rendering a man page")?;
    if command.get_name() == "corral" {
        page.extend_from_slice(TIMEOUT_SECTION.as_bytes());
    }
    let path = dir.join(man.get_filename());
    write(&path, &page)?;
    written.push(path);
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        page_tree(sub, dir, written)?;
    }
    Ok(())
}

/// The commit's date (build.rs), or the version where it is unknown: an
/// empty `.TH` field would shift the ones after it.
const DATE: &str = match env!("CORRAL_COMMIT_DATE").as_bytes() {
    [] => env!("CARGO_PKG_VERSION"),
    _ => env!("CORRAL_COMMIT_DATE"),
};

/// Appended to `corral.1`.
const TIMEOUT_SECTION: &str = "\
.SH \"TIMEOUT PERSONALITY\"
Started under the name \\fBtimeout\\fR (a symbolic link or a copy, e.g.
\\fBscripts/install \\-\\-timeout\\-link\\fR), corral is GNU \\fBtimeout\\fR(1)
to the letter: its options, messages and exit statuses, and it still ends
the command's whole process tree. See \\fBcorral\\-timeout\\fR(1) for what
differs from GNU timeout and why.
.SH \"SEE ALSO\"
\\fBcorral\\-run\\fR(1), \\fBcorral\\-timeout\\fR(1), \\fBcorral\\-mcp\\fR(1), \\fBtimeout\\fR(1)
";

/// `corral-timeout.1`: the personality's own `--help`, which says how it
/// differs from GNU's, as the page's body.
fn timeout_page() -> String {
    let mut page = format!(
        ".TH corral-timeout 1 \"{DATE}\" \"corral {VERSION}\" corral\n\
         .SH NAME\n\
         corral\\-timeout \\- corral started as timeout(1): GNU timeout's command line, \
         and the whole process tree ended\n\
         .SH SYNOPSIS\n\
         \\fBtimeout\\fR [\\fIOPTION\\fR] \\fIDURATION\\fR \\fICOMMAND\\fR [\\fIARG\\fR]...\n\
         .SH DESCRIPTION\n\
         .nf\n"
    );
    for line in timeout::help("timeout").lines() {
        page.push_str(&roff_line(line));
        page.push('\n');
    }
    page.push_str(
        ".fi\n.SH \"SEE ALSO\"\n\\fBcorral\\fR(1), \\fBcorral\\-run\\fR(1), \\fBtimeout\\fR(1)\n",
    );
    page
}

/// One line of text in a roff no-fill block: backslashes and dashes escaped,
/// a leading `.` or `'` kept from being read as a request.
fn roff_line(line: &str) -> String {
    let escaped = line.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with(['.', '\'']) {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// The completion scripts, named as `clap_complete` names them.
fn completions(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    use clap_complete::Shell;
    [Shell::Bash, Shell::Zsh, Shell::Fish]
        .into_iter()
        .map(|shell| {
            clap_complete::generate_to(shell, &mut Cli::command(), "corral", dir)
                .with_context(|| format!("writing the {shell} completions into {}", dir.display()))
        })
        .collect()
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("corral-generate-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch directory");
        dir
    }

    /// Every visible command has its page (a subcommand added later gets
    /// one without anyone listing it), plus `corral-timeout.1`.
    #[test]
    fn a_page_for_every_visible_command_and_the_timeout_personality() {
        let dir = scratch("man");
        let written = man_pages(&dir).expect("man pages");
        let mut expected = vec!["corral-timeout.1".to_owned()];
        fn walk(command: &clap::Command, prefix: &str, out: &mut Vec<String>) {
            let name = if prefix.is_empty() {
                command.get_name().to_owned()
            } else {
                format!("{prefix}-{}", command.get_name())
            };
            out.push(format!("{name}.1"));
            for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
                walk(sub, &name, out);
            }
        }
        walk(&Cli::command(), "", &mut expected);
        let mut names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        names.sort();
        expected.sort();
        assert_eq!(names, expected);
        for name in [
            "corral.1",
            "corral-run.1",
            "corral-mcp-wrap.1",
            "corral-generate.1",
        ] {
            assert_eq!(
                names.contains(&name.to_owned()),
                name != "corral-generate.1",
                "{name}"
            );
        }
        let run = fs::read_to_string(dir.join("corral-run.1")).expect("corral-run.1");
        assert!(run.contains("\n.TH corral-run 1 "), "{run}");
        assert!(run.contains("kill\\-after"), "{run}");
        let main = fs::read_to_string(dir.join("corral.1")).expect("corral.1");
        assert!(main.contains("TIMEOUT PERSONALITY") && main.contains(VERSION));
        let personality = fs::read_to_string(dir.join("corral-timeout.1")).expect("timeout");
        assert!(personality.contains("How it differs from GNU timeout"));
        assert!(personality.contains("\\-\\-kill\\-after"));
        fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn roff_lines_cannot_become_requests() {
        assert_eq!(roff_line(".SH x"), "\\&.SH x");
        assert_eq!(roff_line("'x"), "\\&'x");
        assert_eq!(roff_line("a\\b -c"), "a\\eb \\-c");
    }

    #[test]
    fn completions_for_three_shells() {
        let dir = scratch("completions");
        let written = completions(&dir).expect("completions");
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["corral.bash", "_corral", "corral.fish"]);
        fs::remove_dir_all(&dir).expect("clean up");
    }
}
