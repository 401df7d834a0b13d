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
; fusion callbacks' visit.
((call_expression
   function: (field_expression argument: (_) @_object field: (field_identifier) @_callee)) @epilogue
 (#match? @_object "([Ee]pilogue|epi_op|output_op)$"))
((call_expression
   function: (field_expression argument: (_) @_object field: (field_identifier) @_callee)) @epilogue
 (#match? @_object "callbacks$")
 (#match? @_callee "^(visit|reduce|postreduce|tma_store)$"))

; PTX bulk-tensor stores shared→global (TMA store).
((gnu_asm_expression assembly_code: (_) @_ptx) @epilogue
 (#match? @_ptx "cp\\.async\\.bulk\\.tensor\\.[0-9]d\\.global\\.shared"))
