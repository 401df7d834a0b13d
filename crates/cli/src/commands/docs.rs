//! `kwb completions SHELL [--bin NAME]` and `kwb man --out DIR`: shell completions
//! and man pages generated from the same clap definitions the binaries parse with,
//! so they cannot drift from the options.

use std::path::PathBuf;

use miette::Report;

use crate::binaries::{self, Binary};
use crate::error::CliError;
use crate::{exit, render};

#[derive(clap::Args)]
pub struct CompletionArgs {
    /// The shell
    shell: clap_complete::Shell,
    /// The binary the script completes
    #[arg(long = "bin", value_enum, default_value = "kwb")]
    binary: Binary,
}

#[derive(clap::Args)]
pub struct ManArgs {
    /// The folder to write the pages into (section 1, one file per command; created
    /// if missing)
    #[arg(long, short = 'o', value_name = "DIR")]
    out: PathBuf,
}

pub fn completions(args: &CompletionArgs) -> i32 {
    let mut command = binaries::command(args.binary);
    let name = command.get_name().to_owned();
    clap_complete::generate(args.shell, &mut command, name, &mut std::io::stdout());
    exit::OK
}

pub fn man(args: &ManArgs) -> i32 {
    let mut pages: Vec<(String, Vec<u8>)> = Vec::new();
    for command in binaries::all() {
        let name = command.get_name().to_owned();
        if let Err(e) = page(&name, &command, &mut pages) {
            render::error(Report::new(CliError::Unwritable {
                path: args.out.join(format!("{name}.1")),
                source: e,
            }));
            return exit::INTERNAL;
        }
    }
    if let Err(source) = std::fs::create_dir_all(&args.out) {
        render::error(Report::new(CliError::Unwritable {
            path: args.out.clone(),
            source,
        }));
        return exit::INPUT;
    }
    // Every page or none.
    let files: Vec<_> = pages
        .iter()
        .map(|(file, bytes)| (args.out.join(file), bytes))
        .collect();
    if let Err((path, source)) = crate::output::write_all_atomically(&files) {
        render::error(Report::new(CliError::Unwritable { path, source }));
        return exit::INPUT;
    }
    let names: Vec<&str> = pages.iter().map(|(f, _)| f.as_str()).collect();
    println!(
        "wrote {} man pages in {}: {}",
        pages.len(),
        args.out.display(),
        names.join(", ")
    );
    exit::OK
}

/// The page of `command` named `name`, then one per visible subcommand
/// (`kwb-run.1`), depth first.
fn page(
    name: &str,
    command: &clap::Command,
    pages: &mut Vec<(String, Vec<u8>)>,
) -> std::io::Result<()> {
    let command = command.clone().name(name.to_owned());
    let mut bytes = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut bytes)?;
    pages.push((format!("{name}.1"), bytes));
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        page(&format!("{name}-{}", sub.get_name()), sub, pages)?;
    }
    Ok(())
}
