// warp_launch.h for the HOST: the differential fuzzer's build of
// warp-launch/include/warp_launch.h with g++ (tests/tests/fuzz_cuda_c.rs).
//
// A CUDA C text the reader proves is compiled twice: by NVRTC against the
// real header, and by g++ against this one, with -fsanitize=address, and
// then run on the CPU one thread at a time over the grid a safe launch
// would run. Every name and layout of the device header is here (the test
// checks that no `using` or `typedef` name is missing), with three changes
// that make the run a check:
//
// - `wl::address` (and so `wl::index`) checks that the element it computes
//   lies inside the bytes of the array argument it came from (each array is
//   its own exact-size allocation, registered by the driver); one outside
//   is reported with the kernel's indices and the case ends with exit code
//   3 (`WL_HOST_EXIT_OUT_OF_RANGE`);
// - a fixed-size member array (`vec_t::c`, `mat_t::data`,
//   `launch_bounds_t::shape`, `array_t::shape` and `strides`) is a
//   `wl_host::checked` array of the same layout whose subscript is checked
//   against its length (a component past a vector's end stays inside the
//   allocation, where AddressSanitizer would not see it);
// - CUDA's built-ins are emulated for one thread at a time: `threadIdx`,
//   `blockIdx`, `blockDim`, `gridDim` are globals the driver sets before
//   each thread, barriers do nothing, a shuffle returns the caller's value,
//   an atomic is a plain read-modify-write.
//
// Any other load or store outside an allocation is AddressSanitizer's to
// report (the driver compiles with -fsanitize=address).

#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <type_traits>

// CUDA's declaration specifiers, for the host.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __shared__ static
#define __launch_bounds__(...)
#define WL_HOST_DEVICE

/// Exit code of a case that computed an address outside its array.
#define WL_HOST_EXIT_OUT_OF_RANGE 3

// CUDA's built-in variables: the driver sets them before each thread.
struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
};
inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;
inline const int warpSize = 32;

namespace wl_host {

/// The name of the kernel running (for the report of a bad access).
inline const char* current_kernel = "?";
/// Addresses `wl::address` has checked in this process.
inline unsigned long long addresses_checked = 0;

/// One array argument's allocation.
struct Allocation {
    const char* data;
    size_t bytes;
    const char* name;
    int ndim;
    int shape[4];
};
inline Allocation allocations[16];
inline int allocation_count = 0;

/// Reports a bad access and ends the case.
[[noreturn]] inline void out_of_range(const char* what) {
    printf("OUT-OF-RANGE in kernel %s, thread (%u,%u,%u) of block (%u,%u,%u): %s\n", current_kernel,
           threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z, what);
    fflush(stdout);
    _exit(WL_HOST_EXIT_OUT_OF_RANGE);
}

/// Checks that `size` bytes at byte `offset` from `data` lie inside the
/// allocation `data` starts; `indices` are the kernel's, for the report.
inline void check_address(const void* data, ptrdiff_t offset, size_t size, int n, const int* indices) {
    ++addresses_checked;
    const Allocation* a = nullptr;
    for (int k = 0; k < allocation_count; ++k) {
        if (allocations[k].data == static_cast<const char*>(data)) {
            a = &allocations[k];
        }
    }
    char what[512];
    int at = 0;
    at += snprintf(what + at, sizeof what - at, "wl::address(%s", a ? a->name : "<unregistered array>");
    for (int k = 0; k < n; ++k) {
        at += snprintf(what + at, sizeof what - at, ", %d", indices[k]);
    }
    if (a == nullptr) {
        snprintf(what + at, sizeof what - at, "): the array's data is no argument's allocation");
        out_of_range(what);
    }
    if (offset < 0 || size_t(offset) > a->bytes || a->bytes - size_t(offset) < size) {
        at += snprintf(what + at, sizeof what - at,
                       "): byte offset %lld, element of %zu bytes, allocation of %zu bytes (shape [", (long long)offset,
                       size, a->bytes);
        for (int d = 0; d < a->ndim; ++d) {
            at += snprintf(what + at, sizeof what - at, d ? ", %d" : "%d", a->shape[d]);
        }
        snprintf(what + at, sizeof what - at, "])");
        out_of_range(what);
    }
}

/// A fixed-size array of the layout of `T[N]` whose subscript is checked.
template <typename T, unsigned N> struct checked {
    T v[N];
    template <typename I> T& operator[](I i) {
        check(i);
        return v[i];
    }
    template <typename I> const T& operator[](I i) const {
        check(i);
        return v[i];
    }
    template <typename I> static void check(I i) {
        if (!(i >= 0 && (unsigned long long)(i) < N)) {
            char what[160];
            snprintf(what, sizeof what, "subscript %lld of a member array of %u elements", (long long)(i), N);
            out_of_range(what);
        }
    }
};

}  // namespace wl_host

namespace wl {

// Constants.
constexpr int LAUNCH_MAX_DIMS = 4;
constexpr int ARRAY_MAX_DIMS = 4;
constexpr uint16_t ARRAY_FLAG_RETAIN_GRAD = 1;

// Scalars: Warp's names for the C++ types.
typedef int8_t int8;
typedef uint8_t uint8;
typedef int16_t int16;
typedef uint16_t uint16;
typedef int32_t int32;
typedef uint32_t uint32;
typedef int64_t int64;
typedef uint64_t uint64;
struct half { uint16_t bits; };
typedef half float16;
struct wp_bfloat16 { uint16_t bits; };
typedef wp_bfloat16 bfloat16;
typedef float float32;
typedef double float64;

// Composite types: plain arrays of their scalar, no padding (checked subscripts).
template <unsigned Length, typename T> struct vec_t {
    wl_host::checked<T, Length> c;
};
template <unsigned Rows, unsigned Cols, typename T> struct mat_t {
    wl_host::checked<wl_host::checked<T, Cols>, Rows> data;  // row-major
};
template <typename T> struct quat_t {
    T x, y, z;
    T w;
};
template <typename T> struct transform_t {
    vec_t<3, T> p;
    quat_t<T> q;
};
template <typename T> using spatial_vector_t = vec_t<6, T>;
template <typename T> using spatial_matrix_t = mat_t<6, 6, T>;

// Warp's names of the composite types.
using vec2b = vec_t<2, int8>;
using vec2ub = vec_t<2, uint8>;
using vec2s = vec_t<2, int16>;
using vec2us = vec_t<2, uint16>;
using vec2i = vec_t<2, int32>;
using vec2ui = vec_t<2, uint32>;
using vec2l = vec_t<2, int64>;
using vec2ul = vec_t<2, uint64>;
using vec2h = vec_t<2, float16>;
using vec2f = vec_t<2, float32>;
using vec2 = vec2f;
using vec2d = vec_t<2, float64>;
using vec3b = vec_t<3, int8>;
using vec3ub = vec_t<3, uint8>;
using vec3s = vec_t<3, int16>;
using vec3us = vec_t<3, uint16>;
using vec3i = vec_t<3, int32>;
using vec3ui = vec_t<3, uint32>;
using vec3l = vec_t<3, int64>;
using vec3ul = vec_t<3, uint64>;
using vec3h = vec_t<3, float16>;
using vec3f = vec_t<3, float32>;
using vec3 = vec3f;
using vec3d = vec_t<3, float64>;
using vec4b = vec_t<4, int8>;
using vec4ub = vec_t<4, uint8>;
using vec4s = vec_t<4, int16>;
using vec4us = vec_t<4, uint16>;
using vec4i = vec_t<4, int32>;
using vec4ui = vec_t<4, uint32>;
using vec4l = vec_t<4, int64>;
using vec4ul = vec_t<4, uint64>;
using vec4h = vec_t<4, float16>;
using vec4f = vec_t<4, float32>;
using vec4 = vec4f;
using vec4d = vec_t<4, float64>;
using spatial_vectorh = vec_t<6, float16>;
using spatial_vectorf = vec_t<6, float32>;
using spatial_vector = spatial_vectorf;
using spatial_vectord = vec_t<6, float64>;
using mat22h = mat_t<2, 2, float16>;
using mat22f = mat_t<2, 2, float32>;
using mat22 = mat22f;
using mat22d = mat_t<2, 2, float64>;
using mat33h = mat_t<3, 3, float16>;
using mat33f = mat_t<3, 3, float32>;
using mat33 = mat33f;
using mat33d = mat_t<3, 3, float64>;
using mat44h = mat_t<4, 4, float16>;
using mat44f = mat_t<4, 4, float32>;
using mat44 = mat44f;
using mat44d = mat_t<4, 4, float64>;
using spatial_matrixh = mat_t<6, 6, float16>;
using spatial_matrixf = mat_t<6, 6, float32>;
using spatial_matrix = spatial_matrixf;
using spatial_matrixd = mat_t<6, 6, float64>;
using quath = quat_t<float16>;
using quatf = quat_t<float32>;
using quat = quatf;
using quatd = quat_t<float64>;
using transformh = transform_t<float16>;
using transformf = transform_t<float32>;
using transform = transformf;
using transformd = transform_t<float64>;

static_assert(sizeof(vec3f) == 12 && alignof(vec3f) == 4, "vec_t keeps the device layout");
static_assert(sizeof(mat33d) == 72 && alignof(mat33d) == 8, "mat_t keeps the device layout");
static_assert(sizeof(transformf) == 28, "transform_t keeps the device layout");

template <int N> struct launch_bounds_t {
    wl_host::checked<uint32_t, N> shape;
    size_t size;
    size_t coord_mult;
};

template <typename T> struct array_t {
    T* data;
    T* grad;
    wl_host::checked<int, 4> shape;
    wl_host::checked<int, 4> strides;
    uint16_t ndim;
    uint16_t flags;
};
static_assert(sizeof(array_t<float>) == 56, "array_t keeps the device layout");
static_assert(sizeof(launch_bounds_t<3>) == 32, "launch_bounds_t keeps the device layout");

struct coord_t {
    int i, j, k, l;
};

// The device header's code, unchanged but for the check in `address`.
template <int N> inline coord_t coord(size_t linear, const launch_bounds_t<N>& bounds) {
    if (bounds.coord_mult > 1) {
        linear /= bounds.coord_mult;
    }
    int v[4] = {0, 0, 0, 0};
    for (int d = N - 1; d > 0; --d) {
        v[d] = int(linear % bounds.shape[d]);
        linear /= bounds.shape[d];
    }
    v[0] = int(linear);
    coord_t c = {v[0], v[1], v[2], v[3]};
    return c;
}

template <typename T> inline ptrdiff_t byte_offset_dim(const array_t<T>& a, int d, int i) {
    if (i < 0) {
        i += a.shape[d];
    }
    return ptrdiff_t(i) * ptrdiff_t(a.strides[d]);
}
template <typename T> inline T* at_byte_offset(T* base, ptrdiff_t offset) {
    return reinterpret_cast<T*>(reinterpret_cast<char*>(base) + offset);
}
template <typename T> inline T* checked_at(const array_t<T>& a, ptrdiff_t offset, int n, const int* indices) {
    wl_host::check_address(a.data, offset, sizeof(T), n, indices);
    return at_byte_offset(a.data, offset);
}
template <typename T> inline T* address(const array_t<T>& a, int i) {
    const int x[] = {i};
    return checked_at(a, byte_offset_dim(a, 0, i), 1, x);
}
template <typename T> inline T* address(const array_t<T>& a, int i, int j) {
    const int x[] = {i, j};
    return checked_at(a, byte_offset_dim(a, 0, i) + byte_offset_dim(a, 1, j), 2, x);
}
template <typename T> inline T* address(const array_t<T>& a, int i, int j, int k) {
    const int x[] = {i, j, k};
    return checked_at(a, byte_offset_dim(a, 0, i) + byte_offset_dim(a, 1, j) + byte_offset_dim(a, 2, k), 3, x);
}
template <typename T> inline T* address(const array_t<T>& a, int i, int j, int k, int l) {
    const int x[] = {i, j, k, l};
    return checked_at(a,
                      byte_offset_dim(a, 0, i) + byte_offset_dim(a, 1, j) + byte_offset_dim(a, 2, k) +
                          byte_offset_dim(a, 3, l),
                      4, x);
}
template <typename T> inline T& index(const array_t<T>& a, int i) { return *address(a, i); }
template <typename T> inline T& index(const array_t<T>& a, int i, int j) { return *address(a, i, j); }
template <typename T> inline T& index(const array_t<T>& a, int i, int j, int k) { return *address(a, i, j, k); }
template <typename T> inline T& index(const array_t<T>& a, int i, int j, int k, int l) {
    return *address(a, i, j, k, l);
}

// Grid-stride and lean indices: the device header's arithmetic on the
// globals above (unsigned int, as CUDA's uint3 and dim3).
inline size_t grid_stride_begin() {
    return size_t(blockDim.x) * size_t(blockIdx.x) + size_t(threadIdx.x);
}
inline size_t grid_stride_step() {
    return size_t(blockDim.x) * size_t(gridDim.x);
}
inline size_t lean_index() {
    return size_t(blockIdx.z * gridDim.y + blockIdx.y) * size_t(gridDim.x * blockDim.x) +
           size_t(blockIdx.x * blockDim.x + threadIdx.x);
}

}  // namespace wl

#define WL_GRID_STRIDE_LOOP(idx, bounds) \
    for (size_t idx = ::wl::grid_stride_begin(); idx < (bounds).size; idx += ::wl::grid_stride_step())

// ---- CUDA's device built-ins, one thread at a time ----

// min and max of CUDA's math headers (any two arithmetic types).
template <typename A, typename B> inline typename std::common_type<A, B>::type min(A a, B b) {
    typedef typename std::common_type<A, B>::type R;
    return R(b) < R(a) ? R(b) : R(a);
}
template <typename A, typename B> inline typename std::common_type<A, B>::type max(A a, B b) {
    typedef typename std::common_type<A, B>::type R;
    return R(a) < R(b) ? R(b) : R(a);
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) {
    unsigned int r = 0;
    for (int b = 0; b < 32; ++b) r |= ((x >> b) & 1u) << (31 - b);
    return r;
}
inline unsigned int __umulhi(unsigned int x, unsigned int y) {
    return (unsigned int)(((unsigned long long)x * y) >> 32);
}
inline int __mulhi(int x, int y) { return (int)(((long long)x * y) >> 32); }
inline int __float_as_int(float x) {
    int r;
    memcpy(&r, &x, 4);
    return r;
}
inline unsigned int __float_as_uint(float x) {
    unsigned int r;
    memcpy(&r, &x, 4);
    return r;
}
inline float __int_as_float(int x) {
    float r;
    memcpy(&r, &x, 4);
    return r;
}
inline float __uint_as_float(unsigned int x) {
    float r;
    memcpy(&r, &x, 4);
    return r;
}
// Shuffles and votes of a warp of one thread.
template <typename T> inline T __shfl_sync(unsigned int, T v, int, int = 32) { return v; }
template <typename T> inline T __shfl_up_sync(unsigned int, T v, unsigned int, int = 32) { return v; }
template <typename T> inline T __shfl_down_sync(unsigned int, T v, unsigned int, int = 32) { return v; }
template <typename T> inline T __shfl_xor_sync(unsigned int, T v, int, int = 32) { return v; }
inline unsigned int __ballot_sync(unsigned int, int p) { return p ? 1u : 0u; }
inline int __any_sync(unsigned int, int p) { return p != 0; }
inline int __all_sync(unsigned int, int p) { return p != 0; }
inline unsigned int __activemask() { return 1u; }
// Barriers and fences: one thread runs at a time.
inline void __syncthreads() {}
inline int __syncthreads_count(int p) { return p != 0; }
inline int __syncthreads_and(int p) { return p != 0; }
inline int __syncthreads_or(int p) { return p != 0; }
inline void __syncwarp(unsigned int = 0xffffffffu) {}
inline void __threadfence() {}
inline void __threadfence_block() {}
inline long long clock64() { return (long long)clock(); }
// The attack class of paren-call-memset.cu: what those intrinsics do, for a
// text a reader wrongly proves.
inline void* __cvta_global_to_generic(unsigned long long a) { return (void*)a; }
inline void __gen_nvvm_memset(void* p, int v, size_t n) { memset(p, v, n); }
// Atomics: a plain read-modify-write returning the old value.
template <typename T, typename V> inline T atomicAdd(T* p, V v) {
    T old = *p;
    *p = T(old + v);
    return old;
}
template <typename T, typename V> inline T atomicSub(T* p, V v) {
    T old = *p;
    *p = T(old - v);
    return old;
}
template <typename T, typename V> inline T atomicExch(T* p, V v) {
    T old = *p;
    *p = T(v);
    return old;
}
template <typename T, typename V> inline T atomicMin(T* p, V v) {
    T old = *p;
    *p = T(v) < old ? T(v) : old;
    return old;
}
template <typename T, typename V> inline T atomicMax(T* p, V v) {
    T old = *p;
    *p = old < T(v) ? T(v) : old;
    return old;
}
template <typename T, typename V> inline T atomicInc(T* p, V v) {
    T old = *p;
    *p = old >= T(v) ? T(0) : T(old + 1);
    return old;
}
template <typename T, typename V> inline T atomicDec(T* p, V v) {
    T old = *p;
    *p = (old == T(0) || old > T(v)) ? T(v) : T(old - 1);
    return old;
}
template <typename T, typename C, typename V> inline T atomicCAS(T* p, C cmp, V v) {
    T old = *p;
    *p = old == T(cmp) ? T(v) : old;
    return old;
}
template <typename T, typename V> inline T atomicAnd(T* p, V v) {
    T old = *p;
    *p = T(old & v);
    return old;
}
template <typename T, typename V> inline T atomicOr(T* p, V v) {
    T old = *p;
    *p = T(old | v);
    return old;
}
template <typename T, typename V> inline T atomicXor(T* p, V v) {
    T old = *p;
    *p = T(old ^ v);
    return old;
}
