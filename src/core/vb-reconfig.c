/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See vb-reconfig.h. The table of conversions is the one place that says
 * what can change under a started device without moving data. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "vb-reconfig.h"

#include "driver.h"
#include "vb-error.h"
#include "vb-util.h"

#include <string.h>

gboolean
vb_reconfig_has_metadata (const VbDeviceConfig *d)
{
  return vb_driver_has_metadata (d->attributes);
}

char *
vb_reconfig_describe (const VbDeviceConfig *d)
{
  GString *s = g_string_new (d->driver);
  gboolean first = TRUE;

  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      if (!vb_component_config_is_slot (c))
        continue;
      g_string_append (s, first ? " of " : ", ");
      g_string_append (s, c->source);
      first = FALSE;
    }
  return g_string_free (s, FALSE);
}

static gboolean
single (const char *driver)
{
  return strcmp (driver, "file") == 0 || strcmp (driver, "window") == 0;
}

static gboolean
in_list (const char *const *list, const char *source)
{
  for (guint i = 0; list && list[i]; i++)
    if (strcmp (list[i], source) == 0)
      return TRUE;
  return FALSE;
}

/* The conversion table: FALSE with VB_ERROR_NOT_SUPPORTED for a pair
 * that would move data or has no meaning. */
static gboolean
conversion_allowed (const VbDeviceConfig *old, const char *to, guint n_add, guint n_remove,
                    guint n_slots, GError **error)
{
  const char *from = old->driver;
  const char *why = NULL;

  if (strcmp (from, "raid0") == 0 || strcmp (from, "raid10") == 0 || strcmp (to, "raid0") == 0
      || strcmp (to, "raid10") == 0)
    why = "its stripes would have to move to new places on the components (a reshape), and vblk "
          "has no reshape job yet";
  else if (single (from) && strcmp (to, "raid1") == 0)
    {
      if (n_add == 0)
        why = "a mirror needs a new leg (--add COMPONENT)";
    }
  else if (single (from) && strcmp (to, "linear") == 0)
    {
      if (n_add == 0)
        why = "a concatenation of one component is the same device (--add COMPONENT)";
    }
  else if (strcmp (from, "raid1") == 0 && strcmp (to, "raid1") == 0)
    ;
  else if (strcmp (from, "raid1") == 0 && single (to))
    {
      if (n_slots != 1)
        why = "a plain device has one component: remove every leg but one (--remove)";
    }
  else if (strcmp (from, "linear") == 0 && strcmp (to, "linear") == 0)
    {
      if (n_remove > 0)
        why = "removing a component of a concatenation would cut off the data on it and after it";
    }
  else
    why = "there is no such conversion without moving data";
  if (why)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("device '%s': reconfiguring %s to %s: %s"), old->name, from, to, why);
      return FALSE;
    }
  return TRUE;
}

/* The attributes the new driver starts from: the old ones it also has,
 * then what the conversion fixes, then what the caller gave. */
static GHashTable *
resolve_attributes (const VbDeviceConfig *old, const VbDriver *driver, GHashTable *given,
                    GError **error)
{
  g_autoptr (GHashTable) base = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  gboolean same = strcmp (old->driver, driver->name) == 0;
  gboolean old_meta = vb_driver_data_offset (old->attributes) > 0;
  GHashTableIter iter;
  gpointer k, v;

  g_hash_table_iter_init (&iter, old->attributes);
  while (g_hash_table_iter_next (&iter, &k, &v))
    if (vb_driver_attr_spec (driver, k))
      g_hash_table_insert (base, g_strdup (k), g_strdup (v));
  /* the same driver: what the device does not name, it had before the
   * attribute existed (never a new device's default, which could move
   * its data) */
  for (const VbAttrSpec *a = driver->attributes; same && a && a->name; a++)
    if (a->saved_absent && !g_hash_table_contains (base, a->name))
      g_hash_table_insert (base, g_strdup (a->name), g_strdup (a->saved_absent));
  if (given)
    {
      g_hash_table_iter_init (&iter, given);
      while (g_hash_table_iter_next (&iter, &k, &v))
        {
          const VbAttrSpec *spec = vb_driver_attr_spec (driver, k);
          g_autofree char *canon = NULL;
          if (!same || spec == NULL || spec->online)
            continue;
          canon = vb_attr_canonicalize (spec, v, error);
          if (canon == NULL)
            return NULL;
          if (g_strcmp0 (g_hash_table_lookup (old->attributes, k), canon) != 0)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                           _ ("attribute '%s' cannot change in a reconfiguration of %s (it is "
                              "fixed while the data is on the components)"),
                           (const char *) k, driver->name);
              return NULL;
            }
        }
    }
  if (single (old->driver) && strcmp (driver->name, "raid1") == 0)
    {
      /* the data fills the component from byte 0: no room for a superblock
       * at 4 KiB or for data from 1 MiB; the desired state keeps the legs'
       * state instead */
      const char *meta = given ? g_hash_table_lookup (given, "metadata") : NULL;
      const char *bitmap = given ? g_hash_table_lookup (given, "bitmap") : NULL;
      if ((meta && strcmp (meta, "none") != 0) || (bitmap && strcmp (bitmap, "none") != 0))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                       _ ("device '%s': its data starts at byte 0 of '%s', where a vblk superblock "
                          "and bitmap would go (data from 1 MiB); the mirror keeps metadata=none "
                          "and its legs' state in the desired state"),
                       old->name, ((VbComponentConfig *) old->components->pdata[0])->source);
          return NULL;
        }
      g_hash_table_replace (base, g_strdup ("metadata"), g_strdup ("none"));
      g_hash_table_replace (base, g_strdup ("bitmap"), g_strdup ("none"));
    }
  if (single (old->driver) && strcmp (driver->name, "linear") == 0)
    {
      /* the data stays where it is, from byte 0 of the first component:
       * superblocks would have to go where the data is */
      const char *meta = given ? g_hash_table_lookup (given, "metadata") : NULL;
      if (meta && strcmp (meta, "none") != 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                       _ ("device '%s': its data starts at byte 0 of '%s', where a vblk superblock "
                          "would go (data from 1 MiB); the concatenation keeps metadata=none"),
                       old->name, ((VbComponentConfig *) old->components->pdata[0])->source);
          return NULL;
        }
      g_hash_table_replace (base, g_strdup ("metadata"), g_strdup ("none"));
    }
  if (strcmp (old->driver, "raid1") == 0 && single (driver->name))
    {
      const char *offset = given ? g_hash_table_lookup (given, "offset") : NULL;
      guint64 want = vb_driver_data_offset (old->attributes), asked = 0;
      if (old_meta && strcmp (driver->name, "file") == 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                       _ ("device '%s': its data starts at 1 MiB of the component (metadata=vblk); "
                          "driver file would show the superblock as data: use --driver window "
                          "(offset 1048576)"),
                       old->name);
          return NULL;
        }
      if (offset && strcmp (driver->name, "window") == 0)
        {
          g_autofree char *canon
              = vb_attr_canonicalize (vb_driver_attr_spec (driver, "offset"), offset, error);
          if (canon == NULL)
            return NULL;
          asked = g_ascii_strtoull (canon, NULL, 10);
          if (asked != want)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                           _ ("device '%s': its data starts at byte %" PRIu64
                              " of the component; a window at %" PRIu64 " would move it"),
                           old->name, want, asked);
              return NULL;
            }
        }
      if (given && g_hash_table_contains (given, "engine") && !vb_attr_get_bool (given, "engine"))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                       _ ("device '%s': a mirror runs on the engine, and what it becomes stays "
                          "there (attribute engine=false needs a stop and a start)"),
                       old->name);
          return NULL;
        }
      if (strcmp (driver->name, "window") == 0)
        g_hash_table_replace (base, g_strdup ("offset"),
                              g_strdup_printf ("%" G_GUINT64_FORMAT, want));
      /* it runs on the engine already; it stays there */
      g_hash_table_replace (base, g_strdup ("engine"), g_strdup ("true"));
    }
  return vb_driver_resolve_attributes (driver, base, given, error);
}

/* The driver asked for exists, and the device's shape is vblk's to change. */
static const VbDriver *
target_driver (const VbDeviceConfig *old, const char *to, GError **error)
{
  const VbDriver *driver = vb_driver_lookup (to);

  if (driver == NULL)
    {
      g_autofree char *known = vb_drivers_known_names ();
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("driver '%s' is not known (known: %s)"), to, known);
      return NULL;
    }
  if (g_strcmp0 (g_hash_table_lookup (old->attributes, "metadata"), "md1") == 0)
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
          _ ("device '%s' is an mdadm array (metadata=md1): vblk leaves its shape to mdadm "
             "(mdadm --grow) and never rewrites its superblocks"),
          old->name);
      return NULL;
    }
  return driver;
}

/* Each added source parses, is not a component yet, and is named once. */
static gboolean
check_added (const VbDeviceConfig *old, const VbReconfigRequest *request, guint *n_add,
             GError **error)
{
  guint n = 0;

  for (guint i = 0; request->add && request->add[i]; i++)
    {
      const char *src = request->add[i];
      VbSourceKind kind;
      if (!vb_source_parse (src, &kind, NULL, error))
        return FALSE;
      for (guint j = 0; j < old->components->len; j++)
        if (strcmp (((VbComponentConfig *) old->components->pdata[j])->source, src) == 0)
          {
            g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                         _ ("component '%s': already a component of '%s'"), src, old->name);
            return FALSE;
          }
      for (guint j = 0; j < i; j++)
        if (strcmp (request->add[j], src) == 0)
          {
            g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                         _ ("component '%s': added twice"), src);
            return FALSE;
          }
      if (in_list (request->remove, src))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("component '%s': both added and removed"), src);
          return FALSE;
        }
      n++;
    }
  *n_add = n;
  return TRUE;
}

/* Each removed source is a slot of the device (a spare goes with Remove),
 * named once. */
static gboolean
check_removed (const VbDeviceConfig *old, const VbReconfigRequest *request, guint *n_remove,
               GError **error)
{
  guint n = 0;

  for (guint i = 0; request->remove && request->remove[i]; i++)
    {
      gboolean found = FALSE;
      for (guint j = 0; j < old->components->len; j++)
        {
          const VbComponentConfig *c = old->components->pdata[j];
          if (strcmp (c->source, request->remove[i]) == 0)
            {
              if (g_strcmp0 (c->role, "spare") == 0)
                {
                  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                               _ ("component '%s' is a spare of '%s': remove it with Remove "
                                  "(vbmgr remove)"),
                               c->source, old->name);
                  return FALSE;
                }
              found = TRUE;
            }
        }
      if (!found)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("component '%s' is not a component of '%s'"), request->remove[i],
                       old->name);
          return FALSE;
        }
      for (guint j = 0; j < i; j++)
        if (strcmp (request->remove[j], request->remove[i]) == 0)
          {
            g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                         _ ("component '%s': removed twice"), request->remove[i]);
            return FALSE;
          }
      n++;
    }
  *n_remove = n;
  return TRUE;
}

/* The old components that stay: the slots, and the others (spares). */
static void
sort_kept (const VbDeviceConfig *old, const VbReconfigRequest *request, GPtrArray *slots,
           GPtrArray *others)
{
  for (guint i = 0; i < old->components->len; i++)
    {
      VbComponentConfig *c = old->components->pdata[i];
      if (in_list (request->remove, c->source))
        continue;
      g_ptr_array_add (vb_component_config_is_slot (c) ? slots : others, c);
    }
}

/* The request leaves a device, and changes its driver or components. */
static gboolean
check_changes_something (const VbDeviceConfig *old, const char *to, guint n_slots, guint n_add,
                         guint n_remove, GError **error)
{
  if (n_slots == 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("device '%s': removing every component leaves nothing"), old->name);
      return FALSE;
    }
  if (n_add == 0 && n_remove == 0 && strcmp (to, old->driver) == 0)
    {
      /* attributes alone are SetAttributes' */
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("device '%s': nothing to reconfigure (the same driver and components; "
                      "attributes change with SetAttributes)"),
                   old->name);
      return FALSE;
    }
  return TRUE;
}

/* A file or a window becoming another driver: its data stays where it is. */
static gboolean
check_data_stays (const VbDeviceConfig *old, const char *to, GError **error)
{
  if (single (old->driver) && strcmp (to, old->driver) != 0)
    {
      /* the new driver shows the whole component, writable */
      const char *why = NULL;
      if (vb_attr_get_bool (old->attributes, "read_only"))
        why = "it is read-only, and a mirror or concatenation is not";
      else if (strcmp (old->driver, "window") == 0
               && vb_attr_get_u64 (old->attributes, "size") != 0)
        why = "it is a window of part of its component; the new driver would take all of it";
      if (why)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                       _ ("device '%s': reconfiguring %s to %s: %s"), old->name, old->driver, to,
                       why);
          return FALSE;
        }
    }
  if (strcmp (old->driver, "window") == 0 && vb_attr_get_u64 (old->attributes, "offset") != 0
      && strcmp (to, "window") != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("device '%s': its data starts at byte %" PRIu64
                      " of its component; %s puts it at byte 0, so it would move"),
                   old->name, vb_attr_get_u64 (old->attributes, "offset"), to);
      return FALSE;
    }
  return TRUE;
}

/* A driver of one component keeps no others (spares) beside it. */
static gboolean
check_others_fit (const VbDeviceConfig *old, const VbDriver *driver, const char *to,
                  GPtrArray *others, GError **error)
{
  if (others->len > 0 && driver->max_components == 1)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("device '%s' still lists '%s' (%s); driver %s keeps one component: remove it "
                      "first (vbmgr remove)"),
                   old->name, ((VbComponentConfig *) others->pdata[0])->source,
                   ((VbComponentConfig *) others->pdata[0])->role, to);
      return FALSE;
    }
  return TRUE;
}

/* Slots first, renumbered; added legs are behind until rebuilt where
 * no superblock says so; then the others as they were. */
static void
set_components (VbDeviceConfig *d, const char *to, GPtrArray *slots, GPtrArray *others,
                const char *const *add, guint n_add)
{
  gboolean redundant_none = strcmp (to, "raid1") == 0 && vb_driver_data_offset (d->attributes) == 0;
  g_ptr_array_set_size (d->components, 0);
  for (guint i = 0; i < slots->len; i++)
    {
      VbComponentConfig *c = vb_component_config_copy (slots->pdata[i]);
      g_free (c->role);
      c->role = g_strdup_printf ("%u", i);
      c->behind = redundant_none && c->behind;
      g_ptr_array_add (d->components, c);
    }
  for (guint i = 0; i < n_add; i++)
    {
      g_autofree char *role = g_strdup_printf ("%u", slots->len + i);
      g_autofree char *uuid = vb_uuid_new ();
      VbComponentConfig *c = vb_component_config_new (add[i], role, uuid);
      c->behind = redundant_none;
      g_ptr_array_add (d->components, c);
    }
  for (guint i = 0; i < others->len; i++)
    g_ptr_array_add (d->components, vb_component_config_copy (others->pdata[i]));
}

/* The new driver takes this many slots. */
static gboolean
check_count (const VbDriver *driver, const char *to, guint n_slots, GError **error)
{
  if (n_slots > driver->max_components || n_slots < driver->min_components)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("driver %s takes %u to %u components, not %u"), to, driver->min_components,
                   driver->max_components, n_slots);
      return FALSE;
    }
  return TRUE;
}

VbDeviceConfig *
vb_reconfig_plan (const VbDeviceConfig *old, const VbReconfigRequest *request, GError **error)
{
  const char *to = request->driver && request->driver[0] ? request->driver : old->driver;
  const VbDriver *driver;
  g_autoptr (VbDeviceConfig) d = NULL;
  g_autoptr (GPtrArray) slots = g_ptr_array_new ();
  g_autoptr (GPtrArray) others = g_ptr_array_new ();
  guint n_add = 0, n_remove = 0;
  GHashTable *attributes;

  driver = target_driver (old, to, error);
  if (driver == NULL || !check_added (old, request, &n_add, error)
      || !check_removed (old, request, &n_remove, error))
    return NULL;
  sort_kept (old, request, slots, others);
  if (!check_changes_something (old, to, slots->len + n_add, n_add, n_remove, error)
      || !conversion_allowed (old, to, n_add, n_remove, slots->len + n_add, error)
      || !check_data_stays (old, to, error) || !check_others_fit (old, driver, to, others, error))
    return NULL;

  attributes = resolve_attributes (old, driver, request->attributes, error);
  if (attributes == NULL)
    return NULL;
  d = vb_device_config_copy (old);
  g_free (d->driver);
  d->driver = g_strdup (to);
  g_hash_table_unref (d->attributes);
  d->attributes = attributes;
  set_components (d, to, slots, others, request->add, n_add);
  if (!check_count (driver, to, slots->len + n_add, error))
    return NULL;
  return g_steal_pointer (&d);
}
