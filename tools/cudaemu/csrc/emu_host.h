// Between the emulated device (device.cc, kernels_emu.cc) and the driver
// API it serves (host.cc).
#pragma once

#include <cstddef>
#include <new>
#include <string>
#include <tuple>
#include <utility>

#include "emu.h"

namespace emu {

// Kernel is one __global__ function of kernels.cu: pack copies its
// arguments out of a launch's parameter array (so that a graph can keep
// them), invoke calls it with a packed copy.
struct Kernel {
    const char* name;
    bool persistent; // its blocks wait on each other: all run at once
    size_t argBytes;
    void (*pack)(void** params, char* out);
    void (*invoke)(const char* args);
};

template <auto F>
struct KernelOf;
template <class... A, void (*F)(A...)>
struct KernelOf<F> {
    using Args = std::tuple<std::decay_t<A>...>;
    template <size_t... I>
    static void packAt(void** p, char* out, std::index_sequence<I...>) {
        new (out) Args(*(std::decay_t<A>*)p[I]...);
    }
    static void pack(void** p, char* out) { packAt(p, out, std::index_sequence_for<A...>{}); }
    static void invoke(const char* args) { std::apply(F, *(const Args*)args); }
    static Kernel make(const char* name, bool persistent = false) {
        static_assert(alignof(Args) <= 16, "kernel arguments aligned beyond 16 bytes");
        return {name, persistent, sizeof(Args), pack, invoke};
    }
};

// run executes a launch to its end; it returns why it failed, or "".
std::string run(const Kernel* k, const char* args, uint3 grid, uint3 dim, unsigned shared);

const Kernel* findKernel(const char* name);
const Kernel* findPersistentKernel(const char* name);
extern const unsigned char kernelsSource[], persistentSource[];
extern const size_t kernelsSourceLen, persistentSourceLen;

} // namespace emu
