use crate::error::ExtractError;
use crate::{Request, extract};

/// A CUTLASS 2.x example's shape: the alias at namespace scope, an options struct
/// filled from the command line, a launcher that allocates its own tensors and runs
/// the object on Arguments built from them; and a function template whose parameter
/// the caller binds to a second alias.
const TWO_X: &str = r#"#include <cstdio>
using Gemm = cutlass::gemm::device::Gemm<float, cutlass::layout::RowMajor, float, cutlass::layout::ColumnMajor, float, cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp>;
using Other = cutlass::gemm::device::GemmUniversal<cutlass::half_t, cutlass::layout::RowMajor, cutlass::half_t, cutlass::layout::RowMajor, float, cutlass::layout::ColumnMajor>;
struct Options {
  int m = 512, n = 512, k = 256;
  float alpha = 1, beta = 0;
  int iterations = 10;
  void parse(int argc, char** argv);
};
int run(Options& options) {
  cutlass::HostTensor<float, cutlass::layout::RowMajor> tensor_a({options.m, options.k});
  typename Gemm::Arguments arguments{{options.m, options.n, options.k}, tensor_a.device_ref()};
  Gemm gemm_op;
  if (gemm_op.can_implement(arguments) != cutlass::Status::kSuccess) return 1;
  gemm_op.initialize(arguments, nullptr);
  for (int i = 0; i < options.iterations; ++i) gemm_op();
  return 0;
}
template <typename T>
int go(const char* what, Options& o) {
  T op;
  auto args = make_args(o);
  op(args);
  return 0;
}
int main(int argc, char** argv) {
  Options options;
  options.parse(argc, argv);
  if (options.m < 0) return 1;
  printf("%d\n", options.m);
  int status = run(options);
  go<Gemm>("first", options);
  return status + go<Other>("second", options);
}
"#;

fn request(kernel: &str) -> Request {
    Request {
        kernel: Some(kernel.to_owned()),
        file_name: "example.cu".to_owned(),
        ..Request::default()
    }
}

/// The replay and the entry.
fn harness_text(repro: &str) -> String {
    let at = repro.find("// ---- kwb-extract: `").expect("a replay");
    let end = at + repro[at..].find("\n}\n").expect("the replay's end") + 3;
    let entry = repro
        .find("// ---- kwb-extract: the runner's entry point")
        .expect("an entry");
    format!("{}...\n{}", &repro[at..end], &repro[entry..])
}

#[test]
fn a_free_launcher_is_replayed_up_to_its_launch_and_runs_the_problem() {
    let x = extract(TWO_X, &request("Gemm")).expect("extracts");
    let through = x.host.through.as_ref().expect("through the harness");
    assert_eq!(through.path, ["main", "run"]);
    assert_eq!(through.call, "kwb_replay_run(options)");
    let (a, b, c) = (&through.layout.a, &through.layout.b, &through.layout.d);
    assert_eq!((a.as_str(), b.as_str(), c.as_str()), ("mk", "nk", "mn"));
    // The options struct's sizes and scalars, not its other fields, follow the problem.
    let bound: Vec<&str> = through.bindings.iter().map(|b| b.param.as_str()).collect();
    assert_eq!(
        bound,
        [
            "options.m",
            "options.n",
            "options.k",
            "options.alpha",
            "options.beta",
            "Arguments"
        ]
    );
    let elements: Vec<(&str, Option<&str>)> = x
        .host
        .launcher
        .iter()
        .map(|p| (p.role.as_str(), p.element.as_deref()))
        .collect();
    assert_eq!(
        elements,
        [
            ("A", Some("float")),
            ("B", Some("float")),
            ("C", Some("float")),
            ("D", Some("float"))
        ]
    );
    // A tensor-op GEMM on floats reads them as tf32.
    assert_eq!(x.mma_input.as_deref(), Some("tf32"));
    // The file is kept, main renamed, the launcher itself unchanged.
    assert!(x.repro.contains("int kwb_user_main(int argc, char** argv)"));
    assert!(
        x.repro
            .contains("  gemm_op.initialize(arguments, nullptr);\n  for (int i")
    );
    // Neither the parse of argv nor the early return is copied into the entry.
    let entry = &x.repro[x.repro.find("extern \"C\" int kwb_launch_problem").unwrap()..];
    assert!(
        !entry.contains("parse(") && !entry.contains("return 1"),
        "{entry}"
    );
    insta::assert_snapshot!(harness_text(&x.repro));
}

#[test]
fn a_template_launcher_takes_its_type_from_the_call_and_instances_are_listed() {
    let x = extract(TWO_X, &request("Other")).expect("extracts");
    let through = x.host.through.as_ref().unwrap();
    assert_eq!(through.call, "kwb_replay_go<Other>(\"second\", options)");
    assert_eq!(through.layout.b, "kn");
    assert_eq!(through.layout.d, "nm");
    assert_eq!(x.mma_input, None);
    assert!(
        x.repro
            .contains("template <typename T>\nint kwb_replay_go(const char* what, Options& o) {")
    );
    // `Gemm` is run by two calls: the first by default, --instance picks the other.
    let first = extract(TWO_X, &request("Gemm")).unwrap();
    assert!(
        first.instantiation.contains("instance 1 of 2"),
        "{}",
        first.instantiation
    );
    let second = extract(
        TWO_X,
        &Request {
            instance: Some(2),
            ..request("Gemm")
        },
    )
    .unwrap();
    assert_eq!(
        second.host.through.unwrap().call,
        "kwb_replay_go<Gemm>(\"first\", options)"
    );
    assert!(matches!(
        extract(
            TWO_X,
            &Request {
                instance: Some(3),
                ..request("Gemm")
            }
        ),
        Err(ExtractError::NoInstance { given: 3, .. })
    ));
}

/// A CUTLASS 3.x example's shape: the adapter alias a member of a class template
/// whose parameters the member's body reads, run by a call on a local of main.
const THREE_X: &str = r#"using ElementA = cutlass::half_t;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutC = cutlass::layout::ColumnMajor;
template <class Schedule = cutlass::gemm::collective::KernelScheduleAuto, bool UseCustom = false>
struct Runner {
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<Arch, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, 8, ElementA, LayoutB, 8, float, Tile, Cluster, Stages, Schedule>::CollectiveOp;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<Arch, cutlass::arch::OpClassTensorOp, Tile, Cluster, Auto, float, float, ElementA, LayoutC, 8, ElementA, LayoutC, 8, Sched>::CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int,int,int,int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  bool run(const Options& options, const cutlass::KernelHardwareInfo& hw_info) {
    typename Gemm::Arguments arguments{};
    if constexpr (UseCustom) { arguments.epilogue.thread = {{options.beta}}; }
    Gemm gemm_op;
    status = gemm_op.initialize(arguments, workspace.get());
    return true;
  }
};
int main(int argc, char const** args) {
  Options options;
  options.parse(argc, args);
  cutlass::KernelHardwareInfo hw_info;
  hw_info.sm_count = 132;
  Runner<> runner;
  bool passed = runner.run(options, hw_info);
  Runner<cutlass::gemm::KernelTma, true> custom;
  passed = custom.run(options, hw_info);
  return passed ? 0 : 1;
}
"#;

#[test]
fn a_member_launcher_is_replayed_as_a_member_of_its_class() {
    let x = extract(THREE_X, &request("Gemm")).expect("extracts");
    let through = x.host.through.as_ref().unwrap();
    assert_eq!(through.call, "kwb_object.kwb_replay_run(options, hw_info)");
    assert_eq!(
        (
            through.layout.a.as_str(),
            through.layout.b.as_str(),
            through.layout.d.as_str()
        ),
        ("mk", "nk", "nm")
    );
    assert!(
        x.instantiation.contains("instance 1 of 2"),
        "{}",
        x.instantiation
    );
    // The replay is a member of the class template, so its discarded `if constexpr`
    // branches stay uninstantiated as the original's do.
    let replay = x
        .repro
        .find("bool kwb_replay_run(")
        .expect("a replay member");
    let class_end = x.repro.find("\n};\nint kwb_user_main").expect("the class");
    assert!(replay < class_end);
    // The entry sets up hw_info as main does and runs the call's object type.
    let entry = &x.repro[x.repro.find("extern \"C\" int kwb_launch_problem").unwrap()..];
    assert!(entry.contains("hw_info.sm_count = 132;") && entry.contains("Runner<> kwb_object;"));
    let custom = extract(
        THREE_X,
        &Request {
            instance: Some(2),
            ..request("Gemm")
        },
    )
    .unwrap();
    assert!(
        custom
            .repro
            .contains("Runner<cutlass::gemm::KernelTma, true> kwb_object;")
    );
}

#[test]
fn many_gemms_in_one_launch_and_unknown_library_templates_are_refused() {
    let grouped = THREE_X.replace(
        "Shape<int,int,int,int>, Mainloop",
        "cutlass::gemm::GroupProblemShape<Shape<int,int,int>>, Mainloop",
    );
    match extract(&grouped, &request("Gemm")) {
        Err(e @ ExtractError::Harness { .. }) => {
            assert!(e.to_string().contains("it is a grouped GEMM"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // A library GEMM kwb has no table entry for is named with its launch.
    let split = TWO_X.replace(
        "cutlass::gemm::device::Gemm<float,",
        "cutlass::gemm::device::GemmSplitKParallel<float,",
    );
    match extract(&split, &request("Gemm")) {
        Err(e @ ExtractError::OwnBuffers { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("`cutlass::gemm::device::GemmSplitKParallel<…>` (line 2)")
                    && text.contains("`gemm_op.initialize(…)` in `run` (line 15)"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A name that is neither a kernel nor a library GEMM is still an unknown kernel.
    assert!(matches!(
        extract(TWO_X, &request("Options")),
        Err(ExtractError::UnknownKernel { .. })
    ));
}
