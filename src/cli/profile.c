/*
 * Reading and writing profiles (profile.h): a header line with the
 * version, then one "key value..." line per setting; every error names the
 * input and the line.
 */
#define _POSIX_C_SOURCE 200809L
#include "profile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct parse_state {
    const char *name;
    long line;
    char *why;
    size_t size;
} parse_state;

/* "NAME:LINE: " (or "NAME: " for the whole file) and the message. */
__attribute__((format(printf, 2, 3))) static int complain(const parse_state *st, const char *fmt,
                                                          ...)
{
    int n = st->line > 0 ? snprintf(st->why, st->size, "%s:%ld: ", st->name, st->line)
                         : snprintf(st->why, st->size, "%s: ", st->name);
    if (n >= 0 && (size_t)n < st->size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(st->why + n, st->size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The distributions, by key, in the order they are written. */
enum {
    KEY_CLIENTS,
    KEY_SERVERS,
    KEY_LAUNCH,
    KEY_STARTUP,
    KEY_STATEMENT,
    KEY_WAKEUP,
    KEY_COMMAND,
    KEYS
};
static const char *const key_names[KEYS] = {"clients",      "servers",   "launch_us", "startup_us",
                                            "statement_us", "wakeup_us", "command_us"};

static advlock_sim_dist *dist_of(advlock_sim_model *m, int key)
{
    switch (key) {
    case KEY_LAUNCH: return &m->launch;
    case KEY_STARTUP: return &m->startup;
    case KEY_STATEMENT: return &m->statement;
    case KEY_WAKEUP: return &m->wakeup;
    case KEY_COMMAND: return &m->command;
    default: return NULL;
    }
}

/* The next blank-separated word of *p, NUL-terminated in place; NULL at the end. */
static char *next_word(char **p)
{
    char *s = *p + strspn(*p, " \t");
    if (*s == '\0')
        return NULL;
    char *end = s + strcspn(s, " \t");
    if (*end != '\0')
        *end++ = '\0';
    *p = end;
    return s;
}

/* A whole decimal number from lo to hi, or -1 after complaining. */
static int whole(const parse_state *st, const char *key, const char *word, long long lo,
                 long long hi, long long *out)
{
    char *end;
    errno = 0;
    *out = 0;
    long long v = strtoll(word, &end, 10);
    if (errno != 0 || end == word || *end != '\0' || v < lo || v > hi)
        return complain(st, "%s: '%s' is not a whole number from %lld to %lld", key, word, lo, hi);
    *out = v;
    return 0;
}

static int parse_dist(const parse_state *st, const char *key, char *rest, advlock_sim_dist *d)
{
    memset(d, 0, sizeof *d);
    char *word;
    while ((word = next_word(&rest)) != NULL) {
        if (d->count == ADVLOCK_SIM_DIST_POINTS)
            return complain(st, "%s: more than %d values", key, ADVLOCK_SIM_DIST_POINTS);
        long long v;
        if (whole(st, key, word, 0, ADVLOCK_SIM_DIST_MAX_US, &v) != 0)
            return -1;
        if (d->count > 0 && v < d->us[d->count - 1])
            return complain(st, "%s: values must not decrease (%lld after %lld)", key, v,
                            (long long)d->us[d->count - 1]);
        d->us[d->count++] = v;
    }
    if (d->count == 0)
        return complain(st, "%s: no values", key);
    return 0;
}

static int parse_setting(const parse_state *st, char *text, cli_profile *out, int given[KEYS])
{
    char *rest = text;
    char *key = next_word(&rest);
    int k = 0;
    while (k < KEYS && strcmp(key, key_names[k]) != 0)
        k++;
    if (k == KEYS)
        return complain(st, "unknown key '%s'", key);
    if (given[k])
        return complain(st, "'%s' given twice", key);
    given[k] = 1;
    advlock_sim_dist *d = dist_of(&out->model, k);
    if (d != NULL)
        return parse_dist(st, key, rest, d);
    char *word = next_word(&rest);
    if (word == NULL)
        return complain(st, "%s: no value", key);
    long long v;
    int rc = k == KEY_CLIENTS ? whole(st, key, word, 1, CLI_PROFILE_MAX_CLIENTS, &v)
                              : whole(st, key, word, 0, ADVLOCK_SIM_MAX_CLIENTS, &v);
    if (rc != 0)
        return -1;
    if (next_word(&rest) != NULL)
        return complain(st, "%s takes one value", key);
    if (k == KEY_CLIENTS)
        out->clients = (int)v;
    else
        out->model.servers = (uint32_t)v;
    return 0;
}

static int parse_header(const parse_state *st, char *text)
{
    char *rest = text;
    char *magic = next_word(&rest);
    char *version = next_word(&rest);
    if (strcmp(magic, "advlock-profile") != 0 || version == NULL || next_word(&rest) != NULL)
        return complain(st, "not an advlock profile (the first line must be 'advlock-profile %d')",
                        CLI_PROFILE_VERSION);
    if (strcmp(version, "1") != 0)
        return complain(st, "profile version %s is not supported (this advlock reads version %d)",
                        version, CLI_PROFILE_VERSION);
    return 0;
}

int cli_profile_parse(FILE *in, const char *name, cli_profile *out, char *why, size_t size)
{
    parse_state st = {name, 0, why, size};
    if (size > 0)
        why[0] = '\0'; /* no error yet */
    memset(out, 0, sizeof *out);
    int given[KEYS] = {0};
    int header = 0, rc = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&line, &cap, in)) >= 0) {
        st.line++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if ((size_t)len != strlen(line)) {
            rc = complain(&st, "a NUL byte: not a text file");
            break;
        }
        char *text = line + strspn(line, " \t");
        if (*text == '\0' || *text == '#')
            continue;
        rc = header ? parse_setting(&st, text, out, given) : parse_header(&st, text);
        header = 1;
    }
    free(line);
    if (rc != 0)
        return rc;
    st.line = 0;
    if (ferror(in))
        return complain(&st, "cannot read: %s", strerror(errno));
    if (!header)
        return complain(&st, "empty: not an advlock profile (no 'advlock-profile %d' line)",
                        CLI_PROFILE_VERSION);
    for (int k = 0; k < KEYS; k++)
        if (!given[k])
            return complain(&st, "'%s' is missing", key_names[k]);
    return 0;
}

/* Parses what `in` (just opened, NULL if that failed with errno) holds,
 * then closes it. */
static int parse_and_close(FILE *in, const char *name, cli_profile *out, char *why, size_t size)
{
    if (in == NULL) {
        snprintf(why, size, "%s: cannot open: %s", name, strerror(errno));
        return -1;
    }
    int rc = cli_profile_parse(in, name, out, why, size);
    fclose(in);
    return rc;
}

int cli_profile_read(const char *path, cli_profile *out, char *why, size_t size)
{
    return parse_and_close(fopen(path, "r"), path, out, why, size);
}

int cli_profile_parse_text(const char *text, const char *name, cli_profile *out, char *why,
                           size_t size)
{
    /* fmemopen wants a buffer it may write; it reads a copy. */
    char *copy = strdup(text);
    if (copy == NULL) {
        snprintf(why, size, "%s: out of memory", name);
        return -1;
    }
    int rc = parse_and_close(fmemopen(copy, strlen(copy), "r"), name, out, why, size);
    free(copy);
    return rc;
}

int cli_profile_write(FILE *out, const cli_profile *p, const char *comment)
{
    int failed = fprintf(out, "advlock-profile %d\n", CLI_PROFILE_VERSION) < 0;
    for (const char *c = comment; c != NULL && *c != '\0';) {
        size_t n = strcspn(c, "\n");
        failed |= fprintf(out, "# %.*s\n", (int)n, c) < 0;
        c += n + (c[n] == '\n');
    }
    failed |= fprintf(out, "%s %d\n%s %u\n", key_names[KEY_CLIENTS], p->clients,
                      key_names[KEY_SERVERS], (unsigned)p->model.servers)
              < 0;
    advlock_sim_model m = p->model;
    for (int k = KEY_LAUNCH; k < KEYS; k++) {
        const advlock_sim_dist *d = dist_of(&m, k);
        failed |= fputs(key_names[k], out) == EOF;
        for (uint32_t i = 0; i < d->count; i++)
            failed |= fprintf(out, " %lld", (long long)d->us[i]) < 0;
        failed |= fputc('\n', out) == EOF;
    }
    return failed ? -1 : 0;
}

static void scale(advlock_sim_dist *d, int64_t num, int64_t den)
{
    for (uint32_t i = 0; i < d->count; i++) {
        int64_t v = d->us[i] / den * num + d->us[i] % den * num / den;
        d->us[i] = v < ADVLOCK_SIM_DIST_MAX_US ? v : ADVLOCK_SIM_DIST_MAX_US;
    }
}

advlock_sim_model cli_profile_model_for(const cli_profile *p, int clients)
{
    advlock_sim_model m = p->model;
    if (p->clients > 0 && clients != p->clients) {
        scale(&m.launch, clients, p->clients);
        scale(&m.startup, clients, p->clients);
    }
    return m;
}
