//! SHA-256 of model files and the version tags derived from them.
//!
//! Hashing a 100 MB model takes a noticeable fraction of a second, so the
//! digest is cached next to the file as `<file>.sha256`, keyed on the file's
//! size and modification time; a stale or unreadable cache is recomputed.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of `path`, using (and refreshing) the `<file>.sha256`
/// cache next to it. A cache that cannot be written is not an error.
pub fn file_sha256(path: &Path) -> io::Result<String> {
    let meta = std::fs::metadata(path)?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let stamp = format!("{} {}", meta.len(), mtime);
    let cache = cache_path(path);
    if let Ok(text) = std::fs::read_to_string(&cache)
        && let Some((hex, rest)) = text.trim().split_once("  ")
        && rest == stamp
        && hex.len() == 64
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Ok(hex.to_owned());
    }
    let hex = sha256_hex(File::open(path)?)?;
    let part = cache.with_extension("sha256.part");
    if std::fs::write(&part, format!("{hex}  {stamp}\n")).is_ok() {
        let _ = std::fs::rename(&part, &cache);
    }
    Ok(hex)
}

/// `<file name>@<first 12 hex digits of its SHA-256>`, e.g.
/// `SmolLM2-135M-Instruct.Q4_1.gguf@0123456789ab`.
pub fn version_tag(path: &Path) -> io::Result<String> {
    let hex = file_sha256(path)?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(format!("{name}@{}", &hex[..12]))
}

/// Hex SHA-256 of everything `reader` yields.
pub(crate) fn sha256_hex(mut reader: impl Read) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(to_hex(&hasher.finalize()))
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

fn cache_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_known_input_and_caches_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.gguf");
        std::fs::write(&file, b"abc").unwrap();
        let want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(file_sha256(&file).unwrap(), want);
        assert!(dir.path().join("m.gguf.sha256").exists());
        assert_eq!(file_sha256(&file).unwrap(), want);
        assert_eq!(version_tag(&file).unwrap(), "m.gguf@ba7816bf8f01");
    }

    #[test]
    fn stale_cache_is_recomputed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.bin");
        std::fs::write(&file, b"abc").unwrap();
        std::fs::write(
            dir.path().join("m.bin.sha256"),
            format!("{}  1 1\n", "0".repeat(64)),
        )
        .unwrap();
        assert!(file_sha256(&file).unwrap().starts_with("ba7816bf"));
    }
}
