//! Track B inside the user's process: the parent's half of `kwb_insitu.cuh`'s
//! protocol (see that header). The program, built through kwb-nvcc with the kernel's
//! launches rewritten, writes `launch.txt` at the launch chosen; this module reads it
//! ([`Launch::parse`]), pairs the arguments with the kernel's parameters and their
//! roles into a [`Plan`] ([`plan`]), writes each rung's inputs in the operands'
//! storage layout and `plan.txt` ([`serve`]), and once the program has run them reads
//! `rungs.txt` and `done.txt` back into the same rung reports `kwb run` gives
//! ([`judge`]).
//!
//! Invariants: every buffer plan.txt names is one of the launch's own pointer
//! arguments, at most the bytes the plan's operand holds, and the header refuses the
//! whole plan unless each lies inside the allocation its pointer is in; the inputs and
//! answers are kwb-ladder's, exactly as `kwb run` makes them.

use std::path::{Path, PathBuf};

use kwb_extract::Param;
use kwb_ladder::{Dtype, Rung};

use crate::error::GpuError;
use crate::job::JobRung;
use crate::plan::{Operand, Plan, Role, dtype_named, ld_field};
use crate::supervise::Outcome;
use crate::{Judging, Report, RungReport, Timing, prepare, write};

/// The files of the protocol, in the folder both sides share.
pub const LAUNCH_FILE: &str = "launch.txt";
pub const PLAN_FILE: &str = "plan.txt";
pub const RUNGS_FILE: &str = "rungs.txt";
pub const DONE_FILE: &str = "done.txt";

/// One argument of the launch, as the program passed it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A device address, with the allocation it lies in (base, bytes) where the driver
    /// said.
    Pointer {
        address: u64,
        allocation: Option<(u64, u64)>,
    },
    Int(i64),
    Float(f64),
    /// A trivially copyable value's bytes (a `CUtensorMap`, a struct of parameters).
    Bytes(Vec<u8>),
    /// A value kwb could not copy: only its size.
    Opaque(usize),
}

/// One argument: its value and its C++ type as the compiler named it.
#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub value: Value,
    pub type_name: String,
}

/// The launch the program stopped at.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// The kernel's name, and the callee as the launch writes it (`gemm<T>`).
    pub kernel: String,
    pub callee: String,
    /// Where it is launched: the user's file (through `#line`) and line.
    pub file: String,
    pub line: usize,
    /// The GPU and its compute capability (`NVIDIA H200`, `90`).
    pub device: Option<(String, String)>,
    /// The launch's grid (x, y, z).
    pub grid: Option<[u32; 3]>,
    pub args: Vec<Arg>,
}

fn bad(why: impl Into<String>) -> GpuError {
    GpuError::Worker(format!("launch.txt: {}", why.into()))
}

fn hex(text: &str) -> Option<u64> {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).ok()
}

impl Launch {
    /// Reads launch.txt's text.
    pub fn parse(text: &str) -> Result<Launch, GpuError> {
        let mut launch = Launch {
            kernel: String::new(),
            callee: String::new(),
            file: String::new(),
            line: 0,
            device: None,
            grid: None,
            args: Vec::new(),
        };
        let mut lines = text.lines();
        if lines.next().map(|l| l.split('\t').collect::<Vec<_>>()) != Some(vec!["kwb-insitu", "1"])
        {
            return Err(bad("not written by kwb_insitu.cuh version 1"));
        }
        for line in lines.filter(|l| !l.is_empty()) {
            let f: Vec<&str> = line.split('\t').collect();
            match (f[0], f.len()) {
                ("kernel", 2) => launch.kernel = f[1].to_owned(),
                ("callee", 2) => launch.callee = f[1].to_owned(),
                ("at", 3) => {
                    launch.file = f[1].to_owned();
                    launch.line = f[2].parse().map_err(|_| bad(line))?;
                }
                ("device", 3) => launch.device = Some((f[1].to_owned(), f[2].to_owned())),
                ("grid", 4) => {
                    let d = |i: usize| f[i].parse::<u32>().map_err(|_| bad(line));
                    launch.grid = Some([d(1)?, d(2)?, d(3)?]);
                }
                ("arg", 5) | ("arg", 7) => {
                    let index: usize = f[1].parse().map_err(|_| bad(line))?;
                    if index != launch.args.len() {
                        return Err(bad(format!("argument {index} out of order")));
                    }
                    let value = match f[2] {
                        "ptr" => Value::Pointer {
                            address: hex(f[3]).ok_or_else(|| bad(line))?,
                            allocation: match f.len() {
                                7 => Some((
                                    hex(f[5]).ok_or_else(|| bad(line))?,
                                    f[6].parse().map_err(|_| bad(line))?,
                                )),
                                _ => None,
                            },
                        },
                        "int" => Value::Int(f[3].parse().map_err(|_| bad(line))?),
                        "float" => Value::Float(f[3].parse().map_err(|_| bad(line))?),
                        "bytes" => Value::Bytes(
                            (0..f[3].len() / 2)
                                .map(|i| u8::from_str_radix(&f[3][2 * i..2 * i + 2], 16))
                                .collect::<Result<_, _>>()
                                .map_err(|_| bad(line))?,
                        ),
                        "opaque" => Value::Opaque(f[3].parse().map_err(|_| bad(line))?),
                        _ => return Err(bad(line)),
                    };
                    launch.args.push(Arg {
                        value,
                        type_name: f[4].to_owned(),
                    });
                }
                _ => return Err(bad(line)),
            }
        }
        if launch.kernel.is_empty() {
            return Err(bad("no kernel line"));
        }
        Ok(launch)
    }
}

/// What the user said where the launch and the kernel's parameters do not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// M, N, K, where the kernel takes no such parameters (compile-time sizes).
    pub shape: Option<(usize, usize, usize)>,
    /// Each operand's layout (`A=km`, …), as `--layout` spells it: `mk|km`, `nk|kn`,
    /// `mn|nm`; the default is A M x K and B N x K with K contiguous, C and D row-major.
    pub layout: Vec<(Role, String)>,
    /// The element type of A and B where neither the argument's type nor the
    /// parameter's says.
    pub dtype: Option<Dtype>,
    /// Roles the user gave kernel parameters (`--bind lhs=A`, `--bind rows=M`,
    /// `--bind stride=lda`), over what their names and types suggest.
    pub roles: Vec<(String, String)>,
}

/// The role and leading-dimension target of a `--bind` value; `None` for a value that
/// names no role.
fn bound_role(value: &str) -> Option<(&'static str, Option<Role>)> {
    Some(match value {
        "A" => ("A", None),
        "B" => ("B", None),
        "C" => ("C", None),
        "D" => ("D", None),
        "bias" => ("bias", None),
        "M" | "m" => ("m", None),
        "N" | "n" => ("n", None),
        "K" | "k" => ("k", None),
        "alpha" => ("alpha", None),
        "beta" => ("beta", None),
        "lda" => ("leading-dimension", Some(Role::A)),
        "ldb" => ("leading-dimension", Some(Role::B)),
        "ldc" => ("leading-dimension", Some(Role::C)),
        "ldd" => ("leading-dimension", Some(Role::D)),
        _ => return None,
    })
}

/// Where each operand's buffer comes from: its role and the launch's argument.
pub type Buffers = Vec<(Role, usize)>;

/// The ladder's element type of an argument's C++ type (`const __nv_bfloat16*`,
/// `c10::BFloat16*`).
fn pointee(type_name: &str) -> Option<Dtype> {
    let t = type_name
        .replace(['*', '&'], " ")
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "volatile" | "__restrict__" | "__restrict"))
        .collect::<Vec<_>>()
        .join(" ");
    match t.rsplit("::").next().unwrap_or(&t) {
        "BFloat16" => Some(Dtype::Bf16),
        "Half" | "__half" => Some(Dtype::F16),
        "Float8_e4m3fn" => Some(Dtype::E4m3),
        other => dtype_named(other),
    }
}

/// The plan of this launch: each of the kernel's `params` (their roles as kwb-extract
/// reads them) paired with the launch's argument in its place.
pub fn plan(
    params: &[Param],
    launch: &Launch,
    request: &Request,
) -> Result<(Plan, Buffers), GpuError> {
    if params.len() != launch.args.len() {
        return Err(GpuError::Worker(format!(
            "`{}` has {} parameters and the launch at {}:{} passed {} arguments",
            launch.kernel,
            params.len(),
            launch.file,
            launch.line,
            launch.args.len()
        )));
    }
    let named = |p: &Param| format!("`{}` ({})", p.name, p.declaration.trim());
    // The user's roles first: each names a parameter and a role kwb knows.
    let mut given: Vec<(String, Option<Role>)> = Vec::new();
    for (name, value) in &request.roles {
        if !params.iter().any(|p| &p.name == name) {
            let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
            return Err(GpuError::Worker(format!(
                "--bind {name}={value}: `{}` has no parameter `{name}` (its parameters: {})",
                launch.kernel,
                names.join(", ")
            )));
        }
        let Some((role, ld)) = bound_role(value) else {
            return Err(GpuError::Worker(format!(
                "--bind {name}={value}: in the program's own process a parameter is bound to a role: A, B, C, D, bias, M, N, K, lda, ldb, ldc, ldd, alpha or beta"
            )));
        };
        given.push((role.to_owned(), ld));
    }
    let role_of = |p: &Param| -> (String, Option<Role>) {
        match request.roles.iter().position(|(n, _)| *n == p.name) {
            Some(i) => given[i].clone(),
            None => (p.role.clone(), ld_field(p)),
        }
    };
    let mut buffers: Buffers = Vec::new();
    let mut dtypes: Vec<(Role, Dtype)> = Vec::new();
    let (mut m, mut n, mut k) = (None, None, None);
    // alpha and beta are what the launch passes (the kernel computes with them), else
    // 1 and 0.
    let (mut alpha, mut beta): (Option<f32>, Option<f32>) = (None, None);
    let mut lds: Vec<(Role, usize)> = Vec::new();
    for (i, (p, a)) in params.iter().zip(&launch.args).enumerate() {
        let (role_name, ld_target) = role_of(p);
        let int = match a.value {
            Value::Int(v) => Some(v),
            _ => None,
        };
        let number = match a.value {
            Value::Int(v) => Some(v as f64),
            Value::Float(v) => Some(v),
            _ => None,
        };
        if let Some(role) = crate::plan::Role::parse(&role_name) {
            if !matches!(a.value, Value::Pointer { .. }) {
                return Err(GpuError::Worker(format!(
                    "{} reads as operand {} but the launch passed no pointer ({})",
                    named(p),
                    role.name(),
                    a.type_name
                )));
            }
            let dtype = pointee(&a.type_name)
                .or_else(|| p.element.as_deref().and_then(dtype_named))
                .or(request.dtype)
                .ok_or_else(|| GpuError::UnknownElement {
                    param: p.name.clone(),
                    element: a.type_name.clone(),
                })?;
            buffers.push((role, i));
            dtypes.push((role, dtype));
            continue;
        }
        let positive = int.filter(|v| *v > 0).map(|v| v as usize);
        match role_name.as_str() {
            "m" => m = positive,
            "n" => n = positive,
            "k" => k = positive,
            "alpha" => alpha = number.map(|v| v as f32),
            "beta" => beta = number.map(|v| v as f32),
            "leading-dimension" => {
                if let (Some(r), Some(v)) = (ld_target, positive) {
                    lds.push((r, v));
                }
            }
            _ => {}
        }
    }
    let has = |r: Role| buffers.iter().any(|(b, _)| *b == r);
    if !has(Role::A) || !has(Role::B) || !(has(Role::C) || has(Role::D)) {
        let listed: Vec<String> = params
            .iter()
            .map(|p| format!("{} as {}", p.name, role_of(p).0))
            .collect();
        return Err(GpuError::Worker(format!(
            "kwb reads no A, B and output among `{}`'s parameters ({}); say which are with --bind NAME=A, --bind NAME=B, --bind NAME=D",
            launch.kernel,
            listed.join(", ")
        )));
    }
    let (m, n, k) = match (request.shape, m, n, k) {
        (Some(s), _, _, _) => s,
        (None, Some(m), Some(n), Some(k)) => (m, n, k),
        _ => {
            return Err(GpuError::Worker(format!(
                "the launch of `{}` passes no M, N and K kwb can read (M {:?}, N {:?}, K {:?}); give them with --shape M,N,K",
                launch.kernel, m, n, k
            )));
        }
    };
    let layout = |r: Role| {
        request
            .layout
            .iter()
            .find(|(l, _)| *l == r)
            .map(|(_, s)| s.as_str())
    };
    let transposed = |r: Role| match r {
        Role::A => layout(r) == Some("km"),
        Role::B => layout(r) == Some("kn"),
        Role::C | Role::D => layout(r) == Some("nm"),
        Role::Bias => false,
    };
    let dtype = |r: Role| dtypes.iter().find(|(d, _)| *d == r).map(|(_, t)| *t);
    let output = if has(Role::D) { Role::D } else { Role::C };
    let out_type = dtype(output).unwrap_or(Dtype::F32);
    let dims = |r: Role| match r {
        Role::A => (m, k),
        Role::B => (n, k),
        Role::Bias => (1, n),
        _ => (m, n),
    };
    let mut operands = Vec::new();
    for r in [Role::A, Role::B, Role::C, Role::D, Role::Bias] {
        if !has(r) {
            continue;
        }
        let (rows, cols) = dims(r);
        let width = if transposed(r) { rows } else { cols };
        let ld = lds
            .iter()
            .find(|(l, _)| *l == r)
            .map_or(width, |(_, v)| *v)
            .max(width);
        operands.push(Operand {
            role: r,
            dtype: dtype(r).unwrap_or(out_type),
            rows,
            cols,
            ld,
            transposed: transposed(r),
        });
    }
    let ld = |r: Role| operands.iter().find(|o| o.role == r).map_or(0, |o| o.ld);
    let beta = beta.unwrap_or(0.0);
    if beta != 0.0 && !has(Role::C) {
        return Err(GpuError::Worker(format!(
            "beta is {beta} but `{}` takes no C",
            launch.kernel
        )));
    }
    let plan = Plan {
        m,
        n,
        k,
        alpha: alpha.unwrap_or(1.0),
        beta,
        lda: ld(Role::A),
        ldb: ld(Role::B),
        ldc: ld(Role::C),
        ldd: ld(Role::D),
        operands,
        output,
        args: Vec::new(),
        params: params
            .iter()
            .map(|p| (p.name.clone(), p.declaration.clone()))
            .collect(),
        tile: (128, 128),
        tile_known: false,
        accumulator: None,
        mma_precision: None,
        activation: None,
        output_saturates: false,
    };
    Ok((plan, buffers))
}

/// A rung whose launch is traced: the CTA the trace records, and its file.
#[derive(Debug, Clone, PartialEq)]
pub struct Traced {
    pub rung: Rung,
    pub cta: [u32; 3],
    pub file: std::path::PathBuf,
}

/// What [`serve`] wrote: each rung's files and its host answer.
#[derive(Debug)]
pub struct Served {
    pub rungs: Vec<Rung>,
    pub jobs: Vec<JobRung>,
    pub answers: Vec<Vec<f64>>,
    pub prepare_s: f64,
}

/// Writes each rung's inputs in `dir` and then plan.txt, which the program is
/// waiting for: the buffers to keep (each pointer once, at the most bytes any role
/// reads or writes through it), and per rung the inputs to copy in, the output (and
/// an unread C) to fill with the all-ones NaN pattern, and the output to read back.
///
/// `traced`: the rungs whose launch is also traced, where the unit was built traced:
/// the trace records that CTA, its buffer is emptied before the launch and written
/// to the file after.
pub fn serve(
    dir: &Path,
    plan: &Plan,
    buffers: &Buffers,
    rungs: &[Rung],
    traced: &[Traced],
) -> Result<Served, GpuError> {
    let started = std::time::Instant::now();
    let problem = plan.problem()?;
    let mut jobs = Vec::new();
    let mut answers = Vec::new();
    for (i, rung) in rungs.iter().enumerate() {
        let (job, answer) = prepare(i, *rung, None, plan, &problem, dir, true)?;
        jobs.push(job);
        answers.push(answer);
    }
    let arg = |r: Role| buffers.iter().find(|(b, _)| *b == r).map(|(_, a)| *a);
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for o in &plan.operands {
        let Some(a) = arg(o.role) else { continue };
        match kept.iter_mut().find(|(k, _)| *k == a) {
            Some(k) => k.1 = k.1.max(o.bytes()),
            None => kept.push((a, o.bytes())),
        }
    }
    let mut text = String::new();
    for (a, bytes) in &kept {
        text.push_str(&format!("buffer\t{a}\t{bytes}\n"));
    }
    for job in &jobs {
        text.push_str(&format!("rung\t{}\n", job.name));
        for (role, file) in &job.inputs {
            if let Some(a) = arg(*role) {
                text.push_str(&format!("input\t{a}\t{}\n", file.display()));
            }
        }
        for role in &job.fill {
            if let Some(a) = arg(*role) {
                text.push_str(&format!("fill\t{a}\t{}\n", plan.operand(*role).bytes()));
            }
        }
        if let Some(a) = arg(plan.output) {
            text.push_str(&format!(
                "output\t{a}\t{}\t{}\n",
                plan.operand(plan.output).bytes(),
                job.output.display()
            ));
        }
        if let Some(t) = traced.iter().find(|t| t.rung.name() == job.name) {
            let [x, y, z] = t.cta;
            text.push_str(&format!("cta\t{x}\t{y}\t{z}\n"));
            text.push_str(&format!("trace\t{}\n", t.file.display()));
        }
    }
    text.push_str("end\n");
    write(&dir.join(PLAN_FILE), text.as_bytes())?;
    Ok(Served {
        rungs: rungs.to_vec(),
        jobs,
        answers,
        prepare_s: started.elapsed().as_secs_f64(),
    })
}

/// How the program's session ended (done.txt).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ended {
    /// (argument, bytes, same) of each buffer put back and read again.
    pub restored: Vec<(usize, u64, bool)>,
    /// Why the program ran no rung (`refused …`, `skipped …`), or why it could not put
    /// the buffers back (`lost …`).
    pub refused: Option<String>,
    pub lost: Option<String>,
    /// done.txt was written: the session ended (else the program died or hung in it).
    pub finished: bool,
}

impl Ended {
    /// Reads done.txt's text.
    pub fn parse(text: &str) -> Ended {
        let mut e = Ended {
            finished: true,
            ..Ended::default()
        };
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            match f[0] {
                "restored" if f.len() == 4 => {
                    if let (Ok(a), Ok(b)) = (f[1].parse(), f[2].parse()) {
                        e.restored.push((a, b, f[3] == "same"));
                    }
                }
                "refused" | "skipped" => e.refused = Some(f[1..].join(" ")),
                "lost" => e.lost = Some(f[1..].join(" ")),
                _ => {}
            }
        }
        e
    }

    /// Every buffer kept was put back and reads as it did before the rungs.
    pub fn restored_all(&self) -> bool {
        self.finished
            && self.lost.is_none()
            && !self.restored.is_empty()
            && self.restored.iter().all(|r| r.2)
    }
}

/// Each rung's outcome from rungs.txt's text (a rung without a line did not run).
pub fn outcomes(text: &str, served: &Served) -> Vec<Outcome> {
    let mut out: Vec<Outcome> = served.jobs.iter().map(|_| Outcome::NotRun).collect();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 3 || f[0] != "rung" {
            continue;
        }
        let Some(i) = served.jobs.iter().position(|j| j.name == f[1]) else {
            continue;
        };
        out[i] = match (f[2], f.len()) {
            ("ok", 4) => Outcome::Done {
                ms: f[3].parse().unwrap_or(0.0),
                reference_ms: None,
            },
            ("error", 6) => Outcome::Failed {
                stage: f[3].to_owned(),
                message: format!("{} (error {})", f[5], f[4]),
            },
            _ => Outcome::Failed {
                stage: "kernel".to_owned(),
                message: line.to_owned(),
            },
        };
    }
    out
}

/// The rung reports of a session: each output read back and compared with its
/// answer, as `kwb run` compares them. A rung still running when the program stopped
/// (`hung_after`: the seconds it was given) is a hang.
pub fn judge(
    plan: &Plan,
    served: &Served,
    outcomes: &[Outcome],
    hung_after: Option<f64>,
) -> Result<Vec<RungReport>, GpuError> {
    let problem = plan.problem()?;
    let judging = Judging {
        plan,
        problem: &problem,
        config_source: "the program's own launch",
        timeout: std::time::Duration::from_secs_f64(hung_after.unwrap_or(0.0)),
    };
    let first_unrun = outcomes.iter().position(|o| matches!(o, Outcome::NotRun));
    let mut reports = Vec::new();
    for (i, ((rung, job), answer)) in served
        .rungs
        .iter()
        .zip(&served.jobs)
        .zip(&served.answers)
        .enumerate()
    {
        let outcome = match (&outcomes[i], hung_after) {
            (Outcome::NotRun, Some(seconds)) if Some(i) == first_unrun => Outcome::Hang {
                seconds,
                backtrace: None,
            },
            (o, _) => o.clone(),
        };
        reports.push(judging.judge(*rung, None, &outcome, job, answer)?);
    }
    Ok(reports)
}

/// The report of a session, in `kwb run`'s shape.
pub fn report(
    launch: &Launch,
    plan: Plan,
    buffers: &Buffers,
    rungs: Vec<RungReport>,
    failed: Option<String>,
    timing: Timing,
) -> Report {
    let address = |a: usize| match launch.args.get(a).map(|x| &x.value) {
        Some(Value::Pointer { address, .. }) => *address,
        _ => 0,
    };
    let buffer_list: Vec<(String, u64, u64)> = buffers
        .iter()
        .map(|(r, a)| {
            (
                r.name().to_owned(),
                address(*a),
                plan.operand(*r).bytes() as u64,
            )
        })
        .collect();
    // The TMA maps the kernel received: each CUtensorMap-sized argument.
    let maps: Vec<(String, String)> = plan
        .params
        .iter()
        .zip(&launch.args)
        .filter_map(|((name, _), a)| match &a.value {
            Value::Bytes(b) if b.len() == 128 && a.type_name.contains("CUtensorMap") => Some((
                name.clone(),
                b.iter().map(|x| format!("{x:02x}")).collect::<String>(),
            )),
            _ => None,
        })
        .collect();
    Report {
        instantiation: launch.callee.clone(),
        source: launch.file.clone(),
        library: PathBuf::new(),
        cached: false,
        compile_seconds: 0.0,
        flags: Vec::new(),
        device: launch
            .device
            .as_ref()
            .map(|(name, cc)| format!("{name} (sm_{cc})")),
        maps: crate::maps::readings(&plan, &buffer_list, &maps),
        buffers: buffer_list,
        plan,
        rungs,
        failed,
        timing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str, declaration: &str) -> Param {
        let (role, element) = kwb_extract::role(name, declaration);
        Param {
            name: name.to_owned(),
            declaration: declaration.to_owned(),
            role: role.to_owned(),
            element,
        }
    }

    const LAUNCH: &str = "kwb-insitu\t1\nkernel\tlinear_kernel\ncallee\tlinear_kernel\nat\t/src/linear_ext.cu\t98\ndevice\tNVIDIA H200\t90\ngrid\t6\t4\t1\n\
arg\t0\tptr\t0x7f0000000000\tconst __nv_bfloat16*\t0x7f0000000000\t2097152\n\
arg\t1\tptr\t0x7f0000200000\tconst __nv_bfloat16*\t0x7f0000200000\t2097152\n\
arg\t2\tptr\t0x7f0000400000\t__nv_bfloat16*\t0x7f0000400000\t2097152\n\
arg\t3\tint\t256\tint\narg\t4\tint\t384\tint\narg\t5\tint\t512\tint\n";

    fn params() -> Vec<Param> {
        vec![
            param("A", "const __nv_bfloat16* __restrict__ A"),
            param("B", "const __nv_bfloat16* __restrict__ B"),
            param("D", "__nv_bfloat16* __restrict__ D"),
            param("M", "int M"),
            param("N", "int N"),
            param("K", "int K"),
        ]
    }

    #[test]
    fn a_launch_reads_back_with_its_allocations_and_device() {
        let l = Launch::parse(LAUNCH).unwrap();
        assert_eq!(l.kernel, "linear_kernel");
        assert_eq!((l.file.as_str(), l.line), ("/src/linear_ext.cu", 98));
        assert_eq!(l.device, Some(("NVIDIA H200".to_owned(), "90".to_owned())));
        assert_eq!(l.grid, Some([6, 4, 1]));
        assert_eq!(
            l.args[0].value,
            Value::Pointer {
                address: 0x7f00_0000_0000,
                allocation: Some((0x7f00_0000_0000, 2_097_152))
            }
        );
        assert_eq!(l.args[5].value, Value::Int(512));
        assert!(Launch::parse("kwb-insitu\t2\n").is_err());
        assert!(Launch::parse(&LAUNCH.replace("arg\t1\t", "arg\t7\t")).is_err());
    }

    #[test]
    fn the_plan_pairs_roles_with_the_launch_values() {
        let l = Launch::parse(LAUNCH).unwrap();
        let (plan, buffers) = plan(&params(), &l, &Request::default()).unwrap();
        assert_eq!((plan.m, plan.n, plan.k), (256, 384, 512));
        assert_eq!(buffers, vec![(Role::A, 0), (Role::B, 1), (Role::D, 2)]);
        assert_eq!(plan.output, Role::D);
        assert_eq!(plan.operand(Role::A).dtype, Dtype::Bf16);
        assert_eq!(plan.operand(Role::B).bytes(), 384 * 512 * 2);
        assert!(plan.operands.iter().all(|o| o.role != Role::C));
        // Compile-time sizes need --shape; a missing output is named.
        let mut no_k = params();
        no_k[5] = param("kk", "int kk");
        let e = super::plan(&no_k, &l, &Request::default()).unwrap_err();
        assert!(e.to_string().contains("--shape"), "{e}");
        let shaped = Request {
            shape: Some((256, 384, 512)),
            ..Request::default()
        };
        assert!(super::plan(&no_k, &l, &shaped).is_ok());
        let e = super::plan(&params()[..5], &l, &Request::default()).unwrap_err();
        assert!(e.to_string().contains("6 arguments"), "{e}");
        // Parameters whose names say nothing, bound by the user.
        let opaque: Vec<Param> = ["lhs", "rhs", "res"]
            .iter()
            .map(|n| param(n, &format!("__nv_bfloat16* {n}")))
            .chain(
                ["rows", "cols", "depth"]
                    .iter()
                    .map(|n| param(n, &format!("int {n}"))),
            )
            .collect();
        let e = super::plan(&opaque, &l, &Request::default()).unwrap_err();
        assert!(e.to_string().contains("--bind NAME=A"), "{e}");
        let bound = Request {
            roles: [
                ("lhs", "A"),
                ("rhs", "B"),
                ("res", "D"),
                ("rows", "M"),
                ("cols", "N"),
                ("depth", "K"),
            ]
            .iter()
            .map(|(n, r)| ((*n).to_owned(), (*r).to_owned()))
            .collect(),
            ..Request::default()
        };
        let (p, _) = super::plan(&opaque, &l, &bound).unwrap();
        assert_eq!((p.m, p.n, p.k, p.output), (256, 384, 512, Role::D));
        let typo = Request {
            roles: vec![("lsh".to_owned(), "A".to_owned())],
            ..Request::default()
        };
        let e = super::plan(&opaque, &l, &typo).unwrap_err();
        assert!(e.to_string().contains("no parameter `lsh`"), "{e}");
    }

    #[test]
    fn plan_txt_keeps_each_buffer_and_reads_the_output_back() {
        let dir = tempfile::tempdir().unwrap();
        let l = Launch::parse(LAUNCH).unwrap();
        let (plan, buffers) = plan(&params(), &l, &Request::default()).unwrap();
        let trace = dir.path().join("ones.trace");
        let served = serve(
            dir.path(),
            &plan,
            &buffers,
            &[Rung::Ones, Rung::SeqIdentity],
            &[Traced {
                rung: Rung::Ones,
                cta: [1, 0, 0],
                file: trace.clone(),
            }],
        )
        .unwrap();
        let text = std::fs::read_to_string(dir.path().join(PLAN_FILE)).unwrap();
        assert!(
            text.starts_with(
                "buffer\t0\t262144\nbuffer\t1\t393216\nbuffer\t2\t196608\nrung\tones\n"
            ),
            "{text}"
        );
        assert!(text.contains("fill\t2\t196608\n"), "{text}");
        assert!(text.ends_with("end\n"));
        // The ones rung, and only it, is traced.
        assert_eq!(text.matches("trace\t").count(), 1);
        assert!(
            text.contains(&format!(
                "cta\t1\t0\t0\ntrace\t{}\nrung\tseq-identity",
                trace.display()
            )),
            "{text}"
        );
        assert_eq!(text.matches("output\t2\t196608\t").count(), 2);
        // A session that ran the first rung and stopped in the second: a hang there.
        let out = outcomes("rung\tones\tok\t0.5\n", &served);
        assert!(matches!(out[0], Outcome::Done { .. }));
        assert!(matches!(out[1], Outcome::NotRun));
        let ended = Ended::parse("restored\t0\t262144\tsame\nrestored\t2\t196608\tdiffers\nend\n");
        assert!(ended.finished && !ended.restored_all());
        assert!(Ended::parse("restored\t0\t4\tsame\nend\n").restored_all());
        assert!(!Ended::default().restored_all());
    }
}
