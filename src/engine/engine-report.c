/* See engine-report.h. */
#include "config.h"

#include "engine-report.h"

#include <stdarg.h>

static VbEngineReportFunc report_func;
static gpointer report_data;

void
vb_engine_set_report_func (VbEngineReportFunc func, gpointer user_data)
{
  report_func = func;
  report_data = user_data;
}

void
engine_report (VbEngine *e, VbEngineReportKind kind, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list ap;

  va_start (ap, format);
  message = g_strdup_vprintf (format, ap);
  va_end (ap);
  if (report_func)
    report_func (e->name, kind, message, report_data);
  else
    g_debug ("%s: %s", e->name, message);
}
