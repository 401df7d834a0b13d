//! `kwb-instrument --overlay DIR`: instrumented copies of the headers the input
//! includes — transitively, within its folder and the `-I` roots — that hold a kernel
//! whose consumer mainloop waits on a stage (a CUTLASS collective, a megakernel task
//! header; not a thread-level MMA's loop over elements). Each copy
//! goes under DIR at its path relative to its root, so `-I DIR` first on the include
//! path picks it up; library headers are never edited in place. Site ids continue
//! from the input's probes, so one trace names every site. The copies include the
//! trace runtime from one `kwb_trace.cuh` in DIR's root ([`runtime_header`]) rather
//! than each carrying its text, so a compile reads it once.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::{Config, Plan, includes};

/// At most this many headers are followed (CUTLASS's whole include tree is ~800).
const MAX_HEADERS: usize = 5000;

/// One instrumented header of the overlay.
pub struct Written {
    /// The original header.
    pub source: PathBuf,
    /// Its instrumented copy under the overlay folder.
    pub copy: PathBuf,
    /// What was inserted.
    pub plan: Plan,
}

/// The trace runtime every copy of an overlay in `dir` includes: its path and text,
/// written with the copies.
pub fn runtime_header(dir: &Path) -> (PathBuf, &'static str) {
    (dir.join(kwb_runtime::HEADER_NAME), kwb_runtime::HEADER)
}

/// A header found through an include, and the root its relative path is under.
struct Found {
    path: PathBuf,
    relative: PathBuf,
    /// `content_key` of its text, read once here.
    key: u64,
}

/// The site rows a summary build's table needs when an overlay adds sites to the
/// unit's own (`own` ids, then the copies'): the copies name that total already (see
/// [`plan`]); the input, instrumented before its overlay was known, must be
/// instrumented again with it, since the first file to include the runtime sizes the
/// table.
pub fn summary_total(config: &Config, own: u32, copies: &[(Written, String)]) -> Option<u32> {
    let total = own
        + copies
            .iter()
            .map(|(w, _)| w.plan.probes.len() as u32)
            .sum::<u32>();
    (config.summarizes() && !copies.is_empty() && config.summary_sites != Some(total))
        .then_some(total)
}

/// Follows the includes of `file` (text `source`) through `roots` and returns the
/// headers found, in breadth-first order, without `file` itself.
fn headers(file: &Path, source: &str, roots: &[PathBuf]) -> Vec<Found> {
    let file_dir = file.parent().unwrap_or(Path::new(".")).to_owned();
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    if let Ok(c) = file.canonicalize() {
        seen.insert(c);
    }
    let mut found = Vec::new();
    let mut queue: VecDeque<(PathBuf, String)> = VecDeque::new();
    queue.push_back((file_dir.clone(), source.to_owned()));
    let mut first = true;
    while let Some((dir, text)) = queue.pop_front() {
        for include in includes(&text) {
            // Quoted names are looked up beside the including file first.
            let beside = include.quoted.then(|| dir.join(&include.name));
            let candidates = beside.into_iter().chain(
                roots
                    .iter()
                    .chain(first.then_some(&file_dir))
                    .map(|r| r.join(&include.name)),
            );
            let Some(path) = candidates.into_iter().find(|p| p.is_file()) else {
                continue; // a system or toolkit header: not followed
            };
            let Ok(canonical) = path.canonicalize() else {
                continue;
            };
            if !seen.insert(canonical.clone()) || found.len() >= MAX_HEADERS {
                continue;
            }
            let Some(relative) = roots
                .iter()
                .chain(std::iter::once(&file_dir))
                .filter_map(|r| r.canonicalize().ok())
                .find_map(|r| canonical.strip_prefix(&r).ok().map(Path::to_owned))
            else {
                continue; // outside every root: cannot be shadowed by -I DIR
            };
            let Ok(text) = std::fs::read_to_string(&canonical) else {
                continue;
            };
            let key = kwb_toolchain::cache::content_key(&[text.as_bytes()]);
            queue.push_back((
                canonical.parent().unwrap_or(Path::new(".")).to_owned(),
                text,
            ));
            found.push(Found {
                key,
                path: canonical,
                relative,
            });
        }
        first = false;
    }
    found
}

/// Every header `file` (text `source`) includes through `roots`, transitively, with
/// the `content_key` of its text: what an overlay of it depends on (a cache of one
/// must change when any of them does).
pub fn followed(file: &Path, source: &str, roots: &[PathBuf]) -> Vec<(PathBuf, u64)> {
    headers(file, source, roots)
        .into_iter()
        .map(|f| (f.path, f.key))
        .collect()
}

/// Instruments every header `file` includes that has something to probe, with
/// `config` (its gate only where it reaches), ids from `first_id` on; returns the
/// copies to write, in id order. The copies include [`runtime_header`]`(dir)`, which
/// the caller writes with them. With a summary every copy names the unit's total
/// sites (`first_id` and the copies' own).
pub fn plan(
    file: &Path,
    source: &str,
    roots: &[PathBuf],
    dir: &Path,
    config: &Config,
    first_id: u32,
) -> Vec<(Written, String)> {
    let found = headers(file, source, roots);
    let instrument = |path: &Path, id_base: u32, config: &Config| -> Option<(String, Plan)> {
        let text = std::fs::read_to_string(path).ok()?;
        // Cheap filter: a header with a mainloop around an MMA names one of these.
        if !["mma", "gemm", "fma"].iter().any(|w| text.contains(w)) {
            return None;
        }
        let config = Config {
            file_name: path.display().to_string(),
            id_base,
            lenient_gate: true,
            staged_only: true,
            runtime_included: true,
            ..config.clone()
        };
        crate::instrument(&text, &config).ok()
    };
    // How many probes each header has: planned in parallel, ids assigned after.
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = found.len().div_ceil(threads).max(1);
    let probes: Vec<usize> = std::thread::scope(|scope| {
        let handles: Vec<_> = found
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|f| instrument(&f.path, 0, config).map_or(0, |(_, p)| p.probes.len()))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    // A summary's table is sized by the first file of the unit to include the
    // runtime, so every copy names the unit's total sites.
    let total = first_id + probes.iter().sum::<usize>() as u32;
    let config = &Config {
        summary_sites: config.summarizes().then_some(total),
        ..config.clone()
    };
    let mut next = first_id;
    let mut out = Vec::new();
    for (f, count) in found.iter().zip(probes) {
        if count == 0 {
            continue;
        }
        if let Some((text, plan)) = instrument(&f.path, next, config) {
            next += plan.probes.len() as u32;
            out.push((
                Written {
                    source: f.path.clone(),
                    copy: dir.join(&f.relative),
                    plan,
                },
                text,
            ));
        }
    }
    out
}
