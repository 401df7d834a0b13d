//! `cargo xtask setup`: installs the pinned toolchain into the kwb cache, with the
//! build tools and the third-party corpus (flashinfer-python) kwb is measured on.
//!
//! The pins are installed with `python3 -m pip install --no-deps --target` into a
//! `.partial` sibling of the final folder, marked finished, and only then renamed
//! into place, so an interrupted install never looks complete. When the final
//! folder already holds a finished install of the same pins, nothing is done.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use kwb_toolchain::{CutlassDir, Env, Toolchain, cache, pins};

use crate::{Failure, Result};

/// What `setup` set up, as found by discovery in the cache.
#[derive(Debug)]
pub struct Installed {
    pub toolchain: Toolchain,
    pub cutlass: CutlassDir,
}

/// Installs the pins unless they are installed already, then prints where the
/// toolchain and CUTLASS headers are and the `export` lines that select them.
pub fn run() -> Result<Installed> {
    let cache_dir = cache::cache_dir(&Env::from_process())?;
    let target = cache::toolchain_dir(&cache_dir);
    if cache::is_installed(&target) {
        println!("kwb toolchain already installed in {}", target.display());
    } else {
        let start = Instant::now();
        install(&target, pins::PINS, &pins::pin_list())?;
        let seconds = start.elapsed().as_secs_f64();
        println!(
            "installed kwb toolchain in {} ({seconds:.1} s)",
            target.display()
        );
    }

    let tools = cache::tools_dir(&cache_dir);
    if cache::is_installed_with(&tools, &pins::tools_list()) {
        println!("build tools already installed in {}", tools.display());
    } else {
        install(&tools, pins::BUILD_TOOLS, &pins::tools_list())?;
        println!("installed build tools (cmake) in {}", tools.display());
    }

    let corpus = cache::corpus_dir(&cache_dir);
    if cache::is_installed_with(&corpus, &pins::corpus_list()) {
        println!("corpus already installed in {}", corpus.display());
    } else {
        install(&corpus, pins::CORPUS, &pins::corpus_list())?;
        println!(
            "installed the third-party corpus (flashinfer-python) in {}",
            corpus.display()
        );
    }

    // Discover from the cache alone, so a KWB_CUDA_HOME set elsewhere cannot hide a
    // broken install.
    let only_cache = Env {
        kwb_cache_dir: Some(cache_dir),
        ..Env::default()
    };
    let installed = Installed {
        toolchain: kwb_toolchain::toolchain(&only_cache)?,
        cutlass: kwb_toolchain::cutlass(&only_cache)?,
    };
    let (home, include) = (&installed.toolchain.home, &installed.cutlass.include);
    println!("CUDA home:       {}", home.display());
    println!("CUTLASS include: {}", include.display());
    println!("export KWB_CUDA_HOME={}", shell_quote(home));
    println!("export KWB_CUTLASS_DIR={}", shell_quote(include));
    Ok(installed)
}

/// Installs `pins` into `target` through a `.partial` sibling folder, marked with
/// `list` last.
fn install(target: &Path, pins: &[pins::Pin], list: &str) -> Result {
    let partial = partial_dir(target);
    remove_if_present(&partial)?;
    fs::create_dir_all(&partial).map_err(|e| io_failure("create", &partial, e))?;
    println!("installing {} pinned packages with pip", pins.len());

    let mut pip = Command::new("python3");
    pip.args([
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--disable-pip-version-check",
        "--no-input",
    ])
    .arg("--target")
    .arg(&partial)
    .args(pins.iter().map(pins::Pin::requirement));
    let status = pip
        .status()
        .map_err(|e| Failure(format!("cannot run python3 -m pip: {e}")))?;
    if !status.success() {
        return Err(Failure(format!(
            "pip install failed ({status}); nothing was installed"
        )));
    }

    cache::write_marker_with(&partial, list)?;
    // The final folder has no marker here: whatever it holds is unfinished.
    remove_if_present(target)?;
    fs::rename(&partial, target).map_err(|e| io_failure("rename", &partial, e))
}

/// `<cache>/cuda-<hash>.partial` for `<cache>/cuda-<hash>`.
fn partial_dir(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(".partial");
    target.with_file_name(name)
}

fn remove_if_present(dir: &Path) -> Result {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_failure("remove", dir, e)),
        _ => Ok(()),
    }
}

fn io_failure(action: &str, path: &Path, error: std::io::Error) -> Failure {
    Failure(format!("cannot {action} {}: {error}", path.display()))
}

/// `path` as one POSIX shell word: as it is when that is safe, else single-quoted.
fn shell_quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_dir_is_a_sibling() {
        let partial = partial_dir(Path::new("/c/cuda-0123456789ab"));
        assert_eq!(partial, Path::new("/c/cuda-0123456789ab.partial"));
    }

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(
            shell_quote(Path::new("/home/a/.cache/kwb")),
            "/home/a/.cache/kwb"
        );
        assert_eq!(shell_quote(Path::new("/my dir/x")), "'/my dir/x'");
        assert_eq!(shell_quote(Path::new("/it's")), r"'/it'\''s'");
    }
}
