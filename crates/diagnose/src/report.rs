//! The diagnosis as the user reads it: one screen for the terminal, `report.md` ready
//! to paste into a bug report, and the JSON schema (`Diagnosis` serialized).

use kwb_runtime::{Kind, Trace};
use serde::Serialize;

use crate::descriptor::DescriptorIssue;
use crate::ladder::{RungOutcome, RungState};
use crate::stage::{Finding, Stage, Status};
use crate::verdict::{NanOrigin, Verdict};

/// Everything `kwb diagnose` concluded, and from what. Serialized, this is the
/// `--json` output and report.json.
#[derive(Clone, Debug, Serialize)]
pub struct Diagnosis {
    /// The instantiation under suspicion.
    pub instantiation: String,
    /// The file it came from.
    pub source: String,
    pub verdict: Verdict,
    /// What each track found (Track A first).
    pub evidence: Vec<Evidence>,
    /// The ladder's rungs, in order.
    pub rungs: Vec<RungOutcome>,
    /// The probe sites of the stage the verdict names (from the trace's site table).
    pub sites: Vec<SiteRef>,
    pub nan_origin: Option<NanOrigin>,
    /// TMA maps that differ from their operand's canonical map: from the source (the
    /// static check), and as the kernel received them on the GPU.
    pub descriptors: Vec<DescriptorIssue>,
    /// The TMA maps the kernel received, one line each as `kwb run` prints them (empty
    /// without a GPU, or for a kernel that takes none).
    pub maps: Vec<String>,
    /// Why a track did not run (no GPU, no trace), when one did not.
    pub not_run: Vec<String>,
    /// The command that reruns the reproducer alone.
    pub reproduce: String,
}

/// One track's finding.
#[derive(Clone, Debug, Serialize)]
pub struct Evidence {
    /// "trace" (Track A) or "ladder" (Track B).
    pub track: &'static str,
    pub finding: Finding,
}

/// A source line of the implicated stage.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteRef {
    pub file: String,
    pub line: u32,
    pub text: String,
    pub kind: &'static str,
}

/// The sites of `trace` that probe `stage`, one per site id, by line.
pub fn sites_of(trace: &Trace, stage: Stage) -> Vec<SiteRef> {
    let kinds: &[Kind] = match stage {
        Stage::OperandLoad | Stage::Descriptor => &[Kind::OperandA, Kind::OperandB, Kind::Load],
        Stage::Mma => &[Kind::Accumulator],
        Stage::Epilogue => &[Kind::Epilogue],
    };
    let mut ids: Vec<u32> = trace
        .records
        .iter()
        .filter(|r| r.kind().is_some_and(|k| kinds.contains(&k)))
        .map(|r| r.site)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut out: Vec<SiteRef> = ids
        .into_iter()
        .filter_map(|id| {
            let site = trace.site(id)?;
            let kind = trace
                .records
                .iter()
                .find(|r| r.site == id)
                .and_then(|r| r.kind())
                .map_or("?", |k| k.name());
            Some(SiteRef {
                file: site.file.clone(),
                line: site.line,
                text: site.text.trim().to_owned(),
                kind,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    out
}

fn stage_text(v: &Verdict) -> String {
    let Some(stage) = v.stage else {
        return "none".to_owned();
    };
    let mut text = stage.as_str().to_owned();
    if !v.alternatives.is_empty() {
        let others: Vec<&str> = v.alternatives.iter().map(|s| s.as_str()).collect();
        text.push_str(&format!(" (or {})", others.join(", ")));
    }
    text
}

/// The verdict line: status, stage, and the numbers that make it.
pub fn headline(d: &Diagnosis) -> String {
    let v = &d.verdict;
    let mut line = format!("{}: {}", v.status.as_str(), stage_text(v));
    if let Some(f) = v.factor {
        line.push_str(&format!(", factor {f:.4}"));
    }
    if let Some(t) = v.k_tile {
        line.push_str(&format!(", from K tile {t}"));
    }
    line
}

/// How a rung ended, as the reports write it.
fn state_word(state: RungState) -> &'static str {
    match state {
        RungState::Pass => "pass",
        RungState::Fail => "FAIL",
        RungState::Hang => "HANG",
        RungState::Error => "ERROR",
        RungState::Fault => "FAULT",
    }
}

fn rung_line(r: &RungOutcome) -> String {
    let state = state_word(r.state);
    let mut line = format!("{:<14} {state}", r.rung);
    if r.state == RungState::Fail {
        line.push_str(&format!("  {} wrong, ratio {:.4}", r.mismatches, r.ratio));
        if r.non_finite > 0 {
            line.push_str(&format!(", {} NaN/Inf", r.non_finite));
        }
        if let Some(p) = &r.pattern {
            line.push_str(&format!("  [{}]", p.pattern.label()));
        }
    }
    line
}

/// One screen: the verdict, why, what is missing, the rungs, the sites.
pub fn terminal(d: &Diagnosis) -> String {
    let v = &d.verdict;
    let mut out = vec![
        format!("{} ({})", d.instantiation, d.source),
        headline(d),
        format!("  {}", v.summary),
    ];
    if let Some(c) = &v.confound {
        out.push(format!("  confound: {}", c.describe()));
    }
    for m in &v.missing {
        out.push(format!("  missing: {m}"));
    }
    if let Some(n) = &d.nan_origin {
        out.push(format!(
            "  first NaN/Inf: {} at {} (site {}, {} values)",
            n.stage.as_str(),
            n.k_tile
                .map_or("the end of the K loop".to_owned(), |t| format!(
                    "K tile {t}"
                )),
            n.site,
            n.count
        ));
    }
    for issue in &d.descriptors {
        out.push(format!("descriptor: {}", issue.describe()));
    }
    for map in &d.maps {
        out.push(map.clone());
    }
    for e in &d.evidence {
        out.push(format!("{}: {}", e.track, e.finding.summary));
        if e.track == "trace" {
            for line in &e.finding.evidence {
                out.push(format!("  {line}"));
            }
        }
    }
    if !d.rungs.is_empty() {
        out.push("rungs:".to_owned());
        out.extend(d.rungs.iter().map(|r| format!("  {}", rung_line(r))));
    }
    for why in &d.not_run {
        out.push(format!("not run: {why}"));
    }
    if !d.sites.is_empty() {
        out.push("where:".to_owned());
        for s in &d.sites {
            out.push(format!("  {}:{} ({}): {}", s.file, s.line, s.kind, s.text));
        }
    }
    out.push(format!("reproduce: {}", d.reproduce));
    out.join("\n") + "\n"
}

/// report.md: the verdict, the evidence table, the rungs with their pictures, the
/// implicated lines, and the command that reproduces it.
pub fn markdown(d: &Diagnosis, pictures: &[(String, String)]) -> String {
    let v = &d.verdict;
    let mut md = format!(
        "# kwb diagnose: {}\n\nSource: `{}`\n\n## Verdict\n\n**{}**\n\n{}\n",
        d.instantiation,
        d.source,
        headline(d),
        v.summary
    );
    if let Some(c) = &v.confound {
        md.push_str(&format!("\nConfound: {}\n", c.describe()));
    }
    if v.status == Status::Draft && !v.missing.is_empty() {
        md.push_str("\nA draft. What would settle it:\n");
        for m in &v.missing {
            md.push_str(&format!("- {m}\n"));
        }
    }
    md.push_str("\n## Evidence\n\n| track | finding | status |\n|---|---|---|\n");
    for e in &d.evidence {
        md.push_str(&format!(
            "| {} | {} | {} |\n",
            e.track,
            e.finding.summary.replace('|', "\\|"),
            e.finding.status.as_str()
        ));
    }
    for e in d.evidence.iter().filter(|e| e.track == "trace") {
        md.push_str("\nThe trace:\n");
        for line in &e.finding.evidence {
            md.push_str(&format!("- {line}\n"));
        }
    }
    if let Some(n) = &d.nan_origin {
        md.push_str(&format!(
            "\nFirst NaN/Inf: {} at {} (site {}).\n",
            n.stage.as_str(),
            n.k_tile
                .map_or("the end of the K loop".to_owned(), |t| format!(
                    "K tile {t}"
                )),
            n.site
        ));
    }
    if !d.descriptors.is_empty() {
        md.push_str("\nTMA maps that differ from their operand's canonical map:\n");
        for issue in &d.descriptors {
            md.push_str(&format!("- {}\n", issue.describe()));
        }
    }
    if !d.maps.is_empty() {
        md.push_str("\nTMA maps as the kernel received them:\n");
        for map in &d.maps {
            md.push_str(&format!("- {map}\n"));
        }
    }
    if !d.rungs.is_empty() {
        md.push_str(
            "\n## Rungs\n\n| rung | outcome | wrong | ratio | pattern |\n|---|---|---|---|---|\n",
        );
        for r in &d.rungs {
            let pattern = r
                .pattern
                .as_ref()
                .map_or(String::new(), |p| p.pattern.label());
            let ratio = if r.ratio.is_finite() {
                format!("{:.4}", r.ratio)
            } else {
                "-".to_owned()
            };
            md.push_str(&format!(
                "| {} | {} | {} | {ratio} | {} |\n",
                r.rung,
                state_word(r.state),
                r.mismatches,
                pattern
            ));
        }
        for (rung, file) in pictures {
            md.push_str(&format!("\n![{rung}: |kernel - reference|]({file})\n"));
        }
    }
    if !d.not_run.is_empty() {
        md.push('\n');
        for why in &d.not_run {
            md.push_str(&format!("Not run: {why}\n"));
        }
    }
    if !d.sites.is_empty() {
        md.push_str("\n## Where\n\n```\n");
        for s in &d.sites {
            md.push_str(&format!(
                "{}:{} ({})\n    {}\n",
                s.file, s.line, s.kind, s.text
            ));
        }
        md.push_str("```\n");
    }
    md.push_str(&format!("\n## Reproduce\n\n```sh\n{}\n```\n", d.reproduce));
    md
}
