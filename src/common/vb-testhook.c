/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See vb-testhook.h. */
#include "config.h"

#include "vb-report.h"
#include "vb-testhook.h"

#include <glib.h>
#include <signal.h>
#include <string.h>

#define HOLD_POLL_US (20 * 1000)

static void
hold (const char *step)
{
  const char *path = g_getenv ("VBLK_TEST_HOLD_FILE");

  if (path == NULL)
    return;
  vb_report ("test hook", VB_REPORT_WARNING, "holding at %s while %s exists", step, path);
  while (g_file_test (path, G_FILE_TEST_EXISTS))
    g_usleep (HOLD_POLL_US);
  vb_report ("test hook", VB_REPORT_WARNING, "let go at %s", step);
}

void
vb_test_hook (const char *step)
{
  const char *want = g_getenv ("VBLK_TEST_STOP_AT");
  const char *held = g_getenv ("VBLK_TEST_HOLD_AT");

  if (held && strcmp (held, step) == 0)
    hold (step);
  if (want == NULL || strcmp (want, step) != 0)
    return;
  vb_report ("test hook", VB_REPORT_WARNING, "stopping at %s", step);
  raise (SIGSTOP);
}

gboolean
vb_test_hook_holding (const char *step)
{
  static char *said; /* the step last said to be held */
  const char *held = g_getenv ("VBLK_TEST_HOLD_AT");
  const char *path = g_getenv ("VBLK_TEST_HOLD_FILE");

  if (held == NULL || path == NULL || strcmp (held, step) != 0
      || !g_file_test (path, G_FILE_TEST_EXISTS))
    {
      if (said && strcmp (said, step) == 0)
        {
          vb_report ("test hook", VB_REPORT_WARNING, "let go at %s", step);
          g_clear_pointer (&said, g_free);
        }
      return FALSE;
    }
  if (said == NULL)
    {
      vb_report ("test hook", VB_REPORT_WARNING, "holding at %s while %s exists", step, path);
      said = g_strdup (step);
    }
  return TRUE;
}
