//! Test doubles of the CPU entry points the compile step generates around
//! Warp's CPU code (`wpl_<m>__<key>__forward`, `__backward`, `__layout`,
//! `wpl_take_assert`): real `extern "C"` functions written here that run a
//! kernel over the packed `wp_args_<key>` struct, reading Warp's
//! `launch_bounds_t<N>` and `array_t` layouts as Warp's generated C++
//! does. They stand in for the compiled C++ (which the lead's end-to-end
//! tests run), not for any driver, and are bound to the real declarations
//! of Warp 1.19.0's output for `tests/warp/kernels.py`
//! (`tests/fixtures/wp_kernels.cu`).

#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::{CString, c_char, c_void};
use std::mem::{align_of, offset_of, size_of};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::ThreadId;

use warp_launch::{
    ArrayT, EmbeddedCpu, EmbeddedCpuKernel, EmbeddedModule, LaunchBounds1, LaunchBounds2,
};

pub const CU: &str = include_str!("../fixtures/wp_kernels.cu");
pub const META: &str = include_str!("../fixtures/wp_kernels.meta");
pub const ACCESS_CU: &str = include_str!("../fixtures/wp_access.cu");
pub const ACCESS_META: &str = include_str!("../fixtures/wp_access.meta");

/// `wp_args_saxpy` as Warp declares it: `{ float32 a; array_t x; array_t y; }`.
#[repr(C)]
pub struct SaxpyArgs {
    pub a: f32,
    pub x: ArrayT,
    pub y: ArrayT,
}

/// `wp_args_lean_fill`: `{ int32 value; array_t out; }` (2-D kernel).
#[repr(C)]
pub struct LeanFillArgs {
    pub value: i32,
    pub out: ArrayT,
}

/// `wp_args_chain_loss`: `{ array_t y; array_t loss; }`.
#[repr(C)]
pub struct ChainLossArgs {
    pub y: ArrayT,
    pub loss: ArrayT,
}

/// `wp_args_count_visits`: `{ array_t count; }`.
#[repr(C)]
pub struct CountArgs {
    pub count: ArrayT,
}

/// `wp_args_gather` (wp_access.cu): `{ array_t idx; array_t x; array_t out; }`.
#[repr(C)]
pub struct GatherArgs {
    pub idx: ArrayT,
    pub x: ArrayT,
    pub out: ArrayT,
}

/// Calls of every forward and backward double.
pub static CALLS: AtomicUsize = AtomicUsize::new(0);
/// The threads that ran a forward chunk of a double (a test binary that
/// asserts on it runs its launches one at a time).
pub static THREADS: Mutex<Option<HashSet<ThreadId>>> = Mutex::new(None);
/// `[first, last)` ranges the forward doubles were called with.
pub static RANGES: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn note(first: usize, last: usize) {
    CALLS.fetch_add(1, Ordering::SeqCst);
    let id = std::thread::current().id();
    THREADS
        .lock()
        .unwrap()
        .get_or_insert_with(HashSet::new)
        .insert(id);
    RANGES.lock().unwrap().push((first, last));
}

/// Clears [`THREADS`] and [`RANGES`].
pub fn reset_notes() {
    *THREADS.lock().unwrap() = None;
    RANGES.lock().unwrap().clear();
}

/// The threads noted since [`reset_notes`].
pub fn threads_noted() -> usize {
    THREADS.lock().unwrap().as_ref().map_or(0, HashSet::len)
}

thread_local! {
    static RECORD: RefCell<Option<CString>> = const { RefCell::new(None) };
    static TAKEN: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// As the runtime's `_wp_assert`: the first failure of this thread.
fn wp_assert(message: &str, line: u32) {
    RECORD.with(|r| {
        let mut r = r.borrow_mut();
        if r.is_none() {
            *r = CString::new(format!("{message} (test double, line {line})")).ok();
        }
    });
}

/// As `wpl_take_assert`: this thread's record (valid until the next call), cleared.
pub unsafe extern "C" fn take_assert() -> *const c_char {
    let taken = RECORD.with(|r| r.borrow_mut().take());
    TAKEN.with(|t| {
        let mut t = t.borrow_mut();
        *t = taken;
        t.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())
    })
}

/// Writes `values` into `out[..cap]`, returns their count.
unsafe fn write_layout(out: *mut usize, cap: usize, values: &[usize]) -> usize {
    for (i, v) in values.iter().enumerate().take(cap) {
        // SAFETY: the caller gives `cap` writable values.
        unsafe { out.add(i).write(*v) };
    }
    values.len()
}

/// Element `idx` of an array, as Warp's `index(buf, i, j)`: data plus the
/// byte strides (no bounds check, as Warp's release code).
unsafe fn at<T>(a: &ArrayT, idx: &[i32]) -> *mut T {
    let off: isize = idx
        .iter()
        .zip(a.strides)
        .map(|(i, s)| *i as isize * s as isize)
        .sum();
    (a.data as isize + off) as *mut T
}

pub unsafe extern "C" fn saxpy_layout(out: *mut usize, cap: usize) -> usize {
    let v = [
        size_of::<SaxpyArgs>(),
        align_of::<SaxpyArgs>(),
        offset_of!(SaxpyArgs, a),
        offset_of!(SaxpyArgs, x),
        offset_of!(SaxpyArgs, y),
    ];
    // SAFETY: passed on.
    unsafe { write_layout(out, cap, &v) }
}

/// `y[i] = a * x[i] + y[i]` over task indices `first..last`.
pub unsafe extern "C" fn saxpy_forward(
    dim: *const c_void,
    args: *mut c_void,
    first: usize,
    last: usize,
) {
    note(first, last);
    // SAFETY: the launch passes launch_bounds_t<1> and wp_args_saxpy.
    let (b, a) = unsafe {
        (
            &*(dim as *const LaunchBounds1),
            &*(args as *const SaxpyArgs),
        )
    };
    for t in first..last {
        let i = (t / b.coord_mult) as i32;
        // SAFETY: the launch checked i below the arrays' extents.
        unsafe {
            let y = at::<f32>(&a.y, &[i]);
            *y += a.a * *at::<f32>(&a.x, &[i]);
        }
    }
}

/// Adjoint of saxpy: `adj_x[i] += a * adj_y[i]` (into `x.grad` when the
/// adjoint array is null, as Warp's `adj_address`).
pub unsafe extern "C" fn saxpy_backward(
    dim: *const c_void,
    args: *mut c_void,
    adj: *mut c_void,
    first: usize,
    last: usize,
) {
    note(first, last);
    // SAFETY: the launch passes launch_bounds_t<1> and two wp_args_saxpy.
    let (b, a, d) = unsafe {
        (
            &*(dim as *const LaunchBounds1),
            &*(args as *const SaxpyArgs),
            &*(adj as *const SaxpyArgs),
        )
    };
    let adj_x = if d.x.data != 0 {
        d.x
    } else {
        ArrayT {
            data: a.x.grad,
            ..a.x
        }
    };
    let adj_y = if d.y.data != 0 {
        d.y
    } else {
        ArrayT {
            data: a.y.grad,
            ..a.y
        }
    };
    if adj_x.data == 0 || adj_y.data == 0 {
        return;
    }
    for t in first..last {
        let i = (t / b.coord_mult) as i32;
        // SAFETY: the launch checked i below the arrays' extents.
        unsafe { *at::<f32>(&adj_x, &[i]) += a.a * *at::<f32>(&adj_y, &[i]) };
    }
}

pub unsafe extern "C" fn lean_fill_layout(out: *mut usize, cap: usize) -> usize {
    let v = [
        size_of::<LeanFillArgs>(),
        align_of::<LeanFillArgs>(),
        offset_of!(LeanFillArgs, value),
        offset_of!(LeanFillArgs, out),
    ];
    // SAFETY: passed on.
    unsafe { write_layout(out, cap, &v) }
}

/// `i, j = wp.tid(); out[i, j] = value + i * 1000 + j`, with
/// `assert value >= 0` (recorded, as the runtime's `_wp_assert`).
pub unsafe extern "C" fn lean_fill_forward(
    dim: *const c_void,
    args: *mut c_void,
    first: usize,
    last: usize,
) {
    note(first, last);
    // SAFETY: the launch passes launch_bounds_t<2> and wp_args_lean_fill.
    let (b, a) = unsafe {
        (
            &*(dim as *const LaunchBounds2),
            &*(args as *const LeanFillArgs),
        )
    };
    for t in first..last {
        if a.value < 0 {
            wp_assert("value >= 0", 72);
        }
        let l = t / b.coord_mult;
        let n1 = b.shape[1].max(1) as usize;
        let (i, j) = ((l / n1) as i32, (l % n1) as i32);
        // SAFETY: the launch checked (i, j) inside the array.
        unsafe { *at::<i32>(&a.out, &[i, j]) = a.value + i * 1000 + j };
    }
}

pub unsafe extern "C" fn chain_loss_layout(out: *mut usize, cap: usize) -> usize {
    let v = [
        size_of::<ChainLossArgs>(),
        align_of::<ChainLossArgs>(),
        offset_of!(ChainLossArgs, y),
        offset_of!(ChainLossArgs, loss),
    ];
    // SAFETY: passed on.
    unsafe { write_layout(out, cap, &v) }
}

/// `loss[0] += y[i] * y[i]`, a plain (non-atomic) add: correct only when
/// the launch runs it on one thread.
pub unsafe extern "C" fn chain_loss_forward(
    dim: *const c_void,
    args: *mut c_void,
    first: usize,
    last: usize,
) {
    note(first, last);
    // SAFETY: the launch passes launch_bounds_t<1> and wp_args_chain_loss.
    let (b, a) = unsafe {
        (
            &*(dim as *const LaunchBounds1),
            &*(args as *const ChainLossArgs),
        )
    };
    for t in first..last {
        let i = (t / b.coord_mult) as i32;
        // SAFETY: the launch checked i and 0 inside the arrays.
        unsafe {
            let y = *at::<f32>(&a.y, &[i]);
            let loss = at::<f32>(&a.loss, &[0]);
            loss.write_volatile(loss.read_volatile() + y * y);
        }
    }
}

pub unsafe extern "C" fn count_visits_layout(out: *mut usize, cap: usize) -> usize {
    let v = [
        size_of::<CountArgs>(),
        align_of::<CountArgs>(),
        offset_of!(CountArgs, count),
    ];
    // SAFETY: passed on.
    unsafe { write_layout(out, cap, &v) }
}

/// `count[i] += 1`.
pub unsafe extern "C" fn count_visits_forward(
    dim: *const c_void,
    args: *mut c_void,
    first: usize,
    last: usize,
) {
    note(first, last);
    // SAFETY: the launch passes launch_bounds_t<1> and wp_args_count_visits.
    let (b, a) = unsafe {
        (
            &*(dim as *const LaunchBounds1),
            &*(args as *const CountArgs),
        )
    };
    for t in first..last {
        let i = (t / b.coord_mult) as i32;
        // SAFETY: the launch checked i inside the array.
        unsafe { *at::<i32>(&a.count, &[i]) += 1 };
    }
}

pub unsafe extern "C" fn gather_layout(out: *mut usize, cap: usize) -> usize {
    let v = [
        size_of::<GatherArgs>(),
        align_of::<GatherArgs>(),
        offset_of!(GatherArgs, idx),
        offset_of!(GatherArgs, x),
        offset_of!(GatherArgs, out),
    ];
    // SAFETY: passed on.
    unsafe { write_layout(out, cap, &v) }
}

/// `out[i] = x[idx[i]]`: an index read from data (an unproven kernel).
pub unsafe extern "C" fn gather_forward(
    dim: *const c_void,
    args: *mut c_void,
    first: usize,
    last: usize,
) {
    note(first, last);
    // SAFETY: the launch passes launch_bounds_t<1> and wp_args_gather.
    let (b, a) = unsafe {
        (
            &*(dim as *const LaunchBounds1),
            &*(args as *const GatherArgs),
        )
    };
    for t in first..last {
        let i = (t / b.coord_mult) as i32;
        // SAFETY: the unchecked launch's caller promised idx[i] inside x.
        unsafe {
            let k = *at::<i32>(&a.idx, &[i]);
            *at::<f32>(&a.out, &[i]) = *at::<f32>(&a.x, &[k]);
        }
    }
}

/// A layout double that reports `y` 8 bytes late.
pub unsafe extern "C" fn saxpy_layout_shifted(out: *mut usize, cap: usize) -> usize {
    let v = [
        size_of::<SaxpyArgs>() + 8,
        8,
        0,
        offset_of!(SaxpyArgs, x),
        offset_of!(SaxpyArgs, y) + 8,
    ];
    // SAFETY: passed on.
    unsafe { write_layout(out, cap, &v) }
}

/// A layout double that reports two fields where saxpy has three.
pub unsafe extern "C" fn saxpy_layout_short(out: *mut usize, cap: usize) -> usize {
    // SAFETY: passed on.
    unsafe { write_layout(out, cap, &[64, 8, 0, 8]) }
}

/// The kernels of wp_kernels.cu these doubles do not implement, as
/// unsupported.
pub const OTHERS: &[(&str, &str)] = &[
    ("add2d", "no test double"),
    ("index4d", "no test double"),
    ("use_struct", "no test double"),
    ("normalize_scale", "no test double"),
    ("transform", "no test double"),
    ("chain_sin", "uses tiles (test: a recorded reason)"),
];

// SAFETY: the doubles implement kernels saxpy, lean_fill, chain_loss and
// count_visits of wp_kernels.cu over their wp_args layouts, which their
// layout functions report; take_assert is their assertion record.
pub static KERNELS_CPU: EmbeddedCpu = unsafe {
    EmbeddedCpu::new(
        &[
            EmbeddedCpuKernel::new("saxpy", saxpy_forward, Some(saxpy_backward), saxpy_layout),
            EmbeddedCpuKernel::new("lean_fill", lean_fill_forward, None, lean_fill_layout),
            EmbeddedCpuKernel::new("chain_loss", chain_loss_forward, None, chain_loss_layout),
            EmbeddedCpuKernel::new(
                "count_visits",
                count_visits_forward,
                None,
                count_visits_layout,
            ),
        ],
        OTHERS,
        take_assert,
    )
};

/// The test module: Warp's real declarations, no image, the doubles as
/// its CPU code.
// SAFETY: the doubles run the kernels of wp_kernels.cu as that source
// declares them (the pairing a Warp compile gives), and there is no image.
pub static KERNELS: EmbeddedModule =
    unsafe { EmbeddedModule::new("kernels", CU, META, &[], Some(&KERNELS_CPU)) };

/// A module of wp_kernels.cu whose CPU code is `cpu` (leaked: tests only).
///
/// # Safety
///
/// `cpu`'s entry points run the kernels of wp_kernels.cu as that source
/// declares them (as [`EmbeddedModule::new`] asks).
pub unsafe fn module_with(cpu: EmbeddedCpu) -> EmbeddedModule {
    // SAFETY: the caller's promise; there is no image.
    unsafe { EmbeddedModule::new("kernels", CU, META, &[], Some(Box::leak(Box::new(cpu)))) }
}
