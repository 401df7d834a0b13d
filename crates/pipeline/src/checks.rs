//! The checks that need no trace: each TMA map the launcher encodes against its
//! operand's canonical map, from the source (static) and as the kernel received it
//! (dynamic), the received maps' swizzle against the one the source's MMA reads
//! shared memory with, and whether a given trace holds one instantiation alone.
//!
//! Invariant: a map field the static check names is never named again by the dynamic
//! check; every issue is about A, B or a map that covers none of the run's buffers.

use kwb_diagnose::{DescriptorIssue, EncodedMap, MmaSwizzle, Swizzle, check_descriptors};
use kwb_gpu::MapReading;

/// The static descriptor check of every map the launcher encodes: its encoder's call
/// matched to the descriptor construction in the function it calls.
pub fn descriptor_issues(x: &kwb_extract::Extraction) -> Vec<DescriptorIssue> {
    let maps: Vec<EncodedMap<'_>> = x
        .host
        .encoders
        .iter()
        .filter_map(|e| {
            let callee = e.call.split('(').next()?.trim();
            let callee = callee.rsplit("::").next().unwrap_or(callee);
            let d = x.descriptors.iter().find(|d| {
                let name = d.function.split('<').next().unwrap_or(&d.function);
                name.rsplit("::").next().unwrap_or(name) == callee
            })?;
            Some(EncodedMap {
                param: &e.param,
                call: &e.call,
                line: d.line,
                function_params: &d.function_params,
                dims: &d.global_dims.values,
                strides: &d.global_strides.values,
            })
        })
        .collect();
    let launcher: Vec<(&str, &str)> = x
        .host
        .launcher
        .iter()
        .map(|p| (p.name.as_str(), p.role.as_str()))
        .collect();
    check_descriptors(&maps, &launcher)
}

/// The dynamic descriptor check: each difference of a map the kernel received that
/// covers A or B (or points at none of the run's buffers) from its operand's canonical
/// map, unless the static check already names that map's field.
pub fn received_issues(maps: &[MapReading], statics: &[DescriptorIssue]) -> Vec<DescriptorIssue> {
    let mut out = Vec::new();
    for map in maps {
        let operand = match map.covers.as_deref() {
            Some(role @ ("A" | "B")) => role,
            Some(_) => continue,
            None => "none",
        };
        for diff in &map.diffs {
            // `strides[0]` is the static check's `strides`.
            let field = diff.field.split('[').next().unwrap_or(diff.field);
            if statics
                .iter()
                .any(|s| s.param == map.param && s.field == field)
            {
                continue;
            }
            out.push(DescriptorIssue::received(&map.param, operand, diff));
        }
    }
    out
}

/// A received map of A or B whose swizzle is not the one the source's MMA reads
/// shared memory with: the tile is written one way and read another.
pub fn swizzle_issues(maps: &[MapReading], mma: Option<&MmaSwizzle>) -> Vec<DescriptorIssue> {
    let Some(mma) = mma else {
        return Vec::new();
    };
    // Swizzles that permute within the same span read a tile the same way here.
    let name = |s: Swizzle| match s.span() {
        None => "none".to_owned(),
        Some(bytes) => format!("{bytes}B"),
    };
    maps.iter()
        .filter_map(|map| {
            let operand = map.covers.as_deref().filter(|r| matches!(*r, "A" | "B"))?;
            let got = map.decoded.as_ref()?.swizzle;
            (name(got) != name(mma.swizzle)).then(|| DescriptorIssue {
                param: map.param.clone(),
                operand: operand.to_owned(),
                line: None,
                field: "swizzle",
                found: name(got),
                expected: format!(
                    "the MMA reads shared memory {}-swizzled (line {}: `{}`): a tile written one way and read another permutes the 16-byte chunks of each row",
                    name(mma.swizzle),
                    mma.line,
                    mma.text
                ),
            })
        })
        .collect()
}

/// Whether every record of values in `trace` was recorded under `gate` (carries its
/// tag). Tile contexts hold no values and are never gated: they do not count.
pub fn pinned(trace: &kwb_runtime::Trace, gate: &str) -> Result<(), String> {
    let want = kwb_runtime::tag(gate);
    let values = || {
        trace
            .records
            .iter()
            .filter(|r| r.kind() != Some(kwb_runtime::Kind::TileContext))
    };
    let total = values().count();
    if total == 0 {
        return Err("the trace holds no record".to_owned());
    }
    let foreign: Vec<u32> = values().map(|r| r.tag).filter(|t| *t != want).collect();
    let Some(first) = foreign.first() else {
        return Ok(());
    };
    let what = if *first == kwb_runtime::tag(kwb_runtime::UNGATED) {
        "recorded without a gate, in every instantiation".to_owned()
    } else {
        format!("recorded under another gate (tag {first:#010x})")
    };
    Err(format!(
        "{} of {total} records were not recorded with --gate '{gate}' ({what}): instrument the kernel with kwb-instrument --gate '{gate}' so the trace holds that instantiation alone",
        foreign.len()
    ))
}

/// Whether the kernel loads through TMA maps (the file encodes one, the run received
/// one, or the reproducer's kernel map finds a descriptor site) and the maps of A and
/// B were not both read as the kernel received them.
pub fn maps_unchecked(
    x: &kwb_extract::Extraction,
    repro: &std::path::Path,
    report: Option<&kwb_gpu::Report>,
) -> bool {
    let maps = report.map_or(&[][..], |r| r.maps.as_slice());
    let received = |role: &str| maps.iter().any(|m| m.covers.as_deref() == Some(role));
    if received("A") && received("B") {
        return false;
    }
    if !x.descriptors.is_empty() || !maps.is_empty() {
        return true;
    }
    std::fs::read_to_string(repro.join("repro.cu")).is_ok_and(|text| {
        let parsed = kwb_syntax::parse(&text);
        kwb_sites::kernel_map(&parsed, &[])
            .kernels
            .iter()
            .flat_map(|k| &k.sites)
            .any(|s| s.kind == kwb_sites::SiteKind::TmaDescriptor)
    })
}

#[cfg(test)]
mod tests {
    use kwb_diagnose::MapDiff;

    use super::*;

    fn reading(param: &str, covers: Option<&str>, diffs: Vec<MapDiff>) -> MapReading {
        MapReading {
            param: param.to_owned(),
            bytes_hex: String::new(),
            decoded: None,
            decode_error: None,
            covers: covers.map(str::to_owned),
            diffs,
        }
    }

    #[test]
    fn a_trace_is_pinned_when_every_record_carries_the_gates_tag() {
        let gate = "REDUCTION_SIZE == 6144";
        let mut record = kwb_runtime::TraceRecord::from_le_bytes(&[0; kwb_runtime::RECORD_SIZE]);
        record.tag = kwb_runtime::tag(gate);
        let mut t = kwb_runtime::Trace {
            records: vec![record, record],
            ..kwb_runtime::Trace::default()
        };
        assert_eq!(pinned(&t, gate), Ok(()));
        // A tile context is never gated, and holds no values.
        let mut context = record;
        context.kind = kwb_runtime::Kind::TileContext as u32;
        context.tag = kwb_runtime::tag(kwb_runtime::UNGATED);
        t.records.push(context);
        assert_eq!(pinned(&t, gate), Ok(()));
        t.records.pop();
        t.records[1].tag = kwb_runtime::tag("REDUCTION_SIZE == 1024");
        let why = pinned(&t, gate).unwrap_err();
        assert!(why.starts_with("1 of 2 records"), "{why}");
        assert!(why.contains("another gate"), "{why}");
        t.records.clear();
        assert!(pinned(&t, gate).is_err());
    }

    fn with_swizzle(param: &str, covers: &str, swizzle: Swizzle) -> MapReading {
        MapReading {
            decoded: Some(kwb_diagnose::TensorMapFields {
                address: 0x7f00_0000_0000,
                rank: 2,
                dtype: kwb_diagnose::MapDtype::Bf16,
                dims: vec![1024, 256],
                strides: vec![2048],
                box_dim: vec![64, 128],
                element_strides: vec![1, 1],
                interleave: 0,
                swizzle,
                l2_promotion: 0,
                oob_nan: false,
                im2col: false,
                box_bytes: 16384,
                large: false,
            }),
            ..reading(param, Some(covers), Vec::new())
        }
    }

    #[test]
    fn a_received_map_swizzled_otherwise_than_the_mma_reads_is_a_descriptor_issue() {
        let mma = kwb_diagnose::mma_swizzle("  desc |= uint64_t(1) << 62;").unwrap();
        let maps = [
            with_swizzle("tmap_a", "A", Swizzle::None),
            with_swizzle("tmap_b", "B", Swizzle::B128),
            with_swizzle("tmap_d", "D", Swizzle::None),
        ];
        let issues = swizzle_issues(&maps, Some(&mma));
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(
            issues[0].describe(),
            "`tmap_a` (operand A): the map the kernel received has swizzle {none} where the MMA reads shared memory 128B-swizzled (line 1: `desc |= uint64_t(1) << 62;`): a tile written one way and read another permutes the 16-byte chunks of each row"
        );
        // No expectation from the source: nothing said.
        assert!(swizzle_issues(&maps, None).is_empty());
    }

    fn pitch() -> MapDiff {
        MapDiff {
            field: "strides[0]",
            got: "2048".to_owned(),
            expected: "2176".to_owned(),
            why: "the pitch is 1024 elements where 1088 are expected".to_owned(),
        }
    }

    #[test]
    fn a_received_map_s_diff_on_an_operand_is_a_descriptor_issue_once() {
        let maps = [
            reading("tmap_a", Some("A"), vec![pitch()]),
            reading("tmap_d", Some("D"), vec![pitch()]),
        ];
        let issues = received_issues(&maps, &[]);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(
            (issues[0].param.as_str(), issues[0].operand.as_str()),
            ("tmap_a", "A")
        );
        assert!(
            issues[0]
                .describe()
                .contains("strides[0] {2048} where A's rows are 2176 bytes apart"),
            "{}",
            issues[0].describe()
        );
        // The static check already names tmap_a's strides: not said twice.
        let from_source = DescriptorIssue {
            param: "tmap_a".to_owned(),
            operand: "A".to_owned(),
            line: Some(297),
            field: "strides",
            found: "K * 2".to_owned(),
            expected: "lda * sizeof(element)".to_owned(),
        };
        assert!(received_issues(&maps, &[from_source]).is_empty());
        // A map in none of the buffers is an issue of no operand.
        let stray = MapDiff {
            field: "address",
            got: "0x8".to_owned(),
            expected: "an address in one of the run's buffers".to_owned(),
            why: "the map points at none of the run's buffers".to_owned(),
        };
        let issues = received_issues(&[reading("tmap_b", None, vec![stray])], &[]);
        assert_eq!(issues[0].operand, "none");
    }
}
