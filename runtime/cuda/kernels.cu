// govllm CUDA kernels, compiled at run time by NVRTC (see nvrtc.go).
// Activations are f32. A "row" argument set is (pointer, row stride in
// elements); rows have a dense last dimension.
// No headers: NVRTC does not always ship cuda_bf16.h / cuda_fp16.h, so the
// 16-bit conversions are written out (bf16) or in PTX (f16).
// GOVLLM_EMU: tools/cudaemu compiles this file for the CPU; the few lines
// of PTX have C++ stand-ins there.

typedef long long i64;
typedef unsigned short u16;

#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float bf16_to_f32(u16 h) { return __uint_as_float((unsigned)h << 16); }
// Round to nearest even, as the CPU's F32ToBF16 (NaN kept quiet).
__device__ __forceinline__ u16 f32_to_bf16(float f) {
    unsigned b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (u16)((b >> 16) | 0x40);
    return (u16)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
#ifdef GOVLLM_EMU
#define f16_to_f32 emu_f16_to_f32
#define f32_to_f16 emu_f32_to_f16
#define DYNAMIC_SHARED(T, name) T* name = (T*)emu::block->dynShared
#else
#define DYNAMIC_SHARED(T, name) extern __shared__ T name[]
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("{.reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t;}" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("{.reg .f16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t;}" : "=h"(h) : "f"(f));
    return h;
}
#endif

#ifdef GOVLLM_EMU
// The same sums as below, in one warp exchange instead of five.
__device__ __forceinline__ float warp_sum(float v) { return emu_butterfly(v, [](float a, float b) { return a + b; }); }
__device__ __forceinline__ float warp_max(float v) { return emu_butterfly(v, [](float a, float b) { return fmaxf(a, b); }); }
#else
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
#endif

// block_sum returns the sum over the block to every thread (blockDim.x a
// multiple of 32, at most 1024).
__device__ float block_sum(float v) {
    __shared__ float part[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) part[w] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? part[lane] : 0.f;
    return warp_sum(v);
}

__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }

// gdn_gate turns a head's raw a and b into its log-decay g = -exp(aLog) ·
// softplus(a + dtBias) and β = sigmoid(b), in place.
__device__ __forceinline__ void gdn_gate(float* a, float* b, float alog, float dtb) {
    float x = *a + dtb;
    float sp = x > 20.f ? x : log1pf(expf(x)); // torch's threshold: linear above it
    *a = -expf(alog) * sp;
    *b = sigmoidf_(*b);
}

// Programmatic dependent launch (Hopper): a kernel of a graph may start
// while the one before it finishes; it waits here, before touching memory,
// until that one has completed and its writes are visible, and lets the
// next one start at once. Both are no-ops when not launched that way.
#if __CUDA_ARCH__ >= 900
#define DEPEND()                                                \
    do {                                                        \
        asm volatile("griddepcontrol.wait;" ::: "memory");      \
        asm volatile("griddepcontrol.launch_dependents;" :::); \
    } while (0)
#else
#define DEPEND() \
    do {         \
    } while (0)
#endif

// prefetch_l2 asks L2 for bytes at p, a warp's lanes taking every 32nd
// 128-byte line. A matmul issues it for its weight, which no kernel
// writes, before DEPEND(): the weight streams in while the kernel before
// (whose output is x) finishes.
__device__ __forceinline__ void prefetch_l2(const char* p, int bytes, int lane) {
#ifndef GOVLLM_EMU
    for (int off = lane * 128; off < bytes; off += 32 * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
#endif
}

extern "C" {

// The elementwise kernels: blockIdx.x is the row, blockIdx.y a piece of
// its columns (a single row still spreads over several SMs).
#define EACH_COL(i) for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < cols; i += gridDim.y * blockDim.x)

__global__ void add_f32(float* d, i64 sd, const float* a, i64 sa, const float* b, i64 sb, int cols) {
    DEPEND();
    i64 r = blockIdx.x;
    EACH_COL(i) d[r * sd + i] = a[r * sa + i] + b[r * sb + i];
}

// copy_i32: d = s, n words. A step's device-to-device and device-to-host
// copies (Feed, ReadBack) run as this kernel, not as copy nodes: a graph's
// copy node keeps what it learned of its buffers' allocations, which a
// later allocation at the same address does not renew; a kernel keeps
// only the addresses. d may be page-locked host memory (unified addressing).
__global__ void copy_i32(int* d, const int* s, int n) {
    DEPEND();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) d[i] = s[i];
}

// swiglu_f32: d = silu(g) * u, or silu(g) where u is null.
__global__ void swiglu_f32(float* d, i64 sd, const float* g, i64 sg, const float* u, i64 su, int cols) {
    DEPEND();
    i64 r = blockIdx.x;
    EACH_COL(i) {
        float x = g[r * sg + i];
        float s = x * sigmoidf_(x);
        d[r * sd + i] = u ? s * u[r * su + i] : s;
    }
}

// sigmoid_mul_f32: d = x * sigmoid(gate); a gate row of one element broadcasts.
__global__ void sigmoid_mul_f32(float* d, i64 sd, const float* x, i64 sx, const float* g, i64 sg, int cols, int gcols) {
    DEPEND();
    i64 r = blockIdx.x;
    EACH_COL(i) d[r * sd + i] = x[r * sx + i] * sigmoidf_(g[r * sg + (gcols == 1 ? 0 : i)]);
}

// The row kernels below: one block per row.

// Row r of a [A, B, cols] view with strides (s0, s1, 1) is at
// (r / B)·s0 + (r % B)·s1; B is the group argument of the kernels that take
// such views (1 for plain rows of stride s0).
__device__ __forceinline__ i64 row_at(i64 r, int group, i64 s0, i64 s1) { return (r / group) * s0 + (r % group) * s1; }

// rms_norm_f32: d = x / rms(x) * (w or 1 + w); gated: times silu(z).
__global__ void rms_norm_f32(float* d, i64 sd, i64 sd1, const float* x, i64 sx, i64 sx1, const float* w, const float* z,
                             i64 sz, i64 sz1, int group, int cols, float eps, int offset) {
    DEPEND();
    i64 r = blockIdx.x;
    const float* xr = x + row_at(r, group, sx, sx1);
    float* dr = d + row_at(r, group, sd, sd1);
    float ss = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += xr[i] * xr[i];
    float inv = rsqrtf(block_sum(ss) / cols + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        float y = xr[i] * inv * (offset ? 1.f + w[i] : w[i]);
        if (z) {
            float g = z[row_at(r, group, sz, sz1) + i];
            y *= g * sigmoidf_(g);
        }
        dr[i] = y;
    }
}

// add_rms_norm_f32: x += y, then d = x / rms(x) * (1 + w).
__global__ void add_rms_norm_f32(float* d, i64 sd, float* x, i64 sx, const float* y, i64 sy, const float* w, int cols, float eps) {
    DEPEND();
    i64 r = blockIdx.x;
    float* xr = x + r * sx;
    const float* yr = y + r * sy;
    float ss = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        float v = xr[i] + yr[i];
        xr[i] = v;
        ss += v * v;
    }
    float inv = rsqrtf(block_sum(ss) / cols + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) d[r * sd + i] = xr[i] * inv * (1.f + w[i]);
}

__global__ void l2_norm_f32(float* d, i64 sd, i64 sd1, const float* x, i64 sx, i64 sx1, int group, int cols, float eps) {
    DEPEND();
    i64 r = blockIdx.x;
    const float* xr = x + row_at(r, group, sx, sx1);
    float* dr = d + row_at(r, group, sd, sd1);
    float ss = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += xr[i] * xr[i];
    float inv = rsqrtf(block_sum(ss) + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) dr[i] = xr[i] * inv;
}

// split_query_gate_f32: row r of qg is [q | gate], each of cols; rows are
// (token, head) pairs of group heads with strides (s0, s1).
__global__ void split_query_gate_f32(float* q, i64 sq0, i64 sq1, float* gate, i64 sg0, i64 sg1, const float* qg, i64 sqg0,
                                     i64 sqg1, int group, int cols) {
    DEPEND();
    i64 r = blockIdx.x;
    float* qr = q + row_at(r, group, sq0, sq1);
    float* gr = gate + row_at(r, group, sg0, sg1);
    const float* src = qg + row_at(r, group, sqg0, sqg1);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        qr[i] = src[i];
        gr[i] = src[cols + i];
    }
}

// rotate applies NeoX rotation to the first rdim channels of row x at
// position pos, with the angles computed as transformers does (f32 inverse
// frequencies and products); the caller synchronises before and after.
__device__ void rotate(float* x, int pos, int rdim, float theta) {
    int half = rdim / 2;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float inv = 1.f / (float)pow((double)theta, (double)((float)(2 * i) / (float)rdim));
        double a = (double)((float)pos * inv);
        float c = (float)cos(a), s = (float)sin(a);
        float x0 = x[i], x1 = x[i + half];
        x[i] = x0 * c - x1 * s;
        x[i + half] = x1 * c + x0 * s;
    }
}

// rope_neox_f32: rows are (token, head) with heads per token; in place.
__global__ void rope_neox_f32(float* x, i64 s0, i64 s1, const int* pos, int heads, int rdim, float theta) {
    DEPEND();
    i64 r = blockIdx.x;
    rotate(x + row_at(r, heads, s0, s1), pos[r / heads], rdim, theta);
}

// attn_preamble_f32: per token, hq query rows (split from qg, normalised
// with 1 + qw, rotated) then hkv key rows (normalised with 1 + kw in place,
// rotated). One block per (token, head) row. qg, k and v are (token, head)
// rows with strides (s0, s1). With kc, a key row and its v row are also
// written to row slots[t] of the caches kc and vc [S, hkv, dim].
__global__ void attn_preamble_f32(float* q, i64 sq, float* gate, i64 sg, const float* qg, i64 sqg0, i64 sqg1, float* k,
                                  i64 sk0, i64 sk1, const float* qw, const float* kw, const int* pos, int hq, int hkv, int dim,
                                  int rdim, float theta, float eps, float* kc, float* vc, const float* v, i64 sv0, i64 sv1,
                                  const int* slots) {
    DEPEND();
    int row = blockIdx.x, t = row / (hq + hkv), h = row % (hq + hkv);
    const float* src;
    float* dst;
    const float* w;
    if (h < hq) {
        i64 r = (i64)t * hq + h;
        src = qg + t * sqg0 + h * sqg1;
        dst = q + r * sq;
        w = qw;
        for (int i = threadIdx.x; i < dim; i += blockDim.x) gate[r * sg + i] = src[dim + i];
    } else {
        dst = k + t * sk0 + (h - hq) * sk1;
        src = dst;
        w = kw;
    }
    float ss = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += src[i] * src[i];
    float inv = rsqrtf(block_sum(ss) / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i] * inv * (1.f + w[i]);
    __syncthreads();
    if (rdim > 0) rotate(dst, pos[t], rdim, theta);
    if (!kc || h < hq) return;
    __syncthreads(); // the rotated row is written
    i64 o = ((i64)slots[t] * hkv + h - hq) * dim;
    const float* vr = v + t * sv0 + (h - hq) * sv1;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        kc[o + i] = dst[i];
        vc[o + i] = vr[i];
    }
}

// gdn_gating_f32: g = -exp(aLog) * softplus(a + dtBias), beta = sigmoid(b).
__global__ void gdn_gating_f32(float* g, i64 sg, float* beta, i64 sbeta, const float* a, i64 sa, const float* b, i64 sb,
                               const float* alog, const float* dtb, int heads) {
    DEPEND();
    i64 r = blockIdx.x;
    for (int h = threadIdx.x; h < heads; h += blockDim.x) {
        float gv = a[r * sa + h], bv = b[r * sb + h];
        gdn_gate(&gv, &bv, alog[h], dtb[h]);
        g[r * sg + h] = gv;
        beta[r * sbeta + h] = bv;
    }
}

// Embedding rows: one block per id.
__global__ void embed_f32(float* d, i64 sd, const float* t, const int* ids, int cols) {
    DEPEND();
    i64 r = blockIdx.x, src = (i64)ids[r] * cols;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) d[r * sd + i] = t[src + i];
}
__global__ void embed_bf16(float* d, i64 sd, const u16* t, const int* ids, int cols) {
    DEPEND();
    i64 r = blockIdx.x, src = (i64)ids[r] * cols;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) d[r * sd + i] = bf16_to_f32(t[src + i]);
}
__global__ void embed_f16(float* d, i64 sd, const u16* t, const int* ids, int cols) {
    DEPEND();
    i64 r = blockIdx.x, src = (i64)ids[r] * cols;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) d[r * sd + i] = f16_to_f32(t[src + i]);
}

// Activations to the weight's 16-bit type for cuBLAS, dense [rows, cols].
__global__ void to_bf16(u16* d, const float* x, i64 sx, int cols) {
    DEPEND();
    i64 r = blockIdx.x;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) d[r * cols + i] = f32_to_bf16(x[r * sx + i]);
}
__global__ void to_f16(u16* d, const float* x, i64 sx, int cols) {
    DEPEND();
    i64 r = blockIdx.x;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) d[r * cols + i] = f32_to_f16(x[r * sx + i]);
}

// split_16: row r of x as two 16-bit rows, hi = round(x) at r and
// lo = round(x - hi) at M + r (bf16, or f16 when f16 = 1): W·hi + W·lo in
// f32 accumulation carries x to ~2^-17 instead of bf16's 2^-9.
__global__ void split_16(u16* d, const float* x, i64 sx, int cols, int M, int f16) {
    DEPEND();
    i64 r = blockIdx.x;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        float v = x[r * sx + i];
        u16 hi = f16 ? f32_to_f16(v) : f32_to_bf16(v);
        float rest = v - (f16 ? f16_to_f32(hi) : bf16_to_f32(hi));
        d[r * cols + i] = hi;
        d[(M + r) * cols + i] = f16 ? f32_to_f16(rest) : f32_to_bf16(rest);
    }
}

// sum_halves: d[r] = y[r] + y[M + r], rows of n. A thread takes 4
// columns (one float4 where rows are 16-byte aligned) and the grid covers
// every column of gridDim.y rows at a time: a row a block left a batch's
// few rows on few SMs (lm_head's 64 × 248k at 0.6 TB/s).
__global__ void sum_halves(float* d, i64 sd, const float* y, int M, int n) {
    DEPEND();
    int i = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    bool vec = ((n | sd) & 3) == 0 && ((unsigned long long)d & 15) == 0 && ((unsigned long long)y & 15) == 0;
    for (i64 r = blockIdx.y; r < M; r += gridDim.y) {
        const float* a = y + r * n + i;
        const float* b = y + (M + r) * n + i;
        float* o = d + r * sd + i;
        if (vec) {
            float4 u = *(const float4*)a, v = *(const float4*)b;
            *(float4*)o = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
        } else {
            for (int e = 0; e < 4 && i + e < n; e++) o[e] = a[e] + b[e];
        }
    }
}

// ld_stream loads 16 bytes that are read once (a weight), bypassing L1 so
// that it keeps what is read again (x).
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
#ifdef GOVLLM_EMU
    return *p;
#else
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
#endif
}

// dot8 is the dot product of 8 weights in q (bf16, or f16 where f16 is
// set), widened exactly, with 8 values of x.
__device__ __forceinline__ float dot8(uint4 q, float4 a, float4 b, int f16) {
    unsigned u[4] = {q.x, q.y, q.z, q.w};
    float wf[8];
    for (int j = 0; j < 4; j++) {
        if (f16) {
            wf[2 * j] = f16_to_f32((u16)(u[j] & 0xffffu));
            wf[2 * j + 1] = f16_to_f32((u16)(u[j] >> 16));
        } else {
            wf[2 * j] = __uint_as_float(u[j] << 16);
            wf[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
        }
    }
    return a.x * wf[0] + a.y * wf[1] + a.z * wf[2] + a.w * wf[3] + b.x * wf[4] + b.y * wf[5] + b.z * wf[6] + b.w * wf[7];
}

// gemv_16: d[n] = Σ_k x[k]·w[n][k] for one f32 row x and a bf16 or f16
// weight read once in 16-byte loads. Blocks of 8 warps; a warp takes
// `rows` (1 to 4) adjacent weight rows, so a lane's 8 values of x are
// loaded once for all of them, and a 1/split of K (split 1, 2, 4 or 8),
// so that a matrix of few rows still has loads enough in flight. The grid
// may be smaller than the matrix's blocks (as many as are resident at
// once): each block then strides over them, so that no second, partial
// wave leaves most SMs idle at the end.
// Needs K % 8 == 0 and 16-byte aligned x and rows of w.
__global__ void gemv_16(float* d, const float* x, const u16* w, int N, int K, int f16, int split, int rows) {
    __shared__ float part[8][4];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, piece = warp % split;
    int units = K / 8, per = (units + split - 1) / split;
    int nblocks = (((N + rows - 1) / rows) * split + 7) / 8;
    for (int blk = blockIdx.x; blk < nblocks; blk += gridDim.x) {
        int n0 = (blk * (8 / split) + warp / split) * rows;
        int u0 = piece * per, u1 = min(units, u0 + per);
        if (n0 >= N) u1 = u0; // no work, but the block's barrier below
        int live = min(rows, N - n0);
        if (blk == blockIdx.x) {
            for (int r = 0; r < live; r++) prefetch_l2((const char*)(w + (i64)(n0 + r) * K + (i64)u0 * 8), (u1 - u0) * 16, lane);
            DEPEND();
        }
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 2
        for (int i = u0 + lane; i < u1; i += 32) {
            const float4* xr = (const float4*)(x + (i64)i * 8);
            float4 a = xr[0], b = xr[1];
            uint4 q[4];
#pragma unroll
            for (int r = 0; r < 4; r++)
                if (r < live) q[r] = ld_stream((const uint4*)(w + (i64)(n0 + r) * K) + i);
#pragma unroll
            for (int r = 0; r < 4; r++)
                if (r < live) acc[r] += dot8(q[r], a, b, f16);
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            if (r >= rows) break;
            float v = warp_sum(acc[r]);
            if (split == 1) {
                if (lane == 0 && r < live) d[n0 + r] = v;
            } else if (lane == 0) {
                part[warp][r] = v;
            }
        }
        if (split == 1) continue;
        __syncthreads();
        if (piece == 0 && lane < live) {
            float s = 0.f;
            for (int j = 0; j < split; j++) s += part[warp + j][lane];
            d[n0 + lane] = s;
        }
        __syncthreads(); // part is written again by the next block's warps
    }
}

// gemv_16_glu: gemv_16 for w = [gate; up] of glu rows each (rows 4),
// writing d[i] = silu(gate_i·x)·(up_i·x): a warp takes gate rows i, i+1
// and up rows i, i+1, so that an MLP's SwiGLU needs no kernel of its own.
// Its own kernel, so that the plain GEMV keeps its registers.
__global__ void gemv_16_glu(float* d, const float* x, const u16* w, int N, int K, int f16, int split, int rows, int glu) {
    __shared__ float part[8][4];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, piece = warp % split;
    int units = K / 8, per = (units + split - 1) / split;
    int nblocks = (((N + rows - 1) / rows) * split + 7) / 8;
    for (int blk = blockIdx.x; blk < nblocks; blk += gridDim.x) {
        int n0 = (blk * (8 / split) + warp / split) * 2; // the warp's first row of d
        int u0 = piece * per, u1 = min(units, u0 + per);
        int live = min(2, glu - n0);
        if (live <= 0) u1 = u0; // no work, but the block's barrier below
        const u16* wr[4] = {w + (i64)n0 * K, w + (i64)(n0 + 1) * K, w + (i64)(glu + n0) * K, w + (i64)(glu + n0 + 1) * K};
        if (blk == blockIdx.x) {
            for (int r = 0; r < 4; r++)
                if ((r & 1) < live) prefetch_l2((const char*)(wr[r] + (i64)u0 * 8), (u1 - u0) * 16, lane);
            DEPEND();
        }
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 2
        for (int i = u0 + lane; i < u1; i += 32) {
            const float4* xr = (const float4*)(x + (i64)i * 8);
            float4 a = xr[0], b = xr[1];
            uint4 q[4];
#pragma unroll
            for (int r = 0; r < 4; r++)
                if ((r & 1) < live) q[r] = ld_stream((const uint4*)wr[r] + i);
#pragma unroll
            for (int r = 0; r < 4; r++)
                if ((r & 1) < live) acc[r] += dot8(q[r], a, b, f16);
        }
        float v[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            v[r] = warp_sum(acc[r]);
            if (split > 1 && lane == 0) part[warp][r] = v[r];
        }
        if (split == 1) {
            if (lane == 0)
                for (int r = 0; r < live; r++) d[n0 + r] = v[r] * sigmoidf_(v[r]) * v[r + 2];
            continue;
        }
        __syncthreads();
        if (piece == 0) {
            float s = 0.f;
            if (lane < 4)
                for (int j = 0; j < split; j++) s += part[warp + j][lane];
            float u = __shfl_down_sync(0xffffffffu, s, 2); // the up row of lane's gate row
            if (lane < live) d[n0 + lane] = s * sigmoidf_(s) * u;
        }
        __syncthreads(); // part is written again by the next block's warps
    }
}

// ---- GGML block formats (runtime/quant decodes the same bits on the CPU).
// A row of K weights is K/block blocks; a "unit" is 8 of its weights that
// one lane decodes: unit u yields values v[i] at columns k[i] of the row.
typedef unsigned char u8;

__device__ __forceinline__ float ld_f16(const u8* p) { return f16_to_f32((u16)p[0] | ((u16)p[1] << 8)); }

// byte_f is the low byte of u, as a float, less bias - 2^23: the byte put in
// the mantissa of 2^23, which is exact, and a subtraction, instead of an
// integer conversion. Q8_0 uses it; Q4_K and Q6_K measured slower with it
// (docs/cuda.md), so they convert.
__device__ __forceinline__ float byte_f(unsigned u, float bias) { return __uint_as_float(0x4B000000u | (u & 0xFFu)) - bias; }

// ld8_a2 loads the 8 bytes at p, which is 2-byte aligned (as GGML blocks
// are), as the aligned 8-byte words holding them, shifted: two loads, not
// four. It reads no byte outside those words, none past p + 7's.
__device__ __forceinline__ uint2 ld8_a2(const u8* p) {
    unsigned o = (unsigned)(unsigned long long)p & 7u;
    const uint2* a = (const uint2*)(p - o);
    uint2 lo = a[0];
    if (o == 0) return lo;
    uint2 hi = a[1];
    unsigned s = 8 * (o & 3), w0 = o < 4 ? lo.x : lo.y, w1 = o < 4 ? lo.y : hi.x, w2 = o < 4 ? hi.x : hi.y;
    uint2 r;
    r.x = s ? (w0 >> s) | (w1 << (32 - s)) : w0;
    r.y = s ? (w1 >> s) | (w2 << (32 - s)) : w1;
    return r;
}

// Q8_0: 34-byte blocks of 32: f16 scale, 32 int8. 4 units per block.
__device__ __forceinline__ void unit_q8_0(const u8* row, int u, float* v, int* k) {
    const u8* b = row + (u >> 2) * 34;
    float d = ld_f16(b);
    int part = u & 3, k0 = (u >> 2) * 32 + part * 8;
    const signed char* q = (const signed char*)(b + 2 + part * 8);
    for (int i = 0; i < 8; i++) {
        v[i] = d * (float)q[i];
        k[i] = k0 + i;
    }
}

// Q4_K: 144-byte super-blocks of 256: f16 d, f16 dmin, 12 bytes of 6-bit
// scales and mins for 8 sub-blocks of 32, then 128 bytes of nibbles (byte
// 32j + l: low nibble is sub-block 2j's weight l, high nibble 2j+1's).
// 32 units per super-block: unit l takes 4 low and 4 high nibbles.
__device__ __forceinline__ void scale_min_k4(int j, const u8* q, float* sc, float* m) {
    if (j < 4) {
        *sc = (float)(q[j] & 63);
        *m = (float)(q[j + 4] & 63);
    } else {
        *sc = (float)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}
__device__ __forceinline__ void unit_q4_k(const u8* row, int u, float* v, int* k) {
    const u8* b = row + (u >> 5) * 144;
    int l = u & 31, j = l >> 3, p = l & 7;
    float d = ld_f16(b), dmin = ld_f16(b + 2);
    float sa, ma, sb, mb;
    scale_min_k4(2 * j, b + 4, &sa, &ma);
    scale_min_k4(2 * j + 1, b + 4, &sb, &mb);
    const u8* q = b + 16 + 32 * j + 4 * p;
    int k0 = (u >> 5) * 256 + 64 * j + 4 * p;
    for (int i = 0; i < 4; i++) {
        v[i] = d * sa * (float)(q[i] & 0xF) - dmin * ma;
        k[i] = k0 + i;
        v[4 + i] = d * sb * (float)(q[i] >> 4) - dmin * mb;
        k[4 + i] = k0 + 32 + i;
    }
}

// Q6_K: 210-byte super-blocks of 256: ql[128] low nibbles, qh[64] high
// 2-bit pairs, int8 scales[16] (one per 16 weights), f16 d. Halves of 128:
// for l < 32, weights l, l+32, l+64, l+96 of half h come from ql[64h + l],
// ql[64h + l + 32] (low, high nibbles) and qh[32h + l] bits 0-7 in pairs.
// 32 units per super-block: unit l takes those 4 weights of both halves.
__device__ __forceinline__ void unit_q6_k(const u8* row, int u, float* v, int* k) {
    const u8* b = row + (u >> 5) * 210;
    int l = u & 31;
    float d = ld_f16(b + 208);
    const signed char* sc = (const signed char*)(b + 192);
    for (int h = 0; h < 2; h++) {
        const u8* ql = b + 64 * h;
        u8 qh = b[128 + 32 * h + l];
        int q1 = (int)((ql[l] & 0xF) | (((qh >> 0) & 3) << 4)) - 32;
        int q2 = (int)((ql[l + 32] & 0xF) | (((qh >> 2) & 3) << 4)) - 32;
        int q3 = (int)((ql[l] >> 4) | (((qh >> 4) & 3) << 4)) - 32;
        int q4 = (int)((ql[l + 32] >> 4) | (((qh >> 6) & 3) << 4)) - 32;
        const signed char* s = sc + 8 * h + (l >> 4);
        int k0 = (u >> 5) * 256 + 128 * h + l;
        v[4 * h + 0] = d * s[0] * q1;
        v[4 * h + 1] = d * s[2] * q2;
        v[4 * h + 2] = d * s[4] * q3;
        v[4 * h + 3] = d * s[6] * q4;
        k[4 * h + 0] = k0;
        k[4 * h + 1] = k0 + 32;
        k[4 * h + 2] = k0 + 64;
        k[4 * h + 3] = k0 + 96;
    }
}

// iq4nl_grid is the non-linear grid of IQ4_NL and IQ4_XS.
__constant__ signed char iq4nl_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// load8_more reads the 8 weights of columns k0..k0+7 (k0 % 8 == 0) of a row
// in the block types beyond Q8_0, Q4_K and Q6_K: 3 Q5_K, 4 Q4_0, 5 Q4_1,
// 6 Q5_0, 7 Q5_1, 8 IQ4_NL, 9 IQ4_XS, 13 Q2_K, 14 Q3_K. Byte loads: their
// blocks are as little as 2-byte aligned. Not inlined: in every kernel
// that reads weights it made NVRTC's compile of this file twice as long.
__device__ __noinline__ void load8_more(int type, const u8* row, int k0, float* v) {
    if (type == 3) { // Q5_K: Q4_K's layout with qh[32] before the nibbles; bit 2j+hi of qh[l] is the fifth bit
        const u8* b = row + (k0 >> 8) * 176;
        int c = k0 & 255, j = c >> 6, hi = (c >> 5) & 1, l = c & 31;
        float sc, m;
        scale_min_k4(2 * j + hi, b + 4, &sc, &m);
        float a = ld_f16(b) * sc, mm = ld_f16(b + 2) * m;
        const u8 *qh = b + 16 + l, *qs = b + 48 + 32 * j + l;
        for (int i = 0; i < 8; i++) {
            int q = (hi ? qs[i] >> 4 : qs[i] & 0xF) | (((qh[i] >> (2 * j + hi)) & 1) << 4);
            v[i] = a * (float)q - mm;
        }
    } else if (type >= 4 && type <= 8) { // blocks of 32: f16 d, [f16 min], [u32 fifth bits], 16 bytes of nibbles
        int bytes = type == 4 || type == 8 ? 18 : type == 5 ? 20 : type == 6 ? 22 : 24;
        int qoff = type == 4 || type == 8 ? 2 : type == 5 ? 4 : type == 6 ? 6 : 8;
        const u8* b = row + (k0 >> 5) * bytes;
        int c = k0 & 31, hi = c >> 4;
        float d = ld_f16(b), mn = type == 5 || type == 7 ? ld_f16(b + 2) : 0.f;
        unsigned qh = 0;
        if (type == 6 || type == 7) {
            const u8* h = b + (type == 6 ? 2 : 4);
            qh = (unsigned)h[0] | (unsigned)h[1] << 8 | (unsigned)h[2] << 16 | (unsigned)h[3] << 24;
        }
        const u8* q = b + qoff + (c & 15);
        for (int i = 0; i < 8; i++) {
            int n = hi ? q[i] >> 4 : q[i] & 0xF;
            if (type == 6 || type == 7) n |= ((qh >> (c + i)) & 1) << 4;
            v[i] = type == 4 ? d * (float)(n - 8) : type == 6 ? d * (float)(n - 16) : type == 8 ? d * (float)iq4nl_grid[n] : d * (float)n + mn;
        }
    } else if (type == 9) { // IQ4_XS: f16 d, u16 high scale bits, 4 bytes of low ones, 8 sub-blocks of 32 as IQ4_NL
        const u8* b = row + (k0 >> 8) * 136;
        int c = k0 & 255, ib = c >> 5, j = c & 31;
        int ls = ((b[4 + (ib >> 1)] >> (4 * (ib & 1))) & 0xF) | ((((unsigned)b[2] | (unsigned)b[3] << 8) >> (2 * ib)) & 3) << 4;
        float dl = ld_f16(b) * (float)(ls - 32);
        const u8* q = b + 8 + 16 * ib + (j & 15);
        for (int i = 0; i < 8; i++) v[i] = dl * (float)iq4nl_grid[j >= 16 ? q[i] >> 4 : q[i] & 0xF];
    } else { // 13 Q2_K, 14 Q3_K: 128-column halves n of 4 two-bit planes j over 32 bytes; a scale per 16 columns
        int c = k0 & 255, n = c >> 7, j = (c & 127) >> 5, r = c & 31, s = c >> 4;
        if (type == 13) { // scales[16] (scale | min << 4), qs[64], f16 d, f16 dmin
            const u8* b = row + (k0 >> 8) * 84;
            u8 sc = b[s];
            float a = ld_f16(b + 80) * (float)(sc & 0xF), mm = ld_f16(b + 82) * (float)(sc >> 4);
            for (int i = 0; i < 8; i++) v[i] = a * (float)((b[16 + 32 * n + r + i] >> (2 * j)) & 3) - mm;
        } else { // hmask[32], qs[64], 12 bytes of 6-bit scales, f16 d; quants L - 4 where the hmask bit is clear
            const u8* b = row + (k0 >> 8) * 110;
            const u8* S = b + 96;
            int g = s >> 2, bi = s & 3;
            int sc = (((g & 1 ? S[4 + bi] : S[bi]) >> (g & 2 ? 4 : 0)) & 0xF) | ((S[8 + bi] >> (2 * g)) & 3) << 4;
            float a = ld_f16(b + 108) * (float)(sc - 32);
            for (int i = 0; i < 8; i++) {
                int q = (b[32 + 32 * n + r + i] >> (2 * j)) & 3;
                if (!(b[r + i] & (1 << (4 * n + j)))) q -= 4;
                v[i] = a * (float)q;
            }
        }
    }
}

__device__ __forceinline__ void unit_q(int type, const u8* row, int u, float* v, int* k) {
    switch (type) {
    case 0: unit_q8_0(row, u, v, k); break;
    case 1: unit_q4_k(row, u, v, k); break;
    case 2: unit_q6_k(row, u, v, k); break;
    default: // the other types: unit u is columns 8u..8u+7
        load8_more(type, row, 8 * u, v);
        for (int i = 0; i < 8; i++) k[i] = 8 * u + i;
    }
}

// gemv_q: dst[m][n] = Σ_k x[m][k]·w[n][k] for up to 8 rows of f32 x and a
// quantized weight (type 0 Q8_0, 1 Q4_K, 2 Q6_K, or one of load8_more's),
// one warp per weight row of rowBytes bytes, each lane decoding units of 8
// weights.
__global__ void gemv_q(float* d, i64 sd, const float* x, i64 sx, const u8* w, i64 rowBytes, int M, int N, int K, int type) {
    int n = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (n < N) prefetch_l2((const char*)w + (i64)n * rowBytes, (int)rowBytes, lane);
    DEPEND();
    if (n >= N) return;
    const u8* wr = w + (i64)n * rowBytes;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    int units = K / 8;
    for (int u = lane; u < units; u += 32) {
        float v[8];
        int k[8];
        unit_q(type, wr, u, v, k);
        for (int m = 0; m < 8; m++) {
            if (m >= M) break;
            const float* xr = x + m * sx;
            float a = 0.f;
            for (int i = 0; i < 8; i++) a += v[i] * xr[k[i]];
            acc[m] += a;
        }
    }
    for (int m = 0; m < 8; m++) {
        if (m >= M) break;
        float v = warp_sum(acc[m]);
        if (lane == 0) d[m * sd + n] = v;
    }
}

// dequant_q_bf16: rows of a quantized weight to bf16 [rows, K] (for cuBLAS
// when many rows of x share the weight); one thread per unit.
__global__ void dequant_q_bf16(u16* d, const u8* w, i64 rowBytes, int rows, int K, int type) {
    DEPEND();
    i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x, units = K / 8;
    if (t >= (i64)rows * units) return;
    i64 r = t / units;
    float v[8];
    int k[8];
    unit_q(type, w + r * rowBytes, (int)(t % units), v, k);
    for (int i = 0; i < 8; i++) d[r * K + k[i]] = f32_to_bf16(v[i]);
}

// embed_q: rows ids of a quantized table to f32; one block per id.
__global__ void embed_q(float* d, i64 sd, const u8* t, i64 rowBytes, const int* ids, int K, int type) {
    DEPEND();
    const u8* row = t + (i64)ids[blockIdx.x] * rowBytes;
    float* out = d + (i64)blockIdx.x * sd;
    for (int u = threadIdx.x; u < K / 8; u += blockDim.x) {
        float v[8];
        int k[8];
        unit_q(type, row, u, v, k);
        for (int i = 0; i < 8; i++) out[k[i]] = v[i];
    }
}

// kv_write_f32: row i of x (width floats) to cache row slots[i].
__global__ void kv_write_f32(float* cache, const float* x, i64 sx, const int* slots, int width) {
    DEPEND();
    i64 r = blockIdx.x, dst = (i64)slots[r] * width;
    for (int i = threadIdx.x; i < width; i += blockDim.x) cache[dst + i] = x[r * sx + i];
}

// conv1d_causal_f32: a block of 32 channels; its blockDim.x/32 warps take
// every nt-th token (outputs depend on inputs only), then, once all have
// read the state, warp 0 advances it. x [T, C] (stride sx), w [C, K],
// state [K-1, C] holds the K-1 inputs before x and is advanced past x.
// With slots, blockIdx.y is a sequence of one token (row y of x and d)
// whose state is state + slots[y]·(K-1)·C. With silu, d is silu of the sum.
__global__ void conv1d_causal_f32(float* d, i64 sd, const float* x, i64 sx, const float* w, float* state, const int* slots,
                                  int T, int C, int K, int silu) {
    DEPEND();
    int c = blockIdx.x * 32 + (threadIdx.x & 31), tw = threadIdx.x >> 5, nt = blockDim.x >> 5;
    bool live = c < C;
    if (slots) {
        int y = blockIdx.y;
        d += (i64)y * sd;
        x += (i64)y * sx;
        state += (i64)slots[y] * (K - 1) * C;
    }
    float wc[17];
    for (int j = 0; j < K; j++) wc[j] = live ? w[(i64)c * K + j] : 0.f;
    for (int t = tw; live && t < T; t += nt) {
        float acc = 0.f;
        for (int j = 0; j < K; j++) {
            int i = t + j; // row of state ++ x
            float in = i < K - 1 ? state[(i64)i * C + c] : x[(i64)(i - (K - 1)) * sx + c];
            acc += wc[j] * in;
        }
        d[(i64)t * sd + c] = silu ? acc * sigmoidf_(acc) : acc;
    }
    __syncthreads(); // every read of the old state is done
    if (!live || tw != 0) return;
    float next[16];
    for (int r = 0; r < K - 1; r++) {
        int i = T + r;
        next[r] = i < K - 1 ? state[(i64)i * C + c] : x[(i64)(i - (K - 1)) * sx + c];
    }
    for (int r = 0; r < K - 1; r++) state[(i64)r * C + c] = next[r];
}

// delta_rule_f32: the gated delta rule, token by token: e = exp(g),
// δ = β(v − e·Sᵀk), S ← e·S + k⊗δ, out = e·Sᵀq' + (k·q')δ, per value head
// with state S [dk][dv]. A block of 128 threads takes 128/lanes columns of
// one value head's S (blockIdx.x is head × column group); each column is
// held in the registers of `lanes` adjacent lanes for the whole sequence:
// lane p holds the rows 4·lanes·m + 4p + (0..3), so that it reads k and q'
// as float4s and a column's lanes read contiguous bytes. 8 lanes (dk % 32
// == 0) give twice the blocks of 4 and half the serial work a token: the
// rule is bound by that latency, not by bandwidth.
// Tokens come DR_CHUNK at a time: their q', k, v columns, e and β are
// staged in shared memory with one barrier, and the tokens between two
// barriers need none (k·q' is summed by the column's lanes). q, k are
// [T, hk, dk] with token and head strides (sq, sq1), (sk, sk1); v, out
// [T, hv, dv] likewise; g, beta rows per token. With slots, blockIdx.y is a
// sequence of one token (row y) whose state is state + slots[y]·hv·dk·dv.
// Needs dk % (4·lanes) == 0, dk ≤ 128, blockDim.x == 128.
// With norm (delta_rule_qknorm_f32), q and k rows are L2-normalised (eps
// under the root) as they are staged, a warp per row.
#define DR_CHUNK 16
__device__ __forceinline__ void delta_rule(bool norm, int lanes, float* out, i64 so, i64 so1, const float* q, i64 sq, i64 sq1, const float* k,
                                           i64 sk, i64 sk1, const float* v, i64 sv, i64 sv1, const float* g, i64 sg,
                                           const float* beta, i64 sb, float* state, const int* slots, int T, int hk, int hv,
                                           int dk, int dv, int tiled, float qkeps, const float* alog, const float* dtb) {
    DYNAMIC_SHARED(float4, dr_shared4); // q'[DR_CHUNK][dk], k[DR_CHUNK][dk], v[DR_CHUNK][cols], e[DR_CHUNK], β[DR_CHUNK]
    int cols = 128 / lanes;
    float* qs = (float*)dr_shared4;
    float* ks = qs + DR_CHUNK * dk;
    float* vs = ks + DR_CHUNK * dk;
    float* es = vs + DR_CHUNK * cols;
    float* bs = es + DR_CHUNK;
    int groups = (dv + cols - 1) / cols;
    int h = blockIdx.x / groups, kh = tiled ? h % hk : h / (hv / hk);
    int part = threadIdx.x % lanes, col = threadIdx.x / lanes, j0 = (blockIdx.x % groups) * cols, j = j0 + col;
    int M = dk / (4 * lanes); // float4s of a column a lane holds
    bool live = j < dv;
    float scale = rsqrtf((float)dk);
    i64 row0 = 0;
    if (slots) {
        row0 = blockIdx.y;
        state += (i64)slots[blockIdx.y] * hv * dk * dv;
    }
    float* S = state + (i64)h * dk * dv;
    float Sr[32]; // Sr[4m + e] is row 4·lanes·m + 4·part + e
#pragma unroll
    for (int i = 0; i < 32; i++)
        if (i / 4 < M) Sr[i] = live ? S[(i64)(4 * lanes * (i / 4) + 4 * part + i % 4) * dv + j] : 0.f;
    for (int t0 = 0; t0 < T; t0 += DR_CHUNK) {
        int n = min(DR_CHUNK, T - t0);
        __syncthreads(); // the chunk before is consumed
        for (int x = threadIdx.x; x < n * dk; x += blockDim.x) {
            int tt = x / dk, i = x - tt * dk;
            i64 r = row0 + t0 + tt;
            float qv = q[r * sq + kh * sq1 + i];
            qs[x] = norm ? qv : qv * scale;
            ks[x] = k[r * sk + kh * sk1 + i];
        }
        for (int x = threadIdx.x; x < n * cols; x += blockDim.x) {
            int tt = x / cols, c = j0 + x % cols;
            vs[x] = c < dv ? v[(row0 + t0 + tt) * sv + h * sv1 + c] : 0.f;
        }
        if (threadIdx.x < n) {
            i64 r = row0 + t0 + threadIdx.x;
            float gv = g[r * sg + h], bv = beta[r * sb + h];
            if (alog) gdn_gate(&gv, &bv, alog[h], dtb[h]); // g and beta are the raw a and b
            es[threadIdx.x] = expf(gv);
            bs[threadIdx.x] = bv;
        }
        if (norm) {
            __syncthreads();
            int lane = threadIdx.x & 31;
            for (int tt = threadIdx.x >> 5; tt < n; tt += blockDim.x >> 5) {
                float* qr = qs + tt * dk;
                float* kr = ks + tt * dk;
                float qq = 0.f, kk = 0.f;
                for (int i = lane; i < dk; i += 32) {
                    qq += qr[i] * qr[i];
                    kk += kr[i] * kr[i];
                }
                float qn = scale * rsqrtf(warp_sum(qq) + qkeps), kn = rsqrtf(warp_sum(kk) + qkeps);
                for (int i = lane; i < dk; i += 32) {
                    qr[i] *= qn;
                    kr[i] *= kn;
                }
            }
        }
        __syncthreads();
        for (int tt = 0; tt < n; tt++) {
            const float4* qt = (const float4*)(qs + tt * dk) + part;
            const float4* kt = (const float4*)(ks + tt * dk) + part;
            float skj = 0.f, sqj = 0.f, kq = 0.f;
            float4 kr[8];
#pragma unroll
            for (int m = 0; m < 8; m++)
                if (m < M) {
                    float4 k4 = kt[lanes * m], q4 = qt[lanes * m];
                    kr[m] = k4;
                    skj += Sr[4 * m] * k4.x + Sr[4 * m + 1] * k4.y + Sr[4 * m + 2] * k4.z + Sr[4 * m + 3] * k4.w;
                    sqj += Sr[4 * m] * q4.x + Sr[4 * m + 1] * q4.y + Sr[4 * m + 2] * q4.z + Sr[4 * m + 3] * q4.w;
                    kq += k4.x * q4.x + k4.y * q4.y + k4.z * q4.z + k4.w * q4.w;
                }
#pragma unroll
            for (int o = 1; o < lanes; o <<= 1) {
                skj += __shfl_xor_sync(0xffffffffu, skj, o);
                sqj += __shfl_xor_sync(0xffffffffu, sqj, o);
                kq += __shfl_xor_sync(0xffffffffu, kq, o);
            }
            float e = es[tt];
            float delta = bs[tt] * (vs[tt * cols + col] - e * skj); // 0 in a dead column: its S and v are 0
#pragma unroll
            for (int m = 0; m < 8; m++)
                if (m < M) {
                    Sr[4 * m] = e * Sr[4 * m] + kr[m].x * delta;
                    Sr[4 * m + 1] = e * Sr[4 * m + 1] + kr[m].y * delta;
                    Sr[4 * m + 2] = e * Sr[4 * m + 2] + kr[m].z * delta;
                    Sr[4 * m + 3] = e * Sr[4 * m + 3] + kr[m].w * delta;
                }
            if (live && part == 0) out[(row0 + t0 + tt) * so + h * so1 + j] = e * sqj + kq * delta;
        }
    }
#pragma unroll
    for (int i = 0; i < 32; i++)
        if (i / 4 < M && live) S[(i64)(4 * lanes * (i / 4) + 4 * part + i % 4) * dv + j] = Sr[i];
}

#define DELTA_RULE_PARAMS                                                                                            \
    float *out, i64 so, i64 so1, const float *q, i64 sq, i64 sq1, const float *k, i64 sk, i64 sk1, const float *v,    \
        i64 sv, i64 sv1, const float *g, i64 sg, const float *beta, i64 sb, float *state, const int *slots, int T, int hk, \
        int hv, int dk, int dv, int tiled, float qkeps, const float *alog, const float *dtb
#define DELTA_RULE_ARGS \
    out, so, so1, q, sq, sq1, k, sk, sk1, v, sv, sv1, g, sg, beta, sb, state, slots, T, hk, hv, dk, dv, tiled, qkeps, alog, dtb

__global__ void delta_rule_f32(DELTA_RULE_PARAMS) {
    DEPEND();
    delta_rule(false, 8, DELTA_RULE_ARGS);
}

__global__ void delta_rule_qknorm_f32(DELTA_RULE_PARAMS) {
    DEPEND();
    delta_rule(true, 8, DELTA_RULE_ARGS);
}

// The same with 4 lanes a column: decode steps, and dk % 32 != 0.
__global__ void delta_rule_narrow_f32(DELTA_RULE_PARAMS) {
    DEPEND();
    delta_rule(false, 4, DELTA_RULE_ARGS);
}

__global__ void delta_rule_narrow_qknorm_f32(DELTA_RULE_PARAMS) {
    DEPEND();
    delta_rule(true, 4, DELTA_RULE_ARGS);
}

// conv_step: one channel c of a decode step's causal conv with SiLU: the
// K-1 inputs before x in state [K-1, C], then x; advances the state. Up to
// CONV_REGS - 1 inputs are read into registers before the state is
// written, so that the reads are in flight together (the writes may alias
// them, so the compiler would otherwise wait for each read in turn).
#define CONV_REGS 8
__device__ __forceinline__ float conv_step(const float* x, float* st, const float* w, int c, int C, int K) {
    float acc = 0.f, xc = x[c];
    if (K <= CONV_REGS) {
        float in[CONV_REGS - 1], wr[CONV_REGS];
#pragma unroll
        for (int j = 0; j < CONV_REGS; j++) {
            if (j < K - 1) in[j] = st[(i64)j * C + c];
            if (j < K) wr[j] = w[(i64)c * K + j];
        }
#pragma unroll
        for (int j = 0; j < CONV_REGS - 1; j++)
            if (j < K - 1) acc += wr[j] * in[j];
        acc += wr[K - 1] * xc;
#pragma unroll
        for (int r = 0; r < CONV_REGS - 1; r++)
            if (r < K - 2) st[(i64)r * C + c] = in[r + 1];
    } else {
        for (int j = 0; j < K - 1; j++) acc += w[(i64)c * K + j] * st[(i64)j * C + c];
        acc += w[(i64)c * K + K - 1] * xc;
        for (int r = 0; r < K - 2; r++) st[(i64)r * C + c] = st[(i64)(r + 1) * C + c];
    }
    if (K > 1) st[(i64)(K - 2) * C + c] = xc;
    return acc * sigmoidf_(acc);
}

// dn_head_loads reads what deltanet_step needs of value head h for its
// thread (lane part of column j): its 32 state values, z and the raw gates.
// Issued before the conv of q and k, so that they are in flight with it.
__device__ __forceinline__ void dn_head_loads(float* Sr, float* zz, float* ga, float* gb, const float* S, int dv, int j,
                                              int part, int M, bool live, const float* zrow, const float* a, const float* b, int h) {
#pragma unroll
    for (int m = 0; m < 8; m++)
        if (m < M) {
#pragma unroll
            for (int e = 0; e < 4; e++) Sr[4 * m + e] = live ? S[(i64)(16 * m + 4 * part + e) * dv + j] : 0.f;
        }
    *zz = live ? zrow[j] : 0.f;
    *ga = a[h];
    *gb = b[h];
}

// deltanet_step_f32: a decode step of a Gated DeltaNet block (one token a
// sequence), the chain conv1d_causal (SiLU), delta_rule_qknorm (gating a
// and b) and the gated rms_norm in one launch. A block takes key head
// blockIdx.x of sequence blockIdx.y and every value head that reads it, so
// that it alone reads and advances the conv state of the head's q and k
// channels (other blocks need them in no order that a grid could keep).
// Its threads are 4 lanes for each of dv columns (blockDim.x = 4·dv
// rounded up to a warp's 8 columns); lane p of column j holds rows 16m +
// 4p + (0..3) of S[:, j], as delta_rule with 4 lanes does. The head's
// output is normalised over its dv columns (a block sum) and gated by
// silu(z). The first value head's state, z and gates are read before the
// conv, so that a step waits for memory about once, not at each stage
// (their 34 registers need the bound of 512 threads). Needs dk % 16 == 0,
// dk <= 128, dv <= 256.
__global__ void __launch_bounds__(512) deltanet_step_f32(float* out, i64 so, i64 so1, const float* qkv, i64 sx, const float* z, i64 sz, i64 sz1,
                                  const float* a, i64 sa, const float* b, i64 sb, const float* convw, float* conv_state,
                                  float* rec_state, const int* slots, int hk, int hv, int dk, int dv, int K, int tiled,
                                  float qkeps, const float* alog, const float* dtb, const float* normw, float normeps) {
    DEPEND();
    __shared__ float4 qs4[32], ks4[32];
    __shared__ float vs[256];
    float* qs = (float*)qs4;
    float* ks = (float*)ks4;
    int kh = blockIdx.x, y = blockIdx.y, C = 2 * hk * dk + hv * dv, tid = threadIdx.x, nt = blockDim.x;
    i64 slot = slots[y];
    const float* x = qkv + (i64)y * sx;
    float* cs = conv_state + slot * (K - 1) * C;
    int part = tid & 3, j = tid >> 2, M = dk / 16, ratio = hv / hk;
    bool live = j < dv;
    const float *ay = a + (i64)y * sa, *by = b + (i64)y * sb;
    float Sr[32], zz, ga, gb;
    int h = tiled ? kh : kh * ratio; // value head r = 0
    dn_head_loads(Sr, &zz, &ga, &gb, rec_state + (slot * hv + h) * dk * dv, dv, j, part, M, live, z + (i64)y * sz + (i64)h * sz1, ay, by, h);
    for (int i = tid; i < 2 * dk; i += nt) {
        int c = i < dk ? kh * dk + i : (hk + kh) * dk + i - dk;
        float v = conv_step(x, cs, convw, c, C, K);
        if (i < dk) qs[i] = v;
        else ks[i - dk] = v;
    }
    __syncthreads();
    float qq = 0.f, kk = 0.f;
    for (int i = tid; i < dk; i += nt) {
        qq += qs[i] * qs[i];
        kk += ks[i] * ks[i];
    }
    qq = block_sum(qq);
    kk = block_sum(kk); // its barriers order the reads above before the writes below
    float qn = rsqrtf((float)dk) * rsqrtf(qq + qkeps), kn = rsqrtf(kk + qkeps);
    for (int i = tid; i < dk; i += nt) {
        qs[i] *= qn;
        ks[i] *= kn;
    }
    for (int r = 0; r < ratio; r++) {
        h = tiled ? kh + r * hk : kh * ratio + r;
        float* S = rec_state + (slot * hv + h) * dk * dv;
        if (r > 0) dn_head_loads(Sr, &zz, &ga, &gb, S, dv, j, part, M, live, z + (i64)y * sz + (i64)h * sz1, ay, by, h);
        for (int i = tid; i < dv; i += nt) vs[i] = conv_step(x, cs, convw, 2 * hk * dk + h * dv + i, C, K);
        gdn_gate(&ga, &gb, alog[h], dtb[h]);
        float e = expf(ga);
        __syncthreads(); // q, k and v are staged
        float skj = 0.f, sqj = 0.f, kq = 0.f;
        float4 kr[8];
#pragma unroll
        for (int m = 0; m < 8; m++)
            if (m < M) {
                float4 k4 = ks4[4 * m + part], q4 = qs4[4 * m + part];
                kr[m] = k4;
                skj += Sr[4 * m] * k4.x + Sr[4 * m + 1] * k4.y + Sr[4 * m + 2] * k4.z + Sr[4 * m + 3] * k4.w;
                sqj += Sr[4 * m] * q4.x + Sr[4 * m + 1] * q4.y + Sr[4 * m + 2] * q4.z + Sr[4 * m + 3] * q4.w;
                kq += k4.x * q4.x + k4.y * q4.y + k4.z * q4.z + k4.w * q4.w;
            }
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) {
            skj += __shfl_xor_sync(0xffffffffu, skj, o);
            sqj += __shfl_xor_sync(0xffffffffu, sqj, o);
            kq += __shfl_xor_sync(0xffffffffu, kq, o);
        }
        float delta = gb * ((live ? vs[j] : 0.f) - e * skj);
#pragma unroll
        for (int m = 0; m < 8; m++)
            if (m < M && live) {
                S[(i64)(16 * m + 4 * part) * dv + j] = e * Sr[4 * m] + kr[m].x * delta;
                S[(i64)(16 * m + 4 * part + 1) * dv + j] = e * Sr[4 * m + 1] + kr[m].y * delta;
                S[(i64)(16 * m + 4 * part + 2) * dv + j] = e * Sr[4 * m + 2] + kr[m].z * delta;
                S[(i64)(16 * m + 4 * part + 3) * dv + j] = e * Sr[4 * m + 3] + kr[m].w * delta;
            }
        float o = e * sqj + kq * delta;
        float ss = block_sum(live && part == 0 ? o * o : 0.f);
        if (live && part == 0)
            out[(i64)y * so + (i64)h * so1 + j] = o * rsqrtf(ss / dv + normeps) * normw[j] * (zz * sigmoidf_(zz));
        __syncthreads(); // vs is staged again for the next head
    }
}

// attention_tile_f32: attention_f32 for prompts. A block of 4 warps takes
// up to AT_ROWS consecutive query rows of one sequence and one head, so
// that each key and value row is read once for all of them: tiles of
// AT_KEYS keys are staged in shared memory, a lane scores one key against
// its warp's 4 rows, and the warp adds the tile's values into the rows'
// accumulators (lane i the dims i, i+32, ...) with an online softmax.
// tiles[4t..4t+3] = first row, its position, rows, offset of the
// sequence's block table in tabs. dim % 4 == 0, dim ≤ 256.
#define AT_ROWS 16
#define AT_KEYS 32
__global__ void attention_tile_f32(float* dst, i64 sdst, const float* q, i64 sq, const float* kc, const float* vc,
                                   const int* tiles, const int* tabs, int hq, int hkv, int dim, int bsize, float scale) {
    DEPEND();
    DYNAMIC_SHARED(float4, shared4);
    int tile = blockIdx.x / hq, h = blockIdx.x % hq, kh = h / (hq / hkv);
    int r0 = tiles[4 * tile], pos0 = tiles[4 * tile + 1], nq = tiles[4 * tile + 2];
    const int* tab = tabs + tiles[4 * tile + 3];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int ks = dim + 4; // a key row's stride: lanes reading different keys hit distinct banks
    float* Qs = (float*)shared4;      // [AT_ROWS][dim], scaled
    float* Ks = Qs + AT_ROWS * dim;   // [AT_KEYS][ks]
    float* Vs = Ks + AT_KEYS * ks;    // [AT_KEYS][dim]
    float* Ps = Vs + AT_KEYS * dim;   // [warp][AT_KEYS][4]: the tile's weights of the warp's rows
    for (int x = threadIdx.x; x < AT_ROWS * dim; x += blockDim.x) {
        int rr = x / dim, i = x - rr * dim;
        Qs[x] = rr < nq ? q[((i64)(r0 + rr) * hq + h) * sq + i] * scale : 0.f;
    }
    int per = (dim + 31) / 32, rb = 4 * w, nkeys = pos0 + nq;
    int pos[4];
    float m[4], l[4], acc[4][8];
#pragma unroll
    for (int rr = 0; rr < 4; rr++) {
        pos[rr] = rb + rr < nq ? pos0 + rb + rr : -1;
        m[rr] = NEG_INF;
        l[rr] = 0.f;
#pragma unroll
        for (int c = 0; c < 8; c++) acc[rr][c] = 0.f;
    }
    i64 width = (i64)hkv * dim;
    for (int k0 = 0; k0 < nkeys; k0 += AT_KEYS) {
        __syncthreads(); // Q is staged; the tile before is consumed
        for (int kk = w; kk < AT_KEYS; kk += nw) {
            int p = k0 + kk;
            i64 row = p < nkeys ? ((i64)tab[p / bsize] * bsize + p % bsize) * width + (i64)kh * dim : -1;
            for (int i = lane; i < dim; i += 32) {
                Ks[kk * ks + i] = row >= 0 ? kc[row + i] : 0.f;
                Vs[kk * dim + i] = row >= 0 ? vc[row + i] : 0.f;
            }
        }
        __syncthreads();
        float sc[4] = {0.f, 0.f, 0.f, 0.f};
        const float* kr = Ks + lane * ks;
        for (int i = 0; i < dim; i += 4) {
            float4 k4 = *(const float4*)(kr + i);
#pragma unroll
            for (int rr = 0; rr < 4; rr++) {
                float4 q4 = *(const float4*)(Qs + (rb + rr) * dim + i);
                sc[rr] += q4.x * k4.x + q4.y * k4.y + q4.z * k4.z + q4.w * k4.w;
            }
        }
        int p = k0 + lane;
        float pw[4];
#pragma unroll
        for (int rr = 0; rr < 4; rr++) {
            float sv = p <= pos[rr] ? sc[rr] : NEG_INF;
            float mn = fmaxf(m[rr], warp_max(sv));
            float corr = mn == NEG_INF ? 1.f : expf(m[rr] - mn);
            pw[rr] = sv == NEG_INF ? 0.f : expf(sv - mn);
            l[rr] = l[rr] * corr + pw[rr];
            m[rr] = mn;
#pragma unroll
            for (int c = 0; c < 8; c++) acc[rr][c] *= corr;
        }
        *(float4*)(Ps + (w * AT_KEYS + lane) * 4) = make_float4(pw[0], pw[1], pw[2], pw[3]);
        __syncwarp();
        for (int j = 0; j < AT_KEYS; j++) {
            float4 pj = *(const float4*)(Ps + (w * AT_KEYS + j) * 4);
            const float* vr = Vs + j * dim;
#pragma unroll
            for (int c = 0; c < 8; c++) {
                int i = lane + 32 * c;
                if (c < per && i < dim) {
                    float vv = vr[i];
                    acc[0][c] += pj.x * vv;
                    acc[1][c] += pj.y * vv;
                    acc[2][c] += pj.z * vv;
                    acc[3][c] += pj.w * vv;
                }
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < 4; rr++) {
        float L = warp_sum(l[rr]);
        if (rb + rr >= nq) continue;
        float* o = dst + ((i64)(r0 + rb + rr) * hq + h) * sdst;
#pragma unroll
        for (int c = 0; c < 8; c++) {
            int i = lane + 32 * c;
            if (c < per && i < dim) o[i] = acc[rr][c] / L;
        }
    }
}

// attention_f32: causal grouped-query attention over a paged cache, one
// block per (query row, head), each warp taking every nw-th key with an
// online softmax, merged at the end. rowpos[r] is the position of query row
// r, rowtab[r] the offset of its sequence's block table in tabs. dim ≤ 256.
__global__ void attention_f32(float* dst, i64 sdst, const float* q, i64 sq, const float* kc, const float* vc,
                              const int* rowpos, const int* rowtab, const int* tabs, int hq, int hkv, int dim,
                              int bsize, float scale) {
    DEPEND();
    int r = blockIdx.x / hq, h = blockIdx.x % hq, kh = h / (hq / hkv);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const float* qr = q + ((i64)r * hq + h) * sq;
    const int* tab = tabs + rowtab[r];
    int n = rowpos[r] + 1, per = (dim + 31) / 32;
    float qv[8], acc[8];
    for (int c = 0; c < per; c++) {
        int i = lane + 32 * c;
        qv[c] = i < dim ? qr[i] * scale : 0.f;
        acc[c] = 0.f;
    }
    float m = NEG_INF, l = 0.f;
    i64 width = (i64)hkv * dim;
    for (int p = w; p < n; p += nw) {
        i64 row = ((i64)tab[p / bsize] * bsize + p % bsize) * width + (i64)kh * dim;
        float s = 0.f;
        for (int c = 0; c < per; c++) {
            int i = lane + 32 * c;
            if (i < dim) s += qv[c] * kc[row + i];
        }
        s = warp_sum(s);
        float mn = fmaxf(m, s), corr = expf(m - mn), pw = expf(s - mn);
        l = l * corr + pw;
        for (int c = 0; c < per; c++) {
            int i = lane + 32 * c;
            acc[c] = acc[c] * corr + (i < dim ? pw * vc[row + i] : 0.f);
        }
        m = mn;
    }
    __shared__ float sm[32], sl[32], sacc[32 * 256];
    if (lane == 0) {
        sm[w] = m;
        sl[w] = l;
    }
    for (int c = 0; c < per; c++) {
        int i = lane + 32 * c;
        if (i < dim) sacc[w * dim + i] = acc[c];
    }
    __syncthreads();
    float M = NEG_INF;
    for (int j = 0; j < nw; j++) M = fmaxf(M, sm[j]);
    float L = 0.f;
    for (int j = 0; j < nw; j++) L += sm[j] == NEG_INF ? 0.f : sl[j] * expf(sm[j] - M);
    float* o = dst + ((i64)r * hq + h) * sdst;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float s = 0.f;
        for (int j = 0; j < nw; j++)
            if (sm[j] != NEG_INF) s += sacc[j * dim + i] * expf(sm[j] - M);
        o[i] = s / L;
    }
}

// gather_rows_f32: dst row i ← x row rows[i].
__global__ void gather_rows_f32(float* d, i64 sd, const float* x, i64 sx, const int* rows, int cols) {
    DEPEND();
    i64 r = blockIdx.x, src = rows[r];
    for (int i = threadIdx.x; i < cols; i += blockDim.x) d[r * sd + i] = x[src * sx + i];
}

// argmax_key orders (value, index) so that the larger key has the larger
// value, and of equal values the lower index; NaN is below every number.
__device__ __forceinline__ unsigned long long argmax_key(float v, int i) {
    unsigned b = __float_as_uint(v);
    unsigned o = v != v ? 0u : (b & 0x80000000u) ? ~b : b | 0x80000000u;
    return ((unsigned long long)o << 32) | (unsigned)~i;
}

__device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long k) {
    for (int o = 16; o > 0; o >>= 1) {
        unsigned long long t = __shfl_xor_sync(0xffffffffu, k, o);
        k = t > k ? t : k;
    }
    return k;
}

// argmax_part_f32: block (c, r) writes the largest key of row r's
// columns [c·chunk, (c+1)·chunk) to part[r·gridDim.x + c]; blocks of 256.
// Many blocks a row, so that one row (a batch-1 step) is read at the
// bandwidth of many SMs.
__global__ void argmax_part_f32(unsigned long long* part, const float* x, i64 sx, int cols, int chunk) {
    DEPEND();
    __shared__ unsigned long long wk[8];
    const float* row = x + (i64)blockIdx.y * sx;
    int c0 = blockIdx.x * chunk, c1 = min(cols, c0 + chunk);
    unsigned long long k = 0;
    for (int i = c0 + threadIdx.x; i < c1; i += blockDim.x) {
        unsigned long long t = argmax_key(row[i], i);
        k = t > k ? t : k;
    }
    k = warp_max_u64(k);
    if ((threadIdx.x & 31) == 0) wk[threadIdx.x >> 5] = k;
    __syncthreads();
    if (threadIdx.x < 32) {
        k = threadIdx.x < (blockDim.x >> 5) ? wk[threadIdx.x] : 0;
        k = warp_max_u64(k);
        if (threadIdx.x == 0) part[(i64)blockIdx.y * gridDim.x + blockIdx.x] = k;
    }
}

// argmax_final: a warp per row reduces the row's parts to its index.
__global__ void argmax_final(int* ids, const unsigned long long* part, int parts) {
    DEPEND();
    unsigned long long k = 0;
    for (int i = threadIdx.x; i < parts; i += 32) {
        unsigned long long t = part[(i64)blockIdx.x * parts + i];
        k = t > k ? t : k;
    }
    k = warp_max_u64(k);
    if (threadIdx.x == 0) ids[blockIdx.x] = (int)~(unsigned)(k & 0xffffffffu);
}

// router_topk_f32: per row of logits [T, E], a softmax (exponentials and
// the sum in double, as on the CPU), the k largest probabilities (ties to
// the lower index) renormalised. One warp per row, E ≤ 1024 in shared
// memory; each pick is a warp reduction, not a pass of one thread.
__global__ void router_topk_f32(int* ids, float* weights, const float* lg, i64 sl, int experts, int k) {
    DEPEND();
    __shared__ float p[1024];
    const float* l = lg + (i64)blockIdx.x * sl;
    int lane = threadIdx.x;
    float mx = NEG_INF;
    for (int i = lane; i < experts; i += 32) mx = fmaxf(mx, l[i]);
    mx = warp_max(mx);
    double sum = 0;
    for (int i = lane; i < experts; i += 32) {
        p[i] = (float)exp((double)(l[i] - mx));
        sum += (double)p[i];
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    for (int i = lane; i < experts; i += 32) p[i] = (float)((double)p[i] / sum);
    __syncwarp();
    float tot = 0.f, mine = 0.f;
    int myid = 0;
    for (int j = 0; j < k; j++) {
        float bv = -1.f;
        int bi = -1;
        for (int i = lane; i < experts; i += 32)
            if (p[i] > bv) bv = p[i], bi = i;
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi >= 0 && (bi < 0 || oi < bi))) bv = ov, bi = oi;
        }
        tot += bv;
        if (lane == j) mine = bv, myid = bi;
        if (lane == 0) p[bi] = -1.f;
        __syncwarp();
    }
    if (lane < k) {
        ids[(i64)blockIdx.x * k + lane] = myid;
        weights[(i64)blockIdx.x * k + lane] = mine / tot;
    }
}

// ---- Routed experts (moe_experts). Weights are given per expert as
// tables of row-0 addresses, each role (gate, up, down) with one type: 0
// Q8_0, 1 Q4_K, 2 Q6_K, load8_more's 3-9, 13, 14, 10 bf16, 11 f16, 12 f32.

} // extern "C": the templates below have C++ linkage

// load8_t reads 8 consecutive weights of a row from column k0 (k0 % 8 == 0).
// TYPE MORE reads load8_more's types, the type given at run time: one
// instance of the kernels' templates for all of them, not one each
// (NVRTC's compile of this file took three times as long with one each;
// now ~1.3 times what it took without them).
#define MORE 99
template <int TYPE>
__device__ __forceinline__ void load8_t(const u8* row, int k0, float* v, int type = TYPE) {
    if (TYPE == 0) { // 34-byte blocks of 32: f16 scale, 32 int8 (flipped by 128 into the bytes byte_f reads)
        const u8* b = row + (k0 >> 5) * 34;
        float d = ld_f16(b);
        uint2 q = ld8_a2(b + 2 + (k0 & 31));
        unsigned w[2] = {q.x ^ 0x80808080u, q.y ^ 0x80808080u};
        for (int i = 0; i < 8; i++) v[i] = d * byte_f(w[i >> 2] >> (8 * (i & 3)), 8388608.f + 128.f);
    } else if (TYPE == 1) { // Q4_K: column c of 64j..64j+31 is byte 32j + c%32's low nibble, of 64j+32.. its high
        const u8* b = row + (k0 >> 8) * 144;
        int c = k0 & 255, j = c >> 6, hi = (c >> 5) & 1;
        float sc, m;
        scale_min_k4(2 * j + hi, b + 4, &sc, &m);
        float a = ld_f16(b) * sc, mm = ld_f16(b + 2) * m;
        uint2 q2 = *(const uint2*)(b + 16 + 32 * j + (c & 31));
        unsigned q[2] = {q2.x, q2.y};
        for (int i = 0; i < 8; i++) {
            unsigned byte = (q[i >> 2] >> (8 * (i & 3))) & 0xFF;
            v[i] = a * (float)(hi ? byte >> 4 : byte & 0xF) - mm;
        }
    } else if (TYPE == 2) { // Q6_K: quarter qd of half h: ql low/high nibbles (+32 for odd qd), qh bits 2qd..2qd+1
        const u8* b = row + (k0 >> 8) * 210;
        int c = k0 & 255, h = c >> 7, qd = (c >> 5) & 3, l = c & 31;
        float s = ld_f16(b + 208) * (float)((const signed char*)(b + 192))[8 * h + (l >> 4) + 2 * qd];
        const u16* ql = (const u16*)(b + 64 * h + 32 * (qd & 1) + l); // 2-byte words: blocks are 2-aligned
        const u16* qh = (const u16*)(b + 128 + 32 * h + l);
        for (int i = 0; i < 4; i++) {
            unsigned lw = ql[i], hw = qh[i];
            for (int t = 0; t < 2; t++) {
                unsigned lb = (lw >> (8 * t)) & 0xFF, hb = (hw >> (8 * t)) & 0xFF;
                int q = (int)((qd >= 2 ? lb >> 4 : lb & 0xF) | (((hb >> (2 * qd)) & 3) << 4)); // signed before the - 32
                v[2 * i + t] = s * (float)(q - 32);
            }
        }
    } else if (TYPE == MORE) {
        load8_more(type, row, k0, v);
    } else if (TYPE == 12) {
        const float4* f = (const float4*)(row + 4 * (i64)k0);
        float4 a = f[0], b = f[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
        uint4 q = ld_stream((const uint4*)(row + 2 * (i64)k0));
        unsigned u[4] = {q.x, q.y, q.z, q.w};
        for (int j = 0; j < 4; j++) {
            if (TYPE == 11) {
                v[2 * j] = f16_to_f32((u16)(u[j] & 0xffffu));
                v[2 * j + 1] = f16_to_f32((u16)(u[j] >> 16));
            } else {
                v[2 * j] = __uint_as_float(u[j] << 16);
                v[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
            }
        }
    }
}

// dot_rows_t: a warp's dot products of R weight rows (K values each) with
// the first m of M rows of x (xs[j], 16-byte aligned): each 8-column piece
// of the R weight rows is loaded before any is used, so that R loads a lane
// are in flight, and then used for every row of x. out[r·M + j] gets the
// sums, in every lane.
template <int TYPE, int R, int M>
__device__ __forceinline__ void dot_rows_t(const u8* const* rows, const float* const* xs, int m, int K, int lane, float* out,
                                           int type = TYPE) {
    float acc[R][M];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < M; j++) acc[r][j] = 0.f;
    for (int k0 = lane * 8; k0 < K; k0 += 256) {
        float v[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) load8_t<TYPE>(rows[r], k0, v[r], type);
#pragma unroll
        for (int j = 0; j < M; j++) {
            if (j >= m) break;
            float4 a = *(const float4*)(xs[j] + k0), b = *(const float4*)(xs[j] + k0 + 4);
#pragma unroll
            for (int r = 0; r < R; r++)
                acc[r][j] += v[r][0] * a.x + v[r][1] * a.y + v[r][2] * a.z + v[r][3] * a.w + v[r][4] * b.x + v[r][5] * b.y +
                             v[r][6] * b.z + v[r][7] * b.w;
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < M; j++) out[r * M + j] = warp_sum(acc[r][j]);
}

template <int R, int M>
__device__ __forceinline__ void dot_rows(int type, const u8* const* rows, const float* const* xs, int m, int K, int lane, float* out) {
    switch (type) {
    case 0: dot_rows_t<0, R, M>(rows, xs, m, K, lane, out); break;
    case 1: dot_rows_t<1, R, M>(rows, xs, m, K, lane, out); break;
    case 2: dot_rows_t<2, R, M>(rows, xs, m, K, lane, out); break;
    case 10: dot_rows_t<10, R, M>(rows, xs, m, K, lane, out); break;
    case 11: dot_rows_t<11, R, M>(rows, xs, m, K, lane, out); break;
    case 12: dot_rows_t<12, R, M>(rows, xs, m, K, lane, out); break;
    default: dot_rows_t<MORE, R, M>(rows, xs, m, K, lane, out, type); break; // one instance for load8_more's types
    }
}

// gate_up_dots: gate·x and up·x for weight row i and the first m of M rows
// of x; one call of both rows where gate and up share a type. out[j] is
// gate·x_j, out[M + j] up·x_j.
template <int M>
__device__ __forceinline__ void gate_up_dots(const u8* g, const u8* u, int gt, int ut, const float* const* xs, int m, int K,
                                             int lane, float* out) {
    if (gt == ut) {
        const u8* rows[2] = {g, u};
        dot_rows<2, M>(gt, rows, xs, m, K, lane, out);
    } else {
        dot_rows<1, M>(gt, &g, xs, m, K, lane, out);
        dot_rows<1, M>(ut, &u, xs, m, K, lane, out + M);
    }
}

// gemv_qr_t: d[n] = w[n]·x for one row of x and a block-quantized weight,
// a warp taking R rows. Grid ⌈N/(8R)⌉, 8 warps; x 16-byte aligned.
template <int R>
__device__ __forceinline__ void gemv_qr_t(float* d, const float* x, const u8* w, i64 rowBytes, int N, int K, int type) {
    int n0 = (blockIdx.x * 8 + (threadIdx.x >> 5)) * R, lane = threadIdx.x & 31;
    for (int r = 0; r < R; r++)
        if (n0 + r < N) prefetch_l2((const char*)w + (i64)(n0 + r) * rowBytes, (int)rowBytes, lane);
    DEPEND();
    if (n0 >= N) return;
    const u8* rows[R];
    for (int r = 0; r < R; r++) rows[r] = w + (i64)min(n0 + r, N - 1) * rowBytes;
    float o[R];
    dot_rows<R, 1>(type, rows, &x, 1, K, lane, o);
    if (lane < R && n0 + lane < N) d[n0 + lane] = o[lane];
}

extern "C" {

// load8 is load8_t for a type known at run time.
__device__ __forceinline__ void load8(int type, const u8* row, int k0, float* v) {
    switch (type) {
    case 0: load8_t<0>(row, k0, v); break;
    case 1: load8_t<1>(row, k0, v); break;
    case 2: load8_t<2>(row, k0, v); break;
    case 10: load8_t<10>(row, k0, v); break;
    case 11: load8_t<11>(row, k0, v); break;
    case 12: load8_t<12>(row, k0, v); break;
    default: load8_more(type, row, k0, v); break;
    }
}

__device__ __forceinline__ float silu_(float g) { return g / (1.f + expf(-g)); }

// gemv_qr1 and gemv_qr4: gemv_qr_t of one and of four rows a warp (the
// latter for matrices of many rows, where the blocks fill the GPU anyway).
__global__ void gemv_qr1(float* d, const float* x, const u8* w, i64 rowBytes, int N, int K, int type) {
    gemv_qr_t<1>(d, x, w, rowBytes, N, K, type);
}
// gemv_qr_swiglu: d[i] = silu(gate_i·x)·(up_i·x) for w = [gate; up] of
// glu rows each. A block's warps 0-3 take gate rows i..i+3 and warps 4-7
// their up rows, a row a warp as in gemv_qr1 (two rows a warp ran 5%
// slower than gemv_qr1 and swiglu apart), and meet in shared memory.
__global__ void gemv_qr_swiglu(float* d, const float* x, const u8* w, i64 rowBytes, int glu, int K, int type) {
    __shared__ float gate[4];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, i = blockIdx.x * 4 + (warp & 3);
    const u8* row = w + (i64)(warp < 4 ? i : glu + i) * rowBytes;
    if (i < glu) prefetch_l2((const char*)row, (int)rowBytes, lane);
    DEPEND();
    float o = 0.f;
    if (i < glu) dot_rows<1, 1>(type, &row, &x, 1, K, lane, &o);
    if (warp < 4 && lane == 0) gate[warp] = o;
    __syncthreads();
    if (warp >= 4 && lane == 0 && i < glu) {
        float g = gate[warp - 4];
        d[i] = g * sigmoidf_(g) * o;
    }
}

__global__ void gemv_qr4(float* d, const float* x, const u8* w, i64 rowBytes, int N, int K, int type) {
    gemv_qr_t<4>(d, x, w, rowBytes, N, K, type);
}

// moe_gate_up: for assignment a (token a / k, expert ids[a]), h[a][i] =
// silu(gate_e[i]·x)·(up_e[i]·x), a warp a row i. Grid (⌈I/8⌉, assignments),
// 8 warps.
__global__ void moe_gate_up(float* h, const float* x, i64 sx, const int* ids, const u8* const* gate, const u8* const* up,
                            i64 grb, i64 urb, int gt, int ut, int k, int H, int I) {
    DEPEND();
    int a = blockIdx.y, i = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (i >= I) return;
    int e = ids[a];
    const float* xr = x + (i64)(a / k) * sx;
    float d[2];
    gate_up_dots<1>(gate[e] + (i64)i * grb, up[e] + (i64)i * urb, gt, ut, &xr, 1, H, lane, d);
    if (lane == 0) h[(i64)a * I + i] = silu_(d[0]) * d[1];
}

// moe_down: out[t][n] = Σ_j w[t·k+j] · down_e[n]·h[t·k+j] (e = ids[t·k+j]),
// the k experts summed in rank order. A block takes 4 rows n of one token,
// its warps the experts (warp w experts w, w+8, ...). Grid (⌈H/4⌉, tokens).
__global__ void moe_down(float* out, i64 so, const float* h, const int* ids, const float* w, const u8* const* down,
                         i64 rb, int type, int k, int H, int I) {
    DEPEND();
    __shared__ float part[32][4];
    int t = blockIdx.y, n0 = blockIdx.x * 4, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int j = warp; j < k; j += 8) {
        int a = t * k + j;
        const u8* base = down[ids[a]];
        const u8* rows[4];
        for (int r = 0; r < 4; r++) rows[r] = base + (i64)min(n0 + r, H - 1) * rb;
        const float* hr = h + (i64)a * I;
        float d[4];
        dot_rows<4, 1>(type, rows, &hr, 1, I, lane, d);
        if (lane < 4) part[j][lane] = w[a] * d[lane];
    }
    __syncthreads();
    if (threadIdx.x < 4 && n0 + threadIdx.x < H) {
        float s = 0.f;
        for (int j = 0; j < k; j++) s += part[j][threadIdx.x];
        out[(i64)t * so + n0 + threadIdx.x] = s;
    }
}

// The grouped GEMVs: tiles of MOE_TILE assignments of one expert (sorted
// by moe_align), a warp taking weight rows against all of the tile's rows
// of x, so that an expert's rows are read once a tile, not once an
// assignment. Row j of x is x[order[slot j] / div].
#define MOE_TILE 8

// tile_rows reads the tile's assignments (its live ones come first) and
// their rows of x; returns how many are live.
__device__ __forceinline__ int tile_rows(const int* order, int tile, const float* x, i64 sx, int div, int* rows, const float** xs) {
    int m = 0;
#pragma unroll
    for (int j = 0; j < MOE_TILE; j++) {
        int a = order[tile * MOE_TILE + j];
        rows[j] = a;
        if (a >= 0) m = j + 1;
        xs[j] = x + (i64)((a >= 0 ? a : 0) / div) * sx;
    }
    return m;
}

// moe_gate_up_tile: h[a][i] = silu(gate_e[i]·x)·(up_e[i]·x) for the tile's
// assignments a, a warp a row i. Grid (tiles, ⌈I/8⌉), 8 warps.
__global__ void moe_gate_up_tile(float* h, const float* x, i64 sx, int div, const int* order, const int* tile_expert,
                                 const u8* const* gate, const u8* const* up, i64 grb, i64 urb, int gt, int ut, int K, int I) {
    DEPEND();
    int e = tile_expert[blockIdx.x], i = blockIdx.y * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (e < 0 || i >= I) return;
    int rows[MOE_TILE];
    const float* xs[MOE_TILE];
    int m = tile_rows(order, blockIdx.x, x, sx, div, rows, xs);
    float d[2 * MOE_TILE];
    gate_up_dots<MOE_TILE>(gate[e] + (i64)i * grb, up[e] + (i64)i * urb, gt, ut, xs, m, K, lane, d);
    if (lane == 0)
#pragma unroll
        for (int j = 0; j < MOE_TILE; j++)
            if (j < m) h[(i64)rows[j] * I + i] = silu_(d[j]) * d[MOE_TILE + j];
}

// moe_down_tile: y[a][n] = down_e[n]·h[a] for the tile's assignments, a
// warp two rows n. Grid (tiles, ⌈H/16⌉), 8 warps.
__global__ void moe_down_tile(float* y, const float* h, const int* order, const int* tile_expert, const u8* const* down,
                              i64 rb, int type, int H, int I) {
    DEPEND();
    int e = tile_expert[blockIdx.x], n = (blockIdx.y * 8 + (threadIdx.x >> 5)) * 2, lane = threadIdx.x & 31;
    if (e < 0 || n >= H) return;
    int rows[MOE_TILE];
    const float* xs[MOE_TILE];
    int m = tile_rows(order, blockIdx.x, h, I, 1, rows, xs);
    int n1 = n + 1 < H ? n + 1 : n;
    const u8* r2[2] = {down[e] + (i64)n * rb, down[e] + (i64)n1 * rb};
    float d[2 * MOE_TILE];
    dot_rows<2, MOE_TILE>(type, r2, xs, m, I, lane, d);
    if (lane == 0)
#pragma unroll
        for (int j = 0; j < MOE_TILE; j++)
            if (j < m) {
                y[(i64)rows[j] * H + n] = d[j];
                if (n + 1 < H) y[(i64)rows[j] * H + n + 1] = d[MOE_TILE + j];
            }
}

#define MOE_BM 32
#define MOE_BN 64
#define MOE_BK 32

// moe_align sorts the A assignments by expert for the tiled kernels: each
// expert's run in order[] is padded to a multiple of bm with -1, and
// tile_expert[q] is the expert of rows q·bm.., -1 past the last of the
// tiles tiles (A/bm + E bounds them). One block; E ≤ 1024.
__global__ void moe_align(int* order, int* tile_expert, const int* ids, int A, int E, int tiles, int bm) {
    DEPEND();
    __shared__ int count[1024], start[1024];
    for (int e = threadIdx.x; e < E; e += blockDim.x) count[e] = 0;
    for (int q = threadIdx.x; q < tiles * bm; q += blockDim.x) order[q] = -1;
    __syncthreads();
    for (int a = threadIdx.x; a < A; a += blockDim.x) atomicAdd(&count[ids[a]], 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        int off = 0;
        for (int e = 0; e < E; e++) {
            start[e] = off;
            int n = (count[e] + bm - 1) / bm;
            for (int q = 0; q < n; q++) tile_expert[off / bm + q] = e;
            off += n * bm;
            count[e] = 0;
        }
        for (int q = off / bm; q < tiles; q++) tile_expert[q] = -1;
    }
    __syncthreads();
    // Rows are independent, so the order within an expert's run is free.
    for (int a = threadIdx.x; a < A; a += blockDim.x) {
        int e = ids[a];
        order[start[e] + atomicAdd(&count[e], 1)] = a;
    }
}

// moe_gemm: a tile of MOE_BM assignments of one expert × MOE_BN weight rows.
// With up (gate_up): h[a][n] = silu(gate_e[n]·x[a/div])·(up_e[n]·x[a/div]);
// without: h[a][n] = gate_e[n]·x[a/div] (the down projection, x = h of the
// first, div 1). Grid (tiles, ⌈N/MOE_BN⌉), 256 threads, each 2 rows × 4
// columns; f32 arithmetic on the weights widened as they are staged.
__global__ void moe_gemm(float* h, i64 sh, const float* x, i64 sx, int div, const int* order, const int* tile_expert,
                         const u8* const* gate, const u8* const* up, i64 grb, i64 urb, int gt, int ut, int K, int N) {
    DEPEND();
    int e = tile_expert[blockIdx.x];
    if (e < 0) return;
    __shared__ float xs[MOE_BK][MOE_BM + 1];
    __shared__ float gs[MOE_BK][MOE_BN + 1], us[MOE_BK][MOE_BN + 1];
    __shared__ int rows[MOE_BM];
    int tid = threadIdx.x, n0 = blockIdx.y * MOE_BN;
    if (tid < MOE_BM) rows[tid] = order[blockIdx.x * MOE_BM + tid];
    __syncthreads();
    int tm = (tid >> 4) * 2, tn = (tid & 15) * 4;
    float ag[2][4] = {{0.f}}, au[2][4] = {{0.f}};
    const u8* gw = gate[e];
    const u8* uw = up ? up[e] : 0;
    for (int k0 = 0; k0 < K; k0 += MOE_BK) {
        for (int q = tid; q < MOE_BM * MOE_BK; q += 256) {
            int m = q / MOE_BK, kk = q % MOE_BK, a = rows[m];
            xs[kk][m] = a >= 0 && k0 + kk < K ? x[(i64)(a / div) * sx + k0 + kk] : 0.f;
        }
        {
            int r = tid >> 2, kk = (tid & 3) * 8, n = n0 + r;
            float v[8];
            bool in = n < N && k0 + kk < K;
            if (in) load8(gt, gw + (i64)n * grb, k0 + kk, v);
            for (int i = 0; i < 8; i++) gs[kk + i][r] = in ? v[i] : 0.f;
            if (uw) {
                if (in) load8(ut, uw + (i64)n * urb, k0 + kk, v);
                for (int i = 0; i < 8; i++) us[kk + i][r] = in ? v[i] : 0.f;
            }
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < MOE_BK; kk++) {
            float x0 = xs[kk][tm], x1 = xs[kk][tm + 1];
            for (int j = 0; j < 4; j++) {
                float g = gs[kk][tn + j];
                ag[0][j] += x0 * g;
                ag[1][j] += x1 * g;
            }
            if (uw)
                for (int j = 0; j < 4; j++) {
                    float u = us[kk][tn + j];
                    au[0][j] += x0 * u;
                    au[1][j] += x1 * u;
                }
        }
        __syncthreads();
    }
    for (int mi = 0; mi < 2; mi++) {
        int a = rows[tm + mi];
        if (a < 0) continue;
        for (int j = 0; j < 4; j++) {
            int n = n0 + tn + j;
            if (n < N) h[(i64)a * sh + n] = uw ? silu_(ag[mi][j]) * au[mi][j] : ag[mi][j];
        }
    }
}

// moe_combine: out[t] = Σ_j w[t·k+j] · y[t·k+j], the experts in rank order.
__global__ void moe_combine(float* out, i64 so, const float* y, const float* w, int k, int H) {
    DEPEND();
    int t = blockIdx.x;
    for (int n = threadIdx.x; n < H; n += blockDim.x) {
        float s = 0.f;
        for (int j = 0; j < k; j++) s += w[t * k + j] * y[(i64)(t * k + j) * H + n];
        out[(i64)t * so + n] = s;
    }
}

// spin holds the GPU for ns nanoseconds (GOVLLM_CUDA_PROFILE, profile.go).
__global__ void spin(i64 ns) {
    DEPEND();
    unsigned long long t0, t;
#ifdef GOVLLM_EMU
    t0 = emu::globaltimer();
    do t = emu::globaltimer();
    while ((i64)(t - t0) < ns);
#else
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while ((i64)(t - t0) < ns);
#endif
}

} // extern "C"
