/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The arithmetic of jobs: smoothed rate, progress, expected end, and the
 * progress line vbmgr wait draws. */
#include "config.h"

#include "vb-jobs-math.h"

#define MIB (G_GUINT64_CONSTANT (1024) * 1024)
#define SEC G_USEC_PER_SEC

static void
test_rate_unknown (void)
{
  VbJobRate rate;

  vb_job_rate_init (&rate);
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 0);
  vb_job_rate_add (&rate, 1000, 0);
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 0);
  /* a second count at the same instant replaces the first: no time passed */
  vb_job_rate_add (&rate, 1000, 5 * MIB);
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 0);
}

static void
test_rate_steady (void)
{
  VbJobRate rate;

  vb_job_rate_init (&rate);
  for (guint i = 0; i <= 40; i++) /* 10 s at 4 updates a second, 100 MiB/s */
    vb_job_rate_add (&rate, 7 * SEC + i * SEC / 4, (guint64) i * 25 * MIB);
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 100 * MIB);
}

/* Only the last seconds count: a fast start no longer shows. */
static void
test_rate_window (void)
{
  VbJobRate rate;
  guint64 done = 0;
  gint64 t = 0;

  vb_job_rate_init (&rate);
  vb_job_rate_add (&rate, t, done);
  for (guint i = 0; i < 20; i++) /* 20 s at 1 GiB/s */
    {
      t += SEC;
      done += 1024 * MIB;
      vb_job_rate_add (&rate, t, done);
    }
  for (guint i = 0; i < 24; i++) /* then 6 s at 10 MiB/s, four samples a second */
    {
      t += SEC / 4;
      done += 10 * MIB / 4;
      vb_job_rate_add (&rate, t, done);
    }
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 10 * MIB);
}

/* A stalled job: samples without progress bring the rate down to 0. */
static void
test_rate_stall (void)
{
  VbJobRate rate;
  gint64 t = 0;

  vb_job_rate_init (&rate);
  for (guint i = 0; i <= 10; i++)
    vb_job_rate_add (&rate, t += SEC, (guint64) i * 50 * MIB);
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 50 * MIB);
  vb_job_rate_add (&rate, t += SEC, 500 * MIB);
  vb_job_rate_add (&rate, t += SEC, 500 * MIB);
  g_assert_cmpuint (vb_job_rate_get (&rate), <, 50 * MIB);
  g_assert_cmpuint (vb_job_rate_get (&rate), >, 0);
  for (guint i = 0; i < 5; i++)
    vb_job_rate_add (&rate, t += SEC, 500 * MIB);
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 0);
}

/* More samples than the ring holds inside the window: still measured. */
static void
test_rate_many_samples (void)
{
  VbJobRate rate;

  vb_job_rate_init (&rate);
  for (guint i = 0; i < 1000; i++)
    vb_job_rate_add (&rate, (gint64) i * 1000, (guint64) i * 4096);
  /* 4096 bytes per ms */
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 4096 * 1000);
}

static void
test_rate_restart (void)
{
  VbJobRate rate;

  vb_job_rate_init (&rate);
  vb_job_rate_add (&rate, 0, 0);
  vb_job_rate_add (&rate, SEC, 900 * MIB);
  vb_job_rate_add (&rate, 2 * SEC, 10 * MIB); /* went back: measure again */
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 0);
  vb_job_rate_add (&rate, 3 * SEC, 30 * MIB);
  g_assert_cmpuint (vb_job_rate_get (&rate), ==, 20 * MIB);
}

static void
test_progress (void)
{
  g_assert_cmpfloat (vb_job_progress (0, 0), ==, 0.0);
  g_assert_cmpfloat (vb_job_progress (5, 0), ==, 0.0);
  g_assert_cmpfloat (vb_job_progress (0, 100), ==, 0.0);
  g_assert_cmpfloat (vb_job_progress (45, 100), ==, 0.45);
  g_assert_cmpfloat (vb_job_progress (100, 100), ==, 1.0);
  g_assert_cmpfloat (vb_job_progress (150, 100), ==, 1.0);
}

static void
test_expected_end (void)
{
  const gint64 now = G_GINT64_CONSTANT (1700000000) * SEC;

  g_assert_cmpuint (vb_job_expected_end (0, 0, 100, now), ==, 0);       /* no total */
  g_assert_cmpuint (vb_job_expected_end (1000, 10, 0, now), ==, 0);     /* no rate yet */
  g_assert_cmpuint (vb_job_expected_end (1000, 1000, 0, now), ==, now); /* nothing left */
  g_assert_cmpuint (vb_job_expected_end (1000 * MIB, 400 * MIB, 100 * MIB, now), ==, now + 6 * SEC);
  g_assert_cmpuint (vb_job_expected_end (G_MAXUINT64, 0, 1, now), ==, 0); /* out of range */
}

static void
test_format_rate (void)
{
  static const struct {
    guint64 rate;
    const char *text;
  } cases[] = {
    { 0, "0 B/s" },
    { 1023, "1023 B/s" },
    { 1024, "1.0 KiB/s" },
    { 1536, "1.5 KiB/s" },
    { 120 * MIB + 300 * 1024, "120.3 MiB/s" },
    { 1024 * MIB - 1, "1.0 GiB/s" },
    { 3 * 1024 * 1024 * MIB, "3.0 TiB/s" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *text = vb_job_format_rate (cases[i].rate);
      g_assert_cmpstr (text, ==, cases[i].text);
    }
}

static void
test_format_duration (void)
{
  static const struct {
    gint64 seconds;
    const char *text;
  } cases[] = {
    { -1, "-:--" },    { 0, "0:00" },       { 12, "0:12" },      { 61, "1:01" },
    { 3599, "59:59" }, { 3600, "1:00:00" }, { 3723, "1:02:03" }, { 100 * 3600, "100:00:00" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *text = vb_job_format_duration (cases[i].seconds);
      g_assert_cmpstr (text, ==, cases[i].text);
    }
}

static void
test_format_line (void)
{
  g_autofree char *a
      = vb_job_format_progress_line (0.45, 120 * MIB + 300 * 1024, 12, "resync", "r1", 10);
  g_autofree char *b = vb_job_format_progress_line (0.0, 0, -1, "check", NULL, 10);
  g_autofree char *c = vb_job_format_progress_line (0.9999, 1024, 0, "rebuild", "", 4);
  g_autofree char *d = vb_job_format_progress_line (1.7, 0, 0, "repair", "m", 5);
  g_autofree char *e = vb_job_format_progress_line (0.29, 0, 1, "check", "x", 10);

  g_assert_cmpstr (a, ==, "[#####     ] 45.0% 120.3 MiB/s ETA 0:12 resync r1");
  g_assert_cmpstr (b, ==, "[          ] 0.0% 0 B/s ETA -:-- check");
  /* rounded down: not "100.0%" while work is left */
  g_assert_cmpstr (c, ==, "[####] 99.9% 1.0 KiB/s ETA 0:00 rebuild");
  g_assert_cmpstr (d, ==, "[#####] 100.0% 0 B/s ETA 0:00 repair m");
  g_assert_cmpstr (e, ==, "[###       ] 29.0% 0 B/s ETA 0:01 check x");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/jobs/rate/unknown", test_rate_unknown);
  g_test_add_func ("/jobs/rate/steady", test_rate_steady);
  g_test_add_func ("/jobs/rate/window", test_rate_window);
  g_test_add_func ("/jobs/rate/stall", test_rate_stall);
  g_test_add_func ("/jobs/rate/many-samples", test_rate_many_samples);
  g_test_add_func ("/jobs/rate/restart", test_rate_restart);
  g_test_add_func ("/jobs/progress", test_progress);
  g_test_add_func ("/jobs/expected-end", test_expected_end);
  g_test_add_func ("/jobs/format/rate", test_format_rate);
  g_test_add_func ("/jobs/format/duration", test_format_duration);
  g_test_add_func ("/jobs/format/line", test_format_line);
  return g_test_run ();
}
