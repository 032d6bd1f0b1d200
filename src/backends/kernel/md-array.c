/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", md part: one array as vblkd holds it (MdArray, its
 * members, the status the main thread reads), the table of arrays by
 * block node, and md's sysfs attributes. See md-array.h. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "md-array.h"
#include "kernel-util.h"
#include "loop-util.h"
#include "vb-report.h"

#include <blockdev/loop.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static GMutex arrays_lock;
static GHashTable *arrays; /* block_device -> MdArray* */

static char *
md_name (const char *instance, const char *uuid)
{
  GString *s = g_string_new (MD_NAME_PREFIX);
  guint digits = 0;

  g_string_append_printf (s, "%s_", instance);
  for (const char *p = uuid; *p && digits < 16; p++)
    if (g_ascii_isxdigit (*p))
      {
        g_string_append_c (s, g_ascii_tolower (*p));
        digits++;
      }
  return g_string_free (s, FALSE);
}

char *
md_run_file (const char *md)
{
  return g_build_filename (vb_backends_run_dir (), "md", md, NULL);
}

int
md_set (MdArray *a, const char *attr, const char *value)
{
  g_autofree char *path = g_build_filename (a->sysdir, attr, NULL);
  int r = vb_kernel_sys_write (path, value);

  if (r < 0)
    g_debug ("%s: %s = %s: %s", a->md, attr, value, g_strerror (-r));
  return r;
}

int
md_set_u64 (MdArray *a, const char *attr, guint64 value)
{
  g_autofree char *text = g_strdup_printf ("%" G_GUINT64_FORMAT, value);
  return md_set (a, attr, text);
}

char *
md_get (MdArray *a, const char *attr)
{
  g_autofree char *path = g_build_filename (a->sysdir, attr, NULL);
  return vb_kernel_sys_read (path);
}

char *
md_dev_attr (const Member *m, const char *attr)
{
  return g_strdup_printf ("dev-%s/%s", m->kname, attr);
}

gboolean
md_has_word (const char *list, const char *word)
{
  g_auto (GStrv) words = list ? g_strsplit (list, ",", -1) : NULL;

  for (guint i = 0; words && words[i]; i++)
    if (strcmp (g_strstrip (words[i]), word) == 0)
      return TRUE;
  return FALSE;
}

void
md_member_free (Member *m)
{
  if (m == NULL)
    return;
  if (m->fd >= 0)
    close (m->fd);
  g_free (m->path);
  g_free (m->uuid);
  g_free (m->node);
  g_free (m->kname);
  g_free (m);
}

/* The kernel name and number of block device @node. */
static gboolean
node_identity (const char *node, char **kname, dev_t *devnum, GError **error)
{
  struct stat st;
  g_autofree char *link = NULL, *target = NULL;

  if (stat (node, &st) != 0 || !S_ISBLK (st.st_mode))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("'%s' is not a block device"), node);
      return FALSE;
    }
  link = g_strdup_printf ("/sys/dev/block/%u:%u", major (st.st_rdev), minor (st.st_rdev));
  target = g_file_read_link (link, NULL);
  if (target == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("'%s': no %s"), node, link);
      return FALSE;
    }
  *kname = g_path_get_basename (target);
  *devnum = st.st_rdev;
  return TRUE;
}

Member *
md_member_new (const char *path, const char *uuid, const char *node, gboolean meta, GError **error)
{
  Member *m = g_new0 (Member, 1);

  m->fd = -1;
  m->path = g_strdup (path);
  m->uuid = g_strdup (uuid);
  m->node = g_strdup (node);
  if (!node_identity (node, &m->kname, &m->devnum, error))
    {
      md_member_free (m);
      return NULL;
    }
  /* superblocks go through the node md uses, so that they and md's
   * writes share one path to the file */
  if (meta && (m->fd = open (node, O_RDWR | O_DIRECT | O_CLOEXEC)) < 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("component '%s' (%s): %s"), path, node,
                   g_strerror (e));
      md_member_free (m);
      return NULL;
    }
  return m;
}

static void
array_free (MdArray *a)
{
  for (guint i = 0; i < a->n; i++)
    md_member_free (a->members[i]);
  g_free (a->members);
  g_ptr_array_unref (a->spare_paths);
  g_ptr_array_unref (a->spare_uuids);
  if (a->wake >= 0)
    close (a->wake);
  g_mutex_clear (&a->lock);
  for (guint i = 0; i < a->n; i++)
    g_free (a->status[i].errors);
  g_free (a->status);
  g_mutex_clear (&a->status_lock);
  g_free (a->md);
  g_free (a->block_device);
  g_free (a->sysdir);
  g_free (a->name);
  g_free (a->uuid);
  g_free (a->instance);
  g_free (a->driver);
  g_free (a->md_version);
  g_free (a->job_op);
  g_free (a->job_component);
  g_free (a);
}

void
md_array_unref (MdArray *a)
{
  if (a && g_atomic_int_dec_and_test (&a->refs))
    array_free (a);
}

MdArray *
md_array_new (const char *instance, const char *uuid, const char *name, const char *driver, guint n)
{
  MdArray *a = g_new0 (MdArray, 1);

  a->refs = 1;
  g_mutex_init (&a->lock);
  g_mutex_init (&a->status_lock);
  a->md = md_name (instance, uuid);
  a->block_device = g_strdup_printf ("/dev/%s", a->md);
  a->sysdir = g_strdup_printf ("/sys/block/%s/md", a->md);
  a->instance = g_strdup (instance);
  a->uuid = g_strdup (uuid);
  a->name = g_strdup (name);
  a->driver = g_strdup (driver);
  a->n = n;
  a->copies = 1;
  a->members = g_new0 (Member *, n);
  a->status = g_new0 (SlotStatus, n);
  a->spare_paths = g_ptr_array_new_with_free_func (g_free);
  a->spare_uuids = g_ptr_array_new_with_free_func (g_free);
  a->wake = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  a->job_slot = -1;
  return a;
}

void
md_wake (MdArray *a)
{
  guint64 one = 1;
  if (write (a->wake, &one, sizeof one) < 0)
    g_debug ("%s: waking the monitor: %s", a->md, g_strerror (errno));
}

/* The slots holding a copy of every chunk, as a set per chunk row: md's
 * near layout puts chunk c's copies in slots c*copies .. c*copies+copies-1
 * (mod n), so n rows cover every placement. TRUE when every chunk keeps a
 * healthy copy with slot @without (-1: none) failed too. */
gboolean
md_every_chunk_has_a_copy (MdArray *a, const gboolean *healthy, gint without)
{
  for (guint row = 0; row < a->n; row++)
    {
      gboolean copy = FALSE;
      for (guint k = 0; k < a->copies && !copy; k++)
        {
          guint slot = (row * a->copies + k) % a->n;
          copy = (gint) slot != without && healthy[slot];
        }
      if (!copy)
        return FALSE;
    }
  return TRUE;
}

gboolean
md_member_healthy (const Member *m)
{
  return m && !m->failed && !m->removed && !m->rebuilding;
}

/* The members' state, for the status calls. Called with a->lock held. */
void
md_publish_status_locked (MdArray *a)
{
  g_mutex_lock (&a->status_lock);
  for (guint i = 0; i < a->n; i++)
    {
      const Member *m = a->members[i];
      SlotStatus *st = &a->status[i];
      /* with vblk superblocks the table tells a failed slot (faulty)
       * from one whose disk went away (missing) */
      if (m == NULL)
        st->missing = !a->meta || a->sb.roles[i].state != VB_ROLE_FAULTY;
      else
        st->missing = m->removed && a->meta && a->sb.roles[i].state == VB_ROLE_MISSING;
      st->healthy = md_member_healthy (m);
      st->faulty = m && m->failed;
      st->rebuilding = m && m->rebuilding;
      g_free (st->errors);
      st->errors = m && !m->removed ? md_dev_attr (m, "errors") : NULL;
    }
  g_mutex_unlock (&a->status_lock);
}

/* The table takes a reference of its own. */
void
md_register_array (MdArray *a)
{
  g_mutex_lock (&arrays_lock);
  if (arrays == NULL)
    arrays = g_hash_table_new (g_str_hash, g_str_equal);
  g_atomic_int_inc (&a->refs);
  g_hash_table_insert (arrays, a->block_device, a);
  g_mutex_unlock (&arrays_lock);
}

void
md_unregister_array (MdArray *a)
{
  gboolean held;

  g_mutex_lock (&arrays_lock);
  held = arrays && g_hash_table_lookup (arrays, a->block_device) == a;
  if (held)
    g_hash_table_remove (arrays, a->block_device);
  g_mutex_unlock (&arrays_lock);
  if (held)
    md_array_unref (a);
}

/* A reference to the array of @block_device (md_array_unref), or NULL: a
 * stop on another thread may free it meanwhile otherwise. */
MdArray *
md_lookup_array (const char *block_device)
{
  MdArray *a;

  g_mutex_lock (&arrays_lock);
  a = arrays ? g_hash_table_lookup (arrays, block_device) : NULL;
  if (a)
    g_atomic_int_inc (&a->refs);
  g_mutex_unlock (&arrays_lock);
  return a;
}

/* array_state=clear, retried while something (udev's probe) holds the
 * node open: md stops the array and deletes it. */
int
md_clear_array (MdArray *a)
{
  int r = -EBUSY;

  for (guint i = 0; i < CLEAR_TRIES && (r = md_set (a, "array_state", "clear")) == -EBUSY; i++)
    g_usleep (100000);
  if (r < 0)
    vb_report (a->name, VB_REPORT_WARNING, "md array %s could not be stopped: %s", a->md,
               g_strerror (-r));
  return r;
}

/* Reads @attr and adds it to what the monitor waits on. */
char *
md_watch (MdArray *a, const char *attr, GArray *pfds)
{
  g_autofree char *path = g_build_filename (a->sysdir, attr, NULL);
  char buf[256];
  struct pollfd pfd = { .events = POLLPRI | POLLERR };
  ssize_t len;

  pfd.fd = open (path, O_RDONLY | O_CLOEXEC);
  if (pfd.fd < 0)
    return NULL;
  len = read (pfd.fd, buf, sizeof buf - 1);
  if (len < 0)
    {
      close (pfd.fd);
      return NULL;
    }
  buf[len] = 0;
  g_array_append_val (pfds, pfd);
  return g_strstrip (g_strdup (buf));
}

void
md_member_let_go_locked (MdArray *a, guint slot)
{
  Member *m = a->members[slot];
  g_autofree char *tag = vb_kernel_loop_tag (a->instance, a->uuid);
  g_autofree char *name = vb_loop_get_name (m->node);

  m->removed = TRUE;
  if (m->fd >= 0)
    {
      close (m->fd);
      m->fd = -1;
    }
  if (g_strcmp0 (name, tag) == 0)
    {
      g_autoptr (GError) local = NULL;
      if (!bd_loop_teardown (m->node, &local))
        vb_report (a->name, VB_REPORT_WARNING, "detaching %s: %s", m->node, local->message);
    }
}
