//! `kwb run DIR`: a kwb-extract reproducer on the controlled-input ladder, on the GPU
//! (kwb-gpu does the work). Exit 0 when every rung passes, 5 when one fails (wrong
//! numbers, NaN/Inf, or a kernel fault), 6 when a launch hangs, 7 when nothing could
//! run on a GPU (no driver, a refused launch).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use kwb_gpu::{GpuError, MapReading, Report, RunOptions};
use kwb_ladder::{Dtype, Rung};

use crate::commands::ladder::{human, numbers, parse_dtype, parse_rung, parse_shape};
use crate::{exit, render};

/// The rungs `kwb run` climbs when `--ladder` is not given.
pub const DEFAULT_LADDER: &str = "zeros,ones,seq-identity,onehot-k:0,small-int,random";

#[derive(clap::Args)]
pub struct Args {
    /// The reproducer folder kwb-extract wrote (repro.cu, kwb.toml)
    dir: PathBuf,
    #[command(flatten)]
    ladder: LadderArgs,
    /// Real data, run last as the `dump` rung: A (M x K). A .npy, a .safetensors
    /// (FILE:TENSOR names one of several), or a raw dump with --dump-dtype and --shape
    #[arg(long, value_name = "FILE", requires = "dump_b")]
    dump_a: Option<PathBuf>,
    /// B of the dump rung: N x K (as weights are stored), or K x N with --b-layout kn
    #[arg(long, value_name = "FILE", requires = "dump_a")]
    dump_b: Option<PathBuf>,
    /// C of the dump rung (M x N), read when beta is not 0
    #[arg(long, value_name = "FILE", requires = "dump_a")]
    dump_c: Option<PathBuf>,
    /// How the dumped B is laid out
    #[arg(long, value_enum, default_value = "nk")]
    b_layout: BLayout,
    /// The element type of raw dumps (any extension but .npy and .safetensors)
    #[arg(long, value_enum, value_name = "DTYPE")]
    dump_dtype: Option<crate::dump::RawDtype>,
    /// The launch configuration, instead of the reproducer's kwb_config
    #[arg(long, value_name = "X,Y,Z", value_parser = dim3)]
    grid: Option<[u32; 3]>,
    #[arg(long, value_name = "X,Y,Z", value_parser = dim3)]
    block: Option<[u32; 3]>,
    #[arg(long, value_name = "BYTES")]
    smem: Option<u64>,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

/// The ladder and the problem it runs: the arguments kwb run and kwb diagnose share.
#[derive(clap::Args)]
pub struct LadderArgs {
    /// The rungs, in order: zeros, ones, seq-identity, onehot-k:K0, small-int[:SEED],
    /// random[:SEED]
    #[arg(long, value_delimiter = ',', value_parser = parse_rung, default_value = DEFAULT_LADDER)]
    pub ladder: Vec<Rung>,
    /// The GEMM shape M,N,K [default: the dumps', else 256,384,1024]
    #[arg(long, value_name = "M,N,K", value_parser = parse_shape)]
    pub shape: Option<(usize, usize, usize)>,
    /// D = alpha * A·B + beta * C; 2 by default, so a dropped alpha shows
    #[arg(long, default_value_t = 2.0)]
    pub alpha: f32,
    #[arg(long, default_value_t = 0.0)]
    pub beta: f32,
    /// Elements added to every leading dimension the kernel or its launcher takes
    /// (padding holds NaN, so a pitch taken for a width shows); 0 packs them
    #[arg(long, default_value_t = 64)]
    pub ld_pad: usize,
    /// The element type of A and B where neither the kernel nor its launcher names a
    /// known one: bf16, f16, f32, e4m3
    #[arg(long, value_parser = parse_dtype)]
    pub dtype: Option<Dtype>,
    /// Seconds a launch may take before it is reported as HANG and killed
    #[arg(long, default_value_t = 20.0)]
    pub timeout: f64,
    /// Where the answers of rungs without a closed form (small-int, random, dump) are
    /// computed: host (f64), gpu (kwb's own f64 GEMM kernel, built apart from the
    /// kernel under test), or auto (the GPU above 2^27 multiply-adds per rung).
    /// zeros, ones, seq-identity and onehot-k are compared with their closed form
    #[arg(long, value_enum, default_value = "auto")]
    pub reference: Reference,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BLayout {
    /// N rows of K (a weight matrix, `out_features x in_features`)
    Nk,
    /// K rows of N
    Kn,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Reference {
    Host,
    Gpu,
    Auto,
}

impl From<Reference> for kwb_gpu::ReferenceOn {
    fn from(r: Reference) -> Self {
        match r {
            Reference::Host => kwb_gpu::ReferenceOn::Host,
            Reference::Gpu => kwb_gpu::ReferenceOn::Gpu,
            Reference::Auto => kwb_gpu::ReferenceOn::Auto,
        }
    }
}

fn dim3(text: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = text.split(',').collect();
    let padded = match parts.len() {
        1 => format!("{text},1,1"),
        2 => format!("{text},1"),
        _ => text.to_owned(),
    };
    let [x, y, z] = numbers::<3>(&padded, "X,Y,Z")?;
    let u = |v: usize| u32::try_from(v).map_err(|_| format!("`{text}` is too large"));
    Ok([u(x)?, u(y)?, u(z)?])
}

/// Why the dumps cannot be used.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
enum DumpArgError {
    #[error("{path}: {why}")]
    #[diagnostic(
        code(kwb::run::bad_dump),
        help(
            "dump the operand as a 2-D array: numpy.save, safetensors, or raw bytes with --dump-dtype and --shape"
        )
    )]
    Unreadable {
        path: PathBuf,
        why: crate::dump::DumpError,
    },
    #[error("{path}: {why}")]
    #[diagnostic(code(kwb::run::bad_dump))]
    Io { path: PathBuf, why: std::io::Error },
    #[error("{0}: a raw dump carries no shape")]
    #[diagnostic(
        code(kwb::run::dump_shape),
        help("give --shape M,N,K and --dump-dtype")
    )]
    RawNeedsShape(PathBuf),
    #[error("{path} is {found:?}; {what}")]
    #[diagnostic(
        code(kwb::run::dump_shape),
        help("A is M x K, B is N x K (or K x N with --b-layout kn), C is M x N")
    )]
    Shape {
        path: PathBuf,
        found: Vec<usize>,
        what: String,
    },
}

/// A dumped operand: its shape and values; `raw` is the shape a raw dump must have.
fn read_dump(
    path: &std::path::Path,
    raw: &[usize],
    dtype: Option<crate::dump::RawDtype>,
) -> Result<(Vec<usize>, Vec<f32>), DumpArgError> {
    // `FILE:TENSOR` names a tensor of a .safetensors file.
    let (file, tensor) = match path.to_str().and_then(|p| p.rsplit_once(':')) {
        Some((f, t)) if !path.exists() && f.ends_with(".safetensors") => {
            (PathBuf::from(f), Some(t.to_owned()))
        }
        _ => (path.to_path_buf(), None),
    };
    let typed = matches!(
        file.extension().and_then(|e| e.to_str()),
        Some("npy" | "safetensors")
    );
    if !typed && raw.contains(&0) {
        return Err(DumpArgError::RawNeedsShape(file));
    }
    let bytes = std::fs::read(&file).map_err(|why| DumpArgError::Io {
        path: file.clone(),
        why,
    })?;
    let (shape, values) =
        crate::dump::read(&file, &bytes, tensor.as_deref(), dtype, raw).map_err(|why| {
            DumpArgError::Unreadable {
                path: file.clone(),
                why,
            }
        })?;
    if shape.len() != 2 {
        return Err(DumpArgError::Shape {
            path: file,
            found: shape,
            what: "a GEMM operand is 2-D".to_owned(),
        });
    }
    Ok((shape, values))
}

/// M, N, K.
type Shape = (usize, usize, usize);

/// The dump rung's operands (logical, row-major) and the problem shape they make.
fn dumps(args: &Args) -> Result<Option<(kwb_gpu::Dump, Shape)>, DumpArgError> {
    let (Some(a_path), Some(b_path)) = (&args.dump_a, &args.dump_b) else {
        return Ok(None);
    };
    let given = args.ladder.shape;
    let raw = |rows: fn(Shape) -> [usize; 2]| given.map(rows).unwrap_or([0, 0]);
    let (a_shape, a) = read_dump(a_path, &raw(|(m, _, k)| [m, k]), args.dump_dtype)?;
    let (m, k) = (a_shape[0], a_shape[1]);
    let b_raw = match args.b_layout {
        BLayout::Nk => raw(|(_, n, k)| [n, k]),
        BLayout::Kn => raw(|(_, n, k)| [k, n]),
    };
    let (b_shape, b) = read_dump(b_path, &b_raw, args.dump_dtype)?;
    let (n, b_k) = match args.b_layout {
        BLayout::Nk => (b_shape[0], b_shape[1]),
        BLayout::Kn => (b_shape[1], b_shape[0]),
    };
    if b_k != k {
        return Err(DumpArgError::Shape {
            path: b_path.clone(),
            found: b_shape,
            what: format!("A ({}) has K = {k}", a_path.display()),
        });
    }
    if let Some(s) = given
        && s != (m, n, k)
    {
        return Err(DumpArgError::Shape {
            path: a_path.clone(),
            found: a_shape,
            what: format!("--shape says M,N,K = {},{},{}", s.0, s.1, s.2),
        });
    }
    // B logical K x N, row-major.
    let b = match args.b_layout {
        BLayout::Kn => b,
        BLayout::Nk => {
            let mut t = vec![0.0; k * n];
            for j in 0..n {
                for p in 0..k {
                    t[p * n + j] = b[j * k + p];
                }
            }
            t
        }
    };
    let c = match &args.dump_c {
        Some(path) => {
            let (shape, c) = read_dump(path, &[m, n], args.dump_dtype)?;
            if shape != [m, n] {
                return Err(DumpArgError::Shape {
                    path: path.clone(),
                    found: shape,
                    what: format!("C must be M x N = [{m}, {n}]"),
                });
            }
            Some(c)
        }
        None => None,
    };
    let source = format!("{} · {}", a_path.display(), b_path.display());
    Ok(Some((kwb_gpu::Dump { source, a, b, c }, (m, n, k))))
}

/// The run options of `ladder` at `shape` (no dump, the reproducer's own launch
/// configuration): kwb's cache and its own binary as the worker. A failure is rendered
/// and returned as the exit code.
pub fn run_options(
    ladder: &LadderArgs,
    shape: (usize, usize, usize),
    progress: kwb_gpu::Progress,
) -> Result<RunOptions, i32> {
    let cache = match kwb_toolchain::cache::cache_dir(&kwb_toolchain::Env::from_process()) {
        Ok(c) => c.join("repro"),
        Err(e) => {
            render::error(miette::Report::new(e));
            return Err(exit::INPUT);
        }
    };
    let worker = match std::env::current_exe() {
        Ok(exe) => vec![exe.display().to_string(), "run-worker".to_owned()],
        Err(e) => {
            render::error(miette::Report::msg(format!(
                "cannot find kwb's own binary: {e}"
            )));
            return Err(exit::INTERNAL);
        }
    };
    Ok(RunOptions {
        rungs: ladder.ladder.clone(),
        request: kwb_gpu::plan::Request {
            shape,
            alpha: ladder.alpha,
            beta: ladder.beta,
            ld_pad: ladder.ld_pad,
            dtype: ladder.dtype,
        },
        timeout: Duration::from_secs_f64(ladder.timeout.max(0.1)),
        grid: None,
        block: None,
        smem: None,
        worker,
        cache,
        reference: ladder.reference.into(),
        dump: None,
        progress,
        worker_env: Vec::new(),
    })
}

pub fn run(args: Args) -> i32 {
    let dump = match dumps(&args) {
        Ok(d) => d,
        Err(e) => {
            render::error(miette::Report::new(e));
            return exit::INPUT;
        }
    };
    let shape = dump
        .as_ref()
        .map(|(_, s)| *s)
        .or(args.ladder.shape)
        .unwrap_or((256, 384, 1024));
    // A progress line on a terminal; nothing when stderr is piped.
    let spinner = crate::progress::Spinner::new();
    let mut options = match run_options(&args.ladder, shape, spinner.progress()) {
        Ok(o) => o,
        Err(code) => return code,
    };
    options.grid = args.grid;
    options.block = args.block;
    options.smem = args.smem;
    options.dump = dump.map(|(d, _)| d);
    let result = kwb_gpu::run(&args.dir, &options);
    spinner.finish();
    match result {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            let written = if args.json {
                serde_json::to_writer_pretty(&mut out, &report)
                    .map_err(std::io::Error::other)
                    .and_then(|()| writeln!(out))
            } else {
                human_report(&mut out, &report)
            };
            if written.is_err() {
                return exit::INTERNAL;
            }
            if report.hung() {
                exit::HANG
            } else if report.launch_refused() {
                exit::NO_GPU
            } else if report.passed() {
                exit::OK
            } else {
                exit::MISMATCH
            }
        }
        Err(e) => {
            let code = match e {
                GpuError::NoDriver { .. } | GpuError::Worker(_) => exit::NO_GPU,
                GpuError::Io { .. } => exit::INTERNAL,
                _ => exit::INPUT,
            };
            render::error(miette::Report::new(e));
            code
        }
    }
}

fn human_report(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    let p = &r.plan;
    writeln!(out, "{} from {}", r.instantiation, r.source)?;
    writeln!(
        out,
        "built {} ({})",
        r.library.display(),
        if r.cached {
            "cached: nothing compiled".to_owned()
        } else {
            format!("nvcc {:.1} s", r.compile_seconds)
        }
    )?;
    writeln!(
        out,
        "problem: M={} N={} K={}, alpha={} beta={}; A {} (lda {}), B {} N x K (ldb {}), output {} {} (ld {}){}",
        p.m,
        p.n,
        p.k,
        p.alpha,
        p.beta,
        p.operand(kwb_gpu::plan::Role::A).dtype.name(),
        p.lda,
        p.operand(kwb_gpu::plan::Role::B).dtype.name(),
        p.ldb,
        p.output.name(),
        p.operand(p.output).dtype.name(),
        p.operand(p.output).ld,
        r.device
            .as_ref()
            .map(|d| format!("; on {d}"))
            .unwrap_or_default()
    )?;
    if let Some(f) = &r.failed {
        writeln!(out, "ERROR before any launch: {f}")?;
    }
    for rung in &r.rungs {
        let launch = rung
            .launch
            .map(|l| format!(" [grid {:?} block {:?} smem {}]", l.grid, l.block, l.smem))
            .unwrap_or_default();
        match (&rung.comparison, rung.status) {
            (Some(c), _) => {
                let at_first = rung
                    .first
                    .map(|f| format!("the kernel wrote {}, the answer is {}", f.got, f.want));
                human(out, c, at_first)?;
                if let Some(p) = &rung.pattern {
                    writeln!(out, "  pattern: {}", p.pattern.label())?;
                }
                if let Some(u) = &rung.unwritten {
                    writeln!(
                        out,
                        "  {} outputs never written (still the runner's fill), the first at (m, n) = {:?}; ratio with them as 0: {:.4}",
                        u.count, u.first, u.ratio_as_zero
                    )?;
                }
                if let Some(ms) = rung.kernel_ms {
                    let reference = rung
                        .reference_ms
                        .map(|r| format!(", GPU reference {r:.1} ms"))
                        .unwrap_or_default();
                    writeln!(out, "  kernel {ms:.3} ms{reference}{launch}")?;
                }
            }
            (None, "not-run") => writeln!(
                out,
                "NOT RUN {}: an earlier rung ended the worker",
                rung.rung
            )?,
            (None, status) => {
                writeln!(
                    out,
                    "{} {}: {}{launch}",
                    status.to_ascii_uppercase(),
                    rung.rung,
                    rung.error.as_deref().unwrap_or("")
                )?;
                if let Some(bt) = &rung.backtrace {
                    writeln!(out, "cuda-gdb, every thread:\n{bt}")?;
                }
            }
        }
    }
    for map in &r.maps {
        writeln!(out, "{}", map_line(map))?;
    }
    writeln!(
        out,
        "wall: inputs {:.2} s, GPU worker {:.2} s, comparison {:.2} s",
        r.timing.prepare_s, r.timing.worker_s, r.timing.compare_s
    )?;
    let verdict = if r.hung() {
        "HANG"
    } else if r.passed() {
        "every rung passed"
    } else if r.launch_refused() {
        "nothing ran on the GPU"
    } else {
        "a rung failed"
    };
    writeln!(out, "{verdict}")
}

/// One line on a map the kernel received: what it holds, and whether it is the
/// canonical map of the buffer it covers.
pub(crate) fn map_line(m: &MapReading) -> String {
    let covers = m.covers.as_deref().unwrap_or("none of the run's buffers");
    let Some(f) = &m.decoded else {
        return format!(
            "map {}: not decoded ({})",
            m.param,
            m.decode_error.as_deref().unwrap_or("no bytes")
        );
    };
    let list = |v: &[String]| v.join(", ");
    let swizzle = f.swizzle;
    let judged = match (m.diffs.as_slice(), &m.covers) {
        ([], Some(role)) => format!("matches {role}"),
        ([], None) => "well-formed".to_owned(),
        (diffs, _) => format!(
            "differs: {}",
            diffs
                .iter()
                .map(|d| format!("{} {} (expected {}: {})", d.field, d.got, d.expected, d.why))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
    format!(
        "map {} (covers {covers}): dims {{{}}} strides {{{}}} box {{{}}} {} swizzle {swizzle}: {judged}",
        m.param,
        list(&f.dims.iter().map(u64::to_string).collect::<Vec<_>>()),
        list(&f.strides.iter().map(u64::to_string).collect::<Vec<_>>()),
        list(&f.box_dim.iter().map(u32::to_string).collect::<Vec<_>>()),
        f.dtype,
    )
}

/// `kwb run-worker JOB`: the GPU half of `kwb run`, in its own process.
pub fn worker(job: PathBuf) -> i32 {
    kwb_gpu::worker::main(&job)
}

#[cfg(test)]
mod tests {
    use kwb_diagnose::{MapDiff, MapDtype, Swizzle, TensorMapFields};

    use super::*;

    #[test]
    fn a_map_line_names_what_the_map_holds_and_how_it_differs() {
        let fields = TensorMapFields {
            address: 0x1000,
            rank: 2,
            dtype: MapDtype::Bf16,
            dims: vec![1024, 256],
            strides: vec![2048],
            box_dim: vec![64, 128],
            element_strides: vec![1, 1],
            interleave: 0,
            swizzle: Swizzle::B128,
            l2_promotion: 0,
            oob_nan: false,
            im2col: false,
            box_bytes: 16384,
            large: false,
        };
        let mut m = MapReading {
            param: "tmap_a".to_owned(),
            bytes_hex: String::new(),
            decoded: Some(fields),
            decode_error: None,
            covers: Some("A".to_owned()),
            diffs: Vec::new(),
        };
        assert_eq!(
            map_line(&m),
            "map tmap_a (covers A): dims {1024, 256} strides {2048} box {64, 128} bf16 swizzle 128B: matches A"
        );
        m.diffs.push(MapDiff {
            field: "strides[0]",
            got: "2048".to_owned(),
            expected: "2176".to_owned(),
            why: "the pitch is 1024 elements where 1088 are expected".to_owned(),
        });
        assert!(
            map_line(&m).ends_with(
                "128B: differs: strides[0] 2048 (expected 2176: the pitch is 1024 elements where 1088 are expected)"
            ),
            "{}",
            map_line(&m)
        );
    }
}
