// warp-launch's copy-adjoint kernels: the backward step of a copy recorded
// by a Tape (Warp's adj_copy for wp.copy) on a CUDA device, `acc += add`
// element by element and component by component, where `acc` is the copy
// source's gradient and `add` the destination's, both views of up to four
// axes with any byte strides. One kernel per component type:
//   f16, bf16  added in float32 and rounded to nearest, ties to even;
//   f32, f64   added in their own precision;
//   u8 .. u64  added modulo 2^bits (signed integers wrap the same way).
// Parameters (copy_adjoint.rs declares them): the two base addresses, the
// shape padded to four axes with leading 1s, the two views' byte strides
// padded with leading 0s, the number of components (elements x components
// per element) and the components per element. A grid-stride loop covers
// any launch size.
//
// copy_adjoint.ptx (embedded by copy_adjoint.rs) is this file compiled by the pinned nvcc 13.0.88:
//   nvcc -ptx -arch=compute_75 -O3 copy_adjoint.cu -o copy_adjoint.ptx
// with the header's `.version 9.0` lowered to `.version 8.0` (CUDA 12.0; the
// body uses nothing newer), checked with
//   ptxas -arch=sm_75 copy_adjoint.ptx -o /dev/null

struct dims4 {  // long long[4] by value: 32 bytes, 8-aligned
    long long v[4];
};

__device__ __forceinline__ float f16_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ unsigned short f32_to_f16(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float bf16_to_f32(unsigned short h) {
    return __uint_as_float(((unsigned int)h) << 16);
}

// Round to nearest, ties to even, in integer arithmetic (works on every
// architecture; cvt.rn.bf16.f32 needs sm_80). A NaN keeps its sign and
// top mantissa bits and is made quiet, so it cannot round to an infinity.
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (unsigned short)((u >> 16) | 0x0040u);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

struct add_f16 {
    typedef unsigned short T;
    static __device__ T add(T a, T b) { return f32_to_f16(f16_to_f32(a) + f16_to_f32(b)); }
};
struct add_bf16 {
    typedef unsigned short T;
    static __device__ T add(T a, T b) { return f32_to_bf16(bf16_to_f32(a) + bf16_to_f32(b)); }
};
template <class V>
struct add_plain {
    typedef V T;
    static __device__ T add(T a, T b) { return (T)(a + b); }
};

template <class Op>
__device__ void add_into(unsigned long long acc, unsigned long long add, dims4 shape,
                         dims4 acc_strides, dims4 add_strides, unsigned long long count,
                         unsigned int components) {
    typedef typename Op::T T;
    const unsigned long long step = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < count; i += step) {
        unsigned long long e = i / components;
        const long long c = (long long)(i % components) * (long long)sizeof(T);
        long long at_acc = c;
        long long at_add = c;
        for (int k = 3; k >= 0; --k) {
            const unsigned long long n = (unsigned long long)shape.v[k];
            const long long j = (long long)(e % n);
            e /= n;
            at_acc += j * acc_strides.v[k];
            at_add += j * add_strides.v[k];
        }
        T *a = (T *)(acc + (unsigned long long)at_acc);
        const T *b = (const T *)(add + (unsigned long long)at_add);
        *a = Op::add(*a, *b);
    }
}

#define COPY_ADJOINT(NAME, OP)                                                                  \
    extern "C" __global__ void warp_launch_copy_adjoint_##NAME(                                 \
        unsigned long long acc, unsigned long long add, dims4 shape, dims4 acc_strides,         \
        dims4 add_strides, unsigned long long count, unsigned int components) {                 \
        add_into<OP>(acc, add, shape, acc_strides, add_strides, count, components);             \
    }

COPY_ADJOINT(f16, add_f16)
COPY_ADJOINT(bf16, add_bf16)
COPY_ADJOINT(f32, add_plain<float>)
COPY_ADJOINT(f64, add_plain<double>)
COPY_ADJOINT(u8, add_plain<unsigned char>)
COPY_ADJOINT(u16, add_plain<unsigned short>)
COPY_ADJOINT(u32, add_plain<unsigned int>)
COPY_ADJOINT(u64, add_plain<unsigned long long>)
