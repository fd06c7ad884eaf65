//! The preparation step every launch road goes through: each check a
//! launch makes lives here once, and the roads call it instead of writing
//! it again.
//!
//! The roads: the builder ([`LaunchBuilder::run`](crate::LaunchBuilder::run),
//! [`LaunchBuilder::record_cmd`](crate::LaunchBuilder::record_cmd)), the
//! positional launches typed launchers make ([`Kernel::launch_args`],
//! [`Kernel::record_args`]), [`Launch`](crate::Launch) replays and their
//! setters, graphs ([`Graph::capture_with`](crate::Graph::capture_with),
//! [`Graph::build`](crate::Graph::build), conditional bodies) and the CPU
//! device. Every one of them reaches the driver or the CPU runner through
//! [`Launch::build`](super::launch::Launch) / `Launch::run_on` or through the
//! positional fast path of `launch/typed.rs` (which an immediate CUDA
//! [`LaunchBuilder::run`](crate::LaunchBuilder::run) of a forward pass
//! takes too, with the builder's arguments borrowed:
//! `LaunchBuilder::run_direct`), and both call the functions below.
//!
//! | check | where | covered by |
//! |---|---|---|
//! | argument count (forward: one per parameter; adjoint: then one per adjoint; a setter's list) | [`check_count`], [`count_error`] | `warp_cpu::argument_errors`, `warp_typed_cpu::positional_refusals_are_the_builders`, `launch/typed/tests.rs` |
//! | the stream's device is the launch's | [`check_stream_device`] | `gpu_roads::a_stream_of_another_device_is_refused` |
//! | the stream's context is the one the launch was checked for, whether named or current ([`Device::stream`]: a [`ScopedStream`](crate::ScopedStream)'s or the default one); a graph's context is its launches' ([`check_context`], [`capture_node`], [`update_node`]) | [`launch_stream`], [`check_stream_context`] | `gpu_roads::every_road_refuses_every_hazard` (another context's stream, named and through `ScopedStream`, on every road), `gpu_typed::positional_launches_refuse_a_current_stream_of_another_context`, `gpu_safety::a_recorded_warp_launch_refuses_a_stream_of_another_context`, `gpu_conditional::a_graph_on_a_stream_of_another_context_is_refused` |
//! | each argument's kind, dtype, dimensions, and where its memory lives under the access mode (device, context, host memory) | `bind::check` (builder, setters) and `Kernel::check_typed` (positional), both ending in `crate::array::check` | `gpu_roads` (host array on CUDA, array of another context, on every road), `warp_cpu::argument_errors`, `gpu_safety::a_warp_array_in_device_memory_of_a_separate_context_is_refused_in_every_mode` |
//! | the arrays a struct argument holds ([`StructValue::with_arrays`](crate::StructValue::with_arrays)): exactly the struct's array fields, each of its dtype and dimensions, and where each lives, as an array argument (named `h.data`) | `bind::check_held`, called by `bind::check` and `Kernel::check_typed`, ending in `crate::array::check` | `gpu_roads::every_road_refuses_every_hazard` (a struct holding a host array, an array of another context, on every road), `bind::tests::a_struct_held_array_is_checked_for_the_launch_device`, `cpu_kernels::a_struct_holding_an_array_keeps_it_alive_and_is_checked` |
//! | the kernel's access proof against `dim` (unproven kernels refused); rules of arrays a struct argument holds (`h.data`) against the extents in the value's bytes, and modulo rules against an empty divisor axis | `launch::check_access_rules` | `gpu_roads` (`dim` larger than an array, an unproven kernel, on every road), `launch/launch.rs` tests (`held_array_rules_are_checked_against_the_struct_value`, `modulo_rules_refuse_an_empty_divisor_only`), `gpu_tiles::launches_that_do_not_fit_a_tile_kernel_are_refused`, `cpu_held`, `gpu_held`, `cpu_modulo`, `gpu_modulo` |
//! | the launch configuration (zero and too large extents, block and shared memory against the function's and the device's limits, a cooperative grid's fit) is checked once per prepared launch and not again at its replays: a [`Launch`](crate::Launch) at its first run (again after `set_dim`), a remembered positional launch when it is remembered ([`cuda_api::DynKernel::check_config`]); a replay on another context's stream or through another kernel is checked in full | [`enqueue_checked`] (cuda-api's `launch_checked`) | `gpu_api::a_checked_config_launches_and_every_other_check_still_runs`, `gpu_roads::every_road_refuses_every_hazard`, `gpu_typed`, `gpu_warp` |
//! | dynamic shared memory above the default limit is opted into once per context | [`opt_in_shared_mem`] | `gpu_tiles::tile_kernels_give_warps_results_at_block_dim_64_and_128` |
//! | launch-bounds bytes (`launch_bounds_t<N>`, parameter 0) | [`write_bounds`] | `gpu_warp`, `gpu_typed::positional_launches_give_warps_results` |
//! | use tracking: frees and host reads of every array and gradient (those a struct argument holds included; graphs through `Launch::storages`) wait for the queued work; memory a pool made on another stream is ordered before this use | [`note_uses`], [`enqueue_own`] | `gpu_safety::a_warp_array_read_right_after_a_launch_on_a_non_blocking_stream_is_current`, `gpu_conditional::dropping_a_graph_and_its_array_during_a_replay_waits_for_it`, `gpu_roads::dropping_an_array_held_in_a_struct_while_its_kernel_runs_waits_for_it`, `gpu_streams` |
//! | uses in any context: a use on a stream of another context than the memory's (page-locked or managed memory of a separate context; `fill_on` and copies on a separate context's stream; graph replays) is noted with that context, and host reads, writes, frees and CPU kernels synchronise it too; page-locked memory made elsewhere that the stream's context cannot reach is refused naming both contexts | [`note_uses`] (through `cuda_api::Allocation::record_use_on` / `record_use_in`) | `gpu_owners::{pinned,managed}_{launch,fill_on,copy,graph_replay}_{same,other}_context`, `gpu_owners::a_cpu_kernel_waits_for_gpu_work_of_another_context_on_its_array`, `gpu_owners::a_cpu_each_fn_body_waits_for_gpu_work_on_its_array_in_every_host_memory_kind` |
//! | GPU work and CPU kernels exclude each other on page-locked and managed memory: the storage locks are held until the launch (or replay, fill, copy) is queued, so it waits for a CPU kernel on another thread and is refused on the thread whose CPU kernel holds them | [`note_uses`] (`crate::array::lock_for_gpu`), `Graph::launch`, the array operations' `lock_for` | `gpu_owners::a_launch_waits_for_a_cpu_kernel_writing_its_page_locked_array`, `gpu_owners::a_launch_from_a_cpu_kernel_body_on_its_array_is_refused` |
//! | a stream the driver is capturing (any handle: clones, `Stream::from_cudarc`, `borrow_raw`, a stream that joined the capture) is refused unless it is the capture's own, whose graph holds the memory: asked of the driver at every enqueue (`cuStreamIsCapturing`, one call per launch; `cuStreamGetCaptureInfo` for the capture id while capturing) | [`enqueue`] (cuda-api's `launch_raw`, `Stream::refuse_if_capturing`) | `gpu_owners::a_second_handle_on_a_capturing_stream_is_refused` |
//! | a CPU launch refuses memory lent to cudarc, locks and waits for the arrays struct arguments hold | [`run_cpu`] (`cpu::run`) | `gpu_owners::a_cpu_launch_on_memory_lent_to_cudarc_is_refused` |
//! | the CUDA function is the launch's device's: a Warp module's image is chosen and loaded per device on its first use there (on a host of two architectures each device runs its own), and every road asks for the function with the launch's device ordinal | `Kernel::cuda`, `CudaSlot::get` (`launch/kernel.rs`) | `gpu_arch::each_device_runs_the_image_chosen_for_its_own_architecture`, `device::tests::per_device_values_are_made_once_per_device_on_first_use` |
//! | only this module starts kernel work: [`enqueue`], [`enqueue_checked`], [`run_cpu`], [`capture_node`], [`update_node`], [`enqueue_own`] | | `cargo test -p xtask --test roads` (syn) |
//!
//! A launch without a stream runs on the device's current stream,
//! [`Device::stream`]: the innermost [`ScopedStream`](crate::ScopedStream)
//! of this thread, else the device's default stream. That stream is
//! checked exactly as a named one.

use cuda_api::{
    ArgBlock, Capture, CheckedConfig, Context, CudaGraphExec, DynKernel, GraphNode, KernelArgs,
    KernelSignature, LaunchConfig, Stream, TypedKernel,
};

use super::bind::{Arg, HeldArray};
use super::domain::{Bounds, Plan};
use super::kernel::Kernel;
use crate::array::{Array, StorageLocks};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::signature::Pass;

/// Dynamic shared memory a kernel may use without opting in (48 KiB).
pub(super) const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

/// The error for `given` arguments where the launch takes one per
/// parameter of `kernel` (then one adjoint per parameter for
/// [`Pass::Adjoint`]); `list` names the argument list as the caller took
/// it (`"inputs + outputs"`, `"adj_inputs + adj_outputs"`, `"set_params"`).
pub(super) fn count_error(kernel: &Kernel, pass: Pass, list: &'static str, given: usize) -> Error {
    let params = kernel.params();
    let mut expected: Vec<String> = params.iter().map(|p| p.name.clone()).collect();
    if pass == Pass::Adjoint {
        if list == "adj_inputs + adj_outputs" {
            expected = expected.iter().map(|n| format!("adj_{n}")).collect();
        } else {
            expected.extend(params.iter().map(|p| format!("adj_{}", p.name)));
        }
    }
    Error::ArgumentCount {
        kernel: kernel.name().to_string(),
        list,
        expected,
        given,
    }
}

/// Refuses `given` arguments unless the launch takes exactly that many:
/// one per parameter for [`Pass::Forward`], twice that for
/// [`Pass::Adjoint`] (the parameters, then one adjoint each).
pub(super) fn check_count(kernel: &Kernel, pass: Pass, given: usize) -> Result<()> {
    let n = kernel.params().len();
    let expected = if pass == Pass::Adjoint { 2 * n } else { n };
    if given == expected {
        return Ok(());
    }
    let list = if pass == Pass::Adjoint {
        "inputs + outputs + adj_inputs + adj_outputs"
    } else {
        "inputs + outputs"
    };
    Err(count_error(kernel, pass, list, given))
}

/// Refuses a stream of another device than the launch's.
pub(super) fn check_stream_device(kernel: &Kernel, s: &Stream, device: Device) -> Result<()> {
    let on = Device::from(s.context().device());
    if on == device {
        return Ok(());
    }
    Err(Error::StreamDevice {
        launch: format!("launch of kernel '{}'", kernel.name()),
        stream: on,
        device,
    })
}

/// Refuses a stream of another context than `ctx`, the one the launch's
/// arrays and checks belong to (a device's primary context).
pub(crate) fn check_stream_context(kernel: &Kernel, s: &Stream, ctx: &Context) -> Result<()> {
    check_context(
        || format!("launch of kernel '{}'", kernel.name()),
        s.context(),
        ctx,
    )
}

/// The one context check of kernel work: work checked for `expected` (the
/// context its arrays live in) refuses to be queued in `actual`, a stream's
/// or a graph's context. `what` names the launch or the call. Launches
/// ([`check_stream_context`]), graph nodes (`Launch::graph_parts`) and
/// graph replays ([`crate::Graph::launch`]) all check here.
pub(crate) fn check_context(
    what: impl FnOnce() -> String,
    actual: &Context,
    expected: &Context,
) -> Result<()> {
    if actual == expected {
        return Ok(());
    }
    Err(Error::StreamContext {
        launch: what(),
        stream: actual.to_string(),
        expected: expected.to_string(),
    })
}

/// The stream a CUDA launch on `device` runs on, checked against `ctx`
/// (the context the launch was checked for): `given`, else the device's
/// current stream ([`Device::stream`]: a [`ScopedStream`](crate::ScopedStream)'s
/// or the default one), which `slot` then holds. A stream of another
/// context is refused whichever way it came.
pub(super) fn launch_stream<'s>(
    kernel: &Kernel,
    device: Device,
    ctx: &Context,
    given: Option<&'s Stream>,
    slot: &'s mut Option<Stream>,
) -> Result<&'s Stream> {
    let stream = match given {
        Some(s) => s,
        None => slot.insert(device.stream()?),
    };
    check_stream_context(kernel, stream, ctx)?;
    Ok(stream)
}

/// Lets `k` use `smem` bytes of dynamic shared memory in `ctx` when that is
/// above the default limit, as Warp does when it loads a module (once per
/// context: the limit is cached with the function).
pub(super) fn opt_in_shared_mem(k: &DynKernel, ctx: &Context, smem: u32) -> Result<()> {
    if smem > DEFAULT_SHARED_LIMIT && k.function().limits(ctx)?.max_dynamic_shared_bytes < smem {
        k.function().set_max_dynamic_shared_memory(ctx, smem)?;
    }
    Ok(())
}

/// Writes the launch bounds of `plan` (`launch_bounds_t<N>`, parameter 0)
/// into `block`.
pub(super) fn write_bounds(block: &mut ArgBlock<'static>, plan: &Plan) -> Result<()> {
    let b = &plan.bounds;
    let buf = crate::abi::encode::launch_bounds(b.ndim, &b.shape, b.size, b.coord_mult);
    // SAFETY: parameter 0 of every kernel the crate declares is
    // launch_bounds_t<N> with N the kernel's dimension (declared so and
    // checked against the driver's layout); these are its bytes.
    unsafe { block.set_bytes(0, &buf[..b.byte_len()]) }?;
    Ok(())
}

/// Notes that work about to be queued on `stream` uses a launch's arrays
/// (`arrays` in argument order: the argument if it is an array, and the
/// arrays a struct argument holds), each with its gradient
/// ([`crate::array::note_use_on`]): host reads and frees wait for it,
/// `stream` waits for a pool array's zeroing queued on another stream, and
/// an array lent to cudarc is refused, naming the argument (and the struct
/// field): the one loop of every launch road.
///
/// First it takes the storage locks of the page-locked and managed arrays
/// among them ([`crate::array::lock_for_gpu`]), which the caller holds
/// until the launch is queued: the launch waits for a CPU launch on
/// another thread that holds one, is refused on the thread whose CPU
/// kernel holds one, and a CPU launch after it waits for it.
pub(super) fn note_uses<'a>(
    kernel: &Kernel,
    arrays: impl Iterator<Item = (Option<&'a Array>, &'a [HeldArray])> + Clone,
    stream: &Stream,
) -> Result<StorageLocks> {
    // Device memory takes no lock: most launches only ask each storage
    // where it lives (the profile in docs/launch-profile.md). Plain loops:
    // the iterator chains they replace were 1-2 % of a replay's samples.
    let mut host = false;
    for (a, held) in arrays.clone() {
        if let Some(a) = a {
            host |= reaches_host(a);
        }
        for h in held {
            host |= reaches_host(&h.array);
        }
    }
    let locks = if host {
        lock_storages(kernel, arrays.clone())?
    } else {
        StorageLocks::none()
    };
    for (i, (a, held)) in arrays.enumerate() {
        if let Some(a) = a {
            note_array(kernel, a, stream, i, None)?;
        }
        for h in held {
            note_array(kernel, &h.array, stream, i, Some(&h.path))?;
        }
    }
    Ok(locks)
}

/// Whether host code can reach `a`'s storage or its gradient's.
#[inline]
fn reaches_host(a: &Array) -> bool {
    a.storage().host_reachable() || a.grad().is_some_and(|g| g.storage().host_reachable())
}

/// The storage locks of [`note_uses`] when some storage is host-reachable.
#[cold]
fn lock_storages<'a>(
    kernel: &Kernel,
    arrays: impl Iterator<Item = (Option<&'a Array>, &'a [HeldArray])>,
) -> Result<StorageLocks> {
    let storages = arrays
        .flat_map(|(a, held)| a.into_iter().chain(held.iter().map(|h| &h.array)))
        .flat_map(|a| std::iter::once(a).chain(a.grad()))
        .map(|a| &**a.storage());
    crate::array::lock_for_gpu(storages, "launch").map_err(|e| match e {
        Error::WouldDeadlock { call, message } => Error::WouldDeadlock {
            call,
            message: format!("kernel '{}': {message}", kernel.name()),
        },
        e => e,
    })
}

/// Notes the use of `a` (argument `i`, or its struct field `field`) and
/// of its gradient on `stream`, for [`note_uses`].
#[inline]
fn note_array(
    kernel: &Kernel,
    a: &Array,
    stream: &Stream,
    i: usize,
    field: Option<&str>,
) -> Result<()> {
    let call = || format!("launch of '{}'", kernel.name());
    crate::array::note_use_on(a.storage(), stream, call, || {
        format!("{} ({a:?})", argument_name(kernel, i, field))
    })?;
    if let Some(g) = a.grad() {
        crate::array::note_use_on(g.storage(), stream, call, || {
            format!(
                "the gradient of {} ({g:?})",
                argument_name(kernel, i, field)
            )
        })?;
    }
    Ok(())
}

/// How a refusal of [`note_uses`] names argument `i` (or its struct field
/// `field`): adjoint launches pass one adjoint per parameter after the
/// parameters.
#[cold]
fn argument_name(kernel: &Kernel, i: usize, field: Option<&str>) -> String {
    let params = kernel.params();
    let name = match (params.get(i), params.get(i.wrapping_sub(params.len()))) {
        (Some(p), _) => format!("argument '{}'", p.name),
        (None, Some(p)) => format!("the adjoint of argument '{}'", p.name),
        (None, None) => format!("argument {i}"),
    };
    match field {
        Some(path) => format!("field '{path}' of {name}"),
        None => name,
    }
}

/// Enqueues a checked CUDA launch of `k` on `stream`: the one place
/// warp-launch's kernels reach the driver's launch (plain or cooperative).
/// The caller ran the checks above and noted the launch's uses.
pub(super) fn enqueue(
    k: &DynKernel,
    stream: &Stream,
    cfg: LaunchConfig,
    block: &ArgBlock<'_>,
    cooperative: bool,
) -> Result<()> {
    if cooperative {
        Ok(k.launch_cooperative(stream, cfg, block)?)
    } else {
        Ok(k.launch(stream, cfg, block)?)
    }
}

/// [`enqueue`] with a configuration checked once for `k` in the stream's
/// context ([`cuda_api::DynKernel::check_config`]): a prepared launch (a
/// [`Launch`] replay, a remembered positional launch) does not check its
/// fixed configuration again; everything else is checked as for
/// [`enqueue`].
pub(super) fn enqueue_checked(
    k: &DynKernel,
    stream: &Stream,
    checked: &CheckedConfig,
    block: &ArgBlock<'_>,
) -> Result<()> {
    Ok(k.launch_checked(stream, checked, block)?)
}

/// Runs a checked launch on the CPU device: the one call of the CPU
/// runner.
pub(super) fn run_cpu(kernel: &Kernel, pass: Pass, bounds: &Bounds, args: &[Arg]) -> Result<()> {
    crate::cpu::run(kernel.declared(), kernel.cpu(pass)?, pass, bounds, args)
}

/// Enqueues one of warp-launch's own kernels (the tape's copy adjoint),
/// typed by cuda-api, after noting that the work uses `uses` (each an
/// array named for a refusal, checked by the caller to be device memory of
/// `stream`'s context), as [`note_uses`] does for a launch. `call` names
/// the work in a refusal.
pub(crate) fn enqueue_own<S: KernelSignature>(
    k: &TypedKernel<S>,
    stream: &Stream,
    cfg: LaunchConfig,
    args: impl KernelArgs<S>,
    call: &str,
    uses: &[(&Array, &str)],
) -> Result<()> {
    for (a, what) in uses {
        crate::array::note_use_on(
            a.storage(),
            stream,
            || call.into(),
            || format!("{what} ({a:?})"),
        )?;
    }
    Ok(k.launch(stream, cfg, args)?)
}

/// A checked launch as a graph takes it ([`crate::Launch`]'s
/// `graph_parts`, which checked it for the graph's context): its kernel,
/// configuration and argument block, whether it is cooperative, and
/// whether its domain is empty.
pub(crate) struct NodeParts<'l> {
    pub kernel: &'l DynKernel,
    pub cfg: LaunchConfig,
    pub block: &'l ArgBlock<'static>,
    pub cooperative: bool,
    pub empty: bool,
}

/// Adds a checked launch as a kernel node of the graph `c` captures;
/// `None`, adding nothing, for a launch of size 0. The one way a launch
/// enters a graph ([`Graph::capture_with`](crate::Graph::capture_with),
/// [`Graph::build`](crate::Graph::build) and its conditional bodies).
pub(crate) fn capture_node(c: &Capture<'static>, l: NodeParts<'_>) -> Result<Option<GraphNode>> {
    if l.empty {
        return Ok(None);
    }
    Ok(Some(if l.cooperative {
        c.launch_cooperative(l.kernel, l.cfg, l.block)?
    } else {
        c.launch(l.kernel, l.cfg, l.block)?
    }))
}

/// Makes `node` of `exec` run a checked launch from its next replay on.
/// On the driver's refusal the node keeps its parameters and the error is
/// the driver's, for the caller to name.
pub(crate) fn update_node(
    exec: &mut CudaGraphExec<'static>,
    node: &GraphNode,
    l: NodeParts<'_>,
) -> std::result::Result<(), cuda_api::CudaError> {
    exec.update_kernel(node, l.kernel, l.cfg, l.block)
}
