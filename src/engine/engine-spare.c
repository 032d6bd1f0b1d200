/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Spares and re-adds: a component put into a faulty slot — a spare taking
 * it on its own thread when a component fails, or the slot's own component
 * (or a blank replacement) re-added on request — is installed behind, and
 * a rebuild job fills it. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "engine-spare.h"

#include "vb-error.h"
#include "vb-open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Puts a component into slot @slot (faulty until now) and marks it behind:
 * @full, every byte is copied to it; else only the bitmap's dirty chunks.
 * The caller starts the rebuild. */
static void
install (VbEngine *e, guint slot, int fd, const VbBlockOps *ops, void *handle, const char *path,
         const char *uuid, gboolean full)
{
  Component *c = &e->components[slot];

  /* the job that runs (a resync, say) ends first; the rebuild started
   * after this covers what it had left */
  engine_sync_stop (e);
  engine_barrier_close (&e->barrier);
  /* the failure of what held the slot is in the superblocks before another
   * component takes its place: a request that saw it fail waits for that,
   * and a recording still under way must not land on the newcomer */
  if (e->meta && engine_is_faulty (c))
    engine_meta_wait_recorded (e, slot);
  /* readers skip the slot (faulty, then rebuilding); the old fd stays open
   * until the engine ends, so a request still holding it never reaches
   * another file */
  g_atomic_int_set (&c->rebuilding, 1);
  c->full_rebuild = full;
  c->rebuild_from = 0;
  if (c->fd >= 0 && c->fd != fd)
    {
      /* the number stays taken until the engine ends (a request that read
       * it before the swap never reaches another file), but no longer
       * holds the old file: a disk being removed can go */
      engine_component_let_go (c);
      engine_meta_keep_fd (e, c->fd);
    }
  c->fd = fd;
  c->ops = ops;
  c->handle = handle;
  c->missing = FALSE;
  c->released = FALSE;
  c->direct = fd >= 0 && (fcntl (fd, F_GETFL) & O_DIRECT) != 0;
  if (c->path != path)
    {
      g_free (c->path);
      c->path = g_strdup (path);
    }
  if (c->uuid != uuid)
    {
      g_free (c->uuid);
      c->uuid = g_strdup (uuid);
    }
  __atomic_store_n (&c->errors, 0, __ATOMIC_RELAXED);
  g_atomic_int_set (&c->recorded, 0);
  g_atomic_int_set (&c->faulty, 0);
  engine_meta_slot_refilled (e);
  engine_barrier_open (&e->barrier);
  if (!engine_meta_active (e))
    return; /* metadata=none: the desired state records the slot behind */
  engine_meta_set_role (e, slot, uuid, VB_ROLE_REBUILDING);
  /* its bitmap area must match the others' before it counts */
  if (engine_meta_bitmap (e))
    {
      VbBitmap *bm = engine_meta_bitmap (e);
      gsize len = vb_bitmap_bytes_for (e->layout.size, vb_bitmap_chunk_size (bm));
      void *snap = NULL;
      if (posix_memalign (&snap, 4096, len) == 0)
        {
          vb_bitmap_snapshot (bm, snap, len);
          engine_component_pwrite (c, snap, len, VB_BITMAP_OFFSET);
          free (snap);
        }
    }
}

/* The component re-added from @source, opened (*@fd: -1 for one in this
 * process). The faulty slot's own disk coming back is still claimed by
 * its old fd: that one goes first (the slot stays faulty if this fails). */
static int
open_readd_source (VbEngine *e, guint slot, const VbEngineSource *source, int *fd, GError **error)
{
  *fd = -1;
  if (source->ops)
    return 0;
  vb_engine_release_component (e, slot);
  *fd = vb_open_component (source->path, VB_OPEN_WRITE | VB_OPEN_DIRECT | VB_OPEN_EXCLUSIVE, NULL);
  if (*fd < 0)
    {
      int err = errno;
      vb_component_open_error (error, source->path, err);
      return -err;
    }
  return 0;
}

/* metadata=none: nothing on the component says what it missed, so it
 * gets every byte again (the desired state records it behind meanwhile). */
static int
readd_without_metadata (VbEngine *e, guint slot, const VbEngineSource *source, GError **error)
{
  int fd, r;

  if ((r = open_readd_source (e, slot, source, &fd, error)) < 0)
    return r;
  engine_report (e, VB_REPORT_INFO,
                 "re-adding %s to slot %u (every byte: no metadata says what it missed)",
                 source->path, slot);
  install (e, slot, fd, source->ops, source->handle, source->path, e->components[slot].uuid, TRUE);
  engine_sync_start (e, "rebuild", FALSE);
  return 0;
}

/* What the component says of itself decides: the device's own, same slot
 * member -> only what it missed; blank (*@blank) -> everything; anything
 * else (unreadable, another device's) is refused. */
static int
read_own_superblock (VbEngine *e, const VbEngineSource *source, int fd, VbSuperblock *sb,
                     gboolean *blank, GError **error)
{
  const VbMetadataHandler *handler = engine_meta_handler (e);
  g_autoptr (GError) local = NULL;
  void *buf = NULL;
  int r;

  if (posix_memalign (&buf, 4096, handler->block_size) != 0)
    g_error ("out of memory");
  r = source->ops
          ? source->ops->pread (source->handle, buf, handler->block_size, handler->block_offset)
          : (pread (fd, buf, handler->block_size, handler->block_offset)
                     == (gssize) handler->block_size
                 ? 0
                 : -EIO);
  if (r < 0
      || (!handler->decode (buf, handler->block_size, sb, &local)
          && !g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND)))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("component '%s': %s; not re-added"),
                   source->path, local ? local->message : g_strerror (-r));
      free (buf);
      return -EINVAL;
    }
  free (buf);
  *blank = local != NULL;
  if (!*blank && strcmp (sb->device_uuid, engine_meta_device_uuid (e)) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("component '%s' belongs to device '%s' (%s); not re-added"), source->path,
                   sb->device_name, sb->device_uuid);
      return -EINVAL;
    }
  return 0;
}

/* A re-add needs redundancy, and a faulty slot. */
static int
refuse_readd (VbEngine *e, guint slot, GError **error)
{
  Component *c = &e->components[slot];

  if (!e->redundant)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("device '%s' has %s: a component cannot be re-added"), e->name,
                   e->driver->redundant ? "no redundancy" : "one copy of its data");
      return -ENOTSUP;
    }
  if (!engine_is_faulty (c))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   _ ("component %u (%s) of '%s' is not faulty: nothing to re-add"), slot, c->path,
                   e->name);
      return -EBUSY;
    }
  return 0;
}

int
vb_engine_readd (VbEngine *e, guint slot, const VbEngineSource *source, const char *uuid,
                 GError **error)
{
  g_autofree char *why = NULL;
  VbSuperblock sb;
  gboolean blank = FALSE, full;
  int fd, r;

  g_return_val_if_fail (slot < e->n, -EINVAL);
  /* checked and installed under the slot lock: a spare taking this slot
   * at the same time leaves it to one of them */
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&e->slot_lock);
  if ((r = refuse_readd (e, slot, error)) < 0)
    return r;
  if (e->meta == NULL)
    return readd_without_metadata (e, slot, source, error);
  if ((r = open_readd_source (e, slot, source, &fd, error)) < 0)
    return r;
  if ((r = read_own_superblock (e, source, fd, &sb, &blank, error)) < 0)
    {
      if (fd >= 0)
        close (fd);
      return r;
    }
  /* the assembly rule decides, as at start: only a component whose events
   * are at or above the bitmap's events_cleared gets just the dirty chunks */
  full = engine_meta_bitmap (e) == NULL
         || engine_meta_decide_readd (e, slot, blank ? NULL : &sb, &why) != VB_SLOT_RESYNC;
  engine_report (e, VB_REPORT_INFO, "re-adding %s to slot %u (%s): %s", source->path, slot,
                 full ? "every byte" : "the bitmap's dirty chunks", why ? why : "no bitmap");
  /* a replacement (a blank one, given its own UUID) is a new member */
  install (e, slot, fd, source->ops, source->handle, source->path,
           full && uuid ? uuid : e->components[slot].uuid, full);
  engine_sync_start (e, "rebuild", FALSE);
  return 0;
}

/* A spare (if one is left) takes slot @slot, if it is still faulty. */
static void
take_spare (VbEngine *e, guint slot)
{
  g_autofree char *path = NULL;
  g_autofree char *uuid = NULL;
  int fd;

  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&e->slot_lock);
  /* a re-add may have put the slot's own component back meanwhile */
  if (!engine_is_faulty (&e->components[slot]))
    return;
  if (!engine_meta_pop_spare (e, &path, &uuid))
    return;
  fd = vb_open_component (path, VB_OPEN_WRITE | VB_OPEN_DIRECT | VB_OPEN_EXCLUSIVE, NULL);
  if (fd < 0)
    {
      engine_report (e, VB_REPORT_WARNING, "spare %s: %s", path, g_strerror (errno));
      return;
    }
  engine_report (e, VB_REPORT_INFO, "spare %s takes slot %u; rebuilding onto it", path, slot);
  install (e, slot, fd, NULL, NULL, path, uuid, TRUE);
  engine_sync_start (e, "rebuild", FALSE);
}

/* The takeovers run on one thread at a time (e->spare_thread), which takes
 * every slot asked for (a bit each in e->spare_wanted) until none is left:
 * a slot that fails while it works — the spare it just put in, whose
 * rebuild would otherwise go on to its end for nothing — is taken by it
 * too, never left behind an earlier takeover. */
static GMutex spare_lock;

static gpointer
take_spare_thread (gpointer data)
{
  VbEngine *e = data;

  for (;;)
    {
      guint64 wanted;

      g_mutex_lock (&spare_lock);
      wanted = e->spare_wanted;
      e->spare_wanted = 0;
      if (wanted == 0)
        e->spare_running = FALSE;
      g_mutex_unlock (&spare_lock);
      if (wanted == 0)
        return NULL;
      for (guint i = 0; i < e->n; i++)
        if (wanted & (G_GUINT64_CONSTANT (1) << i))
          take_spare (e, i);
    }
}

void
engine_spare_take (VbEngine *e, guint i)
{
  GThread *ended = NULL;

  g_return_if_fail (i < e->n && i < 64);
  g_mutex_lock (&spare_lock);
  if (!g_atomic_int_get (&e->quiesced))
    {
      e->spare_wanted |= G_GUINT64_CONSTANT (1) << i;
      if (!e->spare_running)
        {
          /* a thread that left its loop is joined below */
          ended = e->spare_thread;
          e->spare_running = TRUE;
          e->spare_thread = g_thread_new ("vblk-spare", take_spare_thread, e);
        }
    }
  g_mutex_unlock (&spare_lock);
  if (ended)
    g_thread_join (ended);
}

void
engine_spare_join (VbEngine *e)
{
  GThread *t;

  g_mutex_lock (&spare_lock);
  t = e->spare_thread;
  e->spare_thread = NULL;
  g_mutex_unlock (&spare_lock);
  if (t)
    g_thread_join (t);
}

void
vb_engine_set_spares (VbEngine *e, guint n, const char *const *paths, const char *const *uuids)
{
  if (e->meta == NULL)
    return;
  engine_meta_set_spares (e, n, paths, uuids);
  /* a slot that failed while no spare was there takes one now, before
   * this returns: the caller records where the spare went */
  for (guint i = 0; i < e->n && n > 0; i++)
    if (engine_is_faulty (&e->components[i]) && !g_atomic_int_get (&e->lost))
      {
        engine_spare_take (e, i);
        engine_spare_join (e);
        break;
      }
}
