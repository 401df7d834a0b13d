//! Snapshot tests of kernel maps: the hand-written fixtures always, and real CUTLASS
//! collectives and CuTe tutorials when the toolchain is set up (`cargo xtask test`
//! sets `KWB_CUTLASS_DIR`). Every snapshot was read by hand: a wrong one is a defect.

use std::path::Path;

use kwb_tests::{compact, cutlass_source, repo_root};

fn map_of(path: &Path) -> kwb_sites::KernelMap {
    let source = std::fs::read_to_string(path).expect("readable fixture");
    let parsed = kwb_syntax::parse(&source);
    kwb_sites::kernel_map(&parsed, &[])
}

#[test]
fn fixtures() {
    insta::glob!(repo_root(), "fixtures/sites/*.cu", |path| {
        let source = std::fs::read_to_string(path).unwrap();
        assert!(
            source.starts_with("//"),
            "{} must start with a comment saying what it tests",
            path.display()
        );
        insta::assert_snapshot!(compact(&map_of(path)));
    });
}

#[test]
fn suite_kernels() {
    insta::glob!(repo_root(), "kernels/*/gemm.cu", |path| {
        insta::assert_snapshot!(compact(&map_of(path)));
    });
}

/// The CUTLASS files of the issue, by path under the package's source folder.
const CUTLASS: &[&str] = &[
    "include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp",
    "include/cutlass/gemm/collective/sm80_mma_multistage.hpp",
    "include/cutlass/gemm/collective/sm100_mma_warpspecialized.hpp",
    "include/cutlass/epilogue/collective/sm90_epilogue_tma_warpspecialized.hpp",
    "include/cutlass/gemm/threadblock/mma_multistage.h",
    "examples/cute/tutorial/sgemm_1.cu",
    "examples/cute/tutorial/sgemm_sm80.cu",
    "examples/cute/tutorial/hopper/wgmma_sm90.cu",
    "examples/cute/tutorial/hopper/wgmma_tma_sm90.cu",
    "examples/cute/tutorial/blackwell/02_mma_tma_sm100.cu",
];

#[test]
fn cutlass() {
    let Some(root) = cutlass_source() else {
        return;
    };
    for relative in CUTLASS {
        let path = root.join(relative);
        let map = map_of(&path);
        assert!(
            map.kernels.iter().all(|k| k.syntax_errors == 0),
            "{relative}: a reported kernel has syntax errors"
        );
        let name = relative.rsplit('/').next().unwrap().replace('.', "_");
        insta::assert_snapshot!(format!("cutlass__{name}"), compact(&map));
    }
}

#[test]
fn cutlass_parse_targets() {
    let Some(root) = cutlass_source() else {
        return;
    };
    let mut kernels_with_errors = Vec::new();
    for (dir, limit) in [("include", 40usize), ("examples", 10)] {
        let mut files = Vec::new();
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(d).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if matches!(
                    path.extension().and_then(|e| e.to_str()),
                    Some("h" | "hpp" | "inl" | "cu" | "cuh" | "cpp")
                ) {
                    files.push(path);
                }
            }
        }
        let mut with_errors = 0;
        for path in &files {
            let source = std::fs::read_to_string(path).unwrap();
            let parsed = kwb_syntax::parse(&source);
            if !parsed.diagnostics.is_empty() {
                with_errors += 1;
            }
            let map = kwb_sites::kernel_map(&parsed, &[]);
            for k in map.kernels.iter().filter(|k| k.syntax_errors > 0) {
                kernels_with_errors.push(format!("{}: {}", path.display(), k.name));
            }
        }
        assert!(
            with_errors <= limit,
            "{dir}: {with_errors} of {} files have ERROR/MISSING nodes (target ≤ {limit})",
            files.len()
        );
    }
    assert!(kernels_with_errors.is_empty(), "{kernels_with_errors:#?}");
}
