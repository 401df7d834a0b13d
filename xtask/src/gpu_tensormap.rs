//! `cargo xtask gpu-tensormap`: kwb-diagnose's `CUtensorMap` decoder held to the real
//! driver. Builds xtask/tensormap_probe.cu, which encodes a table of maps with
//! `cuTensorMapEncodeTiled` (each case changes one parameter of a baseline) and prints
//! each case's parameters, the driver's result and the bytes; decodes every map the
//! driver accepted, compares each field with the parameters it was encoded from, and
//! writes a Markdown report with, for each case that differs, the words where the
//! driver's map and the measured layout part. Fails when an accepted map does not
//! decode to its parameters.
//!
//! Two fields are the driver's own, held to the rules measured so far: the bytes of one
//! box (the product of `boxDim[i] / elementStrides[i]`, rounded down, and the element
//! size) and the large-tensor flag (never set on sm_90; on later architectures set for
//! a tensor spanning at least 128 KiB).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use kwb_diagnose::{MapDtype, Swizzle, TensorMapFields, decode, encode_layout};
use kwb_toolchain::CompileFlags;

use crate::kernels::tools;
use crate::{Failure, Result};

pub struct Options {
    pub out: PathBuf,
    pub commit: Option<String>,
}

/// What the probe printed.
#[derive(Debug, PartialEq)]
struct Probe {
    /// `cuDriverGetVersion`, e.g. `13000`.
    driver: String,
    /// The device's compute capability and name.
    device: String,
    cases: Vec<Case>,
}

/// One `case` line.
#[derive(Debug, PartialEq)]
struct Case {
    id: String,
    /// The parameters as printed, for the report.
    text: String,
    params: Params,
    /// The `CUresult` and its name.
    result: i32,
    error: String,
    map: Option<[u8; 128]>,
    /// The map encoded into 0xff-filled memory, where it differs from `map`.
    refilled: Option<[u8; 128]>,
}

/// The parameters of `cuTensorMapEncodeTiled`, as API values.
#[derive(Debug, PartialEq)]
struct Params {
    dtype: u32,
    rank: u32,
    address: u64,
    dims: Vec<u64>,
    strides: Vec<u64>,
    box_dim: Vec<u32>,
    element_strides: Vec<u32>,
    interleave: u32,
    swizzle: u32,
    l2: u32,
    oob: u32,
}

/// A span the driver marks as a large tensor, in bytes.
const LARGE_TENSOR: u64 = 128 * 1024;

pub fn run(root: &Path, options: &Options) -> Result {
    // The probe needs nvcc only, not the CUTLASS headers `tools` also looks for.
    let toolchain = match kwb_toolchain::toolchain(&kwb_toolchain::Env::from_process()) {
        Ok(toolchain) => toolchain,
        Err(_) => tools()?.0,
    };
    let dir = root.join("target/gpu-tensormap");
    std::fs::create_dir_all(&dir).map_err(|e| Failure(format!("{}: {e}", dir.display())))?;
    let binary = dir.join("tensormap_probe");
    let flags = CompileFlags {
        // dlopen and dlsym: libc's own since glibc 2.34, libdl's before.
        extra: vec!["-ldl".to_owned()],
        ..CompileFlags::default()
    };
    kwb_toolchain::compile_executable(
        &toolchain,
        &root.join("xtask/tensormap_probe.cu"),
        &flags,
        &binary,
    )?;
    let output = Command::new(&binary)
        .output()
        .map_err(|e| Failure(format!("{}: {e}", binary.display())))?;
    if !output.status.success() {
        return Err(Failure(format!(
            "the tensor map probe failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let probe = parse(&String::from_utf8_lossy(&output.stdout)).map_err(Failure)?;
    let marks_large = marks_large(&probe.device);
    let judged: Vec<(&Case, Judged)> = probe
        .cases
        .iter()
        .map(|c| (c, judge(c, marks_large)))
        .collect();
    let wrong = judged
        .iter()
        .filter(|(_, j)| matches!(j, Judged::Wrong(_)))
        .count();
    for (case, j) in &judged {
        let word = match j {
            Judged::Rejected => "refused",
            Judged::Right => "ok",
            Judged::Wrong(_) => "WRONG",
        };
        println!("{word:7} {}", case.id);
    }
    let mut report = crate::gpu_suite::report_head(
        "CUtensorMap decoder against the driver",
        options.commit.as_deref(),
        &toolchain,
    );
    let _ = writeln!(
        report,
        "- driver: {} (cuDriverGetVersion); device {}",
        probe.driver, probe.device
    );
    let _ = writeln!(report, "- command: `xtask gpu-tensormap`\n");
    report.push_str(&markdown(&judged));
    crate::gpu_suite::write_report(&options.out, &report)?;
    match wrong {
        0 => Ok(()),
        n => Err(Failure(format!(
            "{n} of {} maps the driver accepted do not decode to their parameters",
            judged
                .iter()
                .filter(|(_, j)| !matches!(j, Judged::Rejected))
                .count()
        ))),
    }
}

/// The probe's output: the `driver` and `device` lines, then one `case` line each.
fn parse(text: &str) -> Result<Probe, String> {
    let mut probe = Probe {
        driver: String::new(),
        device: String::new(),
        cases: Vec::new(),
    };
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("driver", version)) => probe.driver = version.to_owned(),
            Some(("device", device)) => probe.device = device.to_owned(),
            Some(("case", rest)) => probe
                .cases
                .push(parse_case(rest).map_err(|e| format!("probe line `{line}`: {e}"))?),
            _ => return Err(format!("probe line `{line}`: not a driver, device or case")),
        }
    }
    match probe.cases.is_empty() {
        true => Err("the probe printed no case".to_owned()),
        false => Ok(probe),
    }
}

/// One case line after `case `: the id, then `key=value` words.
fn parse_case(rest: &str) -> Result<Case, String> {
    let mut words = rest.split(' ');
    let id = words.next().unwrap_or_default().to_owned();
    let pairs: Vec<(&str, &str)> = words
        .map(|w| w.split_once('=').ok_or(format!("`{w}` is not key=value")))
        .collect::<Result<_, _>>()?;
    let value = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .ok_or(format!("no {key}="))
    };
    let number = |key: &str| -> Result<u64, String> {
        let text = value(key)?;
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        };
        parsed.map_err(|e| format!("{key}={text}: {e}"))
    };
    let small = |key: &str| -> Result<u32, String> {
        number(key)?.try_into().map_err(|e| format!("{key}: {e}"))
    };
    let list = |key: &str| -> Result<Vec<u64>, String> {
        match value(key)? {
            "-" => Ok(Vec::new()),
            text => text
                .split(',')
                .map(|n| n.parse().map_err(|e| format!("{key}={text}: {e}")))
                .collect(),
        }
    };
    let small_list = |key: &str| -> Result<Vec<u32>, String> {
        list(key)?
            .into_iter()
            .map(|n| u32::try_from(n).map_err(|e| format!("{key}: {e}")))
            .collect()
    };
    let bytes = |key: &str| -> Result<Option<[u8; 128]>, String> {
        match value(key)? {
            "-" | "same" => Ok(None),
            text => hex_bytes(text)
                .map(Some)
                .ok_or(format!("{key}: not 128 hex bytes")),
        }
    };
    let (result, error) = value("result")?
        .split_once(':')
        .ok_or("result= is not <code>:<name>")?;
    let map = bytes("map")?;
    let result: i32 = result
        .parse()
        .map_err(|e| format!("result={result}: {e}"))?;
    if (result == 0) != map.is_some() {
        return Err(format!("result {result} with map {}", value("map")?));
    }
    let text_end = rest.find(" result=").unwrap_or(rest.len());
    Ok(Case {
        text: rest[id.len()..text_end].trim().to_owned(),
        params: Params {
            dtype: small("dtype")?,
            rank: small("rank")?,
            address: number("address")?,
            dims: list("dims")?,
            strides: list("strides")?,
            box_dim: small_list("box")?,
            element_strides: small_list("estrides")?,
            interleave: small("interleave")?,
            swizzle: small("swizzle")?,
            l2: small("l2")?,
            oob: small("oob")?,
        },
        result,
        error: error.to_owned(),
        map,
        refilled: bytes("filled")?,
        id,
    })
}

fn hex_bytes(text: &str) -> Option<[u8; 128]> {
    let mut bytes = [0u8; 128];
    if text.len() != 256 || !text.is_ascii() {
        return None;
    }
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(bytes)
}

fn words(bytes: &[u8; 128]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// What a case came to.
#[derive(Debug, PartialEq)]
enum Judged {
    /// The driver refused the parameters: nothing to decode.
    Rejected,
    /// The map decodes to its parameters.
    Right,
    /// It does not: what differs, one line each.
    Wrong(Vec<String>),
}

/// Whether the driver sets the large-tensor flag on the probe's device (`cc=9.0 name=…`):
/// never on sm_90.
fn marks_large(device: &str) -> bool {
    !device.starts_with("cc=9.")
}

/// The fields the parameters should decode to, by the measured rules for the two
/// the driver derives; None where an API value has no decoded counterpart (a packed
/// element type, an unknown swizzle).
fn expected_fields(p: &Params, marks_large: bool) -> Option<TensorMapFields> {
    let dtype = MapDtype::from_api(p.dtype)?;
    let size = dtype.size();
    let box_elements: u64 = p
        .box_dim
        .iter()
        .zip(&p.element_strides)
        .map(|(&b, &e)| u64::from(b / e.max(1)))
        .product();
    // The bytes the tensor spans: the largest extent of a dimension at its stride.
    let span = std::iter::once(size)
        .chain(p.strides.iter().copied())
        .zip(&p.dims)
        .map(|(stride, &dim)| stride.saturating_mul(dim))
        .max()
        .unwrap_or(0);
    Some(TensorMapFields {
        address: p.address,
        rank: p.rank,
        dtype,
        dims: p.dims.clone(),
        strides: p.strides.clone(),
        box_dim: p.box_dim.clone(),
        element_strides: p.element_strides.clone(),
        interleave: p.interleave,
        swizzle: Swizzle::from_api(p.swizzle)?,
        l2_promotion: p.l2,
        oob_nan: p.oob == 1,
        im2col: false,
        box_bytes: u32::try_from(box_elements * size).unwrap_or(u32::MAX),
        large: marks_large && span >= LARGE_TENSOR,
    })
}

fn judge(case: &Case, marks_large: bool) -> Judged {
    let Some(map) = &case.map else {
        return Judged::Rejected;
    };
    let expected = expected_fields(&case.params, marks_large);
    let mut problems = Vec::new();
    match (decode(map), &expected) {
        (Err(e), _) => problems.push(format!("does not decode: {e}")),
        (Ok(got), None) => problems.push(format!(
            "decodes (as {}), but its parameters have no decoded form",
            got.dtype
        )),
        (Ok(got), Some(want)) => problems.extend(field_diffs(&got, want)),
    }
    if problems.is_empty() {
        return Judged::Right;
    }
    let driver = words(map);
    match &expected {
        Some(want) => {
            for (i, (d, l)) in driver.iter().zip(words(&encode_layout(want))).enumerate() {
                if *d != l {
                    problems.push(format!("w{i}: driver {d:#010x}, layout {l:#010x}"));
                }
            }
        }
        None => {
            for (i, d) in driver.iter().enumerate().filter(|(_, d)| **d != 0) {
                problems.push(format!("w{i}: driver {d:#010x}"));
            }
        }
    }
    Judged::Wrong(problems)
}

/// `field: decoded X, parameters say Y` for each field that differs.
fn field_diffs(got: &TensorMapFields, want: &TensorMapFields) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = |name: &str, show: &dyn Fn(&TensorMapFields) -> String| {
        let (g, w) = (show(got), show(want));
        if g != w {
            out.push(format!("{name}: decoded {g}, parameters say {w}"));
        }
    };
    field("address", &|f| format!("{:#x}", f.address));
    field("rank", &|f| f.rank.to_string());
    field("dtype", &|f| f.dtype.to_string());
    field("dims", &|f| format!("{:?}", f.dims));
    field("strides", &|f| format!("{:?}", f.strides));
    field("box_dim", &|f| format!("{:?}", f.box_dim));
    field("element_strides", &|f| format!("{:?}", f.element_strides));
    field("interleave", &|f| f.interleave.to_string());
    field("swizzle", &|f| format!("{:?}", f.swizzle));
    field("l2_promotion", &|f| f.l2_promotion.to_string());
    field("oob_nan", &|f| f.oob_nan.to_string());
    field("im2col", &|f| f.im2col.to_string());
    field("box_bytes (derived)", &|f| f.box_bytes.to_string());
    field("large (derived)", &|f| f.large.to_string());
    out
}

/// The summary, the table of cases, the details of each wrong one, and the bytes the
/// driver left unwritten.
fn markdown(judged: &[(&Case, Judged)]) -> String {
    let count = |f: fn(&Judged) -> bool| judged.iter().filter(|(_, j)| f(j)).count();
    let rejected = count(|j| matches!(j, Judged::Rejected));
    let right = count(|j| matches!(j, Judged::Right));
    let wrong = count(|j| matches!(j, Judged::Wrong(_)));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} cases: {} accepted by the driver, {rejected} refused; of the accepted, {right} decode to their parameters, {wrong} do not.\n",
        judged.len(),
        right + wrong
    );
    let _ = writeln!(out, "| case | parameters | driver | decoded |");
    let _ = writeln!(out, "|---|---|---|---|");
    for (case, j) in judged {
        let verdict = match j {
            Judged::Rejected => "-",
            Judged::Right => "ok",
            Judged::Wrong(_) => "**WRONG**",
        };
        let _ = writeln!(
            out,
            "| `{}` | `{}` | {} | {verdict} |",
            case.id, case.text, case.error
        );
    }
    if wrong > 0 {
        let _ = writeln!(out, "\n## Maps that do not decode to their parameters");
        for (case, j) in judged {
            if let Judged::Wrong(problems) = j {
                let _ = writeln!(out, "\n### `{}`\n\n`{}`\n", case.id, case.text);
                for p in problems {
                    let _ = writeln!(out, "- {p}");
                }
            }
        }
    }
    let unwritten: Vec<_> = judged
        .iter()
        .filter_map(|(case, _)| Some((case, case.map.as_ref()?, case.refilled.as_ref()?)))
        .collect();
    if !unwritten.is_empty() {
        let _ = writeln!(
            out,
            "\n## Words the driver leaves as it found them\n\nEncoded into 0xff-filled memory, these words differ from the map encoded into zeroed memory.\n"
        );
        for (case, zeroed, filled) in unwritten {
            let kept: Vec<String> = words(zeroed)
                .iter()
                .zip(words(filled))
                .enumerate()
                .filter(|(_, (z, f))| *z != f)
                .map(|(i, _)| format!("w{i}"))
                .collect();
            let _ = writeln!(out, "- `{}`: {}", case.id, kept.join(", "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measured worked example (f16, dims 16 x 16, a 32-byte stride, a 16 x 8
    /// box) as the probe prints it.
    const EXAMPLE_MAP: &str = "00785634127f0000100300000200000000000000000000000000000000000000\
        0f0000000f0000000000000000000000000000000000000f0700000000000000\
        0001000000000000100000000000000000000000000000000000000000000000\
        0000000000000000000000000000000000000000000000000000000000000000";

    fn example_line(map: &str, result: &str) -> String {
        format!(
            "case base dtype=6 rank=2 address=0x7f1234567800 dims=16,16 strides=32 box=16,8 estrides=1,1 interleave=0 swizzle=0 l2=0 oob=0 result={result} map={map} filled=same"
        )
    }

    /// `map` with word `i` set to `value`.
    fn with_word(map: &str, i: usize, value: u32) -> String {
        let word: String = value
            .to_le_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{}{word}{}", &map[..8 * i], &map[8 * i + 8..])
    }

    #[test]
    fn parses_the_probe_output() {
        let text = format!(
            "driver 13000\ndevice cc=9.0 name=NVIDIA H200\n{}\ncase rank.1 dtype=6 rank=1 address=0x10 dims=16 strides=- box=16 estrides=1 interleave=0 swizzle=0 l2=0 oob=0 result=1:CUDA_ERROR_INVALID_VALUE map=- filled=-\n",
            example_line(EXAMPLE_MAP, "0:CUDA_SUCCESS")
        );
        let probe = parse(&text).unwrap();
        assert_eq!(probe.driver, "13000");
        assert_eq!(probe.device, "cc=9.0 name=NVIDIA H200");
        let [base, rank1] = &probe.cases[..] else {
            panic!("{probe:?}")
        };
        assert_eq!(base.id, "base");
        assert_eq!(
            base.text,
            "dtype=6 rank=2 address=0x7f1234567800 dims=16,16 strides=32 box=16,8 estrides=1,1 interleave=0 swizzle=0 l2=0 oob=0"
        );
        assert_eq!(base.params.address, 0x7f12_3456_7800);
        assert_eq!(base.params.box_dim, vec![16, 8]);
        assert_eq!(base.map.map(|m| words(&m)[2]), Some(0x310));
        assert_eq!(base.refilled, None);
        assert_eq!(judge(base, false), Judged::Right);
        assert_eq!(rank1.params.strides, Vec::<u64>::new());
        assert_eq!(
            (rank1.result, rank1.error.as_str()),
            (1, "CUDA_ERROR_INVALID_VALUE")
        );
        assert_eq!(judge(rank1, false), Judged::Rejected);
    }

    #[test]
    fn holds_the_derived_words_to_the_measured_rules() {
        // Element strides 1, 3: a box of 16 x (8 / 3 = 2) f16 values is 64 bytes.
        let map = with_word(&with_word(EXAMPLE_MAP, 13, 0x0f00_0010), 16, 0x40);
        let line = example_line(&map, "0:CUDA_SUCCESS").replace("estrides=1,1", "estrides=1,3");
        assert_eq!(judge(&parse(&line).unwrap().cases[0], false), Judged::Right);
        assert!(!marks_large("cc=9.0 name=NVIDIA H200"));
        assert!(marks_large("cc=12.0 name=NVIDIA RTX PRO 6000"));
    }

    #[test]
    fn refuses_a_malformed_line() {
        let short = example_line(&EXAMPLE_MAP[..254], "0:CUDA_SUCCESS");
        assert_eq!(
            parse(&short).unwrap_err(),
            format!("probe line `{short}`: map: not 128 hex bytes")
        );
        let no_map = example_line("-", "0:CUDA_SUCCESS");
        assert!(parse(&no_map).unwrap_err().ends_with("result 0 with map -"));
        assert!(parse("driver 13000\n").is_err());
    }

    #[test]
    fn a_map_that_differs_names_the_field_and_the_words() {
        // The driver's box in w14 says 9 rows where the parameters say 8.
        let map = with_word(EXAMPLE_MAP, 14, 8);
        let probe = parse(&example_line(&map, "0:CUDA_SUCCESS")).unwrap();
        assert_eq!(
            judge(&probe.cases[0], false),
            Judged::Wrong(vec![
                "box_dim: decoded [16, 9], parameters say [16, 8]".to_owned(),
                "w14: driver 0x00000008, layout 0x00000007".to_owned(),
            ])
        );
    }
}
