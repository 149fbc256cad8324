/*
 * Turns the records the benchmark programs wrote (bench_emit, bench_note)
 * into the table `make bench` prints and the JSON file it leaves behind:
 *
 *     report RESULTS.tsv OUT.json
 *
 * The JSON is one object: figure name -> {"value", "unit", "ratio"}, ratio
 * null for a figure with no limit. Notes are printed under the table.
 * Exits 1 when a record is malformed or a figure name repeats, so a
 * broken program cannot pass unnoticed as a short table.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { MAX_FIGURES = 128, MAX_NOTES = 64, FIELDS = 7, LINE_MAX_ = 2048 };

typedef struct row {
    char *field[FIELDS]; /* name, value, unit, limit, ratio, goal, verdict */
} row;

static row rows[MAX_FIGURES];
static size_t row_count;
static char *notes[MAX_NOTES];
static size_t note_count;

static char *copy(const char *s)
{
    char *c = strdup(s);
    if (c == NULL)
        bench_fail("out of memory");
    return c;
}

static void read_records(const char *path)
{
    FILE *in = fopen(path, "r");
    if (in == NULL)
        bench_fail("cannot read %s", path);
    char line[LINE_MAX_];
    int number = 0;
    while (fgets(line, sizeof line, in) != NULL) {
        number++;
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '\0')
            continue;
        if (strncmp(line, "#\t", 2) == 0) {
            /* A note two runs both made (a policy still pending) once. */
            int seen = 0;
            for (size_t i = 0; i < note_count; i++)
                seen |= strcmp(notes[i], line + 2) == 0;
            if (!seen && note_count < MAX_NOTES)
                notes[note_count++] = copy(line + 2);
            continue;
        }
        if (row_count == MAX_FIGURES)
            bench_fail("%s: more than %d figures", path, MAX_FIGURES);
        row *r = &rows[row_count];
        char *rest = line;
        for (int f = 0; f < FIELDS; f++) {
            char *tab = strchr(rest, '\t');
            if ((tab == NULL) != (f == FIELDS - 1))
                bench_fail("%s:%d: not a figure record: %s", path, number, line);
            if (tab != NULL)
                *tab = '\0';
            r->field[f] = copy(rest);
            rest = tab != NULL ? tab + 1 : rest;
        }
        for (size_t i = 0; i < row_count; i++)
            if (strcmp(rows[i].field[0], r->field[0]) == 0)
                bench_fail("%s: figure %s appears twice", path, r->field[0]);
        row_count++;
    }
    fclose(in);
}

/* Enough digits to read, never exponent notation for everyday sizes. */
static void format_value(char *out, size_t size, const char *text)
{
    double v = strtod(text, NULL);
    double a = fabs(v);
    if (a >= 100 || v == floor(v)) /* counts, and large values */
        snprintf(out, size, "%.0f", v);
    else if (a >= 10)
        snprintf(out, size, "%.1f", v);
    else if (a >= 0.01)
        snprintf(out, size, "%.3f", v);
    else
        snprintf(out, size, "%.2g", v);
}

static int width(const char *s)
{
    /* Column widths in characters: count UTF-8 lead bytes only. */
    int n = 0;
    for (; *s != '\0'; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static void pad(const char *s, int w)
{
    fputs(s, stdout);
    for (int n = width(s); n < w; n++)
        putchar(' ');
}

static void print_table(void)
{
    static const char *const heading[] = {"figure",        "value", "unit",
                                          "compared with", "ratio", "goal"};
    char values[MAX_FIGURES][32];
    int w[6];
    for (int c = 0; c < 6; c++)
        w[c] = width(heading[c]);
    for (size_t i = 0; i < row_count; i++) {
        format_value(values[i], sizeof values[i], rows[i].field[1]);
        const char *cell[6] = {rows[i].field[0], values[i],        rows[i].field[2],
                               rows[i].field[3], rows[i].field[4], rows[i].field[5]};
        for (int c = 0; c < 6; c++)
            if (width(cell[c]) > w[c])
                w[c] = width(cell[c]);
    }
    for (int c = 0; c < 6; c++) {
        pad(heading[c], w[c] + 2);
    }
    printf("\n");
    for (size_t i = 0; i < row_count; i++) {
        const char *cell[6] = {rows[i].field[0], values[i],        rows[i].field[2],
                               rows[i].field[3], rows[i].field[4], rows[i].field[5]};
        for (int c = 0; c < 6; c++)
            pad(cell[c], w[c] + 2);
        if (strcmp(rows[i].field[6], "-") != 0)
            fputs(rows[i].field[6], stdout);
        printf("\n");
    }
    if (note_count > 0)
        printf("\n");
    for (size_t i = 0; i < note_count; i++)
        printf("note: %s\n", notes[i]);
}

static void write_number(FILE *out, const char *text)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || !isfinite(v))
        fputs("null", out);
    else
        fprintf(out, "%.6g", v);
}

static void write_json(const char *path)
{
    FILE *out = fopen(path, "w");
    if (out == NULL)
        bench_fail("cannot write %s", path);
    fputs("{\n", out);
    for (size_t i = 0; i < row_count; i++) {
        fputs("  ", out);
        bench_json_string(out, rows[i].field[0]);
        fputs(": {\"value\": ", out);
        write_number(out, rows[i].field[1]);
        fputs(", \"unit\": ", out);
        bench_json_string(out, rows[i].field[2]);
        fputs(", \"ratio\": ", out);
        write_number(out, rows[i].field[4]);
        fprintf(out, "}%s\n", i + 1 < row_count ? "," : "");
    }
    fputs("}\n", out);
    if (fclose(out) != 0)
        bench_fail("cannot write %s", path);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s RESULTS.tsv OUT.json\n", argv[0]);
        return 2;
    }
    read_records(argv[1]);
    if (row_count == 0)
        bench_fail("%s holds no figures", argv[1]);
    print_table();
    write_json(argv[2]);
    return 0;
}
