//! Track B on code we did not write: every program of `tests/through.toml` (CuTe
//! tutorials and CUTLASS examples of the nvidia-cutlass package) and of the second
//! suite (`kernels/styles/styles.toml`, correct and with each planted defect), extracted
//! as a user asks (`--kernel` and the flags the manifest gives), takes the route the
//! manifest says and its reproducer compiles (device pass, `-cubin`: the front end
//! checks the host entry and the launcher's instantiations too). The GPU run of the
//! same set is `cargo xtask gpu-styles`. CI checks a sample (units not marked `ci =
//! false`, each program of the second suite built correct); `cargo xtask sets` checks
//! the whole set. Needs nvcc and the packages `cargo xtask
//! setup` installs: runs when `KWB_RUN_SLOW_TESTS=1`, as `cargo xtask test` sets it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kwb_extract::{Request, extract};
use kwb_tests::{cutlass_source, repo_root, whole_sets};
use kwb_toolchain::{CompileFlags, Env, Toolchain};

struct Unit {
    name: String,
    source: PathBuf,
    kernel: String,
    flags: Vec<String>,
    defines: Vec<(String, String)>,
    /// `through` or `alone`, where the manifest says.
    route: Option<String>,
    includes: Vec<PathBuf>,
}

fn strings(v: Option<&toml::Value>) -> Vec<String> {
    v.and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn units(cutlass: &Path, corpus: Option<&kwb_toolchain::cache::Corpus>) -> Vec<Unit> {
    let includes = vec![
        cutlass.join("include"),
        cutlass.join("tools/util/include"),
        cutlass.join("examples/common"),
    ];
    // flashinfer's include folders and defines, as tests/unseen.toml gives its JIT's.
    let unseen: toml::Value =
        toml::from_str(&std::fs::read_to_string(repo_root().join("tests/unseen.toml")).unwrap())
            .unwrap();
    let flashinfer = &unseen["roots"]["flashinfer"];
    let mut out = Vec::new();
    let text = std::fs::read_to_string(repo_root().join("tests/through.toml")).unwrap();
    let manifest: toml::Value = toml::from_str(&text).unwrap();
    for u in manifest["unit"].as_array().unwrap() {
        if !whole_sets() && u.get("ci").and_then(toml::Value::as_bool) == Some(false) {
            continue;
        }
        let path = u["path"].as_str().unwrap();
        let (source, includes, defines) = match (u.get("root").and_then(|r| r.as_str()), corpus) {
            (Some("flashinfer"), Some(c)) => {
                let mut inc: Vec<PathBuf> = strings(flashinfer.get("includes"))
                    .iter()
                    .map(|i| c.flashinfer.join(i))
                    .collect();
                inc.push(c.tvm_ffi_include.clone());
                let defines = strings(flashinfer.get("defines"))
                    .into_iter()
                    .map(|d| match d.split_once('=') {
                        Some((n, v)) => (n.to_owned(), v.to_owned()),
                        None => (d, "1".to_owned()),
                    })
                    .collect();
                (c.flashinfer.join(path), inc, defines)
            }
            (Some("flashinfer"), None) => continue,
            _ => (cutlass.join(path), includes.clone(), Vec::new()),
        };
        out.push(Unit {
            name: path.to_owned(),
            source,
            kernel: u["kernel"].as_str().unwrap().to_owned(),
            flags: strings(u.get("flags")),
            defines,
            route: u.get("route").and_then(|r| r.as_str()).map(str::to_owned),
            includes,
        });
    }
    let styles = repo_root().join("kernels/styles");
    let text = std::fs::read_to_string(styles.join("styles.toml")).unwrap();
    let manifest: toml::Value = toml::from_str(&text).unwrap();
    for p in manifest["program"].as_array().unwrap() {
        let source = p["source"].as_str().unwrap();
        // CI builds each program correct; the whole set, with each planted defect too
        // (the same extraction, another body).
        let defects = std::iter::once("none".to_owned()).chain(
            p.get("defect")
                .and_then(toml::Value::as_array)
                .into_iter()
                .flatten()
                .filter(|_| whole_sets())
                .map(|d| d["name"].as_str().unwrap().to_owned()),
        );
        for defect in defects {
            out.push(Unit {
                name: format!("kernels/styles/{source} ({defect})"),
                source: styles.join(source),
                kernel: p["kernel"].as_str().unwrap().to_owned(),
                flags: strings(p.get("extract_flags")),
                defines: vec![("KWB_DEFECT".to_owned(), defect)],
                route: None,
                includes: includes.clone(),
            });
        }
    }
    out
}

/// The request `kwb-extract FILE --kernel K FLAGS -D…` makes.
fn request(u: &Unit) -> Request {
    let mut r = Request {
        kernel: Some(u.kernel.clone()),
        defines: u.defines.clone(),
        file_name: u.source.file_name().unwrap().to_string_lossy().into_owned(),
        ..Request::default()
    };
    let mut flags = u.flags.iter();
    while let Some(f) = flags.next() {
        let value = flags
            .next()
            .unwrap_or_else(|| panic!("{}: {f} without a value", u.name));
        match f.as_str() {
            "--bind" => {
                let (n, v) = value.split_once('=').unwrap();
                r.binds.push((n.to_owned(), v.to_owned()));
            }
            "--layout" => r.layout = Some(value.clone()),
            // The program's own build flag: the compile below passes it.
            "--nvcc-flag" => {}
            other => panic!("{}: flag {other} is not one this test passes on", u.name),
        }
    }
    r
}

fn check(u: &Unit, toolchain: &Toolchain, dir: &Path) -> Result<String, String> {
    let start = Instant::now();
    let text = std::fs::read_to_string(&u.source).map_err(|e| format!("{}: {e}", u.name))?;
    let x = extract(&text, &request(u)).map_err(|e| format!("{}: {e}", u.name))?;
    let route = if x.host.through.is_some() {
        "through"
    } else {
        "alone"
    };
    if let Some(want) = &u.route
        && want != route
    {
        return Err(format!("{}: took the route {route}, not {want}", u.name));
    }
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let repro = dir.join("repro.cu");
    std::fs::write(&repro, &x.repro).map_err(|e| e.to_string())?;
    let mut includes = vec![u.source.parent().unwrap().to_path_buf()];
    includes.extend(u.includes.iter().cloned());
    let flags = CompileFlags {
        arch: "sm_90a".to_owned(),
        includes,
        defines: u.defines.iter().map(|(n, v)| format!("{n}={v}")).collect(),
        extra: u
            .flags
            .windows(2)
            .filter(|w| w[0] == "--nvcc-flag")
            .map(|w| w[1].clone())
            .collect(),
        ..CompileFlags::default()
    };
    kwb_toolchain::compile_cubin(toolchain, &repro, &flags, &dir.join("repro.cubin")).map_err(
        |e| {
            let text = e.to_string();
            let first: Vec<&str> = text
                .lines()
                .filter(|l| l.contains("error"))
                .take(3)
                .collect();
            format!("{} does not compile: {}", u.name, first.join(" | "))
        },
    )?;
    Ok(format!(
        "{}: {route}, compiles, {:.0} s",
        u.name,
        start.elapsed().as_secs_f64()
    ))
}

/// Each refusal of `tests/through.toml` is a diagnostic that says why, never a
/// reproducer that does not compile.
#[test]
fn what_cannot_be_reproduced_is_refused_with_the_reason() {
    let Some(cutlass) = cutlass_source() else {
        return;
    };
    let text = std::fs::read_to_string(repo_root().join("tests/through.toml")).unwrap();
    let manifest: toml::Value = toml::from_str(&text).unwrap();
    for r in manifest["refused"].as_array().unwrap() {
        let path = r["path"].as_str().unwrap();
        let source = std::fs::read_to_string(cutlass.join(path)).unwrap();
        let request = Request {
            kernel: Some(r["kernel"].as_str().unwrap().to_owned()),
            file_name: path.to_owned(),
            ..Request::default()
        };
        match extract(&source, &request) {
            Ok(x) => panic!("{path}: extracted ({})", x.instantiation),
            Err(e) => {
                let message = e.to_string();
                let want = r["message"].as_str().unwrap();
                assert!(message.contains(want), "{path}: {message}");
                assert!(miette::Diagnostic::help(&e).is_some(), "{path}: no help");
            }
        }
    }
}

#[test]
fn reproducers_of_code_we_did_not_write_compile() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let Some(cutlass) = cutlass_source() else {
        return;
    };
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let corpus = kwb_toolchain::cache::corpus(&env);
    let units = units(&cutlass, corpus.as_ref());
    let dir = tempfile::tempdir().unwrap();
    let results =
        kwb_tests::check_all(&units, dir.path(), |unit, dir| check(unit, &toolchain, dir));
    // Units silently dropped (a manifest or package that moved) fail the check too.
    let wanted = match (corpus.is_some(), whole_sets()) {
        (true, true) => 43,
        (true, false) => 17,
        (false, true) => 42,
        (false, false) => 16,
    };
    assert!(results.len() >= wanted, "{} units", results.len());
}

/// The capture section's test of a launch's symbol, compiled on the host and run on
/// mangled names as the driver gives them: the kernel in a namespace, as a template
/// instance, and not another kernel whose name holds it or a template argument
/// spelling it.
#[test]
fn the_map_capture_names_the_kernel_by_its_symbol() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let source = r#"#include <cuda.h>
namespace ops {
__global__ void tma_gemm(const __grid_constant__ CUtensorMap map_a, float* D) {}
}
static CUtensorMap make_map(const void* p, int rows, int cols) { CUtensorMap m{}; return m; }
int launch(const float* A, const float* B, float* D, int M, int N, int K, cudaStream_t s) {
  CUtensorMap a = make_map(A, M, K);
  ops::tma_gemm<<<dim3(N / 64, M / 64), 128, 0, s>>>(a, D);
  return 0;
}
int main() { return launch(nullptr, nullptr, nullptr, 128, 128, 64, 0); }
"#;
    let request = Request {
        kernel: Some("tma_gemm".to_owned()),
        file_name: "maps.cu".to_owned(),
        ..Request::default()
    };
    let repro = extract(source, &request).unwrap().repro;
    let start = repro.find("static bool kwb_is_kernel").unwrap();
    let end = repro.find("static void kwb_capture").unwrap();
    let cases = [
        ("_ZN3ops8tma_gemmE14CUtensorMap_stPf", true),
        ("_Z8tma_gemm14CUtensorMap_st", true),
        ("_ZN3ops8tma_gemmILi128EEEvv", true),
        ("_ZN4cute8tma_gemmIiN3foo3barIiEEEEvPKT_", true),
        ("_Z9tma_gemm214CUtensorMap_st", false),
        ("_Z6kernelI8tma_gemmEvv", false),
        ("_Z9xtma_gemmv", false),
    ];
    let checks: String = cases
        .iter()
        .map(|(name, want)| {
            format!("  if (kwb_is_kernel(\"{name}\") != {want}) {{ std::printf(\"{name}\\n\"); bad = 1; }}\n")
        })
        .collect();
    let program = format!(
        "#include <cxxabi.h>\n#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n{}\nint main() {{\n  int bad = 0;\n{checks}  return bad;\n}}\n",
        &repro[start..end]
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("names.cpp"), program).unwrap();
    let built = std::process::Command::new("c++")
        .current_dir(dir.path())
        .args(["-std=c++17", "names.cpp", "-o", "names"])
        .status()
        .expect("the host C++ compiler nvcc uses runs");
    assert!(built.success());
    let ran = std::process::Command::new(dir.path().join("names"))
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "misnamed: {}",
        String::from_utf8_lossy(&ran.stdout)
    );
}
