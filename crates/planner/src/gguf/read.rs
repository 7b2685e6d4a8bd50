//! Parsing a GGUF header from bytes, every count and length checked
//! against a cap and against the bytes left before anything is allocated.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::{GgufInfo, MetaValue, TensorInfo, block_size};
use crate::error::PlannerError;

const MAGIC: &[u8; 4] = b"GGUF";
const MAX_KV: u64 = 1 << 20;
const MAX_TENSORS: u64 = 1 << 20;
const MAX_STRING: u64 = 16 << 20;
const MAX_ARRAY: u64 = 1 << 26;
const MAX_DIMS: u32 = 8;
/// Strings longer than this are kept as their length only (chat templates,
/// merges); nothing the planner needs is that long.
const KEEP_STRING: u64 = 4096;

/// Reads the header of a GGUF file.
pub fn read_file(path: &Path) -> Result<GgufInfo, PlannerError> {
    let io = |source| PlannerError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    read(BufReader::new(file), len, &path.display().to_string())
}

/// Reads a GGUF header from any reader of a stream of `len` bytes.
pub fn read<R: Read>(reader: R, len: u64, origin: &str) -> Result<GgufInfo, PlannerError> {
    let mut c = Cursor {
        r: reader,
        pos: 0,
        len,
        origin,
    };
    let mut magic = [0u8; 4];
    c.fill(&mut magic)?;
    if &magic != MAGIC {
        return Err(c.err(format!("not a gguf file (magic {magic:02x?})")));
    }
    let version = c.u32()?;
    if !(2..=3).contains(&version) {
        return Err(c.err(format!(
            "unsupported gguf version {version} (2 or 3 supported)"
        )));
    }
    let n_tensors = c.u64()?;
    let n_kv = c.u64()?;
    if n_tensors > MAX_TENSORS || n_kv > MAX_KV {
        return Err(c.err(format!(
            "{n_tensors} tensors / {n_kv} metadata keys is more than the {MAX_TENSORS} / {MAX_KV} allowed"
        )));
    }
    let mut metadata = BTreeMap::new();
    for _ in 0..n_kv {
        let key = c.string()?;
        let ty = c.u32()?;
        let value = c.value(ty, true)?;
        metadata.insert(key, value);
    }
    // Each tensor info is at least 24 bytes: never reserve beyond the file.
    let mut tensors =
        Vec::with_capacity(usize::try_from(n_tensors.min(c.remaining() / 24)).unwrap_or(0));
    for _ in 0..n_tensors {
        let name = c.string()?;
        let n_dims = c.u32()?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(c.err(format!(
                "tensor `{name}` has {n_dims} dimensions (1 to {MAX_DIMS})"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        let mut elems: u128 = 1;
        for _ in 0..n_dims {
            let d = c.u64()?;
            elems = elems.saturating_mul(u128::from(d));
            dims.push(d);
        }
        if elems > 1 << 48 {
            return Err(c.err(format!("tensor `{name}` claims {elems} elements")));
        }
        let ggml_type = c.u32()?;
        if block_size(ggml_type).is_none() {
            return Err(c.err(format!("tensor `{name}` has unknown ggml type {ggml_type}")));
        }
        let _offset = c.u64()?;
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
        });
    }
    Ok(GgufInfo {
        origin: origin.to_string(),
        version,
        metadata,
        tensors,
    })
}

struct Cursor<'a, R> {
    r: R,
    pos: u64,
    len: u64,
    origin: &'a str,
}

impl<R: Read> Cursor<'_, R> {
    fn err(&self, message: String) -> PlannerError {
        PlannerError::Gguf {
            origin: self.origin.to_string(),
            offset: self.pos,
            message,
        }
    }

    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), PlannerError> {
        if buf.len() as u64 > self.remaining() {
            return Err(self.err(format!(
                "truncated: need {} bytes, {} left",
                buf.len(),
                self.remaining()
            )));
        }
        self.r
            .read_exact(buf)
            .map_err(|e| self.err(format!("read failed: {e}")))?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn skip(&mut self, n: u64) -> Result<(), PlannerError> {
        if n > self.remaining() {
            return Err(self.err(format!(
                "truncated: need {n} bytes, {} left",
                self.remaining()
            )));
        }
        let copied = std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink())
            .map_err(|e| self.err(format!("read failed: {e}")))?;
        if copied != n {
            return Err(self.err("truncated while skipping".into()));
        }
        self.pos += n;
        Ok(())
    }

    fn u8(&mut self) -> Result<u8, PlannerError> {
        let mut b = [0u8; 1];
        self.fill(&mut b)?;
        Ok(b[0])
    }

    fn u16(&mut self) -> Result<u16, PlannerError> {
        let mut b = [0u8; 2];
        self.fill(&mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    fn u32(&mut self) -> Result<u32, PlannerError> {
        let mut b = [0u8; 4];
        self.fill(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, PlannerError> {
        let mut b = [0u8; 8];
        self.fill(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn string_len(&mut self) -> Result<u64, PlannerError> {
        let n = self.u64()?;
        if n > MAX_STRING || n > self.remaining() {
            return Err(self.err(format!(
                "string of {n} bytes (limit {MAX_STRING}, {} left in file)",
                self.remaining()
            )));
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String, PlannerError> {
        let n = self.string_len()?;
        let mut buf = vec![0u8; n as usize];
        self.fill(&mut buf)?;
        String::from_utf8(buf).map_err(|_| self.err("string is not utf-8".into()))
    }

    fn value(&mut self, ty: u32, top: bool) -> Result<MetaValue, PlannerError> {
        Ok(match ty {
            0 => MetaValue::Uint(u64::from(self.u8()?)),
            1 => MetaValue::Int(i64::from(self.u8()? as i8)),
            2 => MetaValue::Uint(u64::from(self.u16()?)),
            3 => MetaValue::Int(i64::from(self.u16()? as i16)),
            4 => MetaValue::Uint(u64::from(self.u32()?)),
            5 => MetaValue::Int(i64::from(self.u32()? as i32)),
            6 => MetaValue::Float(f64::from(f32::from_bits(self.u32()?))),
            7 => MetaValue::Bool(self.u8()? != 0),
            8 => {
                let n = self.string_len()?;
                if n <= KEEP_STRING {
                    let mut buf = vec![0u8; n as usize];
                    self.fill(&mut buf)?;
                    MetaValue::Str(String::from_utf8_lossy(&buf).into_owned())
                } else {
                    self.skip(n)?;
                    MetaValue::LongStr(n)
                }
            }
            9 if top => {
                let elem_type = self.u32()?;
                let len = self.u64()?;
                if elem_type == 9 {
                    return Err(self.err("nested arrays are not supported".into()));
                }
                if len > MAX_ARRAY || len > self.remaining() {
                    return Err(self.err(format!(
                        "array of {len} elements (limit {MAX_ARRAY}, {} bytes left)",
                        self.remaining()
                    )));
                }
                match fixed_size(elem_type) {
                    Some(sz) => self.skip(len.saturating_mul(sz))?,
                    None if elem_type == 8 => {
                        for _ in 0..len {
                            let n = self.string_len()?;
                            self.skip(n)?;
                        }
                    }
                    None => return Err(self.err(format!("unknown array element type {elem_type}"))),
                }
                MetaValue::Array { elem_type, len }
            }
            9 => return Err(self.err("nested arrays are not supported".into())),
            10 => MetaValue::Uint(self.u64()?),
            11 => MetaValue::Int(self.u64()? as i64),
            12 => MetaValue::Float(f64::from_bits(self.u64()?)),
            other => return Err(self.err(format!("unknown metadata value type {other}"))),
        })
    }
}

fn fixed_size(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}
