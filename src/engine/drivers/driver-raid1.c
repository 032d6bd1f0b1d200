/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Driver "raid1": an N-way mirror, every byte on every component at the same
 * offset. The engine reads one healthy copy and writes all of them; this
 * file only says where the copies are. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "driver.h"
#include "vb-error.h"

/* Components count in whole 4 KiB blocks, so the device offers 4K-aligned
 * I/O whatever their sizes. */
#define RAID1_BLOCK 4096
/* Longer requests are cut here, so that the engine can spread one large
 * read over several copies instead of pinning it to one. */
#define RAID1_PIECE_MAX (1ULL << 20)

static const VbAttrSpec raid1_attributes[] = {
  VB_REDUNDANCY_ATTRIBUTES,
  { NULL },
};

static gboolean
raid1_validate (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                GError **error)
{
  guint which = 0;
  guint64 smallest = vb_components_smallest (components, n_components, &which);

  if (!vb_check_redundancy (attributes, error))
    return FALSE;
  if (smallest < RAID1_BLOCK)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("component '%s': %" PRIu64 " bytes, smaller than one block (%d)"),
                   components[which].source, smallest, RAID1_BLOCK);
      return FALSE;
    }
  return TRUE;
}

static guint64
raid1_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  guint which = 0;

  return vb_components_smallest (components, n_components, &which) / RAID1_BLOCK * RAID1_BLOCK;
}

static void
raid1_layout (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
              VbLayout *layout)
{
  g_assert (n_components >= 1 && n_components <= VB_MAX_COPIES);

  *layout = (VbLayout){ 0 };
  layout->n_components = n_components;
  layout->copies = n_components;
  layout->component_size = raid1_size (attributes, components, n_components);
  for (guint i = 0; i < n_components; i++)
    layout->component_sizes[i] = layout->component_size;
  layout->size = layout->component_size;
}

static void
raid1_map (const VbLayout *layout, guint64 offset, guint64 length, VbMapping *out)
{
  g_assert (length > 0 && offset < layout->size && length <= layout->size - offset);

  out->offset = offset;
  out->length = MIN (length, RAID1_PIECE_MAX);
  out->n_copies = layout->n_components;
  for (guint i = 0; i < layout->n_components; i++)
    {
      out->copies[i].component = i;
      out->copies[i].offset = offset;
    }
}

const VbDriver vb_driver_raid1 = {
  .name = "raid1",
  .description = "a mirror: every component holds every byte",
  .attributes = raid1_attributes,
  .min_components = 1,
  .max_components = VB_MAX_COPIES,
  .component_kinds = VB_COMPONENT_KIND_FILE | VB_COMPONENT_KIND_BLOCK | VB_COMPONENT_KIND_DEVICE,
  .redundant = TRUE,
  .validate = raid1_validate,
  .size = raid1_size,
  .layout = raid1_layout,
  .map = raid1_map,
};
