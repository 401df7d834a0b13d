//! The header's declarations and the Rust mirrors agree.
//!
//! This parses `kwb_trace.cuh` itself: every struct between `// kwb:layout NAME begin`
//! and `// kwb:layout end`, the `Kind` and `Axis` enums and the layout constants. Change
//! the header's record and this test fails until `TraceRecord` follows, and the other
//! way round.

use std::collections::BTreeMap;

use kwb_runtime::filter::Filter;
use kwb_runtime::trace_file::{FileHeader, SiteEntry, SummaryHeader, TileHeader};
use kwb_runtime::{Axis, Field, HEADER, Kind, TraceRecord};

/// One struct as the header declares it.
#[derive(Debug)]
struct Declared {
    fields: Vec<Field>,
    size: usize,
    align: usize,
}

/// The size and alignment of a scalar type the layout blocks may use.
fn scalar(ty: &str) -> usize {
    match ty {
        "char" | "uint8_t" | "int8_t" => 1,
        "uint16_t" | "int16_t" => 2,
        "uint32_t" | "int32_t" | "float" => 4,
        "uint64_t" | "int64_t" | "double" => 8,
        other => panic!("layout blocks may only use fixed-size scalars, found `{other}`"),
    }
}

/// Parses every `kwb:layout` block of the header, laying fields out as C does.
fn declared_structs(header: &str) -> BTreeMap<String, Declared> {
    let mut out = BTreeMap::new();
    let mut lines = header.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim().strip_prefix("// kwb:layout ") else {
            continue;
        };
        let name = rest.strip_suffix(" begin").unwrap_or_else(|| {
            panic!("a layout block opens with `// kwb:layout NAME begin`: {line}")
        });
        let opening = lines.next().expect("a struct follows the marker").trim();
        let align_as = opening
            .split_once("alignas(")
            .map(|(_, rest)| rest.split_once(')').unwrap().0.parse::<usize>().unwrap())
            .unwrap_or(1);
        assert!(
            opening.starts_with("struct ") && opening.contains(&format!(" {name} ")),
            "`// kwb:layout {name} begin` is followed by `struct ... {name} {{`, found `{opening}`"
        );

        let mut fields = Vec::new();
        let mut offset: usize = 0;
        let mut align = align_as;
        for line in lines.by_ref() {
            let code = line.split("//").next().unwrap().trim();
            if line.trim() == "// kwb:layout end" {
                break;
            }
            if code.is_empty() || code == "};" {
                continue;
            }
            let decl = code
                .strip_suffix(';')
                .unwrap_or_else(|| panic!("one field per line, `type name;`: {line}"));
            let (ty, name) = decl.split_once(char::is_whitespace).unwrap();
            let (name, count) = match name.trim().split_once('[') {
                Some((name, count)) => {
                    (name, count.trim_end_matches(']').parse::<usize>().unwrap())
                }
                None => (name.trim(), 1),
            };
            let element = scalar(ty);
            offset = offset.next_multiple_of(element);
            align = align.max(element);
            fields.push(Field {
                name: leak(name),
                offset,
                size: element * count,
            });
            offset += element * count;
        }
        out.insert(
            name.to_owned(),
            Declared {
                fields,
                size: offset.next_multiple_of(align),
                align,
            },
        );
    }
    out
}

fn leak(name: &str) -> &'static str {
    Box::leak(name.to_owned().into_boxed_str())
}

fn check<T>(name: &str, fields: &[Field]) {
    let structs = declared_structs(HEADER);
    let declared = structs
        .get(name)
        .unwrap_or_else(|| panic!("kwb_trace.cuh has no `// kwb:layout {name} begin` block"));
    assert_eq!(declared.fields, fields, "the fields of {name}");
    assert_eq!(
        declared.size,
        std::mem::size_of::<T>(),
        "the size of {name}"
    );
    assert_eq!(
        declared.align,
        std::mem::align_of::<T>(),
        "the alignment of {name}"
    );
    assert!(
        HEADER.contains(&format!(
            "static_assert(sizeof({name}) == {}",
            declared.size
        )),
        "the header asserts sizeof({name}) == {}",
        declared.size
    );
    // Every offsetof assertion of the header about this struct agrees with the mirror.
    let prefix = format!("static_assert(offsetof({name}, ");
    for (at, _) in HEADER.match_indices(&prefix) {
        let rest = &HEADER[at + prefix.len()..];
        let (field, rest) = rest.split_once(')').unwrap();
        let offset: usize = rest
            .trim_start_matches([' ', '='])
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let mirrored = fields.iter().find(|f| f.name == field.trim()).unwrap();
        assert_eq!(
            offset, mirrored.offset,
            "the header asserts offsetof({name}, {field}) == {offset}"
        );
    }
}

#[test]
fn record_layout_agrees() {
    check::<TraceRecord>("Record", TraceRecord::FIELDS);
    assert_eq!(std::mem::size_of::<TraceRecord>(), kwb_runtime::RECORD_SIZE);
}

#[test]
fn filter_layout_agrees() {
    check::<Filter>("Filter", Filter::FIELDS);
}

#[test]
fn file_layout_agrees() {
    check::<FileHeader>("FileHeader", FileHeader::FIELDS);
    check::<SiteEntry>("SiteEntry", SiteEntry::FIELDS);
    check::<TileHeader>("TileHeader", TileHeader::FIELDS);
    check::<kwb_runtime::TileValue>("TileValue", kwb_runtime::TileValue::FIELDS);
    check::<SummaryHeader>("SummaryHeader", SummaryHeader::FIELDS);
    check::<kwb_runtime::SummaryEntry>("SummaryEntry", kwb_runtime::SummaryEntry::FIELDS);
}

#[test]
fn every_layout_block_is_checked() {
    let names: Vec<String> = declared_structs(HEADER).into_keys().collect();
    assert_eq!(
        names,
        [
            "FileHeader",
            "Filter",
            "Record",
            "SiteEntry",
            "SummaryEntry",
            "SummaryHeader",
            "TileHeader",
            "TileValue"
        ]
    );
}

/// The `Name = value` pairs of `enum class NAME : uint32_t { ... };`.
fn declared_enum(header: &str, name: &str) -> Vec<(String, u32)> {
    let start = header
        .find(&format!("enum class {name} : uint32_t {{"))
        .unwrap_or_else(|| panic!("kwb_trace.cuh declares `enum class {name} : uint32_t`"));
    let body = &header[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("};").unwrap()];
    body.lines()
        .map(|line| line.split("//").next().unwrap())
        .flat_map(|line| line.split(','))
        .filter_map(|item| item.split_once('='))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().parse().unwrap()))
        .collect()
}

#[test]
fn kinds_agree() {
    let rust: Vec<(String, u32)> = Kind::ALL
        .iter()
        .map(|kind| (kind.cpp_name().to_owned(), *kind as u32))
        .collect();
    assert_eq!(declared_enum(HEADER, "Kind"), rust);
}

#[test]
fn axes_agree() {
    let rust: Vec<(String, u32)> = Axis::ALL
        .iter()
        .map(|axis| (axis.cpp_name().to_owned(), *axis as u32))
        .collect();
    assert_eq!(declared_enum(HEADER, "Axis"), rust);
}

/// The value of `inline constexpr TYPE NAME = VALUE;` or `#define NAME VALUE`: the last
/// one, the default that stands when no earlier block (a summary build's) set it.
fn declared_constant(header: &str, name: &str) -> String {
    header
        .lines()
        .map(str::trim)
        .filter_map(|line| {
            let define = line.strip_prefix(&format!("#define {name} "));
            let constexpr = line
                .strip_prefix("inline constexpr ")
                .and_then(|rest| rest.split_once(' '))
                .and_then(|(_, rest)| rest.strip_prefix(&format!("{name} = ")))
                .and_then(|rest| rest.strip_suffix(';'));
            define.or(constexpr)
        })
        .next_back()
        .unwrap_or_else(|| panic!("kwb_trace.cuh defines {name}"))
        .to_owned()
}

#[test]
fn constants_agree() {
    assert_eq!(
        declared_constant(HEADER, "version"),
        kwb_runtime::VERSION.to_string()
    );
    assert_eq!(
        declared_constant(HEADER, "record_magic"),
        format!("{:#010X}u", kwb_runtime::RECORD_MAGIC).replace("0X", "0x")
    );
    assert_eq!(
        declared_constant(HEADER, "record_values"),
        kwb_runtime::RECORD_VALUES.to_string()
    );
    assert_eq!(
        declared_constant(HEADER, "KWB_TRACE_CAPACITY"),
        kwb_runtime::DEFAULT_CAPACITY.to_string()
    );
    assert_eq!(
        declared_constant(HEADER, "KWB_TRACE_SUMMARY_SITES"),
        kwb_runtime::DEFAULT_SUMMARY_SITES.to_string()
    );
    assert_eq!(
        declared_constant(HEADER, "KWB_TRACE_SUMMARY_K_TILES"),
        kwb_runtime::DEFAULT_SUMMARY_K_TILES.to_string()
    );
    assert_eq!(
        declared_constant(HEADER, "KWB_TRACE_SUMMARY_STRIPES"),
        kwb_runtime::DEFAULT_SUMMARY_STRIPES.to_string()
    );
    assert!(HEADER.contains(&format!(
        "#ifdef KWB_TRACE_SCREEN\n#ifndef KWB_TRACE_SUMMARY\n#define KWB_TRACE_SUMMARY 1\n#endif\n#ifndef KWB_TRACE_SUMMARY_K_TILES\n#define KWB_TRACE_SUMMARY_K_TILES 1\n#endif\n#ifndef KWB_TRACE_SUMMARY_STRIPES\n#define KWB_TRACE_SUMMARY_STRIPES {}\n",
        kwb_runtime::DEFAULT_SCREEN_STRIPES
    )));
    assert!(HEADER.contains(&format!(
        "static_assert(sizeof(SummaryCell) == {}, ",
        kwb_runtime::SUMMARY_CELL_SIZE
    )));
    assert_eq!(&kwb_runtime::RECORD_MAGIC.to_le_bytes(), b"KWBR");
}

#[test]
fn symbols_name_the_headers_variables() {
    // Itanium mangling of a variable in namespace kwb: _ZN3kwb<len><name>E.
    for (symbol, declaration) in [
        (
            kwb_runtime::symbols::RECORDS,
            "__device__ __align__(32) Record trace_records[",
        ),
        (
            kwb_runtime::symbols::CURSOR,
            "__device__ __align__(128) unsigned long long trace_cursor[KWB_TRACE_SHARDS * cursor_words];",
        ),
        (
            kwb_runtime::symbols::FILTER,
            "__constant__ Filter trace_filter =",
        ),
        (
            kwb_runtime::symbols::SUMMARY,
            "__device__ SummaryCell trace_summary[summary_cells];",
        ),
        (
            kwb_runtime::symbols::TILE_VALUES,
            "__device__ TileValue trace_tile_values[",
        ),
        (
            kwb_runtime::symbols::TILE_CURSOR,
            "__device__ unsigned long long trace_tile_cursor;",
        ),
        (
            kwb_runtime::symbols::TILE_DROPPED,
            "__device__ unsigned long long trace_tile_dropped;",
        ),
    ] {
        assert!(
            HEADER.contains(declaration),
            "the header declares `{declaration}`"
        );
        let name = declaration
            .split(['[', ';', ' '])
            .find(|word| word.starts_with("trace_"))
            .unwrap();
        assert_eq!(symbol, format!("_ZN3kwb{}{name}E", name.len()));
    }
}
