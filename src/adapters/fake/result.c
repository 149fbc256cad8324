/* Filling in a statement's result: rows, command tags, errors, warnings. */
#include "fake.h"

#include <string.h>

void advlock_fake_copy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void advlock_fake_result_clear(advlock_fake_result *out)
{
    memset(out, 0, sizeof *out);
}

void advlock_fake_result_error(advlock_fake_result *out, const char *sqlstate, const char *message)
{
    out->status = ADVLOCK_FAKE_SERVER_ERROR;
    out->command_tag[0] = '\0';
    advlock_fake_copy(out->sqlstate, sizeof out->sqlstate, sqlstate);
    advlock_fake_copy(out->message, sizeof out->message, message);
}

void advlock_fake_result_warning(advlock_fake_result *out, const char *sqlstate,
                                 const char *message)
{
    advlock_fake_copy(out->warning_sqlstate, sizeof out->warning_sqlstate, sqlstate);
    advlock_fake_copy(out->warning, sizeof out->warning, message);
}

void advlock_fake_result_row(advlock_fake_result *out, advlock_fake_status status)
{
    out->status = status;
    advlock_fake_copy(out->command_tag, sizeof out->command_tag, "SELECT 1");
}

void advlock_fake_result_command(advlock_fake_result *out, const char *tag)
{
    out->status = ADVLOCK_FAKE_COMMAND_OK;
    advlock_fake_copy(out->command_tag, sizeof out->command_tag, tag);
}

void advlock_fake_offer_row(void *rows, size_t width, size_t max, size_t *seen, const void *row,
                            int (*before)(const void *a, const void *b))
{
    unsigned char *r = rows;
    size_t last = *seen < max ? *seen : max;
    (*seen)++;
    if (last == max && (max == 0 || !before(row, r + (max - 1) * width)))
        return;
    if (last == max)
        last = max - 1;
    size_t i = last;
    while (i > 0 && before(row, r + (i - 1) * width))
        i--;
    memmove(r + (i + 1) * width, r + i * width, (last - i) * width);
    memcpy(r + i * width, row, width);
}
