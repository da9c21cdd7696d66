/* LD_PRELOAD allocation counter for records.py (bench/python/run.sh builds it with gcc): every
 * malloc-family call increments a counter that records.py reads through ctypes. The real work
 * is glibc's own (its __libc_* entry points), so no dlsym bootstrapping is needed. */
#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static long count;

long holdoff_alloc_count(void) { return __atomic_load_n(&count, __ATOMIC_RELAXED); }

static void hit(void) { __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED); }

void *malloc(size_t n) { hit(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { hit(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { hit(); return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { hit(); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { hit(); return __libc_memalign(a, n); }
int posix_memalign(void **p, size_t a, size_t n) {
    hit();
    void *r = __libc_memalign(a, n);
    if (!r) return ENOMEM;
    *p = r;
    return 0;
}
