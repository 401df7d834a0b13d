//! Track A's zero-cost guarantee on the kernel suite: every kernel with a mainloop,
//! instrumented by kwb-instrument and compiled without `KWB_TRACE`, has SASS
//! identical to the original's (cuobjdump, addresses normalized); with `-DKWB_TRACE`
//! it compiles and carries the probes. Every build here is `nvcc -cubin`, the same
//! device pass `nvcc -c` runs, without its host half: the probes are device code,
//! and the runtime's host half (the flush) is compiled by kwb-runtime's and
//! kwb-nvcc's tests and by the demo. Needs nvcc: runs when `KWB_RUN_SLOW_TESTS=1`
//! (as `cargo xtask test` sets it).

use std::path::Path;

use kwb_instrument::{Config, Probes};
use kwb_tests::{cutlass_source, repo_root, whole_sets};
use kwb_toolchain::{CompileFlags, Env};

/// The suite's families whose kernel owns its mainloop (cutlass3x_sm90's lives in
/// CUTLASS's collective, which needs the header overlay).
const FAMILIES: &[&str] = &["mma_sync", "tma_wgmma_sm90", "megakernel", "cute_sm80"];

/// Of [`FAMILIES`], those checked only with the whole sets (`KWB_WHOLE_SETS=1`, `cargo
/// xtask sets`): the CuTe family, three builds of over a minute of a core each, whose
/// construct CI checks on nvidia-cutlass's own CuTe tutorials (tests/tests/unseen.rs).
const WHOLE_SET_ONLY: &[&str] = &["cute_sm80"];

/// SASS without addresses and encodings, one instruction per line.
fn normalized(sass: &str) -> String {
    kwb_toolchain::sass_instructions(sass)
}

/// The megakernel as Track A traces it: one instantiation, a row bound.
fn megakernel_gated() -> Config {
    Config {
        gate: Some("REDUCTION_SIZE == 6144".to_owned()),
        rows: Some("kBatchRows".to_owned()),
        cta: Some([0, 0, 0]),
        ..Config::default()
    }
}

/// A screen of every CTA (`--screen`), whose probes fold into registers.
fn screen() -> Config {
    Config {
        summary: true,
        screen: true,
        ..Config::default()
    }
}

/// Runs every job on its own thread; the errors of those that failed.
fn in_parallel<F>(jobs: Vec<F>) -> Vec<String>
where
    F: FnOnce() -> Result<(), String> + Send,
{
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs.into_iter().map(|job| scope.spawn(job)).collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap().err())
            .collect()
    })
}

fn check_with(family: &str, config: Config, probes: Probes, dir: &Path) -> Result<(), String> {
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).map_err(|e| e.to_string())?;
    let cutlass = kwb_toolchain::cutlass(&env).map_err(|e| e.to_string())?;
    let source = repo_root().join("kernels").join(family).join("gemm.cu");
    let text = std::fs::read_to_string(&source).map_err(|e| e.to_string())?;
    let loads = probes.loads;
    let config = Config {
        probes,
        file_name: format!("kernels/{family}/gemm.cu"),
        ..config
    };
    let family = &format!(
        "{family}{}{}{}",
        if config.gate.is_some() { ".gated" } else { "" },
        if loads { ".loads" } else { "" },
        if config.screen { ".screen" } else { "" }
    );
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
    let object = |name: &str| dir.join(format!("{family}.{name}.cubin"));
    kwb_toolchain::compile_cubin(&toolchain, &source, &flags, &object("orig"))
        .map_err(|e| e.to_string())?;
    kwb_toolchain::compile_cubin(&toolchain, &traced_source, &flags, &object("off"))
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
    kwb_toolchain::compile_cubin(&toolchain, &traced_source, &flags, &object("on"))
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
    let loads = Probes {
        loads: true,
        ..Probes::NONE
    };
    let configs = FAMILIES
        .iter()
        .filter(|family| whole_sets() || !WHOLE_SET_ONLY.contains(family))
        .map(|family| (*family, Config::default(), Probes::default()))
        .chain([
            ("megakernel", megakernel_gated(), Probes::default()),
            // `--probe loads`: the ldmatrix registers of the mma.sync kernel.
            ("mma_sync", Config::default(), loads),
            // `--screen`: the folds declared in every probed function and the helper's
            // passed through the kernel's calls.
            ("mma_sync", screen(), Probes::default()),
            ("tma_wgmma_sm90", screen(), Probes::default()),
        ]);
    let failures = in_parallel(
        configs
            .map(|(family, config, probes)| {
                let dir = dir.path();
                move || check_with(family, config, probes, dir)
            })
            .collect(),
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Every fixture kwb-instrument can instrument compiles with `-DKWB_TRACE`: the probes
/// it emits for each kind of operand, accumulator and store are valid CUDA.
#[test]
fn instrumented_fixtures_compile_traced() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") || cutlass_source().is_none() {
        return;
    }
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let cutlass = kwb_toolchain::cutlass(&env).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut fixtures: Vec<_> = std::fs::read_dir(repo_root().join("fixtures/sites"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    fixtures.sort();
    let failures = in_parallel(
        fixtures
            .iter()
            .map(|path| {
                let (toolchain, cutlass, dir) = (&toolchain, &cutlass, dir.path());
                move || -> Result<(), String> {
                    let name = path.file_stem().unwrap().to_string_lossy().into_owned();
                    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
                    let Ok((instrumented, _)) =
                        kwb_instrument::instrument(&text, &Config::default())
                    else {
                        return Ok(()); // nothing to probe (a host-only fixture)
                    };
                    let traced = dir.join(format!("{name}.cu"));
                    std::fs::write(&traced, instrumented).map_err(|e| e.to_string())?;
                    let flags = CompileFlags {
                        includes: vec![cutlass.include.clone()],
                        defines: vec!["KWB_TRACE".to_owned()],
                        extra: vec!["-O3".to_owned(), "--expt-relaxed-constexpr".to_owned()],
                        ..CompileFlags::default()
                    };
                    // The device pass: the probes are device code.
                    kwb_toolchain::compile_cubin(
                        toolchain,
                        &traced,
                        &flags,
                        &dir.join(format!("{name}.cubin")),
                    )
                    .map_err(|e| format!("{name}: {e}"))
                }
            })
            .collect(),
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The UMMA fixture (sm_100a): its TMEM accumulator probe costs nothing when disabled
/// (identical SASS) and, traced, loads the accumulator's columns from tensor memory
/// (one more `LDTM` path) and appends records. Compile-checked only: no sm_100 GPU.
#[test]
fn umma_tmem_probe_is_free_when_disabled_and_loads_tmem_when_traced() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let source = repo_root().join("fixtures/instrument/umma_tmem_sm100a.cu");
    let text = std::fs::read_to_string(&source).unwrap();
    let (instrumented, plan) = kwb_instrument::instrument(&text, &Config::default()).unwrap();
    assert!(
        plan.probes.iter().any(|p| p.what.contains("tensor memory")),
        "{:?}",
        plan.probes
    );
    let traced = dir.path().join("umma.cu");
    std::fs::write(&traced, instrumented).unwrap();
    let mut flags = CompileFlags {
        arch: "sm_100a".to_owned(),
        extra: vec!["-O3".to_owned()],
        ..CompileFlags::default()
    };
    let object = |name: &str| dir.path().join(format!("umma.{name}.cubin"));
    let sass = |name: &str| normalized(&kwb_toolchain::sass(&toolchain, &object(name)).unwrap());
    kwb_toolchain::compile_cubin(&toolchain, &source, &flags, &object("orig")).unwrap();
    kwb_toolchain::compile_cubin(&toolchain, &traced, &flags, &object("off")).unwrap();
    let (orig, off) = (sass("orig"), sass("off"));
    assert!(orig.contains("UTCHMMA") && orig.contains("LDTM"), "{orig}");
    assert_eq!(orig, off, "SASS differs without KWB_TRACE");
    flags.defines.push("KWB_TRACE".to_owned());
    kwb_toolchain::compile_cubin(&toolchain, &traced, &flags, &object("on")).unwrap();
    let on = sass("on");
    assert!(on.contains("ATOMG"), "the traced build appends no record");
    assert!(on.lines().count() > orig.lines().count());
}

/// A fixture of `fixtures/instrument/` instrumented with the default probes, whose
/// rewrite holds `marker`: identical SASS without `KWB_TRACE`, and a traced build that
/// appends records.
fn fixture_probes_are_free(name: &str, marker: &str) {
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let source = repo_root().join("fixtures/instrument").join(name);
    let text = std::fs::read_to_string(&source).unwrap();
    let (instrumented, _) = kwb_instrument::instrument(&text, &Config::default()).unwrap();
    assert!(instrumented.contains(marker), "the rewrite lacks {marker}");
    let traced = dir.path().join(name);
    std::fs::write(&traced, instrumented).unwrap();
    let mut flags = CompileFlags {
        extra: vec!["-O3".to_owned()],
        ..CompileFlags::default()
    };
    let object = |build: &str| dir.path().join(format!("{name}.{build}.cubin"));
    let sass = |build: &str| normalized(&kwb_toolchain::sass(&toolchain, &object(build)).unwrap());
    kwb_toolchain::compile_cubin(&toolchain, &source, &flags, &object("orig")).unwrap();
    kwb_toolchain::compile_cubin(&toolchain, &traced, &flags, &object("off")).unwrap();
    assert_eq!(sass("orig"), sass("off"), "SASS differs without KWB_TRACE");
    flags.defines.push("KWB_TRACE".to_owned());
    kwb_toolchain::compile_cubin(&toolchain, &traced, &flags, &object("on")).unwrap();
    assert!(
        sass("on").contains("ATOMG"),
        "the traced build appends no record"
    );
}

/// The fp8 m16n8k32 fixture: its operand probes, with the 8-bit fragments'
/// coordinates, cost nothing when disabled (identical SASS) and compile traced.
#[test]
fn fp8_k32_fragment_probes_are_free_when_disabled_and_compile_traced() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    fixture_probes_are_free("mma_sync_fp8_k32.cu", "kwb::MmaM16n8k32A{0}");
}

/// The m16n8k8 fixture (a tf32 and an f16 kernel in one file): each kernel's operand
/// probes carry its own MMA's fragment coordinates; they cost nothing when disabled
/// (identical SASS) and compile traced.
#[test]
fn k8_fragment_probes_per_kernel_are_free_when_disabled_and_compile_traced() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    fixture_probes_are_free("mma_sync_k8_tf32_f16.cu", "kwb::MmaM16n8k8Tf32A{0}");
}

/// A generated kernel that declares the <stdint.h> names itself (`uint64_t` as
/// `unsigned long long`): instrumented, it compiles without KWB_TRACE (identical SASS)
/// and with it, where kwb's runtime (which includes <cstdint>) once made it a
/// redeclaration of another type.
#[test]
fn own_stdint_typedefs_compile_instrumented_both_ways() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    fixture_probes_are_free(
        "own_stdint_typedefs.cu",
        "#define uint64_t kwb_own_uint64_t",
    );
}

/// The swap-AB fixture: its operand probes are placed per branch, where the two
/// branches of one statement pass a tile in different slots, and braced there; they
/// cost nothing when disabled (identical SASS) and compile traced.
#[test]
fn per_branch_operand_probes_are_free_when_disabled_and_compile_traced() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    fixture_probes_are_free("wgmma_swap_ab_branch.cu", "else /*kwb:{*/{ /*}:kwb*/");
}

/// The packed-bf16 epilogue fixture: the `uint2` it stores is read as the output's
/// element type; free when disabled (identical SASS) and compiled traced.
#[test]
fn packed_epilogue_probes_are_free_when_disabled_and_compile_traced() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    fixture_probes_are_free("packed_bf16_store.cu", "kwb::probe_as<__nv_bfloat16>");
}

/// `kwb-instrument --insitu`: the rewritten launches are host code only, so the
/// device code's SASS is the original's; the whole translation unit (host half
/// included, `nvcc -c`) compiles with kwb_insitu.cuh inlined.
#[test]
fn insitu_launches_leave_the_device_code_and_compile_whole() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).expect("nvcc");
    let dir = tempfile::tempdir().unwrap();
    let source = repo_root().join("fixtures/insitu/launch_shapes.cu");
    let text = std::fs::read_to_string(&source).unwrap();
    let out = kwb_instrument::insitu::insitu(&text, "scale_kernel", "launch_shapes.cu").unwrap();
    let rewritten = dir.path().join("launch_shapes.cu");
    std::fs::write(&rewritten, &out.text).unwrap();
    let flags = CompileFlags::default();
    let cubin = |from: &Path, name: &str| {
        let object = dir.path().join(name);
        kwb_toolchain::compile_cubin(&toolchain, from, &flags, &object).unwrap();
        normalized(&kwb_toolchain::sass(&toolchain, &object).unwrap())
    };
    let (orig, insitu) = (
        cubin(&source, "orig.cubin"),
        cubin(&rewritten, "insitu.cubin"),
    );
    assert!(!orig.is_empty());
    assert_eq!(orig, insitu, "the in-situ rewrite changed device code");
    kwb_toolchain::compile_object(&toolchain, &rewritten, &flags, &dir.path().join("whole.o"))
        .expect("the rewritten translation unit compiles, host half included");
}
