//! Stream-ordered fills and copies of device-addressed memory: pitched
//! (2-D) memsets and copies queued on a [`Stream`] or captured into a graph
//! through a [`Capture`], and [`Stream::wait_stream`].
//!
//! The fills and copies take raw device addresses (any memory with a
//! unified address: device, page-locked host, managed), so they are
//! `unsafe`: the caller keeps the memory alive and unshared until the
//! stream (or every launch of the graph) has run them, and notes the use
//! ([`Allocation::record_use_on`](crate::Allocation::record_use_on)). The
//! safe layers above (warp-launch's arrays) hold the memory through `Arc`s.

use cuda_sys::{CUDA_MEMCPY2D, CUdeviceptr, CUmemorytype};

use crate::driver;
use crate::error::{CudaError, CudaResult};
use crate::graph::Capture;
use crate::stream::Stream;

/// The word a memset writes again and again: 1, 2 or 4 bytes
/// (`cuMemsetD8`, `D16`, `D32`).
///
/// ```
/// use cuda_api::FillWord;
/// assert_eq!(FillWord::U32(1.0f32.to_bits()).size(), 4);
/// assert_eq!(FillWord::U8(0).size(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FillWord {
    /// One byte.
    U8(u8),
    /// Two bytes, native order.
    U16(u16),
    /// Four bytes, native order.
    U32(u32),
}

impl FillWord {
    /// Size of the word in bytes.
    pub fn size(self) -> usize {
        match self {
            FillWord::U8(_) => 1,
            FillWord::U16(_) => 2,
            FillWord::U32(_) => 4,
        }
    }
}

/// `height` rows of `width` words `word`, `pitch` bytes apart, from `dst`.
unsafe fn memset_2d(
    stream: &Stream,
    dst: CUdeviceptr,
    pitch: usize,
    word: FillWord,
    width: usize,
    height: usize,
) -> CudaResult<()> {
    if width == 0 || height == 0 {
        return Ok(());
    }
    stream.context().bind()?;
    let s = stream.raw();
    // SAFETY: the caller's promise: the rows are live memory, unshared
    // until the stream has run the fill; the stream is live and current.
    unsafe {
        match (word, height) {
            (FillWord::U8(v), 1) => driver::memset_d8_async(dst, v, width, s),
            (FillWord::U16(v), 1) => driver::memset_d16_async(dst, v, width, s),
            (FillWord::U32(v), 1) => driver::memset_d32_async(dst, v, width, s),
            (FillWord::U8(v), _) => driver::memset_d2d8_async(dst, pitch, v, width, height, s),
            (FillWord::U16(v), _) => driver::memset_d2d16_async(dst, pitch, v, width, height, s),
            (FillWord::U32(v), _) => driver::memset_d2d32_async(dst, pitch, v, width, height, s),
        }
    }
}

/// `height` rows of `width` bytes from `src` (rows `src_pitch` apart) to
/// `dst` (rows `dst_pitch` apart), unified addresses on both sides.
unsafe fn memcpy_2d(
    stream: &Stream,
    dst: CUdeviceptr,
    dst_pitch: usize,
    src: CUdeviceptr,
    src_pitch: usize,
    width: usize,
    height: usize,
) -> CudaResult<()> {
    if width == 0 || height == 0 {
        return Ok(());
    }
    stream.context().bind()?;
    if height == 1 {
        // SAFETY: the caller's promise: both ranges are live and unshared
        // until the stream has run the copy.
        return unsafe { driver::memcpy_async(dst, src, width, stream.raw()) };
    }
    let p = CUDA_MEMCPY2D {
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_UNIFIED,
        srcDevice: src,
        srcPitch: src_pitch,
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_UNIFIED,
        dstDevice: dst,
        dstPitch: dst_pitch,
        WidthInBytes: width,
        Height: height,
        ..Default::default()
    };
    // SAFETY: as above; the descriptor names unified addresses only.
    unsafe { driver::memcpy_2d_async(&p, stream.raw()) }
}

impl Stream {
    /// Queues a fill of `height` rows of `width` words `word`, row `r`
    /// starting at `dst + r * pitch` (`cuMemsetD8/16/32Async` for one row,
    /// `cuMemsetD2D8/16/32Async` for more). `dst` and `pitch` must be
    /// multiples of the word's size, and `pitch` at least `width` words.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: 1.0f32 into column 0 of a 4 x 8 float array (rows 32 B apart).
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let stream = cuda_api::Stream::new(&ctx)?;
    /// let a = cuda_api::Allocation::zeroed(&ctx, 128, cuda_api::MemoryKind::Device)?;
    /// a.record_use_on(&stream)?;
    /// let word = cuda_api::FillWord::U32(1.0f32.to_bits());
    /// // SAFETY: 4 rows of one word, 32 B apart, lie inside `a`, which waits
    /// // for `stream` before it is freed (the use was noted above).
    /// unsafe { stream.fill_2d_raw(a.device_address(), 32, word, 1, 4)? };
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    ///
    /// Every byte written lies in live memory with a unified address (device,
    /// page-locked or managed) that nothing else reads or writes until the
    /// stream has run the fill, and that stays allocated until then.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] while the stream is being captured
    /// (queue through the [`Capture`] instead); the driver's failure.
    pub unsafe fn fill_2d_raw(
        &self,
        dst: CUdeviceptr,
        pitch: usize,
        word: FillWord,
        width: usize,
        height: usize,
    ) -> CudaResult<()> {
        self.refuse_if_capturing(|| "Stream::fill_2d_raw".into())?;
        // SAFETY: the caller's promise.
        unsafe { memset_2d(self, dst, pitch, word, width, height) }
    }

    /// Queues a copy of `height` rows of `width` bytes, row `r` from
    /// `src + r * src_pitch` to `dst + r * dst_pitch` (`cuMemcpyAsync` for
    /// one row, `cuMemcpy2DAsync` with unified addresses for more); any
    /// devices, page-locked host or managed memory. Pitches must be at
    /// least `width` for more than one row.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: the first 16 B of each of 3 rows of `src` (rows 64 B apart)
    /// // into a packed 3 x 16 B block of `dst`.
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let stream = cuda_api::Stream::new(&ctx)?;
    /// let src = cuda_api::Allocation::zeroed(&ctx, 192, cuda_api::MemoryKind::Device)?;
    /// let dst = cuda_api::Allocation::zeroed(&ctx, 48, cuda_api::MemoryKind::Device)?;
    /// src.record_use_on(&stream)?;
    /// dst.record_use_on(&stream)?;
    /// // SAFETY: both ranges lie inside their allocations, which wait for
    /// // `stream` before they are freed; they do not overlap.
    /// unsafe { stream.copy_2d_raw(dst.device_address(), 16, src.device_address(), 64, 16, 3)? };
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    ///
    /// Both ranges lie in live memory with unified addresses that stays
    /// allocated until the stream has run the copy; nothing else writes
    /// the source or touches the destination meanwhile; they do not overlap.
    ///
    /// # Errors
    ///
    /// As [`Stream::fill_2d_raw`].
    pub unsafe fn copy_2d_raw(
        &self,
        dst: CUdeviceptr,
        dst_pitch: usize,
        src: CUdeviceptr,
        src_pitch: usize,
        width: usize,
        height: usize,
    ) -> CudaResult<()> {
        self.refuse_if_capturing(|| "Stream::copy_2d_raw".into())?;
        // SAFETY: the caller's promise.
        unsafe { memcpy_2d(self, dst, dst_pitch, src, src_pitch, width, height) }
    }

    /// Makes work queued on this stream from now on wait for the work queued
    /// on `other` so far (Warp's `Stream.wait_stream`): records an event on
    /// `other` (one per stream, made on first use, without timing) and
    /// waits for it (`cuStreamWaitEvent`). The host does not wait. Streams
    /// of different contexts and devices may wait for each other.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: `consumer` runs its next work after everything queued on `producer`.
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let (producer, consumer) = (cuda_api::Stream::new(&ctx)?, cuda_api::Stream::new(&ctx)?);
    /// consumer.wait_stream(&producer)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `other` is being captured (see
    /// [`Event::record`](crate::Event::record)) or is this stream; the driver's failure to make,
    /// record or wait for the event.
    pub fn wait_stream(&self, other: &Stream) -> CudaResult<()> {
        if self.raw() == other.raw() && self.context() == other.context() {
            return Err(CudaError::invalid_argument(
                "Stream::wait_stream",
                "other",
                "a stream cannot wait for itself (its work is already in order); pass another stream".into(),
            ));
        }
        let event = other.cached_event()?;
        event.record(other)?;
        self.wait(event)
    }
}

impl Capture<'_> {
    /// Captures a fill into the graph, as [`Stream::fill_2d_raw`] queues one
    /// (a memset node).
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: a graph that zeroes 256 bytes each time it runs.
    /// use cuda_api::{Allocation, CaptureMode, FillWord, MemoryKind, Stream};
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let stream = Stream::new(&ctx)?;
    /// let a = Allocation::zeroed(&ctx, 256, MemoryKind::Device)?;
    /// let graph = stream.capture(CaptureMode::ThreadLocal, |c| -> cuda_api::CudaResult<()> {
    ///     // SAFETY: 64 words inside `a`, which outlives the graph below.
    ///     unsafe { c.fill_2d_raw(a.device_address(), 256, FillWord::U32(0), 64, 1) }
    /// })?;
    /// let exec = graph.instantiate()?;
    /// a.record_use(); // the graph's launches use `a`
    /// exec.launch(&stream)?;
    /// stream.synchronize()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    ///
    /// As [`Stream::fill_2d_raw`], for every launch of the graph: the
    /// memory stays allocated and unshared while any launch of the graph
    /// made from this capture may run.
    ///
    /// # Errors
    ///
    /// The driver's failure (memset nodes take device memory; the driver
    /// refuses some host memory in graphs).
    pub unsafe fn fill_2d_raw(
        &self,
        dst: CUdeviceptr,
        pitch: usize,
        word: FillWord,
        width: usize,
        height: usize,
    ) -> CudaResult<()> {
        // SAFETY: the caller's promise, for every launch of the graph.
        unsafe { memset_2d(self.queue(), dst, pitch, word, width, height) }
    }

    /// Captures a copy into the graph, as [`Stream::copy_2d_raw`] queues one
    /// (a memcpy node).
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: a graph that copies 64 bytes from `src` to `dst` each time it runs.
    /// use cuda_api::{Allocation, CaptureMode, MemoryKind, Stream};
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let stream = Stream::new(&ctx)?;
    /// let src = Allocation::zeroed(&ctx, 64, MemoryKind::Device)?;
    /// let dst = Allocation::zeroed(&ctx, 64, MemoryKind::Device)?;
    /// let graph = stream.capture(CaptureMode::ThreadLocal, |c| -> cuda_api::CudaResult<()> {
    ///     // SAFETY: both 64-byte ranges outlive the graph; they do not overlap.
    ///     unsafe { c.copy_2d_raw(dst.device_address(), 64, src.device_address(), 64, 64, 1) }
    /// })?;
    /// # drop(graph);
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    ///
    /// As [`Stream::copy_2d_raw`], for every launch of the graph.
    ///
    /// # Errors
    ///
    /// The driver's failure.
    pub unsafe fn copy_2d_raw(
        &self,
        dst: CUdeviceptr,
        dst_pitch: usize,
        src: CUdeviceptr,
        src_pitch: usize,
        width: usize,
        height: usize,
    ) -> CudaResult<()> {
        // SAFETY: the caller's promise, for every launch of the graph.
        unsafe { memcpy_2d(self.queue(), dst, dst_pitch, src, src_pitch, width, height) }
    }
}
