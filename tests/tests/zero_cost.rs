//! Track A's zero-cost guarantee on the kernel suite: every kernel with a mainloop,
//! instrumented by kwb-instrument and compiled without `KWB_TRACE`, has SASS
//! identical to the original's (cuobjdump, addresses normalized); with `-DKWB_TRACE`
//! it compiles and carries the probes. Needs nvcc: runs when `KWB_RUN_SLOW_TESTS=1`
//! (as `cargo xtask test` sets it).

use std::path::Path;

use kwb_instrument::{Config, Probes};
use kwb_tests::{cutlass_source, repo_root};
use kwb_toolchain::{CompileFlags, Env};

/// The suite's families whose kernel owns its mainloop (cutlass3x_sm90's lives in
/// CUTLASS's collective, which needs the header overlay).
const FAMILIES: &[&str] = &["mma_sync", "tma_wgmma_sm90", "megakernel", "cute_sm80"];

/// SASS without addresses and encodings, one instruction per line.
fn normalized(sass: &str) -> String {
    sass.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line.strip_prefix("/*")?;
            let (address, instruction) = rest.split_once("*/")?;
            address
                .chars()
                .all(|c| c.is_ascii_hexdigit())
                .then(|| instruction.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn check(family: &str, dir: &Path) -> Result<(), String> {
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).map_err(|e| e.to_string())?;
    let cutlass = kwb_toolchain::cutlass(&env).map_err(|e| e.to_string())?;
    let source = repo_root().join("kernels").join(family).join("gemm.cu");
    let text = std::fs::read_to_string(&source).map_err(|e| e.to_string())?;
    let config = Config {
        kernel: None,
        gate: None,
        probes: Probes::default(),
        file_name: format!("kernels/{family}/gemm.cu"),
        ..Config::default()
    };
    let (instrumented, plan) =
        kwb_instrument::instrument(&text, &config).map_err(|e| e.to_string())?;
    assert!(!plan.probes.is_empty(), "{family}: no probe planned");
    let traced_source = dir.join(format!("{family}.cu"));
    std::fs::write(&traced_source, &instrumented).map_err(|e| e.to_string())?;
    let mut flags = CompileFlags {
        includes: vec![repo_root().join("kernels/common"), cutlass.include.clone()],
        extra: vec!["-O3".to_owned(), "--expt-relaxed-constexpr".to_owned()],
        ..CompileFlags::default()
    };
    let object = |name: &str| dir.join(format!("{family}.{name}.o"));
    kwb_toolchain::compile_object(&toolchain, &source, &flags, &object("orig"))
        .map_err(|e| e.to_string())?;
    kwb_toolchain::compile_object(&toolchain, &traced_source, &flags, &object("off"))
        .map_err(|e| e.to_string())?;
    let sass = |name: &str| {
        kwb_toolchain::sass(&toolchain, &object(name))
            .map(|s| normalized(&s))
            .map_err(|e| e.to_string())
    };
    let (orig, off) = (sass("orig")?, sass("off")?);
    if orig.is_empty() || orig != off {
        return Err(format!(
            "{family}: SASS differs without KWB_TRACE ({} vs {} instructions)",
            orig.lines().count(),
            off.lines().count()
        ));
    }
    flags.defines.push("KWB_TRACE".to_owned());
    kwb_toolchain::compile_object(&toolchain, &traced_source, &flags, &object("on"))
        .map_err(|e| e.to_string())?;
    let on = sass("on")?;
    if on.lines().count() <= orig.lines().count() {
        return Err(format!("{family}: the traced build carries no probe code"));
    }
    Ok(())
}

#[test]
fn instrumented_kernels_compile_to_identical_sass_without_kwb_trace() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") || cutlass_source().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = FAMILIES
            .iter()
            .map(|family| scope.spawn(|| check(family, dir.path())))
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap().err())
            .collect()
    });
    assert!(failures.is_empty(), "{failures:#?}");
}
