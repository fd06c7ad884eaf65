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
//! Hazards: a stream of another context (a second context on cuda:0),
//! named and through `ScopedStream`; a `dim` larger than an array; a host
//! array on CUDA; an unproven kernel; an array in device memory of another
//! context. (Another device is `gpu_two`'s.) A road a hazard cannot reach
//! (a graph built on a stream named explicitly cannot meet a
//! `ScopedStream`; a generated launcher of an unproven kernel has no safe
//! `launch` at all: it does not compile) is listed as such.

use std::sync::Arc;

use cuda_api::{Allocation, Context, CudaDevice, MemoryKind};
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
    AotModule, Arg, Array, DType, Device, Error, Graph, GraphStep, IntoArg, Kernel, Pass,
    ScopedStream, Storage, Stream, TypedArg, run_steps,
};

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
}

const HAZARDS: [Hazard; 6] = [
    Hazard::ForeignStream,
    Hazard::ForeignScopedStream,
    Hazard::DimTooLarge,
    Hazard::HostArray,
    Hazard::Unproven,
    Hazard::ForeignContextArray,
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
}

fn typed(args: &[Arg]) -> Vec<TypedArg<'_>> {
    args.iter()
        .map(|a| match a {
            Arg::Array(a) => TypedArg::Array(a),
            Arg::Value(v) => TypedArg::Value(v.bytes()),
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
            if hazard == Hazard::Unproven {
                // `gather`'s launcher has only the unsafe launch_unchecked.
                return None;
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
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_road_refuses_every_hazard() {
    let aot = load("aot");
    let access = load("access");
    let kernels = Kernels::new(&aot).unwrap();
    let saxpy = aot.kernel("saxpy").unwrap();
    let gather = access.kernel("gather").unwrap();
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

    let mut refused = 0;
    let mut unreachable = Vec::new();
    for hazard in HAZARDS {
        for road in ROADS {
            let (kernel, args, good, stream): (&Kernel, Vec<Arg>, Vec<Arg>, Option<&Stream>) =
                match hazard {
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
            };
            let scope = (hazard == Hazard::ForeignScopedStream)
                .then(|| ScopedStream::new(&foreign).unwrap());
            let got = attempt(road, hazard, &case, &kernels);
            drop(scope);
            match got {
                None => unreachable.push(format!("{hazard:?} x {road:?}")),
                Some(Ok(())) => panic!("{hazard:?} x {road:?}: accepted"),
                Some(Err(e)) => {
                    assert!(is_refusal_of(hazard, &e), "{hazard:?} x {road:?}: {e}");
                    println!("{hazard:?} x {road:?}: {e}");
                    refused += 1;
                }
            }
        }
    }
    DEV.stream().unwrap().synchronize().unwrap();
    // Nothing refused ran: every element of y is still 1 (saxpy would add 2).
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 1.0));
    assert!(short.to_vec::<f32>().unwrap().iter().all(|&v| v == 1.0));
    println!(
        "every_road_refuses_every_hazard: {refused} refused, {} out of reach: {}",
        unreachable.len(),
        unreachable.join(", ")
    );
    assert_eq!(refused + unreachable.len(), HAZARDS.len() * ROADS.len());
    assert_eq!(unreachable.len(), 4, "{unreachable:?}");
    drop(primary);
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
            };
            match attempt(road, Hazard::HostArray, &case, &kernels) {
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
