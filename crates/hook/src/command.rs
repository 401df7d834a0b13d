//! The nvcc command line as kwb-nvcc needs it: the sources it compiles, the include
//! folders, what it is asked to do, and the rewrite that compiles an instrumented
//! copy instead. Response files (`@FILE`) and `--options-file`/`-optf` are expanded by
//! the caller (it reads files) through [`NvccCommand::expand`].

use std::path::{Path, PathBuf};

/// What the command does, as far as the hook is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Compiles (and maybe links) sources: the hook's case.
    Compile,
    /// Writes dependencies only (`-M`, `-MM`, `--generate-dependencies`,
    /// `--generate-nonsystem-dependencies`): passed through unchanged.
    Dependencies,
    /// Preprocesses only (`-E`): passed through unchanged.
    Preprocess,
    /// Asks nvcc about itself (`--version`, `--help`, `--list-gpu-arch`…) or gives no
    /// source: passed through unchanged.
    Other,
}

/// One nvcc command line, its response files already expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvccCommand {
    pub args: Vec<String>,
    /// Index into `args` of each source compiled as CUDA (`.cu`, or any source after
    /// `-x cu`).
    pub cuda_sources: Vec<usize>,
    /// `-I`/`--include-path`, `-isystem`/`--system-include` folders, in order.
    pub includes: Vec<String>,
    /// `-MF`/`--dependency-output` file when dependencies are written beside the
    /// compile (`-MD`, `-MMD`, `--generate-dependencies-with-compile`,
    /// `--generate-nonsystem-dependencies-with-compile`).
    pub dependency_file: Option<String>,
    pub writes_dependencies: bool,
    /// `-o`/`--output-file`.
    pub output: Option<String>,
    pub mode: Mode,
}

/// Options whose value is the next argument when not joined to them.
const VALUED: &[&str] = &[
    "-o",
    "--output-file",
    "-I",
    "--include-path",
    "-isystem",
    "--system-include",
    "-D",
    "--define-macro",
    "-U",
    "--undefine-macro",
    "-include",
    "--pre-include",
    "-x",
    "--x",
    "-arch",
    "--gpu-architecture",
    "-code",
    "--gpu-code",
    "-gencode",
    "--generate-code",
    "-ccbin",
    "--compiler-bindir",
    "-Xcompiler",
    "--compiler-options",
    "-Xptxas",
    "--ptxas-options",
    "-Xlinker",
    "--linker-options",
    "-Xnvlink",
    "--nvlink-options",
    "-Xarchive",
    "--archive-options",
    "-L",
    "--library-path",
    "-l",
    "--library",
    "-odir",
    "--output-directory",
    "-MF",
    "--dependency-output",
    "-MT",
    "--dependency-target-name",
    "-MQ",
    "-std",
    "--std",
    "-maxrregcount",
    "--maxrregcount",
    "-t",
    "--threads",
    "-rdc",
    "--relocatable-device-code",
    "-diag-suppress",
    "--diag-suppress",
    "-diag-error",
    "--diag-error",
    "-diag-warn",
    "--diag-warn",
    "--default-stream",
    "-default-stream",
    "-time",
    "--time",
    "-split-compile",
    "--split-compile",
    "-optf",
    "--options-file",
    "-keep-dir",
    "--keep-dir",
    "-cudart",
    "--cudart",
    "-ftz",
    "--ftz",
    "-prec-div",
    "--prec-div",
    "-prec-sqrt",
    "--prec-sqrt",
    "-fmad",
    "--fmad",
];

const SOURCES: &[&str] = &["cu", "cpp", "cc", "cxx", "c", "cup", "ii", "i"];

impl NvccCommand {
    /// Expands `@FILE` and `--options-file`/`-optf FILE[,FILE]` with `read` (which
    /// returns a file's words), recursively, at most 16 deep.
    pub fn expand(
        args: &[String],
        read: &mut dyn FnMut(&str) -> Result<Vec<String>, String>,
    ) -> Result<Vec<String>, String> {
        fn go(
            args: &[String],
            read: &mut dyn FnMut(&str) -> Result<Vec<String>, String>,
            depth: usize,
            out: &mut Vec<String>,
        ) -> Result<(), String> {
            if depth > 16 {
                return Err("response files nest more than 16 deep".to_owned());
            }
            let mut i = 0;
            while i < args.len() {
                let a = &args[i];
                let files: Option<Vec<String>> = if let Some(f) = a.strip_prefix('@') {
                    Some(vec![f.to_owned()])
                } else if a == "--options-file" || a == "-optf" {
                    i += 1;
                    let v = args.get(i).ok_or_else(|| format!("`{a}` needs a file"))?;
                    Some(v.split(',').map(str::to_owned).collect())
                } else {
                    a.strip_prefix("--options-file=")
                        .map(|v| v.split(',').map(str::to_owned).collect())
                };
                match files {
                    Some(files) => {
                        for f in files {
                            let words = read(&f)?;
                            go(&words, read, depth + 1, out)?;
                        }
                    }
                    None => out.push(a.clone()),
                }
                i += 1;
            }
            Ok(())
        }
        let mut out = Vec::new();
        go(args, read, 0, &mut out)?;
        Ok(out)
    }

    /// Reads an expanded argument list (without the compiler itself).
    pub fn parse(args: Vec<String>) -> NvccCommand {
        let mut c = NvccCommand {
            args,
            cuda_sources: Vec::new(),
            includes: Vec::new(),
            dependency_file: None,
            writes_dependencies: false,
            output: None,
            mode: Mode::Compile,
        };
        let mut language_cu = false;
        let mut dependencies_only = false;
        let mut preprocess = false;
        let mut other = false;
        let mut i = 0;
        while i < c.args.len() {
            let a = c.args[i].clone();
            // (option, value) for `-Ifoo`, `-I foo`, `--include-path=foo`.
            let (option, value, consumed) = split_option(&a, c.args.get(i + 1));
            match option.as_str() {
                "-I" | "--include-path" | "-isystem" | "--system-include" => {
                    c.includes.extend(value.clone());
                }
                "-o" | "--output-file" => c.output = value.clone(),
                "-MF" | "--dependency-output" => c.dependency_file = value.clone(),
                "-x" | "--x" => language_cu = value.as_deref() == Some("cu"),
                "-M" | "-MM" | "--generate-dependencies" | "--generate-nonsystem-dependencies" => {
                    dependencies_only = true;
                }
                "-MD"
                | "-MMD"
                | "--generate-dependencies-with-compile"
                | "--generate-nonsystem-dependencies-with-compile" => c.writes_dependencies = true,
                "-E" | "--preprocess" => preprocess = true,
                "--version" | "-V" | "--help" | "-h" | "--list-gpu-arch" | "--list-gpu-code"
                | "-dryrun" | "--dryrun" => other = true,
                _ => {}
            }
            if !a.starts_with('-') {
                let ext = Path::new(&a)
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or("");
                if ext == "cu" || (language_cu && SOURCES.contains(&ext)) {
                    c.cuda_sources.push(i);
                }
            }
            i += consumed;
        }
        c.mode = if other {
            Mode::Other
        } else if dependencies_only {
            Mode::Dependencies
        } else if preprocess {
            Mode::Preprocess
        } else if c.cuda_sources.is_empty() {
            Mode::Other
        } else {
            Mode::Compile
        };
        c
    }

    /// The arguments that compile `replacements` (source index → instrumented copy)
    /// instead of the originals: the overlay folder first on the include path, then
    /// each original's own folder (where its quoted includes were found), and
    /// `-DKWB_TRACE`.
    pub fn rewritten(
        &self,
        replacements: &[(usize, PathBuf)],
        overlay: Option<&Path>,
    ) -> Vec<String> {
        self.with_copies(replacements, overlay, &["-DKWB_TRACE"])
    }

    /// The arguments that compile `replacements` instead of the originals, as
    /// [`NvccCommand::rewritten`] but with the options `defines` (`-DNAME`, and any
    /// other option the compile adds, such as ptxas's report) in place of
    /// `-DKWB_TRACE`: an in-situ build's rewritten launches need no trace, a floored
    /// trace build adds its register count.
    pub fn with_copies(
        &self,
        replacements: &[(usize, PathBuf)],
        overlay: Option<&Path>,
        defines: &[&str],
    ) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(o) = overlay {
            out.push(format!("-I{}", o.display()));
        }
        for (i, _) in replacements {
            let dir = Path::new(&self.args[*i])
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let flag = format!("-I{}", dir.display());
            if !out.contains(&flag) {
                out.push(flag);
            }
        }
        out.extend(defines.iter().map(|d| (*d).to_owned()));
        for (i, a) in self.args.iter().enumerate() {
            match replacements.iter().find(|(at, _)| *at == i) {
                Some((_, copy)) => out.push(copy.display().to_string()),
                None => out.push(a.clone()),
            }
        }
        out
    }
}

impl NvccCommand {
    /// The arguments of a side compile of this command's one CUDA source into the
    /// object `object` with ptxas's verbose report, and no dependency file: what
    /// kwb-nvcc reads the original kernels' registers and spills from. `None` where
    /// the command compiles more than one file or does not compile.
    pub fn for_resources(&self, object: &str) -> Option<Vec<String>> {
        if self.mode != Mode::Compile || self.cuda_sources.len() != 1 {
            return None;
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.args.len() {
            let a = &self.args[i];
            let (option, _, consumed) = split_option(a, self.args.get(i + 1));
            match option.as_str() {
                // Where the output goes, and dependency files: the side compile's own.
                "-o"
                | "--output-file"
                | "-MF"
                | "--dependency-output"
                | "-MT"
                | "--dependency-target-name"
                | "-MQ"
                | "-odir"
                | "--output-directory" => {}
                "-MD"
                | "-MMD"
                | "--generate-dependencies-with-compile"
                | "--generate-nonsystem-dependencies-with-compile"
                | "-c"
                | "--compile"
                | "-cubin"
                | "--cubin"
                | "-fatbin"
                | "--fatbin"
                | "-ptx"
                | "--ptx"
                | "-lib"
                | "--lib"
                | "-link"
                | "--link" => {}
                "-dc" | "--device-c" => out.push("-rdc=true".to_owned()),
                // Another file (a source or object to link): not this compile's.
                "" if !self.cuda_sources.contains(&i) => return None,
                _ => out.extend(self.args[i..i + consumed].iter().cloned()),
            }
            i += consumed;
        }
        out.extend(["-c", "-Xptxas", "-v", "-o", object].map(str::to_owned));
        Some(out)
    }

    /// Whether the command asks ptxas for its verbose report itself.
    pub fn ptxas_verbose(&self) -> bool {
        self.args.windows(2).any(|w| {
            matches!(w[0].as_str(), "-Xptxas" | "--ptxas-options")
                && w[1].split(',').any(|o| o == "-v" || o == "--verbose")
        }) || self.args.iter().any(|a| {
            a.strip_prefix("-Xptxas=")
                .or_else(|| a.strip_prefix("--ptxas-options="))
                .is_some_and(|v| v.split(',').any(|o| o == "-v" || o == "--verbose"))
                || a == "--resource-usage"
                || a == "-res-usage"
        })
    }
}

/// `(option, value, arguments consumed)` of the argument `a` followed by `next`.
fn split_option(a: &str, next: Option<&String>) -> (String, Option<String>, usize) {
    if !a.starts_with('-') {
        return (String::new(), None, 1);
    }
    if let Some((o, v)) = a.split_once('=')
        && o.starts_with("--")
    {
        return (o.to_owned(), Some(v.to_owned()), 1);
    }
    if let Some((o, v)) = a.split_once('=')
        && VALUED.contains(&o)
    {
        return (o.to_owned(), Some(v.to_owned()), 1);
    }
    if VALUED.contains(&a) {
        return (
            a.to_owned(),
            next.cloned(),
            if next.is_some() { 2 } else { 1 },
        );
    }
    // Joined short forms: -Ifoo, -DX=1, -isystemfoo.
    for short in ["-isystem", "-I", "-D", "-U", "-L", "-l", "-o"] {
        if let Some(v) = a.strip_prefix(short)
            && !v.is_empty()
            && !VALUED.contains(&a)
        {
            return (short.to_owned(), Some(v.to_owned()), 1);
        }
    }
    (a.to_owned(), None, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn reads_sources_includes_and_outputs() {
        let c = NvccCommand::parse(words(
            "-std=c++17 -O3 -I inc -Iinc2 --include-path=inc3 -isystem sys -DX=1 -D Y \
             -gencode arch=compute_90a,code=sm_90a -Xcompiler -fPIC -MD -MF k.d -c k.cu -o k.o helper.cpp",
        ));
        assert_eq!(c.mode, Mode::Compile);
        assert_eq!(c.args[c.cuda_sources[0]], "k.cu");
        assert_eq!(c.cuda_sources.len(), 1, "a .cpp is host code unless -x cu");
        assert_eq!(c.includes, ["inc", "inc2", "inc3", "sys"]);
        assert_eq!(c.output.as_deref(), Some("k.o"));
        assert_eq!(c.dependency_file.as_deref(), Some("k.d"));
        assert!(c.writes_dependencies);
        let x = NvccCommand::parse(words("-x cu -c kernel.cpp"));
        assert_eq!(x.cuda_sources, [3]);
        // The value of a valued option is not a source.
        let o = NvccCommand::parse(words("-c a.cu -o b.cu"));
        assert_eq!(o.cuda_sources, [1]);
    }

    #[test]
    fn a_side_compile_for_resources_keeps_the_flags_and_writes_its_own_object() {
        let c = NvccCommand::parse(words(
            "-std=c++17 -O3 -I inc -gencode arch=compute_90a,code=sm_90a -MD -MF k.d -c k.cu -o k.o",
        ));
        assert_eq!(
            c.for_resources("side.o").unwrap().join(" "),
            "-std=c++17 -O3 -I inc -gencode arch=compute_90a,code=sm_90a k.cu -c -Xptxas -v -o side.o"
        );
        let dc = NvccCommand::parse(words("-dc -arch=sm_80 k.cu -o k.o"));
        assert_eq!(
            dc.for_resources("s.o").unwrap().join(" "),
            "-rdc=true -arch=sm_80 k.cu -c -Xptxas -v -o s.o"
        );
        // A compile that also links another file, or two CUDA sources: no side compile.
        assert!(
            NvccCommand::parse(words("k.cu main.o -o prog"))
                .for_resources("s.o")
                .is_none()
        );
        assert!(
            NvccCommand::parse(words("-c a.cu b.cu"))
                .for_resources("s.o")
                .is_none()
        );
        assert!(!c.ptxas_verbose());
        assert!(NvccCommand::parse(words("-Xptxas -v -c k.cu")).ptxas_verbose());
        assert!(NvccCommand::parse(words("--ptxas-options=-O3,-v -c k.cu")).ptxas_verbose());
    }

    #[test]
    fn modes_that_do_not_compile_pass_through() {
        assert_eq!(
            NvccCommand::parse(words("-M k.cu")).mode,
            Mode::Dependencies
        );
        assert_eq!(NvccCommand::parse(words("-E k.cu")).mode, Mode::Preprocess);
        assert_eq!(NvccCommand::parse(words("--version")).mode, Mode::Other);
        assert_eq!(
            NvccCommand::parse(words("a.o b.o -o app")).mode,
            Mode::Other
        );
    }

    #[test]
    fn response_files_expand_and_the_rewrite_keeps_everything_else() {
        let mut read = |f: &str| match f {
            "r.rsp" => Ok(words("-I inc --options-file more.txt")),
            "more.txt" => Ok(words("-DZ -c k.cu")),
            other => Err(format!("{other}: missing")),
        };
        let args = NvccCommand::expand(&words("-O3 @r.rsp -o k.o"), &mut read).unwrap();
        assert_eq!(args, words("-O3 -I inc -DZ -c k.cu -o k.o"));
        assert!(NvccCommand::expand(&words("@nope"), &mut read).is_err());
        let c = NvccCommand::parse(args);
        let new = c.rewritten(
            &[(c.cuda_sources[0], PathBuf::from("/cache/x/k.cu"))],
            Some(Path::new("/cache/x/overlay")),
        );
        assert_eq!(
            new,
            words("-I/cache/x/overlay -I. -DKWB_TRACE -O3 -I inc -DZ -c /cache/x/k.cu -o k.o")
        );
    }
}
