/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The list of drivers and the attribute rules every driver shares: names,
 * canonical values, defaults, component counts. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "driver.h"
#include "vb-error.h"
#include "vb-size.h"
#include "vb-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

extern const VbDriver vb_driver_file;
extern const VbDriver vb_driver_window;
extern const VbDriver vb_driver_linear;
extern const VbDriver vb_driver_raid0;
extern const VbDriver vb_driver_raid1;
extern const VbDriver vb_driver_raid10;
extern const VbDriver vb_driver_faulty;

static const VbDriver *const all_drivers[] = {
  &vb_driver_file,  &vb_driver_window, &vb_driver_linear, &vb_driver_raid0,
  &vb_driver_raid1, &vb_driver_raid10, &vb_driver_faulty, NULL,
};

const char *const vb_metadata_choices[] = { "vblk", "none", "md1", NULL };
/* no md1: vblk adopts only mdadm's raid1 and raid10 */
const char *const vb_metadata_single_copy_choices[] = { "vblk", "none", NULL };
const char *const vb_md_version_choices[] = { "1.0", "1.1", "1.2", NULL };
const char *const vb_bitmap_choices[] = { "internal", "none", NULL };

gboolean
vb_check_redundancy (GHashTable *attributes, GError **error)
{
  const char *metadata = g_hash_table_lookup (attributes, "metadata");
  const char *bitmap = g_hash_table_lookup (attributes, "bitmap");
  guint64 chunk;

  /* a driver without a bitmap (raid0, linear) has nothing more to check */
  if (metadata == NULL || bitmap == NULL)
    return TRUE;
  if (g_strcmp0 (bitmap, "internal") == 0 && strcmp (metadata, "vblk") != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("attribute 'bitmap': an internal bitmap lives in the metadata area, which "
                      "metadata=%s does not have (use bitmap=none)"),
                   metadata);
      return FALSE;
    }
  chunk = vb_attr_get_u64 (attributes, "bitmap_chunk");
  if (chunk < VB_BITMAP_CHUNK_MIN || (chunk & (chunk - 1)) != 0)
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
          _ ("attribute 'bitmap_chunk': %" PRIu64 " is not a power of two of at least 64K"), chunk);
      return FALSE;
    }
  return TRUE;
}

void
vb_layout_single (guint64 size, VbLayout *layout)
{
  *layout = (VbLayout){ 0 };
  layout->n_components = 1;
  layout->copies = 1;
  layout->size = size;
  layout->component_size = size;
  layout->component_sizes[0] = size;
}

void
vb_map_identity (const VbLayout *layout, guint64 offset, guint64 length, VbMapping *out)
{
  g_assert (length > 0 && offset < layout->size && length <= layout->size - offset);

  out->offset = offset;
  out->length = length;
  out->n_copies = 1;
  out->copies[0].component = 0;
  out->copies[0].offset = offset;
}

gboolean
vb_driver_has_metadata (GHashTable *attributes)
{
  const char *metadata = g_hash_table_lookup (attributes, "metadata");

  return g_strcmp0 (metadata, "vblk") == 0 || g_strcmp0 (metadata, "md1") == 0;
}

gboolean
vb_driver_takes_spares (const VbDriver *driver, GHashTable *attributes)
{
  return driver != NULL && driver->redundant && vb_driver_has_metadata (attributes);
}

guint64
vb_driver_data_offset (GHashTable *attributes)
{
  const char *metadata = g_hash_table_lookup (attributes, "metadata");

  if (g_strcmp0 (metadata, "vblk") == 0)
    return VB_DATA_OFFSET;
  if (g_strcmp0 (metadata, "md1") == 0 && g_hash_table_contains (attributes, "data_offset"))
    return vb_attr_get_u64 (attributes, "data_offset");
  return 0;
}

const VbDriver *const *
vb_drivers (void)
{
  return all_drivers;
}

const VbDriver *
vb_driver_lookup (const char *name)
{
  g_return_val_if_fail (name != NULL, NULL);

  for (guint i = 0; all_drivers[i]; i++)
    if (strcmp (all_drivers[i]->name, name) == 0)
      return all_drivers[i];
  return NULL;
}

char *
vb_drivers_known_names (void)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; all_drivers[i]; i++)
    g_string_append_printf (s, "%s%s", i ? ", " : "", all_drivers[i]->name);
  return g_string_free (s, FALSE);
}

const VbAttrSpec *
vb_driver_attr_spec (const VbDriver *driver, const char *name)
{
  for (const VbAttrSpec *a = driver->attributes; a && a->name; a++)
    if (strcmp (a->name, name) == 0)
      return a;
  return NULL;
}

char *
vb_driver_attr_names (const VbDriver *driver)
{
  GString *s = g_string_new (NULL);

  for (const VbAttrSpec *a = driver->attributes; a && a->name; a++)
    g_string_append_printf (s, "%s%s", s->len ? ", " : "", a->name);
  return g_string_free (s, FALSE);
}

char *
vb_attr_canonicalize (const VbAttrSpec *spec, const char *given, GError **error)
{
  g_autofree char *value = NULL;
  guint64 v;

  g_return_val_if_fail (spec != NULL && given != NULL, NULL);
  /* messages name the value; a huge one is shown cut */
  value = vb_shown (given);

  switch (spec->type)
    {
    case VB_ATTR_BOOL:
      if (g_ascii_strcasecmp (given, "true") == 0 || strcmp (given, "1") == 0
          || g_ascii_strcasecmp (given, "yes") == 0 || g_ascii_strcasecmp (given, "on") == 0)
        return g_strdup ("true");
      if (g_ascii_strcasecmp (given, "false") == 0 || strcmp (given, "0") == 0
          || g_ascii_strcasecmp (given, "no") == 0 || g_ascii_strcasecmp (given, "off") == 0)
        return g_strdup ("false");
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("attribute '%s': '%s' is not a boolean (true or false)"), spec->name, value);
      return NULL;

      case VB_ATTR_UINT: {
        char *end = NULL;
        if (!g_ascii_isdigit (*given))
          goto not_number;
        errno = 0;
        v = g_ascii_strtoull (given, &end, 10);
        if (errno != 0 || *end != '\0')
          goto not_number;
        if (spec->allowed)
          {
            g_autoptr (GString) list = g_string_new (NULL);
            for (const guint64 *a = spec->allowed; *a; a++)
              {
                if (*a == v)
                  return g_strdup_printf ("%" G_GUINT64_FORMAT, v);
                g_string_append_printf (list, "%s%" G_GUINT64_FORMAT, list->len ? ", " : "", *a);
              }
            g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                         _ ("attribute '%s': %s is not allowed (allowed: %s)"), spec->name, value,
                         list->str);
            return NULL;
          }
        return g_strdup_printf ("%" G_GUINT64_FORMAT, v);
      not_number:
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     _ ("attribute '%s': '%s' is not a whole number"), spec->name, value);
        return NULL;
      }

    case VB_ATTR_SIZE:
      if (!vb_size_parse (given, &v, error))
        {
          g_prefix_error (error, _ ("attribute '%s': "), spec->name);
          return NULL;
        }
      if (spec->multiple && v % spec->multiple != 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("attribute '%s': %" PRIu64 " is not a multiple of %" PRIu64), spec->name,
                       v, spec->multiple);
          return NULL;
        }
      return g_strdup_printf ("%" G_GUINT64_FORMAT, v);

      case VB_ATTR_CHOICE: {
        g_autofree char *list = NULL;
        for (guint i = 0; spec->choices[i]; i++)
          if (strcmp (spec->choices[i], given) == 0)
            return g_strdup (given);
        list = g_strjoinv (", ", (char **) spec->choices);
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     _ ("attribute '%s': '%s' is not allowed (allowed: %s)"), spec->name, value,
                     list);
        return NULL;
      }
    }
  g_assert_not_reached ();
}

/* md_version, data_offset and data_size describe an adopted mdadm array:
 * a device with any other metadata has none of them. Their defaults are
 * dropped silently (states saved before carried them); another value is
 * refused. */
static gboolean
drop_md1_attributes (const VbDriver *driver, GHashTable *out, GError **error)
{
  static const char *const md1_only[] = { "md_version", "data_offset", "data_size", NULL };

  if (g_strcmp0 (g_hash_table_lookup (out, "metadata"), "md1") == 0)
    return TRUE;
  for (guint i = 0; md1_only[i]; i++)
    {
      const VbAttrSpec *spec = vb_driver_attr_spec (driver, md1_only[i]);
      const char *v = g_hash_table_lookup (out, md1_only[i]);
      if (spec == NULL || v == NULL)
        continue;
      if (strcmp (v, spec->default_value) != 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("attribute '%s': only an adopted mdadm array has it (metadata=md1; this "
                          "device has metadata=%s)"),
                       md1_only[i], (const char *) g_hash_table_lookup (out, "metadata"));
          return FALSE;
        }
      g_hash_table_remove (out, md1_only[i]);
    }
  return TRUE;
}

GHashTable *
vb_driver_resolve_attributes (const VbDriver *driver, GHashTable *base, GHashTable *given,
                              GError **error)
{
  g_autoptr (GHashTable) out = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  GHashTableIter iter;
  gpointer key, value;

  if (base)
    {
      g_hash_table_iter_init (&iter, base);
      while (g_hash_table_iter_next (&iter, &key, &value))
        if (vb_driver_attr_spec (driver, key))
          g_hash_table_insert (out, g_strdup (key), g_strdup (value));
    }
  if (given)
    {
      /* sorted, so that the first error reported does not depend on hashing */
      g_autofree gpointer *keys = g_hash_table_get_keys_as_array (given, NULL);
      guint n = g_hash_table_size (given);
      qsort (keys, n, sizeof (gpointer), vb_compare_string_pointers);
      for (guint i = 0; i < n; i++)
        {
          const VbAttrSpec *spec = vb_driver_attr_spec (driver, keys[i]);
          char *canonical;
          if (spec == NULL)
            {
              g_autofree char *allowed = vb_driver_attr_names (driver);
              g_autofree char *name = vb_shown (keys[i]);
              /* a driver without attributes: say so rather than "(allowed: )" */
              if (*allowed == '\0')
                g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                             _ ("attribute '%s': driver '%s' has no attributes"), name,
                             driver->name);
              else
                g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                             _ ("attribute '%s': not an attribute of driver '%s' (allowed: %s)"),
                             name, driver->name, allowed);
              return NULL;
            }
          canonical = vb_attr_canonicalize (spec, g_hash_table_lookup (given, keys[i]), error);
          if (canonical == NULL)
            return NULL;
          g_hash_table_insert (out, g_strdup (keys[i]), canonical);
        }
    }
  for (const VbAttrSpec *a = driver->attributes; a && a->name; a++)
    if (!g_hash_table_contains (out, a->name))
      g_hash_table_insert (out, g_strdup (a->name), g_strdup (a->default_value));
  if (!drop_md1_attributes (driver, out, error))
    return NULL;
  return g_steal_pointer (&out);
}

GHashTable *
vb_driver_resolve_saved_attributes (const VbDriver *driver, GHashTable *saved, GError **error)
{
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  gpointer key, value;

  if (saved)
    {
      g_hash_table_iter_init (&iter, saved);
      while (g_hash_table_iter_next (&iter, &key, &value))
        g_hash_table_insert (given, key, value);
    }
  /* never the new device's default: that could move the data (a raid0
   * saved without superblocks has its data at byte 0, not at 1 MiB) */
  for (const VbAttrSpec *a = driver->attributes; a && a->name; a++)
    if (a->saved_absent && !g_hash_table_contains (given, a->name))
      g_hash_table_insert (given, (gpointer) a->name, (gpointer) a->saved_absent);
  return vb_driver_resolve_attributes (driver, NULL, given, error);
}

static const char *
kind_word (guint kinds)
{
  switch (kinds)
    {
    case VB_COMPONENT_KIND_FILE:
      return "a regular file";
    case VB_COMPONENT_KIND_BLOCK:
      return "a block device";
    default:
      return "a regular file, a block device or vblk:NAME";
    }
}

gboolean
vb_driver_validate (const VbDriver *driver, GHashTable *attributes,
                    const VbComponentInfo *components, guint n_components, GError **error)
{
  if (n_components < driver->min_components || n_components > driver->max_components)
    {
      if (driver->min_components == driver->max_components)
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     _ ("components: driver '%s' takes exactly %u, %u given"), driver->name,
                     driver->min_components, n_components);
      else
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     _ ("components: driver '%s' takes %u to %u, %u given"), driver->name,
                     driver->min_components, driver->max_components, n_components);
      return FALSE;
    }
  for (guint i = 0; i < n_components; i++)
    if ((components[i].kind & driver->component_kinds) == 0)
      {
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     _ ("component '%s': driver '%s' takes %s"), components[i].source, driver->name,
                     kind_word (driver->component_kinds));
        return FALSE;
      }
  return driver->validate == NULL || driver->validate (attributes, components, n_components, error);
}

gboolean
vb_attr_get_bool (GHashTable *attributes, const char *name)
{
  const char *v = g_hash_table_lookup (attributes, name);

  g_return_val_if_fail (v != NULL, FALSE);
  return strcmp (v, "true") == 0;
}

guint64
vb_attr_get_u64 (GHashTable *attributes, const char *name)
{
  const char *v = g_hash_table_lookup (attributes, name);

  g_return_val_if_fail (v != NULL, 0);
  return g_ascii_strtoull (v, NULL, 10);
}

guint64
vb_components_smallest (const VbComponentInfo *components, guint n_components, guint *which)
{
  guint64 smallest = G_MAXUINT64;

  *which = 0;
  for (guint i = 0; i < n_components; i++)
    if (components[i].size < smallest)
      {
        smallest = components[i].size;
        *which = i;
      }
  return smallest;
}

gboolean
vb_check_chunks (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                 GError **error)
{
  guint64 chunk = vb_attr_get_u64 (attributes, "chunk_size");
  guint which;
  guint64 smallest = vb_components_smallest (components, n_components, &which);

  if (chunk < VB_CHUNK_MIN || chunk > VB_CHUNK_MAX || (chunk & (chunk - 1)) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("attribute 'chunk_size': %" PRIu64
                      " is not a power of two from 4K (4096) to 64M (67108864)"),
                   chunk);
      return FALSE;
    }
  if (smallest < chunk)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("component '%s': %" PRIu64 " bytes, smaller than one chunk (%" PRIu64 ")"),
                   components[which].source, smallest, chunk);
      return FALSE;
    }
  return TRUE;
}
