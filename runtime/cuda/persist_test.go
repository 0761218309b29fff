//go:build linux && amd64

package cuda_test

import (
	"fmt"
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
__device__ __forceinline__ void grid_sync(unsigned* bar, unsigned goal) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(bar, 1u);
        unsigned v;
        do {
            asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
        } while ((int)(v - goal) < 0);
    }
    __syncthreads();
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
    __shared__ unsigned base;
    if (threadIdx.x == 0) {
        unsigned v = *(volatile unsigned*)bar;
        base = v - v % (gridDim.x * (unsigned)n);
    }
    __syncthreads();
    unsigned b0 = base;
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
`

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
// kernel with a grid barrier between two, at several grids and prefetch
// distances; bytes/s is the weights' read rate. GPU only; measured in
// docs/cuda.md.
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
	for _, s := range shapes {
		w, err := mem.Alloc(rt.BF16, s[0], s[1])
		if err != nil {
			b.Skip(err)
		}
		ws = append(ws, w)
		bytes += int64(2 * s[0] * s[1])
	}
	x, err := ctx.Upload(rt.New(rt.F32, 1, 4096))
	if err != nil {
		b.Fatal(err)
	}
	out, _ := mem.Alloc(rt.F32, 1, 248320)
	defer func() {
		for _, t := range append(ws, x, out) {
			mem.Free(t)
		}
	}()

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
	for _, v := range []struct {
		kernel            string
		perSM, ahead, cap int
	}{{"chain", 4, 0, 0}, {"chain", 4, 1, 24}, {"chain", 4, 2, 16}, {"chain", 2, 1, 24},
		{"chain_pre4", 4, 0, 0}, {"chain_pre2", 2, 0, 0}} {
		b.Run(fmt.Sprintf("%s/%dblocks-an-SM/ahead%d", v.kernel, v.perSM, v.ahead), func(b *testing.B) {
			resident := extra.Resident(v.kernel, 256)
			if v.perSM > resident {
				b.Skipf("%d blocks an SM are not resident at once", v.perSM)
			}
			bar, err := ctx.Upload(rt.New(rt.I32, 1, 4)) // the barrier's count, from 0
			if err != nil {
				b.Fatal(err)
			}
			defer ctx.Free(bar)
			b.SetBytes(bytes)
			grid := v.perSM * extra.SMs()
			for b.Loop() {
				args := []uint64{uint64(dops.DevicePtr()), uint64(len(shapes)), uint64(bar.DevicePtr())}
				if v.kernel == "chain" {
					args = append(args, uint64(v.ahead), uint64(v.cap)<<20)
				}
				if err := extra.Launch(v.kernel, grid, 256, 0, args...); err != nil {
					b.Fatal(err)
				}
				if err := ctx.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
