//! Writing output files so that none is ever half written: to a temporary file in the
//! same folder, then a rename over the destination.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically (temporary file in its folder, then rename).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut temp = tempfile::NamedTempFile::new_in(folder(path))?;
    temp.write_all(bytes)?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Writes several files all or none: each to a temporary file in its folder, and only
/// when every one is written (and no destination is a directory, which a rename cannot
/// replace) renamed into place. On an error, the file it concerns; no temporary file
/// is left.
pub fn write_all_atomically<P: AsRef<Path>, B: AsRef<[u8]>>(
    files: &[(P, B)],
) -> Result<(), (PathBuf, std::io::Error)> {
    let mut staged = Vec::with_capacity(files.len());
    for (path, bytes) in files {
        let path = path.as_ref();
        let failed = |e| (path.to_path_buf(), e);
        if path.is_dir() {
            return Err(failed(std::io::ErrorKind::IsADirectory.into()));
        }
        let mut temp = tempfile::NamedTempFile::new_in(folder(path)).map_err(failed)?;
        temp.write_all(bytes.as_ref()).map_err(failed)?;
        staged.push((path, temp));
    }
    for (path, temp) in staged {
        temp.persist(path)
            .map_err(|e| (path.to_path_buf(), e.error))?;
    }
    Ok(())
}

/// The folder a file is written in (`.` for a bare name).
fn folder(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Whether `input` and `output` name the same file (through links and `..`); the
/// paths themselves are compared when either does not exist yet.
pub fn same_file(input: &Path, output: &Path) -> bool {
    match (input.canonicalize(), output.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => input == output,
    }
}
