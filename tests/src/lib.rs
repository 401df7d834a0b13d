//! Shared helpers of the end-to-end and snapshot tests: a compact, reviewable text
//! form of a kernel map, and where the CUTLASS headers are.
//! [`fuzz_props`] holds the fuzz targets' properties, shared with `fuzz/`.

pub mod fuzz_props;

use std::fmt::Write;
use std::path::PathBuf;

use kwb_sites::KernelMap;

/// One line per kernel and per site: `kind line:col confidence | text | note`.
pub fn compact(map: &KernelMap) -> String {
    let mut out = String::new();
    for kernel in &map.kernels {
        let params: Vec<String> = kernel
            .template_params
            .iter()
            .map(|p| format!("{}:{}", p.kind, p.name))
            .collect();
        let _ = writeln!(
            out,
            "kernel {} ({}) lines {}-{} [{}]{}",
            kernel.name,
            kernel.role,
            kernel.line,
            kernel.end_line,
            params.join(", "),
            if kernel.syntax_errors > 0 {
                format!(" SYNTAX ERRORS: {}", kernel.syntax_errors)
            } else {
                String::new()
            }
        );
        for site in &kernel.sites {
            let text: String = site.text.chars().take(90).collect();
            let _ = writeln!(
                out,
                "  {:<14} {}:{} {:?} | {} | {}",
                site.kind.name(),
                site.line,
                site.column,
                site.confidence,
                text,
                site.note.as_deref().unwrap_or("-")
            );
        }
    }
    out
}

/// The CUTLASS source folder (holding `include/` and `examples/`) when the tests run
/// with the toolchain set up (`KWB_CUTLASS_DIR` names its `include/`).
pub fn cutlass_source() -> Option<PathBuf> {
    let include = PathBuf::from(std::env::var_os("KWB_CUTLASS_DIR")?);
    include.parent().map(PathBuf::from)
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository root")
        .to_owned()
}
