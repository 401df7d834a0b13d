use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use super::*;

/// Builds a fake CUDA home under `root/name` whose `bin/` holds empty files named
/// `tools`. Discovery only looks at paths, so empty files are enough.
fn fake_home(root: &Path, name: &str, tools: &[&str]) -> PathBuf {
    let home = root.join(name);
    fs::create_dir_all(home.join("bin")).unwrap();
    for tool in tools {
        fs::write(home.join("bin").join(exe(tool)), "").unwrap();
    }
    home
}

const ALL_TOOLS: &[&str] = &["nvcc", "cuobjdump", "nvdisasm"];

/// Builds a finished fake pip install in the cache folder `root/cache`.
fn fake_cache(root: &Path) -> PathBuf {
    let cache = root.join("cache");
    let target = cache::toolchain_dir(&cache);
    fake_home(&target.join("nvidia"), "cu13", ALL_TOOLS);
    fake_cutlass(&cache::cutlass_source(&target));
    cache::write_marker(&target).unwrap();
    cache
}

/// Builds a fake CUTLASS source tree with `include/cutlass`, `include/cute` and
/// `examples`; returns its `include`.
fn fake_cutlass(tree: &Path) -> PathBuf {
    for dir in ["include/cutlass", "include/cute", "examples"] {
        fs::create_dir_all(tree.join(dir)).unwrap();
    }
    tree.join("include")
}

fn path_of(dirs: &[PathBuf]) -> Option<std::ffi::OsString> {
    Some(std::env::join_paths(dirs).unwrap())
}

/// Everything set, each variable naming a different valid home.
fn full_env(temp: &TempDir) -> Env {
    let root = temp.path();
    Env {
        kwb_cuda_home: Some(fake_home(root, "kwb", ALL_TOOLS)),
        cuda_home: Some(fake_home(root, "cuda", ALL_TOOLS)),
        path: path_of(&[fake_home(root, "onpath", ALL_TOOLS).join("bin")]),
        kwb_cache_dir: Some(fake_cache(root)),
        ..Env::default()
    }
}

#[test]
fn kwb_cuda_home_comes_first() {
    let temp = tempfile::tempdir().unwrap();
    let env = full_env(&temp);
    let found = toolchain(&env).unwrap();
    assert_eq!(found.source, Discovery::KwbCudaHome);
    assert_eq!(found.home, temp.path().join("kwb"));
    assert_eq!(found.nvcc, temp.path().join("kwb/bin").join(exe("nvcc")));
    assert_eq!(
        found.cuobjdump,
        temp.path().join("kwb/bin").join(exe("cuobjdump"))
    );
    assert_eq!(
        found.nvdisasm,
        Some(temp.path().join("kwb/bin").join(exe("nvdisasm")))
    );
    assert_eq!(found.bin(), temp.path().join("kwb/bin"));
}

#[test]
fn cuda_home_comes_second() {
    let temp = tempfile::tempdir().unwrap();
    let env = Env {
        kwb_cuda_home: None,
        ..full_env(&temp)
    };
    let found = toolchain(&env).unwrap();
    assert_eq!(found.source, Discovery::CudaHome);
    assert_eq!(found.home, temp.path().join("cuda"));
}

#[test]
fn nvcc_on_path_comes_third() {
    let temp = tempfile::tempdir().unwrap();
    let env = Env {
        kwb_cuda_home: None,
        cuda_home: None,
        ..full_env(&temp)
    };
    let found = toolchain(&env).unwrap();
    assert_eq!(found.source, Discovery::Path);
    assert_eq!(
        found.home,
        temp.path().join("onpath").canonicalize().unwrap()
    );
}

#[test]
fn first_nvcc_on_path_wins() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let empty = root.join("empty");
    fs::create_dir(&empty).unwrap();
    let first = fake_home(root, "first", ALL_TOOLS).join("bin");
    let second = fake_home(root, "second", ALL_TOOLS).join("bin");
    let env = Env {
        path: path_of(&[empty, first, second]),
        ..Env::default()
    };
    let found = toolchain(&env).unwrap();
    assert_eq!(found.home, root.join("first").canonicalize().unwrap());
}

#[cfg(unix)]
#[test]
fn nvcc_on_path_follows_symlinks() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let real = fake_home(root, "real", ALL_TOOLS);
    let usr_bin = root.join("usr/bin");
    fs::create_dir_all(&usr_bin).unwrap();
    std::os::unix::fs::symlink(real.join("bin/nvcc"), usr_bin.join("nvcc")).unwrap();
    let env = Env {
        path: path_of(&[usr_bin]),
        ..Env::default()
    };
    let found = toolchain(&env).unwrap();
    assert_eq!(found.home, real.canonicalize().unwrap());
    assert_eq!(
        found.cuobjdump,
        real.canonicalize().unwrap().join("bin/cuobjdump")
    );
}

#[test]
fn cache_comes_last() {
    let temp = tempfile::tempdir().unwrap();
    let cache = fake_cache(temp.path());
    let env = Env {
        kwb_cache_dir: Some(cache.clone()),
        ..Env::default()
    };
    let found = toolchain(&env).unwrap();
    assert_eq!(found.source, Discovery::Cache);
    assert_eq!(found.home, cache::cuda_home(&cache::toolchain_dir(&cache)));
}

#[test]
fn cache_under_xdg_cache_home() {
    let temp = tempfile::tempdir().unwrap();
    let cache = fake_cache(temp.path());
    fs::rename(&cache, temp.path().join("kwb")).unwrap();
    let env = Env {
        xdg_cache_home: Some(temp.path().to_owned()),
        ..Env::default()
    };
    assert_eq!(toolchain(&env).unwrap().source, Discovery::Cache);
}

#[test]
fn unfinished_install_is_not_used() {
    let temp = tempfile::tempdir().unwrap();
    let cache = fake_cache(temp.path());
    fs::remove_file(cache::toolchain_dir(&cache).join(cache::MARKER)).unwrap();
    let env = Env {
        kwb_cache_dir: Some(cache),
        ..Env::default()
    };
    assert!(matches!(toolchain(&env), Err(Error::NvccNotFound)));
    assert!(matches!(cutlass(&env), Err(Error::CutlassNotFound)));
}

#[test]
fn nothing_found() {
    let temp = tempfile::tempdir().unwrap();
    let env = Env {
        path: path_of(&[temp.path().to_owned()]),
        kwb_cache_dir: Some(temp.path().join("cache")),
        ..Env::default()
    };
    assert!(matches!(toolchain(&env), Err(Error::NvccNotFound)));
    assert!(matches!(
        toolchain(&Env::default()),
        Err(Error::NvccNotFound)
    ));
}

#[test]
fn bad_kwb_cuda_home_is_an_error_not_skipped() {
    let temp = tempfile::tempdir().unwrap();
    let bad = temp.path().join("missing");
    let env = Env {
        kwb_cuda_home: Some(bad.clone()),
        ..full_env(&temp)
    };
    match toolchain(&env) {
        Err(Error::BadCudaHome { var, home }) => {
            assert_eq!(var, "KWB_CUDA_HOME");
            assert_eq!(home, bad);
        }
        other => panic!("expected BadCudaHome, got {other:?}"),
    }
}

#[test]
fn bad_cuda_home_is_an_error_not_skipped() {
    let temp = tempfile::tempdir().unwrap();
    let bad = fake_home(temp.path(), "nonvcc", &["cuobjdump"]);
    let env = Env {
        kwb_cuda_home: None,
        cuda_home: Some(bad),
        ..full_env(&temp)
    };
    assert!(matches!(
        toolchain(&env),
        Err(Error::BadCudaHome {
            var: "CUDA_HOME",
            ..
        })
    ));
}

#[test]
fn missing_cuobjdump_is_an_error() {
    let temp = tempfile::tempdir().unwrap();
    let home = fake_home(temp.path(), "cuda", &["nvcc"]);
    let env = Env {
        kwb_cuda_home: Some(home.clone()),
        ..Env::default()
    };
    match toolchain(&env) {
        Err(Error::CuobjdumpNotFound { bin }) => assert_eq!(bin, home.join("bin")),
        other => panic!("expected CuobjdumpNotFound, got {other:?}"),
    }
}

#[test]
fn nvdisasm_is_optional() {
    let temp = tempfile::tempdir().unwrap();
    let home = fake_home(temp.path(), "cuda", &["nvcc", "cuobjdump"]);
    let env = Env {
        kwb_cuda_home: Some(home),
        ..Env::default()
    };
    assert_eq!(toolchain(&env).unwrap().nvdisasm, None);
}

#[test]
fn kwb_cutlass_dir_comes_first() {
    let temp = tempfile::tempdir().unwrap();
    let tree = temp.path().join("cutlass");
    let include = fake_cutlass(&tree);
    fs::create_dir_all(tree.join("tools/util/include")).unwrap();
    let env = Env {
        kwb_cutlass_dir: Some(include.clone()),
        kwb_cache_dir: Some(fake_cache(temp.path())),
        ..Env::default()
    };
    let found = cutlass(&env).unwrap();
    assert_eq!(
        found,
        CutlassDir {
            include,
            examples: Some(tree.join("examples")),
            util_include: Some(tree.join("tools/util/include")),
            source: CutlassSource::KwbCutlassDir,
        }
    );
}

#[test]
fn cutlass_without_examples() {
    let temp = tempfile::tempdir().unwrap();
    let include = temp.path().join("include");
    fs::create_dir_all(include.join("cutlass")).unwrap();
    fs::create_dir_all(include.join("cute")).unwrap();
    let env = Env {
        kwb_cutlass_dir: Some(include),
        ..Env::default()
    };
    let found = cutlass(&env).unwrap();
    assert_eq!((found.examples, found.util_include), (None, None));
}

#[test]
fn bad_kwb_cutlass_dir_is_an_error_not_skipped() {
    let temp = tempfile::tempdir().unwrap();
    let tree = temp.path().join("cutlass");
    fake_cutlass(&tree);
    let env = Env {
        // The tree, not its `include`: a common mistake.
        kwb_cutlass_dir: Some(tree.clone()),
        kwb_cache_dir: Some(fake_cache(temp.path())),
        ..Env::default()
    };
    match cutlass(&env) {
        Err(Error::BadCutlassDir { dir }) => assert_eq!(dir, tree),
        other => panic!("expected BadCutlassDir, got {other:?}"),
    }
}

#[test]
fn cutlass_from_the_cache() {
    let temp = tempfile::tempdir().unwrap();
    let cache = fake_cache(temp.path());
    let env = Env {
        kwb_cache_dir: Some(cache.clone()),
        ..Env::default()
    };
    let found = cutlass(&env).unwrap();
    let tree = cache::cutlass_source(&cache::toolchain_dir(&cache));
    assert_eq!(found.source, CutlassSource::Cache);
    assert_eq!(found.include, tree.join("include"));
    assert_eq!(found.examples, Some(tree.join("examples")));
    assert_eq!(found.util_include, None);
}

#[test]
fn no_cutlass_anywhere() {
    let temp = tempfile::tempdir().unwrap();
    let env = Env {
        kwb_cache_dir: Some(temp.path().to_owned()),
        ..Env::default()
    };
    assert!(matches!(cutlass(&env), Err(Error::CutlassNotFound)));
}
