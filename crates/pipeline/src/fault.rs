//! A rung whose kernel faulted: run again under memcheck, the access it names read
//! against the run's buffers (whose memory the address is in or next to) and against
//! the kernel map of the file it names (which stage's site holds the line), then
//! judged by kwb-diagnose.
//!
//! Invariant: every step that cannot run (no sanitizer, no line, a file that cannot
//! be read) leaves that part of the evidence empty and says why; none of it guesses.

use std::path::Path;

use kwb_diagnose::{FaultAccess, FaultEvidence, RungOutcome, Stage, parse_memcheck};
use kwb_gpu::{Report, RunOptions};
use kwb_sites::SiteKind;

/// The evidence of the first faulting rung of `report`, after a memcheck rerun of it
/// in `work`.
pub fn locate(
    repro: &Path,
    source: &Path,
    options: &RunOptions,
    report: &Report,
    faulted: &RungOutcome,
    work: &Path,
) -> FaultEvidence {
    let error = report
        .rungs
        .iter()
        .find(|r| r.rung == faulted.rung)
        .and_then(|r| r.error.clone())
        .unwrap_or_else(|| "the kernel faulted".to_owned());
    let mut e = FaultEvidence {
        rung: faulted.rung.clone(),
        error,
        tma_maps: report
            .maps
            .iter()
            .map(|m| format!("`{}`", m.param))
            .collect(),
        ..FaultEvidence::default()
    };
    let Some(rung) = options
        .rungs
        .iter()
        .copied()
        .chain(options.dump.as_ref().map(|_| kwb_ladder::Rung::Dump))
        .find(|r| r.name() == faulted.rung)
    else {
        e.unlocated = Some(format!("{} is not a rung of this run", faulted.rung));
        return e;
    };
    let checked = match kwb_gpu::fault::memcheck(repro, options, rung, work) {
        Ok(c) => c,
        Err(why) => {
            e.unlocated = Some(format!("memcheck did not run: {why}"));
            return e;
        }
    };
    let Some(access) = parse_memcheck(&checked.log) else {
        e.unlocated = Some(format!(
            "memcheck ({}) named no faulting access (its report: {})",
            checked.tool.display(),
            work.join("memcheck.txt").display()
        ));
        return e;
    };
    e.buffer = buffer_of(&access, &checked.report.buffers);
    (e.site, e.place) = site_of(repro, source, &access);
    e.access = Some(access);
    e
}

/// The role of the buffer the access's address lies in, else of memcheck's nearest
/// allocation when that is one of the run's buffers.
fn buffer_of(access: &FaultAccess, buffers: &[(String, u64, u64)]) -> Option<String> {
    let within = access
        .address
        .and_then(|a| kwb_gpu::maps::covers(buffers, a));
    let nearest = || {
        let (base, _) = access.nearest?;
        kwb_gpu::maps::covers(buffers, base)
    };
    within.or_else(nearest).map(|(role, _)| role.to_owned())
}

/// The stage whose site holds the access's line (else the line of the nearest
/// inlined caller memcheck lists that a site holds), and that site, from the kernel
/// map of the file memcheck names (the reproducer's `repro.cu` when it names that
/// name); and where the access is in the user's file. A line of repro.cu is named at
/// its place in the user's file.
fn site_of(
    repro: &Path,
    source: &Path,
    access: &FaultAccess,
) -> (Option<(Stage, String)>, Option<String>) {
    let (Some(file), Some(line)) = (access.file.as_deref(), access.line) else {
        return (None, None);
    };
    let chain: Vec<(String, usize)> = std::iter::once((file.to_owned(), line))
        .chain(access.frames.iter().cloned())
        .collect();
    // Each file the chain names, read and mapped once.
    let mut maps: Vec<(String, String, kwb_syntax::Parsed, kwb_sites::KernelMap)> = Vec::new();
    for (name, _) in &chain {
        if maps.iter().any(|(n, ..)| n == name) {
            continue;
        }
        let Some(path) = resolve(name, repro, source) else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(&path) {
            let parsed = kwb_syntax::parse(&text);
            let map = kwb_sites::kernel_map(&parsed, &[]);
            maps.push((name.clone(), text, parsed, map));
        }
    }
    let read = |name: &str| maps.iter().position(|(n, ..)| n == name);
    let at = |name: &str, text: &str, l: usize| -> String {
        if Path::new(name).file_name().is_some_and(|n| n == "repro.cu") {
            match original_line(text, l) {
                Some((f, o)) => format!("{f}:{o}"),
                None => format!("repro.cu:{l}"),
            }
        } else {
            format!("{name}:{l}")
        }
    };
    let place = read(file).map(|i| at(file, &maps[i].1, line));
    for (name, l) in chain {
        let Some(i) = read(&name) else { continue };
        let (_, text, parsed, map) = &maps[i];
        let found = kwb_sites::sites_of_line(parsed, map, l);
        let Some(first) = found.first() else { continue };
        let Some(stage) = stage_of(first.kind) else {
            continue;
        };
        // Calls that lead to sites of different stages name none.
        if found
            .iter()
            .filter_map(|s| stage_of(s.kind))
            .any(|s| s != stage)
        {
            return (None, place);
        }
        let mut what = format!("{} `{}`", at(&name, text, first.line), first.text);
        for (function, call) in first.via.iter().rev() {
            what.push_str(&format!(
                ", which calls {function} (line {})",
                at(&name, text, *call)
            ));
        }
        return (Some((stage, what)), place);
    }
    (None, place)
}

/// The file memcheck names (often by its base name alone): the reproducer's
/// `repro.cu`, the path as named, the user's source, or a file of that name beside
/// the user's source or in the reproducer's folder.
fn resolve(name: &str, repro: &Path, source: &Path) -> Option<std::path::PathBuf> {
    let named = Path::new(name);
    let base = named.file_name()?;
    let mut candidates = Vec::new();
    if base == "repro.cu" {
        candidates.push(repro.join("repro.cu"));
    }
    candidates.push(named.to_path_buf());
    if source.file_name() == Some(base) {
        candidates.push(source.to_path_buf());
    }
    if let Some(dir) = source.parent() {
        candidates.push(dir.join(base));
    }
    candidates.push(repro.join(base));
    candidates.into_iter().find(|p| p.is_file())
}

/// The stage a site of `kind` belongs to (a mainloop or a barrier: none).
fn stage_of(kind: SiteKind) -> Option<Stage> {
    match kind {
        SiteKind::OperandLoad | SiteKind::Operand => Some(Stage::OperandLoad),
        SiteKind::TmaDescriptor => Some(Stage::Descriptor),
        SiteKind::Mma | SiteKind::Accumulator => Some(Stage::Mma),
        SiteKind::Epilogue => Some(Stage::Epilogue),
        SiteKind::Mainloop | SiteKind::Sync => None,
    }
}

/// Where line `line` of a reproducer came from in the user's file: kwb-extract puts
/// `// kwb-extract: FILE:FIRST[-LAST]` before each block it copies. A block may open
/// with the comment lines above FIRST, so its lines are counted back from its last
/// line, which is LAST.
pub fn original_line(repro: &str, line: usize) -> Option<(String, usize)> {
    let lines: Vec<&str> = repro.lines().collect();
    let at = line.checked_sub(1)?;
    let is_marker = |l: &str| l.trim().starts_with("// kwb-extract: ");
    let m = (0..at.min(lines.len()))
        .rev()
        .find(|&m| is_marker(lines[m]))?;
    let rest = lines[m].trim().strip_prefix("// kwb-extract: ")?;
    let (file, range) = rest.rsplit_once(':')?;
    let last: usize = range.split('-').next_back()?.trim().parse().ok()?;
    // The block runs to the next marker, less the blank lines before it.
    let mut end = (m + 1..lines.len())
        .find(|&i| is_marker(lines[i]))
        .unwrap_or(lines.len());
    while end > m + 1 && lines[end - 1].trim().is_empty() {
        end -= 1;
    }
    if at >= end {
        return None;
    }
    let original = last.checked_sub(end - 1 - at)?;
    (original >= 1).then(|| (file.to_owned(), original))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reproducer_line_is_found_in_the_users_file() {
        let repro = "#include <x>\n// kwb-extract: k.cu:10-12\nint a;\nint b;\nint c;\n\n// kwb-extract: k.cu:40\nint d;\n// kwb-extract: k.cu:47-48\n// the doc comment above line 47\nvoid f() {\n}\n";
        assert_eq!(original_line(repro, 3), Some(("k.cu".to_owned(), 10)));
        assert_eq!(original_line(repro, 5), Some(("k.cu".to_owned(), 12)));
        assert_eq!(original_line(repro, 8), Some(("k.cu".to_owned(), 40)));
        // A block that opens with the comment above its first line.
        assert_eq!(original_line(repro, 11), Some(("k.cu".to_owned(), 47)));
        assert_eq!(original_line(repro, 10), Some(("k.cu".to_owned(), 46)));
        // The blank line after a block, and the header before any: no place.
        assert_eq!(original_line(repro, 6), None);
        assert_eq!(original_line(repro, 1), None);
    }

    #[test]
    fn the_faulting_line_is_read_through_the_kernel_map_and_named_in_the_users_file() {
        let dir = std::env::temp_dir().join(format!("kwb-fault-site-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let repro = "// repro.cu\n\
// kwb-extract: k.cu:20-34\n\
__device__ void cp16(void* dst, const void* src) {\n\
  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\\n\" :: \"r\"(smem_u32(dst)), \"l\"(src));\n\
}\n\
__device__ int index_of(int r, int ld) {\n\
  return r * ld;\n\
}\n\
__global__ void k(const bf16* A, float* C, int K) {\n\
  extern __shared__ bf16 sA[];\n\
  float acc[4] = {0.f, 0.f, 0.f, 0.f};\n\
  for (int kt = 0; kt < K / 32; ++kt) {\n\
    cp16(sA + threadIdx.x * 8, A + index_of(kt, 32));\n\
    acc[0] += a_frag[kt] * b_frag[kt];\n\
  }\n\
  C[threadIdx.x] = alpha * acc[0];\n\
}\n";
        std::fs::write(dir.join("repro.cu"), repro).unwrap();
        let access = |line: usize, frames: Vec<(String, usize)>| FaultAccess {
            what: String::new(),
            direction: kwb_diagnose::Direction::Read,
            space: kwb_diagnose::Space::Global,
            size: Some(16),
            problem: kwb_diagnose::Problem::Misaligned,
            file: Some("/somewhere/else/repro.cu".to_owned()),
            line: Some(line),
            function: None,
            frames,
            address: None,
            nearest: None,
            thread: None,
            block: None,
        };
        // The asm line of the copy helper: an operand load, named at k.cu:21.
        let (site, place) = site_of(&dir, Path::new("/nonexistent/k.cu"), &access(4, Vec::new()));
        assert_eq!(
            site.as_ref().map(|s| s.0),
            Some(Stage::OperandLoad),
            "{site:?}"
        );
        assert_eq!(place.as_deref(), Some("k.cu:21"));
        // An index helper no site holds is read at the caller memcheck lists.
        let (site, place) = site_of(
            &dir,
            Path::new("/nonexistent/k.cu"),
            &access(7, vec![("repro.cu".to_owned(), 13)]),
        );
        assert_eq!(
            site.as_ref().map(|s| s.0),
            Some(Stage::OperandLoad),
            "{site:?}"
        );
        assert!(site.unwrap().1.starts_with("k.cu:30"));
        assert_eq!(place.as_deref(), Some("k.cu:24"));
        // The store: the epilogue.
        let (site, _) = site_of(
            &dir,
            Path::new("/nonexistent/k.cu"),
            &access(16, Vec::new()),
        );
        assert_eq!(site.map(|s| s.0), Some(Stage::Epilogue));
        // A file memcheck names by its base name (a launcher's `#line` file): the
        // user's source of that name.
        let user = dir.join("user.cu");
        std::fs::write(&user, repro).unwrap();
        let by_name = FaultAccess {
            file: Some("user.cu".to_owned()),
            ..access(4, Vec::new())
        };
        let (site, place) = site_of(Path::new("/nonexistent"), &user, &by_name);
        assert_eq!(site.map(|s| s.0), Some(Stage::OperandLoad));
        assert_eq!(place.as_deref(), Some("user.cu:4"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_address_is_read_against_the_buffers() {
        let buffers = vec![
            ("A".to_owned(), 0x1000, 0x100),
            ("B".to_owned(), 0x2000, 0x100),
        ];
        let at = |address: u64, nearest: Option<(u64, u64)>| FaultAccess {
            what: String::new(),
            direction: kwb_diagnose::Direction::Read,
            space: kwb_diagnose::Space::Global,
            size: Some(16),
            problem: kwb_diagnose::Problem::OutOfBounds,
            file: None,
            line: None,
            function: None,
            frames: Vec::new(),
            address: Some(address),
            nearest,
            thread: None,
            block: None,
        };
        assert_eq!(buffer_of(&at(0x1002, None), &buffers).as_deref(), Some("A"));
        assert_eq!(
            buffer_of(&at(0x2400, Some((0x2000, 0x100))), &buffers).as_deref(),
            Some("B")
        );
        assert_eq!(buffer_of(&at(0x9000, None), &buffers), None);
    }
}
