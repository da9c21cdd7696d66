/*
 * A metric reading written as the conformance suite and the simulator write it: `name`, or
 * `name{k=v,...}` with the metric's own attribute and the upstream (a group's key) sorted by
 * key. Shared by the conformance runner and the metrics test.
 */
#ifndef HOLDOFF_TESTS_METRICS_SERIES_H
#define HOLDOFF_TESTS_METRICS_SERIES_H

#include <stdio.h>
#include <string.h>

#include "holdoff.h"

/* Writes the series of `s` into buf; 0, or -1 for an unknown metric or a buffer too small. */
static int series_name(const holdoff_metric_sample *s, char *buf, size_t cap) {
    holdoff_metric_info info;
    if (holdoff_metric_describe(s->metric, &info) != HOLDOFF_STATUS_OK) return -1;
    const char *keys[2], *values[2];
    int n = 0;
    if (s->attribute != HOLDOFF_METRIC_NO_ATTRIBUTE) {
        keys[n] = info.attribute;
        values[n] = holdoff_metric_attribute_value(s->metric, s->attribute);
        if (!keys[n] || !values[n]) return -1;
        n++;
    }
    if (s->upstream) {
        keys[n] = "upstream";
        values[n++] = s->upstream;
    }
    int swap = n == 2 && strcmp(keys[0], keys[1]) > 0;
    size_t len = (size_t)snprintf(buf, cap, "%s", info.name);
    for (int i = 0; i < n && len < cap; i++) {
        int j = swap ? 1 - i : i;
        len += (size_t)snprintf(buf + len, cap - len, "%s%s=%s", i ? "," : "{", keys[j], values[j]);
    }
    if (n && len < cap) len += (size_t)snprintf(buf + len, cap - len, "}");
    return len < cap ? 0 : -1;
}

#endif
