//! Devices: `"cpu"`, `"cuda:N"`, `"cuda"`.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;
use std::sync::OnceLock;

use cuda_api::{Context, Stream};

use crate::error::{Error, Result};

pub(crate) mod id;
pub use id::Device;

/// Whether CUDA can be used in this process: a driver loads and reports at
/// least one device (asked once, then remembered). On `false`,
/// [`Device::current`] is `"cpu"`.
pub fn cuda_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| cuda_api::CudaDevice::count().is_ok_and(|n| n > 0))
}

impl Device {
    /// The default device, by Warp's rule (`wp.get_device()` with no
    /// argument): the device of the innermost [`ScopedDevice`] (or
    /// [`ScopedStream`]) alive on this thread, else the device of the CUDA context current on this thread if
    /// there is one, else `cuda:0` when a CUDA driver loads and reports a
    /// device, else `"cpu"`. A launch that names no device and no stream
    /// runs here, so on a machine without a GPU it runs on the CPU. The
    /// driver is asked once per process whether it has a device. Changes
    /// nothing.
    ///
    /// ```
    /// use warp_launch::Device;
    /// let d = Device::current();
    /// // cuda:0 on a machine with a GPU, "cpu" without one.
    /// assert_eq!(d.is_cuda(), warp_launch::cuda_available());
    /// ```
    pub fn current() -> Device {
        if let Some(d) = SCOPED_DEVICE.with(Cell::get) {
            return d;
        }
        match cuda_api::CudaDevice::current() {
            Ok(Some(d)) => Device::from(&d),
            _ if cuda_available() => Device::Cuda(0),
            _ => Device::Cpu,
        }
    }

    /// Makes sure a context is current on this thread (the driver needs one
    /// to read a library kernel's parameters): the current one if any, else
    /// `cuda:0`'s primary context.
    pub(crate) fn ensure_context() -> Result<()> {
        if cuda_api::CudaDevice::current()?.is_none() {
            Device::Cuda(0).context()?.bind()?;
        }
        Ok(())
    }

    /// The CUDA ordinal, `None` for the CPU.
    pub fn ordinal(self) -> Option<i32> {
        match self {
            Device::Cpu => None,
            Device::Cuda(n) => Some(n),
        }
    }

    /// Whether this is a CUDA device.
    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }

    /// The device's primary context ([`cuda_api::CudaDevice::primary_context`]:
    /// retained once per process and shared, a lock-free read after the
    /// first call). Does not make it current: [`Context::bind`] does, and
    /// every cuda-api call that works in it binds it itself.
    ///
    /// # Errors
    ///
    /// [`Error::NotCuda`] for the CPU, which has no CUDA context;
    /// [`Error::NoSuchDevice`] for an ordinal the driver does not have; or
    /// the driver's failure to retain the context.
    pub fn context(self) -> Result<Context> {
        let Some(n) = self.ordinal() else {
            return Err(Error::NotCuda {
                call: "Device::context",
                device: self,
            });
        };
        match cuda_api::CudaDevice::get(n) {
            Ok(d) => Ok(d.primary_context()?),
            Err(e) => {
                let count = cuda_api::CudaDevice::count()?;
                if n >= count {
                    return Err(Error::NoSuchDevice {
                        device: self.to_string(),
                        count,
                    });
                }
                Err(e.into())
            }
        }
    }

    /// The device's default stream: the legacy null stream of its primary
    /// context, which Warp also launches on when no stream is given.
    ///
    /// # Errors
    ///
    /// [`Error::NotCuda`] for the CPU device; [`Error::NoSuchDevice`] or [`Error::Cuda`] when
    /// the device's primary context cannot be made current.
    pub fn default_stream(self) -> Result<Stream> {
        /// One handle per device (the first 64 ordinals), made once: a
        /// launch on the default stream then allocates nothing.
        static STREAMS: [OnceLock<Stream>; 64] = [const { OnceLock::new() }; 64];
        let slot = self
            .ordinal()
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| STREAMS.get(n));
        if let Some(s) = slot.and_then(OnceLock::get) {
            return Ok(s.clone());
        }
        let stream = self.context()?.default_stream();
        Ok(match slot {
            Some(slot) => slot.get_or_init(|| stream).clone(),
            None => stream,
        })
    }

    /// The device's current stream on this thread (Warp's
    /// `wp.get_stream(device)`): the stream of the innermost
    /// [`ScopedStream`] alive on this thread for this device, else its
    /// [`Device::default_stream`]. Launches, array operations and graph
    /// replays that name no stream run here.
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// // GPU: inside the scope, launches without a stream run on `s`.
    /// let dev = warp_launch::Device::Cuda(0);
    /// let s = warp_launch::Stream::new(&dev.context()?)?;
    /// let _scope = warp_launch::ScopedStream::new(&s)?;
    /// assert_eq!(dev.stream()?.raw(), s.raw());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Device::default_stream`].
    pub fn stream(self) -> Result<Stream> {
        let scoped = SCOPED_STREAMS.with(|s| {
            s.borrow()
                .iter()
                .rev()
                .find(|(d, _, _)| *d == self)
                .map(|(_, s, _)| s.clone())
        });
        match scoped {
            Some(s) => Ok(s),
            None => self.default_stream(),
        }
    }

    fn pool(self, call: &'static str) -> Result<cuda_api::MemPool> {
        let Some(n) = self.ordinal() else {
            return Err(Error::NotCuda { call, device: self });
        };
        self.context()?;
        Ok(cuda_api::MemPool::default_for(&cuda_api::CudaDevice::get(
            n,
        )?)?)
    }

    /// Whether the device has a stream-ordered memory pool (Warp's
    /// `wp.is_mempool_supported`); `false` for the CPU.
    ///
    /// ```
    /// assert!(!warp_launch::Device::Cpu.is_mempool_supported());
    /// ```
    pub fn is_mempool_supported(self) -> bool {
        match self.ordinal() {
            Some(n) => cuda_api::CudaDevice::get(n)
                .and_then(|d| cuda_api::MemPool::supported(&d))
                .unwrap_or(false),
            None => false,
        }
    }

    /// Sets how many bytes of freed memory the device's default pool keeps
    /// for reuse instead of returning them to the system at each
    /// synchronisation (Warp's `wp.set_mempool_release_threshold`; the
    /// driver's default is 0). Pool arrays come from [`Array::zeros_on`](crate::Array::zeros_on).
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// // GPU
    /// let d = warp_launch::Device::Cuda(0);
    /// d.set_mempool_release_threshold(256 << 20)?;
    /// assert_eq!(d.mempool_release_threshold()?, 256 << 20);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotCuda`] for the CPU; [`Error::Cuda`] when the device has no
    /// memory pools or the driver refuses.
    pub fn set_mempool_release_threshold(self, bytes: u64) -> Result<()> {
        Ok(self
            .pool("Device::set_mempool_release_threshold")?
            .set_release_threshold(bytes)?)
    }

    /// The default pool's release threshold in bytes (Warp's
    /// `wp.get_mempool_release_threshold`); see
    /// [`Device::set_mempool_release_threshold`]'s example.
    ///
    /// # Errors
    ///
    /// As [`Device::set_mempool_release_threshold`].
    pub fn mempool_release_threshold(self) -> Result<u64> {
        Ok(self
            .pool("Device::mempool_release_threshold")?
            .release_threshold()?)
    }

    /// Bytes of live allocations from the default pool (Warp's
    /// `wp.get_mempool_used_mem_current`): a pool array's bytes leave it
    /// when its stream reaches the free.
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// // GPU
    /// let s = warp_launch::Stream::new(&warp_launch::Device::Cuda(0).context()?)?;
    /// let a = warp_launch::Array::zeros_on::<u8>(&s, &[1 << 20])?;
    /// s.synchronize()?;
    /// assert!(warp_launch::Device::Cuda(0).mempool_used()? >= 1 << 20);
    /// # drop(a);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Device::set_mempool_release_threshold`].
    pub fn mempool_used(self) -> Result<u64> {
        Ok(self.pool("Device::mempool_used")?.used()?)
    }
}

thread_local! {
    /// The innermost [`ScopedDevice`] of this thread.
    static SCOPED_DEVICE: Cell<Option<Device>> = const { Cell::new(None) };
    /// The [`ScopedStream`]s of this thread, innermost last.
    static SCOPED_STREAMS: RefCell<Vec<(Device, Stream, u64)>> = const { RefCell::new(Vec::new()) };
    /// The number of the next [`ScopedStream`] of this thread.
    static NEXT_SCOPE: Cell<u64> = const { Cell::new(0) };
}

/// Makes a device the default for this thread until dropped (Warp's
/// `wp.ScopedDevice`): [`Device::current`] returns it, so launches and
/// arrays that name no device use it.
///
/// Scopes nest: each guard restores, when dropped, the default it replaced.
/// They are per thread (a thread-local; other threads keep their own
/// default, and a new thread starts with none) and a guard cannot leave
/// its thread (it is neither `Send` nor `Sync`). Dropped out of order (one
/// kept past an inner one's drop), a guard still restores what it
/// replaced, so drop them in reverse order. Unlike Warp, the guard does
/// not make the device's CUDA context current: every call here binds the
/// context it needs.
///
/// ```
/// use warp_launch::{Device, ScopedDevice};
/// # fn main() -> warp_launch::Result<()> {
/// let before = Device::current();
/// {
///     let _cpu = ScopedDevice::new("cpu")?;
///     assert_eq!(Device::current(), Device::Cpu);
/// }
/// assert_eq!(Device::current(), before);
/// # Ok(()) }
/// ```
#[must_use = "the device is the default only while the guard lives"]
pub struct ScopedDevice {
    previous: Option<Device>,
    _thread: PhantomData<*const ()>,
}

impl fmt::Debug for ScopedDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedDevice")
            .field("device", &SCOPED_DEVICE.with(Cell::get))
            .field("previous", &self.previous)
            .finish()
    }
}

impl ScopedDevice {
    /// Makes `device` (a [`Device`] or a name) this thread's default.
    ///
    /// # Errors
    ///
    /// [`Error::BadDevice`] for a name that is no device.
    pub fn new(device: impl IntoDevice) -> Result<ScopedDevice> {
        let device = device.into_device()?;
        Ok(ScopedDevice {
            previous: SCOPED_DEVICE.with(|d| d.replace(Some(device))),
            _thread: PhantomData,
        })
    }
}

impl Drop for ScopedDevice {
    fn drop(&mut self) {
        SCOPED_DEVICE.with(|d| d.set(self.previous));
    }
}

/// Makes a stream its device's current stream on this thread, and its
/// device the default, until dropped (Warp's `wp.ScopedStream`):
/// [`Device::stream`] returns it, so launches, array operations
/// ([`Array::zero_on`](crate::Array::zero_on) with `None`, ...) and graph
/// replays that name no stream run on it. Nesting and threads as
/// [`ScopedDevice`]: per thread, innermost wins, each guard restores what
/// it replaced.
///
/// [`ScopedStream::new`] orders the new stream after the work already
/// queued on the device's previous current stream (Warp's default
/// `sync_enter=True`); [`ScopedStream::unsynced`] does not.
///
/// ```no_run
/// # fn main() -> warp_launch::Result<()> {
/// // GPU: everything inside runs on `s` without naming it.
/// use warp_launch::{Array, Device, ScopedStream, Stream, Value};
/// let s = Stream::new(&Device::Cuda(0).context()?)?;
/// let a = Array::zeros::<f32>("cuda:0", &[16])?;
/// {
///     let _on_s = ScopedStream::new(&s)?;
///     a.fill_on(&Value::of(1.0f32), None)?; // on `s`
///     // kernel.launch(16).inputs(..).run()? would run on `s` too
/// }
/// s.synchronize()?;
/// # Ok(()) }
/// ```
#[must_use = "the stream is current only while the guard lives"]
pub struct ScopedStream {
    device: Device,
    id: u64,
    _scope: ScopedDevice,
}

impl fmt::Debug for ScopedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedStream")
            .field("device", &self.device)
            .finish()
    }
}

impl ScopedStream {
    /// Makes `stream` current, after making it wait for the device's
    /// previous current stream ([`Stream::wait_stream`]); see the type's
    /// example.
    ///
    /// # Errors
    ///
    /// [`Error::Cuda`] when the wait cannot be queued (for example while
    /// the previous stream is being captured).
    pub fn new(stream: &Stream) -> Result<ScopedStream> {
        let device = Device::from(stream.context().device());
        let previous = device.stream()?;
        if previous.raw() != stream.raw() {
            stream.wait_stream(&previous)?;
        }
        Ok(Self::unsynced(stream))
    }

    /// Makes `stream` current without ordering it after the previous one.
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// // GPU
    /// let s = warp_launch::Stream::new(&warp_launch::Device::Cuda(0).context()?)?;
    /// let _g = warp_launch::ScopedStream::unsynced(&s);
    /// assert_eq!(warp_launch::Device::current(), warp_launch::Device::Cuda(0));
    /// # Ok(()) }
    /// ```
    pub fn unsynced(stream: &Stream) -> ScopedStream {
        let device = Device::from(stream.context().device());
        let id = NEXT_SCOPE.with(|n| n.replace(n.get() + 1));
        SCOPED_STREAMS.with(|s| s.borrow_mut().push((device, stream.clone(), id)));
        ScopedStream {
            device,
            id,
            _scope: ScopedDevice {
                previous: SCOPED_DEVICE.with(|d| d.replace(Some(device))),
                _thread: PhantomData,
            },
        }
    }
}

impl Drop for ScopedStream {
    fn drop(&mut self) {
        SCOPED_STREAMS.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(i) = s.iter().rposition(|e| e.2 == self.id) {
                s.remove(i);
            }
        });
    }
}

/// Makes the current stream of the current device ([`Device::current`],
/// [`Device::stream`]) wait for the work queued on `other` so far (Warp's
/// `wp.wait_stream`), without a host wait.
///
/// ```no_run
/// # fn main() -> warp_launch::Result<()> {
/// // GPU
/// let other = warp_launch::Stream::new(&warp_launch::Device::Cuda(0).context()?)?;
/// let _g = warp_launch::ScopedDevice::new("cuda:0")?;
/// warp_launch::wait_stream(&other)?;
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`Error::NotCuda`] when the current device is the CPU; [`Error::Cuda`]
/// as [`Stream::wait_stream`].
pub fn wait_stream(other: &Stream) -> Result<()> {
    let d = Device::current();
    if !d.is_cuda() {
        return Err(Error::NotCuda {
            call: "wait_stream",
            device: d,
        });
    }
    Ok(d.stream()?.wait_stream(other)?)
}

impl FromStr for Device {
    type Err = Error;
    /// `"cpu"`, `"cuda:N"`, or `"cuda"` for `cuda:0`.
    fn from_str(s: &str) -> Result<Device> {
        let bad = || Error::BadDevice {
            given: s.to_string(),
        };
        match s.trim() {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            t => {
                let n = t.strip_prefix("cuda:").ok_or_else(bad)?;
                n.parse::<i32>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .map(Device::Cuda)
                    .ok_or_else(bad)
            }
        }
    }
}

/// A device given by value or by name (`"cpu"`, `"cuda:1"`).
pub trait IntoDevice {
    /// The device, or [`Error::BadDevice`] for a name that is none.
    ///
    /// # Errors
    ///
    /// [`Error::BadDevice`] for a name that is not `"cpu"`, `"cuda"` or `"cuda:N"`.
    fn into_device(self) -> Result<Device>;
}

impl IntoDevice for Device {
    fn into_device(self) -> Result<Device> {
        Ok(self)
    }
}

impl IntoDevice for &str {
    fn into_device(self) -> Result<Device> {
        self.parse()
    }
}

impl IntoDevice for &String {
    fn into_device(self) -> Result<Device> {
        self.parse()
    }
}

/// One value per CUDA device, made on that device's first use: what a
/// Warp module loads for a device (the image chosen for its architecture,
/// the kernels' functions in it). A lookup is two atomic loads and an
/// index; the slots are made once, as many as the driver has devices.
pub(crate) struct PerDevice<T> {
    slots: OnceLock<Box<[OnceLock<T>]>>,
}

impl<T> PerDevice<T> {
    /// No device's value yet.
    pub(crate) const fn new() -> PerDevice<T> {
        PerDevice {
            slots: OnceLock::new(),
        }
    }

    /// The value of device `ordinal`, if it was made.
    pub(crate) fn get(&self, ordinal: i32) -> Option<&T> {
        self.slots.get()?.get(usize::try_from(ordinal).ok()?)?.get()
    }

    /// The value of device `ordinal`, made now by `make` if it is not yet
    /// (a failure is not kept: the next call tries again; of two threads
    /// making it at once, one value wins).
    ///
    /// # Errors
    ///
    /// `make`'s error; [`Error::NoSuchDevice`] for an ordinal the driver
    /// does not have; the driver's failure to count its devices.
    pub(crate) fn get_or_make(&self, ordinal: i32, make: impl FnOnce() -> Result<T>) -> Result<&T> {
        self.get_or_make_with(ordinal, || Ok(cuda_api::CudaDevice::count()?), make)
    }

    /// [`PerDevice::get_or_make`] with the device count from `count`
    /// (asked once, when the first value is made).
    fn get_or_make_with(
        &self,
        ordinal: i32,
        count: impl FnOnce() -> Result<i32>,
        make: impl FnOnce() -> Result<T>,
    ) -> Result<&T> {
        if let Some(t) = self.get(ordinal) {
            return Ok(t);
        }
        let slots = match self.slots.get() {
            Some(s) => s,
            None => {
                let n = usize::try_from(count()?).unwrap_or(0);
                self.slots
                    .get_or_init(|| (0..n).map(|_| OnceLock::new()).collect())
            }
        };
        let slot = usize::try_from(ordinal)
            .ok()
            .and_then(|i| slots.get(i))
            .ok_or_else(|| Error::NoSuchDevice {
                device: Device::Cuda(ordinal).to_string(),
                count: i32::try_from(slots.len()).unwrap_or(i32::MAX),
            })?;
        let t = make()?;
        Ok(slot.get_or_init(|| t))
    }

    /// A copy: each value made so far mapped by `f`, for the same devices.
    pub(crate) fn map_made<U>(&self, f: impl Fn(&T) -> U) -> PerDevice<U> {
        let copy = PerDevice::new();
        if let Some(slots) = self.slots.get() {
            let _ = copy.slots.set(
                slots
                    .iter()
                    .map(|t| t.get().map(&f).map(OnceLock::from).unwrap_or_default())
                    .collect(),
            );
        }
        copy
    }

    /// The values made so far, with their devices' ordinals.
    pub(crate) fn made(&self) -> impl Iterator<Item = (i32, &T)> {
        self.slots
            .get()
            .into_iter()
            .flat_map(|s| s.iter().enumerate())
            .filter_map(|(i, t)| Some((i32::try_from(i).ok()?, t.get()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_device_values_are_made_once_per_device_on_first_use() {
        let values: PerDevice<String> = PerDevice::new();
        assert!(values.get(0).is_none());
        let mut counted = 0;
        let count = |counted: &mut i32| {
            *counted += 1;
            Ok(2)
        };
        let v = values
            .get_or_make_with(1, || count(&mut counted), || Ok("sm_120 image".into()))
            .unwrap();
        assert_eq!(v, "sm_120 image");
        // Device 0 is its own slot, made on its own first use.
        assert!(values.get(0).is_none());
        let v = values
            .get_or_make_with(0, || count(&mut counted), || Ok("sm_90 image".into()))
            .unwrap();
        assert_eq!(v, "sm_90 image");
        // Made once: a later make is not called.
        let v = values
            .get_or_make_with(1, || count(&mut counted), || panic!("made twice"))
            .unwrap();
        assert_eq!(v, "sm_120 image");
        assert_eq!(counted, 1, "the devices are counted once");
        let copy = values.map_made(|v| v.len());
        assert_eq!(copy.get(0), Some(&11));
        assert_eq!(copy.get(1), Some(&12));
        assert_eq!(
            values
                .made()
                .map(|(i, v)| (i, v.as_str()))
                .collect::<Vec<_>>(),
            [(0, "sm_90 image"), (1, "sm_120 image")]
        );
        // An ordinal the driver does not have, and a failed make, keep nothing.
        let e = values
            .get_or_make_with(2, || Ok(2), || Ok("x".into()))
            .unwrap_err();
        assert!(e.to_string().contains("cuda:2 does not exist"), "{e}");
        let e = values
            .get_or_make_with(-1, || Ok(2), || Ok("x".into()))
            .unwrap_err();
        assert!(matches!(e, Error::NoSuchDevice { .. }), "{e}");
        let fresh: PerDevice<String> = PerDevice::new();
        assert!(
            fresh
                .get_or_make_with(
                    0,
                    || Ok(1),
                    || Err(Error::NotCuda {
                        call: "t",
                        device: Device::Cpu
                    })
                )
                .is_err()
        );
        assert!(fresh.get(0).is_none());
        assert_eq!(
            fresh
                .get_or_make_with(0, || Ok(1), || Ok("y".into()))
                .unwrap(),
            "y"
        );
    }

    #[test]
    fn device_strings() {
        assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::Cuda(1));
        assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::Cpu);
        assert_eq!(Device::Cpu.to_string(), "cpu");
        assert_eq!(Device::Cuda(3).to_string(), "cuda:3");
        for bad in ["gpu", "cuda:-1", "cuda:x", "cuda1", ""] {
            let e = bad.parse::<Device>().unwrap_err();
            assert!(matches!(e, Error::BadDevice { .. }), "{bad}: {e}");
        }
        insta::assert_snapshot!(
            "bad_device",
            "cuda:x".parse::<Device>().unwrap_err().to_string()
        );
    }
}
