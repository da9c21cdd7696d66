/*
 * The C ABI's benchmark (bench/c/run.sh, release library): holdoff next to a hand-written
 * pthread-mutex consecutive-failure breaker, in one run. Each sample is one timed batch sized
 * to about 50 ms (ns/op = batch wall time / batch size); 5 samples per (subject, op) after a
 * warm-up batch. Prints a summary; when HOLDOFF_BENCH_OUT names a file, appends one JSON line
 * per (subject, op) in the format of the cross-language benchmark (docs/performance.md).
 *
 * allow_record, allow_record_2t and protected_call take the path the header documents for C
 * users: holdoff_fast_allow / holdoff_fast_record_success on the breaker's fast-path word
 * (docs/ffi.md "The fast-path word"), calling the library only when they return 0; the notes
 * give allow + record through the library alone for comparison.
 *
 * Memory is glibc's own count (mallinfo2: bytes in use, chunk headers included) before and
 * after creating 100k objects; allocations are counted by wrapping malloc at link time
 * (-Wl,--wrap=malloc,...), which catches every allocation of the Rust static library.
 */
#define _GNU_SOURCE

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "holdoff.h"

#define SAMPLES 5
#define TARGET_NS 50e6
#define MEM_N 100000L

/* ---- allocation counter (link with -Wl,--wrap=malloc,--wrap=calloc,...) ---- */

static atomic_long allocs;
void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
int __real_posix_memalign(void **, size_t, size_t);
void *__real_aligned_alloc(size_t, size_t);
void *__wrap_malloc(size_t n) { atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed); return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed); return __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed); return __real_realloc(p, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed); return __real_posix_memalign(p, a, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed); return __real_aligned_alloc(a, n); }

static double heap_bytes(void) {
    struct mallinfo2 m = mallinfo2();
    return (double)m.uordblks + (double)m.hblkhd;
}

/* ---- output ---- */

static FILE *out;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void emit(const char *subject, const char *op, const char *unit, const double *s, const char *note) {
    double sorted[SAMPLES];
    memcpy(sorted, s, sizeof sorted);
    qsort(sorted, SAMPLES, sizeof sorted[0], cmp_double);
    printf("%-15s %-24s %10.1f %-9s (min %.1f, max %.1f)  %s\n", subject, op, sorted[SAMPLES / 2], unit,
           sorted[0], sorted[SAMPLES - 1], note);
    if (!out) return;
    fprintf(out, "{\"lang\": \"c\", \"subject\": \"%s\", \"op\": \"%s\", \"unit\": \"%s\", \"samples\": [", subject,
            op, unit);
    for (int i = 0; i < SAMPLES; i++) fprintf(out, "%s%.3f", i ? ", " : "", s[i]);
    fprintf(out, "], \"note\": \"%s\"}\n", note);
}

static void check(holdoff_status st, holdoff_status want, const char *what) {
    if (st != want) {
        fprintf(stderr, "%s: status %u (%s)\n", what, (unsigned)st, holdoff_status_name(st));
        exit(1);
    }
}

/* ---- timing: a batch function runs n operations on ctx ---- */

typedef void (*batch_fn)(void *ctx, long n);

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

struct worker {
    batch_fn fn;
    void *ctx;
    long n;
    pthread_barrier_t *start;
};

static void *run_worker(void *arg) {
    struct worker *w = arg;
    pthread_barrier_wait(w->start);
    w->fn(w->ctx, w->n);
    return NULL;
}

/* Wall ns of `threads` threads each running n operations, divided by n. */
static double timed(batch_fn fn, void *ctx, long n, int threads) {
    if (threads == 1) {
        double t0 = now_ns();
        fn(ctx, n);
        return (now_ns() - t0) / (double)n;
    }
    pthread_t t[2];
    struct worker w[2];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        w[i] = (struct worker){fn, ctx, n, &start};
        pthread_create(&t[i], NULL, run_worker, &w[i]);
    }
    pthread_barrier_wait(&start);
    double t0 = now_ns();
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double dt = now_ns() - t0;
    pthread_barrier_destroy(&start);
    return dt / (double)n;
}

/* SAMPLES timed batches of about TARGET_NS each, after a calibrating warm-up, into s. */
static void sample(batch_fn fn, void *ctx, int threads, double *s) {
    long n = 1000;
    double per;
    while ((per = timed(fn, ctx, n, threads)) * (double)n < TARGET_NS / 10) n *= 4; /* calibrate + warm up */
    n = (long)(TARGET_NS / per) + 1;
    for (int i = 0; i < SAMPLES; i++) s[i] = timed(fn, ctx, n, threads);
}

static double median(const double *s) {
    double sorted[SAMPLES];
    memcpy(sorted, s, sizeof sorted);
    qsort(sorted, SAMPLES, sizeof sorted[0], cmp_double);
    return sorted[SAMPLES / 2];
}

static void measure(const char *subject, const char *op, batch_fn fn, void *ctx, int threads, const char *note) {
    double s[SAMPLES];
    sample(fn, ctx, threads, s);
    emit(subject, op, "ns/op", s, note);
}

/* ---- holdoff ---- */

/* A breaker as a C user holds it for the hot path: the handle and its fast-path description
 * (holdoff_breaker_fast_path, read once). */
struct fast_breaker {
    const holdoff_breaker *b;
    holdoff_fast_path fp;
};

static struct fast_breaker fast_of(const holdoff_breaker *b) {
    struct fast_breaker f = {b, {0}};
    check(holdoff_breaker_fast_path(b, &f.fp), HOLDOFF_STATUS_OK, "breaker_fast_path");
    return f;
}

/* The header's documented pattern: the word first, the library when it does not suffice. */
static void h_allow_record(void *ctx, long n) {
    const struct fast_breaker *f = ctx;
    for (long i = 0; i < n; i++) {
        holdoff_permit p;
        if (!holdoff_fast_allow(&f->fp, &p) && holdoff_breaker_allow(f->b, &p, NULL) != HOLDOFF_STATUS_OK) abort();
        if (!holdoff_fast_record_success(&f->fp, &p) &&
            holdoff_breaker_record(f->b, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL) != HOLDOFF_STATUS_OK)
            abort();
    }
}

/* The library alone (no fast path), for the note: what each call costs through the ABI. */
static void h_allow_record_library(void *ctx, long n) {
    const holdoff_breaker *b = ctx;
    for (long i = 0; i < n; i++) {
        holdoff_permit p;
        if (holdoff_breaker_allow(b, &p, NULL) != HOLDOFF_STATUS_OK) abort();
        if (holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL) != HOLDOFF_STATUS_OK) abort();
    }
}

static void h_refuse(void *ctx, long n) {
    const holdoff_breaker *b = ctx;
    for (long i = 0; i < n; i++) {
        holdoff_permit p;
        holdoff_refusal r;
        if (holdoff_breaker_allow(b, &p, &r) != HOLDOFF_STATUS_BREAKER_OPEN) abort();
    }
}

static void h_budget_429(void *ctx, long n) {
    const holdoff_retry_budget *budget = ctx;
    for (long i = 0; i < n; i++) {
        holdoff_retry_state *s;
        holdoff_decision d;
        if (holdoff_retry_state_new(&s) != HOLDOFF_STATUS_OK) abort();
        if (holdoff_retry_budget_decide(budget, s, HOLDOFF_OUTCOME_RETRY_LATER, 1000000000ULL, &d) != HOLDOFF_STATUS_OK ||
            d.kind != HOLDOFF_DECISION_KIND_RETRY)
            abort();
        holdoff_retry_state_free(s);
    }
}

static volatile int sink;
static int trivial(void) { return sink; }

/* The same shape as mb_call: C has no closure helper, so the caller wraps fn itself, with the
 * fast path as in h_allow_record. */
static void h_protected(void *ctx, long n) {
    const struct fast_breaker *f = ctx;
    for (long i = 0; i < n; i++) {
        holdoff_permit p;
        if (!holdoff_fast_allow(&f->fp, &p) && holdoff_breaker_allow(f->b, &p, NULL) != HOLDOFF_STATUS_OK) abort();
        sink = trivial();
        if (!holdoff_fast_record_success(&f->fp, &p) &&
            holdoff_breaker_record(f->b, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL) != HOLDOFF_STATUS_OK)
            abort();
    }
}

struct lookup {
    const holdoff_breaker_group *group;
    char (*keys)[16];
    long nkeys;
};

static void key_of(char *buf, long i) { snprintf(buf, 16, "host-%ld", i); }

static void h_lookup(void *ctx, long n) {
    struct lookup *l = ctx;
    /* A multiplicative stride visits keys in a scattered order, as real traffic would. */
    unsigned long k = 0;
    for (long i = 0; i < n; i++) {
        k = (k + 7919) % (unsigned long)l->nkeys;
        holdoff_breaker *b;
        const char *key = l->keys[k];
        if (holdoff_breaker_group_get(l->group, key, strlen(key), &b) != HOLDOFF_STATUS_OK) abort();
        holdoff_breaker_free(b);
    }
}

/* A group of default breakers bounded by the configuration's group.max_keys. */
static holdoff_breaker_group *group_of(const holdoff_clock *clock, long max_keys) {
    char json[64];
    snprintf(json, sizeof json, "{\"group\": {\"max_keys\": %ld}}", max_keys);
    holdoff_config *config;
    check(holdoff_config_parse(json, strlen(json), &config), HOLDOFF_STATUS_OK, "config_parse");
    holdoff_breaker_group *g;
    check(holdoff_breaker_group_new(config, clock, &g), HOLDOFF_STATUS_OK, "group_new");
    holdoff_config_free(config);
    return g;
}

static void group_lookup(const holdoff_clock *clock, long nkeys, const char *op) {
    holdoff_breaker_group *g = group_of(clock, nkeys);
    struct lookup l = {g, malloc((size_t)nkeys * 16), nkeys};
    for (long i = 0; i < nkeys; i++) {
        holdoff_breaker *b;
        key_of(l.keys[i], i);
        check(holdoff_breaker_group_get(g, l.keys[i], strlen(l.keys[i]), &b), HOLDOFF_STATUS_OK, "group_get");
        holdoff_breaker_free(b);
    }
    char note[160];
    snprintf(note, sizeof note,
             "holdoff_breaker_group_get(existing key) + holdoff_breaker_free(handle), %ld keys, scattered order", nkeys);
    measure("holdoff", op, h_lookup, &l, 1, note);
    free(l.keys);
    holdoff_breaker_group_free(g);
}

/* ---- the baseline: a consecutive-failure breaker behind one pthread mutex ---- */

struct mutex_breaker {
    pthread_mutex_t mu;
    int failures, threshold, open;
    double open_until_ns;
    double open_for_ns;
};

static struct mutex_breaker *mb_new(void) {
    struct mutex_breaker *b = malloc(sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    b->failures = 0;
    b->threshold = 5;
    b->open = 0;
    b->open_until_ns = 0;
    b->open_for_ns = 30e9;
    return b;
}

static void mb_free(struct mutex_breaker *b) {
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* 1 admitted, 0 refused; the clock is read only while open (as holdoff does). */
static int mb_allow(struct mutex_breaker *b) {
    pthread_mutex_lock(&b->mu);
    int ok = !b->open || now_ns() >= b->open_until_ns;
    pthread_mutex_unlock(&b->mu);
    return ok;
}

static void mb_record(struct mutex_breaker *b, int success) {
    pthread_mutex_lock(&b->mu);
    if (success) {
        b->failures = 0;
        b->open = 0;
    } else if (++b->failures >= b->threshold) {
        b->open = 1;
        b->open_until_ns = now_ns() + b->open_for_ns;
    }
    pthread_mutex_unlock(&b->mu);
}

static int mb_call(struct mutex_breaker *b, int (*fn)(void), int *result) {
    if (!mb_allow(b)) return 0;
    *result = fn();
    mb_record(b, 1);
    return 1;
}

static void m_allow_record(void *ctx, long n) {
    struct mutex_breaker *b = ctx;
    for (long i = 0; i < n; i++) {
        if (!mb_allow(b)) abort();
        mb_record(b, 1);
    }
}

static void m_refuse(void *ctx, long n) {
    struct mutex_breaker *b = ctx;
    for (long i = 0; i < n; i++)
        if (mb_allow(b)) abort();
}

static void m_protected(void *ctx, long n) {
    struct mutex_breaker *b = ctx;
    int r;
    for (long i = 0; i < n; i++)
        if (!mb_call(b, trivial, &r)) abort();
}

/* ---- memory and allocations ---- */

static void memory(const holdoff_clock *clock) {
    void **objs = malloc(MEM_N * sizeof *objs);
    double s[SAMPLES];

    for (int r = 0; r < SAMPLES; r++) {
        double h0 = heap_bytes();
        for (long i = 0; i < MEM_N; i++)
            check(holdoff_breaker_new(NULL, clock, (holdoff_breaker **)&objs[i]), HOLDOFF_STATUS_OK, "breaker_new");
        s[r] = (heap_bytes() - h0) / MEM_N;
        for (long i = 0; i < MEM_N; i++) holdoff_breaker_free(objs[i]);
    }
    emit("holdoff", "bytes_per_breaker", "bytes", s,
         "glibc mallinfo2 in-use delta over 100k holdoff_breaker_new (default options, shared clock)");

    for (int r = 0; r < SAMPLES; r++) {
        holdoff_breaker_group *g = group_of(clock, 100000);
        double h0 = heap_bytes();
        char key[16];
        for (long i = 0; i < MEM_N; i++) {
            holdoff_breaker *b;
            key_of(key, i);
            check(holdoff_breaker_group_get(g, key, strlen(key), &b), HOLDOFF_STATUS_OK, "group_get");
            holdoff_breaker_free(b);
        }
        s[r] = (heap_bytes() - h0) / MEM_N;
        holdoff_breaker_group_free(g);
    }
    emit("holdoff", "bytes_per_group_entry", "bytes", s,
         "glibc mallinfo2 in-use delta over 100k keys (host-N, ~10 bytes) in one group, handles freed");

    for (int r = 0; r < SAMPLES; r++) {
        double h0 = heap_bytes();
        for (long i = 0; i < MEM_N; i++) objs[i] = mb_new();
        s[r] = (heap_bytes() - h0) / MEM_N;
        for (long i = 0; i < MEM_N; i++) mb_free(objs[i]);
    }
    emit("mutex-baseline", "bytes_per_breaker", "bytes", s, "glibc mallinfo2 in-use delta over 100k malloc'd structs");
    free(objs);
}

static void allocations(struct fast_breaker *b, struct mutex_breaker *mb) {
    const long n = 100000;
    double s[SAMPLES];
    /* The wrap must see the library's allocations, or a zero below would mean nothing. */
    long a0 = atomic_load(&allocs);
    holdoff_retry_state *st;
    check(holdoff_retry_state_new(&st), HOLDOFF_STATUS_OK, "retry_state_new");
    holdoff_retry_state_free(st);
    if (atomic_load(&allocs) == a0) {
        printf("allocation counting is not active (built without -Wl,--wrap=malloc): skipped\n");
        return;
    }
    for (int r = 0; r < SAMPLES; r++) {
        long a0 = atomic_load(&allocs);
        h_allow_record(b, n);
        s[r] = (double)(atomic_load(&allocs) - a0) / (double)n;
    }
    emit("holdoff", "allocs_per_allow_record", "allocs/op", s,
         "malloc/calloc/realloc/posix_memalign/aligned_alloc calls (link-time wrap) per allow+record, as allow_record");
    for (int r = 0; r < SAMPLES; r++) {
        long a0 = atomic_load(&allocs);
        m_allow_record(mb, n);
        s[r] = (double)(atomic_load(&allocs) - a0) / (double)n;
    }
    emit("mutex-baseline", "allocs_per_allow_record", "allocs/op", s, "malloc calls (link-time wrap) per allow+record");
}

int main(void) {
    const char *path = getenv("HOLDOFF_BENCH_OUT");
    if (path && *path) {
        out = fopen(path, "a");
        if (!out) {
            perror(path);
            return 1;
        }
    }
    printf("holdoff %s, C ABI (release), %d samples of ~%.0f ms each; median (min, max)\n", holdoff_version(), SAMPLES,
           TARGET_NS / 1e6);

    holdoff_clock *clock;
    check(holdoff_clock_new_system(&clock), HOLDOFF_STATUS_OK, "clock");
    holdoff_breaker *b; /* NULL configuration: the core's defaults */
    check(holdoff_breaker_new(NULL, clock, &b), HOLDOFF_STATUS_OK, "breaker_new");
    struct mutex_breaker *mb = mb_new();

    struct fast_breaker fb = fast_of(b);
    double lib[SAMPLES], lib2[SAMPLES];
    sample(h_allow_record_library, b, 1, lib);
    sample(h_allow_record_library, b, 2, lib2);
    char note[320];
    snprintf(note, sizeof note,
             "holdoff_fast_allow + holdoff_fast_record_success (header, static inline: the fast-path word), "
             "holdoff_breaker_allow/record when they return 0; closed, default options. Through the library "
             "alone: %.1f ns",
             median(lib));
    measure("holdoff", "allow_record", h_allow_record, &fb, 1, note);
    measure("mutex-baseline", "allow_record", m_allow_record, mb, 1,
            "hand-written consecutive-failure breaker: lock/check/unlock + lock/reset/unlock");
    snprintf(note, sizeof note,
             "as allow_record (the fast-path word), 2 pthreads sharing one breaker; wall ns / ops per thread. "
             "Through the library alone: %.1f ns",
             median(lib2));
    measure("holdoff", "allow_record_2t", h_allow_record, &fb, 2, note);
    measure("mutex-baseline", "allow_record_2t", m_allow_record, mb, 2,
            "as allow_record, 2 pthreads sharing one breaker; wall ns / ops per thread");

    holdoff_breaker *ob;
    check(holdoff_breaker_new(NULL, clock, &ob), HOLDOFF_STATUS_OK, "breaker_new");
    holdoff_breaker_force_open(ob);
    measure("holdoff", "refuse_open", h_refuse, ob, 1,
            "holdoff_breaker_allow -> HOLDOFF_STATUS_BREAKER_OPEN with the refusal filled (forced open)");
    struct mutex_breaker *omb = mb_new();
    for (int i = 0; i < 5; i++) mb_record(omb, 0);
    measure("mutex-baseline", "refuse_open", m_refuse, omb, 1, "allow on the open baseline (lock, clock read, unlock)");

    holdoff_retry_budget *budget;
    check(holdoff_retry_budget_new(NULL, clock, &budget), HOLDOFF_STATUS_OK, "budget_new");
    measure("holdoff", "budget_429", h_budget_429, budget, 1,
            "holdoff_retry_state_new + holdoff_retry_budget_decide(RETRY_LATER, 1 s) + holdoff_retry_state_free");

    holdoff_breaker *pb;
    check(holdoff_breaker_new(NULL, clock, &pb), HOLDOFF_STATUS_OK, "breaker_new");
    struct fast_breaker fpb = fast_of(pb);
    measure("holdoff", "protected_call", h_protected, &fpb, 1,
            "no closure helper in C: holdoff_fast_allow + fn() + holdoff_fast_record_success (the fast-path "
            "word), the library when they return 0");
    measure("mutex-baseline", "protected_call", m_protected, mb, 1, "mb_call(breaker, fn): allow + fn() + record");

    group_lookup(clock, 10, "group_lookup_10");
    group_lookup(clock, 10000, "group_lookup_10k");
    group_lookup(clock, 1000000, "group_lookup_1m");

    memory(clock);
    allocations(&fb, mb);

    holdoff_breaker_free(pb);
    holdoff_retry_budget_free(budget);
    holdoff_breaker_free(ob);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
    mb_free(mb);
    mb_free(omb);
    if (out) fclose(out);
    return 0;
}
