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
    /// Nothing was probed: no kernel with a mainloop was chosen (`kernels` empty), or
    /// the kernels chosen hold no value kwb can read (`help` says what the map found in
    /// each).
    #[error("{}", nothing_title(kernels))]
    #[diagnostic(code(kwb::instrument::nothing_to_probe))]
    NothingToProbe {
        /// The kernels chosen in which no probe landed.
        kernels: Vec<String>,
        #[help]
        help: String,
    },
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

impl InstrumentError {
    /// No kernel with a mainloop was chosen.
    pub fn no_mainloop() -> InstrumentError {
        InstrumentError::NothingToProbe {
            kernels: Vec::new(),
            help: "`kwb sites FILE` shows what the kernel map found; pick one with --kernel"
                .to_owned(),
        }
    }
}

fn nothing_title(kernels: &[String]) -> String {
    match kernels {
        [] => "no kernel with a mainloop to instrument".to_owned(),
        [one] => format!("`{one}` has a mainloop, but kwb found no value in it to probe"),
        many => format!(
            "{} have mainloops, but kwb found no value in them to probe",
            many.iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
