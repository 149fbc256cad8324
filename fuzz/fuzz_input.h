/* The fuzzers' input: opcode bytes and numbers read from libFuzzer's data
 * (zeros once it runs out), and the check that aborts on a broken
 * invariant. */
#ifndef ADVLOCK_FUZZ_INPUT_H
#define ADVLOCK_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct input {
    const uint8_t *data;
    size_t size;
} input;

static inline uint8_t byte(input *in)
{
    if (in->size == 0)
        return 0;
    in->size--;
    return *in->data++;
}

static inline int64_t number(input *in)
{
    uint64_t v = 0;
    int n = byte(in) % 9;
    for (int i = 0; i < n; i++)
        v = v << 8 | byte(in);
    /* Small values are the interesting ones most of the time. */
    switch (byte(in) % 4) {
    case 0: return (int64_t)(v % 3000);
    case 1: return -(int64_t)(v % 3000);
    default: return (int64_t)v;
    }
}

#define CHECK(cond)  \
    do {             \
        if (!(cond)) \
            abort(); \
    } while (0)

#endif
