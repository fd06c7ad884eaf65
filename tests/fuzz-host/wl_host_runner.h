// The driver side of the host build (tests/tests/fuzz_cuda_c.rs): reads
// launch cases, makes each kernel's arguments and runs every thread of the
// grid a safe launch would run, one case per child process.
//
// A case is one line of whitespace-separated integers:
//
//   ID KERNEL GX GY GZ BX BY BZ S0 S1 S2 S3 SIZE COORD_MULT NPARAMS PARAM...
//
// (the grid, the block, `launch_bounds_t`'s shape, size and coord_mult), then
// for each parameter after the launch bounds `1 NDIM E0 E1 E2 E3` (an
// array of that shape) or `0 VALUE` (a value: a scalar converted from it, a
// composite with every component set to it). Output, per case:
//
//   BEGIN ID
//   ... (reports of the case: OUT-OF-RANGE lines, AddressSanitizer's)
//   RESULT ID pass|out-of-range|asan|hang|trap SIGNAL|exit CODE [ADDRESSES]
//
// Each case runs in a child process with an alarm (a hang ends only that
// case); after a hang, the kernel's other cases are reported `skipped`.

#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <vector>

extern "C" const char* __asan_default_options() {
    return "exitcode=23:detect_leaks=0:handle_segv=1:handle_sigfpe=0:print_summary=1:print_legend=0";
}

namespace wl_host {

/// AddressSanitizer's exit code (above).
constexpr int EXIT_ASAN = 23;
/// Seconds a case may run.
constexpr unsigned CASE_SECONDS = 3;

/// One parameter of a case.
struct Param {
    bool array;
    int ndim;
    int shape[4];
    long long value;
};

/// One launch.
struct Case {
    long long id;
    int kernel;
    unsigned grid[3], block[3], shape[4];
    unsigned long long size, coord_mult;
    std::vector<Param> params;
};

/// A kernel of the batch: its name and the function that makes its
/// arguments and runs its threads.
struct Entry {
    const char* name;
    void (*run)(const Case&);
};

/// Sets a scalar (or each scalar of a composite) from `v`.
template <typename T> inline void set_scalar(T& x, long long v) {
    static_assert(std::is_arithmetic<T>::value, "a scalar");
    x = T(v);
}
inline void set_scalar(wl::half& h, long long v) { h.bits = uint16_t(v); }
inline void set_scalar(wl::wp_bfloat16& h, long long v) { h.bits = uint16_t(v); }
template <unsigned L, typename T> inline void set_scalar(wl::vec_t<L, T>& x, long long v) {
    for (unsigned k = 0; k < L; ++k) set_scalar(x.c[k], v);
}
template <unsigned R, unsigned C, typename T> inline void set_scalar(wl::mat_t<R, C, T>& x, long long v) {
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c) set_scalar(x.data[r][c], v);
}
template <typename T> inline void set_scalar(wl::quat_t<T>& x, long long v) {
    set_scalar(x.x, v);
    set_scalar(x.y, v);
    set_scalar(x.z, v);
    set_scalar(x.w, v);
}
template <typename T> inline void set_scalar(wl::transform_t<T>& x, long long v) {
    set_scalar(x.p, v);
    set_scalar(x.q, v);
}

/// The launch bounds of a case.
template <int N> inline void bounds(wl::launch_bounds_t<N>& b, const Case& cs) {
    for (int d = 0; d < N; ++d) b.shape[d] = cs.shape[d];
    b.size = cs.size;
    b.coord_mult = cs.coord_mult;
}

/// Parameter `n` (after the bounds) of a case as an array: an allocation of
/// exactly its bytes (AddressSanitizer's red zones around it), contiguous,
/// row-major, registered for `wl::address`'s check, filled with small values.
template <typename T> inline void array(wl::array_t<T>& a, const Case& cs, int n, const char* name) {
    const Param& p = cs.params.at(n);
    if (!p.array || allocation_count == 16) {
        fprintf(stderr, "case %lld: parameter %d (%s) is an array\n", cs.id, n, name);
        _exit(2);
    }
    memset(&a, 0, sizeof a);
    size_t count = 1;
    for (int d = 0; d < p.ndim; ++d) count *= size_t(p.shape[d]);
    size_t bytes = count * sizeof(T);
    a.data = static_cast<T*>(malloc(bytes));
    if (a.data == nullptr) {
        fprintf(stderr, "case %lld: no memory for %zu bytes of parameter %d (%s)\n", cs.id, bytes, n, name);
        _exit(2);
    }
    for (size_t e = 0; e < count; ++e) set_scalar(a.data[e], (long long)(e % 5));
    int stride = int(sizeof(T));
    for (int d = p.ndim - 1; d >= 0; --d) {
        a.shape[d] = p.shape[d];
        a.strides[d] = stride;
        stride *= p.shape[d];
    }
    a.ndim = uint16_t(p.ndim);
    Allocation& r = allocations[allocation_count++];
    r.data = reinterpret_cast<const char*>(a.data);
    r.bytes = bytes;
    r.name = name;
    r.ndim = p.ndim;
    for (int d = 0; d < 4; ++d) r.shape[d] = d < p.ndim ? p.shape[d] : 0;
}

/// Parameter `n` (after the bounds) of a case as a value.
template <typename T> inline void value(T& x, const Case& cs, int n, const char* name) {
    const Param& p = cs.params.at(n);
    if (p.array) {
        fprintf(stderr, "case %lld: parameter %d (%s) is a value\n", cs.id, n, name);
        _exit(2);
    }
    memset(static_cast<void*>(&x), 0, sizeof x);
    set_scalar(x, p.value);
}

/// Runs `f` for every thread of every block of the case's grid, in order.
template <typename F> inline void threads(const Case& cs, F f) {
    gridDim = {cs.grid[0], cs.grid[1], cs.grid[2]};
    blockDim = {cs.block[0], cs.block[1], cs.block[2]};
    for (unsigned bz = 0; bz < cs.grid[2]; ++bz)
        for (unsigned by = 0; by < cs.grid[1]; ++by)
            for (unsigned bx = 0; bx < cs.grid[0]; ++bx)
                for (unsigned tz = 0; tz < cs.block[2]; ++tz)
                    for (unsigned ty = 0; ty < cs.block[1]; ++ty)
                        for (unsigned tx = 0; tx < cs.block[0]; ++tx) {
                            blockIdx = {bx, by, bz};
                            threadIdx = {tx, ty, tz};
                            f();
                        }
}

/// Reads one case from a line; false at a malformed one.
inline bool parse(const char* line, Case& cs) {
    std::vector<long long> v;
    const char* s = line;
    for (;;) {
        char* end = nullptr;
        long long x = strtoll(s, &end, 10);
        if (end == s) break;
        v.push_back(x);
        s = end;
    }
    if (v.size() < 15) return false;
    cs.id = v[0];
    cs.kernel = int(v[1]);
    for (int k = 0; k < 3; ++k) {
        cs.grid[k] = unsigned(v[2 + k]);
        cs.block[k] = unsigned(v[5 + k]);
    }
    for (int k = 0; k < 4; ++k) cs.shape[k] = unsigned(v[8 + k]);
    cs.size = (unsigned long long)v[12];
    cs.coord_mult = (unsigned long long)v[13];
    size_t n = size_t(v[14]), at = 15;
    for (size_t k = 0; k < n; ++k) {
        Param p = {};
        if (at + 6 <= v.size() && v[at] == 1) {
            p.array = true;
            p.ndim = int(v[at + 1]);
            for (int d = 0; d < 4; ++d) p.shape[d] = int(v[at + 2 + d]);
            at += 6;
        } else if (at + 2 <= v.size() && v[at] == 0) {
            p.value = v[at + 1];
            at += 2;
        } else {
            return false;
        }
        cs.params.push_back(p);
    }
    return at == v.size();
}

/// The driver's main: runs the cases of the file `argv[1]` against
/// `kernels`.
inline int main(int argc, char** argv, const Entry* kernels, int count) {
    dup2(1, 2);
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES\n", argv[0]);
        return 2;
    }
    FILE* f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    std::vector<bool> hung(size_t(count), false);
    static char line[8192];
    while (fgets(line, sizeof line, f)) {
        Case cs;
        if (line[0] == '\n' || line[0] == 0) continue;
        if (!parse(line, cs) || cs.kernel < 0 || cs.kernel >= count) {
            printf("BAD-CASE %s", line);
            return 2;
        }
        printf("BEGIN %lld\n", cs.id);
        if (hung[size_t(cs.kernel)]) {
            printf("RESULT %lld skipped\n", cs.id);
            continue;
        }
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            alarm(CASE_SECONDS);
            current_kernel = kernels[cs.kernel].name;
            kernels[cs.kernel].run(cs);
            printf("RESULT %lld pass %llu\n", cs.id, addresses_checked);
            fflush(stdout);
            _exit(0);
        }
        int status = 0;
        if (child < 0 || waitpid(child, &status, 0) != child) {
            perror("fork");
            return 2;
        }
        if (WIFEXITED(status)) {
            int code = WEXITSTATUS(status);
            if (code == WL_HOST_EXIT_OUT_OF_RANGE) {
                printf("RESULT %lld out-of-range\n", cs.id);
            } else if (code == EXIT_ASAN) {
                printf("RESULT %lld asan\n", cs.id);
            } else if (code != 0) {
                printf("RESULT %lld exit %d\n", cs.id, code);
            }
        } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
            hung[size_t(cs.kernel)] = true;
            printf("RESULT %lld hang\n", cs.id);
        } else {
            printf("RESULT %lld trap %d\n", cs.id, WIFSIGNALED(status) ? WTERMSIG(status) : -1);
        }
    }
    return 0;
}

}  // namespace wl_host
