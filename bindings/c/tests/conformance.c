/*
 * holdoff C conformance runner: every case of conformance/cases through include/holdoff.h,
 * following the runner contract in conformance/README.md (mirrors core/tests/conformance.rs).
 *
 * Usage: conformance CASES_DIR   (HOLDOFF_CASES=substring runs only matching case ids)
 * Prints one line per case and ends with `N passed, N failed, N skipped`; exits non-zero on a
 * failure, when no case ran, or when a handle is left alive at the end.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "holdoff.h"
#include "metrics_series.h"

#define SUITE_VERSION 4
#define NS_PER_MS 1000000ULL
#define MAX_HEADERS 64

/* ------------------------------------------------------------------------------------------ */
/* Small utilities                                                                             */

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 4096 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    memcpy(d, s, n);
    return d;
}

/* A failure message for the current case (first one wins). */
typedef struct {
    char text[2048];
    int set;
} err_t;

static int fail(err_t *e, const char *fmt, ...) {
    if (!e->set) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->text, sizeof e->text, fmt, ap);
        va_end(ap);
        e->set = 1;
    }
    return -1;
}

/* A JSON number of milliseconds from nanoseconds: an integer when whole, as the Rust runner. */
static double ms_of(uint64_t ns) {
    if (ns % NS_PER_MS == 0) return (double)(ns / NS_PER_MS);
    return (double)ns / 1e6;
}

static void add_ms(cJSON *o, const char *k, uint64_t ns) { cJSON_AddNumberToObject(o, k, ms_of(ns)); }

static void add_opt_ms(cJSON *o, const char *k, int has, uint64_t ns) {
    if (has)
        add_ms(o, k, ns);
    else
        cJSON_AddNullToObject(o, k);
}

static int json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != (double)(uint64_t)v->valuedouble)
        return 0;
    *out = (uint64_t)v->valuedouble;
    return 1;
}

/* Any integer a case gives (a status may be negative or 70000), within +-2^53. */
static int json_i64(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < -9007199254740992.0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return 0;
    *out = (int64_t)v->valuedouble;
    return 1;
}

static const char *str_of(const cJSON *o, const char *k, const char *dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

/* Compares `expect` (an object) with `actual`; `known` is the NULL-terminated list of keys the
 * op may assert. A key the runner does not know fails the case. */
static int check(err_t *e, const cJSON *expect, const cJSON *actual, const char *const *known) {
    if (!expect) return 0;
    if (!cJSON_IsObject(expect)) return fail(e, "expect must be an object");
    cJSON *null_item = cJSON_CreateNull();
    int rc = 0;
    const cJSON *want;
    cJSON_ArrayForEach(want, expect) {
        int ok = 0;
        for (const char *const *k = known; *k; k++)
            if (strcmp(*k, want->string) == 0) ok = 1;
        if (!ok) {
            rc = fail(e, "unknown expect key \"%s\"", want->string);
            break;
        }
        const cJSON *got = cJSON_GetObjectItemCaseSensitive(actual, want->string);
        if (!got) got = null_item;
        int same;
        if (cJSON_IsNumber(want) && cJSON_IsNumber(got))
            same = want->valuedouble == got->valuedouble;
        else
            same = cJSON_Compare(want, got, 1);
        if (!same) {
            char *w = cJSON_PrintUnformatted(want), *g = cJSON_PrintUnformatted(got);
            char *all = cJSON_PrintUnformatted(actual);
            rc = fail(e, "%s: expected %s, got %s  (all: %s)", want->string, w, g, all);
            free(w);
            free(g);
            free(all);
            break;
        }
    }
    cJSON_Delete(null_item);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Named things a case keeps: permits, budget calls, policy calls, quota leases                */

/* A permit is recorded on the breaker that admitted it, as user code does: the entry keeps that
 * breaker (a handle of its own when a group handed it out, else the case's breaker, borrowed). */
typedef struct {
    char *name;
    holdoff_breaker *breaker;
    int owned;
    holdoff_permit permit;
} permit_entry;

typedef struct {
    char *name;
    holdoff_retry_state *state;
} state_entry;

typedef struct {
    char *name;
    holdoff_policy_call *call;
} pcall_entry;

typedef struct {
    char *name;
    holdoff_quota_lease lease;
} lease_entry;

#define VEC(T)       \
    struct {         \
        T *items;    \
        size_t len;  \
        size_t cap;  \
    }

#define VEC_PUSH(v, x)                                                   \
    do {                                                                 \
        if ((v).len == (v).cap) {                                        \
            (v).cap = (v).cap ? (v).cap * 2 : 8;                         \
            (v).items = realloc((v).items, (v).cap * sizeof *(v).items); \
        }                                                                \
        (v).items[(v).len++] = (x);                                      \
    } while (0)

typedef struct {
    holdoff_clock *clock;
    holdoff_config *config;
    holdoff_breaker *breaker;
    holdoff_breaker_group *group;
    holdoff_retry_budget *budget;
    holdoff_retry_quota *quota;
    holdoff_classifier *classifier;
    holdoff_policy *policy;
    VEC(permit_entry) permits;
    VEC(state_entry) states;
    VEC(pcall_entry) pcalls;
    VEC(lease_entry) leases;
    /* 1 for the second and later workers of a fleet case: the clock and configuration are the
     * first worker's, freed with it. */
    int borrowed;
} ctx_t;

static void ctx_free(ctx_t *c) {
    for (size_t i = 0; i < c->permits.len; i++) {
        free(c->permits.items[i].name);
        if (c->permits.items[i].owned) holdoff_breaker_free(c->permits.items[i].breaker);
    }
    for (size_t i = 0; i < c->states.len; i++) {
        free(c->states.items[i].name);
        holdoff_retry_state_free(c->states.items[i].state);
    }
    for (size_t i = 0; i < c->pcalls.len; i++) {
        free(c->pcalls.items[i].name);
        holdoff_policy_call_free(c->pcalls.items[i].call);
    }
    for (size_t i = 0; i < c->leases.len; i++) free(c->leases.items[i].name);
    free(c->permits.items);
    free(c->states.items);
    free(c->pcalls.items);
    free(c->leases.items);
    /* Freed in creation order on purpose: objects keep what they need alive. */
    if (!c->borrowed) {
        holdoff_clock_free(c->clock);
        holdoff_config_free(c->config);
    }
    holdoff_breaker_free(c->breaker);
    holdoff_breaker_group_free(c->group);
    holdoff_retry_budget_free(c->budget);
    holdoff_retry_quota_free(c->quota);
    holdoff_classifier_free(c->classifier);
    holdoff_policy_free(c->policy);
    memset(c, 0, sizeof *c);
}

static permit_entry *find_permit(ctx_t *c, const char *name) {
    for (size_t i = 0; i < c->permits.len; i++)
        if (strcmp(c->permits.items[i].name, name) == 0) return &c->permits.items[i];
    return NULL;
}

/* Keeps permit `p` under `name` with the breaker that admitted it (taking over the handle if
 * `owned`); a permit of the same name is replaced. */
static void put_permit(ctx_t *c, const char *name, holdoff_breaker *b, int owned, holdoff_permit p) {
    permit_entry *e = find_permit(c, name);
    if (e) {
        if (e->owned) holdoff_breaker_free(e->breaker);
        e->breaker = b;
        e->owned = owned;
        e->permit = p;
        return;
    }
    permit_entry n = {dupstr(name), b, owned, p};
    VEC_PUSH(c->permits, n);
}

static lease_entry *find_lease(ctx_t *c, const char *name) {
    for (size_t i = 0; i < c->leases.len; i++)
        if (strcmp(c->leases.items[i].name, name) == 0) return &c->leases.items[i];
    return NULL;
}

static void put_lease(ctx_t *c, const char *name, holdoff_quota_lease lease) {
    lease_entry *e = find_lease(c, name);
    if (e) {
        e->lease = lease;
        return;
    }
    lease_entry n = {dupstr(name), lease};
    VEC_PUSH(c->leases, n);
}

static holdoff_retry_state *retry_state(ctx_t *c, const char *name, int create) {
    for (size_t i = 0; i < c->states.len; i++)
        if (strcmp(c->states.items[i].name, name) == 0) return c->states.items[i].state;
    if (!create) return NULL;
    state_entry n = {dupstr(name), NULL};
    if (holdoff_retry_state_new(&n.state) != HOLDOFF_STATUS_OK) abort();
    VEC_PUSH(c->states, n);
    return n.state;
}

static holdoff_policy_call *policy_call(ctx_t *c, const char *name) {
    for (size_t i = 0; i < c->pcalls.len; i++)
        if (strcmp(c->pcalls.items[i].name, name) == 0) return c->pcalls.items[i].call;
    pcall_entry n = {dupstr(name), NULL};
    if (holdoff_policy_call_new(&n.call) != HOLDOFF_STATUS_OK) abort();
    VEC_PUSH(c->pcalls, n);
    return n.call;
}

/* ------------------------------------------------------------------------------------------ */
/* Conversions                                                                                 */

static int parse_outcome(err_t *e, const cJSON *v, uint32_t *kind, uint64_t *later_ns) {
    static const char *const names[] = {"success", "answer", "failure", "timeout", NULL};
    static const uint32_t kinds[] = {HOLDOFF_OUTCOME_SUCCESS, HOLDOFF_OUTCOME_ANSWER,
                                     HOLDOFF_OUTCOME_FAILURE, HOLDOFF_OUTCOME_TIMEOUT};
    *later_ns = 0;
    if (cJSON_IsString(v)) {
        if (strcmp(v->valuestring, "cancelled") == 0) {
            *kind = HOLDOFF_OUTCOME_CANCELLED;
            return 0;
        }
        for (int i = 0; names[i]; i++)
            if (strcmp(names[i], v->valuestring) == 0) {
                *kind = kinds[i];
                return 0;
            }
        return fail(e, "unknown outcome \"%s\"", v->valuestring);
    }
    uint64_t ms;
    if (cJSON_IsObject(v) && json_u64(cJSON_GetObjectItemCaseSensitive(v, "retry_later_ms"), &ms)) {
        *kind = HOLDOFF_OUTCOME_RETRY_LATER;
        *later_ns = ms * NS_PER_MS;
        return 0;
    }
    return fail(e, "bad outcome");
}

static void add_error(cJSON *a, holdoff_status st) {
    const char *name = holdoff_status_name(st);
    cJSON_AddStringToObject(a, "error", name ? name : "unknown");
}

static int is_error(holdoff_status st) { return st != HOLDOFF_STATUS_OK && st != HOLDOFF_STATUS_BREAKER_OPEN; }

static void add_decision(cJSON *a, const holdoff_decision *d) {
    cJSON_AddStringToObject(a, "decision", holdoff_decision_kind_name(d->kind));
    if (d->kind == HOLDOFF_DECISION_KIND_RETRY) {
        add_ms(a, "delay_ms", d->delay_ns);
        cJSON_AddStringToObject(a, "source", holdoff_wait_source_name(d->source));
        add_opt_ms(a, "server_delay_ms", d->has_server_delay, d->server_delay_ns);
        cJSON_AddBoolToObject(a, "capped", d->capped);
    } else if (d->kind == HOLDOFF_DECISION_KIND_GIVE_UP) {
        cJSON_AddStringToObject(a, "reason", holdoff_give_up_reason_name(d->reason));
        add_opt_ms(a, "server_delay_ms", d->has_server_delay, d->server_delay_ns);
    }
}

/* Reads `headers` ([[name, value], ...]) of a step into `out`; returns the count or -1. */
static int read_headers(err_t *e, const cJSON *step, holdoff_header *out) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(step, "headers");
    if (!list) return 0;
    if (!cJSON_IsArray(list)) return fail(e, "headers must be an array");
    int n = 0;
    const cJSON *pair;
    cJSON_ArrayForEach(pair, list) {
        const cJSON *name = cJSON_GetArrayItem(pair, 0), *value = cJSON_GetArrayItem(pair, 1);
        if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2 || !cJSON_IsString(name) ||
            !cJSON_IsString(value) || n == MAX_HEADERS)
            return fail(e, "bad header");
        out[n].name = name->valuestring;
        out[n].name_len = strlen(name->valuestring);
        out[n].value = value->valuestring;
        out[n].value_len = strlen(value->valuestring);
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* Building a case                                                                             */

static int bool_of(const cJSON *o, const char *k) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k)); }

/* ------------------------------------------------------------------------------------------ */
/* Metrics                                                                                     */

/* Reads the metrics of the object `of` names ("breaker", "policy", "quota", "group") into a new
 * list; *missing is set when the case has no such object. */
static holdoff_status metrics_of(const ctx_t *c, const char *of, holdoff_metric_list **out, int *missing) {
    *missing = 0;
    if (strcmp(of, "breaker") == 0 && c->breaker) return holdoff_breaker_metrics(c->breaker, out);
    if (strcmp(of, "policy") == 0 && c->policy) return holdoff_policy_metrics(c->policy, out);
    if (strcmp(of, "quota") == 0 && c->quota) return holdoff_retry_quota_metrics(c->quota, out);
    if (strcmp(of, "group") == 0 && c->group) return holdoff_breaker_group_metrics(c->group, out);
    *missing = 1;
    return HOLDOFF_STATUS_OK;
}

/* Counting starts at an object's first read: every object is read once as soon as it is built,
 * so the metrics steps count the whole case. */
static holdoff_status start_counting(const ctx_t *c) {
    static const char *const objects[] = {"breaker", "policy", "quota", "group"};
    for (size_t i = 0; i < sizeof objects / sizeof *objects; i++) {
        holdoff_metric_list *list = NULL;
        int missing;
        holdoff_status st = metrics_of(c, objects[i], &list, &missing);
        holdoff_metric_list_free(list);
        if (st != HOLDOFF_STATUS_OK) return st;
    }
    return HOLDOFF_STATUS_OK;
}

/* The `metrics` step: the object's readings, zeros dropped, must equal `expect.series` exactly
 * (the same series, each value within 1e-9). */
static int step_metrics(err_t *e, ctx_t *c, const cJSON *step, const cJSON *expect) {
    const char *of = str_of(step, "of", "");
    holdoff_metric_list *list = NULL;
    int missing;
    if (metrics_of(c, of, &list, &missing) != HOLDOFF_STATUS_OK)
        return fail(e, "metrics of %s: %s", of, holdoff_last_error_message());
    if (missing) return fail(e, "metrics of \"%s\": the case has none (breaker, policy, quota or group)", of);
    cJSON *got = cJSON_CreateObject();
    int rc = 0;
    size_t n = holdoff_metric_list_len(list);
    for (size_t i = 0; i < n && rc == 0; i++) {
        holdoff_metric_sample s;
        char name[512];
        if (holdoff_metric_list_get(list, i, &s) != HOLDOFF_STATUS_OK || series_name(&s, name, sizeof name) != 0)
            rc = fail(e, "metrics of %s: reading %zu: %s", of, i, holdoff_last_error_message());
        else if (s.value != 0)
            cJSON_AddNumberToObject(got, name, s.value);
    }
    holdoff_metric_list_free(list);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(expect, "series"), *item;
    if (rc == 0 && expect) {
        cJSON_ArrayForEach(item, expect) {
            if (strcmp(item->string, "series") != 0) rc = fail(e, "unknown expect key \"%s\"", item->string);
        }
    }
    if (rc == 0 && want) {
        int same = cJSON_IsObject(want) && cJSON_GetArraySize(want) == cJSON_GetArraySize(got);
        cJSON_ArrayForEach(item, want) {
            const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, item->string);
            if (!cJSON_IsNumber(item) || !g || fabs(g->valuedouble - item->valuedouble) > 1e-9) same = 0;
        }
        if (!same) {
            char *w = cJSON_PrintUnformatted(want), *g = cJSON_PrintUnformatted(got);
            rc = fail(e, "metrics of %s: expected %s, got %s", of, w, g);
            free(w);
            free(g);
        }
    }
    cJSON_Delete(got);
    return rc;
}

/* Builds one worker's objects: the first worker (`first` NULL) parses the configuration and
 * makes the manual clock, every later worker builds from the same two. Returns
 * HOLDOFF_STATUS_OK or the first error's status. */
static holdoff_status build(const cJSON *cs, ctx_t *c, const ctx_t *first) {
    memset(c, 0, sizeof *c);
    holdoff_status st;
    if (first) {
        c->config = first->config;
        c->clock = first->clock;
        c->borrowed = 1;
    } else {
        const cJSON *config = cJSON_GetObjectItemCaseSensitive(cs, "config");
        char *text = config ? cJSON_PrintUnformatted(config) : dupstr("{}");
        st = holdoff_config_parse(text, strlen(text), &c->config);
        free(text);
        if (st != HOLDOFF_STATUS_OK) return st;
        uint64_t origin_ms = 0;
        const cJSON *clock = cJSON_GetObjectItemCaseSensitive(cs, "clock");
        if (clock) json_u64(cJSON_GetObjectItemCaseSensitive(clock, "wall_origin_unix_ms"), &origin_ms);
        st = holdoff_clock_new_manual(origin_ms * NS_PER_MS, &c->clock);
        if (st != HOLDOFF_STATUS_OK) return st;
    }
    uint32_t parts = 0;
    holdoff_config_parts(c->config, &parts);
    if (parts & HOLDOFF_CONFIG_BREAKER) {
        st = bool_of(cs, "group") ? holdoff_breaker_group_new(c->config, c->clock, &c->group)
                                  : holdoff_breaker_new(c->config, c->clock, &c->breaker);
        if (st != HOLDOFF_STATUS_OK) return st;
    }
    if (parts & HOLDOFF_CONFIG_BUDGET) {
        st = holdoff_retry_budget_new(c->config, c->clock, &c->budget);
        if (st != HOLDOFF_STATUS_OK) return st;
    }
    if (parts & HOLDOFF_CONFIG_QUOTA) {
        st = holdoff_retry_quota_new(c->config, &c->quota);
        if (st != HOLDOFF_STATUS_OK) return st;
    }
    st = holdoff_classifier_new(c->config, &c->classifier);
    if (st != HOLDOFF_STATUS_OK) return st;
    if (bool_of(cs, "policy")) {
        st = holdoff_policy_new(c->breaker, c->budget, c->quota, c->classifier, &c->policy);
        if (st != HOLDOFF_STATUS_OK) return st;
    }
    return start_counting(c);
}

/* The breaker a step addresses: a new handle from the group for `key`, else the case's own
 * (borrowed: *owned is set to 0). */
static holdoff_breaker *breaker_for(err_t *e, ctx_t *c, const char *key, int *owned) {
    *owned = 0;
    if (key) {
        if (!c->group) {
            fail(e, "step names a key but the case has no group");
            return NULL;
        }
        holdoff_breaker *b = NULL;
        if (holdoff_breaker_group_get(c->group, key, strlen(key), &b) != HOLDOFF_STATUS_OK) {
            fail(e, "holdoff_breaker_group_get: %s", holdoff_last_error_message());
            return NULL;
        }
        *owned = 1;
        return b;
    }
    if (!c->breaker) fail(e, "the case has no breaker");
    return c->breaker;
}

static void release(holdoff_breaker *b, int owned) {
    if (owned) holdoff_breaker_free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* Steps                                                                                       */

static int do_allow(err_t *e, ctx_t *c, const cJSON *step, cJSON *a, int *admitted) {
    const char *key = str_of(step, "key", NULL);
    int owned;
    holdoff_breaker *b = breaker_for(e, c, key, &owned);
    if (!b) return -1;
    holdoff_permit p;
    holdoff_refusal r;
    holdoff_status st = holdoff_breaker_allow(b, &p, &r);
    if (st == HOLDOFF_STATUS_OK) {
        cJSON_AddTrueToObject(a, "admitted");
        cJSON_AddNumberToObject(a, "episode", p.episode);
        cJSON_AddBoolToObject(a, "probe", p.probe);
        put_permit(c, str_of(step, "as", "_last"), b, owned, p);
        *admitted = 1;
        return 0;
    }
    release(b, owned);
    if (st == HOLDOFF_STATUS_BREAKER_OPEN) {
        cJSON_AddFalseToObject(a, "admitted");
        add_opt_ms(a, "retry_after_ms", r.has_retry_after, r.retry_after_ns);
        cJSON_AddStringToObject(a, "state", holdoff_state_name(r.state));
        *admitted = 0;
    } else {
        return fail(e, "holdoff_breaker_allow: %s", holdoff_last_error_message());
    }
    return 0;
}

static int do_record(err_t *e, ctx_t *c, const char *name, uint32_t kind, uint64_t later, cJSON *a) {
    permit_entry *pe = find_permit(c, name);
    if (!pe) return fail(e, "no permit named \"%s\"", name);
    if (!pe->breaker) return fail(e, "permit \"%s\" has no breaker", name);
    uint32_t effect = 0;
    holdoff_status st = holdoff_breaker_record(pe->breaker, &pe->permit, kind, later, &effect);
    if (st == HOLDOFF_STATUS_OK)
        cJSON_AddStringToObject(a, "effect", holdoff_effect_name(effect));
    else
        add_error(a, st);
    return 0;
}

static const char *const K_ALLOW[] = {"admitted", "episode", "probe", "retry_after_ms", "state", NULL};
static const char *const K_RECORD[] = {"effect", "error", NULL};
static const char *const K_CALL[] = {"admitted", "episode", "probe", "retry_after_ms", "state", "effect", NULL};
static const char *const K_SNAPSHOT[] = {"state",          "episode",     "failures",    "recoveries",
                                         "probes_in_flight", "retry_after_ms", "probe_ready", "interval_ms",
                                         "opens",          "closes",      "probes",      "refusals",
                                         "stale_answers",  NULL};
static const char *const K_EVENT[] = {"at",     "from",
                                      "to",     "episode",
                                      "reason", "requested_delay_ms",
                                      "open_for_ms", NULL};
static const char *const K_NONE[] = {NULL};
static const char *const K_ERROR[] = {"error", NULL};
static const char *const K_DECIDE[] = {"decision", "delay_ms", "source", "server_delay_ms", "capped", "reason", NULL};
static const char *const K_AFTER[] = {"decision", "delay_ms", "source", "server_delay_ms",
                                      "capped",   "reason",   "error",  "outcome", NULL};
static const char *const K_BUDGET_STATE[] = {"episode_active", "episode_start_ms", "retries", NULL};
static const char *const K_RETRY_AFTER[] = {"delay_ms", "unusable", NULL};
static const char *const K_HINT[] = {"delay_ms", "unusable", "source", NULL};
static const char *const K_CLASSIFY[] = {"outcome", "retry_later_ms", "error", NULL};
static const char *const K_QUOTA_ACQUIRE[] = {"acquired", "cost", "available", NULL};
static const char *const K_QUOTA_SUCCESS[] = {"available", "error", NULL};
static const char *const K_GROUP_SNAPSHOT[] = {"keys", "max_keys", "evictions", "overflows", NULL};
static const char *const K_BEFORE[] = {"action", "episode", "probe", "delay_ms", "reason", "retry_after_ms", NULL};

static void add_retry_after(cJSON *a, const holdoff_retry_after *r) {
    if (r->unusable == HOLDOFF_UNUSABLE_NONE)
        add_ms(a, "delay_ms", r->delay_ns);
    else
        cJSON_AddStringToObject(a, "unusable", holdoff_unusable_name(r->unusable));
}

static uint64_t wall_now(ctx_t *c) {
    uint64_t w = 0;
    holdoff_clock_wall_now(c->clock, &w);
    return w;
}

static int step_events(err_t *e, ctx_t *c, const cJSON *step, const cJSON *expect) {
    int owned;
    holdoff_breaker *b = breaker_for(e, c, str_of(step, "key", NULL), &owned);
    if (!b) return -1;
    /* A deliberately small buffer, so the runner also exercises draining in several calls. */
    holdoff_state_change buf[3];
    cJSON *got = cJSON_CreateArray();
    for (;;) {
        size_t n = 0;
        if (holdoff_breaker_drain_events(b, buf, 3, &n) != HOLDOFF_STATUS_OK) {
            release(b, owned);
            cJSON_Delete(got);
            return fail(e, "holdoff_breaker_drain_events: %s", holdoff_last_error_message());
        }
        for (size_t i = 0; i < n; i++) {
            cJSON *ev = cJSON_CreateObject();
            cJSON_AddNumberToObject(ev, "at", (double)(buf[i].at_ns / NS_PER_MS));
            cJSON_AddStringToObject(ev, "from", holdoff_state_name(buf[i].from));
            cJSON_AddStringToObject(ev, "to", holdoff_state_name(buf[i].to));
            cJSON_AddNumberToObject(ev, "episode", buf[i].episode);
            cJSON_AddStringToObject(ev, "reason", holdoff_reason_name(buf[i].reason));
            add_opt_ms(ev, "requested_delay_ms", buf[i].has_requested_delay, buf[i].requested_delay_ns);
            add_opt_ms(ev, "open_for_ms", buf[i].has_open_for, buf[i].open_for_ns);
            cJSON_AddItemToArray(got, ev);
        }
        if (n < 3) break;
    }
    release(b, owned);
    int rc = 0;
    if (!cJSON_IsArray(expect)) {
        rc = fail(e, "events expects an array");
    } else if (cJSON_GetArraySize(expect) != cJSON_GetArraySize(got)) {
        char *g = cJSON_PrintUnformatted(got);
        rc = fail(e, "expected %d events, got %d: %s", cJSON_GetArraySize(expect), cJSON_GetArraySize(got), g);
        free(g);
    } else {
        for (int i = 0; i < cJSON_GetArraySize(got) && rc == 0; i++) {
            err_t sub = {{0}, 0};
            if (check(&sub, cJSON_GetArrayItem(expect, i), cJSON_GetArrayItem(got, i), K_EVENT) != 0)
                rc = fail(e, "event %d: %s", i, sub.text);
        }
    }
    cJSON_Delete(got);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* execute: one logical call through holdoff_execution_*                                       */

/* C has one helper flavour: the execution API itself, driven here as a C caller drives it. */
#define EXECUTE_FLAVOUR "execution"

static const char *const K_EXECUTE_ATTEMPT[] = {"at", "probe", "outcome", NULL};
static const char *const K_EXECUTE_WAIT[] = {"delay_ms", "source", "capped", "server_delay_ms", NULL};
static const char *const K_EXECUTE_RESULT[] = {"returns", "raises",          "reason", "attempts", "attempt",
                                               "retry_after_ms", "server_delay_ms", "capped", "cause", NULL};
static const char *const K_SCRIPT_ITEM[] = {"takes_ms", "returns", "response", "raises", "hits_deadline", "cancelled",
                                            NULL};

static int has_key(const char *const *known, const char *k) {
    for (; *known; known++)
        if (strcmp(*known, k) == 0) return 1;
    return 0;
}

/* Runs the scripted attempt `item` that step `*s` admitted and completes it, leaving the next
 * step in `*s`. The operation moves the manual clock by `takes_ms`; one that hangs runs until
 * its time limit passes on the manual clock and is reported as a timeout, as a C caller's own
 * timer would report it. */
static int run_attempt(err_t *e, ctx_t *c, holdoff_execution *x, const cJSON *item, holdoff_step *s) {
    const cJSON *k;
    cJSON_ArrayForEach(k, item) {
        if (!has_key(K_SCRIPT_ITEM, k->string)) return fail(e, "unknown script key \"%s\"", k->string);
    }
    uint64_t takes_ms = 0;
    const cJSON *takes = cJSON_GetObjectItemCaseSensitive(item, "takes_ms");
    if (takes && !json_u64(takes, &takes_ms)) return fail(e, "takes_ms must be a whole number of ms");
    const cJSON *returns = cJSON_GetObjectItemCaseSensitive(item, "returns");
    const cJSON *response = cJSON_GetObjectItemCaseSensitive(item, "response");
    const cJSON *raises = cJSON_GetObjectItemCaseSensitive(item, "raises");
    uint32_t attempted = HOLDOFF_ATTEMPTED_RAISED, kind = HOLDOFF_OUTCOME_FAILURE;
    uint64_t later = 0;
    holdoff_status st;
    if (bool_of(item, "hits_deadline")) {
        if (!s->has_time_limit) return fail(e, "attempt %u hangs but has no time limit", s->attempts);
        if (s->time_limit_ns != takes_ms * NS_PER_MS)
            return fail(e, "attempt %u: takes_ms %llu, but its time limit is %g ms", s->attempts,
                        (unsigned long long)takes_ms, ms_of(s->time_limit_ns));
        holdoff_clock_advance(c->clock, s->time_limit_ns);
        return holdoff_execution_complete(x, HOLDOFF_ATTEMPTED_RAISED, HOLDOFF_OUTCOME_TIMEOUT, 0, s) == HOLDOFF_STATUS_OK
                   ? 0
                   : fail(e, "holdoff_execution_complete: %s", holdoff_last_error_message());
    }
    holdoff_clock_advance(c->clock, takes_ms * NS_PER_MS);
    if (response) {
        int64_t status;
        holdoff_header hs[MAX_HEADERS];
        int n = read_headers(e, response, hs);
        if (n < 0) return -1;
        if (!json_i64(cJSON_GetObjectItemCaseSensitive(response, "status"), &status))
            return fail(e, "a response needs an integer status");
        st = holdoff_execution_complete_response(x, status, hs, (size_t)n, s);
        return st == HOLDOFF_STATUS_OK ? 0 : fail(e, "holdoff_execution_complete_response: %s", holdoff_last_error_message());
    }
    if (returns) {
        attempted = HOLDOFF_ATTEMPTED_RETURNED;
        if (parse_outcome(e, returns, &kind, &later) != 0) return -1;
    } else if (bool_of(item, "cancelled")) {
        attempted = HOLDOFF_ATTEMPTED_CANCELLED;
    } else if (cJSON_IsString(raises)) {
        const char *r = raises->valuestring;
        if (strcmp(r, "transport") == 0)
            kind = HOLDOFF_OUTCOME_FAILURE;
        else if (strcmp(r, "timeout") == 0)
            kind = HOLDOFF_OUTCOME_TIMEOUT;
        else if (strcmp(r, "answer") == 0)
            kind = HOLDOFF_OUTCOME_ANSWER;
        else if (strcmp(r, "bug") == 0)
            attempted = HOLDOFF_ATTEMPTED_BUG;
        else
            return fail(e, "unknown raise \"%s\"", r);
    } else if (raises) {
        if (parse_outcome(e, raises, &kind, &later) != 0) return -1;
    } else {
        return fail(e, "an attempt returns, responds, raises, hangs or is cancelled");
    }
    st = holdoff_execution_complete(x, attempted, kind, later, s);
    return st == HOLDOFF_STATUS_OK ? 0 : fail(e, "holdoff_execution_complete: %s", holdoff_last_error_message());
}

/* What the caller got, as the contract's `result` (mirrors the Rust reference runner). */
static cJSON *execute_result(const holdoff_step *s) {
    cJSON *r = cJSON_CreateObject();
    uint32_t n = s->attempts;
    switch (s->verdict) {
    case HOLDOFF_VERDICT_RETURN:
        cJSON_AddNumberToObject(r, "returns", n);
        return r;
    case HOLDOFF_VERDICT_RETHROW:
        cJSON_AddStringToObject(r, "raises", "original");
        cJSON_AddNumberToObject(r, "attempt", n);
        return r;
    default:
        break;
    }
    const char *name = holdoff_verdict_name(s->verdict);
    cJSON_AddStringToObject(r, "raises", name ? name : "unknown");
    cJSON_AddNumberToObject(r, "attempts", n);
    if (s->verdict == HOLDOFF_VERDICT_BREAKER_OPEN || s->verdict == HOLDOFF_VERDICT_GIVE_UP) {
        add_opt_ms(r, "retry_after_ms", s->has_retry_after, s->retry_after_ns);
        if (n > 0)
            cJSON_AddNumberToObject(r, "cause", n);
        else
            cJSON_AddNullToObject(r, "cause");
    }
    if (s->verdict == HOLDOFF_VERDICT_GIVE_UP) {
        if (s->has_reason)
            cJSON_AddStringToObject(r, "reason", holdoff_give_up_reason_name(s->reason));
        else
            cJSON_AddNullToObject(r, "reason");
        add_opt_ms(r, "server_delay_ms", s->has_server_delay, s->server_delay_ns);
        cJSON_AddBoolToObject(r, "capped", s->capped);
    }
    return r;
}

/* `attempts` and `waits` are exact lists, each item asserting the keys it lists; `result`
 * asserts the keys it lists. */
static int check_execute(err_t *e, const cJSON *expect, const cJSON *got) {
    if (!expect) return 0;
    if (!cJSON_IsObject(expect)) return fail(e, "expect must be an object");
    const cJSON *want;
    cJSON_ArrayForEach(want, expect) {
        const char *k = want->string;
        const cJSON *have = cJSON_GetObjectItemCaseSensitive(got, k);
        if (strcmp(k, "result") == 0) {
            err_t sub = {{0}, 0};
            if (check(&sub, want, have, K_EXECUTE_RESULT) != 0) return fail(e, "result: %s", sub.text);
            continue;
        }
        if (strcmp(k, "attempts") != 0 && strcmp(k, "waits") != 0) return fail(e, "unknown expect key \"%s\"", k);
        if (!cJSON_IsArray(want)) return fail(e, "%s must be an array", k);
        if (cJSON_GetArraySize(want) != cJSON_GetArraySize(have)) {
            char *g = cJSON_PrintUnformatted(have);
            int rc = fail(e, "%s: expected %d, got %d: %s", k, cJSON_GetArraySize(want), cJSON_GetArraySize(have), g);
            free(g);
            return rc;
        }
        const char *const *known = k[0] == 'a' ? K_EXECUTE_ATTEMPT : K_EXECUTE_WAIT;
        for (int i = 0; i < cJSON_GetArraySize(want); i++) {
            err_t sub = {{0}, 0};
            if (check(&sub, cJSON_GetArrayItem(want, i), cJSON_GetArrayItem(have, i), known) != 0)
                return fail(e, "%s[%d]: %s", k, i, sub.text);
        }
    }
    return 0;
}

/* Runs one `execute` step: the case's policy and `config.execute` make an execution; each
 * attempt does what the script says, each wait advances the manual clock by its delay (the
 * caller's sleep), and the wait numbered `cancel_in_wait` cancels the call instead. The
 * attempts (as an after-attempt hook sees them), the waits (as a before-wait hook sees them)
 * and the result are then compared with `expect`. */
static int step_execute(err_t *e, ctx_t *c, const cJSON *step, const cJSON *expect) {
    const cJSON *script = cJSON_GetObjectItemCaseSensitive(step, "script");
    uint64_t cancel_in_wait = 0;
    int cancels = json_u64(cJSON_GetObjectItemCaseSensitive(step, "cancel_in_wait"), &cancel_in_wait);
    if (!c->policy) return fail(e, "the case has no policy");
    if (!cJSON_IsArray(script)) return fail(e, "execute needs a script");
    holdoff_execution_options o;
    holdoff_execution *x = NULL;
    if (holdoff_config_execution_options(c->config, &o) != HOLDOFF_STATUS_OK ||
        holdoff_execution_new(c->policy, &o, &x) != HOLDOFF_STATUS_OK)
        return fail(e, "execution refused: %s", holdoff_last_error_message());
    cJSON *got = cJSON_CreateObject();
    cJSON *attempts = cJSON_AddArrayToObject(got, "attempts"), *waits = cJSON_AddArrayToObject(got, "waits");
    holdoff_step s;
    int rc = holdoff_execution_next_step(x, &s) == HOLDOFF_STATUS_OK
                 ? 0
                 : fail(e, "holdoff_execution_next_step: %s", holdoff_last_error_message());
    while (rc == 0 && s.kind != HOLDOFF_STEP_KIND_FINISH) {
        if (s.kind == HOLDOFF_STEP_KIND_ATTEMPT) {
            const cJSON *item = cJSON_GetArrayItem(script, (int)s.attempts - 1);
            if (!item) {
                rc = fail(e, "attempt %u is not in the script", s.attempts);
                break;
            }
            uint64_t now = 0;
            holdoff_clock_now(c->clock, &now);
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "at", (double)(now / NS_PER_MS));
            cJSON_AddBoolToObject(a, "probe", s.probe);
            cJSON_AddItemToArray(attempts, a);
            if ((rc = run_attempt(e, c, x, item, &s)) != 0) break;
            if (s.has_last_outcome)
                cJSON_AddStringToObject(a, "outcome", holdoff_outcome_name(s.last_outcome));
            else
                rc = fail(e, "a completed attempt without a last outcome");
        } else if (s.kind == HOLDOFF_STEP_KIND_WAIT) {
            cJSON *w = cJSON_CreateObject();
            add_ms(w, "delay_ms", s.delay_ns);
            cJSON_AddStringToObject(w, "source", holdoff_wait_source_name(s.source));
            cJSON_AddBoolToObject(w, "capped", s.capped);
            add_opt_ms(w, "server_delay_ms", s.has_server_delay, s.server_delay_ns);
            cJSON_AddItemToArray(waits, w);
            if (cancels && (uint64_t)cJSON_GetArraySize(waits) == cancel_in_wait) {
                if (holdoff_execution_cancel(x, &s) != HOLDOFF_STATUS_OK)
                    rc = fail(e, "holdoff_execution_cancel: %s", holdoff_last_error_message());
            } else if (holdoff_clock_advance(c->clock, s.delay_ns) != HOLDOFF_STATUS_OK ||
                       holdoff_execution_next_step(x, &s) != HOLDOFF_STATUS_OK) {
                rc = fail(e, "after a wait: %s", holdoff_last_error_message());
            }
        } else {
            rc = fail(e, "unknown step kind %u", s.kind);
        }
    }
    if (rc == 0) {
        cJSON_AddItemToObject(got, "result", execute_result(&s));
        rc = check_execute(e, expect, got);
    }
    cJSON_Delete(got);
    if (holdoff_execution_free(x) != HOLDOFF_STATUS_OK && rc == 0)
        rc = fail(e, "holdoff_execution_free: %s", holdoff_last_error_message());
    return rc;
}

static int run_step(err_t *e, ctx_t *c, const cJSON *cs, const cJSON *step) {
    const char *op = str_of(step, "op", NULL);
    if (!op) return fail(e, "step without op");
    const cJSON *expect = cJSON_GetObjectItemCaseSensitive(step, "expect");
    const char *call_name = str_of(step, "call", "default");
    cJSON *a = cJSON_CreateObject();
    int rc = 0;
    uint32_t kind;
    uint64_t later;
    holdoff_status st;

    if (strcmp(op, "allow") == 0) {
        int admitted;
        rc = do_allow(e, c, step, a, &admitted);
        if (rc == 0) rc = check(e, expect, a, K_ALLOW);
    } else if (strcmp(op, "record") == 0) {
        const char *name = str_of(step, "permit", NULL);
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(step, "outcome");
        if (!name || !o)
            rc = fail(e, "record needs permit and outcome");
        else if ((rc = parse_outcome(e, o, &kind, &later)) == 0 &&
                 (rc = do_record(e, c, name, kind, later, a)) == 0)
            rc = check(e, expect, a, K_RECORD);
    } else if (strcmp(op, "call") == 0) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(step, "outcome");
        int admitted = 0;
        if (!o)
            rc = fail(e, "call needs outcome");
        else if ((rc = parse_outcome(e, o, &kind, &later)) == 0 && (rc = do_allow(e, c, step, a, &admitted)) == 0) {
            if (admitted) rc = do_record(e, c, str_of(step, "as", "_last"), kind, later, a);
            if (rc == 0) rc = check(e, expect, a, K_CALL);
        }
    } else if (strcmp(op, "record_foreign") == 0) {
        const char *name = str_of(step, "permit", NULL);
        permit_entry *pe = name ? find_permit(c, name) : NULL;
        holdoff_breaker *other = NULL;
        if (!pe) {
            rc = fail(e, "no permit named \"%s\"", name ? name : "(none)");
        } else if (holdoff_breaker_new(c->config, c->clock, &other) != HOLDOFF_STATUS_OK) {
            rc = fail(e, "second breaker: %s", holdoff_last_error_message());
        } else {
            st = holdoff_breaker_record(other, &pe->permit, HOLDOFF_OUTCOME_SUCCESS, 0, NULL);
            if (st == HOLDOFF_STATUS_OK)
                cJSON_AddStringToObject(a, "effect", "counted");
            else
                add_error(a, st);
            holdoff_breaker_free(other);
            rc = check(e, expect, a, (const char *const[]){"error", "effect", NULL});
        }
    } else if (strcmp(op, "snapshot") == 0) {
        int owned;
        holdoff_breaker *b = breaker_for(e, c, str_of(step, "key", NULL), &owned);
        holdoff_snapshot s;
        if (!b) {
            rc = -1;
        } else if (holdoff_breaker_snapshot(b, &s) != HOLDOFF_STATUS_OK) {
            release(b, owned);
            rc = fail(e, "holdoff_breaker_snapshot: %s", holdoff_last_error_message());
        } else {
            release(b, owned);
            cJSON_AddStringToObject(a, "state", holdoff_state_name(s.state));
            cJSON_AddNumberToObject(a, "episode", s.episode);
            cJSON_AddNumberToObject(a, "failures", (double)s.failures);
            cJSON_AddNumberToObject(a, "recoveries", s.recoveries);
            cJSON_AddNumberToObject(a, "probes_in_flight", s.probes_in_flight);
            add_opt_ms(a, "retry_after_ms", s.has_retry_after, s.retry_after_ns);
            cJSON_AddBoolToObject(a, "probe_ready", s.probe_ready);
            add_opt_ms(a, "interval_ms", s.has_interval, s.interval_ns);
            cJSON_AddNumberToObject(a, "opens", (double)s.opens);
            cJSON_AddNumberToObject(a, "closes", (double)s.closes);
            cJSON_AddNumberToObject(a, "probes", (double)s.probes);
            cJSON_AddNumberToObject(a, "refusals", (double)s.refusals);
            cJSON_AddNumberToObject(a, "stale_answers", (double)s.stale_answers);
            rc = check(e, expect, a, K_SNAPSHOT);
        }
    } else if (strcmp(op, "events") == 0) {
        rc = step_events(e, c, step, expect);
    } else if (strcmp(op, "force_open") == 0 || strcmp(op, "disable") == 0 || strcmp(op, "reset") == 0) {
        int owned;
        holdoff_breaker *b = breaker_for(e, c, str_of(step, "key", NULL), &owned);
        if (!b) {
            rc = -1;
        } else {
            st = op[0] == 'f'   ? holdoff_breaker_force_open(b)
                 : op[0] == 'd' ? holdoff_breaker_disable(b)
                                : holdoff_breaker_reset(b);
            release(b, owned);
            rc = st == HOLDOFF_STATUS_OK ? check(e, expect, a, K_NONE) : fail(e, "%s failed", op);
        }
    } else if (strcmp(op, "clock_set") == 0) {
        uint64_t to;
        if (!json_u64(cJSON_GetObjectItemCaseSensitive(step, "to_ms"), &to)) {
            rc = fail(e, "clock_set needs to_ms");
        } else {
            st = holdoff_clock_set(c->clock, to * NS_PER_MS);
            if (st != HOLDOFF_STATUS_OK) add_error(a, st);
            rc = check(e, expect, a, K_ERROR);
        }
    } else if (strcmp(op, "clock_advance") == 0) {
        uint64_t by;
        if (!json_u64(cJSON_GetObjectItemCaseSensitive(step, "by_ms"), &by))
            rc = fail(e, "clock_advance needs by_ms");
        /* Saturated, like the clock itself at the end of its axis (conformance/README.md). */
        else if (holdoff_clock_advance(c->clock, by > UINT64_MAX / NS_PER_MS ? UINT64_MAX : by * NS_PER_MS) !=
                 HOLDOFF_STATUS_OK)
            rc = fail(e, "clock_advance failed");
        else
            rc = check(e, expect, a, K_NONE);
    } else if (strcmp(op, "decide") == 0) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(step, "outcome");
        holdoff_decision d;
        if (!o)
            rc = fail(e, "decide needs outcome");
        else if (!c->budget)
            rc = fail(e, "the case has no budget");
        else if ((rc = parse_outcome(e, o, &kind, &later)) == 0) {
            st = holdoff_retry_budget_decide(c->budget, retry_state(c, call_name, 1), kind, later, &d);
            if (st != HOLDOFF_STATUS_OK) {
                rc = fail(e, "holdoff_retry_budget_decide: %s", holdoff_last_error_message());
            } else {
                add_decision(a, &d);
                rc = check(e, expect, a, K_DECIDE);
            }
        }
    } else if (strcmp(op, "budget_state") == 0) {
        holdoff_episode ep;
        if (!c->budget) {
            rc = fail(e, "the case has no budget");
        } else {
            holdoff_retry_budget_episode(c->budget, &ep);
            cJSON_AddBoolToObject(a, "episode_active", ep.active);
            if (ep.active)
                cJSON_AddNumberToObject(a, "episode_start_ms", (double)(ep.start_ns / NS_PER_MS));
            else
                cJSON_AddNullToObject(a, "episode_start_ms");
            uint32_t retries = 0;
            holdoff_retry_state *s = retry_state(c, call_name, 0);
            if (s) holdoff_retry_state_retries(s, &retries);
            cJSON_AddNumberToObject(a, "retries", retries);
            rc = check(e, expect, a, K_BUDGET_STATE);
        }
    } else if (strcmp(op, "parse_retry_after") == 0) {
        const char *v = str_of(step, "value", NULL);
        holdoff_retry_after r;
        if (!v) {
            rc = fail(e, "parse_retry_after needs value");
        } else {
            holdoff_parse_retry_after(v, strlen(v), wall_now(c), &r);
            add_retry_after(a, &r);
            rc = check(e, expect, a, K_RETRY_AFTER);
        }
    } else if (strcmp(op, "hint") == 0 || strcmp(op, "classify") == 0) {
        holdoff_header hs[MAX_HEADERS];
        int n = read_headers(e, step, hs);
        if (n < 0) {
            rc = -1;
        } else if (op[0] == 'h') {
            holdoff_retry_after r;
            holdoff_hint_from_headers(hs, (size_t)n, wall_now(c), &r);
            add_retry_after(a, &r);
            cJSON_AddStringToObject(a, "source", holdoff_hint_source_name(r.source));
            rc = check(e, expect, a, K_HINT);
        } else {
            int64_t status;
            holdoff_classification cl;
            if (!json_i64(cJSON_GetObjectItemCaseSensitive(step, "status"), &status)) {
                rc = fail(e, "classify needs an integer status");
            } else {
                st = holdoff_classifier_classify(c->classifier, status, hs, (size_t)n, wall_now(c), &cl);
                if (st == HOLDOFF_STATUS_OK) {
                    cJSON_AddStringToObject(a, "outcome", holdoff_outcome_name(cl.outcome));
                    if (cl.outcome == HOLDOFF_OUTCOME_RETRY_LATER)
                        add_ms(a, "retry_later_ms", cl.retry_later_ns);
                    else
                        cJSON_AddNullToObject(a, "retry_later_ms");
                } else {
                    add_error(a, st);
                }
                rc = check(e, expect, a, K_CLASSIFY);
            }
        }
    } else if (strcmp(op, "quota_acquire") == 0) {
        holdoff_quota_lease lease;
        uint64_t avail = 0;
        if (!c->quota) {
            rc = fail(e, "the case has no quota");
        } else {
            holdoff_retry_quota_acquire(c->quota, (uint8_t)bool_of(step, "timeout"), &lease);
            cJSON_AddBoolToObject(a, "acquired", lease.acquired);
            cJSON_AddNumberToObject(a, "cost", (double)lease.cost);
            const char *as = str_of(step, "as", NULL);
            if (lease.acquired && as) put_lease(c, as, lease);
            holdoff_retry_quota_available(c->quota, &avail);
            cJSON_AddNumberToObject(a, "available", (double)avail);
            rc = check(e, expect, a, K_QUOTA_ACQUIRE);
        }
    } else if (strcmp(op, "quota_success") == 0) {
        const char *name = str_of(step, "lease", NULL);
        lease_entry *le = name ? find_lease(c, name) : NULL;
        uint64_t avail = 0;
        if (!c->quota) {
            rc = fail(e, "the case has no quota");
        } else if (name && !le) {
            rc = fail(e, "no lease named \"%s\"", name);
        } else if (le && bool_of(step, "foreign")) {
            /* A second quota built from the same configuration: the lease is not its own. */
            holdoff_retry_quota *other = NULL;
            if (holdoff_retry_quota_new(c->config, &other) != HOLDOFF_STATUS_OK) {
                rc = fail(e, "second quota: %s", holdoff_last_error_message());
            } else {
                st = holdoff_retry_quota_on_success(other, &le->lease);
                if (st != HOLDOFF_STATUS_OK) add_error(a, st);
                holdoff_retry_quota_free(other);
            }
        } else {
            /* The lease stays kept: giving it back a second time must be refused. */
            st = holdoff_retry_quota_on_success(c->quota, le ? &le->lease : NULL);
            if (st != HOLDOFF_STATUS_OK) add_error(a, st);
        }
        if (rc == 0 && c->quota) {
            holdoff_retry_quota_available(c->quota, &avail);
            cJSON_AddNumberToObject(a, "available", (double)avail);
            rc = check(e, expect, a, K_QUOTA_SUCCESS);
        }
    } else if (strcmp(op, "metrics") == 0) {
        rc = step_metrics(e, c, step, expect);
    } else if (strcmp(op, "group_snapshot") == 0) {
        holdoff_group_snapshot gs;
        holdoff_key_list *keys = NULL;
        size_t nkeys = 0;
        if (!c->group) {
            rc = fail(e, "the case has no group");
        } else if (holdoff_breaker_group_snapshot(c->group, &gs) != HOLDOFF_STATUS_OK ||
                   holdoff_breaker_group_keys(c->group, &keys) != HOLDOFF_STATUS_OK ||
                   holdoff_key_list_len(keys, &nkeys) != HOLDOFF_STATUS_OK) {
            rc = fail(e, "group snapshot: %s", holdoff_last_error_message());
        } else {
            cJSON *arr = cJSON_AddArrayToObject(a, "keys");
            for (size_t i = 0; i < nkeys && rc == 0; i++) {
                const char *k = NULL;
                size_t klen = 0;
                if (holdoff_key_list_get(keys, i, &k, &klen) != HOLDOFF_STATUS_OK || strlen(k) != klen)
                    rc = fail(e, "holdoff_key_list_get(%zu): %s", i, holdoff_last_error_message());
                else
                    cJSON_AddItemToArray(arr, cJSON_CreateString(k));
            }
            if (rc == 0 && gs.keys != nkeys) rc = fail(e, "snapshot keys %zu, key list %zu", gs.keys, nkeys);
            cJSON_AddNumberToObject(a, "max_keys", (double)gs.max_keys);
            cJSON_AddNumberToObject(a, "evictions", (double)gs.evictions);
            cJSON_AddNumberToObject(a, "overflows", (double)gs.overflows);
            if (rc == 0) rc = check(e, expect, a, K_GROUP_SNAPSHOT);
        }
        holdoff_key_list_free(keys);
    } else if (strcmp(op, "before") == 0) {
        holdoff_before b;
        holdoff_permit p;
        if (!c->policy) {
            rc = fail(e, "the case has no policy");
        } else if (holdoff_policy_before_attempt(c->policy, policy_call(c, call_name), &b, &p) != HOLDOFF_STATUS_OK) {
            rc = fail(e, "holdoff_policy_before_attempt: %s", holdoff_last_error_message());
        } else {
            cJSON_AddStringToObject(a, "action", holdoff_before_action_name(b.action));
            if (b.action == HOLDOFF_BEFORE_ACTION_GO) {
                cJSON_AddNumberToObject(a, "episode", p.episode);
                cJSON_AddBoolToObject(a, "probe", p.probe);
                /* Recorded through the policy, which holds the case's breaker. */
                put_permit(c, str_of(step, "as", "_last"), c->breaker, 0, p);
            } else if (b.action == HOLDOFF_BEFORE_ACTION_WAIT) {
                add_ms(a, "delay_ms", b.delay_ns);
            } else {
                cJSON_AddStringToObject(a, "reason", holdoff_give_up_reason_name(b.reason));
                add_opt_ms(a, "retry_after_ms", b.has_retry_after, b.retry_after_ns);
            }
            rc = check(e, expect, a, K_BEFORE);
        }
    } else if (strcmp(op, "after") == 0) {
        const char *name = str_of(step, "permit", "_last");
        permit_entry *pe = find_permit(c, name);
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(step, "status");
        holdoff_decision d;
        holdoff_classification cl;
        int64_t code;
        if (!c->policy) {
            rc = fail(e, "the case has no policy");
        } else if (!pe) {
            rc = fail(e, "no permit named \"%s\"", name);
        } else if (status && json_i64(status, &code)) {
            holdoff_header hs[MAX_HEADERS];
            int n = read_headers(e, step, hs);
            if (n < 0) {
                rc = -1;
            } else {
                st = holdoff_policy_after_response(c->policy, policy_call(c, call_name), &pe->permit, code, hs,
                                                   (size_t)n, &d, &cl);
                if (st == HOLDOFF_STATUS_OK) {
                    add_decision(a, &d);
                    cJSON_AddStringToObject(a, "outcome", holdoff_outcome_name(cl.outcome));
                } else {
                    add_error(a, st);
                }
                rc = check(e, expect, a, K_AFTER);
            }
        } else {
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(step, "outcome");
            if (!o) {
                rc = fail(e, "after needs outcome or status");
            } else if ((rc = parse_outcome(e, o, &kind, &later)) == 0) {
                st = holdoff_policy_after_attempt(c->policy, policy_call(c, call_name), &pe->permit, kind, later, &d);
                if (st == HOLDOFF_STATUS_OK)
                    add_decision(a, &d);
                else
                    add_error(a, st);
                rc = check(e, expect, a, K_AFTER);
            }
        }
    } else if (strcmp(op, "execute") == 0) {
        rc = step_execute(e, c, step, expect);
    } else {
        rc = fail(e, "unknown op \"%s\"", op);
    }
    (void)cs;
    cJSON_Delete(a);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Fleet cases: workers sharing one in-process store                                           */

static const char *const K_FLEET_SYNC[] = {"ok", "attached", "granted", "fleet_state", "fleet_episode",
                                           "fleet_recoveries", NULL};

/* The store name of the case's `memory://<name>` fleet url, or NULL. */
static const char *memory_store_name(const cJSON *cs) {
    const cJSON *fleet = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "config"), "fleet");
    const char *url = str_of(fleet, "url", NULL);
    const char *scheme = "memory://";
    return url && strncmp(url, scheme, strlen(scheme)) == 0 ? url + strlen(scheme) : NULL;
}

/* A fresh, empty, up store before the case: names are reused between runs of one process. */
static void fleet_store_fresh(const cJSON *cs) {
    const char *name = memory_store_name(cs);
    if (name) holdoff_memory_store_control(name, strlen(name), HOLDOFF_MEMORY_STORE_ACTION_RESET);
}

static int step_fleet_store(err_t *e, const cJSON *cs, const cJSON *step) {
    static const char *const names[] = {"down", "up", "flush", NULL};
    static const uint32_t actions[] = {HOLDOFF_MEMORY_STORE_ACTION_DOWN, HOLDOFF_MEMORY_STORE_ACTION_UP,
                                       HOLDOFF_MEMORY_STORE_ACTION_FLUSH};
    const char *name = memory_store_name(cs), *action = str_of(step, "action", "");
    if (!name) return fail(e, "fleet_store needs a memory:// fleet url");
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], action) == 0) {
            if (holdoff_memory_store_control(name, strlen(name), actions[i]) != HOLDOFF_STATUS_OK)
                return fail(e, "holdoff_memory_store_control: %s", holdoff_last_error_message());
            return check(e, cJSON_GetObjectItemCaseSensitive(step, "expect"), NULL, K_NONE);
        }
    return fail(e, "unknown fleet_store action \"%s\"", action);
}

/* One worker's tick, its report compared with the step's `expect`. */
static int step_fleet_sync(err_t *e, ctx_t *c, const cJSON *step) {
    holdoff_fleet_sync r;
    if (!c->breaker) return fail(e, "the case has no breaker");
    if (holdoff_breaker_sync_fleet(c->breaker, &r) != HOLDOFF_STATUS_OK)
        return fail(e, "holdoff_breaker_sync_fleet: %s", holdoff_last_error_message());
    cJSON *a = cJSON_CreateObject();
    cJSON_AddBoolToObject(a, "ok", r.ok);
    cJSON_AddBoolToObject(a, "attached", r.attached);
    cJSON_AddBoolToObject(a, "granted", r.granted);
    if (r.ok && r.has_record) {
        cJSON_AddStringToObject(a, "fleet_state", holdoff_fleet_state_name(r.fleet_state));
        cJSON_AddNumberToObject(a, "fleet_episode", (double)r.fleet_episode);
        cJSON_AddNumberToObject(a, "fleet_recoveries", r.fleet_recoveries);
    }
    int rc = check(e, cJSON_GetObjectItemCaseSensitive(step, "expect"), a, K_FLEET_SYNC);
    cJSON_Delete(a);
    return rc;
}

/* The workers of a case: `workers` (default 1) built from one configuration on one clock. */
typedef struct {
    ctx_t *w;
    int n;
} case_t;

static void case_free(case_t *k) {
    /* Later workers first: the first one owns the shared clock and configuration. */
    for (int i = k->n - 1; i >= 0; i--) ctx_free(&k->w[i]);
    free(k->w);
}

/* Builds every worker; on an error, k->n counts the workers to free. */
static holdoff_status case_build(const cJSON *cs, case_t *k) {
    uint64_t n = 1;
    const cJSON *workers = cJSON_GetObjectItemCaseSensitive(cs, "workers");
    if (workers && (!json_u64(workers, &n) || n < 1 || n > 64)) n = 1;
    k->w = calloc((size_t)n, sizeof *k->w);
    k->n = 0;
    fleet_store_fresh(cs);
    for (uint64_t i = 0; i < n; i++) {
        holdoff_status st = build(cs, &k->w[i], i == 0 ? NULL : &k->w[0]);
        k->n++;
        if (st != HOLDOFF_STATUS_OK) return st;
    }
    return HOLDOFF_STATUS_OK;
}

/* Runs one step on the worker it names (`worker`, default 0); the fleet ops that address every
 * worker run here. */
static int case_step(err_t *e, case_t *k, const cJSON *cs, const cJSON *step) {
    const char *op = str_of(step, "op", "");
    const cJSON *worker = cJSON_GetObjectItemCaseSensitive(step, "worker");
    uint64_t i = 0;
    if (worker && (!json_u64(worker, &i) || i >= (uint64_t)k->n))
        return fail(e, "no worker %s (the case has %d)", worker->valuestring ? worker->valuestring : "?", k->n);
    if (strcmp(op, "fleet_store") == 0) return step_fleet_store(e, cs, step);
    if (strcmp(op, "fleet_sync") == 0) {
        for (int j = worker ? (int)i : 0; j <= (worker ? (int)i : k->n - 1); j++) {
            err_t sub = {{0}, 0};
            if (step_fleet_sync(&sub, &k->w[j], step) != 0) return fail(e, "worker %d: %s", j, sub.text);
        }
        return 0;
    }
    return run_step(e, &k->w[i], cs, step);
}

static int run_case(err_t *e, const cJSON *cs) {
    const cJSON *expect_error = cJSON_GetObjectItemCaseSensitive(cs, "expect_error");
    case_t k;
    holdoff_status st = case_build(cs, &k);
    if (st != HOLDOFF_STATUS_OK) {
        int rc;
        if (!is_error(st)) {
            rc = fail(e, "unexpected build status %u", st);
        } else if (!expect_error) {
            rc = fail(e, "configuration refused: %s", holdoff_last_error_message());
        } else {
            cJSON *a = cJSON_CreateObject();
            add_error(a, st);
            if (st == HOLDOFF_STATUS_INVALID_CONFIG)
                cJSON_AddStringToObject(a, "field", holdoff_last_error_field());
            rc = check(e, expect_error, a, (const char *const[]){"error", "field", NULL});
            cJSON_Delete(a);
        }
        case_free(&k);
        return rc;
    }
    if (expect_error) {
        char *w = cJSON_PrintUnformatted(expect_error);
        fail(e, "expected configuration error %s, but it built", w);
        free(w);
        case_free(&k);
        return -1;
    }
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(cs, "steps");
    if (!cJSON_IsArray(steps)) {
        case_free(&k);
        return fail(e, "case without steps");
    }
    holdoff_clock *clock = k.w[0].clock;
    int i = 0, rc = 0;
    const cJSON *step;
    cJSON_ArrayForEach(step, steps) {
        uint64_t repeat = 1, every = 0, at;
        json_u64(cJSON_GetObjectItemCaseSensitive(step, "repeat"), &repeat);
        json_u64(cJSON_GetObjectItemCaseSensitive(step, "every_ms"), &every);
        int has_at = json_u64(cJSON_GetObjectItemCaseSensitive(step, "at"), &at);
        for (uint64_t r = 0; r < repeat && rc == 0; r++) {
            if (has_at) {
                uint64_t t = at + r * every;
                if (holdoff_clock_set(clock, t * NS_PER_MS) != HOLDOFF_STATUS_OK) {
                    rc = fail(e, "step %d: clock cannot move to %llu: %s", i, (unsigned long long)t,
                              holdoff_last_error_message());
                    break;
                }
            }
            err_t sub = {{0}, 0};
            if (case_step(&sub, &k, cs, step) != 0) {
                uint64_t now = 0;
                holdoff_clock_now(clock, &now);
                char rep[64] = "";
                if (repeat > 1) snprintf(rep, sizeof rep, " (repetition %llu)", (unsigned long long)r);
                rc = fail(e, "step %d %s at %llu%s: %s", i, str_of(step, "op", "?"),
                          (unsigned long long)(now / NS_PER_MS), rep, sub.text);
            }
        }
        if (rc) break;
        i++;
    }
    case_free(&k);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Walking the cases                                                                           */

typedef struct {
    int passed, failed;
    const char *filter;
    VEC(char *) ids;
} tally_t;

static int seen_id(tally_t *t, const char *id) {
    for (size_t i = 0; i < t->ids.len; i++)
        if (strcmp(t->ids.items[i], id) == 0) return 1;
    char *d = dupstr(id);
    VEC_PUSH(t->ids, d);
    return 0;
}

static int has_execute_step(const cJSON *cs) {
    const cJSON *step;
    cJSON_ArrayForEach(step, cJSON_GetObjectItemCaseSensitive(cs, "steps")) {
        if (strcmp(str_of(step, "op", ""), "execute") == 0) return 1;
    }
    return 0;
}

static int has_suffix(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int run_file(tally_t *t, const char *path) {
    char *text = read_file(path);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        return -1;
    }
    cJSON *doc = cJSON_Parse(text);
    free(text);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases");
    if (!cJSON_IsArray(cases)) {
        fprintf(stderr, "%s: not a case file\n", path);
        cJSON_Delete(doc);
        return -1;
    }
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cases) {
        const char *id = str_of(cs, "id", NULL);
        if (!id) {
            fprintf(stderr, "%s: case without id\n", path);
            cJSON_Delete(doc);
            return -1;
        }
        if (seen_id(t, id)) {
            fprintf(stderr, "duplicate case id %s\n", id);
            cJSON_Delete(doc);
            return -1;
        }
        if (t->filter && !strstr(id, t->filter)) continue;
        /* A case with an `execute` step runs once per helper flavour; C has one. */
        const char *flavour = has_execute_step(cs) ? " [" EXECUTE_FLAVOUR "]" : "";
        err_t e = {{0}, 0};
        if (run_case(&e, cs) == 0) {
            t->passed++;
            printf("ok   %s%s\n", id, flavour);
        } else {
            t->failed++;
            printf("FAIL %s%s: %s\n", id, flavour, e.text);
        }
        fflush(stdout);
    }
    cJSON_Delete(doc);
    return 0;
}

static int walk(tally_t *t, const char *dir) {
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "cannot list %s\n", dir);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (rc == 0 && name[0] != '.') {
            size_t len = strlen(dir) + strlen(name) + 2;
            char *path = malloc(len);
            snprintf(path, len, "%s/%s", dir, name);
            DIR *sub = opendir(path);
            if (sub) {
                closedir(sub);
                rc = walk(t, path);
            } else if (has_suffix(name, ".json")) {
                rc = run_file(t, path);
            }
            free(path);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CONFORMANCE_DIR\n", argv[0]);
        return 2;
    }
    if (holdoff_abi_version() != HOLDOFF_ABI_VERSION) {
        fprintf(stderr, "ABI mismatch: header %d, library %u\n", HOLDOFF_ABI_VERSION, holdoff_abi_version());
        return 2;
    }
    size_t len = strlen(argv[1]) + 16;
    char *path = malloc(len);
    snprintf(path, len, "%s/VERSION", argv[1]);
    char *version = read_file(path);
    if (!version || atoi(version) != SUITE_VERSION) {
        fprintf(stderr, "runner written for suite version %d, found %s\n", SUITE_VERSION, version ? version : "none");
        return 2;
    }
    free(version);
    snprintf(path, len, "%s/cases", argv[1]);
    tally_t t = {0, 0, getenv("HOLDOFF_CASES"), {NULL, 0, 0}};
    int rc = walk(&t, path);
    free(path);
    for (size_t i = 0; i < t.ids.len; i++) free(t.ids.items[i]);
    free(t.ids.items);
    uint64_t live = holdoff_debug_live_handles();
    if (live != 0) {
        printf("FAIL leak check: %llu holdoff handles still alive after the suite\n", (unsigned long long)live);
        t.failed++;
    }
    printf("%d passed, %d failed, 0 skipped\n", t.passed, t.failed);
    return (rc != 0 || t.failed > 0 || t.passed == 0) ? 1 : 0;
}
