//! The production build's flags: the `compile_commands.json` entry of a file (CMake,
//! Bear, Ninja), its nvcc command line read into includes, defines, standard and
//! architectures. Nothing is run: the command is split like a POSIX shell would.

use std::path::{Path, PathBuf};

/// The flags of one compile command that a reproducer needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BuildFlags {
    /// `-I`/`--include-path`, then `-isystem` folders, absolute (relative ones are
    /// taken from the entry's `directory`).
    pub includes: Vec<String>,
    /// `-D`/`--define-macro`, as `NAME` or `NAME=VALUE`.
    pub defines: Vec<String>,
    /// `-std=`/`--std`.
    pub std: Option<String>,
    /// `-arch`/`--gpu-architecture`, and the `code=` of every `-gencode`.
    pub arches: Vec<String>,
    /// The remaining flags that shape code generation (`-O3`, `--expt-relaxed-constexpr`,
    /// `-Xcompiler …`), in order; output, dependency and input arguments are dropped.
    pub other: Vec<String>,
}

/// Why a compile database gives no flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbError {
    Json(String),
    NoEntry { file: String, entries: usize },
    NoCommand { file: String, commands: usize },
    Command(String),
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Json(e) => write!(f, "not a compile_commands.json: {e}"),
            DbError::NoEntry { file, entries } => {
                write!(f, "none of its {entries} entries compiles {file}")
            }
            DbError::NoCommand { file, commands: 0 } => {
                write!(f, "it shows no nvcc command (looking for {file})")
            }
            DbError::NoCommand { file, commands } => write!(
                f,
                "none of its {commands} nvcc commands names {file}, so which one built it is not guessed"
            ),
            DbError::Command(e) => write!(f, "its command line does not split: {e}"),
        }
    }
}

/// The flags the database `json` compiles `file` with (the first matching entry).
pub fn flags_for(json: &str, file: &Path) -> Result<BuildFlags, DbError> {
    let entries: Vec<serde_json::Value> =
        serde_json::from_str(json).map_err(|e| DbError::Json(e.to_string()))?;
    let wanted = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    for entry in &entries {
        let dir = PathBuf::from(entry["directory"].as_str().unwrap_or("."));
        let Some(listed) = entry["file"].as_str() else {
            continue;
        };
        let listed = dir.join(listed);
        let same = listed.canonicalize().unwrap_or(listed.clone()) == wanted
            || (!wanted.is_absolute() && listed.ends_with(&wanted));
        if !same {
            continue;
        }
        let args: Vec<String> = match (&entry["arguments"], entry["command"].as_str()) {
            (serde_json::Value::Array(a), _) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            (_, Some(c)) => split_command(c).map_err(DbError::Command)?,
            _ => continue,
        };
        return Ok(parse_nvcc(&args, &dir, &listed));
    }
    Err(DbError::NoEntry {
        file: file.display().to_string(),
        entries: entries.len(),
    })
}

/// The flags of the nvcc command a build log (a JIT system's, a `make VERBOSE=1`
/// transcript) shows compiling `file`: the log's lines (a trailing `\` joins the
/// next) are searched for a word that is `nvcc` (any folder before it); the words
/// after it are the command. The command that names `file` wins; failing that, the
/// only nvcc command in the log (a JIT often compiles a copy under another name).
/// Relative paths are taken from `directory`.
pub fn flags_from_log(log: &str, file: &Path, directory: &Path) -> Result<BuildFlags, DbError> {
    let joined = log.replace("\\\r\n", " ").replace("\\\n", " ");
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let mut commands: Vec<Vec<String>> = Vec::new();
    for line in joined.lines() {
        let Ok(words) = split_command(line) else {
            continue;
        };
        let Some(at) = words.iter().position(|w| {
            let base = w.rsplit('/').next().unwrap_or(w);
            base == "nvcc" || base == "nvcc.exe"
        }) else {
            continue;
        };
        commands.push(words[at..].to_vec());
    }
    let naming = |c: &&Vec<String>| {
        !name.is_empty() && c.iter().skip(1).any(|w| w.rsplit('/').next() == Some(name))
    };
    let chosen = match commands.iter().find(naming) {
        Some(c) => c,
        None if commands.len() == 1 => &commands[0],
        None => {
            return Err(DbError::NoCommand {
                file: file.display().to_string(),
                commands: commands.len(),
            });
        }
    };
    let input = chosen
        .iter()
        .skip(1)
        .find(|w| w.ends_with(".cu"))
        .map_or_else(|| file.to_path_buf(), PathBuf::from);
    Ok(parse_nvcc(chosen, directory, &input))
}

/// Splits a command line into words: whitespace separates, single quotes keep
/// everything, double quotes keep all but `\"`, `\\`, `\$` and `` \` ``, a backslash
/// outside quotes escapes the next character.
pub fn split_command(command: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => word.push(x),
                        None => return Err("an unclosed single quote".to_owned()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => word.push(x),
                            Some(x) => {
                                word.push('\\');
                                word.push(x);
                            }
                            None => return Err("a trailing backslash".to_owned()),
                        },
                        Some(x) => word.push(x),
                        None => return Err("an unclosed double quote".to_owned()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(x) => word.push(x),
                    None => return Err("a trailing backslash".to_owned()),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Reads an nvcc (or clang/gcc) argument list; `args[0]` is the compiler.
pub fn parse_nvcc(args: &[String], directory: &Path, input: &Path) -> BuildFlags {
    let mut f = BuildFlags::default();
    let absolute = |p: &str| {
        let p = Path::new(p);
        if p.is_absolute() {
            p.display().to_string()
        } else {
            directory.join(p).display().to_string()
        }
    };
    let input_name = input.file_name();
    let mut system = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_str();
        let next = args.get(i + 1).map(String::as_str);
        // (flag, value, words consumed)
        let take = |prefixes: &[&str]| -> Option<(String, usize)> {
            for p in prefixes {
                if a == *p {
                    return next.map(|v| (v.to_owned(), 2));
                }
                if let Some(v) = a.strip_prefix(p) {
                    let v = v.strip_prefix('=').unwrap_or(v);
                    if !v.is_empty() {
                        return Some((v.to_owned(), 1));
                    }
                }
            }
            None
        };
        if let Some((v, n)) = take(&["--include-path", "-I"]) {
            f.includes.push(absolute(&v));
            i += n;
        } else if let Some((v, n)) = take(&["--system-include", "-isystem"]) {
            system.push(absolute(&v));
            i += n;
        } else if let Some((v, n)) = take(&["--define-macro", "-D"]) {
            f.defines.push(v);
            i += n;
        } else if let Some((v, n)) = take(&["--std", "-std"]) {
            f.std = Some(v);
            i += n;
        } else if let Some((v, n)) = take(&["--gpu-architecture", "-arch"]) {
            f.arches.push(v);
            i += n;
        } else if let Some((v, n)) = take(&["--generate-code", "-gencode"]) {
            for part in v.split(',') {
                if let Some(code) = part.trim().strip_prefix("code=") {
                    let code = code.trim_matches(|c| c == '[' || c == ']' || c == '"');
                    f.arches.extend(code.split(',').map(str::to_owned));
                }
            }
            i += n;
        } else if matches!(
            a,
            "-o" | "--output-file" | "-MF" | "-MT" | "-MQ" | "-x" | "--x"
        ) || a.starts_with("--output-file=")
        {
            i += if a.contains('=') { 1 } else { 2 };
        } else if matches!(
            a,
            "-c" | "--compile" | "-MD" | "-MMD" | "-M" | "-MM" | "-MP"
        ) || Path::new(a).file_name() == input_name && !a.starts_with('-')
        {
            i += 1;
        } else {
            f.other.push(a.to_owned());
            i += 1;
        }
    }
    f.includes.extend(system);
    f.arches.dedup();
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split_command(r#"nvcc -DNAME="a b" '-I/x y' -DQ=\"q\" plain\ word"#).unwrap(),
            vec!["nvcc", "-DNAME=a b", "-I/x y", "-DQ=\"q\"", "plain word"]
        );
        assert!(split_command("nvcc 'open").is_err());
    }

    #[test]
    fn reads_the_flags_a_reproducer_needs() {
        let args: Vec<String> = [
            "cuda/bin/nvcc",
            "-Iinclude",
            "-I",
            "/abs",
            "-isystem",
            "third_party",
            "-DTORCH_EXT",
            "--define-macro",
            "V=2",
            "-std=c++17",
            "-O3",
            "-gencode",
            "arch=compute_90a,code=sm_90a",
            "--expt-relaxed-constexpr",
            "-x",
            "cu",
            "-c",
            "kernel.cu",
            "-o",
            "kernel.o",
            "-MD",
            "-MF",
            "kernel.d",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let f = parse_nvcc(&args, Path::new("/build"), Path::new("/src/kernel.cu"));
        assert_eq!(f.includes, ["/build/include", "/abs", "/build/third_party"]);
        assert_eq!(f.defines, ["TORCH_EXT", "V=2"]);
        assert_eq!(f.std.as_deref(), Some("c++17"));
        assert_eq!(f.arches, ["sm_90a"]);
        assert_eq!(f.other, ["-O3", "--expt-relaxed-constexpr"]);
    }

    #[test]
    fn reads_an_nvcc_command_out_of_a_build_log() {
        let log = "[jit] building gemm_kernel\n\
            2026-11-29 10:00:01 INFO Running: cuda/bin/nvcc -std=c++17 \\\n\
            -gencode arch=compute_90a,code=sm_90a -I/opt/src/include -DBM=128 -O3 \\\n\
            -c jit_1/gemm_kernel.cu -o jit_1/gemm_kernel.o\n\
            [jit] done\n";
        let f = flags_from_log(log, Path::new("kernels/gemm.cu"), Path::new("/work")).unwrap();
        assert_eq!(f.std.as_deref(), Some("c++17"));
        assert_eq!(f.arches, ["sm_90a"]);
        assert_eq!(f.includes, ["/opt/src/include"]);
        assert_eq!(f.defines, ["BM=128"]);
        assert_eq!(f.other, ["-O3"]);
        // Two commands and neither names the file: which one is not guessed.
        let two = format!("{log}nvcc -O2 -c other.cu\n");
        assert!(matches!(
            flags_from_log(&two, Path::new("kernels/gemm.cu"), Path::new("/")),
            Err(DbError::NoCommand { commands: 2, .. })
        ));
        // The one that names it wins.
        let f = flags_from_log(&two, Path::new("x/other.cu"), Path::new("/")).unwrap();
        assert_eq!(f.other, ["-O2"]);
        assert!(
            flags_from_log("make: nothing to do\n", Path::new("a.cu"), Path::new("/")).is_err()
        );
    }

    #[test]
    fn finds_the_files_entry() {
        let dir = std::env::temp_dir();
        let json = format!(
            r#"[{{"directory": "{0}", "file": "other.cu", "command": "nvcc -DX other.cu"}},
                {{"directory": "{0}", "file": "k.cu", "arguments": ["nvcc", "-DY=1", "-arch=sm_80", "k.cu"]}}]"#,
            dir.display()
        );
        let f = flags_for(&json, &dir.join("k.cu")).unwrap();
        assert_eq!(
            (f.defines, f.arches),
            (vec!["Y=1".to_owned()], vec!["sm_80".to_owned()])
        );
        assert!(matches!(
            flags_for(&json, Path::new("/nowhere/z.cu")),
            Err(DbError::NoEntry { entries: 2, .. })
        ));
        assert!(matches!(
            flags_for("{", Path::new("k.cu")),
            Err(DbError::Json(_))
        ));
    }
}
