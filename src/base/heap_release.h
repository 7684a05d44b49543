// Hands the free memory of the C heap back to the kernel after a large request.
//
// glibc's malloc_trim(0) releases the free pages inside every arena and the free top of the
// main arena, but not the free top chunk of a thread's own arena (glibc 2.36 mtrim: systrim
// runs for the main arena only). A thread arena's top is shrunk (heap_trim) only by a free()
// of a chunk of at least 64 KiB (FASTBIN_CONSOLIDATION_THRESHOLD). An HTTP thread that
// tokenized a large text (SentencePiece's BPE makes ~4 MiB of sub-MiB allocations for a 180 KB
// text) ends with all of it free at the top of its arena and still resident: measured +12.7
// MiB of RSS per arena after an 8 MiB /tokenize (docs/BENCHMARKS.md, "Large requests").
#pragma once

namespace pagellm {

// malloc_trim(0), then one allocation of 64 KiB freed again on the calling thread, whose free
// makes glibc trim the top of this thread's arena. Costs a few microseconds plus the page
// faults of memory touched again later; call it after requests that allocated megabytes.
void ReleaseFreeHeapMemory();

}  // namespace pagellm
