//! `cargo xtask gpu-bench`: what Track A costs, on a machine with a GPU. For the
//! register-operand (mma_sync) and shared-operand (tma_wgmma_sm90) families at
//! M = N = K = 4096, one run times, with the harness's `--time` (CUDA events around
//! each launch alone, mean over launches after a warm-up; a traced build's trace
//! buffer is emptied before each launch, untimed, so every timed launch writes its
//! records, as the launch a trace is taken of does):
//!
//! - `original`: the kernel as written;
//! - `disabled`: instrumented with every probe kind, built without `KWB_TRACE`;
//! - `one CTA`: the same, built with `KWB_TRACE`, recording CTA (0, 0, 0);
//! - `all CTAs, summary: …`: every CTA's probes folded into the summary table
//!   (`--summary`: absmax and NaN/Inf counts per site and K tile, no records): the
//!   final accumulator and the epilogue, per-K-tile accumulators, operands, every
//!   kind;
//! - `all CTAs: …`: every CTA recording absmax and NaN/Inf counts only (no values,
//!   `--absmax-only`) into a buffer of 4 Mi records: the final accumulator and the
//!   epilogue (the screen for the CTA that goes wrong), then per-K-tile accumulators,
//!   operands, and every kind; and every kind into a buffer of 64 Ki records, which
//!   the launch fills early: what recording costs once records are dropped;
//! - `… no leases`: one CTA, and every CTA recording the per-K-tile accumulator and
//!   every kind, built with `KWB_TRACE_LEASE=0` (an atomic per claim instead of
//!   record leases in shared memory);
//! - `all CTAs, screen: …`: the same four sets, and the operands with the final
//!   accumulator and the epilogue, folded into a screen (`--screen`: one row per site,
//!   every K tile in it, a cell for each warp);
//! - `… no occupancy floor`: the every-kind screen built without it (below);
//! - `memcheck`: the original under `compute-sanitizer --tool memcheck`;
//!
//! and reads each build's registers, stack and local (spill) memory with
//! `cuobjdump -res-usage`. The original is built first: every traced build but the
//! one named so is instrumented with `--max-regs` set to the original's registers
//! (the occupancy floor, kwb_trace.cuh), as the docs tell a user to build a trace. The
//! report is Markdown, for docs/BENCHMARKS.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use kwb_toolchain::CompileFlags;

use crate::kernels::tools;
use crate::suite::{Suite, flags};
use crate::{Failure, Result};

/// Options of the task.
pub struct Options {
    pub launches: u32,
    pub memcheck_launches: u32,
    pub size: u32,
    pub out: PathBuf,
    pub commit: Option<String>,
}

/// The families measured: one with register operands, one with shared ones.
const FAMILIES: [&str; 2] = ["mma_sync", "tma_wgmma_sm90"];

/// The suffix of the one traced build made without the occupancy floor.
const NO_FLOOR: &str = ", no occupancy floor";

/// One build of the benchmark.
struct Config {
    name: String,
    instrumented: Option<kwb_instrument::Config>,
    defines: Vec<String>,
}

fn configs(family_source: &str) -> Vec<Config> {
    let base = kwb_instrument::Config {
        file_name: format!("kernels/{family_source}"),
        ..kwb_instrument::Config::default()
    };
    vec![
        Config {
            name: "original".to_owned(),
            instrumented: None,
            defines: Vec::new(),
        },
        Config {
            name: "disabled".to_owned(),
            instrumented: Some(base.clone()),
            defines: Vec::new(),
        },
        Config {
            name: "one CTA".to_owned(),
            instrumented: Some(kwb_instrument::Config {
                cta: Some([0, 0, 0]),
                ..base.clone()
            }),
            defines: vec![kwb_runtime::ENABLE_MACRO.to_owned()],
        },
        Config {
            name: "one CTA, K tiles 0..4".to_owned(),
            instrumented: Some(kwb_instrument::Config {
                cta: Some([0, 0, 0]),
                k_tiles: Some((0, 4)),
                ..base.clone()
            }),
            defines: vec![kwb_runtime::ENABLE_MACRO.to_owned()],
        },
        Config {
            name: "one CTA, accumulator only".to_owned(),
            instrumented: Some(kwb_instrument::Config {
                cta: Some([0, 0, 0]),
                probes: kwb_instrument::Probes {
                    accumulator: true,
                    final_accumulator: true,
                    ..kwb_instrument::Probes::NONE
                },
                ..base.clone()
            }),
            defines: vec![kwb_runtime::ENABLE_MACRO.to_owned()],
        },
        Config {
            name: "one CTA, operands only".to_owned(),
            instrumented: Some(kwb_instrument::Config {
                cta: Some([0, 0, 0]),
                probes: kwb_instrument::Probes {
                    operands: true,
                    ..kwb_instrument::Probes::NONE
                },
                ..base.clone()
            }),
            defines: vec![kwb_runtime::ENABLE_MACRO.to_owned()],
        },
        Config {
            name: "one CTA, epilogue only".to_owned(),
            instrumented: Some(kwb_instrument::Config {
                cta: Some([0, 0, 0]),
                probes: kwb_instrument::Probes {
                    epilogue: true,
                    ..kwb_instrument::Probes::NONE
                },
                ..base.clone()
            }),
            defines: vec![kwb_runtime::ENABLE_MACRO.to_owned()],
        },
    ]
    .into_iter()
    .chain(
        screens().into_iter().map(|(what, probes)| {
            summary(&format!("all CTAs, summary: {what}"), probes, &base, false)
        }),
    )
    .chain(
        screens()
            .into_iter()
            .map(|(what, probes)| all_ctas(&format!("all CTAs: {what}"), probes, &base)),
    )
    .chain(
        screens()
            .into_iter()
            .chain([screen_set()])
            .map(|(what, probes)| {
                summary(&format!("all CTAs, screen: {what}"), probes, &base, true)
            }),
    )
    .chain([summary(
        &format!("all CTAs, screen: every kind{NO_FLOOR}"),
        kwb_instrument::Probes::default(),
        &base,
        true,
    )])
    .chain([all_ctas_in(
        "all CTAs: every kind, buffer full (64 Ki records)",
        kwb_instrument::Probes::default(),
        &base,
        65536,
    )])
    .chain(without_leases(&base))
    .collect()
}

/// The builds whose cost the record leases change most, again with
/// `KWB_TRACE_LEASE=0` (an atomic per claim, waited for only when the record is
/// written): one CTA, where leases pay, and every CTA recording, where every warp
/// waits for its lease refills. The same call then compares the two.
fn without_leases(base: &kwb_instrument::Config) -> Vec<Config> {
    let [_, per_k_tile, _, every] = screens();
    let one_cta = Config {
        name: "one CTA, no leases".to_owned(),
        instrumented: Some(kwb_instrument::Config {
            cta: Some([0, 0, 0]),
            ..base.clone()
        }),
        defines: vec![kwb_runtime::ENABLE_MACRO.to_owned()],
    };
    let per_k_tile = all_ctas(
        &format!("all CTAs, no leases: {}", per_k_tile.0),
        per_k_tile.1,
        base,
    );
    let every = all_ctas(&format!("all CTAs, no leases: {}", every.0), every.1, base);
    [one_cta, per_k_tile, every]
        .into_iter()
        .map(|mut config| {
            config.defines.push("KWB_TRACE_LEASE=0".to_owned());
            config
        })
        .collect()
}

/// What the all-CTA builds read: the final accumulator and the epilogue (the screen
/// for the CTA that goes wrong), the accumulator per K tile, operands, every kind.
fn screens() -> [(&'static str, kwb_instrument::Probes); 4] {
    use kwb_instrument::Probes;
    [
        (
            "final accumulator and epilogue",
            Probes {
                final_accumulator: true,
                epilogue: true,
                ..Probes::NONE
            },
        ),
        (
            "accumulator per K tile and epilogue",
            Probes {
                accumulator: true,
                final_accumulator: true,
                epilogue: true,
                ..Probes::NONE
            },
        ),
        (
            "operands",
            Probes {
                operands: true,
                ..Probes::NONE
            },
        ),
        ("every kind", Probes::default()),
    ]
}

/// Every CTA's `probes` folded into the summary table (`--summary`: absmax and NaN/Inf
/// counts per site and K tile, no records), or with `screen` into a screen (`--screen`:
/// one row per site, every K tile folded into it, and a cell for each warp).
fn summary(
    name: &str,
    probes: kwb_instrument::Probes,
    base: &kwb_instrument::Config,
    screen: bool,
) -> Config {
    Config {
        name: name.to_owned(),
        instrumented: Some(kwb_instrument::Config {
            summary: true,
            screen,
            probes,
            ..base.clone()
        }),
        defines: vec![kwb_runtime::ENABLE_MACRO.to_owned()],
    }
}

/// What a screen of every CTA reads when the accumulator after each K tile is left to
/// a one-CTA trace: the operands the MMA consumes, the final accumulator and the
/// epilogue (folded over K tiles, the per-K-tile accumulator's NaN and Inf carry into
/// the final one).
fn screen_set() -> (&'static str, kwb_instrument::Probes) {
    (
        "operands, final accumulator and epilogue",
        kwb_instrument::Probes {
            operands: true,
            final_accumulator: true,
            epilogue: true,
            ..kwb_instrument::Probes::NONE
        },
    )
}

/// Every CTA recording `probes`, absmax and NaN/Inf counts only (no values, no min and
/// max), into a buffer of 4 Mi records.
fn all_ctas(name: &str, probes: kwb_instrument::Probes, base: &kwb_instrument::Config) -> Config {
    all_ctas_in(name, probes, base, 4 << 20)
}

/// [`all_ctas`] into a buffer of `capacity` records.
fn all_ctas_in(
    name: &str,
    probes: kwb_instrument::Probes,
    base: &kwb_instrument::Config,
    capacity: u32,
) -> Config {
    Config {
        name: name.to_owned(),
        instrumented: Some(kwb_instrument::Config {
            values: Some(0),
            absmax_only: true,
            probes,
            ..base.clone()
        }),
        defines: vec![
            kwb_runtime::ENABLE_MACRO.to_owned(),
            format!("KWB_TRACE_CAPACITY={capacity}"),
        ],
    }
}

pub fn run(root: &Path, options: &Options) -> Result {
    let suite = Suite::load(root)?;
    let (toolchain, cutlass) = tools()?;
    let dir = root.join("target/gpu-bench");
    std::fs::create_dir_all(&dir).map_err(|e| Failure(format!("{}: {e}", dir.display())))?;
    let (gpu, nvcc, date) = crate::gpu_suite::machine(&toolchain);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "- date: {date}\n- commit: {}\n- GPU: {gpu}\n- nvcc: {nvcc}\n- shape: M = N = K = {}, all-ones bf16 inputs; {} launches timed per build ({} under memcheck)\n",
        options.commit.as_deref().unwrap_or("(not given)"),
        options.size,
        options.launches,
        options.memcheck_launches
    );
    let mut failures = Vec::new();
    for name in FAMILIES {
        let family = suite
            .families
            .get(name)
            .ok_or_else(|| Failure(format!("kernels/suite.toml has no family {name}")))?;
        let variant = suite
            .variant
            .iter()
            .find(|v| v.family == name && v.defect == "none")
            .ok_or_else(|| Failure(format!("{name} has no `none` variant")))?;
        let arch = &family.arches[0];
        let source = root.join("kernels").join(&family.source);
        let text = std::fs::read_to_string(&source)
            .map_err(|e| Failure(format!("{}: {e}", source.display())))?;
        let _ = writeln!(
            out,
            "### {name}\n\n| build | ms per launch | vs original | registers | stack | local (spill) |\n|---|---|---|---|---|---|"
        );
        let mut original_ms = None;
        let mut original_binary = None;
        // The original first (its registers set the traced builds' occupancy floor),
        // then every other configuration in parallel; then time them one after
        // another.
        let configs = configs(&family.source);
        let mut jobs = Vec::new();
        let mut floor = None;
        for config in &configs {
            let tag = config.name.replace([' ', ',', '.'], "_");
            let binary = dir.join(format!("{name}.{tag}"));
            let mut build_flags: CompileFlags =
                flags(root, family, variant, arch, cutlass.as_ref())?;
            build_flags.defines.extend(config.defines.iter().cloned());
            // A traced build gets the floor as a user asks for it: kwb-instrument's
            // `--max-regs`, which defines KWB_TRACE_MAX_REGS in the file.
            let traced = config
                .defines
                .iter()
                .any(|d| d == kwb_runtime::ENABLE_MACRO);
            let max_regs = floor.filter(|_| traced && !config.name.ends_with(NO_FLOOR));
            let file = match &config.instrumented {
                None => source.clone(),
                Some(c) => {
                    let c = kwb_instrument::Config {
                        max_regs,
                        ..c.clone()
                    };
                    let (traced, _) = kwb_instrument::instrument(&text, &c)
                        .map_err(|e| Failure(format!("{name}: {e}")))?;
                    let path = dir.join(format!("{name}.{tag}.cu"));
                    std::fs::write(&path, traced)
                        .map_err(|e| Failure(format!("{}: {e}", path.display())))?;
                    if let Some(parent) = source.parent() {
                        build_flags.includes.push(parent.to_owned());
                    }
                    path
                }
            };
            if config.instrumented.is_none() {
                // The original: built now, its registers the floor of what follows.
                kwb_toolchain::compile_executable(&toolchain, &file, &build_flags, &binary)
                    .map_err(|e| Failure(format!("{name} {}: build failed: {e}", config.name)))?;
                let usage = kwb_toolchain::resource_usage(&toolchain, &binary)
                    .map(|u| kernel_usage(&u))
                    .unwrap_or_default();
                floor = usage.0.parse::<u32>().ok().filter(|&r| r > 0);
                let _ = writeln!(
                    out,
                    "| (occupancy floor of the traced builds: KWB_TRACE_MAX_REGS = {}) | | | | | |",
                    floor.map_or(
                        "none: the original's registers are unknown".to_owned(),
                        |r| r.to_string()
                    )
                );
            }
            jobs.push((file, build_flags, binary, config.instrumented.is_none()));
        }
        let built: Vec<std::result::Result<(), String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|(file, build_flags, binary, done)| {
                    let toolchain = &toolchain;
                    scope.spawn(move || {
                        if *done {
                            return Ok(());
                        }
                        kwb_toolchain::compile_executable(toolchain, file, build_flags, binary)
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("the build panicked".to_owned()))
                })
                .collect()
        });
        for ((config, (_, _, binary, _)), result) in configs.iter().zip(&jobs).zip(built) {
            if let Err(e) = result {
                failures.push(format!("{name} {}: build failed: {e}", config.name));
                continue;
            }
            let usage = kwb_toolchain::resource_usage(&toolchain, binary)
                .map(|u| kernel_usage(&u))
                .unwrap_or_default();
            match time(binary, options.size, options.launches, None) {
                Ok(ms) => {
                    if config.name == "original" {
                        original_ms = Some(ms);
                        original_binary = Some(binary.clone());
                    }
                    let ratio = original_ms.map_or("-".to_owned(), |o| format!("{:.3}×", ms / o));
                    let _ = writeln!(
                        out,
                        "| {} | {ms:.4} | {ratio} | {} | {} | {} |",
                        config.name, usage.0, usage.1, usage.2
                    );
                }
                Err(e) => failures.push(format!("{name} {}: {e}", config.name)),
            }
        }
        if let (Some(binary), Some(o)) = (original_binary, original_ms) {
            match time(
                &binary,
                options.size,
                options.memcheck_launches,
                Some("compute-sanitizer"),
            ) {
                Ok(ms) => {
                    let _ = writeln!(
                        out,
                        "| original under memcheck | {ms:.4} | {:.3}× | | | |",
                        ms / o
                    );
                }
                Err(e) => failures.push(format!("{name} memcheck: {e}")),
            }
        }
        let _ = writeln!(out);
    }
    for f in &failures {
        let _ = writeln!(out, "- failed: {f}");
    }
    std::fs::write(&options.out, &out)
        .map_err(|e| Failure(format!("{}: {e}", options.out.display())))?;
    print!("{out}");
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failure(format!("{} measurements failed", failures.len())))
    }
}

/// Runs the harness in timing mode (under `wrapper --tool memcheck` when given) and
/// reads the milliseconds per launch from its KWB_TIME line.
fn time(binary: &Path, size: u32, launches: u32, wrapper: Option<&str>) -> Result<f64> {
    let size = size.to_string();
    let launches = launches.to_string();
    let args = [
        "--m", &size, "--n", &size, "--k", &size, "--input", "ones", "--time", &launches,
    ];
    let output = match wrapper {
        Some(tool) => Command::new(tool)
            .args(["--tool", "memcheck", "--print-limit", "10"])
            .arg(binary)
            .args(args)
            .output(),
        None => Command::new(binary).args(args).output(),
    }
    .map_err(|e| Failure(format!("{}: {e}", binary.display())))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("KWB_TIME "))
        .ok_or_else(|| {
            Failure(format!(
                "no KWB_TIME line ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" / ")
            ))
        })?;
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| Failure(format!("KWB_TIME: {e}")))?;
    value["ms"]
        .as_f64()
        .ok_or_else(|| Failure("KWB_TIME has no ms".to_owned()))
}

/// The registers, stack and local bytes of the GEMM kernel (the function with the
/// most registers) in `cuobjdump -res-usage` output.
fn kernel_usage(text: &str) -> (String, String, String) {
    let field = |line: &str, key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(|v| v.trim_end_matches(',').to_owned())
    };
    text.lines()
        .filter(|l| l.contains("REG:"))
        .filter_map(|l| {
            let reg = field(l, "REG:")?;
            Some((
                reg.parse::<u32>().unwrap_or(0),
                (
                    reg,
                    field(l, "STACK:").unwrap_or_default(),
                    field(l, "LOCAL:").unwrap_or_default(),
                ),
            ))
        })
        .max_by_key(|(regs, _)| *regs)
        .map(|(_, usage)| usage)
        .unwrap_or_default()
}
