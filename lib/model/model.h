/* lib/model internal interface (STUB: helper model fills this in). */
#ifndef LOMAS_MODEL_H
#define LOMAS_MODEL_H

#include "../core/core.h"

#endif
