//! `kwb-extract FILE (--kernel NAME | --template SPEC) -o DIR`: the exact
//! instantiation a launch site uses, as a self-contained reproducer: `DIR/repro.cu`
//! (the kernel and what it needs, copied verbatim with the lines they came from, and
//! C-ABI entry points; or the whole file and an entry that calls its launcher),
//! `DIR/kwb.toml` (the manifest), `DIR/build.sh` (the build with the flags given here,
//! every argument quoted, no path of this machine in it), `DIR/includes.txt` (the
//! include folders it was written with; `KWB_INCLUDES` replaces them elsewhere) and
//! the headers repro.cu includes from beside FILE.
//!
//! The input is never modified; each output file is written to a temporary file and
//! renamed into place.

use std::io::Write;
use std::path::{Path, PathBuf};

use kwb_extract::Extraction;

use crate::exit;
use crate::reproducer::{Target, extract_to};

#[derive(clap::Parser)]
#[command(
    name = "kwb-extract",
    version,
    about = "Extract the exact kernel instantiation a launch site uses into a self-contained reproducer (repro.cu, kwb.toml, build.sh)"
)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["kernel", "template"])))]
pub struct Args {
    #[command(flatten)]
    target: Target,
    /// The folder to write repro.cu, kwb.toml, build.sh, includes.txt and the local headers into (created if missing)
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Also print the extraction as JSON on stdout
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> i32 {
    let x = match extract_to(&args.target, &args.output) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let shown = if args.json {
        serde_json::to_string_pretty(&x).unwrap_or_default()
    } else {
        summary(&x, &args.output)
    };
    match writeln!(std::io::stdout(), "{shown}") {
        Ok(()) => exit::OK,
        Err(_) => exit::INTERNAL,
    }
}

fn summary(x: &Extraction, dir: &Path) -> String {
    let mut lines = vec![match &x.host.tasks {
        Some(t) => format!(
            "instantiation: {}, a task of {}",
            t.function, x.instantiation
        ),
        None => format!("instantiation: {}", x.instantiation),
    }];
    for a in &x.args {
        let value = match (&a.value, &a.unfolded) {
            (Some(v), _) => format!("{v}"),
            (None, Some(why)) => format!("{} (not folded: {why})", a.emitted),
            (None, None) => a.emitted.clone(),
        };
        lines.push(format!("  {} = {value}    written `{}`", a.name, a.written));
    }
    if let Some(l) = &x.launch {
        lines.push(format!(
            "launch site: line {} (`{}<<<{}>>>`)",
            l.line,
            l.callee,
            l.config.join(", ")
        ));
    }
    if let Some(t) = &x.host.tasks {
        lines.push(format!(
            "task: called at line {} (when {}), run by launching {} on {} CTA(s) with one {} per {} x {} output tile:",
            t.call_line, t.dispatch, x.instantiation, t.ctas, t.task_type, t.tile[0], t.tile[1]
        ));
        for f in &t.fields {
            lines.push(match f.how.as_str() {
                "unread" => format!("  {:<14} zero (not read by the task)", f.name),
                how => format!("  {:<14} {} ({how})", f.name, f.value),
            });
        }
        for p in &t.scratch {
            lines.push(format!(
                "  kernel parameter `{p}`: a zeroed {} KiB device buffer",
                t.scratch_bytes / 1024
            ));
        }
    }
    if let Some(t) = &x.host.through {
        lines.push(format!(
            "through the launcher: {} (line {}); {}",
            t.path.join(" -> "),
            t.line,
            t.unit
        ));
        for b in &t.bindings {
            lines.push(format!(
                "  {:<10} {:<18} {} ({})",
                b.param, b.role, b.value, b.from
            ));
        }
        lines.push(format!(
            "  layout: A {}, B {}, C {}, D {} ({})",
            t.layout.a, t.layout.b, t.layout.c, t.layout.d, t.layout.from
        ));
        let elements: Vec<String> = x
            .host
            .launcher
            .iter()
            .filter(|p| matches!(p.role.as_str(), "A" | "B" | "C" | "D" | "bias"))
            .map(|p| format!("{} {}", p.role, p.element.as_deref().unwrap_or("?")))
            .collect();
        if !elements.is_empty() {
            lines.push(format!("  operands: {}", elements.join(", ")));
        }
        // What the runner's answers and tolerances follow beyond alpha·A·B + beta·C.
        let mut answer = Vec::new();
        if let Some(acc) = &x.accumulator {
            answer.push(format!("accumulates in {acc}"));
        }
        if let Some(m) = &x.mma_input {
            answer.push(format!("the MMA reads A and B as {m}"));
        }
        if let Some(a) = &t.activation {
            answer.push(format!("the epilogue applies {a}"));
        }
        if t.output_saturates {
            answer.push("the output conversion saturates".to_owned());
        }
        if !answer.is_empty() {
            lines.push(format!(
                "  {} (the ladder's answers and tolerances follow)",
                answer.join("; ")
            ));
        }
    }
    for d in &x.descriptors {
        let show = |f: &kwb_extract::Field| f.values.join(", ");
        lines.push(format!(
            "TMA descriptor at line {} in `{}`: {}, rank {}, dims {{{}}}, strides {{{}}}, box {{{}}}, {}",
            d.line,
            d.function,
            show(&d.data_type),
            show(&d.rank),
            show(&d.global_dims),
            show(&d.global_strides),
            show(&d.box_dims),
            show(&d.swizzle)
        ));
        for f in [&d.global_dims, &d.global_strides, &d.box_dims, &d.swizzle] {
            for change in &f.changes {
                lines.push(format!("  {change}"));
            }
        }
    }
    lines.push(format!(
        "copied {} blocks of the file; wrote {}/repro.cu, kwb.toml, build.sh and includes.txt",
        x.copied.len(),
        dir.display()
    ));
    lines.join("\n")
}
