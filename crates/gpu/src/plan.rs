//! From a manifest and a problem shape to what the worker does: the operands it
//! allocates (role, element type, rows, leading dimension), the kernel's arguments in
//! order, and which buffer the output is read from. Pure data; every parameter kwb
//! cannot fill is an error that names it.
//!
//! Layout: A is M x K with K contiguous (row pitch `lda`), B is N x K with K
//! contiguous (`ldb`; the "TN" convention of tensor-core GEMMs), C and D are M x N
//! row-major (`ldc`, `ldd`), unless a launcher's contract states other layouts. A
//! leading dimension the kernel or its launcher takes is padded by `ld_pad` elements
//! (B's by twice that), so a kernel that confuses a pitch with a width, or one
//! operand's pitch with another's, shows.

use kwb_extract::Param;
use kwb_extract::manifest::Manifest;
use kwb_ladder::Dtype;
use serde::{Deserialize, Serialize};

use crate::error::GpuError;

/// An operand buffer's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    A,
    B,
    C,
    D,
    Bias,
}

impl Role {
    pub(crate) fn parse(role: &str) -> Option<Role> {
        match role {
            "A" => Some(Role::A),
            "B" => Some(Role::B),
            "C" => Some(Role::C),
            "D" => Some(Role::D),
            "bias" => Some(Role::Bias),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::A => "A",
            Role::B => "B",
            Role::C => "C",
            Role::D => "D",
            Role::Bias => "bias",
        }
    }
}

/// One device buffer of a `rows` x `cols` operand: `rows` rows of `ld` elements, the
/// first `cols` of each used; or, `transposed`, `cols` columns of `ld` elements, the
/// first `rows` of each used (the rows dimension contiguous).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operand {
    pub role: Role,
    pub dtype: Dtype,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    #[serde(default)]
    pub transposed: bool,
}

impl Operand {
    pub fn bytes(&self) -> usize {
        self.lines() * self.ld * self.dtype.bytes()
    }

    /// The number of `ld`-element lines the buffer holds.
    pub fn lines(&self) -> usize {
        if self.transposed {
            self.cols
        } else {
            self.rows
        }
    }

    /// The element index of (`row`, `col`).
    pub fn at(&self, row: usize, col: usize) -> usize {
        if self.transposed {
            col * self.ld + row
        } else {
            row * self.ld + col
        }
    }

    /// Element strides of a row step and a column step.
    pub fn strides(&self) -> (usize, usize) {
        if self.transposed {
            (1, self.ld)
        } else {
            (self.ld, 1)
        }
    }
}

/// One kernel argument, in parameter order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Arg {
    /// The device address of an operand buffer.
    Pointer(Role),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    /// A `CUtensorMap` filled by the reproducer's entry point of this name.
    TensorMap(String),
    /// A library kernel's Params blob, filled by the reproducer's entry points
    /// (`kwb_extract::ParamsEntries`) through the adapter's own host code.
    Params {
        fill: String,
        size: String,
        workspace: String,
    },
    /// A megakernel's task list, built by the reproducer's entry points
    /// (`kwb_extract::TaskEntries`): its device image's address.
    Tasks {
        bytes: String,
        fill: String,
    },
    /// The number of tasks in that list (an `int`).
    TaskCount,
    /// A zeroed device buffer of this many bytes (an event array, a work queue).
    Scratch(u64),
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub ldd: usize,
    pub operands: Vec<Operand>,
    /// The buffer the kernel writes its result to (D, or C updated in place).
    pub output: Role,
    pub args: Vec<Arg>,
    /// (name, declaration) of each kernel parameter, for messages.
    pub params: Vec<(String, String)>,
    /// The CTA tile for the error grid: the template arguments that look like it,
    /// else 128 x 128.
    pub tile: (usize, usize),
    /// `tile` is the kernel's (a task's tile or template arguments), not the default.
    pub tile_known: bool,
    /// The type the kernel accumulates in, where the manifest says (f16 widens the
    /// random rung's tolerance).
    #[serde(default)]
    pub accumulator: Option<Dtype>,
    /// The significand bits the MMA reads A and B with, where the manifest says they
    /// are fewer than A's type holds (`tf32`: 11).
    #[serde(default)]
    pub mma_precision: Option<i32>,
    /// The elementwise function the epilogue applies, where the manifest names one.
    #[serde(default)]
    pub activation: Option<String>,
    /// The output conversion saturates (the manifest says so).
    #[serde(default)]
    pub output_saturates: bool,
}

/// How the user asked to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub shape: (usize, usize, usize),
    pub alpha: f32,
    pub beta: f32,
    pub ld_pad: usize,
    /// The element type of A and B where neither the kernel nor its launcher says.
    pub dtype: Option<Dtype>,
}

/// The ladder's element type of a C++ element type, if it is one.
pub fn dtype_named(element: &str) -> Option<Dtype> {
    let last = element
        .rsplit("::")
        .next()
        .unwrap_or(element)
        .trim()
        .trim_start_matches("const ")
        .trim();
    match last {
        "__nv_bfloat16" | "nv_bfloat16" | "bfloat16_t" | "bf16" | "bfloat16" => Some(Dtype::Bf16),
        "__half" | "half" | "half_t" | "f16" => Some(Dtype::F16),
        "float" | "f32" | "float32" => Some(Dtype::F32),
        "__nv_fp8_e4m3" | "float_e4m3_t" | "e4m3" | "fp8_e4m3" | "float8_e4m3" => Some(Dtype::E4m3),
        _ => None,
    }
}

fn dtype_of_descriptors(manifest: &Manifest) -> Option<Dtype> {
    manifest.descriptors.iter().find_map(|d| {
        let written = d.data_type.values.first()?;
        if written.contains("BFLOAT16") {
            Some(Dtype::Bf16)
        } else if written.contains("FLOAT16") {
            Some(Dtype::F16)
        } else if written.contains("FLOAT32") {
            Some(Dtype::F32)
        } else {
            None
        }
    })
}

/// The operand whose leading dimension parameter `p` is, by the same rule the
/// reproducer's host entry points bind it with (`kwb_extract::problem_field`).
pub fn ld_field(p: &Param) -> Option<Role> {
    match kwb_extract::problem_field(p).ok()? {
        "lda" => Some(Role::A),
        "ldb" => Some(Role::B),
        "ldc" => Some(Role::C),
        "ldd" => Some(Role::D),
        _ => None,
    }
}

impl Plan {
    /// The plan for `manifest` on `request`.
    pub fn new(manifest: &Manifest, request: &Request) -> Result<Plan, GpuError> {
        let (m, n, k) = request.shape;
        // Through the launcher the kernel's own parameters are the launcher's business.
        let through = manifest.host.through.as_ref();
        let kernel: &[Param] = if through.is_some() {
            &[]
        } else {
            &manifest.params
        };
        let layout = through.map(|t| t.layout.clone()).unwrap_or_default();
        // An operand is transposed when its rows dimension (the first letter of the
        // layout's default spelling) is the contiguous one.
        let transposed = |r: Role| match r {
            Role::A => layout.a == "km",
            Role::B => layout.b == "kn",
            Role::C => layout.c == "nm",
            Role::D => layout.d == "nm",
            Role::Bias => false,
        };
        let launcher = &manifest.host.launcher;
        // A task's fields bound to operands count as the operands' parameters.
        let task_fields: Vec<Param> = manifest
            .host
            .tasks
            .iter()
            .flat_map(|t| t.fields.iter().filter_map(|f| f.as_param()))
            .collect();
        let all = || {
            kernel
                .iter()
                .chain(launcher.iter())
                .chain(task_fields.iter())
        };
        let find = |role: &str| all().find(|p| p.role == role);
        // Element types: the kernel's parameter, else the launcher's, else the
        // descriptors', else --dtype.
        let element = |role: &str| -> Option<Dtype> {
            find(role).and_then(|p| p.element.as_deref().and_then(dtype_named))
        };
        let fallback = request.dtype.or_else(|| dtype_of_descriptors(manifest));
        let input = |role: &str| -> Result<Dtype, GpuError> {
            match find(role) {
                Some(p) => match p.element.as_deref().and_then(dtype_named) {
                    Some(d) => Ok(d),
                    None => request.dtype.ok_or_else(|| GpuError::UnknownElement {
                        param: p.name.clone(),
                        element: p.element.clone().unwrap_or_default(),
                    }),
                },
                None => fallback.ok_or_else(|| GpuError::NoOperandType {
                    role: role.to_owned(),
                }),
            }
        };
        // Padded leading dimensions where a parameter carries them.
        let padded =
            |r: Role| all().any(|p| p.role == "leading-dimension" && ld_field(p) == Some(r));
        // B's pitch is padded twice as much as the others', so a pitch taken for the
        // other operand's (an encoder given A's row stride for B) shows.
        let pad = |r: Role, width: usize| {
            if padded(r) {
                width + request.ld_pad * if r == Role::B { 2 } else { 1 }
            } else {
                width
            }
        };
        let width = |r: Role, rows: usize, cols: usize| {
            if transposed(r) { rows } else { cols }
        };
        let (lda, ldb, ldc, ldd) = (
            pad(Role::A, width(Role::A, m, k)),
            pad(Role::B, width(Role::B, n, k)),
            pad(Role::C, width(Role::C, m, n)),
            pad(Role::D, width(Role::D, m, n)),
        );
        let ld_value = |r: Role| match r {
            Role::A => lda,
            Role::B => ldb,
            Role::C => ldc,
            _ => ldd,
        };
        let mut args = Vec::new();
        for p in kernel {
            args.push(argument(p, manifest, (m, n, k), request, &ld_value)?);
        }
        let (a_type, b_type) = (input("A")?, input("B")?);
        let output = if find("D").is_some() {
            Role::D
        } else {
            Role::C
        };
        let out_param = find(output.name()).ok_or(GpuError::NoOutput)?;
        let out_type = out_param
            .element
            .as_deref()
            .and_then(dtype_named)
            .or(request.dtype)
            .ok_or_else(|| GpuError::UnknownElement {
                param: out_param.name.clone(),
                element: out_param.element.clone().unwrap_or_default(),
            })?;
        let c_type = element("C").unwrap_or(out_type);
        let mut operands = vec![
            Operand {
                role: Role::A,
                dtype: a_type,
                rows: m,
                cols: k,
                ld: lda,
                transposed: transposed(Role::A),
            },
            Operand {
                role: Role::B,
                dtype: b_type,
                rows: n,
                cols: k,
                ld: ldb,
                transposed: transposed(Role::B),
            },
            Operand {
                role: Role::C,
                dtype: c_type,
                rows: m,
                cols: n,
                ld: if output == Role::C { ldc.max(ldd) } else { ldc },
                transposed: transposed(Role::C),
            },
        ];
        if output == Role::D {
            operands.push(Operand {
                role: Role::D,
                dtype: out_type,
                rows: m,
                cols: n,
                ld: ldd,
                transposed: transposed(Role::D),
            });
        }
        if let Some(p) = find("bias") {
            operands.push(Operand {
                role: Role::Bias,
                dtype: p
                    .element
                    .as_deref()
                    .and_then(dtype_named)
                    .unwrap_or(out_type),
                rows: 1,
                cols: n,
                ld: n,
                transposed: false,
            });
        }
        let kernel_tile = tile(manifest);
        Ok(Plan {
            m,
            n,
            k,
            // A launcher without alpha or beta computes with its own.
            alpha: through.and_then(|t| t.alpha).unwrap_or(request.alpha),
            beta: through.and_then(|t| t.beta).unwrap_or(request.beta),
            lda,
            ldb,
            ldc,
            ldd,
            operands,
            output,
            args,
            params: kernel
                .iter()
                .map(|p| (p.name.clone(), p.declaration.clone()))
                .collect(),
            tile: kernel_tile.unwrap_or((128, 128)),
            accumulator: manifest.kernel.accumulator.as_deref().and_then(dtype_named),
            activation: through.and_then(|t| t.activation.clone()),
            output_saturates: through.is_some_and(|t| t.output_saturates),
            mma_precision: match manifest.kernel.mma_input.as_deref() {
                Some("tf32") => Some(11),
                _ => None,
            },
            tile_known: kernel_tile.is_some(),
        })
    }

    /// The ladder problem this plan runs.
    pub fn problem(&self) -> Result<kwb_ladder::Problem, GpuError> {
        let input = self.operand(Role::A).dtype;
        let output = self.operand(self.output).dtype;
        let mut p = kwb_ladder::Problem::new(self.m, self.n, self.k, input, output)
            .map_err(GpuError::Ladder)?;
        p.alpha = self.alpha;
        p.beta = self.beta;
        if let Some(acc) = self.accumulator {
            p.accumulator = acc;
        }
        p.mma_precision = self.mma_precision;
        p.output_saturates = self.output_saturates;
        if let Some(name) = &self.activation {
            p.activation = kwb_ladder::Activation::named(name)
                .ok_or_else(|| GpuError::UnknownActivation(name.clone()))?;
        }
        p.bias = self.operands.iter().any(|o| o.role == Role::Bias);
        Ok(p)
    }

    pub fn operand(&self, role: Role) -> &Operand {
        self.operands
            .iter()
            .find(|o| o.role == role)
            .unwrap_or(&self.operands[0])
    }
}

fn integer(p: &Param, v: usize) -> Arg {
    let wide = [
        "long",
        "int64_t",
        "size_t",
        "uint64_t",
        "int64",
        "ptrdiff_t",
    ]
    .iter()
    .any(|w| p.declaration.contains(w));
    if wide {
        Arg::I64(v as i64)
    } else {
        Arg::I32(v as i32)
    }
}

fn argument(
    p: &Param,
    manifest: &Manifest,
    (m, n, k): (usize, usize, usize),
    request: &Request,
    ld: &dyn Fn(Role) -> usize,
) -> Result<Arg, GpuError> {
    let scalar = |v: f32| {
        if p.declaration.contains("double") {
            Ok(Arg::F64(f64::from(v)))
        } else if p.declaration.contains("float") {
            Ok(Arg::F32(v))
        } else {
            Err(GpuError::Unfillable {
                param: p.name.clone(),
                declaration: p.declaration.clone(),
                why: "kwb run passes alpha and beta as float or double".to_owned(),
            })
        }
    };
    match p.role.as_str() {
        role if Role::parse(role).is_some() => {
            Ok(Arg::Pointer(Role::parse(role).unwrap_or(Role::A)))
        }
        "m" => Ok(integer(p, m)),
        "n" => Ok(integer(p, n)),
        "k" => Ok(integer(p, k)),
        "leading-dimension" => match ld_field(p) {
            Some(r) => Ok(integer(p, ld(r))),
            None => Err(GpuError::Unfillable {
                param: p.name.clone(),
                declaration: p.declaration.clone(),
                why: "a leading dimension of no operand kwb knows (lda, ldb, ldc, ldd)".to_owned(),
            }),
        },
        "alpha" => scalar(request.alpha),
        "beta" => scalar(request.beta),
        "params" => manifest
            .host
            .params
            .as_ref()
            .map(|e| Arg::Params {
                fill: e.fill.clone(),
                size: e.size.clone(),
                workspace: e.workspace.clone(),
            })
            .ok_or_else(|| GpuError::Unfillable {
                param: p.name.clone(),
                declaration: p.declaration.clone(),
                why: manifest
                    .host
                    .unavailable
                    .first()
                    .cloned()
                    .unwrap_or_else(|| {
                        "the reproducer has no entry point that fills it".to_owned()
                    }),
            }),
        "task-list" | "task-count" | "scratch" => match &manifest.host.tasks {
            Some(t) => Ok(match p.role.as_str() {
                "task-list" => Arg::Tasks {
                    bytes: t.bytes.clone(),
                    fill: t.fill.clone(),
                },
                "task-count" => Arg::TaskCount,
                _ => Arg::Scratch(t.scratch_bytes),
            }),
            None => Err(GpuError::Unfillable {
                param: p.name.clone(),
                declaration: p.declaration.clone(),
                why: "the manifest has no [host.tasks] to build a task list from".to_owned(),
            }),
        },
        "tma-descriptor" => manifest
            .host
            .encoders
            .iter()
            .find(|e| e.param == p.name)
            .map(|e| Arg::TensorMap(e.function.clone()))
            .ok_or_else(|| GpuError::Unfillable {
                param: p.name.clone(),
                declaration: p.declaration.clone(),
                why: manifest
                    .host
                    .unavailable
                    .iter()
                    .find(|u| u.contains(&format!("_{}:", p.name)))
                    .cloned()
                    .unwrap_or_else(|| {
                        "the reproducer has no entry point that fills it".to_owned()
                    }),
            }),
        role => Err(GpuError::Unfillable {
            param: p.name.clone(),
            declaration: p.declaration.clone(),
            why: format!(
                "role `{role}` is not a GEMM operand, size, leading dimension or scalar kwb run fills"
            ),
        }),
    }
}

/// The CTA tile: a task's output tile, else from template arguments named like one
/// (`BM`/`BN`, `kBlockM`/`kBlockN`, `TILE_M`/`TILE_N`); None when neither says.
fn tile(manifest: &Manifest) -> Option<(usize, usize)> {
    if let Some(t) = &manifest.host.tasks {
        return Some((t.tile[0].max(1) as usize, t.tile[1].max(1) as usize));
    }
    let value = |names: &[&str]| {
        manifest
            .kernel
            .template_args
            .iter()
            .find(|a| names.contains(&a.name.as_str()))
            .and_then(|a| a.value)
            .filter(|v| *v > 0)
            .map(|v| v as usize)
    };
    Some((
        value(&["BM", "kBlockM", "TILE_M", "BLOCK_M", "kTileM"])?,
        value(&["BN", "kBlockN", "TILE_N", "BLOCK_N", "kTileN"])?,
    ))
}
