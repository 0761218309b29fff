// The parts of libcuda, NVRTC and cuBLAS that runtime/cuda binds, served
// on the CPU. Work runs when it is issued (streams are in order, so the
// order is the one the GPU would keep); a stream being captured collects it
// into a graph instead, replayed by cuGraphLaunch. Device memory is host
// memory that ends at a guard page, so a kernel reading or writing past the
// end of a buffer faults instead of passing.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "emu_host.h"

#define API extern "C" __attribute__((visibility("default")))

namespace {

enum : int {
    OK = 0,
    errInvalidValue = 1,
    errOutOfMemory = 2,
    errInvalidImage = 200,
    errInvalidHandle = 400,
    errNotFound = 500,
    errIllegalAddress = 700,
    errOutOfResources = 701,
    errLaunchFailed = 719,
};

const char* errorName(int code) {
    switch (code) {
    case OK: return "CUDA_SUCCESS";
    case errInvalidValue: return "CUDA_ERROR_INVALID_VALUE";
    case errOutOfMemory: return "CUDA_ERROR_OUT_OF_MEMORY";
    case errInvalidImage: return "CUDA_ERROR_INVALID_IMAGE";
    case errInvalidHandle: return "CUDA_ERROR_INVALID_HANDLE";
    case errNotFound: return "CUDA_ERROR_NOT_FOUND";
    case errIllegalAddress: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case errOutOfResources: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case errLaunchFailed: return "CUDA_ERROR_LAUNCH_FAILED";
    }
    return nullptr;
}

std::recursive_mutex apiMu; // one call at a time, as one GPU queue
int sticky = OK;            // a failed kernel poisons the context, as on a GPU

int fail(int code, const char* fmt, const std::string& what) {
    fprintf(stderr, "cudaemu: ");
    fprintf(stderr, fmt, what.c_str());
    fprintf(stderr, "\n");
    return code;
}

// Device memory: each buffer ends at a PROT_NONE page.
struct Buffer {
    char* map;
    size_t mapBytes, bytes;
};
std::map<uintptr_t, Buffer> buffers; // by start
size_t used = 0;

size_t totalMem() {
    static size_t n = [] {
        const char* s = getenv("CUDAEMU_MEM_GIB");
        return (size_t)(s ? atof(s) * (1 << 30) : 8.0 * (1 << 30));
    }();
    return n;
}

// inside reports whether [p, p+n) lies in one device buffer.
bool inside(uintptr_t p, size_t n) {
    auto it = buffers.upper_bound(p);
    if (it == buffers.begin()) return false;
    --it;
    return p + n <= it->first + it->second.bytes;
}

struct Func {
    const emu::Kernel* kernel;
    int maxDynShared = 48 << 10;
};

struct GemmCall {
    int ta, tb, m, n, k;
    float alpha, beta;
    const void* a;
    int atype, lda;
    const void* b;
    int btype, ldb;
    float* c;
    int ldc;
};

struct Node {
    enum { kernel, copy, gemm } kind;
    Func* fn = nullptr;
    std::vector<char> args;
    uint3 grid{}, dim{};
    unsigned shared = 0;
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
    GemmCall g{};
};

struct Graph {
    std::vector<Node> nodes;
};

struct Stream {
    Graph* capture = nullptr;
};
std::set<Stream*> streams;

struct Blas {
    Stream* stream = nullptr;
};

Graph* capturing(void* s) {
    if (!s) return nullptr;
    Stream* st = (Stream*)s;
    return streams.count(st) ? st->capture : nullptr;
}

// CUDAEMU_PROFILE=FILE keeps the emulation's time by kernel in FILE,
// rewritten at most once a second (a Go program exits without running
// C++'s destructors).
const char* profilePath = getenv("CUDAEMU_PROFILE");
std::map<std::string, std::pair<double, long>> spent; // seconds, calls
uint64_t lastWrite;

uint64_t nowNs();

void account(const char* name, uint64_t since) {
    uint64_t now = nowNs();
    auto& e = spent[name];
    e.first += (double)(now - since) / 1e9;
    e.second++;
    if (now - lastWrite < 1000000000ull) return;
    lastWrite = now;
    std::vector<std::pair<double, std::string>> rows;
    for (auto& [k, v] : spent) rows.push_back({v.first, k});
    std::sort(rows.rbegin(), rows.rend());
    if (FILE* f = fopen(profilePath, "w")) {
        for (auto& [t, k] : rows) fprintf(f, "%9.3f s %8ld calls  %s\n", t, spent[k].second, k.c_str());
        fclose(f);
    }
}

int runKernel(Func* fn, const char* args, uint3 grid, uint3 dim, unsigned shared) {
    uint64_t t0 = profilePath ? nowNs() : 0;
    std::string why = emu::run(fn->kernel, args, grid, dim, shared);
    if (profilePath) account(fn->kernel->name, t0);
    if (!why.empty()) sticky = fail(errLaunchFailed, "%s", why);
    return sticky;
}

float load(const void* p, int type, size_t i) {
    switch (type) {
    case 0: return ((const float*)p)[i];
    case 2: return emu_f16_to_f32(((const uint16_t*)p)[i]);
    case 14: return __uint_as_float((unsigned)((const uint16_t*)p)[i] << 16);
    }
    return 0;
}

// gemm is cublasGemmEx in column-major terms: C = α·op(A)·op(B) + β·C,
// C m × n, accumulated in f32.
void gemm(const GemmCall& g) {
    std::vector<float> a((size_t)g.m * g.k), b((size_t)g.k * g.n); // op(A) row-major by i, op(B) by j
    for (int i = 0; i < g.m; i++)
        for (int p = 0; p < g.k; p++) a[(size_t)i * g.k + p] = load(g.a, g.atype, g.ta ? p + (size_t)i * g.lda : i + (size_t)p * g.lda);
    for (int j = 0; j < g.n; j++)
        for (int p = 0; p < g.k; p++) b[(size_t)j * g.k + p] = load(g.b, g.btype, g.tb ? j + (size_t)p * g.ldb : p + (size_t)j * g.ldb);
    unsigned nt = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < nt; t++)
        ts.emplace_back([&, t] {
            for (int j = t; j < g.n; j += nt)
                for (int i = 0; i < g.m; i++) {
                    const float *ar = &a[(size_t)i * g.k], *bc = &b[(size_t)j * g.k];
                    float s = 0;
                    for (int p = 0; p < g.k; p++) s += ar[p] * bc[p];
                    float* c = &g.c[i + (size_t)j * g.ldc];
                    *c = g.alpha * s + (g.beta != 0 ? g.beta * *c : 0.f);
                }
        });
    for (auto& t : ts) t.join();
}

int replay(const Graph& g) {
    for (const Node& n : g.nodes) {
        if (sticky) return sticky;
        switch (n.kind) {
        case Node::kernel: runKernel(n.fn, n.args.data(), n.grid, n.dim, n.shared); break;
        case Node::copy: memcpy(n.dst, n.src, n.bytes); break;
        case Node::gemm: {
            uint64_t t0 = profilePath ? nowNs() : 0;
            gemm(n.g);
            if (profilePath) account("cublasGemmEx", t0);
            break;
        }
        }
    }
    return sticky;
}

int launch(Func* fn, uint3 grid, uint3 dim, unsigned shared, void* stream, void** params) {
    if (sticky) return sticky;
    const char* name = fn->kernel->name;
    unsigned threads = dim.x * dim.y * dim.z;
    if (threads == 0 || threads > 1024 || dim.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535)
        return fail(errInvalidValue, "%s", std::string(name) + ": launch of grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) +
                                               "," + std::to_string(grid.z) + ") × block of " + std::to_string(threads) + " threads");
    if ((int)shared > fn->maxDynShared)
        return fail(errOutOfResources, "%s", std::string(name) + ": " + std::to_string(shared) + " bytes of dynamic shared memory, over the " +
                                                 std::to_string(fn->maxDynShared) + " allowed (cuFuncSetAttribute)");
    Node n{Node::kernel};
    n.fn = fn;
    n.args.resize(fn->kernel->argBytes);
    fn->kernel->pack(params, n.args.data());
    n.grid = grid;
    n.dim = dim;
    n.shared = shared;
    if (Graph* g = capturing(stream)) {
        g->nodes.push_back(std::move(n));
        return OK;
    }
    return runKernel(fn, n.args.data(), grid, dim, shared);
}

uint64_t nowNs() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

uint64_t fnv(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// The "image" NVRTC hands out: a marker naming the source it was built
// from, kernels.cu or (persistent) persistent.cu.
std::string image(bool persistent = false) {
    char buf[64];
    if (persistent)
        snprintf(buf, sizeof buf, "govllm-cudaemu-persistent %016llx", (unsigned long long)fnv(emu::persistentSource, emu::persistentSourceLen));
    else
        snprintf(buf, sizeof buf, "govllm-cudaemu %016llx", (unsigned long long)fnv(emu::kernelsSource, emu::kernelsSourceLen));
    return buf;
}

} // namespace

#define LOCK std::lock_guard<std::recursive_mutex> lock(apiMu)

// --- the driver ---

API int cuInit(unsigned) { return OK; }
API int cuDriverGetVersion(int* v) {
    *v = 12080;
    return OK;
}
API int cuDeviceGetCount(int* n) {
    *n = 1;
    return OK;
}
API int cuDeviceGet(int* dev, int ordinal) {
    *dev = 0;
    return ordinal == 0 ? OK : errInvalidValue;
}
API int cuDeviceGetName(char* name, int n, int) {
    snprintf(name, n, "cudaemu (kernels.cu on the CPU, as sm_90)");
    return OK;
}
API int cuDeviceGetAttribute(int* v, int attr, int) {
    switch (attr) {
    case 1: *v = 1024; break;     // max threads per block
    case 8: *v = 48 << 10; break; // shared memory per block
    case 16: *v = 132; break;     // multiprocessors, as the H200
    case 75: *v = 9; break;       // compute capability
    case 76: *v = 0; break;
    case 97: *v = 232448; break; // opt-in shared memory per block
    default: *v = 0;
    }
    return OK;
}
API int cuDeviceTotalMem_v2(size_t* n, int) {
    *n = totalMem();
    return OK;
}
API int cuDevicePrimaryCtxRetain(void** ctx, int) {
    *ctx = (void*)&apiMu;
    return OK;
}
API int cuCtxSetCurrent(void*) { return OK; }
API int cuCtxSynchronize() {
    LOCK;
    return sticky;
}
API int cuGetErrorName(int code, const char** s) {
    *s = errorName(code);
    return *s ? OK : errInvalidValue;
}

API int cuMemAlloc_v2(uintptr_t* p, size_t n) {
    LOCK;
    if (sticky) return sticky;
    if (used + n > totalMem()) return errOutOfMemory;
    size_t bytes = (n + 255) & ~(size_t)255, page = 4096;
    size_t mapBytes = (bytes + page - 1) / page * page + page;
    char* m = (char*)mmap(nullptr, mapBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return errOutOfMemory;
    mprotect(m + mapBytes - page, page, PROT_NONE);
    uintptr_t start = (uintptr_t)(m + mapBytes - page - bytes);
    buffers[start] = {m, mapBytes, bytes};
    used += bytes;
    *p = start;
    return OK;
}
API int cuMemFree_v2(uintptr_t p) {
    LOCK;
    auto it = buffers.find(p);
    if (it == buffers.end()) return fail(errInvalidValue, "cuMemFree of %s, not a buffer's start", std::to_string(p));
    munmap(it->second.map, it->second.mapBytes);
    used -= it->second.bytes;
    buffers.erase(it);
    return sticky;
}
API int cuMemGetInfo_v2(size_t* free, size_t* total) {
    LOCK;
    *total = totalMem();
    *free = totalMem() - used;
    return sticky;
}
API int cuMemHostAlloc(void** p, size_t n, unsigned) {
    *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    return *p ? OK : errOutOfMemory;
}
API int cuMemFreeHost(void* p) {
    free(p);
    return OK;
}

static int checkDevice(const char* call, uintptr_t p, size_t n) {
    if (n == 0 || inside(p, n)) return OK;
    return fail(errInvalidValue, "%s", std::string(call) + ": " + std::to_string(n) + " bytes at device address " + std::to_string(p) +
                                           " are not within one buffer");
}

API int cuMemcpyHtoD_v2(uintptr_t dst, const void* src, size_t n) {
    LOCK;
    if (sticky) return sticky;
    if (int e = checkDevice("cuMemcpyHtoD", dst, n)) return e;
    memcpy((void*)dst, src, n);
    return OK;
}
// An asynchronous copy, or a copy node of the graph being captured.
static int copyAsync(void* dst, const void* src, size_t n, void* stream) {
    if (Graph* g = capturing(stream)) {
        Node c{Node::copy};
        c.dst = dst;
        c.src = src;
        c.bytes = n;
        g->nodes.push_back(std::move(c));
        return OK;
    }
    memcpy(dst, src, n);
    return OK;
}
API int cuMemcpyHtoDAsync_v2(uintptr_t dst, const void* src, size_t n, void* stream) {
    LOCK;
    if (sticky) return sticky;
    if (int e = checkDevice("cuMemcpyHtoDAsync", dst, n)) return e;
    return copyAsync((void*)dst, src, n, stream);
}
API int cuMemcpyDtoH_v2(void* dst, uintptr_t src, size_t n) {
    LOCK;
    if (sticky) return sticky;
    if (int e = checkDevice("cuMemcpyDtoH", src, n)) return e;
    memcpy(dst, (void*)src, n);
    return OK;
}
API int cuMemcpyDtoD_v2(uintptr_t dst, uintptr_t src, size_t n) {
    LOCK;
    if (sticky) return sticky;
    if (int e = checkDevice("cuMemcpyDtoD", dst, n)) return e;
    if (int e = checkDevice("cuMemcpyDtoD", src, n)) return e;
    memmove((void*)dst, (void*)src, n);
    return OK;
}
API int cuMemcpyDtoHAsync_v2(void* dst, uintptr_t src, size_t n, void* stream) {
    LOCK;
    if (sticky) return sticky;
    if (int e = checkDevice("cuMemcpyDtoHAsync", src, n)) return e;
    return copyAsync(dst, (const void*)src, n, stream);
}
API int cuMemsetD8_v2(uintptr_t dst, unsigned char v, size_t n) {
    LOCK;
    if (sticky) return sticky;
    if (int e = checkDevice("cuMemsetD8", dst, n)) return e;
    memset((void*)dst, v, n);
    return OK;
}

API int cuStreamCreate(void** s, unsigned) {
    LOCK;
    Stream* st = new Stream;
    streams.insert(st);
    *s = st;
    return OK;
}
API int cuStreamSynchronize(void*) {
    LOCK;
    return sticky;
}
API int cuStreamBeginCapture_v2(void* s, int) {
    LOCK;
    Stream* st = (Stream*)s;
    if (!streams.count(st) || st->capture) return errInvalidValue;
    st->capture = new Graph;
    return sticky;
}
API int cuStreamEndCapture(void* s, void** graph) {
    LOCK;
    Stream* st = (Stream*)s;
    if (!streams.count(st) || !st->capture) return errInvalidValue;
    *graph = st->capture;
    st->capture = nullptr;
    return sticky;
}
API int cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
    LOCK;
    *exec = new Graph(*(Graph*)graph);
    return sticky;
}
API int cuGraphLaunch(void* exec, void*) {
    LOCK;
    if (sticky) return sticky;
    return replay(*(Graph*)exec);
}
API int cuGraphDestroy(void* g) {
    LOCK;
    delete (Graph*)g;
    return OK;
}
API int cuGraphExecDestroy(void* g) {
    LOCK;
    delete (Graph*)g;
    return OK;
}

API int cuModuleLoadData(void** mod, const void* img) {
    LOCK;
    if (image() != (const char*)img && image(true) != (const char*)img)
        return fail(errInvalidImage, "%s", "cuModuleLoadData: the image is not this build's (" + image() + "); rebuild cudaemu from this kernels.cu");
    *mod = (void*)&buffers;
    return OK;
}
API int cuModuleGetFunction(void** fn, void*, const char* name) {
    LOCK;
    static std::map<std::string, Func*> funcs;
    auto it = funcs.find(name);
    if (it == funcs.end()) {
        const emu::Kernel* k = emu::findKernel(name);
        if (!k) k = emu::findPersistentKernel(name);
        if (!k) return errNotFound;
        it = funcs.emplace(name, new Func{k}).first;
    }
    *fn = it->second;
    return OK;
}
API int cuFuncSetAttribute(void* fn, int attr, int v) {
    LOCK;
    if (attr == 8) {
        if (v > 232448) return errInvalidValue;
        ((Func*)fn)->maxDynShared = v;
    }
    return OK;
}
API int cuFuncGetAttribute(int* v, int attr, void* fn) {
    LOCK;
    switch (attr) {
    case 0: *v = 1024; break; // max threads per block
    case 4: *v = 64; break;   // registers a thread
    case 8: *v = ((Func*)fn)->maxDynShared; break;
    default: *v = 0;
    }
    return OK;
}
// As a kernel of 64 registers a thread on the H200: 64K registers an SM.
API int cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, void*, int block, size_t shared) {
    int byRegs = 65536 / (64 * std::max(block, 1));
    int byShared = shared ? (int)(233472 / shared) : 32;
    *n = std::max(0, std::min({byRegs, byShared, 32}));
    return OK;
}
API int cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                       void* stream, void** params, void**) {
    LOCK;
    return launch((Func*)fn, {gx, gy, gz}, {bx, by, bz}, shared, stream, params);
}
struct LaunchConfig {
    unsigned gx, gy, gz, bx, by, bz, shared;
    void* stream;
    void* attrs;
    unsigned numAttrs;
};
API int cuLaunchKernelEx(const LaunchConfig* c, void* fn, void** params, void**) {
    LOCK;
    return launch((Func*)fn, {c->gx, c->gy, c->gz}, {c->bx, c->by, c->bz}, c->shared, c->stream, params);
}

API int cuEventCreate(void** ev, unsigned) {
    *ev = new uint64_t(0);
    return OK;
}
API int cuEventRecord(void* ev, void*) {
    LOCK;
    *(uint64_t*)ev = nowNs();
    return sticky;
}
API int cuEventQuery(void*) { return OK; }
API int cuEventSynchronize(void*) {
    LOCK;
    return sticky;
}
API int cuEventElapsedTime(float* ms, void* a, void* b) {
    *ms = (float)((double)(*(uint64_t*)b - *(uint64_t*)a) / 1e6);
    return OK;
}
API int cuEventElapsedTime_v2(float* ms, void* a, void* b) { return cuEventElapsedTime(ms, a, b); }

// --- NVRTC: "compiling" checks that the source is the one built in ---

struct Program {
    std::string src, log;
    bool persistent = false; // persistent.cu, not kernels.cu
};
API int nvrtcVersion(int* major, int* minor) {
    *major = 99; // no real NVRTC's: the cached images stay apart
    *minor = 0;
    return 0;
}
API const char* nvrtcGetErrorString(int code) { return code == 0 ? "NVRTC_SUCCESS" : "NVRTC_ERROR_COMPILATION"; }
API int nvrtcCreateProgram(Program** p, const char* src, const char*, int, const char* const*, const char* const*) {
    *p = new Program{src, ""};
    return 0;
}
API int nvrtcCompileProgram(Program* p, int, const char* const*) {
    if (p->src.size() == emu::kernelsSourceLen && memcmp(p->src.data(), emu::kernelsSource, emu::kernelsSourceLen) == 0) return 0;
    if (p->src.size() == emu::persistentSourceLen && memcmp(p->src.data(), emu::persistentSource, emu::persistentSourceLen) == 0) {
        p->persistent = true;
        return 0;
    }
    p->log = "cudaemu was built from another kernels.cu or persistent.cu; rebuild it (go run ./tools/cudaemu)";
    return 6;
}
API int nvrtcGetProgramLogSize(Program* p, size_t* n) {
    *n = p->log.size() + 1;
    return 0;
}
API int nvrtcGetProgramLog(Program* p, char* out) {
    memcpy(out, p->log.c_str(), p->log.size() + 1);
    return 0;
}
API int nvrtcGetCUBINSize(Program* p, size_t* n) {
    *n = image(p->persistent).size() + 1;
    return 0;
}
API int nvrtcGetCUBIN(Program* p, char* out) {
    std::string img = image(p->persistent);
    memcpy(out, img.c_str(), img.size() + 1);
    return 0;
}
API int nvrtcDestroyProgram(Program** p) {
    delete *p;
    *p = nullptr;
    return 0;
}

// --- cuBLAS: GemmEx with f32, f16 or bf16 inputs into f32 ---

API int cublasCreate_v2(Blas** h) {
    *h = new Blas;
    return 0;
}
API int cublasSetStream_v2(Blas* h, void* s) {
    LOCK;
    h->stream = (Stream*)s;
    return 0;
}
API int cublasGemmEx(Blas* h, int ta, int tb, int m, int n, int k, const float* alpha, const void* a, int atype, int lda,
                     const void* b, int btype, int ldb, const float* beta, void* c, int ctype, int ldc, int compute, int) {
    LOCK;
    auto ok = [](int t) { return t == 0 || t == 2 || t == 14; };
    if (ctype != 0 || compute != 68 || !ok(atype) || !ok(btype) || ta > 1 || tb > 1) {
        fail(0, "%s", "cublasGemmEx: only f32/f16/bf16 inputs into f32 with CUBLAS_COMPUTE_32F are emulated");
        return 15; // CUBLAS_STATUS_NOT_SUPPORTED
    }
    if (sticky) return 13; // CUBLAS_STATUS_EXECUTION_FAILED
    GemmCall g{ta, tb, m, n, k, *alpha, *beta, a, atype, lda, b, btype, ldb, (float*)c, ldc};
    if (Graph* gr = capturing(h->stream)) {
        Node nd{Node::gemm};
        nd.g = g;
        gr->nodes.push_back(std::move(nd));
        return 0;
    }
    uint64_t t0 = profilePath ? nowNs() : 0;
    gemm(g);
    if (profilePath) account("cublasGemmEx", t0);
    return 0;
}
