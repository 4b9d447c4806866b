//! Checks a binary's self-documentation from its integration tests (feature `test-support`,
//! enabled by the daemons' dev-dependency on this crate): the help, the hidden `completions`
//! and `man` subcommands wired through [`super::Docs`]. Each function runs the binary and
//! panics with the output it got when an expectation fails, as a test assertion does.

// Test support: a failure to run the binary is a failed test, reported with its cause.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

/// Runs `bin` with `args`, asserts it succeeded and returns its standard output.
pub fn run(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{bin} {args:?}: {e}"));
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Asserts that `bin args...` (a `--help`) names every one of `words`.
pub fn help_lists(bin: &str, args: &[&str], words: &[&str]) {
    let help = run(bin, args);
    for w in words {
        assert!(help.contains(w), "{w:?} missing from:\n{help}");
    }
}

/// Asserts that the completion script of every shell names every one of `words`.
pub fn completions_name(bin: &str, words: &[&str]) {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = run(bin, &["completions", shell]);
        for w in words {
            assert!(script.contains(w), "{shell}: {w:?}");
        }
    }
}

/// Asserts that `bin man` prints the page of `name` (section 1) naming every one of `words`
/// (in roff, a `-` is written `\-`).
pub fn man_page_names(bin: &str, name: &str, words: &[&str]) {
    let page = run(bin, &["man"]);
    assert!(page.contains(&format!(".TH {name} 1")), "{page}");
    for w in words {
        assert!(page.contains(w), "{w:?} missing from:\n{page}");
    }
}

/// Runs `bin man --out-dir DIR`, asserts that it listed exactly the files `expected` (by file
/// name, in order) and returns the paths it printed.
pub fn man_pages_written(bin: &str, dir: &Path, expected: &[&str]) -> Vec<String> {
    let listed = run(
        bin,
        &["man", "--out-dir", dir.to_str().expect("UTF-8 path")],
    );
    let files: Vec<String> = listed.lines().map(str::to_string).collect();
    let names: Vec<&str> = files
        .iter()
        .map(|l| l.rsplit('/').next().unwrap_or(l))
        .collect();
    assert_eq!(names, expected, "{listed}");
    files
}
