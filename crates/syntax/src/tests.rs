use super::*;

fn check(source: &str, expected_masked: &str) {
    let parsed = parse(source);
    assert_eq!(parsed.masked, expected_masked);
    assert_eq!(parsed.masked.len(), parsed.source.len());
}

#[test]
fn builtin_table_parses() {
    assert!(MacroTable::builtin().len() > 40);
    assert_eq!(
        MacroTable::builtin().get("__launch_bounds__"),
        Some(MacroShape::Call)
    );
}

#[test]
fn bad_table_lines_are_reported() {
    let err = MacroTable::parse("FOO word\nBAR maybe\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "macro table line 2: shape must be word, call, qualifier, brace_call, template_param or pragma"
    );
    assert!(MacroTable::parse("1X word").is_err());
    assert!(MacroTable::parse("X word extra").is_err());
}

#[test]
fn cuda_keywords_and_launch_bounds_are_blanked() {
    check(
        "__global__ void __launch_bounds__(128, 2) k(float* __restrict__ p) {}",
        "           void                           k(float*              p) {}",
    );
}

#[test]
fn launch_configuration_becomes_a_plain_call() {
    let parsed = parse("void h() { k<<<dim3(1, 2), 128, smem>>>(p, q); }");
    let config = "<<<dim3(1, 2), 128, smem>>>";
    assert_eq!(
        parsed.masked,
        parsed.source.replace(config, &" ".repeat(config.len()))
    );
    assert_eq!(parsed.blanks[0].kind, BlankKind::Launch);
    assert!(parsed.diagnostics.is_empty());
}

#[test]
fn comments_strings_and_directives_are_left_alone() {
    check(
        "#define CUTLASS_DEVICE __forceinline__ __device__\n// __global__\nconst char* s = \"__global__\";\n",
        "#define CUTLASS_DEVICE __forceinline__ __device__\n// __global__\nconst char* s = \"__global__\";\n",
    );
}

#[test]
fn if_zero_branch_is_dead_code_and_else_branch_stays() {
    let source = "#if 0\nint a;\n#if X\nint b;\n#endif\n#else\nint c;\n#endif\n";
    let parsed = parse(source);
    let dead = "#if 0\nint a;\n#if X\nint b;\n#endif\n#else";
    let blanked: String = dead
        .chars()
        .map(|c| if c == '\n' { c } else { ' ' })
        .collect();
    assert_eq!(parsed.masked, source.replace(dead, &blanked));
    assert_eq!(parsed.blanks[0].kind, BlankKind::DeadCode);
}

#[test]
fn multiline_blank_keeps_newlines_and_offsets() {
    let source = "__align__(\n16) int x;";
    let parsed = parse(source);
    assert_eq!(parsed.masked, "          \n    int x;");
    assert_eq!(parsed.blanks_in(0..source.len()).len(), 1);
}

#[test]
fn unbalanced_input_never_panics() {
    for source in [
        "__launch_bounds__(",
        "k<<<1,",
        "\"open",
        "/* open",
        "#if 0\n",
        "R\"x(",
        "'",
    ] {
        let parsed = parse(source);
        assert_eq!(parsed.masked.len(), source.len());
    }
}

#[test]
fn error_nodes_are_reported_with_lines() {
    let parsed = parse("int f() {\n  return (1 + ;\n}\n");
    assert!(!parsed.diagnostics.is_empty());
    assert_eq!(parsed.diagnostics[0].line, 2);
}

#[test]
fn typename_is_blanked_only_before_a_qualified_name() {
    let parsed = parse(
        "template <typename T> void f() { g(typename T::Layout{}); h(typename A<T>::B{}); }\n\
         void g() { k(typename decltype(m)::AtomThrID{}); }",
    );
    let blanked: Vec<_> = parsed.blanks.iter().map(|b| b.range.start).collect();
    assert_eq!(blanked.len(), 3);
    assert!(parsed.diagnostics.is_empty());
}

#[test]
fn shapes_for_cute_idioms_parse_clean() {
    let source = "template <class T, __CUTE_REQUIRES(is_integral<T>::value)>\n\
                  void f(T const& p = {}) { constexpr auto m = decltype(g(p)){}; x = {}; }\n\
                  struct CUTE_ALIGNAS(16) S { int a; };";
    let parsed = parse(source);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    assert!(
        parsed
            .blanks
            .iter()
            .any(|b| b.kind == BlankKind::EmptyDefault)
    );
    assert!(!parsed.masked.contains("decltype"));
    assert_eq!(parse("bool b = a == {};").blanks.len(), 0);
    let defaults = parse("void g(int a, T t = {W::x}, U u = {1, 2}) { int v[2] = {1, 2}; }");
    assert!(
        defaults.diagnostics.is_empty(),
        "{:?}",
        defaults.diagnostics
    );
    assert_eq!(defaults.blanks.len(), 2);
}

#[test]
fn conditional_that_splits_an_if_chain_falls_back_to_the_first_branch() {
    let source = "int f(int n) {\n  if (n == 1) {\n    return 1;\n  }\n#if defined(WIDE)\n  else if (n == 2) {\n    return 2;\n  }\n#endif\n  else {\n    return 0;\n  }\n}\n";
    let parsed = parse(source);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    assert!(
        parsed
            .blanks
            .iter()
            .any(|b| b.kind == BlankKind::InactiveBranch)
    );
    // A file whose conditionals parse as they are keeps them.
    let clean = parse("#ifndef G\n#define G\nint a;\n#else\nint b;\n#endif\n");
    assert!(clean.blanks.is_empty());
}

#[test]
fn explicit_operator_calls_parse_and_declarations_stay() {
    let source = "struct I {\n  I& operator++() { return *this; }\n  operator bool() const { return true; }\n  void f(int a) { operator++(); this->operator++(); (*this).operator()(a); }\n  void operator()(int) {}\n};\n";
    let parsed = parse(source);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    let calls = parsed
        .blanks
        .iter()
        .filter(|b| b.kind == BlankKind::OperatorCall)
        .count();
    assert_eq!(calls, 3);
}

#[test]
fn pragma_between_loop_header_and_body_parses() {
    let parsed = parse(
        "void f() {\n  for (int i = 0; i < 4; ++i)\n#pragma unroll\n    for (int j = 0; j < 4; ++j) g(i, j);\n}\n",
    );
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    assert_eq!(parsed.blanks[0].kind, BlankKind::Pragma);
}
