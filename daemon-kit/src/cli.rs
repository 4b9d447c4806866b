//! What every binary of the project (`cp-switch`, `rp-agent`, `testbed`, `cnm-dump`) does the
//! same way at its edge: logging through `tracing` filtered by `RUST_LOG`, and shell
//! completions and man pages generated from its clap definition.
//!
//! # Logging
//!
//! [`init_logging`] installs a `tracing` subscriber writing to standard error, filtered by
//! `RUST_LOG` (`info` when unset or invalid), coloured only on a terminal. Diagnostics go
//! through `tracing::{info, warn, error}`; a message addressed to the user who typed the
//! command (an invalid argument, a file that cannot be read) stays a plain line on standard
//! error, so it is printed whatever the filter says.
//!
//! # Completions and man pages
//!
//! Each binary has a hidden `completions SHELL` and `man [--out-dir DIR]` entry (a subcommand,
//! or a flag for `cnm-dump`, which has none). [`completions`] returns the script for
//! bash, zsh, fish, elvish or PowerShell to standard output (`clap_complete`); [`man_pages`]
//! writes one roff page per visible command into a directory (`clap_mangen`): the binary's own page
//! (`cp-switch.1`) and one per subcommand, nested ones joined by dashes (`testbed-bench-qcn.1`),
//! as git names its pages; [`man_page`] is the binary's own page alone, for standard output.
//! [`Docs`] is the pair of hidden subcommands itself: a daemon flattens it into its subcommand
//! enum and hands the match arm to [`Docs::run`], so both daemons wire them one way.
//!
//! ```text
//! cp-switch completions bash > /etc/bash_completion.d/cp-switch
//! testbed man --out-dir /usr/local/share/man/man1
//! ```

use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use clap_complete::Shell;

use crate::process::{out, outln};

#[cfg(feature = "test-support")]
pub mod testing;

/// The hidden `completions SHELL` and `man [--out-dir DIR]` subcommands of a daemon; flatten it
/// into the binary's subcommand enum (`#[command(flatten)] Docs(daemon_kit::cli::Docs)`).
#[derive(Debug, clap::Subcommand)]
pub enum Docs {
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(hide = true)]
    Completions {
        /// The shell.
        shell: Shell,
    },
    /// Print the man page, or write one page per command into a directory.
    #[command(hide = true)]
    Man {
        /// Write NAME.1 and one NAME-SUBCOMMAND.1 per visible subcommand there and print
        /// their paths.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

impl Docs {
    /// Prints the completion script or the man page of `cmd` (the binary's whole clap
    /// definition, `Cli::command()`), or writes the pages into the directory and prints their
    /// paths one a line. A page that cannot be written ends the process with status 1 and
    /// `NAME man: ERROR` on standard error.
    pub fn run(self, cmd: clap::Command) {
        let name = cmd.get_name().to_string();
        if let Err(e) = self.print(cmd) {
            eprintln!("{name} man: {e}");
            std::process::exit(1);
        }
    }

    /// [`Docs::run`] without the exit: what it prints, or why a page could not be written.
    pub fn print(self, cmd: clap::Command) -> io::Result<()> {
        match self {
            Docs::Completions { shell } => out(&completions(cmd, shell)),
            Docs::Man { out_dir: None } => out(&man_page(cmd)?),
            Docs::Man { out_dir: Some(d) } => {
                for f in man_pages(cmd, &d)? {
                    outln(&f.display().to_string());
                }
            }
        }
        Ok(())
    }
}

/// Installs the `tracing` subscriber every binary uses (see the module documentation). A
/// second call (a test that runs `main` twice) is ignored.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .with_env_filter(filter)
        .try_init();
}

/// The completion script of `cmd` for `shell` (built in memory, so a closed output pipe is the
/// caller's to handle, never a panic).
pub fn completions(mut cmd: clap::Command, shell: Shell) -> String {
    let name = cmd.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The binary's own man page (roff).
pub fn man_page(cmd: clap::Command) -> io::Result<String> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Renders the man pages of `cmd` and its visible subcommands into `dir` (created if needed)
/// and returns the files written, in order.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut cmd = cmd;
    cmd.build();
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    write_pages(&cmd, cmd.get_name(), dir, &mut written)?;
    Ok(written)
}

/// Writes `cmd`'s page as `NAME.1` in `dir`, then its visible subcommands' pages.
fn write_pages(
    cmd: &clap::Command,
    name: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> io::Result<()> {
    let page = cmd.clone().name(name.to_string());
    let path = dir.join(format!("{name}.1"));
    let mut f = io::BufWriter::new(std::fs::File::create(&path)?);
    clap_mangen::Man::new(page).render(&mut f)?;
    f.flush()?;
    written.push(path);
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, Command};

    fn tool() -> Command {
        Command::new("tool")
            .about("A tool")
            .arg(Arg::new("verbose").long("verbose").num_args(0))
            .subcommand(
                Command::new("ctl")
                    .about("Talk to it")
                    .subcommand(Command::new("show").about("Show things")),
            )
            .subcommand(Command::new("secret").hide(true))
    }

    #[test]
    fn completions_name_every_subcommand_and_flag() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let s = completions(tool(), shell);
            assert!(s.contains("ctl"), "{shell}: {s}");
            assert!(s.contains("verbose"), "{shell}");
        }
    }

    #[test]
    fn man_pages_one_per_visible_command() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let files = man_pages(tool(), dir.path()).expect("pages");
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["tool.1", "tool-ctl.1", "tool-ctl-show.1"]);
        let top = std::fs::read_to_string(&files[0]).unwrap();
        assert!(top.starts_with(".ie") || top.contains(".TH tool"), "{top}");
        assert!(top.contains("ctl"));
        let show = std::fs::read_to_string(&files[2]).unwrap();
        assert!(show.contains("Show things"));
        assert!(man_page(tool()).unwrap().contains(".TH tool"));
    }
}
