; Site kind: operand-load — global→shared loads of the A/B operands.
; Captures:
;   @operand-load  the load (the site)
;   @copy          a cute::copy candidate that kwb-sites classifies by the memory
;                  spaces of its source and destination (CuTe names: tAgA → tAsA)
;   @_callee, @_ptx  as in mma.scm

; Bulk-tensor (TMA) and cp.async PTX, and ld.global feeding st.shared.
((gnu_asm_expression assembly_code: (_) @_ptx) @operand-load
 (#match? @_ptx "cp\\.async\\.(ca|cg)\\.shared|cp\\.async\\.bulk\\.tensor\\.[0-9]d\\.shared|cp\\.async\\.bulk\\.shared[^ ]*\\.global"))

; CUTLASS/CUDA copy helpers that move global to shared.
((call_expression
   function: (_) @_callee) @operand-load
 (#match? @_callee "(^|::)\\s*(cp_async|cp_async_zfill|cp_async_nan|cp_async_bulk_tensor_[1-5]d_global_to_shared|memcpy_async|__pipeline_memcpy_async)\\s*(<(?s:.*)>)?\\s*$"))

; cute::copy / copy_if: classified by kwb-sites (gmem → smem is a load, → gmem is an
; epilogue store).
((call_expression
   function: (_) @_callee
   arguments: (argument_list (_) (_))) @copy
 (#match? @_callee "^\\s*(::)?\\s*([A-Za-z_][A-Za-z0-9_]*\\s*::\\s*)*(copy|copy_if|copy_aligned)\\s*$"))
