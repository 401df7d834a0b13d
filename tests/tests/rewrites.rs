//! Snapshot tests of kwb-instrument's rewrites: the unified diff of every suite kernel
//! and fixture that has a consumer mainloop, against its original, without the
//! inlined runtime header (kwb-runtime's own text) and with the probe table. Every
//! snapshot was read by hand: a probe in the wrong place is a defect.

use std::path::Path;

use kwb_instrument::{Config, instrument};
use kwb_tests::repo_root;

/// The rewrite of `path` with `config`, as a diff, or why there is none.
fn rewrite(path: &Path, config: &Config) -> String {
    let source = std::fs::read_to_string(path).expect("readable source");
    let config = Config {
        file_name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        ..config.clone()
    };
    let (out, plan) = match instrument(&source, &config) {
        Ok(r) => r,
        Err(e) => return format!("not instrumented: {e}\n"),
    };
    // The header ends at the `#line 1` directive that restores the user's numbering.
    let header_end = out
        .find("#line 1 \"")
        .expect("the header ends with #line 1");
    let shown = format!("<runtime header>\n{}", &out[header_end..]);
    let diff = similar::TextDiff::from_lines(&source, &shown);
    let mut text = diff.unified_diff().context_radius(1).to_string();
    for p in &plan.probes {
        text.push_str(&format!(
            "probe {} in {} (line {}): {}\n",
            p.id, p.kernel, p.line, p.what
        ));
    }
    for note in &plan.notes {
        text.push_str(&format!("note: {note}\n"));
    }
    text
}

#[test]
fn suite_kernels() {
    insta::glob!(repo_root(), "kernels/*/gemm.cu", |path| {
        insta::assert_snapshot!(rewrite(path, &Config::default()));
    });
}

#[test]
fn fixtures() {
    insta::glob!(repo_root(), "fixtures/sites/*.cu", |path| {
        insta::assert_snapshot!(rewrite(path, &Config::default()));
    });
}

/// Instrumenter fixtures outside the kernel map's set: the UMMA kernel whose
/// accumulator is in tensor memory (sm_100a).
#[test]
fn instrument_fixtures() {
    insta::glob!(repo_root(), "fixtures/instrument/*.cu", |path| {
        insta::assert_snapshot!(rewrite(path, &Config::default()));
    });
}

/// `--probe loads` on the mma.sync kernel: the registers each ldmatrix filled.
#[test]
fn mma_sync_loads() {
    let config = Config {
        probes: kwb_instrument::Probes {
            loads: true,
            ..kwb_instrument::Probes::NONE
        },
        ..Config::default()
    };
    insta::assert_snapshot!(rewrite(
        &repo_root().join("kernels/mma_sync/gemm.cu"),
        &config
    ));
}

/// The megakernel as Track A traces it: one instantiation, live rows only.
#[test]
fn megakernel_gated_with_a_row_bound() {
    let path = repo_root().join("kernels/megakernel/gemm.cu");
    let config = Config {
        gate: Some("REDUCTION_SIZE == 6144".to_owned()),
        rows: Some("kBatchRows".to_owned()),
        cta: Some([0, 0, 0]),
        ..Config::default()
    };
    insta::assert_snapshot!(rewrite(&path, &config));
}

/// CUTLASS collectives and kernels as `--overlay` instruments them (staged mainloops
/// only, the gate only where it reaches; a kernel's tile contexts), when the CUTLASS
/// headers are set up.
#[test]
fn cutlass_collectives_through_the_overlay() {
    let Some(root) = kwb_tests::cutlass_source() else {
        return;
    };
    for relative in [
        "include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp",
        "include/cutlass/gemm/collective/sm80_mma_multistage.hpp",
        // Kernels that hand the collective its work tile: tile contexts only.
        "include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp",
        "include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_pingpong.hpp",
    ] {
        let config = Config {
            staged_only: true,
            lenient_gate: true,
            ..Config::default()
        };
        let name = relative.rsplit('/').next().unwrap().replace('.', "_");
        insta::assert_snapshot!(
            format!("cutlass__{name}"),
            rewrite(&root.join(relative), &config)
        );
    }
}

/// `kwb-instrument --insitu KERNEL`: each launch statement of the kernel also goes
/// through `kwb_insitu::launch` (the header's text left out, as above), and strip
/// gives the original back.
fn insitu(path: &Path, kernel: &str) -> String {
    let source = std::fs::read_to_string(path).expect("readable source");
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let out = match kwb_instrument::insitu::insitu(&source, kernel, &name) {
        Ok(r) => r,
        Err(e) => return format!("not rewritten: {e}\n"),
    };
    assert_eq!(kwb_instrument::strip(&out.text).unwrap(), source);
    let header_end = out
        .text
        .find("#line 1 \"")
        .expect("the header ends with #line 1");
    let shown = format!("<in-situ header>\n{}", &out.text[header_end..]);
    let diff = similar::TextDiff::from_lines(&source, &shown);
    let mut text = diff.unified_diff().context_radius(0).to_string();
    text.push_str(&format!("launches rewritten at lines {:?}\n", out.lines));
    for note in &out.notes {
        text.push_str(&format!("note: {note}\n"));
    }
    text
}

#[test]
fn insitu_launch_shapes() {
    let path = repo_root().join("fixtures/insitu/launch_shapes.cu");
    insta::assert_snapshot!("insitu_scale_kernel", insitu(&path, "scale_kernel"));
    insta::assert_snapshot!("insitu_tick_kernel", insitu(&path, "tick_kernel"));
    insta::assert_snapshot!("insitu_missing", insitu(&path, "no_such_kernel"));
}

#[test]
fn insitu_torch_extension() {
    let path = repo_root().join("kernels/insitu/linear_ext.cu");
    insta::assert_snapshot!(insitu(&path, "linear_kernel"));
}
