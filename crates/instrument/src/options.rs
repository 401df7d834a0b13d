//! The text forms of the instrumenter's options, shared by every front end that takes
//! them (`kwb-instrument`'s flags, `kwb-nvcc`'s `KWB_TRACE` spec).

/// A CTA filter: `X,Y,Z`, or `all` (`None`).
pub fn cta(text: &str) -> Result<Option<[u32; 3]>, String> {
    if text.trim() == "all" {
        return Ok(None);
    }
    let numbers: Result<Vec<u32>, _> = text.split(',').map(|p| p.trim().parse::<u32>()).collect();
    match numbers.as_deref() {
        Ok([x, y, z]) => Ok(Some([*x, *y, *z])),
        _ => Err("expected X,Y,Z (three non-negative integers) or `all`".to_owned()),
    }
}

/// A row bound: `< EXPR` or `EXPR`, one C++ expression.
pub fn rows(text: &str) -> Result<String, String> {
    let expr = text.trim().trim_start_matches('<').trim();
    if expr.is_empty() {
        return Err("expected '< EXPR', e.g. '< kBatchRows'".to_owned());
    }
    if expr.contains([';', '{', '}']) || expr.contains("/*") || expr.contains("//") {
        return Err(format!(
            "`{expr}` is not one expression (no `;`, braces or comments)"
        ));
    }
    Ok(expr.to_owned())
}

/// A K-tile range `A..B`, `[A, B)`.
pub fn k_tiles(text: &str) -> Result<(u32, u32), String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| "expected A..B, e.g. 0..4".to_owned())?;
    let index = |t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| format!("`{t}` is not a K tile index"))
    };
    let (a, b) = (index(a)?, index(b)?);
    if b <= a {
        return Err(format!("the range {a}..{b} is empty"));
    }
    Ok((a, b))
}

/// Why a summary (`--summary`, `summary`) cannot be asked for with these options, if
/// it cannot: it keeps no samples and no tiles.
pub fn summary_conflict(summary: bool, values: Option<u32>, full_tile: bool) -> Option<String> {
    if !summary {
        return None;
    }
    if let Some(n @ 1..) = values {
        return Some(format!(
            "a summary keeps no samples, so it cannot keep {n} values a record; drop the values \
             option (or give 0), or drop the summary to trace records with samples"
        ));
    }
    if full_tile {
        return Some(
            "a summary folds every CTA into one table and keeps no tiles; trace one CTA \
             with the full tile and without the summary"
                .to_owned(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_takes_no_samples_or_tiles() {
        assert_eq!(summary_conflict(false, Some(8), true), None);
        assert_eq!(summary_conflict(true, Some(0), false), None);
        assert_eq!(summary_conflict(true, None, false), None);
        assert!(
            summary_conflict(true, Some(3), false)
                .unwrap()
                .contains("3 values")
        );
        assert!(
            summary_conflict(true, None, true)
                .unwrap()
                .contains("no tiles")
        );
    }

    #[test]
    fn options_read_and_refuse() {
        assert_eq!(cta("1, 0,0"), Ok(Some([1, 0, 0])));
        assert_eq!(cta("all"), Ok(None));
        assert!(cta("1,2").is_err());
        assert_eq!(rows("< kBatchRows"), Ok("kBatchRows".to_owned()));
        assert!(rows("a; b").is_err());
        assert_eq!(k_tiles("0..4"), Ok((0, 4)));
        assert!(k_tiles("4..4").is_err());
        assert!(k_tiles("x..4").is_err());
    }
}
