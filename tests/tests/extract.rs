//! Track B's extraction on the kernel suite: for every family with a `<<<…>>>` launch,
//! kwb-extract's reproducer (snapshot) and its instantiation; with nvcc
//! (`KWB_RUN_SLOW_TESTS=1`, as `cargo xtask test` sets it), every reproducer compiles
//! on its own and defines the C-ABI entry points.

use std::path::PathBuf;

use kwb_extract::{Request, extract};
use kwb_tests::{cutlass_source, repo_root};
use kwb_toolchain::{CompileFlags, Env};

/// (family, kernel, the instantiation its launch site uses).
const FAMILIES: &[(&str, &str, &str)] = &[
    (
        "mma_sync",
        "gemm_mma_sync",
        "gemm_mma_sync<128, 128, 32, 3>",
    ),
    ("tma_wgmma_sm90", "gemm_wgmma_tma", "gemm_wgmma_tma"),
    ("megakernel", "megakernel", "megakernel"),
    ("cute_sm80", "gemm_cute_sm80", "gemm_sm80::gemm_cute_sm80"),
    // A library kernel behind CUTLASS's adapter: no launch site, its Params built by
    // the adapter from the launcher's own Arguments.
    (
        "cutlass3x_sm90",
        "Gemm",
        "cutlass::device_kernel<typename Gemm::GemmKernel>",
    ),
];

fn request(family: &str, kernel: &str) -> Request {
    Request {
        kernel: Some(kernel.to_owned()),
        defines: vec![("KWB_DEFECT".to_owned(), "none".to_owned())],
        file_name: format!("kernels/{family}/gemm.cu"),
        ..Request::default()
    }
}

fn source(family: &str) -> String {
    std::fs::read_to_string(repo_root().join("kernels").join(family).join("gemm.cu")).unwrap()
}

#[test]
fn suite_reproducers() {
    for (family, kernel, instantiation) in FAMILIES {
        let x = extract(&source(family), &request(family, kernel)).unwrap();
        assert_eq!(&x.instantiation, instantiation, "{family}");
        match (&x.launch, &x.host.params) {
            (Some(launch), None) => {
                assert_eq!(launch.args.len(), x.kernel.params.len(), "{family}")
            }
            (None, Some(params)) => {
                assert_eq!(x.kernel.params.len(), 1, "{family}");
                assert!(
                    params.arguments.contains("Gemm::Arguments args"),
                    "{family}"
                );
                // The launcher's adjustments after declaring a value are copied too.
                for line in [
                    "if constexpr (kDefect == Defect::k_from_d_elem) k_problem =",
                    "if constexpr (kDefect == Defect::alpha_beta_swapped) scalars =",
                    "hw_info.sm_count =",
                    "KWB_CUDA_CHECK(cudaGetDevice(&device));",
                ] {
                    assert!(x.repro.contains(line), "{family}: {line}");
                }
            }
            other => panic!("{family}: {other:?}"),
        }
        // The host harness is left out (the one main() is the reproducer's own,
        // behind its macro); the kernel is in.
        assert_eq!(
            x.repro.matches("int main(").count(),
            usize::from(x.host.main.is_some()),
            "{family}"
        );
        assert!(!x.repro.contains("parse_args("), "{family}");
        // The kernel's definition, or (behind an adapter) the instantiation it launches.
        assert!(
            x.repro.contains(&format!("{}(", x.kernel.name))
                || x.repro.contains(&format!("&{}", x.instantiation)),
            "{family}"
        );
        insta::assert_snapshot!(format!("extract_{family}"), x.repro);
    }
}

/// The megakernel's launch is not templated, but the down projection it dispatches
/// to is: a spec names it, folded through the file's constants.
#[test]
fn a_spec_folds_through_the_files_constants() {
    let mut r = request("megakernel", "megakernel");
    r.kernel = None;
    r.template = Some("megakernel".to_owned());
    let x = extract(&source("megakernel"), &r).unwrap();
    assert_eq!(x.instantiation, "megakernel");
    let mut r = request("mma_sync", "gemm_mma_sync");
    r.kernel = None;
    r.template = Some("gemm_mma_sync<64 * 2, 2 * 32, 32, kThreads / 64>".to_owned());
    let x = extract(&source("mma_sync"), &r).unwrap();
    assert_eq!(x.instantiation, "gemm_mma_sync<128, 64, 32, 2>");
    // Not the launch's arguments, so no launch configuration is claimed.
    assert!(x.launch.is_none());
}

#[test]
fn every_reproducer_compiles_alone() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") || cutlass_source().is_none() {
        return;
    }
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let cutlass = kwb_toolchain::cutlass(&env).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = FAMILIES
            .iter()
            .map(|(family, kernel, _)| {
                let (toolchain, cutlass, dir) = (&toolchain, &cutlass, dir.path());
                scope.spawn(move || -> Result<(), String> {
                    let x = extract(&source(family), &request(family, kernel))
                        .map_err(|e| e.to_string())?;
                    // Every family but the megakernel (whose launcher computes its grid
                    // from the device) runs alone.
                    if (*family != "megakernel") != x.host.main.is_some() {
                        return Err(format!("{family}: main() {:?}", x.host.unavailable));
                    }
                    let repro = dir.join(format!("{family}.repro.cu"));
                    std::fs::write(&repro, &x.repro).map_err(|e| e.to_string())?;
                    let flags = CompileFlags {
                        includes: vec![
                            repo_root().join("kernels").join(family),
                            repo_root().join("kernels/common"),
                            cutlass.include.clone(),
                        ]
                        .into_iter()
                        .chain(cutlass.util_include.clone())
                        .collect(),
                        defines: std::iter::once("KWB_DEFECT=none".to_owned())
                            .chain(x.host.main.clone())
                            .collect(),
                        extra: vec!["-O3".to_owned(), "--expt-relaxed-constexpr".to_owned()],
                        // Host and device passes, without the portable PTX pass.
                        ptx: false,
                        ..CompileFlags::default()
                    };
                    // With its own main() the reproducer links into a program (host
                    // entry points included); without, it compiles to an object.
                    let object = dir.join(format!("{family}.repro"));
                    let built = if x.host.main.is_some() {
                        kwb_toolchain::compile_executable(toolchain, &repro, &flags, &object)
                    } else {
                        kwb_toolchain::compile_object(toolchain, &repro, &flags, &object)
                    };
                    built.map_err(|e| format!("{family}: {e}"))?;
                    let sass =
                        kwb_toolchain::sass(toolchain, &object).map_err(|e| e.to_string())?;
                    if !sass.contains("Function") {
                        return Err(format!("{family}: the object holds no kernel"));
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap().err())
            .collect()
    });
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The megakernel's down-projection task as kernels/suite.toml has Track B reproduce
/// it: its family's `template` and `extract_flags` (the task bindings and tile).
fn suite_task_request() -> Request {
    let text = std::fs::read_to_string(repo_root().join("kernels/suite.toml")).unwrap();
    let suite: toml::Value = toml::from_str(&text).unwrap();
    let family = &suite["families"]["megakernel"];
    task_request(&family["template"], &family["extract_flags"])
}

/// A task request from a `template` and `extract_flags` of kernels/suite.toml.
fn task_request(template: &toml::Value, extract_flags: &toml::Value) -> Request {
    let flags: Vec<&str> = extract_flags
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut task = kwb_extract::TaskRequest::default();
    for pair in flags.chunks(2) {
        match pair {
            ["--task", binding] => {
                let (f, v) = binding.split_once('=').unwrap();
                task.bindings.push((f.to_owned(), v.to_owned()));
            }
            ["--task-tile", tile] => {
                let (r, c) = tile.split_once(',').unwrap();
                task.tile = Some((r.parse().unwrap(), c.parse().unwrap()));
            }
            other => panic!("an extract flag this test does not read: {other:?}"),
        }
    }
    Request {
        template: Some(template.as_str().unwrap().to_owned()),
        task,
        ..request("megakernel", "megakernel")
    }
}

/// megakernel/up_weight_desc as kernels/suite.toml has Track B reproduce it: the
/// up-projection task, its maps bound as `tma(A)` and `tma(B)`, so they are encoded
/// with the types the launcher encodes them with under the build's `-D`s: the down
/// projection's weight type for W_up in the defect's build, the up projection's in
/// the correct one.
#[test]
fn a_task_s_maps_are_encoded_the_way_the_launcher_encodes_them() {
    let text = std::fs::read_to_string(repo_root().join("kernels/suite.toml")).unwrap();
    let suite: toml::Value = toml::from_str(&text).unwrap();
    let variant = suite["variant"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| {
            v["family"].as_str() == Some("megakernel")
                && v["defect"].as_str() == Some("up_weight_desc")
        })
        .unwrap();
    for (defect, weight) in [
        ("up_weight_desc", "DownTmas::Weight"),
        ("none", "UpTmas::Weight"),
    ] {
        let mut r = task_request(&variant["repro_template"], &variant["repro_extract_flags"]);
        r.kernel = None;
        r.defines = vec![("KWB_DEFECT".to_owned(), defect.to_owned())];
        let x = extract(&source("megakernel"), &r).unwrap();
        let t = x.host.tasks.as_ref().unwrap();
        assert_eq!(t.dispatch, "task.type == TASK_LINEAR_UP");
        let value = |name: &str| {
            t.fields
                .iter()
                .find(|f| f.name == name)
                .unwrap()
                .value
                .clone()
        };
        assert_eq!(value("input_desc"), "tma(A, UpTmas::Input)", "{defect}");
        assert_eq!(
            value("weight_desc"),
            format!("tma(B, {weight})"),
            "{defect}"
        );
        assert!(x.repro.contains(&format!(
            "{weight}::encode(kwb_encode_tiled(), &kwb_maps[1]"
        )));
        if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() == Ok("1") {
            // With nvcc, the reproducer compiles.
            compile_megakernel_task(&x.repro, defect);
        }
    }
}

/// The SASS of a megakernel task reproducer compiled with nvcc for `defect`.
fn compile_megakernel_task(repro_text: &str, defect: &str) -> String {
    compile_repro(
        repro_text,
        vec![
            repo_root().join("kernels/megakernel"),
            repo_root().join("kernels/common"),
        ],
        vec![format!("KWB_DEFECT={defect}")],
    )
}

/// The SASS of a reproducer compiled alone with nvcc (-O3, these includes and -Ds).
fn compile_repro(repro_text: &str, includes: Vec<PathBuf>, defines: Vec<String>) -> String {
    let toolchain = kwb_toolchain::toolchain(&Env::from_process()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let repro = dir.path().join("repro.cu");
    std::fs::write(&repro, repro_text).unwrap();
    let flags = CompileFlags {
        includes,
        defines,
        extra: vec!["-O3".to_owned()],
        ptx: false,
        ..CompileFlags::default()
    };
    let object = dir.path().join("repro.o");
    kwb_toolchain::compile_object(&toolchain, &repro, &flags, &object).unwrap();
    kwb_toolchain::sass(&toolchain, &object).unwrap()
}

/// A task of the megakernel: the kernel runs unchanged on a list of down-projection
/// tasks only, built field by field from the bindings; with nvcc, the reproducer
/// compiles.
#[test]
fn the_megakernel_task_is_reproduced_by_its_kernel_on_a_task_list() {
    let mut r = suite_task_request();
    r.kernel = None;
    let x = extract(&source("megakernel"), &r).unwrap();
    let t = x.host.tasks.as_ref().unwrap();
    assert_eq!(t.dispatch, "task.type == TASK_LINEAR_DOWN");
    assert_eq!(
        x.args.iter().map(|a| a.value).collect::<Vec<_>>(),
        [Some(6144), Some(1024), Some(16)]
    );
    assert_eq!(t.scratch, ["events"]);
    // The whole kernel is there, with the up projection's instantiation it also
    // dispatches to; the host harness and launcher are not.
    assert!(
        x.repro
            .contains("megakernel(const Task* tasks, int num_tasks, int* events)")
    );
    assert!(!x.repro.contains("launch_mlp_megakernel"));
    insta::assert_snapshot!("extract_megakernel_task", x.repro);
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let sass = compile_megakernel_task(&x.repro, "none");
    assert!(sass.contains("megakernel"), "{sass}");
}

/// The TMA descriptors of the hand-written TMA families, with the `if constexpr`
/// changes a defect makes applied when `-D` decides them.
#[test]
fn descriptors_are_resolved_and_their_guarded_changes_decided() {
    let x = extract(
        &source("tma_wgmma_sm90"),
        &request("tma_wgmma_sm90", "gemm_wgmma_tma"),
    )
    .unwrap();
    insta::assert_json_snapshot!("descriptors_tma_wgmma_sm90", x.descriptors);
    let d = &x.descriptors[0];
    assert_eq!(d.swizzle.values, ["CU_TENSOR_MAP_SWIZZLE_128B"]);
    assert_eq!(
        d.global_dims.values,
        ["cuuint64_t(cols)", "cuuint64_t(rows)"]
    );
    assert_eq!(d.element_strides.folded, Some(vec![1, 1]));
    let mut r = request("tma_wgmma_sm90", "gemm_wgmma_tma");
    r.defines = vec![("KWB_DEFECT".to_owned(), "tmap_swizzle".to_owned())];
    let x = extract(&source("tma_wgmma_sm90"), &r).unwrap();
    let d = &x.descriptors[0];
    assert_eq!(d.swizzle.values, ["CU_TENSOR_MAP_SWIZZLE_NONE"]);
    assert!(d.swizzle.changes[0].contains("applies: `kDefect == Defect::tmap_swizzle` holds"));
    r.defines = vec![("KWB_DEFECT".to_owned(), "tmap_dim_order".to_owned())];
    let x = extract(&source("tma_wgmma_sm90"), &r).unwrap();
    assert_eq!(
        x.descriptors[0].global_dims.values,
        ["cuuint64_t(rows)", "cuuint64_t(cols)"]
    );
    let x = extract(&source("megakernel"), &request("megakernel", "megakernel")).unwrap();
    insta::assert_json_snapshot!("descriptors_megakernel", x.descriptors);
}

/// kwb.toml reads back into the manifest that wrote it, for every suite reproducer;
/// a damaged or foreign one is refused with a message.
#[test]
fn the_manifest_round_trips() {
    use kwb_extract::manifest::Manifest;
    for (family, kernel, _) in FAMILIES {
        let m = kwb_tests::suite_manifest(family, kernel);
        let text = m.to_toml();
        assert_eq!(Manifest::from_toml(&text).unwrap(), m, "{family}");
    }
    let err = Manifest::from_toml("[source]\nfile = 3\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("not a kwb.toml kwb-extract wrote"),
        "{err}"
    );
    assert!(Manifest::from_toml("[kernel]\nsurprise = true\n").is_err());
}

/// A CUTLASS example, as its users write one: its launcher makes its own buffers from
/// the example's `Options` struct and runs the adapter on Arguments built from them,
/// so kwb reproduces it through the program's own harness (the launcher replayed up to
/// the launch, the problem written into its Arguments). The compile check is
/// tests/tests/through.rs's (tests/through.toml holds the example).
#[test]
fn a_cutlass_example_behind_the_adapter() {
    let Some(source) = cutlass_source() else {
        return;
    };
    let file = "examples/48_hopper_warp_specialized_gemm/48_hopper_warp_specialized_gemm.cu";
    let Ok(text) = std::fs::read_to_string(source.join(file)) else {
        return;
    };
    let x = extract(
        &text,
        &Request {
            kernel: Some("Gemm".to_owned()),
            file_name: file.to_owned(),
            ..Request::default()
        },
    )
    .unwrap();
    assert!(
        x.instantiation.starts_with(
            "cutlass::gemm::device::GemmUniversalAdapter<GemmKernel> (run by `run<Gemm>(options)`"
        ),
        "{}",
        x.instantiation
    );
    assert!(x.host.params.is_none());
    let through = x.host.through.as_ref().expect("through the harness");
    assert_eq!(through.path, ["main", "run"]);
    assert_eq!(through.call, "kwb_replay_run<Gemm>(options)");
    let l = &through.layout;
    assert_eq!(
        (l.a.as_str(), l.b.as_str(), l.d.as_str()),
        ("mk", "nk", "nm")
    );
    let bound: Vec<&str> = through.bindings.iter().map(|b| b.param.as_str()).collect();
    assert_eq!(
        bound,
        [
            "options.alpha",
            "options.beta",
            "options.m",
            "options.n",
            "options.k",
            "Arguments"
        ]
    );
    assert_eq!(x.accumulator.as_deref(), Some("float"));
    // The file is kept whole, main renamed; the entry is kwb's.
    assert!(x.repro.contains("int kwb_user_main(") && x.repro.contains("struct Options"));
    let entry = &x.repro[x
        .repro
        .find("// ---- kwb-extract: the runner's entry point")
        .unwrap()..];
    insta::assert_snapshot!("extract_cutlass_example_48_entry", entry);
}
