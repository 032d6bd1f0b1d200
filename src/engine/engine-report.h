/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's reports to its owner (vb-report.h), about the device the
 * engine serves: every layer reports through engine_report, never through
 * the log. */
#pragma once

#include "engine-state.h"
#include "vb-report.h"

void engine_report (VbEngine *e, VbReportKind kind, const char *format, ...) G_GNUC_PRINTF (3, 4);
