//! Tensor-memory accumulator probes (UMMA, sm_100a): a UMMA accumulator lives in TMEM,
//! not in registers, and is complete only once the MMA's commit barrier has been
//! waited for. The kernel's own epilogue does exactly that before it loads the
//! accumulator with `tcgen05.ld`, so the probe goes right before each such load
//! (`tcgen05.ld.sync.aligned.32x32b.xN`), reads the same N columns at the same address
//! (`kwb::probe_tmem<N>`) and waits for them: the accumulator as the epilogue reads it.
//! There is no per-K-tile TMEM probe: reading TMEM inside the mainloop would need the
//! MMA's completion there, which the kernel does not wait for.

use crate::tile::TILE;
use kwb_sites::KernelMap;
use tree_sitter::Node;

use crate::emit::Emitter;
use crate::nodes::{block_statement, declaration_point, enclosing_function, first_line};
use crate::plan::{ProbeInfo, function_name, gate_in_function};

/// One `tcgen05.ld` 32x32b load: its statement, column count and address operand.
struct Load<'t> {
    statement: Node<'t>,
    columns: u32,
    address: String,
    function: Option<Node<'t>>,
}

/// Inserts a TMEM probe before every 32x32b `tcgen05.ld` of the file (once per plan).
pub(crate) fn probe(em: &mut Emitter<'_>, map: &KernelMap, gate: Option<&str>) {
    let parsed = em.parsed;
    if !parsed.source.contains("tcgen05.ld") {
        return;
    }
    let mut loads = Vec::new();
    collect(
        parsed.tree.root_node(),
        &parsed.source,
        &mut loads,
        &mut em.notes,
    );
    for load in loads {
        let function_name = function_name(parsed, load.function);
        let gate_text = match gate_in_function(parsed, map, gate, load.function) {
            Ok(g) => g,
            Err(name) => {
                em.note(format!(
                    "{name}: the TMEM load at line {} is outside the gated template (the gate names none of its parameters); not probed",
                    load.statement.start_position().row + 1
                ));
                continue;
            }
        };
        let id = em.next_id();
        let site = em.site(id, "Accumulator");
        let line = load.statement.start_position().row + 1;
        let call = format!(
            "kwb::probe_tmem<{}>({site}, kwb::Kind::Accumulator, kwb_tag, -1, {TILE}, ({}));",
            load.columns, load.address
        );
        em.probe(
            declaration_point(parsed, load.statement),
            &gate_text,
            &call,
            ProbeInfo {
                id,
                kernel: function_name,
                what: format!(
                    "accumulator in tensor memory, the {} columns the tcgen05.ld at line {line} loads (rows: TMEM lanes; n: TMEM columns)",
                    load.columns
                ),
                line,
                text: first_line(parsed, load.statement),
            },
        );
    }
}

/// Every 32x32b `tcgen05.ld` asm under `node`.
fn collect<'t>(node: Node<'t>, source: &str, out: &mut Vec<Load<'t>>, notes: &mut Vec<String>) {
    if node.kind() == "gnu_asm_expression" {
        if let Some(load) = load(node, source, notes) {
            out.push(load);
        }
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect(child, source, out, notes);
    }
}

fn load<'t>(asm: Node<'t>, source: &str, notes: &mut Vec<String>) -> Option<Load<'t>> {
    let code = &source[asm.child_by_field_name("assembly_code")?.byte_range()];
    let at = code.find("tcgen05.ld.")?;
    let opcode: String = code[at..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '"')
        .collect();
    let line = asm.start_position().row + 1;
    let columns = opcode
        .split('.')
        .find_map(|part| part.strip_prefix('x').and_then(|n| n.parse::<u32>().ok()));
    if !opcode.contains(".32x32b.") || opcode.contains(".red") || opcode.contains("pack::16b") {
        notes.push(format!(
            "line {line}: `{opcode}` is not a plain 32x32b TMEM load of 32-bit values; not probed"
        ));
        return None;
    }
    let columns = columns.filter(|n| (1..=128).contains(n))?;
    // The address: `[%k]`, k counting the output operands, then the inputs.
    let operand_index: usize = code[at..]
        .split("[%")
        .nth(1)?
        .split(']')
        .next()?
        .trim()
        .parse()
        .ok()?;
    let operands = |field: &str| -> Vec<Node<'t>> {
        asm.child_by_field_name(field)
            .map(|list| {
                let mut cursor = list.walk();
                list.children_by_field_name("operand", &mut cursor)
                    .collect()
            })
            .unwrap_or_default()
    };
    let all: Vec<Node<'t>> = operands("output_operands")
        .into_iter()
        .chain(operands("input_operands"))
        .collect();
    let value = all.get(operand_index)?.child_by_field_name("value")?;
    let statement = block_statement(asm)?;
    Some(Load {
        statement,
        columns,
        address: source[value.byte_range()].to_owned(),
        function: enclosing_function(asm),
    })
}
