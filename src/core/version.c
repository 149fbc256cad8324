/* The library's version at run time: the header's, compiled in. */
#include "advlock.h"

const char *advlock_version(void)
{
    return ADVLOCK_VERSION;
}
