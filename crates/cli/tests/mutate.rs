//! `kwb mutate` end to end: the manifest it writes, and what it refuses.

use std::process::Command;

fn kwb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kwb"))
}

fn kernel() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels/mma_sync/gemm.cu")
}

#[test]
fn mutants_are_written_with_their_manifest_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("mutants");
    let run = kwb()
        .args([
            "mutate",
            "--kernel",
            "gemm_mma_sync",
            "--stage",
            "mma,epilogue",
            "-o",
        ])
        .arg(&out)
        .arg(kernel())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("mutants.json")).unwrap()).unwrap();
    let mutants = manifest["mutants"].as_array().unwrap();
    assert!(mutants.len() >= 5, "{manifest}");
    let original = std::fs::read_to_string(kernel()).unwrap();
    for m in mutants {
        assert!(
            matches!(m["stage"].as_str(), Some("mma" | "epilogue")),
            "{m}"
        );
        let text = std::fs::read_to_string(out.join(m["file"].as_str().unwrap())).unwrap();
        assert_ne!(text, original, "{m}");
        assert!(m["diff"].as_str().unwrap().starts_with('-'), "{m}");
    }
    // The source is only read; the folder holds the mutants and the manifest alone.
    assert_eq!(std::fs::read_to_string(kernel()).unwrap(), original);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), mutants.len() + 1);
    // A second run replaces the folder it wrote.
    let again = kwb()
        .args(["mutate", "--list", "-o"])
        .arg(&out)
        .arg(kernel())
        .output()
        .unwrap();
    assert!(
        !again.status.success(),
        "--list writes nothing: it conflicts with -o"
    );
}

#[test]
fn a_stage_without_a_site_and_a_foreign_folder_are_refused() {
    let run = kwb()
        .args([
            "mutate",
            "--kernel",
            "gemm_mma_sync",
            "--stage",
            "descriptor",
            "--list",
        ])
        .arg(kernel())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("no descriptor site"));
    let unknown = kwb()
        .args(["mutate", "--kernel", "nope", "--list"])
        .arg(kernel())
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(3));
    let typo = kwb()
        .args(["mutate", "--operator", "ab-swaped", "--list"])
        .arg(kernel())
        .output()
        .unwrap();
    assert_eq!(typo.status.code(), Some(2));
    let said = String::from_utf8_lossy(&typo.stderr);
    assert!(
        said.contains("`ab-swaped` is not an operator") && said.contains("k-tile-dropped"),
        "{said}"
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("mine.txt"), "keep").unwrap();
    let foreign = kwb()
        .args(["mutate", "-o"])
        .arg(tmp.path())
        .arg(kernel())
        .output()
        .unwrap();
    assert_eq!(foreign.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("mine.txt")).unwrap(),
        "keep"
    );
}

/// A copy of the bundled kernel in a project folder of its own, beside a file the
/// project keeps.
fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::copy(kernel(), proj.join("gemm.cu")).unwrap();
    std::fs::write(proj.join("data.txt"), "kept").unwrap();
    (tmp, proj)
}

fn manifest(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("mutants.json")).unwrap()).unwrap()
}

#[test]
fn the_test_runs_on_each_mutant_in_a_copy_and_the_survivors_are_listed() {
    let (tmp, proj) = project();
    let out = tmp.path().join("mutants");
    // A test that catches alpha applied twice and nothing else; it leaves a file
    // where it runs, which must land in the copy, not in the project.
    let test = "touch made-by-test; test -f data.txt || exit 9; \
                if grep -q 'alpha \\* alpha' \"$KWB_MUTANT_FILE\"; then exit 1; fi; exit 0";
    let run = kwb()
        .args([
            "mutate",
            "--kernel",
            "gemm_mma_sync",
            "--stage",
            "mma,epilogue",
        ])
        .args(["--test", test, "-o"])
        .arg(&out)
        .arg(proj.join("gemm.cu"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(5),
        "survivors exit 5\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let m = manifest(&out);
    let mutants = m["mutants"].as_array().unwrap();
    let mut killed = 0;
    for mutant in mutants {
        let outcome = mutant["test"]["outcome"].as_str().unwrap();
        if mutant["operator"] == "alpha-twice" {
            assert_eq!(outcome, "killed", "{mutant}");
            assert_eq!(mutant["test"]["exit"], 1, "{mutant}");
            killed += 1;
        } else {
            assert_eq!(outcome, "survived", "{mutant}");
        }
    }
    assert!(killed >= 1, "{m}");
    assert!(m["test"]["seconds"].as_f64().is_some(), "{m}");
    assert!(stdout.contains("survivors:"), "{stdout}");
    assert!(stdout.contains("epilogue"), "{stdout}");
    // The project is as it was: its kernel unchanged and nothing written into it.
    assert_eq!(
        std::fs::read_to_string(proj.join("gemm.cu")).unwrap(),
        std::fs::read_to_string(kernel()).unwrap()
    );
    assert!(!proj.join("made-by-test").exists());
    assert_eq!(std::fs::read_dir(&proj).unwrap().count(), 2);
}

#[test]
fn a_test_that_fails_on_the_original_is_refused_and_one_that_hangs_is_stopped() {
    let (tmp, proj) = project();
    let out = tmp.path().join("mutants");
    let failing = kwb()
        .args([
            "mutate",
            "--stage",
            "mma",
            "--test",
            "echo broken build; exit 3",
            "-o",
        ])
        .arg(&out)
        .arg(proj.join("gemm.cu"))
        .output()
        .unwrap();
    assert_eq!(failing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&failing.stderr);
    assert!(stderr.contains("fails on the original"), "{stderr}");
    assert!(stderr.contains("broken build"), "{stderr}");
    // Every mutant sleeps past the limit: each is stopped and counted as killed.
    let hanging = kwb()
        .args(["mutate", "--stage", "mma", "--timeout", "1"])
        .args([
            "--test",
            "if [ \"$KWB_MUTANT\" != 0 ]; then sleep 30; fi",
            "-o",
        ])
        .arg(&out)
        .arg(proj.join("gemm.cu"))
        .output()
        .unwrap();
    assert_eq!(
        hanging.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&hanging.stderr)
    );
    for mutant in manifest(&out)["mutants"].as_array().unwrap() {
        assert_eq!(mutant["test"]["outcome"], "timeout", "{mutant}");
        assert!(
            mutant["test"]["seconds"].as_f64().unwrap() < 10.0,
            "{mutant}"
        );
    }
}

#[test]
fn a_header_is_written_below_its_include_root_and_compiled_only_through_a_unit() {
    let tmp = tempfile::tempdir().unwrap();
    let include = tmp.path().join("include");
    std::fs::create_dir_all(include.join("lib")).unwrap();
    let header = include.join("lib/gemm.cuh");
    std::fs::copy(kernel(), &header).unwrap();
    let out = tmp.path().join("mutants");
    let run = kwb()
        .args(["mutate", "--stage", "mma", "--include-root"])
        .arg(&include)
        .arg("-o")
        .arg(&out)
        .arg(&header)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for mutant in manifest(&out)["mutants"].as_array().unwrap() {
        let overlay = mutant["overlay"].as_str().unwrap();
        let file = mutant["file"].as_str().unwrap();
        assert_eq!(file, format!("{overlay}/lib/gemm.cuh"), "{mutant}");
        assert!(out.join(file).is_file());
    }
    // A header compiles through the file that includes it.
    let alone = kwb()
        .args(["mutate", "--compile", "-o"])
        .arg(tmp.path().join("other"))
        .arg(&header)
        .output()
        .unwrap();
    assert_eq!(alone.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&alone.stderr).contains("--unit"));
    // An include root that does not hold the file.
    let outside = kwb()
        .args(["mutate", "--include-root"])
        .arg(tmp.path().join("other-root"))
        .arg("-o")
        .arg(tmp.path().join("other"))
        .arg(&header)
        .output()
        .unwrap();
    assert_eq!(outside.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&outside.stderr).contains("not under --include-root"));
    assert!(!tmp.path().join("other").exists());
}

/// A TMA map's encode is host code: its mutants leave the SASS as it was, and are
/// kept when the whole file (host and device) compiles. Needs nvcc:
/// `KWB_RUN_SLOW_TESTS=1`, as `cargo xtask test` sets it.
#[test]
fn descriptor_mutants_compile_whole_and_are_not_judged_by_sass() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("mutants");
    let run = kwb()
        .args(["mutate", "--stage", "descriptor", "--compile", "-I"])
        .arg(root.join("kernels/common"))
        .arg("-o")
        .arg(&out)
        .arg(root.join("kernels/tma_wgmma_sm90/gemm.cu"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let manifest = manifest(&out);
    let kept = manifest["mutants"].as_array().unwrap();
    assert!(kept.len() >= 3, "{manifest}");
    assert!(
        kept.iter().all(|m| m["stage"] == "descriptor"),
        "{manifest}"
    );
    let equivalent = manifest["dropped"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d.to_string().contains("equivalent"))
        .count();
    assert_eq!(equivalent, 0, "{manifest}");
}
