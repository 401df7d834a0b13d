//! Errors of the instrumenter: problems with what the user asked for.

use miette::Diagnostic;
use thiserror::Error;

/// Why a file cannot be instrumented as asked.
#[derive(Debug, Error, Diagnostic)]
pub enum InstrumentError {
    #[error("no kernel named `{name}`")]
    #[diagnostic(
        code(kwb::instrument::unknown_kernel),
        help("kernels here: {available}")
    )]
    UnknownKernel { name: String, available: String },
    #[error("no kernel with a mainloop to instrument")]
    #[diagnostic(
        code(kwb::instrument::nothing_to_probe),
        help("`kwb sites FILE` shows what the kernel map found; pick one with --kernel")
    )]
    NothingToProbe,
    #[error("the gate `{gate}` names no template parameter of `{kernel}`")]
    #[diagnostic(
        code(kwb::instrument::gate_out_of_scope),
        help(
            "template parameters in scope: {params}; a gate is evaluated at compile time in the kernel's template"
        )
    )]
    GateOutOfScope {
        gate: String,
        kernel: String,
        params: String,
    },
    #[error("no launch of `{kernel}` to run in place")]
    #[diagnostic(
        code(kwb::instrument::no_launch),
        help(
            "{notes}; kwb runs a kernel in the user's process at a `kernel<<<…>>>(…);` statement of the file that launches it"
        )
    )]
    NoLaunch { kernel: String, notes: String },
    #[error("a kwb marker at byte {offset} has no partner")]
    #[diagnostic(
        code(kwb::instrument::unmatched_marker),
        help("the file was edited after instrumenting; restore it from version control")
    )]
    UnmatchedMarker { offset: usize },
    #[error(transparent)]
    #[diagnostic(transparent)]
    Edit(#[from] kwb_edit::EditError),
}
