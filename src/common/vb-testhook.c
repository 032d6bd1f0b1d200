/* See vb-testhook.h. */
#include "config.h"

#include "vb-testhook.h"

#include <glib.h>
#include <signal.h>
#include <string.h>

void
vb_test_hook (const char *step)
{
  const char *want = g_getenv ("VBLK_TEST_STOP_AT");

  if (want == NULL || strcmp (want, step) != 0)
    return;
  g_warning ("test hook: stopping at %s", step);
  raise (SIGSTOP);
}
