/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See engine-report.h. */
#include "config.h"

#include "engine-report.h"

#include <stdarg.h>

void
engine_report (VbEngine *e, VbReportKind kind, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list ap;

  va_start (ap, format);
  message = g_strdup_vprintf (format, ap);
  va_end (ap);
  vb_report_message (e->name, kind, message);
}
