/*
 * SVG 1.1 primitives (svg.h). Coordinates are written to a tenth of a
 * pixel by integer arithmetic, so no locale can turn the decimal point into
 * a comma, and the same picture always has the same bytes.
 */
#include "svg.h"

#include <stdarg.h>
#include <string.h>

double cli_svg_at(const cli_svg_scale *s, double v)
{
    if (s->hi == s->lo)
        return s->px_lo;
    return s->px_lo + (v - s->lo) * (s->px_hi - s->px_lo) / (s->hi - s->lo);
}

/* v to a tenth, "12", "12.5" or "-3.1"; beyond a billion pixels is clamped
 * (and NaN written as 0), which no picture of ours reaches. */
static void put_num(FILE *out, double v)
{
    if (!(v > -1e9))
        v = v < 0 ? -1e9 : 0;
    if (v > 1e9)
        v = 1e9;
    long long tenths = (long long)(v * 10 + (v < 0 ? -0.5 : 0.5));
    if (tenths < 0) {
        fputc('-', out);
        tenths = -tenths;
    }
    fprintf(out, "%lld", tenths / 10);
    if (tenths % 10 != 0)
        fprintf(out, ".%lld", tenths % 10);
}

/* name="v" with a space before it. */
static void put_attr_num(FILE *out, const char *name, double v)
{
    fprintf(out, " %s=\"", name);
    put_num(out, v);
    fputc('"', out);
}

/* Text as XML character data; control characters, which XML 1.0 forbids,
 * become '?'. */
static void put_escaped(FILE *out, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        switch (*p) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&apos;", out); break;
        default: fputc(*p < 0x20 ? '?' : *p, out); break;
        }
    }
}

void cli_svg_begin(FILE *out, int width, int height, const char *title)
{
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
            width, height, width, height);
    if (title != NULL) {
        fputs("<title>", out);
        put_escaped(out, title);
        fputs("</title>\n", out);
    }
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"#FFFFFF\"/>\n", width, height);
}

void cli_svg_end(FILE *out)
{
    fputs("</svg>\n", out);
}

void cli_svg_group(FILE *out, const char *id)
{
    if (id != NULL)
        fprintf(out, "<g id=\"%s\">\n", id);
    else
        fputs("<g>\n", out);
}

void cli_svg_group_end(FILE *out)
{
    fputs("</g>\n", out);
}

static void put_class(FILE *out, const char *cls)
{
    if (cls != NULL)
        fprintf(out, " class=\"%s\"", cls);
}

void cli_svg_rect(FILE *out, double x, double y, double w, double h, const char *fill,
                  const char *cls, const char *tip)
{
    fputs("<rect", out);
    put_class(out, cls);
    put_attr_num(out, "x", x);
    put_attr_num(out, "y", y);
    put_attr_num(out, "width", w);
    put_attr_num(out, "height", h);
    fprintf(out, " fill=\"%s\"", fill);
    if (tip == NULL) {
        fputs("/>\n", out);
        return;
    }
    fputs("><title>", out);
    put_escaped(out, tip);
    fputs("</title></rect>\n", out);
}

static void put_stroke(FILE *out, const char *stroke, double width, const char *dash)
{
    fprintf(out, " stroke=\"%s\"", stroke);
    put_attr_num(out, "stroke-width", width);
    if (dash != NULL)
        fprintf(out, " stroke-dasharray=\"%s\"", dash);
}

void cli_svg_line(FILE *out, double x1, double y1, double x2, double y2, const char *stroke,
                  double width, const char *dash)
{
    fputs("<line", out);
    put_attr_num(out, "x1", x1);
    put_attr_num(out, "y1", y1);
    put_attr_num(out, "x2", x2);
    put_attr_num(out, "y2", y2);
    put_stroke(out, stroke, width, dash);
    fputs("/>\n", out);
}

/* "X Y" after lead (a path command, a separator, or 0 for none). */
static void put_point(FILE *out, char lead, double x, double y)
{
    if (lead != 0)
        fputc(lead, out);
    put_num(out, x);
    fputc(' ', out);
    put_num(out, y);
}

void cli_svg_polyline(FILE *out, const double *x, const double *y, size_t n, const char *stroke,
                      double width, const char *dash, const char *cls)
{
    fputs("<polyline", out);
    put_class(out, cls);
    fputs(" fill=\"none\"", out);
    put_stroke(out, stroke, width, dash);
    fputs(" points=\"", out);
    for (size_t i = 0; i < n; i++)
        put_point(out, i > 0 ? ' ' : 0, x[i], y[i]);
    fputs("\"/>\n", out);
}

void cli_svg_cross(FILE *out, double x, double y, double r, const char *stroke, const char *cls)
{
    fputs("<path", out);
    put_class(out, cls);
    put_stroke(out, stroke, r > 3 ? 2 : 1.5, NULL);
    fputs(" d=\"", out);
    put_point(out, 'M', x - r, y - r);
    put_point(out, 'L', x + r, y + r);
    put_point(out, 'M', x - r, y + r);
    put_point(out, 'L', x + r, y - r);
    fputs("\"/>\n", out);
}

void cli_svg_text(FILE *out, double x, double y, double size, cli_svg_anchor anchor, int bold,
                  const char *fill, const char *fmt, ...)
{
    static const char *const anchors[] = {"start", "middle", "end"};
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fputs("<text", out);
    put_attr_num(out, "x", x);
    put_attr_num(out, "y", y);
    put_attr_num(out, "font-size", size);
    if (anchor != CLI_SVG_START)
        fprintf(out, " text-anchor=\"%s\"", anchors[anchor]);
    if (bold)
        fputs(" font-weight=\"bold\"", out);
    fprintf(out, " fill=\"%s\">", fill);
    put_escaped(out, text);
    fputs("</text>\n", out);
}

double cli_svg_text_width(size_t n, double size)
{
    /* sans-serif averages a little over half its size per character */
    return (double)n * size * 0.52;
}

/* The round step (1, 2 or 5 times a power of ten, at least 1) that puts
 * ticks about every `every` pixels. */
static long long round_step(const cli_svg_scale *x, double every)
{
    double span = x->hi - x->lo, ticks = (x->px_hi - x->px_lo) / every;
    double wanted = ticks >= 1 ? span / ticks : span;
    static const int mantissas[] = {1, 2, 5};
    for (long long power = 1;; power *= 10)
        for (size_t i = 0; i < sizeof mantissas / sizeof mantissas[0]; i++)
            if ((double)(mantissas[i] * power) >= wanted || power > 1000000000000LL)
                return mantissas[i] * power;
}

void cli_svg_ms_axis(FILE *out, const cli_svg_scale *x, double top, double bottom)
{
    long long step = round_step(x, 80);
    long long first = (long long)(x->lo / (double)step) * step;
    if ((double)first < x->lo)
        first += step;
    cli_svg_group(out, NULL);
    cli_svg_line(out, x->px_lo, bottom, x->px_hi, bottom, CLI_SVG_GREY, 1, NULL);
    for (long long v = first; (double)v <= x->hi; v += step) {
        double px = cli_svg_at(x, (double)v);
        cli_svg_line(out, px, top, px, bottom, CLI_SVG_GRID, 1, NULL);
        cli_svg_line(out, px, bottom, px, bottom + 4, CLI_SVG_GREY, 1, NULL);
        /* The unit once, after the last value that fits. */
        int last = (double)(v + step) > x->hi;
        cli_svg_text(out, px, bottom + 16, 11, CLI_SVG_MIDDLE, 0, CLI_SVG_INK, "%lld%s", v,
                     last ? " ms" : "");
    }
    cli_svg_group_end(out);
}

double cli_svg_legend(FILE *out, double x, double y, const cli_svg_key *keys, size_t n)
{
    const double size = 12, swatch = 18;
    cli_svg_group(out, "legend");
    for (size_t i = 0; i < n; i++) {
        const cli_svg_key *k = &keys[i];
        double mid = y - size * 0.35;
        switch (k->shape) {
        case CLI_SVG_KEY_BAR:
            cli_svg_rect(out, x, y - size + 2, swatch, size - 2, k->colour, NULL, NULL);
            break;
        case CLI_SVG_KEY_TICK:
            cli_svg_rect(out, x + swatch / 2 - 1, y - size + 1, 2, size, k->colour, NULL, NULL);
            break;
        case CLI_SVG_KEY_LINE:
        case CLI_SVG_KEY_DASHED:
            cli_svg_line(out, x, mid, x + swatch, mid, k->colour, 2.5,
                         k->shape == CLI_SVG_KEY_DASHED ? "5 3" : NULL);
            break;
        case CLI_SVG_KEY_CROSS: cli_svg_cross(out, x + swatch / 2, mid, 4, k->colour, NULL); break;
        }
        x += swatch + 5;
        cli_svg_text(out, x, y, size, CLI_SVG_START, 0, CLI_SVG_INK, "%s", k->label);
        x += cli_svg_text_width(strlen(k->label), size) + 16;
    }
    cli_svg_group_end(out);
    return x;
}
