//! Mutants of the bundled kernels, as a manifest snapshot, and the refusals.

use crate::{Config, MutateError, Stage, mutants};

fn kernel(path: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap()
}

/// One line per mutant: what a manifest lists.
fn listing(source: &str, config: &Config) -> String {
    mutants(source, config)
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{:>2} {:<12} {:<18} {}:{}\n{}",
                m.id,
                m.stage.name(),
                m.operator,
                m.function,
                m.line,
                m.diff
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_mma_sync_kernel_gets_a_mutant_of_every_stage_it_has() {
    let source = kernel("kernels/mma_sync/gemm.cu");
    let config = Config {
        kernel: Some("gemm_mma_sync".to_owned()),
        ..Config::default()
    };
    insta::assert_snapshot!(listing(&source, &config));
    let all = mutants(&source, &config).unwrap();
    for stage in [Stage::OperandLoad, Stage::Mma, Stage::Epilogue] {
        assert!(all.iter().any(|m| m.stage == stage), "{stage:?}");
    }
    // Each mutant is the file with its one edit: the rest unchanged.
    for m in &all {
        let text = &m.text;
        assert_ne!(*text, source);
        assert!(text.lines().count() >= source.lines().count());
    }
}

#[test]
fn a_tma_kernel_gets_descriptor_mutants_from_its_host_encode() {
    let source = kernel("kernels/tma_wgmma_sm90/gemm.cu");
    let config = Config {
        kernel: Some("gemm_wgmma_tma".to_owned()),
        stages: vec![Stage::Descriptor, Stage::Mma],
    };
    insta::assert_snapshot!(listing(&source, &config));
}

#[test]
fn a_kernel_without_a_site_of_the_stage_asked_for_says_so() {
    let source = kernel("kernels/mma_sync/gemm.cu");
    let no_site = mutants(
        &source,
        &Config {
            kernel: Some("gemm_mma_sync".to_owned()),
            stages: vec![Stage::Descriptor],
        },
    );
    assert!(
        matches!(
            &no_site,
            Err(MutateError::NoSite {
                stage: "descriptor",
                ..
            })
        ),
        "{no_site:?}"
    );
    let unknown = mutants(
        &source,
        &Config {
            kernel: Some("no_such_kernel".to_owned()),
            ..Config::default()
        },
    );
    match unknown {
        Err(MutateError::UnknownKernel { available, .. }) => {
            assert!(available.contains("gemm_mma_sync"), "{available}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn stages_parse_by_their_names() {
    for s in Stage::ALL {
        assert_eq!(Stage::parse(s.name()), Some(s));
    }
    assert_eq!(Stage::parse("tma"), None);
}
