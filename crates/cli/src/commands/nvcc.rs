//! `kwb-nvcc`: the precompile hook. As a compiler launcher (`kwb-nvcc nvcc ARGS…`,
//! for `CMAKE_CUDA_COMPILER_LAUNCHER`) or a drop-in nvcc (`KWB_NVCC_REAL` names the
//! real one; for `PYTORCH_NVCC`, Makefiles, JITs).
//!
//! Without `KWB_TRACE` it becomes the real nvcc (exec: the same arguments, the same
//! environment, no file of its own). With it, each CUDA source of a compile is
//! instrumented as `kwb-instrument` would (and, unless `overlay=off`, the included
//! headers that hold a staged mainloop, into an overlay folder first on the include
//! path), the copies are kept in the cache under a hash of everything that decides
//! them, and nvcc compiles them with `-DKWB_TRACE`; `#line` keeps its messages on the
//! original files. A source without a targeted site compiles untouched. With
//! `max-regs=auto` the original is compiled once more on the side for its kernels'
//! registers, the trace build is held to them (`-DKWB_TRACE_MAX_REGS`), and a kernel
//! that spills in the trace build where the original did not is named with both
//! builds' numbers (`register_floor`).
//!
//! With `KWB_INSITU_KERNEL` (and no `KWB_TRACE`; `kwb diagnose --kernel K -- CMD` sets
//! it) each CUDA source that launches that kernel is compiled with its launch
//! statements rewritten through `kwb_insitu::launch` (kwb-instrument --insitu), and
//! without `-DKWB_TRACE`.
//!
//! It never breaks a build that compiles without it: where kwb cannot do what
//! `KWB_TRACE` asks (a bad spec, a source that names the targeted kernel but yields no
//! site, an instrumented compile that fails), it says so on stderr, with the traced
//! compile's first errors and a log of all of them, and compiles the original command
//! instead. `KWB_TRACE_STRICT=1` makes those refusals fail the build (exit 2), for
//! builds that must not go on without probes. Only what leaves nothing to compile
//! (no real nvcc) always fails.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use kwb_hook::{Mode, NvccCommand, Spec};

use crate::register_floor::{self, Floor};

/// Exit code of a build the hook refuses (no real nvcc; with `KWB_TRACE_STRICT=1`, a
/// bad `KWB_TRACE`, a target it cannot instrument or a traced compile that fails).
const REFUSED: i32 = 2;

fn refuse(message: &str) -> i32 {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "kwb-nvcc: {message}");
    REFUSED
}

/// Whether `KWB_TRACE_STRICT` asks for a refusal instead of a build without probes.
fn strict() -> bool {
    std::env::var("KWB_TRACE_STRICT").is_ok_and(|v| !matches!(v.trim(), "" | "0"))
}

/// What the hook does when it cannot trace: with `KWB_TRACE_STRICT`, refuses;
/// otherwise says why and becomes the real nvcc on the original arguments.
fn without_probes(real: &Path, args: &[OsString], why: &str) -> i32 {
    if strict() {
        return refuse(why);
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "kwb-nvcc: warning: {why}\nkwb-nvcc: warning: compiling the original without probes \
         (KWB_TRACE_STRICT=1 fails the build instead)"
    );
    become_nvcc(real, args)
}

/// The real nvcc and its arguments from this process's arguments.
fn resolve(mut argv: Vec<OsString>) -> Result<(PathBuf, Vec<OsString>), String> {
    let launcher = argv.first().is_some_and(|first| {
        Path::new(first)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "nvcc" || n == "nvcc.exe")
    });
    let real = if launcher {
        PathBuf::from(argv.remove(0))
    } else {
        match std::env::var_os("KWB_NVCC_REAL") {
            Some(r) if !r.is_empty() => PathBuf::from(r),
            _ => {
                return Err(
                    "which nvcc? use `kwb-nvcc nvcc ARGS…` (a compiler launcher) or set KWB_NVCC_REAL to the real nvcc (a drop-in)"
                        .to_owned(),
                );
            }
        }
    };
    // A real nvcc that is this program would call itself forever.
    let me = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok());
    let found = which(&real);
    if found.as_ref().and_then(|p| p.canonicalize().ok()) == me && me.is_some() {
        return Err(format!(
            "the real nvcc `{}` is kwb-nvcc itself; point KWB_NVCC_REAL at the CUDA toolkit's nvcc",
            real.display()
        ));
    }
    if found.is_none() {
        return Err(format!("the real nvcc `{}` is not there", real.display()));
    }
    Ok((real, argv))
}

/// `program` as the OS would find it: a path as is, a bare name on PATH.
fn which(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Becomes the real nvcc; returns only when that fails.
fn become_nvcc(real: &Path, args: &[OsString]) -> i32 {
    use std::os::unix::process::CommandExt;
    let e = Command::new(real).args(args).exec();
    refuse(&format!("cannot run {}: {e}", real.display()))
}

pub fn main() -> i32 {
    let (real, args) = match resolve(std::env::args_os().skip(1).collect()) {
        Ok(r) => r,
        Err(why) => return refuse(&why),
    };
    let trace = std::env::var("KWB_TRACE").unwrap_or_default();
    let insitu = std::env::var("KWB_INSITU_KERNEL")
        .ok()
        .filter(|k| !k.trim().is_empty());
    match (trace.trim().is_empty(), insitu) {
        (true, None) => become_nvcc(&real, &args),
        (true, Some(kernel)) => launches_in_place(&real, &args, kernel.trim()),
        (false, None) => match instrumented(&real, &trace, &args, None) {
            Ok(Some(new)) => run(&real, &new, &args),
            Ok(None) => become_nvcc(&real, &args),
            Err(why) => without_probes(&real, &args, &why),
        },
        // A traced unit whose launches also run in place; where the trace cannot be
        // built or does not compile, the launches alone, then the original.
        // A full-tile trace that cannot be built falls back to the plain trace first.
        (false, Some(kernel)) => {
            let kernel = kernel.trim();
            let mut specs = vec![trace.clone()];
            specs.extend(without_full_tile(&trace));
            let mut why = String::new();
            for (i, spec) in specs.iter().enumerate() {
                why = match instrumented(&real, spec, &args, Some(kernel)) {
                    Ok(Some(new)) => match compiled(&real, &new) {
                        Ok(code) => return code,
                        Err(why) => why,
                    },
                    Ok(None) => return launches_in_place(&real, &args, kernel),
                    Err(why) => why,
                };
                if i + 1 < specs.len() {
                    use std::io::Write;
                    let _ = writeln!(
                        std::io::stderr(),
                        "kwb-nvcc: warning: {why}\nkwb-nvcc: warning: tracing `{kernel}` without full tiles"
                    );
                }
            }
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "kwb-nvcc: warning: {why}\nkwb-nvcc: warning: the launches of `{kernel}` run in place without a trace"
            );
            launches_in_place(&real, &args, kernel)
        }
    }
}

/// `spec` without its `full-tile` pair, where it has one that is on (an inline spec;
/// `@FILE` is used as written).
fn without_full_tile(spec: &str) -> Option<String> {
    if spec.trim_start().starts_with('@') {
        return None;
    }
    let is_full = |pair: &str| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        key.trim() == "full-tile" && !matches!(value.trim(), "0" | "off" | "false" | "no")
    };
    let pairs: Vec<&str> = spec.split(';').collect();
    pairs.iter().any(|p| is_full(p)).then(|| {
        pairs
            .into_iter()
            .filter(|p| !is_full(p))
            .collect::<Vec<_>>()
            .join(";")
    })
}

/// Compiles with the launches of `kernel` rewritten where a source has one, else the
/// original command.
fn launches_in_place(real: &Path, args: &[OsString], kernel: &str) -> i32 {
    match insitu_launches(kernel, args) {
        Ok(Some(new)) => run(real, &new, args),
        Ok(None) => become_nvcc(real, args),
        Err(why) => without_probes(real, args, &why),
    }
}

/// A source compiled instead of the original, and the overlay headers with it.
struct Prepared {
    args: Vec<String>,
    /// (copy, original) path pairs, to put dependency files back on the originals.
    renames: Vec<(PathBuf, PathBuf)>,
    dependency_file: Option<String>,
    /// `max-regs=auto`: the original's registers, which the trace build is held to.
    floor: Option<Floor>,
}

/// Runs the traced compile, its output passed on; where it fails, the original
/// compile instead ([`without_probes`]), the traced compile's errors kept in a log
/// next to the instrumented copy.
fn run(real: &Path, p: &Prepared, original: &[OsString]) -> i32 {
    match compiled(real, p) {
        Ok(code) => code,
        Err(why) => without_probes(real, original, &why),
    }
}

/// Runs the rewritten compile: its exit code where it succeeds or nvcc cannot run,
/// else why it failed (its output kept in a log beside the copy).
fn compiled(real: &Path, p: &Prepared) -> Result<i32, String> {
    use std::io::Write;
    let output = match Command::new(real).args(&p.args).output() {
        Ok(o) => o,
        Err(e) => return Ok(refuse(&format!("cannot run {}: {e}", real.display()))),
    };
    if output.status.success() {
        let _ = std::io::stdout().write_all(&output.stdout);
        match &p.floor {
            Some(floor) => {
                let (shown, lines) = floor.report(&String::from_utf8_lossy(&output.stderr));
                let _ = std::io::stderr().write_all(shown.as_bytes());
                for line in lines {
                    let _ = writeln!(std::io::stderr(), "kwb-nvcc: {line}");
                }
            }
            None => {
                let _ = std::io::stderr().write_all(&output.stderr);
            }
        }
        if let Some(d) = &p.dependency_file {
            restore_dependencies(Path::new(d), &p.renames);
        }
        return Ok(0);
    }
    let errors = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    let log = p
        .renames
        .first()
        .map(|(copy, _)| copy.with_extension("errors.log"));
    let kept = log
        .as_ref()
        .is_some_and(|l| crate::output::write_atomically(l, errors.as_bytes()).is_ok());
    let first: Vec<&str> = errors
        .lines()
        .filter(|l| l.contains("error"))
        .take(3)
        .collect();
    let why = format!(
        "the traced compile failed ({}){}{}",
        match output.status.code() {
            Some(c) => format!("exit {c}"),
            None => "killed".to_owned(),
        },
        if first.is_empty() {
            String::new()
        } else {
            format!(":\n  {}", first.join("\n  "))
        },
        match (&log, kept) {
            (Some(l), true) => format!("\n  (all of its output: {})", l.display()),
            _ => String::new(),
        }
    );
    Err(why)
}

/// Names the originals, not the copies, in the dependency file nvcc wrote, so the
/// build's incremental rebuilds follow the user's files.
fn restore_dependencies(file: &Path, renames: &[(PathBuf, PathBuf)]) {
    let Ok(mut text) = std::fs::read_to_string(file) else {
        return;
    };
    for (copy, original) in renames {
        text = text.replace(&copy.display().to_string(), &original.display().to_string());
    }
    let _ = crate::output::write_atomically(file, text.as_bytes());
}

/// The compile command `args` make (response and options files expanded).
fn parse_command(args: &[OsString]) -> Result<NvccCommand, String> {
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            a.to_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("an argument is not UTF-8: {}", a.to_string_lossy()))
        })
        .collect::<Result<_, _>>()?;
    let mut read = |file: &str| -> Result<Vec<String>, String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        let mut words = Vec::new();
        for line in text.lines() {
            words.extend(
                kwb_extract::compile_db::split_command(line).map_err(|e| format!("{file}: {e}"))?,
            );
        }
        Ok(words)
    };
    Ok(NvccCommand::parse(NvccCommand::expand(&args, &mut read)?))
}

/// Under `kwb diagnose --kernel K -- CMD` (`KWB_INSITU_KERNEL`): the command compiling
/// each CUDA source that launches the kernel with its launch statements rewritten
/// (kwb-instrument --insitu), the copies kept in the cache; `None` when no source of
/// this command launches it.
fn insitu_launches(kernel: &str, args: &[OsString]) -> Result<Option<Prepared>, String> {
    let command = parse_command(args)?;
    if command.mode != Mode::Compile {
        return Ok(None);
    }
    let cache = kwb_toolchain::cache::cache_dir(&kwb_toolchain::Env::from_process())
        .map_err(|e| e.to_string())?
        .join("nvcc-insitu");
    let short = kernel.rsplit("::").next().unwrap_or(kernel);
    let mut replacements = Vec::new();
    let mut renames = Vec::new();
    for &index in &command.cuda_sources {
        let source = PathBuf::from(&command.args[index]);
        let Ok(Ok(text)) = std::fs::read(&source).map(String::from_utf8) else {
            continue; // nvcc says what is wrong with it; a launch kwb cannot read is left
        };
        if !kwb_syntax::identifiers(&text).any(|w| w == short) {
            continue;
        }
        let original = absolute(&source);
        let rewritten =
            match kwb_instrument::insitu::insitu(&text, kernel, &original.display().to_string()) {
                Ok(r) => r,
                Err(kwb_instrument::InstrumentError::NoLaunch { .. }) => continue,
                Err(e) => return Err(format!("{}: {e}", source.display())),
            };
        let entry = cache.join(format!(
            "{:016x}",
            key(&[
                env!("CARGO_PKG_VERSION").as_bytes(),
                original.display().to_string().as_bytes(),
                rewritten.text.as_bytes(),
            ])
        ));
        let copy = entry
            .join("tu")
            .join(source.file_name().unwrap_or_default());
        if !copy.is_file() {
            if let Some(parent) = copy.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            crate::output::write_atomically(&copy, rewritten.text.as_bytes())
                .map_err(|e| format!("{}: {e}", copy.display()))?;
        }
        {
            use std::io::Write;
            let lines: Vec<String> = rewritten.lines.iter().map(usize::to_string).collect();
            let _ = writeln!(
                std::io::stderr(),
                "kwb-nvcc: {}: the launches of `{kernel}` at line {} go through kwb_insitu::launch ({})",
                source.display(),
                lines.join(", "),
                copy.display()
            );
            for note in &rewritten.notes {
                let _ = writeln!(std::io::stderr(), "kwb-nvcc: note: {note}");
            }
        }
        renames.push((copy.clone(), original));
        replacements.push((index, copy));
    }
    if replacements.is_empty() {
        return Ok(None);
    }
    Ok(Some(Prepared {
        args: command.with_copies(&replacements, None, &[]),
        renames,
        dependency_file: dependency_file(&command),
        floor: None,
    }))
}

/// The new command line, or `None` when nothing in this command is to be
/// instrumented (it then runs unchanged).
/// `insitu`: the kernel whose launch statements the traced copies also rewrite.
fn instrumented(
    real: &Path,
    trace: &str,
    args: &[OsString],
    insitu: Option<&str>,
) -> Result<Option<Prepared>, String> {
    let text = match trace.trim().strip_prefix('@') {
        Some(file) => {
            std::fs::read_to_string(file.trim()).map_err(|e| format!("KWB_TRACE=@{file}: {e}"))?
        }
        None => trace.to_owned(),
    };
    let spec = Spec::parse(&text).map_err(|e| format!("KWB_TRACE: {e}"))?;
    let command = parse_command(args)?;
    if command.mode != Mode::Compile {
        return Ok(None);
    }
    let cache = kwb_toolchain::cache::cache_dir(&kwb_toolchain::Env::from_process())
        .map_err(|e| e.to_string())?
        .join("nvcc");
    let mut replacements = Vec::new();
    let mut renames = Vec::new();
    let mut overlay_dir = None;
    for &index in &command.cuda_sources {
        let source = PathBuf::from(&command.args[index]);
        let Some(done) = instrument_source(&source, &command, &spec, &cache, insitu)? else {
            continue;
        };
        renames.push((done.copy.clone(), absolute(&source)));
        renames.extend(done.headers);
        replacements.push((index, done.copy));
        if done.overlay.is_some() {
            overlay_dir = done.overlay;
        }
    }
    if replacements.is_empty() {
        return Ok(None);
    }
    // The original's registers, for the floor; a build it cannot measure goes on
    // without one, and says why.
    let floor = spec
        .floor
        .then(|| register_floor::measure(real, &command))
        .and_then(|measured| match measured {
            Ok(floor) => Some(floor),
            Err(why) => {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "kwb-nvcc: warning: {why}\nkwb-nvcc: warning: the trace builds without an occupancy floor"
                );
                None
            }
        });
    let args = match &floor {
        Some(floor) => {
            let mut added = vec!["-DKWB_TRACE".to_owned()];
            added.extend(floor.traced_args());
            let added: Vec<&str> = added.iter().map(String::as_str).collect();
            command.with_copies(&replacements, overlay_dir.as_deref(), &added)
        }
        None => command.rewritten(&replacements, overlay_dir.as_deref()),
    };
    Ok(Some(Prepared {
        args,
        renames,
        dependency_file: dependency_file(&command),
        floor,
    }))
}

/// The dependency file a compile writes: `-MF`'s, else (as nvcc does for `-MD`) the
/// output's name with `.d` for its extension, the output defaulting to the first
/// source's stem with `.o`.
fn dependency_file(command: &NvccCommand) -> Option<String> {
    if !command.writes_dependencies {
        return None;
    }
    if let Some(f) = &command.dependency_file {
        return Some(f.clone());
    }
    let output = command.output.clone().or_else(|| {
        let first = command.cuda_sources.first()?;
        let stem = Path::new(&command.args[*first]).file_stem()?;
        Some(format!("{}.o", stem.to_string_lossy()))
    })?;
    Some(Path::new(&output).with_extension("d").display().to_string())
}

fn absolute(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// One instrumented source in the cache.
struct Done {
    copy: PathBuf,
    overlay: Option<PathBuf>,
    /// (copy, original) of each overlay header.
    headers: Vec<(PathBuf, PathBuf)>,
}

use kwb_toolchain::cache::content_key as key;

/// Instruments `source` (and its overlay headers) into the cache, or finds it there;
/// `None` when it holds no targeted site.
fn instrument_source(
    source: &Path,
    command: &NvccCommand,
    spec: &Spec,
    cache: &Path,
    insitu: Option<&str>,
) -> Result<Option<Done>, String> {
    let text = match std::fs::read(source).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => return not_utf8(source, &e, spec),
        Err(_) => return Ok(None), // nvcc will say what is wrong with it
    };
    let original = absolute(source);
    let config = kwb_instrument::Config {
        file_name: original.display().to_string(),
        ..spec.config.clone()
    };
    let mut roots: Vec<PathBuf> = command.includes.iter().map(PathBuf::from).collect();
    roots.push(
        source
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    );
    // The entry depends on this kwb-nvcc (its version, and the size and time of its
    // binary, so a rebuilt kwb never reuses what an older one wrote), the source, the
    // spec, the include folders and, with an overlay, every header the source reaches
    // through them.
    let build = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| {
            let time = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{}:{time}", m.len())
        })
        .unwrap_or_default();
    let mut parts: Vec<Vec<u8>> = vec![
        env!("CARGO_PKG_VERSION").as_bytes().to_vec(),
        build.into_bytes(),
        spec.canonical.as_bytes().to_vec(),
        original.display().to_string().into_bytes(),
        text.as_bytes().to_vec(),
        command.includes.join("\u{1f}").into_bytes(),
        insitu.unwrap_or_default().as_bytes().to_vec(),
    ];
    if spec.overlay {
        for (header, content) in kwb_instrument::overlay::followed(source, &text, &roots) {
            parts.push(format!("{}\u{1f}{content:016x}", header.display()).into_bytes());
        }
    }
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let entry = cache.join(format!("{:016x}", key(&refs)));
    // A complete entry is used as it is: nothing is instrumented again.
    let (probes, headers) = match read_entry(&entry) {
        Some(found) => found,
        None => match build_entry(
            source, &text, &original, spec, &config, &roots, cache, &entry, insitu,
        )? {
            Some(built) => built,
            None => return Ok(None),
        },
    };
    {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "kwb-nvcc: {}: {probes} probes{} ({})",
            source.display(),
            if headers.is_empty() {
                String::new()
            } else {
                format!(", {} instrumented headers", headers.len())
            },
            entry.display()
        );
    }
    Ok(Some(Done {
        copy: entry
            .join("tu")
            .join(source.file_name().unwrap_or_default()),
        overlay: (!headers.is_empty()).then(|| entry.join("overlay")),
        headers,
    }))
}

/// A source that is not UTF-8 cannot be instrumented: refused when it holds what
/// `spec` targets (so the build never goes on without the probes asked for), else
/// compiled untouched.
fn not_utf8(
    source: &Path,
    e: &std::string::FromUtf8Error,
    spec: &Spec,
) -> Result<Option<Done>, String> {
    let text = String::from_utf8_lossy(e.as_bytes());
    let targeted = match &spec.config.kernel {
        Some(kernel) => kwb_syntax::identifiers(&text).any(|w| w == kernel),
        None => kwb_instrument::instrument(&text, &spec.config).is_ok(),
    };
    match targeted {
        true => Err(format!(
            "{} is not UTF-8 (invalid byte at offset {}), so kwb cannot instrument the kernel it holds; convert it to UTF-8, e.g. `iconv -f latin1 -t utf-8`",
            source.display(),
            e.utf8_error().valid_up_to()
        )),
        false => Ok(None),
    }
}

/// A cache entry's probe count and (copy, original) header pairs.
type Sites = (usize, Vec<(PathBuf, PathBuf)>);

/// The probe count and the (copy, original) header pairs of a complete entry.
fn read_entry(entry: &Path) -> Option<Sites> {
    let text = std::fs::read_to_string(entry.join("sites.txt")).ok()?;
    let mut lines = text.lines();
    let probes = lines.next()?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once('\t'))
        .map(|(copy, original)| (entry.join("overlay").join(copy), PathBuf::from(original)))
        .collect();
    Some((probes, headers))
}

/// Instruments `source` and its overlay headers into `entry` (built in a private
/// folder and renamed into place whole, so parallel builds of the same source race
/// harmlessly; `sites.txt`, written last, marks it complete); `None` when nothing in
/// them is targeted.
#[allow(clippy::too_many_arguments)]
fn build_entry(
    source: &Path,
    text: &str,
    original: &Path,
    spec: &Spec,
    config: &kwb_instrument::Config,
    roots: &[PathBuf],
    cache: &Path,
    entry: &Path,
    insitu: Option<&str>,
) -> Result<Option<Sites>, String> {
    let traced = match kwb_instrument::instrument(text, config) {
        Ok((traced, plan)) => Some((traced, plan.probes.len())),
        Err(kwb_instrument::InstrumentError::NothingToProbe { .. })
        | Err(kwb_instrument::InstrumentError::UnknownKernel { .. }) => None,
        Err(e) => return Err(format!("{}: {e}", source.display())),
    };
    let staging = cache.join(format!(
        ".staging-{}-{}",
        std::process::id(),
        key(&[entry.display().to_string().as_bytes()])
    ));
    let _ = std::fs::remove_dir_all(&staging);
    let overlay = staging.join("overlay");
    let own_sites = traced.as_ref().map_or(0, |t| t.1 as u32);
    let copies = if spec.overlay {
        kwb_instrument::overlay::plan(
            source,
            text,
            roots,
            &overlay,
            &kwb_instrument::Config {
                lenient_gate: true,
                ..config.clone()
            },
            own_sites,
        )
    } else {
        Vec::new()
    };
    let mut traced = traced;
    if let Some(total) = kwb_instrument::overlay::summary_total(config, own_sites, &copies)
        && traced.is_some()
    {
        // The source names the unit's site count too, so the summary has a row for each.
        let config = kwb_instrument::Config {
            summary_sites: Some(total),
            ..config.clone()
        };
        if let Ok((again, plan)) = kwb_instrument::instrument(text, &config) {
            traced = Some((again, plan.probes.len()));
        }
    }
    // The traced unit's launches of the in-situ kernel run in place too.
    if let (Some(kernel), Some((t, _))) = (insitu, traced.as_mut()) {
        match kwb_instrument::insitu::insitu(t, kernel, &original.display().to_string()) {
            Ok(r) => *t = r.text,
            Err(kwb_instrument::InstrumentError::NoLaunch { .. }) => {}
            Err(e) => return Err(format!("{}: {e}", source.display())),
        }
    }
    if traced.is_none() && copies.is_empty() {
        if let Some(kernel) = &spec.config.kernel
            && kwb_syntax::identifiers(text).any(|w| w == kernel)
        {
            return Err(format!(
                "{}: KWB_TRACE names kernel `{kernel}` and this source uses it, but kwb finds no site to probe in it{}",
                source.display(),
                if spec.overlay {
                    " or in the headers it includes"
                } else {
                    " (overlay=off)"
                }
            ));
        }
        return Ok(None);
    }
    let write = |path: &Path, bytes: &[u8]| -> Result<(), String> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
    };
    // An uninstrumented source still names itself for nvcc's messages. Every traced
    // unit gets a name of its own (KWB_TRACE_UNIT, from its path), so the units of one
    // program keep their own trace buffers, site tables and trace files.
    let unit = format!(
        "#define KWB_TRACE_UNIT kwb_u{:016x}\n",
        key(&[absolute(original).display().to_string().as_bytes()])
    );
    let (tu_text, probes) = match &traced {
        Some((t, n)) => (format!("{unit}{t}"), *n),
        None => (
            format!(
                "{unit}#line 1 \"{}\"\n{text}",
                kwb_instrument::c_string(&original.display().to_string())
            ),
            0,
        ),
    };
    write(
        &staging
            .join("tu")
            .join(source.file_name().unwrap_or_default()),
        tu_text.as_bytes(),
    )?;
    let mut sites = format!("{probes}\n");
    let mut headers = Vec::new();
    for (w, traced_header) in &copies {
        write(&w.copy, traced_header.as_bytes())?;
        if let Ok(relative) = w.copy.strip_prefix(&overlay) {
            let source = absolute(&w.source);
            sites.push_str(&format!("{}\t{}\n", relative.display(), source.display()));
            headers.push((entry.join("overlay").join(relative), source));
        }
    }
    if !copies.is_empty() {
        let (path, text) = kwb_instrument::overlay::runtime_header(&overlay);
        write(&path, text.as_bytes())?;
    }
    write(&staging.join("sites.txt"), sites.as_bytes())?;
    if std::fs::rename(&staging, entry).is_err() {
        // Another build put the same entry in place first.
        let _ = std::fs::remove_dir_all(&staging);
        if !entry.join("sites.txt").is_file() {
            return Err(format!("cannot put {} in place", entry.display()));
        }
    }
    Ok(Some((probes, headers)))
}

#[cfg(test)]
mod tests {
    use super::without_full_tile;

    #[test]
    fn a_full_tile_spec_falls_back_to_the_same_spec_without_it() {
        assert_eq!(
            without_full_tile("kernel=k;cta=0,0,0;full-tile=1").as_deref(),
            Some("kernel=k;cta=0,0,0")
        );
        assert_eq!(
            without_full_tile("full-tile; kernel=k").as_deref(),
            Some(" kernel=k")
        );
        assert_eq!(without_full_tile("kernel=k;full-tile=off"), None);
        assert_eq!(without_full_tile("kernel=k"), None);
        assert_eq!(without_full_tile("@spec.txt"), None);
    }
}
