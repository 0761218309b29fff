// govllm's persistent decode kernel (sm_80 and later), compiled by NVRTC
// apart from kernels.cu: it needs every block resident at once, which the
// CPU emulator (tools/cudaemu) cannot give, so the backend runs the chain
// of ops where this module does not load.
//
// decode_layers runs a batch-1 decode step through a run of dense Qwen3.5
// blocks (Gated DeltaNet and gated attention mixers, SwiGLU MLPs) as one
// launch: a block an SM, the grid meeting at a barrier between dependent
// phases. The weights
// do not wait for the barriers: the block's last warp streams its rows of
// every matrix (and its share of the DeltaNet states), in order, into a
// ring of shared-memory slots, held back only by slots not yet read; the
// other warps wait for the phase's input, stage it in shared memory
// (normalised as the phase needs) and take the slots in turn. A mixer is
// three phases (the input projection with the causal conv in its rows'
// epilogue, the delta rule spread over (value head, 16 columns), the
// output projection with the gated norm in its staging and the residual
// add in its epilogue), an attention mixer three (the qkv projection; the
// attention over the paged cache, split over (query head, chunk of keys),
// the query and key normalised and rotated by each item itself; the output
// projection, whose staging merges the chunks and applies the gate's
// sigmoid), an MLP two (gate and up with SwiGLU, down with the residual
// add). Between a kernel's phases a graph would have a launch and a norm
// kernel each; here the only waits are on data.

typedef long long i64;
typedef unsigned short u16;

enum { PH_GEMV = 0, PH_RULE = 1, PH_ATTN = 2 };
enum { ST_RAW = 0, ST_NORM = 1, ST_GATED = 2, ST_ATTN = 3 };
enum { EP_STORE = 0, EP_ADD = 1, EP_CONV = 2, EP_GLU = 3 };

// Phase is one step of the program; persistent.go writes the same layout
// (208 bytes). The program holds no address that changes between steps:
// x, the scratch and the state slot come as the launch's arguments, and
// src, z and out name a buffer (BUF_*) and an offset in it.
struct Phase {
    const u16* w;       // GEMV: [N, K] bf16 ([2N, K] for EP_GLU: gate rows, then up)
    const float* normw; // ST_NORM: [K] (used as 1 + w); ST_GATED: [dv]
    const float* convw; // EP_CONV: [C, Kc]
    float* convst;      // EP_CONV: the states [S, Kc-1, C]
    float* rec;         // RULE: the states [S, hv, dk, dv]
    const float* alog;  // RULE: [hv]
    const float* dtb;   // RULE: [hv]
    i64 conv_stride, rec_stride; // a slot's state, in floats
    int kind, N, K, stage;
    int epi, C, Kc, hk;
    int hv, dk, dv, tiled;
    float eps, qkeps;
    int src, z, out;             // BUF_*: the staged input (GEMV) or the conv'd projections (RULE); ST_GATED's z; the output
    int src_off, z_off, out_off; // in floats
    // ATTN (normw: the query norm, eps) and ST_ATTN: the attention's heads,
    // key and value heads, head dim and rotary dims; its key norm (1 + kw),
    // caches [rows, hkv, dim], RoPE base, score scale, and the most partial
    // results a head's keys are split into.
    const float* kw;
    float *kc, *vc;
    int hq, hkv, dim, rdim;
    float theta, scale;
    int split, pad;
};
enum { BUF_X = 1, BUF_PROJ = 2, BUF_CORE = 3, BUF_HIDDEN = 4, BUF_ATTN_QKV = 5, BUF_ATTN_PART = 6 };

// Bufs are the launch's buffers; Ptr a phase's addresses in them. step is
// the step's position, its key's cache row, the cache's block size and the
// sequence's block table.
struct Bufs { float *x, *proj, *core, *hidden, *qkv, *part; int slot; const int* step; };
struct Ptr { const float *src, *z; float *out, *convst, *rec; };
__device__ __forceinline__ float* buf_at(const Bufs& b, int id, int off) {
    float* base = id == BUF_X ? b.x : id == BUF_PROJ ? b.proj : id == BUF_CORE ? b.core : id == BUF_HIDDEN ? b.hidden
                : id == BUF_ATTN_QKV ? b.qkv : b.part;
    return base + off;
}
__device__ __forceinline__ Ptr resolve(const Phase& p, const Bufs& b) {
    Ptr q;
    q.src = buf_at(b, p.src, p.src_off);
    q.z = buf_at(b, p.z, p.z_off);
    q.out = buf_at(b, p.out, p.out_off);
    q.convst = p.convst + b.slot * p.conv_stride;
    q.rec = p.rec + b.slot * p.rec_stride;
    return q;
}

#define CW 7                 // consumer warps
#define NT (32 * CW)         // consumer threads
#define RULE_COLS 16         // state columns a RULE item takes
#define RULE_R (NT / 16)     // a RULE item's rows a pass (a thread's stride)
#define RULE_M ((128 + RULE_R - 1) / RULE_R) // passes for key dims up to 128
#ifdef GOVLLM_EMU
#define SPIN_NS 120000000000ull // two cores emulate many threads
#else
#define SPIN_NS 4000000000ull // a wait longer than this is a bug: trap, not hang
#endif

__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
#define NEG_INF __int_as_float(0xff800000)
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// An attention phase splits the step's n keys (positions 0..pos) into S
// chunks of len keys, S at most the phase's split and each chunk of
// ATT_MIN keys or more, so that a short context is one chunk a head.
#define ATT_MIN 32
struct Chunks { int n, S, len; };
__device__ __forceinline__ Chunks chunks_of(const int* step, int split) {
    Chunks c;
    c.n = step[0] + 1;
    c.S = min(split, (c.n + ATT_MIN - 1) / ATT_MIN);
    c.len = (c.n + c.S - 1) / c.S;
    return c;
}

// dot8 is 8 bf16 weights times 8 floats, summed as a tree (four products
// in pairs, then two adds deep), not one chain of eight dependent adds.
__device__ __forceinline__ float dot8(uint4 q, float4 a, float4 b) {
    float s0 = a.x * __uint_as_float(q.x << 16) + a.y * __uint_as_float(q.x & 0xffff0000u);
    float s1 = a.z * __uint_as_float(q.y << 16) + a.w * __uint_as_float(q.y & 0xffff0000u);
    float s2 = b.x * __uint_as_float(q.z << 16) + b.y * __uint_as_float(q.z & 0xffff0000u);
    float s3 = b.z * __uint_as_float(q.w << 16) + b.w * __uint_as_float(q.w & 0xffff0000u);
    return (s0 + s1) + (s2 + s3);
}

// The few instructions below have C++ stand-ins for the CPU emulator,
// where a block's threads are fibers on one OS thread (so shared memory
// needs no atomics) and each block of this kernel runs on a thread of its
// own; a wait lets the block's other fibers, and the other blocks, run.
#ifdef GOVLLM_EMU
typedef unsigned long long saddr; // a shared-memory address
#define DYN_SHARED(name) unsigned char* name = (unsigned char*)emu::block->dynShared
__device__ __forceinline__ unsigned long long now_ns() { return emu::globaltimer(); }
__device__ __forceinline__ unsigned long long clk() { return emu::globaltimer(); }
__device__ __forceinline__ float ld_cg(const float* p) { return *(const volatile float*)p; }
__device__ __forceinline__ float4 ld_cg4(const float* p) {
    const volatile float* v = p;
    return make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ saddr s_addr(const void* p) { return (saddr)p; }
// An mbarrier: arrivals still due (low word), then the count and the phase (top bit).
__device__ __forceinline__ void mbar_init(saddr a, int count) { *(unsigned long long*)a = ((unsigned long long)count << 32) | (unsigned)count; }
__device__ __forceinline__ bool mbar_done(saddr a, unsigned parity) { return (*(unsigned long long*)a >> 63) != parity; }
__device__ __forceinline__ void mbar_arrive(saddr a) {
    unsigned long long* m = (unsigned long long*)a;
    unsigned due = (unsigned)*m - 1, hi = (unsigned)(*m >> 32);
    if (due == 0) hi ^= 0x80000000u, due = hi & 0x7fffffffu;
    *m = ((unsigned long long)hi << 32) | due;
    emu::progress();
}
__device__ __forceinline__ void cp16(saddr dst, const void* src) { memcpy((void*)dst, src, 16); }
__device__ __forceinline__ void cp_arrive(saddr a) { mbar_arrive(a); }
__device__ __forceinline__ void cp_wait_all() {}
__device__ __forceinline__ void consumers_sync() { emu::namedSync(1, NT); }
__device__ __forceinline__ void depend_wait() {}
__device__ __forceinline__ void launch_dependents() {}
__device__ __forceinline__ unsigned long long ld_acquire(const unsigned long long* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
__device__ __forceinline__ void red_release(unsigned long long* p) { __atomic_fetch_add(p, 1ull, __ATOMIC_RELEASE); }
__device__ __forceinline__ void spin_pause() { emu::spin(); }
__device__ __forceinline__ void prefetch_l2(const void*) {}
// A block's fibers share one OS thread: no atomic needed within a block.
__device__ __forceinline__ void block_max(unsigned long long* p, unsigned long long v) { *p = v > *p ? v : *p; }
#define TRAP(why) emu::trap(why)
#else
typedef unsigned saddr;
#define DYN_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned long long clk() { return clock64(); }
// What other blocks wrote before the barrier is read around L1 (which
// may hold it stale); a plain load, so that the compiler can put many in
// flight at once (the barriers' asm clobbers memory: none moves above).
__device__ __forceinline__ float ld_cg(const float* p) { return __ldcg(p); }
__device__ __forceinline__ float4 ld_cg4(const float* p) { return __ldcg((const float4*)p); }
__device__ __forceinline__ saddr s_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
__device__ __forceinline__ void mbar_init(saddr a, int count) { asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(a), "r"(count) : "memory"); }
__device__ __forceinline__ bool mbar_done(saddr a, unsigned parity) {
    unsigned done;
    asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(a), "r"(parity) : "memory");
    return done;
}
__device__ __forceinline__ void mbar_arrive(saddr a) { asm volatile("{ .reg .b64 s; mbarrier.arrive.shared.b64 s, [%0]; }" ::"r"(a) : "memory"); }
__device__ __forceinline__ void cp16(saddr dst, const void* src) { asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory"); }
__device__ __forceinline__ void cp_arrive(saddr a) { asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(a) : "memory"); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"r"(NT) : "memory"); }
__device__ __forceinline__ void depend_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void launch_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
__device__ __forceinline__ unsigned long long ld_acquire(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void red_release(unsigned long long* p) { asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(p) : "memory"); }
__device__ __forceinline__ void spin_pause() {}
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
__device__ __forceinline__ void block_max(unsigned long long* p, unsigned long long v) { atomicMax(p, v); }
#define TRAP(why) __trap()
#endif

// mbar_wait waits for the phase of parity to complete.
__device__ __forceinline__ void mbar_wait(saddr a, unsigned parity) {
    unsigned long long t0 = 0;
    for (int i = 0;; i++) {
        if (mbar_done(a, parity)) return;
        spin_pause();
        if ((i & 1023) == 0) {
            unsigned long long t = now_ns();
            if (t0 == 0) t0 = t;
            else if (t - t0 > SPIN_NS) TRAP("decode_layers: a ring slot was never filled or read");
        }
    }
}

// full_wait waits for a slot's fill, adding the clocks to *waited if set
// (GOVLLM_CUDA_PROFILE=phases).
__device__ __forceinline__ void full_wait(saddr a, unsigned parity, unsigned long long* waited) {
    if (!waited) {
        mbar_wait(a, parity);
        return;
    }
    unsigned long long t = clk();
    mbar_wait(a, parity);
    *waited += clk() - t;
}

// await_count spins until the grid's barrier count reaches goal.
__device__ __forceinline__ void await_count(const unsigned long long* bar, unsigned long long goal) {
    unsigned long long t0 = 0;
    for (int i = 0;; i++) {
        if (ld_acquire(bar) >= goal) return;
        spin_pause();
        if ((i & 255) == 0) {
            unsigned long long t = now_ns();
            if (t0 == 0) t0 = t;
            else if (t - t0 > SPIN_NS) TRAP("decode_layers: a block never reached the grid barrier");
        }
    }
}

// Rows is a block's share of a GEMV phase: rows r0..r0+n (of d), in
// chunks of rpc rows, one ring slot each.
struct Rows { int r0, n, rpc, chunks; };
__device__ __forceinline__ Rows rows_of(const Phase& p, int slot_bytes) {
    Rows r;
    r.r0 = (int)((i64)p.N * blockIdx.x / gridDim.x);
    r.n = (int)((i64)p.N * (blockIdx.x + 1) / gridDim.x) - r.r0;
    int row_bytes = 2 * p.K * (p.epi == EP_GLU ? 2 : 1);
    r.rpc = max(1, slot_bytes / row_bytes);
    r.chunks = (r.n + r.rpc - 1) / r.rpc;
    return r;
}
__device__ __forceinline__ int rule_items(const Phase& p) { return p.hv * (p.dv / RULE_COLS); }
// rule_chunks is how many RULE items (one slot each) this block takes.
__device__ __forceinline__ int rule_chunks(const Phase& p) {
    int items = rule_items(p);
    return blockIdx.x < items ? (items - 1 - blockIdx.x) / gridDim.x + 1 : 0;
}

// With GOVLLM_CUDA_PROFILE=phases the launch gets a times buffer: for
// phase i and block b, TIMES words at (i * grid + b) * TIMES, of which the
// consumers write T_START (clock at the phase's start), T_PASSED (past its
// barrier), T_STAGED (input staged), T_DONE (rows written) and G_PASSED,
// G_DONE (the same two by the GPU's global timer), and the producer
// T_FREE (the phase's first slot free) and T_ISSUED (its last copy issued),
// and T_FULL (the most clocks a consumer warp waited for filled slots);
// phase n holds the launch's start (T_START, G_PASSED).
enum { T_START, T_PASSED, T_STAGED, T_DONE, G_PASSED, G_DONE, T_FREE, T_ISSUED, T_FULL, TIMES };
__device__ __forceinline__ unsigned long long* times_at(unsigned long long* times, int i) {
    return times + ((i64)i * gridDim.x + blockIdx.x) * TIMES;
}

// produce streams, in program order, the block's weight rows of every
// GEMV phase and its DeltaNet state columns of every RULE phase.
__device__ void produce(const Phase* prog, int n, const Bufs& bufs, unsigned char* slot0, unsigned long long* full,
                        unsigned long long* empty, int slot_bytes, int slots, unsigned long long* times) {
    int lane = threadIdx.x & 31;
    bool waited = false;
    i64 s = 0;
    for (int i = 0; i < n; i++) {
        const Phase& p = prog[i];
        unsigned long long t_free = 0;
        if (p.kind == PH_GEMV) {
            Rows r = rows_of(p, slot_bytes);
            for (int c = 0; c < r.chunks; c++, s++) {
                int slot = (int)(s % slots);
                mbar_wait(s_addr(empty + slot), ((unsigned)(s / slots) & 1u) ^ 1u);
                if (times && c == 0) t_free = clk();
                int row = r.r0 + c * r.rpc, rows = min(r.rpc, r.n - c * r.rpc), units = rows * (p.K / 8);
                saddr dst = s_addr(slot0 + (i64)slot * slot_bytes);
                const uint4* src = (const uint4*)(p.w + (i64)row * p.K);
                for (int u = lane; u < units; u += 32) cp16(dst + 16 * u, src + u);
                if (p.epi == EP_GLU) { // the up rows after the gate rows
                    src = (const uint4*)(p.w + (i64)(p.N + row) * p.K);
                    for (int u = lane; u < units; u += 32) cp16(dst + 16 * (units + u), src + u);
                }
                cp_arrive(s_addr(full + slot));
            }
        } else if (p.kind == PH_RULE) {
            if (!waited) { // the states are written by the step before
                depend_wait();
                waited = true;
            }
            Ptr a = resolve(p, bufs);
            int groups = p.dv / RULE_COLS, items = rule_items(p);
            for (int it = blockIdx.x; it < items; it += gridDim.x, s++) {
                int slot = (int)(s % slots);
                mbar_wait(s_addr(empty + slot), ((unsigned)(s / slots) & 1u) ^ 1u);
                if (times && it == blockIdx.x) t_free = clk();
                int h = it / groups, j0 = (it % groups) * RULE_COLS;
                saddr dst = s_addr(slot0 + (i64)slot * slot_bytes);
                const float* S = a.rec + (i64)h * p.dk * p.dv + j0;
                for (int u = lane; u < p.dk * 4; u += 32) cp16(dst + 16 * u, S + (i64)(u >> 2) * p.dv + 4 * (u & 3));
                cp_arrive(s_addr(full + slot));
            }
        }
        if (times && lane == 0) {
            unsigned long long* t = times_at(times, i);
            unsigned long long now = clk();
            t[T_FREE] = t_free ? t_free : now;
            t[T_ISSUED] = now;
        }
    }
    cp_wait_all();
}

// stage writes the phase's input, as it reads it, into xs. Each thread
// reads its float4s of it before it uses any, so that the reads from L2
// are in flight together rather than one round trip each.
#define STAGE_V 4 // float4s a thread has in flight
#define GATED_H 2 // heads a warp of the gated norm's staging has in flight

// Early is what a phase's staging reads that no phase writes (its norm
// weights), read before the phase's barrier so that its round trip to L2
// is off the phase's path: ST_NORM's as the thread stages x (k = tid +
// j·NT), ST_GATED's as a lane stages a head (k = lane + 32·j).
struct Early { float4 w[STAGE_V]; };
__device__ __forceinline__ Early early_of(const Phase& p) {
    Early e;
    int tid = threadIdx.x, lane = tid & 31;
    if (p.kind != PH_GEMV) return e;
    if (p.stage == ST_NORM) {
#pragma unroll
        for (int j = 0; j < STAGE_V; j++) {
            int k = j * NT + tid;
            if (k < p.K / 4) e.w[j] = *(const float4*)(p.normw + 4 * k);
        }
    } else if (p.stage == ST_GATED) {
#pragma unroll
        for (int j = 0; j < 2; j++) {
            int k = lane + 32 * j;
            if (k < p.dv / 4) e.w[j] = *(const float4*)(p.normw + 4 * k);
        }
    }
    return e;
}

// xs_at is where float4 k of a staged input of K values sits: the even
// ones first, then the odd, so that a lane's two float4s for its 16-byte
// piece u of a row are u and K/8 + u, and a warp's reads of either are 512
// contiguous bytes (4 wavefronts, not the 8 of float4s 32 bytes apart).
__device__ __forceinline__ int xs_at(int k, int K) { return (k & 1) * (K / 8) + (k >> 1); }

// inv_rms is 1/rms of K values of which each consumer thread summed the
// squares of its share into ss (red: a float a warp).
__device__ __forceinline__ float inv_rms(float ss, float* red, int K, float eps) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    ss = warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    consumers_sync();
    float tot = 0.f;
    for (int w = 0; w < CW; w++) tot += red[w];
    return rsqrtf(tot / K + eps);
}

__device__ void stage(const Phase& p, const Ptr& a, const int* step, float* xs, float* red, const Early& early) {
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    float4* xs4 = (float4*)xs;
    if (p.stage == ST_ATTN) { // a head's partial results combined, times sigmoid of its gate: a warp a head
        Chunks ch = chunks_of(step, p.split);
        int d4 = p.dim / 4, pw = p.dim + 4; // at most 64 (dim <= 256): two float4s a lane
        for (int h = warp; h < p.hq; h += CW) {
            const float* part = a.src + (i64)h * p.split * pw;
            // Lane c reads chunk c's max and sum (split <= 32), so that a
            // head's weights are one round trip to L2, not one a chunk.
            float mc = lane < ch.S ? ld_cg(part + (i64)lane * pw) : NEG_INF;
            float lc = lane < ch.S ? ld_cg(part + (i64)lane * pw + 1) : 0.f;
            float M = warp_max(mc), wc = mc == NEG_INF ? 0.f : expf(mc - M);
            float L = warp_sum(lc * wc);
            float4 o[2] = {make_float4(0.f, 0.f, 0.f, 0.f), make_float4(0.f, 0.f, 0.f, 0.f)}, gate[2];
#pragma unroll
            for (int j = 0; j < 2; j++)
                if (lane + 32 * j < d4) gate[j] = ld_cg4(a.z + (i64)h * 2 * p.dim + p.dim + 4 * (lane + 32 * j));
#pragma unroll 4
            for (int c = 0; c < ch.S; c++) {
                float w = __shfl_sync(0xffffffffu, wc, c);
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    int k = lane + 32 * j;
                    if (k < d4) {
                        float4 v = ld_cg4(part + (i64)c * pw + 4 + 4 * k);
                        o[j].x += w * v.x, o[j].y += w * v.y, o[j].z += w * v.z, o[j].w += w * v.w;
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < 2; j++) {
                int k = lane + 32 * j;
                if (k < d4) {
                    float4 g = gate[j], x = o[j];
                    x.x *= sigmoidf_(g.x) / L, x.y *= sigmoidf_(g.y) / L, x.z *= sigmoidf_(g.z) / L, x.w *= sigmoidf_(g.w) / L;
                    xs4[xs_at(h * d4 + k, p.K)] = x;
                }
            }
        }
        consumers_sync();
        return;
    }
    if (p.stage == ST_GATED) { // each value head normalised over its dv, times silu(z): a warp a head
        int d4 = p.dv / 4;     // at most 64 (dv <= 256): two float4s a lane, GATED_H heads a warp in flight
        for (int h0 = warp; h0 < p.hv; h0 += GATED_H * CW) {
            float4 v[GATED_H][2], zz[GATED_H][2];
#pragma unroll
            for (int e = 0; e < GATED_H; e++) {
                int h = h0 + e * CW;
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    int k = lane + 32 * j;
                    if (h < p.hv && k < d4) {
                        v[e][j] = ld_cg4(a.src + (i64)h * p.dv + 4 * k);
                        zz[e][j] = ld_cg4(a.z + (i64)h * p.dv + 4 * k);
                    }
                }
            }
#pragma unroll
            for (int e = 0; e < GATED_H; e++) {
                int h = h0 + e * CW;
                if (h >= p.hv) break;
                float ss = 0.f;
#pragma unroll
                for (int j = 0; j < 2; j++)
                    if (lane + 32 * j < d4) ss += v[e][j].x * v[e][j].x + v[e][j].y * v[e][j].y + v[e][j].z * v[e][j].z + v[e][j].w * v[e][j].w;
                float inv = rsqrtf(warp_sum(ss) / p.dv + p.eps);
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    int k = lane + 32 * j;
                    if (k < d4) {
                        float4 w = early.w[j], z = zz[e][j], x = v[e][j], o;
                        o.x = x.x * inv * w.x * (z.x * sigmoidf_(z.x));
                        o.y = x.y * inv * w.y * (z.y * sigmoidf_(z.y));
                        o.z = x.z * inv * w.z * (z.z * sigmoidf_(z.z));
                        o.w = x.w * inv * w.w * (z.w * sigmoidf_(z.w));
                        xs4[xs_at(h * d4 + k, p.K)] = o;
                    }
                }
            }
        }
        consumers_sync();
        return;
    }
    float ss = 0.f;
    int K4 = p.K / 4;
    if (p.stage == ST_NORM && K4 <= STAGE_V * NT) { // x in registers, one pass: read, reduce, scale
        float4 v[STAGE_V];
#pragma unroll
        for (int j = 0; j < STAGE_V; j++) {
            int k = j * NT + tid;
            if (k < K4) {
                v[j] = ld_cg4(a.src + 4 * k);
                ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
            }
        }
        float inv = inv_rms(ss, red, p.K, p.eps);
#pragma unroll
        for (int j = 0; j < STAGE_V; j++) {
            int k = j * NT + tid;
            if (k < K4) {
                float4 x = v[j], w = early.w[j];
                x.x *= inv * (1.f + w.x), x.y *= inv * (1.f + w.y), x.z *= inv * (1.f + w.z), x.w *= inv * (1.f + w.w);
                xs4[xs_at(k, p.K)] = x;
            }
        }
        consumers_sync();
        return;
    }
    for (int k0 = 0; k0 < K4; k0 += STAGE_V * NT) {
        float4 v[STAGE_V];
#pragma unroll
        for (int j = 0; j < STAGE_V; j++) {
            int k = k0 + j * NT + tid;
            if (k < K4) v[j] = ld_cg4(a.src + 4 * k);
        }
#pragma unroll
        for (int j = 0; j < STAGE_V; j++) {
            int k = k0 + j * NT + tid;
            if (k >= K4) continue;
            float4 x = v[j];
            xs4[xs_at(k, p.K)] = x;
            ss += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
        }
    }
    if (p.stage == ST_NORM) {
        float inv = inv_rms(ss, red, p.K, p.eps);
        for (int k = tid; k < K4; k += NT) {
            float4 x = xs4[xs_at(k, p.K)], w = *(const float4*)(p.normw + 4 * k);
            x.x *= inv * (1.f + w.x), x.y *= inv * (1.f + w.y), x.z *= inv * (1.f + w.z), x.w *= inv * (1.f + w.w);
            xs4[xs_at(k, p.K)] = x;
        }
    }
    consumers_sync();
}

// Pre is what a row's epilogue reads besides its dot product, read before
// the dot products so that its round trip to L2 overlaps them: EP_ADD's
// old value, EP_CONV's taps and state.
struct Pre { float old, w[9], in[8]; };
__device__ __forceinline__ Pre pre_of(const Phase& p, const Ptr& a, int r) {
    Pre q;
    q.old = 0.f;
    if (p.epi == EP_ADD) {
        q.old = ld_cg(a.out + r);
    } else if (p.epi == EP_CONV && r < p.C) {
        const float* w = p.convw + (i64)r * p.Kc;
#pragma unroll
        for (int j = 0; j < 9; j++)
            if (j < p.Kc) q.w[j] = w[j];
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (j < p.Kc - 1) q.in[j] = ld_cg(a.convst + (i64)j * p.C + r);
    }
    return q;
}

// finish writes row r's dot product v as the phase's epilogue says.
__device__ __forceinline__ void finish(const Phase& p, const Ptr& a, int r, float v, const Pre& q) {
    if (p.epi == EP_ADD) {
        a.out[r] = q.old + v;
    } else if (p.epi == EP_CONV && r < p.C) { // the causal conv with SiLU of channel r; its state advances
        int K = p.Kc;
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < 9; j++)
            if (j < K) acc += q.w[j] * (j == K - 1 ? v : q.in[j < 8 ? j : 7]);
#pragma unroll
        for (int j = 0; j < 7; j++)
            if (j < K - 2) a.convst[(i64)j * p.C + r] = q.in[j + 1];
        if (K > 1) a.convst[(i64)(K - 2) * p.C + r] = v;
        a.out[r] = acc * sigmoidf_(acc);
    } else {
        a.out[r] = v;
    }
}

// dot_rows sets acc[q] to lane's share of row q's dot product with the
// staged x (R rows of units 16-byte pieces in the slot), two pieces a row
// at a time: every load of an iteration is issued before its products, no
// branch between the rows. x is staged as xs_at lays it out.
template <int R>
__device__ __forceinline__ void dot_rows(const uint4* const* wr, const float4* xv, int units, int lane, float* acc) {
    float a0[R], a1[R];
#pragma unroll
    for (int q = 0; q < R; q++) a0[q] = 0.f, a1[q] = 0.f;
    int u = lane;
    for (; u + 32 < units; u += 64) {
        float4 x0 = xv[u], x1 = xv[units + u], y0 = xv[u + 32], y1 = xv[units + u + 32];
        uint4 w0[R], w1[R];
#pragma unroll
        for (int q = 0; q < R; q++) w0[q] = wr[q][u], w1[q] = wr[q][u + 32];
#pragma unroll
        for (int q = 0; q < R; q++) a0[q] += dot8(w0[q], x0, x1), a1[q] += dot8(w1[q], y0, y1);
    }
    if (u < units) {
        float4 x0 = xv[u], x1 = xv[units + u];
#pragma unroll
        for (int q = 0; q < R; q++) a0[q] += dot8(wr[q][u], x0, x1);
    }
#pragma unroll
    for (int q = 0; q < R; q++) acc[q] = a0[q] + a1[q];
}

// gemv computes the block's rows of a GEMV phase from the ring.
__device__ void gemv(const Phase& p, const Ptr& a, const float* xs, const unsigned char* slot0, unsigned long long* full,
                     unsigned long long* empty, i64 s, int slot_bytes, int slots, unsigned long long* t_full) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, units = p.K / 8;
    unsigned long long mine = 0, *waited = t_full ? &mine : nullptr;
    Rows r = rows_of(p, slot_bytes);
    const float4* xv = (const float4*)xs;
    bool glu = p.epi == EP_GLU;
    for (int c = warp; c < r.chunks; c += CW) {
        i64 sc = s + c;
        int slot = (int)(sc % slots);
        full_wait(s_addr(full + slot), (unsigned)(sc / slots) & 1u, waited);
        const uint4* wq = (const uint4*)(slot0 + (i64)slot * slot_bytes);
        int row = r.r0 + c * r.rpc, rows = min(r.rpc, r.n - c * r.rpc), step = glu ? 2 : 4;
        for (int g = 0; g < rows; g += step) {
            // The group's live rows: GLU's gate rows g.. then their up rows.
            int live = min(step, rows - g), nr = glu ? 2 * live : live;
            const uint4* wr[4];
#pragma unroll
            for (int q = 0; q < 4; q++) wr[q] = wq + (i64)(g + (glu && q >= live ? rows + q - live : q)) * units;
            float acc[4] = {0.f, 0.f, 0.f, 0.f};
            Pre pre;
            if (!glu && lane < live) pre = pre_of(p, a, row + g + lane); // in flight with the dot products
            switch (nr) {
            case 1: dot_rows<1>(wr, xv, units, lane, acc); break;
            case 2: dot_rows<2>(wr, xv, units, lane, acc); break;
            case 3: dot_rows<3>(wr, xv, units, lane, acc); break;
            default: dot_rows<4>(wr, xv, units, lane, acc); break;
            }
#pragma unroll
            for (int q = 0; q < 4; q++)
                if (q < nr) acc[q] = warp_sum(acc[q]);
            if (glu) {
                if (lane < live) {
                    float gt = lane == 0 ? acc[0] : acc[1], up = lane == 0 ? acc[live] : acc[live + 1];
                    a.out[row + g + lane] = gt * sigmoidf_(gt) * up;
                }
            } else if (lane < live) {
                float v = lane == 0 ? acc[0] : lane == 1 ? acc[1] : lane == 2 ? acc[2] : acc[3];
                finish(p, a, row + g + lane, v, pre);
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(s_addr(empty + slot));
    }
    if (t_full && lane == 0) block_max(t_full, mine);
}

// rule runs the block's items of a RULE phase: the gated delta rule for 16
// columns of a value head's state, which the producer put in a slot; it
// writes the head's raw output (the next phase normalises it). Thread t
// takes column t % 16 and rows t / 16 + RULE_R·m.
__device__ void rule(const Phase& p, const Ptr& a, const unsigned char* slot0, unsigned long long* full,
                     unsigned long long* empty, i64 s, int slot_bytes, int slots, float* red, unsigned long long* t_full) {
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, c = tid & 15, rp = tid >> 4;
    unsigned long long mine = 0, *waited = t_full ? &mine : nullptr;
    int groups = p.dv / RULE_COLS, items = rule_items(p), ratio = p.hv / p.hk;
    int vd = p.hv * p.dv;
    for (int it = blockIdx.x; it < items; it += gridDim.x, s++) {
        int h = it / groups, j0 = (it % groups) * RULE_COLS;
        int kh = p.tiled ? h % p.hk : h / ratio;
        const float *q = a.src + (i64)kh * p.dk, *k = a.src + (i64)(p.hk + kh) * p.dk;
        // Every load is issued before any is used (one round trip to L2,
        // not one for the norms and one for the rest): the warp's share of
        // q and k for the norms (each warp takes them itself: no barrier),
        // the thread's rows of them, its value, the head's gates.
        float qa[4], ka[4], qr[RULE_M], kr[RULE_M];
#pragma unroll
        for (int j = 0; j < 4; j++) { // dk <= 128
            int i = lane + 32 * j;
            qa[j] = i < p.dk ? ld_cg(q + i) : 0.f;
            ka[j] = i < p.dk ? ld_cg(k + i) : 0.f;
        }
#pragma unroll
        for (int m = 0; m < RULE_M; m++)
            if (rp + RULE_R * m < p.dk) qr[m] = ld_cg(q + rp + RULE_R * m), kr[m] = ld_cg(k + rp + RULE_R * m);
        float v = ld_cg(a.src + 2 * p.hk * p.dk + (i64)h * p.dv + j0 + c);
        float graw = ld_cg(a.src + p.C + vd + p.hv + h), braw = ld_cg(a.src + p.C + vd + h);
        float alog = p.alog[h], dtb = p.dtb[h];
        float qq = 0.f, kk = 0.f, qk = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) qq += qa[j] * qa[j], kk += ka[j] * ka[j], qk += qa[j] * ka[j];
        qq = warp_sum(qq), kk = warp_sum(kk), qk = warp_sum(qk);
        float qn = rsqrtf((float)p.dk) * rsqrtf(qq + p.qkeps), kn = rsqrtf(kk + p.qkeps);
        float kq = qk * qn * kn;
#pragma unroll
        for (int m = 0; m < RULE_M; m++) qr[m] *= qn, kr[m] *= kn;
        float ga = graw + dtb, beta = sigmoidf_(braw);
        float sp = ga > 20.f ? ga : log1pf(expf(ga)); // torch's softplus threshold
        float e = expf(-expf(alog) * sp);
        int slot = (int)(s % slots);
        full_wait(s_addr(full + slot), (unsigned)(s / slots) & 1u, waited);
        const float* S = (const float*)(slot0 + (i64)slot * slot_bytes); // [dk][16]
        float Sr[RULE_M], sk = 0.f, sq = 0.f;
#pragma unroll
        for (int m = 0; m < RULE_M; m++)
            if (rp + RULE_R * m < p.dk) {
                Sr[m] = S[(rp + RULE_R * m) * RULE_COLS + c];
                sk += Sr[m] * kr[m], sq += Sr[m] * qr[m];
            }
        sk += __shfl_xor_sync(0xffffffffu, sk, 16);
        sq += __shfl_xor_sync(0xffffffffu, sq, 16);
        if (lane < 16) red[warp * 32 + c] = sk, red[warp * 32 + 16 + c] = sq;
        consumers_sync();
        if (tid == 0) mbar_arrive(s_addr(empty + slot)); // S is in registers now
        sk = 0.f, sq = 0.f;
        for (int w = 0; w < CW; w++) sk += red[w * 32 + c], sq += red[w * 32 + 16 + c];
        float delta = beta * (v - e * sk);
        float* Sg = a.rec + (i64)h * p.dk * p.dv + j0 + c;
#pragma unroll
        for (int m = 0; m < RULE_M; m++)
            if (rp + RULE_R * m < p.dk) Sg[(i64)(rp + RULE_R * m) * p.dv] = e * Sr[m] + kr[m] * delta;
        if (rp == 0) a.out[(i64)h * p.dv + j0 + c] = e * sq + kq * delta;
        consumers_sync(); // red is written again by the next item
    }
    if (t_full && lane == 0) block_max(t_full, mine);
}

// norm_rope writes the head row src (dim values) to dst in shared memory,
// RMS-normalised with 1 + w and rotated (NeoX, its first rdim values at
// pos), as attn_preamble_f32 does: a warp's work.
__device__ void norm_rope(float* dst, const float* src, const float* w, const Phase& p, int pos, int lane) {
    float v[8], ss = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) { // dim <= 256
        int i = lane + 32 * j;
        v[j] = i < p.dim ? ld_cg(src + i) : 0.f;
        ss += v[j] * v[j];
    }
    float inv = rsqrtf(warp_sum(ss) / p.dim + p.eps);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        int i = lane + 32 * j;
        if (i < p.dim) dst[i] = v[j] * inv * (1.f + w[i]);
    }
    __syncwarp();
    int half = p.rdim / 2;
    for (int i = lane; i < half; i += 32) { // a pair a lane: in place
        float f = 1.f / (float)pow((double)p.theta, (double)((float)(2 * i) / (float)p.rdim));
        double ang = (double)((float)pos * f);
        float c = (float)cos(ang), sn = (float)sin(ang);
        float x0 = dst[i], x1 = dst[i + half];
        dst[i] = x0 * c - x1 * sn;
        dst[i + half] = x1 * c + x0 * sn;
    }
    __syncwarp();
}

// attend runs the block's items of an ATTN phase, an item a (query head,
// chunk of keys): the head's query normalised and rotated, its scores
// against the chunk's keys with an online softmax (the warps taking every
// CW-th key, merged at the end), written as the chunk's partial result:
// its max, its sum and its weighted values (dim + 4 floats). The chunk that
// holds the step's own position takes that key and value from the
// projections, and for the first query head of a key head writes them into
// the caches (no block reads that row from a cache in this step).
__device__ void attend(const Phase& p, const Ptr& a, const int* step, float* xs, float* red) {
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int pos = step[0], kvrow = step[1], bs = step[2];
    const int* tab = step + 3;
    Chunks ch = chunks_of(step, p.split);
    int dim = p.dim, group = p.hq / p.hkv, pw = dim + 4;
    float *qs = xs, *ks = xs + dim, *vs = xs + 2 * dim, *accs = xs + 3 * dim; // accs: [CW][dim]
    i64 width = (i64)p.hkv * dim;
    for (int it = blockIdx.x; it < p.hq * ch.S; it += gridDim.x) {
        int h = it / ch.S, c = it % ch.S, kh = h / group;
        int p0 = c * ch.len, p1 = min(ch.n, p0 + ch.len);
        bool own = p0 <= pos && pos < p1;
        const float* kx = a.src + (i64)p.hq * 2 * dim + (i64)kh * dim; // the step's key, then its value rows
        const float* vx = kx + (i64)p.hkv * dim;
        if (warp == 0) {
            norm_rope(qs, a.src + (i64)h * 2 * dim, p.normw, p, pos, lane);
        } else if (warp == 1 && own) {
            norm_rope(ks, kx, p.kw, p, pos, lane);
        } else if (warp == 2 && own) {
            for (int i = lane; i < dim; i += 32) vs[i] = ld_cg(vx + i);
        }
        consumers_sync();
        if (own && h % group == 0)
            for (int i = tid; i < dim; i += NT) {
                i64 o = ((i64)kvrow * p.hkv + kh) * dim + i;
                p.kc[o] = ks[i];
                p.vc[o] = vs[i];
            }
        float qv[8], acc[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int i = lane + 32 * j;
            qv[j] = i < dim ? qs[i] * p.scale : 0.f;
            acc[j] = 0.f;
        }
        float m = NEG_INF, l = 0.f;
        for (int q = p0 + warp; q < p1; q += CW) {
            const float *kr = ks, *vr = vs;
            if (q != pos) {
                i64 row = ((i64)tab[q / bs] * bs + q % bs) * width + (i64)kh * dim;
                kr = p.kc + row, vr = p.vc + row;
            }
            float sc = 0.f, vv[8];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int i = lane + 32 * j;
                vv[j] = i < dim ? vr[i] : 0.f; // in flight with the key
                if (i < dim) sc += qv[j] * kr[i];
            }
            sc = warp_sum(sc);
            float mn = fmaxf(m, sc), corr = expf(m - mn), e = expf(sc - mn);
            l = l * corr + e;
#pragma unroll
            for (int j = 0; j < 8; j++) acc[j] = acc[j] * corr + e * vv[j];
            m = mn;
        }
        if (lane == 0) red[warp] = m, red[CW + warp] = l;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int i = lane + 32 * j;
            if (i < dim) accs[warp * dim + i] = acc[j];
        }
        consumers_sync();
        float M = NEG_INF;
        for (int w = 0; w < CW; w++) M = fmaxf(M, red[w]);
        float* out = a.out + (i64)(h * p.split + c) * pw;
        for (int i = tid; i < dim; i += NT) {
            float sum = 0.f;
            for (int w = 0; w < CW; w++)
                if (red[w] != NEG_INF) sum += accs[w * dim + i] * expf(red[w] - M);
            out[4 + i] = sum;
        }
        if (tid == 0) {
            float L = 0.f;
            for (int w = 0; w < CW; w++)
                if (red[w] != NEG_INF) L += red[CW + w] * expf(red[w] - M);
            out[0] = M, out[1] = L;
        }
        consumers_sync(); // xs and red are written again by the next item
    }
}

// prefetch_range asks L2 for n floats at p, the consumers taking a line each.
__device__ __forceinline__ void prefetch_range(const float* p, i64 n) {
    if (n <= 0) return;
    const char* c = (const char*)p;
    i64 lines = ((((unsigned long long)c & 127) + 4 * n) + 127) / 128;
    for (i64 l = threadIdx.x; l < lines; l += NT) prefetch_l2(c + 128 * l);
}

// prefetch_small asks L2 for the small operands a phase reads after its
// wait (its rows' conv taps and states, gates' parameters),
// which the weight stream evicts from L2 between two steps: issued before
// the wait, their DRAM latency is not on the phase's path.
__device__ void prefetch_small(const Phase& p, const Ptr& a, int slot_bytes) {
    if (p.kind == PH_RULE) {
        prefetch_range(p.alog, p.hv);
        prefetch_range(p.dtb, p.hv);
        return;
    }
    if (p.stage == ST_NORM && p.K > 4 * STAGE_V * NT) prefetch_range(p.normw, p.K); // beyond what early_of reads
    if (p.epi == EP_CONV) {
        Rows r = rows_of(p, slot_bytes);
        int n = min(r.n, p.C - r.r0);
        if (n <= 0) return;
        prefetch_range(p.convw + (i64)r.r0 * p.Kc, (i64)n * p.Kc);
        for (int j = 0; j < p.Kc - 1; j++) prefetch_range(a.convst + (i64)j * p.C + r.r0, n);
    }
}

// decode_layers runs prog (n phases); bar is a barrier count (64 bits: it
// never wraps) that only launches of n phases on this grid share. Dynamic shared memory: x staged
// (4·max_k bytes), then the ring (slots × slot_bytes), then an mbarrier a
// slot for full and one for empty.
extern "C" __global__ void __launch_bounds__(NT + 32, 1) decode_layers(const Phase* prog, int n, unsigned long long* bar, int slot_bytes,
                                                                       int slots, int max_k, int slot, float* x, float* proj, float* core,
                                                                       float* hidden, float* qkv, float* part, const int* step,
                                                                       unsigned long long* times) {
    DYN_SHARED(sm);
    __shared__ float red[2 * 32 * CW];
    __shared__ unsigned long long base;
    float* xs = (float*)sm;
    unsigned char* slot0 = sm + 4 * (i64)max_k;
    unsigned long long* full = (unsigned long long*)(slot0 + (i64)slots * slot_bytes);
    unsigned long long* empty = full + slots;
    Bufs bufs = {x, proj, core, hidden, qkv, part, slot, step};
    int warp = threadIdx.x >> 5;
    if (times && threadIdx.x == 0) {
        unsigned long long* t = times_at(times, n);
        t[T_START] = clk();
        t[G_PASSED] = now_ns();
    }
    if (threadIdx.x == 0) {
        for (int s = 0; s < slots; s++) {
            mbar_init(s_addr(full + s), 32);
            mbar_init(s_addr(empty + s), 1);
        }
        // Every launch of n phases adds grid × n, so this one starts at the
        // multiple of that at or below the count: no block has arrived at
        // its last barrier yet.
        unsigned long long v = *(volatile unsigned long long*)bar;
        base = v - v % (gridDim.x * (unsigned long long)n);
    }
    __syncthreads();
    if (warp == CW) {
        produce(prog, n, bufs, slot0, full, empty, slot_bytes, slots, times);
        return;
    }
    i64 s = 0;
    unsigned long long* t = nullptr;
    for (int i = 0; i < n; i++) {
        const Phase& p = prog[i];
        if (times && threadIdx.x == 0) {
            t = times_at(times, i);
            t[T_START] = clk();
        }
        Ptr a = resolve(p, bufs);
        prefetch_small(p, a, slot_bytes);
        Early early = early_of(p);
        if (i == 0) depend_wait(); // x, the projections and the states come from kernels before
        if (i > 0) {
            if (threadIdx.x == 0) await_count(bar, base + gridDim.x * (unsigned long long)i);
            consumers_sync();
        }
        if (t) t[T_PASSED] = clk(), t[G_PASSED] = now_ns(), t[T_FULL] = 0;
        // The kernel after may launch now, its blocks waiting beside these
        // for this grid's end: its launch is not on the step's path.
        if (i == n - 1) launch_dependents();
        unsigned long long* t_full = times ? times_at(times, i) + T_FULL : nullptr; // every warp's
        if (p.kind == PH_GEMV) {
            stage(p, a, step, xs, red, early);
            if (t) t[T_STAGED] = clk();
            gemv(p, a, xs, slot0, full, empty, s, slot_bytes, slots, t_full);
            s += rows_of(p, slot_bytes).chunks;
        } else if (p.kind == PH_RULE) {
            if (t) t[T_STAGED] = t[T_PASSED];
            rule(p, a, slot0, full, empty, s, slot_bytes, slots, red, t_full);
            s += rule_chunks(p);
        } else {
            if (t) t[T_STAGED] = t[T_PASSED];
            attend(p, a, step, xs, red);
        }
        consumers_sync();
        if (t) t[T_DONE] = clk(), t[G_DONE] = now_ns();
        if (threadIdx.x == 0) red_release(bar);
    }
}
