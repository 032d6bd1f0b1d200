/* On-component metadata of an engine device (metadata=vblk): assembly from
 * the superblocks at start, the superblock writes on every change of
 * membership or state, and the failure rule of DESIGN.md's data flow 4 —
 * a component that fails is marked faulty in every survivor's superblock
 * (events + 1, written and flushed) before the I/O that found the failure
 * completes, and before any write that skips it is acknowledged.
 *
 * Assembly: every slot's superblock is read. A checksum or format error,
 * another device's UUID, or two components claiming one role with equal
 * events refuse the start, and nothing is written. The highest event
 * counter wins; its role table and the assembly rule (assembly.h) say what
 * each component is: in sync, behind only by what the bitmap records
 * (resynced from it), rebuilt in full, or faulty — a failed component stays
 * faulty until an explicit re-add. A component that is not in sync is never
 * read.
 *
 * Before the bitmap clears bits (the sweeper, a job, a clean stop) the
 * superblocks record events_cleared: a copy of a component older than that
 * is rebuilt in full, never resynced from bits that no longer record what
 * it missed. */
#include "config.h"

#include "engine-private.h"

#include "assembly.h"
#include "metadata.h"
#include "vb-error.h"
#include "vb-open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SWEEP_INTERVAL_US (5 * G_USEC_PER_SEC)

struct _VbEngineMeta {
  GMutex lock; /* the superblock and the recording of failures */
  GCond recorded;
  VbSuperblock sb; /* the device's current superblock (role and component filled per write) */
  VbBitmap *bitmap;
  const VbMetadataHandler *handler; /* the metadata attribute's */
  guint8 *io;                       /* aligned block_size buffer, under @lock */
  GMutex bitmap_io_lock;
  guint8 *bitmap_io; /* aligned 4096 buffer, under @bitmap_io_lock */
  /* sync job wanted at activation */
  gboolean need_sync;
  /* sweeper */
  GThread *sweeper;
  GMutex sweep_lock;
  GCond sweep_cond;
  gboolean stopping;
  /* spares, by index; a spare that takes a slot leaves the list */
  GPtrArray *spare_paths;
  GPtrArray *spare_uuids;
  GArray *old_fds; /* fds of replaced components, closed at the end */
  gboolean closed;
  gboolean sync_incomplete; /* a job stopped before its end */
};

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
    g_warning ("%s: writing the superblock of component %u (%s): %s", e->name, i, c->path,
               g_strerror (-r));
  return r;
}

/* Writes the current superblock to every healthy slot; a component the
 * write fails on turns faulty in the table, and the round is repeated so
 * that the others say so too. Called with m->lock held. */
static void
write_all_locked (VbEngine *e)
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
  write_all_locked (e);
  g_mutex_unlock (&m->lock);
}

void
engine_meta_update (VbEngine *e)
{
  g_mutex_lock (&e->meta->lock);
  write_all_locked (e);
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
      write_all_locked (e);
      g_atomic_int_set (&e->components[i].recorded, 1);
      g_cond_broadcast (&m->recorded);
      g_message ("%s: component %u (%s) failed; recorded at events %" G_GUINT64_FORMAT, e->name, i,
                 e->components[i].path, m->sb.events);
    }
  g_mutex_unlock (&m->lock);
}

void
engine_meta_wait_recorded (VbEngine *e, guint i)
{
  VbEngineMeta *m = e->meta;

  if (g_atomic_int_get (&e->components[i].recorded))
    return;
  g_mutex_lock (&m->lock);
  while (!g_atomic_int_get (&e->components[i].recorded))
    g_cond_wait (&m->recorded, &m->lock);
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
      write_all_locked (e);
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
      write_all_locked (e);
    }
  g_mutex_unlock (&m->lock);
}

/* Every spare carries the device's superblock with role spare, so that it
 * is found with its device (scan) and never taken by another one. Called
 * with m->lock held; a spare that cannot be written is only logged (it
 * fails for real when it is taken). */
static void
write_spares_locked (VbEngine *e)
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
        g_warning ("%s: writing the superblock of spare %s: %s", e->name, path, g_strerror (errno));
      if (fd >= 0)
        close (fd);
    }
}

void
vb_engine_set_spares (VbEngine *e, guint n, const char *const *paths, const char *const *uuids)
{
  VbEngineMeta *m = e->meta;

  if (m == NULL)
    return;
  g_mutex_lock (&m->lock);
  g_ptr_array_set_size (m->spare_paths, 0);
  g_ptr_array_set_size (m->spare_uuids, 0);
  for (guint i = 0; i < n; i++)
    {
      g_ptr_array_add (m->spare_paths, g_strdup (paths[i]));
      g_ptr_array_add (m->spare_uuids, g_strdup (uuids[i]));
    }
  write_spares_locked (e);
  g_mutex_unlock (&m->lock);
  /* a slot that failed while no spare was there takes one now, before
   * this returns: the caller records where the spare went */
  for (guint i = 0; i < e->n && n > 0; i++)
    if (engine_is_faulty (&e->components[i]) && !g_atomic_int_get (&e->lost))
      {
        engine_sync_take_spare (e, i);
        engine_sync_join_spare (e);
        break;
      }
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
  write_all_locked (e);
  g_mutex_unlock (&m->lock);
}

/* the bitmap */

static int
persist_bitmap_block (guint block, const guint8 *data, gpointer user_data)
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
  if (e->meta->bitmap == NULL || length == 0)
    return 0;
  return vb_bitmap_start_write (e->meta->bitmap, offset, length);
}

void
engine_meta_write_end (VbEngine *e, guint64 offset, guint64 length)
{
  if (e->meta->bitmap && length > 0)
    vb_bitmap_end_write (e->meta->bitmap, offset, length);
}

/* Bits are cleared only while every slot is healthy and in sync and no
 * job runs: while one is not, the bits keep what it misses. */
static gboolean
may_clear (VbEngine *e)
{
  if (engine_sync_running (e))
    return FALSE;
  for (guint i = 0; i < e->n; i++)
    if (engine_is_faulty (&e->components[i]) || g_atomic_int_get (&e->components[i].rebuilding))
      return FALSE;
  return TRUE;
}

/* The bitmap is about to clear bits: every superblock says so first
 * (events_cleared), so that a copy of a component taken before this write
 * has fewer events and is rebuilt in full, never resynced from bits that no
 * longer record what it missed. A component that does not take the write
 * turns faulty, and then nothing is cleared. */
static int
record_clear (gpointer data)
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
  write_all_locked (e);
  for (guint i = 0; i < e->n; i++)
    if ((healthy & (G_GUINT64_CONSTANT (1) << i)) && engine_is_faulty (&e->components[i]))
      r = -EIO;
  g_mutex_unlock (&m->lock);
  return r;
}

static gpointer
sweeper_thread (gpointer data)
{
  VbEngine *e = data;
  VbEngineMeta *m = e->meta;

  g_mutex_lock (&m->sweep_lock);
  while (!m->stopping)
    {
      gint64 until = g_get_monotonic_time () + SWEEP_INTERVAL_US;
      if (g_cond_wait_until (&m->sweep_cond, &m->sweep_lock, until))
        continue;
      g_mutex_unlock (&m->sweep_lock);
      vb_bitmap_sweep (m->bitmap, may_clear (e));
      g_mutex_lock (&m->sweep_lock);
    }
  g_mutex_unlock (&m->sweep_lock);
  return NULL;
}

/* assembly */

typedef struct {
  gboolean present; /* a vblk superblock of this device */
  VbSuperblock sb;
} Found;

static gboolean
read_slot (VbEngine *e, guint i, const char *device_uuid, Found *f, GError **error)
{
  Component *c = &e->components[i];
  g_autoptr (GError) local = NULL;
  void *buf = NULL;
  int r;

  if (posix_memalign (&buf, 4096, e->meta->handler->block_size) != 0)
    return FALSE;
  r = engine_component_pread (c, buf, e->meta->handler->block_size, e->meta->handler->block_offset);
  if (r < 0)
    {
      free (buf);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "component '%s': reading its superblock: %s",
                   c->path, g_strerror (-r));
      return FALSE;
    }
  f->present = e->meta->handler->decode (buf, e->meta->handler->block_size, &f->sb, &local);
  free (buf);
  if (!f->present)
    {
      if (g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
        return TRUE; /* blank: a new component */
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "component '%s': %s; refusing to start (nothing was written)", c->path,
                   local->message);
      return FALSE;
    }
  if (strcmp (f->sb.device_uuid, device_uuid) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "component '%s' belongs to device '%s' (%s), not to '%s' (%s); refusing to "
                   "start (nothing was written)",
                   c->path, f->sb.device_name, f->sb.device_uuid, e->name, device_uuid);
      return FALSE;
    }
  return TRUE;
}

static void
fresh_superblock (VbEngine *e, const VbEngineIdentity *id, GHashTable *attributes, VbSuperblock *sb)
{
  guint64 chunk = 0;

  memset (sb, 0, sizeof *sb);
  sb->version = 1;
  g_strlcpy (sb->device_uuid, id->uuid, sizeof sb->device_uuid);
  g_strlcpy (sb->device_name, e->name, sizeof sb->device_name);
  g_strlcpy (sb->driver, e->driver->name, sizeof sb->driver);
  vb_superblock_set_attributes (sb, attributes);
  sb->ctime = sb->utime = g_get_real_time ();
  sb->data_offset = VB_DATA_OFFSET;
  sb->data_size = e->layout.component_size;
  if (g_strcmp0 (g_hash_table_lookup (attributes, "bitmap"), "internal") == 0)
    {
      chunk = vb_attr_get_u64 (attributes, "bitmap_chunk");
      /* the area between 8 KiB and the data holds the bitmap; a device too
       * large for it gets larger chunks */
      while (vb_bitmap_bytes_for (e->layout.size, chunk) > VB_DATA_OFFSET - VB_BITMAP_OFFSET)
        chunk *= 2;
      sb->features |= VB_SB_FEATURE_BITMAP;
      sb->bitmap_chunk = chunk;
      sb->bitmap_bytes = vb_bitmap_bytes_for (e->layout.size, chunk);
    }
  sb->n_roles = e->n;
  for (guint i = 0; i < e->n; i++)
    {
      g_strlcpy (sb->roles[i].uuid, id->component_uuids[i], sizeof sb->roles[i].uuid);
      sb->roles[i].state = VB_ROLE_IN_SYNC;
    }
}

/* Reads the bitmap area of component @i; NULL on error. */
static guint8 *
read_bitmap (VbEngine *e, guint i, gsize bytes)
{
  void *buf = NULL;

  if (posix_memalign (&buf, 4096, bytes) != 0)
    return NULL;
  if (engine_component_pread (&e->components[i], buf, bytes, VB_BITMAP_OFFSET) < 0)
    {
      free (buf);
      return NULL;
    }
  return buf;
}

static gint
role_of (const VbSuperblock *sb, const char *uuid)
{
  for (guint j = 0; j < sb->n_roles; j++)
    if (uuid && strcmp (sb->roles[j].uuid, uuid) == 0)
      return (gint) j;
  return -1;
}

/* A reconfiguration (legs added or removed): the role table follows the
 * new slots, each component keeping its state under its UUID (a faulty one
 * stays faulty: only an explicit re-add brings it back); a slot new to the
 * device is rebuilt in full. A component's own superblock names its old
 * slot, which now counts as the new one. */
static void
remap_roles (VbEngine *e, const VbEngineIdentity *id, Found *found)
{
  VbEngineMeta *m = e->meta;
  VbSuperblock old = m->sb;

  g_strlcpy (m->sb.driver, e->driver->name, sizeof m->sb.driver);
  m->sb.n_roles = e->n;
  for (guint i = 0; i < VB_SB_MAX_ROLES; i++)
    memset (&m->sb.roles[i], 0, sizeof m->sb.roles[i]);
  for (guint i = 0; i < e->n; i++)
    {
      gint j = role_of (&old, id->component_uuids[i]);
      g_strlcpy (m->sb.roles[i].uuid, id->component_uuids[i], sizeof m->sb.roles[i].uuid);
      m->sb.roles[i].state = j >= 0 ? old.roles[j].state : VB_ROLE_REBUILDING;
      if (found[i].present && j >= 0 && found[i].sb.role == j
          && strcmp (found[i].sb.component_uuid, id->component_uuids[i]) == 0)
        found[i].sb.role = (gint32) i;
      else if (found[i].present && j < 0)
        found[i].sb.role = -1; /* an old superblock of another slot: rebuilt */
    }
}

/* The assembly rule (assembly.h) for slot @i, from what its component
 * holds (@found[i]) and the device's superblock now; @newest: the slot
 * holding the newest superblock (-1: the device's first in-sync slot). */
static VbSlotDecision
decide_slot (VbEngine *e, guint i, const Found *found, gint newest, gboolean readd, char **why)
{
  VbEngineMeta *m = e->meta;
  VbSlotFacts facts = {
    .device = &m->sb,
    .slot = i,
    .present = readd || !e->components[i].missing, /* a re-add has just opened it */
    .own = found[i].present ? &found[i].sb : NULL,
    .use_bitmap = TRUE,
    .can_resume = e->layout.size <= m->sb.data_size,
    .readd = readd,
  };

  if (newest >= 0 && found[newest].present)
    facts.newest = found[newest].sb.component_uuid;
  for (guint j = 0; newest < 0 && j < e->n && facts.newest == NULL; j++)
    if (j != i && engine_leg_readable (&e->components[j]))
      facts.newest = e->components[j].uuid;
  return vb_assembly_decide (&facts, why);
}

VbSlotDecision
engine_meta_decide_readd (VbEngine *e, guint slot, const VbSuperblock *own, char **why)
{
  VbEngineMeta *m = e->meta;
  g_autofree Found *found = g_new0 (Found, e->n);
  VbSlotDecision d;

  found[slot].present = own != NULL;
  if (own)
    found[slot].sb = *own;
  g_mutex_lock (&m->lock);
  d = decide_slot (e, slot, found, -1, TRUE, why);
  g_mutex_unlock (&m->lock);
  return d;
}

/* Another disk at the path of a slot whose component failed or went away
 * (assembly rule 1b): the slot stays out, so the disk's size does not
 * count. The layout is made again with such slots at the size the data
 * needs; FALSE when a component the device uses is too small all the same. */
static gboolean
relayout_without_strangers (VbEngine *e, const VbEngineIdentity *id, const Found *found, gint best,
                            GHashTable *attributes)
{
  const VbSuperblock *t = &found[best].sb;
  guint64 need = t->data_size;
  g_autofree VbComponentInfo *infos = g_new0 (VbComponentInfo, e->n);
  gboolean any = FALSE;

  for (guint i = 0; i < e->n; i++)
    {
      Component *c = &e->components[i];
      /* a reconfiguration's slots are new: the running engine says which
       * kept component is out; at a start, the newest superblock does */
      gboolean out = id->reconfigure
                         ? id->failed && id->failed[i]
                         : i < t->n_roles
                               && (t->roles[i].state == VB_ROLE_FAULTY
                                   || t->roles[i].state == VB_ROLE_MISSING);
      gboolean member = !id->reconfigure && found[i].present && found[i].sb.role == (gint32) i
                        && strcmp (found[i].sb.component_uuid, t->roles[i].uuid) == 0;
      infos[i].source = c->path;
      infos[i].kind = c->is_block ? VB_COMPONENT_KIND_BLOCK : VB_COMPONENT_KIND_FILE;
      infos[i].size = c->size;
      infos[i].missing = c->missing;
      if (c->missing || (out && !member))
        {
          any |= !c->missing;
          infos[i].size = need;
        }
      else if (c->size < need)
        return FALSE;
    }
  if (!any)
    return FALSE;
  e->driver->layout (attributes, infos, e->n, &e->layout);
  if (e->block_size && e->layout.size % e->block_size != 0)
    e->layout.size -= e->layout.size % e->block_size;
  return e->layout.component_size >= need;
}

/* The layout made again with no component larger than @size data bytes. */
static void
layout_at (VbEngine *e, GHashTable *attributes, guint64 size)
{
  g_autofree VbComponentInfo *infos = g_new0 (VbComponentInfo, e->n);

  for (guint i = 0; i < e->n; i++)
    {
      Component *c = &e->components[i];
      infos[i].source = c->path;
      infos[i].kind = c->is_block ? VB_COMPONENT_KIND_BLOCK : VB_COMPONENT_KIND_FILE;
      infos[i].size = c->missing ? size : MIN (c->size, size);
      infos[i].missing = c->missing;
    }
  e->driver->layout (attributes, infos, e->n, &e->layout);
  if (e->block_size && e->layout.size % e->block_size != 0)
    e->layout.size -= e->layout.size % e->block_size;
}

/* A device with one copy of its data (raid0, linear): no bitmap, resync
 * or rebuild, and no stale component to bring up to date — every slot
 * must hold its own, current component (vb_assembly_single_copy, the
 * rules backend kernel's md and dm parts use too). The superblocks then
 * say it runs (events + 1, not clean until a clean stop). */
static gboolean
assemble_single_copy (VbEngine *e, const VbEngineIdentity *id, GHashTable *attributes, Found *found,
                      gint best, GError **error)
{
  VbEngineMeta *m = e->meta;
  g_autofree VbAssemblySlot *slots = g_new0 (VbAssemblySlot, e->n);
  gboolean fresh = best < 0;

  if (fresh)
    fresh_superblock (e, id, attributes, &m->sb);
  else
    {
      /* a smaller component would cut off the data at its end (a
       * reconfiguration appends components, smaller ones too) */
      if (!id->reconfigure && e->layout.component_size < found[best].sb.data_size)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       "device '%s' holds %" G_GUINT64_FORMAT " bytes of data per component, its "
                       "components now give %" G_GUINT64_FORMAT "; refusing to start (nothing "
                       "was written)",
                       e->name, found[best].sb.data_size, e->layout.component_size);
          return FALSE;
        }
      m->sb = found[best].sb;
      g_strlcpy (m->sb.device_name, e->name, sizeof m->sb.device_name);
      vb_superblock_set_attributes (&m->sb, attributes);
      if (id->reconfigure)
        remap_roles (e, id, found);
      m->sb.data_size = e->layout.component_size;
    }
  for (guint i = 0; i < e->n; i++)
    {
      slots[i].path = e->components[i].path;
      slots[i].missing = e->components[i].missing;
      slots[i].sb = found[i].present ? &found[i].sb : NULL;
    }
  if (!vb_assembly_single_copy (e->name, fresh ? NULL : &m->sb, slots, e->n, id->reconfigure,
                                error))
    return FALSE;
  for (guint i = 0; i < e->n; i++)
    e->components[i].uuid = g_strdup (m->sb.roles[i].uuid);
  m->need_sync = FALSE;
  if (!e->read_only)
    {
      m->sb.clean = FALSE;
      g_mutex_lock (&m->lock);
      write_all_locked (e);
      g_mutex_unlock (&m->lock);
    }
  m->closed = e->read_only;
  return TRUE;
}

gboolean
engine_meta_assemble (VbEngine *e, const VbEngineIdentity *id, GHashTable *attributes,
                      GError **error)
{
  g_autofree Found *found = g_new0 (Found, e->n);
  VbEngineMeta *m;
  gint best = -1;
  gboolean fresh;
  g_autofree guint8 *bits = NULL;
  gsize bits_len = 0;

  g_return_val_if_fail (id != NULL && id->uuid != NULL, FALSE);

  m = g_new0 (VbEngineMeta, 1);
  e->meta = m;
  m->closed = TRUE; /* nothing is written unless assembly succeeds */
  g_mutex_init (&m->lock);
  g_cond_init (&m->recorded);
  g_mutex_init (&m->bitmap_io_lock);
  g_mutex_init (&m->sweep_lock);
  g_cond_init (&m->sweep_cond);
  m->old_fds = g_array_new (FALSE, FALSE, sizeof (int));
  m->spare_paths = g_ptr_array_new_with_free_func (g_free);
  m->spare_uuids = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < id->n_spares; i++)
    {
      g_ptr_array_add (m->spare_paths, g_strdup (id->spare_paths[i]));
      g_ptr_array_add (m->spare_uuids, g_strdup (id->spare_uuids[i]));
    }
  m->handler = vb_metadata_lookup (g_hash_table_lookup (attributes, "metadata"));
  g_return_val_if_fail (m->handler != NULL, FALSE);
  if (posix_memalign ((void **) &m->io, 4096, m->handler->block_size) != 0
      || posix_memalign ((void **) &m->bitmap_io, 4096, 4096) != 0)
    g_error ("out of memory");
  for (guint i = 0; i < e->n; i++)
    {
      if (e->components[i].missing)
        continue;
      if (!read_slot (e, i, id->uuid, &found[i], error))
        return FALSE;
      if (found[i].present && (best < 0 || found[i].sb.events > found[best].sb.events))
        best = i;
    }
  /* two components claiming one role with equal events: which holds the
   * data cannot be told, so nothing is touched */
  for (guint i = 0; i < e->n; i++)
    for (guint j = i + 1; j < e->n; j++)
      if (found[i].present && found[j].present && found[i].sb.role == found[j].sb.role
          && found[i].sb.role >= 0 && found[i].sb.events == found[j].sb.events
          && strcmp (found[i].sb.component_uuid, found[j].sb.component_uuid) != 0)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_FAILED,
              "components '%s' and '%s' both claim role %d of '%s' at events %" G_GUINT64_FORMAT
              "; refusing to start (nothing was written)",
              e->components[i].path, e->components[j].path, found[i].sb.role, e->name,
              found[i].sb.events);
          return FALSE;
        }
  if (best >= 0 && found[best].sb.n_roles != e->n && !id->reconfigure)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "component '%s': its superblock says %u slots, the device has %u; refusing to "
                   "start (nothing was written)",
                   e->components[best].path, found[best].sb.n_roles, e->n);
      return FALSE;
    }

  /* raid0, linear: rules of their own (nothing below applies to them) */
  if (!e->driver->redundant)
    return assemble_single_copy (e, id, attributes, found, best, error);

  engine_meta_set_speeds (e, vb_attr_get_u64 (attributes, "sync_speed_min"),
                          vb_attr_get_u64 (attributes, "sync_speed_max"));

  /* smaller components than the data needs would cut the device short
   * (unless only disks the device will not use are smaller) */
  if (best >= 0 && e->layout.component_size < found[best].sb.data_size
      && !relayout_without_strangers (e, id, found, best, attributes))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "device '%s' holds %" G_GUINT64_FORMAT " bytes of data per component, its "
                   "components now give %" G_GUINT64_FORMAT " (a smaller one replaced one?); "
                   "refusing to start (nothing was written)",
                   e->name, found[best].sb.data_size, e->layout.component_size);
      return FALSE;
    }

  fresh = best < 0;
  if (fresh)
    fresh_superblock (e, id, attributes, &m->sb);
  else
    {
      m->sb = found[best].sb;
      /* the name and attributes follow the desired state */
      g_strlcpy (m->sb.device_name, e->name, sizeof m->sb.device_name);
      vb_superblock_set_attributes (&m->sb, attributes);
      if (id->reconfigure)
        remap_roles (e, id, found);
    }

  for (guint i = 0; i < e->n; i++)
    {
      Component *c = &e->components[i];
      const char *expect = m->sb.roles[i].uuid;
      gboolean member = found[i].present && found[i].sb.role == (gint32) i
                        && strcmp (found[i].sb.component_uuid, expect) == 0;
      g_autofree char *why = NULL;
      VbSlotDecision d;

      c->uuid = g_strdup (member ? found[i].sb.component_uuid : id->component_uuids[i]);
      if (fresh)
        {
          if (!c->missing)
            continue;
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       "component '%s' is missing: a new device needs all of its components",
                       c->path);
          return FALSE;
        }
      d = decide_slot (e, i, found, best, FALSE, &why);
      switch (d)
        {
        case VB_SLOT_CURRENT:
          continue;
        case VB_SLOT_MISSING:
          /* its uuid stays in the table: when it comes back it is re-added */
          g_free (c->uuid);
          c->uuid = g_strdup (m->sb.roles[i].uuid);
          if (m->sb.roles[i].state == VB_ROLE_IN_SYNC)
            m->sb.roles[i].state = VB_ROLE_MISSING;
          g_message ("%s: component %u (%s) is missing; starting degraded", e->name, i, c->path);
          continue;
        case VB_SLOT_FAULTY:
          /* never read nor written, and not brought back by this start:
           * only an explicit re-add does (vb_engine_readd) */
          g_message ("%s: component %u (%s): %s", e->name, i, c->path, why);
          g_atomic_int_set (&c->faulty, 1);
          g_atomic_int_set (&c->recorded, 1);
          continue;
        case VB_SLOT_RESYNC:
          g_message ("%s: component %u (%s): %s; resyncing the chunks it records", e->name, i,
                     c->path, why);
          break;
        case VB_SLOT_RESUME:
          /* it had every superblock write (and with it every write of the
           * device) since, so it holds the data below the recorded offset
           * but for the bitmap's dirty chunks */
          g_message ("%s: component %u (%s): resuming its rebuild at %" G_GUINT64_FORMAT " bytes",
                     e->name, i, c->path, m->sb.rebuild_offset);
          c->full_rebuild = TRUE;
          c->rebuild_from = m->sb.rebuild_offset;
          break;
        case VB_SLOT_REBUILD:
          g_message ("%s: component %u (%s): %s; rebuilding it in full", e->name, i, c->path, why);
          c->full_rebuild = TRUE;
          break;
        }
      g_atomic_int_set (&c->rebuilding, 1);
      g_strlcpy (m->sb.roles[i].uuid, c->uuid, sizeof m->sb.roles[i].uuid);
      m->sb.roles[i].state = VB_ROLE_REBUILDING;
    }

  /* a slot rebuilt from the start makes the whole rebuild start there */
  for (guint i = 0; i < e->n; i++)
    if (g_atomic_int_get (&e->components[i].rebuilding) && e->components[i].full_rebuild
        && e->components[i].rebuild_from == 0)
      {
        m->sb.rebuild_offset = 0;
        for (guint j = 0; j < e->n; j++)
          e->components[j].rebuild_from = 0;
        break;
      }

  /* something must be readable */
  {
    guint readable = 0;
    for (guint i = 0; i < e->n; i++)
      readable += !g_atomic_int_get (&e->components[i].rebuilding);
    if (readable == 0)
      {
        g_set_error (
            error, VB_ERROR, VB_ERROR_FAILED,
            "device '%s': no component is in sync (the newest superblock, events %" G_GUINT64_FORMAT
            ", names none that is here); refusing to start",
            e->name, m->sb.events);
        return FALSE;
      }
  }

  /* larger components never grow the device by themselves (md's rule:
   * growing is the administrator's decision): the data keeps its recorded
   * size, so that a spare or a returning leg the size of the others still
   * fits, and a device stacked on this one (a linear appending it) does not
   * see its own layout shift under its data */
  if (!fresh && e->layout.component_size > m->sb.data_size)
    layout_at (e, attributes, m->sb.data_size);

  /* the bitmap: the newest component's, or all dirty for a new device
   * (its copies were never made equal) */
  if (m->sb.features & VB_SB_FEATURE_BITMAP)
    {
      if (!fresh)
        {
          bits_len = m->sb.bitmap_bytes;
          bits = read_bitmap (e, best, bits_len);
          if (bits == NULL)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                           "component '%s': reading its bitmap failed; refusing to start",
                           e->components[best].path);
              return FALSE;
            }
        }
      m->bitmap = vb_bitmap_new (e->layout.size, m->sb.bitmap_chunk, bits, bits_len,
                                 persist_bitmap_block, e);
      vb_bitmap_set_clear_func (m->bitmap, record_clear, e);
    }
  m->need_sync = fresh || !m->sb.clean;
  for (guint i = 0; i < e->n; i++)
    if (g_atomic_int_get (&e->components[i].rebuilding))
      m->need_sync = TRUE;
  if (m->bitmap && vb_bitmap_count_dirty (m->bitmap) > 0)
    m->need_sync = TRUE;

  /* running: not clean until a clean stop says so */
  if (!e->read_only)
    {
      m->sb.clean = FALSE;
      /* superblocks from before events_cleared was recorded (and a new
       * device): no copy older than this write is trusted */
      if (!(m->sb.features & VB_SB_FEATURE_EVENTS_CLEARED))
        vb_assembly_record_clear (&m->sb);
      if (m->bitmap && fresh)
        vb_bitmap_mark_all (m->bitmap);
      g_mutex_lock (&m->lock);
      write_all_locked (e);
      write_spares_locked (e);
      g_mutex_unlock (&m->lock);
      /* the bitmap of every component equals the newest one's */
      if (m->bitmap)
        {
          gsize len = m->sb.bitmap_bytes;
          g_autofree guint8 *snap = g_malloc0 (len);
          vb_bitmap_snapshot (m->bitmap, snap, len);
          for (gsize b = 0; b < len / 4096; b++)
            persist_bitmap_block (b, snap + b * 4096, e);
        }
    }
  else
    m->need_sync = FALSE; /* a read-only device reads in-sync copies only */
  m->closed = e->read_only;
  return TRUE;
}

void
engine_meta_start_sweeper (VbEngine *e)
{
  VbEngineMeta *m = e->meta;

  if (m == NULL || m->bitmap == NULL || e->read_only || m->sweeper)
    return;
  m->stopping = FALSE;
  m->sweeper = g_thread_new ("vblk-sweep", sweeper_thread, e);
}

void
engine_meta_stop_sweeper (VbEngine *e)
{
  VbEngineMeta *m = e->meta;

  if (m == NULL || m->sweeper == NULL)
    return;
  g_mutex_lock (&m->sweep_lock);
  m->stopping = TRUE;
  g_cond_signal (&m->sweep_cond);
  g_mutex_unlock (&m->sweep_lock);
  g_thread_join (m->sweeper);
  m->sweeper = NULL;
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
vb_engine_activate (VbEngine *e)
{
  VbEngineMeta *m = e->meta;

  engine_sync_start_needed (e, m ? m->need_sync : e->need_rebuild);
}

void
engine_meta_close (VbEngine *e)
{
  VbEngineMeta *m = e->meta;

  engine_meta_stop_sweeper (e);
  if (e->read_only || m->closed)
    return;
  m->closed = TRUE;
  /* every write has landed (the node is gone): with every slot in sync,
   * no chunk is dirty any more */
  for (guint i = 0; i < e->n; i++)
    if (!engine_is_faulty (&e->components[i]))
      engine_component_flush (&e->components[i]);
  if (m->bitmap && may_clear (e))
    {
      /* the first ages the bits of the last writes, the second clears
       * them all (one events_cleared record) */
      vb_bitmap_sweep (m->bitmap, FALSE);
      vb_bitmap_sweep (m->bitmap, TRUE);
    }
  g_mutex_lock (&m->lock);
  /* without a bitmap, a resync cut short must run again in full */
  m->sb.clean = m->bitmap != NULL || !m->sync_incomplete;
  write_all_locked (e);
  g_mutex_unlock (&m->lock);
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
  g_mutex_clear (&m->sweep_lock);
  g_cond_clear (&m->sweep_cond);
  g_free (m);
  e->meta = NULL;
}
