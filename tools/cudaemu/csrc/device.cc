// The emulated GPU: a pool of OS threads takes a launch's blocks; a block's
// threads are fibers on one of them, run in turn, each until it reaches a
// barrier (__syncthreads, __syncwarp, a shuffle) or ends. Fibers switch
// with a few instructions (emu_switch below), not through the kernel.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emu.h"
#include "emu_host.h"

// emu_switch(from, to) saves the callee-saved registers on the current
// stack, stores the stack pointer in *from and resumes the stack at to.
// The FPU and SSE control words are not saved: no fiber changes them.
extern "C" void emu_switch(void** from, void* to);
asm(R"(
    .text
    .hidden emu_switch
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");

namespace emu {

thread_local Fiber* cur;
thread_local Block* block;

namespace {

constexpr size_t stackBytes = 128 << 10;
constexpr size_t sharedBytes = 256 << 10; // the H200 gives a block at most 227 KiB
constexpr size_t pageBytes = 4096;

struct Barrier {
    int count = 0, live = 0;
    unsigned gen = 0;
};

struct Warp {
    Barrier bar;
    uint64_t xchg[2][32];
};

// Worker is one OS thread of the pool and the block it runs.
struct Worker {
    void* schedSp = nullptr;
    Block blk{};
    std::vector<Fiber> fibers;
    std::vector<char*> stacks; // their tops
    std::vector<Warp> warps;
    Barrier bar;
    Barrier named[4]; // bar.sync 1..3 (0 is bar)
    uint64_t progress = 0, roundProgress = ~0ull;
    uint64_t spins = 0, roundSpins = 0; // fibers waiting on memory (spin)
    bool deadlock = false;
    char* shared = nullptr; // sharedBytes, then a guard page
    const Kernel* kernel = nullptr;
    const char* args = nullptr;

    // setLaunch readies the worker for a launch's blocks.
    void setLaunch(const Kernel* k, const char* a, uint3 grid, uint3 dim, unsigned dynBytes) {
        kernel = k;
        args = a;
        blk.dim = dim;
        blk.grid = grid;
        // The block's dynamic shared memory ends at the guard page.
        blk.dynShared = shared + sharedBytes - ((dynBytes + 255) & ~255u);
    }
};

// blockIndex is the index of a launch's i-th block, x fastest.
uint3 blockIndex(long i, uint3 grid) {
    return {(unsigned)(i % grid.x), (unsigned)(i / grid.x % grid.y), (unsigned)(i / ((long)grid.x * grid.y))};
}

thread_local Worker* worker;

char* mapGuarded(size_t bytes) {
    char* p = (char*)mmap(nullptr, bytes + pageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "cudaemu: mmap of %zu bytes failed\n", bytes);
        abort();
    }
    mprotect(p + bytes, pageBytes, PROT_NONE);
    return p;
}

// next switches from the current fiber to the next one that has not ended,
// in turn; to the scheduler when none is left, or when a whole round of
// fibers went by without any arriving at a barrier or ending (a deadlock).
void next() {
    Worker* w = worker;
    Fiber* f = cur;
    int n = (int)w->fibers.size();
    for (int i = f->linear + 1;; i++) {
        if (i == n) i = 0;
        if (i == 0) { // a round begins
            if (w->progress == w->roundProgress) {
                if (w->spins == w->roundSpins) {
                    w->deadlock = true;
                    break;
                }
                // Every fiber left waits on memory: another block
                // writes it, on another OS thread.
                std::this_thread::yield();
            }
            w->roundProgress = w->progress;
            w->roundSpins = w->spins;
        }
        Fiber* g = &w->fibers[i];
        if (g == f && f->done) break;
        if (g->done) continue;
        if (g == f) return;
        cur = g;
        emu_switch(&f->sp, g->sp);
        return;
    }
    emu_switch(&f->sp, w->schedSp);
}

// mapStack maps a fiber's stack with a guard page below it (stacks grow
// down); it returns the stack's top.
char* mapStack() {
    char* p = (char*)mmap(nullptr, stackBytes + pageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "cudaemu: mmap of a fiber stack failed\n");
        abort();
    }
    mprotect(p, pageBytes, PROT_NONE);
    return p + pageBytes + stackBytes;
}

void yield() { next(); }

void arrive(Barrier& b) {
    worker->progress++;
    unsigned gen = b.gen;
    if (++b.count >= b.live) {
        b.count = 0;
        b.gen++;
        return;
    }
    while (b.gen == gen) yield();
}

// leave takes an ended thread out of b: it no longer holds the others back.
void leave(Barrier& b) {
    b.live--;
    if (b.count > 0 && b.count >= b.live) {
        b.count = 0;
        b.gen++;
    }
}

void fiberMain() {
    Worker* w = worker;
    w->kernel->invoke(w->args);
    Fiber* f = cur;
    f->done = true;
    leave(w->bar);
    leave(w->warps[f->warp].bar);
    w->progress++;
    next();
    abort(); // an ended fiber is never resumed
}

// runBlock runs one block to its end; false (with why) on a deadlock.
bool runBlock(Worker& w, uint3 idx, std::string* why) {
    Block& b = w.blk;
    b.idx = idx;
    int n = (int)(b.dim.x * b.dim.y * b.dim.z);
    while ((int)w.stacks.size() < n) w.stacks.push_back(mapStack());
    w.fibers.assign(n, Fiber{});
    int nw = (n + 31) / 32;
    w.warps.assign(nw, Warp{});
    w.bar = Barrier{0, n, 0};
    for (Barrier& b : w.named) b = Barrier{};
    w.spins = w.roundSpins = 0;
    for (int i = 0; i < n; i++) {
        Fiber& f = w.fibers[i];
        f.tid = {i % b.dim.x, (i / b.dim.x) % b.dim.y, i / (b.dim.x * b.dim.y)};
        f.linear = i;
        f.warp = i / 32;
        f.lane = i % 32;
        w.warps[f.warp].bar.live++;
        // A fresh stack as emu_switch leaves one: six registers, then
        // fiberMain as the return address; at its entry the stack is 8
        // off a 16-byte boundary, as after a call.
        uint64_t* top = (uint64_t*)w.stacks[i];
        uint64_t* sp = top - 8;
        for (int r = 0; r < 6; r++) sp[r] = 0;
        sp[6] = (uint64_t)&fiberMain;
        sp[7] = 0;
        f.sp = sp;
    }
    block = &b;
    w.progress = 0;
    w.roundProgress = ~0ull;
    w.deadlock = false;
    cur = &w.fibers[0];
    emu_switch(&w.schedSp, cur->sp); // back when every fiber ended, or on a deadlock
    if (!w.deadlock) return true;
    int waiting = 0;
    for (auto& f : w.fibers) waiting += !f.done;
    char buf[256];
    snprintf(buf, sizeof buf, "%s: block (%u,%u,%u): %d of %d threads wait at a barrier that the others never reach",
             w.kernel->name, idx.x, idx.y, idx.z, waiting, n);
    *why = buf;
    return false;
}

// Pool runs a launch's blocks on its threads.
struct Pool {
    std::mutex mu;
    std::condition_variable start, finished;
    std::vector<std::thread> threads;
    uint64_t job = 0;
    int busy = 0;
    const Kernel* kernel;
    const char* args;
    uint3 grid, dim;
    unsigned shared;
    std::atomic<long> next;
    long total;
    std::string err;

    void loop() {
        Worker w;
        w.shared = mapGuarded(sharedBytes);
        worker = &w;
        uint64_t seen = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> l(mu);
                start.wait(l, [&] { return job != seen; });
                seen = job;
            }
            w.setLaunch(kernel, args, grid, dim, shared);
            std::string why;
            for (long i; (i = next.fetch_add(1)) < total;) {
                if (!runBlock(w, blockIndex(i, grid), &why)) {
                    next.store(total);
                    break;
                }
            }
            std::lock_guard<std::mutex> l(mu);
            if (!why.empty() && err.empty()) err = why;
            if (--busy == 0) finished.notify_all();
        }
    }
};

Pool* pool() {
    static Pool* p = [] {
        Pool* p = new Pool;
        unsigned n = std::thread::hardware_concurrency();
        if (const char* s = getenv("CUDAEMU_THREADS")) n = atoi(s);
        n = std::max(1u, n);
        for (unsigned i = 0; i < n; i++) {
            p->threads.emplace_back([p] { p->loop(); });
            p->threads.back().detach();
        }
        return p;
    }();
    return p;
}

} // namespace

void syncthreads() { arrive(worker->bar); }
void syncwarp() { arrive(worker->warps[cur->warp].bar); }

const uint64_t* exchange(uint64_t v) {
    Warp& w = worker->warps[cur->warp];
    int parity = w.bar.gen & 1; // alternate buffers: a lane can be one exchange ahead, not two
    w.xchg[parity][cur->lane] = v;
    arrive(w.bar);
    return w.xchg[parity];
}

uint64_t shuffle(uint64_t v, int src, bool keep) {
    const uint64_t* all = exchange(v);
    return keep ? v : all[src];
}

void spin() {
    worker->spins++;
    yield();
}

void progress() { worker->progress++; }

void namedSync(int id, int count) {
    if (id <= 0 || id > 3) trap("cudaemu: bar.sync with a barrier id outside 1..3");
    Barrier& b = worker->named[id];
    if (b.live == 0) b.live = count;
    arrive(b);
}

void trap(const char* why) {
    fprintf(stderr, "cudaemu: trap: %s\n", why);
    abort();
}

// runAtOnce runs a persistent kernel's blocks each on a thread of its own,
// as a GPU holds a grid that fits at once, since they wait on each other.
std::string runAtOnce(const Kernel* k, const char* args, uint3 grid, uint3 dim, unsigned shared) {
    // Workers (their fiber stacks and shared memory) outlive a launch, as
    // the pool's do: a launch maps nothing once the grid has run before.
    static std::mutex launchMu;
    static std::vector<Worker*> workers;
    std::lock_guard<std::mutex> launch(launchMu);
    long total = (long)grid.x * grid.y * grid.z;
    while ((long)workers.size() < total) {
        Worker* w = new Worker;
        w->shared = mapGuarded(sharedBytes);
        workers.push_back(w);
    }
    std::vector<std::thread> threads;
    std::mutex mu;
    std::string err;
    for (long i = 0; i < total; i++)
        threads.emplace_back([&, i] {
            Worker& w = *workers[i];
            worker = &w;
            w.setLaunch(k, args, grid, dim, shared);
            std::string why;
            runBlock(w, blockIndex(i, grid), &why);
            std::lock_guard<std::mutex> l(mu);
            if (!why.empty() && err.empty()) err = why;
        });
    for (auto& t : threads) t.join();
    return err;
}

uint64_t globaltimer() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

std::string run(const Kernel* k, const char* args, uint3 grid, uint3 dim, unsigned shared) {
    if (k->persistent) return runAtOnce(k, args, grid, dim, shared);
    Pool* p = pool();
    std::unique_lock<std::mutex> l(p->mu);
    p->kernel = k;
    p->args = args;
    p->grid = grid;
    p->dim = dim;
    p->shared = shared;
    p->total = (long)grid.x * grid.y * grid.z;
    p->next.store(0);
    p->err.clear();
    p->busy = (int)p->threads.size();
    p->job++;
    p->start.notify_all();
    p->finished.wait(l, [&] { return p->busy == 0; });
    return p->err;
}

} // namespace emu
