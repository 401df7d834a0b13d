//! Which probes go where, as plain data and one `TextEdit`.

use kwb_edit::TextEdit;
use kwb_sites::{Kernel, KernelMap, Site, SiteKind};
use kwb_syntax::Parsed;

use crate::InstrumentError;
use crate::emit::Emitter;
use crate::markers::wrap;
use crate::nodes::identifiers;
use crate::probes;

/// Which probe kinds to insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probes {
    /// The accumulator after each K tile (`accumulator`).
    pub accumulator: bool,
    /// The accumulator where it is complete: after the mainloop, a peeled last K
    /// tile or a fold (`accumulator` and `final`). Without per-K-tile probes and on
    /// every CTA, this and the epilogue are the cheap screen for the CTA that goes
    /// wrong.
    pub final_accumulator: bool,
    /// Register operand fragments right before the MMA that reads them.
    pub operands: bool,
    /// The values the epilogue's global stores write.
    pub epilogue: bool,
    /// The registers a shared-memory load (`ldmatrix`) filled (`loads`; not in the
    /// default set).
    pub loads: bool,
}

impl Default for Probes {
    fn default() -> Self {
        Probes {
            accumulator: true,
            final_accumulator: true,
            operands: true,
            epilogue: true,
            loads: false,
        }
    }
}

impl Probes {
    /// No probe kind: the start of a `--probe` list.
    pub const NONE: Probes = Probes {
        accumulator: false,
        final_accumulator: false,
        operands: false,
        epilogue: false,
        loads: false,
    };

    /// Parses `operands,accumulator,final,epilogue,loads` (any subset, any order):
    /// `accumulator` is the accumulator after each K tile and where complete, `final`
    /// only where complete.
    pub fn parse(list: &str) -> Result<Probes, String> {
        let mut probes = Probes::NONE;
        for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "operands" => probes.operands = true,
                "accumulator" => {
                    probes.accumulator = true;
                    probes.final_accumulator = true;
                }
                "final" => probes.final_accumulator = true,
                "loads" => probes.loads = true,
                "epilogue" => probes.epilogue = true,
                other => {
                    return Err(format!(
                        "`{other}` is not a probe kind; choose from operands, accumulator, final, epilogue, loads"
                    ));
                }
            }
        }
        if probes == Probes::NONE {
            return Err(
                "name at least one probe kind: operands, accumulator, final, epilogue, loads"
                    .to_owned(),
            );
        }
        Ok(probes)
    }
}

/// What the user asked for.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Only this kernel (name or last name component).
    pub kernel: Option<String>,
    /// A compile-time condition in the kernel's template scope
    /// (`REDUCTION_SIZE == 6144`); `None` probes every instantiation.
    pub gate: Option<String>,
    /// Probe kinds.
    pub probes: Probes,
    /// The file name the `#line` directive and the site table use.
    pub file_name: String,
    /// Record only this CTA (x, y, z); `None` records every CTA.
    pub cta: Option<[u32; 3]>,
    /// Record only these K tiles, `[begin, end)`.
    pub k_tiles: Option<(u32, u32)>,
    /// Values kept per record (0..=8).
    pub values: Option<u32>,
    /// Records of values that all count and are all finite carry absmax (and the
    /// NaN/Inf counts) only, not min and max: a third of the per-value work, for
    /// screening every CTA.
    pub absmax_only: bool,
    /// Also keep every value each probe looks at, with its coordinates (the whole
    /// tile; meant for one CTA): `kwb trace show --npy` writes them out.
    pub full_tile: bool,
    /// Fold every probe call into one table per site and K tile (values counted,
    /// absmax, NaN and Inf counts, the CTA of the peak and of the first NaN/Inf)
    /// instead of a record per warp: the probes claim nothing and wait for nothing, and
    /// nothing is dropped. For screening every CTA; keeps no samples, min or max.
    pub summary: bool,
    /// A summary (whatever `summary` says; see [`Config::summarizes`]) whose one row
    /// per site folds every K tile and whose table has a stripe for each warp of the
    /// grid, so concurrent warps do not reduce into one address and a call reduces one
    /// word over the warp: the cheapest trace of every CTA (the peak's CTA and the
    /// first CTA with a NaN or Inf, per site).
    pub screen: bool,
    /// The original kernel's registers a thread (`ptxas -v`): the instrumented file
    /// defines `KWB_TRACE_MAX_REGS` to it, so a trace build keeps the CTAs an SM those
    /// give (the occupancy floor kwb-instrument puts in each probed kernel's
    /// declaration). `None`: ptxas is as free as the kernel's launch bounds let it be.
    pub max_regs: Option<u32>,
    /// The site rows of a summary build's table: every site id of the translation
    /// unit, this file's and the other instrumented files' (an overlay's headers). The
    /// first file that includes the runtime sizes the table. `None`: this file's ids.
    pub summary_sites: Option<u32>,
    /// A row bound (a C++ expression in the kernel's scope, e.g. `kBatchRows`):
    /// values on MMA-tile rows at or past it are padding and stay out of the
    /// statistics. Applies where the fragment layout is known (mma.sync m16n8k16
    /// A and C/D fragments).
    pub rows: Option<String>,
    /// The first site id: several files instrumented for one program (a kernel and
    /// its overlay headers) number their probes apart.
    pub id_base: u32,
    /// Skip, with a note, a kernel the gate names no template parameter of, instead of
    /// failing (for library headers, where only some kernels are the one gated).
    pub lenient_gate: bool,
    /// Only kernels whose mainloop waits on a barrier or pipeline stage (a K-tile loop
    /// streaming tiles through shared memory), not a thread-level MMA's loop over
    /// elements: what an overlay of library headers instruments.
    pub staged_only: bool,
    /// Emit `#include "kwb_trace.cuh"` instead of the runtime's text. For the copies of
    /// an overlay, which share one written-out header in the overlay's root: the header
    /// is read once per compile instead of once per instrumented header.
    pub runtime_included: bool,
}

impl Config {
    /// Whether probes fold into the summary table instead of records: a summary, or a
    /// screen (one kind of summary).
    pub fn summarizes(&self) -> bool {
        self.summary || self.screen
    }

    /// The runtime's start-up settings this config asks for, as `#define`s that a
    /// `-D` on the command line still overrides.
    /// `sites`: one past this file's last site id.
    fn defines(&self, sites: u32) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some([x, y, z]) = self.cta {
            pairs.push(("KWB_TRACE_CTA_X", x.to_string()));
            pairs.push(("KWB_TRACE_CTA_Y", y.to_string()));
            pairs.push(("KWB_TRACE_CTA_Z", z.to_string()));
        }
        if let Some((begin, end)) = self.k_tiles {
            pairs.push(("KWB_TRACE_K_BEGIN", begin.to_string()));
            pairs.push(("KWB_TRACE_K_END", end.to_string()));
        }
        if let Some(values) = self.values {
            pairs.push(("KWB_TRACE_VALUES", values.min(8).to_string()));
        }
        if self.absmax_only {
            pairs.push(("KWB_TRACE_MINMAX", "0".to_owned()));
        }
        if self.full_tile {
            pairs.push(("KWB_TRACE_FULL", "1".to_owned()));
        }
        if let Some(regs) = self.max_regs {
            pairs.push(("KWB_TRACE_MAX_REGS", regs.to_string()));
        }
        if self.summarizes() {
            pairs.push(("KWB_TRACE_SUMMARY", "1".to_owned()));
            if self.screen {
                pairs.push(("KWB_TRACE_SCREEN", "1".to_owned()));
            }
            let rows = self.summary_sites.unwrap_or(sites).max(sites).max(1);
            pairs.push(("KWB_TRACE_SUMMARY_SITES", rows.to_string()));
        }
        pairs
            .iter()
            .map(|(name, value)| format!("#ifndef {name}\n#define {name} {value}\n#endif\n"))
            .collect()
    }
}

/// One inserted probe, for the site table and the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeInfo {
    /// Site id in the trace.
    pub id: u32,
    /// The kernel it is in.
    pub kernel: String,
    /// What it reads.
    pub what: String,
    /// 1-based line of the statement it follows.
    pub line: usize,
    /// That line, trimmed.
    pub text: String,
}

/// The edit and what it inserts.
#[derive(Debug)]
pub struct Plan {
    /// Byte-range insertions into the original text.
    pub edit: TextEdit,
    /// The probes, in id order.
    pub probes: Vec<ProbeInfo>,
    /// Things the user should know (a wait the probe adds, a site skipped).
    pub notes: Vec<String>,
}

/// Plans the probes of `map` over `parsed` for `config`.
pub fn plan(parsed: &Parsed, map: &KernelMap, config: &Config) -> Result<Plan, InstrumentError> {
    let kernels = chosen(map, &parsed.source, config)?;
    let gate = config
        .gate
        .clone()
        .unwrap_or_else(|| kwb_runtime::UNGATED.to_owned());
    let tag = kwb_runtime::tag(&gate);
    let mut em = Emitter::new(parsed, tag, config.id_base);
    em.tile_dims = crate::fragments::TileDims::from_map(map, &parsed.source);
    em.layouts = crate::fragments::Layouts::from_map(map, &parsed.source);
    if config.screen {
        em.fold_sites();
    }
    em.full_tile = config.full_tile;
    for kernel in &kernels {
        em.origins.add(parsed, &kernel.range);
    }
    let mut helpers_done = Vec::new();
    for kernel in kernels.iter().copied() {
        if let Some(g) = &config.gate {
            match check_gate(g, kernel) {
                Ok(()) => {}
                Err(e) if config.lenient_gate => {
                    em.note(format!("{}: not probed: {e}", kernel.name));
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        let want = probes::accumulator::Want {
            per_k_tile: config.probes.accumulator,
            complete: config.probes.final_accumulator,
            counter: config.probes.operands,
        };
        let counters = if want.per_k_tile || want.complete || want.counter {
            probes::accumulator::probe(&mut em, kernel, &gate, config.rows.as_deref(), want)
        } else {
            Vec::new()
        };
        if config.probes.operands {
            probes::operands::probe(
                &mut em,
                map,
                kernel,
                config.gate.as_deref(),
                config.rows.as_deref(),
                &counters,
                &mut helpers_done,
            );
            probes::shared::probe(&mut em, kernel, &gate, &counters);
        }
        if config.probes.epilogue {
            probes::epilogue::probe(&mut em, kernel, &gate);
        }
    }
    // Tile contexts where a kernel hands its collective the work tile's coordinate:
    // in the kernels asked for, or anywhere in the file.
    let ranges: Vec<std::ops::Range<usize>> = kernels.iter().map(|k| k.range.clone()).collect();
    probes::context::probe(&mut em, config.kernel.is_some().then_some(&ranges[..]));
    // UMMA accumulators in tensor memory: before the epilogue's TMEM loads, wherever
    // they are (the kernel or a helper it calls).
    if config.probes.final_accumulator && !kernels.is_empty() {
        probes::tmem::probe(&mut em, map, config.gate.as_deref());
    }
    if config.probes.loads && !kernels.is_empty() {
        let element = probes::operands::mma_input_type(&parsed.source);
        probes::loads::probe(&mut em, map, config.gate.as_deref(), element);
    }
    // The occupancy floor of a trace build, in the declaration of each kernel probed.
    for kernel in &kernels {
        crate::occupancy::floor(&mut em, kernel);
    }
    let crate::emit::Emitted {
        insertions: mut builder,
        mut folds,
        probes,
        notes,
    } = em.finish();
    if probes.is_empty() {
        return Err(unprobed(&kernels, &notes));
    }
    let file = c_string(&config.file_name);
    let runtime = if config.runtime_included {
        format!("#include \"{}\"", kwb_runtime::HEADER_NAME)
    } else {
        kwb_runtime::HEADER.trim_end().to_owned()
    };
    builder.insert(
        0,
        wrap(&format!(
            "{}{runtime}\n#line 1 \"{file}\"\n",
            config.defines(config.id_base + probes.len() as u32),
        )),
    );
    if let Some((at, renames)) = crate::own_types::own_integer_types(parsed, &file) {
        builder.insert(at, wrap(&renames));
    }
    builder.insert(
        parsed.source.len(),
        wrap(&site_table(&probes, &file, tag, config.id_base)),
    );
    Ok(Plan {
        // A screen's fold declarations first, before any probe at the same byte.
        edit: folds.finish()?.union(builder.finish()?)?,
        probes,
        notes,
    })
}

/// Why nothing was probed: no kernel chosen, or, for each kernel chosen, the sites the
/// map found in it and what kwb probes, with the emitter's notes (a probe left out and
/// why).
fn unprobed(kernels: &[&Kernel], notes: &[String]) -> InstrumentError {
    if kernels.is_empty() {
        return InstrumentError::no_mainloop();
    }
    let mut help = String::new();
    for kernel in kernels {
        let count = |kind: SiteKind| kernel.sites.iter().filter(|s| s.kind == kind).count();
        let found: Vec<String> = SiteKind::ALL
            .iter()
            .filter(|k| **k != SiteKind::Sync && count(**k) > 0)
            .map(|k| format!("{} x{}", k.name(), count(*k)))
            .collect();
        let absent: Vec<&str> = [SiteKind::Operand, SiteKind::Accumulator, SiteKind::Epilogue]
            .into_iter()
            .filter(|k| count(*k) == 0)
            .map(SiteKind::name)
            .collect();
        help.push_str(&format!(
            "`{}` (line {}): the map found {}{}. ",
            kernel.name,
            kernel.line,
            found.join(", "),
            if absent.is_empty() {
                String::new()
            } else {
                format!("; no {}", absent.join(", no "))
            }
        ));
    }
    help.push_str(
        "kwb probes an accumulator it can read (registers, or tensor memory where a \
         tcgen05.ld reads it back), operand tiles or fragments, and epilogue stores; \
         `kwb sites FILE --kernel NAME` shows every site.",
    );
    // What was left out and why, each reason once (the same reason at many lines).
    let mut reasons: Vec<(String, usize)> = Vec::new();
    for note in notes.iter().filter(|n| n.contains("not probed")) {
        let reason = without_line(note);
        match reasons.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => reasons.push((reason, 1)),
        }
    }
    const SHOWN: usize = 5;
    for (reason, n) in reasons.iter().take(SHOWN) {
        help.push_str(&format!("\n- {reason}"));
        if *n > 1 {
            help.push_str(&format!(" ({n} sites)"));
        }
    }
    if reasons.len() > SHOWN {
        help.push_str(&format!(
            "\n- and {} more reasons (`kwb-instrument --kernel NAME` on the kernel's own)",
            reasons.len() - SHOWN
        ));
    }
    InstrumentError::NothingToProbe {
        kernels: kernels.iter().map(|k| k.name.clone()).collect(),
        help,
    }
}

/// A note without the line it names (` before line 12`, `line 12: `), so one reason
/// given at many sites reads once.
pub(crate) fn without_line(note: &str) -> String {
    let mut text = note.to_owned();
    for marker in [" before line ", "line "] {
        let mut from = 0;
        while let Some(at) = text[from..].find(marker).map(|p| from + p) {
            // A word of its own (`pipeline 3` names no line).
            let word = at + marker.len() - marker.trim_start().len();
            let starts_word = !text[..word]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            let digits = text[at + marker.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .count();
            if !starts_word || digits == 0 {
                from = at + marker.len();
                continue;
            }
            let mut end = at + marker.len() + digits;
            if text[end..].starts_with(": ") {
                end += 2;
            }
            text.replace_range(at..end, "");
            from = at;
        }
    }
    text
}

/// The kernels to instrument: the one named, or every kernel with a consumer mainloop
/// (with `staged_only`, one whose loop waits on a stage: a sync inside it, or a call
/// inside it of a function of this file that waits, as a CUTLASS 2.x `gemm_iters`
/// calls `mac_loop_iter`, which waits on the cp.async stage).
fn chosen<'m>(
    map: &'m KernelMap,
    source: &str,
    config: &Config,
) -> Result<Vec<&'m Kernel>, InstrumentError> {
    match &config.kernel {
        Some(name) => {
            let found: Vec<&Kernel> = map
                .kernels
                .iter()
                .filter(|k| &k.name == name || k.name.rsplit("::").next() == Some(name.as_str()))
                .collect();
            if found.is_empty() {
                return Err(InstrumentError::UnknownKernel {
                    name: name.clone(),
                    available: map
                        .kernels
                        .iter()
                        .map(|k| k.name.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            Ok(found)
        }
        None => {
            let waiting = waiting_functions(map);
            Ok(map
                .kernels
                .iter()
                .filter(|k| {
                    k.sites.iter().any(|s| {
                        consumer_loop(s)
                            && (!config.staged_only
                                || k.sites.iter().any(|w| {
                                    s.range.start <= w.range.start
                                        && w.range.end <= s.range.end
                                        && (w.kind == SiteKind::Sync
                                            || callee(source, &w.range)
                                                .is_some_and(|c| waiting.contains(c)))
                                }))
                    })
                })
                .collect())
        }
    }
}

/// The simple names of the map's functions that wait or synchronize (hold a sync
/// site, their own or a wrapper's call).
fn waiting_functions(map: &KernelMap) -> std::collections::BTreeSet<&str> {
    map.kernels
        .iter()
        .filter(|k| k.sites.iter().any(|s| s.kind == SiteKind::Sync))
        .map(|k| k.name.rsplit("::").next().unwrap_or(&k.name))
        .collect()
}

/// The simple name a site that is a call calls: the text before its `(`, its last
/// `::`/`.`/`->` component (`this->mac_loop_iter(…)` is `mac_loop_iter`).
fn callee<'s>(source: &'s str, range: &std::ops::Range<usize>) -> Option<&'s str> {
    let text = source.get(range.clone())?;
    let head = text[..text.find('(')?].trim_end();
    let head = head.split('<').next().unwrap_or(head);
    let name = head.rsplit([':', '.', '>', '-']).next()?.trim();
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(name)
}

pub(crate) fn consumer_loop(site: &Site) -> bool {
    site.kind == SiteKind::Mainloop
        && !site
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("producer"))
}

/// Whether `gate` names a template parameter of `function` (or is `true`): only then
/// can it be evaluated at compile time inside it.
/// The gate a probe inside `function` (any function of the file, found by its
/// definition node) can use: `true` without a gate; the gate where `function` is a
/// kernel of the map whose template parameters it names; otherwise `Err` with the
/// function's name, for a note that the probe was left out.
pub(crate) fn gate_in_function(
    parsed: &kwb_syntax::Parsed,
    map: &KernelMap,
    gate: Option<&str>,
    function: Option<tree_sitter::Node<'_>>,
) -> Result<String, String> {
    let Some(g) = gate else {
        return Ok("true".to_owned());
    };
    let reaches = map.kernels.iter().any(|k| {
        function.is_some_and(|f| f.byte_range().contains(&k.range.start)) && gate_reaches(g, k)
    });
    if reaches {
        Ok(g.to_owned())
    } else {
        Err(function_name(parsed, function))
    }
}

/// The name of the function defined at `function`, for the probe table.
pub(crate) fn function_name(
    parsed: &kwb_syntax::Parsed,
    function: Option<tree_sitter::Node<'_>>,
) -> String {
    function
        .and_then(|f| f.child_by_field_name("declarator"))
        .and_then(|d| d.child_by_field_name("declarator"))
        .map_or("?".to_owned(), |n| parsed.source[n.byte_range()].to_owned())
}

pub(crate) fn gate_reaches(gate: &str, function: &Kernel) -> bool {
    gate.trim() == "true"
        || identifiers(gate).any(|ident| function.template_params.iter().any(|p| p.name == ident))
}

/// A gate must name a template parameter of the kernel (or its class): it is
/// evaluated in that template at compile time.
fn check_gate(gate: &str, kernel: &Kernel) -> Result<(), InstrumentError> {
    let names: Vec<&str> = kernel
        .template_params
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    if gate_reaches(gate, kernel) {
        Ok(())
    } else {
        Err(InstrumentError::GateOutOfScope {
            gate: gate.to_owned(),
            kernel: kernel.name.clone(),
            params: if names.is_empty() {
                "none (the kernel is not a template)".to_owned()
            } else {
                names.join(", ")
            },
        })
    }
}

/// The host-side table naming each probe, registered for the trace file.
fn site_table(probes: &[ProbeInfo], file: &str, tag: u32, id_base: u32) -> String {
    let rows: Vec<String> = probes
        .iter()
        .map(|p| {
            format!(
                "  {{{}, \"{file}\", {}, \"{}\"}},",
                p.id,
                p.line,
                c_string(&p.text)
            )
        })
        .collect();
    // One table per file: the guard and names carry the first id when it is not 0.
    let name = if id_base == 0 {
        format!("{tag:08x}")
    } else {
        format!("{tag:08x}_{id_base}")
    };
    format!(
        "\n#ifndef KWB_SITES_{name}\n#define KWB_SITES_{name}\nstatic const kwb::SiteInfo kwb_sites_{name}[] = {{\n{}\n}};\n[[maybe_unused]] static const bool kwb_sites_registered_{name} = kwb::register_sites(kwb_sites_{name});\n#endif\n",
        rows.join("\n")
    )
}

/// `text` as the inside of a C string literal.
pub fn c_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    // A marker inside the text would confuse `strip`.
    out.replace("*/", "* /")
}
