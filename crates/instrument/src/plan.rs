//! Which probes go where, as plain data and one `TextEdit`.

use kwb_edit::TextEdit;
use kwb_sites::{Kernel, KernelMap, Site, SiteKind};
use kwb_syntax::{BlankKind, Parsed};
use tree_sitter::Node;

use crate::InstrumentError;
use crate::markers::wrap;

/// Which probe kinds to insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probes {
    /// The accumulator after each K tile and after the mainloop.
    pub accumulator: bool,
    /// Register operand fragments right before the MMA that reads them.
    pub operands: bool,
}

impl Default for Probes {
    fn default() -> Self {
        Probes {
            accumulator: true,
            operands: true,
        }
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
}

impl Config {
    /// The runtime's start-up settings this config asks for, as `#define`s that a
    /// `-D` on the command line still overrides.
    fn defines(&self) -> String {
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
    let kernels = chosen(map, config)?;
    let gate = config.gate.clone().unwrap_or_else(|| "true".to_owned());
    let tag = kwb_runtime::tag(&gate);
    let mut builder = TextEdit::builder();
    let mut probes = Vec::new();
    let mut notes = Vec::new();
    for kernel in kernels {
        if let Some(g) = &config.gate {
            check_gate(g, kernel)?;
        }
        let counters = if config.probes.accumulator {
            accumulator_probes(
                parsed,
                kernel,
                &gate,
                tag,
                &mut builder,
                &mut probes,
                &mut notes,
            )
        } else {
            Vec::new()
        };
        if config.probes.operands {
            operand_probes(
                parsed,
                kernel,
                &gate,
                tag,
                &counters,
                &mut builder,
                &mut probes,
                &mut notes,
            );
        }
    }
    if probes.is_empty() {
        return Err(InstrumentError::NothingToProbe);
    }
    let file = c_string(&config.file_name);
    builder.insert(
        0,
        wrap(&format!(
            "{}{}\n#line 1 \"{file}\"\n",
            config.defines(),
            kwb_runtime::HEADER.trim_end()
        )),
    );
    builder.insert(parsed.source.len(), wrap(&site_table(&probes, &file, tag)));
    Ok(Plan {
        edit: builder.finish()?,
        probes,
        notes,
    })
}

/// The kernels to instrument: the one named, or every kernel with a consumer mainloop.
fn chosen<'m>(map: &'m KernelMap, config: &Config) -> Result<Vec<&'m Kernel>, InstrumentError> {
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
        None => Ok(map
            .kernels
            .iter()
            .filter(|k| k.sites.iter().any(consumer_loop))
            .collect()),
    }
}

fn consumer_loop(site: &Site) -> bool {
    site.kind == SiteKind::Mainloop
        && !site
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("producer"))
}

/// A gate must name a template parameter of the kernel (or its class): it is
/// evaluated in that template at compile time.
fn check_gate(gate: &str, kernel: &Kernel) -> Result<(), InstrumentError> {
    let names: Vec<&str> = kernel
        .template_params
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let idents = gate
        .split(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
        .filter(|w| w.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic()));
    let mut any = false;
    for ident in idents {
        any |= names.contains(&ident);
    }
    if any || gate.trim() == "true" {
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

/// A per-K-tile probe at the end of each consumer mainloop's body (with a counter
/// declared before the loop) and a final probe after the loop — after the peeled last
/// K tile when the kernel issues one.
fn accumulator_probes(
    parsed: &Parsed,
    kernel: &Kernel,
    gate: &str,
    tag: u32,
    builder: &mut kwb_edit::TextEditBuilder,
    probes: &mut Vec<ProbeInfo>,
    notes: &mut Vec<String>,
) -> Vec<(std::ops::Range<usize>, String)> {
    let mut counters = Vec::new();
    let root = parsed.tree.root_node();
    let accumulators: Vec<String> = kernel
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Accumulator)
        .filter_map(|s| declared_name(root, s, parsed))
        .collect();
    let Some(acc) = accumulators.first() else {
        notes.push(format!(
            "{}: no accumulator in the kernel map; no accumulator probe",
            kernel.name
        ));
        return counters;
    };
    let wait = completion_wait(parsed, kernel);
    if let Some((_, why)) = &wait {
        notes.push(format!("{}: {why}", kernel.name));
    }
    let wait = wait.map_or(String::new(), |(code, _)| code);
    for site in kernel.sites.iter().filter(|s| consumer_loop(s)) {
        let Some(node) = root.descendant_for_byte_range(site.range.start, site.range.end) else {
            continue;
        };
        let Some(body) = node
            .child_by_field_name("body")
            .filter(|b| b.kind() == "compound_statement")
        else {
            notes.push(format!(
                "{}: the mainloop at line {} has no braces; no per-K-tile probe",
                kernel.name, site.line
            ));
            continue;
        };
        let id = probes.len() as u32;
        let counter = format!("kwb_kt_{id}");
        let in_block = node
            .parent()
            .is_some_and(|p| p.kind() == "compound_statement");
        let k_tile = if in_block {
            builder.insert(
                declaration_point(parsed, node),
                wrap(&format!("[[maybe_unused]] int {counter} = 0; ")),
            );
            counters.push((node.byte_range(), counter.clone()));
            counter.clone()
        } else {
            "-1".to_owned()
        };
        let bump = if in_block {
            format!(" ++{counter};")
        } else {
            String::new()
        };
        builder.insert(
            body.end_byte() - 1,
            wrap(&format!(
                "if constexpr (kwb::enabled && ({gate})) {{ {wait}kwb::probe({id}, kwb::Kind::Accumulator, 0x{tag:08x}u, {k_tile}, -1, -1, {acc});{bump} }} "
            )),
        );
        probes.push(ProbeInfo {
            id,
            kernel: kernel.name.clone(),
            what: format!("accumulator `{acc}` after each K tile"),
            line: body.end_position().row + 1,
            text: site.text.clone(),
        });
        let after = final_point(parsed, kernel, node, acc);
        let id = probes.len() as u32;
        builder.insert(
            after,
            wrap(&format!(
                " if constexpr (kwb::enabled && ({gate})) {{ {wait}kwb::probe({id}, kwb::Kind::Accumulator, 0x{tag:08x}u, -1, -1, -1, {acc}); }}"
            )),
        );
        probes.push(ProbeInfo {
            id,
            kernel: kernel.name.clone(),
            what: format!("accumulator `{acc}` after the mainloop"),
            line: line_of(parsed, after),
            text: site.text.clone(),
        });
    }
    counters
}

/// A probe of each register operand fragment right before the MMA statement that
/// consumes it (the values exactly as the MMA reads them), tagged with the K tile
/// when the statement is inside an instrumented mainloop. Packed integer fragments
/// (`uint32_t a[4]` feeding a bf16 `mma.sync`) are read as the MMA's input type.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; the pieces of one plan"
)]
fn operand_probes(
    parsed: &Parsed,
    kernel: &Kernel,
    gate: &str,
    tag: u32,
    counters: &[(std::ops::Range<usize>, String)],
    builder: &mut kwb_edit::TextEditBuilder,
    probes: &mut Vec<ProbeInfo>,
    notes: &mut Vec<String>,
) {
    let root = parsed.tree.root_node();
    let element = mma_input_type(&parsed.source);
    for site in kernel.sites.iter().filter(|s| s.kind == SiteKind::Operand) {
        let Some(note) = site.note.as_deref() else {
            continue;
        };
        if !note.contains("values in registers") {
            continue;
        }
        let Some((letter, mma_line, name)) = parse_operand_note(note) else {
            continue;
        };
        let Some(decl) = root.descendant_for_byte_range(site.range.start, site.range.end) else {
            continue;
        };
        let packed = decl.child_by_field_name("type").is_some_and(|t| {
            let ty = &parsed.masked[t.byte_range()];
            ["uint32_t", "unsigned", "uint", "int"]
                .iter()
                .any(|w| ty.split_whitespace().any(|x| x == *w))
        });
        let kind = if letter == 'A' {
            "OperandA"
        } else {
            "OperandB"
        };
        // Before the first MMA statement of each block that names the operand: every
        // path that issues an MMA on it (a defect switch may hold one of them).
        let mut blocks_done: Vec<usize> = Vec::new();
        for mma in kernel
            .sites
            .iter()
            .filter(|s| s.kind == SiteKind::Mma && (s.line == mma_line || names(&s.text, &name)))
        {
            let Some(mma_node) = root.descendant_for_byte_range(mma.range.start, mma.range.end)
            else {
                continue;
            };
            let Some(statement) = block_statement(mma_node) else {
                continue;
            };
            let block = statement.parent().map_or(0, |b| b.id());
            if blocks_done.contains(&block) {
                continue;
            }
            // The fragment must be in scope where the probe goes.
            let in_scope = decl.end_byte() <= statement.start_byte()
                && decl.parent().is_some_and(|b| {
                    b.start_byte() <= statement.start_byte() && statement.end_byte() <= b.end_byte()
                });
            if !in_scope {
                notes.push(format!(
                    "{}: operand `{name}` is not in scope before the MMA at line {}; not probed there",
                    kernel.name, mma.line
                ));
                continue;
            }
            blocks_done.push(block);
            let k_tile = counters
                .iter()
                .find(|(range, _)| {
                    range.start <= statement.start_byte() && statement.end_byte() <= range.end
                })
                .map_or("-1".to_owned(), |(_, c)| c.clone());
            let id = probes.len() as u32;
            let call = if packed {
                format!(
                    "kwb::probe_as<{element}>({id}, kwb::Kind::{kind}, 0x{tag:08x}u, {k_tile}, -1, -1, {name});"
                )
            } else {
                format!(
                    "kwb::probe({id}, kwb::Kind::{kind}, 0x{tag:08x}u, {k_tile}, -1, -1, {name});"
                )
            };
            builder.insert(
                statement.start_byte(),
                wrap(&format!(
                    "if constexpr (kwb::enabled && ({gate})) {{ {call} }} "
                )),
            );
            probes.push(ProbeInfo {
                id,
                kernel: kernel.name.clone(),
                what: format!(
                    "operand {letter} `{name}` as the MMA at line {} reads it",
                    mma.line
                ),
                line: statement.start_position().row + 1,
                text: mma.text.clone(),
            });
        }
    }
}

/// Whether `text` names the identifier `name`.
fn names(text: &str, name: &str) -> bool {
    text.split(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
        .any(|w| w == name)
}

/// `operand A of the MMA at line 228: \`a\`, …` → ('A', 228, "a").
fn parse_operand_note(note: &str) -> Option<(char, usize, String)> {
    let rest = note.strip_prefix("operand ")?;
    let letter = rest.chars().next()?;
    let line: usize = rest
        .split("at line ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let name = note.split('`').nth(1)?.to_owned();
    Some((letter, line, name))
}

/// The statement holding `node` that sits directly in a block, so a statement
/// inserted before it stays out of unbraced loop bodies.
fn block_statement(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node;
    loop {
        let parent = current.parent()?;
        if parent.kind() == "compound_statement" {
            return Some(current);
        }
        if parent.kind() == "function_definition" {
            return None;
        }
        current = parent;
    }
}

/// The element type of the MMA inputs, from the PTX in the file.
fn mma_input_type(source: &str) -> &'static str {
    let ptx = source
        .match_indices("mma.sync")
        .chain(source.match_indices("wgmma.mma_async"))
        .map(|(i, _)| &source[i..(i + 80).min(source.len())])
        .collect::<String>();
    if ptx.contains("bf16") {
        "__nv_bfloat16"
    } else if ptx.contains("f16") {
        "__half"
    } else {
        "float"
    }
}

/// Where a declaration before `node` goes: before the attribute macros and pragmas
/// that stand right before it (`CUTLASS_PRAGMA_NO_UNROLL for …` stays together).
fn declaration_point(parsed: &Parsed, node: Node<'_>) -> usize {
    let mut start = node.start_byte();
    let before = parsed.blanks.partition_point(|b| b.range.end <= start);
    for blank in parsed.blanks[..before].iter().rev() {
        let adjacent = parsed.masked[blank.range.end..start].trim().is_empty();
        let attaches = matches!(blank.kind, BlankKind::Macro(_) | BlankKind::Pragma);
        if adjacent && attaches {
            start = blank.range.start;
        } else {
            break;
        }
    }
    // Keep the statement's indentation: insert at the start of its text.
    start
}

/// Where the accumulator is complete: the end of the mainloop, or of the last
/// statement after it that still accumulates — one issuing an MMA (a peeled last K
/// tile) or one folding partial accumulators into it (`acc[0][i] += acc[s][i]`).
/// Scaling (`acc[i] *= alpha`) is the epilogue's and does not count.
fn final_point(parsed: &Parsed, kernel: &Kernel, mainloop: Node<'_>, acc: &str) -> usize {
    let mut end = mainloop.end_byte();
    for site in kernel.sites.iter().filter(|s| s.kind == SiteKind::Mma) {
        if site.range.start >= end {
            end = statement_end(mainloop, site.range.end).unwrap_or(end);
        }
    }
    let Some(parent) = mainloop.parent() else {
        return end;
    };
    let mut cursor = parent.walk();
    for sibling in parent.named_children(&mut cursor) {
        if sibling.start_byte() >= mainloop.end_byte() && folds_into(parsed, sibling, acc) {
            end = end.max(sibling.end_byte());
        }
    }
    end
}

/// Whether `node` holds an accumulation into `acc` from `acc` itself
/// (`acc[0][j] += acc[s][j]`, `acc = acc + other`).
fn folds_into(parsed: &Parsed, node: Node<'_>, acc: &str) -> bool {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == "assignment_expression"
            && let (Some(left), Some(op), Some(right)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("operator"),
                n.child_by_field_name("right"),
            )
        {
            let left_text = &parsed.masked[left.byte_range()];
            let right_text = &parsed.masked[right.byte_range()];
            let names_acc = |t: &str| {
                t.split(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
                    .any(|w| w == acc)
            };
            let accumulates = op.kind() == "+=" || (op.kind() == "=" && right_text.contains('+'));
            if accumulates && names_acc(left_text) && names_acc(right_text) {
                return true;
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    false
}

/// The end of the statement (a sibling of `mainloop`) that contains byte `at`.
fn statement_end(mainloop: Node<'_>, at: usize) -> Option<usize> {
    let parent = mainloop.parent()?;
    let mut cursor = parent.walk();
    parent
        .named_children(&mut cursor)
        .find(|c| c.start_byte() <= at && at <= c.end_byte())
        .map(|c| c.end_byte())
}

/// The wait a probe needs before reading a complete accumulator, and why.
fn completion_wait(parsed: &Parsed, kernel: &Kernel) -> Option<(String, String)> {
    let text = &parsed.source[kernel.range.clone()];
    let wgmma = text.contains("warpgroup_wait")
        || text.contains("wgmma")
        || kernel
            .sites
            .iter()
            .any(|s| s.kind == SiteKind::Mma && s.text.contains("wgmma"));
    if !wgmma {
        return None;
    }
    let code = if text.contains("warpgroup_wait") {
        "cute::warpgroup_wait<0>(); ".to_owned()
    } else {
        "kwb::wgmma_wait_all(); ".to_owned()
    };
    Some((
        code,
        "wgmma accumulators are complete only after wait_group 0: the probe waits for it when enabled".to_owned(),
    ))
}

/// The name an accumulator site declares.
fn declared_name(root: Node<'_>, site: &Site, parsed: &Parsed) -> Option<String> {
    let note = site.note.as_deref()?;
    let name = note.rsplit('`').nth(1)?;
    let node = root.descendant_for_byte_range(site.range.start, site.range.end)?;
    parsed.source[node.byte_range()]
        .contains(name)
        .then(|| name.to_owned())
}

fn line_of(parsed: &Parsed, offset: usize) -> usize {
    parsed.source[..offset].matches('\n').count() + 1
}

/// The host-side table naming each probe, registered for the trace file.
fn site_table(probes: &[ProbeInfo], file: &str, tag: u32) -> String {
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
    format!(
        "\n#ifndef KWB_SITES_{tag:08x}\n#define KWB_SITES_{tag:08x}\nstatic const kwb::SiteInfo kwb_sites_{tag:08x}[] = {{\n{}\n}};\n[[maybe_unused]] static const bool kwb_sites_registered_{tag:08x} = kwb::register_sites(kwb_sites_{tag:08x});\n#endif\n",
        rows.join("\n")
    )
}

/// `text` as the inside of a C string literal.
fn c_string(text: &str) -> String {
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
