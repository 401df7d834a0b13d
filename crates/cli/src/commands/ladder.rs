//! `kwb ladder`: Track B's controlled inputs for a harness kwb does not run itself.
//! `kwb ladder write` writes a rung's operands (and its answer) as `.npy` files to
//! feed a kernel; `kwb ladder check` compares the output the kernel wrote (a `.npy`
//! of M x N floats) with the rung's answer: exactly for closed-form rungs, with the
//! first mismatch, the output/answer ratio and a per-tile error grid.

use std::io::Write;
use std::path::PathBuf;

use kwb_ladder::{Comparison, Dtype, Problem, Rung};
use miette::{Diagnostic, Report};
use thiserror::Error;

use crate::ladder_args::{numbers, parse_dtype, parse_rung, parse_shape};
use crate::{exit, npy, render};

/// What both subcommands need: the rung and the problem.
#[derive(clap::Args, Clone)]
pub struct Ladder {
    /// The rung: zeros, ones, seq-identity, onehot-k:K0, small-int[:SEED], random[:SEED]
    #[arg(long, value_parser = parse_rung)]
    rung: Rung,
    /// The GEMM shape M,N,K
    #[arg(long, value_name = "M,N,K", value_parser = parse_shape)]
    shape: (usize, usize, usize),
    /// The type of A and B (the operands are rounded to it): bf16, f16, f32, e4m3
    #[arg(long, default_value = "bf16", value_parser = parse_dtype)]
    dtype: Dtype,
    /// The type the kernel stores D in (exact answers are rounded to it)
    #[arg(long, default_value = "bf16", value_parser = parse_dtype)]
    out_dtype: Dtype,
    /// D = alpha * A·B (+ beta * C, C = 0 on every rung)
    #[arg(long, default_value_t = 1.0)]
    alpha: f32,
}

#[derive(clap::Args)]
pub struct WriteArgs {
    #[command(flatten)]
    ladder: Ladder,
    /// Folder for a.npy (M x K), b.npy (K x N), c.npy (M x N) and answer.npy (M x N)
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    ladder: Ladder,
    /// The kernel's output, M x N: a .npy (float32, float64 or float16), a
    /// .safetensors (F32, F64, F16 or BF16; --tensor names it when it holds several),
    /// or a raw little-endian dump with --dump-dtype
    output: PathBuf,
    /// The tensor of a .safetensors output
    #[arg(long, value_name = "NAME")]
    tensor: Option<String>,
    /// The element type of a raw output (any extension but .npy and .safetensors)
    #[arg(long, value_enum, value_name = "DTYPE")]
    dump_dtype: Option<crate::dump::RawDtype>,
    /// The output tile of the error grid, BM,BN (the kernel's CTA tile)
    #[arg(long, value_name = "BM,BN", default_value = "128,128", value_parser = parse_tile)]
    tile: (usize, usize),
    /// Print JSON
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Error, Diagnostic)]
enum LadderCliError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Ladder(#[from] kwb_ladder::LadderError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Unreadable(crate::error::CliError),
    #[error("{path}: {source}")]
    #[diagnostic(
        code(kwb::ladder::bad_dump),
        help(
            "save the kernel's output as an M x N float array: numpy.save, safetensors, or raw bytes with --dump-dtype"
        )
    )]
    Dump {
        path: PathBuf,
        source: crate::dump::DumpError,
    },
    #[error("{path} is {found:?}, the problem's output is [{m}, {n}]")]
    #[diagnostic(
        code(kwb::ladder::shape),
        help("pass the shape the kernel ran (--shape M,N,K) and save all of D")
    )]
    Shape {
        path: PathBuf,
        found: Vec<usize>,
        m: usize,
        n: usize,
    },
}

fn parse_tile(text: &str) -> Result<(usize, usize), String> {
    let [bm, bn] = numbers::<2>(text, "BM,BN")?;
    Ok((bm, bn))
}

impl Ladder {
    fn problem(&self) -> Result<Problem, kwb_ladder::LadderError> {
        let (m, n, k) = self.shape;
        let mut p = Problem::new(m, n, k, self.dtype, self.out_dtype)?;
        p.alpha = self.alpha;
        Ok(p)
    }
}

pub fn write(args: WriteArgs) -> i32 {
    let ladder = &args.ladder;
    let built = ladder
        .problem()
        .and_then(|p| ladder.rung.operands(&p).map(|o| (p, o)));
    let (p, o) = match built {
        Ok(x) => x,
        Err(e) => {
            render::error(Report::new(LadderCliError::from(e)));
            return exit::INPUT;
        }
    };
    let answer: Vec<f32> = ladder
        .rung
        .answer(&p)
        .unwrap_or_else(|| p.reference(&o))
        .iter()
        .map(|v| {
            if ladder.rung.exact_in(&p) {
                p.output.round(*v as f32)
            } else {
                *v as f32
            }
        })
        .collect();
    let files = [
        ("a.npy", npy::f32_array(&[p.m, p.k], &o.a)),
        ("b.npy", npy::f32_array(&[p.k, p.n], &o.b)),
        ("c.npy", npy::f32_array(&[p.m, p.n], &o.c)),
        ("answer.npy", npy::f32_array(&[p.m, p.n], &answer)),
    ];
    // All four files or none.
    let files: Vec<_> = files
        .iter()
        .map(|(name, bytes)| (args.output.join(name), bytes))
        .collect();
    let written = std::fs::create_dir_all(&args.output)
        .and_then(|()| crate::output::write_all_atomically(&files).map_err(|(_, e)| e));
    if let Err(source) = written {
        render::error(Report::new(crate::error::CliError::Unwritable {
            path: args.output.clone(),
            source,
        }));
        return exit::INPUT;
    }
    let _ = writeln!(
        std::io::stdout(),
        "wrote {} rung {} for {} x {} x {} (operands rounded to {}, row-major float32): a.npy, b.npy, c.npy, answer.npy in {}",
        if ladder.rung.exact_in(&p) {
            "exact"
        } else {
            "tolerance"
        },
        ladder.rung.name(),
        p.m,
        p.n,
        p.k,
        p.input.name(),
        args.output.display()
    );
    exit::OK
}

pub fn check(args: CheckArgs) -> i32 {
    match checked(&args) {
        Ok(c) => {
            let mut out = std::io::stdout().lock();
            let written = if args.json {
                serde_json::to_writer_pretty(&mut out, &c)
                    .map_err(std::io::Error::other)
                    .and_then(|()| writeln!(out))
            } else {
                render::comparison(&mut out, &c, None)
            };
            match (written, c.pass) {
                (Err(_), _) => exit::INTERNAL,
                (Ok(()), true) => exit::OK,
                (Ok(()), false) => exit::MISMATCH,
            }
        }
        Err(e) => {
            render::error(Report::new(e));
            exit::INPUT
        }
    }
}

fn checked(args: &CheckArgs) -> Result<Comparison, LadderCliError> {
    let ladder = &args.ladder;
    let p = ladder.problem()?;
    let o = ladder.rung.operands(&p)?;
    let bytes = std::fs::read(&args.output).map_err(|source| {
        LadderCliError::Unreadable(crate::error::CliError::Unreadable {
            path: args.output.clone(),
            source,
        })
    })?;
    let (shape, values) = crate::dump::read(
        &args.output,
        &bytes,
        args.tensor.as_deref(),
        args.dump_dtype,
        &[p.m, p.n],
    )
    .map_err(|source| LadderCliError::Dump {
        path: args.output.clone(),
        source,
    })?;
    if shape != [p.m, p.n] {
        return Err(LadderCliError::Shape {
            path: args.output.clone(),
            found: shape,
            m: p.m,
            n: p.n,
        });
    }
    let answer = ladder.rung.answer(&p).unwrap_or_else(|| p.reference(&o));
    Ok(kwb_ladder::compare(
        ladder.rung,
        &p,
        &answer,
        &values,
        args.tile,
    )?)
}
