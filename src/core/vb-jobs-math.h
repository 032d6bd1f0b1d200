/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The arithmetic of jobs, pure so it can be unit-tested: progress, a rate
 * smoothed over the last seconds, the expected end, and the text vbmgr
 * shows ("[#####     ] 45.0% 120.3 MiB/s ETA 0:12 resync r1"). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The rate is measured over about this much of the most recent history. */
#define VB_JOB_RATE_WINDOW_US (5 * G_USEC_PER_SEC)
#define VB_JOB_RATE_SAMPLES 32

/* (time, bytes done) samples, oldest first, in a ring. */
typedef struct {
  gint64 time[VB_JOB_RATE_SAMPLES]; /* monotonic µs */
  guint64 done[VB_JOB_RATE_SAMPLES];
  guint first; /* index of the oldest sample */
  guint n;
} VbJobRate;

void vb_job_rate_init (VbJobRate *rate);
/* Records that @done bytes were done at @now_us (monotonic, not
 * decreasing). Samples older than the window are dropped, but the newest of
 * them stays as the starting point; a @done below the previous one starts
 * the measurement again. */
void vb_job_rate_add (VbJobRate *rate, gint64 now_us, guint64 done);
/* Bytes per second over the samples kept; 0 when fewer than two samples or
 * no time passed between them. */
guint64 vb_job_rate_get (const VbJobRate *rate);

/* @done / @total within 0 .. 1; 0 when @total is 0. */
double vb_job_progress (guint64 done, guint64 total);
/* When the rest (@total - @done) is done at @rate bytes/s, in µs since the
 * epoch counted from @now_us (real time); @now_us when nothing is left, 0
 * when unknown (no rate, no total). */
guint64 vb_job_expected_end (guint64 total, guint64 done, guint64 rate, gint64 now_us);

/* "512 B/s", "120.3 MiB/s" (IEC units, one decimal). */
char *vb_job_format_rate (guint64 bytes_per_second);
/* "0:12", "59:59", "1:02:03"; "-:--" for a negative (unknown) duration. */
char *vb_job_format_duration (gint64 seconds);
/* "[#####     ] 45.0% 120.3 MiB/s ETA 0:12 resync r1" with a bar of
 * @bar_width cells; @eta_seconds < 0 when unknown; @device may be NULL. */
char *vb_job_format_progress_line (double progress, guint64 rate, gint64 eta_seconds,
                                   const char *operation, const char *device, guint bar_width);

G_END_DECLS
