; Site kind: sync — waits, barriers and releases that order loads, MMAs and epilogue.
; Captures:
;   @sync  the site
;   @_callee, @_ptx  the name or PTX that decided it

((call_expression
   function: (_) @_callee) @sync
 (#match? @_callee "(^|::)\\s*(__syncthreads|__syncthreads_and|__syncthreads_or|__syncthreads_count|__syncwarp|warpgroup_wait|cp_async_wait|cp_async_wait_all|tma_store_wait|cluster_sync|cluster_wait|__pipeline_wait_prior|syncthreads|barrier_sync|synchronize|cp_async_fence|__pipeline_commit|warpgroup_arrive|warpgroup_commit_batch|tma_store_fence|tma_store_arrive|fence_view_async_shared|fence_view_async_tmem_load|fence_view_async_tmem_store|fence_barrier_init|fence_proxy_async|wait_barrier|arrive_barrier|set_barrier_transaction_bytes|umma_arrive|umma_arrive_2x1SM|umma_arrive_multicast[A-Za-z0-9_]*|mbarrier_wait|mbarrier_try_wait|mbarrier_arrive|mbarrier_arrive_expect_tx|mbarrier_arrive_[A-Za-z0-9_]*expect_tx[A-Za-z0-9_]*|cluster_arrive|cluster_arrive_relaxed|named_barrier_sync|named_barrier_arrive|tcgen05_fence_[A-Za-z_]*|tmem_fence[A-Za-z_]*)\\s*(<(?s:.*)>)?\\s*$"))

; Pipeline and barrier members: pipeline.consumer_wait(…), full_barrier.wait(phase),
; NamedBarrier::sync(…), pipeline.consumer_release(…), barrier.arrive(…),
; barrier.arrive_and_expect_tx(bytes), bar.wait_parity(phase), producer_commit(…).
((call_expression
   function: (_) @_callee) @sync
 (#match? @_callee "(::|\\.|->)\\s*(consumer_wait|consumer_try_wait|producer_acquire|producer_try_acquire|producer_commit|producer_expect_transaction|consumer_release|producer_tail|wait|wait_parity|try_wait|sync|arrive|arrive_and_expect_tx|arrive_and_wait|arrive_and_wait_cta|arrive_and_drop)\\s*$"))

; PTX waits, arrivals, commits and fences.
((gnu_asm_expression assembly_code: (_) @_ptx) @sync
 (#match? @_ptx "mbarrier\\.(try_wait|test_wait|arrive)|fence\\.(proxy\\.async|mbarrier_init)|tcgen05\\.(fence|wait|commit)|cp\\.async\\.(commit_group|bulk\\.commit_group)|barrier\\.cluster\\.arrive|wgmma\\.(fence|commit_group)|(^|[^.a-z])bar\\.sync|barrier\\.sync|barrier\\.cluster\\.wait|cp\\.async\\.wait_(group|all)|cp\\.async\\.bulk\\.wait_group|wgmma\\.wait_group|bar\\.arrive"))
