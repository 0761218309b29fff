// kernels.cu compiled for the CPU, and the table of its kernels (both
// written by the build, main.go).
#include <cstring>

#include "emu_host.h"
#include "kernels.cu"

namespace emu {

#define EMU_KERNEL(name) KernelOf<name>::make(#name),
static const Kernel kernels[] = {
#include "registry.inc"
};

const Kernel* findKernel(const char* name) {
    for (const Kernel& k : kernels)
        if (strcmp(k.name, name) == 0) return &k;
    return nullptr;
}

#include "source.inc"

} // namespace emu
