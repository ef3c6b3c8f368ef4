/* LD_PRELOAD companion of the fake libcuda (rdmaperf's tests): logs the MR
 * verbs to the same FAKE_CUDA_LOG file, then calls the real ones, so a test
 * can check the order "allocate, register, ..., deregister, free". Each
 * registration's line also carries the access flags libibverbs was given
 * and MLX5_SCATTER_TO_CQE as the process has it then (the buffers' MRs are
 * registered before any QP is created, and libmlx5 reads the variable at
 * QP creation). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct ibv_pd;
struct ibv_mr;

static void logcall(const char *name)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    fprintf(f, "%s\n", name);
    fclose(f);
}

static void logreg(const char *name, unsigned int access)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    const char *s2c = getenv("MLX5_SCATTER_TO_CQE");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    fprintf(f, "%s access=0x%x scatter_to_cqe=%s\n", name, access, s2c ? s2c : "unset");
    fclose(f);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                unsigned int access)
{
    struct ibv_mr *(*real)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int) =
        (struct ibv_mr * (*)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int))
            dlsym(RTLD_NEXT, "ibv_reg_mr_iova2");
    logreg("ibv_reg_mr_iova2", access);
    return real(pd, addr, len, iova, access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
    int (*real)(struct ibv_mr *) = (int (*)(struct ibv_mr *))dlsym(RTLD_NEXT, "ibv_dereg_mr");
    logcall("ibv_dereg_mr");
    return real(mr);
}
