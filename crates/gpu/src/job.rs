//! What the supervisor hands the GPU worker (a JSON file) and what the worker says
//! back (one JSON event per line on its stdout). The worker is a separate process so
//! that a kernel that hangs or corrupts its context is killed, not waited on.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::plan::{Plan, Role};

/// The worker's whole task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The built reproducer.
    pub library: PathBuf,
    /// `kwb_launch`, or the entry through the launcher when `through`.
    pub entry: String,
    /// The entry calls the user's launcher with the problem (no configuration or
    /// kernel arguments from the runner).
    #[serde(default)]
    pub through: bool,
    /// `kwb_config`, when the reproducer has it.
    pub config: Option<String>,
    /// A configuration given by the user, instead of (or where there is no) `kwb_config`.
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub smem: Option<u64>,
    pub plan: Plan,
    pub rungs: Vec<JobRung>,
    /// kwb's GPU reference, when the answers are computed on the device.
    pub reference: Option<Reference>,
}

/// The reference GEMM kernel to run on each rung's inputs before the kernel under
/// test (which may overwrite C in place).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reference {
    pub cubin: PathBuf,
    pub function: String,
}

/// One launch: the input files (raw little-endian storage, rows x ld elements of the
/// operand's type) and where to write the output buffer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRung {
    pub name: String,
    pub inputs: Vec<(Role, PathBuf)>,
    /// Buffers filled with the all-ones NaN pattern on the device instead: the output,
    /// and C when beta is 0. Every other buffer without an input is zeroed.
    #[serde(default)]
    pub fill: Vec<Role>,
    pub output: PathBuf,
    /// Where the reference's M x N doubles go, when there is a GPU reference.
    pub answer: Option<PathBuf>,
}

/// One line the worker prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// The context is up and the library is loaded.
    Ready { device: String, sm: (i32, i32) },
    /// A launch is about to be issued with this configuration.
    Launched {
        rung: usize,
        grid: [u32; 3],
        block: [u32; 3],
        smem: u64,
    },
    /// The kernel finished and its output was written. `reference_ms`: the wall time
    /// of the GPU reference on this rung (launch, wait, read back), when it ran.
    Done {
        rung: usize,
        ms: f32,
        #[serde(default)]
        reference_ms: Option<f64>,
    },
    /// The operand buffers are allocated: (role name, device address, bytes) each.
    Buffers { buffers: Vec<(String, u64, u64)> },
    /// The `CUtensorMap` encoded for kernel parameter `param`, the first time it is
    /// encoded: its 128 bytes as 256 lowercase hex characters ([`hex`]).
    Map { param: String, bytes: String },
    /// A step failed. `stage`: context, library, config, encode, upload, launch,
    /// kernel, readback.
    Failed {
        rung: Option<usize>,
        stage: String,
        message: String,
    },
}

impl Event {
    /// The event as one line of JSON.
    pub fn line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `bytes` as lowercase hex, two characters a byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The 128 bytes of a map from [`hex`]'s text; None for anything else.
pub fn unhex(text: &str) -> Option<[u8; 128]> {
    let mut bytes = [0u8; 128];
    if text.len() != 2 * bytes.len() || !text.is_ascii() {
        return None;
    }
    for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(bytes)
}

/// The name of a CUDA runtime error code (`cudaError_t`), for the codes a launch
/// returns.
pub fn runtime_error_name(code: i32) -> &'static str {
    match code {
        0 => "cudaSuccess",
        1 => "cudaErrorInvalidValue",
        2 => "cudaErrorMemoryAllocation",
        3 => "cudaErrorInitializationError",
        9 => "cudaErrorInvalidConfiguration",
        13 => "cudaErrorInvalidSymbol",
        35 => "cudaErrorInsufficientDriver",
        98 => "cudaErrorInvalidDeviceFunction",
        100 => "cudaErrorNoDevice",
        101 => "cudaErrorInvalidDevice",
        200 => "cudaErrorInvalidKernelImage",
        209 => "cudaErrorNoKernelImageForDevice",
        222 => "cudaErrorUnsupportedPtxVersion",
        400 => "cudaErrorInvalidResourceHandle",
        700 => "cudaErrorIllegalAddress",
        701 => "cudaErrorLaunchOutOfResources",
        702 => "cudaErrorLaunchTimeout",
        715 => "cudaErrorIllegalInstruction",
        714 => "cudaErrorHardwareStackError",
        716 => "cudaErrorMisalignedAddress",
        717 => "cudaErrorInvalidAddressSpace",
        718 => "cudaErrorInvalidPc",
        719 => "cudaErrorLaunchFailure",
        720 => "cudaErrorCooperativeLaunchTooLarge",
        _ => "a CUDA runtime error",
    }
}

/// Whether a CUDA runtime error is the kernel's own fault on the device (a sticky
/// error: an illegal or misaligned address, an illegal instruction, a hardware
/// exception), as opposed to a launch the runtime refused. A launcher that waits for
/// its kernel returns these from its launch call.
pub fn is_device_fault(code: i32) -> bool {
    matches!(code, 700 | 714..=719)
}

/// The step a launch call's error belongs to: the kernel's, when the kernel ran and
/// faulted, else the launch's.
pub fn launch_stage(code: i32) -> &'static str {
    if is_device_fault(code) {
        "kernel"
    } else {
        "launch"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_fault_is_the_kernels_and_a_refusal_the_launchs() {
        assert_eq!(launch_stage(716), "kernel");
        assert_eq!(launch_stage(700), "kernel");
        assert_eq!(launch_stage(719), "kernel");
        assert_eq!(launch_stage(9), "launch");
        assert_eq!(launch_stage(701), "launch");
    }

    #[test]
    fn events_are_one_line_each_and_read_back() {
        let e = Event::Launched {
            rung: 1,
            grid: [3, 2, 1],
            block: [128, 1, 1],
            smem: 49152,
        };
        let line = e.line();
        assert!(!line.contains('\n'));
        assert!(line.starts_with("{\"event\":\"launched\""), "{line}");
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), e);
        assert_eq!(runtime_error_name(700), "cudaErrorIllegalAddress");
    }

    #[test]
    fn map_and_buffer_events_read_back_and_map_bytes_round_trip_through_hex() {
        let bytes: [u8; 128] = std::array::from_fn(|i| (i * 37) as u8);
        let text = hex(&bytes);
        assert_eq!(text.len(), 256);
        assert_eq!(unhex(&text), Some(bytes));
        assert_eq!(unhex(&text[2..]), None);
        assert_eq!(unhex(&text.replace('a', "g")), None);
        for e in [
            Event::Map {
                param: "tmap_a".to_owned(),
                bytes: text,
            },
            Event::Buffers {
                buffers: vec![("A".to_owned(), 0x7f00_0000_0000, 524_288)],
            },
        ] {
            let line = e.line();
            assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), e, "{line}");
        }
    }
}
