//! The runner's host half on the suite's own kernels: plans, storage layouts, and a
//! run on a machine without a GPU.

use super::*;
use crate::plan::Arg;

fn extracted(family: &str, kernel: &str) -> (tempfile::TempDir, Manifest) {
    extracted_as(
        family,
        kwb_extract::Request {
            kernel: Some(kernel.to_owned()),
            ..kwb_extract::Request::default()
        },
    )
}

/// The reproducer folder and manifest of the suite kernel of `family` for `request`
/// (its file name set here); the manifest as read back from the kwb.toml written.
fn extracted_as(family: &str, request: kwb_extract::Request) -> (tempfile::TempDir, Manifest) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let includes = [
        root.join("kernels").join(family),
        root.join("kernels/common"),
    ];
    extracted_from(&format!("kernels/{family}/gemm.cu"), request, &includes).0
}

/// The reproducer folder and manifest of the repository's `file` for `request`, with
/// `includes`; and the extraction.
fn extracted_from(
    file: &str,
    request: kwb_extract::Request,
    includes: &[std::path::PathBuf],
) -> ((tempfile::TempDir, Manifest), kwb_extract::Extraction) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = file.to_owned();
    let source = std::fs::read_to_string(root.join(&file)).unwrap();
    let x = kwb_extract::extract(
        &source,
        &kwb_extract::Request {
            file_name: file.clone(),
            ..request
        },
    )
    .unwrap();
    let build = kwb_extract::manifest::Build {
        std: "c++17".to_owned(),
        arch: "sm_90a".to_owned(),
        defines: Vec::new(),
        includes: includes.iter().map(|i| i.display().to_string()).collect(),
        other: Vec::new(),
        from: "command line".to_owned(),
    };
    let manifest = Manifest::new(&x, &file, build);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("repro.cu"), &x.repro).unwrap();
    std::fs::write(dir.path().join("kwb.toml"), manifest.to_toml()).unwrap();
    let read_back = Manifest::from_toml(&manifest.to_toml()).unwrap();
    assert_eq!(read_back, manifest);
    ((dir, read_back), x)
}

fn request() -> Request {
    Request {
        shape: (256, 384, 1024),
        alpha: 2.0,
        beta: 0.0,
        ld_pad: 64,
        dtype: None,
    }
}

#[test]
fn plans_of_the_suite_families() {
    // mma_sync: packed operands (no leading-dimension parameter), D bf16.
    let (_d, m) = extracted("mma_sync", "gemm_mma_sync");
    let p = Plan::new(&m, &request()).unwrap();
    assert_eq!((p.lda, p.ldb, p.ldc, p.ldd), (1024, 1024, 384, 384));
    assert_eq!(p.output, Role::D);
    assert_eq!(p.operand(Role::A).dtype, kwb_ladder::Dtype::Bf16);
    assert_eq!(
        p.args,
        [
            Arg::I32(256),
            Arg::I32(384),
            Arg::I32(1024),
            Arg::F32(2.0),
            Arg::Pointer(Role::A),
            Arg::Pointer(Role::B),
            Arg::F32(0.0),
            Arg::Pointer(Role::C),
            Arg::Pointer(Role::D),
        ]
    );
    assert_eq!(p.tile, (128, 128));
    // cute_sm80: ldA/ldB/ldC are padded (B's twice), C (f32) is updated in place.
    let (_d, m) = extracted("cute_sm80", "gemm_cute_sm80");
    let p = Plan::new(&m, &request()).unwrap();
    assert_eq!((p.lda, p.ldb, p.ldc), (1088, 1152, 448));
    assert_eq!(p.output, Role::C);
    assert_eq!(p.operand(Role::C).dtype, kwb_ladder::Dtype::F32);
    assert_eq!(p.args[5], Arg::I32(1088));
    // tma_wgmma: the descriptors come from the launcher's encoder; lda/ldb are the
    // launcher's, so they are padded too.
    let (_d, m) = extracted("tma_wgmma_sm90", "gemm_wgmma_tma");
    let p = Plan::new(&m, &request()).unwrap();
    assert_eq!(p.args[0], Arg::TensorMap("kwb_encode_tmap_a".to_owned()));
    assert_eq!(p.args[1], Arg::TensorMap("kwb_encode_tmap_b".to_owned()));
    assert_eq!((p.lda, p.ldb), (1088, 1152));
    assert_eq!(p.operand(Role::B).dtype, kwb_ladder::Dtype::Bf16);
    // cutlass3x: one Params blob from the adapter; the operands and their types come
    // from the launcher (through the file's aliases), A's pitch is padded, a bias
    // (f32, one per column) is added to the problem.
    let (_d, m) = extracted("cutlass3x_sm90", "Gemm");
    let p = Plan::new(&m, &request()).unwrap();
    assert_eq!(
        p.args,
        [Arg::Params {
            fill: "kwb_params".to_owned(),
            size: "kwb_params_size".to_owned(),
            workspace: "kwb_workspace_size".to_owned(),
        }]
    );
    assert_eq!((p.lda, p.ldb, p.ldc, p.ldd), (1088, 1024, 384, 384));
    assert_eq!(p.operand(Role::A).dtype, kwb_ladder::Dtype::Bf16);
    assert_eq!(p.operand(Role::D).dtype, kwb_ladder::Dtype::F32);
    assert_eq!(p.operand(Role::Bias).dtype, kwb_ladder::Dtype::F32);
    assert_eq!(p.output, Role::D);
    assert!(p.problem().unwrap().bias);
}

#[test]
fn a_parameter_kwb_cannot_fill_is_named() {
    let (_d, m) = extracted("megakernel", "megakernel");
    let e = Plan::new(&m, &request()).unwrap_err().to_string();
    assert!(e.contains("`tasks`"), "{e}");
}

/// The megakernel's down task: the list, its length and a zeroed scratch buffer are
/// the kernel's arguments; the task's fields bound to operands give their types; the
/// task's tile is the error grid's (the manifest read back from its TOML).
#[test]
fn a_task_of_a_megakernel_runs_on_a_task_list() {
    let bind = |f: &str, v: &str| (f.to_owned(), v.to_owned());
    let (_d, m) = extracted_as(
        "megakernel",
        kwb_extract::Request {
            template: Some("linear_task<6144, 1024, 16>".to_owned()),
            defines: vec![("KWB_DEFECT".to_owned(), "none".to_owned())],
            task: kwb_extract::TaskRequest {
                bindings: vec![
                    bind("out_col", "n0"),
                    bind("wait_event", "-1"),
                    bind("wait_count", "0"),
                    bind("signal_event", "-1"),
                    bind("beta", "beta"),
                    bind("input_desc", "tma(A, DownTmas::Input)"),
                    bind("weight_desc", "tma(B, DownTmas::Weight)"),
                    bind("bias", "bias"),
                    bind("output", "D"),
                ],
                tile: Some((16, 64)),
                ctas: Some(2),
            },
            ..kwb_extract::Request::default()
        },
    );
    let mut r = request();
    r.shape = (16, 1024, 6144);
    let p = Plan::new(&m, &r).unwrap();
    assert_eq!(
        p.args,
        [
            Arg::Tasks {
                bytes: "kwb_tasks_bytes".to_owned(),
                fill: "kwb_tasks".to_owned(),
            },
            Arg::TaskCount,
            Arg::Scratch(kwb_extract::SCRATCH_BYTES),
        ]
    );
    assert_eq!(p.output, Role::D);
    assert_eq!(p.operand(Role::D).dtype, kwb_ladder::Dtype::Bf16);
    assert_eq!(p.operand(Role::A).dtype, kwb_ladder::Dtype::Bf16);
    assert_eq!(p.operand(Role::Bias).dtype, kwb_ladder::Dtype::Bf16);
    assert_eq!(p.tile, (16, 64));
    assert_eq!(m.host.tasks.as_ref().map(|t| t.ctas), Some(2));
}

#[test]
fn storage_puts_nan_in_padding_and_b_as_n_by_k() {
    let (_d, m) = extracted("cute_sm80", "gemm_cute_sm80");
    let mut r = request();
    r.shape = (2, 3, 4);
    r.ld_pad = 2;
    let p = Plan::new(&m, &r).unwrap();
    let ops = kwb_ladder::Operands {
        a: (0..8).map(|v| v as f32).collect(),
        b: (0..12).map(|v| v as f32).collect(),
        c: vec![0.0; 6],
        bias: vec![0.0; 3],
    };
    let sa = kwb_ladder::Dtype::Bf16.decode(&storage(&p, Role::A, &ops));
    assert_eq!(&sa[..4], &[0.0, 1.0, 2.0, 3.0]);
    assert!(sa[4].is_nan() && sa[5].is_nan());
    assert_eq!(&sa[6..10], &[4.0, 5.0, 6.0, 7.0]);
    // B is K x N logically (b[p * 3 + j]); stored as N rows of K, its pitch padded
    // twice as much (K + 4).
    let sb = kwb_ladder::Dtype::Bf16.decode(&storage(&p, Role::B, &ops));
    assert_eq!(&sb[..4], &[0.0, 3.0, 6.0, 9.0]);
    assert!(sb[4..8].iter().all(|v| v.is_nan()));
    assert_eq!(&sb[8..12], &[1.0, 4.0, 7.0, 10.0]);
    // The output is read back without its padding.
    let mut bytes =
        kwb_ladder::Dtype::F32.encode(&[1.0, 2.0, 3.0, 9.0, 9.0, 4.0, 5.0, 6.0, 9.0, 9.0]);
    // (1, 1) was never written: it still holds the fill.
    bytes[6 * 4..7 * 4].fill(0xff);
    let out = output(&p, &bytes);
    assert_eq!(&out.values[..4], &[1.0, 2.0, 3.0, 4.0]);
    assert!(out.values[4].is_nan());
    assert_eq!(out.unwritten, [false, false, false, false, true, false]);
    let u = Unwritten::of(&out, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3);
    assert_eq!((u.count, u.first), (1, (1, 1)));
    assert!((u.ratio_as_zero - 16.0 / 21.0).abs() < 1e-12);
    // With beta = 0 all of C is the fill, as padding is.
    let sc = storage(&p, Role::C, &ops);
    assert!(sc.iter().all(|x| *x == 0xff));
    assert!(sa_bytes_hold_fill(&storage(&p, Role::A, &ops)));
}

#[test]
fn without_a_gpu_the_reproducer_is_still_built_and_cached() {
    if worker::driver_present().is_ok() {
        return; // On a GPU machine the run goes on; the device suite covers it.
    }
    let (dir, _m) = extracted("mma_sync", "gemm_mma_sync");
    let cache = tempfile::tempdir().unwrap();
    let options = options(cache.path());
    let e = run(dir.path(), &options).unwrap_err();
    assert!(matches!(e, GpuError::NoDriver { .. }), "{e}");
    let built: Vec<_> = std::fs::read_dir(cache.path()).unwrap().collect();
    assert_eq!(built.len(), 1, "one cache entry");
    let entry = built[0].as_ref().unwrap().path();
    assert!(entry.join("repro.so").is_file());
    // A rerun finds it: same key, nothing compiled (the entry's file is untouched).
    let before = std::fs::metadata(entry.join("repro.so"))
        .unwrap()
        .modified()
        .unwrap();
    let _ = run(dir.path(), &options).unwrap_err();
    let after = std::fs::metadata(entry.join("repro.so"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after);
}

/// A's padding (elements 4, 5 of each 6-element row) is the all-ones fill.
fn sa_bytes_hold_fill(bytes: &[u8]) -> bool {
    bytes[8..12].iter().all(|x| *x == 0xff) && bytes[0..8].iter().any(|x| *x != 0xff)
}

#[test]
fn the_gpu_reference_matches_the_operand_types_and_builds() {
    let (_d, m) = extracted("mma_sync", "gemm_mma_sync");
    let p = Plan::new(&m, &request()).unwrap();
    assert_eq!(
        reference_function(&p, ReferenceOn::Gpu).as_deref(),
        Some("kwb_reference_bf16_bf16")
    );
    assert_eq!(reference_function(&p, ReferenceOn::Host), None);
    assert_eq!(
        reference_function(&p, ReferenceOn::Auto),
        None,
        "small: the host"
    );
    let mut big = request();
    big.shape = (4096, 4096, 4096);
    let p = Plan::new(&m, &big).unwrap();
    assert!(reference_function(&p, ReferenceOn::Auto).is_some());
    // cute_sm80 updates an f32 C in place.
    let (_d, m) = extracted("cute_sm80", "gemm_cute_sm80");
    let p = Plan::new(&m, &request()).unwrap();
    let name = reference_function(&p, ReferenceOn::Gpu).unwrap();
    assert_eq!(name, "kwb_reference_bf16_f32");
    // Every name the runner asks for is a kernel reference.cu defines.
    assert!(include_str!("reference.cu").contains(&format!("KWB_REFERENCE({name},")));
    let toolchain = kwb_toolchain::toolchain(&kwb_toolchain::Env::from_process()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let version = kwb_toolchain::nvcc_version(&toolchain).unwrap();
    let cubin = compile::build_reference(&toolchain, &version, "sm_90a", cache.path()).unwrap();
    assert!(std::fs::metadata(&cubin).unwrap().len() > 0);
    assert_eq!(
        compile::build_reference(&toolchain, &version, "sm_90a", cache.path()).unwrap(),
        cubin
    );
}

#[test]
fn a_reproducer_nvcc_rejects_is_reported_with_its_words_and_nothing_is_cached() {
    let (dir, _m) = extracted("mma_sync", "gemm_mma_sync");
    std::fs::write(dir.path().join("repro.cu"), "this is not C++;\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let options = options(cache.path());
    match run(dir.path(), &options) {
        Err(GpuError::Build { stderr, .. }) => assert!(stderr.contains("error"), "{stderr}"),
        other => panic!("expected a build error, got {other:?}"),
    }
    // The entry folder holds neither a library nor a partial file.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let files: Vec<_> = std::fs::read_dir(entry.unwrap().path()).unwrap().collect();
        assert!(files.is_empty(), "{files:?}");
    }
}

/// The ones rung with the host reference, a worker that is never started, `cache`.
fn options(cache: &Path) -> RunOptions {
    RunOptions {
        rungs: vec![Rung::Ones],
        request: request(),
        timeout: Duration::from_secs(10),
        grid: None,
        block: None,
        smem: None,
        worker: vec!["false".to_owned()],
        cache: cache.to_path_buf(),
        reference: ReferenceOn::Host,
        dump: None,
        progress: Progress::default(),
        worker_env: Vec::new(),
    }
}

#[test]
fn a_finished_rung_is_judged_with_its_first_mismatch_and_unwritten_outputs() {
    let (_d, m) = extracted("mma_sync", "gemm_mma_sync");
    let mut r = request();
    r.shape = (2, 3, 4);
    let plan = Plan::new(&m, &r).unwrap();
    let problem = plan.problem().unwrap();
    let work = tempfile::tempdir().unwrap();
    // The answer of ones: alpha * K = 8 everywhere; the kernel wrote 16 at (0, 2) and
    // never wrote (1, 1).
    let mut out = kwb_ladder::Dtype::Bf16.encode(&[8.0, 8.0, 16.0, 8.0, 8.0, 8.0]);
    out[8..10].fill(0xff);
    std::fs::write(work.path().join("out.bin"), out).unwrap();
    let answer: Vec<u8> = [8.0f64; 6].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(work.path().join("answer.bin"), answer).unwrap();
    let files = JobRung {
        name: "ones".to_owned(),
        inputs: Vec::new(),
        fill: Vec::new(),
        output: work.path().join("out.bin"),
        answer: Some(work.path().join("answer.bin")),
    };
    let judging = Judging {
        plan: &plan,
        problem: &problem,
        config_source: "",
        timeout: Duration::from_secs(1),
    };
    let done = Outcome::Done {
        ms: 0.5,
        reference_ms: Some(1.0),
    };
    let report = judging
        .judge(
            Rung::Ones,
            Some(([1, 1, 1], [128, 1, 1], 0)),
            &done,
            &files,
            &[],
        )
        .unwrap();
    assert_eq!(report.status, "fail");
    let first = report.first.unwrap();
    assert_eq!((first.m, first.n, first.got, first.want), (0, 2, 16.0, 8.0));
    let unwritten = report.unwritten.unwrap();
    assert_eq!((unwritten.count, unwritten.first), (1, (1, 1)));
    assert_eq!(report.comparison.unwrap().mismatches, 2);
    // A hang is reported with the timeout, not compared.
    let hang = Outcome::Hang {
        seconds: 2.0,
        backtrace: None,
    };
    let report = judging.judge(Rung::Ones, None, &hang, &files, &[]).unwrap();
    assert_eq!(report.status, "hang");
    assert!(report.error.unwrap().contains("timeout 1.0 s"));
}

/// A reproducer through the launcher of a kernel that takes TMA maps by value (the
/// second suite's fp8 kernel, whose launcher encodes them itself) holds the capture
/// section, and the runner's build links it in front of the runtime's launch entries:
/// the wrappers are defined and every `__real_` entry they call resolves (without the
/// wrap flags those stay undefined, and the library would not load).
#[test]
fn a_launcher_built_map_is_read_at_the_launch_through_wrapped_entries() {
    if worker::driver_present().is_ok() {
        return; // On a GPU machine the run goes on; the device suite covers it.
    }
    let ((dir, _), x) = extracted_from(
        "kernels/styles/tma_map_fp8.cu",
        kwb_extract::Request {
            kernel: Some("fp8_gemm_tma_kernel".to_owned()),
            ..kwb_extract::Request::default()
        },
        &[],
    );
    assert!(x.repro.contains("kwb_map_params[2] = {0, 1}"));
    assert!(x.repro.contains(r#"kwb_map_names[2] = {"map_a", "map_b"}"#));
    let cache = tempfile::tempdir().unwrap();
    let e = run(dir.path(), &options(cache.path())).unwrap_err();
    assert!(matches!(e, GpuError::NoDriver { .. }), "{e}");
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let library = entry.join("repro.so");
    let nm = |args: &[&str]| {
        let out = std::process::Command::new("nm")
            .args(args)
            .arg(&library)
            .output()
            .expect("nm (binutils) runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let defined = nm(&["--defined-only"]);
    assert!(defined.contains(" T kwb_launched_maps"), "{defined}");
    assert!(
        defined.contains(" T __wrap___cudaLaunchKernel"),
        "{defined}"
    );
    let undefined = nm(&["--undefined-only"]);
    assert!(!undefined.contains("__real_"), "{undefined}");
}
