//! Unit tests and hand-written property tests of edits and source maps.

use miette::Diagnostic;

use crate::{EditError, Indel, Mapped, SourceMap, TextEdit};

/// Builds an edit from `indels` in pass order, applies it to `text` and compares.
fn check(text: &str, indels: &[Indel], expected: &str) {
    let edit = build(indels).expect("edits are disjoint");
    let (output, map) = edit.apply(text).expect("edits fit the text");
    assert_eq!(output, expected);
    assert_eq!(map.original_len(), text.len());
    assert_eq!(map.output_len(), output.len());
}

fn build(indels: &[Indel]) -> Result<TextEdit, EditError> {
    let mut builder = TextEdit::builder();
    for indel in indels {
        builder.push(indel.clone());
    }
    builder.finish()
}

fn ins(offset: usize, text: &str) -> Indel {
    Indel::insert(offset, text)
}

fn del(range: std::ops::Range<usize>) -> Indel {
    Indel::delete(range)
}

fn rep(range: std::ops::Range<usize>, text: &str) -> Indel {
    Indel::replace(range, text)
}

#[test]
fn single_edits() {
    check("abc", &[], "abc");
    check("abc", &[ins(0, "X")], "Xabc");
    check("abc", &[ins(3, "X")], "abcX");
    check("abc", &[del(1..2)], "ac");
    check("abc", &[del(0..3)], "");
    check("abc", &[rep(1..3, "XY")], "aXY");
    check("", &[ins(0, "X")], "X");
}

#[test]
fn several_edits_in_any_order() {
    check(
        "0123456789",
        &[ins(8, "c"), del(4..6), rep(0..2, "a")],
        "a2367c89",
    );
    check(
        "0123456789",
        &[rep(0..2, "a"), del(4..6), ins(8, "c")],
        "a2367c89",
    );
}

#[test]
fn same_offset_insertions_keep_pass_order() {
    check("ab", &[ins(1, "1"), ins(1, "2"), ins(1, "3")], "a123b");
    check("ab", &[ins(1, "3"), ins(1, "2"), ins(1, "1")], "a321b");
    let edit = build(&[ins(1, "x"), ins(0, "y"), ins(1, "z")]).unwrap();
    let order: Vec<&str> = edit.iter().map(|i| i.insert.as_str()).collect();
    assert_eq!(order, ["y", "x", "z"]);
}

#[test]
fn insertion_goes_before_a_deletion_that_starts_at_its_offset() {
    check("abcd", &[ins(1, "<"), rep(1..3, "R")], "a<Rd");
    check("abcd", &[rep(1..3, "R"), ins(1, "<")], "a<Rd");
}

#[test]
fn insertion_at_either_end_of_a_deletion_is_allowed() {
    check("abcd", &[del(1..3), ins(3, ">"), ins(1, "<")], "a<>d");
}

#[test]
fn adjacent_deletions_are_allowed() {
    check("abcd", &[del(1..2), rep(2..3, "C"), del(0..1)], "Cd");
}

#[test]
fn noop_indels_are_dropped() {
    let edit = build(&[ins(2, ""), del(1..1)]).unwrap();
    assert!(edit.is_empty());
    assert_eq!(edit.len(), 0);
}

#[test]
fn multibyte_text() {
    check("aé→b", &[rep(1..3, "e"), ins(6, "!")], "ae→!b");
}

#[test]
fn overlapping_deletions_name_both_ranges() {
    let err = build(&[del(2..6), rep(4..8, "x")]).unwrap_err();
    assert_eq!(
        err,
        EditError::Overlap {
            first: 2..6,
            second: 4..8
        }
    );
    assert_eq!(err.to_string(), "edits 2..6 and 4..8 overlap");
    assert_eq!(err.code().unwrap().to_string(), "kwb::edit::overlap");
    assert!(err.help().is_some());
    let labels: Vec<_> = err
        .labels()
        .unwrap()
        .map(|l| (l.offset(), l.len()))
        .collect();
    assert_eq!(labels, [(2, 4), (4, 4)]);
}

#[test]
fn overlap_names_the_earlier_edit_first() {
    let err = build(&[del(4..8), del(2..6)]).unwrap_err();
    assert_eq!(
        err,
        EditError::Overlap {
            first: 4..8,
            second: 2..6
        }
    );
}

#[test]
fn insertion_inside_a_deletion_is_an_overlap() {
    let err = build(&[del(2..6), ins(3, "x")]).unwrap_err();
    assert_eq!(
        err,
        EditError::Overlap {
            first: 2..6,
            second: 3..3
        }
    );
}

#[test]
fn equal_deletions_overlap() {
    let err = build(&[del(1..3), rep(1..3, "x")]).unwrap_err();
    assert_eq!(
        err,
        EditError::Overlap {
            first: 1..3,
            second: 1..3
        }
    );
}

#[test]
fn deletion_containing_another_overlaps() {
    // The two overlapping indels are not neighbours in sorted order.
    let err = build(&[del(0..10), ins(5, "x"), del(2..3)]).unwrap_err();
    assert_eq!(
        err,
        EditError::Overlap {
            first: 0..10,
            second: 2..3
        }
    );
}

#[test]
#[allow(
    clippy::reversed_empty_ranges,
    reason = "the test builds an inverted range on purpose"
)]
fn inverted_range_is_an_error() {
    let err = build(&[del(3..1)]).unwrap_err();
    assert_eq!(err, EditError::InvertedRange { range: 3..1 });
}

#[test]
fn out_of_bounds_is_caught_at_apply_time() {
    let edit = build(&[ins(1, "x"), del(2..9)]).unwrap();
    let err = edit.apply("abcd").unwrap_err();
    assert_eq!(
        err,
        EditError::OutOfBounds {
            range: 2..9,
            len: 4
        }
    );
    assert_eq!(err.code().unwrap().to_string(), "kwb::edit::out_of_bounds");
}

#[test]
fn char_boundaries_are_checked_at_apply_time() {
    let edit = build(&[del(0..2)]).unwrap();
    let err = edit.apply("aéb").unwrap_err();
    assert_eq!(
        err,
        EditError::NotCharBoundary {
            range: 0..2,
            offset: 2
        }
    );
    let edit = build(&[ins(2, "x")]).unwrap();
    assert!(matches!(
        edit.apply("aéb"),
        Err(EditError::NotCharBoundary { offset: 2, .. })
    ));
}

#[test]
fn union_keeps_self_first_and_reports_overlaps() {
    let a = build(&[ins(1, "a"), del(3..4)]).unwrap();
    let b = build(&[ins(1, "b"), ins(4, "!")]).unwrap();
    let (output, _) = a.clone().union(b).unwrap().apply("wxyz").unwrap();
    assert_eq!(output, "wabxy!");
    let c = build(&[rep(2..4, "q")]).unwrap();
    let err = a.union(c).unwrap_err();
    assert_eq!(
        err,
        EditError::Overlap {
            first: 3..4,
            second: 2..4
        }
    );
}

#[test]
fn source_map_of_a_replacement() {
    // "ab|cd|ef" with "cd" replaced by "XYZ", "<" inserted at 2 and ">" at 4.
    let edit = build(&[rep(2..4, "XYZ"), ins(4, ">"), ins(2, "<")]).unwrap();
    let (output, map) = edit.apply("abcdef").unwrap();
    assert_eq!(output, "ab<XYZ>ef");
    let mapped: Vec<Mapped> = (0..=output.len() + 1).map(|o| map.to_original(o)).collect();
    use Mapped::{Inserted, Original};
    assert_eq!(
        mapped,
        [
            Original(0),
            Original(1),
            Inserted { at: 2 },
            Inserted { at: 2 },
            Inserted { at: 2 },
            Inserted { at: 2 },
            Inserted { at: 4 },
            Original(4),
            Original(5),
            Original(6),
            Original(6),
        ]
    );
    let outputs: Vec<usize> = (0..=7).map(|p| map.to_output(p)).collect();
    assert_eq!(outputs, [0, 1, 3, 3, 7, 8, 9, 9]);
}

#[test]
fn source_map_of_a_pure_deletion() {
    let edit = build(&[del(1..3)]).unwrap();
    let (output, map) = edit.apply("abcd").unwrap();
    assert_eq!(output, "ad");
    let mapped: Vec<Mapped> = (0..=2).map(|o| map.to_original(o)).collect();
    assert_eq!(
        mapped,
        [
            Mapped::Original(0),
            Mapped::Original(3),
            Mapped::Original(4)
        ]
    );
    let outputs: Vec<usize> = (0..=4).map(|p| map.to_output(p)).collect();
    assert_eq!(outputs, [0, 1, 1, 1, 2]);
}

#[test]
fn identity_map() {
    let map = SourceMap::identity(3);
    assert_eq!(map.to_original(2), Mapped::Original(2));
    assert_eq!(map.to_output(3), 3);
    let (_, applied) = TextEdit::default().apply("abc").unwrap();
    assert_eq!(applied, map);
}

#[test]
fn original_line_of_compiler_messages() {
    let original = "int a;\nint b;\nint c;\n";
    let edit = build(&[
        ins(7, "probe();\nprobe();\n"),
        del(14..21),
        ins(21, "tail\n"),
    ])
    .unwrap();
    let (output, map) = edit.apply(original).unwrap();
    assert_eq!(output, "int a;\nprobe();\nprobe();\nint b;\ntail\n");
    let lines: Vec<Option<usize>> = (0..=7)
        .map(|l| map.original_line(&output, original, l))
        .collect();
    assert_eq!(
        lines,
        [
            None,
            Some(1),
            Some(2),
            Some(2),
            Some(2),
            Some(4),
            Some(4),
            None
        ]
    );
    assert_eq!(map.original_line("short", original, 1), None);
}

/// A tiny deterministic pseudo-random generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`; `n` must be positive.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ALPHABET: [&str; 6] = ["a", "b", "\n", "é", "→", "𝄞"];

fn random_text(rng: &mut Rng, max_chars: usize) -> String {
    (0..rng.below(max_chars + 1))
        .map(|_| ALPHABET[rng.below(ALPHABET.len())])
        .collect()
}

/// A char-boundary offset of `text`.
fn random_offset(rng: &mut Rng, text: &str) -> usize {
    let boundaries: Vec<usize> = (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    boundaries[rng.below(boundaries.len())]
}

/// Up to eight random indels on char boundaries of `text`, which may overlap; with
/// `inserts_only` every indel is a non-empty insertion.
fn random_indels(rng: &mut Rng, text: &str, inserts_only: bool) -> Vec<Indel> {
    (0..rng.below(9))
        .map(|_| {
            let a = random_offset(rng, text);
            let b = random_offset(rng, text);
            let insert = random_text(rng, 3);
            match (inserts_only, rng.below(3)) {
                (true, _) => Indel::insert(a, format!("[{insert}]")),
                (false, 0) => Indel::insert(a, insert),
                (false, 1) => Indel::delete(a.min(b)..a.max(b)),
                (false, _) => Indel::replace(a.min(b)..a.max(b), insert),
            }
        })
        .collect()
}

/// Whether two indels touch the same bytes, decided pairwise from the definition.
fn conflict(a: &Indel, b: &Indel) -> bool {
    let inside = |p: usize, d: &std::ops::Range<usize>| d.start < p && p < d.end;
    match (a.delete.is_empty(), b.delete.is_empty()) {
        (true, true) => false,
        (true, false) => inside(a.delete.start, &b.delete),
        (false, true) => inside(b.delete.start, &a.delete),
        (false, false) => a.delete.start < b.delete.end && b.delete.start < a.delete.end,
    }
}

/// The output and the provenance of each output byte (plus the end), computed by
/// splicing the edit's indels from last to first.
fn reference_apply(edit: &TextEdit, text: &str) -> (String, Vec<Mapped>) {
    let mut output = text.to_owned();
    let mut origin: Vec<Mapped> = (0..=text.len()).map(Mapped::Original).collect();
    let indels: Vec<&Indel> = edit.iter().collect();
    for indel in indels.into_iter().rev() {
        let start = indel.delete.start;
        output.replace_range(indel.delete.clone(), &indel.insert);
        let inserted = std::iter::repeat_n(Mapped::Inserted { at: start }, indel.insert.len());
        origin.splice(indel.delete.clone(), inserted);
    }
    (output, origin)
}

/// An edit of the output that undoes `map`, derived from `to_original` alone: it
/// deletes every inserted stretch and puts back every deleted one.
fn inverse(map: &SourceMap, original: &str) -> TextEdit {
    let mut builder = TextEdit::builder();
    let mut expected = 0;
    let mut o = 0;
    while o <= map.output_len() {
        match map.to_original(o) {
            Mapped::Inserted { .. } => {
                let start = o;
                while matches!(map.to_original(o), Mapped::Inserted { .. }) {
                    o += 1;
                }
                builder.delete(start..o);
            }
            Mapped::Original(p) => {
                if p > expected {
                    builder.insert(o, &original[expected..p]);
                }
                expected = p + 1;
                o += 1;
            }
        }
    }
    builder.finish().expect("an inverse is disjoint")
}

#[test]
fn random_edits_apply_and_map_consistently() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut applied = 0;
    for case in 0..600 {
        let text = random_text(&mut rng, 12);
        let indels = random_indels(&mut rng, &text, case % 3 == 0);
        let real: Vec<&Indel> = indels.iter().filter(|i| !i.is_noop()).collect();
        let expect_overlap =
            (0..real.len()).any(|i| (i + 1..real.len()).any(|j| conflict(real[i], real[j])));
        let edit = match build(&indels) {
            Err(EditError::Overlap { first, second }) => {
                assert!(expect_overlap, "case {case}: false overlap in {indels:?}");
                let first = real.iter().position(|i| i.delete == first).unwrap();
                let second = real.iter().rposition(|i| i.delete == second).unwrap();
                assert!(
                    conflict(real[first], real[second]),
                    "case {case}: {indels:?}"
                );
                continue;
            }
            Err(err) => panic!("case {case}: unexpected {err:?}"),
            Ok(edit) => edit,
        };
        assert!(!expect_overlap, "case {case}: missed overlap in {indels:?}");
        applied += 1;

        // The edit is the stable sort of the real indels by (start, end).
        let mut sorted: Vec<&Indel> = real.clone();
        sorted.sort_by_key(|i| (i.delete.start, i.delete.end));
        assert_eq!(edit.iter().collect::<Vec<_>>(), sorted, "case {case}");

        let (output, map) = edit.apply(&text).unwrap();
        let (expected, origin) = reference_apply(&edit, &text);
        assert_eq!(output, expected, "case {case}: {indels:?}");

        for (o, &want) in origin.iter().enumerate() {
            assert_eq!(
                map.to_original(o),
                want,
                "case {case}: output offset {o} of {output:?}"
            );
            if let Mapped::Original(p) = want {
                assert_eq!(map.to_output(p), o, "case {case}: original offset {p}");
            }
        }
        // A deleted byte maps to where its replacement starts: after everything the
        // earlier indels produced.
        let mut shift = 0isize;
        for indel in &edit {
            for p in indel.delete.clone() {
                let want = indel.delete.start.checked_add_signed(shift).unwrap();
                assert_eq!(map.to_output(p), want, "case {case}: deleted offset {p}");
            }
            shift += indel.insert.len() as isize - indel.delete.len() as isize;
        }
        let outputs: Vec<usize> = (0..=text.len()).map(|p| map.to_output(p)).collect();
        assert!(
            outputs.is_sorted(),
            "case {case}: to_output not monotone: {outputs:?}"
        );

        let (restored, _) = inverse(&map, &text).apply(&output).unwrap();
        assert_eq!(restored, text, "case {case}: {indels:?}");
        if case % 3 == 0 {
            assert!(inverse(&map, &text).iter().all(|i| i.insert.is_empty()));
        }

        // Splitting the edit in two and taking the union changes nothing.
        let (left, right) = indels.split_at(indels.len() / 2);
        let union = build(left).unwrap().union(build(right).unwrap()).unwrap();
        assert_eq!(union, edit, "case {case}");
    }
    assert!(applied > 300, "only {applied} disjoint cases");
}
