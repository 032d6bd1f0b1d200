/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See vb-report.h. */
#include "config.h"

#include "vb-report.h"

#include <stdarg.h>

static VbReportFunc report_func;
static gpointer report_data;

void
vb_report_set_func (VbReportFunc func, gpointer user_data)
{
  report_func = func;
  report_data = user_data;
}

void
vb_report_message (const char *subject, VbReportKind kind, const char *message)
{
  if (report_func)
    report_func (subject, kind, message, report_data);
  else
    g_debug ("%s: %s", subject, message);
}

void
vb_report (const char *subject, VbReportKind kind, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list ap;

  va_start (ap, format);
  message = g_strdup_vprintf (format, ap);
  va_end (ap);
  vb_report_message (subject, kind, message);
}
