//! The bad-input catalogue: every command (`kwb sites`, `parse-stats`, `trace show`,
//! `ladder write|check`, `run`, `man`, `completions`, `kwb-instrument` and its
//! `--strip`, `kwb-extract`, `kwb-nvcc` with `KWB_TRACE`) on missing, unreadable,
//! binary, non-UTF-8, oversized, truncated and wrong-version inputs, malformed
//! manifests, conflicting flags, outputs equal to their input or in folders that
//! cannot be written, and paths with spaces and shell metacharacters.
//!
//! Each case runs in its own `TempDir` and must exit with the README's code (clap's
//! usage errors are 2), name the problem on stderr, leave every file that was there
//! byte for byte as it was, and leave no partial output: the output path does not
//! exist afterwards and the folder lists exactly the entries it listed before (no
//! stray temporary file). A case that must work lists what it creates instead.
//! Tests run as root, so nothing is made unreadable by permissions: a directory where
//! a file is expected, a path through a regular file (ENOTDIR), a symlink loop and a
//! `/proc` file that cannot be read stand in.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// Success.
const OK: i32 = 0;
/// Bad usage, unreadable input or unwritable output (clap's usage errors too).
const INPUT: i32 = 2;
/// The named kernel is not one kwb can find in the file.
const NO_KERNEL: i32 = 3;
/// `kwb run`: nothing could run on a GPU.
const NO_GPU: i32 = 7;

/// A file and folder name with spaces, quotes and shell metacharacters: a shell that
/// ran it would create `pwned` beside it.
const NASTY: &str = "a b;$(touch pwned)'q\"`touch pwned`";

/// The most of `NASTY` that nvcc itself takes: nvcc runs its sub-tools through a
/// shell with each path in double quotes, so `$`, backquotes and `"` in a path it is
/// given are expanded by that shell whatever kwb does.
const NASTY_FOR_NVCC: &str = "a b;'q&|<>";

/// A kernel without sites.
const KERNEL: &str = "__global__ void scale(float* a) { a[threadIdx.x] *= 2.0f; }\n";

/// A kernel with a K mainloop, so there is something to probe.
const MAINLOOP: &str = r#"template <int REDUCTION_SIZE>
__global__ void gemm(const float* A, const float* B, float* C, int K) {
  __shared__ float As[16][16], Bs[16][16];
  float acc = 0.f;
  for (int kt = 0; kt < REDUCTION_SIZE / 16; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[kt * 16 + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[kt * 16 + threadIdx.y];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[threadIdx.x] = acc;
}
"#;

/// The start of an ELF object: binary, its first NUL at offset 7.
const BINARY: &[u8] = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0";

/// A Latin-1 comment: not UTF-8 at offset 7.
const LATIN1: &[u8] = b"// caf\xe9\n__global__ void k(float* a) { a[0] = 1; }\n";

/// Over the default 32 MiB input limit of every command that reads sources.
const OVERSIZED: u64 = 32 * 1024 * 1024 + 1;

/// The binaries.
#[derive(Clone, Copy, Debug)]
enum Bin {
    Kwb,
    Instrument,
    Extract,
    Nvcc,
}

impl Bin {
    fn path(self) -> &'static str {
        match self {
            Bin::Kwb => env!("CARGO_BIN_EXE_kwb"),
            Bin::Instrument => env!("CARGO_BIN_EXE_kwb-instrument"),
            Bin::Extract => env!("CARGO_BIN_EXE_kwb-extract"),
            Bin::Nvcc => env!("CARGO_BIN_EXE_kwb-nvcc"),
        }
    }
}

/// What a finished case printed, and whether the stand-in nvcc ran (its arguments).
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    nvcc: Option<Vec<String>>,
}

/// One catalogue entry, made inside its folder by its setup function.
struct Case {
    bin: Bin,
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    code: i32,
    /// A substring of stderr that names the problem (of stdout for a success).
    message: &'static str,
    /// Paths that must not exist afterwards.
    absent: Vec<PathBuf>,
    /// Paths a success creates (everything under them may be new).
    created: Vec<PathBuf>,
    /// Whether the stand-in nvcc may run.
    nvcc_runs: bool,
    /// Runs only where the CUDA toolchain is found.
    needs_toolchain: bool,
    /// Further checks, in the case's folder.
    then: Option<fn(&Path, &Outcome)>,
}

fn case(bin: Bin, args: &[&str]) -> Case {
    Case {
        bin,
        args: args.iter().map(OsString::from).collect(),
        env: Vec::new(),
        code: INPUT,
        message: "",
        absent: Vec::new(),
        created: Vec::new(),
        nvcc_runs: false,
        needs_toolchain: false,
        then: None,
    }
}

fn kwb(args: &[&str]) -> Case {
    case(Bin::Kwb, args)
}

fn instrument(args: &[&str]) -> Case {
    case(Bin::Instrument, args)
}

fn extract(args: &[&str]) -> Case {
    case(Bin::Extract, args)
}

fn nvcc(trace: &str, args: &[&str]) -> Case {
    case(Bin::Nvcc, args).env("KWB_TRACE", trace)
}

impl Case {
    /// Fails with `code`, saying `message` on stderr.
    fn fails(mut self, code: i32, message: &'static str) -> Case {
        self.code = code;
        self.message = message;
        self
    }

    /// Succeeds, printing `message` on stdout, and creates `created`.
    fn works(mut self, message: &'static str, created: &[&str]) -> Case {
        self.code = OK;
        self.message = message;
        self.created = created.iter().map(PathBuf::from).collect();
        self
    }

    fn absent(mut self, path: &str) -> Case {
        self.absent.push(PathBuf::from(path));
        self
    }

    fn env(mut self, key: &'static str, value: impl Into<OsString>) -> Case {
        self.env.push((key, value.into()));
        self
    }

    fn then(mut self, check: fn(&Path, &Outcome)) -> Case {
        self.then = Some(check);
        self
    }
}

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn put(dir: &Path, name: &str, contents: impl AsRef<[u8]>) {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, contents).unwrap();
}

fn copy(dir: &Path, from: &str, name: &str) {
    put(dir, name, std::fs::read(root().join(from)).unwrap());
}

/// A sparse file of `len` zero bytes: over a size limit without writing it.
fn sparse(dir: &Path, name: &str, len: u64) {
    std::fs::File::create(dir.join(name))
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn mkdir(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir.join(name)).unwrap();
}

/// A valid version-3 trace of one site and one accumulator record, from the runtime's
/// own writer.
fn trace_bytes() -> Vec<u8> {
    let mut raw = [0u8; kwb_runtime::RECORD_SIZE];
    raw[0..4].copy_from_slice(&kwb_runtime::RECORD_MAGIC.to_le_bytes());
    raw[4..8].copy_from_slice(&kwb_runtime::VERSION.to_le_bytes());
    raw[12..16].copy_from_slice(&(kwb_runtime::Kind::Accumulator as u32).to_le_bytes());
    let trace = kwb_runtime::Trace {
        sites: vec![kwb_runtime::SiteInfo {
            id: 0,
            file: "gemm.cu".to_owned(),
            line: 9,
            text: "acc += a * b;".to_owned(),
        }],
        records: vec![kwb_runtime::TraceRecord::from_le_bytes(&raw)],
        capacity: 16,
        ..kwb_runtime::Trace::default()
    };
    let bytes = kwb_runtime::encode(&trace);
    assert!(
        kwb_runtime::decode(&bytes).is_ok(),
        "the writer's trace reads back"
    );
    bytes
}

/// A reproducer folder `folder` written by kwb-extract's own library, as `kwb run`
/// reads it.
fn reproducer(dir: &Path, folder: &str) {
    let source = std::fs::read_to_string(root().join("kernels/mma_sync/gemm.cu")).unwrap();
    let request = kwb_extract::Request {
        kernel: Some("gemm_mma_sync".to_owned()),
        file_name: "gemm.cu".to_owned(),
        ..kwb_extract::Request::default()
    };
    let x = kwb_extract::extract(&source, &request).unwrap();
    let build = kwb_extract::manifest::Build {
        std: "c++17".to_owned(),
        arch: "sm_90a".to_owned(),
        defines: Vec::new(),
        includes: vec![
            root()
                .join("kernels/common")
                .canonicalize()
                .unwrap()
                .display()
                .to_string(),
        ],
        other: Vec::new(),
        from: "command line".to_owned(),
    };
    let manifest = kwb_extract::manifest::Manifest::new(&x, "gemm.cu", build);
    put(dir, &format!("{folder}/repro.cu"), &x.repro);
    put(dir, &format!("{folder}/kwb.toml"), manifest.to_toml());
}

/// Every case, labelled; each setup runs in the case's own empty folder.
type Setup = fn(&Path) -> Case;

const CASES: &[(&str, Setup)] = &[
    // kwb sites
    ("sites: missing file", |_| {
        kwb(&["sites", "missing.cu"]).fails(INPUT, "cannot read missing.cu")
    }),
    ("sites: a directory", |d| {
        mkdir(d, "src.cu");
        kwb(&["sites", "src.cu"]).fails(INPUT, "src.cu is a directory")
    }),
    ("sites: binary file", |d| {
        put(d, "obj.cu", BINARY);
        kwb(&["sites", "obj.cu"]).fails(INPUT, "obj.cu looks binary (NUL byte at offset 7)")
    }),
    ("sites: non-UTF-8 source", |d| {
        put(d, "latin1.cu", LATIN1);
        kwb(&["sites", "latin1.cu"])
            .fails(INPUT, "latin1.cu is not UTF-8 (invalid byte at offset 6)")
    }),
    ("sites: over --max-bytes", |d| {
        put(d, "k.cu", KERNEL);
        kwb(&["sites", "--max-bytes", "16", "k.cu"]).fails(INPUT, "over the 16-byte limit")
    }),
    ("sites: a path through a regular file", |d| {
        put(d, "k.cu", KERNEL);
        kwb(&["sites", "k.cu/inner.cu"]).fails(INPUT, "Not a directory")
    }),
    ("sites: a symlink loop", |d| {
        std::os::unix::fs::symlink("loop.cu", d.join("loop.cu")).unwrap();
        kwb(&["sites", "loop.cu"]).fails(INPUT, "Too many levels of symbolic links")
    }),
    ("sites: a pattern file that does not compile", |d| {
        put(d, "k.cu", KERNEL);
        put(d, "bad.scm", "((identifier\n");
        kwb(&["sites", "k.cu", "--patterns", "bad.scm"]).fails(INPUT, "bad.scm")
    }),
    ("sites: no file given", |_| {
        kwb(&["sites", "--json"]).fails(INPUT, "required arguments were not provided")
    }),
    ("sites: paths with spaces and metacharacters", |d| {
        put(d, &format!("{NASTY}/{NASTY}.cu"), KERNEL);
        let file = format!("{NASTY}/{NASTY}.cu");
        let mut c = kwb(&["sites"]).works("kernel `scale` (global)", &[]);
        c.args.push(file.into());
        c
    }),
    // kwb parse-stats
    ("parse-stats: missing folder", |_| {
        kwb(&["parse-stats", "nowhere"]).fails(INPUT, "cannot read nowhere")
    }),
    ("parse-stats: a regular file", |d| {
        put(d, "k.cu", KERNEL);
        kwb(&["parse-stats", "k.cu"]).fails(INPUT, "Not a directory")
    }),
    (
        "parse-stats: a folder with spaces and metacharacters",
        |d| {
            put(d, &format!("{NASTY}/{NASTY}.cu"), KERNEL);
            put(d, &format!("{NASTY}/bin.cu"), BINARY);
            kwb(&["parse-stats", NASTY])
                .works("parsed 2 files", &[])
                .then(|_, o| {
                    assert!(o.stdout.contains("1 clean"), "{}", o.stdout);
                    assert!(o.stdout.contains("1 unreadable"), "{}", o.stdout);
                })
        },
    ),
    // kwb trace show
    ("trace show: missing file", |_| {
        kwb(&["trace", "show", "gone.trace"]).fails(INPUT, "cannot read gone.trace")
    }),
    ("trace show: a directory", |d| {
        mkdir(d, "t.trace");
        kwb(&["trace", "show", "t.trace"]).fails(INPUT, "Is a directory")
    }),
    ("trace show: a /proc file that cannot be read", |_| {
        kwb(&["trace", "show", "/proc/self/mem"]).fails(INPUT, "cannot read /proc/self/mem")
    }),
    ("trace show: a source file", |d| {
        put(d, "k.cu", KERNEL);
        kwb(&["trace", "show", "k.cu"]).fails(INPUT, "not a kwb trace file")
    }),
    ("trace show: binary garbage", |d| {
        put(d, "t.trace", BINARY);
        kwb(&["trace", "show", "t.trace"]).fails(INPUT, "not a kwb trace file")
    }),
    ("trace show: truncated", |d| {
        let bytes = trace_bytes();
        put(d, "t.trace", &bytes[..bytes.len() - 30]);
        kwb(&["trace", "show", "t.trace"]).fails(INPUT, "trace file is truncated")
    }),
    ("trace show: cut inside the header", |d| {
        put(d, "t.trace", &trace_bytes()[..20]);
        kwb(&["trace", "show", "t.trace"]).fails(INPUT, "file header needs 48 bytes")
    }),
    ("trace show: another format version", |d| {
        let mut bytes = trace_bytes();
        bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
        put(d, "t.trace", bytes);
        kwb(&["trace", "show", "t.trace"]).fails(
            INPUT,
            "trace file version 99, this kwb reads versions 2 to 4",
        )
    }),
    ("trace show: an older format version", |d| {
        let mut bytes = trace_bytes();
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        put(d, "t.trace", bytes);
        kwb(&["trace", "show", "t.trace"]).fails(INPUT, "trace file version 1")
    }),
    ("trace show: appended to", |d| {
        let mut bytes = trace_bytes();
        bytes.extend_from_slice(&trace_bytes());
        put(d, "t.trace", bytes);
        kwb(&["trace", "show", "t.trace"]).fails(INPUT, "bytes after the trace's last section")
    }),
    ("trace show: --npy of a trace without tiles", |d| {
        put(d, "t.trace", trace_bytes());
        kwb(&["trace", "show", "t.trace", "--npy", "tiles"])
            .fails(INPUT, "t.trace holds no full tiles")
            .absent("tiles")
    }),
    (
        "trace show: --npy into a folder through a regular file",
        |d| {
            copy(
                d,
                "fixtures/traces/mma_sync_none_full_tile.trace",
                "t.trace",
            );
            put(d, "blocker", "a file");
            kwb(&["trace", "show", "t.trace", "--npy", "blocker/tiles"])
                .fails(INPUT, "cannot write into blocker/tiles")
                .absent("blocker/tiles")
        },
    ),
    ("trace show: --npy where index.json is a directory", |d| {
        copy(
            d,
            "fixtures/traces/mma_sync_none_full_tile.trace",
            "t.trace",
        );
        mkdir(d, "tiles/index.json");
        kwb(&["trace", "show", "t.trace", "--npy", "tiles"]).fails(INPUT, "cannot write into tiles")
    }),
    ("trace show: paths with spaces and metacharacters", |d| {
        copy(
            d,
            "fixtures/traces/mma_sync_none_full_tile.trace",
            &format!("{NASTY}.trace"),
        );
        let mut c = kwb(&["trace", "show"]).works("full tiles:", &[NASTY]);
        c.args.extend([
            format!("{NASTY}.trace").into(),
            "--npy".into(),
            NASTY.into(),
        ]);
        c.then(|d, _| assert!(d.join(NASTY).join("index.json").is_file()))
    }),
    // kwb ladder write / check
    ("ladder write: output folder through a regular file", |d| {
        put(d, "blocker", "a file");
        kwb(&[
            "ladder",
            "write",
            "--rung",
            "ones",
            "--shape",
            "4,4,4",
            "-o",
            "blocker/ops",
        ])
        .fails(INPUT, "cannot write into blocker/ops")
    }),
    ("ladder write: output folder is a regular file", |d| {
        put(d, "ops", "a file");
        kwb(&[
            "ladder", "write", "--rung", "ones", "--shape", "4,4,4", "-o", "ops",
        ])
        .fails(INPUT, "cannot write into ops")
    }),
    ("ladder write: a file of the output is a directory", |d| {
        mkdir(d, "ops/c.npy");
        kwb(&[
            "ladder", "write", "--rung", "ones", "--shape", "4,4,4", "-o", "ops",
        ])
        .fails(INPUT, "cannot write into ops")
        .absent("ops/a.npy")
        .absent("ops/b.npy")
        .absent("ops/answer.npy")
    }),
    ("ladder write: a shape with a zero", |_| {
        kwb(&[
            "ladder", "write", "--rung", "ones", "--shape", "0,4,4", "-o", "ops",
        ])
        .fails(INPUT, "is not M,N,K")
        .absent("ops")
    }),
    ("ladder write: an unknown rung", |_| {
        kwb(&[
            "ladder", "write", "--rung", "twos", "--shape", "4,4,4", "-o", "ops",
        ])
        .fails(INPUT, "twos")
        .absent("ops")
    }),
    (
        "ladder write: a folder with spaces and metacharacters",
        |_| {
            kwb(&[
                "ladder", "write", "--rung", "ones", "--shape", "4,4,4", "-o", NASTY,
            ])
            .works("a.npy, b.npy, c.npy, answer.npy", &[NASTY])
            .then(|d, _| assert!(d.join(NASTY).join("answer.npy").is_file()))
        },
    ),
    ("ladder check: missing output", |_| {
        kwb(&[
            "ladder", "check", "--rung", "ones", "--shape", "4,4,4", "d.npy",
        ])
        .fails(INPUT, "cannot read d.npy")
    }),
    ("ladder check: a directory", |d| {
        mkdir(d, "d.npy");
        kwb(&[
            "ladder", "check", "--rung", "ones", "--shape", "4,4,4", "d.npy",
        ])
        .fails(INPUT, "Is a directory")
    }),
    ("ladder check: binary garbage", |d| {
        put(d, "d.npy", BINARY);
        kwb(&[
            "ladder", "check", "--rung", "ones", "--shape", "4,4,4", "d.npy",
        ])
        .fails(INPUT, "not a .npy file")
    }),
    ("ladder check: truncated .npy", |d| {
        let bytes = kwb_cli::npy::f32_array(&[4, 4], &[8.0; 16]);
        put(d, "d.npy", &bytes[..bytes.len() - 6]);
        kwb(&[
            "ladder", "check", "--rung", "ones", "--shape", "4,4,4", "d.npy",
        ])
        .fails(INPUT, "the header says 16 values, the file holds 14")
    }),
    ("ladder check: a raw dump without its dtype", |d| {
        put(d, "d.bin", [0u8; 64]);
        kwb(&[
            "ladder", "check", "--rung", "ones", "--shape", "4,4,4", "d.bin",
        ])
        .fails(INPUT, "--dump-dtype")
    }),
    (
        "ladder check: an output with spaces and metacharacters",
        |d| {
            put(
                d,
                &format!("{NASTY}.npy"),
                kwb_cli::npy::f32_array(&[4, 4], &[4.0; 16]),
            );
            let mut c = kwb(&[
                "ladder",
                "check",
                "--rung",
                "ones",
                "--shape",
                "4,4,4",
                "--out-dtype",
                "f32",
            ])
            .works("PASS ones", &[]);
            c.args.push(format!("{NASTY}.npy").into());
            c
        },
    ),
    // kwb run
    ("run: malformed kwb.toml", |d| {
        put(d, "repro/repro.cu", KERNEL);
        put(d, "repro/kwb.toml", "[source\nfile = \"gemm.cu\"\n");
        kwb(&["run", "repro"]).fails(INPUT, "not a kwb.toml kwb-extract wrote")
    }),
    ("run: kwb.toml with an unknown field", |d| {
        reproducer(d, "repro");
        let text = std::fs::read_to_string(d.join("repro/kwb.toml")).unwrap();
        let text = text.replacen("[kernel]\n", "[kernel]\ncolour = \"red\"\n", 1);
        put(d, "repro/kwb.toml", text);
        kwb(&["run", "repro"]).fails(INPUT, "unknown field `colour`")
    }),
    ("run: kwb.toml is binary", |d| {
        put(d, "repro/repro.cu", KERNEL);
        put(d, "repro/kwb.toml", BINARY);
        kwb(&["run", "repro"]).fails(INPUT, "not a kwb.toml kwb-extract wrote")
    }),
    ("run: a regular file for the folder", |d| {
        put(d, "repro", KERNEL);
        kwb(&["run", "repro"]).fails(INPUT, "repro is not a reproducer folder")
    }),
    ("run: no repro.cu", |d| {
        reproducer(d, "repro");
        std::fs::remove_file(d.join("repro/repro.cu")).unwrap();
        kwb(&["run", "repro"]).fails(INPUT, "it has no repro.cu")
    }),
    ("run: --dump-a without --dump-b", |d| {
        reproducer(d, "repro");
        kwb(&["run", "repro", "--dump-a", "a.npy"]).fails(INPUT, "--dump-b")
    }),
    ("run: a dump that is a directory", |d| {
        reproducer(d, "repro");
        mkdir(d, "a.npy");
        put(d, "b.npy", kwb_cli::npy::f32_array(&[4, 4], &[1.0; 16]));
        kwb(&["run", "repro", "--dump-a", "a.npy", "--dump-b", "b.npy"])
            .fails(INPUT, "Is a directory")
    }),
    (
        "run: a reproducer folder with spaces and metacharacters",
        |d| {
            reproducer(d, NASTY_FOR_NVCC);
            let mut c = kwb(&[
                "run",
                NASTY_FOR_NVCC,
                "--ladder",
                "ones",
                "--shape",
                "128,128,64",
            ]);
            c.needs_toolchain = true;
            c.created = vec![PathBuf::from("cache")];
            match kwb_gpu::worker::driver_present() {
                Ok(()) => c.works("every rung passed", &["cache"]),
                Err(_) => c.fails(NO_GPU, "no CUDA driver"),
            }
        },
    ),
    // kwb man, kwb completions
    ("man: output folder through a regular file", |d| {
        put(d, "blocker", "a file");
        kwb(&["man", "-o", "blocker/man"]).fails(INPUT, "cannot write into blocker/man")
    }),
    ("man: output folder is a regular file", |d| {
        put(d, "man", "a file");
        kwb(&["man", "-o", "man"]).fails(INPUT, "cannot write into man")
    }),
    ("man: a page of the output is a directory", |d| {
        mkdir(d, "man/kwb-run.1");
        kwb(&["man", "-o", "man"])
            .fails(INPUT, "cannot write into man")
            .absent("man/kwb.1")
            .absent("man/kwb-extract.1")
    }),
    ("man: no output folder", |_| {
        kwb(&["man"]).fails(INPUT, "--out <DIR>")
    }),
    ("man: a folder with spaces and metacharacters", |_| {
        kwb(&["man", "-o", NASTY])
            .works("man pages in", &[NASTY])
            .then(|d, _| assert!(d.join(NASTY).join("kwb-nvcc.1").is_file()))
    }),
    ("completions: an unknown shell", |_| {
        kwb(&["completions", "tcsh"]).fails(INPUT, "invalid value 'tcsh'")
    }),
    ("completions: a binary without completions", |_| {
        kwb(&["completions", "bash", "--bin", "kwb-nvcc"]).fails(INPUT, "invalid value 'kwb-nvcc'")
    }),
    // kwb-instrument
    ("instrument: missing input", |_| {
        instrument(&["gone.cu", "-o", "out.cu"])
            .fails(INPUT, "cannot read gone.cu")
            .absent("out.cu")
    }),
    ("instrument: a directory", |d| {
        mkdir(d, "src.cu");
        instrument(&["src.cu", "-o", "out.cu"])
            .fails(INPUT, "src.cu is a directory")
            .absent("out.cu")
    }),
    ("instrument: binary input", |d| {
        put(d, "obj.cu", BINARY);
        instrument(&["obj.cu", "-o", "out.cu"])
            .fails(INPUT, "looks binary")
            .absent("out.cu")
    }),
    ("instrument: non-UTF-8 input", |d| {
        put(d, "latin1.cu", LATIN1);
        instrument(&["latin1.cu", "-o", "out.cu"])
            .fails(INPUT, "is not UTF-8")
            .absent("out.cu")
    }),
    ("instrument: over the size limit", |d| {
        sparse(d, "huge.cu", OVERSIZED);
        instrument(&["huge.cu", "-o", "out.cu"])
            .fails(INPUT, "over the 33554432-byte limit")
            .absent("out.cu")
    }),
    ("instrument: the output is the input", |d| {
        put(d, "k.cu", MAINLOOP);
        instrument(&["k.cu", "-o", "k.cu"]).fails(INPUT, "the output k.cu is the input file")
    }),
    ("instrument: the output is the input by another path", |d| {
        put(d, "k.cu", MAINLOOP);
        mkdir(d, "sub");
        instrument(&["k.cu", "-o", "sub/../k.cu"]).fails(INPUT, "is the input file")
    }),
    ("instrument: the output is a link to the input", |d| {
        put(d, "k.cu", MAINLOOP);
        std::os::unix::fs::symlink("k.cu", d.join("link.cu")).unwrap();
        instrument(&["k.cu", "-o", "link.cu"]).fails(INPUT, "is the input file")
    }),
    ("instrument: output folder through a regular file", |d| {
        put(d, "k.cu", MAINLOOP);
        put(d, "blocker", "a file");
        instrument(&["k.cu", "-o", "blocker/out.cu"]).fails(INPUT, "cannot write blocker/out.cu")
    }),
    ("instrument: the output is a directory", |d| {
        put(d, "k.cu", MAINLOOP);
        mkdir(d, "out.cu");
        instrument(&["k.cu", "-o", "out.cu"]).fails(INPUT, "cannot write out.cu")
    }),
    ("instrument: --overlay folder through a regular file", |d| {
        put(
            d,
            "inc/lib/collective.hpp",
            format!("#pragma once\n{MAINLOOP}"),
        );
        put(
            d,
            "main.cu",
            "#include \"lib/collective.hpp\"\nint main() { return 0; }\n",
        );
        put(d, "blocker", "a file");
        instrument(&[
            "main.cu",
            "-o",
            "out.cu",
            "--overlay",
            "blocker/overlay",
            "-I",
            "inc",
        ])
        .fails(INPUT, "cannot write blocker/overlay/lib/collective.hpp")
        .absent("out.cu")
    }),
    ("instrument: --strip with --kernel", |d| {
        put(d, "k.cu", MAINLOOP);
        instrument(&["--strip", "k.cu", "-o", "out.cu", "--kernel", "gemm"])
            .fails(INPUT, "cannot be used with")
            .absent("out.cu")
    }),
    ("instrument: --json with --diff", |d| {
        put(d, "k.cu", MAINLOOP);
        instrument(&["k.cu", "-o", "out.cu", "--json", "--diff"])
            .fails(INPUT, "cannot be used with")
            .absent("out.cu")
    }),
    ("instrument: -I without --overlay", |d| {
        put(d, "k.cu", MAINLOOP);
        instrument(&["k.cu", "-o", "out.cu", "-I", "inc"])
            .fails(INPUT, "--overlay")
            .absent("out.cu")
    }),
    ("instrument: --full-tile without one CTA", |d| {
        put(d, "k.cu", MAINLOOP);
        instrument(&["k.cu", "-o", "out.cu", "--full-tile"])
            .fails(
                INPUT,
                "--full-tile keeps every value of every probe: it needs one CTA",
            )
            .absent("out.cu")
    }),
    ("instrument: --values out of range", |d| {
        put(d, "k.cu", MAINLOOP);
        instrument(&["k.cu", "-o", "out.cu", "--values", "9"])
            .fails(INPUT, "9 is not in 0..=8")
            .absent("out.cu")
    }),
    ("instrument: paths with spaces and metacharacters", |d| {
        put(d, &format!("{NASTY}.cu"), MAINLOOP);
        mkdir(d, NASTY);
        let mut c = instrument(&[]);
        c.args = [
            format!("{NASTY}.cu"),
            "-o".into(),
            format!("{NASTY}/{NASTY}.cu"),
        ]
        .map(OsString::from)
        .to_vec();
        c.works("", &[&format!("{NASTY}/{NASTY}.cu")]).then(|d, _| {
            let traced =
                std::fs::read_to_string(d.join(NASTY).join(format!("{NASTY}.cu"))).unwrap();
            assert!(traced.contains("kwb::enabled"));
            assert_eq!(kwb_instrument::strip(&traced).unwrap(), MAINLOOP);
        })
    }),
    // kwb-instrument --strip
    ("strip: missing input", |_| {
        instrument(&["--strip", "gone.cu", "-o", "out.cu"])
            .fails(INPUT, "cannot read gone.cu")
            .absent("out.cu")
    }),
    ("strip: binary input", |d| {
        put(d, "obj.cu", BINARY);
        instrument(&["--strip", "obj.cu", "-o", "out.cu"])
            .fails(INPUT, "looks binary")
            .absent("out.cu")
    }),
    ("strip: the output is the input", |d| {
        put(d, "k.cu", traced());
        instrument(&["--strip", "k.cu", "-o", "./k.cu"]).fails(INPUT, "is the input file")
    }),
    ("strip: a damaged marker", |d| {
        put(d, "k.cu", traced().replacen("/*}:kwb*/", "", 1));
        instrument(&["--strip", "k.cu", "-o", "out.cu"])
            .fails(INPUT, "has no partner")
            .absent("out.cu")
    }),
    ("strip: output folder through a regular file", |d| {
        put(d, "k.cu", traced());
        put(d, "blocker", "a file");
        instrument(&["--strip", "k.cu", "-o", "blocker/out.cu"])
            .fails(INPUT, "cannot write blocker/out.cu")
    }),
    ("strip: paths with spaces and metacharacters", |d| {
        put(d, &format!("{NASTY}.cu"), traced());
        let mut c = instrument(&["--strip"]);
        c.args.extend(
            [
                format!("{NASTY}.cu"),
                "-o".into(),
                format!("{NASTY} plain.cu"),
            ]
            .map(OsString::from),
        );
        c.works("", &[&format!("{NASTY} plain.cu")]).then(|d, _| {
            assert_eq!(
                std::fs::read_to_string(d.join(format!("{NASTY} plain.cu"))).unwrap(),
                MAINLOOP
            );
        })
    }),
    // kwb-extract
    ("extract: missing input", |_| {
        extract(&["gone.cu", "--kernel", "k", "-o", "out"])
            .fails(INPUT, "cannot read gone.cu")
            .absent("out")
    }),
    ("extract: empty input", |d| {
        put(d, "empty.cu", "\n  \n");
        extract(&["empty.cu", "--kernel", "k", "-o", "out"])
            .fails(INPUT, "empty.cu is empty")
            .absent("out")
    }),
    ("extract: non-UTF-8 input", |d| {
        put(d, "latin1.cu", LATIN1);
        extract(&["latin1.cu", "--kernel", "k", "-o", "out"])
            .fails(INPUT, "is not UTF-8")
            .absent("out")
    }),
    ("extract: over the size limit", |d| {
        sparse(d, "huge.cu", OVERSIZED);
        extract(&["huge.cu", "--kernel", "k", "-o", "out"])
            .fails(INPUT, "over the 33554432-byte limit")
            .absent("out")
    }),
    ("extract: an adapter alias inside main()", |d| {
        put(
            d,
            "local.cu",
            "int main() {\n  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;\n  return 0;\n}\n",
        );
        extract(&["local.cu", "--kernel", "Gemm", "-o", "out"])
            .fails(
                NO_KERNEL,
                "`Gemm` is an adapter alias declared inside `main` (line 2)",
            )
            .absent("out")
    }),
    (
        "extract: a grouped library GEMM run by its own harness",
        |d| {
            put(
                d,
                "grouped.cu",
                // As CUTLASS example 57 writes it: the adapter a member of a schedule's
                // class template, named at namespace scope through it.
                "template <class C> struct Given {\n  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<Shape<int,int,int>>, M, E>;\n  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;\n};\n\
             using Gemm = Given<int>::Gemm;\n\
             int run(Options& options) {\n  typename Gemm::Arguments arguments{options.m};\n  Gemm gemm;\n  gemm.initialize(arguments, nullptr);\n  return 0;\n}\n\
             int main() { Options options; return run(options); }\n",
            );
            extract(&["grouped.cu", "--kernel", "Gemm", "-o", "out"])
                .fails(NO_KERNEL, "it is a grouped GEMM")
                .absent("out")
        },
    ),
    ("extract: a launcher parameter kwb cannot bind", |d| {
        put(
            d,
            "launcher.cu",
            "struct Epi { float scale; };\n\
             __global__ void k(const float* a, const float* b, float* d, Epi e) {}\n\
             void run(const float* x, const float* w, float* y, int count, Epi e) {\n\
               k<<<count, 128>>>(x, w, y, e);\n}\n",
        );
        // The kernel takes a functor kwb cannot build, so the launcher is called; its
        // `count` has no role and no caller gives it a value.
        extract(&["launcher.cu", "--kernel", "k", "--through", "-o", "out"])
            .fails(
                INPUT,
                "launcher `run`: kwb cannot bind parameter `count` (role as-called)",
            )
            .absent("out")
    }),
    ("extract: a malformed --bind", |d| {
        put(
            d,
            "k.cu",
            "__global__ void k(float* d) {}\nvoid run(float* d) { k<<<1, 1>>>(d); }\n",
        );
        extract(&["k.cu", "--kernel", "k", "--bind", "count", "-o", "out"])
            .fails(INPUT, "--bind count: write it as NAME=VALUE")
            .absent("out")
    }),
    ("extract: a malformed --layout", |d| {
        put(
            d,
            "k.cu",
            "__global__ void k(const float* a, const float* b, float* d) {}\n\
             void run(const float* a, const float* b, float* d) { k<<<1, 1>>>(a, b, d); }\n",
        );
        extract(&["k.cu", "--kernel", "k", "--layout", "A=mn", "-o", "out"])
            .fails(INPUT, "--layout A=mn: `A=mn`: A is mk or km")
            .absent("out")
    }),
    ("extract: --kernel with --template", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        extract(&[
            "gemm.cu",
            "--kernel",
            "gemm_mma_sync",
            "--template",
            "gemm_mma_sync<1>",
            "-o",
            "out",
        ])
        .fails(INPUT, "cannot be used with")
        .absent("out")
    }),
    ("extract: -p with --flags-from", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        put(d, "cc.json", "[]");
        put(d, "build.log", "nvcc -c gemm.cu\n");
        extract(&[
            "gemm.cu",
            "--kernel",
            "gemm_mma_sync",
            "-p",
            "cc.json",
            "--flags-from",
            "build.log",
            "-o",
            "out",
        ])
        .fails(INPUT, "cannot be used with")
        .absent("out")
    }),
    ("extract: neither --kernel nor --template", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        extract(&["gemm.cu", "-o", "out"])
            .fails(INPUT, "--kernel <NAME>")
            .absent("out")
    }),
    ("extract: malformed compile_commands.json", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        put(d, "cc.json", "[{\"file\": ");
        extract(&[
            "gemm.cu",
            "--kernel",
            "gemm_mma_sync",
            "-p",
            "cc.json",
            "-o",
            "out",
        ])
        .fails(INPUT, "cc.json: ")
        .absent("out")
    }),
    ("extract: a task field the task reads is not bound", |d| {
        copy(d, "kernels/megakernel/gemm.cu", "gemm.cu");
        extract(&[
            "gemm.cu",
            "--template",
            "linear_task<kIntermediate, kHidden, kBatchRows>",
            "-DKWB_DEFECT=none",
            "--task-tile",
            "16,64",
            "--task",
            "out_col=n0",
            "-o",
            "out",
        ])
        .fails(
            INPUT,
            "reads task fields that no --task binding gives: `wait_event`",
        )
        .absent("out")
    }),
    ("extract: a task binding without a value", |d| {
        copy(d, "kernels/megakernel/gemm.cu", "gemm.cu");
        extract(&[
            "gemm.cu",
            "--template",
            "linear_task<kIntermediate, kHidden, kBatchRows>",
            "--task",
            "out_col",
            "-o",
            "out",
        ])
        .fails(INPUT, "write it as FIELD=VALUE")
        .absent("out")
    }),
    ("extract: a task tile that is not ROWS,COLUMNS", |d| {
        copy(d, "kernels/megakernel/gemm.cu", "gemm.cu");
        extract(&[
            "gemm.cu",
            "--template",
            "linear_task<kIntermediate, kHidden, kBatchRows>",
            "--task-tile",
            "16x64",
            "-o",
            "out",
        ])
        .fails(INPUT, "write it as ROWS,COLUMNS")
        .absent("out")
    }),
    ("extract: an output that overwrites the input", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "repro.cu");
        extract(&["repro.cu", "--kernel", "gemm_mma_sync", "-o", "."])
            .fails(INPUT, "would overwrite the input file")
    }),
    ("extract: output folder through a regular file", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        put(d, "blocker", "a file");
        extract(&["gemm.cu", "--kernel", "gemm_mma_sync", "-o", "blocker/out"])
            .fails(INPUT, "cannot write into blocker/out")
    }),
    ("extract: output folder is a regular file", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        put(d, "out", "a file");
        extract(&["gemm.cu", "--kernel", "gemm_mma_sync", "-o", "out"])
            .fails(INPUT, "cannot write into out")
    }),
    ("extract: a file of the output is a directory", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        mkdir(d, "out/kwb.toml");
        extract(&["gemm.cu", "--kernel", "gemm_mma_sync", "-o", "out"])
            .fails(INPUT, "cannot write into out")
            .absent("out/repro.cu")
            .absent("out/build.sh")
    }),
    ("extract: paths with spaces and metacharacters", |d| {
        copy(
            d,
            "kernels/mma_sync/gemm.cu",
            &format!("{NASTY}/{NASTY}.cu"),
        );
        let mut c = extract(&["--kernel", "gemm_mma_sync"]);
        c.args.extend(
            [
                format!("{NASTY}/{NASTY}.cu"),
                "-I".into(),
                format!("{NASTY} inc"),
                "-o".into(),
                format!("{NASTY} out"),
            ]
            .map(OsString::from),
        );
        c.works(
            "instantiation: gemm_mma_sync<128, 128, 32, 3>",
            &[&format!("{NASTY} out")],
        )
        .then(|d, _| {
            // build.sh quotes every path: run with a stand-in compiler, it passes them
            // through whole and runs none of them.
            let out = d.join(format!("{NASTY} out"));
            let status = Command::new("sh")
                .arg(out.join("build.sh"))
                .env("NVCC", "echo")
                .output()
                .unwrap();
            assert!(status.status.success());
            let echoed = String::from_utf8_lossy(&status.stdout);
            assert!(
                echoed.contains(&format!(
                    "-I{}",
                    d.canonicalize().unwrap().join(NASTY).display()
                )),
                "{echoed}"
            );
            assert!(echoed.contains(&format!("{NASTY} inc")), "{echoed}");
            assert!(!out.join("pwned").exists() && !d.join("pwned").exists());
        })
    }),
    // kwb-nvcc with KWB_TRACE, strict (KWB_TRACE_STRICT=1): what it cannot trace is
    // refused with the reason; without strict it builds the original and warns
    // (tests/nvcc.rs).
    ("nvcc: an unknown KWB_TRACE key", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        nvcc(
            "kernel=gemm_mma_sync;colour=red",
            &["nvcc", "-c", "gemm.cu", "-o", "g.o"],
        )
        .env("KWB_TRACE_STRICT", "1")
        .fails(INPUT, "`colour` is not a KWB_TRACE key")
        .absent("g.o")
        .absent("cache")
    }),
    ("nvcc: KWB_TRACE=@ a missing file", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        nvcc("@spec.txt", &["nvcc", "-c", "gemm.cu", "-o", "g.o"])
            .env("KWB_TRACE_STRICT", "1")
            .fails(INPUT, "KWB_TRACE=@spec.txt")
            .absent("g.o")
    }),
    ("nvcc: KWB_TRACE=@ a directory", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        mkdir(d, "spec");
        nvcc("@spec", &["nvcc", "-c", "gemm.cu", "-o", "g.o"])
            .env("KWB_TRACE_STRICT", "1")
            .fails(INPUT, "Is a directory")
            .absent("g.o")
    }),
    ("nvcc: the targeted kernel has nothing to probe", |d| {
        put(
            d,
            "user.cu",
            "__global__ void gemm_mma_sync(float* x) { x[threadIdx.x] = 0.f; }\n",
        );
        nvcc(
            "kernel=gemm_mma_sync",
            &["nvcc", "-c", "user.cu", "-o", "u.o"],
        )
        .env("KWB_TRACE_STRICT", "1")
        .fails(INPUT, "names kernel `gemm_mma_sync`")
        .absent("u.o")
        .absent("cache")
    }),
    ("nvcc: a non-UTF-8 source with the targeted kernel", |d| {
        let mut bytes = b"// caf\xe9\n".to_vec();
        bytes.extend_from_slice(&std::fs::read(root().join("kernels/mma_sync/gemm.cu")).unwrap());
        put(d, "gemm.cu", bytes);
        copy(d, "kernels/common/kwb_harness.cuh", "kwb_harness.cuh");
        nvcc(
            "kernel=gemm_mma_sync",
            &["nvcc", "-c", "gemm.cu", "-o", "g.o"],
        )
        .env("KWB_TRACE_STRICT", "1")
        .fails(INPUT, "gemm.cu is not UTF-8")
        .absent("g.o")
        .absent("cache")
    }),
    ("nvcc: a cache folder through a regular file", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        put(d, "blocker", "a file");
        nvcc(
            "kernel=gemm_mma_sync",
            &["nvcc", "-c", "gemm.cu", "-o", "g.o"],
        )
        .env("KWB_CACHE_DIR", "blocker/cache")
        .env("KWB_TRACE_STRICT", "1")
        .fails(INPUT, "Not a directory")
        .absent("g.o")
    }),
    ("nvcc: no real nvcc named", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        nvcc("kernel=gemm_mma_sync", &["-c", "gemm.cu", "-o", "g.o"]).fails(INPUT, "which nvcc?")
    }),
    ("nvcc: the real nvcc is not there", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", "gemm.cu");
        nvcc(
            "kernel=gemm_mma_sync",
            &["/no/such/nvcc", "-c", "gemm.cu", "-o", "g.o"],
        )
        .fails(INPUT, "the real nvcc `/no/such/nvcc` is not there")
    }),
    ("nvcc: a source with spaces and metacharacters", |d| {
        copy(d, "kernels/mma_sync/gemm.cu", &format!("{NASTY}.cu"));
        copy(d, "kernels/common/kwb_harness.cuh", "kwb_harness.cuh");
        let mut c = nvcc("kernel=gemm_mma_sync;probe=accumulator", &["nvcc", "-c"]);
        c.args
            .extend([format!("{NASTY}.cu"), "-o".into(), format!("{NASTY}.o")].map(OsString::from));
        c.nvcc_runs = true;
        c.works("", &["cache"]).then(|d, o| {
            assert!(
                o.stderr.contains(&format!("{NASTY}.cu: 2 probes")),
                "{}",
                o.stderr
            );
            let args = o.nvcc.as_ref().expect("nvcc ran");
            let copy = args
                .iter()
                .find(|a| a.ends_with(&format!("/tu/{NASTY}.cu")))
                .unwrap_or_else(|| panic!("the copy is compiled: {args:?}"));
            let text = std::fs::read_to_string(copy).unwrap();
            let original = std::fs::read_to_string(d.join(format!("{NASTY}.cu"))).unwrap();
            // The unit's name, then the original with its probes.
            let stripped = kwb_instrument::strip(&text).unwrap();
            let (unit, rest) = stripped.split_once('\n').unwrap();
            assert!(unit.starts_with("#define KWB_TRACE_UNIT "), "{unit}");
            assert_eq!(rest, original);
            assert!(args.contains(&format!("{NASTY}.o")), "{args:?}");
        })
    }),
];

/// `MAINLOOP` instrumented.
fn traced() -> String {
    let config = kwb_instrument::Config {
        file_name: "k.cu".to_owned(),
        ..kwb_instrument::Config::default()
    };
    kwb_instrument::instrument(MAINLOOP, &config).unwrap().0
}

/// Every entry under `dir` (links not followed), with regular files' bytes.
fn listing(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let relative = path.strip_prefix(dir).unwrap().to_path_buf();
            if meta.is_dir() {
                stack.push(path);
                out.insert(relative, None);
            } else if meta.is_file() {
                out.insert(relative, Some(std::fs::read(&path).unwrap()));
            } else {
                out.insert(relative, None);
            }
        }
    }
    out
}

/// The stand-in nvcc: records its arguments, one a line, where
/// `KWB_TEST_NVCC_LOG` says, and succeeds.
fn stand_in(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let nvcc = bin.join("nvcc");
    std::fs::write(
        &nvcc,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$KWB_TEST_NVCC_LOG\"\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// The CUDA home of the toolchain this process finds, if any.
fn toolchain_here() -> Option<PathBuf> {
    kwb_toolchain::toolchain(&kwb_toolchain::Env::from_process())
        .ok()
        .map(|t| t.home)
}

/// Runs one case in its own folder; every failed expectation names the case.
#[allow(clippy::print_stderr, reason = "a skipped case says why")]
fn check(label: &str, setup: Setup, bin_dir: &Path, log: &Path) -> Result<(), String> {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let case = setup(d);
    // A case that needs the toolchain gets the one found here by its home: the
    // stand-in nvcc first on PATH must not stand in for it.
    let home = case.needs_toolchain.then(toolchain_here);
    if home == Some(None) {
        eprintln!("skipped (no CUDA toolchain): {label}");
        return Ok(());
    }
    let before = listing(d);
    let _ = std::fs::remove_file(log);
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new(case.bin.path());
    command
        .args(&case.args)
        .current_dir(d)
        .env("NO_COLOR", "1")
        .env("KWB_CACHE_DIR", d.join("cache"))
        .env("KWB_TEST_NVCC_LOG", log)
        .env("PATH", path)
        .env_remove("KWB_TRACE")
        .env_remove("KWB_NVCC_REAL");
    if let Some(Some(home)) = &home {
        command.env("KWB_CUDA_HOME", home);
    }
    for (key, value) in &case.env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    let outcome = Outcome {
        code: output.status.code().ok_or("killed by a signal")?,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        nvcc: std::fs::read_to_string(log)
            .ok()
            .map(|t| t.lines().map(str::to_owned).collect()),
    };
    let shown = format!(
        "exit {}\n--- stdout\n{}\n--- stderr\n{}",
        outcome.code, outcome.stdout, outcome.stderr
    );
    if outcome.stderr.contains("panicked") {
        return Err(format!("panicked\n{shown}"));
    }
    if outcome.code != case.code {
        return Err(format!("expected exit {}\n{shown}", case.code));
    }
    let said = match case.code {
        OK => &outcome.stdout,
        _ => &outcome.stderr,
    };
    if !said.contains(case.message) {
        return Err(format!(
            "expected {:?} in the message\n{shown}",
            case.message
        ));
    }
    if case.code != OK && outcome.stderr.trim().is_empty() {
        return Err(format!("a failure says nothing\n{shown}"));
    }
    if outcome.nvcc.is_some() && !case.nvcc_runs {
        return Err(format!("the real nvcc ran: {:?}\n{shown}", outcome.nvcc));
    }
    let after = listing(d);
    for (path, bytes) in &before {
        match after.get(path) {
            None => return Err(format!("{} was removed\n{shown}", path.display())),
            Some(now) if now != bytes => {
                return Err(format!("{} was modified\n{shown}", path.display()));
            }
            Some(_) => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        if !case.created.iter().any(|c| path.starts_with(c)) {
            return Err(format!("{} was left behind\n{shown}", path.display()));
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with(".tmp") || name.contains(".staging") {
            return Err(format!(
                "a temporary file {} was left\n{shown}",
                path.display()
            ));
        }
    }
    for path in &case.created {
        if !after.contains_key(path) {
            return Err(format!("{} was not created\n{shown}", path.display()));
        }
    }
    for path in &case.absent {
        if std::fs::symlink_metadata(d.join(path)).is_ok() {
            return Err(format!("{} exists afterwards\n{shown}", path.display()));
        }
    }
    if let Some(then) = case.then {
        then(d, &outcome);
    }
    Ok(())
}

#[test]
fn bad_input_catalogue() {
    assert!(CASES.len() >= 25);
    let labels: BTreeSet<&str> = CASES.iter().map(|(label, _)| *label).collect();
    assert_eq!(labels.len(), CASES.len(), "labels are unique");
    let tools = TempDir::new().unwrap();
    let bin_dir = stand_in(tools.path());
    let log = tools.path().join("nvcc-args.txt");
    let mut failures = Vec::new();
    for (label, setup) in CASES {
        let result = std::panic::catch_unwind(|| check(label, *setup, &bin_dir, &log));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(why)) => failures.push(format!("[{label}] {why}")),
            Err(_) => failures.push(format!("[{label}] a check panicked (see above)")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n\n")
    );
}
