/*
 * waits_svg OUT TITLE < SAMPLES: draws the herd's acquire waits, real
 * against simulated (tests/herd/herd.sh), as an SVG picture in OUT with
 * advlock's SVG primitives (src/cli/svg.c). SAMPLES has one client's wait
 * a line:
 *     N POLICY SOURCE WAIT
 * N the herd's size, POLICY its options ("reference", "jitter", "wait"),
 * SOURCE "real" or "simulated", WAIT milliseconds from the client's process
 * start to the lock, or "timeout". One panel per N (rows) and policy
 * (columns), in the order they first appear; in each, the two cumulative
 * distributions: the share of the herd's clients holding the lock by each
 * time (timeouts never get there, so a curve that ends below 100 % says
 * how many timed out). Exits 0, 64 on bad input, 74 if OUT cannot be
 * written.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cli/svg.h"

enum { MAX_SIZES = 8, MAX_POLICIES = 4, WORD = 32 };
enum { PANEL_W = 300, PANEL_H = 170, GAP_X = 48, GAP_Y = 64, LEFT = 56, TOP = 96 };

/* One curve's samples: waits in ms (timeouts counted, not kept). */
typedef struct curve {
    long *waits;
    size_t n, cap, timeouts;
} curve;

typedef struct herd {
    char sizes[MAX_SIZES][WORD], policies[MAX_POLICIES][WORD];
    int nsizes, npolicies;
    curve curves[MAX_SIZES][MAX_POLICIES][2]; /* [size][policy][real, simulated] */
} herd;

/* The index of word in list (added if new), or -1 when the list is full. */
static int index_of(char list[][WORD], int *n, int max, const char *word)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(list[i], word) == 0)
            return i;
    if (*n == max)
        return -1;
    snprintf(list[*n], WORD, "%s", word);
    return (*n)++;
}

static int add_wait(curve *c, const char *wait)
{
    if (strcmp(wait, "timeout") == 0) {
        c->timeouts++;
        return 0;
    }
    char *end;
    long ms = strtol(wait, &end, 10);
    if (*end != '\0' || end == wait || ms < 0)
        return -1;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        long *bigger = realloc(c->waits, cap * sizeof *bigger);
        if (bigger == NULL)
            return -1;
        c->waits = bigger;
        c->cap = cap;
    }
    c->waits[c->n++] = ms;
    return 0;
}

static int read_samples(FILE *in, herd *h)
{
    char line[256], size[WORD], policy[WORD], source[WORD], wait[WORD];
    int lineno = 0;
    while (fgets(line, sizeof line, in) != NULL) {
        lineno++;
        if (sscanf(line, "%31s %31s %31s %31s", size, policy, source, wait) != 4) {
            fprintf(stderr, "waits_svg: line %d: want N POLICY SOURCE WAIT\n", lineno);
            return -1;
        }
        int s = index_of(h->sizes, &h->nsizes, MAX_SIZES, size);
        int p = index_of(h->policies, &h->npolicies, MAX_POLICIES, policy);
        int real = strcmp(source, "real") == 0;
        if (s < 0 || p < 0 || (!real && strcmp(source, "simulated") != 0)
            || add_wait(&h->curves[s][p][real ? 0 : 1], wait) != 0) {
            fprintf(stderr, "waits_svg: line %d: bad sample (at most %d sizes, %d policies)\n",
                    lineno, MAX_SIZES, MAX_POLICIES);
            return -1;
        }
    }
    if (lineno == 0)
        fputs("waits_svg: no samples\n", stderr);
    return lineno > 0 ? 0 : -1;
}

static int compare_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The step curve of c's cumulative distribution on the panel's scales. */
static void draw_curve(FILE *out, const curve *c, const cli_svg_scale *x, const cli_svg_scale *y,
                       const char *colour, const char *dash, const char *cls)
{
    size_t all = c->n + c->timeouts;
    if (all == 0)
        return;
    double *px = malloc((2 * c->n + 2) * sizeof *px), *py = malloc((2 * c->n + 2) * sizeof *py);
    if (px == NULL || py == NULL) {
        free(px);
        free(py);
        return;
    }
    size_t k = 0;
    px[k] = cli_svg_at(x, 0);
    py[k++] = cli_svg_at(y, 0);
    for (size_t i = 0; i < c->n; i++) {
        px[k] = px[k + 1] = cli_svg_at(x, (double)c->waits[i]);
        py[k] = py[k - 1];
        py[k + 1] = cli_svg_at(y, (double)(i + 1) / (double)all);
        k += 2;
    }
    px[k] = cli_svg_at(x, x->hi);
    py[k] = py[k - 1];
    cli_svg_polyline(out, px, py, k + 1, colour, 2, dash, cls);
    free(px);
    free(py);
}

static void draw_panel(FILE *out, const herd *h, int s, int p, double left, double top, long max)
{
    const curve *real = &h->curves[s][p][0], *sim = &h->curves[s][p][1];
    cli_svg_scale x = {0, (double)max, left, left + PANEL_W};
    cli_svg_scale y = {0, 1, top + PANEL_H, top};
    char id[sizeof "panel--" + 2 * WORD]; /* both words whole, so never cut */
    snprintf(id, sizeof id, "panel-%s-%s", h->sizes[s], h->policies[p]);
    cli_svg_group(out, id);
    cli_svg_text(out, left, top - 10, 13, CLI_SVG_START, 1, CLI_SVG_INK, "%s clients, %s",
                 h->sizes[s], h->policies[p]);
    cli_svg_ms_axis(out, &x, top, top + PANEL_H);
    for (int pct = 0; pct <= 100; pct += 50) {
        double py = cli_svg_at(&y, pct / 100.0);
        cli_svg_line(out, left, py, left + PANEL_W, py, CLI_SVG_GRID, 1, pct == 50 ? "3 3" : NULL);
        cli_svg_text(out, left - 5, py + 4, 11, CLI_SVG_END, 0, CLI_SVG_INK, "%d%%", pct);
    }
    draw_curve(out, real, &x, &y, CLI_SVG_BLUE, NULL, "real");
    draw_curve(out, sim, &x, &y, CLI_SVG_VERMILION, "6 3", "simulated");
    if (real->timeouts + sim->timeouts > 0)
        cli_svg_text(out, left + PANEL_W, top + PANEL_H - 8, 11, CLI_SVG_END, 0, CLI_SVG_INK,
                     "timed out: %zu real, %zu simulated", real->timeouts, sim->timeouts);
    cli_svg_group_end(out);
}

/* A panel's longest wait, either side (at least 1): its scale's end. Each
 * panel has its own, as the picture compares real with simulated, and a
 * herd waiting on the server is over long before one polling is. */
static long longest(const herd *h, int s, int p)
{
    long max = 1;
    for (int side = 0; side < 2; side++) {
        const curve *c = &h->curves[s][p][side];
        if (c->n > 0 && c->waits[c->n - 1] > max)
            max = c->waits[c->n - 1];
    }
    return max;
}

static void draw(FILE *out, herd *h, const char *title)
{
    for (int s = 0; s < h->nsizes; s++)
        for (int p = 0; p < h->npolicies; p++)
            for (int side = 0; side < 2; side++) {
                curve *c = &h->curves[s][p][side];
                if (c->n > 0)
                    qsort(c->waits, c->n, sizeof *c->waits, compare_long);
            }
    int width = LEFT + h->npolicies * (PANEL_W + GAP_X) - GAP_X + 24;
    int height = TOP + h->nsizes * (PANEL_H + GAP_Y);
    cli_svg_begin(out, width, height, title);
    cli_svg_text(out, 12, 24, 15, CLI_SVG_START, 1, CLI_SVG_INK, "%s", title);
    cli_svg_text(out, 12, 42, 11, CLI_SVG_START, 0, CLI_SVG_GREY,
                 "the share of a herd's clients holding the lock by each time since its process "
                 "started; clients that timed out never get there");
    static const cli_svg_key keys[] = {
        {"real (PostgreSQL)", CLI_SVG_BLUE, CLI_SVG_KEY_LINE},
        {"simulated (advlock simulate --profile)", CLI_SVG_VERMILION, CLI_SVG_KEY_DASHED},
    };
    cli_svg_legend(out, LEFT, 62, keys, sizeof keys / sizeof keys[0]);
    for (int s = 0; s < h->nsizes; s++)
        for (int p = 0; p < h->npolicies; p++)
            draw_panel(out, h, s, p, LEFT + p * (PANEL_W + GAP_X), TOP + s * (PANEL_H + GAP_Y),
                       longest(h, s, p));
    cli_svg_end(out);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fputs("usage: waits_svg OUT TITLE < SAMPLES\n", stderr);
        return 64;
    }
    static herd h;
    if (read_samples(stdin, &h) != 0)
        return 64;
    FILE *out = fopen(argv[1], "w");
    if (out == NULL) {
        perror(argv[1]);
        return 74;
    }
    draw(out, &h, argv[2]);
    if (fclose(out) != 0) {
        perror(argv[1]);
        return 74;
    }
    return 0;
}
