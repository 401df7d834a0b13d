//! Why an extraction failed.

use miette::Diagnostic;
use thiserror::Error;

#[derive(Debug, Error, Diagnostic)]
pub enum ExtractError {
    #[error("neither --kernel nor --template was given")]
    #[diagnostic(help(
        "name the kernel (--kernel NAME) or its instantiation (--template 'NAME<ARGS>')"
    ))]
    NothingAsked,
    #[error("`{0}` is not a template spec NAME<ARGS…>")]
    #[diagnostic(help("write it as the code would: --template 'gemm_mma_sync<128, 128, 32, 3>'"))]
    BadTemplate(String),
    #[error("no __global__ function `{name}` in this file")]
    #[diagnostic(help("kernels defined here: {available}"))]
    UnknownKernel { name: String, available: String },
    /// The file declares the kernel (`extern "C" __global__ void K(…);`) and launches it;
    /// its definition is compiled in another translation unit. `definers` names the
    /// files beside it that define it, where the caller looked.
    #[error(
        "`{name}` is declared in this file (line {line}) and defined in another translation unit"
    )]
    #[diagnostic(help(
        "kwb-extract reproduces a kernel from the file that defines it. {definers}Run it on that file: where it has no launch, the kernel's own parameters are bound (as --alone does)"
    ))]
    DefinedElsewhere {
        name: String,
        line: usize,
        definers: String,
    },
    #[error("`{alias}` is an adapter alias declared inside `{function}` (line {line})")]
    #[diagnostic(help(
        "kwb-extract reads adapter aliases at namespace scope, where the reproducer can copy them: move `using {alias} = {written};` and the aliases it uses out of `{function}` (to namespace scope, as the CUTLASS 3.x examples do), then run it again"
    ))]
    LocalAdapter {
        alias: String,
        written: String,
        function: String,
        line: usize,
    },
    #[error(
        "`{alias}` is the library GEMM `{written}` (line {line}), not a kernel of this file; {launch}"
    )]
    #[diagnostic(help(
        "kwb reproduces a library GEMM through a launcher that takes its operands as parameters (a pointer, a size, a leading dimension each, as examples/00_basic_gemm's CutlassSgemmNN does), or through a CUTLASS 3.x adapter's Arguments; a launcher that allocates and fills its own buffers (a HostTensor, a DeviceAllocation, an Options struct) it cannot bind yet: give the launch such a launcher (its operands, sizes and leading dimensions as parameters), and name that launcher's kernel alias"
    ))]
    OwnBuffers {
        alias: String,
        written: String,
        line: usize,
        launch: String,
    },
    #[error(
        "`{alias}` is a library GEMM run through the program's own harness, and kwb cannot replay it: {why}"
    )]
    #[diagnostic(help(
        "kwb replays the launcher that runs the GEMM object (`OBJ.initialize(args, …)`, `OBJ.run(args, …)` or `OBJ(args, …)`) up to that launch and runs it on its own problem; give it a launcher that takes the operands as parameters instead (a pointer, a size and a leading dimension each), and name that launcher's alias"
    ))]
    Harness { alias: String, why: String },
    #[error("`{kernel}` is a template and this file has no launch of it")]
    #[diagnostic(help("give the instantiation: --template '{kernel}<ARGS…>'"))]
    NoLaunch { kernel: String },
    #[error("`{kernel}` is launched with different template arguments: {launches}")]
    #[diagnostic(help(
        "pick one with --instance N (numbered above) or --template '{kernel}<ARGS…>'"
    ))]
    AmbiguousLaunch { kernel: String, launches: String },
    #[error(
        "--instance {given}: `{kernel}` has no such instantiation; its launch sites use {launches}"
    )]
    #[diagnostic(help("give one of the numbers listed"))]
    NoInstance {
        kernel: String,
        given: usize,
        launches: String,
    },
    #[error("`{kernel}` takes {declared} template arguments; {given} were given")]
    TooManyArguments {
        kernel: String,
        given: usize,
        declared: usize,
    },
    #[error("no argument for template parameter `{param}` of `{kernel}`, and it has no default")]
    MissingArgument { kernel: String, param: String },
    #[error(
        "the launch of `{kernel}` at line {line} leaves template argument `{param}` to be deduced from the call, and no argument's declared type shows it"
    )]
    #[diagnostic(help(
        "give the instantiation with --template '{kernel}<ARGS…>', the types and values the call deduces"
    ))]
    Deduced {
        kernel: String,
        line: usize,
        param: String,
    },
    #[error("no function in this file declares the adapter's arguments, `{wanted}`")]
    #[diagnostic(help(
        "kwb-extract builds the kernel's Params from the launcher's own `{wanted}` (`typename {wanted} args{{…}};`) through the adapter `{alias}`: extract the file whose function declares them"
    ))]
    NoArguments { alias: String, wanted: String },
    #[error("`{wanted}` is declared at several places (lines {lines})")]
    #[diagnostic(help(
        "kwb-extract reproduces one launch: extract a file (or a copy of it) with the one launcher whose arguments you suspect"
    ))]
    AmbiguousArguments { wanted: String, lines: String },
    #[error(
        "template argument `{param}` = `{written}` depends on `{name}`, which only the launching function defines, and it does not fold: {why}"
    )]
    #[diagnostic(help(
        "give its value with -D {name}=VALUE, or the whole instantiation with --template"
    ))]
    Unresolved {
        param: String,
        written: String,
        name: String,
        why: String,
    },
    #[error(
        "`{function}` is a device function, and no __global__ function of this file calls it{with}"
    )]
    #[diagnostic(help("calls of it: {calls}"))]
    NoTaskCall {
        function: String,
        with: String,
        calls: String,
    },
    #[error("`{function}` is called with different template arguments: {calls}")]
    #[diagnostic(help("pick one with --template '{function}<ARGS…>'"))]
    AmbiguousTaskCall { function: String, calls: String },
    #[error(
        "the call of `{function}` at line {line} is not under a dispatch on a task's field (`switch (task.type) {{ case X: … }}` or `if (task.type == X)`)"
    )]
    #[diagnostic(help(
        "kwb-extract reproduces a task of a megakernel by giving the kernel a list of tasks of the dispatched type; a device function called unconditionally runs inside its kernel, which --kernel reproduces"
    ))]
    NoDispatch { function: String, line: usize },
    #[error("{what}")]
    #[diagnostic(help("{help}"))]
    TaskList { what: String, help: String },
    #[error("`{function}` reads task fields that no --task binding gives: {all}")]
    #[diagnostic(help(
        "bind each: {suggestion} (a guess from the fields' names and types: check it; `?` where none). VALUE is an operand (A, B, C, D, bias), a problem scalar (alpha, beta, M, N, K), the task's tile origin (m0, n0), a TMA descriptor of an operand (tma(A, TYPE): TYPE's own encoding function fills it; tma(A): with the type the launcher encodes it with) or a C++ expression (e.g. -1)"
    ))]
    UnboundTaskField {
        function: String,
        /// The first unbound field and its declaration.
        field: String,
        declaration: String,
        /// Every unbound field with its declaration.
        all: String,
        /// `--task` flags for them, guessed.
        suggestion: String,
    },
    #[error("--task {binding}: {why}")]
    BadTaskBinding { binding: String, why: String },
    #[error("no launcher of `{kernel}` to reproduce it through: {why}")]
    #[diagnostic(help(
        "kwb-extract calls the function on the way from main to the launch with the runner's buffers; give the instantiation with --template 'NAME<ARGS…>' to reproduce the kernel alone"
    ))]
    NoLauncher { kernel: String, why: String },
    #[error("launcher `{function}`: kwb cannot bind parameter `{param}` (role {role}): {why}")]
    #[diagnostic(help(
        "bind it (VALUE is an operand A, B, C, D or bias, a problem field M, N, K, lda, ldb, ldc, ldd, alpha or beta, or a C++ expression); kwb's guesses for the others, to check: {suggestion}"
    ))]
    Unbound {
        function: String,
        param: String,
        role: String,
        why: String,
        suggestion: String,
    },
    #[error("launcher `{function}` takes no operand kwb reads as {missing}")]
    #[diagnostic(help(
        "say which parameter holds each operand, e.g. {suggestion} (VALUE: A, B, C, D, bias, M, N, K, lda, ldb, ldc, ldd, alpha, beta or a C++ expression)"
    ))]
    Operands {
        function: String,
        missing: String,
        suggestion: String,
    },
    #[error("--layout {layout}: {why}")]
    #[diagnostic(help(
        "e.g. --layout A=km,B=kn,D=nm (each operand's dimensions, the contiguous one last)"
    ))]
    BadLayout { layout: String, why: String },
}
