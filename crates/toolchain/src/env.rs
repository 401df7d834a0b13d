//! The environment variables discovery reads, as plain data.

use std::ffi::OsString;
use std::path::PathBuf;

/// A snapshot of the environment variables that [`crate::toolchain`],
/// [`crate::cutlass`] and [`crate::cache::cache_dir`] look at.
///
/// A variable that is set to the empty string counts as unset, as the XDG base
/// directory specification asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    /// `KWB_CUDA_HOME`: the CUDA home to use, ahead of everything else.
    pub kwb_cuda_home: Option<PathBuf>,
    /// `CUDA_HOME`: the conventional CUDA home.
    pub cuda_home: Option<PathBuf>,
    /// `PATH`: searched for `nvcc`.
    pub path: Option<OsString>,
    /// `KWB_CUTLASS_DIR`: a CUTLASS `include` folder holding `cutlass/` and `cute/`.
    pub kwb_cutlass_dir: Option<PathBuf>,
    /// `KWB_CACHE_DIR`: the cache folder, ahead of the XDG default.
    pub kwb_cache_dir: Option<PathBuf>,
    /// `XDG_CACHE_HOME`: its `kwb` subfolder is the cache folder.
    pub xdg_cache_home: Option<PathBuf>,
    /// `HOME`: its `.cache/kwb` subfolder is the last resort.
    pub home: Option<PathBuf>,
}

impl Env {
    /// Reads the variables from this process's environment.
    pub fn from_process() -> Env {
        let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        let dir = |name: &str| var(name).map(PathBuf::from);
        Env {
            kwb_cuda_home: dir("KWB_CUDA_HOME"),
            cuda_home: dir("CUDA_HOME"),
            path: var("PATH"),
            kwb_cutlass_dir: dir("KWB_CUTLASS_DIR"),
            kwb_cache_dir: dir("KWB_CACHE_DIR"),
            xdg_cache_home: dir("XDG_CACHE_HOME"),
            home: dir("HOME"),
        }
    }
}
