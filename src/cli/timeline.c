/*
 * advlock simulate --svg's timeline (timeline.h). Events become bars as
 * they come; the picture is drawn once the run is over, when its length is
 * known: the bars sorted by row and kind, and those that would touch
 * merged (merges()), so that a long run with many clients still makes a
 * picture of a few thousand shapes, not one per event.
 */
#define _POSIX_C_SOURCE 200809L
#include "timeline.h"

#include <stdlib.h>
#include <string.h>

#include "svg.h"

/* Bars kept at most: 24 MB. */
enum { MAX_BARS = 1 << 20 };

/* Kinds of bar, in the order a row draws them (later ones on top). */
enum bar_kind { K_SLEEP, K_WAIT, K_HOLD, K_TRY, K_TIMED_OUT, K_FAILED, K_OWNER };

typedef struct bar {
    int64_t from, to;
    int row;    /* a client's row, or an owner row: -1 - the key */
    int client; /* whose bar it is (an owner row's: the holder) */
    int key;
    int kind;
} bar;

/* A client's bars still open: when each began, or -1. */
typedef struct open_bars {
    int64_t try_from, wait_from, sleep_from, hold_from;
    int hold_key;
} open_bars;

struct cli_timeline {
    int clients, nkeys, owner_rows;
    const char *const *key_names;
    char *title;
    open_bars *open;
    int *owner;          /* per owner row: the holding client, or -1 */
    int64_t *owner_from; /* ... since when */
    bar *bars;
    size_t nbars, cap;
    int64_t end_ms; /* the last event's time */
    int64_t cut_ms; /* events from then on were left out; -1: none */
    int out_of_memory;
};

cli_timeline *cli_timeline_new(int clients, int nkeys, const char *const *key_names,
                               const char *title)
{
    cli_timeline *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->clients = clients > 0 ? clients : 1;
    s->nkeys = nkeys > 0 ? nkeys : 0;
    s->owner_rows = s->nkeys < CLI_TIMELINE_MAX_OWNER_ROWS ? s->nkeys : CLI_TIMELINE_MAX_OWNER_ROWS;
    s->key_names = key_names;
    s->cut_ms = -1;
    s->title = strdup(title != NULL ? title : "");
    s->open = malloc((size_t)s->clients * sizeof *s->open);
    s->owner = malloc((size_t)(s->owner_rows + 1) * sizeof *s->owner);
    s->owner_from = malloc((size_t)(s->owner_rows + 1) * sizeof *s->owner_from);
    if (s->title == NULL || s->open == NULL || s->owner == NULL || s->owner_from == NULL) {
        cli_timeline_free(s);
        return NULL;
    }
    for (int c = 0; c < s->clients; c++)
        s->open[c] = (open_bars){-1, -1, -1, -1, -1};
    for (int k = 0; k < s->owner_rows; k++)
        s->owner[k] = -1;
    return s;
}

void cli_timeline_free(cli_timeline *s)
{
    if (s == NULL)
        return;
    free(s->title);
    free(s->open);
    free(s->owner);
    free(s->owner_from);
    free(s->bars);
    free(s);
}

static void add_bar(cli_timeline *s, int kind, int row, int client, int key, int64_t from,
                    int64_t to)
{
    if (s->nbars == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        bar *bigger = realloc(s->bars, cap * sizeof *bigger);
        if (bigger == NULL) {
            s->out_of_memory = 1;
            return;
        }
        s->bars = bigger;
        s->cap = cap;
    }
    s->bars[s->nbars++] = (bar){from, to, row, client, key, kind};
}

/* The lock's owner row changes hands at t: the last holder's bar ends. */
static void owner_changes(cli_timeline *s, int key, int client, int64_t t)
{
    if (key < 0 || key >= s->owner_rows)
        return;
    if (s->owner[key] >= 0)
        add_bar(s, K_OWNER, -1 - key, s->owner[key], key, s->owner_from[key], t);
    s->owner[key] = client;
    s->owner_from[key] = t;
}

static void end_hold(cli_timeline *s, int client, int64_t t)
{
    open_bars *o = &s->open[client];
    if (o->hold_from < 0)
        return;
    add_bar(s, K_HOLD, client, client, o->hold_key, o->hold_from, t);
    if (o->hold_key >= 0 && o->hold_key < s->owner_rows && s->owner[o->hold_key] == client)
        owner_changes(s, o->hold_key, -1, t);
    o->hold_from = -1;
}

/* The try or wait in flight, if any, ends at t. */
static void end_query(cli_timeline *s, int client, int64_t t)
{
    open_bars *o = &s->open[client];
    if (o->try_from >= 0)
        add_bar(s, K_TRY, client, client, -1, o->try_from, t);
    if (o->wait_from >= 0)
        add_bar(s, K_WAIT, client, client, -1, o->wait_from, t);
    o->try_from = o->wait_from = -1;
}

void cli_timeline_note(cli_timeline *s, int64_t t, int client, int key, cli_timeline_event event)
{
    if (client < 0 || client >= s->clients || s->cut_ms >= 0)
        return;
    if (s->nbars >= MAX_BARS) {
        s->cut_ms = t;
        return;
    }
    if (t > s->end_ms)
        s->end_ms = t;
    open_bars *o = &s->open[client];
    /* A sleep lasts until the client next does anything. */
    if (o->sleep_from >= 0) {
        add_bar(s, K_SLEEP, client, client, -1, o->sleep_from, t);
        o->sleep_from = -1;
    }
    switch (event) {
    case CLI_TIMELINE_TRY: o->try_from = t; break;
    case CLI_TIMELINE_WAIT: o->wait_from = t; break;
    case CLI_TIMELINE_ANSWER: end_query(s, client, t); break;
    case CLI_TIMELINE_SLEEP: o->sleep_from = t; break;
    case CLI_TIMELINE_ACQUIRED:
        end_query(s, client, t);
        end_hold(s, client, t);
        o->hold_from = t;
        o->hold_key = key;
        owner_changes(s, key, client, t);
        break;
    case CLI_TIMELINE_TIMED_OUT:
    case CLI_TIMELINE_FAILED:
    case CLI_TIMELINE_ENDED:
        if (event != CLI_TIMELINE_ENDED)
            add_bar(s, event == CLI_TIMELINE_TIMED_OUT ? K_TIMED_OUT : K_FAILED, client, client,
                    key, t, t);
        end_query(s, client, t);
        end_hold(s, client, t);
        break;
    case CLI_TIMELINE_OTHER: break;
    }
}

/* ---- drawing ---------------------------------------------------------------- */

enum { WIDTH = 1000, LEFT = 84, RIGHT = 20, OWNER_STEP = 34, OWNER_HEIGHT = 16 };

/* Where the rows are, decided once the number of rows is known. */
typedef struct layout {
    cli_svg_scale x;
    double owners_top, clients_top, row_height, axis_y;
    int rows;
} layout;

static int compare_bars(const void *a, const void *b)
{
    const bar *x = a, *y = b;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return (x->from > y->from) - (x->from < y->from);
}

/* A row's band: top and height, the owner rows' (row < 0) or a client's. */
static void row_band(const layout *l, int row, double *top, double *height)
{
    if (row < 0) {
        *top = l->owners_top + (-1 - row) * OWNER_STEP + (OWNER_STEP - OWNER_HEIGHT);
        *height = OWNER_HEIGHT;
    } else {
        *top = l->clients_top + row * l->row_height;
        *height = l->row_height;
    }
}

/* Bars being merged: from x0 to x1 pixels, count of them, the first. */
typedef struct pending {
    double x0, x1;
    size_t count;
    const bar *first;
    int shade; /* an owner row's bars alternate shades, so hand-overs show */
} pending;

static void draw_pending(const cli_timeline *s, FILE *out, const layout *l, pending *p)
{
    if (p->count == 0)
        return;
    const bar *b = p->first;
    double top, h, w = p->x1 - p->x0;
    row_band(l, b->row, &top, &h);
    char tip[256];
    const char *name = b->key >= 0 && b->key < s->nkeys ? s->key_names[b->key] : "?";
    snprintf(tip, sizeof tip, "client %d holds '%s' from %lld to %lld ms", b->client, name,
             (long long)b->from, (long long)b->to);
    switch (b->kind) {
    case K_SLEEP:
        cli_svg_rect(out, p->x0, top + h * 0.3, w < 1 ? 1 : w, h * 0.4, CLI_SVG_SKY, "sleep", NULL);
        break;
    case K_WAIT:
        cli_svg_rect(out, p->x0, top + 1, w < 1 ? 1 : w, h - 2, CLI_SVG_ORANGE, "wait", NULL);
        break;
    case K_HOLD:
        cli_svg_rect(out, p->x0, top + 1, w < 1 ? 1 : w, h - 2, CLI_SVG_GREEN, "hold",
                     p->count == 1 ? tip : NULL);
        break;
    case K_TRY:
        /* A try takes a millisecond or two: a tick, visible however short. */
        if (w < 1.6)
            cli_svg_rect(out, (p->x0 + p->x1) / 2 - 0.8, top, 1.6, h, CLI_SVG_BLUE, "try", NULL);
        else
            cli_svg_rect(out, p->x0, top, w, h, CLI_SVG_BLUE, "try", NULL);
        break;
    case K_TIMED_OUT:
    case K_FAILED: {
        double r = h * 0.32 < 5 ? h * 0.32 : 5;
        cli_svg_cross(out, p->x0, top + h / 2, r,
                      b->kind == K_TIMED_OUT ? CLI_SVG_VERMILION : CLI_SVG_INK,
                      b->kind == K_TIMED_OUT ? "timed-out" : "failed");
        break;
    }
    case K_OWNER:
        cli_svg_rect(out, p->x0, top, w < 1 ? 1 : w, h,
                     p->shade ? CLI_SVG_DARK_GREEN : CLI_SVG_GREEN, "owner",
                     p->count == 1 ? tip : NULL);
        if (p->count == 1 && w >= cli_svg_text_width(b->client >= 10 ? 2 : 1, 10) + 4)
            cli_svg_text(out, (p->x0 + p->x1) / 2, top + h - 4, 10, CLI_SVG_MIDDLE, 1, "#FFFFFF",
                         "%d", b->client);
        p->shade = !p->shade;
        break;
    }
    p->count = 0;
}

/* Holds and owners merge only where a bar is narrower than a pixel, so a
 * hand-over stays visible; ticks and crosses where they would touch
 * anyway (a tick is 1.6 pixels wide, a cross up to 10); the rest where
 * they are within half a pixel. */
static int merges(const pending *p, const bar *b, double x0, double x1)
{
    if (p->count == 0 || p->first->kind != b->kind || p->first->row != b->row)
        return 0;
    switch (b->kind) {
    case K_HOLD:
    case K_OWNER: return p->x1 - p->x0 < 1 || x1 - x0 < 1;
    case K_TRY: return x0 <= p->x1 + 2;
    case K_TIMED_OUT:
    case K_FAILED: return x0 <= p->x1 + 3;
    default: return x0 <= p->x1 + 0.5;
    }
}

/* Draws one row's bars, bars[*i] onwards, and moves *i past them. */
static void draw_row_bars(const cli_timeline *s, FILE *out, const layout *l, size_t *i)
{
    pending p = {0, 0, 0, NULL, 0};
    int row = s->bars[*i].row;
    for (; *i < s->nbars && s->bars[*i].row == row; (*i)++) {
        const bar *b = &s->bars[*i];
        double x0 = cli_svg_at(&l->x, (double)b->from), x1 = cli_svg_at(&l->x, (double)b->to);
        if (merges(&p, b, x0, x1)) {
            if (x1 > p.x1)
                p.x1 = x1;
            p.count++;
            continue;
        }
        draw_pending(s, out, l, &p);
        p.x0 = x0;
        p.x1 = x1;
        p.count = 1;
        p.first = b;
    }
    draw_pending(s, out, l, &p);
}

/* The rows' backgrounds and labels, under everything else. */
static void draw_row_frames(const cli_timeline *s, FILE *out, const layout *l)
{
    double plot_w = l->x.px_hi - l->x.px_lo;
    cli_svg_group(out, "frames");
    for (int k = 0; k < s->owner_rows; k++) {
        double top, h;
        row_band(l, -1 - k, &top, &h);
        cli_svg_rect(out, l->x.px_lo, top, plot_w, h, CLI_SVG_STRIPE, NULL, NULL);
        cli_svg_text(out, LEFT - 6, top + h - 4, 11, CLI_SVG_END, 1, CLI_SVG_INK, "owner");
    }
    double size = l->row_height - 2 < 11 ? l->row_height - 2 : 11;
    for (int r = 0; r < l->rows; r++) {
        double top, h;
        row_band(l, r, &top, &h);
        if (r % 2 == 0)
            cli_svg_rect(out, 0, top, WIDTH, h, CLI_SVG_STRIPE, NULL, NULL);
        cli_svg_text(out, LEFT - 6, top + h / 2 + size * 0.36, size, CLI_SVG_END, 0, CLI_SVG_INK,
                     "client %d", r);
    }
    cli_svg_group_end(out);
}

/* Each owner row's lock name above it, on white over the grid. */
static void draw_owner_names(const cli_timeline *s, FILE *out, const layout *l)
{
    for (int k = 0; k < s->owner_rows; k++) {
        double top, h;
        row_band(l, -1 - k, &top, &h);
        char name[160];
        snprintf(name, sizeof name, "who holds '%s'", s->key_names[k]);
        cli_svg_rect(out, l->x.px_lo, top - 15, cli_svg_text_width(strlen(name), 11) + 4, 14,
                     "#FFFFFF", NULL, NULL);
        cli_svg_text(out, l->x.px_lo, top - 4, 11, CLI_SVG_START, 0, CLI_SVG_GREY, "%s", name);
    }
}

static void draw_legend(FILE *out, double y)
{
    static const cli_svg_key keys[] = {
        {"try", CLI_SVG_BLUE, CLI_SVG_KEY_TICK},
        {"sleep", CLI_SVG_SKY, CLI_SVG_KEY_BAR},
        {"wait at the server", CLI_SVG_ORANGE, CLI_SVG_KEY_BAR},
        {"hold", CLI_SVG_GREEN, CLI_SVG_KEY_BAR},
        {"timed out", CLI_SVG_VERMILION, CLI_SVG_KEY_CROSS},
        {"failed", CLI_SVG_INK, CLI_SVG_KEY_CROSS},
    };
    cli_svg_legend(out, LEFT, y, keys, sizeof keys / sizeof keys[0]);
}

int cli_timeline_write(cli_timeline *s, FILE *out, const char *caption)
{
    for (int c = 0; c < s->clients; c++) {
        end_query(s, c, s->end_ms);
        end_hold(s, c, s->end_ms);
        if (s->open[c].sleep_from >= 0)
            add_bar(s, K_SLEEP, c, c, -1, s->open[c].sleep_from, s->end_ms);
        s->open[c].sleep_from = -1;
    }
    for (int k = 0; k < s->owner_rows; k++)
        owner_changes(s, k, -1, s->end_ms);
    if (s->out_of_memory)
        return -1;
    if (s->nbars > 0)
        qsort(s->bars, s->nbars, sizeof *s->bars, compare_bars);

    layout l;
    l.rows = s->clients < CLI_TIMELINE_MAX_ROWS ? s->clients : CLI_TIMELINE_MAX_ROWS;
    /* Rows shrink as clients grow, from 22 pixels to 11 at 50. */
    l.row_height = 560.0 / l.rows;
    l.row_height = l.row_height > 22 ? 22 : l.row_height < 11 ? 11 : l.row_height;
    l.owners_top = 74;
    l.clients_top = l.owners_top + s->owner_rows * OWNER_STEP + 10;
    l.axis_y = l.clients_top + l.rows * l.row_height + 4;
    l.x = (cli_svg_scale){0, (double)s->end_ms, LEFT, WIDTH - RIGHT};

    const char *notes[3];
    char hidden_clients[96], hidden_keys[96], cut[128];
    int nnotes = 0;
    if (s->clients > l.rows) {
        snprintf(hidden_clients, sizeof hidden_clients,
                 "%d more clients not drawn (clients %d to %d)", s->clients - l.rows, l.rows,
                 s->clients - 1);
        notes[nnotes++] = hidden_clients;
    }
    if (s->nkeys > s->owner_rows) {
        snprintf(hidden_keys, sizeof hidden_keys, "%d more lock names have no owner row",
                 s->nkeys - s->owner_rows);
        notes[nnotes++] = hidden_keys;
    }
    if (s->cut_ms >= 0) {
        snprintf(cut, sizeof cut, "drawn up to %lld ms: past %d bars the rest is left out",
                 (long long)s->cut_ms, MAX_BARS);
        notes[nnotes++] = cut;
    }
    int height = (int)(l.axis_y + 42 + 16 * nnotes);

    cli_svg_begin(out, WIDTH, height, s->title);
    cli_svg_text(out, 12, 24, 15, CLI_SVG_START, 1, CLI_SVG_INK, "%s", s->title);
    if (caption != NULL)
        cli_svg_text(out, 12, 42, 11, CLI_SVG_START, 0, CLI_SVG_GREY, "%s", caption);
    draw_legend(out, 62);
    draw_row_frames(s, out, &l);
    cli_svg_ms_axis(out, &l.x, l.owners_top + (s->owner_rows > 0 ? OWNER_STEP - OWNER_HEIGHT : 0),
                    l.axis_y);
    draw_owner_names(s, out, &l);
    cli_svg_text(out, (LEFT + WIDTH - RIGHT) / 2.0, l.axis_y + 34, 11, CLI_SVG_MIDDLE, 0,
                 CLI_SVG_GREY, "virtual time since the run began");
    for (int n = 0; n < nnotes; n++)
        cli_svg_text(out, 12, l.axis_y + 52 + 16 * n, 11, CLI_SVG_START, 0, CLI_SVG_VERMILION, "%s",
                     notes[n]);

    /* One group per row, every row drawn even when empty: owner rows
     * (-1 - key) first, as the bars are sorted. */
    size_t i = 0;
    for (int row = -s->owner_rows; row < l.rows; row++) {
        char id[32];
        if (row < 0)
            snprintf(id, sizeof id, "owner-%d", -1 - row);
        else
            snprintf(id, sizeof id, "client-%d", row);
        cli_svg_group(out, id);
        if (i < s->nbars && s->bars[i].row == row)
            draw_row_bars(s, out, &l, &i);
        cli_svg_group_end(out);
    }
    cli_svg_end(out);
    return 0;
}
