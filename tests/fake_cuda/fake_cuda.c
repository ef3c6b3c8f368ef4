/* A fake CUDA driver library (libcuda.so.1) for rdmaperf's tests, written
 * for this project: it exports the entry points rdmaperf binds, backed by
 * 64 KiB-aligned host memory. No NVIDIA code or header is used; the
 * constants are the documented values of the driver API.
 *
 * Environment:
 *   FAKE_CUDA_LOG=<file>        append one line per call ("cuInit", ...)
 *   FAKE_CUDA_FAIL=<sym>:<code>[,...]  that entry point returns <code>
 *   FAKE_CUDA_DEVICES=<n>       device count (default 1)
 *   FAKE_CUDA_DMABUF=0          report DMA_BUF_SUPPORTED = 0
 *   FAKE_CUDA_PROTECT=1         after the first host-to-device copy the range
 *                               is PROT_NONE (copies open it briefly): a CPU
 *                               touch of "device" memory then faults
 *   FAKE_CUDA_NOPEER=1          the range is PROT_NONE from allocation on, as
 *                               device memory without a peer-memory client
 *                               looks to the kernel (ibv_reg_mr fails EFAULT)
 *   FAKE_CUDA_DRIVER_VERSION=<n> cuDriverGetVersion's answer (default 12040,
 *                               CUDA 12.4); below 12080 the PCIe mapping
 *                               flag of cuMemGetHandleForAddressRange fails
 *   FAKE_CUDA_INTEGRATED=1      CU_DEVICE_ATTRIBUTE_INTEGRATED = 1 (Tegra)
 *   FAKE_CUDA_FLUSH=0           no HOST bit in the GPUDirect flush options
 * The log also has "fake_cuda_loaded" / "fake_cuda_unloaded" when the library
 * is mapped and unmapped (dlopen, dlclose or exit), and each cuInit with how
 * many came before it ("cuInit n=1" is the second).
 * Built with -DFAKE_OMIT_MEMALLOC it lacks cuMemAlloc_v2 (a missing symbol).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

#define GPU_PAGE (64 * 1024)
#define MAX_ALLOCS 256

static struct {
    CUdeviceptr ptr;
    size_t len;
    int protect;
} allocs[MAX_ALLOCS];
static int inited;

static void logcall(const char *name, const char *detail)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    if (!path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "%s%s%s\n", name, detail ? " " : "", detail ? detail : "");
    fclose(f);
}

/* The injected result for `name`, or 0. */
static CUresult injected(const char *name)
{
    const char *s = getenv("FAKE_CUDA_FAIL");
    size_t n = strlen(name);
    while (s && *s) {
        if (strncmp(s, name, n) == 0 && s[n] == ':')
            return atoi(s + n + 1);
        s = strchr(s, ',');
        if (s)
            s++;
    }
    return 0;
}

#define ENTER(name)                                                            \
    do {                                                                       \
        logcall(name, NULL);                                                   \
        CUresult r_ = injected(name);                                          \
        if (r_)                                                                \
            return r_;                                                         \
    } while (0)

static int env_is(const char *var, const char *val)
{
    const char *s = getenv(var);
    return s && strcmp(s, val) == 0;
}

static int find(CUdeviceptr p)
{
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (allocs[i].ptr && p >= allocs[i].ptr && p < allocs[i].ptr + allocs[i].len)
            return i;
    return -1;
}

static void set_prot(int i, int prot)
{
    mprotect((void *)(uintptr_t)allocs[i].ptr, allocs[i].len, prot);
}

__attribute__((constructor)) static void loaded(void)
{
    logcall("fake_cuda_loaded", NULL);
}

__attribute__((destructor)) static void unloaded(void)
{
    logcall("fake_cuda_unloaded", NULL);
}

static int init_calls;

CUresult cuInit(unsigned flags)
{
    char d[32];
    snprintf(d, sizeof d, "n=%d", init_calls++);
    logcall("cuInit", d);
    if (flags != 0)
        return 1; /* CUDA_ERROR_INVALID_VALUE: the flags must be 0 */
    CUresult r = injected("cuInit");
    if (r)
        return r;
    inited = 1;
    return 0;
}

static int driver_version(void)
{
    const char *s = getenv("FAKE_CUDA_DRIVER_VERSION");
    return s ? atoi(s) : 12040;
}

#define NEED_INIT()                                                            \
    do {                                                                       \
        if (!inited)                                                           \
            return 3; /* CUDA_ERROR_NOT_INITIALIZED */                         \
    } while (0)

CUresult cuDriverGetVersion(int *v)
{
    ENTER("cuDriverGetVersion");
    *v = driver_version();
    return 0;
}

CUresult cuDeviceGetCount(int *n)
{
    ENTER("cuDeviceGetCount");
    NEED_INIT();
    const char *s = getenv("FAKE_CUDA_DEVICES");
    *n = s ? atoi(s) : 1;
    return 0;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    ENTER("cuDeviceGet");
    NEED_INIT();
    *d = ordinal;
    return 0;
}

CUresult cuDeviceGetByPCIBusId(CUdevice *d, const char *bus)
{
    ENTER("cuDeviceGetByPCIBusId");
    NEED_INIT();
    unsigned dom, b, dev, fn;
    if (sscanf(bus, "%x:%x:%x.%x", &dom, &b, &dev, &fn) != 4 || dom != 0 || dev != 0)
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *d = (int)b - 0x1b;
    return *d < 0 ? 101 : 0;
}

CUresult cuDeviceGetPCIBusId(char *out, int len, CUdevice d)
{
    ENTER("cuDeviceGetPCIBusId");
    snprintf(out, len, "0000:%02x:00.0", 0x1b + d);
    return 0;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
    (void)d;
    ENTER("cuDeviceGetAttribute");
    switch (attr) {
    case 124: *v = env_is("FAKE_CUDA_DMABUF", "0") ? 0 : 1; break;
    case 116: *v = 1; break;
    case 117: *v = env_is("FAKE_CUDA_FLUSH", "0") ? 0 : 1; break;
    case 18: *v = env_is("FAKE_CUDA_INTEGRATED", "1"); break;
    default: *v = 0;
    }
    return 0;
}

CUresult cuDeviceGetName(char *out, int len, CUdevice d)
{
    ENTER("cuDeviceGetName");
    snprintf(out, len, "rdmaperf fake GPU %d (host memory)", d);
    return 0;
}

CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d)
{
    (void)d;
    ENTER("cuDeviceTotalMem_v2");
    *b = (size_t)1 << 30;
    return 0;
}

static int ctx_token;

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d)
{
    (void)d;
    ENTER("cuDevicePrimaryCtxRetain");
    NEED_INIT();
    *ctx = &ctx_token;
    return 0;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    (void)d;
    ENTER("cuDevicePrimaryCtxRelease_v2");
    return 0;
}

CUresult cuCtxSetCurrent(void *ctx)
{
    (void)ctx;
    ENTER("cuCtxSetCurrent");
    return 0;
}

#ifndef FAKE_OMIT_MEMALLOC
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t len)
{
    char d[64];
    snprintf(d, sizeof d, "%zu", len);
    logcall("cuMemAlloc_v2", d);
    CUresult r = injected("cuMemAlloc_v2");
    if (r)
        return r;
    NEED_INIT();
    void *m = mmap(NULL, len + GPU_PAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    uintptr_t a = ((uintptr_t)m + GPU_PAGE - 1) & ~(uintptr_t)(GPU_PAGE - 1);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (!allocs[i].ptr) {
            allocs[i].ptr = a;
            allocs[i].len = len;
            allocs[i].protect = env_is("FAKE_CUDA_PROTECT", "1");
            if (env_is("FAKE_CUDA_NOPEER", "1"))
                set_prot(i, PROT_NONE);
            *p = a;
            return 0;
        }
    }
    return 2;
}
#endif

CUresult cuMemFree_v2(CUdeviceptr p)
{
    ENTER("cuMemFree_v2");
    int i = find(p);
    if (i < 0)
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    set_prot(i, PROT_READ | PROT_WRITE);
    memset(&allocs[i], 0, sizeof allocs[i]);
    return 0; /* the mapping is leaked on purpose: a late access must not hit new memory */
}

/* Copies open a protected range for their own duration only. */
static CUresult copy(const char *name, void *dst, const void *src, CUdeviceptr dev, size_t n)
{
    ENTER(name);
    int i = find(dev);
    if (i < 0 || dev + n > allocs[i].ptr + allocs[i].len)
        return 1;
    set_prot(i, PROT_READ | PROT_WRITE);
    memcpy(dst, src, n);
    if (allocs[i].protect || env_is("FAKE_CUDA_NOPEER", "1"))
        set_prot(i, PROT_NONE);
    return 0;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return copy("cuMemcpyHtoD_v2", (void *)(uintptr_t)dst, src, dst, n);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return copy("cuMemcpyDtoH_v2", dst, (const void *)(uintptr_t)src, src, n);
}

CUresult cuPointerSetAttribute(const void *value, int attr, CUdeviceptr p)
{
    char d[64];
    snprintf(d, sizeof d, "attr=%d value=%d", attr, *(const int *)value);
    logcall("cuPointerSetAttribute", d);
    CUresult r = injected("cuPointerSetAttribute");
    if (r)
        return r;
    return find(p) < 0 ? 1 : 0;
}

CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t n, int type,
                                       unsigned long long flags)
{
    (void)n;
    ENTER("cuMemGetHandleForAddressRange");
    if (type != 1 || find(p) < 0)
        return 1;
    /* The PCIe mapping type is CUDA 12.8's; an older driver knows no flag. */
    if (flags > 1 || (flags == 1 && driver_version() < 12080))
        return 1;
    /* Any fd will do: rxe refuses dma-buf MRs before looking at it. */
    int fd = memfd_create("fake-cuda-dmabuf", 0);
    if (fd < 0)
        return 999;
    *(int *)handle = fd;
    return 0;
}

/* CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX = 0, scope TO_OWNER =
 * 100 or TO_ALL_DEVICES = 200; only where the options' HOST bit is set. */
CUresult cuFlushGPUDirectRDMAWrites(int target, int scope)
{
    ENTER("cuFlushGPUDirectRDMAWrites");
    NEED_INIT();
    if (target != 0 || (scope != 100 && scope != 200) || env_is("FAKE_CUDA_FLUSH", "0"))
        return 1;
    return 0;
}

static const char *names[][2] = {
    {"1", "CUDA_ERROR_INVALID_VALUE"},   {"2", "CUDA_ERROR_OUT_OF_MEMORY"},
    {"3", "CUDA_ERROR_NOT_INITIALIZED"}, {"34", "CUDA_ERROR_STUB_LIBRARY"},
    {"100", "CUDA_ERROR_NO_DEVICE"},     {"101", "CUDA_ERROR_INVALID_DEVICE"},
    {"801", "CUDA_ERROR_NOT_SUPPORTED"}, {"999", "CUDA_ERROR_UNKNOWN"},
    {"803", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
};

CUresult cuGetErrorName(CUresult r, const char **s)
{
    char k[16];
    snprintf(k, sizeof k, "%d", r);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(names[i][0], k) == 0) {
            *s = names[i][1];
            return 0;
        }
    }
    return 1;
}

CUresult cuGetErrorString(CUresult r, const char **s)
{
    (void)r;
    *s = "injected by the fake libcuda";
    return 0;
}
