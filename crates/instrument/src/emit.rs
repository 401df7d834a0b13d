//! The one place probe text is built and inserted: every probe is an
//! `if constexpr (kwb::enabled && (GATE)) { … }` between kwb markers.
//!
//! A probe's calls take the instantiation tag as [`TAG`], the parameter of a generic
//! lambda that `kwb::dependent` calls only in a trace build, so every such call is
//! dependent: in a kernel that is not a template, a discarded `if constexpr` branch is
//! still checked, and a value of a type the runtime cannot read must not break the
//! build without `KWB_TRACE` (nor with it: the runtime's value model records it as
//! not probed).

use kwb_edit::TextEditBuilder;
use kwb_syntax::Parsed;

use crate::markers::wrap;
use crate::plan::ProbeInfo;

/// Collects the insertions and the probe table while the planners walk the kernels.
pub(crate) struct Emitter<'p> {
    pub parsed: &'p Parsed,
    /// The instantiation tag: `kwb_runtime::tag` of the gate text.
    pub tag: u32,
    id_base: u32,
    builder: TextEditBuilder,
    pub probes: Vec<ProbeInfo>,
    pub notes: Vec<String>,
    /// Which array index of each fragment picks its MMA tile.
    pub tile_dims: crate::fragments::TileDims,
    /// Each function's fragment layout.
    pub layouts: crate::fragments::Layouts,
    /// The kernels' CTA tile origin locals, for each record's tile_m / tile_n.
    pub origins: crate::tile::Origins,
    /// A screen build's folds (`None`: every other build, whose probes take bare ids).
    folds: Option<crate::folds::Folds>,
    /// A full-tile build: every value a probe reads is kept with its coordinates, so a
    /// tile is read in logical order where the code shows it.
    pub full_tile: bool,
}

impl<'p> Emitter<'p> {
    pub fn new(parsed: &'p Parsed, tag: u32, id_base: u32) -> Emitter<'p> {
        Emitter {
            parsed,
            tag,
            id_base,
            builder: kwb_edit::TextEdit::builder(),
            probes: Vec::new(),
            notes: Vec::new(),
            tile_dims: crate::fragments::TileDims::default(),
            layouts: crate::fragments::Layouts::default(),
            origins: crate::tile::Origins::default(),
            folds: None,
            full_tile: false,
        }
    }

    /// Makes this a screen build's emitter: each probe's site folds into registers
    /// (see [`crate::folds`]).
    pub fn fold_sites(&mut self) {
        self.folds = Some(crate::folds::Folds::default());
    }

    /// The site argument of probe `id`, which reads values of `kind` (the name of a
    /// `kwb::Kind`): the id, or in a screen build the id with its fold.
    pub fn site(&mut self, id: u32, kind: &'static str) -> String {
        match &mut self.folds {
            Some(folds) => folds.site(id, kind),
            None => id.to_string(),
        }
    }

    /// The id the next probe gets.
    pub fn next_id(&self) -> u32 {
        self.id_base + self.probes.len() as u32
    }

    /// In a screen build, has `kernel` hold the folds of `helper`, which it calls for
    /// its MMA in the statements at `calls` (see [`crate::folds`]); elsewhere nothing.
    pub fn thread_folds(
        &mut self,
        kernel: std::ops::Range<usize>,
        helper: std::ops::Range<usize>,
        calls: &[std::ops::Range<usize>],
        helper_name: &str,
    ) {
        if let Some(folds) = &mut self.folds
            && let Some(thread) =
                crate::folds::thread_of(self.parsed, kernel, helper, calls, helper_name)
        {
            folds.thread(thread);
        }
    }

    /// Inserts `body` gated on `gate` at byte `at` and records the probe.
    /// `body` may use `{id}`-free text: the caller formats the id in. Its
    /// [`crate::tile::TILE`] becomes the tile origin in scope at `at`.
    pub fn probe(&mut self, at: usize, gate: &str, body: &str, info: ProbeInfo) {
        debug_assert_eq!(info.id, self.next_id());
        self.gate_before(at, gate, body);
        self.probes.push(info);
    }

    /// Inserts one gated `body` at byte `at` that holds two probes (ids consecutive,
    /// as `infos` are) and records both.
    pub fn probe_pair(&mut self, at: usize, gate: &str, body: &str, infos: [ProbeInfo; 2]) {
        let [first, second] = infos;
        debug_assert_eq!(first.id, self.next_id());
        debug_assert_eq!(second.id, first.id + 1);
        self.gate_before(at, gate, body);
        self.probes.push(first);
        self.probes.push(second);
    }

    /// Inserts `body` behind the gate at byte `at`, before the code there (a space
    /// after it), its [`crate::tile::TILE`] replaced by the tile origin in scope there;
    /// the caller records the probe, if it is one.
    pub fn gate_before(&mut self, at: usize, gate: &str, body: &str) {
        let text = gated_text(gate, body, self.tag);
        self.insert(at, &format!("{text} "));
    }

    /// Inserts `body` behind the gate at byte `at`, after the code there (a space
    /// before it); the caller records the probe, if it is one.
    pub fn gate_after(&mut self, at: usize, gate: &str, body: &str) {
        let text = gated_text(gate, body, self.tag);
        self.insert(at, &format!(" {text}"));
    }

    /// Inserts plain kwb text (a counter declaration, a trailing probe with its own
    /// spacing) at byte `at`.
    pub fn insert(&mut self, at: usize, text: &str) {
        let text = self.origins.text(text, at);
        if let Some(folds) = &mut self.folds {
            folds.place(self.parsed, at, &text);
        }
        self.builder.insert(at, wrap(&text));
    }

    /// Records a probe whose text was inserted with [`Emitter::insert`].
    pub fn record(&mut self, info: ProbeInfo) {
        debug_assert_eq!(info.id, self.next_id());
        self.probes.push(info);
    }

    pub fn note(&mut self, text: String) {
        if !self.notes.contains(&text) {
            self.notes.push(text);
        }
    }

    /// What the planners emitted.
    pub fn finish(self) -> Emitted {
        let mut folds = kwb_edit::TextEdit::builder();
        if let Some(f) = &self.folds {
            for (at, text) in f.declarations(self.tag) {
                folds.insert(at, wrap(&text));
            }
        }
        Emitted {
            insertions: self.builder,
            folds,
            probes: self.probes,
            notes: self.notes,
        }
    }
}

/// The insertions and what they hold.
pub(crate) struct Emitted {
    /// The probes, counters and other kwb text.
    pub insertions: TextEditBuilder,
    /// A screen's fold declarations: an edit of their own, which goes before the
    /// insertions at the same byte.
    pub folds: TextEditBuilder,
    /// The probes, in id order.
    pub probes: Vec<ProbeInfo>,
    pub notes: Vec<String>,
}

/// The name probe text gives the instantiation tag: the parameter of the generic
/// lambda [`gated_text`] wraps a body that names it in.
pub(crate) const TAG: &str = "kwb_tag";

/// `body` behind the compile-time gate: `if constexpr (kwb::enabled && (GATE)) { BODY }`,
/// and where `body` names [`TAG`], inside `kwb::dependent(TAG_VALUE, [&](auto kwb_tag)
/// { BODY })`, so its calls are checked only when a trace build instantiates them.
fn gated_text(gate: &str, body: &str, tag: u32) -> String {
    if body.contains(TAG) {
        format!(
            "if constexpr (kwb::enabled && ({gate})) {{ kwb::dependent(0x{tag:08x}u, [&](auto {TAG}) {{ {body} }}); }}"
        )
    } else {
        format!("if constexpr (kwb::enabled && ({gate})) {{ {body} }}")
    }
}
