//! Human output: diagnostics and annotated source snippets in miette's graphical style.

use std::io::Write;

use kwb_ladder::Comparison;
use kwb_sites::{Kernel, Site};
use miette::{Diagnostic, GraphicalReportHandler, LabeledSpan, NamedSource, Report, Severity};

/// Prints a diagnostic to stderr with miette's graphical handler.
pub fn error(report: Report) {
    let mut out = String::new();
    let handler = GraphicalReportHandler::new();
    if handler.render_report(&mut out, report.as_ref()).is_err() {
        out = format!("{report}\n");
    }
    let _ = std::io::stderr().write_all(out.as_bytes());
}

/// A kernel's sites as one report: the kernel in the header, each site a label.
#[derive(Debug)]
struct KernelReport {
    header: String,
    src: NamedSource<String>,
    labels: Vec<LabeledSpan>,
    footer: Option<String>,
}

impl std::fmt::Display for KernelReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.header)
    }
}

impl std::error::Error for KernelReport {}

impl Diagnostic for KernelReport {
    fn severity(&self) -> Option<Severity> {
        Some(Severity::Advice)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.src)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.footer
            .as_ref()
            .map(|f| Box::new(f) as Box<dyn std::fmt::Display>)
    }
}

/// Renders one kernel of `file` with its sites labelled.
pub fn kernel(file: &str, source: &str, kernel: &Kernel) -> String {
    let params: Vec<String> = kernel
        .template_params
        .iter()
        .map(|p| match (&p.ty, &p.default) {
            (Some(ty), _) => format!("{ty} {}", p.name),
            (None, _) if p.kind == "type" => format!("class {}", p.name),
            _ => p.name.clone(),
        })
        .collect();
    let template = if params.is_empty() {
        String::new()
    } else {
        format!(" template<{}>", params.join(", "))
    };
    let header = format!(
        "{} `{}` ({}){} at {}:{} — {} sites",
        "kernel",
        kernel.name,
        kernel.role,
        template,
        file,
        kernel.line,
        kernel.sites.len()
    );
    let labels = kernel.sites.iter().map(label).collect();
    let footer = (kernel.syntax_errors > 0).then(|| {
        format!(
            "{} syntax error regions inside this function; sites inside them may be missing",
            kernel.syntax_errors
        )
    });
    let report = KernelReport {
        header,
        src: NamedSource::new(file, source.to_owned()),
        labels,
        footer,
    };
    let mut out = String::new();
    let handler = GraphicalReportHandler::new().with_context_lines(0);
    if handler.render_report(&mut out, &report).is_err() {
        out = format!("{}\n", report.header);
    }
    out
}

fn label(site: &Site) -> LabeledSpan {
    // Label the first line only: whole loops would swamp the snippet.
    let first_line_len = site.text.len().max(1);
    let len = (site.range.end - site.range.start).min(first_line_len);
    let mut text = site.kind.name().to_owned();
    if let Some(note) = &site.note {
        text.push_str(": ");
        text.push_str(note);
    }
    LabeledSpan::new(Some(text), site.range.start, len)
}

/// Lines of `source` (1-based, with a label each) as one snippet under `header`; the
/// labels cover each line's text without its indentation. Lines past the end are
/// left out.
pub fn lines(file: &str, source: &str, header: &str, marks: &[(u32, String)]) -> String {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(source.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let labels = marks
        .iter()
        .filter_map(|(line, text)| {
            let start = *starts.get((*line as usize).checked_sub(1)?)?;
            let end = source[start..]
                .find('\n')
                .map_or(source.len(), |e| start + e);
            let indent = source[start..end].len() - source[start..end].trim_start().len();
            Some(LabeledSpan::new(
                Some(text.clone()),
                start + indent,
                (end - start - indent).max(1),
            ))
        })
        .collect();
    let report = KernelReport {
        header: header.to_owned(),
        src: NamedSource::new(file, source.to_owned()),
        labels,
        footer: None,
    };
    let mut out = String::new();
    let handler = GraphicalReportHandler::new().with_context_lines(1);
    if handler.render_report(&mut out, &report).is_err() {
        out = format!("{header}\n");
    }
    out
}

/// A ladder comparison for people; `at_first` (what was written and expected there) follows
/// the first mismatch's coordinates when the caller knows it.
pub fn comparison(
    out: &mut impl Write,
    c: &Comparison,
    at_first: Option<String>,
) -> std::io::Result<()> {
    let verdict = if c.pass { "PASS" } else { "FAIL" };
    let how = if c.exact {
        "exact".to_owned()
    } else {
        format!("tolerance {:.3e}", c.tolerance)
    };
    writeln!(
        out,
        "{verdict} {} ({how}): {} mismatches, max |out - answer| {}, rel-L2 {:.3e}, ratio {:.4}, NaN {}, Inf {}",
        c.rung, c.mismatches, c.max_abs, c.rel_l2, c.ratio, c.nan, c.inf
    )?;
    if let Some((m, n)) = c.first_mismatch {
        match at_first {
            Some(detail) => writeln!(out, "first mismatch at (m, n) = ({m}, {n}): {detail}")?,
            None => writeln!(out, "first mismatch at (m, n) = ({m}, {n})")?,
        }
    }
    if !c.pass {
        let g = &c.tiles;
        writeln!(
            out,
            "largest error per {} x {} tile ({} x {} tiles; . = exact):",
            g.tile.0, g.tile.1, g.rows, g.cols
        )?;
        for r in 0..g.rows.min(32) {
            let row: Vec<String> = (0..g.cols.min(16))
                .map(|col| {
                    let e = g.max_error[r * g.cols + col];
                    if e == 0.0 {
                        ".".to_owned()
                    } else {
                        format!("{e:.3}")
                    }
                })
                .collect();
            writeln!(out, "  {}", row.join(" "))?;
        }
    }
    Ok(())
}
