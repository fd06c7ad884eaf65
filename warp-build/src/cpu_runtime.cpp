// warp-build's CPU runtime for Warp's generated kernel code (written for
// warp-build; not Warp's). It defines the C functions Warp's CPU code
// (compiled with WP_NO_CRT) calls besides the C library:
//
// - _wp_assert records the calling thread's first failed assertion instead of
//   aborting; wpl_take_assert returns it as one string and clears it.
// - wp_cpu_run_block runs a block's lanes one after the other on the calling
//   thread, with the lane queries of Warp's cpu_block_runtime.h answering for
//   the lane that runs. warp-build's wpl_ entry points never call it (they run
//   task indices directly); it exists so that Warp's own entry points link.
//   Lanes that run one after the other cannot meet at a barrier: a
//   wp_cpu_tile_sync in a block of more than one lane is recorded as a failure.
// - _wp_isfinite / _wp_isnan / _wp_isinf and the half / bfloat16 conversions
//   that Warp's headers declare for code built without the C runtime.
//
// Every module's static library holds a copy; all are weak, so one binary
// linking several modules keeps one definition of each (and one record of
// failures per thread).

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__)
#define WPL_WEAK __attribute__((weak))
#else
#define WPL_WEAK
#endif

typedef void (*wpl_lane_fn)(void* dim, size_t block_id, int lane, void* args);

struct wpl_assert_record_t {
    int set;
    char text[1024];
    char taken[1024];
};

struct wpl_block_state_t {
    int in_block;
    int lane;
    int active_count;
};

extern "C" {

// The calling thread's failure record (one per thread, one per binary).
WPL_WEAK wpl_assert_record_t* wpl_assert_record(void)
{
    static thread_local wpl_assert_record_t record;
    return &record;
}

// The calling thread's running block, if any.
WPL_WEAK wpl_block_state_t* wpl_block_state(void)
{
    static thread_local wpl_block_state_t state;
    return &state;
}

WPL_WEAK void _wp_assert(const char* message, const char* file, unsigned int line)
{
    wpl_assert_record_t* r = wpl_assert_record();
    if (r->set)
        return;
    r->set = 1;
    snprintf(r->text, sizeof(r->text), "%s:%u: %s", file ? file : "?", line, message ? message : "assertion failed");
}

WPL_WEAK const char* wpl_take_assert(void)
{
    wpl_assert_record_t* r = wpl_assert_record();
    if (!r->set)
        return NULL;
    memcpy(r->taken, r->text, sizeof(r->taken));
    r->set = 0;
    r->text[0] = '\0';
    return r->taken;
}

WPL_WEAK int wp_cpu_run_block(
    int block_dim, int active_count, wpl_lane_fn kernel_fn, void* dim, size_t block_id, void* args
)
{
    (void)block_dim;
    wpl_block_state_t* s = wpl_block_state();
    wpl_block_state_t saved = *s;
    s->in_block = 1;
    s->active_count = active_count;
    for (int lane = 0; lane < active_count; ++lane) {
        s->lane = lane;
        kernel_fn(dim, block_id, lane, args);
    }
    *s = saved;
    return 1;
}

WPL_WEAK int wp_cpu_get_thread_idx(void)
{
    wpl_block_state_t* s = wpl_block_state();
    return s->in_block ? s->lane : 0;
}

WPL_WEAK int wp_cpu_get_active_count(void)
{
    wpl_block_state_t* s = wpl_block_state();
    return s->in_block ? s->active_count : 1;
}

WPL_WEAK int wp_cpu_get_first_active_lane(void) { return 0; }

WPL_WEAK void wp_cpu_tile_sync(void)
{
    wpl_block_state_t* s = wpl_block_state();
    if (s->in_block && s->active_count > 1)
        _wp_assert(
            "wp_cpu_tile_sync: a block barrier in lanes that run one after the other (cooperative tile code "
            "does not run on warp-build's serial CPU runtime)",
            __FILE__, __LINE__
        );
}

WPL_WEAK int _wp_isfinite(double x) { return isfinite(x) ? 1 : 0; }
WPL_WEAK int _wp_isnan(double x) { return isnan(x) ? 1 : 0; }
WPL_WEAK int _wp_isinf(double x) { return isinf(x) ? 1 : 0; }

// IEEE binary32 -> binary16, rounding to nearest, ties to even.
WPL_WEAK uint16_t wp_float_to_half_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    const uint32_t abs = bits & 0x7fffffffu;
    if (abs >= 0x7f800000u)  // infinity or NaN (quiet, top payload bits kept)
        return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
    if (abs >= 0x47800000u)  // 65536 and up: infinity
        return (uint16_t)(sign | 0x7c00u);
    const uint32_t exp = abs >> 23;
    if (exp < 113) {  // below 2^-14: a subnormal half (or zero)
        const uint32_t shift = 126 - exp;  // value = m * 2^-24 >> shift
        if (shift > 24)
            return sign;
        const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
        uint32_t q = m >> shift;
        const uint32_t r = m & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1u);
        if (r > half || (r == half && (q & 1u)))
            ++q;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((exp - 112u) << 10) | ((abs & 0x7fffffu) >> 13);
    const uint32_t r = abs & 0x1fffu;
    if (r > 0x1000u || (r == 0x1000u && (q & 1u)))
        ++q;  // a carry into the exponent is the correctly rounded result (up to infinity)
    return (uint16_t)(sign | q);
}

WPL_WEAK float wp_half_bits_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        float f = (float)mant * 5.9604644775390625e-8f;  // mant * 2^-24, exact
        memcpy(&bits, &f, sizeof(bits));
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float out;
    memcpy(&out, &bits, sizeof(out));
    return out;
}

// IEEE binary32 -> bfloat16, rounding to nearest, ties to even.
WPL_WEAK uint16_t wp_float_to_bfloat16_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

WPL_WEAK float wp_bfloat16_bits_to_float(uint16_t b)
{
    const uint32_t bits = (uint32_t)b << 16;
    float out;
    memcpy(&out, &bits, sizeof(out));
    return out;
}

}  // extern "C"
