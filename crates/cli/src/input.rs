//! Reading source files with the checks every command shares.

use std::path::Path;

use crate::error::CliError;

/// Default largest file kwb reads (tree-sitter handles more, but a file this large
/// is almost always generated output or the wrong file).
pub const DEFAULT_MAX_BYTES: u64 = 32 * 1024 * 1024;

/// Reads a UTF-8 source file, rejecting directories, empty, binary, non-UTF-8 and
/// oversized files with a specific diagnostic.
pub fn read_source(path: &Path, max_bytes: u64) -> Result<String, CliError> {
    let unreadable = |source| CliError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if meta.is_dir() {
        return Err(CliError::Directory {
            path: path.to_owned(),
        });
    }
    if meta.len() > max_bytes {
        return Err(CliError::TooLarge {
            path: path.to_owned(),
            size: meta.len(),
            limit: max_bytes,
        });
    }
    let bytes = std::fs::read(path).map_err(unreadable)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(CliError::Empty {
            path: path.to_owned(),
        });
    }
    if let Some(offset) = bytes.iter().position(|&b| b == 0) {
        return Err(CliError::Binary {
            path: path.to_owned(),
            offset,
        });
    }
    String::from_utf8(bytes).map_err(|e| CliError::NotUtf8 {
        path: path.to_owned(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// Whether a path names a C/C++/CUDA source or header by its extension.
pub fn is_source(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("cu" | "cuh" | "h" | "hpp" | "hh" | "hxx" | "inl" | "cpp" | "cc" | "cxx" | "c")
    )
}

/// Source files under `dir`, sorted.
pub fn walk(dir: &Path) -> Result<Vec<std::path::PathBuf>, CliError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|source| CliError::Unreadable {
            path: d.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() && is_source(&path) => out.push(path),
                _ => {}
            }
        }
    }
    out.sort();
    Ok(out)
}
