//! Writing output files so that none is ever half written: to a temporary file in the
//! same folder, then a rename over the destination.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically (temporary file in its folder, then rename).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(bytes)?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Whether `input` and `output` name the same file (through links and `..`); the
/// paths themselves are compared when either does not exist yet.
pub fn same_file(input: &Path, output: &Path) -> bool {
    match (input.canonicalize(), output.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => input == output,
    }
}
