; Site kind: mma — each MMA issue.
; Captures:
;   @mma       the issuing call or inline-asm expression (the site)
;   @_callee   the called function (calls only); its text ends with the name
;   @_ptx      the PTX template (inline asm only)
;   @accumulate  a scalar multiply-accumulate candidate (kwb-sites decides)
; Calls to a helper in the same file that wraps one of these are added by kwb-sites.

; cute::gemm(tiled_mma, A, B, C) on a TiledMMA, CUTLASS 2.x warp_mma(D, A, B, C),
; MMA atoms' fma/mma_unpack, mainloop wrappers such as collective_mainloop.mma(…), and
; WGMMA/UMMA wrapper structs and helpers: WGMMA::wgmma(desc_a, desc_b, acc, k),
; tcgen05_mma_f16_ss(tmem_acc, a_desc, b_desc, …), HMMA_16816(d, a, b, c).
((call_expression
   function: (_) @_callee
   arguments: (argument_list (_) (_) (_))) @mma
 (#match? @_callee "(^|::|\\.|->)\\s*(gemm|mma|warp_mma_?|mma_op|mma_unpack|wmma_mma|mma_sync|umma_arrive_mma|wgmma|tcgen05_mma[A-Za-z0-9_]*|[Hh][Mm][Mm][Aa]_?[0-9][A-Za-z0-9_]*)\\s*(<(?s:.*)>)?\\s*$"))

; Inline PTX: mma.sync (SM80+), wgmma.mma_async (SM90), tcgen05.mma (SM100), wmma.mma.
((gnu_asm_expression assembly_code: (_) @_ptx) @mma
 (#match? @_ptx "(^|[^.a-z])(mma\\.sync|wgmma\\.mma_async|tcgen05\\.mma|wmma\\.mma)"))

; A scalar multiply-accumulate, the MMA of a SIMT GEMM or a GEMV: `acc += a * b`,
; `acc = acc + a * b`, `acc = fma(a, b, acc)`. Marked @accumulate: kwb-sites keeps
; those whose target is carried across a loop and holds values, not an index
; (crates/sites/src/fma.rs; the fused multiply-add names are grammars/fma.txt).
((assignment_expression
   operator: "+="
   right: (binary_expression operator: "*")) @accumulate)
((assignment_expression
   operator: "="
   right: (binary_expression operator: "+")) @accumulate)
((assignment_expression
   operator: "="
   right: (call_expression function: (_) @_callee)) @accumulate
 (#match? @_callee "(fma|dp[24]a)[a-z_]*$"))
((init_declarator
   value: (call_expression function: (_) @_callee)) @accumulate
 (#match? @_callee "(fma|fmaf|fmaf_rn|fma_rn)$"))
