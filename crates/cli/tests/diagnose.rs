//! End-to-end tests of `kwb diagnose` on a machine without a GPU (CI's): bad input
//! is refused before anything is built or written; a real H200 trace is judged and
//! reconciled, the reproducer extracted and built, and the report written, with the
//! ladder's absence said plainly.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn diagnose(dir: &Path, defect: &str, extra: &[&str]) -> Run {
    diagnose_kernel(dir, ("mma_sync", "gemm_mma_sync"), defect, extra)
}

/// `kwb diagnose` of a suite family's kernel, built with `defect`.
fn diagnose_kernel(
    dir: &Path,
    (family, kernel): (&str, &str),
    defect: &str,
    extra: &[&str],
) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kwb"))
        .arg("diagnose")
        .arg(root().join(format!("kernels/{family}/gemm.cu")))
        .args(["--kernel", kernel, "-I"])
        .arg(root().join("kernels/common"))
        .arg(format!("-DKWB_DEFECT={defect}"))
        .args(extra)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("KWB_CACHE_DIR", dir.join("cache"))
        .output()
        .expect("kwb runs");
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn trace(name: &str) -> String {
    root()
        .join("fixtures/traces")
        .join(name)
        .display()
        .to_string()
}

fn driver_here() -> bool {
    kwb_gpu::worker::driver_present().is_ok()
}

#[test]
fn a_file_that_is_no_trace_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("trace.bin");
    std::fs::write(&bogus, b"not a trace").unwrap();
    let report = dir.path().join("report");
    let r = diagnose(
        dir.path(),
        "none",
        &[
            "--trace",
            bogus.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("is not a kwb trace"), "{}", r.stderr);
    assert!(!report.exists(), "nothing is written for bad input");
    let missing = diagnose(dir.path(), "none", &["--trace", "nowhere.trace"]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(missing.stderr.contains("cannot read"), "{}", missing.stderr);
}

#[test]
fn a_trace_not_recorded_under_the_given_gate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let r = diagnose(
        dir.path(),
        "last_tile_twice",
        &[
            "--trace",
            &trace("mma_sync_last_tile_twice_ones.trace"),
            "--gate",
            "BM == 128",
            "--report",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("were not recorded with --gate 'BM == 128' (recorded without a gate"),
        "{}",
        r.stderr
    );
    assert!(!report.exists(), "nothing is written for bad input");
}

#[test]
fn an_unknown_kernel_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kwb"))
        .arg("diagnose")
        .arg(root().join("kernels/mma_sync/gemm.cu"))
        .args(["--kernel", "no_such_kernel"])
        .env("NO_COLOR", "1")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such_kernel"));
}

#[test]
fn a_real_trace_is_judged_reconciled_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    // The last K tile accumulated twice, traced on the H200.
    let r = diagnose(
        dir.path(),
        "last_tile_twice",
        &[
            "--trace",
            &trace("mma_sync_last_tile_twice_ones.trace"),
            "--report",
            report.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let d: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON on stdout");
    assert_eq!(d["instantiation"], "gemm_mma_sync<128, 128, 32, 3>");
    assert_eq!(d["verdict"]["stage"], "mma", "{}", r.stdout);
    assert_eq!(d["verdict"]["status"], "VERDICT", "{}", r.stdout);
    assert!((d["verdict"]["factor"].as_f64().unwrap() - 1056.0 / 1024.0).abs() < 1e-9);
    assert_eq!(d["evidence"][0]["track"], "trace");
    assert!(d["sites"][0]["line"].as_u64().is_some(), "{}", r.stdout);
    assert!(d["nan_origin"].is_null());
    for file in [
        "report.md",
        "report.json",
        "repro/repro.cu",
        "repro/kwb.toml",
    ] {
        assert!(report.join(file).is_file(), "{file} written");
    }
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("**VERDICT: mma"), "{md}");
    if !driver_here() {
        assert!(
            d["not_run"][0].as_str().unwrap().contains("no CUDA driver"),
            "{}",
            r.stdout
        );
        assert!(d["rungs"].as_array().unwrap().is_empty());
    }

    // On the terminal: the verdict line, then the implicated lines of the source.
    let r = diagnose(
        dir.path(),
        "last_tile_twice",
        &["--trace", &trace("mma_sync_last_tile_twice_ones.trace")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("VERDICT: mma, factor 1.0312"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("VERDICT mma here"), "{}", r.stdout);
    assert!(r.stdout.contains("accumulator probe here"), "{}", r.stdout);

    // The correct kernel's trace shows nothing on ones: without the ladder that is a
    // draft, never a verdict, and the output it could not check is named.
    let r = diagnose(
        dir.path(),
        "none",
        &["--trace", &trace("mma_sync_none_ones.trace")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    if !driver_here() {
        assert!(r.stdout.contains("DRAFT: none"), "{}", r.stdout);
        assert!(
            r.stdout.contains("the epilogue is not cleared"),
            "{}",
            r.stdout
        );
        assert!(
            r.stdout.contains("missing: a ladder run of the reproducer"),
            "{}",
            r.stdout
        );
    }
}

#[test]
fn a_map_whose_pitch_is_the_width_is_a_descriptor_draft_from_the_source_alone() {
    let dir = tempfile::tempdir().unwrap();
    let r = diagnose_kernel(
        dir.path(),
        ("tma_wgmma_sm90", "gemm_wgmma_tma"),
        "tmap_stride",
        &["--json"],
    );
    let stdout = &r.stdout;
    let d: serde_json::Value = serde_json::from_str(stdout).expect("JSON on stdout");
    assert_eq!(d["descriptors"][0]["param"], "tmap_a", "{stdout}");
    assert_eq!(d["descriptors"][0]["field"], "strides", "{stdout}");
    assert_eq!(d["descriptors"][1]["param"], "tmap_b", "{stdout}");
    assert_eq!(d["verdict"]["stage"], "descriptor", "{stdout}");
    if !driver_here() {
        // No ladder, no trace: the source is the only evidence, so a draft.
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(d["verdict"]["status"], "DRAFT", "{stdout}");
    }
}

/// Integers in [-8, 8] (the harness's wide_int values).
fn wide(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    kwb_reconcile::Matrix::wide_int(rows, cols, seed).data
}

/// A full trace of one warp whose A fragments at K step 2 hold K tile 0 again (a
/// prefetch with the wrong K offset), B and the accumulator's coordinates as a
/// right run would have them.
fn full_trace_with_a_tile_fed_twice(a: &[f32], b: &[f32], k: usize) -> Vec<u8> {
    use kwb_runtime::{Kind, RECORD_SIZE, TileValue, Trace, TraceRecord};
    let mut t = Trace::default();
    let mut push = |kind: Kind, k_tile: i32, values: Vec<(f32, i32, i32, i32)>| {
        let mut r = TraceRecord::from_le_bytes(&[0; RECORD_SIZE]);
        r.magic = kwb_runtime::RECORD_MAGIC;
        r.version = kwb_runtime::VERSION;
        r.kind = kind as u32;
        r.k_tile = k_tile;
        r.row_bound = i32::MAX;
        let index = t.records.len() as u32;
        t.records.push(r);
        for (element, (value, m, n, kk)) in values.into_iter().enumerate() {
            t.tiles.push(TileValue {
                record: index,
                element: element as u32,
                value,
                m,
                n,
                k: kk,
            });
        }
    };
    for (step, tile) in [0usize, 1, 0, 3].into_iter().enumerate() {
        let of = |m: &[f32], tile: usize, row_is_n: bool| -> Vec<(f32, i32, i32, i32)> {
            (0..16)
                .flat_map(|r| (0..32).map(move |kk| (r, kk)))
                .map(|(r, kk)| {
                    let v = m[r * k + tile * 32 + kk];
                    if row_is_n {
                        (v, -1, r as i32, kk as i32)
                    } else {
                        (v, r as i32, -1, kk as i32)
                    }
                })
                .collect()
        };
        push(Kind::OperandA, step as i32, of(a, tile, false));
        push(Kind::OperandB, step as i32, of(b, step, true));
    }
    t.tile_capacity = 1 << 20;
    kwb_runtime::encode(&t)
}

#[test]
fn a_full_trace_on_integer_inputs_isolates_what_ones_cannot_see() {
    let dir = tempfile::tempdir().unwrap();
    let (m, n, k) = (64, 64, 128);
    let (a, b) = (wide(m, k, 21), wide(n, k, 22));
    let files = [
        ("full.trace", full_trace_with_a_tile_fed_twice(&a, &b, k)),
        ("A.npy", kwb_cli::npy::f32_array(&[m, k], &a)),
        ("B.npy", kwb_cli::npy::f32_array(&[n, k], &b)),
        ("bad.npy", b"not an array".to_vec()),
    ];
    for (name, bytes) in &files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let path = |name: &str| dir.path().join(name).display().to_string();
    let operands = format!("{},{}", path("A.npy"), path("B.npy"));
    let r = diagnose(
        dir.path(),
        "prefetch_k_offset",
        &[
            "--full-trace",
            &path("full.trace"),
            "--operands",
            &operands,
            "--json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let d: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON on stdout");
    assert_eq!(d["verdict"]["stage"], "operand-load", "{}", r.stdout);
    assert_eq!(d["verdict"]["status"], "VERDICT", "{}", r.stdout);
    assert_eq!(d["evidence"][0]["track"], "full trace");
    assert!(
        d["verdict"]["summary"]
            .as_str()
            .unwrap()
            .contains("never consumed"),
        "{}",
        r.stdout
    );
    // Operands that are no array, or a full trace without its operands: bad input.
    let bad = format!("{},{}", path("bad.npy"), path("B.npy"));
    let r = diagnose(
        dir.path(),
        "none",
        &["--full-trace", &path("full.trace"), "--operands", &bad],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("bad.npy"), "{}", r.stderr);
    let r = diagnose(dir.path(), "none", &["--full-trace", &path("full.trace")]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

/// `-- CMD`: a program that never launches the kernel (here: it builds nothing and
/// prints a line) is an error that says why kwb saw no launch and shows the program's
/// last lines; the files kwb writes stay in the report folder.
#[test]
fn a_program_that_never_launches_the_kernel_is_told_with_its_output() {
    if kwb_toolchain::toolchain(&kwb_toolchain::Env::from_process()).is_err() {
        return; // kwb-nvcc needs the real nvcc; `cargo xtask test` sets it up
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kwb"))
        .args(["diagnose", "--kernel", "linear_kernel", "--report"])
        .arg(dir.path().join("r"))
        .args(["--", "sh", "-c", "echo the tests ran; exit 3"])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("KWB_CACHE_DIR", dir.path().join("cache"))
        .output()
        .expect("kwb runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("without launching `linear_kernel`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("exit 3") && stderr.contains("the tests ran"),
        "{stderr}"
    );
    let mut written: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["r"].map(str::to_owned).to_vec());
    assert!(dir.path().join("r/insitu/command.log").is_file());
}

/// `-- CMD` through the real pieces on a machine without a GPU: the program is built by
/// kwb-nvcc with its launch rewritten (`kwb_insitu.cuh` inlined), reaches the launch,
/// finds its device unusable and says so; kwb reports that, not a program that never
/// launched.
#[test]
fn a_program_whose_device_is_unusable_at_the_launch_is_told_so() {
    let Ok(toolchain) = kwb_toolchain::toolchain(&kwb_toolchain::Env::from_process()) else {
        return;
    };
    if driver_here() {
        return; // on a GPU the ladder runs: `xtask gpu-insitu`
    }
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("prog");
    let kwb_nvcc = Path::new(env!("CARGO_BIN_EXE_kwb-nvcc"));
    let built = Command::new(kwb_nvcc)
        .args(["-std=c++17", "-arch=sm_90a", "-o"])
        .arg(&program)
        .arg(root().join("fixtures/insitu/gemm_program.cu"))
        .env("KWB_NVCC_REAL", &toolchain.nvcc)
        .env("KWB_INSITU_KERNEL", "gemm_kernel")
        .env("KWB_CACHE_DIR", dir.path().join("cache"))
        .output()
        .expect("kwb-nvcc runs");
    let said = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{said}");
    assert!(said.contains("go through kwb_insitu::launch"), "{said}");
    let out = Command::new(env!("CARGO_BIN_EXE_kwb"))
        .args(["diagnose", "--kernel", "gemm_kernel", "--no-trace", "--"])
        .arg(&program)
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("KWB_CACHE_DIR", dir.path().join("cache"))
        .output()
        .expect("kwb runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("reached the launch of `gemm_kernel`")
            && stderr.contains("the device had an error before the launch"),
        "{stderr}"
    );
}
