//! The ladder's arguments, shared by `kwb ladder`, `kwb run` and `kwb diagnose`: the
//! rungs and the problem they run ([`LadderArgs`]), the value parsers of shapes, rungs,
//! element types and launch dimensions, and the run options they make.

use std::time::Duration;

use kwb_gpu::RunOptions;
use kwb_ladder::{Dtype, Rung};

use crate::{exit, render};

/// The rungs `kwb run` climbs when `--ladder` is not given.
pub const DEFAULT_LADDER: &str = "zeros,ones,seq-identity,onehot-k:0,small-int,random";

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

pub fn parse_rung(text: &str) -> Result<Rung, String> {
    Rung::parse(text).map_err(|e| e.to_string())
}

pub fn parse_dtype(text: &str) -> Result<Dtype, String> {
    match text {
        "bf16" => Ok(Dtype::Bf16),
        "f16" | "fp16" | "half" => Ok(Dtype::F16),
        "f32" | "fp32" | "float" => Ok(Dtype::F32),
        "e4m3" | "fp8" | "fp8_e4m3" => Ok(Dtype::E4m3),
        other => Err(format!(
            "`{other}` is not a dtype; choose bf16, f16, f32 or e4m3"
        )),
    }
}

pub fn numbers<const N: usize>(text: &str, what: &str) -> Result<[usize; N], String> {
    let parts: Vec<usize> = text
        .split(',')
        .map(|p| p.trim().parse::<usize>().ok().filter(|v| *v > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("`{text}` is not {what} (positive integers)"))?;
    parts
        .try_into()
        .map_err(|_| format!("`{text}` is not {what}"))
}

pub fn parse_shape(text: &str) -> Result<(usize, usize, usize), String> {
    let [m, n, k] = numbers::<3>(text, "M,N,K")?;
    Ok((m, n, k))
}

pub fn dim3(text: &str) -> Result<[u32; 3], String> {
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
