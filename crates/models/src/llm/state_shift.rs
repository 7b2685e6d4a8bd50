//! Moving a saved sequence state to other positions on the host (per-chunk
//! KV reuse, ADR 0013).
//!
//! A chunk's saved keys carry the rotary position embedding (RoPE) of the
//! positions they were computed at. llama.cpp moves cells with
//! `seq_add`, which only marks them: at the next decode it re-applies RoPE
//! to *every* cell of the KV cache, moved or not (`build_rope_shift` over
//! the whole K tensor of each layer). With one stream of 8 × 2048 cells
//! that pass cost more than a tenth of the CPU of rag-chat under chunk
//! reuse (measured, docs/BENCHMARKS.md). Rotating only the chunk's own
//! keys here, in its saved state, before it is loaded at the new
//! positions, costs a few hundred thousand multiplications instead.
//!
//! The state is llama.cpp's single-sequence state (`llama_state_seq_get_data`):
//! a magic number and the saved sequence's id, the stream count, then per stream the cell count, each cell's position and
//! sequence ids, then per layer the K rows and the V rows. Only the layout
//! this was written against is accepted (one stream, one sequence id per
//! cell, 16-bit keys and untransposed values, no cell extensions and no
//! rotated-cache matrices), and anything else is refused so the caller
//! falls back to llama.cpp's own shift. The rotation is ggml's
//! (`ggml_rope_ext` with the cell's shift as position, no frequency
//! scaling): pair `i` of each head's first `n_rot` dimensions turns by
//! `delta · base^(−2i/n_rot)`; pairs are adjacent (`Norm`) or half a rotary
//! dimension apart (`NeoX`).

use half::f16;
use llama_cpp_2::model::LlamaModel;

/// How a model's keys are rotated by position; `None` from
/// [`RopeShift::new`] for anything this module does not reproduce.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct RopeShift {
    pub neox: bool,
    /// Dimensions rotated at the start of each head.
    pub n_rot: usize,
    pub freq_base: f32,
    /// Key/value heads per cell row.
    pub n_head_kv: usize,
    pub n_layer: usize,
}

/// Why a state could not be moved here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ShiftError {
    #[error("the saved state ends early (at byte {0})")]
    Short(usize),
    #[error("the saved state's layout is not one this engine moves: {0}")]
    Layout(&'static str),
}

/// What llama.cpp writes first in a sequence state (`io_magic`), before
/// the saved sequence's id.
const STATE_MAGIC: u32 = 0xaf14_3cd8;
/// The ggml type id of 16-bit floats.
const GGML_TYPE_F16: i32 = 1;

impl RopeShift {
    /// The rotation of a model with `n_layer` layers and `n_head_kv`
    /// key/value heads, rotary dimensions `n_rot`, base `freq_base`; `None`
    /// if one of them makes no sense.
    pub(super) fn new(
        neox: bool,
        n_rot: usize,
        freq_base: f32,
        n_head_kv: usize,
        n_layer: usize,
    ) -> Option<Self> {
        let sane = n_rot >= 2
            && n_rot.is_multiple_of(2)
            && freq_base.is_finite()
            && freq_base > 0.0
            && n_head_kv > 0
            && n_layer > 0;
        sane.then_some(Self {
            neox,
            n_rot,
            freq_base,
            n_head_kv,
            n_layer,
        })
    }

    /// The model's key rotation where [`RopeShift`] reproduces it: plain RoPE,
    /// adjacent or NeoX pairs, no frequency scaling (read from the GGUF as
    /// llama.cpp reads it); `None` leaves moves to llama.cpp.
    pub(super) fn of(model: &LlamaModel) -> Option<Self> {
        use llama_cpp_2::model::RopeType;
        let neox = match model.rope_type()? {
            RopeType::Norm => false,
            RopeType::NeoX => true,
            _ => return None,
        };
        let arch = model.meta_val_str("general.architecture").ok()?;
        let meta = |key: &str| model.meta_val_str(&format!("{arch}.{key}")).ok();
        let number = |key: &str, default: f32| match meta(key) {
            Some(v) => v.trim().parse::<f32>().ok(),
            None => Some(default),
        };
        let unscaled = meta("rope.scaling.type").is_none_or(|t| t.trim() == "none")
            && matches!(number("rope.scaling.factor", 1.0)?, 0.0 | 1.0)
            && number("rope.freq_scale", 1.0)? == 1.0;
        if !unscaled {
            return None;
        }
        let n_head = usize::try_from(model.n_head()).ok()?.max(1);
        let head = usize::try_from(model.n_embd()).ok()? / n_head;
        let head = number("attention.key_length", head as f32)? as usize;
        Self::new(
            neox,
            number("rope.dimension_count", head as f32)? as usize,
            number("rope.freq_base", 10_000.0)?,
            usize::try_from(model.n_head_kv()).ok()?,
            usize::try_from(model.n_layer()).ok()?,
        )
    }

    /// Cosine and sine of each rotary pair's angle for a shift of `delta`
    /// positions, computed as ggml does (the angle of pair `i + 1` is that
    /// of pair `i` times `base^(−2/n_rot)`, in single precision).
    fn table(&self, delta: i32) -> Vec<(f32, f32)> {
        let scale = self.freq_base.powf(-2.0 / self.n_rot as f32);
        let mut theta = delta as f32;
        (0..self.n_rot / 2)
            .map(|_| {
                let cs = (theta.cos(), theta.sin());
                theta *= scale;
                cs
            })
            .collect()
    }

    /// Moves the single-sequence state `state` by `delta` positions: every
    /// cell's position, and every key rotated to match. Nothing is changed
    /// when it fails.
    pub(super) fn shift(&self, state: &mut [u8], delta: i32) -> Result<(), ShiftError> {
        let layout = self.layout(state)?;
        if delta == 0 {
            return Ok(());
        }
        let moved = layout
            .positions
            .iter()
            .map(|&at| {
                read_i32(state, at)?
                    .checked_add(delta)
                    .filter(|p| *p >= 0)
                    .ok_or(ShiftError::Layout("a position would fall below 0"))
            })
            .collect::<Result<Vec<i32>, _>>()?;
        for (&at, pos) in layout.positions.iter().zip(moved) {
            state[at..at + 4].copy_from_slice(&pos.to_ne_bytes());
        }
        let table = self.table(delta);
        let head = layout.row / 2 / self.n_head_kv;
        let half = self.n_rot / 2;
        for k in &layout.keys {
            for row in state[k.clone()].chunks_exact_mut(layout.row) {
                for h in 0..self.n_head_kv {
                    let base = h * head;
                    for (i, &(cos, sin)) in table.iter().enumerate() {
                        let (a, b) = if self.neox {
                            (base + i, base + i + half)
                        } else {
                            (base + 2 * i, base + 2 * i + 1)
                        };
                        let x0 = get_f16(row, a);
                        let x1 = get_f16(row, b);
                        put_f16(row, a, x0 * cos - x1 * sin);
                        put_f16(row, b, x0 * sin + x1 * cos);
                    }
                }
            }
        }
        Ok(())
    }

    /// Where the positions and the key rows of `state` lie, checked
    /// against the whole layout.
    fn layout(&self, state: &[u8]) -> Result<Layout, ShiftError> {
        let mut r = Reader {
            bytes: state,
            at: 0,
        };
        if r.u32()? != STATE_MAGIC {
            return Err(ShiftError::Layout("not a sequence state"));
        }
        let _source = r.i32()?;
        if r.u32()? != 1 {
            return Err(ShiftError::Layout("not one KV stream"));
        }
        let cells = r.u32()? as usize;
        let mut positions = Vec::with_capacity(cells);
        for _ in 0..cells {
            positions.push(r.at);
            r.skip(4)?;
            if r.u32()? != 1 {
                return Err(ShiftError::Layout("a cell without exactly one sequence"));
            }
            r.skip(4)?;
        }
        let v_trans = r.u32()?;
        let n_layer = r.u32()? as usize;
        let (rot_k, rot_v) = (r.u32()?, r.u32()?);
        if v_trans != 0 || n_layer != self.n_layer || rot_k != 0 || rot_v != 0 {
            return Err(ShiftError::Layout(
                "transposed values, another layer count or a rotated cache",
            ));
        }
        let mut keys = Vec::with_capacity(n_layer);
        let mut row = None;
        for _ in 0..n_layer {
            let ty = r.i32()?;
            let size = usize::try_from(r.u64()?).map_err(|_| ShiftError::Short(r.at))?;
            let head_bytes = 2 * self.n_head_kv;
            if ty != GGML_TYPE_F16
                || size == 0
                || !size.is_multiple_of(head_bytes)
                || size / head_bytes < self.n_rot
                || row.is_some_and(|w| w != size)
            {
                return Err(ShiftError::Layout(
                    "keys not 16-bit rows of the model's heads",
                ));
            }
            row = Some(size);
            let len = size.checked_mul(cells).ok_or(ShiftError::Short(r.at))?;
            keys.push(r.at..r.at + len);
            r.skip(len)?;
        }
        for _ in 0..n_layer {
            let _ty = r.i32()?;
            let size = usize::try_from(r.u64()?).map_err(|_| ShiftError::Short(r.at))?;
            r.skip(size.checked_mul(cells).ok_or(ShiftError::Short(r.at))?)?;
        }
        if r.at != state.len() {
            return Err(ShiftError::Layout("bytes past the last layer's values"));
        }
        Ok(Layout {
            positions,
            keys,
            row: row.unwrap_or(0),
        })
    }
}

struct Layout {
    /// Byte offset of each cell's position.
    positions: Vec<usize>,
    /// Byte range of each layer's key rows.
    keys: Vec<std::ops::Range<usize>>,
    /// Bytes of one key row.
    row: usize,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], ShiftError> {
        let end = self.at.checked_add(N).ok_or(ShiftError::Short(self.at))?;
        let out = self
            .bytes
            .get(self.at..end)
            .and_then(|b| <[u8; N]>::try_from(b).ok())
            .ok_or(ShiftError::Short(self.at))?;
        self.at = end;
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32, ShiftError> {
        self.take().map(u32::from_ne_bytes)
    }
    fn i32(&mut self) -> Result<i32, ShiftError> {
        self.take().map(i32::from_ne_bytes)
    }
    fn u64(&mut self) -> Result<u64, ShiftError> {
        self.take().map(u64::from_ne_bytes)
    }
    fn skip(&mut self, n: usize) -> Result<(), ShiftError> {
        let end = self.at.checked_add(n).ok_or(ShiftError::Short(self.at))?;
        if end > self.bytes.len() {
            return Err(ShiftError::Short(self.at));
        }
        self.at = end;
        Ok(())
    }
}

fn read_i32(bytes: &[u8], at: usize) -> Result<i32, ShiftError> {
    Reader { bytes, at }.i32()
}

fn get_f16(row: &[u8], i: usize) -> f32 {
    f16::from_ne_bytes([row[2 * i], row[2 * i + 1]]).to_f32()
}

fn put_f16(row: &mut [u8], i: usize, x: f32) {
    row[2 * i..2 * i + 2].copy_from_slice(&f16::from_f32(x).to_ne_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state in llama.cpp's single-sequence layout: `cells` cells from
    /// position `pos0`, `layers` layers of keys `keys(layer, cell, dim)`
    /// and values, `heads` heads of `head` dimensions.
    fn state(
        cells: usize,
        pos0: i32,
        layers: usize,
        heads: usize,
        head: usize,
        keys: impl Fn(usize, usize, usize) -> f32,
    ) -> Vec<u8> {
        let mut s = Vec::new();
        s.extend(STATE_MAGIC.to_ne_bytes());
        s.extend(7i32.to_ne_bytes());
        s.extend(1u32.to_ne_bytes());
        s.extend((cells as u32).to_ne_bytes());
        for c in 0..cells {
            s.extend((pos0 + c as i32).to_ne_bytes());
            s.extend(1u32.to_ne_bytes());
            s.extend(7i32.to_ne_bytes());
        }
        for v in [0u32, layers as u32, 0, 0] {
            s.extend(v.to_ne_bytes());
        }
        let row = 2 * heads * head;
        for l in 0..layers {
            s.extend(GGML_TYPE_F16.to_ne_bytes());
            s.extend((row as u64).to_ne_bytes());
            for c in 0..cells {
                for d in 0..heads * head {
                    s.extend(f16::from_f32(keys(l, c, d)).to_ne_bytes());
                }
            }
        }
        for _ in 0..layers {
            s.extend(GGML_TYPE_F16.to_ne_bytes());
            s.extend((row as u64).to_ne_bytes());
            s.extend(std::iter::repeat_n(0x3cu8, row * cells));
        }
        s
    }

    fn key(s: &[u8], rope: &RopeShift, layer: usize, cell: usize, dim: usize) -> f32 {
        let layout = rope.layout(s).unwrap();
        let at = layout.keys[layer].start + cell * layout.row;
        get_f16(&s[at..at + layout.row], dim)
    }

    fn rope(neox: bool) -> RopeShift {
        RopeShift::new(neox, 8, 10_000.0, 2, 3).unwrap()
    }

    #[test]
    fn positions_move_and_keys_turn_by_the_shift() {
        let r = rope(false);
        let mut s = state(4, 10, 3, 2, 8, |l, c, d| {
            ((l + 1) as f32 * 0.1 + c as f32 * 0.01) * if d % 2 == 0 { 1.0 } else { -0.5 }
        });
        let before = s.clone();
        r.shift(&mut s, 5).unwrap();
        let layout = r.layout(&s).unwrap();
        let pos: Vec<i32> = layout
            .positions
            .iter()
            .map(|&a| read_i32(&s, a).unwrap())
            .collect();
        assert_eq!(pos, vec![15, 16, 17, 18]);
        // Pair 0 of head 1 turns by 5 radians; pair 1 by 5 · 10000^(−1/4).
        for (i, angle) in [(0usize, 5.0f32), (1, 5.0 * 10_000f32.powf(-0.25))] {
            let (a, b) = (8 + 2 * i, 8 + 2 * i + 1);
            let (x0, x1) = (key(&before, &r, 2, 3, a), key(&before, &r, 2, 3, b));
            let want0 = x0 * angle.cos() - x1 * angle.sin();
            let want1 = x0 * angle.sin() + x1 * angle.cos();
            assert!((key(&s, &r, 2, 3, a) - want0).abs() < 2e-3, "pair {i}");
            assert!((key(&s, &r, 2, 3, b) - want1).abs() < 2e-3, "pair {i}");
        }
        // The values are untouched.
        let values = r.layout(&s).unwrap().keys[2].end;
        assert_eq!(s[values..], before[values..]);
    }

    #[test]
    fn neox_pairs_lie_half_a_rotary_dimension_apart() {
        let r = rope(true);
        let mut s = state(1, 0, 3, 2, 8, |_, _, d| if d == 1 { 1.0 } else { 0.0 });
        r.shift(&mut s, 2).unwrap();
        // Dimension 1 pairs with dimension 5 (1 + 8/2) at pair index 1.
        let angle = 2.0 * 10_000f32.powf(-0.25);
        assert!((key(&s, &r, 0, 0, 1) - angle.cos()).abs() < 2e-3);
        assert!((key(&s, &r, 0, 0, 5) - angle.sin()).abs() < 2e-3);
        assert_eq!(key(&s, &r, 0, 0, 0), 0.0);
        assert_eq!(key(&s, &r, 0, 0, 2), 0.0);
    }

    #[test]
    fn there_and_back_gives_the_keys_back_within_half_precision() {
        let r = rope(false);
        let original = state(6, 100, 3, 2, 8, |l, c, d| {
            ((l * 31 + c * 7 + d) % 11) as f32 / 11.0 - 0.5
        });
        let mut s = original.clone();
        r.shift(&mut s, 37).unwrap();
        assert_ne!(s, original);
        r.shift(&mut s, -37).unwrap();
        for l in 0..3 {
            for c in 0..6 {
                for d in 0..16 {
                    let (a, b) = (key(&s, &r, l, c, d), key(&original, &r, l, c, d));
                    assert!(
                        (a - b).abs() < 4e-3,
                        "layer {l} cell {c} dim {d}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_layout_it_does_not_know_is_refused_and_left_as_it_was() {
        let r = rope(false);
        let good = state(2, 0, 3, 2, 8, |_, _, _| 0.25);
        // Not a sequence state, or two streams.
        for at in [0, 8] {
            let mut s = good.clone();
            s[at] ^= 3;
            assert!(matches!(r.shift(&mut s, 3), Err(ShiftError::Layout(_))));
            s[at] ^= 3;
            assert_eq!(s, good);
        }
        // Another layer count than the model's.
        let other = RopeShift::new(false, 8, 10_000.0, 2, 4).unwrap();
        let mut s = good.clone();
        assert!(other.shift(&mut s, 3).is_err());
        assert_eq!(s, good);
        // Cut short, or with bytes after the values.
        let mut s = good[..good.len() - 1].to_vec();
        assert!(matches!(r.shift(&mut s, 3), Err(ShiftError::Short(_))));
        let mut s = good.clone();
        s.push(0);
        assert!(r.shift(&mut s, 3).is_err());
        // A position pushed below zero.
        let mut s = good.clone();
        assert!(r.shift(&mut s, -1).is_err());
        assert_eq!(s, good);
        // Nonsense settings.
        assert!(RopeShift::new(false, 7, 10_000.0, 2, 3).is_none());
        assert!(RopeShift::new(false, 8, f32::NAN, 2, 3).is_none());
    }
}
