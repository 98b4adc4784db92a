/* lib/trace internal interface (STUB: helper trace fills this in). */
#ifndef LOMAS_TRACE_H
#define LOMAS_TRACE_H

#include "../core/core.h"

#endif
