; Site kind: sync — waits, barriers and releases that order loads, MMAs and epilogue.
; Captures:
;   @sync  the site
;   @_callee, @_ptx  the name or PTX that decided it

((call_expression
   function: (_) @_callee) @sync
 (#match? @_callee "(^|::)\\s*(__syncthreads|__syncthreads_and|__syncthreads_or|__syncthreads_count|__syncwarp|warpgroup_wait|cp_async_wait|cp_async_wait_all|tma_store_wait|cluster_sync|cluster_wait|__pipeline_wait_prior|syncthreads|barrier_sync)\\s*(<(?s:.*)>)?\\s*$"))

; Pipeline and barrier members: pipeline.consumer_wait(…), full_barrier.wait(phase),
; NamedBarrier::sync(…), pipeline.consumer_release(…).
((call_expression
   function: (_) @_callee) @sync
 (#match? @_callee "(::|\\.|->)\\s*(consumer_wait|consumer_try_wait|producer_acquire|consumer_release|producer_tail|wait|sync|arrive_and_wait|arrive_and_wait_cta)\\s*$"))

; PTX waits and barriers.
((gnu_asm_expression assembly_code: (_) @_ptx) @sync
 (#match? @_ptx "mbarrier\\.(try_wait|test_wait)|(^|[^.a-z])bar\\.sync|barrier\\.sync|barrier\\.cluster\\.wait|cp\\.async\\.wait_(group|all)|cp\\.async\\.bulk\\.wait_group|wgmma\\.wait_group|bar\\.arrive"))
