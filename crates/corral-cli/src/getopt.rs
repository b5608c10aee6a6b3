//! GNU `getopt_long` in its POSIX mode (`"+"`): options end at the first
//! argument that is not one (so `timeout 10 sleep -s` passes `-s` to
//! `sleep`) or after `--`; short options cluster (`-vk1`) and take their
//! value attached or as the next argument (`-sKILL`, `-s KILL`); long ones
//! take it after `=` or as the next argument, and may be abbreviated to any
//! unambiguous prefix (`--sig=INT`, `--kill 1`). The errors are glibc's,
//! word for word, without the program name.

use std::ffi::{OsStr, OsString};

/// One option a program accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opt {
    /// The short form, if any.
    pub short: Option<char>,
    /// The long form without `--`.
    pub long: &'static str,
    /// Whether it takes a value.
    pub value: bool,
}

/// What [`parse`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The options in order, each with its value.
    pub options: Vec<(Opt, Option<OsString>)>,
    /// Whether the options ended with `--` (not passed on).
    pub double_dash: bool,
    /// Everything after the options.
    pub operands: Vec<OsString>,
    /// glibc's message for the option where parsing stopped, if one was
    /// refused (`options` holds those before it, as `getopt` had acted on
    /// them: GNU's `--help -x` prints the help).
    pub error: Option<String>,
}

/// Parses `args` (without the program name) against `table`; an unknown,
/// ambiguous or ill-valued option ends the parse with [`Parsed::error`].
pub fn parse(table: &[Opt], args: &[OsString]) -> Parsed {
    let mut parsed = Parsed::default();
    if let Err(error) = scan(table, args, &mut parsed) {
        parsed.error = Some(error);
    }
    parsed
}

fn scan(table: &[Opt], args: &[OsString], parsed: &mut Parsed) -> Result<(), String> {
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        index += 1;
        let bytes = arg.as_encoded_bytes();
        if bytes == b"--" {
            parsed.double_dash = true;
            break;
        }
        if let Some(long) = bytes.strip_prefix(b"--") {
            let (name, inline) = match long.iter().position(|&b| b == b'=') {
                Some(at) => (&long[..at], Some(&long[at + 1..])),
                None => (long, None),
            };
            let opt = find_long(table, name)?;
            let value = match (opt.value, inline) {
                (true, Some(value)) => Some(os(value)),
                (true, None) => match args.get(index) {
                    Some(next) => {
                        index += 1;
                        Some(next.clone())
                    }
                    None => {
                        return Err(format!("option '--{}' requires an argument", opt.long));
                    }
                },
                (false, Some(_)) => {
                    return Err(format!("option '--{}' doesn't allow an argument", opt.long));
                }
                (false, None) => None,
            };
            parsed.options.push((opt, value));
            continue;
        }
        if bytes.len() < 2 || bytes[0] != b'-' {
            index -= 1;
            break;
        }
        // A cluster of short options.
        let mut at = 1;
        while at < bytes.len() {
            let letter = char::from(bytes[at]);
            at += 1;
            let Some(&opt) = table.iter().find(|o| o.short == Some(letter)) else {
                return Err(format!("invalid option -- '{}'", printable(bytes[at - 1])));
            };
            if !opt.value {
                parsed.options.push((opt, None));
                continue;
            }
            let value = if at < bytes.len() {
                os(&bytes[at..])
            } else {
                match args.get(index) {
                    Some(next) => {
                        index += 1;
                        next.clone()
                    }
                    None => return Err(format!("option requires an argument -- '{letter}'")),
                }
            };
            parsed.options.push((opt, Some(value)));
            break;
        }
    }
    parsed.operands = args[index.min(args.len())..].to_vec();
    Ok(())
}

/// The option named `name` or by an unambiguous prefix of it.
fn find_long(table: &[Opt], name: &[u8]) -> Result<Opt, String> {
    if let Some(&exact) = table.iter().find(|o| o.long.as_bytes() == name) {
        return Ok(exact);
    }
    let matches: Vec<&Opt> = table
        .iter()
        .filter(|o| !name.is_empty() && o.long.as_bytes().starts_with(name))
        .collect();
    let shown = String::from_utf8_lossy(name);
    match matches.as_slice() {
        [one] => Ok(**one),
        [] => Err(format!("unrecognized option '--{shown}'")),
        many => {
            let names: Vec<String> = many.iter().map(|o| format!("'--{}'", o.long)).collect();
            Err(format!(
                "option '--{shown}' is ambiguous; possibilities: {}",
                names.join(" ")
            ))
        }
    }
}

/// Bytes of an argument as an argument again (a sub-slice of an `OsString`
/// that starts after ASCII, so still valid in its encoding).
fn os(bytes: &[u8]) -> OsString {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(bytes).to_owned()
}

/// A byte as glibc shows it in "invalid option -- 'x'".
fn printable(byte: u8) -> String {
    if byte.is_ascii_graphic() {
        char::from(byte).to_string()
    } else {
        format!("\\{byte:03o}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Opt = Opt {
        short: Some('s'),
        long: "signal",
        value: true,
    };
    const V: Opt = Opt {
        short: Some('v'),
        long: "verbose",
        value: false,
    };
    const VERSION: Opt = Opt {
        short: None,
        long: "version",
        value: false,
    };
    const TABLE: &[Opt] = &[S, V, VERSION];

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn ok(list: &[&str]) -> Parsed {
        let parsed = parse(TABLE, &args(list));
        assert_eq!(parsed.error, None, "{list:?}");
        parsed
    }

    fn value(text: &str) -> Option<OsString> {
        Some(text.into())
    }

    #[test]
    fn options_stop_at_the_first_operand() {
        let parsed = ok(&["-v", "10", "sleep", "-s"]);
        assert_eq!(parsed.options, [(V, None)]);
        assert_eq!(parsed.operands, args(&["10", "sleep", "-s"]));
        assert!(!parsed.double_dash);
    }

    #[test]
    fn values_attached_or_separate_and_clusters() {
        let parsed = ok(&[
            "-sKILL",
            "-s",
            "INT",
            "-vsHUP",
            "--signal=TERM",
            "--signal",
            "-1",
        ]);
        let expected = [
            (S, value("KILL")),
            (S, value("INT")),
            (V, None),
            (S, value("HUP")),
            (S, value("TERM")),
            (S, value("-1")),
        ];
        assert_eq!(parsed.options, expected);
        assert!(parsed.operands.is_empty());
    }

    #[test]
    fn abbreviations_and_double_dash() {
        let parsed = ok(&["--sig=KILL", "--verb", "--", "-v", "x"]);
        assert_eq!(parsed.options, [(S, value("KILL")), (V, None)]);
        assert!(parsed.double_dash);
        assert_eq!(parsed.operands, args(&["-v", "x"]));
        // A lone `-` is an operand.
        assert_eq!(ok(&["-", "x"]).operands, args(&["-", "x"]));
    }

    #[test]
    fn errors_are_glibcs() {
        let error = |list: &[&str]| parse(TABLE, &args(list)).error.expect("an error");
        assert_eq!(error(&["-x"]), "invalid option -- 'x'");
        assert_eq!(error(&["--foo"]), "unrecognized option '--foo'");
        assert_eq!(error(&["-s"]), "option requires an argument -- 's'");
        assert_eq!(
            error(&["--signal"]),
            "option '--signal' requires an argument"
        );
        assert_eq!(
            error(&["--verbose=1"]),
            "option '--verbose' doesn't allow an argument"
        );
        assert_eq!(
            error(&["--v"]),
            "option '--v' is ambiguous; possibilities: '--verbose' '--version'"
        );
        assert_eq!(error(&["-v\u{1}"]), "invalid option -- '\\001'");
        // What came before the error was parsed.
        assert_eq!(parse(TABLE, &args(&["-v", "-x"])).options, [(V, None)]);
    }

    #[test]
    fn non_utf8_never_panics() {
        use std::os::unix::ffi::OsStringExt;
        for bytes in [&b"-s\xff"[..], b"--\xff", b"-\xff", b"--sig=\xff", b"\xff"] {
            let _ = parse(TABLE, &[OsString::from_vec(bytes.to_vec())]);
        }
    }
}
