//! Where a register-fed PTX MMA takes its operands, read from the asm template by
//! position: `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3},
//! {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};` takes D, A, B and C in that order, and
//! `wgmma.mma_async… {d…}, a, b, …` D, A (registers or a descriptor) and B. A wrapper's
//! registers are then A or B by where the template puts them, whatever they are named
//! (`uint32_t b0, b1` as much as `frag_b[2]`).
//!
//! Invariant: only `%N` operands written directly in the slot count; a slot the template
//! fills from a register it defines itself is not read (None), so nothing is guessed.

/// The asm operand numbers (`%N`) of the A and B slots of the first register-fed MMA
/// instruction (`mma.sync`, `mma.sp`, `wgmma.mma_async`) in `template`; None where
/// there is no such instruction, or a slot holds anything but `%N` operands.
pub(crate) fn slots(template: &str) -> Option<(Vec<usize>, Vec<usize>)> {
    let text = instructions(template);
    let statement = text
        .split(';')
        .map(str::trim)
        .find(|s| s.starts_with("mma.") || s.starts_with("wgmma.mma_async"))?;
    let (_, operands) = statement.split_once(char::is_whitespace)?;
    let groups = top_level(operands);
    let numbers = |group: &str| -> Option<Vec<usize>> {
        let inner = group.trim().trim_start_matches('{').trim_end_matches('}');
        inner
            .split(',')
            .map(|t| t.trim().strip_prefix('%')?.parse().ok())
            .collect()
    };
    let a = numbers(groups.get(1)?)?;
    let b = numbers(groups.get(2)?)?;
    (!a.is_empty() && !b.is_empty()).then_some((a, b))
}

/// An asm template's text as PTX: its string literals joined, escaped newlines and tabs
/// as spaces (statements still end at `;`).
pub(crate) fn instructions(template: &str) -> String {
    template
        .replace("\\n", " ")
        .replace("\\t", " ")
        .chars()
        .filter(|&c| c != '"')
        .collect()
}

/// `operands` split at the commas outside braces.
fn top_level(operands: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in operands.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&operands[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&operands[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::slots;

    #[test]
    fn an_mma_sync_template_places_its_registers_by_position() {
        let t = r#""mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n""#;
        assert_eq!(slots(t), Some((vec![4, 5, 6, 7], vec![8, 9])));
        // A wgmma with descriptors: one operand a slot.
        let w = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 1;";
        assert_eq!(slots(w), Some((vec![4], vec![5])));
        // A slot filled from a register the template defines: not read.
        let r = "{ .reg .b32 ta; mov.b32 ta, %4; mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {ta,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}; }";
        assert_eq!(slots(r), None);
        assert_eq!(
            slots("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"),
            None
        );
    }
}
