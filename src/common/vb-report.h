/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the libraries (engine, backends, metadata) have to tell an
 * administrator: they never log, they report; the process that owns them
 * (vblkd) says once, at start, what becomes of a report. */
#pragma once

#include <glib.h>

typedef enum {
  VB_REPORT_INFO,    /* an event or a decision */
  VB_REPORT_WARNING, /* something failed that the caller goes on without */
} VbReportKind;

/* @subject is what the report is about (a device's name, a node, a
 * backend's name); @message does not repeat it. Called on the thread the
 * report arises on (an I/O thread, a job's, a monitor's): must not block. */
typedef void (*VbReportFunc) (const char *subject, VbReportKind kind, const char *message,
                              gpointer user_data);

/* Set once by the owner before the first report; without one, reports go
 * to the debug log. */
void vb_report_set_func (VbReportFunc func, gpointer user_data);

void vb_report (const char *subject, VbReportKind kind, const char *format, ...)
    G_GNUC_PRINTF (3, 4);
void vb_report_message (const char *subject, VbReportKind kind, const char *message);
