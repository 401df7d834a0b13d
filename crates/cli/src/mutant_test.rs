//! `kwb mutate --test CMD`: the user's own test command run once per mutant, in a
//! copy of their tree with the mutant in place of the original file, and the
//! survivors (mutants the test passes) reported per stage.
//!
//! The tree is copied once into a temporary folder (without `.git` and without the
//! mutants' own folder); before each run the mutated file's copy is overwritten with
//! the mutant, and after it restored. CMD runs through `sh -c` in the copy of the
//! current folder (the copy's root when the current folder is outside the tree), in
//! its own process group, so a timeout ends it and every process it started. It sees
//! `KWB_MUTANT` (the id; `0` for the run on the original), `KWB_MUTANT_STAGE`,
//! `KWB_MUTANT_FILE` (the mutated file in the copy) and `KWB_TREE` (the copy's root).
//! Its output goes to a log per run in the mutant's folder.
//!
//! Invariants: the user's tree is only read; a run on the original comes first, and a
//! test that fails on the original is refused (every mutant would read as killed).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

/// How one run of the test ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// The test passed: the defect went unnoticed.
    Survived { seconds: f64 },
    /// The test failed (nonzero exit or a signal).
    Killed { seconds: f64, exit: Option<i32> },
    /// The test did not end within the limit and was stopped: counted as killed.
    Timeout { seconds: f64 },
}

impl Outcome {
    pub fn survived(&self) -> bool {
        matches!(self, Outcome::Survived { .. })
    }

    pub fn word(&self) -> String {
        match self {
            Outcome::Survived { .. } => "SURVIVED".to_owned(),
            Outcome::Killed { exit: Some(c), .. } => format!("killed (exit {c})"),
            Outcome::Killed { exit: None, .. } => "killed (signal)".to_owned(),
            Outcome::Timeout { seconds } => format!("killed (timeout after {seconds:.0} s)"),
        }
    }

    pub fn seconds(&self) -> f64 {
        match self {
            Outcome::Survived { seconds }
            | Outcome::Killed { seconds, .. }
            | Outcome::Timeout { seconds } => *seconds,
        }
    }
}

/// A copy of the user's tree that the test runs in.
pub struct Sandbox {
    /// Keeps the copy alive; removed on drop.
    _temp: tempfile::TempDir,
    root: PathBuf,
    /// The mutated file's path in the copy, and the original text to restore.
    target: PathBuf,
    original: String,
    /// Where CMD runs.
    cwd: PathBuf,
}

/// What went wrong setting up or running the test.
#[derive(Debug)]
pub enum TestError {
    /// The file is not inside the tree.
    Outside {
        file: PathBuf,
        tree: PathBuf,
    },
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for TestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TestError::Outside { file, tree } => write!(
                f,
                "{} is not inside the tree {} that --test copies; give --tree a folder that holds it",
                file.display(),
                tree.display()
            ),
            TestError::Io(path, e) => write!(f, "{}: {e}", path.display()),
        }
    }
}

impl Sandbox {
    /// Copies `tree` (without `.git` and `skip`) and finds `file` in the copy.
    pub fn new(tree: &Path, file: &Path, skip: &Path, original: &str) -> Result<Self, TestError> {
        let absolute = |p: &Path| std::path::absolute(p).map_err(|e| TestError::Io(p.into(), e));
        let (tree, file, skip) = (absolute(tree)?, absolute(file)?, absolute(skip)?);
        let relative = file
            .strip_prefix(&tree)
            .map_err(|_| TestError::Outside {
                file: file.clone(),
                tree: tree.clone(),
            })?
            .to_path_buf();
        let temp = tempfile::Builder::new()
            .prefix("kwb-mutate-")
            .tempdir()
            .map_err(|e| TestError::Io(std::env::temp_dir(), e))?;
        let root = temp.path().join("tree");
        copy_tree(&tree, &root, &skip)?;
        let here = std::env::current_dir().ok();
        let cwd = here
            .and_then(|h| h.strip_prefix(&tree).ok().map(|r| root.join(r)))
            .filter(|c| c.is_dir())
            .unwrap_or_else(|| root.clone());
        Ok(Sandbox {
            _temp: temp,
            target: root.join(relative),
            root,
            original: original.to_owned(),
            cwd,
        })
    }

    /// Runs `command` with `text` in place of the file (`None`: the original), its
    /// output to `log`, stopped after `limit`.
    pub fn run(
        &self,
        command: &str,
        mutant: Option<(usize, &str, &str)>,
        log: &Path,
        limit: Duration,
    ) -> Result<Outcome, TestError> {
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |e| TestError::Io(p, e)
        };
        let (id, stage, text) = mutant.unwrap_or((0, "", &self.original));
        std::fs::write(&self.target, text).map_err(io(&self.target))?;
        let out = File::create(log).map_err(io(log))?;
        let err = out.try_clone().map_err(io(log))?;
        let mut child = std::os::unix::process::CommandExt::process_group(
            Command::new("sh")
                .arg("-c")
                .arg(command)
                .current_dir(&self.cwd)
                .env("KWB_MUTANT", id.to_string())
                .env("KWB_MUTANT_STAGE", stage)
                .env("KWB_MUTANT_FILE", &self.target)
                .env("KWB_TREE", &self.root)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err),
            0,
        )
        .spawn()
        .map_err(io(Path::new("sh")))?;
        let started = Instant::now();
        let outcome = loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    let seconds = started.elapsed().as_secs_f64();
                    break if status.success() {
                        Outcome::Survived { seconds }
                    } else {
                        Outcome::Killed {
                            seconds,
                            exit: status.code(),
                        }
                    };
                }
                Ok(None) if started.elapsed() < limit => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => {
                    // The whole group: a test script's children end with it.
                    let _ = Command::new("kill")
                        .args(["-KILL", "--", &format!("-{}", child.id())])
                        .status();
                    let _ = child.kill();
                    let _ = child.wait();
                    break Outcome::Timeout {
                        seconds: started.elapsed().as_secs_f64(),
                    };
                }
            }
        };
        std::fs::write(&self.target, &self.original).map_err(io(&self.target))?;
        Ok(outcome)
    }
}

/// `from` copied to `to`, without `.git` and without `skip` (the mutants' folder when
/// it lies inside the tree). Links are copied as what they point at.
fn copy_tree(from: &Path, to: &Path, skip: &Path) -> Result<(), TestError> {
    std::fs::create_dir_all(to).map_err(|e| TestError::Io(to.into(), e))?;
    let entries = std::fs::read_dir(from).map_err(|e| TestError::Io(from.into(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| TestError::Io(from.into(), e))?;
        let path = entry.path();
        if entry.file_name() == ".git" || path == skip {
            continue;
        }
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &target, skip)?;
        } else if path.is_file() {
            std::fs::copy(&path, &target).map_err(|e| TestError::Io(path.clone(), e))?;
        }
    }
    Ok(())
}

/// The tail of a run's log, for a refusal.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
