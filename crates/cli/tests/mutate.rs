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
