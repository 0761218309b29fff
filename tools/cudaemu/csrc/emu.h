// What kernels.cu needs of CUDA's device side, for running it on the CPU:
// each block's threads are fibers on one OS thread, switched at barriers
// and warp shuffles (see device.cc). __shared__ is thread_local, so the
// fibers of a block share it and blocks on other threads do not.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#define GOVLLM_EMU 1

#ifdef EMU_SCAN
#define __global__ __emu_global__
#else
#define __global__
#endif
#define __device__
#define __constant__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ thread_local

struct uint3 {
    unsigned x, y, z;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

namespace emu {
struct Fiber {
    void* sp;
    uint3 tid;
    int linear, warp, lane;
    bool done;
};
struct Block {
    uint3 idx, dim, grid;
    char* dynShared;
};
extern thread_local Fiber* cur;
extern thread_local Block* block;
void syncthreads();
void syncwarp();
uint64_t shuffle(uint64_t v, int src, bool keep); // src's value, or v where keep
const uint64_t* exchange(uint64_t v);               // every lane's v, after one warp barrier
uint64_t globaltimer();
// For kernels whose blocks wait on each other (persistent.cu), each block
// on an OS thread of its own: spin is a thread waiting on memory that
// another fiber or block writes (the block's other fibers run, and if all
// of them wait, the OS thread yields); progress counts an arrival someone
// may wait on; namedSync is bar.sync id, count; trap ends the process.
void spin();
void progress();
void namedSync(int id, int count);
[[noreturn]] void trap(const char* why);
} // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::block->idx)
#define blockDim (emu::block->dim)
#define gridDim (emu::block->grid)

inline void __syncthreads() { emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::syncwarp(); }

template <class T>
inline uint64_t emu_bits(T v) {
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T>
inline T emu_from(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof(T));
    return v;
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
    int lane = emu::cur->lane, src = lane ^ mask;
    bool keep = (src & ~(width - 1)) != (lane & ~(width - 1));
    return emu_from<T>(emu::shuffle(emu_bits(v), src & 31, keep));
}
template <class T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
    int lane = emu::cur->lane, src = lane + (int)delta;
    bool keep = (src & ~(width - 1)) != (lane & ~(width - 1));
    return emu_from<T>(emu::shuffle(emu_bits(v), src & 31, keep));
}
template <class T>
inline T __shfl_sync(unsigned, T v, int srcLane, int width = 32) {
    int lane = emu::cur->lane, src = (lane & ~(width - 1)) + (srcLane & (width - 1));
    return emu_from<T>(emu::shuffle(emu_bits(v), src & 31, false));
}

// emu_butterfly is the xor-shuffle reduction (offsets 16, 8, 4, 2, 1) in
// one exchange instead of five, each a switch of the warp's 32 fibers:
// every lane combines the values as the shuffles would, so the result is
// the same bits.
template <class T, class F>
inline T emu_butterfly(T v, F op) {
    const uint64_t* all = emu::exchange(emu_bits(v));
    T t[32], n[32];
    for (int i = 0; i < 32; i++) t[i] = emu_from<T>(all[i]);
    for (int o = 16; o > 0; o >>= 1) {
        for (int i = 0; i < 32; i++) n[i] = op(t[i], t[i ^ o]);
        memcpy(t, n, sizeof t);
    }
    return t[emu::cur->lane];
}

inline float __int_as_float(int i) { return emu_from<float>((uint32_t)i); }
inline float __uint_as_float(unsigned u) { return emu_from<float>(u); }
inline unsigned __float_as_uint(float f) { return (unsigned)emu_bits(f); }
inline int __float_as_int(float f) { return (int)emu_bits(f); }
inline float rsqrtf(float x) { return 1.f / sqrtf(x); }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }

// Blocks run on several OS threads, so atomics are real ones.
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline float atomicAdd(float* p, float v) {
    uint32_t old = __atomic_load_n((uint32_t*)p, __ATOMIC_RELAXED), want;
    do {
        want = emu_bits(emu_from<float>(old) + v);
    } while (!__atomic_compare_exchange_n((uint32_t*)p, &old, want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return emu_from<float>(old);
}

// IEEE half conversions, round to nearest even (the PTX cvt.rn).
inline float emu_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return emu_from<float>(s | 0x7f800000u | (m << 13));
    if (e == 0) {
        float f = ldexpf((float)m, -24);
        return s ? -f : f;
    }
    return emu_from<float>(s | ((e + 112) << 23) | (m << 13));
}
inline uint16_t emu_f32_to_f16(float f) {
    uint32_t b = (uint32_t)emu_bits(f), s = (b >> 16) & 0x8000;
    float a = fabsf(f);
    if (a != a) return (uint16_t)(s | 0x7e00);
    if (a >= 65520.f) return (uint16_t)(s | 0x7c00);
    if (a < 6.103515625e-05f) { // subnormal: a multiple of 2^-24
        float q = nearbyintf(a * 16777216.f);
        return (uint16_t)(s | (uint32_t)q);
    }
    uint32_t ab = b & 0x7fffffffu;
    uint32_t r = ab + 0xfffu + ((ab >> 13) & 1u); // round the 13 dropped bits to even
    return (uint16_t)(s | (((r >> 23) - 112) << 10) | ((r >> 13) & 0x3ff));
}
