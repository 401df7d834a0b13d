; Site kind: epilogue — where accumulators are read out, scaled, converted or stored.
; kwb-sites adds statements after the mainloop that read the accumulator, and
; cute::copy calls that write global memory (see operand_load.scm's @copy).
; Captures:
;   @epilogue  the site
;   @_callee, @_object  the name that decided it

; axpby-style and epilogue functors: axpby(alpha, accum, beta, tCgC), epilogue_op(…).
((call_expression
   function: (_) @_callee) @epilogue
 (#match? @_callee "^\\s*(::)?\\s*([A-Za-z_][A-Za-z0-9_]*\\s*::\\s*)*(axpby|epilogue|epilogue_op|output_op|apply_epilogue|store_accumulators)\\s*(<(?s:.*)>)?\\s*$"))

; Calls on an epilogue object: collective_epilogue.store(…), epilogue(…) members,
; and every step of a fusion's callbacks (begin, step, previsit, visit, reduce,
; begin_loop, end_loop, end).
((call_expression
   function: (field_expression argument: (_) @_object field: (field_identifier) @_callee)) @epilogue
 (#match? @_object "([Ee]pilogue|epi_op|output_op)$"))
((call_expression
   function: (field_expression argument: (_) @_object field: (field_identifier) @_callee)) @epilogue
 (#match? @_object "callbacks$")
 (#match? @_callee "^(begin|end|step|begin_loop|end_loop|previsit|visit|reduce|postreduce|tma_store)$"))

; Shared→global stores and reductions by TMA helpers (SM90_TMA_STORE_2D::copy,
; tma_store_2d(…), tma_reduce_add_2d(…)) and the PTX of a plain store to global
; memory.
((call_expression
   function: (_) @_callee) @epilogue
 (#match? @_callee "((^|::)\\s*(tma_store_[1-5]d|tma_reduce_add_[1-5]d|tma_store|SM90_TMA_STORE[A-Za-z0-9_]*\\s*::\\s*copy|SM90_TMA_REDUCE_ADD[A-Za-z0-9_]*\\s*::\\s*copy))\\s*(<(?s:.*)>)?\\s*$"))

; PTX bulk-tensor stores shared→global (TMA store).
((gnu_asm_expression assembly_code: (_) @_ptx) @epilogue
 (#match? @_ptx "cp\\.async\\.bulk\\.tensor\\.[0-9]d\\.global\\.shared"))
