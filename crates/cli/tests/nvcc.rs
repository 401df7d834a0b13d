//! End-to-end tests of `kwb-nvcc`, the precompile hook: with a stand-in nvcc that
//! records what it was given (always), and a real Makefile build with the project's
//! nvcc (with `KWB_RUN_SLOW_TESTS=1`, as `cargo xtask test` sets it): disabled, the
//! build is the plain build (same command lines, identical SASS); enabled, the
//! targeted kernel's TU carries probes, the other TU is untouched, the dependency file
//! names the original files; what kwb cannot trace builds without probes, with a
//! warning, and fails the build only with `KWB_TRACE_STRICT=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

const HOOK: &str = env!("CARGO_BIN_EXE_kwb-nvcc");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A folder with a stand-in `nvcc` on its `bin/` that records its arguments (one a
/// line) and its environment's size, and writes `-MF`'s file naming its inputs.
fn stand_in() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > {0}/args.txt\nenv | sort > {0}/env.txt\n\
         dep=''; md=''; out=''; prev=''; for a in \"$@\"; do [ \"$prev\" = -MF ] && dep=$a; [ \"$prev\" = -o ] && out=$a; [ \"$a\" = -MD ] && md=1; prev=$a; done\n\
         if [ -z \"$dep\" ] && [ -n \"$md\" ] && [ -n \"$out\" ]; then dep=${{out%.*}}.d; fi\n\
         if [ -n \"$dep\" ]; then printf 'k.o: %s\\n' \"$*\" > \"$dep\"; fi\nexit 0\n",
        dir.path().display()
    );
    std::fs::write(bin.join("nvcc"), script).unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(bin.join("nvcc"))
        .status()
        .unwrap();
    std::fs::copy(
        root().join("kernels/mma_sync/gemm.cu"),
        dir.path().join("gemm.cu"),
    )
    .unwrap();
    std::fs::copy(
        root().join("kernels/common/kwb_harness.cuh"),
        dir.path().join("kwb_harness.cuh"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("plain.cu"),
        "__global__ void k(float* x) { x[0] = 1.f; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("user.cu"),
        "__global__ void gemm_mma_sync(float* x) { x[threadIdx.x] = 0.f; }\n",
    )
    .unwrap();
    dir
}

struct Run {
    code: i32,
    stderr: String,
}

fn hook(dir: &Path, trace: Option<&str>, args: &[&str]) -> Run {
    hook_with(dir, trace, &[], args)
}

/// [`hook`] with `KWB_TRACE_STRICT=1`.
fn hook_strict(dir: &Path, trace: &str, args: &[&str]) -> Run {
    hook_with(dir, Some(trace), &[("KWB_TRACE_STRICT", "1")], args)
}

fn hook_with(dir: &Path, trace: Option<&str>, env: &[(&str, &str)], args: &[&str]) -> Run {
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new(HOOK);
    c.args(args)
        .current_dir(dir)
        .env("PATH", path)
        .env("KWB_CACHE_DIR", dir.join("cache"))
        .env_remove("KWB_TRACE")
        .env_remove("KWB_TRACE_STRICT")
        .env_remove("KWB_NVCC_REAL")
        .envs(env.iter().copied());
    if let Some(t) = trace {
        c.env("KWB_TRACE", t);
    }
    let out = c.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn recorded(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("args.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn disabled_it_is_nvcc_with_the_same_arguments_and_writes_nothing() {
    let d = stand_in();
    let args = [
        "nvcc", "-O3", "-Iinc", "-DX=1", "-c", "gemm.cu", "-o", "g.o",
    ];
    let r = hook(d.path(), None, &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(recorded(d.path()), &args[1..]);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert!(!d.path().join("cache").exists(), "no file of its own");
    // As a drop-in through KWB_NVCC_REAL, the same.
    let out = Command::new(HOOK)
        .args(&args[1..])
        .current_dir(d.path())
        .env("KWB_NVCC_REAL", d.path().join("bin/nvcc"))
        .env_remove("KWB_TRACE")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(recorded(d.path()), &args[1..]);
}

#[test]
fn enabled_it_compiles_an_instrumented_copy_and_puts_dependencies_back() {
    let d = stand_in();
    let trace = "kernel=gemm_mma_sync;probe=accumulator";
    let r = hook(
        d.path(),
        Some(trace),
        &[
            "nvcc", "-O3", "-MD", "-MF", "g.d", "-c", "gemm.cu", "-o", "g.o",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("gemm.cu: 2 probes"), "{}", r.stderr);
    let args = recorded(d.path());
    assert_eq!(&args[..2], ["-I.", "-DKWB_TRACE"]);
    let copy = args
        .iter()
        .find(|a| a.ends_with("/tu/gemm.cu"))
        .expect("the copy is compiled");
    assert!(copy.starts_with(&d.path().join("cache/nvcc").display().to_string()));
    let text = std::fs::read_to_string(copy).unwrap();
    assert!(text.contains("kwb::enabled"), "probes in the copy");
    assert!(text.contains(&format!(
        "#line 1 \"{}\"",
        d.path().canonicalize().unwrap().join("gemm.cu").display()
    )));
    // The dependency file names the original, not the copy.
    let deps = std::fs::read_to_string(d.path().join("g.d")).unwrap();
    assert!(!deps.contains("/tu/gemm.cu"), "{deps}");
    assert!(
        deps.contains(
            &d.path()
                .canonicalize()
                .unwrap()
                .join("gemm.cu")
                .display()
                .to_string()
        ),
        "{deps}"
    );
    // -MD without -MF: nvcc names the file after the output; it is put back too.
    let r = hook(
        d.path(),
        Some(trace),
        &["nvcc", "-MD", "-c", "gemm.cu", "-o", "k2.o"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let deps = std::fs::read_to_string(d.path().join("k2.d")).unwrap();
    assert!(!deps.contains("/tu/gemm.cu"), "{deps}");
    // A second build (other flags, same source, spec and include folders) compiles
    // the same cached copy.
    let again = hook(d.path(), Some(trace), &["nvcc", "-O2", "-c", "gemm.cu"]);
    assert_eq!(again.code, 0);
    assert!(recorded(d.path()).contains(copy));
    assert_eq!(
        std::fs::read_dir(d.path().join("cache/nvcc"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn what_it_cannot_instrument_builds_without_probes_and_the_rest_passes_through() {
    let d = stand_in();
    let trace = "kernel=gemm_mma_sync";
    // A source without the kernel compiles untouched.
    let r = hook(d.path(), Some(trace), &["nvcc", "-c", "plain.cu"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(recorded(d.path()), ["-c", "plain.cu"]);
    // Dependency-only and preprocess-only commands pass through.
    for mode in ["-M", "-E"] {
        let r = hook(d.path(), Some(trace), &["nvcc", mode, "gemm.cu"]);
        assert_eq!(r.code, 0);
        assert_eq!(recorded(d.path()), [mode, "gemm.cu"]);
    }
    // A source that has the kernel but nothing to probe in it, and a bad spec: the
    // original compiles, with a warning that says why; with KWB_TRACE_STRICT=1 the
    // build fails instead.
    for (spec, source, why) in [
        (trace, "user.cu", "names kernel `gemm_mma_sync`"),
        (
            "kernel=k;colour=red",
            "gemm.cu",
            "`colour` is not a KWB_TRACE key",
        ),
    ] {
        let r = hook(d.path(), Some(spec), &["nvcc", "-c", source]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stderr.contains(why), "{}", r.stderr);
        assert!(r.stderr.contains("without probes"), "{}", r.stderr);
        assert_eq!(recorded(d.path()), ["-c", source]);
        let r = hook_strict(d.path(), spec, &["nvcc", "-c", source]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains(why), "{}", r.stderr);
    }
    // A missing real nvcc, no nvcc named: refused with a message.
    let r = hook(d.path(), None, &["-c", "gemm.cu"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("which nvcc?"), "{}", r.stderr);
    let r = hook(d.path(), None, &["/no/such/nvcc", "-c", "gemm.cu"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("is not there"), "{}", r.stderr);
    // A real nvcc that is kwb-nvcc itself.
    let out = Command::new(HOOK)
        .args(["-c", "gemm.cu"])
        .current_dir(d.path())
        .env("KWB_NVCC_REAL", HOOK)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is kwb-nvcc itself"));
}

#[test]
fn a_traced_compile_that_fails_gives_way_to_the_original() {
    let d = stand_in();
    // A stand-in nvcc that fails on the instrumented copy (a path in the cache) and
    // records the arguments of any other compile.
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *{0}/cache/*) echo 'copy.cu(7): error: no suitable conversion' >&2; exit 1;; esac\n\
         printf '%s\\n' \"$@\" > {0}/args.txt\nexit 0\n",
        d.path().display()
    );
    std::fs::write(d.path().join("bin/nvcc"), script).unwrap();
    let args = ["nvcc", "-c", "gemm.cu", "-o", "g.o"];
    let r = hook(d.path(), Some("kernel=gemm_mma_sync"), &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(recorded(d.path()), &args[1..], "the original command ran");
    assert!(
        r.stderr.contains("the traced compile failed (exit 1)")
            && r.stderr.contains("no suitable conversion")
            && r.stderr.contains("without probes"),
        "{}",
        r.stderr
    );
    let log = r
        .stderr
        .split("all of its output: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the log's path");
    assert!(
        std::fs::read_to_string(log)
            .unwrap()
            .contains("no suitable conversion")
    );
    std::fs::remove_file(d.path().join("args.txt")).unwrap();
    let r = hook_strict(d.path(), "kernel=gemm_mma_sync", &args);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(!d.path().join("args.txt").exists(), "no compile went on");
}

/// `make -C out -f tests/hook/make/Makefile` with `NVCC` and, when given, `KWB_TRACE`.
fn make(out: &Path, nvcc: &str, trace: Option<&str>, cache: &Path) -> std::process::Output {
    make_with(out, nvcc, trace, cache, false)
}

/// [`make`], with `KWB_TRACE_STRICT=1` when `strict`.
fn make_with(
    out: &Path,
    nvcc: &str,
    trace: Option<&str>,
    cache: &Path,
    strict: bool,
) -> std::process::Output {
    std::fs::create_dir_all(out).unwrap();
    let mut c = Command::new("make");
    c.arg("-C")
        .arg(out)
        .arg("-f")
        .arg(root().join("tests/hook/make/Makefile"))
        .arg(format!("ROOT={}", root().display()))
        .arg(format!("NVCC={nvcc}"))
        .args(["-j2", "--no-print-directory"])
        .env("KWB_CACHE_DIR", cache)
        .env_remove("KWB_TRACE")
        .env_remove("KWB_TRACE_STRICT");
    if let Some(t) = trace {
        c.env("KWB_TRACE", t);
    }
    if strict {
        c.env("KWB_TRACE_STRICT", "1");
    }
    c.output().unwrap()
}

#[test]
fn a_makefile_build_is_the_plain_build_when_disabled_and_carries_probes_when_enabled() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let env = kwb_toolchain::Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let nvcc = toolchain.nvcc.display().to_string();
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let sass =
        |o: &Path| kwb_toolchain::sass_instructions(&kwb_toolchain::sass(&toolchain, o).unwrap());
    let plain = make(&d.path().join("plain"), &nvcc, None, &cache);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let launcher = format!("{HOOK} {nvcc}");
    let off = make(&d.path().join("off"), &launcher, None, &cache);
    assert!(
        off.status.success(),
        "{}",
        String::from_utf8_lossy(&off.stderr)
    );
    assert!(!cache.exists(), "disabled, the hook writes nothing");
    for o in ["gemm.o", "scalar.o"] {
        assert_eq!(
            sass(&d.path().join("plain").join(o)),
            sass(&d.path().join("off").join(o)),
            "{o}: disabled, the same SASS as the plain build"
        );
    }
    let on = make(
        &d.path().join("on"),
        &launcher,
        Some("kernel=gemm_mma_sync;probe=accumulator,epilogue"),
        &cache,
    );
    let stderr = String::from_utf8_lossy(&on.stderr);
    assert!(on.status.success(), "{stderr}");
    assert!(
        stderr.contains("gemm.cu:") && stderr.contains("probes"),
        "{stderr}"
    );
    assert_ne!(
        sass(&d.path().join("plain/gemm.o")),
        sass(&d.path().join("on/gemm.o")),
        "enabled, the targeted kernel carries probes"
    );
    assert_eq!(
        sass(&d.path().join("plain/scalar.o")),
        sass(&d.path().join("on/scalar.o")),
        "the TU without the kernel is untouched"
    );
    let deps = std::fs::read_to_string(d.path().join("on/gemm.d")).unwrap();
    assert!(
        deps.contains(
            &root()
                .join("kernels/mma_sync/gemm.cu")
                .display()
                .to_string()
        ),
        "{deps}"
    );
    assert!(!deps.contains("/tu/"), "{deps}");
    // A bad spec builds the plain objects, saying why; with KWB_TRACE_STRICT=1 it fails
    // the build.
    let spec = Some("kernel=gemm_mma_sync;colour=red");
    let bad = make(&d.path().join("bad"), &launcher, spec, &cache);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(bad.status.success(), "{stderr}");
    assert!(stderr.contains("not a KWB_TRACE key") && stderr.contains("without probes"));
    assert_eq!(
        sass(&d.path().join("plain/gemm.o")),
        sass(&d.path().join("bad/gemm.o")),
        "the original compiled"
    );
    let strict = make_with(&d.path().join("strict"), &launcher, spec, &cache, true);
    assert!(!strict.status.success());
    assert!(String::from_utf8_lossy(&strict.stderr).contains("not a KWB_TRACE key"));
}

#[test]
fn a_cmake_build_with_the_launcher_is_the_plain_build_when_disabled() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let env = kwb_toolchain::Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let cmake =
        kwb_toolchain::cache::cmake(&env).expect("the pinned cmake: run `cargo xtask setup`");
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    // Configures and builds the project into `name`; the object files' SASS.
    let build = |name: &str, launcher: bool, trace: Option<&str>| {
        let out = d.path().join(name);
        let mut configure = Command::new(&cmake);
        configure
            .arg("-S")
            .arg(root().join("tests/hook/cmake"))
            .arg("-B")
            .arg(&out)
            .arg(format!("-DKWB_ROOT={}", root().display()))
            .arg(format!(
                "-DCMAKE_CUDA_COMPILER={}",
                toolchain.nvcc.display()
            ));
        if launcher {
            configure.arg(format!("-DCMAKE_CUDA_COMPILER_LAUNCHER={HOOK}"));
        }
        let c = configure
            .env_remove("KWB_TRACE")
            .env("KWB_CACHE_DIR", &cache)
            .output()
            .unwrap();
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
        let mut b = Command::new(&cmake);
        b.arg("--build")
            .arg(&out)
            .args(["-j", "2"])
            .env("KWB_CACHE_DIR", &cache)
            .env_remove("KWB_TRACE");
        if let Some(t) = trace {
            b.env("KWB_TRACE", t);
        }
        let built = b.output().unwrap();
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stdout)
        );
        let object = |rel: &str| {
            let o = out
                .join("CMakeFiles/kernels.dir")
                .join(root().strip_prefix("/").unwrap())
                .join(rel);
            kwb_toolchain::sass_instructions(&kwb_toolchain::sass(&toolchain, &o).unwrap())
        };
        (
            object("kernels/mma_sync/gemm.cu.o"),
            object("fixtures/sites/scalar_fma.cu.o"),
            String::from_utf8_lossy(&built.stderr).into_owned(),
        )
    };
    let plain = build("plain", false, None);
    let off = build("off", true, None);
    assert_eq!(
        (&plain.0, &plain.1),
        (&off.0, &off.1),
        "disabled: the plain build's SASS"
    );
    assert!(!cache.exists(), "disabled, the hook writes nothing");
    let on = build("on", true, Some("kernel=gemm_mma_sync;probe=accumulator"));
    assert!(on.2.contains("probes"), "{}", on.2);
    assert_ne!(plain.0, on.0, "enabled: the targeted TU carries probes");
    assert_eq!(plain.1, on.1, "the other TU is untouched");
}

#[test]
fn parallel_builds_of_one_source_share_one_complete_entry() {
    let d = stand_in();
    let trace = "kernel=gemm_mma_sync;probe=accumulator";
    let path = format!(
        "{}:{}",
        d.path().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Eight builds of the same source at once (as `make -j8` of one file into several
    // objects): every one succeeds and compiles a complete copy.
    let children: Vec<_> = (0..8)
        .map(|i| {
            Command::new(HOOK)
                .args(["nvcc", "-c", "gemm.cu", "-o", &format!("g{i}.o")])
                .current_dir(d.path())
                .env("PATH", &path)
                .env("KWB_CACHE_DIR", d.path().join("cache"))
                .env("KWB_TRACE", trace)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let entries: Vec<_> = std::fs::read_dir(d.path().join("cache/nvcc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "one entry, no staging folder left: {entries:?}"
    );
    let copy = entries[0].join("tu/gemm.cu");
    assert!(
        std::fs::read_to_string(copy)
            .unwrap()
            .contains("kwb::enabled")
    );
    assert!(entries[0].join("sites.txt").is_file());
}

/// Two traced units in one program (tests/hook/units): through kwb-nvcc each unit is
/// named (KWB_TRACE_UNIT), so its trace buffer and host side are its own symbols, and
/// the program links. (On a GPU each unit writes its own trace file:
/// docs/results/hook-units.md.)
#[test]
fn an_automatic_floor_it_cannot_measure_builds_without_one_and_says_why() {
    // The stand-in nvcc prints no ptxas report: no register count to hold the trace to.
    let d = stand_in();
    let r = hook(
        d.path(),
        Some("kernel=gemm_mma_sync;max-regs=auto"),
        &["nvcc", "-O3", "-c", "gemm.cu", "-o", "g.o"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("ptxas reported no kernel of the original")
            && r.stderr
                .contains("the trace builds without an occupancy floor"),
        "{}",
        r.stderr
    );
    let args = recorded(d.path());
    assert!(args.iter().any(|a| a.ends_with("/tu/gemm.cu")), "{args:?}");
    assert!(
        !args.iter().any(|a| a.contains("KWB_TRACE_MAX_REGS")),
        "{args:?}"
    );
    // Two files in one command: no side compile, said so.
    let r = hook(
        d.path(),
        Some("kernel=gemm_mma_sync;max-regs=auto"),
        &["nvcc", "-c", "gemm.cu", "plain.cu"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("give `max-regs=N`"), "{}", r.stderr);
}

#[test]
fn an_automatic_floor_holds_the_trace_to_the_originals_registers() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let env = kwb_toolchain::Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let d = tempfile::tempdir().unwrap();
    let object = d.path().join("g.o");
    let out = Command::new(HOOK)
        .arg(&toolchain.nvcc)
        .args(["-std=c++17", "-arch=sm_90a", "-O2", "-c", "-I"])
        .arg(root().join("kernels/common"))
        .arg(root().join("kernels/mma_sync/gemm.cu"))
        .arg("-o")
        .arg(&object)
        .env("KWB_CACHE_DIR", d.path().join("cache"))
        .env("KWB_TRACE", "max-regs=auto")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(object.is_file());
    // The original's count, read from ptxas, set as the floor; ptxas's own lines,
    // which the user did not ask for, kept out of the build's output.
    let floor = stderr
        .lines()
        .find_map(|l| l.strip_prefix("kwb-nvcc: occupancy floor: KWB_TRACE_MAX_REGS="))
        .unwrap_or_else(|| panic!("no floor line: {stderr}"));
    let registers: u32 = floor.split_whitespace().next().unwrap().parse().unwrap();
    assert!((1..=255).contains(&registers), "{floor}");
    assert!(!stderr.contains("ptxas info"), "{stderr}");
}

#[test]
fn two_traced_units_link_into_one_program_each_with_its_own_buffer() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let env = kwb_toolchain::Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let nvcc = toolchain.nvcc.display().to_string();
    let d = tempfile::tempdir().unwrap();
    let units = root().join("tests/hook/units");
    let mut objects = Vec::new();
    for unit in ["gemm_a", "gemm_b"] {
        let object = d.path().join(format!("{unit}.o"));
        let out = Command::new(HOOK)
            .arg(&nvcc)
            .args(["-std=c++17", "-arch=sm_90a", "-O2", "-c"])
            .arg(units.join(format!("{unit}.cu")))
            .arg("-o")
            .arg(&object)
            .env("KWB_CACHE_DIR", d.path().join("cache"))
            .env("KWB_TRACE", "probe=accumulator,epilogue;cta=all")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{unit}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        objects.push(object);
    }
    let program = d.path().join("units");
    let out = Command::new(&nvcc)
        .args(["-arch=sm_90a"])
        .args(&objects)
        .arg(units.join("main.cu"))
        .arg("-o")
        .arg(&program)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "link: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each object holds its own buffer, in its unit's namespace.
    let names: Vec<String> = objects
        .iter()
        .map(|o| {
            let nm = Command::new("nm").arg("-C").arg(o).output().unwrap();
            let text = String::from_utf8_lossy(&nm.stdout).into_owned();
            text.lines()
                .find(|l| l.ends_with("::trace_records"))
                .unwrap_or_else(|| panic!("{}: no trace buffer\n{text}", o.display()))
                .rsplit(' ')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(names[0].starts_with("kwb::kwb_u"), "{names:?}");
    assert_ne!(names[0], names[1]);
}
