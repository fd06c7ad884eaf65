//! Every launch road against every hazard (issue 29): each road of
//! warp-launch that starts kernel work goes through one preparation step
//! (`warp-launch/src/launch/prepare.rs`), so each hazard is refused on each
//! road, with the refusal the hazard calls for, before anything runs.
//!
//! Roads: the builder's `run` and `record_cmd` + `Launch::launch`, a
//! positional launch (`Kernel::launch_args`, what typed launchers call), a
//! generated typed launcher, `Kernel::record_args` + replay, a recorded
//! launch's setters, `Graph::capture_with`, `Graph::build`, a conditional
//! body of `Graph::build`, and `run_steps` (recorded launches on the
//! current stream).
//!
//! Kernels come from two declarations: Warp's (an `AotModule`: `saxpy`,
//! `gather`, `through_struct`) and CUDA C compiled at run time by
//! `CudaModule` (issue 30: the same `saxpy` and `gather` written against
//! `warp_launch.h`, declared from their text). Every hazard but the struct
//! ones (a Warp struct) meets every road with both; a CUDA C kernel has no
//! generated launcher.
//!
//! Hazards: a stream of another context (a second context on cuda:0),
//! named and through `ScopedStream`; a `dim` larger than an array; a host
//! array on CUDA; an unproven kernel; an array in device memory of another
//! context; the last two again held by a `wp.struct` argument (issue 31:
//! `access.py`'s `Holder`, read by `through_struct`), the held array named
//! `h.data`. (Another device is `gpu_two`'s.) A road a hazard cannot reach
//! (a graph built on a stream named explicitly cannot meet a
//! `ScopedStream`; a generated launcher of an unproven kernel has no safe
//! `launch` at all: it does not compile; the struct hazards are not set
//! into a recorded launch) is listed as such.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuda_api::{Allocation, Context, CudaDevice, MemoryKind};
use sdk_tests::launchers::access::{Access, Holder};
use sdk_tests::launchers::kernels::Kernels;
use sdk_tests::warp::data_dir;
/// A module the bundle's `tests/warp/build.py` wrote under the Warp data
/// directory.
fn load(sub: &str) -> AotModule {
    // SAFETY: the directory is one `wp.compile_aot_module` output written by
    // build.py (source, metadata and images of one compile), unchanged.
    unsafe { AotModule::load(data_dir().join(sub)) }
        .unwrap_or_else(|e| panic!("{sub}: {e} (run cargo xtask gpu-bundle)"))
}

use warp_launch::{
    AotModule, Arg, Array, CudaModule, DType, Device, Error, Graph, GraphStep, IntoArg, Kernel,
    Pass, ScopedStream, Storage, Stream, TypedArg, TypedArray, run_steps,
};

/// `saxpy` and `gather` of the Warp module, written in CUDA C against
/// `warp_launch.h` (parameters in the same order), for `CudaModule`.
const CUDA_C: &str = r#"
#include "warp_launch.h"
extern "C" __global__ void saxpy(wl::launch_bounds_t<1> dim, float a, wl::array_t<float> x, wl::array_t<float> y) {
    WL_GRID_STRIDE_LOOP(i, dim) {
        wl::coord_t c = wl::coord(i, dim);
        wl::index(y, c.i) = a * wl::index(x, c.i) + wl::index(y, c.i);
    }
}
extern "C" __global__ void gather(wl::launch_bounds_t<1> dim, wl::array_t<int> idx, wl::array_t<float> x, wl::array_t<float> y) {
    WL_GRID_STRIDE_LOOP(i, dim) {
        wl::coord_t c = wl::coord(i, dim);
        wl::index(y, c.i) = wl::index(x, wl::index(idx, c.i));
    }
}
"#;

/// Where a matrix run's kernels are declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Declared {
    /// Read from Warp's generated source (`AotModule`).
    Warp,
    /// Read from CUDA C compiled at run time (`CudaModule`).
    CudaC,
}

const DEV: Device = Device::Cuda(0);
const N: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Road {
    Run,
    RecordCmd,
    Positional,
    Generated,
    RecordArgs,
    Setter,
    CaptureWith,
    Build,
    ConditionalBody,
    RunSteps,
}

const ROADS: [Road; 10] = [
    Road::Run,
    Road::RecordCmd,
    Road::Positional,
    Road::Generated,
    Road::RecordArgs,
    Road::Setter,
    Road::CaptureWith,
    Road::Build,
    Road::ConditionalBody,
    Road::RunSteps,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hazard {
    ForeignStream,
    ForeignScopedStream,
    DimTooLarge,
    HostArray,
    Unproven,
    ForeignContextArray,
    StructHostArray,
    StructForeignContextArray,
}

const HAZARDS: [Hazard; 8] = [
    Hazard::ForeignStream,
    Hazard::ForeignScopedStream,
    Hazard::DimTooLarge,
    Hazard::HostArray,
    Hazard::Unproven,
    Hazard::ForeignContextArray,
    Hazard::StructHostArray,
    Hazard::StructForeignContextArray,
];

/// What one road is given: the kernel, its forward arguments, the domain,
/// the stream (named, or `None`: the current one) and a good argument list
/// for the setters to start from.
struct Case<'a> {
    kernel: &'a Kernel,
    args: Vec<Arg>,
    good: Vec<Arg>,
    dim: usize,
    stream: Option<&'a Stream>,
    /// The struct argument of the struct hazards, for the typed launcher.
    holder: Option<&'a Holder>,
    /// Whether the kernel has a generated launcher (Warp's do).
    generated: bool,
}

fn typed(args: &[Arg]) -> Vec<TypedArg<'_>> {
    args.iter()
        .map(|a| match a {
            Arg::Array(a) => TypedArg::Array(a),
            Arg::Value(v) => TypedArg::Value(v.bytes()),
            Arg::Struct(s) => TypedArg::Struct(s.into()),
            other => panic!("no positional form for {other:?}"),
        })
        .collect()
}

fn record(c: &Case<'_>, args: Vec<Arg>, dim: usize) -> warp_launch::Result<warp_launch::Launch> {
    let b = c.kernel.launch(dim).inputs(args);
    match c.stream {
        Some(s) => b.stream(s).record_cmd(),
        None => b.record_cmd(),
    }
}

/// The stream a graph road builds on: the named one, else the device's
/// current one.
fn graph_stream(c: &Case<'_>) -> Stream {
    c.stream.cloned().unwrap_or_else(|| DEV.stream().unwrap())
}

/// Runs `road` with `c`; `Ok(None)` when the road cannot meet the hazard.
fn attempt(
    road: Road,
    hazard: Hazard,
    c: &Case<'_>,
    k: &Kernels,
    acc: &Access,
) -> Option<warp_launch::Result<()>> {
    Some(match road {
        Road::Run => {
            let b = c.kernel.launch(c.dim).inputs(c.args.clone());
            match c.stream {
                Some(s) => b.stream(s).run(),
                None => b.run(),
            }
        }
        Road::RecordCmd => record(c, c.args.clone(), c.dim).and_then(|l| l.launch()),
        Road::Positional => c
            .kernel
            .launch_args(Pass::Forward, c.dim, c.stream, &typed(&c.args)),
        Road::Generated => {
            if !c.generated || hazard == Hazard::Unproven {
                // `gather`'s launcher has only the unsafe launch_unchecked.
                return None;
            }
            if let Some(h) = c.holder {
                // `through_struct`'s safe launch checks its arguments
                // (the held array among them) before its access proof.
                let Arg::Array(out) = &c.args[1] else {
                    unreachable!("through_struct's arguments")
                };
                let out = out.typed::<f32, 1>().unwrap();
                return Some(match c.stream {
                    Some(s) => acc.through_struct.launch_on(s, c.dim, h, &out),
                    None => acc.through_struct.launch(c.dim, h, &out),
                });
            }
            let [Arg::Value(a), Arg::Array(x), Arg::Array(y)] = &c.args[..] else {
                unreachable!("saxpy's arguments")
            };
            let a = f32::from_le_bytes(a.bytes().try_into().unwrap());
            let (x, y) = (x.typed::<f32, 1>().unwrap(), y.typed::<f32, 1>().unwrap());
            match c.stream {
                Some(s) => k.saxpy.launch_on(s, c.dim, a, &x, &y),
                None => k.saxpy.launch(c.dim, a, &x, &y),
            }
        }
        Road::RecordArgs => c
            .kernel
            .record_args(Pass::Forward, c.dim, &typed(&c.args))
            .and_then(|l| match c.stream {
                Some(s) => l.launch_on(s),
                None => l.launch(),
            }),
        Road::Setter if c.holder.is_some() => {
            // The struct hazards do not meet the setter road here (a
            // struct value set into a recorded `through_struct` launch).
            return None;
        }
        Road::Setter => {
            // A launch recorded with good arguments on the primary context,
            // then changed to the hazard by its setters.
            // (A kernel that no launch can check is refused right there.)
            let mut l = match c.kernel.launch(N).inputs(c.good.clone()).record_cmd() {
                Ok(l) => l,
                Err(e) => return Some(Err(e)),
            };
            let changed = l
                .set_params(c.args.clone())
                .and_then(|l| l.set_dim(&[c.dim as i64]))
                .map(|_| ());
            changed.and_then(|()| match c.stream {
                Some(s) => l.launch_on(s),
                None => l.launch(),
            })
        }
        Road::CaptureWith | Road::Build | Road::ConditionalBody => {
            if hazard == Hazard::ForeignScopedStream {
                // A graph is built on a stream named explicitly.
                return None;
            }
            let s = graph_stream(c);
            // The launch is recorded without a stream: the graph's stream
            // decides where it runs.
            let l = c.kernel.launch(c.dim).inputs(c.args.clone()).record_cmd();
            let l = match l {
                Ok(l) => l,
                Err(e) => return Some(Err(e)),
            };
            let g = match road {
                Road::CaptureWith => Graph::capture_with(&s, |g| g.launch(l)),
                Road::Build => Graph::build(&s, vec![GraphStep::Launch(l)]),
                _ => {
                    let cond = Array::from_slice(DEV, &[1i32], &[1]).unwrap();
                    Graph::build(
                        &s,
                        vec![GraphStep::capture_if(
                            &cond,
                            vec![GraphStep::Launch(l)],
                            vec![],
                        )],
                    )
                }
            };
            g.and_then(|g| g.launch(&s))
        }
        Road::RunSteps => {
            record(c, c.args.clone(), c.dim).and_then(|l| run_steps(&[GraphStep::Launch(l)]))
        }
    })
}

/// The CUDA C kernels declare what the matrix needs (read without a GPU):
/// `saxpy` with rules, `gather` unproven.
#[test]
fn the_cuda_c_kernels_declare_what_the_matrix_needs() {
    use warp_launch::Accesses;
    let specs = CudaModule::declarations("roads.cu", CUDA_C).unwrap();
    match specs[0].accesses(Pass::Forward) {
        Accesses::Checked(rules) => assert_eq!(rules.len(), 3, "{rules:?}"),
        other => panic!("saxpy: {other:?}"),
    }
    assert!(matches!(
        specs[1].accesses(Pass::Forward),
        Accesses::Unproven(_)
    ));
}

/// Whether `e` is the refusal `hazard` calls for.
fn is_refusal_of(hazard: Hazard, e: &Error) -> bool {
    match hazard {
        Hazard::ForeignStream | Hazard::ForeignScopedStream => {
            matches!(e, Error::StreamContext { .. })
        }
        Hazard::DimTooLarge => matches!(e, Error::OutOfBounds(_)),
        Hazard::HostArray => matches!(e, Error::Access(_)),
        Hazard::Unproven => matches!(e, Error::Unproven(_)),
        Hazard::ForeignContextArray => e.to_string().contains("a context of its own"),
        Hazard::StructHostArray => matches!(e, Error::Access(a) if a.param == "h.data"),
        Hazard::StructForeignContextArray => {
            matches!(e, Error::Access(a) if a.param == "h.data")
                && e.to_string().contains("a context of its own")
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_road_refuses_every_hazard() {
    let cuda_c = CudaModule::compile(DEV, "roads.cu", CUDA_C).unwrap_or_else(|e| panic!("{e}"));
    for declared in [Declared::Warp, Declared::CudaC] {
        let (refused, unreachable) = matrix(declared, &cuda_c);
        println!(
            "every_road_refuses_every_hazard ({declared:?}): {refused} refused, {} out of reach: {}",
            unreachable.len(),
            unreachable.join(", ")
        );
        // Warp: the graph roads cannot meet a ScopedStream (3), an
        // unproven kernel has no safe generated launcher (1), a struct's
        // unproven kernel cannot be recorded to be set (2). CUDA C: no
        // generated launcher (6 hazards) and the graph roads (3).
        let (hazards, out_of_reach) = match declared {
            Declared::Warp => (HAZARDS.len(), 6),
            Declared::CudaC => (HAZARDS.len() - 2, 9),
        };
        assert_eq!(refused + unreachable.len(), hazards * ROADS.len());
        assert_eq!(unreachable.len(), out_of_reach, "{unreachable:?}");
    }
}

/// Runs every hazard on every road with kernels `declared` one way: how
/// many were refused, and which pairs are out of reach.
fn matrix(declared: Declared, cuda_c: &CudaModule) -> (usize, Vec<String>) {
    let aot = load("aot");
    let access = load("access");
    let kernels = Kernels::new(&aot).unwrap();
    let acc = Access::new(&access).unwrap();
    let (saxpy, gather) = match declared {
        Declared::Warp => (
            aot.kernel("saxpy").unwrap(),
            access.kernel("gather").unwrap(),
        ),
        Declared::CudaC => (
            cuda_c.kernel("saxpy").unwrap(),
            cuda_c.kernel("gather").unwrap(),
        ),
    };
    let through_struct = access.kernel("through_struct").unwrap();
    let primary = DEV.context().unwrap();
    let other = Context::new(&CudaDevice::get(0).unwrap()).unwrap();
    let foreign = Stream::new(&other).unwrap();

    let f32s = |n: usize| Array::from_slice(DEV, &vec![1.0f32; n], &[n]).unwrap();
    let (x, y) = (f32s(N), f32s(N));
    let short = f32s(N / 2);
    let host = Array::zeros::<f32>(Device::Cpu, &[N]).unwrap();
    let alloc = Allocation::zeroed(&other, N * 4, MemoryKind::Device).unwrap();
    let separate = Array::from_parts(
        Arc::new(Storage::cuda(alloc)),
        DEV,
        0,
        DType::FLOAT32,
        &[N],
        &[4],
    )
    .unwrap();
    let idx = Array::from_slice(DEV, &vec![0i32; N], &[N]).unwrap();
    let a = 2.0f32.into_arg();
    let saxpy_args = |x: &Array, y: &Array| vec![a.clone(), x.into_arg(), y.into_arg()];
    let good = saxpy_args(&x, &y);
    let holder = |data: &Array| Holder {
        data: data.typed::<f32, 1>().unwrap(),
        scale: 2.0,
    };
    let (host_holder, separate_holder, good_holder) =
        (holder(&host), holder(&separate), holder(&x));
    let struct_args = |h: &Holder| vec![Arg::Struct(h.to_value().unwrap()), (&y).into_arg()];

    let mut refused = 0;
    let mut unreachable = Vec::new();
    let struct_hazard = |h: Hazard| {
        matches!(
            h,
            Hazard::StructHostArray | Hazard::StructForeignContextArray
        )
    };
    for hazard in HAZARDS {
        if declared == Declared::CudaC && struct_hazard(hazard) {
            continue;
        }
        for road in ROADS {
            let holder = match hazard {
                Hazard::StructHostArray => Some(&host_holder),
                Hazard::StructForeignContextArray => Some(&separate_holder),
                _ => None,
            };
            let (kernel, args, good, stream): (&Kernel, Vec<Arg>, Vec<Arg>, Option<&Stream>) =
                match hazard {
                    Hazard::StructHostArray | Hazard::StructForeignContextArray => (
                        &through_struct,
                        struct_args(holder.unwrap()),
                        struct_args(&good_holder),
                        None,
                    ),
                    Hazard::ForeignStream => (&saxpy, good.clone(), good.clone(), Some(&foreign)),
                    Hazard::ForeignScopedStream => (&saxpy, good.clone(), good.clone(), None),
                    Hazard::DimTooLarge => (&saxpy, saxpy_args(&x, &short), good.clone(), None),
                    Hazard::HostArray => (&saxpy, saxpy_args(&x, &host), good.clone(), None),
                    Hazard::ForeignContextArray => {
                        (&saxpy, saxpy_args(&x, &separate), good.clone(), None)
                    }
                    Hazard::Unproven => {
                        let g = vec![(&idx).into_arg(), (&x).into_arg(), (&y).into_arg()];
                        (&gather, g.clone(), g, None)
                    }
                };
            let case = Case {
                kernel,
                args,
                good,
                dim: N,
                stream,
                holder,
                generated: declared == Declared::Warp,
            };
            let scope = (hazard == Hazard::ForeignScopedStream)
                .then(|| ScopedStream::new(&foreign).unwrap());
            let got = attempt(road, hazard, &case, &kernels, &acc);
            drop(scope);
            match got {
                None => unreachable.push(format!("{hazard:?} x {road:?}")),
                Some(Ok(())) => panic!("{declared:?}: {hazard:?} x {road:?}: accepted"),
                Some(Err(e)) => {
                    assert!(
                        is_refusal_of(hazard, &e),
                        "{declared:?}: {hazard:?} x {road:?}: {e}"
                    );
                    println!("{declared:?}: {hazard:?} x {road:?}: {e}");
                    refused += 1;
                }
            }
        }
    }
    DEV.stream().unwrap().synchronize().unwrap();
    // Nothing refused ran: every element of y is still 1 (saxpy would add 2).
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 1.0));
    assert!(short.to_vec::<f32>().unwrap().iter().all(|&v| v == 1.0));
    drop(primary);
    (refused, unreachable)
}

/// A launch for one device with a stream of another (here the CPU device
/// with a stream of cuda:0) is refused on the builder and recorded roads.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_stream_of_another_device_is_refused() {
    let aot = load("aot");
    let saxpy = aot.kernel("saxpy").unwrap();
    let s = Stream::new(&DEV.context().unwrap()).unwrap();
    let x = Array::zeros::<f32>(Device::Cpu, &[N]).unwrap();
    let y = Array::zeros::<f32>(Device::Cpu, &[N]).unwrap();
    for record in [false, true] {
        let b = saxpy
            .launch(N)
            .inputs((2.0f32, &x, &y))
            .device("cpu")
            .stream(&s);
        let e = if record {
            b.record_cmd().unwrap_err()
        } else {
            b.run().unwrap_err()
        };
        assert!(matches!(e, Error::StreamDevice { .. }), "{e}");
    }
}

/// The same roads with an array on cuda:1 for a launch on cuda:0 (Strict
/// access mode: an array of another device is refused without asking the
/// driver about peer access), and with a stream of cuda:1 for a launch
/// whose arrays are on cuda:0. Skips on a machine with one GPU.
#[test]
#[ignore = "needs two CUDA GPUs"]
fn every_road_refuses_an_array_or_stream_of_another_device() {
    const TEST: &str = "every_road_refuses_an_array_or_stream_of_another_device";
    let n = CudaDevice::count().unwrap_or(0);
    if n < 2 {
        sdk_tests::skip(
            TEST,
            &format!("this machine has {n} CUDA device(s); the test needs two"),
        );
        return;
    }
    let previous = warp_launch::set_thread_access_mode(warp_launch::AccessMode::Strict);
    let aot = load("aot");
    let kernels = Kernels::new(&aot).unwrap();
    let acc = Access::new(&load("access")).unwrap();
    let saxpy = aot.kernel("saxpy").unwrap();
    let x = Array::from_slice(DEV, &vec![1.0f32; N], &[N]).unwrap();
    let y = Array::from_slice(DEV, &vec![1.0f32; N], &[N]).unwrap();
    let y1 = Array::from_slice(Device::Cuda(1), &vec![1.0f32; N], &[N]).unwrap();
    let s1 = Stream::new(&Device::Cuda(1).context().unwrap()).unwrap();
    let good = vec![2.0f32.into_arg(), (&x).into_arg(), (&y).into_arg()];
    let other_array = vec![2.0f32.into_arg(), (&x).into_arg(), (&y1).into_arg()];
    let mut refused = 0;
    for road in ROADS {
        for (what, args, stream) in [
            ("an array of cuda:1", other_array.clone(), None),
            ("a stream of cuda:1", good.clone(), Some(&s1)),
        ] {
            let case = Case {
                kernel: &saxpy,
                args,
                good: good.clone(),
                dim: N,
                stream,
                holder: None,
                generated: true,
            };
            match attempt(road, Hazard::HostArray, &case, &kernels, &acc) {
                None => panic!("{road:?} is reachable"),
                Some(Ok(())) => panic!("{what} x {road:?}: accepted"),
                Some(Err(e)) => {
                    assert!(
                        matches!(
                            e,
                            Error::Access(_)
                                | Error::StreamDevice { .. }
                                | Error::StreamContext { .. }
                        ),
                        "{what} x {road:?}: {e}"
                    );
                    println!("{what} x {road:?}: {e}");
                    refused += 1;
                }
            }
        }
    }
    warp_launch::set_thread_access_mode(previous);
    assert_eq!(refused, 2 * ROADS.len());
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 1.0));
    assert!(y1.to_vec::<f32>().unwrap().iter().all(|&v| v == 1.0));
}

/// About `ms` milliseconds of clock64 cycles on cuda:0 (at its top clock:
/// at least that long).
fn cycles(ms: i64) -> i64 {
    let d = CudaDevice::get(0).unwrap();
    let khz = d
        .attribute(cuda_api::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .unwrap() as i64;
    khz * ms
}

/// An array held only by a `wp.struct` argument (issue 31), dropped right
/// after its kernel is queued behind a slow one: its free waits for the
/// kernel (the launch noted the held array's use), so the kernel reads
/// the array's values, not memory freed and reused. On the typed
/// launcher (a positional launch) and a recorded launch replayed then
/// dropped with its struct. Without the struct's arrays noted, the drop
/// returns at once (well under the 50 ms the slow kernel runs).
#[test]
#[ignore = "needs a CUDA GPU"]
fn dropping_an_array_held_in_a_struct_while_its_kernel_runs_waits_for_it() {
    let spin = sdk_tests::warp::header_kernels().unwrap().spin_fill;
    let acc = Access::new(&load("access")).unwrap();
    let stream = Stream::new(&DEV.context().unwrap()).unwrap();
    let slow = Array::zeros::<i32>(DEV, &[1 << 20]).unwrap();
    for road in ["typed launcher", "recorded launch"] {
        let out = TypedArray::<f32, 1>::zeros(DEV, [N]).unwrap();
        spin.launch(slow.len())
            .inputs((&slow, cycles(50)))
            .stream(&stream)
            .run()
            .unwrap();
        let h = Holder {
            data: TypedArray::from_slice(DEV, &vec![1.5f32; N], [N]).unwrap(),
            scale: 2.0,
        };
        let t = Instant::now();
        match road {
            "typed launcher" => {
                // through_struct's accesses through the struct are proven
                // (issue 36): the safe launch, checked against h.data.
                acc.through_struct.launch_on(&stream, N, &h, &out).unwrap();
                drop(h); // the only handle of the array
            }
            _ => {
                let value = h.to_value().unwrap();
                drop(h);
                let l = acc
                    .through_struct
                    .kernel()
                    .launch(N)
                    .inputs((value, out.as_array()))
                    .record_cmd()
                    .unwrap();
                l.launch_on(&stream).unwrap();
                drop(l); // the launch held the struct value, the value the array
            }
        }
        let waited = t.elapsed();
        // Likely in the memory just freed.
        let fresh: Vec<Array> = (0..8)
            .map(|_| Array::from_slice(DEV, &vec![-7.0f32; N], &[N]).unwrap())
            .collect();
        stream.synchronize().unwrap();
        assert!(
            out.to_vec().unwrap().iter().all(|&v| v == 3.0),
            "{road}: the kernel read freed memory (the drop took {waited:?})"
        );
        // Under a tool injected into the driver (compute-sanitizer's
        // initcheck, measured on the H100: the drop took 3 ms) a launch
        // returns once its instrumented kernel has run, so the slow kernel
        // is done before the drop and the wait cannot be judged; the values
        // above still are.
        if let Some(tool) = sdk_tests::injected_tool() {
            println!("{road}: the drop's wait not judged under {tool} ({waited:?})");
            drop(fresh);
            continue;
        }
        assert!(
            waited >= Duration::from_millis(25),
            "{road}: the drop took {waited:?}, less than the queued kernels run: the held array was freed under them"
        );
        println!("{road}: the drop waited {waited:?}");
        drop(fresh);
    }
}
