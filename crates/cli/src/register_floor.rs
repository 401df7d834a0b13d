//! `KWB_TRACE="max-regs=auto"` for kwb-nvcc: the trace build held to the original's
//! registers, and told apart from it where it spills.
//!
//! kwb-nvcc compiles the original source once more on the side (the same flags, its
//! own object in a temporary folder, ptxas's verbose report) and reads each kernel's
//! registers, stack frame and spills. The trace build then gets
//! `-DKWB_TRACE_MAX_REGS=N`, N the most registers any of the unit's kernels uses, so
//! each probed kernel's launch bounds keep the CTAs an SM the original had, and ptxas
//! reports on it too. A kernel that spills in the trace build where the original did
//! not (a larger stack frame, more spill traffic) is named with both builds' numbers:
//! the trace then runs slower than the original's occupancy alone would make it.
//!
//! Invariant: the user's build output is what nvcc printed for the trace build, less
//! only the ptxas lines kwb-nvcc asked for (kept where the command asked for them
//! itself); nothing is written outside the temporary folder.

use std::path::Path;
use std::process::Command;

use kwb_hook::NvccCommand;
use kwb_toolchain::ptxas_info::{Resources, is_ptxas_verbose, ptxas_resources};

/// The original kernels' resources, and the floor they set.
#[derive(Clone, Debug)]
pub struct Floor {
    pub original: Vec<Resources>,
    /// The most registers a thread any kernel of the unit uses.
    pub registers: u32,
    /// The command asks for ptxas's report itself: its lines stay in the output.
    pub user_verbose: bool,
}

/// Compiles `command`'s one CUDA source with the real nvcc `real` on the side and
/// reads its kernels' resources; why not, where it cannot.
pub fn measure(real: &Path, command: &NvccCommand) -> Result<Floor, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?;
    let object = dir.path().join("original.o");
    let args = command
        .for_resources(&object.display().to_string())
        .ok_or_else(|| {
            "`max-regs=auto` reads the original's registers from a compile of its one CUDA source, and this command compiles or links more than one file; give `max-regs=N`".to_owned()
        })?;
    let output = Command::new(real)
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", real.display()))?;
    let text = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "the original did not compile for its register count ({})",
            output
                .status
                .code()
                .map_or("killed".to_owned(), |c| format!("exit {c}"))
        ));
    }
    let original = ptxas_resources(&text);
    let registers = original
        .iter()
        .map(|r| r.registers)
        .max()
        .ok_or_else(|| "ptxas reported no kernel of the original".to_owned())?;
    Ok(Floor {
        original,
        registers,
        user_verbose: command.ptxas_verbose(),
    })
}

impl Floor {
    /// What the trace build adds to its command line.
    pub fn traced_args(&self) -> Vec<String> {
        vec![
            format!("-DKWB_TRACE_MAX_REGS={}", self.registers),
            "-Xptxas".to_owned(),
            "-v".to_owned(),
        ]
    }

    /// The trace build's output `text` as the user sees it (ptxas's lines dropped
    /// unless asked for), and kwb-nvcc's lines on the floor: the count it set, and
    /// each kernel that spills in the trace build where the original did not.
    pub fn report(&self, text: &str) -> (String, Vec<String>) {
        let shown = if self.user_verbose {
            text.to_owned()
        } else {
            text.lines()
                .filter(|l| !is_ptxas_verbose(l))
                .map(|l| format!("{l}\n"))
                .collect()
        };
        let mut lines = vec![format!(
            "occupancy floor: KWB_TRACE_MAX_REGS={} (the original's most registers a thread, from ptxas)",
            self.registers
        )];
        let all = ptxas_resources(text);
        for (i, traced) in all.iter().enumerate() {
            // Instantiations of one template read alike: numbered in compile order.
            let same: Vec<usize> = (0..all.len())
                .filter(|&j| all[j].name() == traced.name() && all[j].arch == traced.arch)
                .collect();
            let name = match same.iter().position(|&j| j == i) {
                Some(k) if same.len() > 1 => format!(
                    "{} (instantiation {} of {})",
                    traced.name(),
                    k + 1,
                    same.len()
                ),
                _ => traced.name(),
            };
            let Some(original) = self
                .original
                .iter()
                .find(|o| o.function == traced.function && o.arch == traced.arch)
            else {
                continue;
            };
            if traced.spills_beyond(original) {
                lines.push(format!(
                    "warning: `{}` ({}) spills in the trace build: {}; the original: {}. The floor keeps its CTAs an SM, and the probes' state goes to local memory: the trace runs slower than the original",
                    name,
                    traced.arch,
                    traced.describe(),
                    original.describe()
                ));
            }
        }
        (shown, lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(function: &str, registers: u32, stack: u32, spill: u32) -> Resources {
        Resources {
            function: function.to_owned(),
            arch: "sm_90a".to_owned(),
            registers,
            stack,
            spill_stores: spill,
            spill_loads: spill,
        }
    }

    #[test]
    fn a_kernel_that_spills_only_in_the_trace_build_is_named_with_both_builds_numbers() {
        let floor = Floor {
            original: vec![
                resources("_Z4gemmv", 116, 0, 0),
                resources("_Z4tailv", 32, 0, 0),
            ],
            registers: 116,
            user_verbose: false,
        };
        assert_eq!(
            floor.traced_args(),
            ["-DKWB_TRACE_MAX_REGS=116", "-Xptxas", "-v"]
        );
        let traced = "k.cu(3): warning: something the user should see
ptxas info    : Compiling entry function '_Z4gemmv' for 'sm_90a'
ptxas info    : Function properties for _Z4gemmv
    368 bytes stack frame, 120 bytes spill stores, 120 bytes spill loads
ptxas info    : Used 116 registers, used 1 barriers
ptxas info    : Compiling entry function '_Z4tailv' for 'sm_90a'
ptxas info    : Function properties for _Z4tailv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
";
        let (shown, lines) = floor.report(traced);
        assert_eq!(shown, "k.cu(3): warning: something the user should see\n");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("KWB_TRACE_MAX_REGS=116"));
        assert!(lines[1].contains("`gemm` (sm_90a) spills"), "{}", lines[1]);
        assert!(
            lines[1].contains("a 368-byte stack frame")
                && lines[1].contains("the original: 116 registers, no stack frame, no spills"),
            "{}",
            lines[1]
        );
        // Asked for by the command itself: ptxas's lines stay.
        let verbose = Floor {
            user_verbose: true,
            ..floor
        };
        assert_eq!(verbose.report(traced).0, traced);
    }
}
