; Site kind: operand-load — what fills the tiles the MMA reads: global→shared loads of the
; A/B operands, and the shared→register loads (ldmatrix, warp tile iterators) that fill
; its fragments.
; Captures:
;   @operand-load  the load (the site)
;   @copy          a cute::copy candidate that kwb-sites classifies by the memory
;                  spaces of its source and destination (CuTe names: tAgA → tAsA)
;   @_callee, @_ptx  as in mma.scm

; Bulk-tensor (TMA) and cp.async PTX, and ld.global feeding st.shared.
((gnu_asm_expression assembly_code: (_) @_ptx) @operand-load
 (#match? @_ptx "ldmatrix\\.sync|cp\\.async\\.(ca|cg)\\.shared|cp\\.async\\.bulk\\.tensor\\.[0-9]d\\.shared|cp\\.async\\.bulk\\.shared[^ ]*\\.global"))

; CUTLASS/CUDA copy helpers that move global to shared.
((call_expression
   function: (_) @_callee) @operand-load
 (#match? @_callee "(^|::)\\s*(cp_async|cp_async_zfill|cp_async_nan|cp_async_bulk_tensor_[1-5]d_global_to_shared|memcpy_async|__pipeline_memcpy_async)\\s*(<(?s:.*)>)?\\s*$"))

;  TMA load helpers: DeepGEMM's tma_copy, CuTe's SM90_TMA_LOAD_2D::copy, generated
; tma_3d_gmem2smem(…); CUTLASS 2.x iterators: iterator_A.load(frag),
; warp_tile_iterator_B_.load(frag), smem_iterator_A_.store(frag).
((call_expression
   function: (_) @_callee) @operand-load
 (#match? @_callee "((^|::)\\s*(tma_copy|tma_[1-5]d_gmem2smem|SM90_TMA_LOAD[A-Za-z0-9_]*\\s*::\\s*copy)|[Ii]terator_?[AB]_?\\s*(\\.|->)\\s*(load|store|load_with_byte_offset))\\s*(<(?s:.*)>)?\\s*$"))

; cute::copy / copy_if: classified by kwb-sites (gmem → smem is a load, → gmem is an
; epilogue store).
((call_expression
   function: (_) @_callee
   arguments: (argument_list (_) (_))) @copy
 (#match? @_callee "^\\s*(::)?\\s*([A-Za-z_][A-Za-z0-9_]*\\s*::\\s*)*(copy|copy_if|copy_aligned)\\s*$"))
