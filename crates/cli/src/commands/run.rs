//! `kwb run DIR`: a kwb-extract reproducer on the controlled-input ladder, on the GPU
//! (kwb-gpu does the work). Exit 0 when every rung passes, 5 when one fails (wrong
//! numbers, NaN/Inf, or a kernel fault), 6 when a launch hangs, 7 when nothing could
//! run on a GPU (no driver, a refused launch).

use std::io::Write;
use std::path::PathBuf;

use kwb_gpu::{GpuError, MapReading, Report};

use crate::ladder_args::{LadderArgs, dim3, run_options};
use crate::{exit, render};

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

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BLayout {
    /// N rows of K (a weight matrix, `out_features x in_features`)
    Nk,
    /// K rows of N
    Kn,
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
                render::comparison(out, c, at_first)?;
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
        writeln!(out, "{}", MapReading::line(map))?;
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

/// `kwb run-worker JOB`: the GPU half of `kwb run`, in its own process.
pub fn worker(job: PathBuf) -> i32 {
    kwb_gpu::worker::main(&job)
}
