//! Instantiations a file names in a string, as JIT code does for NVRTC
//! (`nvrtcAddNameExpression(prog, "gemm<128, 128, 64>")`) or a code generator that
//! writes a launch into another file: a string literal that is exactly
//! `NAME<ARGS…>` for the kernel in question.

use kwb_syntax::Parsed;

/// One string naming an instantiation of the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// 1-based line of the string.
    pub line: usize,
    /// The template arguments as the string writes them.
    pub args: Vec<String>,
}

/// Every string literal of `parsed` that is exactly an instantiation of the kernel
/// whose simple name is `short`, in source order.
pub fn named(parsed: &Parsed, short: &str) -> Vec<Named> {
    let mut out = Vec::new();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if matches!(n.kind(), "string_literal" | "raw_string_literal") {
            let mut cursor = n.walk();
            let content: String = n
                .named_children(&mut cursor)
                .filter(|c| matches!(c.kind(), "string_content" | "raw_string_content"))
                .map(|c| &parsed.source[c.byte_range()])
                .collect();
            if let Some((name, args)) = crate::scan::template_id(&content)
                && !args.is_empty()
                && name.rsplit("::").next() == Some(short)
            {
                out.push(Named {
                    line: crate::tree::line_of(&parsed.source, n.start_byte()),
                    args,
                });
            }
            continue;
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|n| n.line);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn strings_that_are_exactly_an_instantiation() {
        let parsed = kwb_syntax::parse(
            "template <int BM> __global__ void gemm(float* d) {}\n\
             const char* kName = \"gemm<128>\";\n\
             void f() { add(\"ns::gemm<64>\"); log(\"gemm<128> failed\"); g(\"other<1>\"); }\n",
        );
        let found = super::named(&parsed, "gemm");
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].line, found[0].args.clone()),
            (2, vec!["128".to_owned()])
        );
        assert_eq!(
            (found[1].line, found[1].args.clone()),
            (3, vec!["64".to_owned()])
        );
    }
}
