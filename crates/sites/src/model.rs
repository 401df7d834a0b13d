//! The kernel map as plain data: what `kwb sites --json` prints.

use std::ops::Range;

use serde::Serialize;

/// The kinds of site, with exactly the names of the JSON schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SiteKind {
    /// The loop over K tiles (producer or consumer).
    Mainloop,
    /// An MMA issue.
    Mma,
    /// A tensor the MMA consumes, at the declaration that holds its values.
    Operand,
    /// The MMA's C/D.
    Accumulator,
    /// A global→shared load of A or B.
    OperandLoad,
    /// Where accumulators are read out, scaled, converted or stored.
    Epilogue,
    /// Where a TMA descriptor is made, typed or received.
    TmaDescriptor,
    /// A wait, barrier or release that orders the other sites.
    Sync,
}

impl SiteKind {
    /// Every kind, in report order.
    pub const ALL: [SiteKind; 8] = [
        SiteKind::Mainloop,
        SiteKind::Mma,
        SiteKind::Operand,
        SiteKind::Accumulator,
        SiteKind::OperandLoad,
        SiteKind::Epilogue,
        SiteKind::TmaDescriptor,
        SiteKind::Sync,
    ];

    /// The schema name (`operand-load`), also the query capture name.
    pub fn name(self) -> &'static str {
        match self {
            SiteKind::Mainloop => "mainloop",
            SiteKind::Mma => "mma",
            SiteKind::Operand => "operand",
            SiteKind::Accumulator => "accumulator",
            SiteKind::OperandLoad => "operand-load",
            SiteKind::Epilogue => "epilogue",
            SiteKind::TmaDescriptor => "tma-descriptor",
            SiteKind::Sync => "sync",
        }
    }

    /// The kind a capture name stands for.
    pub fn from_name(name: &str) -> Option<SiteKind> {
        SiteKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// How sure the kernel map is of a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// A heuristic guessed; read the note.
    Low,
    /// A name-based rule decided.
    Medium,
    /// The syntax itself decided (a PTX mnemonic, a query on a known API).
    High,
}

/// One site of a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Site {
    /// What it is.
    pub kind: SiteKind,
    /// 1-based first line.
    pub line: usize,
    /// 1-based last line.
    pub end_line: usize,
    /// 1-based column (bytes) of the first character.
    pub column: usize,
    /// The source line of `line`, trimmed.
    pub text: String,
    /// How sure the map is.
    pub confidence: Confidence,
    /// Why a heuristic decided, or what the site resolves to; `null` when the syntax
    /// alone decided.
    pub note: Option<String>,
    /// Bytes of the site in the original file.
    #[serde(skip)]
    pub range: Range<usize>,
}

/// A template parameter of a kernel or of the class template that holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TemplateParam {
    /// Its name (`REDUCTION_SIZE`); empty for an unnamed parameter.
    pub name: String,
    /// `type`, `non-type`, `template` or `pack`.
    pub kind: &'static str,
    /// The declared type of a non-type parameter (`int`).
    #[serde(rename = "type")]
    pub ty: Option<String>,
    /// The default, as written.
    pub default: Option<String>,
    /// `function` for the kernel's own parameters, `class` for the enclosing class's.
    pub scope: &'static str,
}

/// A kernel-like function and its sites.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kernel {
    /// The function name as declared (`Class::mma` out of class, `operator()`).
    pub name: String,
    /// 1-based line of the declarator.
    pub line: usize,
    /// 1-based last line of the body.
    pub end_line: usize,
    /// `global`, `device` or `host` (from the execution-space keywords, or `device`
    /// when a CUTLASS/CuTe device macro or a device-only site says so).
    pub role: &'static str,
    /// Template parameters in scope.
    pub template_params: Vec<TemplateParam>,
    /// Sites in source order.
    pub sites: Vec<Site>,
    /// ERROR/MISSING nodes inside the function (sites there may be missing).
    pub syntax_errors: usize,
    /// Bytes of the function definition.
    #[serde(skip)]
    pub range: Range<usize>,
    /// The arguments each MMA call of the function passes as its A and B operands.
    #[serde(skip)]
    pub mma_arguments: Vec<MmaArguments>,
}

/// The arguments an MMA call passes as its operands, as the map reads its roles
/// (positionally, by a helper's parameters, or by name): whole argument expressions,
/// in the original file's bytes. Inline-asm and scalar MMAs have none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MmaArguments {
    /// Bytes of the call.
    pub call: Range<usize>,
    /// The arguments read as operand A.
    pub a: Vec<Range<usize>>,
    /// The arguments read as operand B.
    pub b: Vec<Range<usize>>,
}

/// The kernel map of one file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelMap {
    /// Kernel-like functions in source order.
    pub kernels: Vec<Kernel>,
}
