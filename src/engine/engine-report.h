/* The engine's reports to its owner (vb_engine_set_report_func): every
 * layer reports through engine_report, never through the log. */
#pragma once

#include "engine-state.h"

void engine_report (VbEngine *e, VbEngineReportKind kind, const char *format, ...)
    G_GNUC_PRINTF (3, 4);
