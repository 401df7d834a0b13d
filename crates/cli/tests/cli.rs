//! End-to-end tests of the `kwb` binary: unreadable and odd inputs, exit codes, the
//! `--json` shape, user patterns, the bundled fixtures and `parse-stats`.
//!
//! Every file a test creates lives in its own `tempfile::TempDir`; the binary runs with
//! that folder as its working directory, so most messages name files by relative path.
//! Exit codes are the README's: 0 ok, 2 bad input, 3 no kernel, 4 partial.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tempfile::TempDir;

/// Success.
const OK: i32 = 0;
/// Bad usage or unreadable input.
const INPUT: i32 = 2;
/// No kernel-like function, or none named by `--kernel`.
const NO_KERNEL: i32 = 3;
/// Results printed, but a reported kernel has syntax error regions.
const PARTIAL: i32 = 4;

/// The site kinds of docs/sites.md, exactly.
const SITE_KINDS: &[&str] = &[
    "mainloop",
    "mma",
    "operand",
    "accumulator",
    "operand-load",
    "epilogue",
    "tma-descriptor",
    "sync",
];

/// A kernel with no sites.
const KERNEL: &str = "__global__ void scale(float* a) { a[threadIdx.x] *= 2.0f; }\n";

/// Three kernels, the last one calling an in-house MMA macro kwb does not know.
const THREE_KERNELS: &str = "\
__global__ void alpha(float* a) { a[0] = 1; }
__global__ void beta(float* a) { a[1] = 2; }
__global__ void gemm(float* a, float* b, float* c) {
  MY_MMA(a, b, c);
}
";

/// Host-only C++: nothing kernel-like.
const HOST_ONLY: &str = "\
#include <vector>

// Sums on the host.
int sum(const std::vector<int>& v) {
  int s = 0;
  for (int x : v) s += x;
  return s;
}

int main() { return sum({1, 2, 3}); }
";

/// A kernel whose loop and body are never closed.
const UNBALANCED: &str = "__global__ void k(float* a) { for (int k = 0; k < 4; ++k) { a[k] = 1;\n";

/// A kernel whose own closing brace is missing (the loop is closed).
const UNCLOSED_BODY: &str = "\
__global__ void k(float* a) {
  for (int k = 0; k < 4; ++k) {
    a[k] = 1;
  }
";

/// Balanced braces, one syntax error inside the kernel.
const ERROR_INSIDE: &str = "\
__global__ void k(float* a) {
  for (int k = 0; k < 4; ++k) {
    a[k] = 1 +;
  }
}
";

/// The user pattern of the README's example: `MY_MMA(…)` is an MMA.
const MY_MMA_PATTERN: &str =
    "((call_expression function: (identifier) @_f) @mma (#eq? @_f \"MY_MMA\"))\n";

/// A finished run of the binary.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `kwb args…` in `dir`, asserting that it exited by itself and did not panic.
fn kwb<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_kwb"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("kwb starts");
    let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8(output.stderr).expect("stderr is UTF-8");
    let shown: Vec<&OsStr> = args.iter().map(AsRef::as_ref).collect();
    assert!(
        !stderr.contains("panicked"),
        "kwb {shown:?} panicked:\n{stderr}"
    );
    let code = match output.status.code() {
        Some(code) => code,
        None => panic!("kwb {shown:?} was killed by a signal:\n{stderr}"),
    };
    Run {
        code,
        stdout,
        stderr,
    }
}

/// Writes `contents` to `dir/name` and returns the path.
fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write a test input");
    path
}

/// Parses stdout as JSON.
fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", run.stdout))
}

/// A trace of fixtures/traces (real traces an H200 wrote).
fn fixture_trace(name: &str) -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/traces"
    ))
    .join(name)
}

/// `kwb trace show` of a fixture trace, run in `dir`, with `flags` (`--json`); it must
/// succeed.
fn trace_show(dir: &Path, name: &str, flags: &[&str]) -> Run {
    let path = fixture_trace(name);
    let mut args: Vec<&OsStr> = vec![OsStr::new("trace"), OsStr::new("show")];
    args.extend(flags.iter().map(OsStr::new));
    args.push(path.as_os_str());
    let run = kwb(dir, &args);
    assert_eq!(run.code, OK, "{}", run.stderr);
    run
}

/// `kwb trace show --json` of a fixture trace, run in `dir`.
fn trace_show_json(dir: &Path, name: &str) -> Value {
    json(&trace_show(dir, name, &["--json"]))
}

/// The keys of a JSON object, sorted.
fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// A bundled fixture, by name under fixtures/sites/.
fn fixture(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/sites")).join(name)
}

/// `text` with regex metacharacters escaped, for an insta filter.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[test]
fn missing_file_is_bad_input() {
    let dir = TempDir::new().unwrap();
    let run = kwb(dir.path(), &["sites", "missing.cu"]);
    assert_eq!(run.code, INPUT);
    assert_eq!(run.stdout, "");
    insta::assert_snapshot!(run.stderr, @r"
    kwb::cli::unreadable

      x cannot read missing.cu: No such file or directory (os error 2)
      `-> No such file or directory (os error 2)
      help: check the path and its permissions
    ");
    assert_eq!(
        kwb(dir.path(), &["sites", "--json", "missing.cu"]).code,
        INPUT
    );
    assert_eq!(kwb(dir.path(), &["dump-tree", "missing.cu"]).code, INPUT);
    write(dir.path(), "q.scm", "(identifier) @id\n");
    assert_eq!(
        kwb(dir.path(), &["query", "q.scm", "missing.cu"]).code,
        INPUT
    );
    write(dir.path(), "k.cu", KERNEL);
    assert_eq!(
        kwb(dir.path(), &["query", "missing.scm", "k.cu"]).code,
        INPUT
    );
    let run = kwb(dir.path(), &["parse-stats", "missing"]);
    assert_eq!(run.code, INPUT);
    assert!(run.stderr.contains("cannot read missing"), "{}", run.stderr);
}

#[test]
fn directory_is_bad_input() {
    let dir = TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("src.cu")).unwrap();
    let run = kwb(dir.path(), &["sites", "src.cu"]);
    assert_eq!(run.code, INPUT);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("src.cu is a directory"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("kwb parse-stats DIR"), "{}", run.stderr);
    let run = kwb(dir.path(), &["dump-tree", "src.cu"]);
    assert_eq!(run.code, INPUT);
    assert!(run.stderr.contains("is a directory"), "{}", run.stderr);
    // parse-stats wants the opposite: a file where a directory belongs is bad input.
    write(dir.path(), "k.cu", KERNEL);
    assert_eq!(kwb(dir.path(), &["parse-stats", "k.cu"]).code, INPUT);
}

#[test]
fn binary_file_is_bad_input() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.o", b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    let run = kwb(dir.path(), &["sites", "k.o"]);
    assert_eq!(run.code, INPUT);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains("k.o looks binary (NUL byte at offset 7)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("kwb::cli::binary"), "{}", run.stderr);
    assert_eq!(kwb(dir.path(), &["sites", "--json", "k.o"]).code, INPUT);
    assert_eq!(kwb(dir.path(), &["dump-tree", "k.o"]).code, INPUT);
    write(dir.path(), "q.scm", "(identifier) @id\n");
    assert_eq!(kwb(dir.path(), &["query", "q.scm", "k.o"]).code, INPUT);
    // A binary pattern file is bad input too.
    write(dir.path(), "k.cu", KERNEL);
    assert_eq!(
        kwb(dir.path(), &["sites", "k.cu", "--patterns", "k.o"]).code,
        INPUT
    );
}

#[test]
fn non_utf8_file_is_bad_input() {
    let dir = TempDir::new().unwrap();
    // "café" in latin-1: 0xE9 on its own is not UTF-8.
    let latin1 = b"// caf\xe9\n__global__ void k(float* a) { a[0] = 1; }\n";
    write(dir.path(), "latin1.cu", latin1);
    let run = kwb(dir.path(), &["sites", "latin1.cu"]);
    assert_eq!(run.code, INPUT);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains("latin1.cu is not UTF-8 (invalid byte at offset 6)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("iconv"), "{}", run.stderr);
    assert_eq!(kwb(dir.path(), &["dump-tree", "latin1.cu"]).code, INPUT);
    write(dir.path(), "q.scm", "(identifier) @id\n");
    assert_eq!(
        kwb(dir.path(), &["query", "q.scm", "latin1.cu"]).code,
        INPUT
    );
}

#[test]
fn empty_and_whitespace_only_files_are_bad_input() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "empty.cu", "");
    write(dir.path(), "blank.cu", " \n\t\r\n  \n");
    for name in ["empty.cu", "blank.cu"] {
        let run = kwb(dir.path(), &["sites", name]);
        assert_eq!(run.code, INPUT, "{name}");
        assert_eq!(run.stdout, "", "{name}");
        assert!(
            run.stderr.contains(&format!("{name} is empty")),
            "{name}: {}",
            run.stderr
        );
        assert_eq!(kwb(dir.path(), &["dump-tree", name]).code, INPUT, "{name}");
    }
    // An empty pattern file is bad input as well.
    write(dir.path(), "k.cu", KERNEL);
    assert_eq!(
        kwb(dir.path(), &["sites", "k.cu", "--patterns", "empty.cu"]).code,
        INPUT
    );
}

#[test]
fn host_only_file_has_no_kernel() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "host.cpp", HOST_ONLY);
    let run = kwb(dir.path(), &["sites", "host.cpp"]);
    assert_eq!(run.code, NO_KERNEL);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("no kernel-like function in host.cpp"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--patterns"), "{}", run.stderr);
    // Unreadable files and files with no kernel are left out of the JSON.
    let run = kwb(dir.path(), &["sites", "--json", "host.cpp"]);
    assert_eq!(run.code, NO_KERNEL);
    assert_eq!(run.stdout, "");
    // The debug commands do not care about kernels.
    let run = kwb(dir.path(), &["dump-tree", "host.cpp"]);
    assert_eq!(run.code, OK);
    assert!(run.stdout.starts_with("translation_unit"), "{}", run.stdout);
}

#[test]
fn oversized_file_needs_max_bytes() {
    // About 50 MB of valid C++: a kernel, then comment lines with a small function
    // every sixteenth line. `kwb sites --max-bytes 100000000` parses it in about
    // 2-3 s in a debug build (a file of functions only takes about 15 s, too slow
    // for a test).
    const SIZE: usize = 50_000_000;
    let dir = TempDir::new().unwrap();
    let mut text = String::with_capacity(SIZE + 4096);
    text.push_str(KERNEL);
    let mut i = 0;
    while text.len() < SIZE {
        for _ in 0..15 {
            text.push_str("// padding: a comment line that makes this file large, nothing more\n");
        }
        writeln!(text, "static int pad_{i}(int x) {{ return x + {i}; }}").unwrap();
        i += 1;
    }
    let path = write(dir.path(), "big.cu", &text);
    let size = std::fs::metadata(&path).unwrap().len();

    let run = kwb(dir.path(), &["sites", "big.cu"]);
    assert_eq!(run.code, INPUT);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains(&format!(
            "big.cu is {size} bytes, over the 33554432-byte limit"
        )),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--max-bytes"), "{}", run.stderr);
    assert_eq!(kwb(dir.path(), &["dump-tree", "big.cu"]).code, INPUT);

    let run = kwb(dir.path(), &["sites", "--max-bytes", "100000000", "big.cu"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert!(
        run.stdout.contains("kernel `scale` (global)"),
        "{}",
        run.stdout
    );
}

#[test]
fn small_max_bytes_rejects_an_ordinary_file() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.cu", KERNEL);
    let run = kwb(dir.path(), &["sites", "--max-bytes", "10", "k.cu"]);
    assert_eq!(run.code, INPUT);
    assert!(
        run.stderr.contains(&format!(
            "k.cu is {} bytes, over the 10-byte limit",
            KERNEL.len()
        )),
        "{}",
        run.stderr
    );
    let exact = KERNEL.len().to_string();
    assert_eq!(
        kwb(dir.path(), &["sites", "--max-bytes", &exact, "k.cu"]).code,
        OK
    );
}

#[test]
fn unbalanced_braces_give_partial_results() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "unbalanced.cu", UNBALANCED);
    let run = kwb(dir.path(), &["sites", "unbalanced.cu"]);
    assert_eq!(run.code, PARTIAL, "stderr:\n{}", run.stderr);
    assert!(run.stdout.contains("kernel `k`"), "{}", run.stdout);
    assert!(run.stdout.contains("error regions"), "{}", run.stdout);

    let run = kwb(dir.path(), &["sites", "--json", "unbalanced.cu"]);
    assert_eq!(run.code, PARTIAL, "stderr:\n{}", run.stderr);
    let map = json(&run);
    assert_eq!(map["kernels"][0]["name"], "k");
    assert!(
        map["kernels"][0]["syntax_errors"].as_u64() > Some(0),
        "{map}"
    );
    assert!(!map["diagnostics"].as_array().unwrap().is_empty(), "{map}");
}

#[test]
fn missing_closing_brace_of_a_kernel_gives_partial_results() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "unclosed.cu", UNCLOSED_BODY);
    let run = kwb(dir.path(), &["sites", "unclosed.cu"]);
    assert!(run.stdout.contains("kernel `k`"), "{}", run.stdout);
    assert!(
        run.stdout.contains("unclosed.cu: 1 error regions"),
        "{}",
        run.stdout
    );
    // The kernel is the one that lacks the brace, so its results are partial.
    assert_eq!(run.code, PARTIAL, "stdout:\n{}", run.stdout);
    let run = kwb(dir.path(), &["sites", "--json", "unclosed.cu"]);
    let map = json(&run);
    assert_eq!(map["diagnostics"][0]["message"], "missing `}`");
    assert_eq!(map["kernels"][0]["syntax_errors"], 1, "{map}");
    assert_eq!(run.code, PARTIAL);
}

#[test]
fn syntax_error_inside_a_kernel_gives_partial_results() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "error.cu", ERROR_INSIDE);
    let run = kwb(dir.path(), &["sites", "error.cu"]);
    assert_eq!(run.code, PARTIAL);
    assert_eq!(run.stderr, "");
    assert!(run.stdout.contains("kernel `k` (global)"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("1 syntax error regions inside this function"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "error.cu: 1 error regions in the file; sites inside them may be missing (lines 3)"
        ),
        "{}",
        run.stdout
    );
    let run = kwb(dir.path(), &["sites", "--json", "error.cu"]);
    assert_eq!(run.code, PARTIAL);
    let map = json(&run);
    assert_eq!(map["kernels"][0]["syntax_errors"], 1);
    assert_eq!(map["diagnostics"][0]["line"], 3);
    assert_eq!(map["diagnostics"][0]["kind"], "error");
}

#[test]
fn unknown_kernel_lists_the_available_ones() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.cu", THREE_KERNELS);
    let run = kwb(dir.path(), &["sites", "k.cu", "--kernel", "nope"]);
    assert_eq!(run.code, NO_KERNEL);
    assert_eq!(run.stdout, "");
    insta::assert_snapshot!(run.stderr, @r"
    kwb::cli::unknown_kernel

      x no kernel named `nope` in k.cu
      help: kernels here: alpha, beta, gemm
    ");
    let run = kwb(dir.path(), &["sites", "--json", "k.cu", "--kernel", "nope"]);
    assert_eq!(run.code, NO_KERNEL);
    assert_eq!(run.stdout, "");
}

#[test]
fn known_kernel_is_the_only_one_reported() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.cu", THREE_KERNELS);
    let run = kwb(dir.path(), &["sites", "--json", "k.cu", "--kernel", "beta"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    let map = json(&run);
    let names: Vec<&Value> = map["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| &k["name"])
        .collect();
    assert_eq!(names, ["beta"]);
}

#[test]
fn pattern_that_does_not_compile_is_bad_input() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.cu", THREE_KERNELS);
    write(
        dir.path(),
        "bad.scm",
        "((call_expression function: (identifier) @mma)\n",
    );
    let run = kwb(dir.path(), &["sites", "k.cu", "--patterns", "bad.scm"]);
    assert_eq!(run.code, INPUT);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("pattern file does not compile"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("bad.scm"), "{}", run.stderr);
    write(dir.path(), "node.scm", "(no_such_node) @mma\n");
    assert_eq!(
        kwb(dir.path(), &["sites", "k.cu", "--patterns", "node.scm"]).code,
        INPUT
    );
    let run = kwb(dir.path(), &["query", "bad.scm", "k.cu"]);
    assert_eq!(run.code, INPUT);
    assert!(
        run.stderr.contains("query does not compile"),
        "{}",
        run.stderr
    );
    // A missing pattern file is bad input, and nothing is printed for k.cu.
    let run = kwb(dir.path(), &["sites", "k.cu", "--patterns", "none.scm"]);
    assert_eq!(run.code, INPUT);
    assert_eq!(run.stdout, "");
}

#[test]
fn pattern_that_captures_no_site_kind_is_bad_input() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.cu", THREE_KERNELS);
    write(
        dir.path(),
        "nokind.scm",
        "((call_expression function: (identifier) @name))\n",
    );
    let run = kwb(dir.path(), &["sites", "k.cu", "--patterns", "nokind.scm"]);
    assert_eq!(run.code, INPUT);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("pattern file captures no site kind"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("@mma"), "{}", run.stderr);
}

#[test]
fn user_pattern_adds_an_mma_site() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.cu", THREE_KERNELS);
    write(dir.path(), "my_mma.scm", MY_MMA_PATTERN);
    let mma_sites = |run: &Run| -> Vec<Value> {
        let map = json(run);
        let gemm = map["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == "gemm")
            .unwrap_or_else(|| panic!("no kernel gemm: {map}"))
            .clone();
        gemm["sites"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["kind"] == "mma")
            .cloned()
            .collect()
    };

    let without = kwb(dir.path(), &["sites", "--json", "k.cu"]);
    assert_eq!(without.code, OK, "{}", without.stderr);
    assert_eq!(mma_sites(&without), Vec::<Value>::new());

    let with = kwb(
        dir.path(),
        &["sites", "--json", "k.cu", "--patterns", "my_mma.scm"],
    );
    assert_eq!(with.code, OK, "{}", with.stderr);
    let sites = mma_sites(&with);
    assert_eq!(sites.len(), 1, "{sites:?}");
    assert_eq!(sites[0]["line"], 4);
    assert_eq!(sites[0]["column"], 3);
    assert_eq!(sites[0]["text"], "MY_MMA(a, b, c);");

    let human = kwb(dir.path(), &["sites", "k.cu", "--patterns", "my_mma.scm"]);
    assert_eq!(human.code, OK);
    assert!(human.stdout.contains("mma"), "{}", human.stdout);
}

#[test]
fn paths_with_spaces_and_shell_metacharacters() {
    let dir = TempDir::new().unwrap();
    let sub = dir.path().join("dir with space;$(x)");
    std::fs::create_dir(&sub).unwrap();
    let file = write(&sub, "a b;$(x).cu", KERNEL);
    write(
        &sub,
        "q b;$(x).scm",
        "(function_declarator declarator: (identifier) @name)\n",
    );

    // Relative, from inside the folder.
    let run = kwb(&sub, &["sites", "a b;$(x).cu"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "  > kernel `scale` (global) at a b;$(x).cu:1 — 0 sites\n"
    );

    // Absolute, with the temp folder filtered out.
    let run = kwb(dir.path(), &[OsStr::new("sites"), file.as_os_str()]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    let tmp = regex_escape(&dir.path().display().to_string());
    insta::with_settings!({ filters => vec![(tmp.as_str(), "[TMP]")] }, {
        insta::assert_snapshot!(run.stdout, @"  > kernel `scale` (global) at [TMP]/dir with space;$(x)/a b;$(x).cu:1 — 0 sites");
    });

    let run = kwb(
        dir.path(),
        &[OsStr::new("sites"), OsStr::new("--json"), file.as_os_str()],
    );
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert_eq!(json(&run)["file"], file.display().to_string());

    let run = kwb(&sub, &["dump-tree", "a b;$(x).cu"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    let run = kwb(&sub, &["query", "q b;$(x).scm", "a b;$(x).cu"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert_eq!(run.stdout, "1:17 @name scale\n");
    let run = kwb(
        dir.path(),
        &["parse-stats", "--list", "dir with space;$(x)"],
    );
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert!(run.stdout.contains("parsed 1 files"), "{}", run.stdout);
    assert!(run.stdout.contains("1 clean"), "{}", run.stdout);

    // A missing file with such a name is reported by that name, not run by a shell.
    let run = kwb(&sub, &["sites", "gone;$(touch pwned).cu"]);
    assert_eq!(run.code, INPUT);
    assert!(
        run.stderr.contains("cannot read gone;$(touch pwned).cu"),
        "{}",
        run.stderr
    );
    assert!(!sub.join("pwned").exists());
}

#[test]
fn inputs_are_never_modified() {
    let dir = TempDir::new().unwrap();
    let files = [
        write(dir.path(), "k.cu", THREE_KERNELS),
        write(dir.path(), "host.cpp", HOST_ONLY),
        write(dir.path(), "unbalanced.cu", UNBALANCED),
        write(dir.path(), "error.cu", ERROR_INSIDE),
        write(dir.path(), "crlf.cu", THREE_KERNELS.replace('\n', "\r\n")),
        write(dir.path(), "bom.cu", format!("\u{feff}{KERNEL}")),
        write(dir.path(), "my_mma.scm", MY_MMA_PATTERN),
    ];
    // An mtime in the past, so that any rewrite, even of the same bytes, shows.
    let past = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    for path in &files {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(past)
            .unwrap();
    }
    let snapshot = |paths: &[PathBuf]| -> Vec<(Vec<u8>, SystemTime)> {
        paths
            .iter()
            .map(|p| {
                let bytes = std::fs::read(p).unwrap();
                let mtime = std::fs::metadata(p).unwrap().modified().unwrap();
                (bytes, mtime)
            })
            .collect()
    };
    let listing = || -> BTreeSet<PathBuf> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    };
    let before = snapshot(&files);
    let listed_before = listing();
    assert!(before.iter().all(|(_, mtime)| *mtime == past));

    let names = [
        "k.cu",
        "host.cpp",
        "unbalanced.cu",
        "error.cu",
        "crlf.cu",
        "bom.cu",
    ];
    for name in names {
        kwb(dir.path(), &["sites", name]);
        kwb(dir.path(), &["sites", "--json", name]);
        kwb(dir.path(), &["sites", name, "--patterns", "my_mma.scm"]);
        kwb(dir.path(), &["sites", name, "--kernel", "gemm"]);
        kwb(dir.path(), &["dump-tree", name]);
        kwb(dir.path(), &["query", "my_mma.scm", name]);
    }
    let mut all = vec!["sites", "--json"];
    all.extend(names);
    kwb(dir.path(), &all);
    kwb(dir.path(), &["parse-stats", "--list", "."]);
    kwb(dir.path(), &["parse-stats", "--json", "."]);

    let after = snapshot(&files);
    for ((path, (bytes0, mtime0)), (bytes1, mtime1)) in files.iter().zip(&before).zip(&after) {
        assert!(bytes0 == bytes1, "{} changed", path.display());
        assert_eq!(mtime0, mtime1, "{} was rewritten", path.display());
    }
    assert_eq!(listing(), listed_before, "kwb created or removed files");
}

#[test]
fn json_of_one_file_is_an_object() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.cu", KERNEL);
    let run = kwb(dir.path(), &["sites", "--json", "k.cu"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    let map = json(&run);
    assert_eq!(keys(&map), ["diagnostics", "file", "kernels"]);
    assert_eq!(map["file"], "k.cu");
    assert_eq!(map["diagnostics"], Value::Array(Vec::new()));
    let kernel = &map["kernels"][0];
    assert_eq!(
        keys(kernel),
        [
            "end_line",
            "line",
            "name",
            "role",
            "sites",
            "syntax_errors",
            "template_params"
        ]
    );
    assert_eq!(kernel["name"], "scale");
    assert_eq!(kernel["role"], "global");
}

#[test]
fn json_of_two_files_is_an_array_in_the_order_given() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "one.cu", KERNEL);
    write(dir.path(), "two.cu", THREE_KERNELS);
    for (first, second) in [("one.cu", "two.cu"), ("two.cu", "one.cu")] {
        let run = kwb(dir.path(), &["sites", "--json", first, second]);
        assert_eq!(run.code, OK, "{}", run.stderr);
        let maps = json(&run);
        let maps = maps.as_array().expect("an array for two files");
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0]["file"], first);
        assert_eq!(maps[1]["file"], second);
        for map in maps {
            assert_eq!(keys(map), ["diagnostics", "file", "kernels"]);
        }
    }
}

#[test]
fn json_sites_have_exactly_the_documented_keys_and_kinds() {
    let dir = TempDir::new().unwrap();
    let mut args = vec![
        OsStr::new("sites").to_owned(),
        OsStr::new("--json").to_owned(),
    ];
    for name in [
        "cute_sm80_gemm.cu",
        "dead_code.cu",
        "megakernel_task.cu",
        "mma_sync_cp_async.cu",
        "scalar_fma.cu",
        "wgmma_tma_mbarrier.cu",
    ] {
        args.push(fixture(name).into_os_string());
    }
    write(dir.path(), "k.cu", THREE_KERNELS);
    write(dir.path(), "my_mma.scm", MY_MMA_PATTERN);
    args.extend(["k.cu", "--patterns", "my_mma.scm"].map(|a| OsStr::new(a).to_owned()));
    let run = kwb(dir.path(), &args);
    assert_eq!(run.code, OK, "{}", run.stderr);
    let maps = json(&run);
    let mut seen = BTreeSet::new();
    for map in maps.as_array().unwrap() {
        for kernel in map["kernels"].as_array().unwrap() {
            for site in kernel["sites"].as_array().unwrap() {
                assert_eq!(
                    keys(site),
                    [
                        "column",
                        "confidence",
                        "end_line",
                        "kind",
                        "line",
                        "note",
                        "text"
                    ],
                    "{site}"
                );
                let kind = site["kind"].as_str().unwrap();
                assert!(SITE_KINDS.contains(&kind), "unknown kind: {site}");
                seen.insert(kind.to_owned());
                assert!(
                    ["high", "medium", "low"].contains(&site["confidence"].as_str().unwrap()),
                    "{site}"
                );
                assert!(site["note"].is_null() || site["note"].is_string(), "{site}");
                assert!(site["line"].as_u64() >= Some(1), "{site}");
                assert!(site["end_line"].as_u64() >= site["line"].as_u64(), "{site}");
                assert!(site["column"].as_u64() >= Some(1), "{site}");
            }
        }
    }
    // The fixtures between them hold every kind, so the check above saw them all.
    assert_eq!(seen.len(), SITE_KINDS.len(), "kinds seen: {seen:?}");
}

#[test]
fn readable_file_is_reported_when_another_is_missing() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.cu", KERNEL);
    for args in [["sites", "k.cu", "gone.cu"], ["sites", "gone.cu", "k.cu"]] {
        let run = kwb(dir.path(), &args);
        assert_eq!(run.code, INPUT);
        assert!(run.stdout.contains("kernel `scale`"), "{}", run.stdout);
        assert!(run.stderr.contains("cannot read gone.cu"), "{}", run.stderr);
    }
    let run = kwb(dir.path(), &["sites", "--json", "gone.cu", "k.cu"]);
    assert_eq!(run.code, INPUT);
    let maps = json(&run);
    let maps = maps.as_array().expect("an array for two files");
    assert_eq!(maps.len(), 1);
    assert_eq!(maps[0]["file"], "k.cu");
}

#[test]
fn highest_exit_code_wins() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "k.cu", KERNEL);
    write(dir.path(), "host.cpp", HOST_ONLY);
    write(dir.path(), "error.cu", ERROR_INSIDE);
    let cases: [(&[&str], i32); 5] = [
        (&["k.cu", "gone.cu"], INPUT),
        // A file without kernels beside one with kernels is an ordinary header.
        (&["gone.cu", "host.cpp", "k.cu"], INPUT),
        (&["host.cpp", "host.cpp"], NO_KERNEL),
        (&["host.cpp", "error.cu", "gone.cu"], PARTIAL),
        (&["k.cu", "k.cu"], OK),
    ];
    for (files, code) in cases {
        let mut args = vec!["sites"];
        args.extend(files);
        let run = kwb(dir.path(), &args);
        assert_eq!(run.code, code, "{files:?}: {}", run.stderr);
        args.push("--json");
        assert_eq!(kwb(dir.path(), &args).code, code, "{files:?} --json");
    }
}

#[test]
fn bundled_wgmma_fixture_maps_cleanly() {
    let dir = TempDir::new().unwrap();
    let path = fixture("wgmma_tma_mbarrier.cu");
    let run = kwb(dir.path(), &[OsStr::new("sites"), path.as_os_str()]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert_eq!(run.stderr, "");
    assert!(
        run.stdout.contains("kernel `gemm_wgmma_tma`"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("-- mma"), "{}", run.stdout);
}

#[test]
fn bundled_no_kernel_fixture_has_no_kernel() {
    let dir = TempDir::new().unwrap();
    let path = fixture("no_kernel.cu");
    let run = kwb(dir.path(), &[OsStr::new("sites"), path.as_os_str()]);
    assert_eq!(run.code, NO_KERNEL);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("no kernel-like function in"),
        "{}",
        run.stderr
    );
}

#[test]
fn parse_stats_counts_clean_and_broken_files() {
    let dir = TempDir::new().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("nested")).unwrap();
    write(&tree, "good.cu", THREE_KERNELS);
    write(&tree.join("nested"), "good.hpp", HOST_ONLY);
    write(&tree, "broken.cu", UNBALANCED);
    // Not a source extension: not counted.
    write(&tree, "notes.txt", "not C++ {");

    let run = kwb(dir.path(), &["parse-stats", "tree"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert!(run.stdout.starts_with("parsed 3 files"), "{}", run.stdout);
    assert!(
        run.stdout.contains("2 clean, 1 with ERROR/MISSING"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("0 unreadable"), "{}", run.stdout);

    let run = kwb(dir.path(), &["parse-stats", "--list", "tree"]);
    assert_eq!(run.code, OK);
    assert!(run.stdout.contains("\n  broken.cu:1 ("), "{}", run.stdout);

    let run = kwb(dir.path(), &["parse-stats", "--json", "tree"]);
    assert_eq!(run.code, OK);
    let stats = json(&run);
    assert_eq!(stats["files"], 3);
    assert_eq!(stats["files_with_errors"], 1);
    assert_eq!(stats["unreadable"], 0);
    assert_eq!(stats["with_errors"][0]["file"], "broken.cu");
}

#[test]
fn no_command_panics_on_bad_inputs() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("folder.cu")).unwrap();
    write(d, "binary.cu", b"\0\x01\x02\x03");
    write(d, "latin1.cu", b"// caf\xe9\n");
    write(d, "empty.cu", "");
    write(d, "blank.cu", "\n \n");
    write(d, "host.cpp", HOST_ONLY);
    write(d, "unbalanced.cu", UNBALANCED);
    write(d, "unclosed.cu", UNCLOSED_BODY);
    write(d, "error.cu", ERROR_INSIDE);
    write(d, "only_braces.cu", "}}}{{{)))(((");
    write(
        d,
        "deep.cu",
        format!(
            "__global__ void k(float* a) {{ a[0] = {}1{}; }}\n",
            "(".repeat(5000),
            ")".repeat(5000)
        ),
    );
    write(d, "nokind.scm", "((identifier) @name)\n");
    write(d, "bad.scm", "((identifier\n");
    write(d, "my_mma.scm", MY_MMA_PATTERN);
    let inputs = [
        "gone.cu",
        "folder.cu",
        "binary.cu",
        "latin1.cu",
        "empty.cu",
        "blank.cu",
        "host.cpp",
        "unbalanced.cu",
        "unclosed.cu",
        "error.cu",
        "only_braces.cu",
        "deep.cu",
    ];
    for input in inputs {
        let commands: [&[&str]; 8] = [
            &["sites", input],
            &["sites", "--json", input],
            &["sites", "--kernel", "k", input],
            &["sites", "--patterns", "my_mma.scm", input],
            &["dump-tree", input],
            &["query", "my_mma.scm", input],
            &["query", "bad.scm", input],
            &["query", input, "host.cpp"],
        ];
        for args in commands {
            let run = kwb(d, args);
            assert!(
                [OK, INPUT, NO_KERNEL, PARTIAL].contains(&run.code),
                "kwb {args:?} exited {}:\n{}",
                run.code,
                run.stderr
            );
        }
    }
    for pattern in ["nokind.scm", "bad.scm", "binary.cu", "folder.cu", "gone.cu"] {
        let run = kwb(d, &["sites", "host.cpp", "--patterns", pattern]);
        assert_eq!(run.code, INPUT, "--patterns {pattern}");
    }
    let mut all = vec!["sites"];
    all.extend(inputs);
    let run = kwb(d, &all);
    assert_eq!(run.code, PARTIAL, "{}", run.stderr);
    let run = kwb(d, &["parse-stats", "--list", "."]);
    assert_eq!(run.code, OK, "{}", run.stderr);
}

#[test]
fn trace_show_reads_real_gpu_traces() {
    let dir = TempDir::new().unwrap();
    let trace = |name: &str| {
        std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/traces"
        ))
        .join(name)
    };
    let run = kwb(
        dir.path(),
        &[
            OsStr::new("trace"),
            OsStr::new("show"),
            trace("mma_sync_none_ones.trace").as_os_str(),
        ],
    );
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert!(
        run.stdout.contains("896 records (0 dropped"),
        "{}",
        run.stdout
    );
    let final_line = run.stdout.lines().find(|l| l.contains("final")).unwrap();
    assert!(final_line.contains(" 1024 "), "{final_line}");
    // Operands read inside the MMA helper are numbered by call: 2 per K tile of 32.
    let calls = run
        .stdout
        .lines()
        .filter(|l| l.contains("OperandA"))
        .count();
    assert_eq!(calls, 64, "{}", run.stdout);
    let out = run.stdout.lines().find(|l| l.contains("Epilogue")).unwrap();
    assert!(out.contains(" out ") && out.contains(" 2048 "), "{out}");
    let run = kwb(
        dir.path(),
        &[
            OsStr::new("trace"),
            OsStr::new("show"),
            OsStr::new("--json"),
            trace("mma_sync_last_tile_twice_ones.trace").as_os_str(),
        ],
    );
    assert_eq!(run.code, OK, "{}", run.stderr);
    let shown = json(&run);
    let rows = shown["rows"].as_array().unwrap();
    let last = rows
        .iter()
        .find(|r| r["k_tile"] == -1 && r["kind"] == "Accumulator")
        .unwrap();
    assert_eq!(last["absmax"], 1056.0);
    assert_eq!(last["min"], 1056.0);
    // The last K tile twice: the helper's operand probe ran for 33 K tiles, not 32.
    let a_calls = rows.iter().filter(|r| r["kind"] == "OperandA").count();
    assert_eq!(a_calls, 66);
    // A version 2 file of the same run reads the same.
    let run = kwb(
        dir.path(),
        &[
            OsStr::new("trace"),
            OsStr::new("show"),
            trace("mma_sync_none_ones.v2.trace").as_os_str(),
        ],
    );
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert!(
        run.stdout.contains("896 records (0 dropped"),
        "{}",
        run.stdout
    );
    // A real full-tile trace: every value of every probe, written out as .npy.
    let run = kwb(
        dir.path(),
        &[
            OsStr::new("trace"),
            OsStr::new("show"),
            OsStr::new("--npy"),
            OsStr::new("full"),
            trace("mma_sync_none_full_tile.trace").as_os_str(),
        ],
    );
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("full tiles: 81920 values (0 dropped), 633 files written"),
        "{}",
        run.stdout
    );
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("full/index.json")).unwrap())
            .unwrap();
    let finals: Vec<_> = index
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "accumulator" && e["k_tile"] == -1)
        .collect();
    assert_eq!(finals.len(), 4, "one per warp");
    // The tile dimensions of `acc[i][j]` place every value of a warp's 64 x 64 tile.
    assert_eq!(finals[0]["grid_axes"], serde_json::json!(["m", "n"]));
    let grid = std::fs::read(
        dir.path()
            .join("full")
            .join(finals[0]["grid_file"].as_str().unwrap()),
    )
    .unwrap();
    let header_len = usize::from(u16::from_le_bytes([grid[8], grid[9]]));
    let header = std::str::from_utf8(&grid[10..10 + header_len]).unwrap();
    assert!(header.contains("'shape': (64, 64)"), "{header}");
    let values = std::fs::read(
        dir.path()
            .join("full")
            .join(finals[0]["values_file"].as_str().unwrap()),
    )
    .unwrap();
    let header_len = usize::from(u16::from_le_bytes([values[8], values[9]]));
    let data: Vec<f32> = values[10 + header_len..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    // 32 lanes x a 64 x 64 warp tile of 4 x 8 MMA tiles: 128 values a lane, all K = 64.
    assert_eq!(data.len(), 4096);
    assert!(data.iter().all(|v| *v == 64.0));
    // CuTe coordinates on the GPU: CTA (1, 1, 0)'s accumulator covers exactly its
    // 128 x 128 tile of C, rows and columns 128..256, each cell once.
    let cute =
        kwb_runtime::decode(&std::fs::read(trace("cute_sm80_cta110_full_tile.trace")).unwrap())
            .unwrap();
    let finals: std::collections::BTreeSet<(i32, i32)> = cute
        .tiles
        .iter()
        .filter(|v| {
            let r = &cute.records[v.record as usize];
            r.kind() == Some(kwb_runtime::Kind::Accumulator) && r.k_tile == -1
        })
        .map(|v| (v.m, v.n))
        .collect();
    assert_eq!(finals.len(), 128 * 128);
    assert!(
        finals
            .iter()
            .all(|&(m, n)| (128..256).contains(&m) && (128..256).contains(&n))
    );
    // A file that is not a trace is refused with its own diagnostic.
    write(dir.path(), "not.trace", "{}\n");
    let run = kwb(dir.path(), &["trace", "show", "not.trace"]);
    assert_eq!(run.code, INPUT);
    assert!(
        run.stderr.contains("not a kwb trace file"),
        "{}",
        run.stderr
    );
}

/// The summary row of site `id` in `trace show --json` output.
fn summary_row(shown: &serde_json::Value, id: u64) -> serde_json::Value {
    shown["summary"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["site"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no row for site {id}"))
}

/// Real screen traces (`--screen --cta all`, every CTA of a 1024³ run on ones): one row
/// per site folding every K tile, which names the stage by itself (the epilogue of
/// `alpha_twice` at twice the final accumulator) and the CTA of each peak.
#[test]
fn trace_show_reads_real_screen_traces() {
    let dir = TempDir::new().unwrap();
    let show = |name: &str| trace_show_json(dir.path(), name);
    let site = summary_row;
    let none = show("mma_sync_none_screen.trace");
    assert_eq!(none["summary"]["k_tiles"], 1);
    assert_eq!(none["summary"]["grid"], serde_json::json!([8, 8, 1]));
    assert_eq!(none["summary"]["rows"].as_array().unwrap().len(), 5);
    for r in none["summary"]["rows"].as_array().unwrap() {
        assert_eq!(
            (r["k_tile"].as_i64(), r["later_k_tiles"].as_bool()),
            (Some(-1), Some(true))
        );
        assert_eq!(r["peak_cta"], serde_json::json!([7, 7, 0]), "{r}");
        assert!(r["first_bad_cta"].is_null(), "{r}");
    }
    // The accumulator after each of the mainloop's 31 K tiles, 256 warps: 32 a K tile.
    let per_k_tile = site(&none, 0);
    assert_eq!(
        (per_k_tile["probes"].as_u64(), per_k_tile["absmax"].as_f64()),
        (Some(7936), Some(992.0))
    );
    assert_eq!(per_k_tile["count"], 7936_u64 * 32 * 128);
    assert_eq!(site(&none, 1)["absmax"], 1024.0);
    assert_eq!(
        (
            site(&none, 2)["kind"].as_str(),
            site(&none, 2)["absmax"].as_f64()
        ),
        (Some("OperandA"), Some(1.0))
    );
    assert_eq!(site(&none, 4)["absmax"], 2048.0);
    let alpha = show("mma_sync_alpha_twice_screen.trace");
    assert_eq!(site(&alpha, 1)["absmax"], 1024.0);
    assert_eq!(site(&alpha, 4)["absmax"], 4096.0);
    // Shared operand tiles of a wgmma kernel: 1024 consumer warps over 15 K tiles.
    let tma = show("tma_wgmma_sm90_none_screen.trace");
    assert_eq!(tma["summary"]["grid"], serde_json::json!([16, 8, 1]));
    assert_eq!(
        (
            site(&tma, 0)["probes"].as_u64(),
            site(&tma, 0)["absmax"].as_f64()
        ),
        (Some(15360), Some(960.0))
    );
    assert_eq!(site(&tma, 4)["kind"], "OperandB");
    // The human table says it is a screen and folds every K tile into `all`.
    let run = trace_show(dir.path(), "mma_sync_none_screen.trace", &[]);
    assert!(
        run.stdout.contains(
            "screen of every admitted CTA: 5 site rows (every K tile folded), grid (8, 8, 1)"
        ),
        "{}",
        run.stdout
    );
    let final_row = run.stdout.lines().find(|l| l.contains(" 205 ")).unwrap();
    assert!(
        final_row.contains(" all ") && final_row.contains(" 1024 "),
        "{final_row}"
    );
}

/// Real screens whose calls were folded in the warps' registers (`kwb::Fold`): the same
/// values and peaks as the screens above, no calls (0, shown `-`), and a kernel whose
/// epilogue writes NaN everywhere counted value by value with the CTA that saw it first.
#[test]
fn trace_show_reads_real_folded_screens() {
    let dir = TempDir::new().unwrap();
    let show = |name: &str| trace_show_json(dir.path(), name);
    let site = summary_row;
    let none = show("mma_sync_none_folds.trace");
    for r in none["summary"]["rows"].as_array().unwrap() {
        assert_eq!(r["probes"], 0, "{r}");
        assert_eq!(r["peak_cta"], serde_json::json!([7, 7, 0]), "{r}");
    }
    // 31 K tiles of 1024 x 1024 accumulators, peaking at 31 * 32.
    assert_eq!(
        (
            site(&none, 0)["count"].as_u64(),
            site(&none, 0)["absmax"].as_f64()
        ),
        (Some(31 * 1024 * 1024), Some(992.0))
    );
    assert_eq!(site(&none, 4)["absmax"], 2048.0);
    assert_eq!(
        site(&show("mma_sync_alpha_twice_folds.trace"), 4)["absmax"],
        4096.0
    );
    let nan = show("mma_sync_beta_zero_reads_c_folds.trace");
    let epilogue = site(&nan, 4);
    assert_eq!(
        (epilogue["nan"].as_u64(), epilogue["absmax"].as_f64()),
        (Some(1024 * 1024), Some(0.0))
    );
    assert_eq!(epilogue["first_bad_cta"], serde_json::json!([0, 0, 0]));
    assert!(site(&nan, 1)["first_bad_cta"].is_null());
    let tma = show("tma_wgmma_sm90_none_folds.trace");
    assert_eq!(
        (
            site(&tma, 0)["count"].as_u64(),
            site(&tma, 0)["absmax"].as_f64()
        ),
        (Some(15 * 1024 * 1024), Some(960.0))
    );
    let run = trace_show(dir.path(), "mma_sync_none_folds.trace", &[]);
    assert!(
        run.stdout
            .contains("calls `-`: folded in the warps' registers"),
        "{}",
        run.stdout
    );
    let row = run.stdout.lines().find(|l| l.contains(" 205 ")).unwrap();
    assert!(row.contains(" all ") && row.contains(" - "), "{row}");
}

/// Real summary traces (`--summary --cta all`, every CTA of a 1024³ run on ones): the
/// stage reads off the table, and every row names the CTA of its peak.
#[test]
fn trace_show_reads_real_summary_traces() {
    let dir = TempDir::new().unwrap();
    let show = |name: &str| trace_show_json(dir.path(), name);
    let row = |shown: &serde_json::Value, kind: &str, k_tile: i64| {
        shown["summary"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == kind && r["k_tile"] == k_tile)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} row at K tile {k_tile}"))
    };
    let none = show("mma_sync_none_summary.trace");
    assert_eq!(none["records"], 0);
    assert_eq!(none["summary"]["grid"], serde_json::json!([8, 8, 1]));
    // 64 CTAs x 4 warps call the accumulator probe once per K tile: K tile k holds
    // 32 (k + 1) everywhere; the epilogue writes alpha * K = 2048.
    let k7 = row(&none, "Accumulator", 7);
    assert_eq!(
        (k7["probes"].as_u64(), k7["absmax"].as_f64()),
        (Some(256), Some(256.0))
    );
    assert_eq!(k7["count"], 1024 * 1024);
    assert_eq!(row(&none, "Accumulator", -1)["absmax"], 1024.0);
    assert_eq!(row(&none, "Epilogue", -1)["absmax"], 2048.0);
    for r in none["summary"]["rows"].as_array().unwrap() {
        assert_eq!(r["nan"], 0);
        assert!(r["peak_cta"].is_array(), "{r}");
        assert!(r["first_bad_cta"].is_null(), "{r}");
    }
    // The last K tile twice: the accumulator after the mainloop is 1056, one K tile
    // (32) past the last per-K-tile reading: the MMA stage.
    let twice = show("mma_sync_last_tile_twice_summary.trace");
    assert_eq!(row(&twice, "Accumulator", 31)["absmax"], 1024.0);
    assert_eq!(row(&twice, "Accumulator", -1)["absmax"], 1056.0);
    // Alpha applied twice: the accumulator is right (1024), the epilogue writes 4096.
    let alpha = show("mma_sync_alpha_twice_summary.trace");
    assert_eq!(row(&alpha, "Accumulator", -1)["absmax"], 1024.0);
    assert_eq!(row(&alpha, "Epilogue", -1)["absmax"], 4096.0);
    // The human table: operands outside a counted K loop fold into one row, `any`.
    let run = trace_show(dir.path(), "mma_sync_none_summary.trace", &[]);
    assert!(
        run.stdout
            .contains("summary of every admitted CTA: 35 site/K-tile rows, grid (8, 8, 1)"),
        "{}",
        run.stdout
    );
    let a = run.stdout.lines().find(|l| l.contains("OperandA")).unwrap();
    assert!(a.contains(" any ") && a.contains(" 16384 "), "{a}");
    // CUTLASS 3.x through the overlay: a persistent grid of 132 CTAs, every consumer
    // warp of every work tile folded into the collective's rows.
    let cutlass = show("cutlass3x_sm90_summary.trace");
    assert_eq!(cutlass["summary"]["grid"], serde_json::json!([1, 132, 1]));
    let k15 = row(&cutlass, "Accumulator", 15);
    assert_eq!(
        (k15["probes"].as_u64(), k15["absmax"].as_f64()),
        (Some(2048), Some(1024.0))
    );
    assert_eq!(k15["count"], 2048 * 2048);
    assert_eq!(k15["peak_cta"], serde_json::json!([0, 131, 0]));
    assert_eq!(row(&cutlass, "Accumulator", 1)["absmax"], 128.0);
}

#[test]
fn trace_show_writes_full_tiles_as_npy() {
    let dir = TempDir::new().unwrap();
    let fixture = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/traces/mma_sync_none_ones.trace"
    ));
    // A trace without full tiles has nothing to write: a clear error, no folder.
    let run = kwb(
        dir.path(),
        &[
            OsStr::new("trace"),
            OsStr::new("show"),
            OsStr::new("--npy"),
            OsStr::new("tiles"),
            fixture.as_os_str(),
        ],
    );
    assert_eq!(run.code, INPUT, "{}", run.stdout);
    assert!(run.stderr.contains("holds no full tiles"), "{}", run.stderr);
    assert!(!dir.path().join("tiles").exists());

    // The fixture's records with a 2 x 2 accumulator tile on record 0 (as a
    // --full-tile build writes it) and a tile without coordinates on record 1.
    let mut trace = kwb_runtime::decode(&std::fs::read(fixture).unwrap()).unwrap();
    trace.records.truncate(2);
    for r in &mut trace.records {
        r.version = kwb_runtime::VERSION;
    }
    trace.records[0].kind = kwb_runtime::Kind::Accumulator as u32;
    trace.records[0].k_tile = 3;
    trace.records[1].kind = kwb_runtime::Kind::OperandA as u32;
    trace.records[1].k_tile = 3;
    let tile = |record, element, value, m, n| kwb_runtime::TileValue {
        record,
        element,
        value,
        m,
        n,
        k: -1,
    };
    trace.tiles = vec![
        tile(0, 1, 2.0, 8, 1),
        tile(0, 0, 1.0, 8, 0),
        tile(0, 2, 3.0, 9, 0),
        tile(1, 0, 5.0, -1, -1),
    ];
    trace.tile_capacity = 64;
    std::fs::write(dir.path().join("full.trace"), kwb_runtime::encode(&trace)).unwrap();
    let run = kwb(
        dir.path(),
        &["trace", "show", "--npy", "tiles", "full.trace"],
    );
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("full tiles: 4 values (0 dropped), 6 files written"),
        "{}",
        run.stdout
    );
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("tiles/index.json")).unwrap())
            .unwrap();
    let first = &index[0];
    assert_eq!(first["kind"], "accumulator");
    assert_eq!(first["grid_axes"], serde_json::json!(["m", "n"]));
    assert_eq!(first["grid_origin"], serde_json::json!([8, 0]));
    let grid = std::fs::read(
        dir.path()
            .join("tiles")
            .join(first["grid_file"].as_str().unwrap()),
    )
    .unwrap();
    let header_len = usize::from(u16::from_le_bytes([grid[8], grid[9]]));
    let data: Vec<f32> = grid[10 + header_len..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    // Rows m = 8, 9; columns n = 0, 1; (9, 1) got no value.
    assert_eq!(&data[..3], &[1.0, 2.0, 3.0]);
    assert!(data[3].is_nan());
    // Values come in element order.
    let values = std::fs::read(
        dir.path()
            .join("tiles")
            .join(first["values_file"].as_str().unwrap()),
    )
    .unwrap();
    let header_len = usize::from(u16::from_le_bytes([values[8], values[9]]));
    assert_eq!(
        &values[10 + header_len..10 + header_len + 4],
        &1.0_f32.to_le_bytes()
    );
    // No coordinates, no grid.
    assert!(index[1]["grid_file"].is_null());
    assert_eq!(index[1]["values"], 1);
}

#[test]
fn ladder_writes_inputs_and_checks_an_output_exactly() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let shape = ["--shape", "64,48,32"];
    let run = kwb(
        d,
        &[
            &["ladder", "write", "--rung", "seq-identity"][..],
            &shape,
            &["-o", "rung"],
        ]
        .concat(),
    );
    assert_eq!(run.code, OK, "{}", run.stderr);
    for f in ["a.npy", "b.npy", "c.npy", "answer.npy"] {
        assert!(d.join("rung").join(f).is_file(), "{f}");
    }
    // The answer itself passes; one changed value fails with its place, exit 5.
    let check = |file: &str, extra: &[&str]| {
        kwb(
            d,
            &[
                &["ladder", "check", "--rung", "seq-identity"][..],
                &shape,
                extra,
                &[file],
            ]
            .concat(),
        )
    };
    let run = check("rung/answer.npy", &[]);
    assert_eq!(run.code, OK, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("PASS seq-identity (exact)"),
        "{}",
        run.stdout
    );
    let mut bytes = std::fs::read(d.join("rung/answer.npy")).unwrap();
    let at = bytes.len() - 4 * (48 * 60 + 40);
    let v = f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) + 1.0;
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    std::fs::write(d.join("out.npy"), &bytes).unwrap();
    let run = check("out.npy", &["--tile", "32,16", "--json"]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    let c = json(&run);
    assert_eq!(c["mismatches"], 1);
    assert_eq!(c["first_mismatch"], serde_json::json!([3, 8]));
    assert_eq!(c["tiles"]["rows"], 2);
    // Bad outputs: a clear error, exit 2.
    let run = check("rung/a.npy", &[]);
    assert_eq!(run.code, INPUT);
    assert!(
        run.stderr.contains("the problem's output is [64, 48]"),
        "{}",
        run.stderr
    );
    write(d, "text.npy", "not numpy\n");
    let run = check("text.npy", &[]);
    assert_eq!(run.code, INPUT);
    assert!(run.stderr.contains("not a .npy file"), "{}", run.stderr);
    let run = check("missing.npy", &[]);
    assert_eq!(run.code, INPUT);
    assert!(
        run.stderr.contains("cannot read missing.npy"),
        "{}",
        run.stderr
    );
    // Real dumps: raw bytes with --dtype, and safetensors; a short dump is an error.
    let answer = std::fs::read(d.join("rung/answer.npy")).unwrap();
    let raw = &answer[answer.len() - 4 * 64 * 48..];
    std::fs::write(d.join("out.bin"), raw).unwrap();
    let run = check("out.bin", &["--dump-dtype", "f32"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    let run = check("out.bin", &[]);
    assert_eq!(run.code, INPUT);
    assert!(
        run.stderr.contains("needs its element type"),
        "{}",
        run.stderr
    );
    std::fs::write(d.join("short.bin"), &raw[..raw.len() - 4]).unwrap();
    let run = check("short.bin", &["--dump-dtype", "f32"]);
    assert_eq!(run.code, INPUT);
    assert!(run.stderr.contains("the dump is short"), "{}", run.stderr);
    let header = br#"{"out":{"dtype":"F32","shape":[64,48],"data_offsets":[0,12288]}}"#;
    let mut st = (header.len() as u64).to_le_bytes().to_vec();
    st.extend_from_slice(header);
    st.extend_from_slice(raw);
    std::fs::write(d.join("out.safetensors"), &st).unwrap();
    let run = check("out.safetensors", &[]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    let run = check("out.safetensors", &["--tensor", "y"]);
    assert_eq!(run.code, INPUT);
    assert!(run.stderr.contains("no tensor `y`"), "{}", run.stderr);
    let run = kwb(
        d,
        &[
            "ladder",
            "write",
            "--rung",
            "onehot-k:99",
            "--shape",
            "4,4,4",
            "-o",
            "x",
        ],
    );
    assert_eq!(run.code, INPUT);
    assert!(run.stderr.contains("outside K = 4"), "{}", run.stderr);
    assert!(!d.join("x").exists(), "no output for a bad rung");
}

/// A CTA whose records carry several tile origins (a megakernel CTA runs one task per
/// output tile) is shown with how many, and `--json` lists each.
#[test]
fn trace_show_says_when_a_cta_computed_several_tiles() {
    let dir = TempDir::new().unwrap();
    let fixture = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/traces"
    ))
    .join("mma_sync_none_ones.trace");
    let mut trace = kwb_runtime::decode(&std::fs::read(fixture).unwrap()).unwrap();
    for (i, r) in trace.records.iter_mut().enumerate() {
        (r.cta_x, r.cta_y, r.cta_z) = (0, 0, 0);
        (r.tile_m, r.tile_n) = (-1, 64 * (i % 3) as i32);
    }
    std::fs::write(dir.path().join("tasks.trace"), kwb_runtime::encode(&trace)).unwrap();
    let run = kwb(dir.path(), &["trace", "show", "tasks.trace"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "CTA (0, 0, 0): 896 records, 3 tiles (the first at (m ?, n 0); --json lists each)"
        ),
        "{}",
        run.stdout
    );
    let run = kwb(dir.path(), &["trace", "show", "--json", "tasks.trace"]);
    assert_eq!(run.code, OK, "{}", run.stderr);
    assert_eq!(
        json(&run)["ctas"][0]["tiles"],
        serde_json::json!([[-1, 0], [-1, 64], [-1, 128]])
    );
}
