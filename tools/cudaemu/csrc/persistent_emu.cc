// persistent.cu compiled for the CPU, and the table of its kernels (both
// written by the build, main.go). In a namespace of its own: its helpers
// share names with kernels.cu's.
#include <cstring>

#include "emu_host.h"

namespace emu_persistent {
#include "persistent.cu"
}

namespace emu {

#define EMU_KERNEL(name) KernelOf<emu_persistent::name>::make(#name, true),
static const Kernel kernels[] = {
#include "registry_persistent.inc"
};

const Kernel* findPersistentKernel(const char* name) {
    for (const Kernel& k : kernels)
        if (strcmp(k.name, name) == 0) return &k;
    return nullptr;
}

#include "source_persistent.inc"

} // namespace emu
