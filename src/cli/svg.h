/*
 * SVG 1.1 drawing for advlock's pictures: `advlock simulate --svg`'s
 * timeline (timeline.c) and the herd's wait distributions
 * (tests/herd/waits_svg.c). A few shapes written straight to a stream.
 * What they write is self-contained: no scripts, no links, no fonts but the
 * generic sans-serif; a viewer needs nothing from a network. Numbers are
 * written with a '.' whatever the locale.
 *
 * None of these functions report errors: they write with stdio, and the
 * caller checks the stream (ferror, fclose) once the picture is done.
 */
#ifndef ADVLOCK_CLI_SVG_H
#define ADVLOCK_CLI_SVG_H

#include <stddef.h>
#include <stdio.h>

/* The pictures' palette (Okabe and Ito's, told apart by colour-blind
 * readers too), named by what each colour means wherever it is used. */
#define CLI_SVG_BLUE       "#0072B2"
#define CLI_SVG_SKY        "#9ACBEA"
#define CLI_SVG_ORANGE     "#E69F00"
#define CLI_SVG_GREEN      "#009E73"
#define CLI_SVG_DARK_GREEN "#00654A"
#define CLI_SVG_VERMILION  "#D55E00"
#define CLI_SVG_INK        "#222222"
#define CLI_SVG_GREY       "#666666"
#define CLI_SVG_GRID       "#DDDDDD"
#define CLI_SVG_STRIPE     "#F3F3F3"

/* A linear map from data (lo..hi) to pixels (px_lo..px_hi). */
typedef struct cli_svg_scale {
    double lo, hi;
    double px_lo, px_hi;
} cli_svg_scale;

/* Where v falls on the scale, in pixels (hi == lo maps everything to px_lo). */
double cli_svg_at(const cli_svg_scale *s, double v);

/*
 * Starts a picture of width x height pixels on out: the XML declaration, the
 * <svg> element (sans-serif text), a <title> (escaped; NULL for none) and a
 * white background. End it with cli_svg_end.
 */
void cli_svg_begin(FILE *out, int width, int height, const char *title);
/* Closes the picture cli_svg_begin started. */
void cli_svg_end(FILE *out);

/* Opens a group <g id="ID"> (id NULL: none; it is not escaped, so give a
 * plain word); cli_svg_group_end closes it. */
void cli_svg_group(FILE *out, const char *id);
void cli_svg_group_end(FILE *out);

/*
 * A filled rectangle; cls names what it shows (a class attribute, for tests
 * and stylesheets; NULL for none), tip is a tooltip (escaped; NULL for none).
 */
void cli_svg_rect(FILE *out, double x, double y, double w, double h, const char *fill,
                  const char *cls, const char *tip);
/* A straight line of the given colour and width; dash is a stroke-dasharray
 * ("4 3") or NULL for a solid line. */
void cli_svg_line(FILE *out, double x1, double y1, double x2, double y2, const char *stroke,
                  double width, const char *dash);
/* An open line through n points (x[i], y[i]); cls as for cli_svg_rect. */
void cli_svg_polyline(FILE *out, const double *x, const double *y, size_t n, const char *stroke,
                      double width, const char *dash, const char *cls);
/* A diagonal cross centred on (x, y), r pixels from centre to corner. */
void cli_svg_cross(FILE *out, double x, double y, double r, const char *stroke, const char *cls);

/* Text's horizontal anchor. */
typedef enum { CLI_SVG_START, CLI_SVG_MIDDLE, CLI_SVG_END } cli_svg_anchor;

/*
 * Text from a printf format (escaped for XML), its baseline at y, size in
 * pixels; bold when bold is set. Longer than 1 KB is cut.
 */
void cli_svg_text(FILE *out, double x, double y, double size, cli_svg_anchor anchor, int bold,
                  const char *fill, const char *fmt, ...) __attribute__((format(printf, 8, 9)));

/* The width text of n characters takes at size pixels, roughly: for laying
 * out legends, with no font metrics to ask. */
double cli_svg_text_width(size_t n, double size);

/*
 * A horizontal axis of milliseconds along x: a light vertical grid line from
 * top to bottom at each round step (1, 2 or 5 times a power of ten, about
 * every 80 pixels) and its value under bottom; the unit ("ms") after the
 * last.
 */
void cli_svg_ms_axis(FILE *out, const cli_svg_scale *x, double top, double bottom);

/* What a legend's swatch looks like. */
typedef enum {
    CLI_SVG_KEY_BAR,
    CLI_SVG_KEY_TICK,
    CLI_SVG_KEY_LINE,
    CLI_SVG_KEY_DASHED,
    CLI_SVG_KEY_CROSS
} cli_svg_key_shape;

typedef struct cli_svg_key {
    const char *label;
    const char *colour;
    cli_svg_key_shape shape;
} cli_svg_key;

/* A legend: the n keys side by side from (x, y) (y: the text's baseline),
 * each a swatch and its label. Returns the x just past the last label. */
double cli_svg_legend(FILE *out, double x, double y, const cli_svg_key *keys, size_t n);

#endif
