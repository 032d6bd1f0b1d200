/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Component probing: what each component is and how large, from the
 * facts vb-inspect.c gathers (once per path and op), and the driver's
 * checks against them. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "vb-probe.h"

#include "metadata.h"

#include "vb-error.h"
#include "vb-util.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define PROBE_MAX_DEPTH 32

void
vb_probe_init (VbProbe *probe, const VbState *state, GHashTable *block_devices)
{
  *probe = (VbProbe){ 0 };
  probe->state = state;
  probe->block_devices = block_devices;
  probe->sizes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  probe->facts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                        (GDestroyNotify) vb_path_facts_free);
  probe->depth = 0;
}

void
vb_probe_clear (VbProbe *probe)
{
  g_clear_pointer (&probe->sizes, g_hash_table_unref);
  g_clear_pointer (&probe->facts, g_hash_table_unref);
  g_clear_pointer (&probe->identities, g_array_unref);
  g_clear_pointer (&probe->identities_besides, g_free);
}

const VbPathFacts *
vb_probe_facts (VbProbe *probe, const char *path, VbInspectFlags flags, GError **error)
{
  VbPathFacts *f = g_hash_table_lookup (probe->facts, path);

  if (f && (f->flags & flags) == flags)
    return f;
  f = vb_inspect (path, flags | (f ? f->flags : 0), VB_INSPECT_TIMEOUT_MS, error);
  if (f == NULL)
    return NULL;
  g_hash_table_replace (probe->facts, g_strdup (path), f);
  return f;
}

gboolean
vb_probe_source_missing (VbProbe *probe, const char *source)
{
  g_autoptr (GError) local = NULL;

  if (source[0] != '/')
    return FALSE;
  return vb_probe_facts (probe, source, VB_INSPECT_TYPE, &local) == NULL
         && g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND);
}

static gboolean device_size (VbProbe *probe, const char *name, guint64 *size, GError **error);

static gboolean
probe_one (VbProbe *probe, const char *source, char **path, VbComponentInfo *info, GError **error)
{
  g_autofree char *dep = NULL;
  VbSourceKind kind;

  if (!vb_source_parse (source, &kind, &dep, error))
    return FALSE;
  info->source = source;
  switch (kind)
    {
    case VB_SOURCE_NBD:
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("component '%s': NBD components need the engine, which this version lacks"),
                   source);
      return FALSE;

    case VB_SOURCE_DEVICE:
      info->kind = VB_COMPONENT_KIND_DEVICE;
      *path = g_strdup (probe->block_devices ? g_hash_table_lookup (probe->block_devices, dep)
                                             : NULL);
      return device_size (probe, dep, &info->size, error);

      case VB_SOURCE_PATH: {
        const VbPathFacts *f = vb_probe_facts (probe, source, VB_INSPECT_TYPE, error);
        if (f == NULL)
          return FALSE;
        *path = g_strdup (source);
        info->kind = f->is_block ? VB_COMPONENT_KIND_BLOCK : VB_COMPONENT_KIND_FILE;
        info->size = f->size;
        return TRUE;
      }
    }
  g_assert_not_reached ();
}

gboolean
vb_probe_components (VbProbe *probe, const VbDeviceConfig *config, GPtrArray **paths,
                     GArray **infos, GError **error)
{
  g_autoptr (GPtrArray) p = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GArray) in = g_array_new (FALSE, TRUE, sizeof (VbComponentInfo));
  guint64 data_offset = vb_driver_data_offset (config->attributes);
  const VbDriver *driver = vb_driver_lookup (config->driver);
  g_autoptr (GError) local = NULL;
  guint n_missing = 0;
  guint64 smallest = G_MAXUINT64;

  /* only the slots: spares wait outside the layout */
  for (guint i = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      VbComponentInfo info = { 0 };
      char *path = NULL;

      if (!vb_component_config_is_slot (c))
        continue;
      if (!probe_one (probe, c->source, &path, &info, &local))
        {
          /* a redundant device with metadata starts without a file or disk
           * that is gone; its superblocks record the slot missing. Raid0
           * and linear keep no other copy: a gone component refuses the
           * start, naming it, as md refuses a raid0 with a member missing */
          if (driver == NULL || !driver->redundant || !vb_driver_has_metadata (config->attributes)
              || c->source[0] != '/' || probe->no_missing
              || !g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
            {
              g_propagate_error (error, g_steal_pointer (&local));
              return FALSE;
            }
          g_clear_error (&local);
          info.source = c->source;
          info.kind = VB_COMPONENT_KIND_FILE;
          info.missing = TRUE;
          info.size = 0;
          g_ptr_array_add (p, NULL);
          g_array_append_val (in, info);
          n_missing++;
          continue;
        }
      if (data_offset && info.size < data_offset + 4096)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("component '%s': %" PRIu64
                          " bytes, too small for its metadata (data starts at %" PRIu64 ")"),
                       c->source, info.size, data_offset);
          g_free (path);
          return FALSE;
        }
      /* the driver sees the data area only: an mdadm array's used size
       * (md1), or what follows the data offset */
      info.size -= data_offset;
      if (g_hash_table_contains (config->attributes, "data_size")
          && vb_attr_get_u64 (config->attributes, "data_size") > 0)
        info.size = MIN (info.size, vb_attr_get_u64 (config->attributes, "data_size"));
      g_ptr_array_add (p, path);
      g_array_append_val (in, info);
    }
  if (n_missing > 0)
    {
      for (guint i = 0; i < in->len; i++)
        if (!g_array_index (in, VbComponentInfo, i).missing)
          smallest = MIN (smallest, g_array_index (in, VbComponentInfo, i).size);
      if (smallest == G_MAXUINT64)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND,
                       _ ("device '%s': none of its components is there"), config->name);
          return FALSE;
        }
      for (guint i = 0; i < in->len; i++)
        if (g_array_index (in, VbComponentInfo, i).missing)
          g_array_index (in, VbComponentInfo, i).size = smallest;
    }
  *paths = g_steal_pointer (&p);
  *infos = g_steal_pointer (&in);
  return TRUE;
}

gboolean
vb_probe_check_foreign (VbProbe *probe, const VbDeviceConfig *config, GError **error)
{
  const char *metadata = g_hash_table_lookup (config->attributes, "metadata");

  if (metadata == NULL || vb_metadata_lookup (metadata) == NULL)
    return TRUE;
  for (guint i = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      g_autoptr (GError) local = NULL;
      const VbPathFacts *f;
      const VbSuperblock *sb;

      if (c->source[0] != '/')
        continue;
      f = vb_probe_facts (probe, c->source, VB_INSPECT_SUPERBLOCK, &local);
      if (f == NULL || !f->has_superblock || strcmp (f->superblock.format, metadata) != 0)
        continue;
      sb = &f->superblock;
      /* a spare holds no data: one may move to another device */
      if (strcmp (sb->device_uuid, config->uuid) != 0 && sb->role != VB_SB_ROLE_SPARE)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_BUSY,
              _ ("component '%s' carries the %s superblock of device '%s' (%s), events %" PRIu64
                 "; adopt that device (vbmgr scan --adopt) or wipe its "
                 "metadata first"),
              c->source, metadata, sb->device_name, sb->device_uuid, sb->events);
          return FALSE;
        }
    }
  return TRUE;
}

gboolean
vb_probe_spares (VbProbe *probe, const VbDeviceConfig *config, GPtrArray **paths, GPtrArray **uuids,
                 GError **error)
{
  g_autoptr (GPtrArray) p = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) u = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) local = NULL;

  for (guint i = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      VbComponentInfo info = { 0 };
      char *path = NULL;

      if (g_strcmp0 (c->role, "spare") != 0)
        continue;
      if (!probe_one (probe, c->source, &path, &info, &local))
        {
          /* a spare that is not there is no spare now */
          if (g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
            {
              g_clear_error (&local);
              continue;
            }
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      if (path == NULL)
        continue; /* a device not started: not a spare now */
      g_ptr_array_add (p, path);
      g_ptr_array_add (u, g_strdup (c->uuid));
    }
  *paths = g_steal_pointer (&p);
  *uuids = g_steal_pointer (&u);
  return TRUE;
}

gboolean
vb_probe_validate (VbProbe *probe, const VbDeviceConfig *config, gboolean need_complete,
                   guint64 *size, gboolean *complete, GError **error)
{
  const VbDriver *driver = vb_driver_lookup (config->driver);
  g_autoptr (GPtrArray) paths = NULL;
  g_autoptr (GArray) infos = NULL;
  g_autoptr (GHashTable) attributes = NULL;
  guint n = vb_device_config_n_slots (config);

  if (driver == NULL)
    {
      g_autofree char *known = vb_drivers_known_names ();
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("driver '%s': unknown (known: %s)"), config->driver, known);
      return FALSE;
    }
  /* a desired state's device: what it does not name is what it had */
  attributes = vb_driver_resolve_saved_attributes (driver, config->attributes, error);
  if (attributes == NULL)
    return FALSE;
  if (!vb_probe_components (probe, config, &paths, &infos, error))
    return FALSE;

  *complete = n >= driver->min_components;
  *size = 0;
  if (!*complete && !need_complete && n <= driver->max_components)
    return TRUE; /* configuring: checked in full once complete */
  if (!vb_driver_validate (driver, attributes, (VbComponentInfo *) infos->data, n, error))
    return FALSE;
  *size = driver->size (attributes, (VbComponentInfo *) infos->data, n);
  return TRUE;
}

static gboolean
device_size (VbProbe *probe, const char *name, guint64 *size, GError **error)
{
  const VbDeviceConfig *config = vb_state_lookup (probe->state, name);
  guint64 *memo = g_hash_table_lookup (probe->sizes, name);
  gboolean complete;
  g_autoptr (GError) local = NULL;

  if (memo)
    {
      *size = *memo;
      return TRUE;
    }
  if (config == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND,
                   _ ("component 'vblk:%s': no device named '%s'"), name, name);
      return FALSE;
    }
  if (probe->depth >= PROBE_MAX_DEPTH)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_DEPENDENCY_CYCLE,
                   _ ("component 'vblk:%s': devices nested deeper than %d"), name, PROBE_MAX_DEPTH);
      return FALSE;
    }
  /* a device that runs is the size of its node: what its metadata keeps
   * (larger components do not grow it), not what its components would
   * give a new one */
  const char *node = probe->block_devices ? g_hash_table_lookup (probe->block_devices, name) : NULL;
  const VbPathFacts *f = node ? vb_probe_facts (probe, node, VB_INSPECT_TYPE, NULL) : NULL;
  if (f && f->is_block && f->size > 0)
    {
      *size = f->size;
      g_hash_table_insert (probe->sizes, g_strdup (name), g_memdup2 (size, sizeof *size));
      return TRUE;
    }
  probe->depth++;
  gboolean ok = vb_probe_validate (probe, config, TRUE, size, &complete, &local);
  probe->depth--;
  if (!ok)
    {
      g_set_error (error, local->domain, local->code, _ ("component 'vblk:%s': %s"), name,
                   local->message);
      return FALSE;
    }
  g_hash_table_insert (probe->sizes, g_strdup (name), g_memdup2 (size, sizeof *size));
  return TRUE;
}
