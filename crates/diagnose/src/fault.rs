//! A kernel that faults on a controlled input computes nothing to compare: its stage
//! is that of the access that faulted. compute-sanitizer's memcheck names the access
//! (read or write, the memory space, misaligned or out of bounds, the address, the
//! nearest allocation, and with `-lineinfo` the source line); the run's own buffers
//! say whose memory the address lies in or next to, and the kernel map says which
//! stage's site holds the line.
//!
//! Invariant: a fault is a VERDICT only when the line's site and the access agree on
//! one stage and nothing else could have put the address there: a misaligned access
//! or one outside shared memory is the access's own addressing; a global read past
//! the end of A or B could also be a K loop that runs too far (an MMA-stage count),
//! so it stays a DRAFT naming both.

use serde::Serialize;

use crate::stage::{Finding, Stage, Status};

/// Whether the access read or wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    Read,
    Write,
    Atomic,
    Unknown,
}

/// The memory space of the access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Space {
    Global,
    Shared,
    Local,
    Unknown,
}

/// What was wrong with the address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Problem {
    OutOfBounds,
    Misaligned,
    /// A hardware exception without an address (an illegal instruction, a TMA
    /// unit's error).
    Other,
}

/// One access memcheck reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FaultAccess {
    /// The report's first line, as memcheck wrote it.
    pub what: String,
    pub direction: Direction,
    pub space: Space,
    /// Bytes accessed.
    pub size: Option<u32>,
    pub problem: Problem,
    /// The source file and 1-based line (needs `-lineinfo`).
    pub file: Option<String>,
    pub line: Option<usize>,
    /// The function memcheck names.
    pub function: Option<String>,
    /// The inlined callers memcheck lists (`Device Frame:`), innermost first: file
    /// and 1-based line of each call.
    pub frames: Vec<(String, usize)>,
    pub address: Option<u64>,
    /// The nearest allocation: base address and bytes.
    pub nearest: Option<(u64, u64)>,
    pub thread: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
}

/// The first access error of a memcheck log (lines may carry the `=========` prefix).
pub fn parse_memcheck(log: &str) -> Option<FaultAccess> {
    let lines: Vec<&str> = log
        .lines()
        .map(|l| l.trim_start_matches('=').trim())
        .collect();
    let start = lines.iter().position(|l| is_error_line(l))?;
    let what = lines[start].to_owned();
    let lower = what.to_ascii_lowercase();
    let mut access = FaultAccess {
        direction: if lower.contains(" read") {
            Direction::Read
        } else if lower.contains(" write") {
            Direction::Write
        } else if lower.contains("atomic") {
            Direction::Atomic
        } else {
            Direction::Unknown
        },
        space: if lower.contains("__global__") || lower.contains("global") {
            Space::Global
        } else if lower.contains("__shared__") || lower.contains("shared") {
            Space::Shared
        } else if lower.contains("__local__") || lower.contains("local") {
            Space::Local
        } else {
            Space::Unknown
        },
        size: number_after(&lower, "of size "),
        problem: if lower.contains("misaligned") {
            Problem::Misaligned
        } else if lower.contains("invalid")
            || lower.contains("out-of-range")
            || lower.contains("illegal address")
        {
            Problem::OutOfBounds
        } else {
            Problem::Other
        },
        what,
        file: None,
        line: None,
        function: None,
        frames: Vec::new(),
        address: None,
        nearest: None,
        thread: None,
        block: None,
    };
    for l in lines[start + 1..].iter().take_while(|l| !is_error_line(l)) {
        if let Some(rest) = l.strip_prefix("at ") {
            if access.line.is_none() {
                let at = location(rest);
                (access.file, access.line) = (at.file, at.line);
                access.function = at.function.or(access.function.take());
            }
        } else if l.starts_with("by thread") {
            access.thread = triple_after(l, "thread");
            access.block = triple_after(l, "block");
        } else if let Some(rest) = l.strip_prefix("Device Frame:") {
            if let Location {
                file: Some(file),
                line: Some(line),
                ..
            } = location(rest.trim())
            {
                access.frames.push((file, line));
            }
        } else if let Some(rest) = l
            .strip_prefix("Address ")
            .or_else(|| l.strip_prefix("Access to "))
        {
            access.address = hex(rest);
            if rest.contains("misaligned") {
                access.problem = Problem::Misaligned;
            } else if rest.contains("out of bounds") && access.problem == Problem::Other {
                access.problem = Problem::OutOfBounds;
            }
        } else if l.contains("nearest allocation at") {
            let after = l.split("nearest allocation at").nth(1).unwrap_or("");
            if let Some(base) = hex(after) {
                let size = number_after(after, "of size ").map_or(0, u64::from);
                access.nearest = Some((base, size));
            }
        } else if l.starts_with("Host Frame") || l.starts_with("Saved host backtrace") {
            break;
        }
    }
    Some(access)
}

/// A memcheck error's first line: an invalid or misaligned access, or a hardware
/// exception it attributes (`Warp Illegal Address`, `Misaligned Shared or Local
/// Address`).
fn is_error_line(l: &str) -> bool {
    let lower = l.to_ascii_lowercase();
    (lower.starts_with("invalid ") && (lower.contains(" read") || lower.contains(" write")))
        || lower.starts_with("misaligned ")
        || (lower.starts_with("warp ") && !lower.starts_with("warp id"))
        || lower.starts_with("lane ")
}

/// Where an `at` or `Device Frame:` line puts the code: the file and 1-based line
/// (with `-lineinfo`) and the function. Two forms: `FUNCTION+0xOFF in FILE:LINE`
/// (recent) and `0xOFF in FILE:LINE:FUNCTION` (older).
struct Location {
    file: Option<String>,
    line: Option<usize>,
    function: Option<String>,
}

fn location(rest: &str) -> Location {
    let Some((head, tail)) = rest.rsplit_once(" in ") else {
        return Location {
            file: None,
            line: None,
            function: Some(rest.trim().to_owned()),
        };
    };
    let mut parts = tail.trim().splitn(3, ':');
    let file = parts.next().unwrap_or("").to_owned();
    let line = parts.next().and_then(|n| n.trim().parse::<usize>().ok());
    let function = match parts.next() {
        Some(f) if !f.is_empty() => f.trim(),
        _ => head.trim().rsplit_once('+').map_or(head.trim(), |(f, _)| f),
    };
    let placed = line.is_some() && !file.is_empty();
    Location {
        file: placed.then_some(file),
        line: line.filter(|_| placed),
        function: (!function.is_empty() && !function.starts_with("0x"))
            .then(|| function.to_owned()),
    }
}

fn hex(text: &str) -> Option<u64> {
    let at = text.find("0x")?;
    let digits: String = text[at + 2..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    u64::from_str_radix(&digits, 16).ok()
}

fn number_after(text: &str, marker: &str) -> Option<u32> {
    let at = text.find(marker)? + marker.len();
    let digits: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn triple_after(text: &str, word: &str) -> Option<[u32; 3]> {
    let at = text.find(word)? + word.len();
    let open = text[at..].find('(')? + at + 1;
    let close = text[open..].find(')')? + open;
    let v: Vec<u32> = text[open..close]
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

/// What is known of a faulting rung.
#[derive(Clone, Debug, Default)]
pub struct FaultEvidence {
    /// The rung that faulted.
    pub rung: String,
    /// The driver's error (`an illegal memory access was encountered`).
    pub error: String,
    /// memcheck's account of the access, when it ran and named one.
    pub access: Option<FaultAccess>,
    /// The operand buffer the address lies in or nearest to (A, B, C, D, bias).
    pub buffer: Option<String>,
    /// The stage whose site holds the access's line, and that site (`file:line
    /// \`text\``, with the calls followed).
    pub site: Option<(Stage, String)>,
    /// Where the access is in the user's own file, when the line memcheck names is
    /// a reproducer's copy of it.
    pub place: Option<String>,
    /// Why memcheck could not say more, when it did not run or named nothing.
    pub unlocated: Option<String>,
    /// The TMA maps the kernel received (by value, as the run read them), by
    /// parameter: copies the TMA unit makes for no thread, which memcheck does not
    /// attribute to an access.
    pub tma_maps: Vec<String>,
}

/// The stage an access to `buffer` in `space` belongs to, by whose memory it is.
fn stage_of_buffer(buffer: &str, direction: Direction) -> Option<Stage> {
    match (buffer, direction) {
        ("A" | "B", Direction::Read) => Some(Stage::OperandLoad),
        ("A" | "B", _) => None,
        ("C" | "D" | "bias", _) => Some(Stage::Epilogue),
        _ => None,
    }
}

/// The stage a faulting rung points at.
pub fn judge_fault(e: &FaultEvidence) -> Finding {
    let mut evidence = vec![format!("{}: the kernel faulted: {}", e.rung, e.error)];
    let mut f = Finding::open(Vec::new());
    let Some(access) = &e.access else {
        let unlocated = e
            .unlocated
            .as_deref()
            .unwrap_or("the faulting access was not located");
        f.summary = format!(
            "the kernel faulted on {} ({}); {unlocated}",
            e.rung, e.error
        );
        // A fault no thread's access explains, in a kernel that loads through TMA
        // maps: the TMA unit's copies are no thread's, and a map whose box, swizzle or
        // addresses its shared destination does not meet faults so.
        if !e.tma_maps.is_empty()
            && e.unlocated
                .as_deref()
                .is_some_and(|u| u.contains("named no"))
        {
            f.stage = Some(Stage::Descriptor);
            f.alternatives = vec![Stage::OperandLoad];
            f.summary = format!(
                "descriptor or operand-load: the kernel faulted on {} ({}) and memcheck named no thread's access; it loads through the TMA maps {}, whose copies the TMA unit makes for no thread: a map whose box, swizzle or addresses its shared destination does not meet (a 128-byte swizzle needs a 1024-byte aligned destination) faults so",
                e.rung,
                e.error,
                e.tma_maps.join(", ")
            );
        }
        f.evidence = evidence;
        return f;
    };
    evidence.push(format!("memcheck: {}", access.what));
    let place = match (&e.place, &access.file, access.line) {
        (Some(p), ..) => p.clone(),
        (None, Some(file), Some(line)) => format!("{file}:{line}"),
        _ => access
            .function
            .clone()
            .unwrap_or_else(|| "an unnamed place (build with -lineinfo)".to_owned()),
    };
    evidence.push(format!("the access: {place}"));
    if let Some(b) = &e.buffer {
        evidence.push(format!("the address is in or next to the buffer of {b}"));
    }
    if let Some((stage, site)) = &e.site {
        evidence.push(format!(
            "the line is held by a {} site: {site}",
            stage.as_str()
        ));
    }
    let by_buffer = e
        .buffer
        .as_deref()
        .and_then(|b| stage_of_buffer(b, access.direction));
    let by_site = e.site.as_ref().map(|(s, _)| *s);
    let what = format!(
        "{}{} {}{}",
        match access.problem {
            Problem::Misaligned => "a misaligned ",
            Problem::OutOfBounds => "an out-of-bounds ",
            Problem::Other => "a faulting ",
        },
        match access.space {
            Space::Global => "global",
            Space::Shared => "shared-memory",
            Space::Local => "local",
            Space::Unknown => "memory",
        },
        match access.direction {
            Direction::Read => "read",
            Direction::Write => "write",
            Direction::Atomic => "atomic",
            Direction::Unknown => "access",
        },
        e.buffer
            .as_deref()
            .map_or(String::new(), |b| format!(" of {b}")),
    );
    let stage = match (by_site, by_buffer) {
        (Some(s), Some(b)) if s != b => {
            f.stage = Some(s);
            f.alternatives = vec![b];
            f.summary = format!(
                "{} or {}: the kernel faults on {} ({what} at {place}): the line is a {} site, the address {}'s",
                s.as_str(),
                b.as_str(),
                e.rung,
                s.as_str(),
                e.buffer.as_deref().unwrap_or("?"),
            );
            f.evidence = evidence;
            return f;
        }
        (Some(s), _) => s,
        (None, Some(b)) => b,
        (None, None) => {
            f.summary = format!(
                "the kernel faults on {} ({what} at {place}); no site of the kernel map holds the line, so no stage is named",
                e.rung
            );
            f.evidence = evidence;
            return f;
        }
    };
    f.stage = Some(stage);
    // A global read past an operand's end is also what a K loop that runs too far
    // does; a misaligned access, one in shared memory, or a store is the access's own.
    let loop_could = access.problem == Problem::OutOfBounds
        && access.space == Space::Global
        && stage == Stage::OperandLoad
        && past_the_end(access);
    let located = by_site.is_some();
    if located && !loop_could {
        f.status = Status::Verdict;
        f.summary = format!(
            "{}: the kernel faults on {}: {what} at {place}",
            stage.as_str(),
            e.rung
        );
    } else {
        f.alternatives = if loop_could {
            vec![Stage::Mma]
        } else {
            Vec::new()
        };
        f.summary = format!(
            "{}{}: the kernel faults on {}: {what} at {place}{}",
            stage.as_str(),
            if loop_could { " (or mma)" } else { "" },
            e.rung,
            if loop_could {
                "; past the operand's end, which a K loop that runs too far reads too"
            } else {
                "; no site of the kernel map holds the line, so the stage is the buffer's"
            }
        );
    }
    f.evidence = evidence;
    f
}

/// Whether the address lies at or after the end of its nearest allocation (or where
/// the allocation is not known).
fn past_the_end(access: &FaultAccess) -> bool {
    match (access.address, access.nearest) {
        (Some(a), Some((base, size))) => a >= base + size,
        _ => true,
    }
}
