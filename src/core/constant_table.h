/*
 * The rows of a table of constants (advlock_constant) and its accessor,
 * for src/core/constants.c and src/adapters/fake/constants.c: each value is
 * the compiler's, each name its C spelling.
 */
#ifndef ADVLOCK_CONSTANT_TABLE_H
#define ADVLOCK_CONSTANT_TABLE_H

#include "advlock.h"

/* clang-format off */
#define ENUMERATOR(type, name) {#type, #name, (int64_t)(name)}
#define LIMIT(name)            {"limit", #name, (int64_t)(name)}
#define SIZE(type)             {"sizeof", #type, (int64_t)sizeof(type)}
/* clang-format on */

/* Defines fn, which returns table and stores its length in *count. */
#define CONSTANT_TABLE_ACCESSOR(fn, table)               \
    const advlock_constant *fn(size_t *count)            \
    {                                                    \
        if (count != NULL)                               \
            *count = sizeof(table) / sizeof((table)[0]); \
        return table;                                    \
    }

#endif /* ADVLOCK_CONSTANT_TABLE_H */
