//! The process's memory allocator, set up for messages of megabytes.
//!
//! glibc's `malloc` serves a request of 128 KiB or more with a fresh `mmap` and unmaps it on
//! `free`, until it frees the first such block: from then on that block's size is the threshold
//! (up to 32 MiB), and freed memory is kept for reuse up to twice that. A proxy passes answers
//! of megabytes through buffers and pieces of 64 KiB to a few megabytes; while the threshold is
//! still 128 KiB, each of those lands on fresh pages (a page fault and zeroing per 4 KiB).
//! Which large block the process happened to free first decided how long that lasted: the
//! forwarding bench measured 1.06 against 0.44 ms of proxy CPU per 1 MiB result over
//! HTTP>stdio, without and with this, and 0.92 against 0.61 ms per 1.25 MB `tools/list` from
//! an HTTP upstream (see the guide's Performance page). So the proxy sets the threshold itself at
//! start, the way glibc would after one large answer.
//! Elsewhere (musl, macOS) this allocates and frees one block, and nothing else.

/// The block whose allocation and release sets glibc's threshold: the largest piece or buffer a
/// large answer goes through is below it.
const LARGE_BLOCK: usize = 4 << 20;

/// Sets the allocator up for messages of megabytes (see the module's documentation). Call it
/// once, early in `main`, when serving proxies on a runtime of your own; [`Proxy::run_stdio`],
/// [`Proxy::run_http`] and `mcpctl` do.
///
/// [`Proxy::run_stdio`]: crate::Proxy::run_stdio
/// [`Proxy::run_http`]: crate::Proxy::run_http
///
/// ```
/// mcp_middleware::heap::prepare();
/// ```
pub fn prepare() {
    let block: Vec<u8> = Vec::with_capacity(LARGE_BLOCK);
    // Made and freed for real: the allocator must see both.
    drop(std::hint::black_box(block));
}
