/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of what vblkd does around boot (src/daemon/vb-boot.c): the
 * initramfs's choice of devices (the named ones and what they are built
 * on, every other one stopped; an unknown name refused), the pid file and
 * the takeover's refusal to signal anything that is not a vblkd. */
#include "config.h"

#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vb-boot.h"
#include "vb-error.h"

static void
add_device (VbState *state, const char *name, const char *source)
{
  g_autofree char *uuid = g_uuid_string_random ();
  g_autofree char *cuuid = g_uuid_string_random ();
  VbDeviceConfig *d = vb_device_config_new (name, uuid, "linear", "auto");

  g_ptr_array_add (d->components, vb_component_config_new (source, "0", cuuid));
  d->started = TRUE;
  g_ptr_array_add (state->devices, d);
}

static VbState *
stack (void)
{
  VbState *state = vb_state_new ();

  add_device (state, "disk", "/dev/vda");
  add_device (state, "root", "vblk:disk");
  add_device (state, "home", "vblk:disk");
  add_device (state, "other", "/dev/vdb");
  return state;
}

static const char *
wanted (const VbState *state)
{
  static char text[128];
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      g_assert_cmpint (d->started, ==, d->autostart);
      if (d->started)
        g_string_append_printf (s, "%s%s", s->len ? "," : "", d->name);
    }
  g_strlcpy (text, s->str, sizeof text);
  g_string_free (s, TRUE);
  return text;
}

static void
test_keep_only (void)
{
  g_autoptr (GError) error = NULL;
  VbState *state = stack ();

  g_assert_true (vb_boot_keep_only (state, "root", &error));
  g_assert_no_error (error);
  g_assert_cmpstr (wanted (state), ==, "disk,root");
  vb_state_free (state);

  state = stack ();
  g_assert_true (vb_boot_keep_only (state, " home , other,", &error));
  g_assert_cmpstr (wanted (state), ==, "disk,home,other");
  vb_state_free (state);
}

static void
test_keep_only_unknown (void)
{
  g_autoptr (GError) error = NULL;
  VbState *state = stack ();

  g_assert_false (vb_boot_keep_only (state, "root,rot", &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "'rot'"));
  vb_state_free (state);
}

static void
test_pid_file (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("vb-boot-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "vblkd.pid", NULL);
  g_autofree char *text = NULL;
  g_autofree char *mine = g_strdup_printf ("%d\n", (int) getpid ());

  /* none: nothing to take over */
  g_assert_true (vb_boot_takeover (dir, 100, &error));
  g_assert_true (vb_boot_write_pid (dir, &error));
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, mine);
  /* its own pid is no other vblkd */
  g_assert_true (vb_boot_takeover (dir, 100, &error));
  /* a process that is no vblkd (the parent: a shell, meson) is never
   * signalled, nor a pid that is not there */
  g_assert_true (g_file_set_contents (path, "1\n", -1, NULL));
  g_assert_true (vb_boot_takeover (dir, 100, &error));
  g_assert_true (g_file_set_contents (path, "junk\n", -1, NULL));
  g_assert_true (vb_boot_takeover (dir, 100, &error));
  g_assert_no_error (error);
  /* removed only while it names this process */
  vb_boot_remove_pid (dir);
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
  g_assert_true (vb_boot_write_pid (dir, &error));
  vb_boot_remove_pid (dir);
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  g_rmdir (dir);
}

/* A child named "vblkd" (its comm): it exits at once (a zombie until
 * reaped), or waits, with SIGUSR1 (the takeover's) ignored or not. */
static pid_t
fake_vblkd (gboolean exit_now, gboolean ignore_usr1)
{
  pid_t pid = fork ();

  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      prctl (PR_SET_NAME, "vblkd");
      if (ignore_usr1)
        signal (SIGUSR1, SIG_IGN);
      if (!exit_now)
        for (;;)
          pause ();
      _exit (0);
    }
  return pid;
}

/* A fake vblkd (fake_vblkd) named in @dir's pid file once it is named. */
static pid_t
named_fake (const char *dir, gboolean exit_now, gboolean ignore_usr1)
{
  g_autofree char *path = g_build_filename (dir, "vblkd.pid", NULL);
  g_autofree char *text = NULL;
  pid_t pid = fake_vblkd (exit_now, ignore_usr1);

  g_usleep (200 * 1000); /* named (and exited) by then */
  text = g_strdup_printf ("%d\n", (int) pid);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  return pid;
}

static void
test_takeover (void)
{
  g_autofree char *dir = g_dir_make_tmp ("vb-boot-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "vblkd.pid", NULL);
  g_autoptr (GError) error = NULL;
  pid_t pid;
  int status;

  /* a vblkd that leaves when asked */
  pid = named_fake (dir, FALSE, FALSE);
  g_assert_true (vb_boot_takeover (dir, 5000, &error));
  g_assert_no_error (error);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGUSR1);

  /* one that exited and was not reaped (the initramfs's, under an init
   * that does not reap): nothing to wait for */
  pid = named_fake (dir, TRUE, FALSE);
  g_assert_true (vb_boot_takeover (dir, 5000, &error));
  g_assert_no_error (error);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));

  /* one that does not leave: no takeover, said so */
  pid = named_fake (dir, FALSE, TRUE);
  g_assert_false (vb_boot_takeover (dir, 300, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_BUSY);
  g_assert_nonnull (strstr (error->message, "did not leave"));
  kill (pid, SIGKILL);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_unlink (path);
  g_rmdir (dir);
}

static void
test_mark (void)
{
  char name[] = "vblkd";
  char *argv[] = { name, NULL };

  vb_boot_mark_root_storage (argv);
  g_assert_cmpstr (argv[0], ==, "@blkd");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/boot/keep-only", test_keep_only);
  g_test_add_func ("/boot/keep-only-unknown", test_keep_only_unknown);
  g_test_add_func ("/boot/pid-file", test_pid_file);
  g_test_add_func ("/boot/takeover", test_takeover);
  g_test_add_func ("/boot/mark", test_mark);
  return g_test_run ();
}
