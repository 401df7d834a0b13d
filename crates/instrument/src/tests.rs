use super::*;

const KERNEL: &str = r#"template <int REDUCTION_SIZE>
__global__ void k(const float* A, float* C, int K) {
  __shared__ float As[16][16];
  float acc[2][4] = {};
  CUTLASS_PRAGMA_NO_UNROLL
  for (int kt = 0; kt < REDUCTION_SIZE / 16; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[kt * 16 + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];
    __syncthreads();
  }
  C[threadIdx.x] = acc[0][0];
}
"#;

fn config(gate: Option<&str>) -> Config {
    Config {
        kernel: None,
        gate: gate.map(str::to_owned),
        probes: Probes::default(),
        file_name: "k.cu".to_owned(),
        ..Config::default()
    }
}

/// The accumulator probes alone (after each K tile and where complete), ungated.
fn accumulators_only() -> Config {
    Config {
        probes: Probes {
            accumulator: true,
            final_accumulator: true,
            ..Probes::NONE
        },
        ..config(None)
    }
}

/// The rewrite as a unified diff of the original, without the inlined runtime
/// header (whose text is kwb-runtime's own).
fn check(source: &str, config: &Config) -> String {
    let (out, plan) = instrument(source, config).unwrap();
    let header_end = out.find("#line 1 \"").unwrap();
    let shown = format!("<runtime header>\n{}", &out[header_end..]);
    let diff = similar::TextDiff::from_lines(source, &shown);
    let mut text = diff.unified_diff().context_radius(1).to_string();
    for p in &plan.probes {
        text.push_str(&format!(
            "probe {} {}: {} (line {})\n",
            p.id, p.kernel, p.what, p.line
        ));
    }
    text
}

#[test]
fn accumulator_probes_are_gated_and_single_line() {
    let config = Config {
        probes: Probes {
            accumulator: true,
            final_accumulator: true,
            ..Probes::NONE
        },
        ..config(Some("REDUCTION_SIZE == 6144"))
    };
    insta::assert_snapshot!(check(KERNEL, &config), @r#"
    @@ -1,5 +1,7 @@
    -template <int REDUCTION_SIZE>
    -__global__ void k(const float* A, float* C, int K) {
    +<runtime header>
    +#line 1 "k.cu"
    +/*}:kwb*/template <int REDUCTION_SIZE>
    +__global__ void /*kwb:{*/KWB_MAXNREG /*}:kwb*/k(const float* A, float* C, int K) {
       __shared__ float As[16][16];
    -  float acc[2][4] = {};
    +  float acc[2][4] = {};/*kwb:{*/[[maybe_unused]] int kwb_kt_0 = 0; /*}:kwb*/
       CUTLASS_PRAGMA_NO_UNROLL
    @@ -10,4 +12,14 @@
         __syncthreads();
    -  }
    +  /*kwb:{*/if constexpr (kwb::enabled && (REDUCTION_SIZE == 6144)) { kwb::dependent(0x71a03d31u, [&](auto kwb_tag) { kwb::probe(0, kwb::Kind::Accumulator, kwb_tag, kwb_kt_0, -1, -1, acc); ++kwb_kt_0; }); } /*}:kwb*/}/*kwb:{*/ if constexpr (kwb::enabled && (REDUCTION_SIZE == 6144)) { kwb::dependent(0x71a03d31u, [&](auto kwb_tag) { kwb::probe(1, kwb::Kind::Accumulator, kwb_tag, -1, -1, -1, acc); }); }/*}:kwb*/
       C[threadIdx.x] = acc[0][0];
     }
    +/*kwb:{*/
    +#ifndef KWB_SITES_71a03d31
    +#define KWB_SITES_71a03d31
    +static const kwb::SiteInfo kwb_sites_71a03d31[] = {
    +  {0, "k.cu", 11, "for (int kt = 0; kt < REDUCTION_SIZE / 16; ++kt) {"},
    +  {1, "k.cu", 11, "for (int kt = 0; kt < REDUCTION_SIZE / 16; ++kt) {"},
    +};
    +[[maybe_unused]] static const bool kwb_sites_registered_71a03d31 = kwb::register_sites(kwb_sites_71a03d31);
    +#endif
    +/*}:kwb*/
    \ No newline at end of file
    probe 0 k: accumulator `acc` after each K tile (line 11)
    probe 1 k: accumulator `acc` after the mainloop (line 11)
    "#);
}

#[test]
fn strip_restores_the_original_and_instrumenting_twice_equals_once() {
    let (once, _) = instrument(KERNEL, &config(None)).unwrap();
    assert_eq!(strip(&once).unwrap(), KERNEL);
    let (twice, _) = instrument(&once, &config(None)).unwrap();
    assert_eq!(twice, once);
}

#[test]
fn instrumenting_an_instrumented_file_keeps_the_original_s_name() {
    let named = |file_name: &str| Config {
        file_name: file_name.to_owned(),
        ..config(None)
    };
    let (once, _) = instrument(KERNEL, &named("dir/\"odd\" name.cu")).unwrap();
    assert_eq!(
        markers::original_name(&once).as_deref(),
        Some("dir/\"odd\" name.cu")
    );
    let (again, plan) = instrument(&once, &named("traced.cu")).unwrap();
    assert_eq!(again, once, "the intermediate file's name appears nowhere");
    assert!(!again.contains("traced.cu"));
    assert!(plan.probes.iter().all(|p| p.line > 0));
    assert_eq!(markers::original_name(KERNEL), None);
}

#[test]
fn every_original_line_keeps_its_number() {
    let (out, _) = instrument(KERNEL, &config(None)).unwrap();
    let after_header = &out[out.find("#line 1 \"k.cu\"\n").unwrap() + "#line 1 \"k.cu\"\n".len()..];
    let original_lines: Vec<&str> = KERNEL.lines().collect();
    let lines: Vec<&str> = after_header.lines().collect();
    assert!(
        lines.len() > original_lines.len(),
        "the site table follows at the end"
    );
    for (i, line) in original_lines.iter().enumerate() {
        // Line 1 starts with the close of the header's span.
        let line_i = lines[i].strip_prefix(markers::CLOSE).unwrap_or(lines[i]);
        assert!(
            strip(line_i).unwrap() == *line,
            "line {} moved: {:?} vs {:?}",
            i + 1,
            lines[i],
            line
        );
    }
}

#[test]
fn the_rewrite_adds_no_syntax_error() {
    let (out, _) = instrument(KERNEL, &config(Some("REDUCTION_SIZE == 6144"))).unwrap();
    let before = kwb_syntax::parse(KERNEL).diagnostics.len();
    let after = kwb_syntax::parse(&out).diagnostics.len();
    assert_eq!(after, before, "{:?}", kwb_syntax::parse(&out).diagnostics);
}

#[test]
fn a_gate_must_name_a_template_parameter() {
    let err = instrument(KERNEL, &config(Some("BATCH == 8"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the gate `BATCH == 8` names no template parameter of `k`"
    );
    let err = instrument(
        KERNEL,
        &Config {
            kernel: Some("nope".into()),
            ..config(None)
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("no kernel named `nope`"));
}

#[test]
fn damaged_markers_are_an_error_not_a_partial_strip() {
    let (out, _) = instrument(KERNEL, &config(None)).unwrap();
    let damaged = out.replacen(markers::CLOSE, "", 1);
    assert!(strip(&damaged).is_err());
}

#[test]
fn the_final_probe_follows_a_fold_of_partial_accumulators_but_not_a_scaling() {
    let source = r#"__global__ void k(const float* A, const float* B, float* C, float alpha, int K) {
  float acc[2][4] = {};
  for (int kt = 0; kt < K; kt += 2) {
    for (int s = 0; s < 2; ++s) acc[s][0] += A[kt + s] * B[kt + s];
  }
  for (int i = 0; i < 4; ++i) acc[0][i] += acc[1][i];
  for (int i = 0; i < 4; ++i) acc[0][i] *= alpha;
  C[threadIdx.x] = acc[0][0];
}
"#;
    let (out, plan) = instrument(source, &config(None)).unwrap();
    let fold_line = out
        .lines()
        .find(|l| l.contains("acc[0][i] += acc[1][i]"))
        .unwrap();
    assert!(fold_line.contains("kwb::probe(1,"), "{fold_line}");
    // The set the fold writes, alone: the other is a partial sum by design.
    assert!(fold_line.contains(", acc[0]);"), "{fold_line}");
    assert!(plan.probes[1].what.contains("`acc[0]` after the fold"));
    let scale_line = out.lines().find(|l| l.contains("*= alpha")).unwrap();
    assert!(!scale_line.contains("kwb::probe"), "{scale_line}");
    assert_eq!(plan.probes[1].line, 6);
}

#[test]
fn a_fold_into_no_one_set_keeps_the_whole_accumulator() {
    // Folds into different sets, or into an index that is not a literal: no one set
    // is what the epilogue gets.
    for fold in [
        "for (int i = 0; i < 4; ++i) { acc[0][i] += acc[1][i]; acc[1][i] += acc[0][i]; }",
        "for (int i = 0; i < 4; ++i) acc[s0][i] += acc[1][i];",
    ] {
        let source = format!(
            "__global__ void k(const float* A, const float* B, float* C, int K, int s0) {{\n  float acc[2][4] = {{}};\n  for (int kt = 0; kt < K; kt += 2) {{\n    for (int s = 0; s < 2; ++s) acc[s][0] += A[kt + s] * B[kt + s];\n  }}\n  {fold}\n  C[threadIdx.x] = acc[0][0];\n}}\n"
        );
        let (out, plan) = instrument(&source, &config(None)).unwrap();
        let line = out.lines().find(|l| l.contains("kwb::probe(1,")).unwrap();
        assert!(line.contains(", acc);"), "{line}");
        assert!(plan.probes[1].what.contains("after the mainloop"));
    }
}

#[test]
fn runtime_filters_become_overridable_defines() {
    let config = Config {
        cta: Some([0, 1, 0]),
        k_tiles: Some((2, 4)),
        values: Some(4),
        ..config(None)
    };
    let (out, _) = instrument(KERNEL, &config).unwrap();
    let header = &out[..out.find("#line 1").unwrap()];
    for expected in [
        "#ifndef KWB_TRACE_CTA_Y\n#define KWB_TRACE_CTA_Y 1\n#endif",
        "#define KWB_TRACE_K_BEGIN 2",
        "#define KWB_TRACE_K_END 4",
        "#define KWB_TRACE_VALUES 4",
    ] {
        assert!(header.contains(expected), "{expected}");
    }
    assert!(
        header.find("#define KWB_TRACE_VALUES 4").unwrap() < header.find("namespace kwb").unwrap()
    );
}

#[test]
fn epilogue_probes_read_the_stored_values() {
    let source = r#"__global__ void k(const float* A, float* D, float* E, float alpha, int K) {
  __shared__ float As[16][16];
  float acc[4] = {};
  for (int kt = 0; kt < K / 16; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[kt * 16 + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc[k % 4] += As[threadIdx.y][k] * As[k][threadIdx.x];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    float v = alpha * acc[i];
    D[threadIdx.x * 4 + i] = v;
  }
  E[threadIdx.x] = acc[0] * 2.0f;
}
"#;
    let config = Config {
        probes: Probes {
            epilogue: true,
            ..Probes::NONE
        },
        ..config(None)
    };
    insta::assert_snapshot!(check(source, &config), @r#"
    @@ -1,2 +1,4 @@
    -__global__ void k(const float* A, float* D, float* E, float alpha, int K) {
    +<runtime header>
    +#line 1 "k.cu"
    +/*}:kwb*/__global__ void /*kwb:{*/KWB_MAXNREG /*}:kwb*/k(const float* A, float* D, float* E, float alpha, int K) {
       __shared__ float As[16][16];
    @@ -11,5 +13,15 @@
         float v = alpha * acc[i];
    -    D[threadIdx.x * 4 + i] = v;
    +    /*kwb:{*/if constexpr (kwb::enabled && (true)) { kwb::dependent(0x4db211e5u, [&](auto kwb_tag) { kwb::probe_values(0, kwb::Kind::Epilogue, kwb_tag, -1, -1, -1, v); }); } /*}:kwb*/D[threadIdx.x * 4 + i] = v;
       }
    -  E[threadIdx.x] = acc[0] * 2.0f;
    +  E[threadIdx.x] = acc[0] * 2.0f;/*kwb:{*/ if constexpr (kwb::enabled && (true)) { kwb::dependent(0x4db211e5u, [&](auto kwb_tag) { kwb::probe_value(1, kwb::Kind::Epilogue, kwb_tag, -1, -1, -1, E[threadIdx.x]); }); }/*}:kwb*/
     }
    +/*kwb:{*/
    +#ifndef KWB_SITES_4db211e5
    +#define KWB_SITES_4db211e5
    +static const kwb::SiteInfo kwb_sites_4db211e5[] = {
    +  {0, "k.cu", 12, "D[threadIdx.x * 4 + i] = v;"},
    +  {1, "k.cu", 14, "E[threadIdx.x] = acc[0] * 2.0f;"},
    +};
    +[[maybe_unused]] static const bool kwb_sites_registered_4db211e5 = kwb::register_sites(kwb_sites_4db211e5);
    +#endif
    +/*}:kwb*/
    \ No newline at end of file
    probe 0 k: epilogue values `v` as the store at line 12 writes them (before rounding to the output type) (line 12)
    probe 1 k: the output element `E[threadIdx.x]` read back after the store at line 14 (line 14)
    "#);
}

#[test]
fn probe_kinds_parse_from_a_list() {
    assert_eq!(
        Probes::parse("epilogue, accumulator").unwrap(),
        Probes {
            accumulator: true,
            final_accumulator: true,
            operands: false,
            epilogue: true,
            loads: false
        }
    );
    assert_eq!(
        Probes::parse("final").unwrap(),
        Probes {
            final_accumulator: true,
            ..Probes::NONE
        }
    );
    assert_eq!(
        Probes::parse("loads").unwrap(),
        Probes {
            loads: true,
            ..Probes::NONE
        }
    );
    assert!(
        Probes::parse("stores")
            .unwrap_err()
            .contains("not a probe kind")
    );
    assert!(Probes::parse("").is_err());
}

#[test]
fn final_accumulator_alone_has_no_per_k_tile_probe_or_counter() {
    let config = Config {
        probes: Probes {
            final_accumulator: true,
            ..Probes::NONE
        },
        ..config(None)
    };
    insta::assert_snapshot!(check(KERNEL, &config), @r#"
    @@ -1,3 +1,5 @@
    -template <int REDUCTION_SIZE>
    -__global__ void k(const float* A, float* C, int K) {
    +<runtime header>
    +#line 1 "k.cu"
    +/*}:kwb*/template <int REDUCTION_SIZE>
    +__global__ void /*kwb:{*/KWB_MAXNREG /*}:kwb*/k(const float* A, float* C, int K) {
       __shared__ float As[16][16];
    @@ -10,4 +12,13 @@
         __syncthreads();
    -  }
    +  }/*kwb:{*/ if constexpr (kwb::enabled && (true)) { kwb::dependent(0x4db211e5u, [&](auto kwb_tag) { kwb::probe(0, kwb::Kind::Accumulator, kwb_tag, -1, -1, -1, acc); }); }/*}:kwb*/
       C[threadIdx.x] = acc[0][0];
     }
    +/*kwb:{*/
    +#ifndef KWB_SITES_4db211e5
    +#define KWB_SITES_4db211e5
    +static const kwb::SiteInfo kwb_sites_4db211e5[] = {
    +  {0, "k.cu", 11, "for (int kt = 0; kt < REDUCTION_SIZE / 16; ++kt) {"},
    +};
    +[[maybe_unused]] static const bool kwb_sites_registered_4db211e5 = kwb::register_sites(kwb_sites_4db211e5);
    +#endif
    +/*}:kwb*/
    \ No newline at end of file
    probe 0 k: accumulator `acc` after the mainloop (line 11)
    "#);
}

#[test]
fn operands_alone_still_count_k_tiles() {
    let config = Config {
        probes: Probes {
            operands: true,
            ..Probes::NONE
        },
        ..config(None)
    };
    insta::assert_snapshot!(check(KERNEL, &config), @r#"
    @@ -1,5 +1,7 @@
    -template <int REDUCTION_SIZE>
    -__global__ void k(const float* A, float* C, int K) {
    +<runtime header>
    +#line 1 "k.cu"
    +/*}:kwb*/template <int REDUCTION_SIZE>
    +__global__ void /*kwb:{*/KWB_MAXNREG /*}:kwb*/k(const float* A, float* C, int K) {
       __shared__ float As[16][16];
    -  float acc[2][4] = {};
    +  float acc[2][4] = {};/*kwb:{*/[[maybe_unused]] int kwb_kt_0 = 0; /*}:kwb*/
       CUTLASS_PRAGMA_NO_UNROLL
    @@ -8,6 +10,15 @@
         __syncthreads();
    -    for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];
    +    /*kwb:{*/if constexpr (kwb::enabled && (true)) { kwb::dependent(0x4db211e5u, [&](auto kwb_tag) { if (kwb::admits(kwb_kt_0) && kwb::warp_id() == 0) { kwb::probe_tile(0, kwb::Kind::OperandA, kwb_tag, kwb_kt_0, -1, -1, reinterpret_cast<const std::remove_all_extents_t<decltype(As)>*>(&As), static_cast<int>(sizeof(As) / sizeof(std::remove_all_extents_t<decltype(As)>))); } }); } /*}:kwb*/for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];
         __syncthreads();
    -  }
    +  /*kwb:{*/if constexpr (kwb::enabled && (true)) { ++kwb_kt_0; } /*}:kwb*/}
       C[threadIdx.x] = acc[0][0];
     }
    +/*kwb:{*/
    +#ifndef KWB_SITES_4db211e5
    +#define KWB_SITES_4db211e5
    +static const kwb::SiteInfo kwb_sites_4db211e5[] = {
    +  {0, "k.cu", 9, "for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];"},
    +};
    +[[maybe_unused]] static const bool kwb_sites_registered_4db211e5 = kwb::register_sites(kwb_sites_4db211e5);
    +#endif
    +/*}:kwb*/
    \ No newline at end of file
    probe 0 k: operand A: the shared array `As` the MMA at line 9 reads (whole array, memory order, warp 0) (line 9)
    "#);
}

#[test]
fn integer_scalars_are_not_mma_data() {
    let parsed = kwb_syntax::parse(
        "__device__ void f(int block_idx, uint32_t (&a)[4], float acc, const unsigned k) {\n  int i = 0; uint32_t frag[2]; TileWork w;\n}\n",
    );
    let root = parsed.tree.root_node();
    // The identifier `name` where `context` (which starts with it) first occurs.
    let at = |context: &str, name: &str| {
        let offset = parsed.source.find(context).unwrap();
        root.descendant_for_byte_range(offset, offset + name.len())
            .unwrap()
    };
    for (context, name) in [("block_idx", "block_idx"), ("k)", "k"), ("i = 0", "i")] {
        assert!(
            crate::nodes::is_integer_scalar(&parsed, at(context, name)),
            "{name}"
        );
    }
    for (context, name) in [
        ("a)[4]", "a"),
        ("acc", "acc"),
        ("frag", "frag"),
        ("w;", "w"),
    ] {
        assert!(
            !crate::nodes::is_integer_scalar(&parsed, at(context, name)),
            "{name}"
        );
    }
}

/// The records carry the CTA tile's origin where the kernel holds it in a local named
/// as in grammars/tile_origins.txt and computed from blockIdx, in scope at the probe.
#[test]
fn probes_pass_the_kernel_s_own_tile_origin_where_it_is_in_scope() {
    let source = r#"__global__ void k(const float* A, float* C) {
  __shared__ float As[16][16];
  const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
  const int row0 = 3;
  float acc[2][4] = {};
  for (int kt = 0; kt < 8; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[m0 + kt * 16 + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];
    __syncthreads();
  }
  C[m0 + n0 + threadIdx.x] = acc[0][0];
}
__global__ void late(const float* A, float* C) {
  __shared__ float As[16][16];
  float acc[2][4] = {};
  for (int kt = 0; kt < 8; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[kt * 16 + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];
    __syncthreads();
  }
  { const int m0 = blockIdx.y * 16; C[m0] = 0.f; }
  C[threadIdx.x] = acc[0][0];
}
"#;
    let config = accumulators_only();
    let (out, plan) = instrument(source, &config).unwrap();
    assert!(plan.probes.len() >= 4, "{:?}", plan.probes);
    let body = &out[out.find("#line 1 \"").unwrap()..];
    let (first, second) = body.split_at(body.find("late(").unwrap());
    // In `k`: both origins, the blockIdx ones (row0 is no CTA origin).
    assert!(
        first.contains("kwb_kt_0, static_cast<int>(m0), static_cast<int>(n0), acc"),
        "{first}"
    );
    assert!(!first.contains("row0)"), "{first}");
    // In `late`: its m0 is declared after the probes, in a block of its own.
    assert!(second.contains(", -1, -1, acc"), "{second}");
    assert!(!second.contains("static_cast<int>(m0)"), "{second}");
    // Stripped, the file is the original again.
    assert_eq!(crate::strip(&out).unwrap(), source);
}

/// A CuTe kernel's origin is its CTA coordinate (made from blockIdx) times its tiler,
/// mode by mode, where a tiling call pairs the two; a coordinate no tiling call uses
/// gives no origin.
#[test]
fn cute_kernels_pass_coordinate_times_tiler_as_the_tile_origin() {
    let source = r#"template <class TA>
__global__ void k(const TA* A, float* C, int K) {
  using namespace cute;
  auto cta_tiler = make_shape(Int<128>{}, Int<64>{}, Int<32>{});
  auto cta_coord = make_coord(blockIdx.y, blockIdx.x, _);
  auto gC = local_tile(make_tensor(make_gmem_ptr(C), make_shape(K, K)), cta_tiler, cta_coord, Step<_1, _1, X>{});
  __shared__ float As[16][16];
  float acc[2][4] = {};
  for (int kt = 0; kt < 8; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[kt * 16 + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];
    __syncthreads();
  }
  gC(threadIdx.x) = acc[0][0];
}
template <class TA>
__global__ void untiled(const TA* A, float* C) {
  auto where = cute::make_coord(blockIdx.x, blockIdx.y);
  __shared__ float As[16][16];
  float acc[2][4] = {};
  for (int kt = 0; kt < 8; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[kt * 16 + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];
    __syncthreads();
  }
  C[threadIdx.x] = acc[0][0];
}
"#;
    let config = accumulators_only();
    let (out, plan) = instrument(source, &config).unwrap();
    assert!(plan.probes.len() >= 4, "{:?}", plan.probes);
    let body = &out[out.find("#line 1 \"").unwrap()..];
    let (first, second) = body.split_at(body.find("untiled(").unwrap());
    assert!(
        first.contains(
            "kwb_kt_0, static_cast<int>(cute::get<0>(cta_coord)) * static_cast<int>(cute::size<0>(cta_tiler)), static_cast<int>(cute::get<1>(cta_coord)) * static_cast<int>(cute::size<1>(cta_tiler)), acc"
        ),
        "{first}"
    );
    assert!(second.contains(", -1, -1, acc"), "{second}");
    assert!(!second.contains("get<0>(where)"), "{second}");
    assert_eq!(crate::strip(&out).unwrap(), source);
}

/// A megakernel task's records carry the output column of the task it is given (a
/// struct parameter by reference whose struct has a field named as an origin), not of
/// the next task it is given a pointer to; a local origin in the body wins.
#[test]
fn a_task_s_origin_is_the_field_of_the_task_it_is_given() {
    let source = r#"struct Task { int type; int out_col; };
__device__ void task_fn(const Task& task, const Task* next, const float* A, float* C) {
  __shared__ float As[16][16];
  float acc[2][4] = {};
  for (int kt = 0; kt < 8; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[kt * 16 + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];
    __syncthreads();
  }
  C[task.out_col + threadIdx.x] = acc[0][0];
}
__device__ void local_wins(const Task& task, const float* A, float* C) {
  const int n0 = blockIdx.x * 16;
  __shared__ float As[16][16];
  float acc[2][4] = {};
  for (int kt = 0; kt < 8; ++kt) {
    As[threadIdx.y][threadIdx.x] = A[kt * 16 + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc[0][0] += As[threadIdx.y][k] * As[k][threadIdx.x];
    __syncthreads();
  }
  C[n0 + threadIdx.x] = acc[0][0];
}
"#;
    let config = accumulators_only();
    let (out, plan) = instrument(source, &config).unwrap();
    assert!(plan.probes.len() >= 4, "{:?}", plan.probes);
    let body = &out[out.find("#line 1 \"").unwrap()..];
    let (first, second) = body.split_at(body.find("void local_wins(").unwrap());
    assert!(
        first.contains("kwb_kt_0, -1, static_cast<int>(task.out_col), acc"),
        "{first}"
    );
    assert!(!first.contains("next.out_col"), "{first}");
    assert!(second.contains("-1, static_cast<int>(n0), acc"), "{second}");
    assert_eq!(crate::strip(&out).unwrap(), source);
}

/// A screen's probes fold into registers: each site's `kwb::Fold` is declared at the top
/// of the function that holds it, and the folds of the helper the kernel calls for its
/// MMA are the kernel's, passed through defaulted parameters at the kernel's calls. No
/// other build declares or passes a fold; stripping restores the file.
#[test]
fn a_screen_folds_in_registers_and_threads_a_helpers_folds_through_the_kernel() {
    let source = include_str!("../../../kernels/mma_sync/gemm.cu");
    let screen = Config {
        cta: None,
        summary: true,
        screen: true,
        ..config(None)
    };
    let (out, plan) = instrument(source, &screen).unwrap();
    let pair = plan
        .probes
        .iter()
        .find(|p| p.kernel == "mma_k_tile")
        .map(|p| p.id)
        .unwrap();
    let (a, b) = (pair, pair + 1);
    let body = &out[out.find("#line 1 \"").unwrap()..];
    // The helper takes the kernel's folds, falling back to its own.
    assert!(
        body.contains(&format!(
            "int lane/*kwb:{{*/, kwb::Fold* kwb_in_{a} = nullptr, kwb::Fold* kwb_in_{b} = nullptr/*}}:kwb*/)"
        )),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "kwb::Fold& kwb_fold_{a} = kwb_in_{a} != nullptr ? *kwb_in_{a} : kwb_own_{a};"
        )),
        "{body}"
    );
    assert!(body.contains(&format!(
        "kwb::probe_as_pair<kwb::bfloat16>(kwb::SiteArg{{{a}u, kwb_fold_{a}}}, kwb::SiteArg{{{b}u, kwb_fold_{b}}},"
    )));
    // The kernel declares them at its top and passes them at both of its calls.
    let kernel = &body[body.find("gemm_mma_sync(int M").unwrap()..];
    let top = &kernel[..kernel.find("/*}:kwb*/").unwrap()];
    for id in [a, b] {
        assert!(
            top.contains(&format!(
                "kwb::Fold kwb_fold_{id}{{{id}u, kwb::Kind::Operand"
            )),
            "{top}"
        );
    }
    assert_eq!(
        kernel
            .matches(&format!(
                "lane/*kwb:{{*/, &kwb_fold_{a}, &kwb_fold_{b}/*}}:kwb*/)"
            ))
            .count(),
        2
    );
    // Every site of the kernel body has its fold there too.
    for p in plan.probes.iter().filter(|p| p.kernel == "gemm_mma_sync") {
        assert!(
            top.contains(&format!("kwb::Fold kwb_fold_{}{{", p.id)),
            "{top}"
        );
        assert!(kernel.contains(&format!("kwb::SiteArg{{{}u, kwb_fold_{}}}", p.id, p.id)));
    }
    assert_eq!(crate::strip(&out).unwrap(), source);
    assert_eq!(instrument(&out, &screen).unwrap().0, out);
    // A summary that is not a screen, and records: bare site ids, no folds.
    for other in [
        Config {
            screen: false,
            ..screen.clone()
        },
        config(None),
    ] {
        let (text, _) = instrument(source, &other).unwrap();
        let body = &text[text.find("#line 1 \"").unwrap()..];
        assert!(
            !body.contains("kwb_fold") && !body.contains("kwb_in_"),
            "{body}"
        );
    }
}

/// `text` instrumented with operand probes only, without the inlined runtime header.
fn operand_probes(text: &str) -> String {
    let operands = Config {
        probes: Probes {
            operands: true,
            ..Probes::NONE
        },
        ..config(None)
    };
    let (out, _) = instrument(text, &operands).unwrap();
    out[out.find("#line 1 \"").unwrap()..].to_owned()
}

#[test]
fn a_shared_tile_is_read_without_asking_only_where_its_stage_is_shared_by_declaration() {
    let source = include_str!("../../../kernels/tma_wgmma_sm90/gemm.cu");
    // (shared reads, reads that ask), a pair call counted as its two reads.
    let reads = |text: &str| {
        let body = operand_probes(text);
        (
            body.matches("kwb::probe_shared_stage(").count()
                + 2 * body.matches("kwb::probe_shared_stage_pair(").count(),
            body.matches("kwb::probe_stage(").count()
                + 2 * body.matches("kwb::probe_stage_pair(").count(),
        )
    };
    // sA and sB come from `extern __shared__ unsigned char smem_raw[]` through casts,
    // an alignment round-up and offsets: all four tile reads skip the query, A's and
    // B's of each MMA in one call.
    assert_eq!(reads(source), (4, 0));
    assert_eq!(
        operand_probes(source)
            .matches("kwb::probe_shared_stage_pair(")
            .count(),
        2
    );
    // An sA that may be global memory (a conditional) still reads as shared to the
    // kernel map (its text names smem), but its tiles ask the address space.
    let declared = "__nv_bfloat16* sA = reinterpret_cast<__nv_bfloat16*>(smem);";
    assert!(source.contains(declared));
    let maybe_global = source.replace(
        declared,
        "__nv_bfloat16* sA = M > 0 ? reinterpret_cast<__nv_bfloat16*>(smem) : D;",
    );
    assert_eq!(reads(&maybe_global), (2, 2));
    // Read two ways, A and B are not paired.
    assert!(!operand_probes(&maybe_global).contains("_pair("));
    // So does one assigned again from a parameter after its declaration.
    let reassigned = source.replace(declared, &format!("{declared} if (K < 0) sA = D;"));
    assert_eq!(reads(&reassigned), (2, 2));
    // A `__shared__` pointer lives in shared memory; what it points to is its values'.
    let shared_pointer = source.replace(declared, "__shared__ __nv_bfloat16* sA; sA = D;");
    assert_eq!(reads(&shared_pointer), (2, 2));
}

#[test]
fn a_stage_is_shared_out_only_where_the_pointers_say_how_the_warpgroups_divide_it() {
    let source = include_str!("../../../kernels/tma_wgmma_sm90/gemm.cu");
    let parts = |text: &str| {
        let body = operand_probes(text);
        (
            body.matches("kwb::own_part(").count(),
            body.matches("kwb::split_part(").count(),
        )
    };
    // tile_a's offset is `row_base * BK`, row_base from `wg = threadIdx.x / 128`: each
    // warpgroup reads its own rows of A, and B (the same for all) is split.
    assert_eq!(parts(source), (2, 2));
    assert!(operand_probes(source).contains(
        "kwb::own_part([&](unsigned kwb_t) { return static_cast<long long>((static_cast<decltype(row_base)>((static_cast<decltype(wg)>(kwb_t / 128) - 1) * 64) * BK)); })"
    ));
    // A warpgroup index the code changes after its declaration says nothing: both
    // operands are read whole, as before.
    let declared = "const int row_base = (wg - 1) * 64;";
    assert!(source.contains(declared));
    let changed = source.replace(declared, "int row_base = (wg - 1) * 64; row_base += 0;");
    assert_eq!(parts(&changed), (0, 0));
    // Nor does one read from memory (a per-warpgroup table).
    let table = source.replace(declared, "const int row_base = C ? 64 : (wg - 1) * 64;");
    assert_eq!(parts(&table), (2, 2));
    let loaded = source.replace(
        declared,
        "const int row_base = reinterpret_cast<const int*>(C)[wg];",
    );
    assert_eq!(parts(&loaded), (0, 0));
    // Offsets the same for every warpgroup (a ping-pong schedule's, where each consumer
    // reads whole stages): nothing is shared out.
    let uniform = source.replace(declared, "const int row_base = 0;");
    assert_eq!(parts(&uniform), (0, 0));
}

/// The occupancy floor goes into each probed kernel's declaration, in the form its
/// launch bounds allow, and strips away again: `(T, B)` wraps B, `(T)` gains the
/// floor as a second argument, no launch bounds gains KWB_MAXNREG before the name, and
/// a kernel that caps its own registers is left alone.
#[test]
fn the_occupancy_floor_wraps_each_kernel_s_launch_bounds() {
    let cases = [
        (
            "__global__ void __launch_bounds__(Op<A, B>::kThreads, 2) k(",
            "__global__ void __launch_bounds__(Op<A, B>::kThreads, /*kwb:{*/KWB_MIN_CTAS((Op<A, B>::kThreads), /*}:kwb*/2/*kwb:{*/)/*}:kwb*/) k(",
        ),
        (
            "__global__ void __launch_bounds__( 256 ) k(",
            "__global__ void __launch_bounds__( 256/*kwb:{*/ KWB_MORE_CTAS((256))/*}:kwb*/ ) k(",
        ),
        (
            "__global__ __launch_bounds__(128, 1, 4) void k(",
            "__global__ __launch_bounds__(128, /*kwb:{*/KWB_MIN_CTAS((128), /*}:kwb*/1/*kwb:{*/)/*}:kwb*/, 4) void k(",
        ),
        (
            "__global__ void k(",
            "__global__ void /*kwb:{*/KWB_MAXNREG /*}:kwb*/k(",
        ),
        (
            "__global__ void __maxnreg__(64) k(",
            "__global__ void __maxnreg__(64) k(",
        ),
    ];
    for (declaration, expected) in cases {
        let source = KERNEL.replace("__global__ void k(", declaration);
        let (out, _) = instrument(&source, &config(None)).unwrap();
        assert!(out.contains(expected), "{declaration}:\n{out}");
        assert_eq!(crate::strip(&out).unwrap(), source);
        let parsed = kwb_syntax::parse(&out[out.find("#line 1 \"").unwrap()..]);
        assert!(
            parsed.diagnostics.is_empty(),
            "{declaration}: {:?}",
            parsed.diagnostics
        );
    }
}

/// `max_regs` (`--max-regs`) defines KWB_TRACE_MAX_REGS at the top of the file, so the
/// floor holds in a trace build without a flag of the build's own; without it the file
/// defines nothing of the kind.
#[test]
fn max_regs_defines_the_floor_s_register_count() {
    let floored = Config {
        max_regs: Some(58),
        ..config(None)
    };
    let (out, _) = instrument(KERNEL, &floored).unwrap();
    let header = &out[..out.find("#line 1 \"").unwrap()];
    assert!(
        header.contains("#ifndef KWB_TRACE_MAX_REGS\n#define KWB_TRACE_MAX_REGS 58\n#endif"),
        "{}",
        &header[..400.min(header.len())]
    );
    let (plain, _) = instrument(KERNEL, &config(None)).unwrap();
    assert!(!plain.contains("#define KWB_TRACE_MAX_REGS"));
}

/// A 2.x-style threadblock mainloop: the K loop calls a helper that issues the warp
/// MMAs on one of two double-buffered fragments held in a state object, and waits on
/// the copy stage inside that helper. As an overlay header (`staged_only`) the loop
/// counts as staged through the call; the operands are read as the MMA reads them
/// (the buffer's current element, through the object), not the whole double buffer.
const STAGED_THROUGH_A_CALL: &str = r#"template <typename Shape, typename Operator>
class Mainloop {
  struct PipeState {
    typename Operator::FragmentA frag_A_[2];
    typename Operator::FragmentB frag_B_[2];
  };
  Operator warp_mma_;
  __device__ void stage_wait() { cutlass::arch::cp_async_wait<2>(); __syncthreads(); }
  __device__ void mac_loop_iter(PipeState &pipe_state, typename Operator::FragmentC &accum) {
    for (int warp_mma_k = 0; warp_mma_k < 4; ++warp_mma_k) {
      warp_mma_(
        accum,
        pipe_state.frag_A_[warp_mma_k % 2],
        pipe_state.frag_B_[warp_mma_k % 2],
        accum);
      if (warp_mma_k == 2) { stage_wait(); }
    }
  }
  __device__ void gemm_iters(int gemm_k_iterations, typename Operator::FragmentC &accum) {
    PipeState pipe_state;
    for (; gemm_k_iterations > 0; --gemm_k_iterations) {
      mac_loop_iter(pipe_state, accum);
    }
  }
};
"#;

#[test]
fn a_loop_that_waits_through_a_call_is_staged_and_member_operands_are_read_as_passed() {
    let overlay = Config {
        staged_only: true,
        lenient_gate: true,
        ..config(None)
    };
    let (out, plan) = instrument(STAGED_THROUGH_A_CALL, &overlay).unwrap();
    let reads: Vec<&str> = out
        .match_indices("kwb::Kind::Operand")
        .map(|(at, _)| &out[at..at + out[at..].find(';').unwrap()])
        .collect();
    assert_eq!(
        reads,
        [
            "kwb::Kind::OperandA, kwb_tag, -1, -1, -1, pipe_state.frag_A_[warp_mma_k % 2])",
            "kwb::Kind::OperandB, kwb_tag, -1, -1, -1, pipe_state.frag_B_[warp_mma_k % 2])",
        ],
        "{out}"
    );
    assert!(
        plan.probes
            .iter()
            .any(|p| p.kernel.ends_with("gemm_iters") && p.what.contains("accumulator")),
        "{:?}",
        plan.probes.iter().map(|p| &p.what).collect::<Vec<_>>()
    );
    assert_eq!(crate::strip(&out).unwrap(), STAGED_THROUGH_A_CALL);
}

/// A double buffer of fragments the MMA indexes (`frag_A[k % 2]`) is read at that
/// index; an index with an effect is not copied into a probe.
#[test]
fn an_indexed_fragment_is_read_at_the_index_the_mma_passes() {
    use crate::probes::operands::element_read;
    let call = "warp_mma(\n  accum,\n  warp_frag_A[warp_mma_k % 2],\n  warp_frag_B[(warp_mma_k)],\n  accum);";
    assert_eq!(
        element_read(call, "warp_frag_A").as_deref(),
        Some("[warp_mma_k % 2]")
    );
    assert_eq!(element_read(call, "accum"), None);
    assert_eq!(element_read("mma(c, a[i++], b[0], c);", "a"), None);
    assert_eq!(
        element_read("mma(c, a[i][j], b[0], c);", "a").as_deref(),
        Some("[i][j]")
    );
    assert_eq!(element_read("acc += a[i] * b[j];", "a"), None);
}

/// An object that wraps the accumulator (an fp8 kernel's promotion: the MMA adds into
/// a temporary `accumulation()` hands it, promoted into `accum` every few K blocks and
/// once more after the loop) is probed through the accumulator it holds, and where it
/// is complete: after the residue's promotion, not at the loop's end.
#[test]
fn a_wrapped_accumulator_is_probed_as_the_accumulator_it_holds_after_its_last_promotion() {
    let source = r#"template <class Tensor>
__device__ void mma(Tensor& accum, int k_tile_count) {
  Promoted accumulation(accum, 4, 2);
  for (; k_tile_count > 0; --k_tile_count) {
    cute::gemm(tiled_mma, tCrA(_, _, k_tile_count), tCrB(_, _, k_tile_count), accumulation());
    accumulation.promote_if_needed();
  }
  accumulation.promote_residue_if_needed();
  warpgroup_fence_operand(accum);
}
"#;
    let config = accumulators_only();
    let (out, plan) = instrument(source, &config).unwrap();
    let whats: Vec<&str> = plan.probes.iter().map(|p| p.what.as_str()).collect();
    assert!(
        whats.contains(&"accumulator `accum` after the mainloop"),
        "{whats:?}"
    );
    let body = &out[out.find("#line 1").unwrap()..];
    let residue = body.find("promote_residue_if_needed();").unwrap();
    let last = body.rfind("kwb::Kind::Accumulator").unwrap();
    assert!(
        last > residue,
        "the final probe comes before the last promotion"
    );
    assert!(!body.contains("kwb_tag, -1, -1, -1, accumulation)"));
}

/// A whole local the epilogue stores where the store cannot be read back is probed
/// before it: as itself when it holds floating values (`float4 out`); when it is an
/// integer packing narrow values (`uint2 pk`), its bytes read as the element type of
/// the output it is stored into (`float`, `__nv_bfloat16`), and not at all where that
/// output is of an integer type.
#[test]
fn a_stored_local_is_probed_when_floating_and_read_as_the_output_when_packed() {
    let source = r#"__global__ void k(const float* A, float* C, __nv_bfloat16* y, int* flags, int K) {
  float acc[4] = {};
  for (int kt = 0; kt < K; ++kt) {
    for (int i = 0; i < 4; ++i) acc[i] += A[kt * 4 + i] * A[kt];
  }
  float4 out;
  out.x = acc[0]; out.y = acc[1]; out.z = acc[2]; out.w = acc[3];
  *reinterpret_cast<float4*>(C + threadIdx.x * 4) = out;
  uint2 pk;
  pk.x = __float_as_uint(acc[0]); pk.y = __float_as_uint(acc[1]);
  *reinterpret_cast<uint2*>(C + 4096 + threadIdx.x * 2) = pk;
  uint2 bf;
  bf.x = pack_bf16(acc[0], acc[1]); bf.y = pack_bf16(acc[2], acc[3]);
  *reinterpret_cast<uint2*>(y + threadIdx.x * 4) = bf;
  int2 fl;
  fl.x = int(acc[0]); fl.y = int(acc[1]);
  *reinterpret_cast<int2*>(flags + threadIdx.x * 2) = fl;
}
"#;
    let config = Config {
        probes: Probes {
            epilogue: true,
            ..Probes::NONE
        },
        ..config(None)
    };
    let (text, plan) = instrument(source, &config).unwrap();
    let whats: Vec<&str> = plan.probes.iter().map(|p| p.what.as_str()).collect();
    assert!(
        whats.iter().any(|w| w.starts_with("epilogue values `out`")),
        "{whats:?}"
    );
    assert!(
        whats
            .iter()
            .any(|w| w.starts_with("epilogue values `pk` read as `float`")),
        "{whats:?}"
    );
    assert!(
        whats
            .iter()
            .any(|w| w.starts_with("epilogue values `bf` read as `__nv_bfloat16`")),
        "{whats:?}"
    );
    assert!(text.contains("kwb::probe_as<__nv_bfloat16>("), "{text}");
    assert!(!whats.iter().any(|w| w.contains("`fl`")), "{whats:?}");
}

/// A store whose index converts a type (`size_t(t)`, `static_cast<size_t>(m)`, a C
/// cast) is read back; one whose index calls a function, which a second evaluation
/// could change, is not.
#[test]
fn a_stored_element_indexed_through_a_type_conversion_is_read_back() {
    let source = r#"__device__ int next_slot();
__global__ void k(const float* A, float* C, float* D, float* E, int K, int N) {
  float acc[4] = {};
  for (int kt = 0; kt < K; ++kt) {
    for (int i = 0; i < 4; ++i) acc[i] += A[kt * 4 + i] * A[kt];
  }
  const int t = threadIdx.x, o = blockIdx.x;
  C[size_t(t) * N + o] = acc[0] * 2.0f;
  D[static_cast<size_t>(t) * N + (size_t)o] = acc[1] * 2.0f;
  E[next_slot()] = acc[2] * 2.0f;
}
"#;
    let config = Config {
        probes: Probes {
            epilogue: true,
            ..Probes::NONE
        },
        ..config(None)
    };
    let (_, plan) = instrument(source, &config).unwrap();
    let whats: Vec<&str> = plan.probes.iter().map(|p| p.what.as_str()).collect();
    for read in [
        "`C[size_t(t) * N + o]` read back",
        "`D[static_cast<size_t>(t) * N + (size_t)o]` read back",
    ] {
        assert!(whats.iter().any(|w| w.contains(read)), "{read}: {whats:?}");
    }
    assert!(!whats.iter().any(|w| w.contains("`E[")), "{whats:?}");
}

/// A value the epilogue combines with the accumulator (`const float scale = …;`, read
/// from no register) is a side input, not the stored value: the store
/// `D[…] = __float2bfloat16(acc[i][j] * scale)` is read back, not `scale` probed.
#[test]
fn a_side_input_of_the_store_is_not_probed_as_its_value() {
    let source = include_str!("../../../kernels/insitu/linear_ext.cu");
    let (out, plan) = instrument(source, &config(None)).unwrap();
    let epilogue: Vec<&ProbeInfo> = plan
        .probes
        .iter()
        .filter(|p| p.what.contains("store"))
        .collect();
    assert_eq!(epilogue.len(), 1, "{:?}", plan.probes);
    assert!(
        epilogue[0].what.contains("read back"),
        "{}",
        epilogue[0].what
    );
    assert!(!out.contains(
        "kwb::Kind::Epilogue, kwb_tag, -1, static_cast<int>(m0), static_cast<int>(n0), scale)"
    ));
}

/// A traced unit's launches run in place too: `insitu` over an instrumented text keeps
/// every probe, adds the launch rewrite after the trace runtime, and strip still gives
/// the original back.
#[test]
fn insitu_over_an_instrumented_text_keeps_its_probes() {
    let source = include_str!("../../../kernels/insitu/linear_ext.cu");
    let (traced, plan) = instrument(source, &config(None)).unwrap();
    let both = crate::insitu::insitu(&traced, "linear_kernel", "linear_ext.cu").unwrap();
    assert_eq!(both.lines, vec![98]);
    assert!(!plan.probes.is_empty());
    assert_eq!(
        traced.matches("kwb::dependent(").count(),
        both.text.matches("kwb::dependent(").count()
    );
    let runtime = both.text.find("KWB_TRACE_CUH_").unwrap();
    let launcher = both.text.find("KWB_INSITU_CUH").unwrap();
    assert!(
        runtime < launcher,
        "the in-situ header follows the trace runtime"
    );
    assert_eq!(crate::strip(&both.text).unwrap(), source);
    // The original name survives both passes, for #line and __FILE__.
    assert_eq!(
        crate::markers::original_name(&both.text).as_deref(),
        Some("k.cu")
    );
}

/// A file that declares a <stdint.h> name itself as another type than the system's
/// (NVRTC style: `uint64_t` as `unsigned long long`) has that name renamed, just before
/// its typedef, with a `#line` back to it; a name it declares as the system's type
/// (`uint32_t` as `unsigned int`), and a file that only repeats the system's types
/// after including headers, have nothing renamed; strip gives every one back.
#[test]
fn a_files_conflicting_stdint_names_are_renamed_before_its_typedefs() {
    let own = include_str!("../../../fixtures/instrument/own_stdint_typedefs.cu");
    let (out, _) = instrument(own, &Config::default()).unwrap();
    let renamed = out
        .find("#define uint64_t kwb_own_uint64_t\n")
        .expect("renamed");
    assert!(!out.contains("kwb_own_uint32_t"));
    let typedef = out.find("typedef unsigned long long uint64_t;").unwrap();
    assert!(renamed < typedef);
    let line = own[..own.find("typedef unsigned long long").unwrap()]
        .lines()
        .count()
        + 1;
    assert!(
        out[renamed..typedef].contains(&format!("#line {line} \"")),
        "{}",
        &out[renamed..typedef]
    );
    assert!(out.find("typedef unsigned int uint32_t;").unwrap() < renamed);
    assert_eq!(crate::markers::strip(&out).unwrap(), own);
    let plain = own.replace(
        "typedef unsigned int uint32_t;\ntypedef unsigned long long uint64_t;\n",
        "#include <cstdint>\n",
    );
    assert_ne!(plain, own);
    let (out, _) = instrument(&plain, &Config::default()).unwrap();
    assert!(!out.contains("kwb_own_"));
    // A file that includes the system's headers and then repeats their types
    // (`unsigned long` for `uint64_t`, `short int` for `int16_t`).
    let repeats = own.replace(
        "typedef unsigned int uint32_t;\ntypedef unsigned long long uint64_t;\n",
        "#include <cstdint>\ntypedef unsigned int uint32_t;\ntypedef unsigned long uint64_t;\n\
         typedef short int int16_t;\ntypedef signed int int32_t;\n",
    );
    let (out, _) = instrument(&repeats, &Config::default()).unwrap();
    assert!(!out.contains("kwb_own_"));
}

/// Each builtin integer type has one spelling, whatever order and optional words it
/// is written with; anything else is not one.
#[test]
fn builtin_integer_spellings_are_one() {
    use crate::own_types::builtin_integer as b;
    assert_eq!(
        b("unsigned long long int").as_deref(),
        Some("unsigned long long")
    );
    assert_eq!(b("long unsigned").as_deref(), Some("unsigned long"));
    assert_eq!(b("short int").as_deref(), Some("short"));
    assert_eq!(b("signed short").as_deref(), Some("short"));
    assert_eq!(b("signed").as_deref(), Some("int"));
    assert_eq!(b("unsigned").as_deref(), Some("unsigned int"));
    assert_eq!(b("signed char").as_deref(), Some("signed char"));
    assert_eq!(b("char").as_deref(), Some("char"));
    assert_eq!(b("unsigned char").as_deref(), Some("unsigned char"));
    assert_eq!(b("__int64"), None);
    assert_eq!(b("const int"), None);
    assert_eq!(b("long long long"), None);
    assert_eq!(b("short long"), None);
}

/// A kernel with a mainloop whose MMA kwb cannot read (UMMA: the accumulator in tensor
/// memory with no tcgen05.ld, the operands descriptors of a shared address whose stage
/// extent the code does not show) is named in the refusal, with what the map found in
/// it and each reason once, not a claim that there is no mainloop.
#[test]
fn a_mainloop_with_nothing_readable_is_named_with_why() {
    let source = r#"
__device__ void umma(int taddr, unsigned long long a_desc, unsigned long long b_desc) {
  asm volatile("tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, 0, 1;"
               :: "r"(taddr), "l"(a_desc), "l"(b_desc));
}
__global__ void umma_loop(int tmem, unsigned smem_a, unsigned smem_b, int k_tiles) {
  for (int k = 0; k < k_tiles; ++k) {
    unsigned long long a_desc = (unsigned long long)((smem_a >> 4) + k * 64);
    unsigned long long b_desc = (unsigned long long)((smem_b >> 4) + k * 64);
    umma(tmem, a_desc, b_desc);
  }
}
"#;
    let err = instrument(source, &Config::default()).unwrap_err();
    let InstrumentError::NothingToProbe { kernels, help } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(kernels, &["umma_loop".to_owned()], "{help}");
    assert!(
        err.to_string()
            .contains("`umma_loop` has a mainloop, but kwb found no value in it to probe"),
        "{err}"
    );
    assert!(
        help.contains("`umma_loop` (line 6): the map found mainloop x1, mma x1"),
        "{help}"
    );
    assert!(help.contains("no accumulator"), "{help}");
    // The helper's D address is not read as operand A: A and B are the descriptors.
    assert!(!help.contains("operand A `tmem`"), "{help}");
}

/// A note's line is dropped, wherever it stands, so one reason at many lines reads
/// once; a word that only ends in `line` keeps its number.
#[test]
fn a_reason_reads_the_same_without_its_line() {
    use crate::plan::without_line;
    assert_eq!(
        without_line("k: operand A `a` is opaque; not probed before line 821"),
        "k: operand A `a` is opaque; not probed"
    );
    assert_eq!(
        without_line("line 425: `tcgen05.ld.16x32bx2` is not plain; not probed"),
        "`tcgen05.ld.16x32bx2` is not plain; not probed"
    );
    assert_eq!(
        without_line("the pipeline 3 stage is not probed"),
        "the pipeline 3 stage is not probed"
    );
}

/// A wrapper that takes B's fragment register by register (`uint32_t b0, b1`): the
/// template places both in B, and one probe reads them together, in the order the MMA
/// takes them, as the slot's fragment.
#[test]
fn registers_an_mma_takes_one_by_one_are_read_as_one_fragment() {
    let source = r#"__device__ __forceinline__ void mma16816(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, const uint32_t* p) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__global__ void k(const uint32_t* A, const uint32_t* W, float* D, int n_k) {
  __shared__ uint32_t sa[64 * 8], sw[64 * 8];
  float acc[2][4] = {};
  for (int kt = 0; kt < n_k; ++kt) {
    sa[threadIdx.x] = A[kt * 64 + threadIdx.x];
    sw[threadIdx.x] = W[kt * 64 + threadIdx.x];
    __syncthreads();
    uint32_t af[4], b0, b1, b2, b3;
    ldmatrix4(af[0], af[1], af[2], af[3], &sa[threadIdx.x * 8]);
    ldmatrix4(b0, b1, b2, b3, &sw[threadIdx.x * 8]);
    mma16816(acc[0], af, b0, b1);
    mma16816(acc[1], af, b2, b3);
    __syncthreads();
  }
  D[threadIdx.x] = acc[0][0] + acc[1][0];
}
"#;
    let config = Config {
        probes: Probes {
            operands: true,
            ..Probes::NONE
        },
        ..config(None)
    };
    insta::assert_snapshot!(check(source, &config));
}
