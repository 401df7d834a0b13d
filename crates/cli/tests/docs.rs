//! Man pages and shell completions, generated from the binaries' own clap
//! definitions, and kwb-instrument's `--json`.

use std::process::Command;

fn kwb(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kwb"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("kwb runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn completions_for_every_binary_and_shell() {
    let dir = tempfile::tempdir().unwrap();
    for (bin, flag) in [
        ("kwb", "ladder"),
        ("kwb-instrument", "overlay"),
        ("kwb-extract", "flags-from"),
    ] {
        for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
            let (code, out, err) = kwb(dir.path(), &["completions", shell, "--bin", bin]);
            assert_eq!(code, 0, "{bin} {shell}: {err}");
            assert!(out.contains(bin), "{bin} {shell}");
            assert!(out.contains(flag), "{bin} {shell} lacks {flag}");
        }
    }
    let (code, _, err) = kwb(dir.path(), &["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn man_pages_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = kwb(dir.path(), &["man", "-o", "man/man1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("wrote 18 man pages in man/man1"), "{out}");
    let page =
        |name: &str| std::fs::read_to_string(dir.path().join("man/man1").join(name)).unwrap();
    assert!(page("kwb.1").contains(".TH kwb 1"));
    assert!(page("kwb-run.1").contains("ladder"));
    assert!(page("kwb-diagnose.1").contains("trace"));
    assert!(page("kwb-ladder-check.1").contains("tensor"));
    assert!(page("kwb-instrument.1").contains("overlay"));
    assert!(page("kwb-extract.1").contains("compile"));
    assert!(page("kwb-nvcc.1").contains("KWB_TRACE"));
    assert!(page("kwb-mutate.1").contains("stage"));
    // The hidden worker has none.
    assert!(!dir.path().join("man/man1/kwb-run-worker.1").exists());
    // A folder that cannot be made: exit 2, nothing written.
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let (code, _, err) = kwb(dir.path(), &["man", "-o", "file/man"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot write into file/man"), "{err}");
}

#[test]
fn instrument_json_lists_the_probes_of_every_file_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_kwb-instrument"))
        .current_dir(dir.path())
        .arg(root.join("kernels/mma_sync/gemm.cu"))
        .args([
            "-o",
            "traced.cu",
            "--json",
            "--probe",
            "accumulator,epilogue",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0]["path"], "traced.cu");
    let probes = files[0]["probes"].as_array().unwrap();
    assert!(!probes.is_empty());
    for (i, p) in probes.iter().enumerate() {
        assert_eq!(p["id"], i as u64);
        assert_eq!(p["kernel"], "gemm_mma_sync");
        assert!(p["line"].as_u64().unwrap() > 0);
    }
    // The human list stays on stderr.
    assert!(String::from_utf8_lossy(&out.stderr).contains("probe 0:"));
}
