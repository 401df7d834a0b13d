//! Load probes (`--probe loads`): the registers a shared-memory load instruction filled,
//! right after it, before any code rearranges them into MMA fragments. Today: inline
//! PTX `ldmatrix` (the b16 elements it loaded, read as the MMA's input type). Loads
//! that land in shared memory asynchronously (cp.async, TMA) are not readable where
//! they are issued; the operand probes read those tiles after the stage's wait.

use crate::tile::TILE;
use kwb_sites::KernelMap;
use tree_sitter::Node;

use crate::emit::Emitter;
use crate::nodes::{block_statement, enclosing_function, first_line};
use crate::plan::{ProbeInfo, function_name, gate_in_function};

/// Probes every `ldmatrix` of the file (once per plan); `element` is the type its b16
/// values are read as.
pub(crate) fn probe(em: &mut Emitter<'_>, map: &KernelMap, gate: Option<&str>, element: &str) {
    let parsed = em.parsed;
    let mut found = Vec::new();
    collect(parsed.tree.root_node(), &parsed.source, &mut found);
    if found.is_empty() {
        em.note(
            "--probe loads: no ldmatrix in the file; loads into shared memory (cp.async, TMA) are read by the operand probes after their wait".to_owned(),
        );
    }
    for (asm, outputs) in found {
        let Some(statement) = block_statement(asm) else {
            continue;
        };
        let line = statement.start_position().row + 1;
        let function = enclosing_function(asm);
        let function_name = function_name(parsed, function);
        let gate_text = match gate_in_function(parsed, map, gate, function) {
            Ok(g) => g,
            Err(name) => {
                em.note(format!(
                    "{name}: the ldmatrix at line {line} is outside the gated template (the gate names none of its parameters); not probed"
                ));
                continue;
            }
        };
        let id = em.next_id();
        let site = em.site(id, "Load");
        let (setup, array) = match common_array(&outputs) {
            Some(name) => (String::new(), name),
            None => (
                format!("const uint32_t kwb_v[] = {{{}}}; ", outputs.join(", ")),
                "kwb_v".to_owned(),
            ),
        };
        em.gate_after(
            statement.end_byte(),
            &gate_text,
            &format!(
                "{setup}kwb::probe_as<{element}>({site}, kwb::Kind::Load, kwb_tag, -1, {TILE}, {array});"
            ),
        );
        em.record(ProbeInfo {
            id,
            kernel: function_name,
            what: format!(
                "load: the registers the ldmatrix at line {line} filled, as {element} (records numbered by call)"
            ),
            line,
            text: first_line(parsed, statement),
        });
    }
}

/// `r[0], r[1], …, r[n-1]` in order → `r`: the outputs are one whole array.
fn common_array(outputs: &[String]) -> Option<String> {
    let mut name = None;
    for (i, out) in outputs.iter().enumerate() {
        let (base, index) = out.trim().strip_suffix(']')?.split_once('[')?;
        if index.trim() != i.to_string() || name.is_some_and(|n| n != base.trim()) {
            return None;
        }
        name = Some(base.trim());
    }
    name.map(str::to_owned)
}

/// Every `ldmatrix` asm under `node` with its output operand expressions.
fn collect<'t>(node: Node<'t>, source: &str, out: &mut Vec<(Node<'t>, Vec<String>)>) {
    if node.kind() == "gnu_asm_expression" {
        let is_ldmatrix = node
            .child_by_field_name("assembly_code")
            .is_some_and(|c| source[c.byte_range()].contains("ldmatrix."));
        if is_ldmatrix && let Some(list) = node.child_by_field_name("output_operands") {
            let mut cursor = list.walk();
            let outputs: Vec<String> = list
                .children_by_field_name("operand", &mut cursor)
                .filter_map(|o| o.child_by_field_name("value"))
                .map(|v| source[v.byte_range()].to_owned())
                .collect();
            if !outputs.is_empty() {
                out.push((node, outputs));
            }
        }
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect(child, source, out);
    }
}

#[cfg(test)]
mod tests {
    use super::common_array;

    #[test]
    fn whole_arrays_are_probed_as_they_are() {
        let outs = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            common_array(&outs(&["r[0]", "r[1]", "r[2]", "r[3]"])).as_deref(),
            Some("r")
        );
        assert_eq!(common_array(&outs(&["r[0]", "r[2]"])), None);
        assert_eq!(common_array(&outs(&["a[0]", "b[1]"])), None);
        assert_eq!(common_array(&outs(&["x0", "x1"])), None);
    }
}
