//! The headers a reproducer includes from beside its source (`#include "helper.h"`),
//! copied into the reproducer's folder so that it builds on a machine that has only the
//! folder and the include roots (`KWB_INCLUDES`).
//!
//! Invariant: only files under the source's folder are copied, each under the same
//! relative path, found by following quoted includes from the reproducer (and from
//! each copied header, relative to it) to a fixed point; a path that leaves the folder
//! (`..`, absolute) is left to the include roots.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// At most this many headers, of at most this many bytes in all, are copied.
const MAX_FILES: usize = 256;
const MAX_BYTES: usize = 32 << 20;

/// The local headers `text` (a file in `folder`) reaches: relative path -> contents.
pub fn local_headers(folder: &Path, text: &str) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut pending: Vec<(PathBuf, String)> = vec![(PathBuf::new(), text.to_owned())];
    let mut bytes = 0;
    while let Some((dir, text)) = pending.pop() {
        for include in quoted_includes(&text) {
            let Some(relative) = normalized(&dir.join(include)) else {
                continue;
            };
            if out.contains_key(&relative) || out.len() >= MAX_FILES {
                continue;
            }
            let Ok(contents) = std::fs::read_to_string(folder.join(&relative)) else {
                continue;
            };
            bytes += contents.len();
            if bytes > MAX_BYTES {
                return out;
            }
            let parent = relative.parent().map(Path::to_path_buf).unwrap_or_default();
            pending.push((parent, contents.clone()));
            out.insert(relative, contents);
        }
    }
    out
}

/// The names of `#include "…"` lines.
fn quoted_includes(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix("include")?.trim_start();
        let rest = rest.strip_prefix('"')?;
        rest.split_once('"').map(|(name, _)| name)
    })
}

/// `path` without `.`, with `..` taken back; None when it leaves its root or is
/// absolute.
fn normalized(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_includes_beside_the_source_are_followed_and_nothing_outside() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("src/common")).unwrap();
        std::fs::write(d.join("src/helper.h"), "#include \"common/tiles.h\"\n").unwrap();
        std::fs::write(
            d.join("src/common/tiles.h"),
            "#include \"../helper.h\"\nint t;\n",
        )
        .unwrap();
        std::fs::write(d.join("outside.h"), "int o;\n").unwrap();
        let text = "#include <cute/tensor.hpp>\n#include \"helper.h\"\n  # include \"../outside.h\"\n#include \"missing.h\"\n";
        let found = local_headers(&d.join("src"), text);
        let names: Vec<String> = found.keys().map(|p| p.display().to_string()).collect();
        assert_eq!(names, ["common/tiles.h", "helper.h"]);
        assert_eq!(
            found[Path::new("common/tiles.h")],
            "#include \"../helper.h\"\nint t;\n"
        );
    }
}
