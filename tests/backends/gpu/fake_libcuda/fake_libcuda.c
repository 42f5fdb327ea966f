/* A stand-in for the CUDA driver library (libcuda.so.1) that lets the REAL PyCUDA, and so the GPU backend,
   run tests/backends/gpu/test_device.py on a machine without a GPU: a check of how the backend uses PyCUDA's API
   (contexts, allocations, copies, launches, events, sticky errors), not of any kernel's numerics.
   Device memory is host memory. Modules are the real cubins nvcc builds; a kernel is "found" when the cubin
   has a section .text.NAME (its plain, unmangled name). The kernels of test_device.py are emulated by name
   in C; wild_write and trap leave a sticky error (700, 719) on the context, as a GPU does.
   Build and use: see build.sh beside this file. Every driver entry point not written here fails (999). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
typedef struct Ctx { int sticky; int alive; } Ctx;
typedef struct Mod { char *image; size_t len; } Mod;
typedef struct Fn { char name[128]; } Fn;
typedef struct Ev { double t; Ctx *ctx; } Ev;
static Ctx *stack[64]; static int top = 0;
static Ctx *cur(void) { return top ? stack[top-1] : 0; }
#define STICKY do { Ctx *c = cur(); if (!c) return 201; if (c->sticky) return c->sticky; } while (0)
static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec*1e3 + ts.tv_nsec/1e6; }

int cuInit(unsigned f) { return 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuGetErrorString(int e, const char **s) {
  switch (e) { case 700: *s = "an illegal memory access was encountered"; break;
    case 719: *s = "unspecified launch failure"; break; case 500: *s = "named symbol not found"; break;
    case 201: *s = "invalid device context"; break; default: *s = "fake error"; }
  return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int o) { if (o != 0) return 101; *d = 0; return 0; }
int cuDeviceGetName(char *b, int len, int d) { snprintf(b, len, "Fake H200 (fake libcuda)"); return 0; }
int cuDeviceTotalMem_v2(size_t *b, int d) { *b = (size_t)1 << 34; return 0; }
int cuDeviceComputeCapability(int *ma, int *mi, int d) { *ma = 9; *mi = 0; return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) {
  switch (a) { case 16: *v = 132; break; case 97: *v = 232448; break; case 75: *v = 9; break; case 76: *v = 0; break;
    default: *v = 0; } return 0; }
int cuCtxCreate_v4(Ctx **c, void *p, unsigned f, int d) { *c = calloc(1, sizeof(Ctx)); (*c)->alive = 1; stack[top++] = *c; return 0; }
int cuCtxPushCurrent_v2(Ctx *c) { if (!c->alive) return 201; stack[top++] = c; return 0; }
int cuCtxPopCurrent_v2(Ctx **c) { if (!top) return 201; top--; if (c) *c = stack[top]; return 0; }
int cuCtxDetach(Ctx *c) { c->alive = 0; if (top && stack[top-1] == c) top--; fprintf(stderr, "[fake libcuda] context destroyed\n"); return 0; }
int cuCtxGetDevice(int *d) { *d = 0; return 0; }
int cuCtxSynchronize(void) { STICKY; return 0; }
int cuMemAlloc_v2(uintptr_t *p, size_t n) { STICKY; void *m = malloc(n ? n : 1); memset(m, 0xEE, n); *p = (uintptr_t)m; return 0; }
int cuMemFree_v2(uintptr_t p) { STICKY; free((void *)p); return 0; }
int cuMemcpyHtoD_v2(uintptr_t d, const void *s, size_t n) { STICKY; memcpy((void *)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void *d, uintptr_t s, size_t n) { STICKY; memcpy(d, (void *)s, n); return 0; }
int cuMemcpyDtoD_v2(uintptr_t d, uintptr_t s, size_t n) { STICKY; memcpy((void *)d, (void *)s, n); return 0; }
int cuMemsetD8_v2(uintptr_t d, unsigned char v, size_t n) { STICKY; memset((void *)d, v, n); return 0; }
int cuModuleLoadData(Mod **m, const void *img) { STICKY;
  const unsigned char *e = img; if (memcmp(e, "\x7f" "ELF", 4)) return 200;
  uint64_t shoff; uint16_t shent, shnum; memcpy(&shoff, e + 0x28, 8); memcpy(&shent, e + 0x3A, 2); memcpy(&shnum, e + 0x3C, 2);
  *m = calloc(1, sizeof(Mod)); (*m)->len = shoff + (uint64_t)shent * shnum; (*m)->image = malloc((*m)->len);
  memcpy((*m)->image, img, (*m)->len); return 0; }
int cuModuleUnload(Mod *m) { return 0; }
int cuModuleGetFunction(Fn **f, Mod *m, const char *name) {
  STICKY; char pat[160]; snprintf(pat, sizeof pat, ".text.%s", name); size_t pl = strlen(pat) + 1;
  for (size_t i = 0; i + pl <= m->len; i++)
    if (memcmp(m->image + i, pat, pl) == 0) { *f = calloc(1, sizeof(Fn)); strcpy((*f)->name, name); return 0; }
  return 500; }
int cuFuncGetAttribute(int *v, int a, Fn *f) { *v = a == 0 ? 1024 : 0; return 0; }
int cuFuncSetAttribute(Fn *f, int a, int v) { return 0; }
int cuEventCreate(Ev **e, unsigned f) { STICKY; *e = calloc(1, sizeof(Ev)); (*e)->ctx = cur(); return 0; }
int cuEventDestroy_v2(Ev *e) { free(e); return 0; }
int cuEventRecord(Ev *e, void *s) { STICKY; e->t = now(); return 0; }
int cuEventQuery(Ev *e) { STICKY; return 0; }
int cuEventSynchronize(Ev *e) { STICKY; return 0; }
int cuEventElapsedTime_v2(float *ms, Ev *a, Ev *b) { STICKY; *ms = (float)(b->t - a->t) + 0.001f; return 0; }

int cuLaunchKernel(Fn *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shm, void *stream, void **params, void **extra) {
  STICKY;
  char *buf = 0;
  for (int i = 0; extra && extra[i]; i += 2) if ((uintptr_t)extra[i] == 1) buf = extra[i+1];
  if (!buf) return 1;
  const char *k = f->name;
  if (!strncmp(k, "scale", 5)) {
    float *x = *(float **)buf, *y = *(float **)(buf + 8); int n = *(int *)(buf + 16); float a = *(float *)(buf + 20);
    if (!strcmp(k, "scale")) for (int i = 0; i < n; i++) y[i] = a * x[i];
    if (!strcmp(k, "scale_past_end")) for (int i = 0; i <= n; i++) y[i] = a * x[i < n ? i : 0];
    if (!strcmp(k, "scale_before_start")) for (int i = 0; i < n; i++) y[i-1] = a * x[i];
    if (!strcmp(k, "scale_skip_last")) for (int i = 0; i < n - 1; i++) y[i] = a * x[i];
  } else if (!strcmp(k, "wild_write")) { cur()->sticky = 700;
  } else if (!strcmp(k, "trap")) { cur()->sticky = 719;
  } else if (!strcmp(k, "to_half")) {
    float *x = *(float **)buf; _Float16 *y = *(_Float16 **)(buf + 8); int n = *(int *)(buf + 16);
    for (int i = 0; i < n; i++) y[i] = (_Float16)x[i];
  } else if (!strcmp(k, "dp4a_rows")) {
    int8_t *a = *(int8_t **)buf, *b = *(int8_t **)(buf + 8); int *out = *(int **)(buf + 16); int w = *(int *)(buf + 24);
    for (unsigned r = 0; r < gx; r++) { int acc = 0; for (int j = 0; j < 4 * w; j++) acc += a[r * 4 * w + j] * b[j]; out[r] = acc; }
  } else if (!strcmp(k, "reverse_shared")) {
    float *x = *(float **)buf, *y = *(float **)(buf + 8); int n = *(int *)(buf + 16);
    for (int i = 0; i < n; i++) y[i] = x[n - 1 - i];
  }
  return 0;
}
int cuModuleLoadDataEx(Mod **m, const void *img, unsigned n, void *o, void **v) { return cuModuleLoadData(m, img); }
int cuFuncSetBlockShape(Fn *f, int x, int y, int z) { return 0; }
int cuFuncSetSharedSize(Fn *f, unsigned n) { return 0; }
