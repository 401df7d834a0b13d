//! The GPU worker: the only code in kwb that touches CUDA or calls into a
//! reproducer, and the only module allowed `unsafe`.
//!
//! It creates the device's primary context through cudarc, loads the reproducer's
//! shared library (its CUDA runtime then shares that context, so cudarc's device
//! pointers are the kernel's), allocates the plan's operands, and per rung: uploads
//! the inputs, fills the output with NaN (a value the kernel never wrote reads as
//! NaN), encodes the TMA descriptors with the reproducer's own encoders, asks
//! `kwb_config` for the launch configuration, launches through `kwb_launch`, waits,
//! and writes the output buffer back. The buffers' addresses and each map's bytes,
//! the first time it is encoded, are reported as they are: decoding is the
//! supervisor's side. Each step is reported as an [`Event`] line on
//! stdout; the supervisor enforces the timeout by killing this process.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_void};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys,
};

use crate::abi::{Dim3, Problem, TensorMap};
use crate::job::{Event, Job, hex, runtime_error_name};
use crate::plan::{Arg, Role};

type LaunchFn = unsafe extern "C" fn(Dim3, Dim3, usize, *mut c_void, *mut *mut c_void) -> i32;
type ConfigFn = unsafe extern "C" fn(*const Problem, *mut u32, *mut u32, *mut u64) -> i32;
/// `kwb_extract::THROUGH_ENTRY`: the user's launcher called with the problem, on a stream.
type ThroughFn = unsafe extern "C" fn(*const Problem, *mut c_void) -> i32;
type EncodeFn = unsafe extern "C" fn(*const Problem, *mut c_void) -> i32;
type SizeFn = unsafe extern "C" fn() -> u64;
type WorkspaceFn = unsafe extern "C" fn(*const Problem, *mut u64) -> i32;
type FillFn =
    unsafe extern "C" fn(*const Problem, *mut c_void, *mut c_void, *mut *const c_char) -> i32;
type TasksBytesFn = unsafe extern "C" fn(*const Problem, *mut u64, *mut i32) -> i32;
type TasksFillFn = unsafe extern "C" fn(*const Problem, *mut c_void, *mut c_void) -> i32;
/// `kwb_extract::LAUNCHED_MAPS`: the maps the kernel received at its launch through
/// the user's launcher, 128 bytes each, and the parameters they were passed as.
type LaunchedMapsFn = unsafe extern "C" fn(*mut *const u8, *mut *const *const c_char) -> i32;

/// Whether this machine has a CUDA driver library: `Err` says why not.
pub fn driver_present() -> Result<(), String> {
    // SAFETY: loading the driver library runs its initializers, which is what any
    // CUDA program does first; nothing is called through it here.
    unsafe { libloading::Library::new("libcuda.so.1") }
        .map(drop)
        .map_err(|e| e.to_string())
}

fn say(event: &Event) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", event.line());
    let _ = out.flush();
}

fn fail(rung: Option<usize>, stage: &str, message: impl Into<String>) -> i32 {
    say(&Event::Failed {
        rung,
        stage: stage.to_owned(),
        message: message.into(),
    });
    1
}

/// Runs the job in `path`; the process exit code.
pub fn main(path: &Path) -> i32 {
    let job: Job = match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(j) => j,
        Err(e) => return fail(None, "job", format!("{}: {e}", path.display())),
    };
    if let Err(why) = driver_present() {
        return fail(None, "context", format!("no CUDA driver: {why}"));
    }
    let ctx = match CudaContext::new(0) {
        Ok(c) => c,
        Err(e) => {
            let hint = if format!("{e:?}").contains("CUDA_ERROR_NO_DEVICE") {
                ": the driver sees no GPU (check CUDA_VISIBLE_DEVICES and nvidia-smi)"
            } else {
                ""
            };
            return fail(None, "context", format!("{e}{hint}"));
        }
    };
    // SAFETY: cudarc's event tracking only orders its own streams; this worker uses
    // one stream and synchronizes it explicitly.
    unsafe { ctx.disable_event_tracking() };
    // The driver's symbols made global first, as a program linked with `-lcuda` has
    // them: a reproducer that holds a whole translation unit may call the driver API
    // itself (CUTLASS's utilities do), which cudarc's own local load does not resolve.
    // SAFETY: the driver library is already loaded (driver_present, cudarc); this only
    // widens the visibility of its symbols, and the handle lives as long as the process.
    match unsafe {
        libloading::os::unix::Library::open(
            Some("libcuda.so.1"),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
        )
    } {
        Ok(driver) => std::mem::forget(driver),
        Err(e) => return fail(None, "context", format!("libcuda.so.1: {e}")),
    }
    // SAFETY: the library is a reproducer kwb-extract wrote and nvcc built; loading
    // it runs the CUDA runtime's registration of its kernels.
    let library = match unsafe { libloading::Library::new(&job.library) } {
        Ok(l) => l,
        Err(e) => return fail(None, "library", format!("{}: {e}", job.library.display())),
    };
    say(&Event::Ready {
        device: ctx.name().unwrap_or_default(),
        sm: ctx.compute_capability().unwrap_or((0, 0)),
    });
    match run(&ctx, &library, &job) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

/// A device buffer of raw bytes per operand.
struct Buffers {
    stream: Arc<CudaStream>,
    slices: Vec<(Role, CudaSlice<u8>)>,
}

impl Buffers {
    fn address(&self, role: Role) -> u64 {
        self.slices
            .iter()
            .find(|(r, _)| *r == role)
            .map_or(0, |(_, s)| s.device_ptr(&self.stream).0)
    }
}

fn run(ctx: &Arc<CudaContext>, library: &libloading::Library, job: &Job) -> Result<(), i32> {
    let stream = ctx
        .new_stream()
        .map_err(|e| fail(None, "context", format!("{e}")))?;
    // SAFETY: the symbols are the C entry points kwb-extract writes, with these
    // signatures (crates/extract/src/emit.rs and host.rs).
    if job.through {
        return run_through(ctx, library, job, &stream);
    }
    let launch: libloading::Symbol<'_, LaunchFn> = unsafe { library.get(job.entry.as_bytes()) }
        .map_err(|e| fail(None, "library", format!("{}: {e}", job.entry)))?;
    let config: Option<libloading::Symbol<'_, ConfigFn>> = match &job.config {
        Some(name) => Some(
            // SAFETY: as above.
            unsafe { library.get(name.as_bytes()) }
                .map_err(|e| fail(None, "library", format!("{name}: {e}")))?,
        ),
        None => None,
    };
    let mut buffers = allocate(&stream, &job.plan)?;
    // The TensorMap arguments whose bytes were reported: each once, when first encoded.
    let mut reported: Vec<usize> = Vec::new();
    let plan = &job.plan;
    let mut reference = load_reference(ctx, &stream, job)?;
    for (index, rung) in job.rungs.iter().enumerate() {
        let at = Some(index);
        upload(&stream, &mut buffers, rung, at)?;
        let problem = problem(&buffers, plan);
        let reference_ms = run_reference(&stream, &mut reference, rung, &problem, plan, at)?;
        // The launch configuration.
        let (mut grid, mut block, mut smem) = ([0u32; 3], [0u32; 3], 0u64);
        if let Some(f) = &config {
            // SAFETY: kwb_config writes three, three and one values.
            let rc = unsafe { f(&problem, grid.as_mut_ptr(), block.as_mut_ptr(), &mut smem) };
            if rc != 0 {
                return Err(fail(at, "config", format!("kwb_config returned {rc}")));
            }
        }
        grid = job.grid.unwrap_or(grid);
        block = job.block.unwrap_or(block);
        smem = job.smem.unwrap_or(smem);
        // The arguments: each value in its own box, so its address is stable.
        let mut values: Vec<Box<dyn std::any::Any>> = Vec::new();
        let mut pointers: Vec<*mut c_void> = Vec::new();
        // A megakernel's task list: its device image, built by the reproducer.
        let mut tasks: Option<(*mut c_void, i32)> = None;
        if let Some(Arg::Tasks { bytes, fill }) =
            plan.args.iter().find(|a| matches!(a, Arg::Tasks { .. }))
        {
            // SAFETY: the signatures of kwb_extract::TASKS_BYTES and TASKS_FILL.
            let (bytes_fn, fill_fn) = unsafe {
                (
                    library.get::<TasksBytesFn>(bytes.as_bytes()),
                    library.get::<TasksFillFn>(fill.as_bytes()),
                )
            };
            let (bytes_fn, fill_fn) = match (bytes_fn, fill_fn) {
                (Ok(b), Ok(f)) => (b, f),
                (Err(e), _) | (_, Err(e)) => {
                    return Err(fail(at, "library", format!("{fill}: {e}")));
                }
            };
            let (mut size, mut count) = (0u64, 0i32);
            // SAFETY: writes one value each.
            let rc = unsafe { bytes_fn(&problem, &mut size, &mut count) };
            if rc != 0 || count <= 0 {
                return Err(fail(
                    at,
                    "tasks",
                    format!("{bytes} returned {rc} with {count} tasks for this problem"),
                ));
            }
            let size = usize::try_from(size).unwrap_or(usize::MAX).max(1);
            let mut image = stream
                .alloc_zeros::<u8>(size)
                .map_err(|e| fail(at, "tasks", format!("{size}-byte task list: {e}")))?;
            let (device, sync) = image.device_ptr(&stream);
            let device = device as *mut c_void;
            drop(sync);
            // 64-byte aligned, as the descriptors in it must be.
            let mut host = vec![TensorMap([0; 16]); size.div_ceil(128)];
            // SAFETY: `host` has at least `size` bytes, 64-byte aligned; `device` is the
            // address the image is copied to.
            let rc = unsafe { fill_fn(&problem, device, host.as_mut_ptr().cast()) };
            if rc != 0 {
                return Err(fail(
                    at,
                    "tasks",
                    format!(
                        "{fill} returned {rc}: the file's own descriptor encoding refused these parameters"
                    ),
                ));
            }
            // The maps the file's own encoder wrote into the task list, as the
            // kernel will read them: reported on the first rung.
            if index == 0 {
                say_launched_maps(library);
            }
            // SAFETY: plain bytes of the image, `size` of them.
            let bytes_of = unsafe { std::slice::from_raw_parts(host.as_ptr().cast::<u8>(), size) };
            stream
                .memcpy_htod(bytes_of, &mut image)
                .map_err(|e| fail(at, "tasks", format!("{e}")))?;
            values.push(Box::new(image));
            tasks = Some((device, count));
        }
        for (i, arg) in plan.args.iter().enumerate() {
            let name = plan.params.get(i).map_or("?", |p| p.0.as_str());
            let pointer: *mut c_void = match arg {
                Arg::Pointer(role) => boxed(&mut values, buffers.address(*role)),
                Arg::I32(v) => boxed(&mut values, *v),
                Arg::I64(v) => boxed(&mut values, *v),
                Arg::F32(v) => boxed(&mut values, *v),
                Arg::F64(v) => boxed(&mut values, *v),
                Arg::TensorMap(function) => {
                    // SAFETY: as above; the encoder fills one 128-byte CUtensorMap.
                    let encode: libloading::Symbol<'_, EncodeFn> =
                        unsafe { library.get(function.as_bytes()) }
                            .map_err(|e| fail(at, "library", format!("{function}: {e}")))?;
                    let mut map = Box::new(TensorMap([0; 16]));
                    // SAFETY: `map` is a valid, aligned CUtensorMap for the call.
                    let rc = unsafe { encode(&problem, (&mut *map as *mut TensorMap).cast()) };
                    if rc != 0 {
                        return Err(fail(
                            at,
                            "encode",
                            format!(
                                "{function} (for `{name}`) returned {rc}: the launcher's own encoder refused these parameters"
                            ),
                        ));
                    }
                    if !reported.contains(&i) {
                        reported.push(i);
                        say(&Event::Map {
                            param: name.to_owned(),
                            bytes: hex(&map.bytes()),
                        });
                    }
                    let p: *mut TensorMap = &mut *map;
                    values.push(map);
                    p.cast()
                }
                Arg::Tasks { .. } => boxed(&mut values, tasks.map_or(0u64, |t| t.0 as u64)),
                Arg::TaskCount => boxed(&mut values, tasks.map_or(0i32, |t| t.1)),
                Arg::Scratch(bytes) => {
                    let size = usize::try_from(*bytes).unwrap_or(usize::MAX).max(1);
                    let space = stream.alloc_zeros::<u8>(size).map_err(|e| {
                        fail(at, "scratch", format!("{size} bytes for `{name}`: {e}"))
                    })?;
                    let (address, sync) = space.device_ptr(&stream);
                    drop(sync);
                    values.push(Box::new(space));
                    boxed(&mut values, address)
                }
                Arg::Params {
                    fill,
                    size,
                    workspace,
                } => {
                    // SAFETY: as above, the signatures of kwb_extract::ParamsEntries.
                    let (fill_fn, size_fn, workspace_fn) = unsafe {
                        (
                            library.get::<FillFn>(fill.as_bytes()),
                            library.get::<SizeFn>(size.as_bytes()),
                            library.get::<WorkspaceFn>(workspace.as_bytes()),
                        )
                    };
                    let (fill_fn, size_fn, workspace_fn) = match (fill_fn, size_fn, workspace_fn) {
                        (Ok(f), Ok(s), Ok(w)) => (f, s, w),
                        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                            return Err(fail(at, "library", format!("{fill}: {e}")));
                        }
                    };
                    let mut bytes = 0u64;
                    // SAFETY: writes one value.
                    let rc = unsafe { workspace_fn(&problem, &mut bytes) };
                    if rc != 0 {
                        return Err(fail(at, "params", format!("{workspace} returned {rc}")));
                    }
                    let space = stream
                        .alloc_zeros::<u8>(usize::try_from(bytes).unwrap_or(usize::MAX).max(1))
                        .map_err(|e| fail(at, "params", format!("{bytes}-byte workspace: {e}")))?;
                    let (space_ptr, sync) = space.device_ptr(&stream);
                    let space_ptr = space_ptr as *mut c_void;
                    drop(sync);
                    stream
                        .synchronize()
                        .map_err(|e| fail(at, "params", format!("{e}")))?;
                    // SAFETY: returns a size.
                    let size = usize::try_from(unsafe { size_fn() }).unwrap_or(usize::MAX);
                    // 64-byte aligned (the Params hold CUtensorMaps), whole 128-byte units.
                    let mut blob = vec![TensorMap([0; 16]); size.div_ceil(128).max(1)];
                    let mut why: *const c_char = std::ptr::null();
                    // SAFETY: the blob has at least `size` bytes, 64-byte aligned; the
                    // workspace has `bytes` device bytes; `why` gets a static string.
                    let rc = unsafe {
                        fill_fn(
                            &problem,
                            if bytes > 0 {
                                space_ptr
                            } else {
                                std::ptr::null_mut()
                            },
                            blob.as_mut_ptr().cast(),
                            &mut why,
                        )
                    };
                    if rc != 0 {
                        let text = if why.is_null() {
                            String::new()
                        } else {
                            // SAFETY: a NUL-terminated static string of the library.
                            unsafe { CStr::from_ptr(why) }
                                .to_string_lossy()
                                .into_owned()
                        };
                        return Err(fail(
                            at,
                            "params",
                            format!(
                                "{fill} returned {rc} ({text}): the adapter's own {} refused the launcher's Arguments for this problem",
                                if rc == 1 {
                                    "can_implement"
                                } else {
                                    "initialize"
                                }
                            ),
                        ));
                    }
                    let p: *mut c_void = blob.as_mut_ptr().cast();
                    values.push(Box::new(blob));
                    values.push(Box::new(space));
                    p
                }
            };
            pointers.push(pointer);
        }
        say(&Event::Launched {
            rung: index,
            grid,
            block,
            smem,
        });
        let start = stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| fail(at, "launch", format!("{e}")))?;
        // SAFETY: the arguments match the kernel's parameters in order and type (the
        // plan reads them from its declaration), each pointer outlives the call.
        let rc = unsafe {
            launch(
                Dim3::from_array(grid),
                Dim3::from_array(block),
                smem as usize,
                stream.cu_stream().cast(),
                pointers.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(fail(
                at,
                crate::job::launch_stage(rc),
                format!("kwb_launch returned {rc} ({})", runtime_error_name(rc)),
            ));
        }
        let end = stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| fail(at, "kernel", format!("{e}")))?;
        stream
            .synchronize()
            .map_err(|e| fail(at, "kernel", format!("{e}")))?;
        let ms = start.elapsed_ms(&end).unwrap_or(f32::NAN);
        drop(values);
        read_back(&stream, &buffers, plan, rung, at)?;
        say(&Event::Done {
            rung: index,
            ms,
            reference_ms,
        });
    }
    Ok(())
}

/// The rungs of a reproducer through the user's launcher: per rung the inputs, the
/// reference, then the launcher's entry with the problem on the worker's stream.
fn run_through(
    ctx: &Arc<CudaContext>,
    library: &libloading::Library,
    job: &Job,
    stream: &Arc<CudaStream>,
) -> Result<(), i32> {
    // SAFETY: the entry kwb-extract writes through the launcher has this signature
    // (crates/extract/src/through/mod.rs).
    let entry: libloading::Symbol<'_, ThroughFn> = unsafe { library.get(job.entry.as_bytes()) }
        .map_err(|e| fail(None, "library", format!("{}: {e}", job.entry)))?;
    let plan = &job.plan;
    let mut buffers = allocate(stream, plan)?;
    let mut reference = load_reference(ctx, stream, job)?;
    for (index, rung) in job.rungs.iter().enumerate() {
        let at = Some(index);
        upload(stream, &mut buffers, rung, at)?;
        let problem = problem(&buffers, plan);
        let reference_ms = run_reference(stream, &mut reference, rung, &problem, plan, at)?;
        say(&Event::Launched {
            rung: index,
            grid: [0; 3],
            block: [0; 3],
            smem: 0,
        });
        let started = std::time::Instant::now();
        // SAFETY: `problem` holds this worker's buffers, sized by the plan; the entry
        // launches on `stream` and waits for the device.
        let rc = unsafe { entry(&problem, stream.cu_stream().cast()) };
        let ms = started.elapsed().as_secs_f64() as f32 * 1e3;
        // The maps the launcher built, as the kernel received them: read on the first
        // rung, whether or not its launch succeeded (a bad map can make it fail).
        if index == 0 {
            say_launched_maps(library);
        }
        if rc != 0 {
            return Err(fail(
                at,
                crate::job::launch_stage(rc),
                format!(
                    "{} returned {rc} ({}): the launcher's own launch failed",
                    job.entry,
                    runtime_error_name(rc)
                ),
            ));
        }
        stream
            .synchronize()
            .map_err(|e| fail(at, "kernel", format!("{e}")))?;
        read_back(stream, &buffers, plan, rung, at)?;
        say(&Event::Done {
            rung: index,
            ms,
            reference_ms,
        });
    }
    Ok(())
}

/// A `map` event for each TMA map the reproducer holds for the runner: those its
/// capture section read at the kernel's launch through the user's launcher, or those
/// the task list's fill encoded (none where it has neither, or nothing was launched or
/// filled yet).
fn say_launched_maps(library: &libloading::Library) {
    // SAFETY: kwb-extract's capture section defines this symbol with this signature
    // (crates/extract/src/through/maps.rs); a reproducer without one has no symbol.
    let Ok(launched) =
        (unsafe { library.get::<LaunchedMapsFn>(kwb_extract::LAUNCHED_MAPS.as_bytes()) })
    else {
        return;
    };
    let mut bytes: *const u8 = std::ptr::null();
    let mut names: *const *const c_char = std::ptr::null();
    // SAFETY: both out-pointers are valid for one write each.
    let count = unsafe { launched(&mut bytes, &mut names) };
    if count <= 0 || bytes.is_null() || names.is_null() {
        return;
    }
    for i in 0..count as usize {
        // SAFETY: the section holds `count` maps of 128 bytes one after another and
        // `count` NUL-terminated parameter names, in static storage.
        let (map, name) = unsafe {
            (
                std::slice::from_raw_parts(bytes.add(i * 128), 128),
                CStr::from_ptr(*names.add(i)),
            )
        };
        say(&Event::Map {
            param: name.to_string_lossy().into_owned(),
            bytes: hex(map),
        });
    }
}

/// One zeroed device buffer per operand of the plan (reported in a `buffers` event).
fn allocate(stream: &Arc<CudaStream>, plan: &crate::plan::Plan) -> Result<Buffers, i32> {
    let mut buffers = Buffers {
        stream: stream.clone(),
        slices: Vec::new(),
    };
    for o in &plan.operands {
        let slice = stream.alloc_zeros::<u8>(o.bytes().max(1)).map_err(|e| {
            fail(
                None,
                "upload",
                format!("{} ({} bytes): {e}", o.role.name(), o.bytes()),
            )
        })?;
        buffers.slices.push((o.role, slice));
    }
    say(&Event::Buffers {
        buffers: buffers
            .slices
            .iter()
            .map(|(role, slice)| {
                (
                    role.name().to_owned(),
                    buffers.address(*role),
                    slice.len() as u64,
                )
            })
            .collect(),
    });
    Ok(buffers)
}

/// The reference kernel and its M x N output, when the job has one.
fn load_reference(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    job: &Job,
) -> Result<Option<(CudaFunction, CudaSlice<f64>)>, i32> {
    let plan = &job.plan;
    Ok(match &job.reference {
        Some(r) => {
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_file(&r.cubin))
                .map_err(|e| fail(None, "reference", format!("{}: {e}", r.cubin.display())))?;
            let function = module
                .load_function(&r.function)
                .map_err(|e| fail(None, "reference", format!("{}: {e}", r.function)))?;
            let out = stream
                .alloc_zeros::<f64>(plan.m * plan.n)
                .map_err(|e| fail(None, "reference", format!("{e}")))?;
            Some((function, out))
        }
        None => None,
    })
}

/// A rung's inputs into the buffers; the others filled as the rung says.
fn upload(
    stream: &Arc<CudaStream>,
    buffers: &mut Buffers,
    rung: &crate::job::JobRung,
    at: Option<usize>,
) -> Result<(), i32> {
    // Inputs, and NaN in the output.
    for (role, slice) in &mut buffers.slices {
        let Some((_, file)) = rung.inputs.iter().find(|(r, _)| r == role) else {
            let byte = if rung.fill.contains(role) { 0xff } else { 0 };
            let (address, _sync) = slice.device_ptr(stream);
            // SAFETY: `address` is this slice's allocation of `slice.len()` bytes,
            // written on the stream it belongs to.
            unsafe {
                cudarc::driver::result::memset_d8_async(
                    address,
                    byte,
                    slice.len(),
                    stream.cu_stream(),
                )
            }
            .map_err(|e| fail(at, "upload", format!("{}: {e}", role.name())))?;
            continue;
        };
        let bytes = std::fs::read(file)
            .map_err(|e| fail(at, "upload", format!("{}: {e}", file.display())))?;
        if bytes.len() != slice.len() {
            return Err(fail(
                at,
                "upload",
                format!(
                    "{}: {} bytes for a {}-byte buffer",
                    role.name(),
                    bytes.len(),
                    slice.len()
                ),
            ));
        }
        stream
            .memcpy_htod(&bytes, slice)
            .map_err(|e| fail(at, "upload", format!("{}: {e}", role.name())))?;
    }
    stream
        .synchronize()
        .map_err(|e| fail(at, "upload", format!("{e}")))?;
    Ok(())
}

/// The problem the entry points get: the buffers' addresses and the plan's sizes.
fn problem(buffers: &Buffers, plan: &crate::plan::Plan) -> Problem {
    Problem {
        a: buffers.address(Role::A),
        b: buffers.address(Role::B),
        c: buffers.address(Role::C),
        d: buffers.address(Role::D),
        bias: buffers.address(Role::Bias),
        m: plan.m as i64,
        n: plan.n as i64,
        k: plan.k as i64,
        lda: plan.lda as i64,
        ldb: plan.ldb as i64,
        ldc: plan.ldc as i64,
        ldd: plan.ldd as i64,
        alpha: plan.alpha,
        beta: plan.beta,
    }
}

/// The reference on the rung's inputs, its answer written where the rung says; the
/// milliseconds it took.
fn run_reference(
    stream: &Arc<CudaStream>,
    reference: &mut Option<(CudaFunction, CudaSlice<f64>)>,
    rung: &crate::job::JobRung,
    problem: &Problem,
    plan: &crate::plan::Plan,
    at: Option<usize>,
) -> Result<Option<f64>, i32> {
    let mut reference_ms = None;
    if let (Some((function, out)), Some(file)) = (reference, &rung.answer) {
        let started = std::time::Instant::now();
        answer(stream, function, out, problem, plan)
            .and_then(|()| stream.clone_dtoh(&*out).map_err(|e| e.to_string()))
            .and_then(|v| {
                std::fs::write(file, f64_bytes(&v)).map_err(|e| format!("{}: {e}", file.display()))
            })
            .map_err(|e| fail(at, "reference", e))?;
        reference_ms = Some(started.elapsed().as_secs_f64() * 1e3);
    }
    Ok(reference_ms)
}

/// The output buffer into the rung's output file.
fn read_back(
    stream: &Arc<CudaStream>,
    buffers: &Buffers,
    plan: &crate::plan::Plan,
    rung: &crate::job::JobRung,
    at: Option<usize>,
) -> Result<(), i32> {
    let out = buffers
        .slices
        .iter()
        .find(|(r, _)| *r == plan.output)
        .map(|(_, s)| s)
        .ok_or_else(|| fail(at, "readback", "no output buffer"))?;
    let bytes = stream
        .clone_dtoh(out)
        .map_err(|e| fail(at, "readback", format!("{e}")))?;
    std::fs::write(&rung.output, bytes)
        .map_err(|e| fail(at, "readback", format!("{}: {e}", rung.output.display())))?;
    Ok(())
}

/// kwb's reference GEMM on the rung's inputs, into `out`.
fn answer(
    stream: &Arc<CudaStream>,
    function: &CudaFunction,
    out: &mut CudaSlice<f64>,
    p: &Problem,
    plan: &crate::plan::Plan,
) -> Result<(), String> {
    // reference.cu: 64 x 64 outputs per block of 16 x 16 threads.
    let tiles = |v: usize| u32::try_from(v.div_ceil(64)).unwrap_or(u32::MAX);
    let config = LaunchConfig {
        grid_dim: (tiles(plan.n), tiles(plan.m), 1),
        block_dim: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    let (alpha, beta) = (f64::from(p.alpha), f64::from(p.beta));
    let strides = |role: Role| {
        let (r, c) = plan.operand(role).strides();
        (r as i64, c as i64)
    };
    let ((a_row, a_col), (b_row, b_col), (c_row, c_col)) =
        (strides(Role::A), strides(Role::B), strides(Role::C));
    let mut launch = stream.launch_builder(function);
    launch
        .arg(&p.m)
        .arg(&p.n)
        .arg(&p.k)
        .arg(&p.a)
        .arg(&a_row)
        .arg(&a_col)
        .arg(&p.b)
        .arg(&b_row)
        .arg(&b_col)
        .arg(&p.c)
        .arg(&c_row)
        .arg(&c_col)
        .arg(&alpha)
        .arg(&beta)
        .arg(out);
    // SAFETY: the arguments match `kwb_reference_*` in reference.cu in order and type
    // (64-bit sizes and strides, device addresses, doubles, the output slice), and
    // the buffers hold what the plan sized them for.
    unsafe { launch.launch(config) }.map_err(|e| e.to_string())?;
    stream.synchronize().map_err(|e| e.to_string())
}

/// The bytes of `v` as stored (little-endian on every machine CUDA runs on).
fn f64_bytes(v: &[f64]) -> &[u8] {
    // SAFETY: any f64 is 8 initialized bytes; the slice covers exactly `v`.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn boxed<T: 'static>(values: &mut Vec<Box<dyn std::any::Any>>, v: T) -> *mut c_void {
    let mut b = Box::new(v);
    let p: *mut T = &mut *b;
    values.push(b);
    p.cast()
}
