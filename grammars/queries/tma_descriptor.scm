; Site kind: tma-descriptor — where a TMA descriptor is made, typed or received.
; Not GMMA/UMMA shared-memory or instruction descriptors.
; Captures:
;   @tma-descriptor  the site
;   @descriptor-alias  the name of an alias of a descriptor type (`using Input =
;                      tma_2d<…>`); kwb-sites reports declarations that use it
;   @_callee, @_type  the name that decided it

; make_tma_copy*, make_tma_atom*, im2col variants, the driver encoders, helpers named for
; what they make (make_2d_tma_a_desc, make_2d_tma_copy_desc), and prefetches of a map.
((call_expression
   function: (_) @_callee) @tma-descriptor
 (#match? @_callee "(^|::|\\.|->)\\s*(make_tma_copy[A-Za-z0-9_]*|make_tma_atom[A-Za-z0-9_]*|make_im2col_tma_copy[A-Za-z0-9_]*|cuTensorMapEncode(Tiled|Im2col|Im2colWide)|encode_tma_descriptor|make_tensor_map[A-Za-z0-9_]*|make_[1-5]d_tma[A-Za-z0-9_]*|prefetch_tma_descriptor|prefetch_tensormap)\\s*(<(?s:.*)>)?\\s*$"))

; Parameters and fields of descriptor type: CUtensorMap, cute::TmaDescriptor, tma_2d<…>.
((parameter_declaration type: (_) @_type) @tma-descriptor
 (#match? @_type "^(const )?(cute::)?(CUtensorMap|TmaDescriptor|tma_[1-5]d)\\b"))
((declaration type: (_) @_type) @tma-descriptor
 (#match? @_type "^(const )?(cute::)?(CUtensorMap|TmaDescriptor|tma_[1-5]d)\\b"))
((field_declaration type: (_) @_type) @tma-descriptor
 (#match? @_type "^(const )?(cute::)?(CUtensorMap|TmaDescriptor|tma_[1-5]d)\\b"))
((alias_declaration type: (type_descriptor type: (_) @_type)) @tma-descriptor
 (#match? @_type "^(cute::)?(CUtensorMap|TmaDescriptor|tma_[1-5]d)\\b"))

; Names of descriptor types: `using TMA_A = decltype(make_tma_copy(…))`,
; `using Input = tma_2d<…>`, `typedef CUtensorMap Map`.
((alias_declaration
   name: (type_identifier) @descriptor-alias
   type: (type_descriptor) @_type)
 (#match? @_type "(CUtensorMap|TmaDescriptor|tma_[1-5]d\\b|make_tma_copy|make_tma_atom|make_im2col_tma)"))
((type_definition
   type: (_) @_type
   declarator: (type_identifier) @descriptor-alias)
 (#match? @_type "(CUtensorMap|TmaDescriptor|tma_[1-5]d\\b)"))

; PTX prefetch of a tensor map.
((gnu_asm_expression assembly_code: (_) @_ptx) @tma-descriptor
 (#match? @_ptx "prefetch\\.tensormap"))
