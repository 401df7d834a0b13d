//! `kwb.toml`, the reproducer's manifest: written by kwb-extract, read back by a
//! runner. One type for both, so the two cannot drift.

use crate::{ConfigValue, Descriptor, Extraction, HostEntries, Param, TemplateArg};

/// The manifest.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub source: Source,
    pub kernel: KernelSection,
    #[serde(default)]
    pub params: Vec<Param>,
    #[serde(default)]
    pub launch: Option<LaunchSection>,
    pub build: Build,
    /// The file's TMA descriptor constructions.
    #[serde(default)]
    pub descriptors: Vec<Descriptor>,
    /// The host entry points repro.cu defines for a runner.
    #[serde(default)]
    pub host: HostEntries,
}

/// Where the reproducer came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub file: String,
    pub kernel_line: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_line: Option<usize>,
    /// Lines of the file copied into repro.cu, `[first, last]` per block.
    #[serde(default)]
    pub copied: Vec<[usize; 2]>,
}

/// The instantiation and how to reach it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSection {
    pub name: String,
    pub instantiation: String,
    /// `cudaError_t ENTRY(dim3 grid, dim3 block, size_t smem, cudaStream_t, void** args)`.
    pub entry: String,
    /// `const void* KERNEL_SYMBOL()`: the instantiation's address.
    pub kernel_symbol: String,
    #[serde(default)]
    pub template_args: Vec<TemplateArg>,
    /// The type the file's MMAs accumulate in (`f16`, `f32`), where it names any: a
    /// runner's tolerance for random inputs follows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulator: Option<String>,
    /// The precision the MMA reads A and B at where it is below their type's (`tf32`):
    /// a runner's tolerance for random inputs follows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mma_input: Option<String>,
}

/// The launch site's arguments and configuration.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchSection {
    /// The call's arguments as written, one per kernel parameter.
    pub args: Vec<String>,
    #[serde(default)]
    pub config: Vec<ConfigValue>,
}

/// How repro.cu is built.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Build {
    pub std: String,
    pub arch: String,
    #[serde(default)]
    pub defines: Vec<String>,
    #[serde(default)]
    pub includes: Vec<String>,
    /// Further code-generation flags of the production build.
    #[serde(default)]
    pub other: Vec<String>,
    /// Where they came from: `command line`, or a compile database and it.
    pub from: String,
}

/// Why a manifest does not read.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("not a kwb.toml kwb-extract wrote: {0}")]
#[diagnostic(help("write it again with kwb-extract"))]
pub struct ManifestError(String);

impl Manifest {
    /// The manifest of an extraction of `file` built with `build`.
    pub fn new(x: &Extraction, file: &str, build: Build) -> Manifest {
        Manifest {
            source: Source {
                file: file.to_owned(),
                kernel_line: x.kernel.line,
                // A launch site, or the Arguments an adapter's Params are built from.
                launch_line: x.launch.as_ref().map(|l| l.line).or(x
                    .host
                    .params
                    .as_ref()
                    .map(|p| p.line)),
                copied: x.copied.iter().map(|(a, b)| [*a, *b]).collect(),
            },
            kernel: KernelSection {
                name: x.qualified.clone(),
                instantiation: x.instantiation.clone(),
                entry: crate::ENTRY.to_owned(),
                kernel_symbol: crate::KERNEL_SYMBOL.to_owned(),
                template_args: x.args.clone(),
                accumulator: x.accumulator.clone(),
                mma_input: x.mma_input.clone(),
            },
            params: x.kernel.params.clone(),
            launch: x.launch.as_ref().map(|l| LaunchSection {
                args: l.args.clone(),
                config: x.config.clone(),
            }),
            build,
            descriptors: x.descriptors.clone(),
            host: x.host.clone(),
        }
    }

    /// The text of kwb.toml.
    pub fn to_toml(&self) -> String {
        format!(
            "# kwb.toml: the reproducer's manifest, written by kwb-extract.\n{}",
            toml::to_string(self).unwrap_or_default()
        )
    }

    /// Reads kwb.toml.
    pub fn from_toml(text: &str) -> Result<Manifest, ManifestError> {
        toml::from_str(text).map_err(|e| ManifestError(e.to_string()))
    }
}
