/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Assembly of an engine device with on-component metadata (metadata=vblk):
 * every slot's superblock is read. A checksum or format error, another
 * device's UUID, or two components claiming one role with equal events
 * refuse the start, and nothing is written. The highest event counter
 * wins; its role table and the assembly rule (assembly.h) say what each
 * component is: in sync, behind only by what the bitmap records (resynced
 * from it), rebuilt in full, or faulty — a failed component stays faulty
 * until an explicit re-add. A component that is not in sync is never
 * read. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "engine-meta.h"
#include "engine-meta-state.h"

#include "vb-error.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  gboolean present; /* a vblk superblock of this device */
  gboolean added;   /* a reconfiguration's slot new to the device */
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
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("component '%s': reading its superblock: %s"), c->path, g_strerror (-r));
      return FALSE;
    }
  f->present = e->meta->handler->decode (buf, e->meta->handler->block_size, &f->sb, &local);
  free (buf);
  if (!f->present)
    {
      if (g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
        return TRUE; /* blank: a new component */
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("component '%s': %s; refusing to start (nothing was written)"), c->path,
                   local->message);
      return FALSE;
    }
  if (strcmp (f->sb.device_uuid, device_uuid) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("component '%s' belongs to device '%s' (%s), not to '%s' (%s); refusing to "
                      "start (nothing was written)"),
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
      found[i].added = j < 0;
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
    .named = !found[i].added && e->components[i].uuid != NULL
             && strcmp (e->components[i].uuid, m->sb.roles[i].uuid) == 0,
  };

  for (guint j = 0; m->spare_uuids && j < m->spare_uuids->len; j++)
    facts.taken_by_spare |= *m->sb.roles[i].uuid != '\0'
                            && strcmp (m->sb.roles[i].uuid, m->spare_uuids->pdata[j]) == 0;
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

/* A blank disk at the path of the component the table names for slot @i
 * and the desired state too (assembly rule 1c). */
static gboolean
stranger_at (const char *uuid, const Found *found, const VbSuperblock *t, guint i)
{
  return !found[i].present && t->roles[i].state != VB_ROLE_EMPTY && *t->roles[i].uuid != '\0'
         && uuid != NULL && strcmp (uuid, t->roles[i].uuid) == 0;
}

/* Another disk at the path of a slot whose component failed or went away
 * (assembly rules 1b and 1c): the slot stays out, so the disk's size does not
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
                                   || t->roles[i].state == VB_ROLE_MISSING
                                   || stranger_at (id->component_uuids[i], found, t, i));
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

/* What assembly has found so far. */
typedef struct {
  VbEngine *e;
  const VbEngineIdentity *id;
  GHashTable *attributes;
  Found *found;   /* per slot: what its component holds */
  gint best;      /* the slot holding the newest superblock; -1: none */
  gboolean fresh; /* a new device: no slot holds a superblock of it */
} Assembly;

/* Reads every present slot's superblock; the newest (highest events) wins. */
static gboolean
find_newest_superblock (Assembly *a, GError **error)
{
  VbEngine *e = a->e;
  Found *found = a->found;

  for (guint i = 0; i < e->n; i++)
    {
      if (e->components[i].missing)
        continue;
      if (!read_slot (e, i, a->id->uuid, &found[i], error))
        return FALSE;
      if (found[i].present && (a->best < 0 || found[i].sb.events > found[a->best].sb.events))
        a->best = i;
    }
  a->fresh = a->best < 0;
  return TRUE;
}

/* Two components claiming one role with equal events: which holds the
 * data cannot be told, so nothing is touched; nor when the newest
 * superblock counts other slots than the device has (but in a
 * reconfiguration). */
static gboolean
refuse_ambiguous (Assembly *a, GError **error)
{
  VbEngine *e = a->e;
  Found *found = a->found;

  for (guint i = 0; i < e->n; i++)
    for (guint j = i + 1; j < e->n; j++)
      if (found[i].present && found[j].present && found[i].sb.role == found[j].sb.role
          && found[i].sb.role >= 0 && found[i].sb.events == found[j].sb.events
          && strcmp (found[i].sb.component_uuid, found[j].sb.component_uuid) != 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("components '%s' and '%s' both claim role %d of '%s' at events %" PRIu64
                          "; refusing to start (nothing was written)"),
                       e->components[i].path, e->components[j].path, found[i].sb.role, e->name,
                       found[i].sb.events);
          return FALSE;
        }
  if (a->best >= 0 && found[a->best].sb.n_roles != e->n && !a->id->reconfigure)
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_FAILED,
          _ ("component '%s': its superblock says %u slots, the device has %u; refusing to "
             "start (nothing was written)"),
          e->components[a->best].path, found[a->best].sb.n_roles, e->n);
      return FALSE;
    }
  return TRUE;
}

/* The device's superblock from now on: a new one for a new device, else
 * the newest, its name and attributes following the desired state (and
 * in a reconfiguration its role table the new slots). */
static void
adopt_superblock (Assembly *a)
{
  VbEngine *e = a->e;
  VbEngineMeta *m = e->meta;

  if (a->fresh)
    {
      fresh_superblock (e, a->id, a->attributes, &m->sb);
      return;
    }
  m->sb = a->found[a->best].sb;
  g_strlcpy (m->sb.device_name, e->name, sizeof m->sb.device_name);
  vb_superblock_set_attributes (&m->sb, a->attributes);
  if (a->id->reconfigure)
    remap_roles (e, a->id, a->found);
}

/* A device with one copy of its data (raid0, linear): no bitmap, resync
 * or rebuild, and no stale component to bring up to date — every slot
 * must hold its own, current component (vb_assembly_single_copy, the
 * rules backend kernel's md and dm parts use too). The superblocks then
 * say it runs (events + 1, not clean until a clean stop). */
static gboolean
assemble_single_copy (Assembly *a, GError **error)
{
  VbEngine *e = a->e;
  VbEngineMeta *m = e->meta;
  g_autofree VbAssemblySlot *slots = g_new0 (VbAssemblySlot, e->n);

  /* a smaller component would cut off the data at its end (a
   * reconfiguration appends components, smaller ones too) */
  if (!a->fresh && !a->id->reconfigure && e->layout.component_size < a->found[a->best].sb.data_size)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("device '%s' holds %" PRIu64 " bytes of data per component, its "
                      "components now give %" PRIu64 "; refusing to start (nothing "
                      "was written)"),
                   e->name, a->found[a->best].sb.data_size, e->layout.component_size);
      return FALSE;
    }
  adopt_superblock (a);
  if (!a->fresh)
    m->sb.data_size = e->layout.component_size;
  for (guint i = 0; i < e->n; i++)
    {
      slots[i].path = e->components[i].path;
      slots[i].missing = e->components[i].missing;
      slots[i].sb = a->found[i].present ? &a->found[i].sb : NULL;
    }
  if (!vb_assembly_single_copy (e->name, a->fresh ? NULL : &m->sb, slots, e->n, a->id->reconfigure,
                                error))
    return FALSE;
  for (guint i = 0; i < e->n; i++)
    e->components[i].uuid = g_strdup (m->sb.roles[i].uuid);
  m->need_sync = FALSE;
  if (!e->read_only)
    {
      m->sb.clean = FALSE;
      g_mutex_lock (&m->lock);
      engine_meta_write_all_locked (e);
      g_mutex_unlock (&m->lock);
    }
  m->closed = e->read_only;
  return TRUE;
}

/* Smaller components than the data needs would cut the device short
 * (unless only disks the device will not use are smaller). */
static gboolean
check_data_fits (Assembly *a, GError **error)
{
  VbEngine *e = a->e;
  const VbSuperblock *newest = a->best >= 0 ? &a->found[a->best].sb : NULL;

  if (newest == NULL || e->layout.component_size >= newest->data_size
      || relayout_without_strangers (e, a->id, a->found, a->best, a->attributes))
    return TRUE;
  g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
               _ ("device '%s' holds %" PRIu64 " bytes of data per component, its "
                  "components now give %" PRIu64 " (a smaller one replaced one?); "
                  "refusing to start (nothing was written)"),
               e->name, newest->data_size, e->layout.component_size);
  return FALSE;
}

/* Slot @i by the assembly rule: current, missing (the device starts
 * degraded), faulty (until an explicit re-add), or behind — resynced from
 * the bitmap, its rebuild resumed, or rebuilt in full. */
static void
decide_slot_at_start (Assembly *a, guint i)
{
  VbEngine *e = a->e;
  VbEngineMeta *m = e->meta;
  Component *c = &e->components[i];
  g_autofree char *why = NULL;

  switch (decide_slot (e, i, a->found, a->best, FALSE, &why))
    {
    case VB_SLOT_CURRENT:
      return;
    case VB_SLOT_MISSING:
      /* its uuid stays in the table: when it comes back it is re-added
       * (one that was being rebuilt too — a spare stopped half way; its
       * own superblock says so, and the re-add rebuilds it in full) */
      g_free (c->uuid);
      c->uuid = g_strdup (m->sb.roles[i].uuid);
      if (m->sb.roles[i].state == VB_ROLE_IN_SYNC || m->sb.roles[i].state == VB_ROLE_REBUILDING)
        m->sb.roles[i].state = VB_ROLE_MISSING;
      engine_report (e, VB_REPORT_INFO, "component %u (%s) is missing; starting degraded", i,
                     c->path);
      return;
    case VB_SLOT_STRANGER:
      /* as if its component were missing (it went away): the disk at its
       * path is let go, never read nor written, and the component is
       * re-added when it comes back */
      engine_report (e, VB_REPORT_INFO, "component %u (%s): %s", i, c->path, why);
      if (c->ops == NULL && c->fd >= 0)
        {
          close (c->fd);
          c->fd = -1;
        }
      c->missing = TRUE;
      g_free (c->uuid);
      c->uuid = g_strdup (m->sb.roles[i].uuid);
      m->sb.roles[i].state = VB_ROLE_MISSING;
      g_atomic_int_set (&c->faulty, 1);
      g_atomic_int_set (&c->recorded, 1);
      return;
    case VB_SLOT_FAULTY:
      /* never read nor written, and not brought back by this start:
       * only an explicit re-add does (vb_engine_readd) */
      engine_report (e, VB_REPORT_INFO, "component %u (%s): %s", i, c->path, why);
      g_atomic_int_set (&c->faulty, 1);
      g_atomic_int_set (&c->recorded, 1);
      return;
    case VB_SLOT_RESYNC:
      engine_report (e, VB_REPORT_INFO, "component %u (%s): %s; resyncing the chunks it records", i,
                     c->path, why);
      break;
    case VB_SLOT_RESUME:
      /* it had every superblock write (and with it every write of the
       * device) since, so it holds the data below the recorded offset
       * but for the bitmap's dirty chunks */
      engine_report (e, VB_REPORT_INFO,
                     "component %u (%s): resuming its rebuild at %" G_GUINT64_FORMAT " bytes", i,
                     c->path, m->sb.rebuild_offset);
      c->full_rebuild = TRUE;
      c->rebuild_from = m->sb.rebuild_offset;
      break;
    case VB_SLOT_REBUILD:
      engine_report (e, VB_REPORT_INFO, "component %u (%s): %s; rebuilding it in full", i, c->path,
                     why);
      c->full_rebuild = TRUE;
      break;
    }
  g_atomic_int_set (&c->rebuilding, 1);
  g_strlcpy (m->sb.roles[i].uuid, c->uuid, sizeof m->sb.roles[i].uuid);
  m->sb.roles[i].state = VB_ROLE_REBUILDING;
}

/* A slot rebuilt from the start makes the whole rebuild start there. */
static void
rebuild_from_start_if_any (VbEngine *e)
{
  for (guint i = 0; i < e->n; i++)
    if (g_atomic_int_get (&e->components[i].rebuilding) && e->components[i].full_rebuild
        && e->components[i].rebuild_from == 0)
      {
        e->meta->sb.rebuild_offset = 0;
        for (guint j = 0; j < e->n; j++)
          e->components[j].rebuild_from = 0;
        return;
      }
}

/* Each slot's component and what it is; a new device needs all of its
 * components, and something must be readable. */
static gboolean
decide_slots (Assembly *a, GError **error)
{
  VbEngine *e = a->e;
  VbEngineMeta *m = e->meta;
  guint readable = 0;

  for (guint i = 0; i < e->n; i++)
    {
      Component *c = &e->components[i];
      const Found *f = &a->found[i];
      gboolean member = f->present && f->sb.role == (gint32) i
                        && strcmp (f->sb.component_uuid, m->sb.roles[i].uuid) == 0;

      c->uuid = g_strdup (member ? f->sb.component_uuid : a->id->component_uuids[i]);
      if (!a->fresh)
        decide_slot_at_start (a, i);
      else if (c->missing)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("component '%s' is missing: a new device needs all of its components"),
                       c->path);
          return FALSE;
        }
    }
  rebuild_from_start_if_any (e);
  for (guint i = 0; i < e->n; i++)
    readable += !g_atomic_int_get (&e->components[i].rebuilding);
  if (readable > 0)
    return TRUE;
  g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
               _ ("device '%s': no component is in sync (the newest superblock, events %" PRIu64
                  ", names none that is here); refusing to start"),
               e->name, m->sb.events);
  return FALSE;
}

/* Larger components never grow the device by themselves (md's rule:
 * growing is the administrator's decision): the data keeps its recorded
 * size, so that a spare or a returning leg the size of the others still
 * fits, and a device stacked on this one (a linear appending it) does not
 * see its own layout shift under its data. */
static gboolean
decide_growth (Assembly *a, GError **error)
{
  VbEngine *e = a->e;
  VbEngineMeta *m = e->meta;

  if (!a->fresh && e->layout.component_size > m->sb.data_size)
    layout_at (e, a->attributes, m->sb.data_size);
  return TRUE;
}

/* The bitmap: the newest component's, or all dirty for a new device (its
 * copies were never made equal). */
static gboolean
load_bitmap (Assembly *a, GError **error)
{
  VbEngine *e = a->e;
  VbEngineMeta *m = e->meta;
  g_autofree guint8 *bits = NULL;
  gsize bits_len = 0;

  if (!(m->sb.features & VB_SB_FEATURE_BITMAP))
    return TRUE;
  if (!a->fresh)
    {
      bits_len = m->sb.bitmap_bytes;
      bits = read_bitmap (e, a->best, bits_len);
      if (bits == NULL)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("component '%s': reading its bitmap failed; refusing to start"),
                       e->components[a->best].path);
          return FALSE;
        }
    }
  m->bitmap = vb_bitmap_new (e->layout.size, m->sb.bitmap_chunk, bits, bits_len,
                             engine_meta_persist_bitmap_block, e);
  vb_bitmap_set_clear_func (m->bitmap, engine_meta_record_clear, e);
  return TRUE;
}

/* A job runs at activation for a new device, a slot behind, dirty bits,
 * or without a bitmap after an unclean stop; never on a read-only device
 * (it reads in-sync copies only). With a bitmap the clean flag adds
 * nothing: every write's bit is durable before the write, and a bit goes
 * only once every leg has the write and after the superblocks were written
 * and flushed on every leg (events_cleared), which makes the write durable
 * first; so a stop that was not clean — a vblkd that stayed serving a root
 * until the power went — with no bit set has nothing to resync. */
static void
decide_need_sync (VbEngine *e, gboolean fresh)
{
  VbEngineMeta *m = e->meta;
  /* copies that may differ: a new device, dirty bits, an unclean stop */
  gboolean differ = fresh || (m->bitmap ? vb_bitmap_count_dirty (m->bitmap) > 0 : !m->sb.clean);

  m->need_sync = differ;
  for (guint i = 0; i < e->n; i++)
    if (g_atomic_int_get (&e->components[i].rebuilding))
      m->need_sync = TRUE;
  if (e->read_only)
    m->need_sync = FALSE;
  /* reads take the first copy until the job has made them equal */
  if (!e->read_only && differ)
    __atomic_store_n (&e->resync_frontier, 0, __ATOMIC_RELEASE);
}

/* Running: not clean until a clean stop says so. The superblocks (the
 * spares' too) say what assembly decided, and every component's bitmap
 * equals the newest one's. */
static void
write_assembled (VbEngine *e, gboolean fresh)
{
  VbEngineMeta *m = e->meta;

  if (e->read_only)
    return;
  m->sb.clean = FALSE;
  /* superblocks from before events_cleared was recorded (and a new
   * device): no copy older than this write is trusted */
  if (!(m->sb.features & VB_SB_FEATURE_EVENTS_CLEARED))
    vb_assembly_record_clear (&m->sb);
  if (m->bitmap && fresh)
    vb_bitmap_mark_all (m->bitmap);
  g_mutex_lock (&m->lock);
  engine_meta_write_all_locked (e);
  engine_meta_write_spares_locked (e);
  g_mutex_unlock (&m->lock);
  if (m->bitmap)
    {
      gsize len = m->sb.bitmap_bytes;
      g_autofree guint8 *snap = g_malloc0 (len);
      vb_bitmap_snapshot (m->bitmap, snap, len);
      for (gsize b = 0; b < len / 4096; b++)
        engine_meta_persist_bitmap_block (b, snap + b * 4096, e);
    }
}

gboolean
engine_meta_assemble (VbEngine *e, const VbEngineIdentity *id, GHashTable *attributes,
                      GError **error)
{
  g_autofree Found *found = g_new0 (Found, e->n);
  Assembly a = { .e = e, .id = id, .attributes = attributes, .found = found, .best = -1 };
  const VbMetadataHandler *handler;

  g_return_val_if_fail (id != NULL && id->uuid != NULL, FALSE);
  handler = vb_metadata_lookup (g_hash_table_lookup (attributes, "metadata"));
  g_return_val_if_fail (handler != NULL, FALSE);
  engine_meta_new (e, id, handler);

  if (!find_newest_superblock (&a, error) || !refuse_ambiguous (&a, error))
    return FALSE;
  /* raid0, linear: rules of their own (nothing below applies to them) */
  if (!e->driver->redundant)
    return assemble_single_copy (&a, error);
  engine_meta_set_speeds (e, vb_attr_get_u64 (attributes, "sync_speed_min"),
                          vb_attr_get_u64 (attributes, "sync_speed_max"));
  if (!check_data_fits (&a, error))
    return FALSE;
  adopt_superblock (&a);
  if (!decide_slots (&a, error) || !decide_growth (&a, error) || !load_bitmap (&a, error))
    return FALSE;
  decide_need_sync (e, a.fresh);
  write_assembled (e, a.fresh);
  e->meta->closed = e->read_only;
  return TRUE;
}
