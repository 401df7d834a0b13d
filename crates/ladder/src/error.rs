//! What can be wrong with a ladder request.

use miette::Diagnostic;
use thiserror::Error;

/// A rung or problem that cannot be built.
#[derive(Debug, Error, Diagnostic, PartialEq, Eq)]
pub enum LadderError {
    #[error("`{0}` is not a rung")]
    #[diagnostic(
        code(kwb::ladder::unknown_rung),
        help(
            "choose from zeros, ones, seq-identity, onehot-k:K0, small-int:SEED, random:SEED (real data: --dump-a/--dump-b)"
        )
    )]
    UnknownRung(String),
    #[error("onehot-k:{k0} selects a K slice outside K = {k}")]
    #[diagnostic(code(kwb::ladder::onehot_out_of_range), help("pick K0 in 0..K"))]
    OnehotOutOfRange { k0: usize, k: usize },
    #[error("the problem {m} x {n} x {k} is empty")]
    #[diagnostic(
        code(kwb::ladder::empty_problem),
        help("M, N and K must be at least 1")
    )]
    Empty { m: usize, n: usize, k: usize },
    #[error("the output has {got} values, the problem {expected}")]
    #[diagnostic(
        code(kwb::ladder::output_size),
        help("read back all M x N outputs of the kernel")
    )]
    OutputSize { got: usize, expected: usize },
    #[error("the dump rung's operands come from the dumped files, not from a generator")]
    #[diagnostic(
        code(kwb::ladder::dump),
        help("give the dumps: kwb run DIR --dump-a A.npy --dump-b B.npy")
    )]
    DumpHasNoGenerator,
}
