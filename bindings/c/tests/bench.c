/*
 * allow+record through the C ABI (release library): the closed hot path every call of a
 * healthy upstream takes, and the refusal path of an open breaker. Best of 5 runs.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "holdoff.h"

#define N 10000000L
#define RUNS 5

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static holdoff_breaker *make(holdoff_clock *clock) {
    holdoff_breaker_options o;
    holdoff_breaker *b = NULL;
    holdoff_breaker_options_init(&o);
    if (holdoff_breaker_new(&o, clock, &b) != HOLDOFF_STATUS_OK) abort();
    return b;
}

static void *allow_record(void *arg) {
    holdoff_breaker *b = arg;
    for (long i = 0; i < N; i++) {
        holdoff_permit p;
        if (holdoff_breaker_allow(b, &p, NULL) != HOLDOFF_STATUS_OK) abort();
        if (holdoff_breaker_record(b, &p, HOLDOFF_OUTCOME_SUCCESS, 0, NULL) != HOLDOFF_STATUS_OK) abort();
    }
    return NULL;
}

static double best(void *(*f)(void *), holdoff_breaker *b, int threads) {
    double best_ns = 1e30;
    for (int r = 0; r < RUNS; r++) {
        pthread_t t[8];
        double t0 = now_s();
        for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, f, b);
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        double ns = (now_s() - t0) * 1e9 / (double)N;
        if (ns < best_ns) best_ns = ns;
    }
    return best_ns;
}

int main(void) {
    holdoff_clock *clock = NULL;
    holdoff_clock_new_system(&clock);
    holdoff_breaker *b = make(clock);
    printf("C ABI allow+record (closed, success), 1 thread : %6.1f ns/op\n", best(allow_record, b, 1));
    printf("C ABI allow+record (closed, success), 2 threads: %6.1f ns/op per thread (shared breaker)\n",
           best(allow_record, b, 2));
    holdoff_breaker_force_open(b);
    double best_ns = 1e30;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_s();
        for (long i = 0; i < N / 10; i++) {
            holdoff_permit p;
            holdoff_refusal ref;
            if (holdoff_breaker_allow(b, &p, &ref) != HOLDOFF_STATUS_BREAKER_OPEN) abort();
        }
        double ns = (now_s() - t0) * 1e9 / (double)(N / 10);
        if (ns < best_ns) best_ns = ns;
    }
    printf("C ABI allow refused (forced open), 1 thread     : %6.1f ns/op\n", best_ns);
    holdoff_breaker_free(b);
    holdoff_clock_free(clock);
    return 0;
}
