/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Driver "raid10": md's "near" layout. The components' chunks form rows of
 * n slots; device chunk c fills the `copies` consecutive slots from
 * c * copies on, and slot s is chunk s / n of component s % n. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "driver.h"
#include "vb-error.h"

/* a VbMapping holds at most VB_MAX_COPIES copies, and the list stops there */
G_STATIC_ASSERT (VB_MAX_COPIES == 8);
static const guint64 allowed_copies[] = { 2, 3, 4, 5, 6, 7, 8, 0 };

static const VbAttrSpec raid10_attributes[] = {
  VB_REDUNDANCY_ATTRIBUTES,
  /* neither is online: changing one moves every byte (a reshape) */
  { "copies", VB_ATTR_UINT, "2", FALSE, 0, allowed_copies,
    "copies of every chunk, each on a different component" },
  { "chunk_size", VB_ATTR_SIZE, "524288", FALSE, 0, NULL,
    "bytes per chunk: a power of two from 4K to 64M" },
  { NULL },
};

/* Device chunks: the rows' slots taken `copies` at a time; a last group too
 * short to hold every copy stays unused. */
static guint64
raid10_chunks (guint64 component_size, guint64 chunk, guint n_components, guint copies)
{
  return component_size / chunk * n_components / copies;
}

static gboolean
raid10_validate (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                 GError **error)
{
  guint64 chunk = vb_attr_get_u64 (attributes, "chunk_size");
  guint64 copies = vb_attr_get_u64 (attributes, "copies");
  guint which = 0;
  guint64 smallest = vb_components_smallest (components, n_components, &which);

  if (!vb_check_redundancy (attributes, error))
    return FALSE;
  if (copies > n_components)
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
          _ ("attribute 'copies': %" PRIu64 " copies need at least as many components, %u given"),
          copies, n_components);
      return FALSE;
    }
  if (!vb_check_chunks (attributes, components, n_components, error))
    return FALSE;
  /* offsets into the device are off_t on every path that serves it */
  if (raid10_chunks (smallest, chunk, n_components, copies) > (guint64) G_MAXINT64 / chunk)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("components: the device would be larger than %" PRId64 " bytes"), G_MAXINT64);
      return FALSE;
    }
  return TRUE;
}

static guint64
raid10_component_size (GHashTable *attributes, const VbComponentInfo *components,
                       guint n_components)
{
  guint64 chunk = vb_attr_get_u64 (attributes, "chunk_size");
  guint which = 0;

  return vb_components_smallest (components, n_components, &which) / chunk * chunk;
}

static guint64
raid10_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  guint64 chunk = vb_attr_get_u64 (attributes, "chunk_size");
  guint64 copies = vb_attr_get_u64 (attributes, "copies");

  return raid10_chunks (raid10_component_size (attributes, components, n_components), chunk,
                        n_components, copies)
         * chunk;
}

static void
raid10_layout (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
               VbLayout *layout)
{
  g_assert (n_components >= 1 && n_components <= VB_MAX_COMPONENTS);

  *layout = (VbLayout){ 0 };
  layout->n_components = n_components;
  layout->copies = (guint) vb_attr_get_u64 (attributes, "copies");
  layout->chunk_size = vb_attr_get_u64 (attributes, "chunk_size");
  /* map() writes one VbMapping copy per copy, on distinct components */
  g_assert (layout->copies >= 1 && layout->copies <= MIN (n_components, VB_MAX_COPIES));
  layout->component_size = raid10_component_size (attributes, components, n_components);
  for (guint i = 0; i < n_components; i++)
    layout->component_sizes[i] = layout->component_size;
  layout->size = raid10_size (attributes, components, n_components);
}

static void
raid10_map (const VbLayout *layout, guint64 offset, guint64 length, VbMapping *out)
{
  guint64 chunk = offset / layout->chunk_size;
  guint64 within = offset % layout->chunk_size;
  guint64 slot = chunk * layout->copies;

  g_assert (length > 0 && offset < layout->size && length <= layout->size - offset);

  out->offset = offset;
  out->length = MIN (length, layout->chunk_size - within);
  out->n_copies = layout->copies;
  /* consecutive slots: the copies land on distinct components because
   * copies <= n, wrapping into the next row after the last component */
  for (guint i = 0; i < layout->copies; i++, slot++)
    {
      out->copies[i].component = slot % layout->n_components;
      out->copies[i].offset = slot / layout->n_components * layout->chunk_size + within;
    }
}

const VbDriver vb_driver_raid10 = {
  .name = "raid10",
  .description = "striped mirrors, md's near layout",
  .attributes = raid10_attributes,
  .min_components = 2,
  .max_components = VB_MAX_COMPONENTS,
  .component_kinds = VB_COMPONENT_KIND_FILE | VB_COMPONENT_KIND_BLOCK | VB_COMPONENT_KIND_DEVICE,
  .redundant = TRUE,
  .validate = raid10_validate,
  .size = raid10_size,
  .layout = raid10_layout,
  .map = raid10_map,
};
