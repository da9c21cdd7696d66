/*
 * The check the C test programs count with: CHECK(cond) counts a pass, or counts a failure and
 * prints the condition with the calling thread's last error message. Each program prints
 * `N passed, N failed` last and exits non-zero on a failure.
 */
#ifndef HOLDOFF_TESTS_CHECK_H
#define HOLDOFF_TESTS_CHECK_H

#include <stdio.h>

#include "holdoff.h"

static int passed, failed;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) {                                                                 \
            passed++;                                                               \
        } else {                                                                    \
            failed++;                                                               \
            printf("FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                   holdoff_last_error_message());                                   \
        }                                                                           \
    } while (0)

#endif
