/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* On-component metadata of an engine device (metadata=vblk): the
 * superblock writes on every change of membership or state, the spares'
 * superblocks, the bitmap's blocks, and the failure rule of DESIGN.md's
 * data flow 4 — a component that fails is marked faulty in every
 * survivor's superblock (events + 1, written and flushed) before the I/O
 * that found the failure completes, and before any write that skips it is
 * acknowledged. Assembly from the superblocks at start is
 * engine-assemble.c.
 *
 * Before the bitmap clears bits (the sweeper, a job, a clean stop) the
 * superblocks record events_cleared: a copy of a component older than that
 * is rebuilt in full, never resynced from bits that no longer record what
 * it missed. */
#include "config.h"

#include "engine-meta.h"
#include "engine-meta-state.h"

#include "engine-component.h"
#include "assembly.h"
#include "metadata.h"
#include "vb-error.h"
#include "vb-open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const VbMetadataHandler *
engine_meta_handler (VbEngine *e)
{
  return e->meta->handler;
}

const char *
engine_meta_device_uuid (VbEngine *e)
{
  return e->meta->sb.device_uuid;
}

gboolean
engine_meta_active (VbEngine *e)
{
  return e->meta != NULL;
}

VbBitmap *
engine_meta_bitmap (VbEngine *e)
{
  return e->meta ? e->meta->bitmap : NULL;
}

void
engine_meta_set_speeds (VbEngine *e, guint64 min, guint64 max)
{
  __atomic_store_n (&e->speed_min, min, __ATOMIC_RELAXED);
  __atomic_store_n (&e->speed_max, max, __ATOMIC_RELAXED);
}

guint64
engine_meta_sync_speed (VbEngine *e, gboolean max)
{
  return __atomic_load_n (max ? &e->speed_max : &e->speed_min, __ATOMIC_RELAXED);
}

/* Writes @sb as component @i's superblock (its own UUID and role filled in). */
static int
write_one (VbEngine *e, guint i, VbSuperblock *sb)
{
  VbEngineMeta *m = e->meta;
  Component *c = &e->components[i];
  int r;

  g_strlcpy (sb->component_uuid, c->uuid, sizeof sb->component_uuid);
  sb->role = i;
  m->handler->encode (sb, m->io);
  r = engine_component_pwrite (c, m->io, m->handler->block_size, m->handler->block_offset);
  if (r == 0)
    r = engine_component_flush (c);
  if (r < 0)
    engine_report (e, VB_REPORT_WARNING, "writing the superblock of component %u (%s): %s", i,
                   c->path, g_strerror (-r));
  return r;
}

/* Writes the current superblock to every healthy slot; a component the
 * write fails on turns faulty in the table, and the round is repeated so
 * that the others say so too. Called with m->lock held. */
void
engine_meta_write_all_locked (VbEngine *e)
{
  VbEngineMeta *m = e->meta;
  gboolean again = TRUE;

  while (again)
    {
      again = FALSE;
      m->sb.events++;
      m->sb.utime = g_get_real_time ();
      for (guint i = 0; i < e->n; i++)
        {
          Component *c = &e->components[i];
          if (engine_is_faulty (c))
            continue;
          if (write_one (e, i, &m->sb) < 0)
            {
              g_atomic_int_set (&c->faulty, 1);
              __atomic_add_fetch (&c->errors, 1, __ATOMIC_RELAXED);
              m->sb.roles[i].state = VB_ROLE_FAULTY;
              g_atomic_int_set (&c->recorded, 1);
              again = TRUE;
            }
        }
    }
}

void
engine_meta_sync_incomplete (VbEngine *e, gboolean incomplete)
{
  e->meta->sync_incomplete = incomplete;
}

void
engine_meta_set_attributes (VbEngine *e, GHashTable *attributes)
{
  VbEngineMeta *m = e->meta;

  if (e->read_only)
    return;
  g_mutex_lock (&m->lock);
  vb_superblock_set_attributes (&m->sb, attributes);
  engine_meta_write_all_locked (e);
  g_mutex_unlock (&m->lock);
}

void
engine_meta_update (VbEngine *e)
{
  g_mutex_lock (&e->meta->lock);
  engine_meta_write_all_locked (e);
  g_mutex_unlock (&e->meta->lock);
}

void
engine_meta_record_failure (VbEngine *e, guint i)
{
  VbEngineMeta *m = e->meta;

  g_mutex_lock (&m->lock);
  if (!g_atomic_int_get (&e->components[i].recorded))
    {
      m->sb.roles[i].state = VB_ROLE_FAULTY;
      engine_meta_write_all_locked (e);
      g_atomic_int_set (&e->components[i].recorded, 1);
      g_cond_broadcast (&m->recorded);
      engine_report (e, VB_REPORT_INFO,
                     "component %u (%s) failed; recorded at events %" G_GUINT64_FORMAT, i,
                     e->components[i].path, m->sb.events);
    }
  g_mutex_unlock (&m->lock);
}

void
engine_meta_record_gone (VbEngine *e, guint i, const char *uuid)
{
  VbEngineMeta *m = e->meta;

  engine_meta_wait_recorded (e, i);
  g_mutex_lock (&m->lock);
  /* (only the component that went: a spare or a re-add may have put
   * another in the slot since, which may have failed in turn, present) */
  if (m->sb.roles[i].state == VB_ROLE_FAULTY && g_strcmp0 (m->sb.roles[i].uuid, uuid) == 0
      && !e->read_only)
    {
      m->sb.roles[i].state = VB_ROLE_MISSING;
      engine_meta_write_all_locked (e);
      engine_report (
          e, VB_REPORT_INFO,
          "component %u (%s) went away; recorded as missing at events %" G_GUINT64_FORMAT, i,
          e->components[i].path, m->sb.events);
    }
  g_mutex_unlock (&m->lock);
}

VbRoleState
engine_meta_role_state (VbEngine *e, guint i)
{
  VbEngineMeta *m = e->meta;
  VbRoleState state;

  g_mutex_lock (&m->lock);
  state = m->sb.roles[i].state;
  g_mutex_unlock (&m->lock);
  return state;
}

void
engine_meta_wait_recorded (VbEngine *e, guint i)
{
  VbEngineMeta *m = e->meta;

  Component *c = &e->components[i];

  /* (or until another component is in the slot: a spare or a re-add put
   * there after the failure was recorded, whose own failure, if any, is
   * not the one waited for — waiting on would be for ever) */
  if (g_atomic_int_get (&c->recorded) || !engine_is_faulty (c))
    return;
  g_mutex_lock (&m->lock);
  while (!g_atomic_int_get (&c->recorded) && engine_is_faulty (c))
    g_cond_wait (&m->recorded, &m->lock);
  g_mutex_unlock (&m->lock);
}

void
engine_meta_slot_refilled (VbEngine *e)
{
  VbEngineMeta *m = e->meta;

  if (m == NULL)
    return;
  g_mutex_lock (&m->lock);
  g_cond_broadcast (&m->recorded);
  g_mutex_unlock (&m->lock);
}

void
engine_meta_rebuild_progress (VbEngine *e, guint64 offset)
{
  VbEngineMeta *m = e->meta;

  /* only where a device offset is a component offset (raid1) */
  if (m == NULL || e->layout.size > m->sb.data_size || offset > m->sb.data_size)
    return;
  g_mutex_lock (&m->lock);
  if (m->sb.rebuild_offset != offset)
    {
      m->sb.rebuild_offset = offset;
      engine_meta_write_all_locked (e);
    }
  g_mutex_unlock (&m->lock);
}

void
engine_meta_role_in_sync (VbEngine *e, guint i)
{
  VbEngineMeta *m = e->meta;

  if (m == NULL)
    {
      /* metadata=none: the daemon records it (the desired state) */
      if (!engine_is_faulty (&e->components[i]))
        g_atomic_int_set (&e->components[i].rebuilding, 0);
      return;
    }
  g_mutex_lock (&m->lock);
  if (!engine_is_faulty (&e->components[i]))
    {
      m->sb.roles[i].state = VB_ROLE_IN_SYNC;
      g_atomic_int_set (&e->components[i].rebuilding, 0);
      e->components[i].rebuild_from = 0;
      m->sb.rebuild_offset = 0;
      engine_meta_write_all_locked (e);
    }
  g_mutex_unlock (&m->lock);
}

/* Every spare carries the device's superblock with role spare, so that it
 * is found with its device (scan) and never taken by another one. Called
 * with m->lock held; a spare that cannot be written is only logged (it
 * fails for real when it is taken). */
void
engine_meta_write_spares_locked (VbEngine *e)
{
  VbEngineMeta *m = e->meta;
  VbSuperblock sb = m->sb;

  if (e->read_only)
    return;
  for (guint i = 0; i < m->spare_paths->len; i++)
    {
      const char *path = m->spare_paths->pdata[i];
      int fd = vb_open_component (path, VB_OPEN_WRITE | VB_OPEN_DIRECT, NULL);
      g_strlcpy (sb.component_uuid, m->spare_uuids->pdata[i], sizeof sb.component_uuid);
      sb.role = VB_SB_ROLE_SPARE;
      m->handler->encode (&sb, m->io);
      if (fd < 0
          || pwrite (fd, m->io, m->handler->block_size, m->handler->block_offset)
                 != (gssize) m->handler->block_size
          || fdatasync (fd) < 0)
        engine_report (e, VB_REPORT_WARNING, "writing the superblock of spare %s: %s", path,
                       g_strerror (errno));
      if (fd >= 0)
        close (fd);
    }
}

void
engine_meta_set_spares (VbEngine *e, guint n, const char *const *paths, const char *const *uuids)
{
  VbEngineMeta *m = e->meta;

  g_mutex_lock (&m->lock);
  g_ptr_array_set_size (m->spare_paths, 0);
  g_ptr_array_set_size (m->spare_uuids, 0);
  for (guint i = 0; i < n; i++)
    {
      g_ptr_array_add (m->spare_paths, g_strdup (paths[i]));
      g_ptr_array_add (m->spare_uuids, g_strdup (uuids[i]));
    }
  engine_meta_write_spares_locked (e);
  g_mutex_unlock (&m->lock);
}

gboolean
engine_meta_has_spare (VbEngine *e)
{
  gboolean any;

  g_mutex_lock (&e->meta->lock);
  any = e->meta->spare_paths->len > 0;
  g_mutex_unlock (&e->meta->lock);
  return any;
}

gboolean
engine_meta_pop_spare (VbEngine *e, char **path, char **uuid)
{
  VbEngineMeta *m = e->meta;
  gboolean ok = FALSE;

  g_mutex_lock (&m->lock);
  if (m->spare_paths->len > 0)
    {
      *path = g_ptr_array_steal_index (m->spare_paths, 0);
      *uuid = g_ptr_array_steal_index (m->spare_uuids, 0);
      ok = TRUE;
    }
  g_mutex_unlock (&m->lock);
  return ok;
}

void
engine_meta_keep_fd (VbEngine *e, int fd)
{
  if (e->meta == NULL)
    {
      /* metadata=none: a lock of its own, taken under the barrier */
      static GMutex kept_lock;
      g_mutex_lock (&kept_lock);
      if (e->kept_fds == NULL)
        e->kept_fds = g_array_new (FALSE, FALSE, sizeof (int));
      g_array_append_val (e->kept_fds, fd);
      g_mutex_unlock (&kept_lock);
      return;
    }
  g_mutex_lock (&e->meta->lock);
  g_array_append_val (e->meta->old_fds, fd);
  g_mutex_unlock (&e->meta->lock);
}

/* Slot @i holds component @uuid in @state now; written to every healthy slot. */
void
engine_meta_set_role (VbEngine *e, guint i, const char *uuid, VbRoleState state)
{
  VbEngineMeta *m = e->meta;

  g_mutex_lock (&m->lock);
  g_strlcpy (m->sb.roles[i].uuid, uuid, sizeof m->sb.roles[i].uuid);
  m->sb.roles[i].state = state;
  /* a slot rebuilt from nothing: no earlier rebuild's point holds for it */
  if (state == VB_ROLE_REBUILDING)
    m->sb.rebuild_offset = 0;
  engine_meta_write_all_locked (e);
  g_mutex_unlock (&m->lock);
}
/* the bitmap */

int
engine_meta_persist_bitmap_block (guint block, const guint8 *data, gpointer user_data)
{
  VbEngine *e = user_data;
  VbEngineMeta *m = e->meta;
  int results[VB_MAX_COMPONENTS] = { 0 };
  guint landed = 0;
  int err = 0;

  g_mutex_lock (&m->bitmap_io_lock);
  memcpy (m->bitmap_io, data, 4096);
  for (guint i = 0; i < e->n; i++)
    {
      Component *c = &e->components[i];
      if (engine_is_faulty (c))
        continue;
      results[i] = engine_component_pwrite (c, m->bitmap_io, 4096,
                                            VB_BITMAP_OFFSET + (guint64) block * 4096);
      if (results[i] == 0)
        results[i] = engine_component_flush (c);
      if (results[i] == 0)
        landed++;
      else
        err = results[i];
    }
  g_mutex_unlock (&m->bitmap_io_lock);
  /* a component that cannot keep its bitmap fails (outside the lock: the
   * failure writes superblocks) */
  for (guint i = 0; i < e->n; i++)
    if (results[i] < 0)
      engine_component_failed (e, i, results[i]);
  return landed > 0 ? 0 : (err < 0 ? err : -EIO);
}

int
engine_meta_write_begin (VbEngine *e, guint64 offset, guint64 length)
{
  VbEngineMeta *m = e->meta;

  if (length == 0)
    return 0;
  if (m->bitmap)
    return vb_bitmap_start_write (m->bitmap, offset, length);
  if (g_atomic_int_get (&m->settled))
    {
      /* settled: "not clean" is durable on every leg before the write */
      g_mutex_lock (&m->lock);
      if (g_atomic_int_get (&m->settled))
        {
          m->sb.clean = FALSE;
          engine_meta_write_all_locked (e);
          g_atomic_int_set (&m->settled, 0);
        }
      g_mutex_unlock (&m->lock);
    }
  return 0;
}

int
engine_meta_try_write_begin (VbEngine *e, guint64 offset, guint64 length)
{
  VbEngineMeta *m = e->meta;

  if (length == 0)
    return 0;
  if (m->bitmap)
    return vb_bitmap_try_start_write (m->bitmap, offset, length);
  return g_atomic_int_get (&m->settled) ? -EAGAIN : 0;
}

void
engine_meta_mark_clean (VbEngine *e)
{
  VbEngineMeta *m = e->meta;

  g_mutex_lock (&m->lock);
  m->sb.clean = TRUE;
  engine_meta_write_all_locked (e);
  g_atomic_int_set (&m->settled, 1);
  g_mutex_unlock (&m->lock);
}

void
engine_meta_write_end (VbEngine *e, guint64 offset, guint64 length)
{
  if (e->meta->bitmap && length > 0)
    vb_bitmap_end_write (e->meta->bitmap, offset, length);
}
/* The bitmap is about to clear bits: every superblock says so first
 * (events_cleared), so that a copy of a component taken before this write
 * has fewer events and is rebuilt in full, never resynced from bits that no
 * longer record what it missed. A component that does not take the write
 * turns faulty, and then nothing is cleared. */
int
engine_meta_record_clear (gpointer data)
{
  VbEngine *e = data;
  VbEngineMeta *m = e->meta;
  guint64 healthy = 0;
  int r = 0;

  if (e->read_only)
    return -EROFS;
  g_mutex_lock (&m->lock);
  for (guint i = 0; i < e->n; i++)
    if (!engine_is_faulty (&e->components[i]))
      healthy |= G_GUINT64_CONSTANT (1) << i;
  vb_assembly_record_clear (&m->sb);
  engine_meta_write_all_locked (e);
  for (guint i = 0; i < e->n; i++)
    if ((healthy & (G_GUINT64_CONSTANT (1) << i)) && engine_is_faulty (&e->components[i]))
      r = -EIO;
  g_mutex_unlock (&m->lock);
  return r;
}

gboolean
engine_meta_needs_sync (VbEngine *e)
{
  VbEngineMeta *m = e->meta;

  for (guint i = 0; i < e->n; i++)
    if (g_atomic_int_get (&e->components[i].rebuilding) && !engine_is_faulty (&e->components[i]))
      return TRUE;
  if (m == NULL)
    return FALSE;
  return m->sync_incomplete || (m->bitmap && vb_bitmap_count_dirty (m->bitmap) > 0);
}

void
engine_meta_close (VbEngine *e)
{
  VbEngineMeta *m = e->meta;

  if (e->read_only || m->closed)
    return;
  m->closed = TRUE;
  /* every write has landed (the node is gone): with every slot in sync,
   * no chunk is dirty any more */
  for (guint i = 0; i < e->n; i++)
    if (!engine_is_faulty (&e->components[i]))
      engine_component_flush (&e->components[i]);
  /* no job runs and the sweeper has stopped (the caller saw to both) */
  if (m->bitmap && engine_every_leg_readable (e))
    {
      /* the first ages the bits of the last writes, the second clears
       * them all (one events_cleared record) */
      vb_bitmap_sweep (m->bitmap, FALSE);
      vb_bitmap_sweep (m->bitmap, TRUE);
    }
  g_mutex_lock (&m->lock);
  /* without a bitmap, a resync cut short must run again in full */
  m->sb.clean = m->bitmap != NULL || !m->sync_incomplete;
  engine_meta_write_all_locked (e);
  g_mutex_unlock (&m->lock);
}

VbEngineMeta *
engine_meta_new (VbEngine *e, const VbEngineIdentity *id, const VbMetadataHandler *handler)
{
  VbEngineMeta *m = g_new0 (VbEngineMeta, 1);

  e->meta = m;
  m->closed = TRUE; /* nothing is written unless assembly succeeds */
  g_mutex_init (&m->lock);
  g_cond_init (&m->recorded);
  g_mutex_init (&m->bitmap_io_lock);
  m->old_fds = g_array_new (FALSE, FALSE, sizeof (int));
  m->spare_paths = g_ptr_array_new_with_free_func (g_free);
  m->spare_uuids = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < id->n_spares; i++)
    {
      g_ptr_array_add (m->spare_paths, g_strdup (id->spare_paths[i]));
      g_ptr_array_add (m->spare_uuids, g_strdup (id->spare_uuids[i]));
    }
  m->handler = handler;
  if (posix_memalign ((void **) &m->io, 4096, m->handler->block_size) != 0
      || posix_memalign ((void **) &m->bitmap_io, 4096, 4096) != 0)
    g_error ("out of memory");
  return m;
}

gboolean
engine_meta_need_sync_at_start (VbEngine *e)
{
  return e->meta->need_sync;
}

void
engine_meta_forget (VbEngine *e)
{
  e->meta->closed = TRUE;
}

void
engine_meta_free (VbEngine *e)
{
  VbEngineMeta *m = e->meta;

  if (m == NULL)
    return;
  vb_bitmap_free (m->bitmap);
  for (guint i = 0; i < m->old_fds->len; i++)
    close (g_array_index (m->old_fds, int, i));
  g_array_unref (m->old_fds);
  g_ptr_array_unref (m->spare_paths);
  g_ptr_array_unref (m->spare_uuids);
  free (m->io);
  free (m->bitmap_io);
  g_mutex_clear (&m->lock);
  g_cond_clear (&m->recorded);
  g_mutex_clear (&m->bitmap_io_lock);
  g_free (m);
  e->meta = NULL;
}
