/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The arithmetic of jobs: progress, smoothed rate, expected end, and the
 * progress line of vbmgr wait. No I/O, no clock: callers pass the time. */
#include "config.h"

#include "vb-jobs-math.h"

void
vb_job_rate_init (VbJobRate *rate)
{
  rate->first = 0;
  rate->n = 0;
}

static guint
slot (const VbJobRate *rate, guint i)
{
  return (rate->first + i) % VB_JOB_RATE_SAMPLES;
}

void
vb_job_rate_add (VbJobRate *rate, gint64 now_us, guint64 done)
{
  if (rate->n > 0)
    {
      guint last = slot (rate, rate->n - 1);

      if (done < rate->done[last])
        rate->n = 0; /* went backwards (restarted): measure again */
      else if (now_us <= rate->time[last])
        {
          /* same instant: keep the newer count only */
          rate->done[last] = done;
          return;
        }
    }
  if (rate->n == VB_JOB_RATE_SAMPLES)
    {
      rate->first = slot (rate, 1);
      rate->n--;
    }
  rate->time[slot (rate, rate->n)] = now_us;
  rate->done[slot (rate, rate->n)] = done;
  rate->n++;
  /* the oldest kept sample is the newest one at or before the window's
   * start, so the span covers the whole window once there is history */
  while (rate->n > 2 && rate->time[slot (rate, 1)] <= now_us - VB_JOB_RATE_WINDOW_US)
    {
      rate->first = slot (rate, 1);
      rate->n--;
    }
}

guint64
vb_job_rate_get (const VbJobRate *rate)
{
  guint a, b;
  gint64 span;

  if (rate->n < 2)
    return 0;
  a = slot (rate, 0);
  b = slot (rate, rate->n - 1);
  span = rate->time[b] - rate->time[a];
  if (span <= 0)
    return 0;
  return (guint64) ((double) (rate->done[b] - rate->done[a]) * G_USEC_PER_SEC / (double) span);
}

double
vb_job_progress (guint64 done, guint64 total)
{
  if (total == 0)
    return 0.0;
  if (done >= total)
    return 1.0;
  return (double) done / (double) total;
}

guint64
vb_job_expected_end (guint64 total, guint64 done, guint64 rate, gint64 now_us)
{
  double left_us;

  if (total == 0)
    return 0;
  if (done >= total)
    return (guint64) now_us;
  if (rate == 0)
    return 0;
  left_us = (double) (total - done) / (double) rate * G_USEC_PER_SEC;
  if (left_us >= (double) (G_MAXINT64 - now_us))
    return 0; /* centuries away: as good as unknown */
  return (guint64) now_us + (guint64) left_us;
}

char *
vb_job_format_rate (guint64 bytes_per_second)
{
  static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  double value = (double) bytes_per_second;
  guint unit = 0;

  if (bytes_per_second < 1024)
    return g_strdup_printf ("%" G_GUINT64_FORMAT " B/s", bytes_per_second);
  value /= 1024.0;
  /* 1023.96 would print as "1024.0": move up a unit instead */
  while (value >= 1023.95 && unit + 1 < G_N_ELEMENTS (units))
    {
      value /= 1024.0;
      unit++;
    }
  return g_strdup_printf ("%.1f %s/s", value, units[unit]);
}

char *
vb_job_format_duration (gint64 seconds)
{
  if (seconds < 0)
    return g_strdup ("-:--");
  if (seconds < 3600)
    return g_strdup_printf ("%d:%02d", (int) (seconds / 60), (int) (seconds % 60));
  return g_strdup_printf ("%" G_GINT64_FORMAT ":%02d:%02d", seconds / 3600,
                          (int) (seconds / 60 % 60), (int) (seconds % 60));
}

char *
vb_job_format_progress_line (double progress, guint64 rate, gint64 eta_seconds,
                             const char *operation, const char *device, guint bar_width)
{
  g_autoptr (GString) line = g_string_new ("[");
  g_autofree char *rate_text = vb_job_format_rate (rate);
  g_autofree char *eta_text = vb_job_format_duration (eta_seconds);
  guint filled, tenths;

  if (!(progress >= 0.0)) /* also NaN */
    progress = 0.0;
  if (progress > 1.0)
    progress = 1.0;
  filled = (guint) (progress * bar_width + 0.5);
  /* rounded down: 99.96% must not show as "100.0%" while work is left */
  tenths = (guint) (progress * 1000.0 + 1e-6);
  for (guint i = 0; i < bar_width; i++)
    g_string_append_c (line, i < filled ? '#' : ' ');
  g_string_append_printf (line, "] %u.%u%% %s ETA %s %s", tenths / 10, tenths % 10, rate_text,
                          eta_text, operation ? operation : "");
  if (device != NULL && *device != '\0')
    g_string_append_printf (line, " %s", device);
  return g_string_free (g_steal_pointer (&line), FALSE);
}
