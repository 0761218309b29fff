//go:build linux && amd64

package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	rt "github.com/govllm/govllm/runtime"
	"github.com/govllm/govllm/runtime/backends"
	"github.com/govllm/govllm/runtime/cuda"
)

// persistentChain holds kernels the backend does not have: one launch that
// runs a list of bf16 GEMVs, the grid meeting at a barrier between two
// (all its blocks resident at once). chain has each block ask L2 for its
// share of the weight `ahead` GEMVs on before it computes its share of
// this one; chain_pre4 and chain_pre2 (4 and 2 blocks an SM) have each
// thread load, before the barrier, its weights of the next GEMV's first
// two loop iterations into registers, so that they are in flight while the
// grid meets. BenchmarkPersistentGEMVs sets them against the same GEMVs as
// kernels of a graph, to measure what a persistent decode kernel would gain.
const persistentChain = `
typedef unsigned short u16;
typedef long long i64;
struct Op { float* d; const float* x; const u16* w; int N, K, split, pad; };

__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float dot8(uint4 q, float4 a, float4 b) {
    unsigned u[4] = {q.x, q.y, q.z, q.w};
    float wf[8];
    for (int j = 0; j < 4; j++) {
        wf[2 * j] = __uint_as_float(u[j] << 16);
        wf[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
    }
    return a.x * wf[0] + a.y * wf[1] + a.z * wf[2] + a.w * wf[3] + b.x * wf[4] + b.y * wf[5] + b.z * wf[6] + b.w * wf[7];
}
__device__ __forceinline__ void prefetch_share(const char* p, i64 bytes) {
    i64 lines = (bytes + 127) / 128, per = (lines + gridDim.x - 1) / gridDim.x;
    i64 l0 = (i64)blockIdx.x * per, l1 = min(lines, l0 + per);
    for (i64 l = l0 + threadIdx.x; l < l1; l += blockDim.x) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + l * 128));
}
// await_count spins until the barrier's count reaches goal.
__device__ __forceinline__ void await_count(unsigned* bar, unsigned goal) {
    unsigned v;
    do {
        asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
    } while ((int)(v - goal) < 0);
}
__device__ __forceinline__ void grid_sync(unsigned* bar, unsigned goal) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(bar, 1u);
        await_count(bar, goal);
    }
    __syncthreads();
}

// count_base is where this launch's barrier count starts: every launch of n
// phases adds grid × n to it, so the multiple of that at or below it.
__device__ __forceinline__ unsigned count_base(unsigned* bar, int n) {
    __shared__ unsigned base;
    if (threadIdx.x == 0) {
        unsigned v = *(volatile unsigned*)bar;
        base = v - v % (gridDim.x * (unsigned)n);
    }
    __syncthreads();
    return base;
}

// Share is what a warp of block blk takes of GEMV o: rows n0.. (live of
// them) and units u0..u1 of K/8.
struct Share { int n0, u0, u1, live; };
__device__ __forceinline__ Share share_of(const Op& o, int blk, int warp) {
    int split = o.split, units = o.K / 8, per = (units + split - 1) / split;
    Share s;
    s.n0 = (blk * (8 / split) + warp / split) * 4;
    s.u0 = (warp % split) * per;
    s.u1 = s.n0 < o.N ? min(units, s.u0 + per) : s.u0;
    s.live = min(4, o.N - s.n0);
    return s;
}
__device__ __forceinline__ int blocks_of(const Op& o) { return (((o.N + 3) / 4) * o.split + 7) / 8; }

// gemv_blocks computes the block's blocks of GEMV o, 4 rows a warp; the
// first of them starts from pq, its first two iterations' weights, where
// pre is set.
__device__ __forceinline__ void gemv_blocks(const Op& o, float (*part)[4], const uint4 (*pq)[4], bool pre) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nblocks = blocks_of(o);
    for (int blk = blockIdx.x; blk < nblocks; blk += gridDim.x) {
        Share s = share_of(o, blk, warp);
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        int k = s.u0 + lane;
        if (pre && blk == blockIdx.x) {
#pragma unroll
            for (int j = 0; j < 2; j++)
                if (k + 32 * j < s.u1) {
                    const float4* xr = (const float4*)(o.x + (i64)(k + 32 * j) * 8);
                    float4 a = xr[0], b = xr[1];
#pragma unroll
                    for (int r = 0; r < 4; r++)
                        if (r < s.live) acc[r] += dot8(pq[j][r], a, b);
                }
            k += 64;
        }
#pragma unroll 2
        for (; k < s.u1; k += 32) {
            const float4* xr = (const float4*)(o.x + (i64)k * 8);
            float4 a = xr[0], b = xr[1];
            uint4 q[4];
#pragma unroll
            for (int r = 0; r < 4; r++)
                if (r < s.live) q[r] = ld_stream((const uint4*)(o.w + (i64)(s.n0 + r) * o.K) + k);
#pragma unroll
            for (int r = 0; r < 4; r++)
                if (r < s.live) acc[r] += dot8(q[r], a, b);
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            float v = warp_sum(acc[r]);
            if (lane == 0) part[warp][r] = v;
        }
        __syncthreads();
        if (warp % o.split == 0 && lane < s.live) {
            float sum = 0.f;
            for (int j = 0; j < o.split; j++) sum += part[warp + j][lane];
            o.d[s.n0 + lane] = sum;
        }
        __syncthreads();
    }
}

// chain_t runs the list; PRE loads the next GEMV's first weights before
// each barrier, ahead > 0 prefetches into L2 instead (up to cap bytes a GEMV).
template <bool PRE>
__device__ __forceinline__ void chain_t(const Op* ops, int n, unsigned* bar, int ahead, i64 cap) {
    __shared__ float part[8][4];
    unsigned b0 = count_base(bar, n);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint4 pq[2][4];
    bool pre = false;
    for (int a = 0; a < ahead && a < n; a++) prefetch_share((const char*)ops[a].w, min(cap, 2 * (i64)ops[a].N * ops[a].K));
    for (int i = 0; i < n; i++) {
        if (ahead > 0 && i + ahead < n) {
            const Op& q = ops[i + ahead];
            prefetch_share((const char*)q.w, min(cap, 2 * (i64)q.N * q.K));
        }
        gemv_blocks(ops[i], part, pq, pre);
        pre = false;
        if (PRE && i + 1 < n && blockIdx.x < blocks_of(ops[i + 1])) {
            Op q = ops[i + 1];
            Share s = share_of(q, blockIdx.x, warp);
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    if (r < s.live && s.u0 + lane + 32 * j < s.u1) pq[j][r] = ld_stream((const uint4*)(q.w + (i64)(s.n0 + r) * q.K) + s.u0 + lane + 32 * j);
            pre = true;
        }
        grid_sync(bar, b0 + gridDim.x * (unsigned)(i + 1));
    }
}
extern "C" __global__ void __launch_bounds__(256, 4) chain(const Op* ops, int n, unsigned* bar, int ahead, i64 cap) { chain_t<false>(ops, n, bar, ahead, cap); }
extern "C" __global__ void __launch_bounds__(256, 4) chain_pre4(const Op* ops, int n, unsigned* bar) { chain_t<true>(ops, n, bar, 0, 0); }
extern "C" __global__ void __launch_bounds__(256, 2) chain_pre2(const Op* ops, int n, unsigned* bar) { chain_t<true>(ops, n, bar, 0, 0); }

// barriers is n grid barriers and nothing else: what a phase of a
// persistent kernel costs before any work.
extern "C" __global__ void barriers(unsigned* bar, int n) {
    unsigned b0 = count_base(bar, n);
    for (int i = 0; i < n; i++) grid_sync(bar, b0 + gridDim.x * (unsigned)(i + 1));
}

__device__ __forceinline__ unsigned s_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
__device__ __forceinline__ void mbar_init(unsigned a, int count) { asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(a), "r"(count) : "memory"); }
__device__ __forceinline__ void mbar_wait(unsigned a, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(a), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void mbar_arrive(unsigned a) { asm volatile("{ .reg .b64 s; mbarrier.arrive.shared.b64 s, [%0]; }" ::"r"(a) : "memory"); }
__device__ __forceinline__ void cp16(unsigned dst, const void* src) { asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory"); }
__device__ __forceinline__ void cp_arrive(unsigned a) { asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(a) : "memory"); }
__device__ __forceinline__ void consumers_sync(int threads) { asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory"); }
__device__ __forceinline__ float4 ld_cg4(const float4* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

// Rows is a block's share of a GEMV in ring: rows r0..r0+n, in chunks of
// rpc whole rows (one ring slot each: a row must fit in a slot).
struct Rows { int r0, n, rpc, chunks; };
__device__ __forceinline__ Rows rows_of(const Op& o, int slot_bytes) {
    Rows r;
    r.r0 = (int)((i64)o.N * blockIdx.x / gridDim.x);
    r.n = (int)((i64)o.N * (blockIdx.x + 1) / gridDim.x) - r.r0;
    r.rpc = max(1, slot_bytes / (2 * o.K));
    r.chunks = (r.n + r.rpc - 1) / r.rpc;
    return r;
}

// ring runs the list with its weights streamed apart from the barriers: one
// block an SM, whose last warp copies the block's rows of every GEMV, in
// order, into a ring of shared-memory slots (cp.async, an mbarrier a slot
// full and one empty), held back only by slots not yet read; the other
// warps wait for the grid barrier, stage x in shared memory and take the
// GEMV's chunks in turn. So the weight stream runs ahead across barriers by
// up to the ring's size. Flags, to take the form apart: RING_UNORDERED
// skips the wait at the barrier (the stream and the compute alone; every
// GEMV writes the same output, so it is not checked), RING_X_DIRECT
// reads x from L2 in the dot products instead of staging it, RING_RELEASE
// arrives with one release add instead of a fence and an atomic.
#define RING_UNORDERED 1
#define RING_X_DIRECT 2
#define RING_RELEASE 4
extern "C" __global__ void __launch_bounds__(544, 1) ring(const Op* ops, int n, unsigned* bar, int slot_bytes, int slots, int max_k, int flags) {
    extern __shared__ __align__(16) unsigned char sm[];
    float* xs = (float*)sm;
    unsigned char* slot0 = sm + 4 * max_k;
    unsigned long long* full = (unsigned long long*)(slot0 + (i64)slots * slot_bytes);
    unsigned long long* empty = full + slots;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, cw = blockDim.x / 32 - 1, nt = 32 * cw;
    if (threadIdx.x == 0)
        for (int s = 0; s < slots; s++) {
            mbar_init(s_addr(full + s), 32);
            mbar_init(s_addr(empty + s), 1);
        }
    unsigned b0 = count_base(bar, n); // its barrier also publishes the mbarriers
    if (warp == cw) {
        i64 s = 0;
        for (int i = 0; i < n; i++) {
            Op o = ops[i];
            Rows r = rows_of(o, slot_bytes);
            for (int c = 0; c < r.chunks; c++, s++) {
                int slot = (int)(s % slots);
                mbar_wait(s_addr(empty + slot), ((unsigned)(s / slots) & 1u) ^ 1u);
                int row = r.r0 + c * r.rpc, units = min(r.rpc, r.n - c * r.rpc) * (o.K / 8);
                const uint4* src = (const uint4*)(o.w + (i64)row * o.K);
                unsigned dst = s_addr(slot0 + (i64)slot * slot_bytes);
                for (int u = lane; u < units; u += 32) cp16(dst + 16 * u, src + u);
                cp_arrive(s_addr(full + slot));
            }
        }
        asm volatile("cp.async.wait_all;" ::: "memory");
        return;
    }
    i64 s = 0;
    for (int i = 0; i < n; i++) {
        Op o = ops[i];
        Rows r = rows_of(o, slot_bytes);
        if (i > 0 && !(flags & RING_UNORDERED)) {
            if (threadIdx.x == 0) await_count(bar, b0 + gridDim.x * (unsigned)i);
            consumers_sync(nt);
        }
        const float4* xv = (const float4*)xs;
        if (flags & RING_X_DIRECT) {
            xv = (const float4*)o.x;
        } else {
            for (int k = threadIdx.x; k < o.K / 4; k += nt) ((float4*)xs)[k] = ld_cg4((const float4*)o.x + k);
            consumers_sync(nt);
        }
        int units = o.K / 8;
        for (int c = warp; c < r.chunks; c += cw) {
            i64 sc = s + c;
            int slot = (int)(sc % slots);
            mbar_wait(s_addr(full + slot), (unsigned)(sc / slots) & 1u);
            const uint4* wq = (const uint4*)(slot0 + (i64)slot * slot_bytes);
            int row = r.r0 + c * r.rpc, rows = min(r.rpc, r.n - c * r.rpc);
            for (int g = 0; g < rows; g += 4) {
                float acc[4] = {0.f, 0.f, 0.f, 0.f};
                int live = min(4, rows - g);
                for (int u = lane; u < units; u += 32) {
                    float4 a, b;
                    if (flags & RING_X_DIRECT) {
                        a = ld_cg4(xv + 2 * u), b = ld_cg4(xv + 2 * u + 1);
                    } else {
                        a = xv[2 * u], b = xv[2 * u + 1];
                    }
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        if (q < live) acc[q] += dot8(wq[(g + q) * units + u], a, b);
                }
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float v = warp_sum(acc[q]);
                    if (lane == 0 && q < live) o.d[row + g + q] = v;
                }
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(s_addr(empty + slot));
        }
        s += r.chunks;
        consumers_sync(nt);
        if (threadIdx.x == 0) {
            if (flags & RING_RELEASE) {
                asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
            } else {
                __threadfence();
                atomicAdd(bar, 1u);
            }
        }
    }
}

// fill_bf16 writes a hash of each index as a bf16 in [-0.05, 0.05).
extern "C" __global__ void fill_bf16(u16* w, i64 n, unsigned seed) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        unsigned h = ((unsigned)i ^ seed) * 2654435761u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        w[i] = (u16)(__float_as_uint(((float)(h & 0xffff) / 65536.f - 0.5f) * 0.1f) >> 16);
    }
}

`

// TestPersistentKernelsCompile compiles the benchmark's kernels with
// NVRTC alone, as TestKernelsCompile does kernels.cu, so that their PTX is
// checked without a GPU.
func TestPersistentKernelsCompile(t *testing.T) {
	for _, arch := range [][2]int{{9, 0}, {8, 0}} {
		_, err := cuda.CompileSource(persistentChain, arch[0], arch[1])
		if errors.Is(err, cuda.ErrUnavailable) || err != nil && strings.Contains(err.Error(), "cudaemu") {
			t.Skipf("no NVRTC here: %v", err)
		}
		if err != nil {
			t.Fatalf("sm_%d%d: %v", arch[0], arch[1], err)
		}
	}
}

// decodeGEMVShapes are the bf16 GEMVs of a Qwen3.5-0.8B decode step, in
// order: per layer the DeltaNet input projection, its output projection,
// the MLP's gate and up, its down; then the lm_head.
func decodeGEMVShapes() [][2]int {
	var s [][2]int
	for range 24 {
		s = append(s, [2]int{8224, 1024}, [2]int{1024, 2048}, [2]int{7168, 1024}, [2]int{1024, 3584})
	}
	return append(s, [2]int{248320, 1024})
}

// BenchmarkPersistentGEMVs times a decode step's 97 bf16 GEMVs (1.4 GB)
// as kernels of a CUDA graph (what decode runs now) and as one persistent
// kernel with a grid barrier between two: at several grids and prefetch
// distances, and (ring) with the weights streamed into shared memory ahead
// of the barriers, and ring taken apart (without the barriers' waits, with
// x read from L2 instead of staged); bytes/s is the weights' read rate.
// Each persistent form's lm_head output must match the graph's. barriers
// times the grid barriers alone. GPU only; measured in docs/cuda.md.
func BenchmarkPersistentGEMVs(b *testing.B) {
	be, err := backends.New(rt.CUDA)
	if err != nil {
		b.Skip(err)
	}
	ctx, err := cuda.Open()
	if err != nil {
		b.Skip(err)
	}
	extra, err := cuda.LoadExtra(persistentChain)
	if err != nil {
		b.Skipf("the persistent kernel does not compile here: %v", err)
	}
	mem := be.Memory()
	shapes := decodeGEMVShapes()
	var ws []*rt.Tensor
	var bytes int64
	for i, s := range shapes {
		w, err := mem.Alloc(rt.BF16, s[0], s[1])
		if err != nil {
			b.Skip(err)
		}
		ws = append(ws, w)
		bytes += int64(2 * s[0] * s[1])
		if err := extra.Launch("fill_bf16", 1024, 256, 0, uint64(w.DevicePtr()), uint64(s[0]*s[1]), uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
	hx := rt.New(rt.F32, 1, 4096)
	for i := range hx.F32() {
		hx.F32()[i] = float32(i%97)/97 - 0.5
	}
	x, err := ctx.Upload(hx)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := mem.Alloc(rt.F32, 1, 248320)
	defer func() {
		for _, t := range append(ws, x, out) {
			mem.Free(t)
		}
	}()
	want, got := rt.New(rt.F32, 1, 248320), rt.New(rt.F32, 1, 248320)
	check := func(b *testing.B) {
		if err := ctx.Download(got, out); err != nil {
			b.Fatal(err)
		}
		var scale, worst float64
		for i, v := range want.F32() {
			scale = max(scale, math.Abs(float64(v)))
			worst = max(worst, math.Abs(float64(got.F32()[i]-v)))
		}
		if !(worst <= 1e-4*scale) || scale == 0 {
			b.Fatalf("lm_head output off by up to %g (largest value %g)", worst, scale)
		}
	}

	b.Run("graph", func(b *testing.B) {
		b.SetBytes(bytes)
		run := func() error {
			for i, w := range ws {
				xs, _ := x.Slice(1, 0, shapes[i][1])
				os, _ := out.Slice(1, 0, shapes[i][0])
				if err := be.MatMul(os, xs, w); err != nil {
					return err
				}
			}
			return nil
		}
		for b.Loop() {
			stepAndWait(b, mem.(rt.Stepper), run)
		}
		if err := ctx.Download(want, out); err != nil {
			b.Fatal(err)
		}
	})

	ops := rt.New(rt.I32, len(shapes), 10) // struct Op: 3 pointers, 4 ints
	for i, s := range shapes {
		row := ops.I32()[10*i : 10*i+10]
		put := func(j int, v uint64) { row[j], row[j+1] = int32(uint32(v)), int32(uint32(v>>32)) }
		put(0, uint64(out.DevicePtr()))
		put(2, uint64(x.DevicePtr()))
		put(4, uint64(ws[i].DevicePtr()))
		row[6], row[7], row[8] = int32(s[0]), int32(s[1]), int32(cuda.GEMVSplit(s[0], s[1]))
	}
	dops, err := ctx.Upload(ops)
	if err != nil {
		b.Fatal(err)
	}
	defer ctx.Free(dops)
	// Each form counts its barriers from 0 on a counter of its own: a
	// kernel finds its base as the multiple of grid × GEMVs below the count.
	newBar := func(b *testing.B) *rt.Tensor {
		bar, err := ctx.Upload(rt.New(rt.I32, 1, 4))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ctx.Free(bar) })
		return bar
	}
	launch := func(b *testing.B, kernel string, grid, block, shared int, args ...uint64) {
		if err := extra.Launch(kernel, grid, block, shared, args...); err != nil {
			b.Fatal(err)
		}
		if err := ctx.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	for _, v := range []struct {
		kernel            string
		perSM, ahead, cap int
	}{{"chain", 4, 0, 0}, {"chain", 4, 1, 24}, {"chain", 4, 2, 16}, {"chain", 2, 1, 24},
		{"chain_pre4", 4, 0, 0}, {"chain_pre2", 2, 0, 0}} {
		b.Run(fmt.Sprintf("%s/%dblocks-an-SM/ahead%d", v.kernel, v.perSM, v.ahead), func(b *testing.B) {
			if v.perSM > extra.Resident(v.kernel, 256) {
				b.Skipf("%d blocks an SM are not resident at once", v.perSM)
			}
			b.SetBytes(bytes)
			bar := newBar(b)
			args := []uint64{uint64(dops.DevicePtr()), uint64(len(shapes)), uint64(bar.DevicePtr())}
			if v.kernel == "chain" {
				args = append(args, uint64(v.ahead), uint64(v.cap)<<20)
			}
			for b.Loop() {
				launch(b, v.kernel, v.perSM*extra.SMs(), 256, 0, args...)
			}
			check(b)
		})
	}
	const maxK = 4096
	const unordered, xDirect, release = 1, 2, 4 // ring's flags
	for _, v := range []struct{ warps, slotKiB, slots, flags int }{{8, 8, 24, 0}, {8, 8, 24, unordered}, {8, 8, 24, xDirect}, {8, 8, 24, release}, {12, 8, 24, release},
		{8, 8, 24, unordered | xDirect}, {8, 8, 12, 0}, {12, 8, 24, 0}, {16, 8, 24, 0}, {8, 16, 12, 0}} {
		name := fmt.Sprintf("ring/%dwarps/%dx%dKiB", v.warps, v.slots, v.slotKiB)
		if v.flags&unordered != 0 {
			name += "/unordered"
		}
		if v.flags&xDirect != 0 {
			name += "/x-from-L2"
		}
		if v.flags&release != 0 {
			name += "/release"
		}
		b.Run(name, func(b *testing.B) {
			if v.warps > v.slots {
				// A warp could wait on a slot two fills ahead, which the
				// mbarrier's parity cannot tell from the fill before.
				b.Skip("more consumer warps than slots")
			}
			b.SetBytes(bytes)
			shared := 4*maxK + v.slots*(v.slotKiB<<10+16)
			bar := newBar(b)
			args := []uint64{uint64(dops.DevicePtr()), uint64(len(shapes)), uint64(bar.DevicePtr()), uint64(v.slotKiB << 10), uint64(v.slots), maxK, uint64(v.flags)}
			if err := extra.Launch("ring", extra.SMs(), 32*(v.warps+1), shared, args...); err != nil {
				b.Skipf("%d KiB of shared memory a block: %v", shared>>10, err) // more than pre-Hopper GPUs have
			}
			for b.Loop() {
				launch(b, "ring", extra.SMs(), 32*(v.warps+1), shared, args...)
			}
			if v.flags&unordered == 0 { // without the barriers an earlier GEMV's late block may overwrite the output
				check(b)
			}
		})
	}
	for _, perSM := range []int{1, 4} {
		b.Run(fmt.Sprintf("barriers/%dblocks-an-SM", perSM), func(b *testing.B) {
			bar := newBar(b)
			for b.Loop() {
				launch(b, "barriers", perSM*extra.SMs(), 256, 0, uint64(bar.DevicePtr()), uint64(len(shapes)))
			}
		})
	}
}

// TestDecodeLayersCompiles compiles persistent.cu (decode_layers) with
// NVRTC alone, for the architectures it runs on.
func TestDecodeLayersCompiles(t *testing.T) {
	for _, arch := range [][2]int{{9, 0}, {8, 0}} {
		_, err := cuda.CompileSource(cuda.PersistentSource(), arch[0], arch[1])
		if errors.Is(err, cuda.ErrUnavailable) || err != nil && strings.Contains(err.Error(), "cudaemu") {
			t.Skipf("no NVRTC here: %v", err)
		}
		if err != nil {
			t.Fatalf("sm_%d%d: %v", arch[0], arch[1], err)
		}
	}
}
