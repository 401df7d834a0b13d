//! Compiling `kwb mutate`'s mutants: each mutant's device code through nvcc
//! (`-cubin`), either the mutant file itself or, for a mutated header, the translation
//! unit that includes it with the mutant's folder first on the include path (an
//! overlay: the mutant sits at the header's path relative to its include root). A
//! mutant that does not compile is dropped with nvcc's first error; one whose SASS is
//! the original's is dropped as equivalent (the edit reaches no kernel the unit
//! compiles: an uninstantiated template, a branch the compiler removed), so a count of
//! kept mutants counts defects that are in the machine code. A mutant of host code (a
//! TMA map's encode) leaves the device code as it was: it is compiled whole (`-c`, host
//! and device) and kept when that succeeds, with no SASS comparison.
//!
//! Invariants: nothing is written outside the mutants' own folders (each cubin beside
//! its mutant, removed once read); the original is compiled once, from where it is.

use std::path::{Path, PathBuf};

use kwb_toolchain::{CompileFlags, Toolchain};
use rayon::prelude::*;

/// How the mutants are compiled.
pub struct Build {
    pub toolchain: Toolchain,
    /// The flags every compile shares (the original's folder and `-I` included).
    pub flags: CompileFlags,
    /// The translation unit compiled for a mutated header; `None`: the mutant file.
    pub unit: Option<PathBuf>,
    /// The original file (the mutants are copies of it).
    pub original: PathBuf,
}

/// One mutant to compile: its file and the folder that overlays the original.
pub struct Candidate {
    pub file: PathBuf,
    pub overlay: PathBuf,
    /// The edit is in host code: compile host and device, compare no SASS.
    pub host: bool,
}

/// Why the original itself cannot be compiled: nothing can be said of its mutants.
#[derive(Debug)]
pub struct OriginalFails(pub String);

impl Build {
    /// The source nvcc compiles for `candidate`, and its flags.
    fn source_and_flags<'c>(&'c self, candidate: &'c Candidate) -> (&'c Path, CompileFlags) {
        match &self.unit {
            Some(unit) => {
                let mut flags = self.flags.clone();
                flags.includes.insert(0, candidate.overlay.clone());
                (unit, flags)
            }
            None => (&candidate.file, self.flags.clone()),
        }
    }

    /// The SASS instructions of `source` compiled with `flags` into `cubin`.
    fn sass(&self, source: &Path, flags: &CompileFlags, cubin: &Path) -> Result<String, String> {
        let compiled = kwb_toolchain::nvcc::compile_cubin(&self.toolchain, source, flags, cubin)
            .and_then(|()| kwb_toolchain::nvcc::sass(&self.toolchain, cubin));
        let _ = std::fs::remove_file(cubin);
        compiled
            .map(|s| kwb_toolchain::nvcc::sass_instructions(&s))
            .map_err(|e| first_error(&e.to_string()))
    }

    /// For each candidate, why it is dropped (`None`: kept). The original is compiled
    /// first, into `scratch`; an original that does not compile is an error.
    pub fn check(
        &self,
        candidates: &[Candidate],
        scratch: &Path,
    ) -> Result<Vec<Option<String>>, OriginalFails> {
        let source = self.unit.as_deref().unwrap_or(&self.original);
        let original = self
            .sass(source, &self.flags, &scratch.join("original.cubin"))
            .map_err(OriginalFails)?;
        Ok(candidates
            .par_iter()
            .map(|c| {
                let (source, flags) = self.source_and_flags(c);
                if c.host {
                    let object = c.file.with_extension("o");
                    let compiled = kwb_toolchain::nvcc::compile_object(
                        &self.toolchain,
                        source,
                        &flags,
                        &object,
                    );
                    let _ = std::fs::remove_file(&object);
                    return compiled.err().map(|e| first_error(&e.to_string()));
                }
                let cubin = c.file.with_extension("cubin");
                match self.sass(source, &flags, &cubin) {
                    Err(why) => Some(why),
                    Ok(sass) if sass == original => Some(
                        "equivalent: its SASS is the original's (the edit reaches no kernel \
                         this build compiles)"
                            .to_owned(),
                    ),
                    Ok(_) => None,
                }
            })
            .collect())
    }
}

/// The line of nvcc's message that says what is wrong.
fn first_error(message: &str) -> String {
    message
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or("nvcc failed")
        .trim()
        .to_owned()
}

/// A header kwb cannot compile alone: its mutants need the unit that includes it.
pub fn is_header(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "h" | "hpp" | "cuh" | "hh" | "hxx" | "inl"))
}
