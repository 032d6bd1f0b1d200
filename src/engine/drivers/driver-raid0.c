/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Driver "raid0": striping, md's raid0 layout over components of equal
 * size: chunk k of the device is chunk k / n of component k % n. Components
 * count as large as the smallest, in whole chunks. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "driver.h"
#include "vb-error.h"

static const VbAttrSpec raid0_attributes[] = {
  /* not online: changing it moves every byte (a reshape, not a setting) */
  { "chunk_size", VB_ATTR_SIZE, "524288", FALSE, 0, NULL,
    "bytes per chunk: a power of two from 4K to 64M" },
  VB_METADATA_ATTRIBUTE,
  { NULL },
};

static gboolean
raid0_validate (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                GError **error)
{
  guint64 chunk = vb_attr_get_u64 (attributes, "chunk_size");
  guint which = 0;
  guint64 smallest = vb_components_smallest (components, n_components, &which);

  if (!vb_check_chunks (attributes, components, n_components, error))
    return FALSE;
  /* offsets into the device are off_t on every path that serves it */
  if (smallest / chunk * chunk > (guint64) G_MAXINT64 / n_components)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("components: the device would be larger than %" PRId64 " bytes"), G_MAXINT64);
      return FALSE;
    }
  return TRUE;
}

static guint64
raid0_component_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  guint64 chunk = vb_attr_get_u64 (attributes, "chunk_size");
  guint which = 0;

  return vb_components_smallest (components, n_components, &which) / chunk * chunk;
}

static guint64
raid0_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  return raid0_component_size (attributes, components, n_components) * n_components;
}

static void
raid0_layout (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
              VbLayout *layout)
{
  g_assert (n_components >= 1 && n_components <= VB_MAX_COMPONENTS);

  *layout = (VbLayout){ 0 };
  layout->n_components = n_components;
  layout->copies = 1;
  layout->chunk_size = vb_attr_get_u64 (attributes, "chunk_size");
  layout->component_size = raid0_component_size (attributes, components, n_components);
  for (guint i = 0; i < n_components; i++)
    layout->component_sizes[i] = layout->component_size;
  layout->size = layout->component_size * n_components;
}

static void
raid0_map (const VbLayout *layout, guint64 offset, guint64 length, VbMapping *out)
{
  guint64 chunk = offset / layout->chunk_size;
  guint64 within = offset % layout->chunk_size;

  g_assert (length > 0 && offset < layout->size && length <= layout->size - offset);

  out->offset = offset;
  out->length = MIN (length, layout->chunk_size - within);
  out->n_copies = 1;
  out->copies[0].component = chunk % layout->n_components;
  out->copies[0].offset = chunk / layout->n_components * layout->chunk_size + within;
}

const VbDriver vb_driver_raid0 = {
  .name = "raid0",
  .description = "striping over components, no redundancy",
  .attributes = raid0_attributes,
  .min_components = 2,
  .max_components = VB_MAX_COMPONENTS,
  .component_kinds = VB_COMPONENT_KIND_FILE | VB_COMPONENT_KIND_BLOCK | VB_COMPONENT_KIND_DEVICE,
  .validate = raid0_validate,
  .size = raid0_size,
  .layout = raid0_layout,
  .map = raid0_map,
};
