//! Marks that Glassbox's own code leaves in ggml's CPU variant libraries
//! (`crates/models/cmake/`, `crates/models/kernels/`, ADR 0004): a library
//! built without them is older than this build, or built without its hooks.

use std::path::Path;

/// What the AMX variant's library carries when it was built with the fix of
/// `crates/models/cmake/amx-tile-config.h`; without it, it is not loaded.
pub const AMX_MARK: &[u8] = b"glassbox: AMX tile configuration stated whole";

pub(super) const UNMARKED: &str = "this library was built without Glassbox's AMX tile-configuration fix \
     and faults at its first tile load; rebuild llama.cpp (`cargo clean`, then build)";

/// What a CPU variant library built with Glassbox's attention kernel for a
/// few query rows carries (`crates/models/kernels/`, ADR 0004).
pub const FLASH_ATTN_ROWS_MARK: &[u8] = b"glassbox: flash attention for a few rows";

/// Whether the library at `path` carries [`AMX_MARK`].
pub fn carries_amx_mark(path: &Path) -> bool {
    carries_mark(path, AMX_MARK)
}

/// Whether the library at `path` carries `mark` (a scan for its first byte).
pub fn carries_mark(path: &Path, mark: &[u8]) -> bool {
    let Some(&first) = mark.first() else {
        return false;
    };
    std::fs::read(path).is_ok_and(|bytes| {
        bytes
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == first)
            .any(|(i, _)| bytes[i..].starts_with(mark))
    })
}

/// What a CPU variant library built with Glassbox's matrix-product kernel
/// for Q4_1 and Q8_0 weights carries (`crates/models/kernels/mul-mat-rows8.cpp`).
pub const MUL_MAT_ROWS8_MARK: &[u8] = b"glassbox: quantised weights eight rows at a time";
