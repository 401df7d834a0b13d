//! The cache folder and the layout of the PyPI toolchain installed in it.
//!
//! The cache folder is `$KWB_CACHE_DIR`, else `$XDG_CACHE_HOME/kwb`, else
//! `$HOME/.cache/kwb`. The pinned packages are installed with
//! `pip install --no-deps --target <cache>/cuda-<pin hash>`, and a marker file is
//! written last, after a successful install, so a folder without it is never used.

use std::fs;
use std::path::{Path, PathBuf};

use crate::pins::{corpus_hash, corpus_list, pin_hash, pin_list, tools_hash, tools_list};
use crate::{Env, Error, Result};

/// The name of the marker file written into a finished install.
pub const MARKER: &str = ".kwb-installed";

/// The cache folder named by the environment.
pub fn cache_dir(env: &Env) -> Result<PathBuf> {
    match (&env.kwb_cache_dir, &env.xdg_cache_home, &env.home) {
        (Some(dir), _, _) => Ok(dir.clone()),
        (None, Some(xdg), _) => Ok(xdg.join("kwb")),
        (None, None, Some(home)) => Ok(home.join(".cache").join("kwb")),
        (None, None, None) => Err(Error::NoCacheDir),
    }
}

/// The install folder of the current pins inside `cache`: `cuda-<pin hash>`.
pub fn toolchain_dir(cache: &Path) -> PathBuf {
    cache.join(format!("cuda-{}", pin_hash()))
}

/// Whether `target` holds a finished install of the current pins.
pub fn is_installed(target: &Path) -> bool {
    is_installed_with(target, &pin_list())
}

/// Whether `target` holds a finished install of the packages `list` names.
pub fn is_installed_with(target: &Path, list: &str) -> bool {
    match fs::read_to_string(target.join(MARKER)) {
        Ok(text) => text == list,
        Err(_) => false,
    }
}

/// Marks `target` as a finished install of the current pins. Call it last.
pub fn write_marker(target: &Path) -> Result<()> {
    write_marker_with(target, &pin_list())
}

/// Marks `target` as a finished install of the packages `list` names. Call it last.
pub fn write_marker_with(target: &Path, list: &str) -> Result<()> {
    let path = target.join(MARKER);
    fs::write(&path, list).map_err(|source| Error::Io { path, source })
}

/// The key of a cache entry made from `parts`: FNV-1a over each part followed by a
/// separator byte no UTF-8 text holds, so ("ab", "c") and ("a", "bc") differ. A cache
/// key, not a security boundary.
pub fn content_key(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain(&[0xff]) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The install folder of the build tools inside `cache`: `tools-<hash>`.
pub fn tools_dir(cache: &Path) -> PathBuf {
    cache.join(format!("tools-{}", tools_hash()))
}

/// The pinned `cmake` of a finished build-tools install in the cache named by `env`.
pub fn cmake(env: &crate::Env) -> Option<PathBuf> {
    let dir = tools_dir(&cache_dir(env).ok()?);
    let cmake = dir.join("cmake").join("data").join("bin").join("cmake");
    (is_installed_with(&dir, &tools_list()) && cmake.is_file()).then_some(cmake)
}

/// The install folder of the third-party corpus inside `cache`: `corpus-<hash>`.
pub fn corpus_dir(cache: &Path) -> PathBuf {
    cache.join(format!("corpus-{}", corpus_hash()))
}

/// The installed corpus in the cache named by `env`: flashinfer-python's `flashinfer/`
/// folder and tvm-ffi's include folder, when a finished install holds them.
pub fn corpus(env: &crate::Env) -> Option<Corpus> {
    let dir = corpus_dir(&cache_dir(env).ok()?);
    let corpus = Corpus {
        flashinfer: dir.join("flashinfer"),
        tvm_ffi_include: dir.join("tvm_ffi").join("include"),
    };
    (is_installed_with(&dir, &corpus_list())
        && corpus.flashinfer.join("data").is_dir()
        && corpus.tvm_ffi_include.is_dir())
    .then_some(corpus)
}

/// Where the corpus's packages are.
#[derive(Clone, Debug)]
pub struct Corpus {
    /// flashinfer-python's package folder (`data/csrc`, `data/include`, …).
    pub flashinfer: PathBuf,
    /// tvm-ffi's C++ headers.
    pub tvm_ffi_include: PathBuf,
}

/// The CUDA home inside a pip `--target` folder: `nvidia/cu13`, holding `bin/nvcc`.
pub fn cuda_home(target: &Path) -> PathBuf {
    target.join("nvidia").join("cu13")
}

/// The CUTLASS source tree shipped by `nvidia-cutlass` inside a pip `--target`
/// folder: `cutlass_library/source`, holding `include/` and `examples/`.
pub fn cutlass_source(target: &Path) -> PathBuf {
    target.join("cutlass_library").join("source")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_keys_separate_their_parts() {
        assert_ne!(content_key(&[b"ab", b"c"]), content_key(&[b"a", b"bc"]));
        assert_eq!(content_key(&[b"x"]), content_key(&[b"x"]));
    }

    fn env(kwb: Option<&str>, xdg: Option<&str>, home: Option<&str>) -> Env {
        Env {
            kwb_cache_dir: kwb.map(PathBuf::from),
            xdg_cache_home: xdg.map(PathBuf::from),
            home: home.map(PathBuf::from),
            ..Env::default()
        }
    }

    #[test]
    fn kwb_cache_dir_wins() {
        let dir = cache_dir(&env(Some("/k"), Some("/x"), Some("/h"))).unwrap();
        assert_eq!(dir, Path::new("/k"));
    }

    #[test]
    fn xdg_cache_home_comes_second() {
        let dir = cache_dir(&env(None, Some("/x"), Some("/h"))).unwrap();
        assert_eq!(dir, Path::new("/x/kwb"));
    }

    #[test]
    fn home_comes_last() {
        let dir = cache_dir(&env(None, None, Some("/h"))).unwrap();
        assert_eq!(dir, Path::new("/h/.cache/kwb"));
    }

    #[test]
    fn no_variables_is_an_error() {
        let err = cache_dir(&Env::default()).unwrap_err();
        assert!(matches!(err, Error::NoCacheDir), "{err:?}");
    }

    #[test]
    fn toolchain_dir_is_named_by_the_pin_hash() {
        let dir = toolchain_dir(Path::new("/c"));
        assert_eq!(dir, Path::new("/c").join(format!("cuda-{}", pin_hash())));
    }

    #[test]
    fn marker_makes_an_install_complete() {
        let temp = tempfile::tempdir().unwrap();
        assert!(!is_installed(temp.path()));
        write_marker(temp.path()).unwrap();
        assert!(is_installed(temp.path()));
    }

    #[test]
    fn marker_of_other_pins_does_not_count() {
        let temp = tempfile::tempdir().unwrap();
        fs::write(temp.path().join(MARKER), "nvidia-cuda-nvcc==12.0.0\n").unwrap();
        assert!(!is_installed(temp.path()));
    }

    #[test]
    fn pip_layout() {
        let target = Path::new("/t");
        assert_eq!(cuda_home(target), Path::new("/t/nvidia/cu13"));
        assert_eq!(
            cutlass_source(target),
            Path::new("/t/cutlass_library/source")
        );
    }
}
