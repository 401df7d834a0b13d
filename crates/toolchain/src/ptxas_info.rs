//! What ptxas says of each kernel it compiles (`-Xptxas -v`): registers a thread,
//! stack frame and spill bytes. kwb-nvcc compiles the original and the trace build
//! with it to hold the trace to the original's register count (the occupancy floor)
//! and to say, with the numbers, where the trace build spills and the original did
//! not.
//!
//! Invariant: only entry functions (`__global__`) are read, each once per
//! architecture; a device function's properties inside an entry's block are not the
//! entry's.

/// One kernel's resources for one architecture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// The entry function's (mangled) name.
    pub function: String,
    /// The architecture it was compiled for (`sm_90a`).
    pub arch: String,
    pub registers: u32,
    pub stack: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
}

impl Resources {
    /// Whether this build of the kernel uses local memory the other did not: a larger
    /// stack frame or more spill traffic.
    pub fn spills_beyond(&self, other: &Resources) -> bool {
        self.stack > other.stack
            || self.spill_stores > other.spill_stores
            || self.spill_loads > other.spill_loads
    }

    /// The function's name as its source spells it, without template or parameter
    /// lists (`cute::gemm_device<…>` for `_ZN4cute11gemm_deviceI…`): a kernel's
    /// mangled name runs to thousands of characters. The mangled name where it does
    /// not read as a plain or nested one.
    pub fn name(&self) -> String {
        demangled_prefix(&self.function).unwrap_or_else(|| self.function.clone())
    }

    /// `128 registers, a 368-byte stack frame, 120 bytes spill stores`.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("{} registers", self.registers)];
        parts.push(if self.stack == 0 {
            "no stack frame".to_owned()
        } else {
            format!("a {}-byte stack frame", self.stack)
        });
        parts.push(if self.spill_stores + self.spill_loads == 0 {
            "no spills".to_owned()
        } else {
            format!(
                "{} bytes spill stores, {} bytes spill loads",
                self.spill_stores, self.spill_loads
            )
        });
        parts.join(", ")
    }
}

/// The entry functions' resources in `text` (ptxas's verbose output, as nvcc passes
/// it on), in the order ptxas compiled them.
pub fn ptxas_resources(text: &str) -> Vec<Resources> {
    let mut out: Vec<Resources> = Vec::new();
    // The entry being compiled, and whether the properties line that follows is its.
    let mut current: Option<Resources> = None;
    let mut own_properties = false;
    for line in text.lines() {
        let line = line.trim();
        let info = line
            .strip_prefix("ptxas info")
            .map(|r| r.trim_start().trim_start_matches(':').trim_start());
        match info {
            Some(rest) if rest.starts_with("Compiling entry function") => {
                out.extend(current.take());
                let mut quoted = rest.split('\'').skip(1).step_by(2);
                current = quoted.next().map(|function| Resources {
                    function: function.to_owned(),
                    arch: quoted.next().unwrap_or_default().to_owned(),
                    ..Resources::default()
                });
                own_properties = false;
            }
            Some(rest) if rest.starts_with("Function properties for") => {
                let name = rest.trim_start_matches("Function properties for").trim();
                own_properties = current.as_ref().is_some_and(|c| c.function == name);
            }
            Some(rest) if rest.starts_with("Used") => {
                if let Some(c) = current.as_mut() {
                    c.registers = number_before(rest, "registers").unwrap_or(c.registers);
                }
            }
            Some(_) => own_properties = false,
            None if own_properties && line.contains("stack frame") => {
                if let Some(c) = current.as_mut() {
                    c.stack = number_before(line, "bytes stack frame").unwrap_or(0);
                    c.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
                    c.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
                }
                own_properties = false;
            }
            None => {}
        }
    }
    out.extend(current);
    out
}

/// The qualified name at the start of an Itanium-mangled function name, with `<…>`
/// where template arguments follow it.
fn demangled_prefix(mangled: &str) -> Option<String> {
    let rest = mangled.strip_prefix("_Z")?;
    let (nested, mut rest) = match rest.strip_prefix('N') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let mut parts: Vec<&str> = Vec::new();
    loop {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        let len: usize = rest[..digits].parse().ok()?;
        let ident = rest.get(digits..digits + len)?;
        parts.push(ident);
        rest = &rest[digits + len..];
        if !nested || !rest.starts_with(|c: char| c.is_ascii_digit()) {
            break;
        }
    }
    let mut name = parts.join("::");
    if rest.starts_with('I') {
        name.push_str("<…>");
    }
    Some(name)
}

/// The whole number right before `words` in `text` (`Used 132 registers`).
fn number_before(text: &str, words: &str) -> Option<u32> {
    let at = text.find(words)?;
    text[..at].split_whitespace().last()?.parse().ok()
}

/// Whether `line` is one of ptxas's verbose lines (which kwb-nvcc asked for, and
/// keeps out of the build's output when the user did not).
pub fn is_ptxas_verbose(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("ptxas info")
        || (line.starts_with(char::is_whitespace)
            && t.contains("bytes stack frame")
            && t.contains("spill"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3barPf' for 'sm_90a'
ptxas info    : Function properties for _Z3barPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 10.606 ms
ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90a'
ptxas info    : Function properties for _Z6helperv
    48 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Function properties for _Z3fooPf
    368 bytes stack frame, 120 bytes spill stores, 96 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 368 bytes cumulative stack size
";

    #[test]
    fn each_entry_function_is_read_with_its_own_properties() {
        let r = ptxas_resources(OUTPUT);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            Resources {
                function: "_Z3barPf".to_owned(),
                arch: "sm_90a".to_owned(),
                registers: 8,
                ..Resources::default()
            }
        );
        // The helper's 48-byte frame is not foo's.
        assert_eq!(
            (
                r[1].registers,
                r[1].stack,
                r[1].spill_stores,
                r[1].spill_loads
            ),
            (128, 368, 120, 96)
        );
        assert!(r[1].spills_beyond(&r[0]) && !r[0].spills_beyond(&r[1]));
        assert_eq!(
            r[1].describe(),
            "128 registers, a 368-byte stack frame, 120 bytes spill stores, 96 bytes spill loads"
        );
        assert_eq!(r[0].describe(), "8 registers, no stack frame, no spills");
        assert_eq!(r[0].name(), "bar");
    }

    #[test]
    fn names_read_without_their_template_arguments() {
        let named = |f: &str| {
            Resources {
                function: f.to_owned(),
                ..Resources::default()
            }
            .name()
        };
        assert_eq!(
            named("_Z11gemm_deviceIN4cute5tupleIJiiiEEEEvT_"),
            "gemm_device<…>"
        );
        assert_eq!(named("_ZN3kwb5inner6kernelEPf"), "kwb::inner::kernel");
        assert_eq!(
            named("_ZN7cutlass13device_kernelINS_4gemmEEEvT_"),
            "cutlass::device_kernel<…>"
        );
        assert_eq!(named("plain_c_kernel"), "plain_c_kernel");
        assert_eq!(named("_Z999x"), "_Z999x");
    }

    #[test]
    fn only_ptxas_verbose_lines_are_its() {
        assert!(is_ptxas_verbose("ptxas info    : Used 8 registers"));
        assert!(is_ptxas_verbose(
            "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
        ));
        assert!(!is_ptxas_verbose(
            "k.cu(3): warning #177-D: variable declared but never referenced"
        ));
        assert!(ptxas_resources("no ptxas here").is_empty());
    }
}
