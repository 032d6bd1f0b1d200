/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See vb-wipe.h. Like mdadm --zero-superblock: the device in use is
 * refused, what is wiped is named, a disk with nothing to wipe is an error. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "vb-wipe.h"

#include "metadata.h"
#include "vb-error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static gboolean
same_file (const struct stat *a, const struct stat *b)
{
  if (S_ISBLK (a->st_mode) || S_ISBLK (b->st_mode))
    return S_ISBLK (a->st_mode) && S_ISBLK (b->st_mode) && a->st_rdev == b->st_rdev;
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The device of @state that @st is a component of, or whose UUID the
 * superblock @sb names. */
static const VbDeviceConfig *
device_of (const VbState *state, const struct stat *st, const VbSuperblock *sb)
{
  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      if (sb && strcmp (d->uuid, sb->device_uuid) == 0)
        return d;
      for (guint j = 0; j < d->components->len; j++)
        {
          const VbComponentConfig *c = d->components->pdata[j];
          struct stat cst;
          if (!g_str_has_prefix (c->source, "vblk:") && stat (c->source, &cst) == 0
              && same_file (st, &cst))
            return d;
        }
    }
  return NULL;
}

static gboolean
check_not_in_use (const char *path, const struct stat *st, const VbState *state,
                  GHashTable *started, gboolean force, const VbSuperblock *sb, GError **error)
{
  const VbDeviceConfig *d = device_of (state, st, sb);

  if (d && g_hash_table_contains (started, d->uuid))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   _ ("'%s' is a component of device '%s', which is started; nothing was wiped"),
                   path, d->name);
      return FALSE;
    }
  if (d && !force)
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_BUSY,
          _ ("'%s' is a component of device '%s' (remove it from the device first, or force); "
             "nothing was wiped"),
          path, d->name);
      return FALSE;
    }
  return TRUE;
}

static gboolean
zero (int fd, const char *path, guint64 offset, gsize length, GError **error)
{
  void *buf = NULL;
  gboolean ok;

  if (posix_memalign (&buf, 4096, length) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("'%s': out of memory"), path);
      return FALSE;
    }
  memset (buf, 0, length);
  ok = pwrite (fd, buf, length, (off_t) offset) == (ssize_t) length;
  if (!ok)
    g_set_error (
        error, VB_ERROR, VB_ERROR_FAILED,
        _ ("'%s': writing zeros at byte %" PRIu64 ": %s; the metadata may be partly wiped"), path,
        offset, g_strerror (errno));
  free (buf);
  return ok;
}

static int
open_exclusive (const char *path, struct stat *st, GError **error)
{
  int fd;

  if (stat (path, st) < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, "'%s': %s", path, g_strerror (errno));
      return -1;
    }
  if (!S_ISBLK (st->st_mode) && !S_ISREG (st->st_mode))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("'%s' is neither a block device nor a regular file"), path);
      return -1;
    }
  /* O_EXCL on a block device: refused while mounted, or held by md, dm or
   * a vblk device */
  fd = open (path, O_RDWR | O_CLOEXEC | (S_ISBLK (st->st_mode) ? O_EXCL : 0));
  if (fd < 0)
    g_set_error (error, VB_ERROR, errno == EBUSY ? VB_ERROR_BUSY : VB_ERROR_FAILED,
                 _ ("'%s': %s%s; nothing was wiped"), path, g_strerror (errno),
                 errno == EBUSY ? " (mounted, or held by a device)" : "");
  return fd;
}

gboolean
vb_wipe (const char *path, const VbState *state, GHashTable *started, gboolean force, gboolean md,
         char ***erased, GError **error)
{
  g_autoptr (GPtrArray) what = g_ptr_array_new_with_free_func (g_free);
  gboolean has_vblk, has_md;
  VbSuperblock sb;
  struct stat st;
  guint64 bitmap = 0;
  gboolean ok = TRUE;
  int fd = open_exclusive (path, &st, error);

  if (fd < 0)
    return FALSE;
  has_vblk = vb_metadata_vblk.probe (fd, path);
  has_md = md && vb_metadata_md1.probe (fd, path);
  /* a damaged superblock is wiped too: then its bitmap's size is unknown */
  gboolean readable = has_vblk && vb_superblock_read (fd, path, &sb, NULL);
  if (readable)
    bitmap = sb.bitmap_bytes;
  if (!has_vblk && !has_md)
    g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND,
                 _ ("'%s': no vblk superblock%s; nothing was wiped"), path,
                 md ? " and no md superblock" : "");
  ok = (has_vblk || has_md)
       && check_not_in_use (path, &st, state, started, force, readable ? &sb : NULL, error);
  if (ok && has_vblk)
    {
      ok = zero (fd, path, VB_SB_OFFSET, VB_SB_SIZE, error)
           && (bitmap == 0 || zero (fd, path, VB_BITMAP_OFFSET, bitmap, error));
      g_ptr_array_add (what, g_strdup ("vblk superblock"));
      if (bitmap)
        g_ptr_array_add (what, g_strdup_printf ("bitmap (%" G_GUINT64_FORMAT " bytes)", bitmap));
    }
  if (ok && has_md)
    {
      ok = zero (fd, path, vb_metadata_md1.block_offset, vb_metadata_md1.block_size, error);
      g_ptr_array_add (what, g_strdup ("md superblock"));
    }
  if (ok && fdatasync (fd) < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "'%s': %s", path, g_strerror (errno));
      ok = FALSE;
    }
  close (fd);
  g_ptr_array_add (what, NULL);
  *erased = ok ? (char **) g_ptr_array_free (g_steal_pointer (&what), FALSE) : NULL;
  return ok;
}
