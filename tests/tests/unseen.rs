//! Track A on code we did not write: every unit of `tests/unseen.toml` (the CuTe
//! tutorials and CUTLASS examples of the nvidia-cutlass package, a sample of
//! flashinfer-python's GEMMs where `cargo xtask setup` installed the corpus) and every
//! program of the second suite
//! (`kernels/styles/styles.toml`), instrumented with the default probes (and, where the
//! mainloop lives in the headers, an overlay of them), compiles device-only three ways:
//! the original, the instrumented file without `KWB_TRACE` (SASS identical to the
//! original's), and with it (it compiles and carries probe code). Needs nvcc and the
//! packages `cargo xtask setup` installs: runs when `KWB_RUN_SLOW_TESTS=1`, as `cargo
//! xtask test` sets it. CI checks a sample (the units not marked `ci = false`); `cargo
//! xtask sets` checks the whole set. Each unit's seconds are printed, so the CI budget
//! stays in view.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kwb_instrument::Config;
use kwb_tests::{cutlass_source, repo_root, whole_sets};
use kwb_toolchain::{CompileFlags, Env, Toolchain};

/// One program to check.
#[derive(Debug, Clone)]
struct Unit {
    /// How the results name it.
    name: String,
    source: PathBuf,
    arch: String,
    overlay: bool,
    includes: Vec<PathBuf>,
    defines: Vec<String>,
}

fn strings(table: &toml::Value, key: &str) -> Vec<String> {
    table
        .get(key)
        .and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The units of `tests/unseen.toml` whose package is installed, each with its root's
/// includes and defines, and the programs of the second suite (with CUTLASS's
/// include folder for the one written with CuTe).
fn units(cutlass: &Path, corpus: Option<&kwb_toolchain::cache::Corpus>) -> Vec<Unit> {
    let text = std::fs::read_to_string(repo_root().join("tests/unseen.toml")).unwrap();
    let manifest: toml::Value = toml::from_str(&text).unwrap();
    let mut out = Vec::new();
    for unit in manifest["unit"].as_array().unwrap() {
        if !whole_sets() && unit.get("ci").and_then(toml::Value::as_bool) == Some(false) {
            continue;
        }
        let path = unit["path"].as_str().unwrap();
        let root_name = unit["root"].as_str().unwrap();
        let (root, extra) = match (root_name, corpus) {
            ("cutlass", _) => (cutlass.to_path_buf(), None),
            ("flashinfer", Some(c)) => (c.flashinfer.clone(), Some(c.tvm_ffi_include.clone())),
            ("flashinfer", None) => continue,
            (other, _) => panic!("unknown root `{other}`"),
        };
        let arch = unit["arch"].as_str().unwrap().to_owned();
        let table = &manifest["roots"][root_name];
        let mut includes: Vec<PathBuf> = strings(table, "includes")
            .iter()
            .map(|i| root.join(i))
            .collect();
        includes.extend(extra);
        let mut defines = strings(table, "defines");
        if let Some(per_arch) = table.get("arch").and_then(|a| a.get(&arch)) {
            defines.extend(strings(per_arch, "defines"));
        }
        defines.extend(strings(unit, "defines"));
        out.push(Unit {
            name: format!("{root_name}/{path}"),
            source: root.join(path),
            includes,
            defines,
            arch,
            overlay: unit
                .get("overlay")
                .and_then(toml::Value::as_bool)
                .unwrap_or(false),
        });
    }
    let styles = repo_root().join("kernels/styles");
    let text = std::fs::read_to_string(styles.join("styles.toml")).unwrap();
    let manifest: toml::Value = toml::from_str(&text).unwrap();
    for program in manifest["program"].as_array().unwrap() {
        let source = program["source"].as_str().unwrap();
        let cute = program.get("cutlass").and_then(toml::Value::as_bool) == Some(true);
        // A program written with CuTe takes over a minute of a core; CI checks CuTe on
        // nvidia-cutlass's own tutorials above, the whole set every program.
        if cute && !whole_sets() {
            continue;
        }
        out.push(Unit {
            name: format!("kernels/styles/{source}"),
            source: styles.join(source),
            arch: program["arch"].as_str().unwrap().to_owned(),
            overlay: false,
            includes: if cute {
                vec![cutlass.join("include")]
            } else {
                Vec::new()
            },
            defines: Vec::new(),
        });
    }
    out
}

/// Instruments `unit` into `dir`: the source's copy and, with an overlay, the
/// headers' copies under `dir/overlay`. Returns the copy and the probes placed.
fn instrument(unit: &Unit, cutlass_include: &Path, dir: &Path) -> Result<(PathBuf, usize), String> {
    let text = std::fs::read_to_string(&unit.source).map_err(|e| e.to_string())?;
    let config = Config {
        file_name: unit.name.clone(),
        ..Config::default()
    };
    let (copy, mut probes) = match kwb_instrument::instrument(&text, &config) {
        Ok((copy, plan)) => (copy, plan.probes.len()),
        Err(kwb_instrument::InstrumentError::NothingToProbe { .. }) if unit.overlay => {
            (text.clone(), 0)
        }
        Err(e) => return Err(format!("{}: {e}", unit.name)),
    };
    if unit.overlay {
        let overlay = dir.join("overlay");
        let roots = [cutlass_include.to_path_buf()];
        let copies = kwb_instrument::overlay::plan(
            &unit.source,
            &text,
            &roots,
            &overlay,
            &config,
            probes as u32,
        );
        for (written, text) in &copies {
            std::fs::create_dir_all(written.copy.parent().unwrap()).map_err(|e| e.to_string())?;
            std::fs::write(&written.copy, text).map_err(|e| e.to_string())?;
            probes += written.plan.probes.len();
        }
        let (header, runtime) = kwb_instrument::overlay::runtime_header(&overlay);
        std::fs::write(header, runtime).map_err(|e| e.to_string())?;
    }
    if probes == 0 {
        return Err(format!("{}: nothing probed", unit.name));
    }
    let name = unit.source.file_name().unwrap();
    let path = dir.join(name);
    std::fs::write(&path, copy).map_err(|e| e.to_string())?;
    Ok((path, probes))
}

/// Checks one unit in its own folder under `dir`; a one-line result.
fn check(
    unit: &Unit,
    toolchain: &Toolchain,
    cutlass_include: &Path,
    dir: &Path,
) -> Result<String, String> {
    let start = Instant::now();
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let (traced, probes) = instrument(unit, cutlass_include, dir)?;
    let mut includes = vec![unit.source.parent().unwrap().to_path_buf()];
    includes.extend(unit.includes.iter().cloned());
    let mut flags = CompileFlags {
        arch: unit.arch.clone(),
        includes: includes.clone(),
        defines: unit.defines.clone(),
        extra: vec!["--expt-relaxed-constexpr".to_owned()],
        ..CompileFlags::default()
    };
    let object = |name: &str| dir.join(format!("{name}.cubin"));
    let sass = |name: &str| {
        kwb_toolchain::sass(toolchain, &object(name))
            .map(|s| kwb_toolchain::sass_instructions(&s))
            .map_err(|e| format!("{}: {e}", unit.name))
    };
    let compile = |source: &Path, flags: &CompileFlags, name: &str| {
        kwb_toolchain::compile_cubin(toolchain, source, flags, &object(name))
            .map_err(|e| format!("{} ({name}): {}", unit.name, first_error(&e.to_string())))
    };
    compile(&unit.source, &flags, "orig")?;
    if unit.overlay {
        flags.includes.insert(0, dir.join("overlay"));
    }
    compile(&traced, &flags, "off")?;
    let (orig, off) = (sass("orig")?, sass("off")?);
    let mut same = "identical";
    // ptxas may schedule the same PTX differently from one run to the next (it does on
    // DeepGEMM's sm_100a kernels: three runs, three SASS): where the SASS differs, the
    // PTX both builds give ptxas is what the disabled probes must leave unchanged.
    let ptx = |source: &Path, flags: &CompileFlags, name: &str| -> Result<String, String> {
        let out = dir.join(format!("{name}.ptx"));
        kwb_toolchain::compile_ptx(toolchain, source, flags, &out).map_err(|e| {
            format!(
                "{} ({name} PTX): {}",
                unit.name,
                first_error(&e.to_string())
            )
        })?;
        let text = std::fs::read_to_string(&out).map_err(|e| e.to_string())?;
        // Comments and file names (an overlay's headers lie elsewhere) aside.
        Ok(text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//") && !l.trim_start().starts_with(".file"))
            .collect::<Vec<_>>()
            .join("\n"))
    };
    if !orig.is_empty() && orig != off {
        let mut plain = flags.clone();
        plain.includes.retain(|i| *i != dir.join("overlay"));
        if ptx(&unit.source, &plain, "orig")? == ptx(&traced, &flags, "off")? {
            same = "identical PTX (ptxas varies on it from run to run)";
        }
    }
    if same == "identical" && (orig.is_empty() || orig != off) {
        // Some files' SASS differs between two compiles of the original (ptxas names
        // registers differently): then the instructions must match but for the names.
        let mut plain = flags.clone();
        plain.includes.retain(|i| *i != dir.join("overlay"));
        compile(&unit.source, &plain, "orig2")?;
        let orig2 = sass("orig2")?;
        if orig2 == orig || without_registers(&orig) != without_registers(&off) {
            return Err(format!(
                "{}: SASS differs without KWB_TRACE ({} vs {} instructions)",
                unit.name,
                orig.lines().count(),
                off.lines().count()
            ));
        }
        same = "identical but for register names (two compiles of the original differ so)";
    }
    flags.defines.push("KWB_TRACE".to_owned());
    compile(&traced, &flags, "on")?;
    let on = sass("on")?;
    if on.lines().count() <= orig.lines().count() {
        return Err(format!(
            "{}: the traced build carries no probe code",
            unit.name
        ));
    }
    Ok(format!(
        "{}: {probes} probes, SASS {same} without KWB_TRACE ({} instructions), traced build {} instructions, {:.0} s",
        unit.name,
        orig.lines().count(),
        on.lines().count(),
        start.elapsed().as_secs_f64()
    ))
}

/// SASS with every register, predicate and barrier name (`R12`, `UR4`, `P0`, `UP1`,
/// `B2`) replaced by its kind: the instructions and everything else they say.
fn without_registers(sass: &str) -> String {
    let mut out = String::with_capacity(sass.len());
    let mut chars = sass.chars().peekable();
    let mut previous = ' ';
    while let Some(c) = chars.next() {
        let starts_name = !(previous.is_ascii_alphanumeric() || previous == '_');
        if starts_name && matches!(c, 'R' | 'P' | 'B' | 'U') {
            let mut word = String::from(c);
            while let Some(&n) = chars.peek().filter(|n| n.is_ascii_uppercase()) {
                word.push(n);
                chars.next();
            }
            let mut digits = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                digits.push(d);
                chars.next();
            }
            let register =
                !digits.is_empty() && matches!(word.as_str(), "R" | "UR" | "P" | "UP" | "B");
            out.push_str(&word);
            if !register {
                out.push_str(&digits);
            }
            previous = '0';
            continue;
        }
        out.push(c);
        previous = c;
    }
    out
}

/// The first lines of a compile error that say what went wrong.
fn first_error(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("error"))
        .take(3)
        .collect();
    if lines.is_empty() {
        text.lines().take(3).collect::<Vec<_>>().join(" | ")
    } else {
        lines.join(" | ")
    }
}

#[test]
fn register_names_are_all_that_normalizing_drops() {
    let a = "IADD3 R4, PT, R2, 0x10, RZ ; @P0 BRA `(.L_x_3) ; UIADD3 UR47, UR7, 0x40 ;";
    let b = "IADD3 R9, PT, R3, 0x10, RZ ; @P1 BRA `(.L_x_3) ; UIADD3 UR49, UR7, 0x40 ;";
    assert_eq!(without_registers(a), without_registers(b));
    assert_ne!(
        without_registers(a),
        without_registers(
            "IADD3 R4, PT, R2, 0x20, RZ ; @P0 BRA `(.L_x_3) ; UIADD3 UR47, UR7, 0x40 ;"
        )
    );
    assert!(without_registers("LDG.E R0, desc[UR4][R2.64]").contains("desc[UR][R.64]"));
}

#[test]
fn code_we_did_not_write_compiles_with_probes_and_its_sass_is_unchanged_without() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let Some(cutlass) = cutlass_source() else {
        return;
    };
    let env = Env::from_process();
    let toolchain = kwb_toolchain::toolchain(&env).unwrap();
    let include = kwb_toolchain::cutlass(&env).unwrap().include;
    let corpus = kwb_toolchain::cache::corpus(&env);
    let units = units(&cutlass, corpus.as_ref());
    let dir = tempfile::tempdir().unwrap();
    let results = kwb_tests::check_all(&units, dir.path(), |unit, dir| {
        check(unit, &toolchain, &include, dir)
    });
    // Units silently dropped (a manifest or package that moved) fail the check too.
    let wanted = match (corpus.is_some(), whole_sets()) {
        (true, true) => 48,
        (true, false) => 32,
        (false, true) => 22,
        (false, false) => 12,
    };
    assert!(results.len() >= wanted, "{} units", results.len());
}
