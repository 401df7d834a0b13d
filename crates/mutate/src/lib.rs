//! Stage-labelled defects planted in a kernel: mutation testing for GPU GEMM kernels.
//!
//! The kernel map (kwb-sites) says where each stage of a kernel is; each operator in
//! [`operators`] plants one defect of one stage there, as a [`TextEdit`] on the
//! original text (byte ranges, applied once by kwb-edit): a K tile dropped or an MMA
//! issued twice (mma), alpha applied twice or beta·C dropped (epilogue), the prefetch
//! of the next K tile off by one (operand-load), a TMA map's swizzle changed
//! (descriptor). Each [`Mutant`] carries its stage, its operator, its line and a
//! one-line diff, so a test suite can be scored per stage and `kwb diagnose` can be
//! held to the stage it was planted in.
//!
//! Invariants: the source is only read; two mutants never have the same edit; every
//! mutant's text parses with no more syntax errors than the original (a mutant that
//! would not is dropped here, before any compiler sees it).

pub mod operators;

use kwb_edit::TextEdit;
use kwb_sites::{Kernel, KernelMap};
use kwb_syntax::Parsed;
use serde::Serialize;

/// The stage a mutant's defect lives in: the stages `kwb diagnose` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    OperandLoad,
    Mma,
    Epilogue,
    Descriptor,
}

impl Stage {
    pub const ALL: [Stage; 4] = [
        Stage::OperandLoad,
        Stage::Mma,
        Stage::Epilogue,
        Stage::Descriptor,
    ];

    /// The name `--stage` takes and the manifest prints.
    pub fn name(self) -> &'static str {
        match self {
            Stage::OperandLoad => "operand-load",
            Stage::Mma => "mma",
            Stage::Epilogue => "epilogue",
            Stage::Descriptor => "descriptor",
        }
    }

    pub fn parse(text: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == text.trim())
    }
}

/// What to mutate.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Only this kernel (its name or last name component) and the device functions
    /// whose sites it reaches; `None`: every kernel-like function of the file. TMA
    /// maps are encoded on the host: descriptor mutants come from the whole file.
    pub kernel: Option<String>,
    /// Only these stages; empty: every stage.
    pub stages: Vec<Stage>,
    /// Only these operators (names of [`operators::OPERATORS`]); empty: every one.
    /// Mutants keep the ids they have without this filter.
    pub operators: Vec<String>,
}

/// One planted defect.
#[derive(Clone, Debug, Serialize)]
pub struct Mutant {
    /// From 1, in source order of the edits.
    pub id: usize,
    pub stage: Stage,
    /// The operator's name (`k-tile-dropped`).
    pub operator: &'static str,
    /// The function the edit is in.
    pub function: String,
    /// 1-based line of the edit in the original file.
    pub line: usize,
    /// The line before and after: `-OLD\n+NEW`.
    pub diff: String,
    /// The edit on the original text.
    #[serde(skip)]
    pub edit: TextEdit,
    /// The mutated file: the original with `edit` applied (and parsed, when made).
    #[serde(skip)]
    pub text: String,
}

/// Why there is nothing to plant.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum MutateError {
    #[error("no kernel-like function named `{name}` in this file")]
    #[diagnostic(
        code(kwb::mutate::unknown_kernel),
        help("functions with sites: {available}")
    )]
    UnknownKernel { name: String, available: String },
    #[error("`{name}` is not an operator kwb mutate knows")]
    #[diagnostic(code(kwb::mutate::unknown_operator), help("operators: {known}"))]
    UnknownOperator { name: String, known: String },
    #[error("{what} has no site for the operators {operators}")]
    #[diagnostic(
        code(kwb::mutate::no_operator_site),
        help("`kwb mutate FILE --list` lists every operator's mutants here")
    )]
    NoOperatorSite { operators: String, what: String },
    #[error("{what} has no {stage} site to plant a defect at")]
    #[diagnostic(
        code(kwb::mutate::no_site),
        help("`kwb sites FILE` lists the sites kwb finds; ask for another --stage")
    )]
    NoSite { stage: &'static str, what: String },
}

/// The kernel-like functions a config covers: the named one and the device functions
/// it calls that have sites, or every function with sites.
fn covered<'m>(
    source: &str,
    map: &'m KernelMap,
    config: &Config,
) -> Result<Vec<&'m Kernel>, MutateError> {
    let with_sites = || map.kernels.iter().filter(|k| !k.sites.is_empty());
    let Some(name) = &config.kernel else {
        return Ok(with_sites().collect());
    };
    let short = |k: &Kernel| k.name.rsplit("::").next().unwrap_or(&k.name).to_owned();
    let Some(kernel) = with_sites().find(|k| k.name == *name || short(k) == *name) else {
        return Err(MutateError::UnknownKernel {
            name: name.clone(),
            available: with_sites()
                .map(|k| k.name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    // The device helpers whose names the kernel's body calls (an MMA wrapper, a load).
    let body = source.get(kernel.range.clone()).unwrap_or("");
    let mut out = vec![kernel];
    out.extend(with_sites().filter(|k| {
        k.role == "device" && !std::ptr::eq(*k, kernel) && body.contains(&format!("{}(", short(k)))
    }));
    Ok(out)
}

/// Every mutant `config` asks for in `source`, numbered in source order. An error when
/// the kernel is not in the file or a requested stage has no site.
pub fn mutants(source: &str, config: &Config) -> Result<Vec<Mutant>, MutateError> {
    if let Some(name) = config
        .operators
        .iter()
        .find(|o| !operators::OPERATORS.iter().any(|(n, _)| n == o))
    {
        return Err(MutateError::UnknownOperator {
            name: name.clone(),
            known: operators::OPERATORS.map(|(n, _)| n).join(", "),
        });
    }
    let parsed = kwb_syntax::parse(source);
    let map = kwb_sites::kernel_map(&parsed, &[]);
    let functions = covered(source, &map, config)?;
    let stages: Vec<Stage> = if config.stages.is_empty() {
        Stage::ALL.to_vec()
    } else {
        config.stages.clone()
    };
    let mut planted = Vec::new();
    for &stage in &stages {
        let found = operators::plant(&parsed, &map, &functions, stage);
        if found.is_empty() && !config.stages.is_empty() {
            return Err(MutateError::NoSite {
                stage: stage.name(),
                what: config
                    .kernel
                    .as_ref()
                    .map_or("this file".to_owned(), |k| format!("`{k}`")),
            });
        }
        planted.extend(found);
    }
    let mut numbered = number(source, &parsed, planted);
    if !config.operators.is_empty() {
        numbered.retain(|m| config.operators.iter().any(|o| o == m.operator));
        if numbered.is_empty() {
            return Err(MutateError::NoOperatorSite {
                operators: config.operators.join(", "),
                what: config
                    .kernel
                    .as_ref()
                    .map_or("this file".to_owned(), |k| format!("`{k}`")),
            });
        }
    }
    Ok(numbered)
}

/// The planted edits that apply and parse, without duplicates, as numbered mutants.
fn number(source: &str, parsed: &Parsed, planted: Vec<operators::Planted>) -> Vec<Mutant> {
    let errors = parsed.diagnostics.len();
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<Mutant> = Vec::new();
    let mut sorted = planted;
    sorted.sort_by_key(|p| (p.at, p.stage));
    for p in sorted {
        let mut builder = TextEdit::builder();
        for indel in &p.indels {
            builder.push(indel.clone());
        }
        let Ok(edit) = builder.finish() else { continue };
        let Ok((text, _)) = edit.apply(source) else {
            continue;
        };
        if seen.contains(&text) {
            continue;
        }
        // A mutant is a defect, not a syntax error.
        if kwb_syntax::parse(&text).diagnostics.len() > errors {
            continue;
        }
        let line = source[..p.at].matches('\n').count() + 1;
        let before = source.lines().nth(line - 1).unwrap_or("").trim();
        let after = text.lines().nth(line - 1).unwrap_or("").trim();
        seen.insert(text.clone());
        out.push(Mutant {
            id: out.len() + 1,
            stage: p.stage,
            operator: p.operator,
            function: p.function,
            line,
            diff: format!("-{before}\n+{after}"),
            edit,
            text,
        });
    }
    out
}

#[cfg(test)]
mod tests;
