//! `KWB_TRACE`: what to instrument, as `key=value` pairs separated by `;` (or, with
//! `KWB_TRACE=@FILE`, one pair a line in FILE, `#` starting a comment). Keys:
//! `kernel`, `gate`, `probe`, `cta`, `k-tiles`, `rows`, `values`, `full-tile`,
//! `absmax-only`, `summary`, `screen` (a summary of one row per site, every K tile folded,
//! a cell per warp), `max-regs` (the original kernel's registers a thread: the trace
//! keeps the CTAs an SM those give; `auto`: kwb-nvcc reads them from a compile of the
//! original), `overlay` (`on`, the default: also instrument the
//! included headers that hold a staged mainloop; `off`). An unknown key or a bad value is an error: a
//! build never goes on silently without the probes it was asked for.

use kwb_instrument::{Config, Probes, options};

/// The keys `KWB_TRACE` takes.
pub const KEYS: &str = "kernel, gate, probe, cta, k-tiles, rows, values, full-tile, absmax-only, summary, screen, max-regs, overlay";

/// A parsed `KWB_TRACE`.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The instrumenter's settings (its `file_name` is set per file).
    pub config: Config,
    /// Whether included headers are instrumented into an overlay too.
    pub overlay: bool,
    /// `max-regs=auto`: kwb-nvcc compiles the original first for its kernels'
    /// registers (ptxas), holds the trace build to them, and says where the trace
    /// build spills and the original did not.
    pub floor: bool,
    /// The spec's text, normalized (`key=value;…` in the order given): part of the
    /// cache key.
    pub canonical: String,
}

impl Spec {
    /// Reads the pairs of `text` (the variable's value, or the file's text when it
    /// named one).
    pub fn parse(text: &str) -> Result<Spec, String> {
        let mut config = Config {
            cta: Some([0, 0, 0]),
            ..Config::default()
        };
        let mut overlay = true;
        let mut floor = false;
        let mut canonical = Vec::new();
        let pairs = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .flat_map(|l| l.split(';'))
            .map(str::trim)
            .filter(|p| !p.is_empty());
        for pair in pairs {
            let (key, value) = match pair.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => (pair, ""),
            };
            let flag = |v: &str| match v {
                "" | "1" | "on" | "true" | "yes" => Ok(true),
                "0" | "off" | "false" | "no" => Ok(false),
                other => Err(format!("`{key}={other}`: expected on or off")),
            };
            let need = |v: &str| {
                if v.is_empty() {
                    Err(format!("`{key}` needs a value: {key}=…"))
                } else {
                    Ok(v.to_owned())
                }
            };
            match key {
                "kernel" => config.kernel = Some(need(value)?),
                "gate" => config.gate = Some(need(value)?),
                "probe" => config.probes = Probes::parse(&need(value)?)?,
                "cta" => config.cta = options::cta(&need(value)?)?,
                "k-tiles" => config.k_tiles = Some(options::k_tiles(&need(value)?)?),
                "rows" => config.rows = Some(options::rows(&need(value)?)?),
                "values" => {
                    let n: u32 = need(value)?
                        .parse()
                        .map_err(|_| format!("`values={value}`: expected 0 to 8"))?;
                    if n > 8 {
                        return Err(format!("`values={value}`: expected 0 to 8"));
                    }
                    config.values = Some(n);
                }
                "full-tile" => config.full_tile = flag(value)?,
                "absmax-only" => config.absmax_only = flag(value)?,
                "summary" => config.summary = flag(value)?,
                "screen" => config.screen = flag(value)?,
                "max-regs" if value == "auto" => floor = true,
                "max-regs" => {
                    let n: u32 = need(value)?
                        .parse()
                        .ok()
                        .filter(|n| (1..=255).contains(n))
                        .ok_or_else(|| format!("`max-regs={value}`: expected 1 to 255, or auto"))?;
                    config.max_regs = Some(n);
                }
                "overlay" => overlay = flag(value)?,
                other => {
                    return Err(format!(
                        "`{other}` is not a KWB_TRACE key; the keys are {KEYS}"
                    ));
                }
            }
            canonical.push(format!("{key}={value}"));
        }
        if canonical.is_empty() {
            return Err(format!(
                "KWB_TRACE names nothing; give at least one of {KEYS}"
            ));
        }
        if config.full_tile && config.cta.is_none() {
            return Err(
                "`full-tile` keeps one CTA's tiles: give `cta=X,Y,Z`, not `all`".to_owned(),
            );
        }
        if let Some(conflict) =
            options::summary_conflict(config.summarizes(), config.values, config.full_tile)
        {
            return Err(format!("`summary`: {conflict}"));
        }
        Ok(Spec {
            config,
            overlay,
            floor,
            canonical: canonical.join(";"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_regs_takes_a_register_count() {
        let s = Spec::parse("screen; max-regs=58").unwrap();
        assert_eq!(s.config.max_regs, Some(58));
        assert_eq!(s.canonical, "screen=;max-regs=58");
        for bad in ["max-regs=0", "max-regs=256", "max-regs=many", "max-regs"] {
            assert!(Spec::parse(bad).is_err(), "{bad}");
        }
        assert!(!s.floor);
        let auto = Spec::parse("max-regs=auto").unwrap();
        assert!(auto.floor && auto.config.max_regs.is_none());
    }

    #[test]
    fn pairs_and_files_read_the_same() {
        let s = Spec::parse("kernel=megakernel; gate=REDUCTION_SIZE == 6144;rows=< kBatchRows;probe=accumulator,epilogue").unwrap();
        assert_eq!(s.config.kernel.as_deref(), Some("megakernel"));
        assert_eq!(s.config.gate.as_deref(), Some("REDUCTION_SIZE == 6144"));
        assert_eq!(s.config.rows.as_deref(), Some("kBatchRows"));
        assert!(
            s.config.probes.accumulator && s.config.probes.epilogue && !s.config.probes.operands
        );
        assert_eq!(s.config.cta, Some([0, 0, 0]), "one CTA by default");
        assert!(s.overlay);
        let f = Spec::parse("# the down projection\nkernel = megakernel\ngate = REDUCTION_SIZE == 6144\nrows = < kBatchRows\nprobe = accumulator,epilogue\n").unwrap();
        assert_eq!(f.canonical, s.canonical);
        let all = Spec::parse("cta=all;values=0;absmax-only;overlay=off").unwrap();
        assert_eq!(
            (
                all.config.cta,
                all.config.values,
                all.config.absmax_only,
                all.overlay
            ),
            (None, Some(0), true, false)
        );
    }

    #[test]
    fn a_screen_is_a_summary() {
        let s = Spec::parse("cta=all;screen;probe=operands,final").unwrap();
        assert!(s.config.summarizes() && s.config.screen);
        // A later `summary=off` does not take the screen's summary away.
        assert!(
            Spec::parse("screen;summary=off")
                .unwrap()
                .config
                .summarizes()
        );
        let e = Spec::parse("screen;values=2").unwrap_err();
        assert!(e.contains("`summary`: a summary keeps no samples"), "{e}");
    }

    #[test]
    fn a_summary_screens_every_cta() {
        let s = Spec::parse("cta=all;summary;probe=accumulator,epilogue").unwrap();
        assert!(s.config.summary);
        assert_eq!(s.config.cta, None);
        let e = Spec::parse("cta=all;summary;values=4").unwrap_err();
        assert!(e.contains("`summary`: a summary keeps no samples"), "{e}");
    }

    #[test]
    fn bad_specs_are_errors_that_say_what_is_accepted() {
        let e = Spec::parse("kernel=k;colour=red").unwrap_err();
        assert!(
            e.contains("`colour` is not a KWB_TRACE key") && e.contains("kernel, gate"),
            "{e}"
        );
        assert!(Spec::parse("").unwrap_err().contains("names nothing"));
        assert!(
            Spec::parse("probe=everything")
                .unwrap_err()
                .contains("not a probe kind")
        );
        assert!(Spec::parse("values=9").is_err());
        assert!(Spec::parse("cta=1,2").is_err());
        assert!(Spec::parse("gate=").unwrap_err().contains("needs a value"));
        assert!(
            Spec::parse("cta=all;full-tile")
                .unwrap_err()
                .contains("one CTA")
        );
        assert!(Spec::parse("overlay=maybe").is_err());
    }
}
